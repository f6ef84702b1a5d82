/* A preloaded library that does nothing, for bench_overhead.py's bisection:
 * built twice, libstub_empty.so (needs libc only) and libstub_deps.so (needs
 * the libraries libmemsnap.so needed before its dependencies left the global
 * scope: libunwind, elfutils, zstd, cJSON), so that "being preloaded at all"
 * and "these libraries in the global scope" are timed apart from anything the
 * recorder does.  Benchmark code only. */
#ifdef STUB_DEPS
#include <cjson/cJSON.h>
#include <elfutils/libdwfl.h>
#include <libunwind.h>
#include <zstd.h>
#endif

__attribute__((visibility("default"))) int memsnap_stub_preload(void)
{
#ifdef STUB_DEPS
    /* one reference to each, so the link keeps them needed */
    void *frames[1];
    return (int)ZSTD_versionNumber() + (cJSON_Version() != 0) + (dwfl_version(0) != 0) +
           unw_backtrace(frames, 1);
#else
    return 0;
#endif
}

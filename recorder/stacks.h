/* The recorder's native-stack support, kept out of the program's global
 * symbol scope.
 *
 * libmemsnap.so is preloaded into programs it must not change.  Every
 * library it needs at load time joins the process's global scope in front
 * of the program's own, so its exported symbols interpose on the program:
 * libunwind.so.8 exports _Unwind_RaiseException & co (every C++ throw in
 * the program then unwinds through libunwind instead of libgcc) and a weak
 * backtrace() (glibc's is replaced), and elfutils, zlib, liblzma, libbz2
 * and zstd would stand in for the program's copies of the same libraries.
 * So libmemsnap.so needs libc alone.  Unwinding (libunwind) and
 * symbolization (elfutils) live in libmemsnap_stacks.so beside it, loaded
 * with dlopen(RTLD_LOCAL) when recording starts (not in a constructor): its
 * dependencies are then visible to it alone.  zstd is linked in statically
 * with its symbols hidden (recorder/CMakeLists.txt).
 *
 * The library exports one function, memsnap_stacks_table(), returning the
 * table below; the recorder checks its size and version field.  When the
 * library cannot be loaded the recorder records without native frames and
 * without symbols, and says so once on stderr.
 */
#ifndef MEMSNAP_RECORDER_STACKS_H
#define MEMSNAP_RECORDER_STACKS_H

#include <stdint.h>

#include "symbolize/symbolize.h"

#define MEMSNAP_STACKS_LIB "libmemsnap_stacks.so"
#define MEMSNAP_STACKS_API_VERSION 1u

typedef struct memsnap_stacks_api {
    uint32_t size;      /* sizeof(memsnap_stacks_api) of the library */
    uint32_t version;   /* MEMSNAP_STACKS_API_VERSION */
    /* libunwind's unw_backtrace: the caller's return addresses */
    int (*backtrace)(void **frames, int max);
    /* per-thread unwind caches (unw_set_caching_policy), once at start */
    void (*per_thread_caches)(void);
    /* symbolize.h's API, for the "sym" lines written at exit and dumps */
    msnap_symbolizer *(*sym_new)(void);
    int (*sym_add_self)(msnap_symbolizer *s);
    int (*sym_resolve_frame)(msnap_symbolizer *s, uint64_t ip, int is_return_address,
                             msnap_symbol *out);
    void (*sym_free)(msnap_symbolizer *s);
} memsnap_stacks_api;

typedef const memsnap_stacks_api *(*memsnap_stacks_api_fn)(void);

/* In libmemsnap.so (stacks.c): the loaded table, or NULL before
 * stacks_load() or when the library could not be loaded. */
extern const memsnap_stacks_api *g_stacks_api;

/* Loads libmemsnap_stacks.so from the folder of libmemsnap.so (once; later
 * calls return the first answer).  0, or -1 after one line on stderr
 * (unless quiet) saying native frames and symbols are off. */
int stacks_load(int quiet);

/* unw_backtrace through the table; 0 frames when it is not loaded. */
static inline int stacks_backtrace(void **frames, int max)
{
    return g_stacks_api ? g_stacks_api->backtrace(frames, max) : 0;
}

#endif

/* What one dladdr() costs on a large shared library (issue 28): glibc finds
 * the symbol by a linear search through the object's dynamic symbols, so a
 * call costs in proportion to how many the library exports.  The recorder
 * once called it for every native frame of PyTorch's workspace-sized
 * blocks, on libtorch_cuda.so; the lockstep of 2026-12-06 caught the
 * training loop's first ten steps at 6x their time (docs/benchmarks.md).
 *
 *   bench_dladdr LIB SYMBOL [CALLS]    e.g. bench_dladdr \
 *       /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 LLVMAppendModuleInlineAsm
 *
 * Prints the microseconds a call, with the library's symbol count beside
 * (nm -D --defined-only LIB | wc -l). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_dladdr LIB SYMBOL [CALLS]\n");
        return 2;
    }
    int calls = argc > 3 ? atoi(argv[3]) : 200;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *f = h ? dlsym(h, argv[2]) : NULL;
    if (!f || calls <= 0) {
        fprintf(stderr, "bench_dladdr: %s\n", h ? "no such symbol (or CALLS <= 0)" : dlerror());
        return 2;
    }
    Dl_info info;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int k = 0; k < calls; k++)
        dladdr((char *)f + 16, &info);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%s: %.1f us a dladdr() call\n", info.dli_sname ? info.dli_sname : "?",
           ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / calls / 1e3);
    return 0;
}

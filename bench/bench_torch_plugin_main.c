/* Runs bench_torch_plugin.cpp's loop (dlopened, as the recorder opens the
 * plugin):  bench_torch_plugin LIB [BLOCKS [POLLUTE_KB [each]]]
 * Prints ns per block with the sizes from PyTorch's gauges and without;
 * with POLLUTE_KB, that many KiB are written between two blocks (caches
 * as a step leaves them) and the block's five calls alone are timed;
 * with "each", written before each of the five calls too. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_torch_plugin LIB [BLOCKS [POLLUTE_KB [each]]]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    long kb = argc > 3 ? atol(argv[3]) : 0;
    int each = argc > 4 && strcmp(argv[4], "each") == 0;
    if (n <= 0 || kb < 0) {
        fprintf(stderr, "bench_torch_plugin: BLOCKS must be > 0 and POLLUTE_KB >= 0\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    double (*run)(int, long, long, int) =
        h ? (double (*)(int, long, long, int))dlsym(h, "bench_plugin_blocks_cold") : NULL;
    if (!run) {
        fprintf(stderr, "bench_torch_plugin: %s\n", dlerror());
        return 1;
    }
    for (int round = 0; round < 2; round++) {
        double without = run(0, n, kb, each), with = run(1, n, kb, each);
        printf("per block (alloc, 2 gauges, free_requested, free_completed%s): requested sizes "
               "%.1f ns, PyTorch's sizes %.1f ns (%+.1f ns)\n", !kb ? "" : each ? ", caches cold before each call" : ", caches cold",
               without, with, with - without);
    }
    return 0;
}

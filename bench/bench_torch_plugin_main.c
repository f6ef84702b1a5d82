/* Runs bench_torch_plugin.cpp's loop (dlopened, as the recorder opens the
 * plugin):  bench_torch_plugin LIB [BLOCKS]
 * Prints ns per block with the sizes from PyTorch's gauges and without. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_torch_plugin LIB [BLOCKS]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    double (*run)(int, long) = h ? (double (*)(int, long))dlsym(h, "bench_plugin_blocks") : NULL;
    if (!run) {
        fprintf(stderr, "bench_torch_plugin: %s\n", dlerror());
        return 1;
    }
    for (int round = 0; round < 2; round++) {
        double without = run(0, n), with = run(1, n);
        printf("per block (alloc, 2 gauges, free_requested, free_completed): requested sizes %.1f ns, "
               "PyTorch's sizes %.1f ns (%+.1f ns)\n", without, with, with - without);
    }
    return 0;
}

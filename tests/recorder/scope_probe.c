/* What the recorder puts in the program's global symbol scope (case
 * no-interpose): after one device allocation (the recorder has started and
 * loaded its stack library), looks up symbols that the recorder's own
 * dependencies export (libunwind's _Unwind_* and weak backtrace, elfutils,
 * zstd, cJSON, zlib, liblzma, libbz2) with dlsym(RTLD_DEFAULT) and prints,
 * for each one found, the file that defines it:  "NAME FILE".  A program
 * that links none of those libraries itself must find none of them, or
 * glibc's own backtrace. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) {
        fprintf(stderr, "scope_probe: no device\n");
        return 1;
    }
    static const char *const names[] = {
        "backtrace", "_Unwind_RaiseException", "_Unwind_Backtrace", "_Unwind_Resume",
        "unw_backtrace", "_ULx86_64_init_local", "dwfl_begin", "elf_begin",
        "ZSTD_versionNumber", "ZSTD_compressStream2", "cJSON_Parse", "zlibVersion",
        "lzma_version_number", "BZ2_bzlibVersion",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *s = dlsym(RTLD_DEFAULT, names[i]);
        Dl_info di;
        if (s && dladdr(s, &di) && di.dli_fname)
            printf("%s %s\n", names[i], di.dli_fname);
    }
    cuMemFree(p);
    return 0;
}

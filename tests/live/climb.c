/* climb: a program whose device memory climbs at a steady pace, for the
 * live tests (memsnap top, memsnap run --metrics).  Driver API only, so it
 * runs on the simulated device.
 *
 *   climb STEP_MIB STEPS STEP_MS HOLD_MS [blocks] [oom] [two]
 *
 * Each step keeps one more STEP_MIB buffer (grow_cache: the climbing site)
 * and allocates and frees a STEP_MIB/2 scratch buffer (scratch), then
 * sleeps STEP_MS.  After the last step it holds its peak for HOLD_MS, frees
 * everything and exits 0.  With "blocks" every buffer is also reported as
 * an allocator block of its own segment's first half through the
 * recorder's trace hook (memsnap_trace_block, found with dlsym), so the
 * allocated layer, free inside reserved and the largest free block are
 * known.  With "oom" one request of the whole device memory fails after
 * the first step.  With "two" (memsnap run --sim-devices 2) each step also
 * keeps a STEP_MIB/4 buffer on device 1.  Prints "climb: step N" on stdout
 * as it goes.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "cudrv.h"

#define MiB (1ull << 20)

typedef void (*trace_fn)(int, int, uint64_t, uint64_t, uint64_t);
static trace_fn trace;

static void check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    fprintf(stderr, "climb: %s failed (%d)\n", what, (int)r);
    exit(1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A buffer, and its first half as an allocator block when blocks are on. */
__attribute__((noinline)) static CUdeviceptr take(size_t bytes, const char *what)
{
    CUdeviceptr p;
    check(cuMemAlloc(&p, bytes), what);
    if (trace)
        trace(1, 0, p, bytes / 2, 0);
    return p;
}

__attribute__((noinline)) static void give(CUdeviceptr p, size_t bytes)
{
    if (trace)
        trace(2, 0, p, bytes / 2, 0);
    check(cuMemFree(p), "cuMemFree");
}

__attribute__((noinline)) static CUdeviceptr grow_cache(size_t bytes)
{
    return take(bytes, "cuMemAlloc (cache)");
}

__attribute__((noinline)) static void scratch(size_t bytes)
{
    give(take(bytes, "cuMemAlloc (scratch)"), bytes);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: climb STEP_MIB STEPS STEP_MS HOLD_MS [blocks] [oom]\n");
        return 2;
    }
    size_t step = strtoull(argv[1], NULL, 10) * MiB;
    int steps = atoi(argv[2]);
    long step_ms = atol(argv[3]), hold_ms = atol(argv[4]);
    int blocks = 0, oom = 0, two = 0;
    for (int i = 5; i < argc; i++) {
        blocks |= !strcmp(argv[i], "blocks");
        oom |= !strcmp(argv[i], "oom");
        two |= !strcmp(argv[i], "two");
    }
    if (blocks)
        trace = (trace_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_block");
    char why[256];
    if (cudrv_load(why, sizeof why) != 0) {
        fprintf(stderr, "climb: %s\n", why);
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    size_t total = 0;
    check(cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    CUcontext ctx1 = NULL;
    CUdevice dev1;
    if (two) {
        check(cuDeviceGet(&dev1, 1), "cuDeviceGet (1)");
        check(cuDevicePrimaryCtxRetain(&ctx1, dev1), "cuDevicePrimaryCtxRetain (1)");
    }
    CUdeviceptr *kept = calloc((size_t)steps + 1, sizeof *kept);
    CUdeviceptr *kept1 = calloc((size_t)steps + 1, sizeof *kept1);
    for (int i = 0; i < steps; i++) {
        if (two) {
            check(cuCtxSetCurrent(ctx1), "cuCtxSetCurrent (1)");
            check(cuMemAlloc(&kept1[i], step / 4), "cuMemAlloc (device 1)");
            check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
        }
        kept[i] = grow_cache(step);
        scratch(step / 2);
        if (oom && i == 0) {
            CUdeviceptr p;
            if (cuMemAlloc(&p, total) == CUDA_SUCCESS)
                cuMemFree(p);
        }
        printf("climb: step %d\n", i + 1);
        fflush(stdout);
        sleep_ms(step_ms);
    }
    sleep_ms(hold_ms);
    for (int i = 0; i < steps; i++)
        give(kept[i], step);
    if (two) {
        check(cuCtxSetCurrent(ctx1), "cuCtxSetCurrent (1)");
        for (int i = 0; i < steps; i++)
            check(cuMemFree(kept1[i]), "cuMemFree (device 1)");
    }
    free(kept);
    free(kept1);
    return 0;
}

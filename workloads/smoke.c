/* memsnap-smoke: a small CUDA program with the memory shape of a training
 * loop, for the README's demo and for smoke tests.  It uses the CUDA driver
 * API only, so the same binary runs on a GPU and on the simulated device.
 *
 *   weights      a flat floor: 12 buffers of 48 MiB, allocated once
 *   each step    activations grow layer by layer and are freed at the end of
 *                the step (the sawtooth), a stream-ordered workspace, and an
 *                expandable pool (one VA reservation, 2 MiB pages mapped on
 *                demand with cuMemCreate/cuMemMap, unmapped at the end)
 *   a leak       every 4th step a 6 MiB "cache entry" is kept and never freed
 *                (remember_for_later): the floor climbs
 * NVTX ranges mark "step N" phases.  Memory is touched with cuMemsetD8.
 *
 *   memsnap-smoke [STEPS]   (default 24)
 *
 * The driver is opened with dlopen after the arguments are checked
 * (cudrv.h), so --help works without one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include "cudrv.h"

#define MiB (1ull << 20)

static void check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *s = NULL;
    cuGetErrorString(r, &s);
    fprintf(stderr, "memsnap-smoke: %s failed: %s\n", what, s ? s : "unknown error");
    exit(1);
}

static CUdeviceptr leaked[64];
static int nleaked;

/* The leak: a cache that only ever grows. */
__attribute__((noinline)) static void remember_for_later(size_t bytes)
{
    CUdeviceptr p;
    check(cuMemAlloc(&p, bytes), "cuMemAlloc (cache)");
    check(cuMemsetD8(p, 0, bytes), "cuMemsetD8");
    if (nleaked < 64)
        leaked[nleaked++] = p;
}

__attribute__((noinline)) static void load_weights(CUdeviceptr *w, int n, size_t bytes)
{
    for (int i = 0; i < n; i++) {
        check(cuMemAlloc(&w[i], bytes), "cuMemAlloc (weights)");
        check(cuMemsetD8(w[i], 1, bytes), "cuMemsetD8");
    }
}

__attribute__((noinline)) static void forward_backward(int step, CUstream s)
{
    CUdeviceptr act[16];
    int layers = 12;
    for (int l = 0; l < layers; l++) {
        size_t bytes = (8 + (size_t)((l * 7 + step * 3) % 9)) * MiB;
        check(cuMemAlloc(&act[l], bytes), "cuMemAlloc (activations)");
        check(cuMemsetD8(act[l], 0, bytes), "cuMemsetD8");
    }
    CUdeviceptr ws;
    check(cuMemAllocAsync(&ws, 32 * MiB, s), "cuMemAllocAsync (workspace)");
    check(cuMemFreeAsync(ws, s), "cuMemFreeAsync");
    for (int l = layers - 1; l >= 0; l--)
        check(cuMemFree(act[l]), "cuMemFree (activations)");
}

/* Expandable pool: map as many 2 MiB pages as this step needs, then unmap. */
__attribute__((noinline)) static void optimizer_step(CUdeviceptr va, int pages, int dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 2 * MiB;
    CUmemGenericAllocationHandle h[64];
    for (int i = 0; i < pages; i++) {
        check(cuMemCreate(&h[i], gran, &prop, 0), "cuMemCreate");
        check(cuMemMap(va + i * gran, gran, 0, h[i], 0), "cuMemMap");
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(cuMemSetAccess(va, pages * gran, &acc, 1), "cuMemSetAccess");
    check(cuMemsetD8(va, 0, pages * gran), "cuMemsetD8");
    /* cuMemsetD8 may still be running and cuMemUnmap does not wait for it
     * (an illegal address on the H200; the simulated device cannot tell). */
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuMemUnmap(va, pages * gran), "cuMemUnmap");
    for (int i = 0; i < pages; i++)
        check(cuMemRelease(h[i]), "cuMemRelease");
}

int main(int argc, char **argv)
{
    static const char usage_text[] =
        "usage: memsnap-smoke [STEPS]   (1..100000, default 24)\n"
        "\n"
        "A driver-API program with the memory shape of a training loop: a floor of\n"
        "weights, a per-step sawtooth of activations, a stream-ordered workspace, an\n"
        "expandable pool and a slow leak.  Needs a CUDA driver (libcuda.so.1; the\n"
        "simulated one with memsnap run --sim-device).  Exit status: 0 finished,\n"
        "1 a driver call failed, 2 usage or no CUDA driver.\n";
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    int steps = argc > 1 ? atoi(argv[1]) : 24;
    if (steps <= 0 || steps > 100000) {
        fprintf(stderr, "usage: memsnap-smoke [STEPS]   (1..100000, default 24)\n");
        return 2;
    }
    char why[300];
    if (cudrv_load(why, sizeof why) != 0) {
        fprintf(stderr, "memsnap-smoke: %s\n", why);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    char name[128];
    check(cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
    CUstream s;
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    nvtxRangePushA("load weights");
    CUdeviceptr w[12];
    load_weights(w, 12, 48 * MiB);
    nvtxRangePop();

    CUdeviceptr va;
    check(cuMemAddressReserve(&va, 128 * MiB, 0, 0, 0), "cuMemAddressReserve");
    for (int step = 0; step < steps; step++) {
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        nvtxRangePushA(label);
        forward_backward(step, s);
        optimizer_step(va, 4 + step % 5, (int)dev);
        if (step % 4 == 3)
            remember_for_later(6 * MiB);
        check(cuStreamSynchronize(s), "cuStreamSynchronize");
        nvtxRangePop();
    }
    check(cuMemAddressFree(va, 128 * MiB), "cuMemAddressFree");
    for (int i = 0; i < 12; i++)
        check(cuMemFree(w[i]), "cuMemFree (weights)");
    check(cuStreamDestroy(s), "cuStreamDestroy");
    printf("memsnap-smoke: %d steps on %s; %d cache entries (%d MiB) still held at exit\n",
           steps, name, nleaked, nleaked * 6);
    return 0;
}

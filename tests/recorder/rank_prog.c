/* rank_prog: one rank of a training job on the simulated device's several
 * devices, as torchrun starts each (RANK, LOCAL_RANK, WORLD_SIZE), for the
 * recorder's multi-rank case (cases.sh ranks-sim).
 *
 *   rank_prog FAKE_NCCL [OOM_RANK]
 *
 * On device LOCAL_RANK: load_weights 256 MiB (cuMemAlloc_v2); the
 * communicator's buffers, 32 MiB through FAKE_NCCL (libnccl.so.2,
 * fake_nccl.c: the VMM API); then three NVTX ranges "step N" each with
 * forward's activations, 64 MiB + 64 MiB x RANK, freed at the step's end.
 * Rank OOM_RANK asks in step 3 for the device's whole capacity: refused
 * (CUDA_ERROR_OUT_OF_MEMORY), it prints "rank R: out of memory" and exits
 * 3.  Otherwise it prints "rank R: done" and exits 0.  Every figure it
 * prints is one the recording must hold: "expect rank R device D".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#define MiB (1ull << 20)

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

__attribute__((noinline)) static CUdeviceptr load_weights(void)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, 256 * MiB) != CUDA_SUCCESS)
        return 0;
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static CUresult forward(CUdeviceptr *p, size_t bytes)
{
    CUresult r = cuMemAlloc_v2(p, bytes);
    __asm__ volatile("" ::: "memory");
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: rank_prog FAKE_NCCL [OOM_RANK]\n");
        return 2;
    }
    int rank = env_int("RANK", -1), local = env_int("LOCAL_RANK", 0);
    int oom_rank = argc > 2 ? atoi(argv[2]) : -1;
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, local) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        fprintf(stderr, "rank_prog: no (simulated) device %d\n", local);
        return 1;
    }
    void *nccl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CUdeviceptr (*comm_init)(size_t) =
        nccl ? (CUdeviceptr (*)(size_t))dlsym(nccl, "fake_nccl_comm_init") : NULL;
    if (!comm_init) {
        fprintf(stderr, "rank_prog: %s\n", dlerror());
        return 1;
    }
    printf("expect rank %d device %d\n", rank, local);
    if (!load_weights() || !comm_init(32 * MiB)) {
        fprintf(stderr, "rank_prog: allocation failed\n");
        return 1;
    }
    size_t total;
    cuDeviceTotalMem_v2(&total, d);
    for (int step = 1; step <= 3; step++) {
        char name[32];
        snprintf(name, sizeof name, "step %d", step);
        nvtxRangePushA(name);
        CUdeviceptr act, big;
        if (forward(&act, (64 + 64 * (size_t)(rank < 0 ? 0 : rank)) * MiB) != CUDA_SUCCESS)
            return 1;
        if (step == 3 && rank == oom_rank) {
            if (forward(&big, total) == CUDA_ERROR_OUT_OF_MEMORY) {
                printf("rank %d: out of memory\n", rank);
                fflush(stdout);
                return 3;
            }
            return 1;
        }
        cuMemFree_v2(act);
        nvtxRangePop();
    }
    printf("rank %d: done\n", rank);
    return 0;
}

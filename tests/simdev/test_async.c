/* Stream-ordered allocation and memory pools on a 256M device: the default
 * and current pool, user pools with attributes and statistics, allocation
 * charged at once, OOM at capacity, frees (async or cuMemFree) returning
 * memory at once, per-thread-stream entry points, pool destroy rules. */
#include "simtest.h"

#define MB (1ull << 20)

int main(void)
{
    sim_start();
    memsnap_sim_live l0 = sim_live_now();
    CUstream st;
    CK(cuStreamCreate(&st, 0));

    CUmemoryPool def = NULL, cur = NULL;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    CK(cuDeviceGetMemPool(&cur, 0));
    CHECK(def != NULL && def == cur);

    CUdeviceptr a = 0, b = 0, c = 0;
    CK(cuMemAllocAsync(&a, 10 * MB, st));
    CHECK(a % 512 == 0);
    CHECK_EQ_U64(sim.used(0), 10 * MB);
    CHECK(sim.is_mapped(a, 10 * MB));
    cuuint64_t v = 0;
    CK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    CHECK_EQ_U64(v, 10 * MB);
    CUmemoryPool owner = NULL;
    CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    CHECK(owner == def);
    CK(cuMemFreeAsync(a, st));
    CHECK_EQ_U64(sim.used(0), 0);
    CHECK(cuMemFreeAsync(a, st) == CUDA_ERROR_INVALID_VALUE);
    CK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v));
    CHECK_EQ_U64(v, 10 * MB);

    /* A user pool with attributes. */
    CUmemPoolProps pp = {0};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool = NULL;
    CK(cuMemPoolCreate(&pool, &pp));
    CHECK(sim_live_now().pools == l0.pools + 1);
    cuuint64_t thr = 64 * MB;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    thr = 0;
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CHECK_EQ_U64(thr, 64 * MB);
    int reuse = 0;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    reuse = 1;
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    CHECK(reuse == 0);

    CK(cuMemAllocFromPoolAsync(&b, 3 * MB, pool, st));
    CK(cuMemAllocFromPoolAsync(&c, 5 * MB + 1, pool, NULL));
    CHECK_EQ_U64(sim.used(0), 8 * MB + 512);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    CHECK_EQ_U64(v, 8 * MB + 512);
    CK(cuMemPoolTrimTo(pool, 0));
    CHECK_EQ_U64(sim.used(0), 8 * MB + 512); /* in use: nothing to trim */
    CK(cuMemFree(c));                          /* cuMemFree frees async memory too */
    CHECK_EQ_U64(sim.used(0), 3 * MB);

    /* Current pool of the device. */
    CK(cuDeviceSetMemPool(0, pool));
    CK(cuMemAllocAsync(&a, MB, st));
    CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    CHECK(owner == pool);
    CK(cuMemFreeAsync(a, st));

    /* OOM at capacity changes nothing. */
    memsnap_sim_live before = sim_live_now();
    CHECK(cuMemAllocAsync(&a, 254 * MB, st) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocFromPoolAsync(&a, 254 * MB, pool, st) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(live_eq(sim_live_now(), before));
    CHECK_EQ_U64(sim.used(0), 3 * MB);
    CK(cuMemAllocAsync(&a, 253 * MB, st));
    CK(cuMemFreeAsync(a, st));

    /* Destroy: not the default pool; the current pool falls back to the
     * default; live allocations stay valid. */
    CHECK(cuMemPoolDestroy(def) == CUDA_ERROR_INVALID_VALUE);
    CK(cuMemPoolDestroy(pool));
    CHECK(sim_live_now().pools == l0.pools);
    CK(cuDeviceGetMemPool(&cur, 0));
    CHECK(cur == def);
    CHECK(cuMemAllocFromPoolAsync(&a, MB, pool, st) == CUDA_ERROR_INVALID_VALUE);
    CHECK(sim.is_mapped(b, 3 * MB));
    CK(cuMemFreeAsync(b, st));
    CHECK_EQ_U64(sim.used(0), 0);

    /* Per-thread default stream entry points (as cuGetProcAddress gives them). */
    CUresult (*alloc_ptsz)(CUdeviceptr *, size_t, CUstream) = NULL;
    CUresult (*free_ptsz)(CUdeviceptr, CUstream) = NULL;
    CK(cuGetProcAddress("cuMemAllocAsync", (void **)&alloc_ptsz, 12000,
                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CK(cuGetProcAddress("cuMemFreeAsync", (void **)&free_ptsz, 12000,
                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CHECK(alloc_ptsz && free_ptsz);
    if (alloc_ptsz && free_ptsz) {
        CK(alloc_ptsz(&a, MB, CU_STREAM_PER_THREAD));
        CHECK_EQ_U64(sim.used(0), MB);
        CK(free_ptsz(a, CU_STREAM_PER_THREAD));
    }
    CHECK_EQ_U64(sim.used(0), 0);
    CHECK(cuMemAllocAsync(&a, MB, (CUstream)&v) == CUDA_ERROR_INVALID_HANDLE);

    CK(cuStreamDestroy(st));
    CHECK(live_eq(sim_live_now(), l0));
    return check_summary();
}

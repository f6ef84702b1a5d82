/* Capacity accounting with MEMSNAP_SIM_DEVICE_MEM=1G: allocations succeed
 * until exactly the capacity, the next one is CUDA_ERROR_OUT_OF_MEMORY and
 * changes nothing, used + free == total throughout, sizes are charged
 * rounded up to 512 bytes, and frees give everything back. */
#include "simtest.h"

/* used + free == total, and free agrees with the simulation's used(). */
static void check_info(void)
{
    size_t fr = 0, tot = 0;
    CK(cuMemGetInfo(&fr, &tot));
    CHECK_EQ_U64(tot, 1ull << 30);
    CHECK_EQ_U64(fr + sim.used(0), tot);
}

int main(void)
{
    sim_start();
    const size_t chunk = 100ull << 20;
    CUdeviceptr p[16];
    int n = 0;
    CUresult rc;
    while ((rc = cuMemAlloc(&p[n], chunk)) == CUDA_SUCCESS) {
        n++;
        check_info();
        if (n == 16)
            break;
    }
    CHECK(n == 10);
    CHECK_EQ_U64(rc, CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U64(sim.used(0), 10 * chunk);

    /* The rest fits exactly; one more byte does not. */
    size_t fr = 0, tot = 0;
    CK(cuMemGetInfo(&fr, &tot));
    CHECK_EQ_U64(fr, (1ull << 30) - 10 * chunk);
    CUdeviceptr rest = 0, extra = 0;
    CHECK(cuMemAlloc(&rest, fr + 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAlloc(&rest, fr));
    CK(cuMemGetInfo(&fr, &tot));
    CHECK_EQ_U64(fr, 0);
    memsnap_sim_live before = sim_live_now();
    CHECK(cuMemAlloc(&extra, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocManaged(&extra, 1, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocAsync(&extra, 1, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(live_eq(sim_live_now(), before));
    CHECK_EQ_U64(sim.used(0), 1ull << 30);

    /* Pinned host memory does not need device capacity. */
    void *h = NULL;
    CK(cuMemAllocHost(&h, 1 << 20));
    CK(cuMemFreeHost(h));

    /* Freeing one chunk makes exactly that much available again. */
    CK(cuMemFree(p[3]));
    check_info();
    CUdeviceptr q = 0;
    CK(cuMemAlloc(&q, chunk));
    CHECK(cuMemAlloc(&extra, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemFree(q));
    p[3] = 0;

    for (int i = 0; i < n; i++)
        if (p[i])
            CK(cuMemFree(p[i]));
    CK(cuMemFree(rest));
    CHECK_EQ_U64(sim.used(0), 0);
    check_info();

    /* Rounding: 1 byte costs 512, 513 bytes cost 1024. */
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 1));
    CHECK_EQ_U64(sim.used(0), 512);
    CK(cuMemAlloc(&b, 513));
    CHECK_EQ_U64(sim.used(0), 512 + 1024);
    CK(cuMemFree(a));
    CK(cuMemFree(b));

    /* A whole-capacity allocation works; huge sizes fail cleanly. */
    CK(cuMemAlloc(&a, 1ull << 30));
    CK(cuMemFree(a));
    CHECK(cuMemAlloc(&a, (size_t)-1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc(&a, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_U64(sim.used(0), 0);
    return check_summary();
}

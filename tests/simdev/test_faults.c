/* Fault injection: MEMSNAP_SIM_FAIL from the environment
 * ("cuMemAlloc_v2:3,cuStreamCreate:1+") and memsnap_sim_fail(); each of
 * cuMemAlloc_v2, cuMemCreate, cuMemMap, cuMemSetAccess and
 * cuMemAddressReserve failing in turn inside a full VMM + alloc sequence
 * returns the documented error, changes nothing, and leaks nothing. */
#include "simtest.h"

#define MB (1ull << 20)

/* One program step list: alloc, reserve, create, map, set access, use, and
 * undo in reverse.  Stops at the first error, undoes what succeeded, and
 * returns that error (CUDA_SUCCESS if all worked). */
static CUresult sequence(void)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr p = 0, va = 0;
    CUmemGenericAllocationHandle h = 0;
    int have_p = 0, have_va = 0, have_h = 0, mapped = 0;
    memsnap_sim_live before;
    uint64_t used;
    CUresult rc;

#define STEP(call)                                                                                 \
    do {                                                                                           \
        before = sim_live_now();                                                                   \
        used = sim.used(0);                                                                        \
        rc = (call);                                                                               \
        if (rc != CUDA_SUCCESS) {                                                                  \
            CHECK(live_eq(sim_live_now(), before)); /* a failed call changes nothing */            \
            CHECK_EQ_U64(sim.used(0), used);                                                       \
            goto undo;                                                                             \
        }                                                                                          \
    } while (0)

    STEP(cuMemAlloc(&p, 3 * MB));
    have_p = 1;
    STEP(cuMemAddressReserve(&va, 8 * MB, 0, 0, 0));
    have_va = 1;
    STEP(cuMemCreate(&h, 4 * MB, &prop, 0));
    have_h = 1;
    STEP(cuMemMap(va, 4 * MB, 0, h, 0));
    mapped = 1;
    CHECK(!sim.is_mapped(va, 4 * MB));
    STEP(cuMemSetAccess(va, 4 * MB, &acc, 1));
    CHECK(sim.is_mapped(va, 4 * MB));
    CK(cuMemcpyDtoD(va, p, MB));
undo:
    if (mapped)
        CK(cuMemUnmap(va, 4 * MB));
    if (have_h)
        CK(cuMemRelease(h));
    if (have_va)
        CK(cuMemAddressFree(va, 8 * MB));
    if (have_p)
        CK(cuMemFree(p));
    return rc;
#undef STEP
}

int main(void)
{
    sim_start();
    memsnap_sim_live l0 = sim_live_now();

    /* From the environment: the third cuMemAlloc_v2 of the process fails. */
    CUdeviceptr a[4];
    CK(cuMemAlloc(&a[0], 1024));
    CK(cuMemAlloc(&a[1], 1024));
    CHECK(cuMemAlloc(&a[2], 1024) == CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAlloc(&a[3], 1024));
    CHECK(sim.calls("cuMemAlloc_v2") == 4); /* failed calls count too */
    CHECK_EQ_U64(sim.used(0), 3 * 1024); /* the failed one charged nothing */
    CK(cuMemFree(a[0]));
    CK(cuMemFree(a[1]));
    CK(cuMemFree(a[3]));
    /* ... and every cuStreamCreate fails. */
    CUstream s;
    CHECK(cuStreamCreate(&s, 0) == CUDA_ERROR_UNKNOWN);
    CHECK(cuStreamCreate(&s, 0) == CUDA_ERROR_UNKNOWN);
    CHECK(sim_live_now().streams == l0.streams);
    CHECK(sim.fail(NULL, 0, 0) == 0);
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamDestroy(s));

    /* Bad requests. */
    CHECK(sim.fail("cuNoSuchFunction", 1, 0) == -1);
    CHECK(sim.fail("cuMemAlloc_v2", 0, 0) == -1);

    /* Names resolve like cuGetProcAddress; aliases share a counter. */
    CHECK(sim.fail("cuMemAlloc", 2, 0) == 0); /* = cuMemAlloc_v2, from now on */
    CK(cuMemAlloc(&a[0], 512));
    CHECK(cuMemAlloc(&a[1], 512) == CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAlloc(&a[1], 512));
    CK(cuMemFree(a[0]));
    CK(cuMemFree(a[1]));
    CHECK(sim.calls("cuMemAllocAsync_ptsz") == sim.calls("cuMemAllocAsync"));

    /* Persistent faults. */
    CHECK(sim.fail("cuMemFree_v2", 1, 1) == 0);
    CK(cuMemAlloc(&a[0], 512));
    CHECK(cuMemFree(a[0]) == CUDA_ERROR_UNKNOWN);
    CHECK(cuMemFree(a[0]) == CUDA_ERROR_UNKNOWN);
    CHECK_EQ_U64(sim.used(0), 512); /* the failed frees changed nothing */
    sim.fail(NULL, 0, 0);
    CK(cuMemFree(a[0]));

    /* The whole sequence works without faults and leaks nothing. */
    CK(sequence());
    CHECK(live_eq(sim_live_now(), l0));
    CHECK_EQ_U64(sim.used(0), 0);

    /* Each function failing in turn. */
    static const struct {
        const char *fn;
        CUresult want;
    } cases[] = {
        {"cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY},
        {"cuMemAddressReserve", CUDA_ERROR_OUT_OF_MEMORY},
        {"cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY},
        {"cuMemMap", CUDA_ERROR_UNKNOWN},
        {"cuMemSetAccess", CUDA_ERROR_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(sim.fail(cases[i].fn, 1, 0) == 0);
        long calls = sim.calls(cases[i].fn);
        CUresult rc = sequence();
        if (rc != cases[i].want)
            fprintf(stderr, "%s: got %d, want %d\n", cases[i].fn, (int)rc, (int)cases[i].want);
        CHECK(rc == cases[i].want);
        CHECK(sim.calls(cases[i].fn) == calls + 1);
        CHECK(live_eq(sim_live_now(), l0));
        CHECK_EQ_U64(sim.used(0), 0);
        /* Not persistent: the next run is clean. */
        CK(sequence());
    }
    CHECK(live_eq(sim_live_now(), l0));
    return check_summary();
}

/* VMM lifecycle on a 64M device: reserve (alignment, fixed-address hint),
 * create (granularity, location, capacity), map, set access (only then
 * memsnap_sim_is_mapped), unmap, release -- including the rule that a handle
 * released while mapped keeps its memory until unmapped -- and the error
 * codes of misuse, each of which changes nothing. */
#include "simtest.h"

#define MB (1ull << 20)

int main(void)
{
    sim_start();
    memsnap_sim_live l0 = sim_live_now();
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK_EQ_U64(g, 2 * MB);
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK_EQ_U64(g, 2 * MB);

    /* Reservations. */
    CUdeviceptr va = 0, va2 = 0, hint = 0;
    CHECK(cuMemAddressReserve(&va, 3 * MB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressReserve(&va, 16 * MB, 0, 0, 0));
    CHECK(va % (2 * MB) == 0);
    CK(cuMemAddressReserve(&va2, 4 * MB, 64 * MB, 0, 0));
    CHECK(va2 % (64 * MB) == 0);
    CHECK(va2 + 4 * MB <= va || va + 16 * MB <= va2);
    hint = va2;
    CK(cuMemAddressFree(va2, 4 * MB));
    CK(cuMemAddressReserve(&va2, 4 * MB, 0, hint, 0));
    CHECK(va2 == hint);
    CHECK(sim_live_now().reservations == l0.reservations + 2);
    CHECK(!sim.is_mapped(va, 2 * MB));
    CHECK_EQ_U64(sim.used(0), 0); /* reserving costs no device memory */

    /* Physical handles. */
    CUmemGenericAllocationHandle h1 = 0, h2 = 0, bad = 0;
    CHECK(cuMemCreate(&bad, 3 * MB, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CHECK(cuMemCreate(&bad, 2 * MB, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 5;
    CHECK(cuMemCreate(&bad, 2 * MB, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 0;
    CHECK(cuMemCreate(&bad, 66 * MB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(live_eq(sim_live_now(), (memsnap_sim_live){l0.allocs, l0.handles, l0.reservations + 2,
                                                     l0.mappings, l0.streams, l0.events, l0.pools}));
    CK(cuMemCreate(&h1, 4 * MB, &prop, 0));
    CK(cuMemCreate(&h2, 4 * MB, &prop, 0));
    CHECK_EQ_U64(sim.used(0), 8 * MB);
    CHECK(sim_live_now().handles == l0.handles + 2);
    CUmemAllocationProp got = {0};
    CK(cuMemGetAllocationPropertiesFromHandle(&got, h1));
    CHECK(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == 0);

    /* Mapping errors change nothing. */
    CHECK(cuMemMap(va + MB, 2 * MB, 0, h1, 0) == CUDA_ERROR_INVALID_VALUE);     /* misaligned */
    CHECK(cuMemMap(va, 6 * MB, 0, h1, 0) == CUDA_ERROR_INVALID_VALUE);          /* past handle */
    CHECK(cuMemMap(va, 4 * MB, 2 * MB, h1, 0) == CUDA_ERROR_INVALID_VALUE);     /* offset+size */
    CHECK(cuMemMap(va + 14 * MB, 4 * MB, 0, h1, 0) == CUDA_ERROR_INVALID_VALUE); /* past the VA */
    CHECK(sim_live_now().mappings == l0.mappings);

    /* Map: not accessible until SetAccess. */
    CK(cuMemMap(va, 4 * MB, 0, h1, 0));
    CHECK(cuMemMap(va + 2 * MB, 2 * MB, 0, h2, 0) == CUDA_ERROR_INVALID_VALUE); /* overlaps */
    CK(cuMemMap(va + 4 * MB, 4 * MB, 0, h2, 0));
    CHECK(sim_live_now().mappings == l0.mappings + 2);
    CHECK(!sim.is_mapped(va, 4 * MB));
    CHECK_EQ_U64(sim.used(0), 8 * MB); /* mapping costs nothing more */
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemSetAccess(va, 2 * MB, &acc, 1) == CUDA_ERROR_INVALID_VALUE);      /* part of one */
    CHECK(cuMemSetAccess(va, 10 * MB, &acc, 1) == CUDA_ERROR_INVALID_VALUE);     /* past them */
    CHECK(!sim.is_mapped(va, 1));
    CK(cuMemSetAccess(va, 8 * MB, &acc, 1));
    CHECK(sim.is_mapped(va, 8 * MB));
    CHECK(!sim.is_mapped(va, 8 * MB + 1));
    unsigned long long fl = 0;
    CK(cuMemGetAccess(&fl, &acc.location, va + 5 * MB));
    CHECK(fl == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* The memory works, across the two mappings. */
    char msg[64] = "hello from the simulated device";
    CK(cuMemcpyHtoD(va + 4 * MB - 16, msg, sizeof msg));
    char back[64] = "";
    CK(cuMemcpyDtoH(back, va + 4 * MB - 16, sizeof back));
    CHECK(strcmp(back, msg) == 0);
    int ord = -1;
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 100));
    CHECK(ord == 0);
    CUdeviceptr base = 0;
    size_t sz = 0;
    CK(cuMemGetAddressRange(&base, &sz, va + 5 * MB));
    CHECK(base == va + 4 * MB && sz == 4 * MB);

    /* Retain gives the handle and needs its own release. */
    CUmemGenericAllocationHandle r = 0;
    CK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 100)));
    CHECK(r == h1);
    CK(cuMemRelease(r));
    CHECK(cuMemExportToShareableHandle(&fl, h1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
          CUDA_ERROR_NOT_SUPPORTED);

    /* Release while mapped: the memory stays until unmapped. */
    CK(cuMemRelease(h1));
    CHECK(cuMemRelease(h1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemMap(va + 8 * MB, 2 * MB, 0, h1, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_U64(sim.used(0), 8 * MB);
    CHECK(sim.is_mapped(va, 4 * MB));
    CHECK(cuMemAddressFree(va, 16 * MB) == CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CHECK(cuMemUnmap(va, 2 * MB) == CUDA_ERROR_INVALID_VALUE);        /* part of a mapping */
    CK(cuMemUnmap(va, 4 * MB));
    CHECK_EQ_U64(sim.used(0), 4 * MB);
    CHECK(!sim.is_mapped(va, 1));
    CHECK(sim_live_now().handles == l0.handles + 1);

    /* Unmap first, release after: memory returns at the release. */
    CK(cuMemUnmap(va + 4 * MB, 4 * MB));
    CHECK_EQ_U64(sim.used(0), 4 * MB);
    CHECK(cuMemUnmap(va + 4 * MB, 4 * MB) == CUDA_ERROR_INVALID_VALUE);
    CK(cuMemRelease(h2));
    CHECK_EQ_U64(sim.used(0), 0);

    /* Remap after unmap works (fresh, zeroed pages). */
    CUmemGenericAllocationHandle h3 = 0;
    CK(cuMemCreate(&h3, 2 * MB, &prop, 0));
    CK(cuMemMap(va, 2 * MB, 0, h3, 0));
    CK(cuMemSetAccess(va, 2 * MB, &acc, 1));
    CHECK(((volatile char *)(uintptr_t)va)[0] == 0);
    CK(cuMemUnmap(va, 2 * MB));
    CK(cuMemRelease(h3));

    CHECK(cuMemAddressFree(va, 8 * MB) == CUDA_ERROR_INVALID_VALUE); /* wrong size */
    CK(cuMemAddressFree(va, 16 * MB));
    CK(cuMemAddressFree(va2, 4 * MB));
    CHECK(cuMemAddressFree(va2, 4 * MB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(live_eq(sim_live_now(), l0));
    CHECK_EQ_U64(sim.used(0), 0);
    return check_summary();
}

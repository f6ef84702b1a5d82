/* The CUDA virtual memory management API on the simulated device:
 * reservations, physical handles, mappings and access.
 *
 * Granularity is 2 MiB (minimum and recommended).  A reservation is a
 * PROT_NONE MAP_NORESERVE host mapping of the reserved size, aligned as
 * asked (at least 2 MiB); the fixed-address hint is honoured when that range
 * is free (MAP_FIXED_NOREPLACE).  cuMemCreate makes a physical handle and
 * charges its full size to the device; it holds no host memory.  cuMemMap
 * replaces the reserved pages with fresh anonymous pages, still PROT_NONE:
 * the range becomes readable/writable only at cuMemSetAccess, and only then
 * does memsnap_sim_is_mapped report it.  Two mappings of one handle do not
 * share content (the simulation tracks memory, not data sharing).
 * cuMemUnmap puts fresh PROT_NONE pages back, which drops the old ones.
 *
 * Lifetime follows the real driver: a handle is destroyed, and its bytes
 * returned to the device, only when it has been released (cuMemRelease once
 * per create/retain) and no mapping of it remains.
 *
 * Error codes (all checked before anything changes):
 *  - misaligned or zero sizes/addresses/offsets, ranges outside one
 *    reservation, offset+size past the handle, mapping over an existing
 *    mapping, unmapping or setting access on anything that is not exactly a
 *    run of whole mappings, unknown or released handles, non-device
 *    locations, invalid device ids, non-zero flags: CUDA_ERROR_INVALID_VALUE;
 *  - cuMemCreate past the capacity: CUDA_ERROR_OUT_OF_MEMORY;
 *  - cuMemAddressFree of a reservation that still has mappings:
 *    CUDA_ERROR_INVALID_VALUE (our choice: it makes a leak visible);
 *  - shareable handles (export/import): CUDA_ERROR_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define G SIM_GRANULARITY

/* Replace [p, p+len) with fresh inaccessible pages (drops the old ones).
 * Returns 0 or -1. */
static int remap_none(uint64_t p, uint64_t len)
{
    void *r = mmap((void *)(uintptr_t)p, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return r == MAP_FAILED ? -1 : 0;
}

/* 1 if prop describes pinned memory on a valid simulated device. */
static int prop_ok(const CUmemAllocationProp *prop)
{
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && sim_dev_valid(prop->location.id);
}

/* Handle pointer from the API value, if it is a live handle. */
static sim_handle *handle_get(CUmemGenericAllocationHandle h)
{
    return sim_obj_get((void *)(uintptr_t)h, OBJ_HANDLE);
}

/* Destroy h if released and unmapped (lock held). */
static void handle_maybe_destroy(sim_handle *h)
{
    if (h->refs > 0 || h->maps > 0)
        return;
    sim_uncharge(h->dev, h->size);
    sim_obj_del(h);
    h->hdr.type = 0;
    free(h);
    sim_live.handles--;
}

/* Try to reserve exactly [addr, addr+size); returns 0 on success. */
static int reserve_fixed(uint64_t addr, uint64_t size)
{
    if (sim_res_overlap(addr, addr + size) || sim_range_overlap(addr, addr + size))
        return -1;
    void *p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    if ((uint64_t)(uintptr_t)p != addr) { /* kernel without NOREPLACE: a hint */
        munmap(p, size);
        return -1;
    }
    return 0;
}

/* Reserve size bytes aligned to align anywhere; returns the address or 0. */
static uint64_t reserve_any(uint64_t size, uint64_t align)
{
    uint64_t len = size + align;
    if (len < size)
        return 0;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    uint64_t raw = (uint64_t)(uintptr_t)p, start = sim_round_up(raw, align);
    if (start > raw)
        munmap(p, start - raw);
    if (raw + len > start + size)
        munmap((void *)(uintptr_t)(start + size), raw + len - (start + size));
    return start;
}

/* cuMemAddressReserve: see the file comment. */
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    SIM_API(cuMemAddressReserve, SIM_ALLOCATING);
    if (!ptr || size == 0 || size % G || flags != 0 || (alignment & (alignment - 1)))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    uint64_t align = alignment > G ? alignment : G;
    sim_res *r = calloc(1, sizeof *r);
    if (!r)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t start = 0;
    if (addr && addr % align == 0 && addr + size > addr && reserve_fixed(addr, size) == 0)
        start = addr;
    if (!start)
        start = reserve_any(size, align);
    if (!start) {
        free(r);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    r->start = start;
    r->end = start + size;
    if (sim_res_add(r) < 0) {
        munmap((void *)(uintptr_t)start, size);
        free(r);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    sim_live.reservations++;
    *ptr = start;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemAddressFree: ptr/size must be exactly one reservation without
 * mappings. */
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_API(cuMemAddressFree, SIM_PLAIN);
    sim_res *r = sim_res_find(ptr);
    if (!r || r->start != ptr || r->end - r->start != size || r->maps)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_res_del(r);
    munmap((void *)(uintptr_t)r->start, size);
    free(r);
    sim_live.reservations--;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemCreate: a physical handle of size bytes, charged to the device. */
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_API(cuMemCreate, SIM_ALLOCATING);
    if (!handle || !prop_ok(prop) || flags != 0 || size == 0 || size % G)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    int dev = prop->location.id;
    CUresult rc = sim_charge(dev, size);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    sim_handle *h = calloc(1, sizeof *h);
    if (!h || sim_obj_add(h) < 0) {
        free(h);
        sim_uncharge(dev, size);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    h->hdr.type = OBJ_HANDLE;
    h->dev = dev;
    h->size = size;
    h->prop = *prop;
    h->refs = 1;
    h->id = sim_next_id++;
    sim_live.handles++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemRelease: drop one reference; destroyed once unmapped too. */
CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_API(cuMemRelease, SIM_PLAIN);
    sim_handle *h = handle_get(handle);
    if (!h || h->refs <= 0)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    h->refs--;
    handle_maybe_destroy(h);
    return sim_return(CUDA_SUCCESS);
}

/* cuMemMap: map [offset, offset+size) of handle at ptr (no access yet). */
CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    SIM_API(cuMemMap, SIM_PLAIN);
    sim_handle *h = handle_get(handle);
    if (!h || h->refs <= 0 || flags != 0 || !ptr || size == 0 || ptr % G || size % G || offset % G ||
        offset > h->size || size > h->size - offset || ptr + size < ptr)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_res *res = sim_res_find(ptr);
    if (!res || ptr + size > res->end || sim_range_overlap(ptr, ptr + size))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_range *r = calloc(1, sizeof *r);
    if (!r)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    r->start = ptr;
    r->end = ptr + size;
    r->kind = R_MAP;
    r->dev = h->dev;
    r->handle = h;
    r->handle_off = offset;
    r->res = res;
    r->id = sim_next_id++;
    if (sim_range_add(r) < 0) {
        free(r);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (remap_none(ptr, size) < 0) {
        sim_range_del(r);
        free(r);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    h->maps++;
    res->maps++;
    sim_live.mappings++;
    return sim_return(CUDA_SUCCESS);
}

/* Check that [ptr, ptr+size) is exactly a run of whole mappings. */
static int whole_mappings(uint64_t ptr, uint64_t size)
{
    if (!ptr || size == 0 || ptr + size < ptr)
        return 0;
    uint64_t p = ptr, end = ptr + size;
    while (p < end) {
        sim_range *r = sim_range_find(p);
        if (!r || r->kind != R_MAP || r->start != p || r->end > end)
            return 0;
        p = r->end;
    }
    return 1;
}

/* cuMemUnmap: unmap a run of whole mappings; handles released earlier are
 * destroyed when their last mapping goes. */
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_API(cuMemUnmap, SIM_PLAIN);
    if (!whole_mappings(ptr, size))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    uint64_t p = ptr, end = ptr + size;
    while (p < end) {
        sim_range *r = sim_range_find(p);
        p = r->end;
        remap_none(r->start, r->end - r->start);
        sim_range_del(r);
        r->res->maps--;
        r->handle->maps--;
        handle_maybe_destroy(r->handle);
        free(r);
        sim_live.mappings--;
    }
    return sim_return(CUDA_SUCCESS);
}

/* cuMemSetAccess: set access (the widest of desc[]) on a run of whole
 * mappings. */
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_API(cuMemSetAccess, SIM_PLAIN);
    if (!desc || count == 0 || !whole_mappings(ptr, size))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    int access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        CUmemAccess_flags f = desc[i].flags;
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !sim_dev_valid(desc[i].location.id) ||
            (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return sim_return(CUDA_ERROR_INVALID_VALUE);
        access |= (int)f;
    }
    int prot = access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
               : access == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                            : PROT_NONE;
    uint64_t p = ptr, end = ptr + size;
    while (p < end) {
        sim_range *r = sim_range_find(p);
        r->access = access;
        mprotect((void *)(uintptr_t)r->start, r->end - r->start, prot);
        p = r->end;
    }
    return sim_return(CUDA_SUCCESS);
}

/* cuMemGetAccess: the access flags of the mapping containing ptr. */
CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_API(cuMemGetAccess, SIM_PLAIN);
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !sim_dev_valid(location->id))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_range *r = sim_range_find(ptr);
    if (!r || r->kind != R_MAP)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *flags = (unsigned long long)r->access;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemGetAllocationGranularity: 2 MiB, minimum and recommended. */
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    SIM_API(cuMemGetAllocationGranularity, SIM_PLAIN);
    if (!granularity || !prop_ok(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *granularity = G;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemGetAllocationPropertiesFromHandle: the prop given to cuMemCreate. */
CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    SIM_API(cuMemGetAllocationPropertiesFromHandle, SIM_PLAIN);
    sim_handle *h = handle_get(handle);
    if (!prop || !h)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *prop = h->prop;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemRetainAllocationHandle: the handle mapped at addr, +1 reference. */
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_API(cuMemRetainAllocationHandle, SIM_PLAIN);
    sim_range *r = sim_range_find((uint64_t)(uintptr_t)addr);
    if (!handle || !r || r->kind != R_MAP)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    r->handle->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)r->handle;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemExportToShareableHandle: not simulated. */
CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_API(cuMemExportToShareableHandle, SIM_PLAIN);
    (void)shareableHandle;
    (void)handle;
    (void)handleType;
    (void)flags;
    return sim_return(CUDA_ERROR_NOT_SUPPORTED);
}

/* cuMemImportFromShareableHandle: not simulated. */
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    SIM_API(cuMemImportFromShareableHandle, SIM_PLAIN);
    (void)handle;
    (void)osHandle;
    (void)shHandleType;
    return sim_return(CUDA_ERROR_NOT_SUPPORTED);
}

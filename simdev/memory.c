/* Device, managed, pinned-host and stream-ordered memory of the simulated
 * device, plus copies, sets and pointer queries.
 *
 * Accounting: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged and the
 * stream-ordered allocations each charge their size rounded up to 512 bytes
 * to the device of the current context (of the pool, for pool allocations).
 * A request that does not fit returns CUDA_ERROR_OUT_OF_MEMORY and changes
 * nothing.  (A real device also packs small allocations into 2 MiB pages and
 * keeps some memory for itself; we do not, so "free" is exactly capacity
 * minus the sum of rounded sizes.)
 *
 * Each allocation is its own anonymous PROT_READ|PROT_WRITE MAP_NORESERVE
 * mapping: addresses are page aligned (>= 512), unique while live, never
 * overlapping, and untouched memory costs no host RAM.  Pinned host memory
 * (cuMemHostAlloc, cuMemAllocHost) is the same kind of mapping but is not
 * charged to a device.
 *
 * Stream-ordered allocation happens immediately (streams are always idle):
 * cuMemAllocAsync charges at once, cuMemFreeAsync frees at once; a pool
 * therefore never holds freed memory, and its reserved and used statistics
 * are equal.  Pools honour CUmemPoolProps.maxSize.
 *
 * Copies and sets really copy/set bytes.  The device side of a copy must be
 * live device memory (allocated, or mapped with access set) or pinned host
 * memory, else CUDA_ERROR_INVALID_VALUE.  The copy itself runs after the lock
 * is dropped, so a big copy does not stall other threads.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Page size of the host. */
static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

/* Fresh zeroed mapping of len bytes, or NULL. */
static void *map_rw(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- pools ---------------------------------------------------------- */

/* See sim.h: the device's default pool, which is also its current pool. */
void sim_pool_init_default(int dev)
{
    sim_pool *p = &sim_dev[dev].default_pool;
    memset(p, 0, sizeof *p);
    p->hdr.type = OBJ_POOL;
    p->dev = dev;
    p->is_default = 1;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->props.location.id = dev;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    sim_obj_add(p);
    sim_dev[dev].cur_pool = p;
}

/* Free a user pool object (lock held). */
static void pool_free(sim_pool *p)
{
    sim_obj_del(p);
    p->hdr.type = 0;
    free(p);
}

/* ---- device allocations --------------------------------------------- */

/* Allocate size bytes of device memory on dev (lock held).  pool may be
 * NULL.  Returns CUDA_SUCCESS and *dptr, or an error with nothing changed. */
static CUresult dev_alloc(CUdeviceptr *dptr, size_t size, int dev, sim_ctx *ctx, sim_pool *pool,
                          int managed, unsigned flags)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t charged = sim_round_up(size, SIM_ALLOC_ALIGN);
    if (charged < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (pool && pool->props.maxSize && pool->used_cur + charged > pool->props.maxSize)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = sim_charge(dev, charged);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_range *r = calloc(1, sizeof *r);
    size_t maplen = sim_round_up(charged, page_size());
    void *p = r ? map_rw(maplen) : NULL;
    if (!p) {
        free(r);
        sim_uncharge(dev, charged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->start = (uint64_t)(uintptr_t)p;
    r->end = r->start + size;
    r->kind = R_DEVICE;
    r->dev = dev;
    r->managed = managed;
    r->ctx = ctx;
    r->charged = charged;
    r->maplen = maplen;
    r->flags = flags;
    r->pool = pool;
    r->id = sim_next_id++;
    if (sim_range_add(r) < 0) {
        munmap(p, maplen);
        free(r);
        sim_uncharge(dev, charged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (pool) {
        pool->used_cur += charged;
        if (pool->used_cur > pool->used_high)
            pool->used_high = pool->used_cur;
        pool->live_allocs++;
    }
    sim_live.allocs++;
    *dptr = r->start;
    return CUDA_SUCCESS;
}

/* Free the device allocation that starts at dptr (lock held);
 * CUDA_ERROR_INVALID_VALUE if there is none. */
static CUresult dev_free(CUdeviceptr dptr)
{
    sim_range *r = sim_range_find(dptr);
    if (!r || r->kind != R_DEVICE || r->start != dptr)
        return CUDA_ERROR_INVALID_VALUE;
    sim_range_del(r);
    munmap((void *)(uintptr_t)r->start, r->maplen);
    sim_uncharge(r->dev, r->charged);
    sim_pool *pool = r->pool;
    if (pool) {
        pool->used_cur -= r->charged;
        if (--pool->live_allocs == 0 && pool->destroyed)
            pool_free(pool);
    }
    free(r);
    sim_live.allocs--;
    return CUDA_SUCCESS;
}

/* cuMemAlloc_v2: device memory in the current context's device. */
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_API(cuMemAlloc_v2, SIM_ALLOCATING);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc == CUDA_SUCCESS)
        rc = dev_alloc(dptr, bytesize, c->dev, c, NULL, 0, 0);
    return sim_return(rc);
}

/* cuMemAllocPitch_v2: rows padded to 512 bytes; element size 4, 8 or 16. */
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes)
{
    SIM_API(cuMemAllocPitch_v2, SIM_ALLOCATING);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    if (!pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    size_t pitch = sim_round_up(WidthInBytes, 512);
    if (Height > SIZE_MAX / pitch)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    rc = dev_alloc(dptr, pitch * Height, c->dev, c, NULL, 0, 0);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return sim_return(rc);
}

/* cuMemAllocManaged: charged to the device like cuMemAlloc. */
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_API(cuMemAllocManaged, SIM_ALLOCATING);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    return sim_return(dev_alloc(dptr, bytesize, c->dev, c, NULL, 1, flags));
}

/* cuMemFree_v2: any device allocation (plain, pitch, managed, async).
 * Unknown pointers, 0 included, are CUDA_ERROR_INVALID_VALUE.  No current
 * context is needed (the allocation knows its device). */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_API(cuMemFree_v2, SIM_PLAIN);
    return sim_return(dev_free(dptr));
}

/* cuMemGetInfo_v2: free = capacity - used of the current device. */
CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_, size_t *total)
{
    SIM_API(cuMemGetInfo_v2, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    if (!free_ || !total)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *free_ = sim_dev[c->dev].capacity - sim_dev[c->dev].used;
    *total = sim_dev[c->dev].capacity;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemGetAddressRange_v2: base and size of the allocation or mapping that
 * contains dptr; NOT_FOUND if none. */
CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_API(cuMemGetAddressRange_v2, SIM_PLAIN);
    sim_range *r = sim_range_find(dptr);
    if (!r || r->kind == R_HOSTREG)
        return sim_return(CUDA_ERROR_NOT_FOUND);
    if (pbase)
        *pbase = r->start;
    if (psize)
        *psize = r->end - r->start;
    return sim_return(CUDA_SUCCESS);
}

/* ---- pinned host memory --------------------------------------------- */

/* Allocate pinned host memory (lock held, context required). */
static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pp || size == 0 || (flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                       CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    sim_range *r = calloc(1, sizeof *r);
    size_t maplen = sim_round_up(size, page_size());
    void *p = r ? map_rw(maplen) : NULL;
    if (!p) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r->start = (uint64_t)(uintptr_t)p;
    r->end = r->start + size;
    r->kind = R_HOST;
    r->dev = c->dev;
    r->ctx = c;
    r->maplen = maplen;
    r->flags = flags;
    r->id = sim_next_id++;
    if (sim_range_add(r) < 0) {
        munmap(p, maplen);
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_live.allocs++;
    *pp = p;
    return CUDA_SUCCESS;
}

/* cuMemHostAlloc: pinned host memory (not charged to the device). */
CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_API(cuMemHostAlloc, SIM_ALLOCATING);
    return sim_return(host_alloc(pp, bytesize, Flags));
}

/* cuMemAllocHost_v2: cuMemHostAlloc with no flags. */
CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SIM_API(cuMemAllocHost_v2, SIM_ALLOCATING);
    return sim_return(host_alloc(pp, bytesize, 0));
}

/* cuMemFreeHost: INVALID_VALUE unless p starts a pinned allocation. */
CUresult CUDAAPI cuMemFreeHost(void *p)
{
    SIM_API(cuMemFreeHost, SIM_PLAIN);
    sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOST || r->start != (uint64_t)(uintptr_t)p)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_range_del(r);
    munmap(p, r->maplen);
    free(r);
    sim_live.allocs--;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemHostGetDevicePointer_v2: unified addressing, same address. */
CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    SIM_API(cuMemHostGetDevicePointer_v2, SIM_PLAIN);
    sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (!pdptr || Flags != 0 || !r || (r->kind != R_HOST && r->kind != R_HOSTREG))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemHostGetFlags: flags given at allocation/registration. */
CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    SIM_API(cuMemHostGetFlags, SIM_PLAIN);
    sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (!pFlags || !r || (r->kind != R_HOST && r->kind != R_HOSTREG))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pFlags = r->flags;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemHostRegister_v2 (and v1): record the range as page-locked. */
CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    SIM_API(cuMemHostRegister_v2, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!p || bytesize == 0 || a + bytesize < a)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (sim_range_overlap(a, a + bytesize))
        return sim_return(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    sim_range *r = calloc(1, sizeof *r);
    if (!r)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    r->start = a;
    r->end = a + bytesize;
    r->kind = R_HOSTREG;
    r->dev = c->dev;
    r->ctx = c;
    r->flags = Flags;
    r->id = sim_next_id++;
    if (sim_range_add(r) < 0) {
        free(r);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
    SIM_ALIAS(cuMemHostRegister_v2);

/* cuMemHostUnregister: p must start a registered range. */
CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    SIM_API(cuMemHostUnregister, SIM_PLAIN);
    sim_range *r = sim_range_find((uint64_t)(uintptr_t)p);
    if (!r || r->kind != R_HOSTREG || r->start != (uint64_t)(uintptr_t)p)
        return sim_return(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    sim_range_del(r);
    free(r);
    return sim_return(CUDA_SUCCESS);
}

/* ---- copies and sets ------------------------------------------------ */

/* 1 if [p, p+n) is entirely memory the device may touch (lock held). */
static int dev_accessible(uint64_t p, size_t n)
{
    uint64_t end = p + n;
    if (end < p)
        return 0;
    while (p < end) {
        sim_range *r = sim_range_find(p);
        if (!r)
            return 0;
        if (r->kind == R_MAP && (r->access & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) !=
                                    CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return 0;
        p = r->end;
    }
    return 1;
}

/* For unified-address copies: 1 if p is host memory we do not track, or
 * accessible tracked memory. */
static int any_accessible(uint64_t p, size_t n)
{
    if (!sim_range_overlap(p, p + n))
        return 1;
    return dev_accessible(p, n);
}

/* Shared tail of every copy: validate (lock held), drop the lock, copy.
 * dkind/skind: 1 device, 0 host, 2 unified (either). */
static CUresult do_copy(uint64_t dst, int dkind, uint64_t src, int skind, size_t n, CUstream s)
{
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(s, &c);
    if (rc == CUDA_SUCCESS && n) {
        if (!dst || !src)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if ((dkind == 1 && !dev_accessible(dst, n)) || (dkind == 2 && !any_accessible(dst, n)) ||
                 (skind == 1 && !dev_accessible(src, n)) || (skind == 2 && !any_accessible(src, n)))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    sim_unlock();
    if (rc == CUDA_SUCCESS && n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return rc;
}

#define H(p) ((uint64_t)(uintptr_t)(p))

/* cuMemcpy (+_ptds): unified addressing copy. */
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_API(cuMemcpy, SIM_PLAIN);
    return do_copy(dst, 2, src, 2, ByteCount, NULL);
}
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) SIM_ALIAS(cuMemcpy);

/* cuMemcpyAsync (+_ptsz): done before it returns. */
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_API(cuMemcpyAsync, SIM_PLAIN);
    return do_copy(dst, 2, src, 2, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
    SIM_ALIAS(cuMemcpyAsync);

/* cuMemcpyHtoD_v2 (+_ptds). */
CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_API(cuMemcpyHtoD_v2, SIM_PLAIN);
    return do_copy(dstDevice, 1, H(srcHost), 0, ByteCount, NULL);
}
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
    SIM_ALIAS(cuMemcpyHtoD_v2);

/* cuMemcpyDtoH_v2 (+_ptds). */
CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_API(cuMemcpyDtoH_v2, SIM_PLAIN);
    return do_copy(H(dstHost), 0, srcDevice, 1, ByteCount, NULL);
}
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
    SIM_ALIAS(cuMemcpyDtoH_v2);

/* cuMemcpyDtoD_v2 (+_ptds). */
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_API(cuMemcpyDtoD_v2, SIM_PLAIN);
    return do_copy(dstDevice, 1, srcDevice, 1, ByteCount, NULL);
}
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
    SIM_ALIAS(cuMemcpyDtoD_v2);

/* cuMemcpyHtoDAsync_v2 (+_ptsz). */
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                      CUstream hStream)
{
    SIM_API(cuMemcpyHtoDAsync_v2, SIM_PLAIN);
    return do_copy(dstDevice, 1, H(srcHost), 0, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                           CUstream hStream) SIM_ALIAS(cuMemcpyHtoDAsync_v2);

/* cuMemcpyDtoHAsync_v2 (+_ptsz). */
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    SIM_API(cuMemcpyDtoHAsync_v2, SIM_PLAIN);
    return do_copy(H(dstHost), 0, srcDevice, 1, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream) SIM_ALIAS(cuMemcpyDtoHAsync_v2);

/* cuMemcpyDtoDAsync_v2 (+_ptsz). */
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    SIM_API(cuMemcpyDtoDAsync_v2, SIM_PLAIN);
    return do_copy(dstDevice, 1, srcDevice, 1, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream) SIM_ALIAS(cuMemcpyDtoDAsync_v2);

/* cuMemcpyPeer (+_ptds): contexts must be live; copies like DtoD. */
CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
    SIM_API(cuMemcpyPeer, SIM_PLAIN);
    if (!sim_obj_get(dstContext, OBJ_CTX) || !sim_obj_get(srcContext, OBJ_CTX))
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    return do_copy(dstDevice, 1, srcDevice, 1, ByteCount, NULL);
}
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount) SIM_ALIAS(cuMemcpyPeer);

/* cuMemcpyPeerAsync (+_ptsz). */
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    SIM_API(cuMemcpyPeerAsync, SIM_PLAIN);
    if (!sim_obj_get(dstContext, OBJ_CTX) || !sim_obj_get(srcContext, OBJ_CTX))
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    return do_copy(dstDevice, 1, srcDevice, 1, ByteCount, hStream);
}
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                        CUcontext srcContext, size_t ByteCount, CUstream hStream)
    SIM_ALIAS(cuMemcpyPeerAsync);

/* Shared tail of every set: validate (lock held), drop the lock, fill n
 * elements of esize bytes with value. */
static CUresult do_set(uint64_t dst, uint32_t value, size_t esize, size_t n, CUstream s)
{
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(s, &c);
    if (rc == CUDA_SUCCESS && n) {
        if (dst % esize || n > SIZE_MAX / esize || !dev_accessible(dst, n * esize))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    sim_unlock();
    if (rc != CUDA_SUCCESS || !n)
        return rc;
    if (esize == 1) {
        memset((void *)(uintptr_t)dst, (int)(value & 0xff), n);
    } else if (esize == 2) {
        uint16_t *p = (uint16_t *)(uintptr_t)dst;
        for (size_t i = 0; i < n; i++)
            p[i] = (uint16_t)value;
    } else {
        uint32_t *p = (uint32_t *)(uintptr_t)dst;
        for (size_t i = 0; i < n; i++)
            p[i] = value;
    }
    return CUDA_SUCCESS;
}

/* cuMemsetD8_v2 (+_ptds). */
CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_API(cuMemsetD8_v2, SIM_PLAIN);
    return do_set(dstDevice, uc, 1, N, NULL);
}
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
    SIM_ALIAS(cuMemsetD8_v2);

/* cuMemsetD16_v2 (+_ptds). */
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    SIM_API(cuMemsetD16_v2, SIM_PLAIN);
    return do_set(dstDevice, us, 2, N, NULL);
}
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
    SIM_ALIAS(cuMemsetD16_v2);

/* cuMemsetD32_v2 (+_ptds). */
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_API(cuMemsetD32_v2, SIM_PLAIN);
    return do_set(dstDevice, ui, 4, N, NULL);
}
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
    SIM_ALIAS(cuMemsetD32_v2);

/* cuMemsetD8Async (+_ptsz). */
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_API(cuMemsetD8Async, SIM_PLAIN);
    return do_set(dstDevice, uc, 1, N, hStream);
}
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
    SIM_ALIAS(cuMemsetD8Async);

/* cuMemsetD16Async (+_ptsz). */
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    SIM_API(cuMemsetD16Async, SIM_PLAIN);
    return do_set(dstDevice, us, 2, N, hStream);
}
CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                       CUstream hStream) SIM_ALIAS(cuMemsetD16Async);

/* cuMemsetD32Async (+_ptsz). */
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_API(cuMemsetD32Async, SIM_PLAIN);
    return do_set(dstDevice, ui, 4, N, hStream);
}
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
    SIM_ALIAS(cuMemsetD32Async);

/* ---- pointer attributes --------------------------------------------- */

/* One attribute of the range containing ptr (or r NULL: untracked). */
static CUresult pointer_attr(void *data, CUpointer_attribute a, uint64_t ptr, sim_range *r)
{
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    int host = r && (r->kind == R_HOST || r->kind == R_HOSTREG);
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!r || r->kind == R_MAP)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUcontext *)data = (CUcontext)r->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!r || !(host || r->managed))
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(int *)data = 1;
        return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = r->kind == R_MAP ? r->handle->id : r->id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = r ? r->managed : 0;
        return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = r->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)r->start;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(size_t *)data = r->end - r->start;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = r != NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned *)data = r->kind == R_MAP ? (unsigned)r->access
                                             : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUmemoryPool *)data = (CUmemoryPool)r->pool;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = r->kind == R_MAP ? r->handle->prop.requestedHandleTypes : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        if (!r)
            return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* cuPointerGetAttribute: see pointer_attr; untracked pointers are
 * CUDA_ERROR_INVALID_VALUE for most attributes, as on a real driver. */
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_API(cuPointerGetAttribute, SIM_PLAIN);
    return sim_return(pointer_attr(data, attribute, ptr, sim_range_find(ptr)));
}

/* cuPointerGetAttributes: several at once; for an untracked pointer the
 * values are zeroed and the call still succeeds (real behaviour). */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    SIM_API(cuPointerGetAttributes, SIM_PLAIN);
    if (!numAttributes || !attributes || !data)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_range *r = sim_range_find(ptr);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        if (pointer_attr(data[i], attributes[i], ptr, r) != CUDA_SUCCESS) {
            /* Zero a value of the attribute's width. */
            switch (attributes[i]) {
            case CU_POINTER_ATTRIBUTE_CONTEXT:
            case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
            case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
                *(void **)data[i] = NULL;
                break;
            case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
            case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
            case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
                *(unsigned long long *)data[i] = 0;
                break;
            default:
                *(unsigned *)data[i] = 0;
                break;
            }
        }
    }
    return sim_return(CUDA_SUCCESS);
}

/* ---- stream-ordered allocation and pools ---------------------------- */

/* cuMemAllocAsync (+_ptsz): from the current pool of the stream's device. */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_API(cuMemAllocAsync, SIM_ALLOCATING);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS)
        rc = dev_alloc(dptr, bytesize, c->dev, c, sim_dev[c->dev].cur_pool, 0, 0);
    return sim_return(rc);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
    SIM_ALIAS(cuMemAllocAsync);

/* cuMemAllocFromPoolAsync (+_ptsz): from pool, charged to the pool's device. */
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    SIM_API(cuMemAllocFromPoolAsync, SIM_ALLOCATING);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    return sim_return(dev_alloc(dptr, bytesize, p->dev, c, p, 0, 0));
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) SIM_ALIAS(cuMemAllocFromPoolAsync);

/* cuMemFreeAsync (+_ptsz): frees at once; any device allocation. */
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_API(cuMemFreeAsync, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS)
        rc = dev_free(dptr);
    return sim_return(rc);
}
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) SIM_ALIAS(cuMemFreeAsync);

/* cuMemPoolCreate: pinned device pools only. */
CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    SIM_API(cuMemPoolCreate, SIM_PLAIN);
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(poolProps->location.id))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return sim_return(CUDA_ERROR_NOT_SUPPORTED);
    sim_pool *p = calloc(1, sizeof *p);
    if (!p)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    p->hdr.type = OBJ_POOL;
    p->dev = poolProps->location.id;
    p->props = *poolProps;
    p->reuse_follow = p->reuse_opportunistic = p->reuse_internal = 1;
    if (sim_obj_add(p) < 0) {
        free(p);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    sim_live.pools++;
    *pool = (CUmemoryPool)p;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemPoolDestroy: not the default pool; live allocations stay valid and
 * the pool object goes when the last of them is freed. */
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_API(cuMemPoolDestroy, SIM_PLAIN);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed || p->is_default)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (sim_dev[p->dev].cur_pool == p)
        sim_dev[p->dev].cur_pool = &sim_dev[p->dev].default_pool;
    sim_live.pools--;
    if (p->live_allocs)
        p->destroyed = 1;
    else
        pool_free(p);
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceGetDefaultMemPool. */
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    SIM_API(cuDeviceGetDefaultMemPool, SIM_PLAIN);
    if (!pool_out)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *pool_out = (CUmemoryPool)&sim_dev[dev].default_pool;
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceGetMemPool: the device's current pool. */
CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_API(cuDeviceGetMemPool, SIM_PLAIN);
    if (!pool)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *pool = (CUmemoryPool)sim_dev[dev].cur_pool;
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceSetMemPool: pool must belong to dev. */
CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SIM_API(cuDeviceSetMemPool, SIM_PLAIN);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed || p->dev != dev)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_dev[dev].cur_pool = p;
    return sim_return(CUDA_SUCCESS);
}

/* cuMemPoolSetAttribute: reuse flags and threshold are stored; the high
 * watermarks may only be reset to 0. */
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_API(cuMemPoolSetAttribute, SIM_PLAIN);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed || !value)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->reuse_follow = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->reuse_opportunistic = *(int *)value; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse_internal = *(int *)value; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->release_threshold = *(cuuint64_t *)value; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            return sim_return(CUDA_ERROR_INVALID_VALUE);
        p->used_high = p->used_cur;
        break;
    default:
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    }
    return sim_return(CUDA_SUCCESS);
}

/* cuMemPoolGetAttribute: reserved == used (frees are immediate). */
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_API(cuMemPoolGetAttribute, SIM_PLAIN);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed || !value)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = p->reuse_follow; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = p->reuse_opportunistic; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = p->reuse_internal; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used_cur; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: return sim_return(CUDA_ERROR_INVALID_VALUE);
    }
    return sim_return(CUDA_SUCCESS);
}

/* cuMemPoolTrimTo: nothing is ever cached, so nothing to trim. */
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_API(cuMemPoolTrimTo, SIM_PLAIN);
    (void)minBytesToKeep;
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    return sim_return(p && !p->destroyed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* cuMemPoolSetAccess: accepted for valid devices, not recorded. */
CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    SIM_API(cuMemPoolSetAccess, SIM_PLAIN);
    sim_pool *p = sim_obj_get(pool, OBJ_POOL);
    if (!p || p->destroyed || (count && !map))
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < count; i++)
        if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !sim_dev_valid(map[i].location.id))
            return sim_return(CUDA_ERROR_INVALID_DEVICE);
    return sim_return(CUDA_SUCCESS);
}

/* cuMemPoolGetAccess: read-write from every device. */
CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    SIM_API(cuMemPoolGetAccess, SIM_PLAIN);
    sim_pool *p = sim_obj_get(memPool, OBJ_POOL);
    if (!flags || !location || !p || p->destroyed)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !sim_dev_valid(location->id))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return sim_return(CUDA_SUCCESS);
}

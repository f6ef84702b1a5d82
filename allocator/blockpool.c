/* blockpool.c: the fixed-size block pool, as paged-KV servers hold their KV
 * cache: N equal blocks carved from one reservation.
 *
 * Creation does all the driver work at once — cuMemAddressReserve of
 * round_up(N * block_size, granularity), one cuMemCreate of that size, one
 * cuMemMap, one cuMemSetAccess — so alloc and free never call the driver:
 * they pop and push block indexes on a LIFO free list (O(1), deterministic:
 * the first alloc gets block 0, a freed block is the next one handed out).
 * A bitmap of allocated blocks refuses double frees.  Block events go to the
 * recorder like the caching allocator's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "memsnap/memsnap.h"

struct memsnap_blockpool {
    pthread_mutex_t lock;
    memsnap_alloc_driver drv;
    int device;
    CUcontext ctx;
    int ctx_retained;
    uint64_t block_size, nblocks, nfree;
    uint64_t gran, va_size;
    CUdeviceptr base;
    CUmemGenericAllocationHandle handle;
    int mapped;
    uint32_t *free_list; /* stack of free indexes; top = free_list[nfree - 1] */
    uint8_t *used;       /* 1 = allocated */
    ms_trace_fn trace;
};

static int ms_pool_ctx_enter(memsnap_blockpool *p, int *pushed)
{
    *pushed = 0;
    CUcontext cur = NULL;
    CUresult rc = p->drv.cuCtxGetCurrent(&cur);
    if (rc != CUDA_SUCCESS)
        return ms_driver_error(&p->drv, "cuCtxGetCurrent", rc);
    if (cur == p->ctx)
        return MEMSNAP_ALLOC_OK;
    if ((rc = p->drv.cuCtxPushCurrent_v2(p->ctx)) != CUDA_SUCCESS)
        return ms_driver_error(&p->drv, "cuCtxPushCurrent", rc);
    *pushed = 1;
    return MEMSNAP_ALLOC_OK;
}

static void ms_pool_ctx_leave(memsnap_blockpool *p, int pushed)
{
    CUcontext dummy;
    if (pushed)
        p->drv.cuCtxPopCurrent_v2(&dummy);
}

/* What a teardown could not give back because the driver refused (a failed
 * creation, or a destroy, while the driver fails): kept here, process-wide,
 * and retried at the next create or destroy, so nothing is lost for good. */
typedef struct orphan {
    memsnap_alloc_driver drv;
    CUcontext ctx;
    CUdeviceptr base;
    uint64_t va_size;
    CUmemGenericAllocationHandle handle;
    int mapped;
} orphan;
static orphan *g_orphans;
static size_t g_norphans, g_orphans_cap;
static pthread_mutex_t g_orphans_lock = PTHREAD_MUTEX_INITIALIZER;

/* Gives back what it can of o; returns 1 when nothing is left. */
static int ms_orphan_release(orphan *o)
{
    if (o->mapped && o->drv.cuMemUnmap(o->base, o->va_size) == CUDA_SUCCESS)
        o->mapped = 0;
    if (!o->mapped && o->handle && o->drv.cuMemRelease(o->handle) == CUDA_SUCCESS)
        o->handle = 0;
    if (!o->mapped && o->base && o->drv.cuMemAddressFree(o->base, o->va_size) == CUDA_SUCCESS)
        o->base = 0;
    return !o->mapped && !o->handle && !o->base;
}

static void ms_orphans_retry(void)
{
    pthread_mutex_lock(&g_orphans_lock);
    size_t keep = 0;
    for (size_t i = 0; i < g_norphans; i++) {
        orphan o = g_orphans[i];
        CUcontext cur = NULL;
        int pushed = o.drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != o.ctx &&
                     o.drv.cuCtxPushCurrent_v2(o.ctx) == CUDA_SUCCESS;
        int done = ms_orphan_release(&o);
        if (pushed) {
            CUcontext dummy;
            o.drv.cuCtxPopCurrent_v2(&dummy);
        }
        if (!done)
            g_orphans[keep++] = o;
    }
    g_norphans = keep;
    pthread_mutex_unlock(&g_orphans_lock);
}

/* Undoes what creation did, in reverse; what the driver refuses becomes an
 * orphan.  Context entered by the caller. */
static void ms_pool_teardown(memsnap_blockpool *p)
{
    orphan o = {p->drv, p->ctx, p->base, p->va_size, p->handle, p->mapped};
    if (!ms_orphan_release(&o)) {
        pthread_mutex_lock(&g_orphans_lock);
        if (g_norphans == g_orphans_cap) {
            size_t cap = g_orphans_cap ? g_orphans_cap * 2 : 8;
            orphan *n = realloc(g_orphans, cap * sizeof *n);
            if (n) {
                g_orphans = n;
                g_orphans_cap = cap;
            }
        }
        if (g_norphans < g_orphans_cap)
            g_orphans[g_norphans++] = o;
        pthread_mutex_unlock(&g_orphans_lock);
    }
    p->mapped = 0;
    p->handle = 0;
    p->base = 0;
}

MS_EXPORT int memsnap_blockpool_create(int device, size_t block_size, size_t nblocks,
                                       const memsnap_alloc_driver *drv, memsnap_blockpool **out)
{
    if (!out || block_size == 0 || nblocks == 0 || nblocks > UINT32_MAX ||
        block_size > (1ull << 40)) {
        ms_set_error("memsnap_blockpool_create: need block_size > 0 and 0 < nblocks < 2^32");
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    *out = NULL;
    if (__atomic_load_n(&g_norphans, __ATOMIC_RELAXED))
        ms_orphans_retry();
    memsnap_blockpool *p = calloc(1, sizeof *p);
    /* A plain mutex: the pool's critical section is a list pop, and spinning
     * made 8 threads slower on the H200 host (docs/benchmarks.md). */
    if (!p || pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        ms_set_error("memsnap_blockpool_create: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    p->drv = drv ? *drv : *memsnap_alloc_driver_default();
    p->device = device;
    p->block_size = ms_align_up(block_size, MS_MIN_BLOCK);
    p->nblocks = nblocks;
    p->free_list = malloc(nblocks * sizeof *p->free_list);
    p->used = calloc(nblocks, 1);
    int rc = MEMSNAP_ALLOC_OK, pushed = 0, entered = 0;
    CUresult cr;
    if (!p->free_list || !p->used) {
        ms_set_error("memsnap_blockpool_create: out of host memory");
        rc = MEMSNAP_ALLOC_ERR_NOMEM;
        goto err;
    }
    if ((rc = ms_driver_check(&p->drv, "memsnap_blockpool_create")) != MEMSNAP_ALLOC_OK)
        goto err;
    if ((cr = p->drv.cuInit(0)) != CUDA_SUCCESS) {
        rc = ms_driver_error(&p->drv, "cuInit", cr);
        goto err;
    }
    if ((rc = ms_ctx_acquire(&p->drv, device, &p->ctx, &p->ctx_retained)) != MEMSNAP_ALLOC_OK)
        goto err;
    if ((rc = ms_pool_ctx_enter(p, &pushed)) != MEMSNAP_ALLOC_OK)
        goto err;
    entered = 1;
    CUmemAllocationProp prop = ms_device_prop(device);
    size_t g = 0;
    if ((rc = ms_vmm_granularity(&p->drv, device, &g)) != MEMSNAP_ALLOC_OK)
        goto err;
    p->gran = g ? g : (2ull << 20);
    p->va_size = ms_align_up(p->block_size * nblocks, p->gran);
    if ((cr = p->drv.cuMemAddressReserve(&p->base, p->va_size, p->gran, 0, 0)) != CUDA_SUCCESS) {
        p->base = 0;
        rc = ms_driver_error(&p->drv, "cuMemAddressReserve", cr);
        goto err;
    }
    if ((cr = p->drv.cuMemCreate(&p->handle, p->va_size, &prop, 0)) != CUDA_SUCCESS) {
        p->handle = 0;
        rc = ms_driver_error(&p->drv, "cuMemCreate", cr);
        goto err;
    }
    if ((cr = p->drv.cuMemMap(p->base, p->va_size, 0, p->handle, 0)) != CUDA_SUCCESS) {
        rc = ms_driver_error(&p->drv, "cuMemMap", cr);
        goto err;
    }
    p->mapped = 1;
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((cr = p->drv.cuMemSetAccess(p->base, p->va_size, &desc, 1)) != CUDA_SUCCESS) {
        rc = ms_driver_error(&p->drv, "cuMemSetAccess", cr);
        goto err;
    }
    ms_pool_ctx_leave(p, pushed);
    /* LIFO with block 0 on top. */
    for (uint64_t i = 0; i < nblocks; i++)
        p->free_list[i] = (uint32_t)(nblocks - 1 - i);
    p->nfree = nblocks;
    ms_annotate_fn annotate;
    ms_find_hooks(&p->trace, &annotate);
    *out = p;
    return MEMSNAP_ALLOC_OK;
err:
    ms_pool_teardown(p);
    if (entered)
        ms_pool_ctx_leave(p, pushed);
    if (p->ctx_retained)
        p->drv.cuDevicePrimaryCtxRelease_v2(device);
    free(p->free_list);
    free(p->used);
    pthread_mutex_destroy(&p->lock);
    free(p);
    return rc;
}

MS_EXPORT void memsnap_blockpool_destroy(memsnap_blockpool *p)
{
    if (!p)
        return;
    int pushed = 0;
    int entered = ms_pool_ctx_enter(p, &pushed) == MEMSNAP_ALLOC_OK;
    ms_pool_teardown(p);
    if (entered)
        ms_pool_ctx_leave(p, pushed);
    if (p->ctx_retained)
        p->drv.cuDevicePrimaryCtxRelease_v2(p->device);
    free(p->free_list);
    free(p->used);
    pthread_mutex_destroy(&p->lock);
    free(p);
    if (__atomic_load_n(&g_norphans, __ATOMIC_RELAXED))
        ms_orphans_retry();
}

MS_EXPORT int memsnap_blockpool_alloc(memsnap_blockpool *p, CUdeviceptr *out)
{
    pthread_mutex_lock(&p->lock);
    if (!p->nfree) {
        pthread_mutex_unlock(&p->lock);
        char h[32];
        ms_set_error("memsnap_blockpool: out of memory on device %d: all %llu blocks of %s in use",
                     p->device, (unsigned long long)p->nblocks,
                     ms_human(p->block_size, h, sizeof h));
        return MEMSNAP_ALLOC_ERR_OOM;
    }
    uint32_t i = p->free_list[--p->nfree];
    p->used[i] = 1;
    *out = p->base + (uint64_t)i * p->block_size;
    if (p->trace)
        p->trace(MEMSNAP_TRACE_BLOCK_ALLOC, p->device, *out, p->block_size, 0);
    pthread_mutex_unlock(&p->lock);
    return MEMSNAP_ALLOC_OK;
}

static long ms_index_of(memsnap_blockpool *p, CUdeviceptr ptr)
{
    if (ptr < p->base)
        return -1;
    uint64_t off = ptr - p->base;
    if (off % p->block_size || off / p->block_size >= p->nblocks)
        return -1;
    return (long)(off / p->block_size);
}

MS_EXPORT int memsnap_blockpool_free(memsnap_blockpool *p, CUdeviceptr ptr)
{
    pthread_mutex_lock(&p->lock);
    long i = ms_index_of(p, ptr);
    if (i < 0 || !p->used[i]) {
        pthread_mutex_unlock(&p->lock);
        ms_set_error("memsnap_blockpool_free: 0x%llx is not an allocated block of this pool",
                     (unsigned long long)ptr);
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    if (p->trace)
        p->trace(MEMSNAP_TRACE_BLOCK_FREE, p->device, ptr, p->block_size, 0);
    p->used[i] = 0;
    p->free_list[p->nfree++] = (uint32_t)i;
    pthread_mutex_unlock(&p->lock);
    return MEMSNAP_ALLOC_OK;
}

MS_EXPORT long memsnap_blockpool_index(memsnap_blockpool *p, CUdeviceptr ptr)
{
    return ms_index_of(p, ptr);
}

MS_EXPORT CUdeviceptr memsnap_blockpool_ptr(memsnap_blockpool *p, size_t i)
{
    return i < p->nblocks ? p->base + (uint64_t)i * p->block_size : 0;
}

MS_EXPORT void memsnap_blockpool_stats_get(memsnap_blockpool *p, memsnap_blockpool_stats *out)
{
    pthread_mutex_lock(&p->lock);
    out->block_size = p->block_size;
    out->nblocks = p->nblocks;
    out->nfree = p->nfree;
    out->reserved = p->va_size;
    out->base = p->base;
    pthread_mutex_unlock(&p->lock);
}

MS_EXPORT int memsnap_blockpool_check(memsnap_blockpool *p, char *msg, size_t msglen)
{
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    uint8_t *seen = calloc(p->nblocks, 1);
    uint64_t used = 0;
    for (uint64_t i = 0; i < p->nblocks; i++)
        used += p->used[i];
    if (used + p->nfree != p->nblocks) {
        snprintf(msg, msglen, "blockpool: %llu used + %llu free != %llu blocks",
                 (unsigned long long)used, (unsigned long long)p->nfree,
                 (unsigned long long)p->nblocks);
        rc = -1;
    }
    for (uint64_t k = 0; rc == 0 && seen && k < p->nfree; k++) {
        uint32_t i = p->free_list[k];
        if (i >= p->nblocks || seen[i] || p->used[i]) {
            snprintf(msg, msglen, "blockpool: free list entry %llu (block %u) is bad",
                     (unsigned long long)k, i);
            rc = -1;
        } else {
            seen[i] = 1;
        }
    }
    free(seen);
    pthread_mutex_unlock(&p->lock);
    if (rc == 0 && msg && msglen)
        msg[0] = 0;
    return rc;
}

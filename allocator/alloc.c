/* alloc.c: the public API of the caching allocator.
 *
 * malloc has one fast path and one slow path:
 *
 *   fast:  round the size, pick the pool, best fit among the stream's FREE
 *          blocks and the ANY blocks, split, record in the pointer map.  No
 *          driver call.  (Pending record_stream events are polled first, but
 *          only while there are some.)
 *   slow:  (1) other streams' FREE blocks whose events have completed become
 *          ANY; retry the fit.  (2) garbage_collection_threshold: release
 *          free segments/pages down to the threshold.  (3) grow: a new fixed
 *          segment, or pages mapped in the stream's expandable segment.
 *          (4) if that is out of memory (driver or device_limit): synchronize,
 *          release every cached segment/page, retry the fit and the grow
 *          once.  (5) fail: MEMSNAP_ALLOC_ERR_OOM with a message naming the
 *          request, allocated, reserved, cached and the device's free memory,
 *          also sent to the recorder as an annotation.
 *
 * free: pointer map -> block; trace the free first (the address may be
 * reused as soon as the lock is dropped); FREE for its stream, or PENDING when
 * record_stream named other streams.
 *
 * One mutex guards everything; the trace hook is called under it so the
 * recorder never sees a reuse before the free that allowed it.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "memsnap/memsnap.h"

/* The allocator's one lock is held for ~100 ns per call: an adaptive mutex
 * spins a little before sleeping, so threads contending for it hand it over
 * without a futex round trip each time. */
MS_HIDDEN int ms_lock_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t at;
    if (pthread_mutexattr_init(&at) != 0)
        return pthread_mutex_init(m, NULL);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ADAPTIVE_NP);
    int rc = pthread_mutex_init(m, &at);
    pthread_mutexattr_destroy(&at);
    return rc;
}

static int ms_alloc_lock_init(memsnap_alloc *a)
{
    return ms_lock_init(&a->lock);
}

MS_EXPORT int memsnap_alloc_create(const memsnap_alloc_config *cfg, int device,
                                   const memsnap_alloc_driver *drv, memsnap_alloc **out)
{
    if (!out) {
        ms_set_error("memsnap_alloc_create: out is NULL");
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    *out = NULL;
    memsnap_alloc *a = calloc(1, sizeof *a);
    if (!a || ms_alloc_lock_init(a) != 0) {
        free(a);
        ms_set_error("memsnap_alloc_create: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    if (cfg)
        a->cfg = *cfg;
    else
        memsnap_alloc_config_default(&a->cfg);
    a->drv = drv ? *drv : *memsnap_alloc_driver_default();
    a->device = device;
    a->prio_state = 2463534242u;
    a->gran = 2ull << 20;
    a->map_cap = 1024;
    a->map = calloc(a->map_cap, sizeof *a->map);
    int rc = MEMSNAP_ALLOC_OK, pushed = 0, entered = 0;
    if (!a->map) {
        ms_set_error("memsnap_alloc_create: out of host memory");
        rc = MEMSNAP_ALLOC_ERR_NOMEM;
        goto err;
    }
    if ((rc = ms_driver_check(&a->drv, "memsnap_alloc_create")) != MEMSNAP_ALLOC_OK)
        goto err;
    CUresult cr = a->drv.cuInit(0);
    if (cr != CUDA_SUCCESS) {
        rc = ms_driver_error(&a->drv, "cuInit", cr);
        goto err;
    }
    if ((rc = ms_ctx_acquire(&a->drv, device, &a->ctx, &a->ctx_retained)) != MEMSNAP_ALLOC_OK)
        goto err;
    if ((rc = ms_ctx_enter(a, &pushed)) != MEMSNAP_ALLOC_OK)
        goto err;
    entered = 1;
    size_t total = 0;
    if ((cr = a->drv.cuDeviceTotalMem_v2(&total, device)) != CUDA_SUCCESS) {
        rc = ms_driver_error(&a->drv, "cuDeviceTotalMem", cr);
        goto err;
    }
    a->device_total = total;
    a->limit = a->cfg.device_limit ? a->cfg.device_limit : total;
    if (a->cfg.mode == MEMSNAP_ALLOC_EXPANDABLE) {
        size_t g = 0;
        if ((rc = ms_vmm_granularity(&a->drv, device, &g)) != MEMSNAP_ALLOC_OK)
            goto err;
        if (g == 0 || g % MS_MIN_BLOCK) {
            ms_set_error("memsnap_alloc_create: unusable VMM granularity %zu", g);
            rc = MEMSNAP_ALLOC_ERR_DRIVER;
            goto err;
        }
        a->gran = g;
        /* Default: four times the usable memory.  Address space is cheap, and
         * with only as much address space as memory, long runs of growing
         * buffers fragment the address range itself (seen by the decode
         * workload and by replay: an OOM with a third of the memory free). */
        a->exp_va = ms_align_up(a->cfg.expandable_va ? a->cfg.expandable_va : 4 * a->limit, g);
    }
    ms_ctx_leave(a, pushed);
    if (a->cfg.trace)
        ms_find_hooks(&a->trace, &a->annotate);
    *out = a;
    return MEMSNAP_ALLOC_OK;
err:
    if (entered)
        ms_ctx_leave(a, pushed);
    if (a->ctx_retained)
        a->drv.cuDevicePrimaryCtxRelease_v2(device);
    free(a->map);
    pthread_mutex_destroy(&a->lock);
    free(a);
    return rc;
}

MS_EXPORT void memsnap_alloc_destroy(memsnap_alloc *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    int pushed = 0;
    int entered = ms_ctx_enter(a, &pushed) == MEMSNAP_ALLOC_OK;
    /* Work still queued may use the memory: unmapping (unlike cuMemFree) does
     * not wait for it. */
    if (entered && a->st.segments)
        a->drv.cuCtxSynchronize();
    ms_events_destroy(a);
    ms_segment *s = a->seg_head, *nx;
    for (; s; s = nx) {
        nx = s->next_seg;
        if (s->expandable) {
            ms_exp_destroy(a, s);
        } else {
            a->drv.cuMemFree_v2(s->base);
            ms_block *b = s->first, *bn;
            for (; b; b = bn) {
                bn = b->next;
                ms_block_delete(a, b);
            }
            free(s);
        }
    }
    if (a->nzombies)
        ms_release_zombies(a);
    if (entered)
        ms_ctx_leave(a, pushed);
    if (a->ctx_retained)
        a->drv.cuDevicePrimaryCtxRelease_v2(a->device);
    while (a->spare) {
        ms_block *b = a->spare;
        a->spare = b->hnext;
        free(b);
    }
    free(a->map);
    free(a->streams);
    free(a->pending);
    free(a->events);
    free(a->zombies);
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* Synchronizes, then gives back free segments/pages until `target` bytes
 * are released (0 = all).  Context entered by the caller. */
int ms_release_cached(memsnap_alloc *a, uint64_t target, int gc)
{
    if (a->st.reserved == a->st.active && !a->npending && !a->nzombies)
        return MEMSNAP_ALLOC_OK; /* nothing cached: no need to synchronize */
    CUresult cr = a->drv.cuCtxSynchronize();
    if (cr != CUDA_SUCCESS)
        return ms_driver_error(&a->drv, "cuCtxSynchronize", cr);
    ms_process_events(a, 1);
    ms_all_free_to_any(a);
    uint64_t released = 0;
    uint64_t segs = a->st.segments, pages = a->st.driver_unmaps;
    int rc = ms_fixed_release(a, target, &released);
    if (rc == MEMSNAP_ALLOC_OK)
        rc = ms_exp_release(a, target, &released);
    if (gc)
        a->st.gc_releases += (segs - a->st.segments) + (a->st.driver_unmaps - pages);
    return rc;
}

static int ms_grow(memsnap_alloc *a, int si, int pool, uint64_t n, ms_block **b)
{
    if (a->cfg.mode == MEMSNAP_ALLOC_EXPANDABLE)
        return ms_exp_grow(a, si, pool, n, b);
    return ms_fixed_grow(a, si, pool, n, b);
}

static void ms_oom_message(memsnap_alloc *a, uint64_t size, uint64_t n)
{
    char cause[512], h[6][32];
    snprintf(cause, sizeof cause, "%s", memsnap_alloc_error());
    size_t fr = 0, tot = 0;
    int have_info = a->drv.cuMemGetInfo_v2(&fr, &tot) == CUDA_SUCCESS;
    char info[96];
    if (have_info)
        snprintf(info, sizeof info, "%s of %s", ms_human(fr, h[4], 32), ms_human(tot, h[5], 32));
    else
        snprintf(info, sizeof info, "unknown");
    char lim[64] = "";
    if (a->cfg.device_limit)
        snprintf(lim, sizeof lim, ", device_limit %s", ms_human(a->limit, h[5], 32));
    ms_set_error("memsnap_alloc: out of memory on device %d: tried to allocate %s (%llu bytes "
                 "requested); allocated %s, reserved %s (cached %s), device free %s%s. Cause: %s",
                 a->device, ms_human(n, h[0], 32), (unsigned long long)size,
                 ms_human(a->st.allocated, h[1], 32), ms_human(a->st.reserved, h[2], 32),
                 ms_human(a->st.reserved - a->st.active, h[3], 32), info, lim, cause);
}

static int ms_slow_path(memsnap_alloc *a, int si, int pool, uint64_t n, uint64_t size,
                        ms_block **out)
{
    int pushed = 0, rc = ms_ctx_enter(a, &pushed);
    if (rc != MEMSNAP_ALLOC_OK)
        return rc;
    ms_block *b = NULL;
    if (a->nstreams > 1) {
        ms_reclaim(a, si, 0);
        if ((b = ms_find_free(a, si, pool, n)))
            goto done;
    }
    if (a->cfg.gc_threshold > 0) {
        uint64_t goal = (uint64_t)(a->cfg.gc_threshold * (double)a->limit);
        if (a->st.reserved + n > goal && a->st.reserved > a->st.active) {
            uint64_t target = a->st.reserved + n - goal;
            ms_release_cached(a, target, 1); /* best effort */
            if ((b = ms_find_free(a, si, pool, n)))
                goto done;
        }
    }
    rc = ms_grow(a, si, pool, n, &b);
    if (rc == MEMSNAP_ALLOC_ERR_OOM) {
        char first[512];
        snprintf(first, sizeof first, "%s", memsnap_alloc_error());
        a->st.oom_retries++;
        int rr = ms_release_cached(a, 0, 0);
        if ((b = ms_find_free(a, si, pool, n)))
            rc = MEMSNAP_ALLOC_OK;
        else if (rr == MEMSNAP_ALLOC_OK)
            rc = ms_grow(a, si, pool, n, &b);
        else
            ms_set_error("%s", first);
        if (rc == MEMSNAP_ALLOC_ERR_OOM) {
            a->st.oom_count++;
            ms_oom_message(a, size, n);
        }
    }
done:
    ms_ctx_leave(a, pushed);
    *out = b;
    return rc;
}

MS_EXPORT int memsnap_alloc_malloc(memsnap_alloc *a, size_t size, CUstream stream,
                                   CUdeviceptr *out)
{
    if (!a || !out) {
        ms_set_error("memsnap_alloc_malloc: NULL argument");
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    *out = 0;
    if (size > (1ull << 56)) {
        ms_set_error("memsnap_alloc: out of memory on device %d: request of %llu bytes is "
                     "larger than any device", a->device, (unsigned long long)size);
        return MEMSNAP_ALLOC_ERR_OOM;
    }
    uint64_t n = ms_round_size(&a->cfg, size ? size : 1);
    int pool = ms_pool_of(n), rc = MEMSNAP_ALLOC_OK;
    pthread_mutex_lock(&a->lock);
    if (a->npending)
        ms_process_events(a, 0);
    int si = ms_stream_index(a, stream);
    if (si < 0) {
        pthread_mutex_unlock(&a->lock);
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    ms_block *b = ms_find_free(a, si, pool, n);
    if (b)
        a->st.cache_hits++;
    else
        rc = ms_slow_path(a, si, pool, n, size, &b);
    if (rc == MEMSNAP_ALLOC_OK) {
        ms_take(a, b, n, size ? size : 1, si);
        a->st.malloc_calls++;
        *out = b->addr;
        if (a->trace)
            a->trace(MEMSNAP_TRACE_BLOCK_ALLOC, a->device, b->addr, b->size,
                     (uint64_t)(uintptr_t)stream);
    }
    ms_annotate_fn annotate = rc == MEMSNAP_ALLOC_ERR_OOM ? a->annotate : NULL;
    ms_trace_fn trace = rc == MEMSNAP_ALLOC_ERR_OOM ? a->trace : NULL;
    pthread_mutex_unlock(&a->lock);
    if (trace)   /* an "oom" event, then the allocator's message as a mark */
        trace(MEMSNAP_TRACE_OOM, a->device, 0, size, (uint64_t)(uintptr_t)stream);
    if (annotate)
        annotate(memsnap_alloc_error());
    return rc;
}

MS_EXPORT int memsnap_alloc_free(memsnap_alloc *a, CUdeviceptr ptr)
{
    if (!a) {
        ms_set_error("memsnap_alloc_free: NULL allocator");
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    pthread_mutex_lock(&a->lock);
    ms_block *b = ms_map_remove(a, ptr);
    if (!b) {
        pthread_mutex_unlock(&a->lock);
        ms_set_error("memsnap_alloc_free: 0x%llx was not allocated by this allocator "
                     "(or was freed already)", (unsigned long long)ptr);
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    if (a->trace)
        a->trace(MEMSNAP_TRACE_BLOCK_FREE, a->device, b->addr, b->size,
                 (uint64_t)(uintptr_t)a->streams[b->stream].stream);
    a->st.allocated -= b->size;
    a->st.requested -= b->requested;
    a->st.free_calls++;
    int rc = MEMSNAP_ALLOC_OK;
    if (b->nuses && ms_pending_add(a, b) == MEMSNAP_ALLOC_OK) {
        /* PENDING: stays active until its events complete */
    } else {
        if (b->nuses) {
            /* No host memory for the pending entries: wait for the streams
             * instead (a driver call, but correct). */
            int pushed = 0;
            if (ms_ctx_enter(a, &pushed) == MEMSNAP_ALLOC_OK) {
                for (int i = 0; i < b->nuses; i++)
                    a->drv.cuStreamSynchronize(a->streams[b->uses[i]].stream);
                ms_ctx_leave(a, pushed);
            }
        }
        a->st.active -= b->size;
        a->st.active_blocks--;
        b->seg->nactive--;
        ms_make_free(a, b, b->stream, ++a->free_seq);
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

MS_EXPORT int memsnap_alloc_record_stream(memsnap_alloc *a, CUdeviceptr ptr, CUstream stream)
{
    if (!a) {
        ms_set_error("memsnap_alloc_record_stream: NULL allocator");
        return MEMSNAP_ALLOC_ERR_INVALID;
    }
    pthread_mutex_lock(&a->lock);
    int rc = MEMSNAP_ALLOC_OK;
    ms_block *b = ms_map_find(a, ptr);
    int si = b ? ms_stream_index(a, stream) : -1;
    if (!b) {
        ms_set_error("memsnap_alloc_record_stream: 0x%llx is not an allocated block",
                     (unsigned long long)ptr);
        rc = MEMSNAP_ALLOC_ERR_INVALID;
    } else if (si < 0) {
        rc = MEMSNAP_ALLOC_ERR_NOMEM;
    } else if (si != b->stream) {
        int i;
        for (i = 0; i < b->nuses && b->uses[i] != si; i++)
            ;
        if (i == b->nuses) {
            if (b->nuses == b->uses_cap) {
                int cap = b->uses_cap ? b->uses_cap * 2 : 4;
                int *u = realloc(b->uses, (size_t)cap * sizeof *u);
                if (!u) {
                    ms_set_error("memsnap_alloc: out of host memory");
                    rc = MEMSNAP_ALLOC_ERR_NOMEM;
                    goto out;
                }
                b->uses = u;
                b->uses_cap = cap;
            }
            b->uses[b->nuses++] = si;
        }
    }
out:
    pthread_mutex_unlock(&a->lock);
    return rc;
}

MS_EXPORT int memsnap_alloc_empty_cache(memsnap_alloc *a)
{
    if (!a)
        return MEMSNAP_ALLOC_ERR_INVALID;
    pthread_mutex_lock(&a->lock);
    int pushed = 0, rc = ms_ctx_enter(a, &pushed);
    if (rc == MEMSNAP_ALLOC_OK) {
        rc = ms_release_cached(a, 0, 0);
        ms_ctx_leave(a, pushed);
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

MS_EXPORT void memsnap_alloc_get_config(memsnap_alloc *a, memsnap_alloc_config *out)
{
    *out = a->cfg;
}

MS_EXPORT int memsnap_alloc_device(memsnap_alloc *a)
{
    return a->device;
}

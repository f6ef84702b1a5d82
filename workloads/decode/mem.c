/* mem.c: where the decode workload's device memory comes from.
 *
 *   cudamalloc  cuMemAlloc / cuMemFree for every buffer.  The cap
 *               (--device-mem) is our own accounting: before each cuMemAlloc
 *               we check live + n (rounded up to 512, as the driver charges)
 *               against it, so a 141 GB card behaves like an 80 GB one.
 *               Nothing is cached: reserved == allocated.
 *   fixed       libmemsnap_alloc with fixed segments, device_limit = cap.
 *   expandable  libmemsnap_alloc with expandable segments, device_limit = cap;
 *               the address space of each expandable segment is 4x the cap
 *               (unless MEMSNAP_ALLOC_CONF sets expandable_va), so that only
 *               physical pages, not the virtual range, can run out.
 *
 * MEMSNAP_ALLOC_CONF is read first (any key), then mode and device_limit are
 * set from the command line.  Paged KV comes from a memsnap_blockpool carved
 * out of the cap before the allocator sees it.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"

static uint64_t align_up(uint64_t n, uint64_t a)
{
    return (n + a - 1) / a * a;
}

int mem_init(mem_t *m, const options_t *o, CUdevice dev, uint64_t kv_pool_bytes,
             uint64_t kv_block_bytes)
{
    memset(m, 0, sizeof *m);
    m->kind = o->alloc;
    m->cap = o->device_mem;
    if (kv_pool_bytes) {
        size_t nblocks = kv_pool_bytes / kv_block_bytes;
        int rc = memsnap_blockpool_create((int)dev, kv_block_bytes, nblocks, NULL, &m->pool);
        if (rc != MEMSNAP_ALLOC_OK) {
            snprintf(m->err, sizeof m->err, "KV block pool (%zu blocks of %llu bytes): %s",
                     nblocks, (unsigned long long)kv_block_bytes, memsnap_alloc_error());
            return rc == MEMSNAP_ALLOC_ERR_OOM ? 1 : -1;
        }
        m->pool_block = kv_block_bytes;
    }
    if (m->kind == ALLOC_CUDAMALLOC)
        return 0;

    memsnap_alloc_config cfg;
    char err[256] = "";
    if (memsnap_alloc_config_from_env(&cfg, err, sizeof err) != MEMSNAP_ALLOC_OK) {
        snprintf(m->err, sizeof m->err, "%s", err);
        return -1;
    }
    cfg.mode = m->kind == ALLOC_EXPANDABLE ? MEMSNAP_ALLOC_EXPANDABLE : MEMSNAP_ALLOC_FIXED;
    uint64_t pool_reserved = m->pool ? align_up(kv_pool_bytes / kv_block_bytes * kv_block_bytes,
                                                2 * MiB)
                                     : 0;
    cfg.device_limit = m->cap > pool_reserved ? m->cap - pool_reserved : 2 * MiB;
    if (cfg.mode == MEMSNAP_ALLOC_EXPANDABLE && cfg.expandable_va == 0)
        cfg.expandable_va = align_up(4 * m->cap, 2 * MiB);
    int rc = memsnap_alloc_create(&cfg, (int)dev, NULL, &m->a);
    if (rc != MEMSNAP_ALLOC_OK) {
        snprintf(m->err, sizeof m->err, "memsnap_alloc_create: %s", memsnap_alloc_error());
        return rc == MEMSNAP_ALLOC_ERR_OOM ? 1 : -1;
    }
    return 0;
}

int mem_alloc(mem_t *m, size_t n, CUdeviceptr *p)
{
    if (m->kind == ALLOC_CUDAMALLOC) {
        uint64_t charged = align_up(n ? n : 1, 512);
        uint64_t held = m->cm_live;
        if (m->pool) {
            memsnap_blockpool_stats ps;
            memsnap_blockpool_stats_get(m->pool, &ps);
            held += ps.reserved;
        }
        if (held + charged > m->cap) {
            snprintf(m->err, sizeof m->err,
                     "cuMemAlloc of %zu bytes refused: %llu bytes live + %llu > cap %llu", n,
                     (unsigned long long)held, (unsigned long long)charged,
                     (unsigned long long)m->cap);
            return 1;
        }
        CUresult r = cuMemAlloc(p, n);
        if (r != CUDA_SUCCESS) {
            const char *s = NULL;
            cuGetErrorName(r, &s);
            snprintf(m->err, sizeof m->err, "cuMemAlloc of %zu bytes: %s", n, s ? s : "?");
            return r == CUDA_ERROR_OUT_OF_MEMORY ? 1 : -1;
        }
        m->cm_live += charged;
        if (m->cm_live > m->cm_peak)
            m->cm_peak = m->cm_live;
    } else {
        int rc = memsnap_alloc_malloc(m->a, n, NULL, p);
        if (rc != MEMSNAP_ALLOC_OK) {
            snprintf(m->err, sizeof m->err, "%s", memsnap_alloc_error());
            return rc == MEMSNAP_ALLOC_ERR_OOM ? 1 : -1;
        }
    }
    m->requested += n;
    if (m->requested > m->peak_requested)
        m->peak_requested = m->requested;
    m->live += align_up(n ? n : 1, 512);
    if (m->live + m->pool_used > m->peak_live)
        m->peak_live = m->live + m->pool_used;
    return 0;
}

void mem_free(mem_t *m, CUdeviceptr p, size_t n)
{
    if (!p)
        return;
    if (m->kind == ALLOC_CUDAMALLOC) {
        cuMemFree(p);
        m->cm_live -= align_up(n ? n : 1, 512);
    } else {
        memsnap_alloc_free(m->a, p);
    }
    m->requested -= n;
    m->live -= align_up(n ? n : 1, 512);
}

int mem_kv_block_alloc(mem_t *m, CUdeviceptr *p)
{
    int rc = memsnap_blockpool_alloc(m->pool, p);
    if (rc == MEMSNAP_ALLOC_OK) {
        m->pool_used += m->pool_block;
        if (m->live + m->pool_used > m->peak_live)
            m->peak_live = m->live + m->pool_used;
        return 0;
    }
    snprintf(m->err, sizeof m->err, "KV block pool: %s", memsnap_alloc_error());
    return rc == MEMSNAP_ALLOC_ERR_OOM ? 1 : -1;
}

void mem_kv_block_free(mem_t *m, CUdeviceptr p)
{
    if (memsnap_blockpool_free(m->pool, p) == MEMSNAP_ALLOC_OK)
        m->pool_used -= m->pool_block;
}

void mem_usage(mem_t *m, uint64_t *allocated, uint64_t *reserved, uint64_t *peak_alloc,
               uint64_t *peak_reserved)
{
    uint64_t al, re, pal, pre;
    if (m->kind == ALLOC_CUDAMALLOC) {
        al = re = m->cm_live;
        pal = pre = m->cm_peak;
    } else {
        memsnap_alloc_stats s;
        memsnap_alloc_stats_get(m->a, &s);
        al = s.allocated;
        re = s.reserved;
        pal = s.peak_allocated;
        pre = s.peak_reserved;
    }
    if (m->pool) {
        memsnap_blockpool_stats ps;
        memsnap_blockpool_stats_get(m->pool, &ps);
        uint64_t used = (ps.nblocks - ps.nfree) * ps.block_size;
        al += used;
        re += ps.reserved;
        pre += ps.reserved; /* the pool is reserved for the whole run */
    }
    /* the peak of allocator blocks + pool blocks, tracked on every call */
    if (m->peak_live > pal)
        pal = m->peak_live;
    *allocated = al;
    *reserved = re;
    *peak_alloc = pal;
    *peak_reserved = pre;
}

void mem_destroy(mem_t *m)
{
    memsnap_alloc_destroy(m->a);
    memsnap_blockpool_destroy(m->pool);
    m->a = NULL;
    m->pool = NULL;
}

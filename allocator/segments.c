/* segments.c: size classes, best fit, and fixed segments.
 *
 * Size classes (as PyTorch's caching allocator):
 *   request rounded up to 512 bytes (or to one of roundup_power2_divisions
 *   steps between two powers of two);
 *   <= 1 MiB: small pool, from 2 MiB segments;
 *   1 MiB < n < 10 MiB: large pool, a new segment is 20 MiB;
 *   >= 10 MiB: large pool, a new segment is n rounded up to 2 MiB.
 *
 * Best fit: the smallest FREE block >= n among the blocks the stream owns and
 * the ANY blocks (ties: oldest segment, lowest address).  max_split_size:
 * blocks that large (in fixed segments) are not split for smaller requests and
 * are reused for large requests only if at most 20 MiB too big.
 *
 * A fixed segment is one cuMemAlloc; it is returned with cuMemFree only
 * when none of its blocks is ALLOCATED or PENDING.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int ms_pool_of(uint64_t n)
{
    return n <= MS_SMALL_SIZE ? MS_POOL_SMALL : MS_POOL_LARGE;
}

uint64_t ms_round_size(const memsnap_alloc_config *cfg, uint64_t size)
{
    if (size <= MS_MIN_BLOCK)
        return MS_MIN_BLOCK;
    uint64_t d = cfg->roundup_power2_divisions;
    if (d > 1 && size > MS_MIN_BLOCK * d) {
        uint64_t floor2 = 1ull << (63 - __builtin_clzll(size));
        uint64_t step = floor2 / d;
        uint64_t r = (size + step - 1) & ~(step - 1);
        return ms_align_up(r, MS_MIN_BLOCK);
    }
    return ms_align_up(size, MS_MIN_BLOCK);
}

static int ms_acceptable(memsnap_alloc *a, const ms_block *b, int pool, uint64_t n)
{
    if (!b)
        return 0;
    /* max_split_size is about fixed segments, whose big blocks cannot give
     * memory back piecewise; an expandable segment's free tail is one big
     * block by design and is always split. */
    if (pool == MS_POOL_LARGE && !b->seg->expandable) {
        uint64_t ms = a->cfg.max_split_size;
        if (n < ms && b->size >= ms)
            return 0;
        if (n >= ms && b->size >= n + MS_OVERSIZE_SLACK)
            return 0;
    }
    return 1;
}

ms_block *ms_find_free(memsnap_alloc *a, int stream, int pool, uint64_t n)
{
    ms_block *own = ms_tree_lower_bound(a->streams[stream].free_root[pool], n);
    ms_block *any = ms_tree_lower_bound(a->any_root[pool], n);
    if (!ms_acceptable(a, own, pool, n))
        own = NULL;
    if (!ms_acceptable(a, any, pool, n))
        any = NULL;
    if (own && any)
        return ms_block_less(any, own) ? any : own;
    return own ? own : any;
}

void ms_segment_link(memsnap_alloc *a, ms_segment *s)
{
    s->seq = a->seg_seq++;
    s->prev_seg = a->seg_tail;
    s->next_seg = NULL;
    if (a->seg_tail)
        a->seg_tail->next_seg = s;
    else
        a->seg_head = s;
    a->seg_tail = s;
    a->st.segments++;
}

void ms_segment_unlink(memsnap_alloc *a, ms_segment *s)
{
    if (s->prev_seg)
        s->prev_seg->next_seg = s->next_seg;
    else
        a->seg_head = s->next_seg;
    if (s->next_seg)
        s->next_seg->prev_seg = s->prev_seg;
    else
        a->seg_tail = s->prev_seg;
    a->st.segments--;
}

void ms_reserved_add(memsnap_alloc *a, uint64_t bytes)
{
    a->st.reserved += bytes;
    if (a->st.reserved > a->st.peak_reserved)
        a->st.peak_reserved = a->st.reserved;
}

static uint64_t ms_segment_size(uint64_t n)
{
    if (n <= MS_SMALL_SIZE)
        return MS_SMALL_SEGMENT;
    if (n < MS_LARGE_MIN)
        return MS_MID_SEGMENT;
    return ms_align_up(n, MS_LARGE_ROUND);
}

int ms_fixed_grow(memsnap_alloc *a, int stream, int pool, uint64_t n, ms_block **out)
{
    uint64_t sz = ms_segment_size(n);
    char h1[32], h2[32], h3[32];
    if (a->cfg.device_limit && a->st.reserved + sz > a->limit) {
        ms_set_error("memsnap_alloc: device_limit %s reached (reserved %s, a new segment needs %s)",
                     ms_human(a->limit, h1, sizeof h1), ms_human(a->st.reserved, h2, sizeof h2),
                     ms_human(sz, h3, sizeof h3));
        return MEMSNAP_ALLOC_ERR_OOM;
    }
    ms_segment *s = calloc(1, sizeof *s);
    ms_block *b = ms_block_new(a);
    if (!s || !b) {
        free(s);
        if (b)
            ms_block_delete(a, b);
        ms_set_error("memsnap_alloc: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    CUdeviceptr ptr = 0;
    CUresult rc = a->drv.cuMemAlloc_v2(&ptr, sz);
    if (rc != CUDA_SUCCESS) {
        free(s);
        ms_block_delete(a, b);
        return ms_driver_error(&a->drv, "cuMemAlloc", rc);
    }
    a->st.driver_allocs++;
    s->base = ptr;
    s->size = sz;
    s->pool = pool;
    s->stream = stream;
    s->first = b;
    ms_segment_link(a, s);
    ms_reserved_add(a, sz);
    b->seg = s;
    b->addr = ptr;
    b->size = sz;
    b->state = MEMSNAP_BLOCK_FREE;
    b->owner = stream;
    b->free_seq = a->free_seq;
    ms_free_insert(a, b);
    *out = b;
    return MEMSNAP_ALLOC_OK;
}

int ms_fixed_release(memsnap_alloc *a, uint64_t target, uint64_t *released)
{
    ms_segment *s = a->seg_head, *nx;
    for (; s && (target == 0 || *released < target); s = nx) {
        nx = s->next_seg;
        if (s->expandable || s->nactive)
            continue;
        CUresult rc = a->drv.cuMemFree_v2(s->base);
        if (rc != CUDA_SUCCESS)
            return ms_driver_error(&a->drv, "cuMemFree", rc);
        a->st.driver_frees++;
        ms_block *b = s->first, *bn;
        for (; b; b = bn) {
            bn = b->next;
            ms_free_remove(a, b);
            ms_block_delete(a, b);
        }
        a->st.reserved -= s->size;
        *released += s->size;
        ms_segment_unlink(a, s);
        free(s);
    }
    return MEMSNAP_ALLOC_OK;
}

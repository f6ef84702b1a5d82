/* check.c: the invariant walker (include/memsnap/alloc.h lists the
 * invariants).  One pass over every segment and block, one over every free
 * tree, one over the pointer map and the pending list, then the counters are
 * compared with the recount.  O(blocks); the property test calls it after
 * every step.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    char *msg;
    size_t len;
    int failed;
} checker;

__attribute__((format(printf, 2, 3))) static void ms_fail(checker *c, const char *fmt, ...)
{
    if (c->failed++)
        return; /* keep the first */
    va_list ap;
    va_start(ap, fmt);
    if (c->msg && c->len)
        vsnprintf(c->msg, c->len, fmt, ap);
    va_end(ap);
}

#define ENSURE(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            ms_fail(c, __VA_ARGS__);                                                         \
            return;                                                                          \
        }                                                                                    \
    } while (0)

static uint64_t ms_tree_walk(checker *c, memsnap_alloc *a, ms_block *t, int owner, int pool,
                             const ms_block **prev, int depth)
{
    if (!t || c->failed)
        return 0;
    if (depth > 200) {
        ms_fail(c, "free tree deeper than 200 (a cycle?)");
        return 0;
    }
    uint64_t n = ms_tree_walk(c, a, t->left, owner, pool, prev, depth + 1);
    if (t->state != MEMSNAP_BLOCK_FREE)
        ms_fail(c, "block 0x%llx in a free tree is not FREE (state %d)",
                (unsigned long long)t->addr, t->state);
    if (t->owner != owner || t->seg->pool != pool)
        ms_fail(c, "block 0x%llx is in the tree of owner %d pool %d, but has owner %d pool %d",
                (unsigned long long)t->addr, owner, pool, t->owner, t->seg->pool);
    if (*prev && !ms_block_less(*prev, t))
        ms_fail(c, "free tree out of order at 0x%llx", (unsigned long long)t->addr);
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio))
        ms_fail(c, "free tree heap order broken at 0x%llx", (unsigned long long)t->addr);
    *prev = t;
    n++;
    n += ms_tree_walk(c, a, t->right, owner, pool, prev, depth + 1);
    return n;
}

static void ms_check_all(checker *c, memsnap_alloc *a)
{
    ms_counters r;
    memset(&r, 0, sizeof r);
    uint64_t nalloc = 0, largest = 0, nseg_prev_seq = 0;
    int first_seg = 1;
    for (ms_segment *s = a->seg_head; s; s = s->next_seg) {
        ENSURE(s->next_seg || s == a->seg_tail, "segment list tail is wrong");
        ENSURE(first_seg || s->seq > nseg_prev_seq, "segment numbers out of order");
        first_seg = 0;
        nseg_prev_seq = s->seq;
        r.segments++;
        ENSURE(s->size && s->base % MS_MIN_BLOCK == 0 && s->size % MS_MIN_BLOCK == 0,
               "segment 0x%llx: misaligned or empty", (unsigned long long)s->base);
        if (s->expandable)
            ENSURE(s->base % a->gran == 0 && s->size == s->npages * a->gran,
                   "expandable segment 0x%llx: not page aligned", (unsigned long long)s->base);
        uint64_t expect = s->base, nactive = 0;
        ms_block *prev = NULL, *unm = s->unmapped;
        size_t mapped_distinct = 0, last_page = (size_t)-1;
        for (ms_block *b = s->first; b; prev = b, b = b->next) {
            unsigned long long ad = b->addr;
            ENSURE(b->seg == s, "block 0x%llx: wrong segment", ad);
            ENSURE(b->prev == prev, "block 0x%llx: prev link broken", ad);
            ENSURE(b->addr == expect, "segment 0x%llx: gap or overlap at 0x%llx (block at 0x%llx)",
                   (unsigned long long)s->base, (unsigned long long)expect, ad);
            ENSURE(b->size && b->addr % MS_MIN_BLOCK == 0 && b->size % MS_MIN_BLOCK == 0,
                   "block 0x%llx: size %llu not a positive multiple of 512", ad,
                   (unsigned long long)b->size);
            ENSURE(b->addr + b->size <= s->base + s->size, "block 0x%llx runs past its segment",
                   ad);
            switch (b->state) {
            case MEMSNAP_BLOCK_ALLOCATED:
                ENSURE(ms_map_find(a, b->addr) == b, "allocated block 0x%llx not in the map", ad);
                ENSURE(b->requested <= b->size, "block 0x%llx: requested > size", ad);
                ENSURE(b->stream >= 0 && b->stream < a->nstreams, "block 0x%llx: bad stream", ad);
                r.allocated += b->size;
                r.requested += b->requested;
                r.active += b->size;
                r.active_blocks++;
                nactive++;
                nalloc++;
                break;
            case MEMSNAP_BLOCK_PENDING:
                ENSURE(ms_map_find(a, b->addr) != b, "pending block 0x%llx is in the map", ad);
                ENSURE(b->npending > 0, "pending block 0x%llx waits for no event", ad);
                r.active += b->size;
                r.active_blocks++;
                nactive++;
                break;
            case MEMSNAP_BLOCK_FREE:
                ENSURE(b->owner == MS_ANY || (b->owner >= 0 && b->owner < a->nstreams),
                       "free block 0x%llx: bad owner %d", ad, b->owner);
                ENSURE(ms_tree_contains(*ms_free_root(a, b->owner, s->pool), b),
                       "free block 0x%llx is not in its free tree", ad);
                ENSURE(!prev || prev->state != MEMSNAP_BLOCK_FREE || prev->owner != b->owner,
                       "free blocks 0x%llx and 0x%llx (same owner) were not merged",
                       (unsigned long long)prev->addr, ad);
                r.free_blocks++;
                if (b->size > largest)
                    largest = b->size;
                break;
            case MEMSNAP_BLOCK_UNMAPPED:
                ENSURE(s->expandable, "unmapped block 0x%llx in a fixed segment", ad);
                ENSURE(b->addr % a->gran == 0 && b->size % a->gran == 0,
                       "unmapped block 0x%llx not page aligned", ad);
                ENSURE(!prev || prev->state != MEMSNAP_BLOCK_UNMAPPED,
                       "unmapped blocks 0x%llx and 0x%llx were not merged",
                       (unsigned long long)prev->addr, ad);
                ENSURE(unm == b, "unmapped list out of step at 0x%llx", ad);
                unm = b->right;
                break;
            default:
                ENSURE(0, "block 0x%llx: bad state %d", ad, b->state);
            }
            if (s->expandable) {
                size_t p0 = (size_t)((b->addr - s->base) / a->gran);
                size_t p1 = (size_t)((b->addr + b->size - 1 - s->base) / a->gran);
                if (b->state == MEMSNAP_BLOCK_UNMAPPED) {
                    /* Its ends; the count below covers the middle. */
                    ENSURE(!s->pages[p0] && !s->pages[p1],
                           "a page under unmapped block 0x%llx is mapped", ad);
                } else {
                    for (size_t p = p0; p <= p1; p++) {
                        ENSURE(s->pages[p], "page %zu under block 0x%llx (state %d) is not mapped",
                               p, ad, b->state);
                        if (p != last_page)
                            mapped_distinct++;
                        last_page = p;
                    }
                }
            }
            expect = b->addr + b->size;
        }
        ENSURE(expect == s->base + s->size, "segment 0x%llx: blocks end at 0x%llx, not at its end",
               (unsigned long long)s->base, (unsigned long long)expect);
        ENSURE(!unm, "unmapped list has blocks not in segment 0x%llx", (unsigned long long)s->base);
        ENSURE(nactive == s->nactive, "segment 0x%llx: %llu active blocks, counted %llu",
               (unsigned long long)s->base, (unsigned long long)s->nactive,
               (unsigned long long)nactive);
        if (s->expandable) {
            /* Pages under mapped blocks are all mapped (checked above); the
             * counter of mapped pages equals their number, so no page under an
             * UNMAPPED block is mapped.  (A full scan of pages[] would cost
             * O(reservation) per check.) */
            ENSURE(mapped_distinct == s->mapped_pages,
                   "segment 0x%llx: %zu pages under mapped blocks, counter %zu",
                   (unsigned long long)s->base, mapped_distinct, s->mapped_pages);
            r.mapped_pages += mapped_distinct;
            r.reserved += mapped_distinct * a->gran;
        } else {
            r.reserved += s->size;
        }
    }
    /* Segments never overlap (the driver's job, but a cheap check of ours). */
    for (ms_segment *s = a->seg_head; s; s = s->next_seg)
        for (ms_segment *t = s->next_seg; t; t = t->next_seg)
            ENSURE(s->base + s->size <= t->base || t->base + t->size <= s->base,
                   "segments 0x%llx and 0x%llx overlap", (unsigned long long)s->base,
                   (unsigned long long)t->base);

    /* Trees: every node FREE, right owner and pool, ordered, heap ordered. */
    uint64_t in_trees = 0;
    for (int p = 0; p < MS_POOLS; p++) {
        const ms_block *pv = NULL;
        in_trees += ms_tree_walk(c, a, a->any_root[p], MS_ANY, p, &pv, 0);
        for (int i = 0; i < a->nstreams; i++) {
            pv = NULL;
            in_trees += ms_tree_walk(c, a, a->streams[i].free_root[p], i, p, &pv, 0);
        }
    }
    if (c->failed)
        return;
    ENSURE(in_trees == r.free_blocks, "free trees hold %llu blocks, segments %llu FREE",
           (unsigned long long)in_trees, (unsigned long long)r.free_blocks);
    for (int i = 0; i < a->nstreams; i++) {
        uint64_t n = 0;
        for (int p = 0; p < MS_POOLS; p++) {
            const ms_block *pv = NULL;
            n += ms_tree_walk(c, a, a->streams[i].free_root[p], i, p, &pv, 0);
        }
        ENSURE(n == a->streams[i].nfree, "stream %d: nfree %llu, tree holds %llu", i,
               (unsigned long long)a->streams[i].nfree, (unsigned long long)n);
    }
    ENSURE(nalloc == a->map_n, "pointer map holds %zu blocks, %llu are ALLOCATED", a->map_n,
           (unsigned long long)nalloc);
    for (size_t i = 0; i < a->npending; i++)
        ENSURE(a->pending[i].b->state == MEMSNAP_BLOCK_PENDING,
               "pending entry %zu refers to a block in state %d", i, a->pending[i].b->state);

    /* Counters against the recount. */
#define CMP(name)                                                                            \
    ENSURE(a->st.name == r.name, "stat " #name " is %llu, recount %llu",                    \
           (unsigned long long)a->st.name, (unsigned long long)r.name)
    CMP(allocated);
    CMP(requested);
    CMP(reserved);
    CMP(active);
    CMP(active_blocks);
    CMP(free_blocks);
    CMP(segments);
    CMP(mapped_pages);
#undef CMP
    memsnap_alloc_stats st;
    ms_stats_fill(a, &st);
    ENSURE(st.largest_free == largest, "largest_free %llu, recount %llu",
           (unsigned long long)st.largest_free, (unsigned long long)largest);
    ENSURE(st.cached == r.reserved - r.active, "cached is not reserved - active");
    ENSURE(a->st.peak_allocated >= a->st.allocated && a->st.peak_reserved >= a->st.reserved &&
               a->st.peak_requested >= a->st.requested,
           "a peak is below its current value");
}

MS_EXPORT int memsnap_alloc_check(memsnap_alloc *a, char *msg, size_t msglen)
{
    checker c = {msg, msglen, 0};
    if (msg && msglen)
        msg[0] = 0;
    pthread_mutex_lock(&a->lock);
    ms_check_all(&c, a);
    pthread_mutex_unlock(&a->lock);
    return c.failed ? -1 : 0;
}

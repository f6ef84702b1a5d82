/* stats.c: the counters and the snapshot.
 *
 * The counters are one X-macro list (MEMSNAP_ALLOC_STATS in alloc.h): the
 * public struct, the by-name lookup and the check's recount all come from it,
 * so adding a counter is one line there plus the code that moves it.  Most
 * counters are kept up to date as blocks change state; three are derived
 * here: cached (reserved - active), largest_free (the largest tree maximum,
 * one descent per stream and pool) and inactive_split (a walk of every FREE
 * block).  The walk is the only part that grows with the number of blocks,
 * so memsnap_alloc_counters_get leaves it out: a caller that asks after
 * every malloc (replay) stays linear in the number of requests.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Free bytes of b that empty_cache could not give back: fixed, all of it
 * when its segment has active blocks; expandable, what is not whole pages. */
static uint64_t ms_stuck_bytes(const memsnap_alloc *a, const ms_block *b)
{
    if (!b->seg->expandable)
        return b->seg->nactive ? b->size : 0;
    uint64_t lo = ms_align_up(b->addr, a->gran), hi = ms_align_down(b->addr + b->size, a->gran);
    return hi > lo ? b->size - (hi - lo) : b->size;
}

/* Every field but inactive_split (left 0): O(streams x tree depth). */
static void ms_counters_fill(memsnap_alloc *a, memsnap_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
#define COPY(name, doc) out->name = a->st.name;
    MEMSNAP_ALLOC_STATS(COPY)
#undef COPY
    out->cached = a->st.reserved - a->st.active;
    uint64_t largest = 0;
    for (int p = 0; p < MS_POOLS; p++) {
        ms_block *m = ms_tree_max(a->any_root[p]);
        if (m && m->size > largest)
            largest = m->size;
        for (int i = 0; i < a->nstreams; i++) {
            m = ms_tree_max(a->streams[i].free_root[p]);
            if (m && m->size > largest)
                largest = m->size;
        }
    }
    out->largest_free = largest;
    out->frag_free = out->cached ? 1.0 - (double)largest / (double)out->cached : 0.0;
    out->frag_peak = out->peak_reserved
                         ? 1.0 - (double)out->peak_allocated / (double)out->peak_reserved
                         : 0.0;
}

void ms_stats_fill(memsnap_alloc *a, memsnap_alloc_stats *out)
{
    ms_counters_fill(a, out);
    uint64_t stuck = 0;
    for (ms_segment *s = a->seg_head; s; s = s->next_seg)
        for (ms_block *b = s->first; b; b = b->next)
            if (b->state == MEMSNAP_BLOCK_FREE)
                stuck += ms_stuck_bytes(a, b);
    out->inactive_split = stuck;
}

MS_EXPORT void memsnap_alloc_counters_get(memsnap_alloc *a, memsnap_alloc_stats *out)
{
    pthread_mutex_lock(&a->lock);
    ms_counters_fill(a, out);
    pthread_mutex_unlock(&a->lock);
}

MS_EXPORT void memsnap_alloc_stats_get(memsnap_alloc *a, memsnap_alloc_stats *out)
{
    pthread_mutex_lock(&a->lock);
    ms_stats_fill(a, out);
    pthread_mutex_unlock(&a->lock);
}

MS_EXPORT uint64_t memsnap_alloc_stat_by_name(const memsnap_alloc_stats *s, const char *name,
                                              int *found)
{
#define BYNAME(field, doc)                                                                   \
    if (!strcmp(name, #field)) {                                                             \
        if (found)                                                                           \
            *found = 1;                                                                      \
        return s->field;                                                                     \
    }
    MEMSNAP_ALLOC_STATS(BYNAME)
#undef BYNAME
    if (found)
        *found = 0;
    return 0;
}

MS_EXPORT void memsnap_alloc_reset_peaks(memsnap_alloc *a)
{
    pthread_mutex_lock(&a->lock);
    a->st.peak_allocated = a->st.allocated;
    a->st.peak_requested = a->st.requested;
    a->st.peak_reserved = a->st.reserved;
    pthread_mutex_unlock(&a->lock);
}

MS_EXPORT int memsnap_alloc_snapshot_get(memsnap_alloc *a, memsnap_alloc_snapshot *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&a->lock);
    size_t ns = 0, nb = 0;
    for (ms_segment *s = a->seg_head; s; s = s->next_seg) {
        ns++;
        for (ms_block *b = s->first; b; b = b->next)
            nb++;
    }
    out->segments = calloc(ns ? ns : 1, sizeof *out->segments);
    out->blocks = calloc(nb ? nb : 1, sizeof *out->blocks);
    if (!out->segments || !out->blocks) {
        pthread_mutex_unlock(&a->lock);
        memsnap_alloc_snapshot_free(out);
        ms_set_error("memsnap_alloc_snapshot_get: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    size_t i = 0, j = 0;
    for (ms_segment *s = a->seg_head; s; s = s->next_seg, i++) {
        memsnap_alloc_segment_info *si = &out->segments[i];
        si->base = s->base;
        si->size = s->size;
        si->mapped = s->expandable ? s->mapped_pages * a->gran : s->size;
        si->seq = s->seq;
        si->expandable = s->expandable;
        si->large_pool = s->pool == MS_POOL_LARGE;
        si->first_block = j;
        for (ms_block *b = s->first; b; b = b->next, j++) {
            memsnap_alloc_block_info *bi = &out->blocks[j];
            bi->addr = b->addr;
            bi->size = b->size;
            bi->state = b->state;
            if (b->state == MEMSNAP_BLOCK_ALLOCATED)
                bi->requested = b->requested;
            if (b->state == MEMSNAP_BLOCK_ALLOCATED || b->state == MEMSNAP_BLOCK_PENDING)
                bi->stream = a->streams[b->stream].stream;
            else if (b->state == MEMSNAP_BLOCK_FREE && b->owner != MS_ANY)
                bi->stream = a->streams[b->owner].stream;
            else
                bi->any_stream = 1;
        }
        si->nblocks = j - si->first_block;
    }
    out->nsegments = ns;
    out->nblocks = nb;
    pthread_mutex_unlock(&a->lock);
    return MEMSNAP_ALLOC_OK;
}

MS_EXPORT void memsnap_alloc_snapshot_free(memsnap_alloc_snapshot *s)
{
    if (!s)
        return;
    free(s->segments);
    free(s->blocks);
    memset(s, 0, sizeof *s);
}

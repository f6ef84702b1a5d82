/* blocks.c: block objects and the operations every mode shares.
 *
 *  - Block objects are host structs recycled through a->spare.
 *  - The pointer map finds the ALLOCATED block of an address (chained hash,
 *    grows by doubling; a failed grow just keeps longer chains).
 *  - ms_take hands out a FREE block, splitting off the rest when the split
 *    rules allow (small pool and expandable: a remainder of >= 512 bytes;
 *    large pool: only blocks under max_split_size, remainder > 1 MiB).
 *  - ms_make_free turns a block FREE for an owner and merges it with FREE
 *    neighbours of the same owner (invariant 3), then files it in its tree.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

ms_block *ms_block_new(memsnap_alloc *a)
{
    ms_block *b = a->spare;
    if (b)
        a->spare = b->hnext;
    else if (!(b = malloc(sizeof *b)))
        return NULL;
    memset(b, 0, sizeof *b);
    uint32_t x = a->prio_state; /* xorshift32: deterministic priorities */
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    a->prio_state = x;
    b->prio = x;
    b->owner = MS_ANY;
    return b;
}

void ms_block_delete(memsnap_alloc *a, ms_block *b)
{
    free(b->uses);
    b->uses = NULL;
    b->hnext = a->spare;
    a->spare = b;
}

/* ---------------------------------------------------------------- pointer map */

static size_t ms_map_slot(uint64_t addr, size_t cap)
{
    return (size_t)(((addr >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static void ms_map_grow(memsnap_alloc *a)
{
    size_t cap = a->map_cap ? a->map_cap * 2 : 1024;
    ms_block **m = calloc(cap, sizeof *m);
    if (!m)
        return;
    for (size_t i = 0; i < a->map_cap; i++) {
        ms_block *b = a->map[i], *nx;
        for (; b; b = nx) {
            nx = b->hnext;
            size_t s = ms_map_slot(b->addr, cap);
            b->hnext = m[s];
            m[s] = b;
        }
    }
    free(a->map);
    a->map = m;
    a->map_cap = cap;
}

int ms_map_insert(memsnap_alloc *a, ms_block *b)
{
    if (a->map_n >= a->map_cap)
        ms_map_grow(a);
    if (!a->map_cap)
        return MEMSNAP_ALLOC_ERR_NOMEM;
    size_t s = ms_map_slot(b->addr, a->map_cap);
    b->hnext = a->map[s];
    a->map[s] = b;
    a->map_n++;
    return MEMSNAP_ALLOC_OK;
}

ms_block *ms_map_find(memsnap_alloc *a, uint64_t addr)
{
    if (!a->map_cap)
        return NULL;
    ms_block *b = a->map[ms_map_slot(addr, a->map_cap)];
    while (b && b->addr != addr)
        b = b->hnext;
    return b;
}

ms_block *ms_map_remove(memsnap_alloc *a, uint64_t addr)
{
    if (!a->map_cap)
        return NULL;
    ms_block **link = &a->map[ms_map_slot(addr, a->map_cap)];
    while (*link && (*link)->addr != addr)
        link = &(*link)->hnext;
    ms_block *b = *link;
    if (b) {
        *link = b->hnext;
        b->hnext = NULL;
        a->map_n--;
    }
    return b;
}

/* ----------------------------------------------------------------- free trees */

ms_block **ms_free_root(memsnap_alloc *a, int owner, int pool)
{
    return owner == MS_ANY ? &a->any_root[pool] : &a->streams[owner].free_root[pool];
}

void ms_free_insert(memsnap_alloc *a, ms_block *b)
{
    ms_tree_insert(ms_free_root(a, b->owner, b->seg->pool), b);
    a->st.free_blocks++;
    if (b->owner != MS_ANY)
        a->streams[b->owner].nfree++;
}

void ms_free_remove(memsnap_alloc *a, ms_block *b)
{
    ms_tree_remove(ms_free_root(a, b->owner, b->seg->pool), b);
    a->st.free_blocks--;
    if (b->owner != MS_ANY)
        a->streams[b->owner].nfree--;
}

/* Absorbs neighbour nb (FREE, same owner, already out of its tree) into b. */
static void ms_absorb(memsnap_alloc *a, ms_block *b, ms_block *nb)
{
    if (nb == b->prev) {
        b->addr = nb->addr;
        b->prev = nb->prev;
        if (nb->prev)
            nb->prev->next = b;
        else
            b->seg->first = b;
    } else {
        b->next = nb->next;
        if (nb->next)
            nb->next->prev = b;
    }
    b->size += nb->size;
    if (nb->free_seq > b->free_seq)
        b->free_seq = nb->free_seq;
    ms_block_delete(a, nb);
}

ms_block *ms_make_free(memsnap_alloc *a, ms_block *b, int owner, uint64_t seq)
{
    b->state = MEMSNAP_BLOCK_FREE;
    b->owner = owner;
    b->free_seq = seq;
    b->nuses = 0;
    ms_block *p = b->prev, *n = b->next;
    if (p && p->state == MEMSNAP_BLOCK_FREE && p->owner == owner) {
        ms_free_remove(a, p);
        ms_absorb(a, b, p);
    }
    if (n && n->state == MEMSNAP_BLOCK_FREE && n->owner == owner) {
        ms_free_remove(a, n);
        ms_absorb(a, b, n);
    }
    ms_free_insert(a, b);
    return b;
}

int ms_should_split(memsnap_alloc *a, const ms_block *b, uint64_t n)
{
    uint64_t remaining = b->size - n;
    if (b->seg->pool == MS_POOL_SMALL || b->seg->expandable)
        return remaining >= MS_MIN_BLOCK;
    return b->size < a->cfg.max_split_size && remaining > MS_SMALL_SIZE;
}

int ms_take(memsnap_alloc *a, ms_block *b, uint64_t n, uint64_t requested, int stream)
{
    ms_free_remove(a, b);
    if (b->size > n && ms_should_split(a, b, n)) {
        ms_block *r = ms_block_new(a);
        if (r) { /* no host memory: hand out the whole block instead */
            r->seg = b->seg;
            r->addr = b->addr + n;
            r->size = b->size - n;
            r->prev = b;
            r->next = b->next;
            if (b->next)
                b->next->prev = r;
            b->next = r;
            b->size = n;
            r->state = MEMSNAP_BLOCK_FREE;
            r->owner = b->owner;
            r->free_seq = b->free_seq;
            ms_free_insert(a, r);
        }
    }
    b->state = MEMSNAP_BLOCK_ALLOCATED;
    b->stream = stream;
    b->requested = requested;
    b->nuses = 0;
    b->owner = MS_ANY;
    ms_map_insert(a, b);
    b->seg->nactive++;
    a->st.allocated += b->size;
    a->st.requested += requested;
    a->st.active += b->size;
    a->st.active_blocks++;
    if (a->st.allocated > a->st.peak_allocated)
        a->st.peak_allocated = a->st.allocated;
    if (a->st.requested > a->st.peak_requested)
        a->st.peak_requested = a->st.requested;
    return MEMSNAP_ALLOC_OK;
}

/* track: the live state of a snapshot as its events are read — every live
 * allocation per layer, and per device the bytes reserved (cuMemAlloc/Pitch
 * + cuMemCreate, as `memsnap summary` counts them), allocated (allocator
 * blocks), stream-ordered and mapped.  Used by the exporters to fill in free
 * sizes, to draw counters and to build the final segments.
 *
 * free_error: the recorder commits a free before calling the driver; when
 * the driver refuses, a free_error with the same address (vmm_release: the
 * handle) and thread follows.  The last 32 frees are kept so that the
 * object can be put back (docs/format.md, "Order of frees"). */
#include "common.h"

#include <stdlib.h>
#include <string.h>

void track_init(track *t)
{
    memset(t, 0, sizeof *t);
    t->max_device = -1;
}

void track_free(track *t)
{
    u64map_free(&t->map);
    free(t->objs);
    free(t->free_idx);
    memset(t, 0, sizeof *t);
}

static int layer_of_alloc(int action)
{
    switch (action) {
    case MSNAP_A_ALLOC: return TRK_ALLOC;
    case MSNAP_A_ASYNC_ALLOC: return TRK_ASYNC;
    case MSNAP_A_HOST_ALLOC: return TRK_HOST;
    case MSNAP_A_MANAGED_ALLOC: return TRK_MANAGED;
    case MSNAP_A_BLOCK_ALLOC: return TRK_BLOCK;
    case MSNAP_A_VMM_CREATE: return TRK_VMM_CREATE;
    case MSNAP_A_VMM_MAP: return TRK_VMM_MAP;
    case MSNAP_A_VMM_RESERVE: return TRK_VMM_RESERVE;
    }
    return 0;
}

/* Adds (1) or removes (-1) o's bytes from its device's counters. */
static void count(track *t, const trk_obj *o, int sign)
{
    int d = TRK_DEV(o->device);
    uint64_t *c = NULL;
    switch (o->layer) {
    case TRK_ALLOC:
    case TRK_VMM_CREATE: c = t->reserved; break;
    case TRK_BLOCK: c = t->allocated; break;
    case TRK_ASYNC: c = t->async; break;
    case TRK_VMM_MAP: c = t->mapped; break;
    default: return;
    }
    if (sign > 0)
        c[d] += o->size;
    else
        c[d] = c[d] >= o->size ? c[d] - o->size : 0;
}

static int insert(track *t, const trk_obj *o, uint64_t key)
{
    uint32_t idx;
    uint64_t *old = u64map_get(&t->map, o->layer, key);
    if (old) { /* a second allocation at a live address: replace */
        count(t, &t->objs[*old], -1);
        t->objs[*old] = *o;
        t->objs[*old].used = 1;
        count(t, o, 1);
        return 0;
    }
    if (t->nfree) {
        idx = t->free_idx[--t->nfree];
    } else {
        if (t->nobjs == t->cap) {
            size_t nc = t->cap ? t->cap * 2 : 1024;
            trk_obj *no = realloc(t->objs, nc * sizeof *no);
            if (!no)
                return -1;
            t->objs = no;
            t->cap = nc;
        }
        idx = (uint32_t)t->nobjs++;
    }
    t->objs[idx] = *o;
    t->objs[idx].used = 1;
    if (u64map_put(&t->map, o->layer, key, idx))
        return -1;
    count(t, o, 1);
    return 0;
}

/* Takes (layer, key) out; 1 and *out when it was live. */
static int take(track *t, int layer, uint64_t key, trk_obj *out, uint32_t tid)
{
    uint64_t idx;
    if (!u64map_del(&t->map, (uint32_t)layer, key, &idx))
        return 0;
    *out = t->objs[idx];
    t->objs[idx].used = 0;
    if (t->nfree == t->freecap) {
        size_t nc = t->freecap ? t->freecap * 2 : 1024;
        uint32_t *nf = realloc(t->free_idx, nc * sizeof *nf);
        if (nf) {
            t->free_idx = nf;
            t->freecap = nc;
        }
    }
    if (t->nfree < t->freecap)
        t->free_idx[t->nfree++] = (uint32_t)idx;
    count(t, out, -1);
    unsigned u = t->undo_n++ % 32;
    t->undo[u].layer = (uint8_t)layer;
    t->undo[u].key = key;
    t->undo[u].obj = *out;
    t->undo[u].tid = tid;
    return 1;
}

int track_event(track *t, const msnap_event *e, trk_obj *freed)
{
    trk_obj o = {0}, tmp;
    if (!freed)
        freed = &tmp;
    memset(freed, 0, sizeof *freed);
    if (e->device > t->max_device && e->device < MSNAP_MAX_DEVICES)
        t->max_device = e->device;
    int layer = layer_of_alloc(e->action);
    if (layer) {
        o.addr = e->addr;
        o.size = e->size;
        o.stream = e->stream;
        o.t_ns = e->t_ns;
        o.aux = e->aux;
        o.stack = e->stack;
        o.device = e->device;
        o.layer = (uint8_t)layer;
        if (layer == TRK_BLOCK)
            t->have_blocks = 1;
        if (insert(t, &o, layer == TRK_VMM_CREATE ? e->aux : e->addr))
            return -1;
        return layer == TRK_ALLOC || layer == TRK_VMM_CREATE || layer == TRK_BLOCK;
    }
    switch (e->action) {
    case MSNAP_A_FREE:
        /* cuMemFree frees device or managed memory */
        if (!take(t, TRK_ALLOC, e->addr, freed, e->tid))
            take(t, TRK_MANAGED, e->addr, freed, e->tid);
        return freed->layer == TRK_ALLOC;
    case MSNAP_A_ASYNC_FREE:
        take(t, TRK_ASYNC, e->addr, freed, e->tid);
        return 0;
    case MSNAP_A_HOST_FREE:
        take(t, TRK_HOST, e->addr, freed, e->tid);
        return 0;
    case MSNAP_A_BLOCK_FREE:
        take(t, TRK_BLOCK, e->addr, freed, e->tid);
        return 1;
    case MSNAP_A_VMM_RELEASE:
        take(t, TRK_VMM_CREATE, e->aux, freed, e->tid);
        return 1;
    case MSNAP_A_VMM_ADDR_FREE:
        take(t, TRK_VMM_RESERVE, e->addr, freed, e->tid);
        return 0;
    case MSNAP_A_VMM_UNMAP: {
        /* one unmap may cover several neighbouring mappings */
        uint64_t cur = e->addr, end = e->addr + e->size;
        trk_obj m;
        int first = 1;
        while (cur < end || first) {
            if (!take(t, TRK_VMM_MAP, cur, &m, e->tid))
                break;
            if (first)
                *freed = m;
            first = 0;
            if (!m.size)
                break;
            cur += m.size;
        }
        return 0;
    }
    case MSNAP_A_FREE_ERROR:
        for (unsigned i = 0; i < 32 && i < t->undo_n; i++) {
            unsigned u = (t->undo_n - 1 - i) % 32;
            uint64_t key = t->undo[u].layer == TRK_VMM_CREATE ? e->aux : e->addr;
            if (t->undo[u].key == key && t->undo[u].tid == e->tid && t->undo[u].obj.used) {
                trk_obj back = t->undo[u].obj;
                t->undo[u].obj.used = 0;
                insert(t, &back, key);
                return 1;
            }
        }
        return 0;
    }
    return 0;
}

void track_each(track *t, int layer, void (*fn)(void *ctx, const trk_obj *o), void *ctx)
{
    for (size_t i = 0; i < t->map.cap; i++)
        if (t->map.slots[i].used && t->map.slots[i].tag == (uint32_t)layer)
            fn(ctx, &t->objs[t->map.slots[i].value]);
}

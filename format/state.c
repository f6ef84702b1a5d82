/* The state model (format/state.h has the layers and the rules).
 *
 * Every change of live memory goes through obj_add / obj_remove: they are
 * the only places where levels and site figures move, and where the
 * observer is called.  An event maps onto them as:
 *
 *   alloc/async_alloc/managed_alloc/host_alloc -> add MEM[p]
 *   free/async_free/host_free                  <- remove MEM[p]
 *   block_alloc / block_free                   -> / <- BLOCK[p]
 *   vmm_reserve / vmm_addr_free                -> / <- VA[p]
 *   vmm_create / vmm_release                   -> / <- PHYS[x]
 *   vmm_map / vmm_unmap                        -> / <- MAP[p] (several)
 *   free_error                                 -> back from the undo ring
 *   block_free_requested, segment_*, nvtx, oom -> nothing
 */
#include "state.h"
#include "util/grow.h"
#include "util/size.h"

#include <stdlib.h>
#include <string.h>

static const char *const layer_names[] = {
#define MSNAP_X_NAME(e, s) s,
    MSNAP_LAYERS(MSNAP_X_NAME)
#undef MSNAP_X_NAME
};

const char *msnap_layer_name(int layer)
{
    return layer >= 0 && layer < MSNAP_LAYER_COUNT ? layer_names[layer] : "?";
}

void msnap_state_init(msnap_state *st)
{
    memset(st, 0, sizeof *st);
}

void msnap_state_free(msnap_state *st)
{
    u64map_free(&st->map);
    free(st->objs);
    free(st->free_slots);
    u64map_free(&st->site_map);
    free(st->sites);
    free(st->pre);
    free(st->state_lines);
    memset(st, 0, sizeof *st);
}

void msnap_state_observe(msnap_state *st, const msnap_state_observer *o)
{
    if (o)
        st->obs = *o;
    else
        memset(&st->obs, 0, sizeof st->obs);
}

int msnap_state_site_layer(int kind, int slot)
{
    if (msnap_state_counts_in(kind, slot, MSNAP_LAYER_RESERVED))
        return MSNAP_LAYER_RESERVED;
    if (kind == MSNAP_A_BLOCK_ALLOC)
        return MSNAP_LAYER_ALLOCATED;
    if (kind == MSNAP_A_HOST_ALLOC)
        return MSNAP_LAYER_PINNED;
    return -1;
}

/* The key space of an allocation kind; 0 for actions that make nothing. */
static int space_of(int kind)
{
    switch (kind) {
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_MANAGED_ALLOC:
    case MSNAP_A_HOST_ALLOC: return MSNAP_SP_MEM;
    case MSNAP_A_BLOCK_ALLOC: return MSNAP_SP_BLOCK;
    case MSNAP_A_VMM_RESERVE: return MSNAP_SP_VA;
    case MSNAP_A_VMM_CREATE: return MSNAP_SP_PHYS;
    case MSNAP_A_VMM_MAP: return MSNAP_SP_MAP;
    default: return 0;
    }
}

/* The layers an object of kind on slot counts in, as a bit mask
 * (msnap_state_counts_in for every layer at once). */
static unsigned layers_of(int kind, int slot)
{
    switch (kind) {
    case MSNAP_A_ALLOC: return 1u << MSNAP_LAYER_RESERVED;
    case MSNAP_A_ASYNC_ALLOC: return 1u << MSNAP_LAYER_RESERVED | 1u << MSNAP_LAYER_ASYNC;
    case MSNAP_A_MANAGED_ALLOC: return 1u << MSNAP_LAYER_RESERVED | 1u << MSNAP_LAYER_MANAGED;
    case MSNAP_A_VMM_CREATE: return slot != MSNAP_ST_HOST ? 1u << MSNAP_LAYER_RESERVED : 0;
    case MSNAP_A_BLOCK_ALLOC: return 1u << MSNAP_LAYER_ALLOCATED;
    case MSNAP_A_HOST_ALLOC: return 1u << MSNAP_LAYER_PINNED;
    case MSNAP_A_VMM_RESERVE: return 1u << MSNAP_LAYER_VMM_VA;
    case MSNAP_A_VMM_MAP: return 1u << MSNAP_LAYER_VMM_MAPPED;
    default: return 0;
    }
}

/* Moves every level o counts in by sign * size, with the peaks. */
static void levels_move(msnap_state *st, const msnap_obj *o, int sign)
{
    for (unsigned mask = layers_of(o->kind, o->device); mask; mask &= mask - 1) {
        int l = __builtin_ctz(mask);
        msnap_level *v[2] = {&st->lv[o->device][l], &st->all[l]};
        for (int i = 0; i < 2; i++) {
            if (sign > 0) {
                /* saturating: a hostile size cannot wrap a level to a small
                 * number (a level past 2^64 - 1 bytes reads 16 EiB) */
                v[i]->cur = msnap_add_sat(v[i]->cur, o->size);
                if (v[i]->cur > v[i]->peak) {
                    v[i]->peak = v[i]->cur;
                    v[i]->peak_t = st->t_ns;
                    v[i]->peak_ev = st->events;
                }
            } else {
                v[i]->cur = v[i]->cur > o->size ? v[i]->cur - o->size : 0;
            }
        }
    }
}

int msnap_state_counts_in(int kind, int slot, int layer)
{
    return layer >= 0 && layer < MSNAP_LAYER_COUNT && (layers_of(kind, slot) >> layer & 1);
}

/* The site of o (created on first use); MSNAP_NO_SITE for kinds without
 * sites, or when out of memory (*oom set). */
static uint32_t site_of(msnap_state *st, const msnap_obj *o, int *oom)
{
    int layer = msnap_state_site_layer(o->kind, o->device);
    if (layer < 0)
        return MSNAP_NO_SITE;
    uint64_t key = (uint64_t)o->stack | (uint64_t)layer << 32 |
                   (uint64_t)(o->device + 1) << 40;
    uint64_t *v = u64map_get(&st->site_map, 0, key);
    if (v)
        return (uint32_t)*v;
    if (msnap_grow((void **)&st->sites, &st->cap_sites, st->nsites, sizeof *st->sites) ||
        u64map_put(&st->site_map, 0, key, st->nsites)) {
        *oom = 1;
        return MSNAP_NO_SITE;
    }
    st->sites[st->nsites] = (msnap_site){.stack = o->stack,
                                         .layer = (uint8_t)layer,
                                         .kind = o->kind, .device = o->device};
    return (uint32_t)st->nsites++;
}

uint32_t msnap_state_site_for(msnap_state *st, const msnap_obj *o)
{
    int oom = 0;
    return site_of(st, o, &oom);
}

/* Takes (space, key) out of the live set; 1 and *out when it was live. */
static int obj_remove(msnap_state *st, int space, uint64_t key, msnap_obj *out);

/* Adds o under (space, key); an object live there is removed first.
 * counted: a new allocation (site count/bytes move).  0 ok, -1 no memory
 * or the observer stopped. */
static int obj_add(msnap_state *st, int space, uint64_t key, msnap_obj o,
                   int counted)
{
    msnap_obj old;
    int r = obj_remove(st, space, key, &old);
    if (r < 0)
        return -1;
    if (r)
        st->reused++;
    int oom = 0;
    o.space = (uint8_t)space;
    o.site = st->no_sites ? MSNAP_NO_SITE : site_of(st, &o, &oom);
    if (oom)
        return -1;
    uint32_t idx;
    if (st->nfree_slots) {
        idx = st->free_slots[--st->nfree_slots];
    } else {
        if (msnap_grow((void **)&st->objs, &st->cap_objs, st->nobjs, sizeof *st->objs))
            return -1;
        idx = (uint32_t)st->nobjs++;
    }
    if (u64map_put(&st->map, (uint32_t)space, key, idx))
        return -1;
    st->objs[idx] = o;
    if (st->obs.before)
        st->obs.before(st->obs.ctx, st, &o, 1);
    levels_move(st, &o, 1);
    if (o.site != MSNAP_NO_SITE) {
        msnap_site *s = &st->sites[o.site];
        if (counted) {
            s->count++;
            s->bytes += o.size;
        }
        s->live += o.size;
        if (s->live > s->peak) {
            s->peak = s->live;
            s->peak_t = st->t_ns;
        }
    }
    if (st->obs.after && st->obs.after(st->obs.ctx, st, &o, 1))
        return -1;
    return 0;
}

static int obj_remove(msnap_state *st, int space, uint64_t key, msnap_obj *out)
{
    uint64_t idx;
    if (!u64map_del(&st->map, (uint32_t)space, key, &idx))
        return 0;
    msnap_obj o = st->objs[idx];
    if (msnap_grow((void **)&st->free_slots, &st->cap_free_slots, st->nfree_slots,
             sizeof *st->free_slots) == 0)
        st->free_slots[st->nfree_slots++] = (uint32_t)idx;
    if (st->obs.before)
        st->obs.before(st->obs.ctx, st, &o, -1);
    levels_move(st, &o, -1);
    if (o.site != MSNAP_NO_SITE) {
        msnap_site *s = &st->sites[o.site];
        s->live = s->live > o.size ? s->live - o.size : 0;
    }
    if (out)
        *out = o;
    if (st->obs.after && st->obs.after(st->obs.ctx, st, &o, -1))
        return -1;
    return 1;
}

/* Keeps a pre-window object.  0 ok, -1 no memory. */
static int pre_push(msnap_state *st, const msnap_obj *o, uint64_t key)
{
    if (msnap_grow((void **)&st->pre, &st->cap_pre, st->npre, sizeof *st->pre))
        return -1;
    st->pre[st->npre].o = *o;
    st->pre[st->npre].o.site = MSNAP_NO_SITE;
    st->pre[st->npre].key = key;
    st->npre++;
    return 0;
}

/* A free of (space, key): removes it into the undo ring, or counts an
 * unknown free (a pre-window object when the event has a size).  Returns
 * 1 removed, 0 unknown, -1 no memory or stopped. */
static int do_free(msnap_state *st, int space, uint64_t key,
                   const msnap_event *e, int alloc_kind, msnap_obj *out)
{
    msnap_obj o = {0};
    int r = obj_remove(st, space, key, &o);
    if (out)
        *out = o;
    if (r < 0)
        return -1;
    if (r == 0) {
        st->unknown_frees++;
        if (!e->size)
            return 0;
        msnap_obj p = {.addr = space == MSNAP_SP_PHYS ? 0 : e->addr,
                       .size = e->size, .aux = e->aux,
                       .device = (int16_t)msnap_st_slot(e->device),
                       .kind = (uint8_t)alloc_kind, .space = (uint8_t)space,
                       .api = (uint8_t)e->api};
        if (alloc_kind == MSNAP_A_HOST_ALLOC)
            p.device = MSNAP_ST_HOST;
        if (pre_push(st, &p, key))
            return -1;
        return st->obs.pre && st->obs.pre(st->obs.ctx, st, st->npre - 1) ? -1 : 0;
    }
    if (!st->freed.size && !st->freed.kind)
        st->freed = o;
    unsigned u = st->undo_n++ % MSNAP_ST_UNDO;
    st->undo[u].o = o;
    st->undo[u].key = key;
    st->undo[u].serial = st->events;
    st->undo[u].tid = e->tid;
    st->undo[u].valid = 1;
    return 1;
}

/* The key space a refused free of this API freed in; 0: any address space
 * (an API the reader does not know). */
static int space_of_free_api(int api)
{
    switch (api) {
    case MSNAP_API_cuMemRelease: return MSNAP_SP_PHYS;
    case MSNAP_API_cuMemUnmap: return MSNAP_SP_MAP;
    case MSNAP_API_cuMemAddressFree: return MSNAP_SP_VA;
    case MSNAP_API_cuMemFree_v2: case MSNAP_API_cuMemFreeAsync:
    case MSNAP_API_cuMemFreeAsync_ptsz: case MSNAP_API_cuMemFreeHost:
        return MSNAP_SP_MEM;
    default: return 0;
    }
}

/* free_error: puts back the most recent matching free (and, for an unmap,
 * every mapping the same event removed).  0 ok, -1 no memory or stopped. */
static int undo_free(msnap_state *st, const msnap_event *e)
{
    int want = space_of_free_api(e->api);
    unsigned n = st->undo_n < MSNAP_ST_UNDO ? st->undo_n : MSNAP_ST_UNDO;
    for (unsigned k = 0; k < n; k++) {
        unsigned u = (st->undo_n - 1 - k) % MSNAP_ST_UNDO;
        if (!st->undo[u].valid || st->undo[u].tid != e->tid)
            continue;
        int sp = st->undo[u].o.space;
        if (want ? sp != want : sp == MSNAP_SP_PHYS)
            continue;
        uint64_t key = sp == MSNAP_SP_PHYS ? e->aux : e->addr;
        if (st->undo[u].key != key)
            continue;
        uint64_t serial = st->undo[u].serial;
        for (unsigned j = 0; j < n; j++) {
            unsigned v = (st->undo_n - 1 - j) % MSNAP_ST_UNDO;
            if (!st->undo[v].valid || st->undo[v].serial != serial ||
                st->undo[v].tid != e->tid)
                continue;
            st->undo[v].valid = 0;
            if (msnap_state_find(st, st->undo[v].o.space, st->undo[v].key))
                continue; /* the key is live again: the newer object stays */
            st->restored++;
            if (obj_add(st, st->undo[v].o.space, st->undo[v].key,
                        st->undo[v].o, 0))
                return -1;
        }
        return 0;
    }
    return 0;
}

int msnap_state_event(msnap_state *st, const msnap_event *e)
{
    int slot = msnap_st_slot(e->device);
    st->events++;
    st->t_ns = e->t_ns;
    memset(&st->freed, 0, sizeof st->freed);
    int space = space_of(e->action);
    if (space) {
        msnap_obj o = {.addr = e->addr, .size = e->size, .t_ns = e->t_ns,
                       .aux = e->aux, .stream = e->stream, .stack = e->stack,
                       .device = (int16_t)slot, .kind = (uint8_t)e->action,
                       .api = (uint8_t)e->api};
        if (e->action == MSNAP_A_BLOCK_ALLOC && e->api == MSNAP_API_TORCH)
            o.req = e->aux2;
        uint64_t key = e->addr;
        if (e->action == MSNAP_A_VMM_CREATE) {
            o.addr = 0;
            key = e->aux;
        }
        if (e->action == MSNAP_A_HOST_ALLOC)
            o.device = MSNAP_ST_HOST;
        else if (slot != MSNAP_ST_HOST)
            st->seen[slot] = 1;
        if (e->action == MSNAP_A_BLOCK_ALLOC)
            st->allocated_seen = 1;
        return obj_add(st, space, key, o, 1);
    }
    int r = 0;
    switch (e->action) {
    case MSNAP_A_FREE:
        r = do_free(st, MSNAP_SP_MEM, e->addr, e, MSNAP_A_ALLOC, NULL);
        break;
    case MSNAP_A_ASYNC_FREE:
        r = do_free(st, MSNAP_SP_MEM, e->addr, e, MSNAP_A_ASYNC_ALLOC, NULL);
        break;
    case MSNAP_A_HOST_FREE:
        r = do_free(st, MSNAP_SP_MEM, e->addr, e, MSNAP_A_HOST_ALLOC, NULL);
        break;
    case MSNAP_A_BLOCK_FREE:
        st->allocated_seen = 1;
        r = do_free(st, MSNAP_SP_BLOCK, e->addr, e, MSNAP_A_BLOCK_ALLOC, NULL);
        break;
    case MSNAP_A_BLOCK_FREE_REQUESTED:
        st->allocated_seen = 1;
        break;
    case MSNAP_A_VMM_ADDR_FREE:
        r = do_free(st, MSNAP_SP_VA, e->addr, e, MSNAP_A_VMM_RESERVE, NULL);
        break;
    case MSNAP_A_VMM_RELEASE:
        r = do_free(st, MSNAP_SP_PHYS, e->aux, e, MSNAP_A_VMM_CREATE, NULL);
        break;
    case MSNAP_A_VMM_UNMAP: {
        uint64_t a = e->addr, end = e->addr + e->size;
        msnap_obj got;
        r = do_free(st, MSNAP_SP_MAP, a, e, MSNAP_A_VMM_MAP, &got);
        while (r == 1 && got.size && (a += got.size) < end &&
               msnap_state_find(st, MSNAP_SP_MAP, a))
            r = do_free(st, MSNAP_SP_MAP, a, e, MSNAP_A_VMM_MAP, &got);
        break;
    }
    case MSNAP_A_FREE_ERROR:
        r = undo_free(st, e);
        break;
    case MSNAP_A_OOM:
        if (slot != MSNAP_ST_HOST)
            st->seen[slot] = 1;
        break;
    default:
        break;
    }
    return r < 0 ? -1 : 0;
}

/* Folds a counters line into cnt_peak (see msnap_state_peak). */
static void take_counters(msnap_state *st, const msnap_counters *c)
{
    st->counters_seen = 1;
    uint64_t v[MSNAP_LAYER_COUNT] = {0};
    int slot = msnap_st_slot(c->device);
    if (c->device >= 0) {
        v[MSNAP_LAYER_RESERVED] = c->reserved + c->async + c->managed;
        v[MSNAP_LAYER_ALLOCATED] = c->allocated;
        v[MSNAP_LAYER_ASYNC] = c->async;
        v[MSNAP_LAYER_MANAGED] = c->managed;
        v[MSNAP_LAYER_VMM_MAPPED] = c->vmm_mapped;
        st->seen[slot] = 1;
        if (c->allocated)
            st->allocated_seen = 1;
    }
    if (c->host > st->cnt_peak[MSNAP_ST_HOST][MSNAP_LAYER_PINNED]) {
        st->cnt_peak[MSNAP_ST_HOST][MSNAP_LAYER_PINNED] = c->host;
        st->cnt_peak_t[MSNAP_ST_HOST][MSNAP_LAYER_PINNED] = c->t_ns;
    }
    for (int l = 0; l < MSNAP_LAYER_COUNT; l++)
        if (v[l] > st->cnt_peak[slot][l]) {
            st->cnt_peak[slot][l] = v[l];
            st->cnt_peak_t[slot][l] = c->t_ns;
        }
}

/* A live line of a state section. */
static int take_live(msnap_state *st, const msnap_live *l)
{
    if (!st->in_state)
        return 0;
    int slot = msnap_st_slot(l->device);
    st->state_nlive++;
    if (msnap_state_counts_in(l->kind, slot, MSNAP_LAYER_RESERVED))
        st->state_bytes += l->size;
    if (!space_of(l->kind))
        return 0;
    if (msnap_grow((void **)&st->state_lines, &st->cap_state_lines,
             st->nstate_lines, sizeof *st->state_lines))
        return -1;
    st->state_lines[st->nstate_lines++] = (msnap_obj){
        .addr = l->kind == MSNAP_A_VMM_CREATE ? 0 : l->addr, .size = l->size,
        .t_ns = l->t_ns, .aux = l->aux, .stream = l->stream,
        .stack = l->stack, .site = MSNAP_NO_SITE,
        .device = (int16_t)(l->kind == MSNAP_A_HOST_ALLOC ? MSNAP_ST_HOST : slot),
        .kind = (uint8_t)l->kind, .space = (uint8_t)space_of(l->kind)};
    return 0;
}

int msnap_state_record(msnap_state *st, const msnap_record *r)
{
    /* a state section is its live lines; the table lines a writer puts
     * between them (the stacks a live line names, written when first
     * needed) do not end it */
    if (r->type != MSNAP_REC_LIVE && r->type != MSNAP_REC_STACK &&
        r->type != MSNAP_REC_MODULE && r->type != MSNAP_REC_SYMBOL && r->type != MSNAP_REC_STR)
        st->in_state = 0;
    switch (r->type) {
    case MSNAP_REC_EVENT:
        return msnap_state_event(st, &r->u.event);
    case MSNAP_REC_HEADER:
        for (int i = 0; i < r->u.header.ndevices && i < MSNAP_MAX_DEVICES; i++)
            st->seen[msnap_st_slot(r->u.header.devices[i].index)] = 1;
        return 0;
    case MSNAP_REC_DEVICE:
        st->seen[msnap_st_slot(r->u.device.index)] = 1;
        return 0;
    case MSNAP_REC_COUNTERS:
        take_counters(st, &r->u.counters);
        return 0;
    case MSNAP_REC_STATE_BEGIN:
        st->in_state = 1;
        st->state_seen = 1;
        st->state_t = r->u.state_begin.t_ns;
        st->state_nlive = st->state_bytes = 0;
        st->nstate_lines = 0; /* the last section describes the end */
        return 0;
    case MSNAP_REC_LIVE:
        return take_live(st, &r->u.live);
    default:
        return 0;
    }
}

int msnap_state_finish(msnap_state *st)
{
    for (size_t i = 0; i < st->nstate_lines; i++) {
        msnap_obj *o = &st->state_lines[i];
        uint64_t key = o->space == MSNAP_SP_PHYS ? o->aux : o->addr;
        if (!msnap_state_find(st, o->space, key) && pre_push(st, o, key))
            return -1;
    }
    st->nstate_lines = 0;
    for (size_t i = 0; i < st->nsites; i++)
        st->sites[i].live_count = 0;
    for (size_t i = 0; i < st->map.cap; i++)
        if (st->map.slots[i].used) {
            const msnap_obj *o = &st->objs[st->map.slots[i].value];
            if (o->site != MSNAP_NO_SITE)
                st->sites[o->site].live_count++;
        }
    return 0;
}

int msnap_state_rewind(msnap_state *st)
{
    u64map_free(&st->map);
    st->nobjs = st->nfree_slots = 0;
    memset(st->lv, 0, sizeof st->lv);
    memset(st->all, 0, sizeof st->all);
    memset(st->undo, 0, sizeof st->undo);
    st->undo_n = 0;
    st->events = st->t_ns = 0;
    st->unknown_frees = st->reused = st->restored = 0;
    for (size_t i = 0; i < st->nsites; i++) {
        msnap_site *s = &st->sites[i];
        s->live = s->peak = s->peak_t = s->count = s->bytes = s->live_count = 0;
    }
    /* The second read finds these live, so it adds no pre-window objects. */
    for (size_t i = 0; i < st->npre; i++)
        if (obj_add(st, st->pre[i].o.space, st->pre[i].key, st->pre[i].o, 0))
            return -1;
    return 0;
}

uint64_t msnap_state_peak(const msnap_state *st, int slot, int layer)
{
    if (layer < 0 || layer >= MSNAP_LAYER_COUNT)
        return 0;
    if (slot >= 0 && slot < MSNAP_ST_NDEV) {
        uint64_t p = st->lv[slot][layer].peak;
        return st->cnt_peak[slot][layer] > p ? st->cnt_peak[slot][layer] : p;
    }
    uint64_t cnt = 0;
    for (int d = 0; d < MSNAP_ST_NDEV; d++)
        cnt += st->cnt_peak[d][layer];
    return cnt > st->all[layer].peak ? cnt : st->all[layer].peak;
}

msnap_level msnap_state_level(const msnap_state *st, int slot, int layer)
{
    msnap_level v = {0};
    if (layer < 0 || layer >= MSNAP_LAYER_COUNT)
        return v;
    v = slot >= 0 && slot < MSNAP_ST_NDEV ? st->lv[slot][layer] : st->all[layer];
    uint64_t p = msnap_state_peak(st, slot, layer);
    if (p > v.peak) {
        v.peak = p;
        v.peak_t = slot >= 0 && slot < MSNAP_ST_NDEV ? st->cnt_peak_t[slot][layer] : 0;
        v.peak_ev = 0;
    }
    return v;
}

const msnap_obj *msnap_state_find(const msnap_state *st, int space, uint64_t key)
{
    const uint64_t *v = u64map_get(&st->map, (uint32_t)space, key);
    return v ? &st->objs[*v] : NULL;
}

/* track: the state model (include/memsnap/state.h) as the exporters and
 * replay read it — every live object and, per device slot, the current
 * reserved, allocated, stream-ordered and mapped bytes, in the layers the
 * state defines (docs/format.md, "Layers").  The exporters use it to fill
 * in free sizes, to draw counters and to build the final segments; the
 * rules (refused frees, unmaps across mappings, unknown frees) are the
 * state's. */
#include "common.h"

#include <string.h>

void track_init(track *t)
{
    memset(t, 0, sizeof *t);
    msnap_state_init(&t->st);
    t->max_device = -1;
}

void track_free(track *t)
{
    msnap_state_free(&t->st);
    memset(t, 0, sizeof *t);
}

/* The TRK_* kind of the object an allocating action makes; 0 for actions
 * that make none. */
int trk_kind_of_action(int action)
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
    default: return 0;
    }
}

/* The TRK_* kind of a live object. */
static int trk_kind(const msnap_obj *o)
{
    return trk_kind_of_action(o->kind);
}

/* A state object as the exporters see it. */
static trk_obj to_trk(const msnap_obj *o)
{
    return (trk_obj){.addr = o->addr, .size = o->size, .stream = o->stream,
                     .t_ns = o->t_ns, .aux = o->aux, .stack = o->stack,
                     .device = (int16_t)(o->device == MSNAP_ST_HOST ? -1 : o->device),
                     .layer = (uint8_t)trk_kind(o), .used = 1};
}

int track_event(track *t, const msnap_event *e, trk_obj *freed)
{
    if (e->device > t->max_device && e->device < MSNAP_MAX_DEVICES)
        t->max_device = e->device;
    int d = TRK_DEV(e->device);
    uint64_t res = t->reserved[d], alloc = t->allocated[d];
    if (msnap_state_event(&t->st, e))
        return -1;
    if (freed) {
        memset(freed, 0, sizeof *freed);
        if (t->st.freed.size || t->st.freed.kind)
            *freed = to_trk(&t->st.freed);
    }
    t->have_blocks = t->st.allocated_seen;
    /* Every slot: a freed or restored object may live on another one. */
    for (int s = 0; s < TRK_NDEV; s++) {
        const msnap_level *lv = t->st.lv[s];
        t->reserved[s] = lv[MSNAP_LAYER_RESERVED].cur;
        t->allocated[s] = lv[MSNAP_LAYER_ALLOCATED].cur;
        t->async[s] = lv[MSNAP_LAYER_ASYNC].cur;
        t->mapped[s] = lv[MSNAP_LAYER_VMM_MAPPED].cur;
    }
    return t->reserved[d] != res || t->allocated[d] != alloc;
}

void track_each(track *t, int layer, void (*fn)(void *ctx, const trk_obj *o), void *ctx)
{
    const msnap_state *st = &t->st;
    for (size_t i = 0; i < st->map.cap; i++) {
        if (!st->map.slots[i].used)
            continue;
        const msnap_obj *o = &st->objs[st->map.slots[i].value];
        if (trk_kind(o) == layer) {
            trk_obj x = to_trk(o);
            fn(ctx, &x);
        }
    }
}

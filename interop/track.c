/* track: the state model's live objects (format/state.h) as the
 * exporters write them (trk_obj): kinds named for PyTorch's and SQLite's
 * tables, device ordinals instead of slots.  The live state itself is the
 * an_file's (analyze/analysis.h). */
#include "common.h"

#include <string.h>

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

trk_obj trk_of(const msnap_obj *o)
{
    return (trk_obj){.addr = o->addr, .size = o->size, .stream = o->stream,
                     .t_ns = o->t_ns, .aux = o->aux, .stack = o->stack,
                     .device = (int16_t)(o->device == MSNAP_ST_HOST ? -1 : o->device),
                     .layer = (uint8_t)trk_kind(o), .used = 1};
}

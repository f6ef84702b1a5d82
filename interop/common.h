/* Internals shared by the interop modules: temporary event files (spill.c),
 * the live-state tracker (track.c) and JSON text output (jsonw.c). */
#ifndef MEMSNAP_INTEROP_COMMON_H
#define MEMSNAP_INTEROP_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "memsnap/format.h"
#include "state.h"

/* ---- spill: fixed-size event records in an unlinked temporary file ----- */
typedef struct spill_rec {
    uint64_t k1, k2;   /* sort keys (meaning per user) */
    msnap_event e;
} spill_rec;

typedef struct spill {
    FILE *f;           /* tmpfile(); NULL until the first put */
    uint64_t n;
} spill;

int spill_put(spill *s, const spill_rec *r);   /* 0, or -1 (errno) */
int spill_rewind(spill *s);                    /* start reading; 0 or -1 */
int spill_get(spill *s, spill_rec *r);         /* 1 record, 0 end, -1 error */
void spill_close(spill *s);

/* ---- track: the state model (memsnap/state.h) as the exporters use it -- */

/* Kinds of live objects (what track_each lists). */
enum { TRK_ALLOC = 1, TRK_ASYNC, TRK_HOST, TRK_MANAGED, TRK_BLOCK, TRK_VMM_CREATE,
       TRK_VMM_MAP, TRK_VMM_RESERVE, TRK_NLAYERS };

/* The TRK_* kind of the object an allocating action (msnap_action) makes;
 * 0 for actions that make none. */
int trk_kind_of_action(int action);

typedef struct trk_obj {
    uint64_t addr, size, stream, t_ns, aux;
    uint32_t stack;
    int16_t device;        /* ordinal, -1 unknown / host */
    uint8_t layer;         /* TRK_* */
    uint8_t used;
} trk_obj;

#define TRK_DEV(d) msnap_st_slot(d) /* slot of a device ordinal */
#define TRK_NDEV MSNAP_ST_NDEV

typedef struct track {
    msnap_state st;        /* live objects and levels: every rule is there */
    uint64_t reserved[TRK_NDEV], allocated[TRK_NDEV], async[TRK_NDEV],
             mapped[TRK_NDEV];   /* current levels per slot (state.h layers) */
    int have_blocks;       /* a block event was seen */
    int max_device;        /* largest device index seen, -1 none */
} track;

void track_init(track *t);
void track_free(track *t);
/* Applies one event.  For frees, *freed (when not NULL) receives the object
 * taken out (size 0 when the address was not live); returns 1 when the
 * event changed reserved or allocated of its device, 0 when not, -1 on host
 * OOM. */
int track_event(track *t, const msnap_event *e, trk_obj *freed);
/* Calls fn for every live object of layer (unordered). */
void track_each(track *t, int layer, void (*fn)(void *ctx, const trk_obj *o), void *ctx);

/* ---- jsonw: JSON text helpers on a FILE ---------------------------------- */
void jw_str(FILE *f, const char *s);   /* a quoted, escaped string */
#endif

/* Internals shared by the interop modules: temporary event files (spill.c),
 * live objects as the exporters write them (track.c) and JSON text output
 * (jsonw.c). */
#ifndef MEMSNAP_INTEROP_COMMON_H
#define MEMSNAP_INTEROP_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include "memsnap/format.h"
#include "format/state.h"

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
/* A file position of its own (a forked child reading a spill its parent
 * wrote; the parent's position stays as it was).  0 or -1 (errno). */
int spill_reopen(spill *s);
void spill_close(spill *s);

/* ---- track: live objects as the exporters write them (track.c) ---------- */

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

/* A state object (state.h) as the exporters see it. */
trk_obj trk_of(const msnap_obj *o);

/* ---- jsonw: JSON text helpers on a FILE ---------------------------------- */
void jw_str(FILE *f, const char *s);   /* a quoted, escaped string */
#endif

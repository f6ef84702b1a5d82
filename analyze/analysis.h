/* The analysis library's core: one read of one input, and everything every
 * reading command builds on (docs/architecture.md).
 *
 * An an_file reads a snapshot ("-" = stdin) once, in file order, and owns
 * what every view needs:
 *
 *   the header    scalars, argv and the device lines;
 *   the tables    stacks, syms, modules, strings (symtab.h);
 *   the state     the one state model (state.h): live objects, layers,
 *                 peaks, sites;
 *   the log       (when an observer asks for it) a compact record of every
 *                 change of live memory, of the counters lines, NVTX ranges,
 *                 PyTorch's segment records and OOMs, replayed at the end
 *                 by the observers that can only decide at the end what a
 *                 change means (the top sites of a timeline, the category
 *                 of a stack whose symbols come last in the file): a second
 *                 look at the run without a second read of the input, so a
 *                 pipe gives exactly what a file gives;
 *   moments       (an_moment) the live set at a moment that is known only
 *                 later (the peak of reserved, the last event before a
 *                 time), kept while passing it;
 *   the text      (when an observer asks for it, an_want_text) every
 *                 line as read, on its record, lines of unknown types
 *                 included: what a command that rewrites the file copies
 *                 through (memsnap symbolize).
 *
 * Backward stacks.  An allocation PyTorch's autograd engine makes while it
 * evaluates a node carries the node as its innermost frame (an autograd
 * frame, format.h) and the node's sequence number (q); the first forward
 * allocation that carries the same q was made by the forward op that
 * created the node.  The read gives such a backward allocation a stack of
 * its own: the autograd frame, then the forward allocation's frames
 * ("MmBackward0" inside "LlamaMLP.forward (modeling_llama.py:175)"), made
 * once per (node, forward stack) pair and added to the tables with an id
 * above the file's; without a forward allocation to name it, the autograd
 * frame alone (the recorder's own frames below it say nothing about the
 * program).  Every observer and every view sees only these stacks.
 *
 * Observers (an_observer) see every record after the tables and the state
 * took it, every event before the state applies it, and every change of
 * live memory (before and after), in file order; then the end.  Several
 * observers share one file: `memsnap summary` hangs its counts, the
 * findings model and the breakdown on one read.
 *
 * Cost: the read, the state's hash-map work and what the observers do;
 * with the log about 8-10 bytes of memory per event; a moment keeps at
 * most about three times the live set.
 *
 * Errors: an_read returns 2 with one line "PATH: why" (the reader's "line
 * N: ..." included, "out of memory", "not a memsnap snapshot").
 */
#ifndef MEMSNAP_ANALYZE_ANALYSIS_H
#define MEMSNAP_ANALYZE_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "memsnap/format.h"
#include "state.h"
#include "symtab.h"

typedef struct an_file an_file;

/* Any callback may be NULL.  A non-zero return stops the read (an_read
 * then says "out of memory" unless the observer set an_fail's message). */
typedef struct an_observer {
    void *ctx;
    /* Every record, in file order, after the tables and the state took it
     * (an event: after the state applied it). */
    int (*record)(void *ctx, an_file *f, const msnap_record *r);
    /* An event before the state applies it (f->ev_idx and f->t are
     * already this event's). */
    int (*event_before)(void *ctx, an_file *f, const msnap_event *e);
    /* A change of live memory (state.h: sign +1 added, -1 removed). */
    void (*change_before)(void *ctx, an_file *f, const msnap_obj *o, int sign);
    int (*change)(void *ctx, an_file *f, const msnap_obj *o, int sign);
    /* After the last record, once the state finished (pre-window objects
     * known, tables complete). */
    int (*end)(void *ctx, an_file *f);
} an_observer;

#define AN_MAX_OBSERVERS 8
#define AN_MAX_MOMENTS 16

typedef struct an_log an_log;
typedef struct an_moment an_moment;

struct an_file {
    const char *path;             /* as given; borrowed */
    int have_header;
    msnap_header hdr;             /* scalars; hdr.argv = argv, hdr.settings_json kept */
    char **argv;                  /* owned copies */
    char *settings;
    msnap_device_info dev[MSNAP_MAX_DEVICES]; /* header devices, then device lines */
    int ndev;
    sm_symtab tab;                /* stacks, syms, modules, strings */
    msnap_state st;               /* live objects, layers, peaks, sites */
    uint64_t ev_idx;              /* events read (the current one's 1-based index) */
    uint64_t t;                   /* the current event's time */
    uint64_t t_first, t_max;      /* first event's time; largest time of any record */
    int have_first;
    uint64_t lines;               /* last line read */
    int truncated;                /* the last line was cut off */
    int zstd;                     /* the input is zstd-compressed (known when
                                     the first record comes) */
    int want_text;                /* an_want_text */
    uint64_t *pre_freed;          /* st.pre[i] was freed after event pre_freed[i]
                                     (UINT64_MAX: live at the end, a state line) */
    size_t cap_pre_freed;
    /* PyTorch's backward named by its forward (see "Backward stacks") */
    u64map fwd_stack;             /* autograd sequence key -> forward stack id */
    u64map bwd_stack;             /* (autograd frame, forward stack) -> stack id */
    uint32_t next_stack;          /* the next stack id made here */
    an_log *log;                  /* NULL unless an observer wants it */
    an_moment *moments[AN_MAX_MOMENTS];
    int nmoments;
    an_observer obs[AN_MAX_OBSERVERS];
    int nobs;
    char fail[256];               /* an observer's message (an_fail) */
};

/* Zeroes *f for path (borrowed; "-" = stdin). */
void an_init(an_file *f, const char *path);
void an_free(an_file *f);

/* Adds an observer (called in the order added).  0 ok, -1 too many. */
int an_observe(an_file *f, const an_observer *o);

/* Keeps the change log (see above) for replays after the read.  Call
 * before an_read.  0 ok, -1 out of memory. */
int an_want_log(an_file *f);

/* Every record the observers see carries its line's text (msnap_record.
 * text), and a line of a type the format library does not know comes to
 * the observers' record hook as an MSNAP_REC_OTHER record (text only; the
 * tables and the state pass it by).  Call before an_read.  Costs a copy of
 * every line through the reading thread. */
void an_want_text(an_file *f);

/* Reads the whole input once.  0 ok (a cut-off last line is ok:
 * f->truncated); 2 with "PATH: why" in err. */
int an_read(an_file *f, char *err, size_t errlen);

/* an_read's message without its leading "PATH: " (for libraries whose
 * callers name the input themselves). */
void an_strip_path(const an_file *f, char *err);

/* An observer's reason for stopping the read (printed as "PATH: msg"). */
void an_fail(an_file *f, const char *msg);

/* ---- the log, replayed ----------------------------------------------------
 * In file order: first every pre-window object as an added change at event
 * 0 (state.h: objects live before the first recorded event, or named by a
 * ring dump's state section), then per event its changes and records.
 * Changes carry the state's site index (every object that counts in a
 * layer with sites has one) and whether the event came from PyTorch's
 * allocator (api torch). */
typedef struct an_visitor {
    void *ctx;
    /* A new event (idx 1-based; events that logged nothing are skipped). */
    void (*event)(void *ctx, uint64_t idx, uint64_t t_ns);
    /* key: the object's (an_obj_key), so an observer can follow it */
    void (*change)(void *ctx, uint32_t site, int sign, uint64_t size, int torch, uint64_t key);
    void (*counters)(void *ctx, const msnap_counters *c);
    /* nvtx_push (str = string id) or nvtx_pop of thread tid */
    void (*nvtx)(void *ctx, int push, uint32_t tid, uint32_t str);
    /* PyTorch's own segment records (segment_alloc/map: +1, free/unmap: -1) */
    void (*segment)(void *ctx, int device, int sign, uint64_t size);
    /* an oom event */
    void (*oom)(void *ctx, int device);
} an_visitor;

/* Replays the log (an_want_log before the read).  0 ok, -1 no log. */
int an_replay(const an_file *f, const an_visitor *v);

/* Bytes the log holds. */
size_t an_log_bytes(const an_file *f);

/* ---- moments ----------------------------------------------------------------
 * The live set at a moment known only later.  Mark a moment ("now": after
 * the current event, or before the first when no event was read); a later
 * mark replaces it; freeze keeps the current mark for good.  After the
 * read, an_moment_objects gives the live objects at the mark (the
 * pre-window objects live then included); unmarked: the live set at the
 * end.  Memory: the live set at the mark plus the changes since, at most
 * about twice the live set before they are folded into it. */
an_moment *an_moment_new(an_file *f);      /* NULL when out of memory or too many */
void an_moment_mark(an_moment *k);
void an_moment_freeze(an_moment *k);
int an_moment_marked(const an_moment *k);
/* The objects at the mark into a new array (*out, free() it; *n of them),
 * with the mark's event index and time.  0 ok, -1 out of memory. */
int an_moment_objects(an_moment *k, msnap_obj **out, size_t *n, uint64_t *ev_idx,
                      uint64_t *t_ns);

/* The state's live objects now, into a new array.  0 ok, -1 no memory. */
int an_live_objects(const an_file *f, msnap_obj **out, size_t *n);

/* The key of a live object in its space (state.h: the handle for PHYS,
 * the address otherwise). */
static inline uint64_t an_obj_key(const msnap_obj *o)
{
    return o->space == MSNAP_SP_PHYS ? o->aux : o->addr;
}

#endif

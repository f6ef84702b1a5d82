/* The analysis library's core: one read of one input, and everything every
 * reading command builds on (docs/architecture.md).
 *
 * The main types of the reading side, from the file up:
 *
 *   msnap_record  (memsnap/format.h) one line of a snapshot, parsed: the
 *                 header, an event (msnap_event), a stack, sym, module or
 *                 str line, counters, a ring dump's live lines, the trailer.
 *   an_file       (here) one read of one input, in file order, and what it
 *                 owns: the header, the tables, the state, the labels, the
 *                 change log and the moments; up to AN_MAX_OBSERVERS
 *                 observers borrow it during the read and after.
 *   sm_symtab     (symtab.h) the tables: stacks (id -> ips), syms (ip ->
 *                 function, file, line), modules, strings; the text of a
 *                 frame.  Complete only after the read (sym lines come last).
 *   msnap_state   (state.h) the one state model: every live object by key
 *                 space, levels and peaks per device and layer, sites
 *                 (stack, layer, device).  What an event does to live
 *                 memory is decided there alone.
 *   sm_labels     (label.h) one label per site, named by the user's code,
 *                 from the tables; made on first use, owned by the an_file.
 *   sm_model      (model.h) the findings model, an observer: per-site
 *                 figures and the top sites, site groups, the timeline's
 *                 columns (pass 2, from the log), the segment layout at one
 *                 moment, OOM stories and leak suspects (findings.h).
 *   breakdown     (breakdown.h) an observer: device used against what was
 *                 recorded, by library; the categories (category.h).
 *   summary       (summary.h) an observer: counts by action and API,
 *                 failures, marks; report.h makes the JSON of `summary`.
 *
 * Lifetimes: the an_file outlives every observer attached to it; what an
 * observer hands out (a model's sites, a layout) lives as long as it.
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
 * program).  An allocation made by Python code while the node ran (a hook
 * the engine calls, a Python autograd function's backward: FSDP's
 * all-gathers and reduce-scatters) keeps its own stack, node first: its
 * innermost Python frame, unless it is autograd's entry (torch/autograd/,
 * Tensor.backward), says where it was made, unless those frames are the
 * forward allocation's already (an import of memsnap's own export).  Every
 * observer and every view sees only these stacks.  A forward stack of more
 * than 255 frames gives its innermost 191 and its outermost 64 (the
 * program's line) to each backward stack: a real one is far shorter, and a
 * hostile file (one 100,000-frame stack, a node for each of its
 * allocations) would otherwise cost 8 x depth x nodes bytes.
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
#include "label.h"
#include "format/state.h"
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

/* A private memory pool of PyTorch's caching allocator (a CUDA graph's,
 * one graph_pool_handle() shares, a torch.cuda.MemPool), as the file names
 * it (memsnap/format.h, "Memory pools"): one per (device slot, pool id). */
typedef struct an_pool {
    uint64_t id;          /* msnap_pool_id of x (MSNAP_POOL_HANDLE kept) */
    int16_t device;       /* slot */
    uint8_t capturing;    /* an allocation in it was made during a graph capture */
} an_pool;

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
    sm_labels *labels;            /* an_labels: the site labels of the tables */
    an_pool *pools;               /* the private pools, in the order first named */
    uint32_t npools;              /* pool index i (from 1) is pools[i - 1] */
    size_t cap_pools;
    u64map pool_map;              /* (slot + 1, id) -> index */
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

/* The same read, fed by a reader of the caller's (analyze/live.c follows a
 * recording as it is written, a step at a time): an_feed_begin before the
 * first record (zstd: whether the input is compressed), an_feed per
 * record in file order (0 ok; 2 with "PATH: why" in err, the header check
 * and an observer's stop included), an_feed_end after the last one
 * (truncated: the last line was cut off; 0 or 2 as an_read).  Records fed
 * so far are in the tables and the state at once. */
void an_feed_begin(an_file *f, int zstd);
int an_feed(an_file *f, const msnap_record *rec, char *err, size_t errlen);
int an_feed_end(an_file *f, int truncated, char *err, size_t errlen);

/* Drops the change log and keeps none from now on (an observer asked for
 * it; a reader that follows a recording for hours cannot keep 8-10 bytes
 * an event): an_replay is then refused, and objects live before the first
 * event are not folded into the levels at the end. */
void an_forget_log(an_file *f);

/* an_read's message without its leading "PATH: " (for libraries whose
 * callers name the input themselves). */
void an_strip_path(const an_file *f, char *err);

/* An observer's reason for stopping the read (printed as "PATH: msg"). */
void an_fail(an_file *f, const char *msg);

/* The site labels of the file's stacks (label.h): made on the first call
 * after the read (or in an observer's end: the tables are complete then),
 * kept by f and made again when its tables or the site rules changed
 * since; freed with f.  NULL when out of memory (every label function
 * takes NULL: "stack N"). */
const sm_labels *an_labels(an_file *f);

/* 1 when the file was recorded in-process (memsnap.record(): the header's
 * settings say "in_process":1): no driver hook ran, so the file holds no
 * reserved memory but what PyTorch's segment events say, and a view must not
 * show "reserved 0" for the memory PyTorch held. */
int an_in_process(const an_file *f);

/* ---- pools ---------------------------------------------------------------
 * The read numbers the private pools of PyTorch's allocator as the file
 * names them (a block_alloc's x, from format 1.3 also a segment_*'s and a
 * live block's), from 1; 0 is a device's default pool.  Its kind: a graph
 * pool when PyTorch made it for a capture (MempoolId_t's first half) or a
 * block of it was allocated while capturing; else a torch.cuda.MemPool (or
 * a graph_pool_handle() no graph used).  Files before format 1.3 do not say
 * which half: every private pool of theirs is a graph pool. */
enum { AN_POOL_DEFAULT = 0, AN_POOL_GRAPH, AN_POOL_MEMPOOL, AN_POOL_KINDS };

/* "default", "graph", "mempool" ("?" out of range). */
const char *an_pool_kind_name(int kind);
/* The kind of pool index idx (AN_POOL_DEFAULT for 0 and out of range). */
int an_pool_kind(const an_file *f, uint32_t idx);
/* The pool of a live object: a block's (its x) index, 0 for the default
 * pool and for objects that are not blocks. */
uint32_t an_obj_pool(const an_file *f, const msnap_obj *o);
/* The pool index of x on device slot slot (0 when x names none or the read
 * never met it). */
uint32_t an_pool_lookup(const an_file *f, int slot, uint64_t x);
/* PyTorch's MempoolId_t of a pool id: {first, second}; the half is unknown
 * in files before format 1.3 (returns 0), else 1. */
int an_pool_torch_id(const an_file *f, uint64_t id, uint64_t out[2]);

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
    /* The same change and segment record with its pool (0: the device's
     * default pool; an_pool_kind), for an observer that follows pools;
     * called beside change and segment. */
    void (*pchange)(void *ctx, uint32_t site, int sign, uint64_t size, int torch, uint64_t key,
                    uint32_t pool);
    void (*psegment)(void *ctx, int device, int sign, uint64_t size, uint32_t pool);
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

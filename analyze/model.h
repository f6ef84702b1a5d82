/* The findings model of a snapshot: per-allocation live state (the
 * state model's), per-site aggregates, per-pixel-column timeline buckets
 * and, at one chosen moment, the layout of every segment with its blocks.
 * The painters (viz/timeline.c, viz/segmap.c, viz/compare.c) draw it; the
 * findings of `memsnap summary` (leak suspects, fragmentation, the OOM
 * story) print from it.
 *
 * One read of the input (analysis.h), in two stages:
 *
 *   pass 1  observes the read (sm_attach): learns what only the end can
 *           tell - each site's peak (so the top N sites per device), the
 *           time range, the event count, whether allocator blocks exist,
 *           the OOMs with their story (the layout is measured on the
 *           spot), leak suspects, the allocations that were already live
 *           before the first recorded event (ring mode: state/live lines,
 *           frees of unseen addresses) - and keeps the live set at the
 *           moments the segment map may be drawn at (the latest new peak of
 *           reserved, the first OOM, the last event before --at TIME:
 *           analysis.h moments).  At its end the layout of the chosen
 *           moment is built.
 *   pass 2  sm_finish replays the file's change log (analysis.h an_replay,
 *           not the input) into per-column buckets, with the top sites
 *           known, and keeps the NVTX ranges wide enough to see.  Only a
 *           model with columns has one.
 *
 * So a pipe gives what a file gives, and the input is read once.  Memory:
 * the live set, per-site aggregates, W columns x (N+1) values per device,
 * and the log (analysis.h) when there are columns; by category (model_columns.h
 * "Bands") the breakdown's tables and one byte per change of the log.
 *
 * The stacked layer (by site; by category see model_columns.h "Bands"):
 * allocator blocks (block_alloc/block_free) when the file has any;
 * otherwise the driver-level allocations (alloc, async_alloc,
 * managed_alloc, vmm_create), "reserved only".  The "reserved" line is the
 * driver memory of a device: cuMemAlloc/Pitch + cuMemCreate (device-located)
 * + stream-ordered + managed bytes live.
 *
 * What an event does to live memory (refused frees, unmaps across
 * mappings, memory live before the first event) is the state model's
 * (state.h); the model observes its changes.
 *
 * The parts (each a header included here and a file): model_axis.h (the x
 * axis), model_layout.h (the segment layout), model_groups.h (site
 * groups), model_columns.h (pass 2's columns and bands); model.c is pass 1
 * and the model's life, model_get.c the getters (model_int.h: the
 * insides the files share).
 */
#ifndef MEMSNAP_ANALYZE_MODEL_H
#define MEMSNAP_ANALYZE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "memsnap/format.h"
#include "util/human.h"
#include "analysis.h"
#include "symtab.h"

#define SM_NDEV (MSNAP_MAX_DEVICES + 1) /* last slot: device -1 / unknown */
#define SM_DEV_UNKNOWN MSNAP_MAX_DEVICES
#define SM_MAX_TOP 24                   /* most sites with their own colour */
#define SM_MAX_OOMS 16                  /* OOMs with a full story */

enum sm_cls { SM_CLS_NONE = 0, SM_CLS_MEM = 1, SM_CLS_BLOCK = 2 };

typedef struct sm_model sm_model;

/* The model's parts, each with its types and functions: */
#include "model_axis.h"      /* the x axis: time, events, marks; columns of an x */
#include "model_layout.h"    /* the segment layout at one moment */
#include "model_groups.h"    /* the sites as every view shows them */
#include "model_columns.h"   /* pass 2: the timeline's columns and bands, NVTX ranges */

struct cat_rules;
struct breakdown;

/* What the caller wants. */
typedef struct sm_opts {
    int top;             /* top sites per device with their own colour (<= SM_MAX_TOP) */
    int columns;         /* timeline columns (plot width in pixels); 0 = no timeline */
    int x_mode;          /* SM_X_TIME or SM_X_EVENTS */
    char x_word[32];     /* SM_X_MARKS: the word whose number is read from
                          * each mark ("hour"); "" = the first mark's first
                          * word followed by a number */
    int x_from;          /* enum sm_from: time axis starts at the first event
                          * or counters sample (default), or at t0 */
    int at;              /* enum sm_at: moment of the segment layout */
    uint64_t at_t_ns;    /* for SM_AT_TIME */
    uint64_t cap;        /* configured cap in bytes (--cap); 0 = header's or none */
    int all_segments;    /* segment map: no folding of similar segments, a
                          * taller picture (--all-segments) */
    int peak_allocated;  /* SM_AT_PEAK is the allocated layer's peak (when the
                          * file has blocks), not reserved's */
    int by;              /* enum sm_by: the timeline's bands (model_columns.h "Bands") */
    const struct cat_rules *rules; /* SM_BY_CATEGORY: the category rules
                          * (borrowed; NULL: the defaults) */
} sm_opts;

/* One allocation site: a stack id in one class on one device. */
typedef struct sm_site {
    uint32_t stack;
    uint8_t cls;         /* enum sm_cls */
    uint8_t kind;        /* msnap_action of its first allocation */
    int16_t device;      /* slot */
    int rank;            /* 0..top-1 on its device, -1 = "other" */
    uint64_t live, peak, peak_t, count, bytes, live_count;
    /* leak tracking (pass 1): live bytes at successive valleys */
    uint64_t snap, snap_ver;   /* live at the candidate valley, when touched since */
    uint64_t dirty;            /* valley serial when last put on the dirty list */
    uint64_t v_first, v_last;  /* live at the first / latest valley */
    uint32_t rises, falls;
    int in_valleys;            /* has a value for the first valley */
    uint32_t grp;              /* index into sm_groups() */
} sm_site;

/* An OOM (or failed allocation) and the state when it happened. */
typedef struct sm_oom {
    uint64_t t_ns, event_index, requested, dev_free, dev_total;
    int device, action, api, result;
    uint32_t stack;
    uint64_t allocated, reserved;       /* stacked layer / driver memory on the device */
    uint64_t total_free, largest_free;  /* inside reserved (allocator cache) */
    int blocks_seen;                    /* whether free inside reserved is known */
} sm_oom;

/* A leak suspect: a site whose live bytes at successive valleys of the
 * stacked total keep rising. */
typedef struct sm_leak {
    uint32_t site;
    uint64_t first, last;        /* live bytes at the first / last valley */
    uint32_t rises, falls;
} sm_leak;

typedef struct sm_dev {
    int seen;                        /* any stacked / reserved activity */
    uint64_t reserved, stacked, allocated, mem;   /* current levels */
    uint64_t peak_reserved, peak_reserved_t, peak_stacked, peak_stacked_t;
    uint64_t peak_allocated;         /* blocks only (0 without blocks) */
    uint64_t cnt_peak_reserved, cnt_peak_allocated; /* from counters lines */
    uint64_t total;                  /* device capacity (0 unknown) */
    char name[128];
    int ntop;                        /* top sites on this device */
    uint32_t top[SM_MAX_TOP];        /* site indexes by rank */
    /* the bands of the stacked area (model_columns.h, "Bands") */
    int nbands;                      /* bands with a name; [nbands] = the rest */
    uint8_t band_cat[SM_MAX_TOP + 1];/* by category: the category of each band */
    uint64_t band_peak[SM_MAX_TOP + 1];    /* by category, pass 2: each band's peak */
    uint64_t band_at_peak[SM_MAX_TOP + 1]; /* by category, pass 2: each band at
                                      * the peak of the stacked total */
    uint64_t cur[SM_MAX_TOP + 1];    /* pass 2: live per band */
    sm_col *cols;                    /* pass 2: opts.columns buckets */
    uint64_t *colvals;               /* columns x (SM_MAX_TOP+1): the bands at total_max */
    int last_col;
    uint32_t colour[SM_MAX_TOP];     /* colour of each rank when colour_set (compare, several files) */
    uint8_t colour_set[SM_MAX_TOP];
} sm_dev;

/* A new model; NULL when out of memory. */
sm_model *sm_new(const sm_opts *o);
void sm_free(sm_model *m);

/* Observes the read of f (an_read): pass 1 as it goes, the capture at its
 * end; with columns the change log is kept for sm_finish.  Call before
 * an_read; f must outlive the model.  0 ok, -1 out of memory. */
int sm_attach(sm_model *m, an_file *f);

/* Pass 2 after the read: the columns and the NVTX ranges, from the log.
 * Nothing to do without columns.  0 ok, -1 out of memory. */
int sm_finish(sm_model *m);

/* Reads the file at path into a model that owns its input (sm_attach on
 * an an_file of its own, an_read), then pass 2 when pass2 is set.  0 ok;
 * 2 unreadable input or out of memory, with a one-line message "PATH:
 * why" in err (the reader's "line N: ..." messages included). */
int sm_read_file(sm_model *m, const char *path, int pass2, char *err,
                 size_t errlen);

/* ---- results ---------------------------------------------------------- */

const sm_opts *sm_options(const sm_model *m);
const sm_dev *sm_device(const sm_model *m, int slot);
int sm_blocks_seen(const sm_model *m);      /* stacked layer = allocator blocks */
const sm_site *sm_sites(const sm_model *m, size_t *n);
/* Leak suspects, largest growth first; nvalleys: valleys found. */
const sm_leak *sm_leaks(const sm_model *m, size_t *n, uint64_t *nvalleys);
/* Stacked total at the first and the last valley (the floor). */
void sm_floor(const sm_model *m, uint64_t *first, uint64_t *last);
const sm_oom *sm_ooms(const sm_model *m, size_t *n, uint64_t *total);
uint64_t sm_events(const sm_model *m);
uint64_t sm_first_event_t(const sm_model *m);   /* t of the first event */
/* Peaks of the whole process (all devices at one moment): the stacked
 * layer (allocated when blocks are seen) and reserved; counters lines
 * count when they are higher (ring mode). */
void sm_peak_totals(const sm_model *m, uint64_t *stacked, uint64_t *reserved);
/* Colour of rank r of device slot d: the one set with sm_set_colour, else
 * the palette's (render.h viz_site_colour).  Ranks < 0 are "other". */
void sm_set_colour(sm_model *m, int slot, int rank, uint32_t rgb);
int sm_counters_seen(const sm_model *m);
uint64_t sm_cap(const sm_model *m);             /* --cap or header settings */
/* The file's stack/sym/module/str tables (symtab.h, the an_file's),
 * complete after the read. */
const sm_symtab *sm_symtab_of(const sm_model *m);
const char *sm_str(const sm_model *m, uint32_t id);
const msnap_header *sm_header_info(const sm_model *m, char *mode, size_t modelen);
int sm_ring_mode(const sm_model *m);
/* The last whole line of a file cut off (a recording whose process died,
 * a copy cut short), 0 when the file ended cleanly. */
uint64_t sm_truncated_after(const sm_model *m);
/* Frame i of a stack as "fn (file:line)", "module+0xoff" or "0xip"; returns
 * the stack's depth (0 unknown).  Names are as the file has them. */
int sm_frame(const sm_model *m, uint32_t stack, int i, char *buf, size_t cap);

/* What the file says about frame i of a stack (sm_frame_info, symtab.h):
 * its ip, sym record and sized module.  Returns the stack's depth (0 when
 * the stack is unknown); for i out of range only the depth. */
int sm_frame_get(const sm_model *m, uint32_t stack, int i, sm_frame_info *f);

/* The site labels of the model's file (label.h; an_labels of the an_file
 * the model observed). */
const sm_labels *sm_labels_of(const sm_model *m);
/* The an_file the model observed (its pools, analysis.h). */
const an_file *sm_file(const sm_model *m);

#endif

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
 * and the log (analysis.h) when there are columns; by category (see
 * "Bands") the breakdown's tables and one byte per change of the log.
 *
 * The stacked layer (by site; by category see "Bands"): allocator blocks
 * (block_alloc/block_free) when the file has any; otherwise the
 * driver-level allocations (alloc, async_alloc, managed_alloc,
 * vmm_create), "reserved only".  The "reserved" line is the
 * driver memory of a device: cuMemAlloc/Pitch + cuMemCreate (device-located)
 * + stream-ordered + managed bytes live.
 *
 * What an event does to live memory (refused frees, unmaps across
 * mappings, memory live before the first event) is the state model's
 * (state.h); the model observes its changes.
 */
#ifndef MEMSNAP_ANALYZE_MODEL_H
#define MEMSNAP_ANALYZE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "memsnap/format.h"
#include "human.h"
#include "analysis.h"
#include "symtab.h"

#define SM_NDEV (MSNAP_MAX_DEVICES + 1) /* last slot: device -1 / unknown */
#define SM_DEV_UNKNOWN MSNAP_MAX_DEVICES
#define SM_MAX_TOP 24                   /* most sites with their own colour */
#define SM_MAX_OOMS 16                  /* OOMs with a full story */
#define SM_MAX_RANGES 4096              /* NVTX ranges kept for drawing */
#define SM_RANGE_DEPTHS 3               /* NVTX nesting depths drawn */

enum sm_cls { SM_CLS_NONE = 0, SM_CLS_MEM = 1, SM_CLS_BLOCK = 2 };
enum sm_at { SM_AT_DEFAULT = 0, SM_AT_OOM, SM_AT_PEAK, SM_AT_END, SM_AT_TIME };
enum sm_x { SM_X_TIME = 0, SM_X_EVENTS, SM_X_MARKS };
/* x units per unit of a mark's value on the SM_X_MARKS axis */
#define SM_MARK_SCALE 1000000.0
enum sm_from { SM_FROM_FIRST = 0, SM_FROM_ZERO };
/* What the bands of the stacked area are (sm_opts.by). */
enum sm_by { SM_BY_SITE = 0, SM_BY_CATEGORY };

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
    int by;              /* enum sm_by: the timeline's bands (see "Bands") */
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

/* A site as every view shows it: the sites (stacks) of one layer and
 * device whose labels read the same are one (label.c), with the figures of
 * their sum over time (the file's change log replayed, analysis.h). */
typedef struct sm_group {
    uint32_t stack;            /* its member with the highest peak: names it */
    uint8_t layer;             /* MSNAP_LAYER_RESERVED, _ALLOCATED or _PINNED */
    uint8_t cls;               /* enum sm_cls */
    uint8_t kind;              /* the representative's first allocation's action */
    int16_t device;            /* slot */
    int rank;                  /* 0..top-1 on its device in the stacked layer, -1 */
    uint64_t live, peak, peak_t;     /* live (at the end), peak and when */
    uint64_t count, bytes, live_count; /* summed over its members */
    uint32_t nmembers;
} sm_group;

/* Layout at one moment: segments (rows of the map) and what fills them. */
typedef struct sm_span {
    uint64_t addr, size;
    uint32_t site;               /* index into sites, UINT32_MAX: no site */
    uint8_t what;                /* SM_SPAN_BLOCK, _USED, _FREE, _UNMAPPED */
} sm_span;
enum { SM_SPAN_BLOCK = 1, SM_SPAN_USED, SM_SPAN_FREE, SM_SPAN_UNMAPPED };

typedef struct sm_segment {
    uint64_t addr, size;
    uint8_t kind;                /* alloc, async_alloc, managed_alloc, vmm_reserve; 0: blocks outside any segment */
    int16_t device;
    uint32_t site;
    size_t first_span, nspans;   /* spans cover [addr, addr+size) in address order */
    uint64_t largest_free;
} sm_segment;

typedef struct sm_dev_layout {
    uint64_t segments, segment_bytes, mapped_bytes, block_bytes;
    uint64_t total_free, largest_free;   /* free = mapped but in no block */
    uint64_t other_bytes;  /* with blocks: driver memory of other libraries
                              (cuBLAS, cuDNN, NCCL), used by them, never free
                              (SM_SPAN_USED spans) */
} sm_dev_layout;

typedef struct sm_layout {
    int valid;
    uint64_t t_ns, event_index;  /* the moment: after event #event_index (1-based; 0 = before any) */
    int at;                      /* enum sm_at it was taken for */
    sm_segment *segs;            /* by device, then address */
    size_t nsegs;
    sm_span *spans;
    size_t nspans;
    sm_dev_layout dev[SM_NDEV];
} sm_layout;

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

/* Per-column timeline buckets of one device. */
typedef struct sm_col {
    uint64_t total_max, total_min;   /* stacked total */
    uint64_t res_max, res_min;       /* reserved line */
    uint64_t cnt_res, cnt_alloc;     /* counters series (max in column) */
    uint8_t has, has_cnt;
} sm_col;

typedef struct sm_range {
    uint64_t t0, t1;                 /* x units (ns or event index) */
    uint32_t str;
    uint8_t lane;                    /* 0..SM_RANGE_DEPTHS-1 */
} sm_range;

/* Bands.  The timeline's stacked area is drawn in bands, cur[] and
 * colvals per band, band nbands on top being "the rest":
 *
 *   by site      (SM_BY_SITE, the default) the stacked layer (allocator
 *                blocks when the file has any, else driver allocations);
 *                band r is the site of rank r (top[r]), nbands = ntop, the
 *                rest is the sites out of the top ("other").
 *   by category  (SM_BY_CATEGORY) what `memsnap summary`'s category table
 *                counts for the device, each change in the category
 *                breakdown.c gave it (bd_change_categories: the model's
 *                pass 2 replays the same changes in the same order after
 *                the breakdown's end): allocator blocks plus other
 *                libraries' driver memory (cuBLAS workspaces, NCCL
 *                buffers; not an allocator's own segments) when the device
 *                has blocks, else every driver allocation.  Band b is
 *                category band_cat[b]: the categories with bytes on the
 *                device from the longest-lived to the shortest
 *                (parameters, optimizer_state, gradients, workspaces,
 *                communication, kv_cache, inputs, activations,
 *                temporaries, then the user's own in the rules' order),
 *                "other" the rest band (with any beyond SM_MAX_TOP).  peak_stacked becomes this total's peak;
 *                band_peak and band_at_peak are summary's "peak" and "at
 *                total peak" of each category, and so are the colvals of
 *                the first column whose total_max is peak_stacked.
 *                The sites keep their ranks (the segment map, the leak
 *                finder), the bands are not sites.
 */
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
    /* the bands of the stacked area (see "Bands" above sm_dev) */
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

typedef struct sm_model sm_model;

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
/* The sites as every view shows them (sm_group), after the read. */
const sm_group *sm_groups(const sm_model *m, size_t *n);
/* Leak suspects, largest growth first; nvalleys: valleys found. */
const sm_leak *sm_leaks(const sm_model *m, size_t *n, uint64_t *nvalleys);
/* Stacked total at the first and the last valley (the floor). */
void sm_floor(const sm_model *m, uint64_t *first, uint64_t *last);
const sm_oom *sm_ooms(const sm_model *m, size_t *n, uint64_t *total);
const sm_layout *sm_layout_at(const sm_model *m);
/* The live objects at the moment the layout was taken at (opts.at), into
 * a new array (free() it), with the moment's time.  0 ok, -1 out of
 * memory or before the read ended. */
int sm_capture_objects(const sm_model *m, msnap_obj **out, size_t *n, uint64_t *t_ns);
const sm_range *sm_ranges(const sm_model *m, size_t *n, uint64_t *total);
/* x range of the timeline: [x_lo, x_hi] in ns or event index.  In time
 * mode x_lo is the first event's or the first counters sample's time,
 * whichever is earlier (x_from = SM_FROM_FIRST), or 0 (SM_FROM_ZERO): a
 * recorder's t0 is when the process started, often seconds before the
 * first CUDA allocation. */
void sm_x_range(const sm_model *m, uint64_t *lo, uint64_t *hi);
/* Replaces the x range (compare puts several snapshots on one axis); call
 * between pass 1 and pass 2.  lo < hi. */
void sm_set_x_range(sm_model *m, uint64_t lo, uint64_t hi);
/* The x of event #idx (1-based, file order) at time t_ns in the model's
 * x mode: t_ns, idx - 1, or the mark value there (SM_X_MARKS). */
uint64_t sm_x_of_event(const sm_model *m, uint64_t idx, uint64_t t_ns);
/* The marks axis (SM_X_MARKS) after pass 1: the number of marks whose
 * value was read (0: the axis has nothing to stand on) and the word read
 * ("hour"; "" for bare numbers). */
size_t sm_marks(const sm_model *m, const char **word);
/* A number read from a mark's text: with word non-empty, the number that
 * follows the first whole word `word` (case-insensitive; spaces, ':' or
 * '=' between); with word empty, the number after the first word followed
 * by one (that word goes to found, cap bytes), or a text that starts with a
 * number.  0 ok with *v set, -1 no such number. */
int sm_mark_value(const char *text, const char *word, double *v, char *found,
                  size_t cap);
/* Column of an x value (clamped to the columns). */
int sm_col_of(const sm_model *m, uint64_t x);
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

/* Site labels (label.c): see the top of label.c for the rule. */
#define SM_LABEL_MAX 160
/* The frame that names a site: the innermost one outside the memory
 * runtime and allocator libraries, shortened for a legend. */
void sm_site_label(const sm_model *m, uint32_t stack, char *buf, size_t cap);
/* Labels for sites shown together (a legend, a list): like sm_site_label,
 * and where two of them would read the same, each gets " from CALLER" (the
 * first caller only its stack has) or " (stack N)". */
void sm_site_labels(const sm_model *m, const uint32_t *stacks, int n,
                    char (*labels)[SM_LABEL_MAX]);
/* How many of a stack's innermost frames are the memory runtime's (the
 * driver, cudart, an allocator, memsnap's recorder and plugin): what a
 * listing of the site's frames leaves out. */
int sm_runtime_frames(const sm_model *m, uint32_t stack);
/* The group of a stack's site: the sites whose labels read the same are
 * one (UINT32_MAX when the stack is unknown). */
uint32_t sm_site_group(const sm_model *m, uint32_t stack);
/* A key that names the same site in another snapshot of the same program
 * (another run, another rank, another allocator setting): the hash of the
 * site's label (label.c), which holds no address, no stack id and none of
 * the allocator's frames; the same for every stack of one sm_site_group. */
uint64_t sm_site_key(const sm_model *m, uint32_t stack);
/* A C++ function name shortened for a legend: demangled when it is
 * mangled (_Z...) and a demangler is reachable, without the argument
 * list, template arguments, return type, "(anonymous namespace)::" and
 * " [clone ...]". */
void sm_short_name(const char *fn, char *buf, size_t cap);
/* Lets the demangler load libstdc++ when it is not in the process (the
 * CLI does; default off, as for the symbolizer). */
void sm_demangle_allow_loading(int allow);

/* Live bytes of a band (a top site's rank, or a category's band; nbands
 * for the rest) of device slot at column col, for tests and the painter. */
uint64_t sm_col_value(const sm_model *m, int slot, int col, int band);

/* The category name of band b of a slot (by category; b = nbands: "other"),
 * NULL by site or out of range. */
const char *sm_band_category(const sm_model *m, int slot, int band);

/* The category breakdown behind the bands (by category, after the read;
 * NULL by site): breakdown.h, the same object `memsnap summary` prints. */
const struct breakdown *sm_breakdown(const sm_model *m);

/* Parses "oom", "peak", "end", or a time ("12.5", "12.5s", "800ms",
 * "3min", "1.5h", "250us", "1000ns") into *at and *t.  0 ok, -1 bad. */
int sm_parse_at(const char *s, int *at, uint64_t *t_ns);


#endif

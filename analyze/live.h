/* The live view of a recording: what `memsnap top` shows and what `memsnap
 * run --metrics` (and `memsnap.record(..., metrics=PORT)`) serve, from one
 * source and one computation, so the terminal and Prometheus never
 * disagree (docs/cli.md, memsnap top; docs/recorder.md, Watching it live).
 *
 * Sources, found from the snapshot path a user has (an_live_open):
 *
 *   follow  a stream recording (header mode "stream"), read through the one
 *           read loop (analysis.h, an_feed) from its first line to where
 *           the writer has got to, and then on as it grows (the format
 *           reader's follow mode: a line or a zstd block the writer has not
 *           finished waits for the next update).  Its trailer ends it.  The
 *           change log is not kept (an_forget_log): following costs the
 *           live set and the sites, not 8-10 bytes an event.
 *   ring    a ring-mode run writes nothing until a dump; its recorder
 *           writes PATH.live instead (recorder/live.c), a small complete
 *           snapshot (header, devices, modules, the counters of the whole
 *           run, the live objects as a state section with their stacks, the
 *           OOMs, a trailer with the events processed and dropped), renamed
 *           into place once a second while someone watches: while
 *           PATH.live.want was touched in the last 30 s (every update here
 *           touches it) or the run was started with --metrics.  Each update
 *           reads it whole, as a finished file.
 *   file    a finished file (a trailer, a ring dump of a process that is
 *           gone), or any file with --at TIME: read once, to its end or to
 *           the last event at or before TIME (then only its tables: the sym
 *           lines that name native frames come last).
 *
 * The view (an_live_view), per device: reserved and allocated now with
 * their peaks (state.h levels, counters folded in), a history of both for
 * the sparkline (one point a second of recording time: the state's levels
 * as the read passes each second, or a ring run's counters), free inside
 * reserved and the largest free block (the segment layout of the live set
 * now, model.h sm_layout_of: the rules of `summary`'s fragmentation), OOMs,
 * the top live sites of the stacked layer (allocator blocks when the file
 * has any, else driver memory) grouped by label as every view names them,
 * each with its trend (the change over the last minute of recording time),
 * and for a PyTorch program the categories of the live memory
 * (breakdown.h bd_live_category).  For the process: events read, dropped,
 * the floor (the stacked total at the first and the latest valley, as
 * `summary`'s leak finder sees them: findings.h), whether it ended, and
 * how long no new data came.
 *
 * Threads: an an_live is used by one thread at a time.  Errors: 2 with one
 * line "PATH: why" in err (the reader's messages included).
 */
#ifndef MEMSNAP_ANALYZE_LIVE_H
#define MEMSNAP_ANALYZE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "category.h"
#include "memsnap/format.h"
#include "model.h"

#define AN_LIVE_SITES 32            /* top sites kept per device */
#define AN_LIVE_HISTORY 600         /* sparkline points, one a second */
#define AN_LIVE_TREND_NS (60ull * 1000000000ull) /* the trend's window */
#define AN_LIVE_WANT_S 30           /* a watcher's request holds this long */
#define AN_LIVE_FRESH_S 5           /* a live file older than this is stale */

enum an_live_source { AN_LIVE_FOLLOW = 1, AN_LIVE_RING, AN_LIVE_FILE };

typedef struct an_live_site {
    char label[SM_LABEL_MAX];
    uint64_t bytes;                 /* live now */
    int64_t trend;                  /* bytes now - bytes trend_span_ns ago */
    uint64_t trend_span_ns;         /* 0: no earlier sample to compare with */
} an_live_site;

typedef struct an_live_cat {
    char name[CAT_NAME_MAX];
    uint64_t bytes;
} an_live_cat;

typedef struct an_live_point {
    uint64_t t_ns, reserved, allocated;
} an_live_point;

typedef struct an_live_dev {
    int device;                     /* CUDA ordinal (-1: host / unknown) */
    char name[128];
    uint64_t total;                 /* the device's memory, 0 unknown */
    uint64_t reserved, peak_reserved;
    uint64_t allocated, peak_allocated;   /* allocator blocks */
    uint64_t device_used;           /* NVML's used figure, last sample; 0 unknown */
    int frag_known;                 /* blocks seen, and driver memory recorded
                                       (peak_reserved > 0): the two below are
                                       known */
    uint64_t free_in_reserved, largest_free;
    uint64_t ooms;
    int site_layer;                 /* MSNAP_LAYER_ALLOCATED or _RESERVED */
    int nsites;                     /* largest first */
    an_live_site sites[AN_LIVE_SITES];
    int ncats;                      /* largest first; 0: not a PyTorch program */
    an_live_cat cats[CAT_MAX];
    size_t nhist;                   /* oldest first */
    an_live_point hist[AN_LIVE_HISTORY];
} an_live_dev;

typedef struct an_live_view {
    int source;                     /* enum an_live_source */
    const char *path;               /* the snapshot path given */
    int64_t pid;
    char host[256];
    char command[512];              /* argv joined by spaces, cut */
    char mode[16];                  /* "stream" | "ring" */
    uint64_t t0_unix_ns;
    uint64_t t_ns;                  /* recording time the view is at */
    uint64_t at_ns;                 /* --at TIME, UINT64_MAX: none */
    int finished;                   /* the trailer was read */
    char reason[32];                /* its reason ("exit", ...) */
    int truncated;                  /* a finished file cut off */
    double idle_s;                  /* wall seconds since new data came */
    int replaced;                   /* follow: another file is at the path now
                                       (a new recording): run top again */
    int catching_up;                /* an update stopped at its budget */
    uint64_t events, dropped;
    int blocks_seen, torch;         /* allocator blocks; PyTorch's */
    int in_process;                 /* memsnap.record(): no driver level, so
                                       no reserved memory is known */
    uint64_t floor_first, floor_last, valleys;
    int ndev;
    an_live_dev dev[MSNAP_MAX_DEVICES + 1];
} an_live_view;

typedef struct an_live_opts {
    uint64_t at_ns;                 /* UINT64_MAX: the end / follow */
    int sites;                      /* top sites per device, 1..AN_LIVE_SITES */
    int wait_ms;                    /* how long open waits for a ring run's
                                       PATH.live (0: the default, 3000) */
    const char *category_rules;     /* a rules file, NULL: the defaults */
    unsigned budget;                /* records an update reads at most (0:
                                       about a million) */
    int symbolize;                  /* name the live sites' native frames from
                                       the module records before the file's
                                       own sym lines come (at its end) */
} an_live_opts;

typedef struct an_live an_live;

/* Finds the source of path (above) and reads what is there, so the first
 * view is ready.  NULL with "PATH: why" in err (one line): not a
 * snapshot, a missing file that no ring-mode run answers for, a bad rules
 * file. */
an_live *an_live_open(const char *path, const an_live_opts *o, char *err, size_t errlen);

/* Reads what came since the last update (follow: new records, at most
 * about a million a call, view->catching_up saying there is more; ring:
 * PATH.live again when it changed) and recomputes the view.  0 ok, 2 with
 * "PATH: why" in err. */
int an_live_update(an_live *l, char *err, size_t errlen);

/* The view of the last update; valid until the next update or close. */
const an_live_view *an_live_view_of(const an_live *l);

void an_live_close(an_live *l);

/* The path of the ring-mode live file of snapshot path (PATH.live) and
 * of the watchers' request (PATH.live.want), into buf.  0, -1 too long. */
int an_live_file_path(const char *path, const char *suffix, char *buf, size_t cap);

#endif

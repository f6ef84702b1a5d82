/* The counts behind `memsnap summary`: an observer of the one read of a
 * snapshot (analysis.h).  What is live, the layers, their peaks and the
 * allocation sites are the state model's (state.h, one definition of each
 * layer in docs/format.md "Layers"); this module adds what only the
 * summary prints: the header, event counts per action and API, the failed
 * allocations and frees, the values at NVTX marks and the trailer.
 *
 * Memory: the OOM/failed-free/mark lists; never the events.  Frames and
 * mark messages are printed from the an_file's tables.
 */
#ifndef MEMSNAP_ANALYZE_SUMMARY_H
#define MEMSNAP_ANALYZE_SUMMARY_H

#include <stdint.h>

#include "analysis.h"
#include "memsnap/format.h"
#include "format/state.h"

/* A failed allocation (oom / alloc_error) or a failed free. */
typedef struct sum_fail {
    uint64_t t, size, dev_free, dev_total, addr;
    int action, api, device, result;
    uint32_t stack;
} sum_fail;

/* Per-device values at an nvtx_mark (only with want_marks). */
typedef struct sum_mark_dev {
    uint64_t reserved, async, allocated;   /* current levels (state.h) */
} sum_mark_dev;

typedef struct sum_mark {
    uint64_t t;
    uint32_t str;       /* string id; message resolved at print time */
    int ndev;           /* entries in vals: devices 0..ndev-1 */
    sum_mark_dev *vals;
} sum_mark;

#define SUM_MAX_LISTED 1000 /* OOMs / failed frees / marks kept in detail */

typedef struct summary {
    /* header */
    int have_header;
    int major, minor;
    int64_t pid;
    int has_rank;              /* the header's rank (format 1.2 files of late 2026 on) */
    int64_t rank;
    char host[256];
    char mode[16];
    char **argv;
    int argc;
    uint64_t t0_unix_ns;
    int ndevinfo;
    msnap_device_info devinfo[MSNAP_MAX_DEVICES];

    /* progress */
    uint64_t lines;            /* last complete line read */
    int truncated;
    uint64_t t_last;           /* largest t seen */
    uint64_t events;
    uint64_t by_action[MSNAP_A_COUNT];
    uint64_t by_api[MSNAP_API_COUNT];
    const msnap_state *st;     /* the an_file's: live objects, layers, peaks, sites */
    uint64_t live_count[MSNAP_ST_NDEV], live_bytes[MSNAP_ST_NDEV];
    uint64_t blocks_live_count, blocks_live_bytes; /* allocator blocks live at the end */
    /* PyTorch's blocks: the sizes the program asked for (y), live now, and
     * at each device's allocated peak (where they differ from the blocks) */
    uint64_t req_live[MSNAP_ST_NDEV], req_at_peak[MSNAP_ST_NDEV];
    int req_seen;
    int torch_blocks;          /* some blocks came from PyTorch's allocator */
                               /* RESERVED (device slots) and PINNED (the
                                  host slot) objects live at the end */

    /* failures */
    uint64_t n_oom, n_alloc_error, n_free_error;
    sum_fail *fails;            /* ooms and alloc errors, first SUM_MAX_LISTED */
    size_t nfails;
    sum_fail *free_fails;
    size_t nfree_fails;

    /* marks */
    int want_marks;
    uint64_t n_marks;
    sum_mark *marks;
    size_t nmarks;

    /* trailer */
    int trailer_seen;
    uint64_t tr_events, tr_dropped, tr_stacks_dropped;
    char tr_reason[64];

} summary;

/* Observes the read of f (call before an_read; s prepared by
 * summary_init; f outlives s's use).  0 ok, -1 too many observers. */
int summary_attach(summary *s, an_file *f);

/* Zeroes *s; want_marks: keep per-device values at every nvtx_mark. */
void summary_init(summary *s, int want_marks);

/* Frees everything summary_read allocated. */
void summary_free(summary *s);

/* The sites of one layer (state.h: RESERVED, ALLOCATED or PINNED) by peak
 * live bytes, largest first, ties by stack id: up to max of them into out
 * (pointers into the state).  Returns how many. */
size_t summary_top_sites(const summary *s, int layer, const msnap_site **out,
                         size_t max);

#endif

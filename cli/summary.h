/* The summary engine behind `memsnap summary`: one streaming pass over a
 * snapshot that replays every event into per-allocation live state and
 * per-device running totals, keeping peaks as it goes.
 *
 * Layers and totals (per device unless said otherwise):
 *   reserved   cuMemAlloc/Pitch bytes live + cuMemCreate physical bytes live
 *              (device-located handles only) — the driver's view;
 *   async      stream-ordered allocations live (cuMemAllocAsync & co);
 *   managed    cuMemAllocManaged bytes live;
 *   allocated  allocator blocks live (block_alloc/block_free), only when the
 *              memsnap allocator was in the process (allocated_seen);
 *   vmm_va     cuMemAddressReserve virtual address space reserved;
 *   vmm_mapped bytes mapped with cuMemMap;
 *   host       pinned host memory live (process-wide, not per device).
 *
 * Live state is keyed by layer and address (VMM physical memory by handle):
 * under unified addressing a device pointer names one allocation whatever
 * the device, and an allocator block may start at the same address as its
 * segment, hence the layer.  A free without a size ("n") takes its size
 * from the live entry; a free of an address never seen counts as unmatched
 * (its size, if the line has one, is still taken off the totals).
 *
 * Memory: the live set, one aggregate per stack id and the OOM/failed-free/
 * mark lists; never the events.  The file's stack/module/sym/str records
 * are left to the feed: `memsnap summary` prints its frames and mark
 * messages from the tables of the findings model (viz/symtab.h,
 * vm_symtab_of).
 *
 * Peaks: from the replay.  When the file also carries "counters" records
 * (ring mode keeps them for the whole run while events cover only the last
 * window) a higher counters value replaces the replayed peak, so a ring
 * dump still shows the peak of the whole run.
 */
#ifndef MEMSNAP_CLI_SUMMARY_H
#define MEMSNAP_CLI_SUMMARY_H

#include <stdint.h>

#include "memsnap/format.h"
#include "memsnap/u64map.h"

/* Device slots: 0..MSNAP_MAX_DEVICES-1 are CUDA ordinals; the last slot
 * gathers device -1 (unknown) and out-of-range ordinals. */
#define SM_NDEV (MSNAP_MAX_DEVICES + 1)
#define SM_DEV_UNKNOWN MSNAP_MAX_DEVICES

/* A running total with its peak. */
typedef struct sm_level {
    uint64_t cur;
    uint64_t peak;
    uint64_t peak_t;   /* t_ns when peak was first reached */
} sm_level;

typedef struct sm_device {
    int seen;          /* any event or header entry for this device */
    sm_level reserved, async, managed, allocated, vmm_va, vmm_mapped;
    uint64_t live_count, live_bytes; /* memory allocations live at the end
                                        (reserved+async+managed layers) */
} sm_device;

/* A failed allocation (oom / alloc_error) or a failed free. */
typedef struct sm_fail {
    uint64_t t, size, dev_free, dev_total, addr;
    int action, api, device, result;
    uint32_t stack;
} sm_fail;

/* Per-device values at an nvtx_mark (only with want_marks). */
typedef struct sm_mark_dev {
    uint64_t reserved, async, allocated;
} sm_mark_dev;

typedef struct sm_mark {
    uint64_t t;
    uint32_t str;       /* string id; message resolved at print time */
    int ndev;           /* entries in vals: devices 0..ndev-1 */
    sm_mark_dev *vals;
} sm_mark;

/* One allocation site (stack id) aggregated over the whole run. */
typedef struct sm_site {
    uint32_t stack;
    int kind;           /* action of its first allocation */
    int device;
    uint64_t live, peak, peak_t;
    uint64_t count;     /* allocations made */
    uint64_t bytes;     /* bytes allocated in total */
    uint64_t live_count;
} sm_site;

/* One live allocation / segment / handle / mapping. */
typedef struct sm_live {
    uint64_t addr, size, t;
    uint32_t stack;
    int16_t device;     /* slot index */
    uint8_t kind;       /* msnap_action */
    uint8_t layer;
    uint32_t site;      /* index into sites, UINT32_MAX when none */
} sm_live;

#define SM_MAX_LISTED 1000 /* OOMs / failed frees / marks kept in detail */

typedef struct summary {
    /* header */
    int have_header;
    int major, minor;
    int64_t pid;
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
    uint64_t unmatched_frees;  /* frees of addresses never seen */
    uint64_t reused_addrs;     /* allocations at an address still live */

    sm_device dev[SM_NDEV];
    sm_level pinned;           /* pinned host, process-wide */
    int allocated_seen;        /* any block_alloc/block_free */
    uint64_t counters_records;

    /* failures */
    uint64_t n_oom, n_alloc_error, n_free_error;
    sm_fail *fails;            /* ooms and alloc errors, first SM_MAX_LISTED */
    size_t nfails;
    sm_fail *free_fails;
    size_t nfree_fails;

    /* marks */
    int want_marks;
    uint64_t n_marks;
    sm_mark *marks;
    size_t nmarks;

    /* state section (recorder's view of what was live at a dump) */
    int state_seen;
    uint64_t state_t, state_nlive, state_bytes;

    /* trailer */
    int trailer_seen;
    uint64_t tr_events, tr_dropped, tr_stacks_dropped;
    char tr_reason[64];

    /* live set and aggregates */
    u64map live_map;           /* (layer, addr|handle) -> index into live */
    sm_live *live;
    size_t nlive_slots, cap_live;
    uint32_t *live_free;       /* free list of live slots */
    size_t nlive_free, cap_live_free;
    u64map site_map;           /* stack id -> index into sites */
    sm_site *sites;
    size_t nsites, cap_sites;

    /* free_error undo: the last SM_UNDO frees, so that a free_error right
     * after a free of the same address puts the allocation back */
    struct { sm_live e; uint64_t key; int valid; } undo[16];
    int undo_pos;

    /* Called with every record read (NULL: none): lets `memsnap summary`
     * feed its findings model (viz/model.h) in the same pass; the model
     * also keeps the file's stack/sym/module/str tables.  A non-zero
     * return stops the read as out of memory. */
    int (*feed)(void *ctx, const msnap_record *r);
    void *feed_ctx;

} summary;

/* Reads the snapshot at path into *s (which summary_init prepared).
 * Returns 0 on success (a truncated last line is success, s->truncated
 * set), 2 on unreadable input with a one-line message "PATH: why" in err. */
int summary_read(summary *s, const char *path, char *err, size_t errlen);

/* Zeroes *s; want_marks: keep per-device values at every nvtx_mark. */
void summary_init(summary *s, int want_marks);

/* Frees everything summary_read allocated. */
void summary_free(summary *s);

/* Live-at-end totals for the host (pinned) layer. */
void summary_host_live(const summary *s, uint64_t *count, uint64_t *bytes);

/* Sorts the sites by peak live bytes (largest first, ties by stack id) and
 * returns them; the array stays owned by s. */
const sm_site *summary_sites_by_peak(summary *s, size_t *n);

/* Human-readable size with a 1024 base: "512 B", "1.50 KiB", "2.00 GiB". */
const char *summary_fmt_size(uint64_t bytes, char *buf, size_t cap);

#endif

/* Internal types of libmemsnap_alloc.  include/memsnap/alloc.h explains the
 * concepts (segments, blocks, states, invariants); this file holds the
 * structures and the contracts between the files:
 *
 *   config.c     MEMSNAP_ALLOC_CONF parsing, defaults
 *   driver.c     the default driver table, context entry, trace/annotate hooks,
 *                error messages
 *   tree.c       the free trees (treap keyed by size, segment number, address)
 *   blocks.c     block objects, pointer map, split / merge / make-free
 *   segments.c   fixed segments: size classes, best fit, grow, release
 *   expandable.c expandable segments: reservation, map at lowest free address,
 *                unmap free pages
 *   events.c     stream safety: stream table, event pool, pending blocks,
 *                moving FREE(S) blocks to ANY
 *   stats.c      counters (X-macro), recount, snapshot
 *   check.c      the invariant walker
 *   alloc.c      public API: create/destroy, malloc (fast path + the one slow
 *                path with the OOM retry), free, empty_cache
 *   blockpool.c  the fixed-size block pool
 *   torch.c      PyTorch CUDAPluggableAllocator entry points
 *
 * Everything here runs with a->lock held unless said otherwise.
 *
 * Names: every function of the allocator, static helpers included, is
 * ms_* (memsnap_* for the public API).  Site labels skip memsnap's allocator
 * linked into a program by these names (analyze/siterules.c); a build without
 * debug information gives a frame nothing else to go by.  The test
 * allocator.symbol_names (tests/allocator/symbols.sh) checks it with nm.
 */
#ifndef MEMSNAP_ALLOC_INTERNAL_H
#define MEMSNAP_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "memsnap/alloc.h"

#define MS_HIDDEN __attribute__((visibility("hidden")))
#define MS_EXPORT __attribute__((visibility("default")))

#define MS_MIN_BLOCK 512ull                 /* every address and size is a multiple */
#define MS_SMALL_SIZE (1ull << 20)          /* <= 1 MiB: small pool */
#define MS_SMALL_SEGMENT (2ull << 20)       /* small pool segment */
#define MS_MID_SEGMENT (20ull << 20)        /* 1-10 MiB requests: 20 MiB segment */
#define MS_LARGE_MIN (10ull << 20)          /* >= 10 MiB: own segment, 2 MiB rounded */
#define MS_LARGE_ROUND (2ull << 20)
#define MS_OVERSIZE_SLACK (20ull << 20)     /* max_split: reuse an oversize block only
                                               if it is at most this much too big */

enum { MS_POOL_SMALL = 0, MS_POOL_LARGE = 1, MS_POOLS = 2 };
#define MS_ANY (-1)                         /* owner of a FREE block usable by all */

typedef struct ms_block ms_block;
typedef struct ms_segment ms_segment;

/* A block: one tile of a segment.  Fields by state:
 *  all:        addr, size, seg, prev/next (address order in the segment)
 *  ALLOCATED:  requested, stream (index in a->streams), uses, hnext (pointer map)
 *  PENDING:    stream, npending (events outstanding)
 *  FREE:       owner (stream index or MS_ANY), free_seq, left/right/prio (tree)
 *  UNMAPPED:   left/right = previous/next UNMAPPED block of the segment
 */
struct ms_block {
    uint64_t addr;
    uint64_t size;
    uint64_t requested;
    ms_segment *seg;
    ms_block *prev, *next;
    ms_block *left, *right;
    ms_block *hnext;
    uint64_t free_seq;   /* a->free_seq when it became FREE (max over merges) */
    uint32_t prio;       /* treap priority (deterministic) */
    uint8_t state;       /* MEMSNAP_BLOCK_* */
    int owner;           /* FREE: stream index or MS_ANY */
    int stream;          /* ALLOCATED/PENDING: allocating stream index */
    int npending;        /* PENDING: events not yet complete */
    int nuses;           /* ALLOCATED: extra streams (record_stream) */
    int uses_cap;
    int *uses;           /* stream indexes, malloc'ed when nuses > 0 */
};

/* A segment.  Fixed: one cuMemAlloc range, all mapped.  Expandable: one
 * reservation of npages pages; pages[i] is the physical handle of page i, 0
 * when unmapped. */
struct ms_segment {
    uint64_t base, size;
    uint64_t seq;              /* creation number: the determinism key */
    int expandable;
    int pool;                  /* MS_POOL_* */
    int stream;                /* expandable: the stream it grows for */
    ms_block *first;           /* blocks in address order */
    uint64_t nactive;          /* ALLOCATED + PENDING blocks */
    CUmemGenericAllocationHandle *pages;
    size_t npages, mapped_pages;
    ms_block *unmapped;        /* expandable: first UNMAPPED block (address order) */
    ms_segment *next_seg, *prev_seg; /* all segments in creation order */
};

/* A stream the allocator has seen.  free_root: FREE blocks it owns, per pool.
 * reclaim_ev: an event recorded on the stream to turn its FREE blocks with
 * free_seq <= reclaim_seq into ANY once it completes. */
typedef struct ms_stream {
    CUstream stream;
    ms_block *free_root[MS_POOLS];
    uint64_t nfree;            /* FREE blocks it owns */
    ms_segment *exp[MS_POOLS]; /* expandable segment per pool, or NULL */
    CUevent reclaim_ev;        /* NULL = none in flight */
    uint64_t reclaim_seq;
} ms_stream;

/* A freed block waiting for an event recorded on a stream that used it
 * (ev NULL: the record failed; resolved by the next context synchronize). */
typedef struct ms_pending {
    CUevent ev;
    ms_block *b;
} ms_pending;

/* A physical page whose unmap (addr != 0) or release failed while the
 * allocator had already dropped it from its segment; retried by every grow,
 * release and destroy until both succeed. */
typedef struct ms_zombie {
    CUdeviceptr addr;
    CUmemGenericAllocationHandle h;
} ms_zombie;

#define MS_STAT_FIELD(name, doc) uint64_t name;
typedef struct ms_counters {
    MEMSNAP_ALLOC_STATS(MS_STAT_FIELD)
} ms_counters;
#undef MS_STAT_FIELD

typedef void (*ms_trace_fn)(int action, int device, uint64_t addr, uint64_t size,
                            uint64_t stream);
typedef int (*ms_annotate_fn)(const char *message);

struct memsnap_alloc {
    pthread_mutex_t lock;
    memsnap_alloc_config cfg;
    memsnap_alloc_driver drv;
    int device;
    CUcontext ctx;
    int ctx_retained;          /* we retained the primary context */
    uint64_t device_total;
    uint64_t limit;            /* device_limit or device_total */
    uint64_t gran;             /* VMM page size (expandable) */
    uint64_t exp_va;           /* reservation size per expandable segment */
    ms_trace_fn trace;
    ms_annotate_fn annotate;

    ms_stream *streams;        /* in order of first use: deterministic */
    int nstreams, streams_cap;
    int last_stream;           /* cache for the stream lookup */
    ms_block *any_root[MS_POOLS];

    ms_segment *seg_head, *seg_tail;
    uint64_t seg_seq;
    uint64_t free_seq;
    uint32_t prio_state;

    ms_block **map;            /* pointer map: ALLOCATED blocks, chained */
    size_t map_cap, map_n;
    ms_block *spare;           /* recycled block objects (via hnext) */

    ms_pending *pending;
    size_t npending, pending_cap;
    CUevent *events;           /* idle events */
    size_t nevents, events_cap;
    ms_zombie *zombies;        /* VMM pages we could not give back yet */
    size_t nzombies, zombies_cap;

    ms_counters st;
};

/* driver.c */
MS_HIDDEN void ms_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
MS_HIDDEN int ms_driver_error(const memsnap_alloc_driver *drv, const char *fn, CUresult rc);
MS_HIDDEN int ms_driver_check(const memsnap_alloc_driver *drv, const char *who);
MS_HIDDEN CUmemAllocationProp ms_device_prop(int device);
MS_HIDDEN int ms_vmm_granularity(const memsnap_alloc_driver *drv, int device, size_t *g);
MS_HIDDEN int ms_ctx_acquire(const memsnap_alloc_driver *drv, int device, CUcontext *ctx,
                             int *retained);
MS_HIDDEN int ms_ctx_enter(memsnap_alloc *a, int *pushed);
MS_HIDDEN void ms_ctx_leave(memsnap_alloc *a, int pushed);
MS_HIDDEN void ms_find_hooks(ms_trace_fn *trace, ms_annotate_fn *annotate);
/* Initialises an allocator lock: an adaptive mutex (spins briefly before
 * sleeping).  0 or an errno value. */
MS_HIDDEN int ms_lock_init(pthread_mutex_t *m);
MS_HIDDEN const char *ms_human(uint64_t bytes, char *buf, size_t len);
MS_HIDDEN int ms_is_oom(CUresult rc);

/* tree.c */
MS_HIDDEN void ms_tree_insert(ms_block **root, ms_block *b);
MS_HIDDEN void ms_tree_remove(ms_block **root, ms_block *b);
MS_HIDDEN ms_block *ms_tree_lower_bound(ms_block *root, uint64_t size);
MS_HIDDEN ms_block *ms_tree_max(ms_block *root);
MS_HIDDEN int ms_tree_contains(ms_block *root, const ms_block *b);
MS_HIDDEN int ms_block_less(const ms_block *x, const ms_block *y);

/* blocks.c */
MS_HIDDEN ms_block *ms_block_new(memsnap_alloc *a);
MS_HIDDEN void ms_block_delete(memsnap_alloc *a, ms_block *b);
MS_HIDDEN int ms_map_insert(memsnap_alloc *a, ms_block *b);
MS_HIDDEN ms_block *ms_map_find(memsnap_alloc *a, uint64_t addr);
MS_HIDDEN ms_block *ms_map_remove(memsnap_alloc *a, uint64_t addr);
MS_HIDDEN ms_block **ms_free_root(memsnap_alloc *a, int owner, int pool);
MS_HIDDEN void ms_free_insert(memsnap_alloc *a, ms_block *b);
MS_HIDDEN void ms_free_remove(memsnap_alloc *a, ms_block *b);
MS_HIDDEN ms_block *ms_make_free(memsnap_alloc *a, ms_block *b, int owner, uint64_t seq);
MS_HIDDEN int ms_take(memsnap_alloc *a, ms_block *b, uint64_t n, uint64_t requested,
                      int stream);
MS_HIDDEN int ms_should_split(memsnap_alloc *a, const ms_block *b, uint64_t n);

/* segments.c */
MS_HIDDEN int ms_pool_of(uint64_t n);
MS_HIDDEN uint64_t ms_round_size(const memsnap_alloc_config *cfg, uint64_t size);
MS_HIDDEN ms_block *ms_find_free(memsnap_alloc *a, int stream, int pool, uint64_t n);
MS_HIDDEN int ms_fixed_grow(memsnap_alloc *a, int stream, int pool, uint64_t n,
                            ms_block **out);
MS_HIDDEN int ms_fixed_release(memsnap_alloc *a, uint64_t target, uint64_t *released);
MS_HIDDEN void ms_segment_link(memsnap_alloc *a, ms_segment *s);
MS_HIDDEN void ms_segment_unlink(memsnap_alloc *a, ms_segment *s);
MS_HIDDEN void ms_reserved_add(memsnap_alloc *a, uint64_t bytes);

/* expandable.c */
MS_HIDDEN int ms_exp_grow(memsnap_alloc *a, int stream, int pool, uint64_t n, ms_block **out);
MS_HIDDEN int ms_exp_release(memsnap_alloc *a, uint64_t target, uint64_t *released);
MS_HIDDEN void ms_exp_destroy(memsnap_alloc *a, ms_segment *s);
MS_HIDDEN void ms_unmapped_insert(ms_segment *s, ms_block *b);
MS_HIDDEN void ms_unmapped_remove(ms_segment *s, ms_block *b);
MS_HIDDEN void ms_release_zombies(memsnap_alloc *a);

/* events.c */
MS_HIDDEN int ms_stream_index(memsnap_alloc *a, CUstream s);
MS_HIDDEN int ms_event_get(memsnap_alloc *a, CUevent *ev);
MS_HIDDEN void ms_event_put(memsnap_alloc *a, CUevent ev);
MS_HIDDEN int ms_pending_add(memsnap_alloc *a, ms_block *b);
MS_HIDDEN void ms_process_events(memsnap_alloc *a, int wait);
MS_HIDDEN void ms_reclaim(memsnap_alloc *a, int except_stream, int wait);
MS_HIDDEN void ms_all_free_to_any(memsnap_alloc *a);
MS_HIDDEN void ms_events_destroy(memsnap_alloc *a);

/* stats.c */
MS_HIDDEN void ms_stats_fill(memsnap_alloc *a, memsnap_alloc_stats *out);

/* alloc.c */
MS_HIDDEN int ms_release_cached(memsnap_alloc *a, uint64_t target, int gc);

static inline uint64_t ms_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
static inline uint64_t ms_align_down(uint64_t x, uint64_t a) { return x / a * a; }

#endif

/* The memory pools of a recording: per device, the default pool of
 * PyTorch's caching allocator and each private pool it kept apart (a CUDA
 * graph's, one pool a graph_pool_handle() shares between graphs, a
 * torch.cuda.MemPool), with what each reserved and allocated and which
 * sites filled it.  `memsnap summary` prints them ("CUDA graphs: 1 pool,
 * peak 412 MiB reserved, 380 MiB allocated"; --json "pools"), the Python
 * API and the SQLite export list them.
 *
 * What a pool is comes from the file (memsnap/format.h, "Memory pools";
 * analysis.h numbers them, an_pool_kind says which kind):
 *
 *   allocated  the pool's blocks (block_alloc .. block_free of api torch,
 *              x naming the pool), the sizes PyTorch counts in
 *              memory_allocated();
 *   reserved   the pool's segments as PyTorch's own segment records say
 *              (segment_alloc and segment_map add, segment_free and
 *              segment_unmap give back; their x names the pool from format
 *              1.3): what torch.cuda.memory_snapshot() sums per
 *              segment_pool_id.  A file before 1.3 names no segment's pool:
 *              with a private pool in it, no pool's reserved is known
 *              (reserved_known 0); without, the default pool has them all.
 *
 * Peaks are each pool's own, and per kind the peak of the kind's pools
 * together (all devices at one moment), so "CUDA graphs: peak" is what the
 * graphs held at once.  Top sites: per pool, the sites (state.h) whose
 * blocks in that pool reached the most bytes live at once, each its own
 * peak (they need not coincide).
 *
 * It observes the one read (analysis.h) and works at its end over the
 * change log, which carries each change's pool, so memory live before the
 * first event (a ring dump's state section) counts as in every other view.
 * Only PyTorch's blocks (api torch) have pools: a file without them has no
 * pools (pl_pools gives 0).
 */
#ifndef MEMSNAP_ANALYZE_POOLS_H
#define MEMSNAP_ANALYZE_POOLS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis.h"

#define PL_TOP 5          /* top sites kept per pool */

typedef struct pl_site {
    uint32_t stack;
    uint32_t site;        /* the state's site index */
    uint64_t peak;        /* the most bytes of it live in the pool at once */
} pl_site;

typedef struct pl_pool {
    int device;           /* CUDA ordinal, -1 unknown */
    uint32_t index;       /* an_pool index (analysis.h); 0 the default pool */
    uint64_t id;          /* the pool as the file names it (0: the default pool) */
    int kind;             /* AN_POOL_* */
    int reserved_known;   /* the file names this pool's segments (see above) */
    msnap_level allocated, reserved;   /* cur = at the end */
    uint64_t blocks;      /* blocks allocated in it */
    uint64_t segments;    /* segments made for it (segment_alloc, segment_map) */
    int ntop;
    pl_site top[PL_TOP];  /* most bytes first */
} pl_pool;

/* The pools of one kind together, all devices at one moment. */
typedef struct pl_kind {
    uint64_t pools;
    int reserved_known;
    msnap_level allocated, reserved;
} pl_kind;

typedef struct pl_pools pl_pools;

/* NULL when out of memory. */
pl_pools *pl_new(void);
void pl_free(pl_pools *p);

/* Observes the read of f (before an_read; asks for the log).  0 ok, -1
 * out of memory or too many observers. */
int pl_attach(pl_pools *p, an_file *f);

/* After the read: the pools, by device, the default pool first, then the
 * private ones in the order the file named them. */
const pl_pool *pl_pools_of(const pl_pools *p, size_t *n);
/* The pools of kind AN_POOL_* together (NULL out of range). */
const pl_kind *pl_kind_of(const pl_pools *p, int kind);
/* Whether the file names any private pool. */
int pl_private_seen(const pl_pools *p);

/* The "pools" array of `memsnap summary --json`: one object per pool
 * (device, pool, torch_id, kind, peak_reserved, peak_allocated,
 * final_reserved, final_allocated, blocks, segments, top_sites), reserved
 * figures null where not known.  NULL when out of memory. */
cJSON *pl_json(const pl_pools *p);
/* The per-kind totals: {"graph": {pools, peak_reserved, peak_allocated},
 * "mempool": {...}} for the kinds the file has. */
cJSON *pl_kinds_json(const pl_pools *p);

#endif

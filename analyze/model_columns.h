/* Pass 2 of the findings model (model_columns.c): the timeline's columns
 * and bands, the NVTX ranges.
 *
 * A part of model.h, included by it (include model.h, not this). */
#ifndef MEMSNAP_ANALYZE_MODEL_COLUMNS_H
#define MEMSNAP_ANALYZE_MODEL_COLUMNS_H
#ifndef MEMSNAP_ANALYZE_MODEL_H
#error "include analyze/model.h"
#endif

struct breakdown;
#define SM_MAX_RANGES 4096              /* NVTX ranges kept for drawing */
#define SM_RANGE_DEPTHS 3               /* NVTX nesting depths drawn */
/* What the bands of the stacked area are (sm_opts.by). */
enum sm_by { SM_BY_SITE = 0, SM_BY_CATEGORY, SM_BY_POOL };

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
 *                communication, all_gather, reduce_scatter, kv_cache,
 *                inputs, activations,
 *                temporaries, then the user's own in the rules' order),
 *                "other" the rest band (with any beyond SM_MAX_TOP).  peak_stacked becomes this total's peak;
 *                band_peak and band_at_peak are summary's "peak" and "at
 *                total peak" of each category, and so are the colvals of
 *                the first column whose total_max is peak_stacked.
 *                The sites keep their ranks (the segment map, the leak
 *                finder), the bands are not sites.
 *   by pool      (SM_BY_POOL) PyTorch's pools (analyze/pools.h), as
 *                MemoryViz's "Allocated Memory (incl. Private Pools)"
 *                draws them: band 0 the default pool's blocks, then for
 *                each private pool of the device (in the order the file
 *                names them) its blocks and, the band after, its cache
 *                (its reserved less its blocks, from PyTorch's segment
 *                records: memory no other pool can use while the pool
 *                lives); the rest band any pool past SM_MAX_TOP.  So the
 *                area is the default pool's allocated plus the private
 *                pools' reserved.  peak_stacked, band_peak and
 *                band_at_peak as by category.  Without PyTorch's blocks
 *                the blocks of the file are the default pool.
 */

const sm_range *sm_ranges(const sm_model *m, size_t *n, uint64_t *total);
/* Live bytes of a band (a top site's rank, or a category's band; nbands
 * for the rest) of device slot at column col, for tests and the painter. */
uint64_t sm_col_value(const sm_model *m, int slot, int col, int band);
/* The category name of band b of a slot (by category; b = nbands: "other"),
 * NULL by site or out of range. */
const char *sm_band_category(const sm_model *m, int slot, int band);
/* The name of band b of a slot when the bands are not sites: a category,
 * or by pool "default pool", "graph pool (0, 1)", "graph pool (0, 1)
 * cache", "mempool (0, 2)", "other pools"; NULL by site or out of range. */
const char *sm_band_name(const sm_model *m, int slot, int band, char *buf, size_t cap);
/* The category breakdown behind the bands (by category, after the read;
 * NULL by site): breakdown.h, the same object `memsnap summary` prints. */
const struct breakdown *sm_breakdown(const sm_model *m);

#endif

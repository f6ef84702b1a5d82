/* The segment layout at one moment (model_layout.c): every segment with
 * the blocks, used, free and unmapped spans that fill it, per device the
 * totals; the moment is the first OOM, the peak, the end or a time
 * (sm_opts.at).
 *
 * A part of model.h, included by it (include model.h, not this). */
#ifndef MEMSNAP_ANALYZE_MODEL_LAYOUT_H
#define MEMSNAP_ANALYZE_MODEL_LAYOUT_H
#ifndef MEMSNAP_ANALYZE_MODEL_H
#error "include analyze/model.h"
#endif

enum sm_at { SM_AT_DEFAULT = 0, SM_AT_OOM, SM_AT_PEAK, SM_AT_END, SM_AT_TIME };

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

const sm_layout *sm_layout_at(const sm_model *m);
/* The layout of any set of the input's live objects objs[0..n) (the live
 * set now, while memsnap top follows a recording: an_live_objects), built
 * by the rules of the layout above, as the moment after event ev_idx at
 * t_ns.  blocks: the objects' allocator blocks fill the segments (the
 * model's own view once it has read a block event; a ring-mode live file
 * has its blocks only as live lines).  0 ok, -1 out of memory; *l is
 * released with sm_layout_release. */
int sm_layout_of(sm_model *m, int blocks, const msnap_obj *objs, size_t n, uint64_t ev_idx,
                 uint64_t t_ns, sm_layout *l);
void sm_layout_release(sm_layout *l);
/* The live objects at the moment the layout was taken at (opts.at), into
 * a new array (free() it), with the moment's time.  0 ok, -1 out of
 * memory or before the read ended. */
int sm_capture_objects(const sm_model *m, msnap_obj **out, size_t *n, uint64_t *t_ns);
/* Parses "oom", "peak", "end", or a time ("12.5", "12.5s", "800ms",
 * "3min", "1.5h", "250us", "1000ns") into *at and *t.  0 ok, -1 bad. */
int sm_parse_at(const char *s, int *at, uint64_t *t_ns);

#endif

/* torchalloc: an emulation of PyTorch's CUDA caching allocator (the native
 * backend of c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x) for replay.
 *
 * It answers "what would PyTorch have reserved under this
 * PYTORCH_CUDA_ALLOC_CONF?" for a trace of requests, with no GPU and no
 * driver: device memory is a number (the device's capacity, and the allowed
 * maximum when a memory fraction is set), addresses are synthetic.  The
 * rules it follows (torchalloc.c has each one where it is applied):
 *
 *   rounding      < 512 B -> 512 B; else a multiple of 512 B, or with
 *                 roundup_power2_divisions:N the next of N steps between
 *                 two powers of two (sizes above 512*N)
 *   pools         small (<= 1 MiB) and large, each a set of free blocks
 *                 ordered by (stream, size, address): best fit per stream
 *   new segments  small requests get 2 MiB, 1..10 MiB requests 20 MiB,
 *                 larger ones their size rounded up to 2 MiB
 *   splitting     small pool or expandable: when >= 512 B remain; large
 *                 pool: when the request is below max_split_size and more
 *                 than 1 MiB remains
 *   oversize      a request below max_split_size never takes a cached block
 *                 of max_split_size or more; a larger request takes one only
 *                 when it wastes less than max_non_split_rounding (20 MiB)
 *   on a miss     garbage collection (garbage_collection_threshold, with a
 *                 memory fraction), a new segment, else release oversize
 *                 cached blocks and retry, else release every unsplit cached
 *                 block (empty_cache) and retry, else out of memory
 *   expandable    one growing segment per (stream, pool), address space for
 *                 9/8 of the device, mapped in 2 MiB (small) or 20 MiB
 *                 (large) pages at the lowest address that fits; release
 *                 unmaps the whole free pages
 *
 *   private pools a CUDA graph's pool, one graph_pool_handle() shares, a
 *                 torch.cuda.MemPool: small and large block sets of their
 *                 own (ta_malloc_pool), segments of their own (expandable
 *                 ones too), no cached block shared with another pool; a
 *                 request into one is made during a capture, so its miss
 *                 path stops before the last retry (PyTorch releases the
 *                 caches only with no capture under way); empty_cache and
 *                 that last retry release the default pool's cache and the
 *                 caches of freeable private pools only (ta_pool_release:
 *                 their graphs are gone), never a live pool's
 *
 * Not emulated: record_stream events (the trace's frees are PyTorch's
 * free_completed, already after the events), IPC, a MemPool's own
 * allocator, use_on_oom and no_split pools, checkpointed pool states.
 *
 * Deterministic: no clock, no randomness beyond a fixed-seed treap.
 */
#ifndef MEMSNAP_WHATIF_TORCHALLOC_H
#define MEMSNAP_WHATIF_TORCHALLOC_H

#include <stddef.h>
#include <stdint.h>

#define TA_DIV_INTERVALS 16 /* power-of-two intervals from 1 MiB to 64 GiB */

/* A PYTORCH_CUDA_ALLOC_CONF, plus the memory fraction a program sets with
 * torch.cuda.set_per_process_memory_fraction (memsnap key memory_fraction). */
typedef struct ta_config {
    int expandable;                   /* expandable_segments */
    uint64_t max_split;               /* bytes; UINT64_MAX = unlimited */
    uint64_t max_nonsplit_round;      /* bytes (max_non_split_rounding_mb) */
    uint32_t div[TA_DIV_INTERVALS];   /* roundup_power2_divisions per interval */
    double gc_threshold;              /* garbage_collection_threshold; 0 = off */
    double fraction;                  /* memory fraction; 0 = not set */
} ta_config;

/* PyTorch's defaults. */
void ta_config_default(ta_config *c);

/* Parses "key:value,key:value" over the defaults already in *c.  Returns 0,
 * or -1 with a one-line message in err (unknown key, bad value). */
int ta_config_parse(ta_config *c, const char *s, char *err, size_t errlen);

/* The PYTORCH_CUDA_ALLOC_CONF that gives *c (memory_fraction is not part of
 * it: the caller says it in words).  "" for the defaults. */
void ta_config_string(const ta_config *c, char *buf, size_t n);

/* Driver-level changes, for a caller that writes them down. */
enum { TA_SEG_ALLOC, TA_SEG_FREE, TA_SEG_RESERVE, TA_SEG_ADDR_FREE, TA_PAGE_MAP, TA_PAGE_UNMAP };
typedef void (*ta_seg_fn)(void *ctx, int kind, uint64_t addr, uint64_t size, uint64_t stream);

typedef struct ta_alloc ta_alloc;

/* A new allocator for a device of device_total bytes (a memory fraction is
 * of it) of which it can get capacity bytes from the driver (the rest
 * holds the CUDA context and other libraries' memory), addresses from
 * base.  seg (may be NULL) hears of every segment/page change.  NULL when
 * out of host memory. */
ta_alloc *ta_create(const ta_config *c, uint64_t device_total, uint64_t capacity, uint64_t base,
                    ta_seg_fn seg, void *ctx);
void ta_destroy(ta_alloc *a);

#define TA_OK 0
#define TA_OOM 1
#define TA_NOMEM (-1)

/* A block of at least size bytes for stream.  TA_OK with *ptr, TA_OOM after
 * every retry PyTorch makes (nothing is allocated; cached memory may have
 * been released, as PyTorch does), TA_NOMEM when the host is out. */
int ta_malloc(ta_alloc *a, uint64_t size, uint64_t stream, uint64_t *ptr);

/* ta_malloc in pool (0 the default pool; else a private pool's id, made on
 * first use): the request PyTorch makes while a capture or use_mem_pool
 * routes the stream to that pool. */
int ta_malloc_pool(ta_alloc *a, uint64_t size, uint64_t stream, uint64_t pool, uint64_t *ptr);

/* Private pool `pool` is freeable from now on (PyTorch's releasePool with
 * use_count 0: its graphs were destroyed): empty_cache and the last retry of
 * a miss may release its cached segments.  0, or -1 out of host memory. */
int ta_pool_release(ta_alloc *a, uint64_t pool);

/* Frees the block at ptr (back to its own pool).  0, or -1 when no
 * allocated block starts there. */
int ta_free(ta_alloc *a, uint64_t ptr);

/* torch.cuda.empty_cache(): releases every unsplit cached segment and the
 * free pages of expandable segments of the default pool and of freeable
 * private pools. */
void ta_empty_cache(ta_alloc *a);

typedef struct ta_stats {
    uint64_t allocated, reserved;             /* bytes now (block sizes; segments/pages) */
    uint64_t peak_allocated, peak_reserved;
    uint64_t largest_free;                    /* the largest cached free block */
    uint64_t device_free;                     /* what a new segment could still get */
    uint64_t segment_allocs, segment_frees;   /* cudaMalloc/cudaFree, or page map/unmap */
    uint64_t retries, ooms, gc_releases;
} ta_stats;

/* The counters; largest_free walks the free blocks (O(free blocks)). */
void ta_stats_get(ta_alloc *a, ta_stats *s);

/* The counters without the walk (largest_free 0): O(1). */
void ta_stats_get_counters(ta_alloc *a, ta_stats *s);

/* PyTorch's size rounding under *c (exposed for the tests). */
uint64_t ta_round_size(const ta_config *c, uint64_t size);

#endif

/* memsnap allocator (libmemsnap_alloc): a caching allocator of CUDA device
 * memory, the one memsnap offers once the recorder has shown where memory went.
 * This header is the module's documentation; docs/allocator.md is the guide.
 *
 * ## Modes
 *
 *  - FIXED (the classic caching allocator, as PyTorch's): memory comes from the
 *    driver in *segments* (one cuMemAlloc each).  Requests up to 1 MiB live in
 *    the small pool, packed into 2 MiB segments; larger ones in the large pool:
 *    under 10 MiB they get a 20 MiB segment, from 10 MiB up a segment of the
 *    request rounded up to 2 MiB.  A segment never changes size; it is given
 *    back only when all of it is free (empty_cache, OOM retry, GC threshold).
 *  - EXPANDABLE: per stream and pool, one large virtual reservation
 *    (cuMemAddressReserve).  Physical memory comes in granularity-sized
 *    *pages* (cuMemCreate + cuMemMap, one cuMemSetAccess per mapped range),
 *    mapped on demand at the lowest free address of the reservation so that
 *    free blocks stay next to each other and merge.  Free pages are unmapped
 *    and released by empty_cache and the OOM retry.
 *  - BLOCK POOL (memsnap_blockpool_*): N equal blocks carved from one
 *    reservation whose physical memory is mapped at creation; O(1) alloc/free
 *    from a LIFO free list.  This is how paged-KV servers hold their KV cache.
 *
 * ## Segments, blocks and page states
 *
 * A *segment* is a range of device address space the allocator owns: a fixed
 * segment [base, base+size) is all mapped; an expandable segment is a
 * reservation whose pages are each mapped (with a physical handle) or not.
 * A segment is tiled by *blocks*, in address order, each in one state:
 *
 *   ALLOCATED  handed out by memsnap_alloc_malloc, not yet freed
 *   PENDING    freed, but used by other streams (record_stream) whose events
 *              have not completed yet; not reusable
 *   FREE       mapped and reusable.  A free block carries an owner: the
 *              stream that freed it (reusable at once by that stream only), or
 *              ANY once an event recorded on that stream after the free has
 *              completed (reusable by every stream)
 *   UNMAPPED   (expandable only) address space with no physical memory
 *
 *  free(ptr) ──> FREE(owner = stream of the block)         (no driver call)
 *            └─> PENDING ──(all events done)──> FREE(owner)   [record_stream]
 *  FREE(S) ──(event recorded on S completes; slow path)──> FREE(ANY)
 *  FREE ──(empty_cache / OOM retry; after cuCtxSynchronize)──> released
 *         (fixed: whole free segments cuMemFree'd; expandable: whole free
 *          pages unmapped + released, their range becomes UNMAPPED)
 *
 * ## Invariants (memsnap_alloc_check verifies every one)
 *
 *  1. The blocks of a segment tile it exactly: the first starts at the base,
 *     each starts where the previous ends, the last ends at base + size.
 *  2. Every block's address and size are multiples of 512 bytes; in an
 *     expandable segment UNMAPPED blocks are page aligned, every page under an
 *     UNMAPPED block is unmapped and every page under any other block mapped.
 *  3. Neighbours merge: no two adjacent FREE blocks with the same owner, no
 *     two adjacent UNMAPPED blocks.
 *  4. Every FREE block is in exactly one free tree (its owner's, its pool's),
 *     trees are ordered by (size, segment creation number, address) — so
 *     choices never depend on where the driver put a segment — and every
 *     ALLOCATED block is in the pointer map, nothing else is.
 *  5. The counters (memsnap_alloc_stats) equal a recount of the blocks.
 *  6. Determinism: the same sequence of calls with the same config on a device
 *     that answers the same way gives the same block offsets within segments
 *     and the same stats (the replay tool relies on it).
 *
 * ## Driver
 *
 * Every driver call goes through a table (memsnap_alloc_driver).  The default
 * table points at the libcuda functions the library is linked to, so the
 * calls go through the dynamic linker: under the memsnap recorder (LD_PRELOAD
 * libmemsnap.so) segments and pages are recorded as the *reserved* layer with
 * no extra work.  Tests pass tables that fail the k-th call or hold events.
 * Cache hits (malloc served from the cache, free without record_stream) make
 * no driver call.
 *
 * ## Tracing
 *
 * At creation the allocator looks up memsnap_trace_block with
 * dlsym(RTLD_DEFAULT) (NULL when the recorder is not loaded: no cost) and
 * calls it for every block handed out or taken back, so snapshots show the
 * *allocated* layer with the caller's stack.  An OOM adds an annotation
 * (memsnap_annotate) with the request, allocated, reserved and device free.
 *
 * ## Threads
 *
 * Every function is thread safe (one mutex per allocator / pool).  Driver
 * calls are made with the allocator's context current (pushed when the
 * calling thread has another one).
 */
#ifndef MEMSNAP_ALLOC_H
#define MEMSNAP_ALLOC_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of every int-returning function. */
#define MEMSNAP_ALLOC_OK 0
#define MEMSNAP_ALLOC_ERR_OOM (-1)     /* not enough device memory (or device_limit) */
#define MEMSNAP_ALLOC_ERR_DRIVER (-2)  /* a driver call failed; the message names it */
#define MEMSNAP_ALLOC_ERR_INVALID (-3) /* bad argument: unknown pointer, bad config */
#define MEMSNAP_ALLOC_ERR_NOMEM (-4)   /* host memory for bookkeeping ran out */

/* The calling thread's message for the last failure of any memsnap_alloc or
 * memsnap_blockpool function ("" if none): one line, no newline. */
const char *memsnap_alloc_error(void);

/* ------------------------------------------------------------------ config */

typedef enum memsnap_alloc_mode {
    MEMSNAP_ALLOC_FIXED = 0,      /* fixed segments (cuMemAlloc) */
    MEMSNAP_ALLOC_EXPANDABLE = 1, /* expandable segments (VMM) */
} memsnap_alloc_mode;

/* Settings; memsnap_alloc_config_default gives the defaults noted here. The
 * string form (MEMSNAP_ALLOC_CONF) is "key:value,key:value" with the keys in
 * brackets. */
typedef struct memsnap_alloc_config {
    memsnap_alloc_mode mode;     /* [expandable_segments] true|false; false */
    uint64_t max_split_size;     /* [max_split_size_mb] fixed segments: blocks
                                    this large are never split (nor reused for
                                    requests over 20 MiB smaller); ignored by
                                    expandable segments; UINT64_MAX = no limit */
    unsigned roundup_power2_divisions; /* [roundup_power2_divisions] 0 or a power
                                    of two <= 64: round requests up to one of N
                                    steps between powers of two; 0 = off */
    double gc_threshold;         /* [garbage_collection_threshold] in (0,1): when
                                    reserved passes this fraction of the limit,
                                    release free segments before growing; 0 off */
    uint64_t device_limit;       /* [device_limit] cap on reserved bytes, e.g.
                                    80G; 0 = the device's memory (default) */
    uint64_t expandable_va;      /* [expandable_va] address space reserved per
                                    expandable segment; 0 = four times the usable
                                    memory (device_limit or the device's),
                                    rounded up to the granularity (default) */
    int trace;                   /* [trace] true|false: emit block events to the
                                    recorder when it is loaded; true */
} memsnap_alloc_config;

void memsnap_alloc_config_default(memsnap_alloc_config *cfg);

/* Parses a config string over *cfg (keys not named keep their value).  NULL or
 * "" changes nothing.  On error returns MEMSNAP_ALLOC_ERR_INVALID, leaves *cfg
 * unchanged and writes one line naming the key and the value into err (e.g.
 * `MEMSNAP_ALLOC_CONF: max_split_size_mb:"abc" is not a number of MiB`). */
int memsnap_alloc_config_parse(memsnap_alloc_config *cfg, const char *s, char *err,
                               size_t errlen);

/* The defaults, then MEMSNAP_ALLOC_CONF if set.  Errors as above. */
int memsnap_alloc_config_from_env(memsnap_alloc_config *cfg, char *err, size_t errlen);

/* ------------------------------------------------------------------ driver */

/* The driver functions the allocator uses, named after the exported symbols.
 * Every pointer must be set (memsnap_alloc_driver_default gives a complete
 * table to start from). */
typedef struct memsnap_alloc_driver {
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuCtxPushCurrent_v2)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent_v2)(CUcontext *ctx);
    CUresult (*cuCtxGetDevice)(CUdevice *dev);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
    CUresult (*cuDeviceTotalMem_v2)(size_t *bytes, CUdevice dev);
    CUresult (*cuMemGetInfo_v2)(size_t *free, size_t *total);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *ptr, size_t size);
    CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t align,
                                    CUdeviceptr addr, unsigned long long flags);
    CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *h, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle h);
    CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle h, unsigned long long flags);
    CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count);
    CUresult (*cuMemGetAllocationGranularity)(size_t *gran, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent ev, CUstream stream);
    CUresult (*cuEventQuery)(CUevent ev);
    CUresult (*cuEventSynchronize)(CUevent ev);
    CUresult (*cuEventDestroy_v2)(CUevent ev);
    CUresult (*cuStreamSynchronize)(CUstream stream);
} memsnap_alloc_driver;

/* The table of the linked libcuda functions (static storage; copy to edit). */
const memsnap_alloc_driver *memsnap_alloc_driver_default(void);

/* --------------------------------------------------------------- allocator */

typedef struct memsnap_alloc memsnap_alloc;

/* Creates an allocator for CUDA device `device`.  cfg NULL = defaults; drv
 * NULL = memsnap_alloc_driver_default() (the table is copied).  Calls cuInit
 * and uses the calling thread's current context when it belongs to `device`,
 * else retains the device's primary context.  Returns MEMSNAP_ALLOC_OK and
 * *out, or an error code (*out NULL; see memsnap_alloc_error). */
int memsnap_alloc_create(const memsnap_alloc_config *cfg, int device,
                         const memsnap_alloc_driver *drv, memsnap_alloc **out);

/* Gives every segment and page back to the driver (live blocks too: their
 * pointers become invalid), destroys its events, frees the allocator.
 * NULL is a no-op.  Driver failures are ignored (best effort). */
void memsnap_alloc_destroy(memsnap_alloc *a);

/* Allocates at least `size` bytes (0 counts as 1) for use on `stream`; *out is
 * 512-byte aligned.  A cache miss grows the pool; when the driver (or
 * device_limit) says no, it releases cached memory and retries once, then
 * fails with MEMSNAP_ALLOC_ERR_OOM and a message naming the request,
 * allocated, reserved and device free bytes. */
int memsnap_alloc_malloc(memsnap_alloc *a, size_t size, CUstream stream, CUdeviceptr *out);

/* Frees a pointer returned by memsnap_alloc_malloc.  The block is reusable at
 * once by the stream it was allocated on; by other streams only after an
 * event recorded on that stream (after this call) completes; if
 * record_stream named other streams, by nobody until events recorded on
 * those (at this call) complete.  MEMSNAP_ALLOC_ERR_INVALID for a pointer this
 * allocator does not hold (nothing changes). */
int memsnap_alloc_free(memsnap_alloc *a, CUdeviceptr ptr);

/* Marks `stream` as using the block at ptr (as torch's record_stream).  A
 * no-op for the block's own stream. */
int memsnap_alloc_record_stream(memsnap_alloc *a, CUdeviceptr ptr, CUstream stream);

/* Waits for outstanding events, then gives back every free segment (fixed) or
 * free page (expandable).  Returns 0 or the first driver error. */
int memsnap_alloc_empty_cache(memsnap_alloc *a);

/* The counters, one X-macro list: X(name, description).  Byte counts unless
 * the description says otherwise. */
#define MEMSNAP_ALLOC_STATS(X)                                                           \
    X(allocated, "bytes in ALLOCATED blocks (rounded sizes)")                            \
    X(requested, "bytes the callers asked for, of the ALLOCATED blocks")                 \
    X(reserved, "device memory held: fixed segments + mapped pages")                     \
    X(active, "bytes in ALLOCATED and PENDING blocks")                                   \
    X(cached, "reserved - active: free memory kept for reuse")                           \
    X(inactive_split, "free bytes empty_cache cannot give back (segment/page in use)")   \
    X(largest_free, "the largest FREE block")                                            \
    X(active_blocks, "ALLOCATED + PENDING blocks (count)")                              \
    X(free_blocks, "FREE blocks (count)")                                                \
    X(segments, "fixed segments + expandable reservations (count)")                     \
    X(mapped_pages, "expandable pages mapped (count)")                                   \
    X(peak_allocated, "largest allocated seen")                                          \
    X(peak_requested, "largest requested seen")                                          \
    X(peak_reserved, "largest reserved seen")                                            \
    X(malloc_calls, "successful memsnap_alloc_malloc calls (count)")                     \
    X(free_calls, "successful memsnap_alloc_free calls (count)")                         \
    X(cache_hits, "mallocs served without any driver call (count)")                      \
    X(driver_allocs, "cuMemAlloc + cuMemCreate calls that succeeded (count)")            \
    X(driver_frees, "cuMemFree + cuMemRelease calls that succeeded (count)")             \
    X(driver_maps, "cuMemMap calls that succeeded (count)")                              \
    X(driver_unmaps, "cuMemUnmap calls that succeeded (count)")                          \
    X(driver_set_access, "cuMemSetAccess calls that succeeded (count)")                  \
    X(event_records, "cuEventRecord calls that succeeded (count)")                       \
    X(oom_retries, "times cached memory was released to retry a malloc (count)")         \
    X(oom_count, "mallocs that failed for lack of memory (count)")                       \
    X(gc_releases, "segments/pages released by garbage_collection_threshold (count)")

typedef struct memsnap_alloc_stats {
#define MEMSNAP_ALLOC_STAT_FIELD_(name, doc) uint64_t name;
    MEMSNAP_ALLOC_STATS(MEMSNAP_ALLOC_STAT_FIELD_)
#undef MEMSNAP_ALLOC_STAT_FIELD_
    double frag_free; /* 1 - largest_free / cached; 0 when nothing is cached */
    double frag_peak; /* 1 - peak_allocated / peak_reserved; 0 before any */
} memsnap_alloc_stats;

void memsnap_alloc_stats_get(memsnap_alloc *a, memsnap_alloc_stats *out);

/* As memsnap_alloc_stats_get without inactive_split (0 here), the one
 * counter that needs a walk of every block: cheap enough to call after
 * every malloc (its cost grows with streams, not blocks). */
void memsnap_alloc_counters_get(memsnap_alloc *a, memsnap_alloc_stats *out);

/* The value of the counter called `name` (as in MEMSNAP_ALLOC_STATS), and 0
 * with *found = 0 for an unknown name (found may be NULL). */
uint64_t memsnap_alloc_stat_by_name(const memsnap_alloc_stats *s, const char *name, int *found);

/* Resets the peak_* counters to the current values. */
void memsnap_alloc_reset_peaks(memsnap_alloc *a);

/* Block states (memsnap_alloc_block_info.state). */
#define MEMSNAP_BLOCK_ALLOCATED 1
#define MEMSNAP_BLOCK_FREE 2
#define MEMSNAP_BLOCK_PENDING 3
#define MEMSNAP_BLOCK_UNMAPPED 4

typedef struct memsnap_alloc_block_info {
    uint64_t addr, size;
    uint64_t requested; /* ALLOCATED only */
    CUstream stream;    /* ALLOCATED/PENDING: the allocating stream; FREE: the
                           owner (any_stream = 1 when ANY) */
    int any_stream;
    int state;          /* MEMSNAP_BLOCK_* */
} memsnap_alloc_block_info;

typedef struct memsnap_alloc_segment_info {
    uint64_t base, size; /* fixed: the cuMemAlloc range; expandable: the reservation */
    uint64_t mapped;     /* bytes of device memory behind it */
    uint64_t seq;        /* creation number, from 0 */
    int expandable;
    int large_pool;      /* 1 = large pool, 0 = small pool */
    size_t first_block, nblocks; /* its blocks in memsnap_alloc_snapshot.blocks */
} memsnap_alloc_segment_info;

typedef struct memsnap_alloc_snapshot {
    memsnap_alloc_segment_info *segments; /* in creation order */
    size_t nsegments;
    memsnap_alloc_block_info *blocks;     /* per segment, in address order */
    size_t nblocks;
} memsnap_alloc_snapshot;

/* A consistent copy of every segment and block.  Free it with
 * memsnap_alloc_snapshot_free.  MEMSNAP_ALLOC_ERR_NOMEM on host OOM. */
int memsnap_alloc_snapshot_get(memsnap_alloc *a, memsnap_alloc_snapshot *out);
void memsnap_alloc_snapshot_free(memsnap_alloc_snapshot *s);

/* The invariant walker: checks every invariant above over every block.
 * Returns 0, or -1 with a one-line description in msg.  O(blocks). */
int memsnap_alloc_check(memsnap_alloc *a, char *msg, size_t msglen);

/* The config in use, and the device. */
void memsnap_alloc_get_config(memsnap_alloc *a, memsnap_alloc_config *out);
int memsnap_alloc_device(memsnap_alloc *a);

/* -------------------------------------------------------------- block pool */

typedef struct memsnap_blockpool memsnap_blockpool;

/* Creates a pool of `nblocks` blocks of `block_size` bytes (rounded up to 512)
 * on `device`: one reservation, physical memory created, mapped and made
 * accessible at once.  drv NULL = default.  Blocks are consecutive:
 * block i is at base + i * block_size. */
int memsnap_blockpool_create(int device, size_t block_size, size_t nblocks,
                             const memsnap_alloc_driver *drv, memsnap_blockpool **out);

/* Gives the memory back (outstanding blocks too).  NULL is a no-op. */
void memsnap_blockpool_destroy(memsnap_blockpool *p);

/* O(1).  MEMSNAP_ALLOC_ERR_OOM when every block is in use. */
int memsnap_blockpool_alloc(memsnap_blockpool *p, CUdeviceptr *out);

/* O(1).  MEMSNAP_ALLOC_ERR_INVALID for a pointer that is not the start of an
 * allocated block of this pool. */
int memsnap_blockpool_free(memsnap_blockpool *p, CUdeviceptr ptr);

/* Block index of ptr (-1 if not a block start), and the pointer of index i
 * (0 if out of range). */
long memsnap_blockpool_index(memsnap_blockpool *p, CUdeviceptr ptr);
CUdeviceptr memsnap_blockpool_ptr(memsnap_blockpool *p, size_t i);

typedef struct memsnap_blockpool_stats {
    uint64_t block_size, nblocks, nfree;
    uint64_t reserved; /* bytes of device memory behind the pool */
    uint64_t base;     /* address of block 0 */
} memsnap_blockpool_stats;
void memsnap_blockpool_stats_get(memsnap_blockpool *p, memsnap_blockpool_stats *out);

/* Checks the free list (no duplicates, every entry free, count right). */
int memsnap_blockpool_check(memsnap_blockpool *p, char *msg, size_t msglen);

/* ------------------------------------------------------------------ PyTorch */

/* The two entry points of torch.cuda.memory.CUDAPluggableAllocator(path,
 * "memsnap_torch_alloc", "memsnap_torch_free"): one allocator per device,
 * created at its first use with the config in MEMSNAP_ALLOC_CONF.  On failure
 * alloc prints the message on stderr and returns NULL (the pluggable API has
 * no other way to report it). */
void *memsnap_torch_alloc(ssize_t size, int device, CUstream stream);
void memsnap_torch_free(void *ptr, ssize_t size, int device, CUstream stream);
/* Extras for ctypes users: record_stream, empty_cache (all devices), and one
 * counter by name (0 when the device has no allocator yet). */
void memsnap_torch_record_stream(void *ptr, CUstream stream);
void memsnap_torch_empty_cache(void);
uint64_t memsnap_torch_stat(int device, const char *name);

#ifdef __cplusplus
}
#endif
#endif

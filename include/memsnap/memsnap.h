/* memsnap recorder: the small public C API of libmemsnap.so.
 *
 * A program does not need any of this to be recorded: preloading the library
 * (memsnap run -- CMD) is enough.  These functions let a program (or the
 * memsnap allocator) add to the record.  They are safe to call when recording
 * is off (they return MEMSNAP_ERR_OFF and do nothing).
 *
 * To call them without linking against libmemsnap.so, look them up at run
 * time: dlsym(RTLD_DEFAULT, "memsnap_dump") is NULL when the recorder is not
 * loaded.
 */
#ifndef MEMSNAP_MEMSNAP_H
#define MEMSNAP_MEMSNAP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSNAP_OK 0
#define MEMSNAP_ERR_OFF (-1)    /* recording is off (bad settings, or child after fork) */
#define MEMSNAP_ERR_IO (-2)     /* the dump could not be written; see stderr */

/* Takes a dump now (ring mode: writes the snapshot file; stream mode: writes
 * the live state into the stream and flushes).  reason may be NULL.
 * Blocks until the dump is on disk. */
int memsnap_dump(const char *reason);

/* Records a mark with a message (an annotation on the timeline). */
int memsnap_annotate(const char *message);

/* Waits until every event recorded before the call has been processed by the
 * writer, then fills the per-device totals it keeps.  device: CUDA ordinal. */
typedef struct memsnap_totals {
    uint64_t reserved;   /* cuMemAlloc/Pitch + cuMemCreate bytes live */
    uint64_t allocated;  /* allocator blocks live (memsnap allocator) */
    uint64_t async;      /* stream-ordered allocations live */
    uint64_t managed;    /* managed allocations live */
    uint64_t vmm_mapped; /* bytes mapped with cuMemMap */
    uint64_t events;     /* events recorded for this process so far (all devices) */
} memsnap_totals;
int memsnap_totals_get(int device, memsnap_totals *out);

/* The allocator trace hook: libmemsnap_alloc calls this (found with dlsym) for
 * every block it hands out or takes back, so snapshots show the allocated layer
 * apart from the reserved one.  action: 1 = block alloc, 2 = block free,
 * 3 = the allocator could not satisfy a request of size bytes (an "oom" event
 * with api "allocator"; addr is ignored; the recorder adds the device's free
 * and total memory when the calling thread has a context). */
#define MEMSNAP_TRACE_BLOCK_ALLOC 1
#define MEMSNAP_TRACE_BLOCK_FREE 2
#define MEMSNAP_TRACE_OOM 3
void memsnap_trace_block(int action, int device, uint64_t addr, uint64_t size,
                         uint64_t stream);

/* PyTorch's caching allocator, through its trace tracker: the recorder's
 * PyTorch plugin (libmemsnap_torch, docs/recorder.md) calls this for every
 * trace entry of PyTorch's CUDA caching allocator.  Each call becomes one
 * event with api "torch" and the calling thread's stack.  action (PyTorch's
 * TraceEntry::Action):
 *   MEMSNAP_TORCH_ALLOC           block_alloc: addr, size, stream; pool =
 *                                 memory pool id; requested = the size the
 *                                 program asked for (0 when unknown)
 *   MEMSNAP_TORCH_FREE_REQUESTED  block_free_requested: addr, size, stream
 *   MEMSNAP_TORCH_FREE_COMPLETED  block_free: addr, size, stream
 *   MEMSNAP_TORCH_SEGMENT_ALLOC, _SEGMENT_FREE, _SEGMENT_MAP, _SEGMENT_UNMAP
 *                                 segment_*: addr, size, stream
 *   MEMSNAP_TORCH_OOM             oom: size = requested bytes, addr = device
 *                                 free bytes as PyTorch read them
 * Other values (PyTorch's SNAPSHOT entries, future actions) are ignored.
 * Never blocks except when the recorder's queue is full, never allocates. */
#define MEMSNAP_TORCH_ALLOC 0
#define MEMSNAP_TORCH_FREE_REQUESTED 1
#define MEMSNAP_TORCH_FREE_COMPLETED 2
#define MEMSNAP_TORCH_SEGMENT_ALLOC 3
#define MEMSNAP_TORCH_SEGMENT_FREE 4
#define MEMSNAP_TORCH_SEGMENT_MAP 5
#define MEMSNAP_TORCH_SEGMENT_UNMAP 6
#define MEMSNAP_TORCH_OOM 8
void memsnap_trace_torch(int action, int device, uint64_t addr, uint64_t size,
                         uint64_t stream, uint64_t pool, uint64_t requested);
typedef void (*memsnap_trace_torch_fn)(int action, int device, uint64_t addr,
                                       uint64_t size, uint64_t stream, uint64_t pool,
                                       uint64_t requested);

#ifdef __cplusplus
}
#endif
#endif

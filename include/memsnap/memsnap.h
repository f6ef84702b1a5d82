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

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMSNAP_OK 0
#define MEMSNAP_ERR_OFF (-1)    /* recording is off (bad settings, or child after fork) */
#define MEMSNAP_ERR_IO (-2)     /* the dump could not be written; see stderr */
#define MEMSNAP_ERR_BUSY (-3)   /* memsnap_record_start: a recording is running already */

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
 *                                 memory pool id (memsnap/format.h, "Memory
 *                                 pools"); requested = the size the
 *                                 program asked for (0 when unknown)
 *   MEMSNAP_TORCH_FREE_REQUESTED  block_free_requested: addr, size, stream
 *   MEMSNAP_TORCH_FREE_COMPLETED  block_free: addr, size, stream
 *   MEMSNAP_TORCH_SEGMENT_ALLOC, _SEGMENT_FREE, _SEGMENT_MAP, _SEGMENT_UNMAP
 *                                 segment_*: addr, size, stream, pool
 *   (pool is the event's x, every action but OOM: format 1.3)
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

/* The same, with what PyTorch's autograd engine says of the calling thread
 * (format 1.2; the plugin calls this one when the recorder offers it, see
 * memsnap_torch_api):
 *   size  MEMSNAP_TORCH_ALLOC: the block's size as PyTorch counts it in
 *         memory_allocated(); frees: the same, or 0 when the caller does
 *         not know it (the recorder then takes it from the block's
 *         allocation);
 *   seq   1 + the autograd sequence number (0 = none): of the node being
 *         evaluated on this thread, or, on a thread evaluating none while
 *         grad mode is on, of the last node this thread created;
 *   node  the node being evaluated on this thread, as an id from
 *         memsnap_torch_node_id (0 = none).
 * seq and node are kept on allocations (ALLOC, SEGMENT_ALLOC, SEGMENT_MAP)
 * and OOMs, and dropped when MEMSNAP_TORCH_NODES=0. */
void memsnap_trace_torch2(int action, int device, uint64_t addr, uint64_t size,
                          uint64_t stream, uint64_t pool, uint64_t requested,
                          uint64_t seq, uint32_t node);
typedef void (*memsnap_trace_torch2_fn)(int action, int device, uint64_t addr,
                                        uint64_t size, uint64_t stream, uint64_t pool,
                                        uint64_t requested, uint64_t seq, uint32_t node);

/* The id of an autograd node's name (e.g. "MmBackward0") for
 * memsnap_trace_torch2, the same for the same name; 0 when the recorder
 * is off or its string table is full.  Takes a short lock and copies the
 * name: call it once per node type, not per event. */
uint32_t memsnap_torch_node_id(const char *name);
typedef uint32_t (*memsnap_torch_node_id_fn)(const char *name);

/* What the recorder hands the plugin's memsnap_torch_attach2 (the plugin
 * exports it beside memsnap_torch_attach; a plugin without it gets
 * memsnap_trace_torch, and its blocks the requested sizes). */
#define MEMSNAP_TORCH_API_NODES 1u     /* name autograd nodes (MEMSNAP_TORCH_NODES=1) */
#define MEMSNAP_TORCH_API_NO_FREE_REQUESTED 2u  /* no FREE_REQUESTED entries are wanted
                                                   (MEMSNAP_TORCH_FREE_REQUESTED=0) */
#define MEMSNAP_TORCH_API_POOL_KINDS 4u    /* pool: MempoolId_t's half (MSNAP_POOL_HANDLE)
                                                   and the capture bit (MSNAP_POOL_CAPTURING),
                                                   memsnap/format.h (format 1.3) */
typedef struct memsnap_torch_api {
    uint32_t size;                     /* sizeof(memsnap_torch_api) */
    uint32_t flags;                    /* MEMSNAP_TORCH_API_* */
    memsnap_trace_torch2_fn trace;
    memsnap_torch_node_id_fn node_id;
} memsnap_torch_api;

/* ---- Recording without LD_PRELOAD (recorder/inproc.c, docs/python.md) ----
 * A program that loads libmemsnap.so itself (dlopen, RTLD_LOCAL: the
 * Python package's memsnap.record() does, with ctypes) records between
 * these two calls what reaches this API: PyTorch's allocated layer through
 * the plugin (memsnap_record_torch), memsnap_trace_block, memsnap_annotate.
 * Its hooks interpose nothing: driver-level events need `memsnap run`.
 * Settings come from MEMSNAP_* as the library is loaded; no dump signal
 * is taken.  Recordings may follow one another in one process. */

/* Starts recording into path (a pattern as MEMSNAP_OUTPUT: %p pid, %%
 * a %, ...; the file is created new).  MEMSNAP_OK; MEMSNAP_ERR_BUSY when a
 * recording runs already (memsnap run's, or one started here);
 * MEMSNAP_ERR_OFF when recording is off (bad MEMSNAP_* settings,
 * MEMSNAP_DISABLE); MEMSNAP_ERR_IO when the file cannot be created (errno,
 * and a line on stderr). */
int memsnap_record_start(const char *path);

/* Stops the recording memsnap_record_start started: every event committed
 * before the call is written, then the live state, the symbols and the
 * trailer, and the file is closed.  *events (when not NULL): events
 * written.  MEMSNAP_OK; MEMSNAP_ERR_OFF when none runs; MEMSNAP_ERR_IO when
 * the file could not be written (errno). */
int memsnap_record_stop(uint64_t *events);

/* PyTorch's allocated layer in this process: finds PyTorch's libc10_cuda.so
 * among the loaded libraries, loads the matching plugin
 * (libmemsnap_torch-<build-id>.so, searched as under memsnap run) and, when
 * attach is not 0, attaches its tracker to PyTorch's CUDA caching allocator
 * (once per process; it sends nothing while no recording runs).  Call it on
 * a thread that holds no PyTorch allocator lock, with the GIL released
 * (ctypes.CDLL does).  Returns 0 (done), MEMSNAP_TORCH_NOT_YET (1: PyTorch's
 * allocator is not initialized: call it again after PyTorch's CUDA init),
 * or a negative reason with one line in msg (msglen bytes). */
#define MEMSNAP_TORCH_NOT_YET 1
#define MEMSNAP_TORCH_NOT_FOUND (-1)  /* no libc10_cuda.so loaded, or MEMSNAP_TORCH=off */
#define MEMSNAP_TORCH_NO_PLUGIN (-2)  /* no plugin for this PyTorch (memsnap torch-setup) */
#define MEMSNAP_TORCH_BACKEND (-3)    /* another allocator backend is in charge */
#define MEMSNAP_TORCH_FAILED (-4)     /* the plugin could not attach */
int memsnap_record_torch(int attach, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif

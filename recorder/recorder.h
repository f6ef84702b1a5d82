/* The recorder's internal interface (libmemsnap.so).
 *
 * Three tiers, as in heaptrack:
 *   hooks.c   mechanical wrappers around the CUDA driver memory API on every
 *             route (direct link, dlsym, cuGetProcAddress[_v2],
 *             cudaGetDriverEntryPoint*), calling the narrow core API below;
 *   core.c    the hot path: timestamp, backtrace into a fixed array, stack id
 *             from a lock-free table, one fixed-size record into a lock-free
 *             queue.  No I/O, no symbolization, no allocation after init;
 *   writer.c  the writer thread: drains the queue, keeps the live state and
 *             the counters, streams lines to the file (stream mode) or keeps the
 *             last N events in memory (ring mode), and dumps.
 * config.c parses MEMSNAP_* once; nvtx.c is the NVTX injection; api.c is the
 * public C API (include/memsnap/memsnap.h).
 *
 * Ordering: every event takes a ticket from one atomic counter when it is
 * committed; the writer consumes tickets in order, so the file's event order
 * is the order in which events were committed.  Frees are committed BEFORE
 * the real free (so the address cannot be handed out again and recorded
 * ahead of its free); if the driver then refuses the free, a free_error event
 * follows, and readers undo that free (docs/format.md).
 */
#ifndef MEMSNAP_RECORDER_H
#define MEMSNAP_RECORDER_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "memsnap/format.h"

#define MSNAP_EXPORT __attribute__((visibility("default")))
#define MSNAP_TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- Settings (config.c) ------------------------------------------------ */
typedef enum { MODE_STREAM = 0, MODE_RING = 1 } rec_mode;
typedef enum { OOM_DUMP_FIRST = 0, OOM_DUMP_EVERY, OOM_DUMP_NONE } rec_oom_dump;
typedef enum { FORK_FOLLOW = 0, FORK_STOP } rec_fork;

/* torch_native_depth's default: no native frames where the thread has
 * Python frames, TORCH_NATIVE_NO_PYTHON where it has none. */
#define TORCH_NATIVE_AUTO (-1)
#define TORCH_NATIVE_NO_PYTHON 4

typedef struct rec_config {
    int enabled;              /* 0: bad settings or MEMSNAP_DISABLE */
    char output[4096];        /* path pattern (%p %h %n %t %q{VAR} %%) */
    rec_mode mode;
    uint64_t ring_events;     /* ring mode: events kept */
    int stack_depth;          /* frames per stack, 0 = no stacks */
    int flush_ms;             /* stream mode: flush interval */
    int counters_ms;          /* counters sampling period */
    rec_oom_dump oom_dump;
    int dump_signal;          /* 0 = none */
    int dump_at_exit;
    int zstd_level;           /* 0 = plain JSON Lines */
    int symbolize;            /* symbolize in the writer at dump/exit */
    rec_fork fork_mode;
    uint64_t queue_events;    /* capacity of the hot-path queue (power of 2) */
    uint64_t max_stacks;      /* stack table capacity */
    int quiet;                /* no "memsnap: wrote ..." line at exit */
    int torch_off;            /* MEMSNAP_TORCH=off: never look for PyTorch */
    int py_frames;            /* Python frames in stacks (pyframes.c): 0 off, 1 on,
                                 2 only on threads that hold the GIL */
    int py_depth;             /* Python frames kept per stack */
    int py_native_depth;      /* native frames per stack when it has Python frames */
    int torch_native_depth;   /* native frames of a PyTorch block/segment allocation,
                                 or TORCH_NATIVE_AUTO */
    int torch_free_stacks;    /* 1: PyTorch's frees carry a stack too */
    int torch_nodes;          /* 1: PyTorch's allocations name the autograd node
                                 and carry its sequence number (q) */
} rec_config;

extern rec_config g_cfg;

/* Parses the environment into g_cfg.  On a bad value: prints one line to
 * stderr naming the variable and the value, sets g_cfg.enabled = 0 and
 * returns -1.  Never calls CUDA. */
int config_load(void);
/* Set while memsnap run checks the settings before running anything: a bad
 * value's message then says that nothing was run (not "recording off"). */
extern int config_for_run;
/* Writes g_cfg as a JSON object (for the header's "settings"). */
size_t config_to_json(char *buf, size_t cap);

/* ---- Core (core.c) ------------------------------------------------------- */

/* 0 until the first event (lazy start), then 1; -1 when recording is off. */
extern _Atomic int g_state;

/* Start the recorder if it is not running (first event, or after a fork).
 * Returns 1 if recording, 0 if off. */
int core_ensure_started(void);

uint64_t core_now_ns(void);   /* ns since t0 */
uint32_t core_tid(void);
uint64_t core_t0_unix_ns(void);
uint64_t core_t0_mono_ns(void);

/* Per-thread recursion guard: hooks record only at depth 0. */
extern MSNAP_TLS int t_in_hook;

/* 1 when a hooked call or an API call should be recorded now: recording is
 * on (starting it at the first event) and this thread is not already inside
 * the recorder. */
static inline int core_recording(void)
{
    if (t_in_hook)
        return 0;
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st == 1)
        return 1;
    if (st < 0)
        return 0;
    t_in_hook++;
    int on = core_ensure_started();
    t_in_hook--;
    return on;
}

/* In-process recording (inproc.c: memsnap_record_start/_stop).  start: 0,
 * -1 recording is off (settings), -2 the file could not be created
 * (errno; a line on stderr), -3 a recording is running already.  stop: 0,
 * -1 none running, -2 the file could not be written (errno); *events
 * (when not NULL) the events written. */
int core_inproc_start(const char *pattern);
int core_inproc_stop(uint64_t *events);
/* Before any in-process recording: no lazy start from now on.  0, -1
 * when the library was preloaded (memsnap run records this process). */
int core_inproc_claim(void);
extern int g_inproc;              /* 1 once an in-process recording was started */

/* Captures the caller's native stack and returns its id (0 = none). */
uint32_t core_capture_stack(void);

/* The same with at most native_keep native frames (also when the stack has
 * Python frames, which then follow the native ones) and own_frames frames
 * of the recorder above the caller's, so that only what is kept is unwound.
 * native_keep 0 with Python frames: no unwinding at all.  native_keep
 * TORCH_NATIVE_AUTO: 0 when the thread has Python frames, else
 * TORCH_NATIVE_NO_PYTHON.  first, when not 0, is put in front of the
 * stack as its innermost entry (an autograd frame, format.h); the stack
 * then has it even when it has nothing else. */
uint32_t core_capture_stack_n(int native_keep, int own_frames, uint64_t first);

/* Interns a string (NVTX message, dump reason); 0 when the table is full. */
uint32_t core_intern(const char *s);

/* Appends one event to the queue (fills t_ns and tid if 0).  Blocks only if
 * the queue is full (the writer is behind).  Wakes the writer when urgent. */
void core_emit(msnap_event *e, int urgent);

/* Queue access for the writer. */
/* One queue slot: two whole cache lines, so that threads filling
 * neighbouring slots, and the writer draining them, never share a line. */
typedef struct core_slot {
    _Atomic uint64_t seq;
    msnap_event ev;
    char pad[128 - 8 - sizeof(msnap_event)];
} __attribute__((aligned(128))) core_slot;
extern core_slot *g_queue;
extern uint64_t g_queue_mask;
extern _Atomic uint64_t g_queue_head;   /* next ticket to hand out */
extern _Atomic uint64_t g_queue_tail;   /* next ticket the writer consumes */
extern _Atomic uint32_t g_writer_wake;  /* futex word */

/* Stack table access for the writer: ids are 1..core_stack_count(). */
uint32_t core_stack_count(void);
int core_stack_get(uint32_t id, const uint64_t **ips); /* depth, or -1 if not ready */
uint64_t core_stacks_dropped(void);

/* String table access for the writer. */
const char *core_str_get(uint32_t id);

/* Wake the writer thread now. */
void core_wake_writer(void);

/* True if p is inside libmemsnap.so's own code. */
int core_is_own_code(const void *p);

/* Device info seen by the hooks (filled lazily, read by the writer). */
typedef struct core_device {
    _Atomic int ready;        /* 0 = unknown, 1 = filled */
    msnap_device_info info;
    char pci_bus_id[32];      /* cuDeviceGetPCIBusId, "" when unknown: how
                                 the writer finds the device in NVML */
} core_device;
extern core_device g_devices[MSNAP_MAX_DEVICES];

/* ---- Writer (writer.c) --------------------------------------------------- */
int writer_start(void);              /* opens the output, starts the thread */
void writer_stop_at_exit(void);      /* drains, final dump, joins */
/* The same, saying "N events written to PATH" on stderr when say is set;
 * *events (when not NULL) gets N.  0, or -1 when the file could not be
 * written (errno). */
int writer_stop(int say, uint64_t *events);
/* After writer_stop, for another recording in the same process: drops
 * the live state, the counters and the ring (inproc.c). */
void writer_forget(void);
/* Requests a dump and waits until it is written.  Returns 0 or -1. */
int writer_dump_sync(const char *reason);
/* Waits until every event with ticket < upto has been processed. */
void writer_sync(uint64_t upto);
/* Per-device totals kept by the writer (after writer_sync). */
int writer_totals(int device, uint64_t out[6]);
void writer_after_fork_child(void);
/* Signal handler side: async-signal-safe request for a dump. */
void writer_request_signal_dump(void);

/* ---- NVML (nvml.c) --------------------------------------------------------- */
/* What the driver says is in use on the device with this PCI bus id (NVML
 * total - free), read without touching the process's CUDA state.  Loads
 * libnvidia-ml.so.1 on the first call (writer thread only); when it is
 * absent or fails, every call returns -1 from then on.  0 on success. */
int nvml_device_used(const char *pci_bus_id, uint64_t *used);
/* In a forked child: forget the parent's NVML session (the next
 * nvml_device_used initialises NVML again). */
void nvml_after_fork_child(void);

/* ---- Hooks (hooks.c) ------------------------------------------------------ */
/* Calls the real driver's cuMemGetInfo_v2 (0 on success). */
int hooks_mem_info(uint64_t *free_b, uint64_t *total_b);
/* Device ordinal of the calling thread's current context, -1 if none. */
int hooks_current_device(void);
/* Fills g_devices[dev] the first time dev is seen. */
void hooks_note_device(int dev);

#endif

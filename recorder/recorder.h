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
/* What an event reads, kept together so that it touches few pages: between
 * two of a training step's allocations the program's own work evicts the
 * TLB's entries, and a page walk (two-level under a hypervisor) cost more
 * than the reads themselves (docs/recorder.md, *What an event touches*).
 * MSNAP_HOT_DATA puts a global in one section with the hot path's others;
 * MSNAP_HOT_FN a function in .text.hot, which the linker keeps together. */
#define MSNAP_HOT_DATA __attribute__((section("msnap_hot")))  /* page-aligned: hot.ld */
#define MSNAP_HOT_FN __attribute__((hot))

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
    int py_watch;             /* the main thread's pending call: the code watcher
                                 (3.12+), references (3.9-3.11), its own path */
    int py_native_depth;      /* native frames per stack when it has Python frames */
    int torch_native_depth;   /* native frames of a PyTorch block/segment allocation,
                                 or TORCH_NATIVE_AUTO */
    int torch_free_stacks;    /* 1: PyTorch's frees carry a stack too */
    int torch_free_requested; /* 1: PyTorch's block_free_requested entries recorded */
    int torch_nodes;          /* 1: PyTorch's allocations name the autograd node
                                 and carry its sequence number (q) */
    int clock_monotonic;      /* MEMSNAP_CLOCK=monotonic: no TSC stamps (core.c) */
    int has_rank;             /* the launcher named this process's rank at its start */
    int64_t rank;             /* RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or
                                 SLURM_PROCID, the first that is a number */
    int nvtx;                 /* NVTX ranges and marks recorded (nvtx.c):
                                 NVTX_OFF, NVTX_DEFAULT_DOMAIN, NVTX_ALL */
    char *output;             /* path pattern (%p %h %n %t %q{VAR} %%), REC_OUTPUT_MAX
                                 bytes (outside: g_cfg is on the hot path's page) */
    /* The large fields last: what an event reads is in the first lines. */
    char writer_cpus[256];    /* MEMSNAP_WRITER_CPUS as given ("" = anywhere) */
    uint64_t writer_mask[16]; /* the same, parsed: CPU c is bit c % 64 of word c / 64 */
} rec_config;
#define REC_OUTPUT_MAX 4096

enum { NVTX_OFF = 0, NVTX_DEFAULT_DOMAIN = 1, NVTX_ALL = 2 };

extern rec_config g_cfg;

/* Parses the environment into g_cfg.  On a bad value: prints one line to
 * stderr naming the variable and the value, sets g_cfg.enabled = 0 and
 * returns -1.  Never calls CUDA. */
int config_load(void);
/* Set while memsnap run checks the settings before running anything: a bad
 * value's message then says that nothing was run (not "recording off"). */
extern int config_for_run;
/* Writes g_cfg as a JSON object (for the header's "settings"), with
 * "in_process":1 for a memsnap.record() recording (no driver level). */
size_t config_to_json(char *buf, size_t cap, int in_process);

/* ---- Core (core.c) ------------------------------------------------------- */

/* 0 until the first event (lazy start), then 1; -1 when recording is off. */
extern _Atomic int g_state;

/* Start the recorder if it is not running (first event, or after a fork).
 * Returns 1 if recording, 0 if off. */
int core_ensure_started(void);

/* core.c, for lifecycle.c: the queue, stack and string tables and the
 * clock at a start (0, or -1 with errno); t0 = now; libmemsnap.so's own
 * range (core_is_own_code); the fork handlers' parts of the tables. */
int core_tables_init(void);
void core_set_t0(void);
void core_find_own_range(void);
/* dlopen/dlclose of the recorder's own libraries: fork waits for them (core.c) */
void *core_dlopen(const char *path, int flags);
void core_dlclose(void *h);
/* The same lock, around the writer's walks of the loaded objects. */
void core_dl_lock(void);
void core_dl_unlock(void);
void core_fork_prepare(void);
void core_fork_parent(void);
void core_fork_child(void);

uint64_t core_now_ns(void);   /* ns since t0 */

/* Event stamps (core.c): core_stamp() on the hot path, TSC ticks or ns
 * since t0; the writer turns them into ns since t0 with core_stamp_to_ns,
 * after core_clock_calibrate (writer thread only). */
extern int g_stamp_tsc;
static inline uint64_t core_rdtsc(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}
static inline uint64_t core_stamp(void)
{
    return g_stamp_tsc ? core_rdtsc() : core_now_ns();
}
uint64_t core_stamp_to_ns(uint64_t stamp);
void core_clock_calibrate(void);
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

/* The id of the stack made of ips[0..n) as they are (nothing unwound); 0
 * when stacks are off or the table is full. */
uint32_t core_stack_of(const uint64_t *ips, int n);

/* The stack of an allocation that names its autograd node (node: its
 * autograd frame, format.h) under TORCH_NATIVE_AUTO: the node, then the
 * thread's Python frames when it is running Python (a hook the engine
 * calls, a Python autograd function's backward: FSDP's all-gathers and
 * reduce-scatters are made there), no native frame; the node alone when
 * the thread has no Python frames (the engine running a node of
 * libtorch's).  0 when stacks are off or the table is full. */
uint32_t core_capture_node_stack(uint64_t node);

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
/* next ticket to hand out (.v): every event writes it, so it has its line
 * to itself, not shared with the read-mostly globals beside it */
typedef struct core_line_u64 {
    _Atomic uint64_t v;
    char pad[120];
} __attribute__((aligned(128))) core_line_u64;
extern core_line_u64 g_queue_head;
extern _Atomic uint64_t g_queue_tail;   /* next ticket the writer consumes */
extern _Atomic uint32_t g_writer_wake;  /* futex word */
/* Driver memory calls begun and finished (hooks.c's ENTER and LEAVE): the
 * writer reads the driver's used figure when none is in flight, so that a
 * sample does not see a free the events do not yet hold (writer.c). */
extern _Atomic uint64_t g_memops_begun, g_memops_done;

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
    msnap_device_info info;
    char pci_bus_id[32];      /* cuDeviceGetPCIBusId, "" when unknown: how
                                 the writer finds the device in NVML */
} core_device;
extern core_device g_devices[MSNAP_MAX_DEVICES];
/* Bit d: g_devices[d] is filled (published with release order once it is):
 * one word, so the writer finds a device line it still owes without a look
 * at 64 devices' entries. */
_Static_assert(MSNAP_MAX_DEVICES <= 64, "g_devices_ready_mask has a bit per device");
extern _Atomic uint64_t g_devices_ready_mask;
static inline int core_device_ready(int d)
{
    return d >= 0 && d < MSNAP_MAX_DEVICES &&
           ((atomic_load_explicit(&g_devices_ready_mask, memory_order_acquire) >> d) & 1);
}

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
/* On the writer thread: NVML's used figure of each device the program has
 * used (0: not read), taken when no driver memory call is in flight from
 * *t until after the read (writer.c). */
void writer_device_used_settled(uint64_t du[MSNAP_MAX_DEVICES], uint64_t *t);
void writer_after_fork_child(void);
/* Signal handler side: async-signal-safe request for a dump. */
void writer_request_signal_dump(void);

/* ---- Watching live (live.c) ----------------------------------------------- */
struct msnap_state;
/* What the writer shows live.c of its state, read on the writer thread. */
typedef struct live_src {
    const struct msnap_state *live; /* the live set (format/state.h) */
    const msnap_event *ring;       /* ring mode: the last events, ring_n ever put in */
    uint64_t ring_n;
    const msnap_counters *series;  /* ring mode: the counters of the whole run */
    size_t series_n;
    uint64_t dropped;              /* events the ring overwrote */
} live_src;
/* Called by the writer loop with its clock (ms) each time round; does its
 * work once a second (live.c: the registration for memsnap run --metrics,
 * a ring-mode run's PATH.live while someone watches). */
void live_tick(uint64_t now_ms, const live_src *s);

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

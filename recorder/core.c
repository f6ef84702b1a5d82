/* The recorder's hot path: what every hooked call pays.  (Starting,
 * stopping, fork and exit are lifecycle.c's.)
 *
 * Per event: a timestamp (vDSO clock_gettime), a native backtrace with
 * libunwind's unw_backtrace (loaded outside the program's scope: stacks.h)
 * into a fixed array, a stack id from a lock-free
 * hash table (the frames are stored once, in a preallocated arena), and one
 * 72-byte record appended to a bounded lock-free queue (Vyukov's ticket
 * queue: a producer takes a ticket with one fetch_add, waits until the slot is
 * free, fills it, and publishes it by storing the slot's sequence number).
 * There is no I/O, no symbolization and no allocation here after start-up;
 * the only lock is the short one around the string table (NVTX messages).
 *
 * Start-up is lazy (lifecycle.c): the constructor only reads MEMSNAP_* (no
 * CUDA call, no thread); the first recorded event allocates the tables
 * (core_tables_init), opens the output and starts the writer thread.  A
 * process that never touches CUDA memory (a shell under `memsnap run`, say)
 * writes nothing.
 *
 * The stack table (stacktab.c) is lock-free and bounded; when it is full,
 * events get stack id 0 and the trailer counts them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "modrange.h"
#include "recorder.h"
#include "pyframes.h"
#include "stacks.h"
#include "stacktab.h"
#include "mapmem.h"
#include "util/hash.h"

MSNAP_HOT_DATA _Atomic int g_state;                 /* 0 not started, 1 recording, -1 off */
MSNAP_TLS int t_in_hook;
static MSNAP_TLS uint32_t t_tid;
static MSNAP_TLS uint64_t t_last_ticket = UINT64_MAX - 1;  /* the queue ticket of this thread's last event */

MSNAP_HOT_DATA core_slot *g_queue;
MSNAP_HOT_DATA uint64_t g_queue_mask;
/* Each on a line of its own: head is the producers', tail the writer's. */
MSNAP_HOT_DATA core_line_u64 g_queue_head;
_Atomic uint64_t g_memops_begun __attribute__((aligned(128))), g_memops_done;
_Atomic uint64_t g_queue_tail __attribute__((aligned(128)));
_Atomic uint32_t g_writer_wake __attribute__((aligned(128)));

core_device g_devices[MSNAP_MAX_DEVICES];
MSNAP_HOT_DATA _Atomic uint64_t g_devices_ready_mask;

static uint64_t t0_mono, t0_unix;
static int queue_fresh = 1;          /* the queue is reset at the next start (first, after fork) */
MSNAP_HOT_DATA static uintptr_t own_lo, own_hi;     /* libmemsnap.so's mapped range */

/* ---- time and thread id ---------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t core_now_ns(void) { return mono_ns() - t0_mono; }
uint64_t core_t0_unix_ns(void) { return t0_unix; }
uint64_t core_t0_mono_ns(void) { return t0_mono; }

/* ---- event stamps --------------------------------------------------------------
 * The hot path stamps an event with the cheapest clock that keeps
 * CLOCK_MONOTONIC's meaning: where the kernel itself keeps time with the TSC
 * (its clocksource is "tsc": invariant and synchronized across CPUs, which
 * the kernel checked at boot; constant_tsc and nonstop_tsc in cpuinfo), a
 * bare rdtsc, about 8 ns, where clock_gettime through the vDSO took 20-40 ns
 * (40 on the H200's VM; docs/benchmarks.md).  The writer thread turns ticks
 * into ns since t0 (core_stamp_to_ns) from two (TSC, CLOCK_MONOTONIC) pairs:
 * the first, taken at start over 200 us, and the latest, taken by the writer
 * as it goes (core_clock_calibrate), so the rate is measured over the whole
 * run and the conversion is anchored near the events it converts.  Elsewhere
 * (another clocksource, MEMSNAP_CLOCK=monotonic) stamps are CLOCK_MONOTONIC
 * ns since t0 and the conversion is the identity. */

MSNAP_HOT_DATA int g_stamp_tsc;                     /* 1: stamps are TSC ticks */
static uint64_t cal_tsc0, cal_ns0;   /* the first pair (ns since t0) */
static uint64_t cal_tsc1, cal_ns1;   /* the latest pair */
static uint64_t cal_mult;            /* ns per tick, 32.32 fixed point */

/* 1 when the kernel keeps time with an invariant TSC. */
static int tsc_trusted(void)
{
#if defined(__x86_64__)
    if (g_cfg.clock_monotonic)
        return 0;
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (!f)
        return 0;
    int ok = fgets(cs, sizeof cs, f) && strcmp(cs, "tsc\n") == 0;
    fclose(f);
    if (!ok || !(f = fopen("/proc/cpuinfo", "re")))
        return 0;
    char ln[4096];
    int constant = 0, nonstop = 0;
    while (fgets(ln, sizeof ln, f) && !(constant && nonstop)) {
        if (strncmp(ln, "flags", 5) != 0)
            continue;
        constant = strstr(ln, " constant_tsc") != NULL;
        nonstop = strstr(ln, " nonstop_tsc") != NULL;
        break;
    }
    fclose(f);
    return constant && nonstop;
#else
    return 0;
#endif
}

/* A (TSC, ns since t0) pair, the TSC read on both sides of the clock. */
static void clock_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t a = core_rdtsc();
    uint64_t n = core_now_ns();
    uint64_t b = core_rdtsc();
    *tsc = a + (b - a) / 2;
    *ns = n;
}

static void clock_rate(void)
{
    uint64_t dt = cal_tsc1 - cal_tsc0;
    if (dt)
        cal_mult = (uint64_t)(((unsigned __int128)(cal_ns1 - cal_ns0) << 32) / dt);
}

/* At a start (tables_init): chooses the clock and, for the TSC, takes the
 * first pairs 200 us apart (on the program's thread, once). */
static void clock_start(void)
{
    g_stamp_tsc = tsc_trusted();
    if (!g_stamp_tsc)
        return;
    clock_pair(&cal_tsc0, &cal_ns0);
    do
        clock_pair(&cal_tsc1, &cal_ns1);
    while (cal_ns1 - cal_ns0 < 200000);
    clock_rate();
}

void core_clock_calibrate(void)
{
    if (!g_stamp_tsc)
        return;
    uint64_t t, n;
    clock_pair(&t, &n);
    if (n - cal_ns1 < 1000000)       /* a new pair at most every ms */
        return;
    cal_tsc1 = t;
    cal_ns1 = n;
    clock_rate();
}

uint64_t core_stamp_to_ns(uint64_t stamp)
{
    if (!g_stamp_tsc)
        return stamp;
    int64_t d = (int64_t)(stamp - cal_tsc1);
    int64_t ns = (int64_t)cal_ns1 + (int64_t)(((__int128)d * (__int128)cal_mult) >> 32);
    return ns > 0 ? (uint64_t)ns : 0;
}

MSNAP_HOT_FN uint32_t core_tid(void)
{
    if (!t_tid)
        t_tid = (uint32_t)syscall(SYS_gettid);
    return t_tid;
}

/* ---- own code range ---------------------------------------------------------- */

static int find_own_range(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t probe = (uintptr_t)arg;
    uintptr_t lo, hi;
    rec_module_extent(info, &lo, &hi);
    if (probe >= lo && probe < hi) {
        own_lo = lo;
        own_hi = hi;
        return 1;
    }
    return 0;
}

int core_is_own_code(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    return a >= own_lo && a < own_hi;
}

static uint64_t round_pow2(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

/* ---- stack table (stacktab.c) ------------------------------------------------ */

#define OWN_FRAMES_MAX 6     /* frames of libmemsnap.so above the program's */

MSNAP_HOT_DATA static stacktab g_stacks;
MSNAP_HOT_DATA static int g_stacks_ready;

uint32_t core_stack_count(void) { return g_stacks_ready ? stacktab_count(&g_stacks) : 0; }

int core_stack_get(uint32_t id, const uint64_t **ips)
{
    return g_stacks_ready ? stacktab_get(&g_stacks, id, ips) : -1;
}

uint64_t core_stacks_dropped(void) { return g_stacks_ready ? stacktab_dropped(&g_stacks) : 0; }

/* A stack's id through the calling thread's own ids first (pyframes.c,
 * "Stack ids again"): the key the stack table would make, then the table
 * only where this thread was not given the id lately.  Native stacks and
 * the backward pass's node stacks (the autograd thread's allocations name
 * a few dozen nodes, over and over) as well as Python-only ones. */
static inline __attribute__((always_inline)) uint32_t intern_front(const uint64_t *ips, int depth,
                                                                   stacktab_key k)
{
    uint32_t id = pyframes_id_known(k.hash, (uint32_t)k.check);
    if (!id && (id = stacktab_intern_keyed(&g_stacks, ips, depth, k)) != 0)
        pyframes_id_keep(k.hash, (uint32_t)k.check, id);
    return id;
}

static inline __attribute__((always_inline)) uint32_t intern(const uint64_t *ips, int depth)
{
    return intern_front(ips, depth, stacktab_key_of(ips, depth));
}

/* Captures up to keep native frames (own_frames of ours above them are
 * unwound and dropped) merged with the Python frames py[0..np), behind
 * first when it is not 0 (an autograd frame: the innermost entry). */
static inline __attribute__((always_inline)) uint32_t capture(int keep, int own_frames, const uint64_t *py, const uint16_t *grp,
                        int np, stacktab_key py_key, uint64_t first)
{
    void *raw[MSNAP_MAX_FRAMES + OWN_FRAMES_MAX];
    int n = 0, skip = 0;
    if (keep > 0) {
        n = stacks_backtrace(raw, keep + own_frames);
        while (skip < n && core_is_own_code(raw[skip]))
            skip++;
    }
    int depth = n - skip;
    if (depth > keep)
        depth = keep;
    if (depth < 0)
        depth = 0;
    uint64_t ips[MSNAP_MAX_FRAMES];
    int f = first != 0;              /* entries taken by first */
    ips[0] = first;
    if (np > 0 && depth == 0) {    /* Python frames alone: nothing to merge */
        int d = np < MSNAP_MAX_FRAMES - f ? np : MSNAP_MAX_FRAMES - f;
        if (!f && py_key.hash && d == np)
            return intern_front(py, d, py_key);   /* the walk made the key */
        if (!f)
            return intern(py, d);
        memcpy(ips + 1, py, (size_t)d * sizeof *py);
        return intern(ips, d + 1);
    }
    if (np > 0)
        return intern(ips, f + pyframes_merge(raw + skip, depth, py, grp, np, ips + f,
                                              MSNAP_MAX_FRAMES - f));
    if (depth + f == 0)
        return 0;
    if (depth > MSNAP_MAX_FRAMES - f)
        depth = MSNAP_MAX_FRAMES - f;
    for (int i = 0; i < depth; i++)
        ips[f + i] = (uint64_t)(uintptr_t)raw[skip + i];
    return intern(ips, depth + f);
}

__attribute__((noinline)) MSNAP_HOT_FN uint32_t core_capture_stack(void)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready)
        return 0;
    /* A thread running Python: its Python frames first (pyframes.c).  They
     * say more than the native frames above the innermost eval loop, so
     * fewer native frames are unwound then (python_native_depth). */
    uint64_t py[MSNAP_MAX_FRAMES];
    uint16_t grp[MSNAP_MAX_FRAMES];
    stacktab_key py_key;
    int np = pyframes_collect(py, grp, MSNAP_MAX_FRAMES, &py_key, NULL);
    int keep = g_cfg.stack_depth;
    if (np > 0 && g_cfg.py_native_depth < keep)
        keep = g_cfg.py_native_depth;
    /* Our own frames on top (this function, the recording helper, the hook,
     * the wrapper) are skipped in capture(): ask for only a few more than
     * kept, since unwinding costs per frame. */
    return capture(keep, OWN_FRAMES_MAX, py, grp, np, py_key, 0);
}

MSNAP_HOT_FN uint32_t core_stack_of(const uint64_t *ips, int n)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready || n <= 0)
        return 0;
    return intern(ips, n < MSNAP_MAX_FRAMES ? n : MSNAP_MAX_FRAMES);
}

__attribute__((noinline)) MSNAP_HOT_FN uint32_t core_capture_stack_n(int native_keep, int own_frames,
                                                        uint64_t first)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready)
        return 0;
    uint64_t py[MSNAP_MAX_FRAMES];
    uint16_t grp[MSNAP_MAX_FRAMES];
    stacktab_key py_key;
    /* auto: a thread with Python frames keeps no native ones, so nothing
     * is merged and which eval loop ran each frame is not wanted; the
     * stack is then the Python frames alone, and the thread's last such
     * stack's id serves again where the frames are the same (pyframes.h). */
    uint32_t memo = 0;
    int py_only = native_keep <= 0 && !first;
    int np = pyframes_collect(py, native_keep > 0 ? grp : NULL, MSNAP_MAX_FRAMES, &py_key,
                              py_only ? &memo : NULL);
    if (memo)
        return memo;
    if (native_keep == TORCH_NATIVE_AUTO)
        native_keep = np > 0 ? 0 : TORCH_NATIVE_NO_PYTHON;
    int keep = native_keep < g_cfg.stack_depth ? native_keep : g_cfg.stack_depth;
    if (keep < 0)
        keep = 0;
    if (own_frames < 0 || own_frames > OWN_FRAMES_MAX)
        own_frames = OWN_FRAMES_MAX;
    uint32_t id = capture(keep, own_frames, py, grp, np, py_key, first);
    if (py_only && np > 0)
        pyframes_memo_note(id);   /* keep 0 then: the Python frames alone */
    return id;
}

__attribute__((noinline)) MSNAP_HOT_FN uint32_t core_capture_node_stack(uint64_t node)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready)
        return 0;
    uint64_t py[MSNAP_MAX_FRAMES];
    stacktab_key py_key;
    int np = pyframes_collect(py, NULL, MSNAP_MAX_FRAMES, &py_key, NULL);
    if (np <= 0)
        return core_stack_of(&node, 1);
    return capture(0, 0, py, NULL, np, py_key, node);
}

/* ---- string table ---------------------------------------------------------------
 * Short lock: hashing and copying a short string.  Bounded: 64k strings in a
 * 4 MiB arena; past that, 0 ("string table full"). */

#define STR_SLOTS 65536u
#define STR_ARENA (4u << 20)
static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *str_slots;          /* id per hash slot */
static uint32_t *str_off;            /* arena offset per id */
static char *str_arena;
static uint32_t str_used, str_count;

static uint64_t hash_str(const char *s, size_t n)
{
    return msnap_fnv1a(MSNAP_FNV_BASIS, s, n);
}

uint32_t core_intern(const char *s)
{
    if (!s || !str_slots)
        return 0;
    size_t n = strnlen(s, 4096);
    uint64_t h = hash_str(s, n);
    uint32_t id = 0;
    pthread_mutex_lock(&str_lock);
    for (uint32_t probe = 0, i = (uint32_t)h & (STR_SLOTS - 1); probe < STR_SLOTS;
         probe++, i = (i + 1) & (STR_SLOTS - 1)) {
        uint32_t cur = str_slots[i];
        if (cur == 0) {
            if (str_count + 1 >= STR_SLOTS / 2 || str_used + n + 1 > STR_ARENA)
                break;
            id = ++str_count;
            str_off[id] = str_used;
            memcpy(str_arena + str_used, s, n);
            str_arena[str_used + n] = 0;
            str_used += (uint32_t)n + 1;
            str_slots[i] = id;
            break;
        }
        const char *c = str_arena + str_off[cur];
        if (strncmp(c, s, n) == 0 && c[n] == 0) {
            id = cur;
            break;
        }
    }
    pthread_mutex_unlock(&str_lock);
    return id;
}

const char *core_str_get(uint32_t id)
{
    if (id == 0 || !str_off)
        return "";
    pthread_mutex_lock(&str_lock);
    const char *s = id <= str_count ? str_arena + str_off[id] : "";
    pthread_mutex_unlock(&str_lock);
    return s;
}

/* ---- the queue ------------------------------------------------------------------- */

static long futex(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)w, op, val, ts, NULL, 0);
}

void core_wake_writer(void)
{
    atomic_fetch_add(&g_writer_wake, 1);
    futex(&g_writer_wake, FUTEX_WAKE_PRIVATE, 1, NULL);
}

MSNAP_HOT_FN void core_emit(msnap_event *e, int urgent)
{
    if (!e->t_ns)
        e->t_ns = core_stamp();
    if (!e->tid)
        e->tid = core_tid();
    uint64_t t = atomic_fetch_add_explicit(&g_queue_head.v, 1, memory_order_relaxed);
    core_slot *s = &g_queue[t & g_queue_mask];
    int spins = 0;
    while (atomic_load_explicit(&s->seq, memory_order_acquire) != t) {
        /* Full: the writer is behind.  Wake it and wait; nothing is dropped. */
        if ((++spins & 63) == 0)
            core_wake_writer();
        if (spins > 256) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
    s->ev = *e;
    atomic_store_explicit(&s->seq, t + 1, memory_order_release);
    /* A thread that got the ticket after its last one is, for now, the only
     * one emitting: it will most likely fill the next slot too, whose lines
     * the writer last held.  Ask for them now, for writing, so the next
     * event does not wait on that transfer (PREFETCHW: a no-op where the
     * CPU lacks it).  With other threads emitting the guess is not made, so
     * no thread pulls lines another is about to fill. */
    if (t == t_last_ticket + 1) {
        const char *next = (const char *)&g_queue[(t + 1) & g_queue_mask];
#if defined(__x86_64__)
        __asm__ volatile("prefetchw %0" : : "m"(next[0]));
        __asm__ volatile("prefetchw %0" : : "m"(next[64]));
#else
        __builtin_prefetch(next, 1, 3);
        __builtin_prefetch(next + 64, 1, 3);
#endif
    }
    t_last_ticket = t;
    /* Keep the writer ahead of a burst: wake it at a quarter full.  Looked at
     * every 256th ticket only: g_queue_tail is the writer's line, and reading
     * it on every event would pull that line across cores each time. */
    if (urgent) {
        core_wake_writer();
    } else if ((t & 255) == 0) {
        uint64_t tail = atomic_load_explicit(&g_queue_tail, memory_order_relaxed);
        if (t - tail >= (g_queue_mask + 1) / 4)
            core_wake_writer();
    }
}

/* ---- the tables, at a start (lifecycle.c) -------------------------------------------- */

int core_tables_init(void)
{
    if (!g_queue) {
        uint64_t cap = round_pow2(g_cfg.queue_events);
        g_queue = rec_map_hot(cap * sizeof(core_slot));
        if (!g_queue)
            return -1;
        g_queue_mask = cap - 1;
    }
    /* A restart in the same process (inproc.c) keeps the queue as it is:
     * the new writer goes on from the old one's tail, so an event a thread
     * was committing while the last recording stopped cannot collide with
     * a new one's ticket. */
    clock_start();
    if (queue_fresh) {
        for (uint64_t i = 0; i <= g_queue_mask; i++)
            atomic_store_explicit(&g_queue[i].seq, i, memory_order_relaxed);
        atomic_store(&g_queue_head.v, 0);
        atomic_store(&g_queue_tail, 0);
        queue_fresh = 0;
    }
    if (!g_stacks_ready && g_cfg.stack_depth > 0) {
        /* Native frames: libunwind, from a library of its own (stacks.h),
         * with per-thread unwind caches, so no lock is shared by threads on
         * the hot path.  Without it, Python frames only. */
        if (stacks_load(g_cfg.quiet) == 0)
            g_stacks_api->per_thread_caches();
        /* Arena: an average of 24 frames per stack. */
        if (stacktab_init(&g_stacks, g_cfg.max_stacks, g_cfg.max_stacks * 24) != 0)
            return -1;
        g_stacks_ready = 1;
    }
    if (!str_slots) {
        str_slots = rec_map_zeroed(STR_SLOTS * sizeof(uint32_t));
        str_off = rec_map_zeroed(STR_SLOTS * sizeof(uint32_t));
        str_arena = rec_map_zeroed(STR_ARENA);
        if (!str_slots || !str_off || !str_arena)
            return -1;
    }
    return 0;
}

/* ---- what the lifecycle sets (lifecycle.c) ---------------------------------------------- */

void core_set_t0(void)
{
    t0_mono = mono_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t0_unix = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void core_find_own_range(void)
{
    dl_iterate_phdr(find_own_range, (void *)(uintptr_t)&find_own_range);
}

/* ---- the recorder's own dlopen and dlclose ----------------------------------------------
 * NVML (the writer, at its first counters sample), the stacks library and
 * the torch plugin are opened under a lock that fork waits for, and the
 * writer's walks of the loaded objects (dl_iterate_phdr, for the module
 * lines) are made under it too: dl_iterate_phdr holds the loader's
 * dl_load_write_lock, which fork does not take either, so a child forked
 * while the writer was inside it inherited that lock held by nobody, and
 * its first dl_iterate_phdr (the PyTorch check at its first allocation, the
 * child's own writer) waited for ever (recorder.python-fork, about one run
 * in ten under Python 3.12).  glibc's
 * fork does not wait for a dlopen on another thread: forked while one is
 * mapping its library, the child inherits the loader's state half-changed,
 * and its first dlopen of a library already loaded stops it with
 * "Inconsistency detected by ld.so: dl-open.c: _dl_open: Assertion
 * `_dl_debug_update (args.nsid)->r_state == RT_CONSISTENT' failed!" (exit
 * 127).  The writer opens NVML just after the program's first allocation,
 * often when a DataLoader forks its workers.  Recursive: a constructor run
 * inside one of these may reach another. */
static pthread_mutex_t dl_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void *core_dlopen(const char *path, int flags)
{
    pthread_mutex_lock(&dl_lock);
    void *h = dlopen(path, flags);
    pthread_mutex_unlock(&dl_lock);
    return h;
}

void core_dlclose(void *h)
{
    pthread_mutex_lock(&dl_lock);
    dlclose(h);
    pthread_mutex_unlock(&dl_lock);
}

void core_dl_lock(void) { pthread_mutex_lock(&dl_lock); }
void core_dl_unlock(void) { pthread_mutex_unlock(&dl_lock); }

void core_fork_prepare(void)
{
    pthread_mutex_lock(&dl_lock);
    pthread_mutex_lock(&str_lock);
}

void core_fork_parent(void)
{
    pthread_mutex_unlock(&str_lock);
    pthread_mutex_unlock(&dl_lock);
}

void core_fork_child(void)
{
    pthread_mutex_unlock(&str_lock);
    /* A recursive mutex remembers its owner's thread id, and the child's
     * thread has a new one: unlocking would fail with EPERM and leave it
     * held.  The child has one thread, so a fresh mutex is the same state. */
    pthread_mutex_t fresh = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
    dl_lock = fresh;
    t_tid = 0;
    queue_fresh = 1;
}

/* The recorder's hot path: what every hooked call pays.
 *
 * Per event: a timestamp (vDSO clock_gettime), a native backtrace with
 * libunwind's unw_backtrace into a fixed array, a stack id from a lock-free
 * hash table (the frames are stored once, in a preallocated arena), and one
 * 72-byte record appended to a bounded lock-free queue (Vyukov's ticket
 * queue: a producer takes a ticket with one fetch_add, waits until the slot is
 * free, fills it, and publishes it by storing the slot's sequence number).
 * There is no I/O, no symbolization and no allocation here after start-up;
 * the only lock is the short one around the string table (NVTX messages).
 *
 * Start-up is lazy: the constructor only reads MEMSNAP_* (no CUDA call, no
 * thread); the first recorded event allocates the tables, opens the output
 * and starts the writer thread.  A process that never touches CUDA memory
 * (a shell under `memsnap run`, say) writes nothing.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "modrange.h"
#include "recorder.h"
#include "pyframes.h"
#include "stacktab.h"
#include "mapmem.h"

_Atomic int g_state;                 /* 0 not started, 1 recording, -1 off */
MSNAP_TLS int t_in_hook;
static MSNAP_TLS uint32_t t_tid;
static MSNAP_TLS uint64_t t_last_ticket = UINT64_MAX - 1;  /* the queue ticket of this thread's last event */

core_slot *g_queue;
uint64_t g_queue_mask;
/* Each on a line of its own: head is the producers', tail the writer's. */
_Atomic uint64_t g_queue_head __attribute__((aligned(128)));
_Atomic uint64_t g_queue_tail __attribute__((aligned(128)));
_Atomic uint32_t g_writer_wake __attribute__((aligned(128)));

core_device g_devices[MSNAP_MAX_DEVICES];

static uint64_t t0_mono, t0_unix;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int queue_fresh = 1;          /* the queue is reset at the next start (first, after fork) */
int g_inproc;                        /* in-process recording (inproc.c): never a lazy start */
static int preloaded;                /* loaded into the global scope (LD_PRELOAD: memsnap run) */
static uintptr_t own_lo, own_hi;     /* libmemsnap.so's mapped range */

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

uint32_t core_tid(void)
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

static stacktab g_stacks;
static int g_stacks_ready;

uint32_t core_stack_count(void) { return g_stacks_ready ? stacktab_count(&g_stacks) : 0; }

int core_stack_get(uint32_t id, const uint64_t **ips)
{
    return g_stacks_ready ? stacktab_get(&g_stacks, id, ips) : -1;
}

uint64_t core_stacks_dropped(void) { return g_stacks_ready ? stacktab_dropped(&g_stacks) : 0; }

/* Captures up to keep native frames (own_frames of ours above them are
 * unwound and dropped) merged with the Python frames py[0..np), behind
 * first when it is not 0 (an autograd frame: the innermost entry). */
static inline __attribute__((always_inline)) uint32_t capture(int keep, int own_frames, const uint64_t *py, const uint16_t *grp,
                        int np, uint64_t py_hash, uint64_t first)
{
    void *raw[MSNAP_MAX_FRAMES + OWN_FRAMES_MAX];
    int n = 0, skip = 0;
    if (keep > 0) {
        n = unw_backtrace(raw, keep + own_frames);
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
        if (!f)
            return py_hash && d == np ? stacktab_intern_hashed(&g_stacks, py, d, py_hash)
                                      : stacktab_intern(&g_stacks, py, d);
        memcpy(ips + 1, py, (size_t)d * sizeof *py);
        return stacktab_intern(&g_stacks, ips, d + 1);
    }
    if (np > 0)
        return stacktab_intern(&g_stacks, ips,
                               f + pyframes_merge(raw + skip, depth, py, grp, np, ips + f,
                                                  MSNAP_MAX_FRAMES - f));
    if (depth + f == 0)
        return 0;
    if (depth > MSNAP_MAX_FRAMES - f)
        depth = MSNAP_MAX_FRAMES - f;
    for (int i = 0; i < depth; i++)
        ips[f + i] = (uint64_t)(uintptr_t)raw[skip + i];
    return stacktab_intern(&g_stacks, ips, depth + f);
}

__attribute__((noinline)) uint32_t core_capture_stack(void)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready)
        return 0;
    /* A thread running Python: its Python frames first (pyframes.c).  They
     * say more than the native frames above the innermost eval loop, so
     * fewer native frames are unwound then (python_native_depth). */
    uint64_t py[MSNAP_MAX_FRAMES];
    uint16_t grp[MSNAP_MAX_FRAMES];
    uint64_t py_hash;
    int np = pyframes_collect(py, grp, MSNAP_MAX_FRAMES, &py_hash);
    int keep = g_cfg.stack_depth;
    if (np > 0 && g_cfg.py_native_depth < keep)
        keep = g_cfg.py_native_depth;
    /* Our own frames on top (this function, the recording helper, the hook,
     * the wrapper) are skipped in capture(): ask for only a few more than
     * kept, since unwinding costs per frame. */
    return capture(keep, OWN_FRAMES_MAX, py, grp, np, py_hash, 0);
}

__attribute__((noinline)) uint32_t core_capture_stack_n(int native_keep, int own_frames,
                                                        uint64_t first)
{
    if (g_cfg.stack_depth <= 0 || !g_stacks_ready)
        return 0;
    uint64_t py[MSNAP_MAX_FRAMES];
    uint16_t grp[MSNAP_MAX_FRAMES];
    uint64_t py_hash;
    /* auto: a thread with Python frames keeps no native ones, so nothing
     * is merged and which eval loop ran each frame is not wanted. */
    int np = pyframes_collect(py, native_keep > 0 ? grp : NULL, MSNAP_MAX_FRAMES, &py_hash);
    if (native_keep == TORCH_NATIVE_AUTO)
        native_keep = np > 0 ? 0 : TORCH_NATIVE_NO_PYTHON;
    int keep = native_keep < g_cfg.stack_depth ? native_keep : g_cfg.stack_depth;
    if (keep < 0)
        keep = 0;
    if (own_frames < 0 || own_frames > OWN_FRAMES_MAX)
        own_frames = OWN_FRAMES_MAX;
    return capture(keep, own_frames, py, grp, np, py_hash, first);
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
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
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

void core_emit(msnap_event *e, int urgent)
{
    if (!e->t_ns)
        e->t_ns = core_now_ns();
    if (!e->tid)
        e->tid = core_tid();
    uint64_t t = atomic_fetch_add_explicit(&g_queue_head, 1, memory_order_relaxed);
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

/* ---- start, fork, exit --------------------------------------------------------------- */

static void on_dump_signal(int sig)
{
    (void)sig;
    int saved = errno;
    /* before recording started (no CUDA call yet) there is nothing to dump:
     * the signal is taken, so that it never kills the program */
    if (atomic_load(&g_state) == 1)
        writer_request_signal_dump();
    errno = saved;
}

static void install_signal_handler(void)
{
    if (!g_cfg.dump_signal)
        return;
    struct sigaction old;
    if (sigaction(g_cfg.dump_signal, NULL, &old) != 0)
        return;
    /* Never take a signal the program already handles or ignores. */
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL)
        return;
    if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction != NULL)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(g_cfg.dump_signal, &sa, NULL);
}

static void at_exit(void)
{
    if (atomic_load(&g_state) != 1)
        return;
    writer_stop_at_exit();
    atomic_store(&g_state, -1);
}

static int tables_init(void)
{
    if (!g_queue) {
        uint64_t cap = round_pow2(g_cfg.queue_events);
        g_queue = rec_map_zeroed(cap * sizeof(core_slot));
        if (!g_queue)
            return -1;
        g_queue_mask = cap - 1;
    }
    /* A restart in the same process (inproc.c) keeps the queue as it is:
     * the new writer goes on from the old one's tail, so an event a thread
     * was committing while the last recording stopped cannot collide with
     * a new one's ticket. */
    if (queue_fresh) {
        for (uint64_t i = 0; i <= g_queue_mask; i++)
            atomic_store_explicit(&g_queue[i].seq, i, memory_order_relaxed);
        atomic_store(&g_queue_head, 0);
        atomic_store(&g_queue_tail, 0);
        queue_fresh = 0;
    }
    if (!g_stacks_ready && g_cfg.stack_depth > 0) {
        /* Per-thread unwind caches: no lock shared by threads on the hot path. */
        unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
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

int core_ensure_started(void)
{
    int st = atomic_load_explicit(&g_state, memory_order_acquire);
    if (st != 0)
        return st == 1;
    pthread_mutex_lock(&start_lock);
    st = atomic_load(&g_state);
    if (st == 0) {
        int saved = errno;
        static int atexit_done;
        if (tables_init() != 0 || writer_start() != 0) {
            fprintf(stderr, "memsnap: recorder could not start (%s); recording off\n",
                    strerror(errno));
            st = -1;
        } else {
            st = 1;
            install_signal_handler();
            if (!atexit_done) {
                atexit(at_exit);
                atexit_done = 1;
            }
        }
        atomic_store_explicit(&g_state, st, memory_order_release);
        errno = saved;
    }
    pthread_mutex_unlock(&start_lock);
    return st == 1;
}

/* ---- in-process recording (inproc.c) -------------------------------------------------- */

/* The recorder loaded without LD_PRELOAD (dlopen, RTLD_LOCAL: its hooks
 * interpose nothing) records only between core_inproc_start and
 * core_inproc_stop, and only what reaches its API (PyTorch's plugin,
 * memsnap_trace_block, memsnap_annotate).  In between recordings g_state
 * is -1, so nothing starts one lazily.  No dump signal is taken (the
 * program's dispositions stay its own); the exit handler closes a
 * recording still running. */
int core_inproc_start(const char *pattern)
{
    if (!g_cfg.enabled)
        return -1;
    if (preloaded)
        return -3;                    /* memsnap run's recording, started or not yet */
    pthread_mutex_lock(&start_lock);
    int st = atomic_load(&g_state), rc = 0;
    if (st == 1) {
        rc = -3;                      /* recording already */
    } else if (st < 0 && !g_inproc) {
        rc = -1;                      /* off: bad settings, a failed start, a stopped child */
    } else if (strlen(pattern) >= sizeof g_cfg.output) {
        errno = ENAMETOOLONG;
        rc = -2;
    } else {
        static int atexit_done;
        g_inproc = 1;
        snprintf(g_cfg.output, sizeof g_cfg.output, "%s", pattern);
        g_cfg.dump_signal = 0;        /* the header's settings say so */
        /* the file's times count from its own start */
        t0_mono = mono_ns();
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t0_unix = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        int saved = errno;
        if (tables_init() != 0 || writer_start() != 0) {
            saved = errno;
            st = -1;
            rc = -2;
        } else {
            st = 1;
            if (!atexit_done) {
                atexit(at_exit);
                atexit_done = 1;
            }
        }
        atomic_store_explicit(&g_state, st, memory_order_release);
        errno = saved;
    }
    pthread_mutex_unlock(&start_lock);
    return rc;
}

/* In-process use before any recording (PyTorch's tracker attached early):
 * from now on nothing starts a recording but core_inproc_start.  0, or -1
 * when the library was preloaded (memsnap run records this process). */
int core_inproc_claim(void)
{
    if (preloaded)
        return -1;
    pthread_mutex_lock(&start_lock);
    int expect = 0;
    if (atomic_compare_exchange_strong(&g_state, &expect, -1))
        g_inproc = 1;
    pthread_mutex_unlock(&start_lock);
    return 0;
}

/* Stops an in-process recording: no new event from now on, then every
 * event committed so far is written, the live state, symbols and trailer,
 * and the file closed.  An event a thread is committing at this very
 * moment may land in the next recording instead.  0, -1 (no in-process
 * recording running) or -2 (the file could not be written; errno). */
int core_inproc_stop(uint64_t *events)
{
    pthread_mutex_lock(&start_lock);
    int rc = -1;
    if (g_inproc && atomic_load(&g_state) == 1) {
        atomic_store_explicit(&g_state, -1, memory_order_release);
        writer_sync(atomic_load(&g_queue_head));
        rc = writer_stop(0, events) == 0 ? 0 : -2;
        int saved = errno;
        writer_forget();
        errno = saved;
    }
    pthread_mutex_unlock(&start_lock);
    return rc;
}

static void fork_prepare(void) { pthread_mutex_lock(&str_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&str_lock); }

/* In the child only the forking thread exists: the writer thread is gone.
 * FORK_STOP: recording off.  FORK_FOLLOW: start afresh at the child's first
 * event, with its own file (the default pattern has %p); allocations of the
 * parent are not the child's. */
static void fork_child(void)
{
    pthread_mutex_unlock(&str_lock);
    pthread_mutex_init(&start_lock, NULL);
    t_tid = 0;
    queue_fresh = 1;
    int st = atomic_load(&g_state);
    if (st == -1)
        return;
    if (st == 1)
        writer_after_fork_child();
    /* An in-process recording is the parent's alone: its path has no %p,
     * and the child (a DataLoader worker) did not ask for one. */
    atomic_store(&g_state, g_cfg.fork_mode == FORK_FOLLOW && !g_inproc ? 0 : -1);
}

/* Whether this library is one of LD_PRELOAD's (memsnap run, or by hand):
 * an entry that is this file (same device and inode), or a bare name equal
 * to its name.  Loaded otherwise (dlopen: the Python package's ctypes), it
 * is an in-process recorder (inproc.c). */
static int in_ld_preload(void)
{
    const char *pl = getenv("LD_PRELOAD");
    Dl_info di;
    struct stat own, st;
    if (!pl || !*pl || !dladdr((void *)&in_ld_preload, &di) || !di.dli_fname ||
        stat(di.dli_fname, &own) != 0)
        return 0;
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    char entry[4096];
    while (*pl) {
        size_t n = strcspn(pl, ": \t");
        if (n && n < sizeof entry) {
            memcpy(entry, pl, n);
            entry[n] = 0;
            if (strchr(entry, '/') ? stat(entry, &st) == 0 && st.st_dev == own.st_dev &&
                                         st.st_ino == own.st_ino
                                   : strcmp(entry, base) == 0)
                return 1;
        }
        pl += n;
        pl += strspn(pl, ": \t");
    }
    return 0;
}

__attribute__((constructor)) static void memsnap_init(void)
{
    t0_mono = mono_ns();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t0_unix = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    dl_iterate_phdr(find_own_range, (void *)(uintptr_t)&find_own_range);
    if (config_load() != 0 || !g_cfg.enabled) {
        atomic_store(&g_state, -1);
        return;
    }
    preloaded = in_ld_preload();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    /* preloaded (memsnap run): the dump signal is ours from the start, so
     * that one sent before the program's first CUDA call, or to a wrapper
     * (a shell) that never makes one, does not kill it; a handler the
     * program installs later is its own (install_signal_handler leaves it) */
    if (preloaded)
        install_signal_handler();
}

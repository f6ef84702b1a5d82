/* The recorder's lifecycle: the constructor (settings only: no CUDA call,
 * no thread), the lazy start at the first event, the in-process starts and
 * stops of memsnap.record(), fork, the dump signal and exit.  The hot path
 * (core.c) only reads g_state; everything that changes it is here, under
 * start_lock.
 *
 *   g_state  0 not started   -> 1 at the first event (core_ensure_started),
 *                               or -1 (a failed start; inproc claim)
 *            1 recording     -> -1 at exit, at an in-process stop, in a
 *                               child that does not follow (FORK_STOP)
 *           -1 off           -> 1 at an in-process start (g_inproc)
 *   a child after fork: 0 again (FORK_FOLLOW: it starts afresh at its first
 *   event, with its own file), -1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recorder.h"

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
MSNAP_HOT_DATA int g_inproc;                        /* in-process recording (inproc.c): never a lazy start */
static int preloaded;                /* loaded into the global scope (LD_PRELOAD: memsnap run) */

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
        if (core_tables_init() != 0 || writer_start() != 0) {
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
    } else if (strlen(pattern) >= REC_OUTPUT_MAX) {
        errno = ENAMETOOLONG;
        rc = -2;
    } else {
        static int atexit_done;
        g_inproc = 1;
        snprintf(g_cfg.output, REC_OUTPUT_MAX, "%s", pattern);
        g_cfg.dump_signal = 0;        /* the header's settings say so */
        /* the file's times count from its own start */
        core_set_t0();
        int saved = errno;
        if (core_tables_init() != 0 || writer_start() != 0) {
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
        writer_sync(atomic_load(&g_queue_head.v));
        rc = writer_stop(0, events) == 0 ? 0 : -2;
        int saved = errno;
        writer_forget();
        errno = saved;
    }
    pthread_mutex_unlock(&start_lock);
    return rc;
}


/* In the child only the forking thread exists: the writer thread is gone.
 * FORK_STOP: recording off.  FORK_FOLLOW: start afresh at the child's first
 * event, with its own file (the default pattern has %p); allocations of the
 * parent are not the child's. */
static void fork_child(void)
{
    core_fork_child();
    pthread_mutex_init(&start_lock, NULL);
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
    core_set_t0();
    core_find_own_range();
    if (config_load() != 0 || !g_cfg.enabled) {
        atomic_store(&g_state, -1);
        return;
    }
    preloaded = in_ld_preload();
    pthread_atfork(core_fork_prepare, core_fork_parent, fork_child);
    /* preloaded (memsnap run): the dump signal is ours from the start, so
     * that one sent before the program's first CUDA call, or to a wrapper
     * (a shell) that never makes one, does not kill it; a handler the
     * program installs later is its own (install_signal_handler leaves it) */
    if (preloaded)
        install_signal_handler();
}

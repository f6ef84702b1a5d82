/* A stand-in for PyTorch's allocator under Python, for bench_torch_py.py:
 * deep_trace() recurses DEPTH native frames (as libtorch's dispatcher and
 * c10's allocator do between the eval loop and the trace tracker) and then
 * makes PAIRS blocks' worth of trace entries through memsnap_trace_torch,
 * each as PyTorch makes them: alloc, free_requested, free_completed.
 * Without the recorder the function is absent and only the loop runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>

#include "memsnap/memsnap.h"

static memsnap_trace_torch_fn trace_fn;
static memsnap_trace_torch2_fn trace2_fn;
static int looked;          /* dlsym once: 1 after the look */
static int pollute_lines;   /* deep_configure: cache lines written between blocks */
static uint32_t node;       /* deep_configure: the autograd node the allocations name */
static volatile char *junk;

/* What a real program does between two of its allocations, for the caches:
 * PyTorch's dispatcher and kernel launches touch far more than the
 * recorder's few lines (kb KiB written, one byte a line, so the recorder's
 * tables, its queue's slots and the code cache are cold at each event, as
 * in a training step); node != 0: every allocation names that autograd node
 * (as the backward pass's do: memsnap_trace_torch2).  Returns 0. */
int deep_configure(int kb, int with_node)
{
    static char buf[64 << 20];
    if (kb > (int)(sizeof buf >> 10))
        kb = (int)(sizeof buf >> 10);
    junk = buf;
    pollute_lines = kb * 16;
    node = 0;
    if (with_node) {
        memsnap_torch_node_id_fn id =
            (memsnap_torch_node_id_fn)dlsym(RTLD_DEFAULT, "memsnap_torch_node_id");
        node = id ? id("MmBackward0") : 0;
    }
    return 0;
}

static int pollute_pages;   /* deep_configure_pages: pages written between blocks */

static void pollute(void)
{
    static int at, page;
    for (int i = 0; i < pollute_lines; i++) {
        junk[(size_t)at * 64] = (char)i;
        at = (at + 1) % ((64 << 20) / 64);
    }
    /* One byte on each of n pages, 4 KiB apart: few cache lines, as many
     * TLB entries (a line each), so what the recorder's next
     * event pays for page walks shows apart from its cache misses. */
    for (int i = 0; i < pollute_pages; i++) {
        junk[(size_t)page * 4096 + 64 * (page & 63)] = (char)i;
        page = (page + 1) % ((64 << 20) / 4096);
    }
}

/* n pages written between two blocks (see pollute).  Returns 0. */
int deep_configure_pages(int n)
{
    pollute_pages = n < 0 ? 0 : n;
    if (n > 0 && !junk)
        deep_configure(0, 0);
    return 0;
}

/* TSC ticks spent in the trace entries themselves (not the pollution
 * between them), counted only after deep_time_entries(1) (the fences
 * around each block's entries cost time of their own):
 * deep_traced_ticks() reads and clears them. */
static uint64_t traced_ticks;
static int time_entries;

void deep_time_entries(int on) { time_entries = on; }

static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("mfence; lfence; rdtsc; lfence" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

uint64_t deep_tsc(void) { return ticks(); }

uint64_t deep_traced_ticks(void)
{
    uint64_t t = traced_ticks;
    traced_ticks = 0;
    return t;
}

/* The entries of `pairs` blocks, from the bottom of the recursion. */
static void burst(int pairs)
{
    for (int i = 0; i < pairs; i++) {
        uint64_t a = 0x7f0000000000ull + (uint64_t)(i & 1023) * 4096;
        uint64_t t0 = time_entries ? ticks() : 0;
        if (node && trace2_fn) {
            trace2_fn(MEMSNAP_TORCH_ALLOC, 0, a, 4096, 0, 0, 4096, (uint64_t)i + 2, node);
            trace2_fn(MEMSNAP_TORCH_FREE_REQUESTED, 0, a, 4096, 0, 0, 0, 0, 0);
            trace2_fn(MEMSNAP_TORCH_FREE_COMPLETED, 0, a, 4096, 0, 0, 0, 0, 0);
        } else if (trace_fn) {
            trace_fn(MEMSNAP_TORCH_ALLOC, 0, a, 4096, 0, 0, 4096);
            trace_fn(MEMSNAP_TORCH_FREE_REQUESTED, 0, a, 4096, 0, 0, 0);
            trace_fn(MEMSNAP_TORCH_FREE_COMPLETED, 0, a, 4096, 0, 0, 0);
        }
        if (time_entries)
            traced_ticks += ticks() - t0;
        if (pollute_lines || pollute_pages)
            pollute();
        __asm__ volatile("" ::: "memory");
    }
}

/* Recurses depth frames (noinline, no sibling calls: each is a real frame),
 * then runs the burst.  Returns depth so the recursion is not a tail call. */
__attribute__((noinline)) int deep_trace(int depth, int pairs)
{
    if (!looked) {
        trace_fn = (memsnap_trace_torch_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch");
        trace2_fn = (memsnap_trace_torch2_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch2");
        looked = 1;
    }
    if (depth <= 1) {
        burst(pairs);
        return 1;
    }
    int r = deep_trace(depth - 1, pairs);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

/* The same from a thread without Python (as PyTorch's autograd engine runs
 * the backward pass): `batches` bursts of `pairs` blocks on a new native
 * thread, a 2 ms pause after each, the ns per entry of each into out. */
#include <pthread.h>
#include <time.h>

struct thread_job {
    int depth, pairs, batches;
    double *out;
};

static void *thread_main(void *arg)
{
    struct thread_job *j = arg;
    for (int b = 0; b < j->batches; b++) {
        struct timespec t0, t1, pause = {0, 2000000};
        traced_ticks = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        deep_trace(j->depth, j->pairs);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        /* deep_time_entries(1): TSC ticks per entry (the caller divides by
         * the TSC's rate), else ns per entry of the whole burst */
        j->out[b] = time_entries ? (double)traced_ticks / (3.0 * j->pairs)
                                 : ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                                       (3.0 * j->pairs);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* The same batches on the calling thread: started with
 * _thread.start_new_thread on this function (a ctypes function releases
 * the GIL), the thread has a Python thread state, no Python frame and not
 * the GIL, as PyTorch's autograd device threads have while they run
 * libtorch's nodes.  Returns 0. */
int deep_batches_here(int depth, int pairs, int batches, double *out)
{
    struct thread_job j = {depth, pairs, batches, out};
    thread_main(&j);
    return 0;
}

int deep_batches_thread(int depth, int pairs, int batches, double *out)
{
    struct thread_job j = {depth, pairs, batches, out};
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, &j) != 0)
        return -1;
    pthread_join(t, NULL);
    return 0;
}

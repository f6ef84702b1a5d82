/* What one PyTorch trace entry costs in the recorder: memsnap_trace_torch
 * (the PyTorch plugin's call) in a loop of block alloc + free_completed
 * pairs, as PyTorch's allocator makes them on a cache hit.
 *
 *   memsnap run [--stack-depth N] -- bench_torch_trace [PAIRS [MODE]]
 *
 * MODE (format 1.2's entry point, memsnap_trace_torch2): v1 (default: the
 * old entry point), plain (trace2, no autograd state), seq (trace2 with a
 * sequence number, as a forward allocation), node (trace2 with a node and
 * a number, as a backward one: the autograd frame goes in front of the
 * stack, which is then hashed again).
 *
 * The pairs come in bursts of 1000 (2000 events, well below the recorder's
 * queue) with a 5 ms pause after each, which the writer thread uses to drain
 * the queue: only the bursts are timed, so this is the producer's cost when
 * the writer keeps up, as in a training step (~3,800 events per 30 ms), not
 * the writer's throughput.  Prints ns per event (median of 7 runs of PAIRS
 * pairs).  Without the recorder the function is absent and it prints the
 * cost of the loop itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memsnap/memsnap.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void nop(int a, int d, uint64_t p, uint64_t n, uint64_t s, uint64_t x, uint64_t y)
{
    (void)a, (void)d, (void)p, (void)n, (void)s, (void)x, (void)y;
}

/* The caller's frames: a few levels, as PyTorch's allocator has under the
 * tracker (noinline so the unwinder walks them). */
__attribute__((noinline)) static void pair(memsnap_trace_torch_fn fn, uint64_t i)
{
    fn(MEMSNAP_TORCH_ALLOC, 0, 0x7f0000000000ull + (i & 1023) * 4096, 4096, 0, 0, 4096);
    fn(MEMSNAP_TORCH_FREE_COMPLETED, 0, 0x7f0000000000ull + (i & 1023) * 4096, 4096, 0, 0, 0);
    __asm__ volatile("" ::: "memory");
}

static memsnap_trace_torch2_fn fn2;
static uint64_t seq2;
static uint32_t node2;

/* memsnap_trace_torch2 with the mode's autograd state, as a 7-argument call. */
static void via2(int a, int d, uint64_t p, uint64_t n, uint64_t s, uint64_t x, uint64_t y)
{
    fn2(a, d, p, n, s, x, y, seq2 ? seq2++ : 0, node2);
}

int main(int argc, char **argv)
{
    uint64_t pairs = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000;
    const char *mode = argc > 2 ? argv[2] : "v1";
    memsnap_trace_torch_fn fn = (memsnap_trace_torch_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch");
    fn2 = (memsnap_trace_torch2_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch2");
    memsnap_torch_node_id_fn node_id =
        (memsnap_torch_node_id_fn)dlsym(RTLD_DEFAULT, "memsnap_torch_node_id");
    if (!fn)
        fn = nop;
    else if (strcmp(mode, "v1") != 0 && fn2 && node_id) {
        seq2 = strcmp(mode, "plain") != 0;
        node2 = strcmp(mode, "node") == 0 ? node_id("MmBackward0") : 0;
        fn = via2;
    }
    uint64_t t[7];
    for (int r = 0; r < 7; r++) {
        t[r] = 0;
        for (uint64_t done = 0; done < pairs; done += 1000) {
            uint64_t t0 = now_ns();
            for (uint64_t i = done; i < done + 1000; i++)
                pair(fn, i);
            t[r] += now_ns() - t0;
            struct timespec pause = {0, 5000000};
            nanosleep(&pause, NULL);
        }
    }
    qsort(t, 7, sizeof t[0], cmp_u64);
    printf("%s: %.1f ns per event (%llu pairs, median of 7)\n",
           fn == nop ? "no recorder" : fn == via2 ? mode : "memsnap_trace_torch",
           (double)t[3] / (2.0 * (double)(pairs / 1000 * 1000)), (unsigned long long)pairs);
    return 0;
}

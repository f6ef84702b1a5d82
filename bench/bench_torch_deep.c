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
static int looked;          /* dlsym once: 1 after the look */

/* The entries of `pairs` blocks, from the bottom of the recursion. */
static void burst(int pairs)
{
    for (int i = 0; i < pairs; i++) {
        uint64_t a = 0x7f0000000000ull + (uint64_t)(i & 1023) * 4096;
        if (trace_fn) {
            trace_fn(MEMSNAP_TORCH_ALLOC, 0, a, 4096, 0, 0, 4096);
            trace_fn(MEMSNAP_TORCH_FREE_REQUESTED, 0, a, 4096, 0, 0, 0);
            trace_fn(MEMSNAP_TORCH_FREE_COMPLETED, 0, a, 4096, 0, 0, 0);
        }
        __asm__ volatile("" ::: "memory");
    }
}

/* Recurses depth frames (noinline, no sibling calls: each is a real frame),
 * then runs the burst.  Returns depth so the recursion is not a tail call. */
__attribute__((noinline)) int deep_trace(int depth, int pairs)
{
    if (!looked) {
        trace_fn = (memsnap_trace_torch_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch");
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

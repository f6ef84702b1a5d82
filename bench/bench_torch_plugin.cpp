// What the PyTorch plugin's block-size logic costs per block
// (torch/memsnap_torch.cpp built with MEMSNAP_TORCH_UNIT_TEST, emitting to a
// function that does nothing): the entries and gauges PyTorch's allocator
// makes for one block -- ALLOC, gauge, gauge, FREE_REQUESTED, FREE_COMPLETED --
// with the sizes from the gauges (format 1.2) and without (g_hot.gauge_ok off:
// the requested sizes, as plugins before it).  Built as a shared library that
// bench_torch_plugin_main dlopens, as the recorder dlopens the plugin, so its
// thread_local variables take the same (general-dynamic) way.
#define MEMSNAP_TORCH_UNIT_TEST 1
#include "../torch/memsnap_torch.cpp"

#include <algorithm>

namespace {
int64_t total;
int64_t read_total(int) { return total; }
void emit(int, int, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t) { __asm__ volatile("" ::: "memory"); }
}  // namespace

// ns per block (median of 7 runs of n blocks), with gauges (sizes 1) or
// not.  pollute_kb > 0: that many KiB written between two blocks (the
// caches as PyTorch's allocator and the step leave them between our
// calls), and only the block's five calls timed (TSC, converted with the
// rate measured over the run); each: written before each of the five
// calls as well, as PyTorch's allocator leaves the caches between them.
extern "C" __attribute__((visibility("default"))) double bench_plugin_blocks_cold(int sizes, long n,
                                                                                  long pollute_kb,
                                                                                  int each)
{
    each = each && pollute_kb > 0;
    using namespace memsnap_plugin;
    g_hot.read_total = read_total;
    g_hot.emit = emit;
    g_hot.gauge_ok = sizes != 0;
    size_t pb = (size_t)pollute_kb * 1024;
    static char* junk;
    static size_t junk_n;
    if (pb > junk_n) {
        delete[] junk;
        junk = new char[pb];
        junk_n = pb;
    }
    double t[7];
    for (int r = 0; r < 7; r++) {
        uint64_t t0 = self_ns(), c0 = self_tsc(), in = 0;
        for (long i = 0; i < n; i++) {
            uint64_t p = 0x7f0000000000ull + (uint64_t)(i & 1023) * 4096;
            if (pb)
                for (size_t k = 0; k < pb; k += 64)
                    junk[k] = (char)(k + i);
            if (!each) {
                uint64_t a = pb ? self_tsc() : 0;
                on_entry(MEMSNAP_TORCH_ALLOC, 0, p, 4000, 0, 0);
                total += 4096;
                on_gauge(total);
                total -= 4096;
                on_gauge(total);
                on_entry(MEMSNAP_TORCH_FREE_REQUESTED, 0, p, 4000, 0, 0);
                on_entry(MEMSNAP_TORCH_FREE_COMPLETED, 0, p, 4000, 0, 0);
                if (pb)
                    in += self_tsc() - a;
                continue;
            }
            // each call alone, the caches written between (as PyTorch's
            // allocator leaves them between its calls to ours)
            for (int c = 0; c < 5; c++) {
                if (c)
                    for (size_t k = 0; k < pb; k += 64)
                        junk[k] = (char)(k + i + c);
                uint64_t a = self_tsc();
                switch (c) {
                case 0: on_entry(MEMSNAP_TORCH_ALLOC, 0, p, 4000, 0, 0); total += 4096; break;
                case 1: on_gauge(total); total -= 4096; break;
                case 2: on_gauge(total); break;
                case 3: on_entry(MEMSNAP_TORCH_FREE_REQUESTED, 0, p, 4000, 0, 0); break;
                default: on_entry(MEMSNAP_TORCH_FREE_COMPLETED, 0, p, 4000, 0, 0); break;
                }
                in += self_tsc() - a;
            }
        }
        uint64_t ns = self_ns() - t0, ticks = self_tsc() - c0;
        t[r] = pb ? (double)in * (double)ns / (double)ticks / (double)n : (double)ns / (double)n;
    }
    std::sort(t, t + 7);
    return t[3];
}

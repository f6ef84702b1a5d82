// The PyTorch plugin's block-size logic (torch/memsnap_torch.cpp, built
// with MEMSNAP_TORCH_UNIT_TEST: no PyTorch), fed the sequences of trace
// entries and allocated-bytes gauges that PyTorch's caching allocator makes:
//   alloc_found_block:  trace ALLOC, += block size, gauge(new total);
//   free:               -= block size, gauge(new total), trace FREE_REQUESTED;
// plus the corner cases: a block freed at once, an unsplit cached block,
// two devices, a total that went out of step (checked every 256th ALLOC),
// a gauge that disagrees, and a PyTorch without the gauge (requested sizes,
// said once on stderr).
#define MEMSNAP_TORCH_UNIT_TEST 1
#include "../../torch/memsnap_torch.cpp"

#include <cstdlib>
#include <vector>

namespace {

int failed;
#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);   \
            failed++;                                                               \
        }                                                                           \
    } while (0)

struct Ev {
    int action, device;
    uint64_t addr, size, requested;
};
std::vector<Ev> evs;
int64_t truth[2];      // each device's real allocated bytes (PyTorch's stats)
int reads;

int64_t read_total(int device)
{
    reads++;
    return truth[device];
}

void emit(int action, int device, uint64_t addr, uint64_t size, uint64_t, uint64_t,
          uint64_t requested)
{
    evs.push_back(Ev{action, device, addr, size, requested});
}

using namespace memsnap_plugin;

// PyTorch's alloc_found_block for a block of size bytes (requested req).
void alloc(int dev, uint64_t addr, uint64_t req, uint64_t size)
{
    on_entry(MEMSNAP_TORCH_ALLOC, dev, addr, req, 0x50, 0);
    truth[dev] += (int64_t)size;
    on_gauge(truth[dev]);
}

// PyTorch's free (and free_block, the stream-free case).
void free_block(int dev, uint64_t addr, uint64_t req, uint64_t size)
{
    truth[dev] -= (int64_t)size;
    on_gauge(truth[dev]);
    on_entry(MEMSNAP_TORCH_FREE_REQUESTED, dev, addr, req, 0x50, 0);
    on_entry(MEMSNAP_TORCH_FREE_COMPLETED, dev, addr, req, 0x50, 0);
}

const Ev& last(int back = 0) { return evs[evs.size() - 1 - back]; }

void test_exact()
{
    g_hot.gauge_ok = true;
    truth[0] = 3 << 20;                      // blocks from before: read at the first ALLOC
    alloc(0, 0x1000, 1000, 1024);
    CHECK(reads == 1 && evs.size() == 1);
    CHECK(last().action == MEMSNAP_TORCH_ALLOC && last().size == 1024 && last().requested == 1000);
    alloc(0, 0x2000, 3000, 3072);
    CHECK(last().size == 3072 && last().addr == 0x2000);
    free_block(0, 0x1000, 1000, 1024);       // FREE_REQUESTED carries the block's size
    CHECK(last(1).action == MEMSNAP_TORCH_FREE_REQUESTED && last(1).size == 1024);
    CHECK(last().action == MEMSNAP_TORCH_FREE_COMPLETED && last().size == 0);
    alloc(0, 0x3000, 1, 512);                // allocated and freed at once
    free_block(0, 0x3000, 1, 512);
    CHECK(last(2).size == 512 && last(1).size == 512);
    alloc(0, 0x4000, 600000, 1 << 20);       // an unsplit cached block, bigger than asked
    CHECK(last().size == (1u << 20) && last().requested == 600000);
    on_entry(MEMSNAP_TORCH_SEGMENT_ALLOC, 0, 0x8000000, 20 << 20, 0x50, 0);
    CHECK(last().action == MEMSNAP_TORCH_SEGMENT_ALLOC && last().size == (20u << 20));
    on_entry(MEMSNAP_TORCH_OOM, 0, 12345, 1ull << 40, 0x50, 0);
    CHECK(last().action == MEMSNAP_TORCH_OOM && last().addr == 12345 && last().size == (1ull << 40));
    truth[1] = 0;                            // a second device, interleaved
    alloc(1, 0x9000, 100, 512);
    alloc(0, 0x5000, 2048, 2048);
    free_block(1, 0x9000, 100, 512);
    CHECK(last(3).device == 1 && last(3).size == 512);
    CHECK(last(2).device == 0 && last(2).size == 2048);
    CHECK(last(1).device == 1 && last(1).size == 512);
    CHECK(reads == 2);                       // one read per device so far
    CHECK(g_corrections == 0 && g_fallbacks == 0);
}

void test_out_of_step()
{
    // Every change of allocated_bytes is followed by a gauge: that is what
    // the sizes rest on, and every 256th ALLOC checks it.  A change no gauge
    // reported just before a checked ALLOC is found there (counted, and the
    // block's size is still right).
    uint64_t corr = g_corrections;
    while ((g_dev[0].allocs + 1) % kCheckEvery != 0) {
        alloc(0, 0x100000, 512, 512);
        free_block(0, 0x100000, 512, 512);
    }
    CHECK(g_corrections == corr);
    truth[0] += 4096;
    alloc(0, 0x200000, 700, 1024);
    CHECK(last().size == 1024 && g_corrections == corr + 1);
    // A gauge that cannot be right (below the total): this block gets its
    // requested size, and the total follows the gauge.
    on_entry(MEMSNAP_TORCH_ALLOC, 0, 0x300000, 700, 0x50, 0);
    on_gauge(truth[0] - 512);
    CHECK(last().addr == 0x300000 && last().size == 700);
    CHECK(g_corrections == corr + 2);
    truth[0] -= 512;
    alloc(0, 0x310000, 100, 512);
    CHECK(last().size == 512);
}

void test_no_gauge()
{
    // A PyTorch with no gauge after ALLOC: the next entry finds the ALLOC
    // still held; from then on the requested sizes, at once.
    size_t before = evs.size();
    on_entry(MEMSNAP_TORCH_ALLOC, 0, 0x400000, 1000, 0x50, 0);
    CHECK(evs.size() == before);
    on_entry(MEMSNAP_TORCH_ALLOC, 0, 0x500000, 2000, 0x50, 0);
    CHECK(evs.size() == before + 2);
    CHECK(evs[before].addr == 0x400000 && evs[before].size == 1000);
    CHECK(evs[before + 1].addr == 0x500000 && evs[before + 1].size == 2000);
    CHECK(!g_hot.gauge_ok && g_fallbacks == 1);
    on_entry(MEMSNAP_TORCH_FREE_REQUESTED, 0, 0x500000, 2000, 0x50, 0);
    CHECK(last().size == 0);                 // unknown: the recorder looks it up
}

}  // namespace

int main()
{
    g_hot.read_total = read_total;
    g_hot.emit = emit;
    test_exact();
    test_out_of_step();
    test_no_gauge();
    if (failed) {
        fprintf(stderr, "%d checks failed\n", failed);
        return 1;
    }
    printf("plugin sizes: all passed\n");
    return 0;
}

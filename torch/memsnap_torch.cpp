// libmemsnap_torch: the recorder's plugin for PyTorch's CUDA caching allocator.
//
// PyTorch's allocator calls every attached trace tracker for each of its
// trace entries (block alloc, free requested, free completed, segment alloc,
// free, map, unmap, OOM) whether or not its own history is on.  This plugin
// attaches one tracker that forwards each entry to the recorder's
// memsnap_trace_torch2 (include/memsnap/memsnap.h), which fills one
// fixed-size record on the recorder's lock-free hot path with the calling
// thread's stack.  Two things are added on the way:
//
// Block sizes as PyTorch counts them.  A trace entry carries the size the
// program asked for; torch.cuda.memory_allocated() counts the block's size
// (rounded, or the whole cached block when it was not split).  PyTorch's
// allocator (c10/cuda/CUDACachingAllocator.cpp) changes its allocated_bytes
// statistic in two places, each followed by a record of its
// "...CachingAllocator.allocated_bytes" gauge (c10/util/Gauge.h) with the
// device's new total, on the same thread, under the device's mutex:
//   alloc_found_block:  trace ALLOC, then += block size, then gauge;
//   free:               -= block size, then gauge, then trace FREE_REQUESTED.
// So the plugin registers a gauge backend, keeps each device's total as the
// gauges report it, holds an ALLOC entry back until the gauge that follows
// it (size = new total - old total), and gives a FREE_REQUESTED the
// difference of the gauge just before it.  The total starts from
// getDeviceStats() at a device's first ALLOC and is checked against it
// every 256th ALLOC (a difference is counted and corrected).  When no gauge
// follows an ALLOC (a PyTorch without it, or a gauge made before the plugin
// registered), the plugin says so once on stderr and gives the requested
// sizes, as plugins before it did.
//
// The autograd node.  While PyTorch's autograd engine evaluates a node on
// the allocating thread (the backward pass), torch::autograd::
// get_current_node() returns it: the event carries the node's name (an id
// the recorder gives per name; the name is read once per node type, keyed
// by its typeid, and never through PyNode::name(), which takes the GIL:
// Python Functions are all "PyNode") and 1 + its sequence number.  A thread
// evaluating no node (the forward pass) carries 1 + the sequence number of
// the last node it created (at::sequence_number::peek()), while grad mode
// is on: PyTorch makes an operator's backward node before its output, so
// the forward allocation and the backward node's allocations meet on that
// number (docs/format.md, *The autograd engine*).
//
// The tracker and the gauge run under the allocator's per-device mutex for
// every block event: no lock, no allocation (but at a node type's first
// sight), no call into Python.
//
// The plugin is C++ against PyTorch's headers and must match the exact
// libc10_cuda.so of the process (the allocator's classes have no stable
// ABI), so it is built per PyTorch build and named by the GNU build-id of
// the libc10_cuda.so it was compiled against: MEMSNAP_C10_BUILD_ID (hex) is
// passed by the build (torch/CMakeLists.txt or `memsnap torch-setup`), and
// the recorder loads it only when it equals the build-id of the loaded
// libc10_cuda.so (recorder/torch.c).  It links libc10, libc10_cuda and
// libtorch_cpu (the autograd engine).
//
// This file is self-contained (it repeats memsnap.h's numbers and types) so
// that `memsnap torch-setup` can compile it alone on a user's machine.
// Built with MEMSNAP_TORCH_UNIT_TEST, only the block-size logic is compiled,
// without PyTorch (tests/torch/test_plugin_sizes.cpp).  Two switches leave
// a part out, for a PyTorch whose headers differ (MEMSNAP_TORCH_CXXFLAGS of
// build_plugin.py): MEMSNAP_TORCH_NO_AUTOGRAD (no nodes, no sequence
// numbers) and MEMSNAP_TORCH_NO_GAUGE (requested sizes).

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <algorithm>
#include <ctime>
#include <pthread.h>

#ifndef MEMSNAP_TORCH_UNIT_TEST
#include <c10/cuda/CUDACachingAllocator.h>
#include <dlfcn.h>
#include <link.h>
#include <typeinfo>
#ifndef MEMSNAP_TORCH_NO_AUTOGRAD
#include <ATen/SequenceNumber.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#endif
#if __has_include(<c10/util/Gauge.h>) && !defined(MEMSNAP_TORCH_NO_GAUGE)
#include <c10/util/Gauge.h>
#define MEMSNAP_HAVE_GAUGE 1
#endif
#ifndef MEMSNAP_C10_BUILD_ID
#error "MEMSNAP_C10_BUILD_ID (hex build-id of libc10_cuda.so) must be defined"
#endif
#endif

#if __has_include("memsnap/memsnap.h")
#include "memsnap/memsnap.h"
#else
// The same numbers and types as include/memsnap/memsnap.h.
#define MEMSNAP_TORCH_ALLOC 0
#define MEMSNAP_TORCH_FREE_REQUESTED 1
#define MEMSNAP_TORCH_FREE_COMPLETED 2
#define MEMSNAP_TORCH_SEGMENT_ALLOC 3
#define MEMSNAP_TORCH_SEGMENT_FREE 4
#define MEMSNAP_TORCH_SEGMENT_MAP 5
#define MEMSNAP_TORCH_SEGMENT_UNMAP 6
#define MEMSNAP_TORCH_OOM 8
extern "C" typedef void (*memsnap_trace_torch_fn)(int action, int device, uint64_t addr,
                                                  uint64_t size, uint64_t stream, uint64_t pool,
                                                  uint64_t requested);
extern "C" typedef void (*memsnap_trace_torch2_fn)(int action, int device, uint64_t addr,
                                                   uint64_t size, uint64_t stream, uint64_t pool,
                                                   uint64_t requested, uint64_t seq,
                                                   uint32_t node);
extern "C" typedef uint32_t (*memsnap_torch_node_id_fn)(const char* name);
#define MEMSNAP_TORCH_API_NODES 1u
#define MEMSNAP_TORCH_API_NO_FREE_REQUESTED 2u
#define MEMSNAP_TORCH_API_POOL_KINDS 4u
struct memsnap_torch_api {
    uint32_t size;
    uint32_t flags;
    memsnap_trace_torch2_fn trace;
    memsnap_torch_node_id_fn node_id;
};
#endif

#ifndef MSNAP_POOL_HANDLE   // as memsnap/format.h (format 1.3)
#define MSNAP_POOL_HANDLE (1ULL << 32)
#define MSNAP_POOL_CAPTURING (1ULL << 33)
#endif

#define MEMSNAP_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace memsnap_plugin {

// The TSC and CLOCK_MONOTONIC, for the self-timing below (and the
// stand-in's benchmark of this file, bench/bench_torch_plugin.cpp).
inline uint64_t self_tsc()
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

inline uint64_t self_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// ---- Block sizes (pure logic) ---------------------------------------------

// An ALLOC entry held back until the gauge that follows it.
struct Pending {
    bool set;
    int device;
    uint64_t addr, requested, stream, pool;
};

// One device's allocated bytes as the gauges reported them.  Read and
// written only under that device's allocator mutex.
struct Device {
    int64_t total;
    bool known;          // total is valid (false: read getDeviceStats at the next ALLOC)
    uint32_t allocs;     // ALLOC entries seen (every 256th is checked)
};

constexpr int kDevices = 128;     // c10::DeviceIndex is an int8_t
constexpr uint32_t kCheckEvery = 256;
constexpr uint64_t kBlockAlign = 512;   // PyTorch's kMinBlockSize: every block size is a multiple

// What every trace entry reads, in one struct on one cache line (these
// globals lay on three lines and two pages, g_node_slots' 16 KiB between
// them): a block's five calls cost about 13 ns less with it on the
// stand-in, caches warm (bench_torch_plugin; docs/benchmarks.md, *After the
// lease*); not measured on a GPU.  Set before the tracker is attached;
// muted and gauge_ok change only in benchmarks and at a fall-back.
struct alignas(64) Hot {
    std::atomic<int> muted{0};         // memsnap_torch_bench_mute
    std::atomic<bool> gauge_ok{false}; // gauges follow ALLOC entries (else: requested sizes)
    bool nodes = false;                // name autograd nodes
    bool no_free_requested = false;    // forward no FREE_REQUESTED entry
    bool pool_kinds = false;           // pools with their half and capture bit (format 1.3)
    // the recorder's entry points: trace (format 1.2's, memsnap_torch_attach2)
    // or trace1 (an older recorder's)
    memsnap_trace_torch2_fn trace = nullptr;
    memsnap_trace_torch_fn trace1 = nullptr;
    // provided by the PyTorch side (or the unit test): the device's
    // allocated_bytes now (getDeviceStats), and where an entry goes
    int64_t (*read_total)(int device) = nullptr;
    void (*emit)(int action, int device, uint64_t addr, uint64_t size, uint64_t stream,
                 uint64_t pool, uint64_t requested) = nullptr;
    // cudaStreamIsCapturing, looked up at attach (NULL: no capture bit)
    int (*is_capturing)(void* stream, int* status) = nullptr;
};
static_assert(sizeof(Hot) == 64, "the plugin's hot state is one cache line");
Hot g_hot;

// A thread's state, in one thread_local (one TLS lookup a call, one line).
struct alignas(64) ThreadState {
    Pending pending;
    int64_t gauge;                     // the last gauge on this thread that no ALLOC took
    bool gauge_set;
};
// MEMSNAP_TORCH_TLS_IE (MEMSNAP_TORCH_CXXFLAGS=-DMEMSNAP_TORCH_TLS_IE at
// torch-setup): the state in initial-exec TLS, at a fixed offset from the
// thread pointer, rather than through __tls_get_addr and the DTV, as a
// dlopened library's thread_local is reached.  On the stand-in with the
// caches cold before each call (bench_torch_plugin LIB 5000 1024 each) a
// block's five calls cost 147 ns against 187 (medians of 10 alternating
// runs; docs/benchmarks.md, *timed in situ*); not the default until
// measured on a GPU, since dlopen refuses such a library where glibc's
// static TLS reserve is spent ("cannot allocate memory in static TLS
// block").
#ifdef MEMSNAP_TORCH_TLS_IE
static __thread ThreadState t_state __attribute__((tls_model("initial-exec")));
#else
thread_local ThreadState t_state;
#endif

Device g_dev[kDevices];
bool g_gauge_found;                    // gauges followed ALLOC entries when the plugin attached
std::atomic<bool> g_fallback_said{false};
std::atomic<uint64_t> g_checks{0}, g_corrections{0}, g_fallbacks{0};

Device* dev(int d) { return d >= 0 && d < kDevices ? &g_dev[d] : nullptr; }

// No gauge followed an ALLOC: requested sizes from now on (said once).
void fall_back(const char* why)
{
    g_hot.gauge_ok.store(false, std::memory_order_relaxed);
    if (!g_fallback_said.exchange(true))
        fprintf(stderr, "memsnap: %s; PyTorch's blocks get the sizes the program asked for, "
                        "not the sizes memory_allocated() counts\n", why);
}

// Emits a held-back ALLOC with size (gauge mode) or its requested size.
void emit_pending(uint64_t size)
{
    ThreadState& t = t_state;
    Pending p = t.pending;
    t.pending.set = false;
    g_hot.emit(MEMSNAP_TORCH_ALLOC, p.device, p.addr, size ? size : p.requested, p.stream,
               p.pool, p.requested);
}

// A trace entry, in the allocator's order: an ALLOC is held back for its
// gauge (gauge mode) or emitted at once with the requested size; the
// others are emitted at once.
void on_entry(int action, int device, uint64_t addr, uint64_t size, uint64_t stream,
              uint64_t pool)
{
    ThreadState& t = t_state;
    bool gauge_before = t.gauge_set;   // this thread's last change's gauge, if no ALLOC took it
    int64_t gauge = t.gauge;
    t.gauge_set = false;
    if (t.pending.set) {
        // The ALLOC before this entry got no gauge: this PyTorch has none there.
        ++g_fallbacks;
        fall_back("PyTorch's allocator reported no allocated-bytes gauge after a block");
        emit_pending(0);
    }
    Device* d = dev(device);
    switch (action) {
    case MEMSNAP_TORCH_ALLOC:
        if (g_hot.gauge_ok.load(std::memory_order_relaxed) && d) {
            if (!d->known || ++d->allocs % kCheckEvery == 0) {
                int64_t now = g_hot.read_total(device);   // before this block: ALLOC comes first
                ++g_checks;
                if (d->known && now != d->total)
                    ++g_corrections;
                d->total = now;
                d->known = true;
            }
            t.pending = Pending{true, device, addr, size, stream, pool};
            return;
        }
        g_hot.emit(action, device, addr, size, stream, pool, size);
        return;
    case MEMSNAP_TORCH_FREE_REQUESTED: {
        uint64_t n = 0;   // unknown: the recorder takes it from the block's allocation
        if (gauge_before && d && d->known) {
            int64_t freed = d->total - gauge;
            if (freed > 0 && freed % (int64_t)kBlockAlign == 0)
                n = (uint64_t)freed;
            else
                d->known = false, ++g_corrections;   // out of step: read it again
            d->total = gauge;
        }
        g_hot.emit(action, device, addr, n, stream, pool, 0);
        return;
    }
    case MEMSNAP_TORCH_FREE_COMPLETED:   // the recorder takes the size from the allocation
        g_hot.emit(action, device, addr, 0, stream, pool, 0);
        return;
    default:
        g_hot.emit(action, device, addr, size, stream, pool, 0);
        return;
    }
}

// The allocated-bytes gauge: the device's new total, right after a change.
void on_gauge(int64_t value)
{
    ThreadState& t = t_state;
    if (!t.pending.set) {            // a free's (its FREE_REQUESTED comes next)
        t.gauge = value;
        t.gauge_set = true;
        return;
    }
    Device* d = dev(t.pending.device);
    uint64_t size = 0;
    if (d && d->known) {
        int64_t n = value - d->total;
        if (n >= (int64_t)t.pending.requested && n > 0 && n % (int64_t)kBlockAlign == 0)
            size = (uint64_t)n;
        else
            ++g_corrections;          // out of step: requested size for this one
        d->total = value;
    }
    emit_pending(size);
}

#ifndef MEMSNAP_TORCH_UNIT_TEST
// ---- PyTorch ----------------------------------------------------------------

using c10::CachingDeviceAllocator::TraceEntry;

memsnap_torch_api g_api;               // set once, before the tracker is attached (node_id)
c10::cuda::CUDACachingAllocator::CUDAAllocator* g_alloc;

// ---- Self-timing, for benchmarks (memsnap_torch_bench_mute(3)) -------------
// What the plugin and the recorder spend in situ, per thread, in TSC ticks:
// the tracker's whole call, the gauge's, and of both the recorder's part
// (its trace call: the event, the stacks).  The difference between a
// recorded and a plain step's CPU that this does not account for is
// PyTorch's own (its trace entry, the calls) and what our work leaves in
// the caches for the program.  Each thread writes only its own slot.
constexpr int kSelfKinds = 4;          // tracker, gauge, recorder, autograd state
struct SelfSlot {
    std::atomic<uint64_t> ticks[kSelfKinds];
    std::atomic<uint64_t> calls[kSelfKinds];
    char name[16];
};
constexpr int kSelfSlots = 64;
SelfSlot g_self[kSelfSlots];
std::atomic<int> g_self_n{0};
thread_local SelfSlot* t_self;
uint64_t g_self_t0_tsc, g_self_t0_ns;
// What the timing itself reads and costs, measured at memsnap_torch_bench_mute(3):
// an empty interval's ticks, and one self_add's (paid by the enclosing interval).
uint64_t g_self_empty, g_self_add;

void self_add(int what, uint64_t ticks)
{
    SelfSlot* s = t_self;
    if (!s) {
        int i = g_self_n.fetch_add(1);
        if (i >= kSelfSlots)
            return;                    // more threads than slots: not counted
        s = t_self = &g_self[i];
        pthread_getname_np(pthread_self(), s->name, sizeof s->name);
    }
    s->ticks[what].store(s->ticks[what].load(std::memory_order_relaxed) + ticks,
                         std::memory_order_relaxed);
    s->calls[what].store(s->calls[what].load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
}

#ifndef MEMSNAP_TORCH_NO_AUTOGRAD
// ---- autograd nodes ----

// Node type -> the recorder's id for its name.  Lock-free: a slot is
// claimed with a CAS on its key, and its id published after.
struct NodeSlot {
    std::atomic<const void*> type{nullptr};
    std::atomic<uint32_t> id{0};
};
constexpr size_t kNodeSlots = 1024;
NodeSlot g_node_slots[kNodeSlots];

// The name of node n: PyTorch's name() without "torch::autograd::", except
// for Python Functions (PyNode::name() takes the GIL, and this runs under
// the allocator's mutex: another thread could hold the GIL and wait for it).
std::string node_name(const torch::autograd::Node& n, const std::type_info& ti)
{
    if (strstr(ti.name(), "PyNode"))
        return "PyNode";
    std::string s = n.name();
    if (s.compare(0, 17, "torch::autograd::") == 0)
        s.erase(0, 17);
    return s;
}

uint32_t node_id(const torch::autograd::Node& n)
{
    const std::type_info& ti = typeid(n);
    const void* key = &ti;
    size_t h = (reinterpret_cast<uintptr_t>(key) >> 4) * 0x9e3779b97f4a7c15ull >> 54;
    for (size_t i = 0; i < kNodeSlots; i++) {
        NodeSlot& s = g_node_slots[(h + i) % kNodeSlots];
        const void* k = s.type.load(std::memory_order_acquire);
        if (k == key) {
            uint32_t id = s.id.load(std::memory_order_acquire);
            if (id)
                return id;
            break;                   // being filled by another thread: name it here too
        }
        if (!k)
            break;
    }
    // First sight of this type: its name, outside any lock of ours (the
    // recorder's interning takes a short one).
    uint32_t id = g_api.node_id(node_name(n, ti).c_str());
    if (!id)
        return 0;
    for (size_t i = 0; i < kNodeSlots; i++) {
        NodeSlot& s = g_node_slots[(h + i) % kNodeSlots];
        const void* expect = nullptr;
        if (s.type.compare_exchange_strong(expect, key, std::memory_order_acq_rel)) {
            s.id.store(id, std::memory_order_release);
            break;
        }
        if (expect == key)
            break;
    }
    return id;
}

// The calling thread's autograd state: the node it evaluates (backward), or
// the sequence number of the last node it created (forward, grad mode on).
void autograd_state(uint64_t* seq, uint32_t* node)
{
    *seq = 0;
    *node = 0;
    std::shared_ptr<torch::autograd::Node> n = torch::autograd::get_current_node();
    if (n) {
        *seq = n->sequence_nr() + 1;   // AccumulateGrad's UINT64_MAX: 0, none
        *node = node_id(*n);
    } else if (c10::GradMode::is_enabled()) {
        *seq = at::sequence_number::peek();
    }
}
#else
void autograd_state(uint64_t* seq, uint32_t* node)
{
    *seq = 0;
    *node = 0;
}
#endif

// Forwards one event, with the thread's autograd state where it names a site.
void emit(int action, int device, uint64_t addr, uint64_t size, uint64_t stream,
          uint64_t pool, uint64_t requested)
{
    const Hot& h = g_hot;
    if (h.trace1) {
        h.trace1(action, device, addr, size, stream, pool, requested);
        return;
    }
    if (action == MEMSNAP_TORCH_FREE_REQUESTED && h.no_free_requested)
        return;   // the recorder records none (its size was taken into the totals)
    uint64_t seq = 0;
    uint32_t node = 0;
    int m = h.muted.load(std::memory_order_relaxed);
    if (h.nodes && (action == MEMSNAP_TORCH_ALLOC || action == MEMSNAP_TORCH_SEGMENT_ALLOC ||
                    action == MEMSNAP_TORCH_SEGMENT_MAP || action == MEMSNAP_TORCH_OOM)) {
        if (__builtin_expect(m == 3, 0)) {
            uint64_t t0 = self_tsc();
            autograd_state(&seq, &node);
            self_add(3, self_tsc() - t0);
        } else {
            autograd_state(&seq, &node);
        }
    }
    if (__builtin_expect(m != 0, 0)) {
        if (m == 2) {
            asm volatile("" : : "r"(seq), "r"(node) : "memory");   // computed, not sent
            return;
        }
        if (m == 3) {
            uint64_t t0 = self_tsc();
            h.trace(action, device, addr, size, stream, pool, requested, seq, node);
            self_add(2, self_tsc() - t0);
            return;
        }
    }
    h.trace(action, device, addr, size, stream, pool, requested, seq, node);
}

int64_t read_total(int device)
{
    return g_alloc->getDeviceStats(static_cast<c10::DeviceIndex>(device))
        .allocated_bytes[0]   // StatType::AGGREGATE
        .current;
}

// The pool of an entry as the recorder writes it (memsnap/format.h, "Memory
// pools"): MempoolId_t's first half when set (capture_begin's own pool),
// else its second (graph_pool_handle(), torch.cuda.MemPool) marked
// MSNAP_POOL_HANDLE, and on an allocation in a private pool
// MSNAP_POOL_CAPTURING when its stream is capturing a graph (the one CUDA
// call here, made only for private pools: cudaStreamIsCapturing is allowed
// during a capture and takes no lock).  A recorder before format 1.3 gets
// the id alone, as before.
uint64_t pool_of(const TraceEntry& te, int action)
{
    uint64_t first = (uint64_t)te.mempool_.first, second = (uint64_t)te.mempool_.second;
    const Hot& h = g_hot;
    if (!h.pool_kinds)
        return first ? first : second;
    uint64_t pool = first ? first : second ? (second | MSNAP_POOL_HANDLE) : 0;
    if (pool && h.is_capturing &&
        (action == MEMSNAP_TORCH_ALLOC || action == MEMSNAP_TORCH_SEGMENT_ALLOC ||
         action == MEMSNAP_TORCH_SEGMENT_MAP)) {
        int status = 0;   // cudaStreamCaptureStatusNone
        if (h.is_capturing((void*)te.stream_, &status) == 0 && status != 0)
            pool |= MSNAP_POOL_CAPTURING;
    }
    return pool;
}

// The tracker: one PyTorch trace entry -> on_entry.  TraceEntry's size_ is
// the size the program asked for (PyTorch's orig_size) for block entries
// and the rounded request for OOM; addr_ is the device's free bytes for
// OOM.  Nothing may escape into the allocator.
void on_trace_entry(const TraceEntry& te)
{
    int a;
    switch (te.action_) {
    case TraceEntry::ALLOC: a = MEMSNAP_TORCH_ALLOC; break;
    case TraceEntry::FREE_REQUESTED: a = MEMSNAP_TORCH_FREE_REQUESTED; break;
    case TraceEntry::FREE_COMPLETED: a = MEMSNAP_TORCH_FREE_COMPLETED; break;
    case TraceEntry::SEGMENT_ALLOC: a = MEMSNAP_TORCH_SEGMENT_ALLOC; break;
    case TraceEntry::SEGMENT_FREE: a = MEMSNAP_TORCH_SEGMENT_FREE; break;
    case TraceEntry::SEGMENT_MAP: a = MEMSNAP_TORCH_SEGMENT_MAP; break;
    case TraceEntry::SEGMENT_UNMAP: a = MEMSNAP_TORCH_SEGMENT_UNMAP; break;
    case TraceEntry::OOM: a = MEMSNAP_TORCH_OOM; break;
    default: return;   // SNAPSHOT markers and anything newer
    }
    uint64_t pool = pool_of(te, a);
    try {
        on_entry(a, te.device_, te.addr_, te.size_, (uint64_t)(uintptr_t)te.stream_, pool);
    } catch (...) {
    }
}

void on_trace(const TraceEntry& te)
{
    int m = g_hot.muted.load(std::memory_order_relaxed);
    if (__builtin_expect(m != 0, 0)) {
        if (m == 1)
            return;
        if (m == 3) {
            uint64_t t0 = self_tsc();
            on_trace_entry(te);
            self_add(0, self_tsc() - t0);
            return;
        }
    }
    on_trace_entry(te);
}

#ifdef MEMSNAP_HAVE_GAUGE
struct GaugeBackend : c10::monitor::detail::GaugeBackendIf {
    void record(int64_t value) noexcept override
    {
        uint64_t t0 = 0;
        bool timed = g_hot.muted.load(std::memory_order_relaxed) == 3;
        if (timed)
            t0 = self_tsc();
        try {
            on_gauge(value);
        } catch (...) {
        }
        if (timed)
            self_add(1, self_tsc() - t0);
    }
};

std::atomic<int> g_gauges_made{0};

// Attaches a backend to the allocated-bytes gauges of PyTorch's caching
// allocators ("pytorch.CUDACachingAllocator.allocated_bytes" and the like).
struct GaugeFactory : c10::monitor::detail::GaugeBackendFactoryIf {
    std::unique_ptr<c10::monitor::detail::GaugeBackendIf> create(
        std::string_view key) noexcept override
    {
        static constexpr std::string_view suffix = "CachingAllocator.allocated_bytes";
        if (key.size() < suffix.size() || key.substr(key.size() - suffix.size()) != suffix)
            return nullptr;
        ++g_gauges_made;
        return std::unique_ptr<c10::monitor::detail::GaugeBackendIf>(new GaugeBackend);
    }
};

// Registers the factory once.  A gauge already made before it has no
// backend of ours, and no later one will: so the gauges the allocator uses
// are made here, now, if they are not yet (their backends are chosen when
// they are made); true when none of them existed before.
bool gauges_start()
{
    static int state = 0;    // 0 not tried, 1 ok, -1 a gauge was older than us
    if (state)
        return state > 0;
    c10::monitor::detail::registerGaugeBackend(std::unique_ptr<GaugeFactory>(new GaugeFactory));
    static const char* const keys[] = {"pytorch.CUDACachingAllocator.allocated_bytes",
                                       "pytorch.CachingAllocator.allocated_bytes"};
    bool fresh = true;
    for (const char* k : keys) {
        int before = g_gauges_made.load();
        c10::monitor::GaugeHandle h{std::string_view(k)};
        if (g_gauges_made.load() == before)
            fresh = false;     // made before the factory: it has no backend of ours
    }
    state = fresh ? 1 : -1;
    return fresh;
}
#else
bool gauges_start() { return false; }
#endif

// cudaStreamIsCapturing from the CUDA runtime the process loaded
// (libc10_cuda's), without linking one: the global scope, else the loaded
// libcudart itself (RTLD_NOLOAD).  NULL when neither has it.
int dl_cudart(struct dl_phdr_info* info, size_t, void* out)
{
    const char* name = info->dlpi_name;
    if (name && strstr(name, "libcudart.so")) {
        snprintf(static_cast<char*>(out), 4096, "%s", name);
        return 1;
    }
    return 0;
}

int (*find_is_capturing())(void*, int*)
{
    void* f = dlsym(RTLD_DEFAULT, "cudaStreamIsCapturing");
    if (!f) {
        static char path[4096];
        if (dl_iterate_phdr(dl_cudart, path)) {
            void* h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
            if (h)
                f = dlsym(h, "cudaStreamIsCapturing");   // the handle stays: the library does
        }
    }
    return reinterpret_cast<int (*)(void*, int*)>(f);
}

int attach(char* msg, size_t msglen)
{
    try {
        c10::cuda::CUDACachingAllocator::CUDAAllocator* a =
            c10::cuda::CUDACachingAllocator::allocator.load();
        if (!a)
            return 1;
        std::string name = a->name();
        if (name != "native") {
            // A pluggable allocator or cudaMallocAsync: their blocks are not
            // this allocator's (memsnap's own allocator traces its blocks
            // itself; cudaMallocAsync's are the driver's async events).
            snprintf(msg, msglen, "its CUDA allocator backend is %s, not native", name.c_str());
            return -2;
        }
        if (!a->initialized())
            return 1;
        g_alloc = a;
        g_hot.read_total = read_total;
        if (g_hot.pool_kinds && !g_hot.is_capturing)
            g_hot.is_capturing = find_is_capturing();
        g_hot.emit = emit;
        if (gauges_start())
            g_gauge_found = true, g_hot.gauge_ok.store(true);
        else
            fall_back("PyTorch's allocated-bytes gauge is missing or was made before the plugin");
        a->attachAllocatorTraceTracker(&on_trace);
        return 0;
    } catch (const std::exception& e) {
        snprintf(msg, msglen, "attaching the trace tracker failed: %s", e.what());
    } catch (...) {
        snprintf(msg, msglen, "attaching the trace tracker failed");
    }
    return -1;
}
#endif  // MEMSNAP_TORCH_UNIT_TEST

}  // namespace memsnap_plugin

#ifndef MEMSNAP_TORCH_UNIT_TEST
// The build-id (hex) of the libc10_cuda.so this plugin was compiled against.
MEMSNAP_PLUGIN_EXPORT const char* memsnap_torch_build_id(void)
{
    return MEMSNAP_C10_BUILD_ID;
}

// Attaches the tracker to PyTorch's CUDA allocator, forwarding to api's
// trace (format 1.2: block sizes, autograd nodes when api->flags has
// MEMSNAP_TORCH_API_NODES).  Returns 0 when attached; 1 when the allocator
// is not initialized yet (call again later); -2 when another allocator
// backend is in charge (nothing to attach to; reason in msg); -1 when
// attaching failed (PyTorch threw), with a one-line reason in msg.  Call it
// on a thread that holds no allocator mutex other than its own device's
// (the recorder calls it from the hook of PyTorch's own cudaMalloc).
MEMSNAP_PLUGIN_EXPORT int memsnap_torch_attach2(const memsnap_torch_api* api, char* msg,
                                                size_t msglen)
{
    if (!api || api->size < sizeof(memsnap_torch_api) || !api->trace || !api->node_id) {
        snprintf(msg, msglen, "the recorder's plugin interface is not the one it was built for");
        return -1;
    }
    memsnap_plugin::g_api = *api;
    memsnap_plugin::Hot& h = memsnap_plugin::g_hot;
    h.trace = api->trace;
    h.nodes = (api->flags & MEMSNAP_TORCH_API_NODES) != 0;
    h.no_free_requested = (api->flags & MEMSNAP_TORCH_API_NO_FREE_REQUESTED) != 0;
    h.pool_kinds = (api->flags & MEMSNAP_TORCH_API_POOL_KINDS) != 0;
    return memsnap_plugin::attach(msg, msglen);
}

// The same for a recorder before format 1.2 (no autograd nodes).
MEMSNAP_PLUGIN_EXPORT int memsnap_torch_attach(memsnap_trace_torch_fn fn, char* msg, size_t msglen)
{
    memsnap_plugin::g_hot.trace1 = fn;
    return memsnap_plugin::attach(msg, msglen);
}

// For benchmarks (tests/gpu/torch_llama.py time): turns the block sizes
// (sizes 0: requested sizes, as plugins before format 1.2 gave) and the
// node lookup (nodes 0: none, as with MEMSNAP_TORCH_NODES=0) off and on in a
// running process, so that they can be timed against each other step by
// step.  Call it between steps, with no allocation under way on any thread.
// Neither can be turned on where it was off at attach.
MEMSNAP_PLUGIN_EXPORT void memsnap_torch_bench_mode(int sizes, int nodes)
{
    using namespace memsnap_plugin;
    if (sizes && g_gauge_found && !g_hot.gauge_ok.load()) {
        for (Device& d : g_dev)
            d.known = false;            // read the totals again at the next ALLOC
        g_hot.gauge_ok.store(true);
    } else if (!sizes) {
        g_hot.gauge_ok.store(false);
    }
    g_hot.nodes = nodes && !g_hot.trace1 && (g_api.flags & MEMSNAP_TORCH_API_NODES);
}

// For benchmarks (bench/bench_overhead.py): muted (1), the tracker returns
// at once, so a recorded process can run steps with and without its events
// side by side (what recording costs per event, PyTorch's own trace entry
// aside); 2, the plugin does all its work (sizes, autograd state) and
// calls no recorder (what the plugin's part costs); 3, all the work, each
// call timed on its thread (memsnap_torch_bench_selftime reads it; the
// counts start again at each call with 3).  Blocks allocated while muted
// (1) are unknown to the recording; the allocated totals are read again at
// the next ALLOC after unmuting.
MEMSNAP_PLUGIN_EXPORT void memsnap_torch_bench_mute(int muted)
{
    using namespace memsnap_plugin;
    if (!muted)
        for (Device& d : g_dev)
            d.known = false;
    if (muted == 3) {        // all the work, timed (memsnap_torch_bench_selftime)
        // the timing's own cost, on a scratch slot: the best of 5 x 1000
        SelfSlot* keep = t_self;
        SelfSlot scratch{};
        t_self = &scratch;
        uint64_t empty = ~0ull, add = ~0ull;
        for (int r = 0; r < 5; r++) {
            uint64_t e = 0;
            for (int i = 0; i < 1000; i++) {
                uint64_t t0 = self_tsc();
                e += self_tsc() - t0;
            }
            uint64_t b = self_tsc();
            for (int i = 0; i < 1000; i++)
                self_add(0, 1);
            uint64_t c = self_tsc();
            empty = std::min(empty, e / 1000);
            add = std::min(add, (c - b) / 1000);
        }
        t_self = keep;
        g_self_empty = empty;
        g_self_add = add;
        for (SelfSlot& s : g_self)
            for (int k = 0; k < kSelfKinds; k++)
                s.ticks[k].store(0), s.calls[k].store(0);
        g_self_t0_tsc = self_tsc();
        g_self_t0_ns = self_ns();
        g_hot.muted.store(3);
        return;
    }
    g_hot.muted.store(muted == 2 ? 2 : muted != 0);
}

// For benchmarks (bench/bench_lockstep.py, configuration selftime): what
// memsnap_torch_bench_mute(3) timed since it was called, as JSON into buf:
// {"tsc_per_ns": R, "empty_ticks": E, "add_ticks": A, "threads": {NAME:
// [tracker ticks, calls, gauge ticks, calls, recorder ticks, calls,
// autograd state ticks, calls], ...}} (threads of one name summed; E an
// empty interval's reading, A what one count costs its enclosing interval).
// Returns the length written (0: buf too small).
MEMSNAP_PLUGIN_EXPORT size_t memsnap_torch_bench_selftime(char* buf, size_t len)
{
    using namespace memsnap_plugin;
    uint64_t dt = self_tsc() - g_self_t0_tsc, dn = self_ns() - g_self_t0_ns;
    std::string out = "{\"tsc_per_ns\": " + std::to_string(dn ? (double)dt / (double)dn : 0.0) +
                      ", \"empty_ticks\": " + std::to_string(g_self_empty) +
                      ", \"add_ticks\": " + std::to_string(g_self_add) + ", \"threads\": {";
    int n = std::min(g_self_n.load(), kSelfSlots);
    bool first = true;
    for (int i = 0; i < n; i++) {
        const SelfSlot& s = g_self[i];
        bool dup = false;       // a name seen before: summed there
        for (int j = 0; j < i && !dup; j++)
            dup = strncmp(g_self[j].name, s.name, sizeof s.name) == 0;
        if (dup)
            continue;
        uint64_t v[2 * kSelfKinds] = {};
        for (int j = i; j < n; j++) {
            if (strncmp(g_self[j].name, s.name, sizeof s.name) != 0)
                continue;
            for (int k = 0; k < kSelfKinds; k++) {
                v[2 * k] += g_self[j].ticks[k].load();
                v[2 * k + 1] += g_self[j].calls[k].load();
            }
        }
        std::string name;
        for (const char* c = s.name; c < s.name + sizeof s.name && *c; c++)
            name += (*c == '"' || *c == '\\' || (unsigned char)*c <= 32) ? '_' : *c;
        out += (first ? "\"" : ", \"") + name + "\": [";
        for (int k = 0; k < 2 * kSelfKinds; k++)
            out += (k ? ", " : "") + std::to_string(v[k]);
        out += "]";
        first = false;
    }
    out += "}}";
    if (out.size() + 1 > len)
        return 0;
    memcpy(buf, out.c_str(), out.size() + 1);
    return out.size();
}

// What the block-size logic did so far (tests): out[0] 1 when the sizes
// are PyTorch's (gauges follow ALLOC entries), out[1] totals read from
// getDeviceStats, out[2] corrections (a total out of step), out[3] ALLOC
// entries that got no gauge.
MEMSNAP_PLUGIN_EXPORT void memsnap_torch_counters(uint64_t out[4])
{
    out[0] = memsnap_plugin::g_hot.gauge_ok.load();
    out[1] = memsnap_plugin::g_checks.load();
    out[2] = memsnap_plugin::g_corrections.load();
    out[3] = memsnap_plugin::g_fallbacks.load();
}
#endif

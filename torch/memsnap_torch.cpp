// libmemsnap_torch: the recorder's plugin for PyTorch's CUDA caching allocator.
//
// PyTorch's allocator calls every attached trace tracker for each of its
// trace entries (block alloc, free requested, free completed, segment alloc,
// free, map, unmap, OOM) whether or not its own history is on.  This plugin
// attaches one tracker that forwards each entry to the recorder's
// memsnap_trace_torch (include/memsnap/memsnap.h), which fills one fixed-size
// record on the recorder's lock-free hot path with the calling thread's stack.
//
// The tracker runs under the allocator's per-device mutex for every block
// event, so it is a plain function (no captures, no allocation, no lock): a
// switch and one call through a pointer.
//
// The plugin is C++ against PyTorch's headers and must match the exact
// libc10_cuda.so of the process (the allocator's classes have no stable
// ABI), so it is built per PyTorch build and named by the GNU build-id of
// the libc10_cuda.so it was compiled against: MEMSNAP_C10_BUILD_ID (hex) is
// passed by the build (torch/CMakeLists.txt or `memsnap torch-setup`), and
// the recorder loads it only when it equals the build-id of the loaded
// libc10_cuda.so (recorder/torch.c).
//
// This file is self-contained (it repeats memsnap.h's action numbers) so that
// `memsnap torch-setup` can compile it alone on a user's machine.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>
#include <cstdio>
#include <string>

#ifndef MEMSNAP_C10_BUILD_ID
#error "MEMSNAP_C10_BUILD_ID (hex build-id of libc10_cuda.so) must be defined"
#endif

#if __has_include("memsnap/memsnap.h")
#include "memsnap/memsnap.h"
#else
// The same numbers as include/memsnap/memsnap.h.
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
#endif

#define MEMSNAP_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using c10::CachingDeviceAllocator::TraceEntry;

memsnap_trace_torch_fn g_trace;   // set once, before the tracker is attached

// The tracker: one PyTorch trace entry -> one memsnap_trace_torch call.
// TraceEntry's size_ is the size the program asked for (PyTorch's orig_size)
// for block entries and the rounded request for OOM; addr_ is the device's
// free bytes for OOM.
void on_trace(const TraceEntry& te)
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
    uint64_t pool = te.mempool_.first ? te.mempool_.first : te.mempool_.second;
    g_trace(a, te.device_, te.addr_, te.size_, (uint64_t)(uintptr_t)te.stream_, pool,
            a == MEMSNAP_TORCH_ALLOC ? te.size_ : 0);
}

}  // namespace

// The build-id (hex) of the libc10_cuda.so this plugin was compiled against.
MEMSNAP_PLUGIN_EXPORT const char* memsnap_torch_build_id(void)
{
    return MEMSNAP_C10_BUILD_ID;
}

// Attaches the tracker to PyTorch's CUDA allocator, forwarding to fn.
// Returns 0 when attached; 1 when the allocator is not initialized yet (call
// again later); -2 when another allocator backend is in charge (nothing to
// attach to; reason in msg); -1 when attaching failed (PyTorch threw), with
// a one-line reason in msg.  Call it on a thread that
// holds no allocator mutex other than its own device's (the recorder calls it
// from the hook of PyTorch's own cudaMalloc).
MEMSNAP_PLUGIN_EXPORT int memsnap_torch_attach(memsnap_trace_torch_fn fn, char* msg, size_t msglen)
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
        g_trace = fn;
        a->attachAllocatorTraceTracker(&on_trace);
        return 0;
    } catch (const std::exception& e) {
        snprintf(msg, msglen, "attaching the trace tracker failed: %s", e.what());
    } catch (...) {
        snprintf(msg, msglen, "attaching the trace tracker failed");
    }
    return -1;
}

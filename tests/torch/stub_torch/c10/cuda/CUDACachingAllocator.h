// A stand-in for PyTorch's header of this name, written for memsnap's tests:
// only the declarations torch/memsnap_torch.cpp uses, with PyTorch 2.11's
// names and types, so that the plugin's PyTorch path compiles (and warns)
// on a machine without PyTorch (tests/torch/CMakeLists.txt, plugin-stub).
// Nothing here is run; the plugin is built for real by build_plugin.py.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
namespace c10 {
using DeviceIndex = int8_t;
namespace CachingDeviceAllocator {
struct Stat { int64_t current = 0; };
struct DeviceStats { Stat allocated_bytes[3]; };
struct TraceEntry {
    enum Action { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP, SNAPSHOT, OOM };
    Action action_; DeviceIndex device_; size_t addr_; size_t size_; void* stream_;
    std::pair<unsigned long long, unsigned long long> mempool_;
};
}
namespace cuda::CUDACachingAllocator {
using AllocatorTraceTracker = std::function<void(const c10::CachingDeviceAllocator::TraceEntry&)>;
struct CUDAAllocator {
    virtual ~CUDAAllocator() = default;
    virtual std::string name() = 0;
    virtual bool initialized() = 0;
    virtual c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex) = 0;
    virtual void attachAllocatorTraceTracker(AllocatorTraceTracker) = 0;
};
extern std::atomic<CUDAAllocator*> allocator;
}
}

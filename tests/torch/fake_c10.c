/* A stand-in for PyTorch's libc10_cuda.so on the simulated device.
 *
 * Like PyTorch's caching allocator, fake_c10_malloc gets a segment from the
 * driver (cuMemAlloc_v2, from inside this library, so the recorder's hook
 * sees a stack through "libc10_cuda.so") and then reports the block to the
 * attached trace tracker, if any, after the driver call returned.  The fake
 * plugin (fake_plugin.c) attaches through fake_c10_attach.
 */
#include <stdint.h>
#include <stddef.h>
#include <cuda.h>

#include "memsnap/memsnap.h"

static memsnap_trace_torch_fn tracker;

/* The fake plugin's way in: the tracker every later block is reported to. */
__attribute__((visibility("default"))) void fake_c10_attach(memsnap_trace_torch_fn fn)
{
    tracker = fn;
}

/* A segment of size bytes from the driver, handed out as one block.
 * Returns the address, 0 on failure. */
__attribute__((visibility("default"), noinline)) uint64_t fake_c10_malloc(size_t size)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, size) != CUDA_SUCCESS)
        return 0;
    if (tracker) {
        tracker(MEMSNAP_TORCH_SEGMENT_ALLOC, 0, p, size, 0, 0, 0);
        tracker(MEMSNAP_TORCH_ALLOC, 0, p, size, 0, 0, size);
    }
    return p;
}

/* Frees the block and its segment. */
__attribute__((visibility("default"))) void fake_c10_free(uint64_t p, size_t size)
{
    if (tracker) {
        tracker(MEMSNAP_TORCH_FREE_REQUESTED, 0, p, size, 0, 0, 0);
        tracker(MEMSNAP_TORCH_FREE_COMPLETED, 0, p, size, 0, 0, 0);
        tracker(MEMSNAP_TORCH_SEGMENT_FREE, 0, p, size, 0, 0, 0);
    }
    cuMemFree_v2(p);
}

/* PyTorch's at::cuda::getNewWorkspace: cuBLAS's workspace for a handle and
 * stream, a block of the workspace's size from the caching allocator,
 * inside the first matmul on that stream.  Its name is what the category
 * rules look for in the native frames (analyze/category.c). */
__attribute__((visibility("default"), noinline)) uint64_t fake_c10_getNewWorkspace(size_t size)
{
    uint64_t p = fake_c10_malloc(size);
    __asm__ volatile("" ::: "memory");   /* not a tail call: this frame stays on the stack */
    return p;
}

/* at::cuda::getCurrentCUDABlasHandle with getNewWorkspace inlined into it,
 * as a release build of libtorch_cuda has it: the workspace's block is made
 * with the handle getter as its innermost frame past the allocator. */
__attribute__((visibility("default"), noinline)) uint64_t
fake_c10_getCurrentCUDABlasHandle(size_t size)
{
    uint64_t p = fake_c10_malloc(size);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* The two under the names libtorch_cuda.so exports them by (mangled), which
 * the recorder looks up to know their code (recorder/torch.c, ws_syms). */
extern uint64_t _ZN2at4cuda15getNewWorkspaceEv(size_t)
    __attribute__((alias("fake_c10_getNewWorkspace"), visibility("default")));
extern uint64_t _ZN2at4cuda24getCurrentCUDABlasHandleEv(size_t)
    __attribute__((alias("fake_c10_getCurrentCUDABlasHandle"), visibility("default")));

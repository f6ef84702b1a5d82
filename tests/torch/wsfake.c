/* A libtorch_cuda.so without the names the recorder looks its cuBLAS
 * workspace functions up by (another PyTorch's signatures): built as
 * libtorch_cuda_wsfake.so, so the recorder reads its symbols one by one
 * and finds this function by the "Workspace" in its name (torch_test
 * ws-fallback). */
#include <stdint.h>

#include "memsnap/memsnap.h"

__attribute__((visibility("default"), noinline)) void
fake_getNewWorkspace(memsnap_trace_torch2_fn trace2, uint64_t seg, uint32_t node)
{
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg, 32 << 20, 0x5000, 0, 32 << 20, 51, node);
    __asm__ volatile("" ::: "memory");   /* not a tail call */
}

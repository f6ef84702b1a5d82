/* A stand-in for libmemsnap_torch-<build-id>.so: the same exported
 * functions as torch/memsnap_torch.cpp, attaching to fake_c10.c instead of
 * PyTorch.  FAKE_BUILD_ID is the build-id the fake libc10_cuda.so is linked
 * with (tests/torch/CMakeLists.txt).  Built with FAKE_V1, it is a plugin
 * from before format 1.2: memsnap_torch_attach only. */
#include <stddef.h>
#include <stdint.h>

#include "memsnap/memsnap.h"

void fake_c10_attach(memsnap_trace_torch_fn fn);

/* The build-id (hex) of the fake libc10_cuda.so. */
__attribute__((visibility("default"))) const char *memsnap_torch_build_id(void)
{
    return FAKE_BUILD_ID;
}

/* Attaches fn to the fake allocator: 0 (attached). */
__attribute__((visibility("default"))) int memsnap_torch_attach(memsnap_trace_torch_fn fn,
                                                                char *msg, size_t msglen)
{
    (void)msg;
    (void)msglen;
    fake_c10_attach(fn);
    return 0;
}

#ifndef FAKE_V1
static memsnap_trace_torch2_fn trace2;

/* The fake allocator's entries, forwarded with no autograd state. */
static void forward2(int action, int device, uint64_t addr, uint64_t size, uint64_t stream,
                     uint64_t pool, uint64_t requested)
{
    trace2(action, device, addr, size, stream, pool, requested, 0, 0);
}

/* The recorder's format-1.2 way in: 0 (attached). */
__attribute__((visibility("default"))) int memsnap_torch_attach2(const memsnap_torch_api *api,
                                                                 char *msg, size_t msglen)
{
    (void)msg;
    (void)msglen;
    trace2 = api->trace;
    fake_c10_attach(forward2);
    return 0;
}
#endif

/* A stand-in for libmemsnap_torch-<build-id>.so: the same two exported
 * functions as torch/memsnap_torch.cpp, attaching to fake_c10.c instead of
 * PyTorch.  FAKE_BUILD_ID is the build-id the fake libc10_cuda.so is linked
 * with (tests/torch/CMakeLists.txt). */
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

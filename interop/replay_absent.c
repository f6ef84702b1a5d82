/* replay in a reader-only build (no CUDA toolkit): replay runs the
 * allocator, libmemsnap_alloc, on the simulated device, and both need the
 * CUDA headers to build; this stands in for replay.c and says so. */
#include <stdio.h>

#include "interop.h"

/* Always -1, with a message in err naming what is missing. */
int msnap_replay(const char *in_path, const char *conf, uint64_t device_mem,
                 const char *out_path, msnap_replay_result *res, char *err,
                 size_t errlen)
{
    (void)in_path, (void)conf, (void)device_mem, (void)out_path, (void)res;
    snprintf(err, errlen, "this memsnap is a reader-only build (no CUDA toolkit): replay needs "
                          "the simulated device and libmemsnap_alloc, which it does not have");
    return -1;
}

/* trace_prog: uses the allocator under the recorder (memsnap run
 * --sim-device ...) and prints what the snapshot must show, as snapcheck's
 * "expect ACTION N" lines plus blockcheck's:
 *   fixed mode: 40 mallocs + frees (segments: cuMemAlloc events),
 *   expandable: 40 mallocs + frees (pages: vmm_create/vmm_map events),
 *   block pool: 10 allocs + frees,
 *   one OOM (device_limit) -> an annotation (nvtx_mark) with the message.
 * Every block event must carry a stack naming this program's function
 * do_allocations (checked by blockcheck --sym after symbolize, or by
 * frames present). */
#include <stdio.h>
#include <string.h>

#include "memsnap/alloc.h"

#define MiB (1ull << 20)

__attribute__((noinline)) static int do_allocations(const char *conf, int n)
{
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    if (memsnap_alloc_config_parse(&cfg, conf, NULL, 0) != 0)
        return 1;
    memsnap_alloc *a;
    if (memsnap_alloc_create(&cfg, 0, NULL, &a) != 0) {
        fprintf(stderr, "create: %s\n", memsnap_alloc_error());
        return 1;
    }
    CUdeviceptr p[64];
    for (int i = 0; i < n; i++)
        if (memsnap_alloc_malloc(a, (size_t)(i + 1) * 100000, NULL, &p[i]) != 0)
            return 1;
    for (int i = 0; i < n; i++)
        if (memsnap_alloc_free(a, p[i]) != 0)
            return 1;
    memsnap_alloc_empty_cache(a);
    memsnap_alloc_destroy(a);
    return 0;
}

int main(void)
{
    if (cuInit(0) != CUDA_SUCCESS)
        return 1;
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    if (do_allocations("", 40) || do_allocations("expandable_segments:true,expandable_va:1G", 40))
        return 1;
    memsnap_blockpool *bp;
    if (memsnap_blockpool_create(0, MiB, 10, NULL, &bp) != 0)
        return 1;
    CUdeviceptr b[10];
    for (int i = 0; i < 10; i++)
        memsnap_blockpool_alloc(bp, &b[i]);
    for (int i = 0; i < 10; i++)
        memsnap_blockpool_free(bp, b[i]);
    memsnap_blockpool_destroy(bp);
    /* An OOM: the message goes to the recorder as an annotation. */
    memsnap_alloc *a;
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    memsnap_alloc_config_parse(&cfg, "device_limit:8M", NULL, 0);
    if (memsnap_alloc_create(&cfg, 0, NULL, &a) != 0)
        return 1;
    CUdeviceptr x;
    if (memsnap_alloc_malloc(a, 64 * MiB, NULL, &x) != MEMSNAP_ALLOC_ERR_OOM)
        return 1;
    memsnap_alloc_destroy(a);
    printf("expect block_alloc 90\nexpect block_free 90\nexpect nvtx_mark 1\nexpect oom 1\n");
    printf("blocks 90\n");
    return 0;
}

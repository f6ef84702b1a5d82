/* nvtx_test: NVTX ranges and marks around driver allocations, for the
 * recorder's NVTX-injection test: two ranges and a mark of the default
 * domain, one range of a named domain.  Prints the events the recording must
 * hold under MEMSNAP_NVTX=WHICH (the argument: all, the default; default;
 * off). */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 1;
    nvtxRangePushA("prefill");
    if (cuMemAlloc(&p, 1 << 20))
        return 1;
    nvtxRangePop();
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "decode";
    nvtxRangePushEx(&a);
    nvtxMarkA("step 1");
    if (cuMemFree(p))
        return 1;
    nvtxRangePop();
    nvtxDomainHandle_t d = nvtxDomainCreateA("a library");
    a.message.ascii = "library call";
    nvtxDomainRangePushEx(d, &a);
    nvtxDomainRangePop(d);
    int pushes = 0, marks = 0;
    if (strcmp(which, "all") == 0)
        pushes = 3, marks = 1;
    else if (strcmp(which, "default") == 0)
        pushes = 2, marks = 1;
    printf("expect nvtx_push %d\nexpect nvtx_pop %d\nexpect nvtx_mark %d\n"
           "expect alloc 1\nexpect free 1\n", pushes, pushes, marks);
    return 0;
}

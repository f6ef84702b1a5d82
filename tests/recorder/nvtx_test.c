/* nvtx_test: NVTX ranges and marks around driver allocations, for the
 * recorder's NVTX-injection test.  Prints the events the recording must hold. */
#include <stdio.h>

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

int main(void)
{
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
    printf("expect nvtx_push 2\nexpect nvtx_pop 2\nexpect nvtx_mark 1\n"
           "expect alloc 1\nexpect free 1\n");
    return 0;
}

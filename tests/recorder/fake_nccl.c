/* A stand-in for NCCL's own device memory, built as libnccl.so.2 (the name
 * is what memsnap's readers go by: the library "NCCL", the category
 * communication): fake_nccl_comm_init maps `bytes` of device memory the way
 * NCCL 2.19+ takes its buffers, through the driver's virtual-memory API
 * (cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess), on the
 * calling thread's current device.  Returns the mapped address, 0 on any
 * failure.  For tests/recorder/rank_prog.c (case ranks-sim). */
#include <stddef.h>
#include <cuda.h>

__attribute__((visibility("default"), noinline)) CUdeviceptr fake_nccl_comm_init(size_t bytes)
{
    CUdevice dev;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return 0;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    if (cuMemCreate(&h, bytes, &prop, 0) != CUDA_SUCCESS)
        return 0;
    if (cuMemAddressReserve(&va, bytes, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(va, bytes, 0, h, 0) != CUDA_SUCCESS)
        return 0;
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (cuMemSetAccess(va, bytes, &acc, 1) != CUDA_SUCCESS)
        return 0;
    return va;
}

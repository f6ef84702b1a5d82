/* Simulated device basics: devices, attributes, contexts (primary, created,
 * per-thread current), streams, events, modules and launches, error
 * strings, plain/pitch/managed/host memory with real copies and sets, and
 * pointer attributes.  Runs with MEMSNAP_SIM_DEVICES=2 and 256M each. */
#include "simtest.h"

#include <pthread.h>
#include <unistd.h>

/* A second thread starts with no current context. */
static void *no_ctx_thread(void *arg)
{
    CUcontext c = (CUcontext)1;
    CUdeviceptr p = 0;
    int *ok = arg;
    *ok = cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == NULL &&
          cuMemAlloc(&p, 1024) == CUDA_ERROR_INVALID_CONTEXT;
    return NULL;
}

int main(void)
{
    CUcontext primary = sim_start();
    int n = 0, v = 0;
    CK(cuDeviceGetCount(&n));
    CHECK(n == 2);
    CK(cuDriverGetVersion(&v));
    CHECK(v == 13000);
    CUdevice d1;
    CK(cuDeviceGet(&d1, 1));
    CHECK(d1 == 1);
    CHECK(cuDeviceGet(&d1, 2) == CUDA_ERROR_INVALID_DEVICE);
    size_t total = 0;
    CK(cuDeviceTotalMem(&total, 1));
    CHECK_EQ_U64(total, 256ull << 20);
    CHECK_EQ_U64(sim.capacity(0), 256ull << 20);

    int a = 0;
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    CHECK(a == 9);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CHECK(a == 1);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
    CHECK(a == 1);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0));
    CHECK(a == 1);
    CHECK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MAX, 0) == CUDA_ERROR_INVALID_VALUE);
    CUuuid u0, u1;
    CK(cuDeviceGetUuid(&u0, 0));
    CK(cuDeviceGetUuid(&u1, 1));
    CHECK(memcmp(&u0, &u1, sizeof u0) != 0);

    /* Error strings. */
    const char *s = NULL;
    CK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    CK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(s && strcmp(s, "out of memory") == 0);
    CHECK(cuGetErrorString((CUresult)12345, &s) == CUDA_ERROR_INVALID_VALUE);

    /* Contexts: primary state, current per thread, push/pop, create/destroy. */
    unsigned flags = 9;
    int active = 0;
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 1);
    CUcontext cur = NULL;
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    int ok = 0;
    pthread_t th;
    pthread_create(&th, NULL, no_ctx_thread, &ok);
    pthread_join(th, NULL);
    CHECK(ok);

    CUcontext c1 = NULL, popped = NULL;
    CK(cuCtxCreate(&c1, NULL, 0, 1)); /* v4 in cuda.h 13: pushes c1 */
    CUdevice dev = -1;
    CK(cuCtxGetDevice(&dev));
    CHECK(dev == 1);
    CUdeviceptr on1 = 0;
    CK(cuMemAlloc(&on1, 1000));
    CHECK_EQ_U64(sim.used(1), 1024); /* rounded to 512 */
    CHECK_EQ_U64(sim.used(0), 0);
    int ord = -1;
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, on1));
    CHECK(ord == 1);
    CUcontext pc = NULL;
    CK(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, on1));
    CHECK(pc == c1);
    CK(cuCtxPopCurrent(&popped));
    CHECK(popped == c1);
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    CK(cuCtxPushCurrent(c1));
    CK(cuMemFree(on1));
    CK(cuCtxDestroy(c1));
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == primary);
    CHECK(cuCtxPushCurrent(c1) == CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSynchronize());

    /* Streams and events. */
    memsnap_sim_live l0 = sim_live_now();
    CUstream st;
    CUevent e0, e1;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    CHECK(sim_live_now().streams == l0.streams + 1);
    CHECK(sim_live_now().events == l0.events + 2);
    float ms = -1;
    CHECK(cuEventElapsedTime(&ms, e0, e1) == CUDA_ERROR_INVALID_HANDLE); /* not recorded */
    CK(cuEventRecord(e0, st));
    usleep(20000);
    CK(cuEventRecord(e1, st));
    CK(cuStreamWaitEvent(st, e1, 0));
    CK(cuEventSynchronize(e1));
    CK(cuEventQuery(e1));
    CK(cuEventElapsedTime(&ms, e0, e1));
    CHECK(ms > 0);
    CK(cuStreamQuery(st));
    CK(cuStreamSynchronize(st));
    CK(cuStreamSynchronize(NULL));
    CK(cuEventDestroy(e0));
    CK(cuEventDestroy(e1));
    CK(cuStreamDestroy(st));
    CHECK(cuStreamDestroy(st) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(live_eq(sim_live_now(), l0));

    /* Modules and launches are no-ops that succeed. */
    CUmodule mod;
    CUfunction fn;
    static const char image[] = "not really a cubin";
    CK(cuModuleLoadData(&mod, image));
    CK(cuModuleGetFunction(&fn, mod, "kernel"));
    CK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_ERROR_INVALID_HANDLE);
    CK(cuModuleUnload(mod));
    const void *tbl = (void *)1;
    CHECK(cuGetExportTable(&tbl, &u0) == CUDA_ERROR_NOT_SUPPORTED);

    /* Device memory: alignment, copies, sets, address range, attributes. */
    CUdeviceptr d[8];
    for (int i = 0; i < 8; i++) {
        CK(cuMemAlloc(&d[i], 100 + 1000 * (size_t)i));
        CHECK(d[i] % 512 == 0);
        CHECK(sim.is_mapped(d[i], 100 + 1000 * (uint64_t)i));
    }
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            CHECK(d[i] + 100 + 1000 * (uint64_t)i <= d[j] || d[j] + 100 + 1000 * (uint64_t)j <= d[i]);
    char host[8192], back[8192];
    for (int i = 0; i < 8192; i++)
        host[i] = (char)(i * 7);
    CK(cuMemcpyHtoD(d[5], host, 5100));
    CK(cuMemcpyDtoD(d[6], d[5], 5100));
    memset(back, 0, sizeof back);
    CK(cuMemcpyDtoH(back, d[6], 4096));
    CHECK(memcmp(host, back, 4096) == 0);
    CHECK(cuMemcpyHtoD(d[0], host, 101) == CUDA_ERROR_INVALID_VALUE); /* past the end */
    CK(cuMemsetD32(d[7], 0xdeadbeef, 16));
    unsigned w[16];
    CK(cuMemcpyDtoH(w, d[7], sizeof w));
    CHECK(w[0] == 0xdeadbeef && w[15] == 0xdeadbeef);
    CK(cuMemsetD8(d[7], 0xab, 3));
    CK(cuMemcpyDtoH(back, d[7], 4));
    CHECK((unsigned char)back[0] == 0xab && (unsigned char)back[2] == 0xab && back[3] == (char)0xde);
    CUdeviceptr base = 0;
    size_t sz = 0;
    CK(cuMemGetAddressRange(&base, &sz, d[3] + 17));
    CHECK(base == d[3] && sz == 3100);
    unsigned mt = 0;
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d[2]));
    CHECK(mt == CU_MEMORYTYPE_DEVICE);
    CHECK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)host) ==
          CUDA_ERROR_INVALID_VALUE);
    uint64_t used = sim.used(0);
    CHECK(cuMemFree(d[0] + 512) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFree(0) == CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_U64(sim.used(0), used);
    for (int i = 0; i < 8; i++)
        CK(cuMemFree(d[i]));
    CHECK(!sim.is_mapped(d[0], 1));
    CHECK(cuMemFree(d[0]) == CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ_U64(sim.used(0), 0);

    /* Pitch and managed memory count against the device. */
    CUdeviceptr pp, mp;
    size_t pitch = 0;
    CK(cuMemAllocPitch(&pp, &pitch, 1000, 10, 4));
    CHECK(pitch == 1024);
    CHECK_EQ_U64(sim.used(0), 10240);
    CK(cuMemAllocManaged(&mp, 4096, CU_MEM_ATTACH_GLOBAL));
    CHECK_EQ_U64(sim.used(0), 10240 + 4096);
    int managed = 0;
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, mp));
    CHECK(managed == 1);
    ((char *)(uintptr_t)mp)[4095] = 1; /* managed memory is host-accessible */
    CK(cuMemFree(pp));
    CK(cuMemFree(mp));
    CHECK_EQ_U64(sim.used(0), 0);

    /* Pinned host memory is not device memory. */
    void *h1 = NULL, *h2 = NULL;
    CK(cuMemHostAlloc(&h1, 10000, CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemAllocHost(&h2, 100));
    CHECK_EQ_U64(sim.used(0), 0);
    CUdeviceptr hd = 0;
    CK(cuMemHostGetDevicePointer(&hd, h1, 0));
    CHECK(hd == (CUdeviceptr)(uintptr_t)h1);
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hd));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    memset(h1, 3, 10000);
    CK(cuMemFreeHost(h1));
    CK(cuMemFreeHost(h2));
    CHECK(cuMemFreeHost(h2) == CUDA_ERROR_INVALID_VALUE);

    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(active == 0);
    return check_summary();
}

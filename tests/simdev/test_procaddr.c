/* Entry points by name: cuGetProcAddress_v2 and the 4-argument
 * cuGetProcAddress before and after cuInit (base names by version,
 * per-thread flag, versioned names, unknown names, NULL symbolStatus), the
 * NOT_INITIALIZED rule, and the dlopen("libcuda.so.1") + dlsym route. */
#include "simtest.h"

/* The 4-argument form exported by every driver since CUDA 11.3; cuda.h 13
 * declares only the 5-argument one under this name. */
typedef CUresult (*get_proc_v1_t)(const char *, void **, int, cuuint64_t);

/* Look name up with cuGetProcAddress_v2; returns the pointer or NULL and
 * stores the status. */
static void *lookup(const char *name, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    void *p = (void *)1;
    CUresult rc = cuGetProcAddress(name, &p, ver, flags, st);
    if (rc != CUDA_SUCCESS)
        CHECK(p == NULL && rc == CUDA_ERROR_NOT_FOUND);
    return rc == CUDA_SUCCESS ? p : NULL;
}

int main(void)
{
    sim_bind();
    /* Before cuInit. */
    CUdeviceptr d = 0;
    CHECK(cuMemAlloc(&d, 16) == CUDA_ERROR_NOT_INITIALIZED);
    int n = 0;
    CHECK(cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED);
    int v = 0;
    CK(cuDriverGetVersion(&v));
    const char *s = NULL;
    CK(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s));
    CHECK_EQ_U64(sim.used(0), 0);

    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
    void *f = lookup("cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    CHECK(f && f == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    f = lookup("cuMemAlloc", 3000, 0, &st);
    CHECK(f == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    f = lookup("cuMemAllocAsync", 12000, 0, &st);
    CHECK(f && f == dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
    f = lookup("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
    CHECK(f && f == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
    f = lookup("cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
    CHECK(f && f == dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
    f = lookup("cuMemFree", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
    CHECK(f && f == dlsym(RTLD_DEFAULT, "cuMemFree_v2")); /* no per-thread variant */
    CHECK(lookup("cuCtxCreate", 12000, 0, &st) == dlsym(RTLD_DEFAULT, "cuCtxCreate_v3"));
    CHECK(lookup("cuCtxCreate", 13000, 0, &st) == dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"));
    CHECK(lookup("cuGetProcAddress", 12000, 0, &st) == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
    CHECK(lookup("cuGetProcAddress", 11030, 0, &st) == dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
    CHECK(lookup("cuEventElapsedTime", 12000, 0, &st) == dlsym(RTLD_DEFAULT, "cuEventElapsedTime"));
    CHECK(lookup("cuEventElapsedTime", 12080, 0, &st) == dlsym(RTLD_DEFAULT, "cuEventElapsedTime_v2"));
    /* Exported names are found as themselves. */
    CHECK(lookup("cuMemAlloc_v2", 12000, 0, &st) == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    CHECK(lookup("cuMemAllocAsync_ptsz", 12000, 0, &st) == dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
    /* Unknown names. */
    st = (CUdriverProcAddressQueryResult)99;
    CHECK(lookup("cuNoSuchFunction", 13000, 0, &st) == NULL);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    void *p = (void *)1;
    CHECK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, NULL) == CUDA_ERROR_NOT_FOUND);
    CHECK(p == NULL);
    /* With a status, the real driver (580) answers CUDA_SUCCESS + NOT_FOUND. */
    p = (void *)1;
    st = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, &st) == CUDA_SUCCESS);
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CK(cuGetProcAddress("cuInit", &p, 13000, 0, NULL)); /* NULL symbolStatus */
    CHECK(cuGetProcAddress("cuInit", &p, 13000, 4, NULL) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuGetProcAddress("cuInit", NULL, 13000, 0, NULL) == CUDA_ERROR_INVALID_VALUE);

    /* The 4-argument form. */
    get_proc_v1_t gp1 = (get_proc_v1_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    CHECK(gp1 != NULL);
    if (gp1) {
        void *q = NULL;
        CK(gp1("cuMemFree", &q, 12000, 0));
        CHECK(q == dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
        CHECK(gp1("cuNoSuchFunction", &q, 12000, 0) == CUDA_ERROR_NOT_FOUND);
    }

    /* Everything through looked-up pointers, starting with cuInit. */
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))lookup("cuInit", 13000, 0, &st);
    CUresult (*retain)(CUcontext *, CUdevice) =
        (CUresult(*)(CUcontext *, CUdevice))lookup("cuDevicePrimaryCtxRetain", 13000, 0, &st);
    CUresult (*setcur)(CUcontext) = (CUresult(*)(CUcontext))lookup("cuCtxSetCurrent", 13000, 0, &st);
    CUresult (*alloc)(CUdeviceptr *, size_t) =
        (CUresult(*)(CUdeviceptr *, size_t))lookup("cuMemAlloc", 13000, 0, &st);
    CUresult (*mfree)(CUdeviceptr) = (CUresult(*)(CUdeviceptr))lookup("cuMemFree", 13000, 0, &st);
    CHECK(init && retain && setcur && alloc && mfree);
    if (init && retain && setcur && alloc && mfree) {
        long before = sim.calls("cuMemAlloc_v2");
        CUcontext ctx;
        CK(init(0));
        CK(retain(&ctx, 0));
        CK(setcur(ctx));
        CK(alloc(&d, 4096));
        CHECK_EQ_U64(sim.used(0), 4096);
        CK(mfree(d));
        CHECK(sim.calls("cuMemAlloc_v2") == before + 1);
        CHECK(sim.calls("cuMemAlloc") == before + 1); /* base names resolve too */
    }

    /* dlopen + dlsym finds the same library: the simulation. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (lib) {
        CHECK(dlsym(lib, "memsnap_sim_used") != NULL);
        void *a2 = dlsym(lib, "cuMemAlloc_v2");
        CHECK(a2 != NULL && a2 == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
        Dl_info info;
        CHECK(dladdr(a2, &info) && strstr(info.dli_fname, "simdev/libcuda.so.1") != NULL);
        CUresult (*getname)(char *, int, CUdevice) =
            (CUresult(*)(char *, int, CUdevice))dlsym(lib, "cuDeviceGetName");
        char name[64] = "";
        CHECK(getname && getname(name, sizeof name, 0) == CUDA_SUCCESS);
        CHECK(strcmp(name, "memsnap simulated device") == 0);
        dlclose(lib);
    }
    return check_summary();
}

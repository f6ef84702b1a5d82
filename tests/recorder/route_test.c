/* route_test: a CUDA driver-API program that makes a known set of memory
 * calls through one route, for the recorder's integration tests.
 *
 *   route_test ROUTE [args]
 *     direct    calls the driver functions it links against
 *     dlsym     dlopen("libcuda.so.1") + dlsym
 *     getproc   cuGetProcAddress_v2 (found with dlsym), plain and per-thread
 *               stream flags, NULL symbolStatus, and the 4-argument
 *               cuGetProcAddress; the lookups happen before cuInit
 *     oom       cuMemAlloc_v2 of 1 GiB until it fails
 *     threads T N   T threads, each N cuMemAlloc_v2/cuMemFree_v2 pairs of varied
 *               sizes (and a few cuMemAllocAsync/FreeAsync), all freed
 *     fork      allocates, forks; the child allocates and frees 3 times
 *     hold N    allocates N buffers, prints "ready", then sleeps (for signal /
 *               SIGKILL tests); SIGTERM ends it
 *     paced     6 allocations at uneven intervals, each followed by a line
 *               "paced US" (CLOCK_MONOTONIC, microseconds)
 *     badfree   cuMemFree_v2 of a pointer never allocated (must fail) and a
 *               cuMemRelease of a bogus handle
 *     annotate  memsnap_annotate/memsnap_dump/memsnap_totals_get when the
 *               recorder is loaded
 *     refused   frees the driver refuses, on two threads (the simulated
 *               device's memsnap_sim_fail arms each just before its call):
 *               cuMemFree_v2 on both, and on the first a cuMemUnmap over two
 *               mappings and a cuMemRelease; what was refused stays live
 *
 * It prints "expect ACTION N" lines: how many events of each action the
 * recording must contain (checked by snapcheck), and exits 0 when every
 * driver call returned what the route expects.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "memsnap/memsnap.h"

#undef cuGetProcAddress

/* The functions the routes use, filled per route. */
static struct {
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*Alloc)(CUdeviceptr *, size_t);
    CUresult (*AllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*AllocManaged)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*Free)(CUdeviceptr);
    CUresult (*AllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*AllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*FreeAsync)(CUdeviceptr, CUstream);
    CUresult (*DefaultPool)(CUmemoryPool *, CUdevice);
    CUresult (*StreamSync)(CUstream);
    CUresult (*Create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*Release)(CUmemGenericAllocationHandle);
    CUresult (*Map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*Unmap)(CUdeviceptr, size_t);
    CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*Reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*AddrFree)(CUdeviceptr, size_t);
    CUresult (*HostAlloc)(void **, size_t, unsigned int);
    CUresult (*AllocHost)(void **, size_t);
    CUresult (*FreeHost)(void *);
    CUresult (*Granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
} cu;

static int failures;
#define OK(call)                                                                      \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "route_test: %s failed: %d (line %d)\n", #call, (int)r_,  \
                    __LINE__);                                                        \
            failures++;                                                               \
        }                                                                             \
    } while (0)

static void use_direct(void)
{
    cu.Init = cuInit;
    cu.DeviceGet = cuDeviceGet;
    cu.PrimaryRetain = cuDevicePrimaryCtxRetain;
    cu.CtxSetCurrent = cuCtxSetCurrent;
    cu.Alloc = cuMemAlloc_v2;
    cu.AllocPitch = cuMemAllocPitch_v2;
    cu.AllocManaged = cuMemAllocManaged;
    cu.Free = cuMemFree_v2;
    cu.AllocAsync = cuMemAllocAsync;
    cu.AllocFromPoolAsync = cuMemAllocFromPoolAsync;
    cu.FreeAsync = cuMemFreeAsync;
    cu.DefaultPool = cuDeviceGetDefaultMemPool;
    cu.StreamSync = cuStreamSynchronize;
    cu.Create = cuMemCreate;
    cu.Release = cuMemRelease;
    cu.Map = cuMemMap;
    cu.Unmap = cuMemUnmap;
    cu.SetAccess = cuMemSetAccess;
    cu.Reserve = cuMemAddressReserve;
    cu.AddrFree = cuMemAddressFree;
    cu.HostAlloc = cuMemHostAlloc;
    cu.AllocHost = cuMemAllocHost_v2;
    cu.FreeHost = cuMemFreeHost;
    cu.Granularity = cuMemGetAllocationGranularity;
}

static void *need(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "route_test: dlsym(%s) failed: %s\n", name, dlerror());
        exit(3);
    }
    return p;
}

#define D(field, name) *(void **)&cu.field = need(h, name)
static void use_dlsym(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "route_test: dlopen(libcuda.so.1): %s\n", dlerror());
        exit(3);
    }
    D(Init, "cuInit");
    D(DeviceGet, "cuDeviceGet");
    D(PrimaryRetain, "cuDevicePrimaryCtxRetain");
    D(CtxSetCurrent, "cuCtxSetCurrent");
    D(Alloc, "cuMemAlloc_v2");
    D(AllocPitch, "cuMemAllocPitch_v2");
    D(AllocManaged, "cuMemAllocManaged");
    D(Free, "cuMemFree_v2");
    D(AllocAsync, "cuMemAllocAsync");
    D(AllocFromPoolAsync, "cuMemAllocFromPoolAsync");
    D(FreeAsync, "cuMemFreeAsync");
    D(DefaultPool, "cuDeviceGetDefaultMemPool");
    D(StreamSync, "cuStreamSynchronize");
    D(Create, "cuMemCreate");
    D(Release, "cuMemRelease");
    D(Map, "cuMemMap");
    D(Unmap, "cuMemUnmap");
    D(SetAccess, "cuMemSetAccess");
    D(Reserve, "cuMemAddressReserve");
    D(AddrFree, "cuMemAddressFree");
    D(HostAlloc, "cuMemHostAlloc");
    D(AllocHost, "cuMemAllocHost_v2");
    D(FreeHost, "cuMemFreeHost");
    D(Granularity, "cuMemGetAllocationGranularity");
}

typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_t)(const char *, void **, int, cuuint64_t);

static gpa2_t gpa2;
static int use_ptds;   /* alternate the flag: every other lookup per-thread */

static void *proc(const char *name)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cuuint64_t flags = use_ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                : CU_GET_PROC_ADDRESS_DEFAULT;
    use_ptds = !use_ptds;
    CUresult r = gpa2(name, &p, 12080, flags, &st);
    if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !p) {
        fprintf(stderr, "route_test: cuGetProcAddress_v2(%s) failed: %d/%d\n", name, (int)r,
                (int)st);
        exit(3);
    }
    return p;
}

#define G(field, name) *(void **)&cu.field = proc(name)
static void use_getproc(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "route_test: dlopen(libcuda.so.1): %s\n", dlerror());
        exit(3);
    }
    gpa2 = (gpa2_t)need(h, "cuGetProcAddress_v2");
    /* Before cuInit, as cudart does. */
    G(Init, "cuInit");
    G(DeviceGet, "cuDeviceGet");
    G(PrimaryRetain, "cuDevicePrimaryCtxRetain");
    G(CtxSetCurrent, "cuCtxSetCurrent");
    G(Alloc, "cuMemAlloc");
    G(AllocPitch, "cuMemAllocPitch");
    G(AllocManaged, "cuMemAllocManaged");
    G(Free, "cuMemFree");
    G(AllocAsync, "cuMemAllocAsync");
    G(AllocFromPoolAsync, "cuMemAllocFromPoolAsync");
    G(FreeAsync, "cuMemFreeAsync");
    G(DefaultPool, "cuDeviceGetDefaultMemPool");
    G(StreamSync, "cuStreamSynchronize");
    G(Create, "cuMemCreate");
    G(Release, "cuMemRelease");
    G(Map, "cuMemMap");
    G(Unmap, "cuMemUnmap");
    G(SetAccess, "cuMemSetAccess");
    G(Reserve, "cuMemAddressReserve");
    G(AddrFree, "cuMemAddressFree");
    G(HostAlloc, "cuMemHostAlloc");
    /* NULL symbolStatus, and the 4-argument cuGetProcAddress found through
     * cuGetProcAddress itself (an old-version request returns it). */
    void *p = NULL;
    if (gpa2("cuMemAllocHost", &p, 12080, 0, NULL) != CUDA_SUCCESS || !p) {
        fprintf(stderr, "route_test: cuGetProcAddress_v2 with NULL status failed\n");
        exit(3);
    }
    *(void **)&cu.AllocHost = p;
    gpa1_t gpa1 = (gpa1_t)need(h, "cuGetProcAddress");
    p = NULL;
    if (gpa1("cuMemFreeHost", &p, 11080, 0) != CUDA_SUCCESS || !p) {
        fprintf(stderr, "route_test: cuGetProcAddress (v1) failed\n");
        exit(3);
    }
    *(void **)&cu.FreeHost = p;
    p = NULL;
    if (gpa1("cuMemGetAllocationGranularity", &p, 11080, 0) != CUDA_SUCCESS || !p)
        exit(3);
    *(void **)&cu.Granularity = p;
    /* An unknown name must still say NOT_FOUND through the recorder (the
     * real driver returns CUDA_SUCCESS with the status; both are fine). */
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    p = (void *)1;
    CUresult r = gpa2("cuNoSuchFunction", &p, 12080, 0, &st);
    if ((r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND) || p != NULL ||
        st != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) {
        fprintf(stderr, "route_test: unknown symbol lookup returned %d/%d\n", (int)r, (int)st);
        failures++;
    }
}

static void init_ctx(void)
{
    CUdevice dev;
    CUcontext ctx;
    OK(cu.Init(0));
    OK(cu.DeviceGet(&dev, 0));
    OK(cu.PrimaryRetain(&ctx, dev));
    OK(cu.CtxSetCurrent(ctx));
}

/* Every hooked function once (VMM: one reservation, two handles, two maps). */
__attribute__((noinline)) static void exercise_all(void)
{
    init_ctx();
    CUdeviceptr a, b, m, x, y;
    size_t pitch;
    OK(cu.Alloc(&a, 1 << 20));
    OK(cu.AllocPitch(&b, &pitch, 1000, 64, 4));
    OK(cu.AllocManaged(&m, 3 << 20, CU_MEM_ATTACH_GLOBAL));
    OK(cu.AllocAsync(&x, 5000, 0));
    CUmemoryPool pool;
    OK(cu.DefaultPool(&pool, 0));
    OK(cu.AllocFromPoolAsync(&y, 7000, pool, 0));
    OK(cu.FreeAsync(x, 0));
    OK(cu.FreeAsync(y, 0));
    OK(cu.StreamSync(0));
    OK(cu.Free(a));
    OK(cu.Free(b));
    OK(cu.Free(m));
    void *h1, *h2;
    OK(cu.HostAlloc(&h1, 4096, 0));
    OK(cu.AllocHost(&h2, 8192));
    OK(cu.FreeHost(h1));
    OK(cu.FreeHost(h2));

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    OK(cu.Granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (!gran)
        gran = 2 << 20;
    CUdeviceptr va;
    OK(cu.Reserve(&va, 4 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle p1, p2;
    OK(cu.Create(&p1, gran, &prop, 0));
    OK(cu.Create(&p2, gran, &prop, 0));
    OK(cu.Map(va, gran, 0, p1, 0));
    OK(cu.Map(va + gran, gran, 0, p2, 0));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(cu.SetAccess(va, 2 * gran, &acc, 1));
    OK(cu.Unmap(va, 2 * gran));          /* one unmap over two mappings */
    OK(cu.Release(p1));
    OK(cu.Release(p2));
    OK(cu.AddrFree(va, 4 * gran));

    printf("expect alloc 2\nexpect managed_alloc 1\nexpect free 3\n"
           "expect async_alloc 2\nexpect async_free 2\n"
           "expect host_alloc 2\nexpect host_free 2\n"
           "expect vmm_reserve 1\nexpect vmm_create 2\nexpect vmm_map 2\n"
           "expect vmm_unmap 1\nexpect vmm_release 2\nexpect vmm_addr_free 1\n"
           "expect oom 0\n");
}

static void run_oom(void)
{
    init_ctx();
    CUdeviceptr p;
    int n = 0;
    CUresult r;
    while ((r = cu.Alloc(&p, 1ull << 30)) == CUDA_SUCCESS)
        n++;
    if (r != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "route_test: expected OUT_OF_MEMORY, got %d\n", (int)r);
        failures++;
    }
    printf("expect alloc %d\nexpect oom 1\n", n);
}

static long per_thread;
static void *thread_main(void *arg)
{
    CUcontext ctx;
    CUdevice dev;
    cu.DeviceGet(&dev, 0);
    cu.PrimaryRetain(&ctx, dev);
    cu.CtxSetCurrent(ctx);
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (long i = 0; i < per_thread; i++) {
        CUdeviceptr p;
        size_t sz = 512 + (size_t)(rand_r(&seed) % (1 << 20));
        if (cu.Alloc(&p, sz) != CUDA_SUCCESS || cu.Free(p) != CUDA_SUCCESS) {
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    return NULL;
}

static void run_threads(int nthreads, long n)
{
    init_ctx();
    per_thread = n;
    pthread_t t[256];
    if (nthreads > 256)
        nthreads = 256;
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    printf("expect alloc %ld\nexpect free %ld\n", nthreads * n, nthreads * n);
}

static void run_fork(void)
{
    init_ctx();
    CUdeviceptr p;
    OK(cu.Alloc(&p, 1 << 20));
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        /* The child: a fresh process for the recorder (its own file). */
        for (int i = 0; i < 3; i++) {
            CUdeviceptr q;
            if (cu.Alloc(&q, 4096) == CUDA_SUCCESS)
                cu.Free(q);
        }
        printf("child %d\n", (int)getpid());
        exit(0);   /* not _exit: the recorder writes the child's file at exit */
    }
    int st;
    waitpid(c, &st, 0);
    OK(cu.Free(p));
    printf("expect alloc 1\nexpect free 1\n");
}

static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }

static void run_hold(int n)
{
    init_ctx();
    signal(SIGTERM, on_term);
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        OK(cu.Alloc(&p, 1 << 20));
    }
    printf("expect alloc %d\nready\n", n);
    fflush(stdout);
    while (!stop)
        pause();
}

/* churn MS: for MS milliseconds, a 152 MiB allocation held 3 ms and freed,
 * 3 ms apart; nothing else on the device but 1 MiB held throughout (case
 * counters-settled: every counters line's device_used - reserved is the
 * simulated context). */
static void run_churn(int ms)
{
    init_ctx();
    CUdeviceptr keep, p;
    OK(cu.Alloc(&keep, 1 << 20));
    struct timespec t0, now, gap = {0, 3000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n = 0;
    do {
        OK(cu.Alloc(&p, 152ull << 20));
        nanosleep(&gap, NULL);
        OK(cu.Free(p));
        nanosleep(&gap, NULL);
        n++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    OK(cu.Free(keep));
    printf("expect alloc %d\nexpect free %d\n", n + 1, n + 1);
}

/* paced: 6 allocations at uneven intervals (40 to 190 ms); after each
 * returns, "paced US" with CLOCK_MONOTONIC in microseconds, so a test can
 * hold the recording's event times against the program's own clock. */
static void run_paced(void)
{
    init_ctx();
    for (int i = 0; i < 6; i++) {
        CUdeviceptr p;
        OK(cu.Alloc(&p, 1 << 20));
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        printf("paced %lld\n", (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
        struct timespec d = {0, (40 + 30 * i) * 1000000L};
        nanosleep(&d, NULL);
    }
    printf("expect alloc 6\n");
}

static void run_badfree(void)
{
    init_ctx();
    CUdeviceptr a;
    OK(cu.Alloc(&a, 1 << 20));
    CUresult r = cu.Free((CUdeviceptr)0xdead0000ull);
    if (r == CUDA_SUCCESS) {
        fprintf(stderr, "route_test: freeing a bogus pointer succeeded\n");
        failures++;
    }
    r = cu.Release((CUmemGenericAllocationHandle)0x12345);
    if (r == CUDA_SUCCESS)
        failures++;
    printf("expect alloc 1\nexpect free 1\nexpect free_error 2\n"
           "expect vmm_release 1\nexpect live 1\n");
    printf("result %d\n", (int)r);
}

static void run_annotate(void)
{
    init_ctx();
    int (*annotate)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_annotate");
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_dump");
    int (*totals)(int, memsnap_totals *) =
        (int (*)(int, memsnap_totals *))dlsym(RTLD_DEFAULT, "memsnap_totals_get");
    if (!annotate || !dump || !totals) {
        fprintf(stderr, "route_test: the recorder's API is not loaded\n");
        exit(3);
    }
    CUdeviceptr a, b;
    OK(cu.Alloc(&a, 3 << 20));
    OK(cu.Alloc(&b, 5 << 20));
    annotate("checkpoint one");
    memsnap_totals t;
    if (totals(0, &t) != 0 || t.reserved != (8u << 20)) {
        fprintf(stderr, "route_test: totals reserved %llu, want %u\n",
                (unsigned long long)t.reserved, 8u << 20);
        failures++;
    }
    if (dump("test dump") != 0) {
        fprintf(stderr, "route_test: memsnap_dump failed\n");
        failures++;
    }
    OK(cu.Free(a));
    if (totals(0, &t) != 0 || t.reserved != (5u << 20)) {
        fprintf(stderr, "route_test: totals reserved %llu after free, want %u\n",
                (unsigned long long)t.reserved, 5u << 20);
        failures++;
    }
    annotate("checkpoint two");
    OK(cu.Free(b));
    printf("expect alloc 2\nexpect free 2\nexpect nvtx_mark 2\nexpect dump 1\n");
}

/* refused: two threads take turns (a barrier between steps).  At each step
 * a thread allocates two buffers and frees both, the first free refused
 * (memsnap_sim_fail arms the thread's next cuMemFree_v2 under a lock, so
 * the fault hits this thread's call), the second not; the refused buffers
 * stay live.  The first thread then maps two handles into one reservation
 * and has the cuMemUnmap over both refused (both mappings stay) and a
 * cuMemRelease refused (the handle stays). */
#define REFUSED_STEPS 4
static pthread_barrier_t refused_bar;
static pthread_mutex_t refused_lock = PTHREAD_MUTEX_INITIALIZER;
static int (*sim_fail)(const char *, long, int);

/* Makes call with the next call of driver function fn armed to fail (one
 * thread at a time), and counts a failure when it was not refused. */
#define REFUSE(fn, call)                                                         \
    do {                                                                         \
        pthread_mutex_lock(&refused_lock);                                       \
        sim_fail(fn, 1, 0);                                                      \
        CUresult r_ = (call);                                                    \
        sim_fail(NULL, 0, 0);                                                    \
        pthread_mutex_unlock(&refused_lock);                                     \
        if (r_ == CUDA_SUCCESS) {                                                \
            fprintf(stderr, "route_test: %s was not refused (line %d)\n", #call, \
                    __LINE__);                                                   \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);                  \
        }                                                                        \
    } while (0)

static void refused_vmm(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    OK(cu.Granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (!gran)
        gran = 2 << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h1, h2;
    OK(cu.Reserve(&va, 4 * gran, 0, 0, 0));
    OK(cu.Create(&h1, gran, &prop, 0));
    OK(cu.Create(&h2, gran, &prop, 0));
    OK(cu.Map(va, gran, 0, h1, 0));
    OK(cu.Map(va + gran, gran, 0, h2, 0));
    REFUSE("cuMemUnmap", cu.Unmap(va, 2 * gran));   /* one unmap over two mappings */
    REFUSE("cuMemRelease", cu.Release(h1));
}

static void *refused_main(void *arg)
{
    int me = (int)(uintptr_t)arg;
    CUcontext ctx;
    CUdevice dev;
    cu.DeviceGet(&dev, 0);
    cu.PrimaryRetain(&ctx, dev);
    cu.CtxSetCurrent(ctx);
    for (int step = 0; step < REFUSED_STEPS; step++) {
        CUdeviceptr a, b;
        OK(cu.Alloc(&a, (size_t)(1 + me) << 20));
        OK(cu.Alloc(&b, (size_t)(3 + me) << 20));
        pthread_barrier_wait(&refused_bar);
        REFUSE("cuMemFree_v2", cu.Free(a));
        pthread_barrier_wait(&refused_bar);
        OK(cu.Free(b));
        pthread_barrier_wait(&refused_bar);
    }
    if (me == 0)
        refused_vmm();
    return NULL;
}

static void run_refused(void)
{
    init_ctx();
    sim_fail = (int (*)(const char *, long, int))dlsym(RTLD_DEFAULT, "memsnap_sim_fail");
    if (!sim_fail) {
        fprintf(stderr, "route_test: refused needs the simulated device\n");
        exit(77);
    }
    pthread_barrier_init(&refused_bar, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, refused_main, (void *)(uintptr_t)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("expect alloc %d\nexpect free %d\nexpect free_error %d\n"
           "expect vmm_map 2\nexpect vmm_unmap 1\nexpect vmm_release 1\n",
           4 * REFUSED_STEPS, 4 * REFUSED_STEPS, 2 * REFUSED_STEPS + 2);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: route_test direct|dlsym|getproc|oom|threads T N|fork|hold N|paced|churn MS|"
                        "badfree|annotate|refused\n");
        return 2;
    }
    const char *r = argv[1];
    if (!strcmp(r, "dlsym"))
        use_dlsym();
    else if (!strcmp(r, "getproc"))
        use_getproc();
    else
        use_direct();
    if (!strcmp(r, "direct") || !strcmp(r, "dlsym") || !strcmp(r, "getproc"))
        exercise_all();
    else if (!strcmp(r, "oom"))
        run_oom();
    else if (!strcmp(r, "threads") && argc >= 4)
        run_threads(atoi(argv[2]), atol(argv[3]));
    else if (!strcmp(r, "fork"))
        run_fork();
    else if (!strcmp(r, "refused"))
        run_refused();
    else if (!strcmp(r, "hold") && argc >= 3)
        run_hold(atoi(argv[2]));
    else if (!strcmp(r, "paced"))
        run_paced();
    else if (!strcmp(r, "churn") && argc >= 3)
        run_churn(atoi(argv[2]));
    else if (!strcmp(r, "badfree"))
        run_badfree();
    else if (!strcmp(r, "annotate"))
        run_annotate();
    else {
        fprintf(stderr, "route_test: unknown route %s\n", r);
        return 2;
    }
    return failures ? 1 : 0;
}

/* The recorder's hooks: mechanical wrappers around the CUDA driver's memory
 * API, on every route a program can take to reach it.
 *
 *   direct link   the program (or libcudart) calls cuMemAlloc_v2 & co through
 *                 the dynamic linker: our exported functions interpose, and
 *                 find the real ones with dlsym(RTLD_NEXT) (or in the already
 *                 loaded libcuda.so.1).
 *   dlsym         dlopen("libcuda.so.1") + dlsym(handle, "cuMemAlloc_v2"):
 *                 our dlsym (dlsym_x86_64.S) forwards every other lookup to
 *                 glibc's with the original return address, so RTLD_NEXT
 *                 still means "next after the real caller"; hooked names are
 *                 resolved, then wrapped.
 *   cuGetProcAddress[_v2]  how cudart (static and dynamic) and PyTorch get
 *                 driver functions: we call the real one first, then swap the
 *                 pointer it returned for a wrapper of the same ABI, chosen by
 *                 the requested name, CUDA version and per-thread-stream flag.
 *   cudaGetDriverEntryPoint[ByVersion][_ptsz]  interposed on dynamic cudart,
 *                 same treatment.
 *
 * Wrapping a pointer: every hooked function has NSLOTS wrapper instances,
 * each calling the real function stored in its slot.  wrap_ptr() finds the
 * slot already holding that real pointer, or claims a free one.  Slot 0 is
 * the exported symbol's own.  A pointer into our own code is already a
 * wrapper and is returned as is, so wrapping twice is harmless; when the
 * slots run out the real pointer is returned unwrapped (never a wrong ABI).
 *
 * Each event is recorded exactly once: a per-thread depth counter makes
 * nested hooked calls (a driver function calling another through a wrapper)
 * pass straight through.  The program always gets the real return code and
 * pointers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "recorder.h"
#include "torch.h"

#undef cuGetProcAddress
#undef cuGetProcAddress_v2
#undef cuMemAllocAsync
#undef cuMemFreeAsync
#undef cuMemAllocFromPoolAsync

#define NSLOTS 4     /* wrapper instances per function, slot 0 = exported */

/* ---- real dlsym and the driver handle ------------------------------------------ */

/* dlsym runs before anything else is set up, the sanitizers' runtimes
 * included (they look their own functions up with dlsym while they start):
 * the functions on its path are never instrumented. */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

typedef void *(*dlsym_fn)(void *, const char *);
dlsym_fn memsnap_real_dlsym __attribute__((visibility("hidden")));

NO_SANITIZE static dlsym_fn real_dlsym(void)
{
    if (!memsnap_real_dlsym) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!p)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!p)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");   /* aarch64 */
        memsnap_real_dlsym = (dlsym_fn)p;
    }
    return memsnap_real_dlsym;
}

/* The real definition of a driver function, for our exported symbols and for
 * the helpers we call ourselves (cuMemGetInfo_v2 at an OOM, ...). */
static void *resolve_driver(const char *name)
{
    dlsym_fn ds = real_dlsym();
    if (!ds)
        return NULL;
    void *p = ds(RTLD_NEXT, name);
    if (p && !core_is_own_code(p))
        return p;
    void *h = core_dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    p = ds(h, name);
    core_dlclose(h);
    return p && !core_is_own_code(p) ? p : NULL;
}

/* ---- hooked functions: one table ---------------------------------------------------
 * X(name, params, args). */
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);

#define HOOKS(X)                                                                      \
    X(cuMemAlloc_v2, (CUdeviceptr * a, size_t b), (a, b))                             \
    X(cuMemAllocPitch_v2, (CUdeviceptr * a, size_t * b, size_t c, size_t d,           \
                           unsigned int e), (a, b, c, d, e))                          \
    X(cuMemAllocManaged, (CUdeviceptr * a, size_t b, unsigned int c), (a, b, c))      \
    X(cuMemFree_v2, (CUdeviceptr a), (a))                                             \
    X(cuMemAllocAsync, (CUdeviceptr * a, size_t b, CUstream c), (a, b, c))            \
    X(cuMemAllocAsync_ptsz, (CUdeviceptr * a, size_t b, CUstream c), (a, b, c))       \
    X(cuMemAllocFromPoolAsync, (CUdeviceptr * a, size_t b, CUmemoryPool c, CUstream d), \
      (a, b, c, d))                                                                   \
    X(cuMemAllocFromPoolAsync_ptsz,                                                   \
      (CUdeviceptr * a, size_t b, CUmemoryPool c, CUstream d), (a, b, c, d))          \
    X(cuMemFreeAsync, (CUdeviceptr a, CUstream b), (a, b))                            \
    X(cuMemFreeAsync_ptsz, (CUdeviceptr a, CUstream b), (a, b))                       \
    X(cuMemCreate, (CUmemGenericAllocationHandle * a, size_t b,                       \
                    const CUmemAllocationProp *c, unsigned long long d), (a, b, c, d))\
    X(cuMemRelease, (CUmemGenericAllocationHandle a), (a))                            \
    X(cuMemMap, (CUdeviceptr a, size_t b, size_t c, CUmemGenericAllocationHandle d,   \
                 unsigned long long e), (a, b, c, d, e))                              \
    X(cuMemUnmap, (CUdeviceptr a, size_t b), (a, b))                                  \
    X(cuMemAddressReserve, (CUdeviceptr * a, size_t b, size_t c, CUdeviceptr d,       \
                            unsigned long long e), (a, b, c, d, e))                   \
    X(cuMemAddressFree, (CUdeviceptr a, size_t b), (a, b))                            \
    X(cuMemHostAlloc, (void **a, size_t b, unsigned int c), (a, b, c))                \
    X(cuMemAllocHost_v2, (void **a, size_t b), (a, b))                                \
    X(cuMemFreeHost, (void *a), (a))                                                  \
    X(cuGetProcAddress_v2, (const char *a, void **b, int c, cuuint64_t d,             \
                            CUdriverProcAddressQueryResult *e), (a, b, c, d, e))      \
    X(cuGetProcAddress, (const char *a, void **b, int c, cuuint64_t d), (a, b, c, d))

enum {
#define X_ID(name, params, args) ID_##name,
    HOOKS(X_ID)
#undef X_ID
    ID_COUNT
};

static const char *const hook_names[ID_COUNT] = {
#define X_NAME(name, params, args) #name,
    HOOKS(X_NAME)
#undef X_NAME
};

/* Per function: its slots, its hook (hand-written below), its wrappers. */
#define X_DECL(name, params, args)                                                    \
    typedef CUresult (*fn_##name) params;                                             \
    static _Atomic(void *) slots_##name[NSLOTS];                                      \
    static CUresult hook_##name(fn_##name real, HOOK_PARAMS_##name);
#define HOOK_PARAMS_cuMemAlloc_v2 CUdeviceptr *a, size_t b
#define HOOK_PARAMS_cuMemAllocPitch_v2 CUdeviceptr *a, size_t *b, size_t c, size_t d, unsigned int e
#define HOOK_PARAMS_cuMemAllocManaged CUdeviceptr *a, size_t b, unsigned int c
#define HOOK_PARAMS_cuMemFree_v2 CUdeviceptr a
#define HOOK_PARAMS_cuMemAllocAsync CUdeviceptr *a, size_t b, CUstream c
#define HOOK_PARAMS_cuMemAllocAsync_ptsz CUdeviceptr *a, size_t b, CUstream c
#define HOOK_PARAMS_cuMemAllocFromPoolAsync CUdeviceptr *a, size_t b, CUmemoryPool c, CUstream d
#define HOOK_PARAMS_cuMemAllocFromPoolAsync_ptsz CUdeviceptr *a, size_t b, CUmemoryPool c, CUstream d
#define HOOK_PARAMS_cuMemFreeAsync CUdeviceptr a, CUstream b
#define HOOK_PARAMS_cuMemFreeAsync_ptsz CUdeviceptr a, CUstream b
#define HOOK_PARAMS_cuMemCreate CUmemGenericAllocationHandle *a, size_t b, const CUmemAllocationProp *c, unsigned long long d
#define HOOK_PARAMS_cuMemRelease CUmemGenericAllocationHandle a
#define HOOK_PARAMS_cuMemMap CUdeviceptr a, size_t b, size_t c, CUmemGenericAllocationHandle d, unsigned long long e
#define HOOK_PARAMS_cuMemUnmap CUdeviceptr a, size_t b
#define HOOK_PARAMS_cuMemAddressReserve CUdeviceptr *a, size_t b, size_t c, CUdeviceptr d, unsigned long long e
#define HOOK_PARAMS_cuMemAddressFree CUdeviceptr a, size_t b
#define HOOK_PARAMS_cuMemHostAlloc void **a, size_t b, unsigned int c
#define HOOK_PARAMS_cuMemAllocHost_v2 void **a, size_t b
#define HOOK_PARAMS_cuMemFreeHost void *a
#define HOOK_PARAMS_cuGetProcAddress_v2 const char *a, void **b, int c, cuuint64_t d, CUdriverProcAddressQueryResult *e
#define HOOK_PARAMS_cuGetProcAddress const char *a, void **b, int c, cuuint64_t d
HOOKS(X_DECL)
#undef X_DECL

/* Wrapper instances 1..NSLOTS-1 and the exported symbol (slot 0). */
#define X_WRAP(name, params, args)                                                    \
    static CUresult w1_##name params                                                  \
    {                                                                                 \
        return hook_##name((fn_##name)atomic_load_explicit(&slots_##name[1],          \
                                                           memory_order_acquire), HOOK_ARGS_##name); \
    }                                                                                 \
    static CUresult w2_##name params                                                  \
    {                                                                                 \
        return hook_##name((fn_##name)atomic_load_explicit(&slots_##name[2],          \
                                                           memory_order_acquire), HOOK_ARGS_##name); \
    }                                                                                 \
    static CUresult w3_##name params                                                  \
    {                                                                                 \
        return hook_##name((fn_##name)atomic_load_explicit(&slots_##name[3],          \
                                                           memory_order_acquire), HOOK_ARGS_##name); \
    }                                                                                 \
    MSNAP_EXPORT CUresult name params                                                 \
    {                                                                                 \
        void *r = atomic_load_explicit(&slots_##name[0], memory_order_acquire);       \
        if (!r) {                                                                     \
            r = resolve_driver(#name);                                                \
            if (!r)                                                                   \
                return CUDA_ERROR_NOT_INITIALIZED;                                    \
            atomic_store(&slots_##name[0], r);                                        \
        }                                                                             \
        return hook_##name((fn_##name)r, HOOK_ARGS_##name);                           \
    }
#define HOOK_ARGS_cuMemAlloc_v2 a, b
#define HOOK_ARGS_cuMemAllocPitch_v2 a, b, c, d, e
#define HOOK_ARGS_cuMemAllocManaged a, b, c
#define HOOK_ARGS_cuMemFree_v2 a
#define HOOK_ARGS_cuMemAllocAsync a, b, c
#define HOOK_ARGS_cuMemAllocAsync_ptsz a, b, c
#define HOOK_ARGS_cuMemAllocFromPoolAsync a, b, c, d
#define HOOK_ARGS_cuMemAllocFromPoolAsync_ptsz a, b, c, d
#define HOOK_ARGS_cuMemFreeAsync a, b
#define HOOK_ARGS_cuMemFreeAsync_ptsz a, b
#define HOOK_ARGS_cuMemCreate a, b, c, d
#define HOOK_ARGS_cuMemRelease a
#define HOOK_ARGS_cuMemMap a, b, c, d, e
#define HOOK_ARGS_cuMemUnmap a, b
#define HOOK_ARGS_cuMemAddressReserve a, b, c, d, e
#define HOOK_ARGS_cuMemAddressFree a, b
#define HOOK_ARGS_cuMemHostAlloc a, b, c
#define HOOK_ARGS_cuMemAllocHost_v2 a, b
#define HOOK_ARGS_cuMemFreeHost a
#define HOOK_ARGS_cuGetProcAddress_v2 a, b, c, d, e
#define HOOK_ARGS_cuGetProcAddress a, b, c, d
HOOKS(X_WRAP)
#undef X_WRAP

static _Atomic(void *) *const slot_tab[ID_COUNT] = {
#define X_SLOT(name, params, args) slots_##name,
    HOOKS(X_SLOT)
#undef X_SLOT
};

static void *const wrap_tab[ID_COUNT][NSLOTS] = {
#define X_WT(name, params, args) {(void *)name, (void *)w1_##name, (void *)w2_##name, (void *)w3_##name},
    HOOKS(X_WT)
#undef X_WT
};

static _Atomic int slots_exhausted;

/* Returns a wrapper of function id that calls real (see the file comment). */
static void *wrap_ptr(int id, void *real)
{
    if (!real || core_is_own_code(real))
        return real;
    _Atomic(void *) *slots = slot_tab[id];
    for (int i = 1; i < NSLOTS; i++) {
        void *cur = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (cur == real)
            return wrap_tab[id][i];
        if (cur == NULL) {
            void *expected = NULL;
            if (atomic_compare_exchange_strong(&slots[i], &expected, real) ||
                expected == real)
                return wrap_tab[id][i];
        }
    }
    if (!atomic_exchange(&slots_exhausted, 1) && atomic_load(&g_state) >= 0)
        fprintf(stderr, "memsnap: more than %d distinct %s entry points; "
                        "calls through the extra ones are not recorded\n", NSLOTS - 1,
                hook_names[id]);
    return real;
}

/* The hook id for an exact exported symbol name, or -1. */
NO_SANITIZE static int id_for_exported(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return -1;
    for (int i = 0; i < ID_COUNT; i++)
        if (strcmp(name, hook_names[i]) == 0)
            return i;
    return -1;
}

/* The hook id for a name asked of cuGetProcAddress (base names, e.g.
 * "cuMemAlloc"), given the CUDA version and flags of the request, or -1 when
 * the request gets an ABI we do not wrap (e.g. the 32-bit cuMemAlloc of
 * CUDA < 3.2). */
static int id_for_proc(const char *sym, int version, cuuint64_t flags)
{
    static const struct { const char *base; int id, id_ptsz, min_version; } map[] = {
        {"cuMemAlloc", ID_cuMemAlloc_v2, -1, 3020},
        {"cuMemAllocPitch", ID_cuMemAllocPitch_v2, -1, 3020},
        {"cuMemFree", ID_cuMemFree_v2, -1, 3020},
        {"cuMemAllocHost", ID_cuMemAllocHost_v2, -1, 3020},
        {"cuMemAllocManaged", ID_cuMemAllocManaged, -1, 0},
        {"cuMemHostAlloc", ID_cuMemHostAlloc, -1, 0},
        {"cuMemFreeHost", ID_cuMemFreeHost, -1, 0},
        {"cuMemAllocAsync", ID_cuMemAllocAsync, ID_cuMemAllocAsync_ptsz, 0},
        {"cuMemAllocFromPoolAsync", ID_cuMemAllocFromPoolAsync,
         ID_cuMemAllocFromPoolAsync_ptsz, 0},
        {"cuMemFreeAsync", ID_cuMemFreeAsync, ID_cuMemFreeAsync_ptsz, 0},
        {"cuMemCreate", ID_cuMemCreate, -1, 0},
        {"cuMemRelease", ID_cuMemRelease, -1, 0},
        {"cuMemMap", ID_cuMemMap, -1, 0},
        {"cuMemUnmap", ID_cuMemUnmap, -1, 0},
        {"cuMemAddressReserve", ID_cuMemAddressReserve, -1, 0},
        {"cuMemAddressFree", ID_cuMemAddressFree, -1, 0},
    };
    if (!sym || sym[0] != 'c' || sym[1] != 'u')
        return -1;
    if (strcmp(sym, "cuGetProcAddress") == 0)
        return version >= 12000 ? ID_cuGetProcAddress_v2 : ID_cuGetProcAddress;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(sym, map[i].base) != 0)
            continue;
        if (version < map[i].min_version)
            return -1;
        if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && map[i].id_ptsz >= 0)
            return map[i].id_ptsz;
        return map[i].id;
    }
    return id_for_exported(sym);   /* a versioned name, e.g. "cuMemAlloc_v2" */
}

/* ---- helpers the core and the hooks use ------------------------------------------- */

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*mem_get_info_fn)(size_t *, size_t *);
typedef CUresult (*dev_name_fn)(char *, int, CUdevice);
typedef CUresult (*dev_total_fn)(size_t *, CUdevice);
typedef CUresult (*dev_pci_fn)(char *, int, CUdevice);

static ctx_get_device_fn p_ctx_get_device;
static mem_get_info_fn p_mem_get_info;

int hooks_current_device(void)
{
    if (!p_ctx_get_device)
        p_ctx_get_device = (ctx_get_device_fn)resolve_driver("cuCtxGetDevice");
    CUdevice d;
    if (!p_ctx_get_device || p_ctx_get_device(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

int hooks_mem_info(uint64_t *free_b, uint64_t *total_b)
{
    if (!p_mem_get_info)
        p_mem_get_info = (mem_get_info_fn)resolve_driver("cuMemGetInfo_v2");
    size_t f = 0, t = 0;
    if (!p_mem_get_info || p_mem_get_info(&f, &t) != CUDA_SUCCESS)
        return -1;
    *free_b = f;
    *total_b = t;
    return 0;
}

void hooks_note_device(int dev)
{
    static _Atomic int claimed[MSNAP_MAX_DEVICES];
    if (dev < 0 || dev >= MSNAP_MAX_DEVICES ||
        core_device_ready(dev) ||
        atomic_exchange(&claimed[dev], 1))
        return;
    core_device *cd = &g_devices[dev];
    cd->info.index = dev;
    dev_name_fn name = (dev_name_fn)resolve_driver("cuDeviceGetName");
    dev_total_fn total = (dev_total_fn)resolve_driver("cuDeviceTotalMem_v2");
    if (!name || name(cd->info.name, (int)sizeof cd->info.name, dev) != CUDA_SUCCESS)
        snprintf(cd->info.name, sizeof cd->info.name, "device %d", dev);
    size_t t = 0;
    if (total && total(&t, dev) == CUDA_SUCCESS)
        cd->info.total = t;
    /* The bus id names the device to NVML whatever CUDA_VISIBLE_DEVICES
     * did to the ordinals; the program has initialised CUDA by now (it
     * used this device), so the query changes nothing for it. */
    dev_pci_fn pci = (dev_pci_fn)resolve_driver("cuDeviceGetPCIBusId");
    if (!pci || pci(cd->pci_bus_id, (int)sizeof cd->pci_bus_id, dev) != CUDA_SUCCESS)
        cd->pci_bus_id[0] = '\0';
    atomic_fetch_or_explicit(&g_devices_ready_mask, 1ull << dev, memory_order_release);
}

/* ---- recording helpers ----------------------------------------------------------- */

static void rec(int action, int api, int dev, uint64_t addr, uint64_t size, uint64_t stream,
                uint64_t aux, uint64_t aux2, int urgent)
{
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = core_stamp();
    e.action = (uint16_t)action;
    e.api = (uint16_t)api;
    e.device = (int16_t)dev;
    e.addr = addr;
    e.size = size;
    e.stream = stream;
    e.aux = aux;
    e.aux2 = aux2;
    e.stack = core_capture_stack();
    core_emit(&e, urgent);
}

/* A successful allocation on the current context's device. */
static void rec_alloc(int action, int api, uint64_t addr, uint64_t size, uint64_t stream,
                      uint64_t aux)
{
    int dev = action == MSNAP_A_HOST_ALLOC ? -1 : hooks_current_device();
    hooks_note_device(dev);
    rec(action, api, dev, addr, size, stream, aux, 0, 0);
}

/* A failed allocation: oom (with the device's free and total) or alloc_error. */
static void rec_fail(int api, int dev, uint64_t size, CUresult r)
{
    uint64_t f = 0, t = 0;
    int oom = r == CUDA_ERROR_OUT_OF_MEMORY;
    if (oom)
        hooks_mem_info(&f, &t);
    if (dev == -2)
        dev = hooks_current_device();
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = core_stamp();
    e.action = oom ? MSNAP_A_OOM : MSNAP_A_ALLOC_ERROR;
    e.api = (uint16_t)api;
    e.device = (int16_t)dev;
    e.size = size;
    e.aux = f;
    e.aux2 = t;
    e.result = (int16_t)(r > 32767 ? 32767 : r);
    e.stack = core_capture_stack();
    core_emit(&e, oom);
}

static void rec_free_error(int api, uint64_t addr, uint64_t aux, CUresult r)
{
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = core_stamp();
    e.action = MSNAP_A_FREE_ERROR;
    e.api = (uint16_t)api;
    e.device = -1;
    e.addr = addr;
    e.aux = aux;
    e.result = (int16_t)(r > 32767 ? 32767 : r);
    core_emit(&e, 0);
}

/* ---- the hooks --------------------------------------------------------------------- */

/* A driver memory call: counted in flight from before its event is stamped
 * until after the driver returned (g_memops_*, recorder.h).  Rare calls (a
 * training step makes a handful), so the two atomics cost nothing seen. */
#define ENTER(call)                                       \
    if (!core_recording())                                \
        return call;                                      \
    atomic_fetch_add(&g_memops_begun, 1);                 \
    t_in_hook++;
#define LEAVE(r)                                          \
    t_in_hook--;                                          \
    atomic_fetch_add(&g_memops_done, 1);                  \
    return r;

static CUresult hook_cuMemAlloc_v2(fn_cuMemAlloc_v2 real, CUdeviceptr *a, size_t b)
{
    ENTER(real(a, b));
    CUresult r = real(a, b);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_ALLOC, MSNAP_API_cuMemAlloc_v2, *a, b, 0, 0);
    else
        rec_fail(MSNAP_API_cuMemAlloc_v2, -2, b, r);
    torch_on_driver_alloc();
    LEAVE(r);
}

static CUresult hook_cuMemAllocPitch_v2(fn_cuMemAllocPitch_v2 real, CUdeviceptr *a, size_t *b,
                                        size_t c, size_t d, unsigned int e)
{
    ENTER(real(a, b, c, d, e));
    CUresult r = real(a, b, c, d, e);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_ALLOC, MSNAP_API_cuMemAllocPitch_v2, *a, (uint64_t)*b * d, 0, 0);
    else
        rec_fail(MSNAP_API_cuMemAllocPitch_v2, -2, (uint64_t)c * d, r);
    LEAVE(r);
}

static CUresult hook_cuMemAllocManaged(fn_cuMemAllocManaged real, CUdeviceptr *a, size_t b,
                                       unsigned int c)
{
    ENTER(real(a, b, c));
    CUresult r = real(a, b, c);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_MANAGED_ALLOC, MSNAP_API_cuMemAllocManaged, *a, b, 0, c);
    else
        rec_fail(MSNAP_API_cuMemAllocManaged, -2, b, r);
    LEAVE(r);
}

static CUresult hook_cuMemFree_v2(fn_cuMemFree_v2 real, CUdeviceptr a)
{
    if (a == 0)
        return real(a);
    ENTER(real(a));
    rec(MSNAP_A_FREE, MSNAP_API_cuMemFree_v2, -1, a, 0, 0, 0, 0, 0);
    CUresult r = real(a);
    if (r != CUDA_SUCCESS)
        rec_free_error(MSNAP_API_cuMemFree_v2, a, 0, r);
    LEAVE(r);
}

static CUresult async_alloc(void *real, int api, CUdeviceptr *a, size_t b, CUmemoryPool pool,
                            CUstream s)
{
    CUresult r = pool ? ((fn_cuMemAllocFromPoolAsync)real)(a, b, pool, s)
                      : ((fn_cuMemAllocAsync)real)(a, b, s);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_ASYNC_ALLOC, api, *a, b, (uint64_t)(uintptr_t)s,
                  (uint64_t)(uintptr_t)pool);
    else
        rec_fail(api, -2, b, r);
    return r;
}

static CUresult hook_cuMemAllocAsync(fn_cuMemAllocAsync real, CUdeviceptr *a, size_t b,
                                     CUstream c)
{
    ENTER(real(a, b, c));
    CUresult r = async_alloc((void *)real, MSNAP_API_cuMemAllocAsync, a, b, NULL, c);
    LEAVE(r);
}

static CUresult hook_cuMemAllocAsync_ptsz(fn_cuMemAllocAsync_ptsz real, CUdeviceptr *a,
                                          size_t b, CUstream c)
{
    ENTER(real(a, b, c));
    CUresult r = async_alloc((void *)real, MSNAP_API_cuMemAllocAsync_ptsz, a, b, NULL, c);
    LEAVE(r);
}

static CUresult hook_cuMemAllocFromPoolAsync(fn_cuMemAllocFromPoolAsync real, CUdeviceptr *a,
                                             size_t b, CUmemoryPool c, CUstream d)
{
    ENTER(real(a, b, c, d));
    CUresult r;
    if (!c)   /* a NULL pool is the driver's error to report, not ours */
        r = real(a, b, c, d);
    else
        r = async_alloc((void *)real, MSNAP_API_cuMemAllocFromPoolAsync, a, b, c, d);
    LEAVE(r);
}

static CUresult hook_cuMemAllocFromPoolAsync_ptsz(fn_cuMemAllocFromPoolAsync_ptsz real,
                                                  CUdeviceptr *a, size_t b, CUmemoryPool c,
                                                  CUstream d)
{
    ENTER(real(a, b, c, d));
    CUresult r;
    if (!c)
        r = real(a, b, c, d);
    else
        r = async_alloc((void *)real, MSNAP_API_cuMemAllocFromPoolAsync_ptsz, a, b, c, d);
    LEAVE(r);
}

static CUresult async_free(fn_cuMemFreeAsync real, int api, CUdeviceptr a, CUstream s)
{
    rec(MSNAP_A_ASYNC_FREE, api, -1, a, 0, (uint64_t)(uintptr_t)s, 0, 0, 0);
    CUresult r = real(a, s);
    if (r != CUDA_SUCCESS)
        rec_free_error(api, a, 0, r);
    return r;
}

static CUresult hook_cuMemFreeAsync(fn_cuMemFreeAsync real, CUdeviceptr a, CUstream b)
{
    if (a == 0)
        return real(a, b);
    ENTER(real(a, b));
    CUresult r = async_free(real, MSNAP_API_cuMemFreeAsync, a, b);
    LEAVE(r);
}

static CUresult hook_cuMemFreeAsync_ptsz(fn_cuMemFreeAsync_ptsz real, CUdeviceptr a,
                                         CUstream b)
{
    if (a == 0)
        return real(a, b);
    ENTER(real(a, b));
    CUresult r = async_free(real, MSNAP_API_cuMemFreeAsync_ptsz, a, b);
    LEAVE(r);
}

static CUresult hook_cuMemCreate(fn_cuMemCreate real, CUmemGenericAllocationHandle *a,
                                 size_t b, const CUmemAllocationProp *c, unsigned long long d)
{
    ENTER(real(a, b, c, d));
    CUresult r = real(a, b, c, d);
    int dev = c && c->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? c->location.id : -1;
    if (r == CUDA_SUCCESS) {
        hooks_note_device(dev);
        rec(MSNAP_A_VMM_CREATE, MSNAP_API_cuMemCreate, dev, 0, b, 0, (uint64_t)*a, 0, 0);
    } else {
        rec_fail(MSNAP_API_cuMemCreate, dev, b, r);
    }
    torch_on_driver_alloc();
    LEAVE(r);
}

static CUresult hook_cuMemRelease(fn_cuMemRelease real, CUmemGenericAllocationHandle a)
{
    ENTER(real(a));
    rec(MSNAP_A_VMM_RELEASE, MSNAP_API_cuMemRelease, -1, 0, 0, 0, (uint64_t)a, 0, 0);
    CUresult r = real(a);
    if (r != CUDA_SUCCESS)
        rec_free_error(MSNAP_API_cuMemRelease, 0, (uint64_t)a, r);
    LEAVE(r);
}

static CUresult hook_cuMemMap(fn_cuMemMap real, CUdeviceptr a, size_t b, size_t c,
                              CUmemGenericAllocationHandle d, unsigned long long e)
{
    ENTER(real(a, b, c, d, e));
    CUresult r = real(a, b, c, d, e);
    if (r == CUDA_SUCCESS)
        rec(MSNAP_A_VMM_MAP, MSNAP_API_cuMemMap, -1, a, b, 0, (uint64_t)d, c, 0);
    else
        rec_fail(MSNAP_API_cuMemMap, -1, b, r);
    LEAVE(r);
}

static CUresult hook_cuMemUnmap(fn_cuMemUnmap real, CUdeviceptr a, size_t b)
{
    ENTER(real(a, b));
    rec(MSNAP_A_VMM_UNMAP, MSNAP_API_cuMemUnmap, -1, a, b, 0, 0, 0, 0);
    CUresult r = real(a, b);
    if (r != CUDA_SUCCESS)
        rec_free_error(MSNAP_API_cuMemUnmap, a, 0, r);
    LEAVE(r);
}

static CUresult hook_cuMemAddressReserve(fn_cuMemAddressReserve real, CUdeviceptr *a, size_t b,
                                         size_t c, CUdeviceptr d, unsigned long long e)
{
    ENTER(real(a, b, c, d, e));
    CUresult r = real(a, b, c, d, e);
    if (r == CUDA_SUCCESS)
        rec(MSNAP_A_VMM_RESERVE, MSNAP_API_cuMemAddressReserve, -1, *a, b, 0, c, 0, 0);
    else
        rec_fail(MSNAP_API_cuMemAddressReserve, -1, b, r);
    torch_on_driver_alloc();
    LEAVE(r);
}

static CUresult hook_cuMemAddressFree(fn_cuMemAddressFree real, CUdeviceptr a, size_t b)
{
    ENTER(real(a, b));
    rec(MSNAP_A_VMM_ADDR_FREE, MSNAP_API_cuMemAddressFree, -1, a, b, 0, 0, 0, 0);
    CUresult r = real(a, b);
    if (r != CUDA_SUCCESS)
        rec_free_error(MSNAP_API_cuMemAddressFree, a, 0, r);
    LEAVE(r);
}

static CUresult hook_cuMemHostAlloc(fn_cuMemHostAlloc real, void **a, size_t b, unsigned int c)
{
    ENTER(real(a, b, c));
    CUresult r = real(a, b, c);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_HOST_ALLOC, MSNAP_API_cuMemHostAlloc, (uint64_t)(uintptr_t)*a, b, 0, c);
    else
        rec_fail(MSNAP_API_cuMemHostAlloc, -1, b, r);
    LEAVE(r);
}

static CUresult hook_cuMemAllocHost_v2(fn_cuMemAllocHost_v2 real, void **a, size_t b)
{
    ENTER(real(a, b));
    CUresult r = real(a, b);
    if (r == CUDA_SUCCESS)
        rec_alloc(MSNAP_A_HOST_ALLOC, MSNAP_API_cuMemAllocHost_v2, (uint64_t)(uintptr_t)*a, b, 0,
                  0);
    else
        rec_fail(MSNAP_API_cuMemAllocHost_v2, -1, b, r);
    LEAVE(r);
}

static CUresult hook_cuMemFreeHost(fn_cuMemFreeHost real, void *a)
{
    if (!a)
        return real(a);
    ENTER(real(a));
    rec(MSNAP_A_HOST_FREE, MSNAP_API_cuMemFreeHost, -1, (uint64_t)(uintptr_t)a, 0, 0, 0, 0, 0);
    CUresult r = real(a);
    if (r != CUDA_SUCCESS)
        rec_free_error(MSNAP_API_cuMemFreeHost, (uint64_t)(uintptr_t)a, 0, r);
    LEAVE(r);
}

/* Entry points are wrapped whether or not recording is on: a program that
 * gets its pointers before the first event must still be recorded later.
 * Wrapping is pure bookkeeping, no CUDA call. */
static void wrap_proc(const char *sym, void **pfn, int version, cuuint64_t flags)
{
    if (!pfn || !*pfn)
        return;
    int id = id_for_proc(sym, version, flags);
    if (id >= 0)
        *pfn = wrap_ptr(id, *pfn);
}

static CUresult hook_cuGetProcAddress_v2(fn_cuGetProcAddress_v2 real, const char *a, void **b,
                                         int c, cuuint64_t d,
                                         CUdriverProcAddressQueryResult *e)
{
    CUresult r = real(a, b, c, d, e);
    if (r == CUDA_SUCCESS && (!e || *e == CU_GET_PROC_ADDRESS_SUCCESS))
        wrap_proc(a, b, c, d);
    return r;
}

static CUresult hook_cuGetProcAddress(fn_cuGetProcAddress real, const char *a, void **b, int c,
                                      cuuint64_t d)
{
    CUresult r = real(a, b, c, d);
    if (r == CUDA_SUCCESS)
        wrap_proc(a, b, c, d);
    return r;
}

/* ---- dlsym --------------------------------------------------------------------------
 * Called by the dlsym trampoline (dlsym_x86_64.S).  Returns 1 and *result for
 * the names we hook; 0 means "forward to glibc's dlsym unchanged". */
NO_SANITIZE __attribute__((visibility("hidden"))) int memsnap_dlsym_pre(void *handle, const char *name,
                                                            void **result)
{
    dlsym_fn ds = real_dlsym();
    if (!ds) {              /* no glibc dlsym to jump to: answer "not found" */
        *result = NULL;
        return 1;
    }
    if (!name)
        return 0;
    int id = id_for_exported(name);
    if (id < 0)
        return 0;
    void *p = ds(handle, name);
    if (p && core_is_own_code(p)) {
        *result = p;
        return 1;
    }
    *result = wrap_ptr(id, p);
    return 1;
}

#if !defined(__x86_64__)
/* Without the trampoline, unmatched lookups lose the caller (RTLD_NEXT then
 * means "next after libmemsnap.so"). */
MSNAP_EXPORT void *dlsym(void *handle, const char *name)
{
    void *res;
    if (memsnap_dlsym_pre(handle, name, &res))
        return res;
    return real_dlsym()(handle, name);
}
#endif

/* ---- cudaGetDriverEntryPoint (dynamic cudart) --------------------------------------- */

typedef int (*gdep_fn)(const char *, void **, unsigned long long, int *);
typedef int (*gdepv_fn)(const char *, void **, unsigned int, unsigned long long, int *);

static int gdep(const char *which, const char *sym, void **fp, unsigned long long flags, int *st)
{
    gdep_fn real = (gdep_fn)real_dlsym()(RTLD_NEXT, which);
    if (!real)
        return 500; /* cudaErrorSymbolNotFound: no cudart to forward to */
    int r = real(sym, fp, flags, st);
    if (r == 0 && (!st || *st == 0))
        wrap_proc(sym, fp, CUDA_VERSION, flags);
    return r;
}

static int gdepv(const char *which, const char *sym, void **fp, unsigned int ver,
                 unsigned long long flags, int *st)
{
    gdepv_fn real = (gdepv_fn)real_dlsym()(RTLD_NEXT, which);
    if (!real)
        return 500;
    int r = real(sym, fp, ver, flags, st);
    if (r == 0 && (!st || *st == 0))
        wrap_proc(sym, fp, (int)ver, flags);
    return r;
}

MSNAP_EXPORT int cudaGetDriverEntryPoint(const char *s, void **fp, unsigned long long f, int *st)
{
    return gdep("cudaGetDriverEntryPoint", s, fp, f, st);
}
MSNAP_EXPORT int cudaGetDriverEntryPoint_ptsz(const char *s, void **fp, unsigned long long f,
                                              int *st)
{
    return gdep("cudaGetDriverEntryPoint_ptsz", s, fp, f, st);
}
MSNAP_EXPORT int cudaGetDriverEntryPointByVersion(const char *s, void **fp, unsigned int v,
                                                  unsigned long long f, int *st)
{
    return gdepv("cudaGetDriverEntryPointByVersion", s, fp, v, f, st);
}
MSNAP_EXPORT int cudaGetDriverEntryPointByVersion_ptsz(const char *s, void **fp, unsigned int v,
                                                       unsigned long long f, int *st)
{
    return gdepv("cudaGetDriverEntryPointByVersion_ptsz", s, fp, v, f, st);
}

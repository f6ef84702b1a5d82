/* driver.c: the allocator's contact with the outside world.
 *
 *  - The default driver table: libcuda.so.1 opened with dlopen and each
 *    function looked up with dlsym, once, on first use.  The library does not
 *    name libcuda.so.1 as a needed library, so a program linking it starts
 *    (and can print its --help) on a machine without the driver; the
 *    allocator then fails to create with a one-line error.  An LD_PRELOADed
 *    recorder still sees every call: it interposes dlsym and hands back its
 *    wrappers for the names it records, so the allocator's segments and
 *    pages are recorded as the reserved layer for free.
 *  - Context entry: driver calls run in the allocator's context; when the
 *    calling thread has another one current, ours is pushed for the call.
 *  - The recorder hooks (memsnap_trace_block, memsnap_annotate), found with
 *    dlsym(RTLD_DEFAULT) once per allocator; NULL when no recorder is loaded.
 *  - Error messages: one thread-local line per failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdarg.h>
#include <string.h>

#include "internal.h"

/* The table's fields, in declaration order: one list for filling the default
 * table and for checking a table before use. */
#define MS_DRIVER_FUNCS(X)                                                          \
    X(cuInit) X(cuCtxGetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)       \
    X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuDevicePrimaryCtxRetain)              \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDeviceTotalMem_v2) X(cuMemGetInfo_v2)      \
    X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAddressReserve) X(cuMemAddressFree)    \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)     \
    X(cuMemGetAllocationGranularity) X(cuEventCreate) X(cuEventRecord)             \
    X(cuEventQuery) X(cuEventSynchronize) X(cuEventDestroy_v2) X(cuStreamSynchronize)

static memsnap_alloc_driver default_driver;   /* all NULL until filled */
static CUresult (*default_error_name)(CUresult, const char **);
static char default_why[256];                 /* why the table is empty */
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* Fills default_driver from libcuda.so.1, all or nothing: on any failure the
 * table stays all NULL and default_why says what was missing.  The handle is
 * kept open for the life of the process. */
static void ms_default_driver_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(default_why, sizeof default_why, "cannot load libcuda.so.1 (%s)",
                 e ? e : "not found");
        return;
    }
    memsnap_alloc_driver t;
#define MS_LOOKUP(f)                                                                \
    *(void **)&t.f = dlsym(h, #f);                                                  \
    if (!t.f) {                                                                     \
        snprintf(default_why, sizeof default_why, "libcuda.so.1 has no %s", #f);    \
        return;                                                                     \
    }
    MS_DRIVER_FUNCS(MS_LOOKUP)
#undef MS_LOOKUP
    *(void **)&default_error_name = dlsym(h, "cuGetErrorName");
    default_driver = t;
}

MS_EXPORT const memsnap_alloc_driver *memsnap_alloc_driver_default(void)
{
    pthread_once(&default_once, ms_default_driver_load);
    return &default_driver;
}

/* MEMSNAP_ALLOC_OK when every function of drv is set; else an error naming
 * the first missing one (or why libcuda.so.1 could not be used), with the
 * message set as coming from `who`. */
int ms_driver_check(const memsnap_alloc_driver *drv, const char *who)
{
#define MS_CHECK(f)                                                                 \
    if (!drv->f) {                                                                  \
        pthread_once(&default_once, ms_default_driver_load);                        \
        if (default_why[0] && !default_driver.cuInit)                               \
            ms_set_error("%s: no CUDA driver: %s", who, default_why);              \
        else                                                                        \
            ms_set_error("%s: the driver table has no %s", who, #f);                \
        return MEMSNAP_ALLOC_ERR_DRIVER;                                            \
    }
    MS_DRIVER_FUNCS(MS_CHECK)
#undef MS_CHECK
    return MEMSNAP_ALLOC_OK;
}

static __thread char tls_error[512];

MS_EXPORT const char *memsnap_alloc_error(void)
{
    return tls_error;
}

void ms_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
}

int ms_is_oom(CUresult rc)
{
    return rc == CUDA_ERROR_OUT_OF_MEMORY;
}

/* Records "FN failed: NAME" as the error and returns the matching code. */
int ms_driver_error(const memsnap_alloc_driver *drv, const char *fn, CUresult rc)
{
    (void)drv;
    const char *name = NULL;
    /* cuGetErrorName is not in the table (it cannot fail in an interesting
     * way); it comes from the same libcuda.so.1 as the default table. */
    pthread_once(&default_once, ms_default_driver_load);
    if (!default_error_name || default_error_name(rc, &name) != CUDA_SUCCESS || !name)
        name = "unknown error";
    ms_set_error("memsnap_alloc: %s failed: %s (%d)", fn, name, (int)rc);
    return ms_is_oom(rc) ? MEMSNAP_ALLOC_ERR_OOM : MEMSNAP_ALLOC_ERR_DRIVER;
}

/* The properties of pinned device memory on device: what every cuMemCreate
 * and granularity query of the allocator uses. */
CUmemAllocationProp ms_device_prop(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* The minimum VMM granularity of device in *g.  MEMSNAP_ALLOC_OK or an error
 * with the message set; *g may be 0 (the caller decides what that means). */
int ms_vmm_granularity(const memsnap_alloc_driver *drv, int device, size_t *g)
{
    CUmemAllocationProp prop = ms_device_prop(device);
    *g = 0;
    CUresult cr = drv->cuMemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (cr != CUDA_SUCCESS)
        return ms_driver_error(drv, "cuMemGetAllocationGranularity", cr);
    return MEMSNAP_ALLOC_OK;
}

/* The context an allocator for device works in: the calling thread's current
 * context when it belongs to device, else device's primary context, retained
 * (*retained = 1; the caller releases it when done).  MEMSNAP_ALLOC_OK or an
 * error with the message set. */
int ms_ctx_acquire(const memsnap_alloc_driver *drv, int device, CUcontext *ctx, int *retained)
{
    CUresult cr;
    CUcontext cur = NULL;
    *ctx = NULL;
    *retained = 0;
    if ((cr = drv->cuCtxGetCurrent(&cur)) != CUDA_SUCCESS)
        return ms_driver_error(drv, "cuCtxGetCurrent", cr);
    if (cur) {
        CUdevice d = -1;
        if ((cr = drv->cuCtxGetDevice(&d)) != CUDA_SUCCESS)
            return ms_driver_error(drv, "cuCtxGetDevice", cr);
        if (d == device)
            *ctx = cur;
    }
    if (!*ctx) {
        if ((cr = drv->cuDevicePrimaryCtxRetain(ctx, device)) != CUDA_SUCCESS)
            return ms_driver_error(drv, "cuDevicePrimaryCtxRetain", cr);
        *retained = 1;
    }
    return MEMSNAP_ALLOC_OK;
}

int ms_ctx_enter(memsnap_alloc *a, int *pushed)
{
    *pushed = 0;
    CUcontext cur = NULL;
    CUresult rc = a->drv.cuCtxGetCurrent(&cur);
    if (rc != CUDA_SUCCESS)
        return ms_driver_error(&a->drv, "cuCtxGetCurrent", rc);
    if (cur == a->ctx)
        return MEMSNAP_ALLOC_OK;
    rc = a->drv.cuCtxPushCurrent_v2(a->ctx);
    if (rc != CUDA_SUCCESS)
        return ms_driver_error(&a->drv, "cuCtxPushCurrent", rc);
    *pushed = 1;
    return MEMSNAP_ALLOC_OK;
}

void ms_ctx_leave(memsnap_alloc *a, int pushed)
{
    if (pushed) {
        CUcontext dummy;
        a->drv.cuCtxPopCurrent_v2(&dummy);
    }
}

void ms_find_hooks(ms_trace_fn *trace, ms_annotate_fn *annotate)
{
    *trace = (ms_trace_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_block");
    *annotate = (ms_annotate_fn)dlsym(RTLD_DEFAULT, "memsnap_annotate");
}

const char *ms_human(uint64_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

/* Devices, contexts, streams, events, modules and kernel launches of the
 * simulated device.
 *
 * Devices look like an H100-class GPU (compute capability 9.0, 132 SMs)
 * named "memsnap simulated device", with the capacity from
 * MEMSNAP_SIM_DEVICE_MEM.  Each device has one primary context (retain /
 * release only count; release and reset never free memory).  The current
 * context is a per-thread stack (cuCtxPush/Pop, cuCtxSetCurrent replaces the
 * top).  Destroyed contexts are marked dead and kept, so a stale handle in
 * another thread is detected instead of touching freed memory.
 *
 * Streams and events are objects whose work is always complete: synchronize
 * and query succeed at once, events record the wall-clock time so
 * cuEventElapsedTime reports the real time between two records, host
 * callbacks run inside the enqueueing call (after the lock is dropped).
 * Modules, libraries, functions and kernels are dummies: loading any image
 * succeeds, every name resolves to one dummy function, launches do nothing.
 */
#define _GNU_SOURCE
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Current-context stack of this thread. */
#define CTX_STACK 64
static __thread sim_ctx *t_stack[CTX_STACK];
static __thread int t_depth;

/* See sim.h. */
sim_ctx *sim_ctx_current(void) { return t_depth ? t_stack[t_depth - 1] : NULL; }

/* See sim.h. */
CUresult sim_ctx_require(sim_ctx **out)
{
    sim_ctx *c = sim_ctx_current();
    if (!c || c->dead)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

/* See sim.h. */
CUresult sim_stream_ctx(CUstream s, sim_ctx **out)
{
    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return sim_ctx_require(out);
    sim_stream *st = sim_obj_get(s, OBJ_STREAM);
    if (!st)
        return CUDA_ERROR_INVALID_HANDLE;
    if (st->ctx->dead)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = st->ctx;
    return CUDA_SUCCESS;
}

/* A live context handle, or NULL. */
static sim_ctx *ctx_get(CUcontext c)
{
    sim_ctx *x = sim_obj_get(c, OBJ_CTX);
    return (x && !x->dead) ? x : NULL;
}

/* ---- devices -------------------------------------------------------- */

/* cuDeviceGet: device handle for ordinal. */
CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_API(cuDeviceGet, SIM_PLAIN);
    if (!device)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(ordinal))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceGetCount: MEMSNAP_SIM_DEVICES. */
CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SIM_API(cuDeviceGetCount, SIM_PLAIN);
    if (!count)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *count = sim_ndev;
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceGetName: "memsnap simulated device", truncated to len. */
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_API(cuDeviceGetName, SIM_PLAIN);
    if (!name || len <= 0)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    snprintf(name, (size_t)len, "%s", "memsnap simulated device");
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceTotalMem_v2: the simulated capacity. */
CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_API(cuDeviceTotalMem_v2, SIM_PLAIN);
    if (!bytes)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *bytes = sim_dev[dev].capacity;
    return sim_return(CUDA_SUCCESS);
}

/* Attribute values of an H100-like device; unlisted attributes are 0. */
static int attr_value(CUdevice_attribute a, CUdevice dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev + 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    default: return 0;
    }
}

/* cuDeviceGetAttribute: see attr_value; INVALID_VALUE past the enum. */
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_API(cuDeviceGetAttribute, SIM_PLAIN);
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *pi = attr_value(attrib, dev);
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceGetUuid_v2 (cuDeviceGetUuid is the same): a fixed UUID whose
 * last byte is the ordinal. */
CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    SIM_API(cuDeviceGetUuid_v2, SIM_PLAIN);
    if (!uuid)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    static const char base[16] = "memsnap-simdev-";
    memcpy(uuid->bytes, base, 16);
    uuid->bytes[15] = (char)dev;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) SIM_ALIAS(cuDeviceGetUuid_v2);

/* cuDeviceGetPCIBusId: "0000:0N:00.0" with N = ordinal + 1. */
CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    SIM_API(cuDeviceGetPCIBusId, SIM_PLAIN);
    if (!pciBusId || len <= 0)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", dev + 1);
    return sim_return(CUDA_SUCCESS);
}

/* cuDeviceCanAccessPeer: any two distinct simulated devices are peers. */
CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    SIM_API(cuDeviceCanAccessPeer, SIM_PLAIN);
    if (!canAccessPeer)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev) || !sim_dev_valid(peerDev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *canAccessPeer = dev != peerDev;
    return sim_return(CUDA_SUCCESS);
}

/* ---- primary contexts ----------------------------------------------- */

/* cuDevicePrimaryCtxRetain: the device's primary context, refcounted. */
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_API(cuDevicePrimaryCtxRetain, SIM_PLAIN);
    if (!pctx)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    sim_dev[dev].primary_refs++;
    *pctx = (CUcontext)&sim_dev[dev].primary;
    return sim_return(CUDA_SUCCESS);
}

/* cuDevicePrimaryCtxRelease_v2: drop one reference (memory stays). */
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_API(cuDevicePrimaryCtxRelease_v2, SIM_PLAIN);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    if (sim_dev[dev].primary_refs <= 0)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    sim_dev[dev].primary_refs--;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) SIM_ALIAS(cuDevicePrimaryCtxRelease_v2);

/* cuDevicePrimaryCtxReset_v2: drop all references and flags (memory stays). */
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SIM_API(cuDevicePrimaryCtxReset_v2, SIM_PLAIN);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    sim_dev[dev].primary_refs = 0;
    sim_dev[dev].primary.flags = 0;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) SIM_ALIAS(cuDevicePrimaryCtxReset_v2);

/* cuDevicePrimaryCtxGetState: flags and whether it is retained. */
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_API(cuDevicePrimaryCtxGetState, SIM_PLAIN);
    if (!flags || !active)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    *flags = sim_dev[dev].primary.flags;
    *active = sim_dev[dev].primary_refs > 0;
    return sim_return(CUDA_SUCCESS);
}

/* cuDevicePrimaryCtxSetFlags_v2: store the flags. */
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    SIM_API(cuDevicePrimaryCtxSetFlags_v2, SIM_PLAIN);
    if (!sim_dev_valid(dev))
        return sim_return(CUDA_ERROR_INVALID_DEVICE);
    sim_dev[dev].primary.flags = flags;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
    SIM_ALIAS(cuDevicePrimaryCtxSetFlags_v2);

/* ---- contexts ------------------------------------------------------- */

/* Create a context on dev and push it on this thread's stack. */
static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (t_depth >= CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->hdr.type = OBJ_CTX;
    c->dev = dev;
    c->flags = flags;
    c->id = sim_next_id++;
    if (sim_obj_add(c) < 0) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    t_stack[t_depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

/* cuCtxCreate_v2 (and v1 cuCtxCreate, same ABI). */
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_API(cuCtxCreate_v2, SIM_PLAIN);
    return sim_return(ctx_create(pctx, flags, dev));
}
CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
    SIM_ALIAS(cuCtxCreate_v2);

/* cuCtxCreate_v3: affinity parameters are accepted and ignored. */
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev)
{
    SIM_API(cuCtxCreate_v3, SIM_PLAIN);
    (void)paramsArray;
    if (numParams < 0)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    return sim_return(ctx_create(pctx, flags, dev));
}

/* cuCtxCreate_v4 (what cuda.h 13 calls cuCtxCreate): parameters ignored. */
CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
    SIM_API(cuCtxCreate_v4, SIM_PLAIN);
    (void)ctxCreateParams;
    return sim_return(ctx_create(pctx, flags, dev));
}

/* cuCtxDestroy_v2: mark dead, pop it if current here.  Primary contexts
 * cannot be destroyed (INVALID_CONTEXT).  Its memory is not freed. */
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_API(cuCtxDestroy_v2, SIM_PLAIN);
    sim_ctx *c = ctx_get(ctx);
    if (!c || c->primary)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    c->dead = 1;
    for (int i = 0; i < t_depth; i++) {
        if (t_stack[i] == c) {
            memmove(&t_stack[i], &t_stack[i + 1], (size_t)(t_depth - i - 1) * sizeof t_stack[0]);
            t_depth--;
            i--;
        }
    }
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) SIM_ALIAS(cuCtxDestroy_v2);

/* cuCtxSetCurrent: replace the top of this thread's stack (NULL pops). */
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SIM_API(cuCtxSetCurrent, SIM_PLAIN);
    if (!ctx) {
        if (t_depth)
            t_depth--;
        return sim_return(CUDA_SUCCESS);
    }
    sim_ctx *c = ctx_get(ctx);
    if (!c)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    if (t_depth)
        t_stack[t_depth - 1] = c;
    else
        t_stack[t_depth++] = c;
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxGetCurrent: top of this thread's stack, or NULL. */
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_API(cuCtxGetCurrent, SIM_PLAIN);
    if (!pctx)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pctx = (CUcontext)sim_ctx_current();
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxPushCurrent_v2 (and cuCtxPushCurrent). */
CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_API(cuCtxPushCurrent_v2, SIM_PLAIN);
    sim_ctx *c = ctx_get(ctx);
    if (!c)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    if (t_depth >= CTX_STACK)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    t_stack[t_depth++] = c;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) SIM_ALIAS(cuCtxPushCurrent_v2);

/* cuCtxPopCurrent_v2 (and cuCtxPopCurrent); pctx may be NULL. */
CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_API(cuCtxPopCurrent_v2, SIM_PLAIN);
    if (!t_depth)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    sim_ctx *c = t_stack[--t_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) SIM_ALIAS(cuCtxPopCurrent_v2);

/* cuCtxGetDevice: device of the current context. */
CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    SIM_API(cuCtxGetDevice, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc == CUDA_SUCCESS) {
        if (!device)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *device = c->dev;
    }
    return sim_return(rc);
}

/* cuCtxGetFlags: flags of the current context. */
CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    SIM_API(cuCtxGetFlags, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc == CUDA_SUCCESS) {
        if (!flags)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *flags = c->flags;
    }
    return sim_return(rc);
}

/* cuCtxGetId: unique id of ctx (NULL: current). */
CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    SIM_API(cuCtxGetId, SIM_PLAIN);
    sim_ctx *c = ctx ? ctx_get(ctx) : sim_ctx_current();
    if (!c)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    if (!ctxId)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *ctxId = c->id;
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxGetApiVersion: 13000 for any live context (NULL: current). */
CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_API(cuCtxGetApiVersion, SIM_PLAIN);
    sim_ctx *c = ctx ? ctx_get(ctx) : sim_ctx_current();
    if (!c)
        return sim_return(CUDA_ERROR_INVALID_CONTEXT);
    if (!version)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *version = 13000;
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxSynchronize: all work is complete; needs a current context. */
CUresult CUDAAPI cuCtxSynchronize(void)
{
    SIM_API(cuCtxSynchronize, SIM_PLAIN);
    sim_ctx *c;
    return sim_return(sim_ctx_require(&c));
}

/* cuCtxGetStreamPriorityRange: 0 (least) .. -5 (greatest), as on H100. */
CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SIM_API(cuCtxGetStreamPriorityRange, SIM_PLAIN);
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxGetLimit: plausible defaults; needs a current context. */
CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    SIM_API(cuCtxGetLimit, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    if (!pvalue)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    switch (limit) {
    case CU_LIMIT_STACK_SIZE: *pvalue = 1024; break;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *pvalue = 1 << 20; break;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *pvalue = 8 << 20; break;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: *pvalue = 2048; break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: *pvalue = 64; break;
    default: *pvalue = 0; break;
    }
    return sim_return(CUDA_SUCCESS);
}

/* cuCtxSetLimit: accepted and ignored; needs a current context. */
CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    SIM_API(cuCtxSetLimit, SIM_PLAIN);
    (void)limit;
    (void)value;
    sim_ctx *c;
    return sim_return(sim_ctx_require(&c));
}

/* ---- streams -------------------------------------------------------- */

/* Create a stream in the current context. */
static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_stream *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->hdr.type = OBJ_STREAM;
    s->ctx = c;
    s->flags = flags;
    s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    s->id = sim_next_id++;
    if (sim_obj_add(s) < 0) {
        free(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_live.streams++;
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

/* cuStreamCreate. */
CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_API(cuStreamCreate, SIM_PLAIN);
    return sim_return(stream_create(phStream, Flags, 0));
}

/* cuStreamCreateWithPriority: priority clamped to the range. */
CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_API(cuStreamCreateWithPriority, SIM_PLAIN);
    return sim_return(stream_create(phStream, flags, priority));
}

/* cuStreamDestroy_v2 (and cuStreamDestroy). */
CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    SIM_API(cuStreamDestroy_v2, SIM_PLAIN);
    sim_stream *s = sim_obj_get(hStream, OBJ_STREAM);
    if (!s)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    sim_obj_del(s);
    s->hdr.type = 0;
    free(s);
    sim_live.streams--;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuStreamDestroy(CUstream hStream) SIM_ALIAS(cuStreamDestroy_v2);

/* cuStreamSynchronize (+_ptsz): complete at once. */
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    SIM_API(cuStreamSynchronize, SIM_PLAIN);
    sim_ctx *c;
    return sim_return(sim_stream_ctx(hStream, &c));
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) SIM_ALIAS(cuStreamSynchronize);

/* cuStreamQuery (+_ptsz): always CUDA_SUCCESS (idle). */
CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    SIM_API(cuStreamQuery, SIM_PLAIN);
    sim_ctx *c;
    return sim_return(sim_stream_ctx(hStream, &c));
}
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) SIM_ALIAS(cuStreamQuery);

/* cuStreamWaitEvent (+_ptsz): nothing to wait for. */
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    SIM_API(cuStreamWaitEvent, SIM_PLAIN);
    (void)Flags;
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS && !sim_obj_get(hEvent, OBJ_EVENT))
        rc = CUDA_ERROR_INVALID_HANDLE;
    return sim_return(rc);
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
    SIM_ALIAS(cuStreamWaitEvent);

/* cuStreamGetCtx (+_ptsz). */
CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    SIM_API(cuStreamGetCtx, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS) {
        if (!pctx)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *pctx = (CUcontext)c;
    }
    return sim_return(rc);
}
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx) SIM_ALIAS(cuStreamGetCtx);

/* cuStreamGetFlags (+_ptsz). */
CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    SIM_API(cuStreamGetFlags, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS) {
        sim_stream *s = sim_obj_get(hStream, OBJ_STREAM);
        if (!flags)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *flags = s ? s->flags : 0;
    }
    return sim_return(rc);
}
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) SIM_ALIAS(cuStreamGetFlags);

/* cuStreamGetPriority (+_ptsz). */
CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
    SIM_API(cuStreamGetPriority, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS) {
        sim_stream *s = sim_obj_get(hStream, OBJ_STREAM);
        if (!priority)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *priority = s ? s->priority : 0;
    }
    return sim_return(rc);
}
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int *priority) SIM_ALIAS(cuStreamGetPriority);

/* cuStreamIsCapturing (+_ptsz): never capturing. */
CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_API(cuStreamIsCapturing, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS) {
        if (!captureStatus)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
    }
    return sim_return(rc);
}
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
    SIM_ALIAS(cuStreamIsCapturing);

/* cuLaunchHostFunc (+_ptsz): runs fn now, outside the lock. */
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    SIM_API(cuLaunchHostFunc, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS && !fn)
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    if (rc == CUDA_SUCCESS)
        fn(userData);
    return rc;
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
    SIM_ALIAS(cuLaunchHostFunc);

/* cuStreamAddCallback (+_ptsz): runs the callback now, outside the lock. */
CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                     unsigned int flags)
{
    SIM_API(cuStreamAddCallback, SIM_PLAIN);
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc == CUDA_SUCCESS && (!callback || flags != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    sim_unlock();
    if (rc == CUDA_SUCCESS)
        callback(hStream, CUDA_SUCCESS, userData);
    return rc;
}
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                          unsigned int flags) SIM_ALIAS(cuStreamAddCallback);

/* ---- events --------------------------------------------------------- */

/* cuEventCreate: needs a current context. */
CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_API(cuEventCreate, SIM_PLAIN);
    if (!phEvent)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return sim_return(rc);
    sim_event *e = calloc(1, sizeof *e);
    if (!e)
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    e->hdr.type = OBJ_EVENT;
    e->ctx = c;
    e->flags = Flags;
    if (sim_obj_add(e) < 0) {
        free(e);
        return sim_return(CUDA_ERROR_OUT_OF_MEMORY);
    }
    sim_live.events++;
    *phEvent = (CUevent)e;
    return sim_return(CUDA_SUCCESS);
}

/* Record the event now (lock held). */
static CUresult event_record(CUevent hEvent, CUstream hStream)
{
    sim_event *e = sim_obj_get(hEvent, OBJ_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_ctx *c;
    CUresult rc = sim_stream_ctx(hStream, &c);
    if (rc != CUDA_SUCCESS)
        return rc;
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    e->recorded = 1;
    return CUDA_SUCCESS;
}

/* cuEventRecord (+_ptsz): timestamp now. */
CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    SIM_API(cuEventRecord, SIM_PLAIN);
    return sim_return(event_record(hEvent, hStream));
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) SIM_ALIAS(cuEventRecord);

/* cuEventRecordWithFlags (+_ptsz). */
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    SIM_API(cuEventRecordWithFlags, SIM_PLAIN);
    (void)flags;
    return sim_return(event_record(hEvent, hStream));
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
    SIM_ALIAS(cuEventRecordWithFlags);

/* cuEventQuery: always complete. */
CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    SIM_API(cuEventQuery, SIM_PLAIN);
    return sim_return(sim_obj_get(hEvent, OBJ_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

/* cuEventSynchronize: always complete. */
CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    SIM_API(cuEventSynchronize, SIM_PLAIN);
    return sim_return(sim_obj_get(hEvent, OBJ_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

/* cuEventDestroy_v2 (and cuEventDestroy). */
CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    SIM_API(cuEventDestroy_v2, SIM_PLAIN);
    sim_event *e = sim_obj_get(hEvent, OBJ_EVENT);
    if (!e)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    sim_obj_del(e);
    e->hdr.type = 0;
    free(e);
    sim_live.events--;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuEventDestroy(CUevent hEvent) SIM_ALIAS(cuEventDestroy_v2);

/* cuEventElapsedTime_v2 (and v1): milliseconds between two records;
 * INVALID_HANDLE if either is unrecorded or created without timing. */
CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    SIM_API(cuEventElapsedTime_v2, SIM_PLAIN);
    sim_event *a = sim_obj_get(hStart, OBJ_EVENT), *b = sim_obj_get(hEnd, OBJ_EVENT);
    if (!pMilliseconds)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    if (!a || !b || !a->recorded || !b->recorded ||
        ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    double ms = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
                (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
    *pMilliseconds = (float)ms;
    return sim_return(CUDA_SUCCESS);
}
CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
    SIM_ALIAS(cuEventElapsedTime_v2);

/* ---- modules, libraries, kernels ------------------------------------ */

/* A loaded module or library; its one dummy function lives inside it. */
typedef struct sim_module {
    sim_obj hdr;
    sim_obj func;   /* what every CUfunction / CUkernel handle points to */
} sim_module;

/* Make a module (type OBJ_MODULE or OBJ_LIBRARY). */
static CUresult module_new(void **out, const void *image, int type)
{
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    sim_module *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->hdr.type = type;
    m->func.type = type;
    if (sim_obj_add(m) < 0) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = m;
    return CUDA_SUCCESS;
}

/* Module load needs a current context; the image is not read. */
static CUresult module_load(CUmodule *module, const void *image)
{
    sim_ctx *c;
    CUresult rc = sim_ctx_require(&c);
    if (rc != CUDA_SUCCESS)
        return rc;
    return module_new((void **)module, image, OBJ_MODULE);
}

/* cuModuleLoad: the file is not read. */
CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    SIM_API(cuModuleLoad, SIM_PLAIN);
    return sim_return(module_load(module, fname));
}

/* cuModuleLoadData: dummy module. */
CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    SIM_API(cuModuleLoadData, SIM_PLAIN);
    return sim_return(module_load(module, image));
}

/* cuModuleLoadDataEx: dummy module, options ignored. */
CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    SIM_API(cuModuleLoadDataEx, SIM_PLAIN);
    (void)numOptions;
    (void)options;
    (void)optionValues;
    return sim_return(module_load(module, image));
}

/* cuModuleLoadFatBinary: dummy module. */
CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    SIM_API(cuModuleLoadFatBinary, SIM_PLAIN);
    return sim_return(module_load(module, fatCubin));
}

/* Free a module or library of the given type. */
static CUresult module_free(void *h, int type)
{
    sim_module *m = sim_obj_get(h, type);
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_obj_del(m);
    m->hdr.type = 0;
    free(m);
    return CUDA_SUCCESS;
}

/* cuModuleUnload. */
CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    SIM_API(cuModuleUnload, SIM_PLAIN);
    return sim_return(module_free(hmod, OBJ_MODULE));
}

/* cuModuleGetFunction: every name resolves to the module's dummy. */
CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    SIM_API(cuModuleGetFunction, SIM_PLAIN);
    sim_module *m = sim_obj_get(hmod, OBJ_MODULE);
    if (!m)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    if (!hfunc || !name)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *hfunc = (CUfunction)&m->func;
    return sim_return(CUDA_SUCCESS);
}

/* cuModuleGetGlobal_v2: modules have no globals (NOT_FOUND). */
CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    SIM_API(cuModuleGetGlobal_v2, SIM_PLAIN);
    (void)dptr;
    (void)bytes;
    if (!sim_obj_get(hmod, OBJ_MODULE))
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    return sim_return(name ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_VALUE);
}

/* cuModuleGetLoadingMode: eager. */
CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    SIM_API(cuModuleGetLoadingMode, SIM_PLAIN);
    if (!mode)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *mode = CU_MODULE_EAGER_LOADING;
    return sim_return(CUDA_SUCCESS);
}

/* cuLibraryLoadData: dummy library (no context needed). */
CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions)
{
    SIM_API(cuLibraryLoadData, SIM_PLAIN);
    (void)jitOptions;
    (void)jitOptionsValues;
    (void)numJitOptions;
    (void)libraryOptions;
    (void)libraryOptionValues;
    (void)numLibraryOptions;
    return sim_return(module_new((void **)library, code, OBJ_LIBRARY));
}

/* cuLibraryUnload. */
CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    SIM_API(cuLibraryUnload, SIM_PLAIN);
    return sim_return(module_free(library, OBJ_LIBRARY));
}

/* cuLibraryGetKernel: every name resolves to the library's dummy. */
CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    SIM_API(cuLibraryGetKernel, SIM_PLAIN);
    sim_module *m = sim_obj_get(library, OBJ_LIBRARY);
    if (!m)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    if (!pKernel || !name)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pKernel = (CUkernel)&m->func;
    return sim_return(CUDA_SUCCESS);
}

/* cuKernelGetFunction: the kernel handle doubles as the function. */
CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    SIM_API(cuKernelGetFunction, SIM_PLAIN);
    if (!pFunc || !kernel)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pFunc = (CUfunction)kernel;
    return sim_return(CUDA_SUCCESS);
}

/* cuFuncGetAttribute: 1024 threads per block, 0 for everything else. */
CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SIM_API(cuFuncGetAttribute, SIM_PLAIN);
    if (!pi || !hfunc)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return sim_return(CUDA_SUCCESS);
}

/* cuFuncSetAttribute: accepted and ignored. */
CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    SIM_API(cuFuncSetAttribute, SIM_PLAIN);
    (void)attrib;
    (void)value;
    return sim_return(hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* cuFuncSetCacheConfig: accepted and ignored. */
CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    SIM_API(cuFuncSetCacheConfig, SIM_PLAIN);
    (void)config;
    return sim_return(hfunc ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* cuOccupancyMaxActiveBlocksPerMultiprocessor: 2048 / blockSize, max 32. */
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                              int blockSize, size_t dynamicSMemSize)
{
    SIM_API(cuOccupancyMaxActiveBlocksPerMultiprocessor, SIM_PLAIN);
    (void)dynamicSMemSize;
    if (!numBlocks || !func || blockSize <= 0)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    int n = 2048 / blockSize;
    *numBlocks = n > 32 ? 32 : n;
    return sim_return(CUDA_SUCCESS);
}

/* cuLaunchKernel (+_ptsz): validates the stream, runs nothing. */
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra)
{
    SIM_API(cuLaunchKernel, SIM_PLAIN);
    (void)sharedMemBytes;
    (void)kernelParams;
    (void)extra;
    if (!f)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_ctx *c;
    return sim_return(sim_stream_ctx(hStream, &c));
}
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra) SIM_ALIAS(cuLaunchKernel);

/* cuLaunchKernelEx (+_ptsz): validates config and stream, runs nothing. */
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                  void **extra)
{
    SIM_API(cuLaunchKernelEx, SIM_PLAIN);
    (void)kernelParams;
    (void)extra;
    if (!f)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    if (!config)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_ctx *c;
    return sim_return(sim_stream_ctx(config->hStream, &c));
}
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                       void **extra) SIM_ALIAS(cuLaunchKernelEx);

/* cuLaunchCooperativeKernel (+_ptsz): like cuLaunchKernel. */
CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX,
                                           unsigned int blockDimY, unsigned int blockDimZ,
                                           unsigned int sharedMemBytes, CUstream hStream,
                                           void **kernelParams)
{
    SIM_API(cuLaunchCooperativeKernel, SIM_PLAIN);
    (void)sharedMemBytes;
    (void)kernelParams;
    if (!f)
        return sim_return(CUDA_ERROR_INVALID_HANDLE);
    if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    sim_ctx *c;
    return sim_return(sim_stream_ctx(hStream, &c));
}
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX,
                                                unsigned int blockDimY, unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void **kernelParams) SIM_ALIAS(cuLaunchCooperativeKernel);

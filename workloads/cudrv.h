/* cudrv.h: the CUDA driver functions of the workloads, behind one table
 * filled at run time.
 *
 * The workloads do not name libcuda.so.1 as a needed library, so the dynamic
 * loader starts them on a machine without a GPU driver and --help works
 * there.  cudrv_load() opens libcuda.so.1 with dlopen (the real driver, or
 * the simulated one that `memsnap run --sim-device` puts on LD_LIBRARY_PATH)
 * and looks every function up with dlsym.  An LD_PRELOADed recorder
 * interposes dlsym and hands back its wrappers for the names it records, so
 * it sees the same calls as with direct linking.
 *
 * Include this after <cuda.h> and after any header that uses the driver names
 * for other things (memsnap/alloc.h's memsnap_alloc_driver fields): each
 * driver name the sources call (after
 * cuda.h's own renames, e.g. cuMemAlloc -> cuMemAlloc_v2) becomes a macro for
 * the table entry, so the call sites stay plain CUDA.  Call cudrv_load()
 * before the first driver call.
 */
#ifndef MEMSNAP_CUDRV_H
#define MEMSNAP_CUDRV_H

#include <stddef.h>

#include <cuda.h>

/* Every driver function a workload calls, by its exported name. */
#define CUDRV_FUNCS(X)                                                              \
    X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGet)                 \
    X(cuDeviceGetName) X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain)          \
    X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy_v2) \
    X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord)  \
    X(cuEventSynchronize) X(cuEventElapsedTime_v2) X(cuMemAlloc_v2) X(cuMemFree_v2)   \
    X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemsetD8_v2) X(cuMemcpyHtoDAsync_v2)  \
    X(cuMemcpyDtoHAsync_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)                  \
    X(cuMemAddressReserve) X(cuMemAddressFree)                                     \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)     \
    X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) X(cuLaunchKernel)     \
    X(cuFuncSetAttribute)

/* One pointer per function, typed from cuda.h's declaration. */
typedef struct cudrv_table {
#define CUDRV_FIELD(f) __typeof__(&f) f;
    CUDRV_FUNCS(CUDRV_FIELD)
#undef CUDRV_FIELD
} cudrv_table;

extern cudrv_table cudrv;

/* Opens libcuda.so.1 and fills `cudrv` (all or nothing).  Returns 0, or -1
 * with a one-line reason in why[len] ("libcuda.so.1: cannot open ...", or the
 * first function it lacks); the table is then left unusable.  Safe to call
 * again: later calls return the first answer. */
int cudrv_load(char *why, size_t len);

/* For test and benchmark programs: call, and on an error print
 * "PROG: file:line: call: CUDA_ERROR_..." and exit(1).  Needs <stdio.h>
 * and <stdlib.h>. */
#define CUDRV_CHECK(prog, call)                                                            \
    do {                                                                                   \
        CUresult e_ = (call);                                                              \
        if (e_ != CUDA_SUCCESS) {                                                          \
            const char *s_ = NULL;                                                         \
            cuGetErrorName(e_, &s_);                                                       \
            fprintf(stderr, "%s: %s:%d: %s: %s\n", prog, __FILE__, __LINE__, #call,        \
                    s_ ? s_ : "?");                                                        \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* From here on the driver names are the table's entries (cudrv.c, which
 * needs the names themselves, defines CUDRV_NO_RENAMES). */
#ifndef CUDRV_NO_RENAMES
#define cuGetErrorName (cudrv.cuGetErrorName)
#define cuGetErrorString (cudrv.cuGetErrorString)
#define cuInit (cudrv.cuInit)
#define cuDeviceGet (cudrv.cuDeviceGet)
#define cuDeviceGetName (cudrv.cuDeviceGetName)
#define cuDeviceTotalMem_v2 (cudrv.cuDeviceTotalMem_v2)
#define cuDevicePrimaryCtxRetain (cudrv.cuDevicePrimaryCtxRetain)
#define cuCtxSetCurrent (cudrv.cuCtxSetCurrent)
#define cuCtxSynchronize (cudrv.cuCtxSynchronize)
#define cuStreamCreate (cudrv.cuStreamCreate)
#define cuStreamDestroy_v2 (cudrv.cuStreamDestroy_v2)
#define cuStreamSynchronize (cudrv.cuStreamSynchronize)
#define cuEventCreate (cudrv.cuEventCreate)
#define cuEventDestroy_v2 (cudrv.cuEventDestroy_v2)
#define cuEventRecord (cudrv.cuEventRecord)
#define cuEventSynchronize (cudrv.cuEventSynchronize)
#define cuEventElapsedTime_v2 (cudrv.cuEventElapsedTime_v2)
#define cuMemAlloc_v2 (cudrv.cuMemAlloc_v2)
#define cuMemFree_v2 (cudrv.cuMemFree_v2)
#define cuMemAllocAsync (cudrv.cuMemAllocAsync)
#define cuMemFreeAsync (cudrv.cuMemFreeAsync)
#define cuMemsetD8_v2 (cudrv.cuMemsetD8_v2)
#define cuMemcpyHtoDAsync_v2 (cudrv.cuMemcpyHtoDAsync_v2)
#define cuMemcpyDtoHAsync_v2 (cudrv.cuMemcpyDtoHAsync_v2)
#define cuMemcpyHtoD_v2 (cudrv.cuMemcpyHtoD_v2)
#define cuMemcpyDtoH_v2 (cudrv.cuMemcpyDtoH_v2)
#define cuMemAddressReserve (cudrv.cuMemAddressReserve)
#define cuMemAddressFree (cudrv.cuMemAddressFree)
#define cuMemCreate (cudrv.cuMemCreate)
#define cuMemRelease (cudrv.cuMemRelease)
#define cuMemMap (cudrv.cuMemMap)
#define cuMemUnmap (cudrv.cuMemUnmap)
#define cuMemSetAccess (cudrv.cuMemSetAccess)
#define cuModuleLoadData (cudrv.cuModuleLoadData)
#define cuModuleGetFunction (cudrv.cuModuleGetFunction)
#define cuModuleUnload (cudrv.cuModuleUnload)
#define cuLaunchKernel (cudrv.cuLaunchKernel)
#define cuFuncSetAttribute (cudrv.cuFuncSetAttribute)
#endif

#endif

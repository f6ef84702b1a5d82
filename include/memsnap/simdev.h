/* The simulated device: a stand-in for libcuda.so.1 on machines without a GPU.
 *
 * Build output: build/simdev/libcuda.so.1 (SONAME libcuda.so.1).  Put its
 * folder first in LD_LIBRARY_PATH and any program that uses the CUDA driver
 * API (linked to libcuda, dlopen("libcuda.so.1"), or cuGetProcAddress) runs on
 * it: memory, VMM, context, stream/event and entry-point functions on host
 * address space, a configurable capacity, CUDA_ERROR_OUT_OF_MEMORY exactly
 * where a device of that size would, and kernel launches as no-ops.
 *
 * Settings (environment, read at cuInit):
 *   MEMSNAP_SIM_DEVICE_MEM  capacity per device, e.g. 80G, 512M (default 80G)
 *   MEMSNAP_SIM_DEVICES     number of devices (default 1, at most 8)
 *   MEMSNAP_SIM_FAIL        fault injection: "FUNC:N" makes the N-th call of
 *                           FUNC fail (1-based), "FUNC:N+" the N-th and every
 *                           later one.  Several, comma-separated.
 *
 * The control functions below are exported by the simulated libcuda.so.1 only.
 * Tests look them up with dlsym(RTLD_DEFAULT, ...); a real driver lacks them.
 */
#ifndef MEMSNAP_SIMDEV_H
#define MEMSNAP_SIMDEV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fail the nth (1-based) call of driver function fn from now on (counting
 * restarts at this call); persistent: that call and every later one fail.
 * The failing call returns CUDA_ERROR_OUT_OF_MEMORY for allocation functions
 * and CUDA_ERROR_UNKNOWN otherwise, and changes nothing.
 * fn NULL clears every injected fault.  Returns 0, or -1 if fn is not a
 * function the simulation implements. */
int memsnap_sim_fail(const char *fn, long nth, int persistent);

/* Calls made so far to driver function fn (every call, failed ones too). */
long memsnap_sim_calls(const char *fn);

/* Device bytes in use on device dev: cuMemAlloc/Pitch/Async/Managed and
 * physical cuMemCreate handles not yet released (a released handle that is
 * still mapped counts until unmapped, as on a real device). */
uint64_t memsnap_sim_used(int dev);

/* Device capacity in bytes. */
uint64_t memsnap_sim_capacity(int dev);

/* 1 if [addr, addr+size) lies entirely in device memory that is allocated
 * (cuMemAlloc & co) or mapped (cuMemMap with access set), else 0. */
int memsnap_sim_is_mapped(uint64_t addr, uint64_t size);

/* Live objects, for leak checks: allocations, physical handles, VA
 * reservations, mappings, streams, events, pools. */
typedef struct memsnap_sim_live {
    long allocs, handles, reservations, mappings, streams, events, pools;
} memsnap_sim_live;
void memsnap_sim_live_get(memsnap_sim_live *out);

#ifdef __cplusplus
}
#endif
#endif

/* Shared helpers of the simulated-device tests: the control functions of
 * include/memsnap/simdev.h looked up with dlsym (a real driver lacks them, so
 * a test can never silently run on a real GPU), a check that the loaded
 * driver calls itself the simulated device, and CK() for driver calls. */
#ifndef SIMTEST_H
#define SIMTEST_H
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "memsnap/simdev.h"

/* CK(call): the driver call must return CUDA_SUCCESS. */
#define CK(call) CHECK_EQ_U64((call), CUDA_SUCCESS)

static struct {
    int (*fail)(const char *, long, int);
    long (*calls)(const char *);
    uint64_t (*used)(int);
    uint64_t (*capacity)(int);
    int (*is_mapped)(uint64_t, uint64_t);
    void (*live_get)(memsnap_sim_live *);
} sim;

/* Find the control functions; exit 1 if the driver is not the simulation. */
static inline void sim_bind(void)
{
    sim.fail = (int (*)(const char *, long, int))dlsym(RTLD_DEFAULT, "memsnap_sim_fail");
    sim.calls = (long (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_sim_calls");
    sim.used = (uint64_t(*)(int))dlsym(RTLD_DEFAULT, "memsnap_sim_used");
    sim.capacity = (uint64_t(*)(int))dlsym(RTLD_DEFAULT, "memsnap_sim_capacity");
    sim.is_mapped = (int (*)(uint64_t, uint64_t))dlsym(RTLD_DEFAULT, "memsnap_sim_is_mapped");
    sim.live_get = (void (*)(memsnap_sim_live *))dlsym(RTLD_DEFAULT, "memsnap_sim_live_get");
    if (!sim.fail || !sim.calls || !sim.used || !sim.capacity || !sim.is_mapped || !sim.live_get) {
        fprintf(stderr, "FATAL: libcuda.so.1 is not the memsnap simulated device "
                        "(is build/simdev first in LD_LIBRARY_PATH?)\n");
        exit(1);
    }
}

/* cuInit, check the device name, make device 0's primary context current. */
static inline CUcontext sim_start(void)
{
    sim_bind();
    CUresult rc = cuInit(0);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "FATAL: cuInit failed: %d\n", (int)rc);
        exit(1);
    }
    char name[128] = "";
    CK(cuDeviceGetName(name, sizeof name, 0));
    if (strcmp(name, "memsnap simulated device") != 0) {
        fprintf(stderr, "FATAL: device 0 is '%s', not the simulated device\n", name);
        exit(1);
    }
    CUcontext ctx = NULL;
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* Live object counts now. */
static inline memsnap_sim_live sim_live_now(void)
{
    memsnap_sim_live l;
    sim.live_get(&l);
    return l;
}

/* 1 if two live snapshots are equal. */
static inline int live_eq(memsnap_sim_live a, memsnap_sim_live b)
{
    return a.allocs == b.allocs && a.handles == b.handles && a.reservations == b.reservations &&
           a.mappings == b.mappings && a.streams == b.streams && a.events == b.events &&
           a.pools == b.pools;
}
#endif

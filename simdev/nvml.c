/* The simulated device's NVML: a stand-in for libnvidia-ml.so.1 that
 * answers the few NVML calls the recorder makes, from the simulated
 * device's own bookkeeping.
 *
 * Build output: ${MEMSNAP_SIMDEV_DIR}/libnvidia-ml.so.1, next to the
 * simulated libcuda.so.1, so `memsnap run --sim-device` (which puts that
 * folder first in LD_LIBRARY_PATH) gives the recorder an NVML to read.
 *
 * What it reports for a device: used = the simulated device's bytes in
 * use (memsnap_sim_used: every allocation and physical handle) plus a
 * fixed SIM_NVML_CONTEXT standing for what a real driver holds outside any
 * allocation (the CUDA context, module images); total = the capacity plus
 * that amount; free = total - used.  So on the simulated device the
 * reconciliation in `memsnap summary` finds exactly SIM_NVML_CONTEXT bytes
 * that no allocation explains, which its tests check.
 *
 * MEMSNAP_SIM_NVML_DELAY_US=N (0 to 1000000) makes each memory read take
 * N microseconds more, the figure taken at its end, as a loaded machine's
 * NVML may: the recorder's samples must hold against what the program does
 * meanwhile (case recorder.counters-settled).  A bad value is ignored with
 * a line on stderr.
 *
 * Devices are found by PCI bus id in the simulated driver's form
 * "0000:NN:00.0" (NN = ordinal + 1, hex), case-insensitively, with or
 * without the domain.  Calls before nvmlInit_v2 fail as in NVML.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "memsnap/simdev.h"

#define SIM_NVML_CONTEXT (500ull << 20) /* keep in sync with docs/simdev.md */

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6

#define EXPORT __attribute__((visibility("default")))

typedef struct nvml_memory {          /* nvmlMemory_t (version 1) */
    unsigned long long total, free, used;
} nvml_memory;

static int inits;                     /* nvmlInit_v2 minus nvmlShutdown */
static long delay_us = -1;            /* MEMSNAP_SIM_NVML_DELAY_US; -1 not read yet */

static void read_delay(void)
{
    const char *v = getenv("MEMSNAP_SIM_NVML_DELAY_US");
    char *end;
    delay_us = 0;
    if (!v || !*v)
        return;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > 1000000)
        fprintf(stderr, "memsnap simdev: bad MEMSNAP_SIM_NVML_DELAY_US='%s' (expected 0 to "
                        "1000000 microseconds); ignored\n", v);
    else
        delay_us = n;
}

/* Handles are ordinal + 1 cast to a pointer (never NULL). */
static int handle_dev(void *h)
{
    return (int)(intptr_t)h - 1;
}

/* nvmlInit_v2: always succeeds (reference counted, as in NVML). */
EXPORT int nvmlInit_v2(void)
{
    if (delay_us < 0)
        read_delay();
    inits++;
    return NVML_SUCCESS;
}

/* nvmlShutdown: undoes one nvmlInit_v2. */
EXPORT int nvmlShutdown(void)
{
    if (inits <= 0)
        return NVML_ERROR_UNINITIALIZED;
    inits--;
    return NVML_SUCCESS;
}

/* nvmlDeviceGetHandleByPciBusId_v2: the simulated device whose
 * cuDeviceGetPCIBusId is pci; NOT_FOUND for any other. */
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *pci, void **h)
{
    if (inits <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!pci || !h)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int d = 0; d < 64 && memsnap_sim_capacity(d); d++) {
        char full[32], shortid[32];
        snprintf(full, sizeof full, "0000:%02x:00.0", d + 1);
        snprintf(shortid, sizeof shortid, "%02x:00.0", d + 1);
        if (strcasecmp(pci, full) == 0 || strcasecmp(pci, shortid) == 0) {
            *h = (void *)(intptr_t)(d + 1);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* nvmlDeviceGetMemoryInfo: see the file comment. */
EXPORT int nvmlDeviceGetMemoryInfo(void *h, nvml_memory *m)
{
    if (inits <= 0)
        return NVML_ERROR_UNINITIALIZED;
    int d = handle_dev(h);
    if (!m || d < 0 || !memsnap_sim_capacity(d))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (delay_us > 0) {
        struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    m->total = memsnap_sim_capacity(d) + SIM_NVML_CONTEXT;
    m->used = memsnap_sim_used(d) + SIM_NVML_CONTEXT;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

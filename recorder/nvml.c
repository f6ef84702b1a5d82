/* What the driver says is in use on a device, read through NVML.
 *
 * The counters series records, beside the recorder's own totals, the
 * device's used memory as the driver reports it (NVML total - free, the
 * figure nvidia-smi shows), so that what no recorded allocation explains
 * (the CUDA context, module images, other processes) can be named.
 *
 * Why NVML and not cuMemGetInfo: cuMemGetInfo needs a current context on
 * the calling thread, and the writer thread must never create or change
 * one; NVML talks to the kernel driver on its own and leaves the process's
 * CUDA state alone.
 *
 * When: only from the writer thread, the first time it writes a counters
 * sample of a device the program has used (never in a constructor, never
 * on the hot path).  libnvidia-ml.so.1 is dlopen'ed then, once; when it is
 * missing or nvmlInit_v2 fails, the recorder stops trying and the counters
 * lines simply carry no device_used.
 *
 * Which device: by PCI bus id, which the hooks read with
 * cuDeviceGetPCIBusId when the program first used the device.  A bus id
 * names the physical device, so CUDA_VISIBLE_DEVICES (which renumbers the
 * CUDA ordinals but not NVML's) cannot mix two devices up.  Handles are
 * cached per bus id.
 *
 * The NVML declarations below are the few this file needs, written from
 * the NVML API reference (no nvml.h needed at build time).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "recorder.h"

typedef int nvml_ret;                 /* nvmlReturn_t; 0 = NVML_SUCCESS */
typedef void *nvml_device;            /* nvmlDevice_t */
typedef struct nvml_memory {          /* nvmlMemory_t (version 1) */
    unsigned long long total, free, used;
} nvml_memory;

typedef nvml_ret (*init_fn)(void);
typedef nvml_ret (*shutdown_fn)(void);
typedef nvml_ret (*by_pci_fn)(const char *, nvml_device *);
typedef nvml_ret (*mem_info_fn)(nvml_device, nvml_memory *);

enum { NV_UNTRIED, NV_READY, NV_FAILED };

#define NVML_CACHE 16

static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;
static int nv_state = NV_UNTRIED;
static void *nv_lib;
static shutdown_fn nv_shutdown;
static by_pci_fn nv_by_pci;
static mem_info_fn nv_mem_info;
static struct {
    char pci[32];
    nvml_device h;
} nv_cache[NVML_CACHE];
static int nv_ncache;

/* Loads and initialises NVML.  Caller holds nv_lock.  Sets nv_state. */
static void nv_load(void)
{
    nv_state = NV_FAILED;
    nv_lib = core_dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv_lib)
        return;
    init_fn init = (init_fn)dlsym(nv_lib, "nvmlInit_v2");
    nv_shutdown = (shutdown_fn)dlsym(nv_lib, "nvmlShutdown");
    nv_by_pci = (by_pci_fn)dlsym(nv_lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nv_mem_info = (mem_info_fn)dlsym(nv_lib, "nvmlDeviceGetMemoryInfo");
    if (!init || !nv_by_pci || !nv_mem_info || init() != 0) {
        core_dlclose(nv_lib);
        nv_lib = NULL;
        return;
    }
    nv_state = NV_READY;
}

/* The cached handle of a bus id, looked up on a miss; NULL when NVML does
 * not know it.  Caller holds nv_lock with NVML loaded. */
static nvml_device nv_handle(const char *pci)
{
    for (int i = 0; i < nv_ncache; i++)
        if (strcmp(nv_cache[i].pci, pci) == 0)
            return nv_cache[i].h;
    nvml_device h = NULL;
    if (nv_by_pci(pci, &h) != 0)
        return NULL;
    if (nv_ncache < NVML_CACHE) {
        strncpy(nv_cache[nv_ncache].pci, pci, sizeof nv_cache[0].pci - 1);
        nv_cache[nv_ncache++].h = h;
    }
    return h;
}

int nvml_device_used(const char *pci_bus_id, uint64_t *used)
{
    if (!pci_bus_id || !pci_bus_id[0])
        return -1;
    int rc = -1;
    pthread_mutex_lock(&nv_lock);
    if (nv_state == NV_UNTRIED)
        nv_load();
    if (nv_state == NV_READY) {
        nvml_device h = nv_handle(pci_bus_id);
        nvml_memory m;
        if (h && nv_mem_info(h, &m) == 0 && m.total >= m.free) {
            *used = m.total - m.free;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&nv_lock);
    return rc;
}

void nvml_after_fork_child(void)
{
    /* The writer thread may have held the lock at the fork; the child has
     * no writer yet, so nothing else can hold it now.  NVML is initialised
     * again in the child (its handles belong to the parent's session). */
    pthread_mutex_init(&nv_lock, NULL);
    nv_state = nv_lib ? NV_UNTRIED : nv_state;
    nv_lib = NULL;
    nv_ncache = 0;
}

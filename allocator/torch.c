/* torch.c: the PyTorch entry points.
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "build/lib/libmemsnap_alloc.so", "memsnap_torch_alloc", "memsnap_torch_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before any CUDA allocation
 *
 * One allocator per device, created at its first malloc with the config in
 * MEMSNAP_ALLOC_CONF (a bad config is reported once on stderr and every
 * malloc then returns NULL).  PyTorch passes its current stream; frees come
 * back with the stream of the allocation, which the allocator already knows.
 * The pluggable interface cannot report an error, so a failed malloc prints
 * the allocator's message (request, allocated, reserved, device free) on
 * stderr and returns NULL.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MS_TORCH_MAX_DEVICES 64

static memsnap_alloc *g_alloc[MS_TORCH_MAX_DEVICES];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_config_bad;

static memsnap_alloc *ms_torch_get(int device, int create)
{
    if (device < 0 || device >= MS_TORCH_MAX_DEVICES) {
        fprintf(stderr, "memsnap_torch: device %d is out of range (0-%d)\n", device,
                MS_TORCH_MAX_DEVICES - 1);
        return NULL;
    }
    memsnap_alloc *a = __atomic_load_n(&g_alloc[device], __ATOMIC_ACQUIRE);
    if (a || !create)
        return a;
    pthread_mutex_lock(&g_lock);
    a = g_alloc[device];
    if (!a && !g_config_bad) {
        memsnap_alloc_config cfg;
        char err[512];
        if (memsnap_alloc_config_from_env(&cfg, err, sizeof err) != MEMSNAP_ALLOC_OK) {
            fprintf(stderr, "memsnap_torch: %s\n", err);
            g_config_bad = 1;
        } else if (memsnap_alloc_create(&cfg, device, NULL, &a) != MEMSNAP_ALLOC_OK) {
            fprintf(stderr, "memsnap_torch: cannot create the allocator for device %d: %s\n",
                    device, memsnap_alloc_error());
            a = NULL;
        } else {
            __atomic_store_n(&g_alloc[device], a, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return a;
}

MS_EXPORT void *memsnap_torch_alloc(ssize_t size, int device, CUstream stream)
{
    memsnap_alloc *a = ms_torch_get(device, 1);
    if (!a)
        return NULL;
    CUdeviceptr p = 0;
    if (memsnap_alloc_malloc(a, size > 0 ? (size_t)size : 0, stream, &p) != MEMSNAP_ALLOC_OK) {
        fprintf(stderr, "%s\n", memsnap_alloc_error());
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

MS_EXPORT void memsnap_torch_free(void *ptr, ssize_t size, int device, CUstream stream)
{
    (void)size;
    (void)stream;
    if (!ptr)
        return;
    memsnap_alloc *a = ms_torch_get(device, 0);
    if (!a || memsnap_alloc_free(a, (CUdeviceptr)(uintptr_t)ptr) != MEMSNAP_ALLOC_OK) {
        /* Not ours on that device: try the others before complaining. */
        for (int d = 0; d < MS_TORCH_MAX_DEVICES; d++) {
            memsnap_alloc *o = __atomic_load_n(&g_alloc[d], __ATOMIC_ACQUIRE);
            if (o && o != a && memsnap_alloc_free(o, (CUdeviceptr)(uintptr_t)ptr) == MEMSNAP_ALLOC_OK)
                return;
        }
        fprintf(stderr, "memsnap_torch_free: %p (device %d) was not allocated by memsnap\n", ptr,
                device);
    }
}

MS_EXPORT void memsnap_torch_record_stream(void *ptr, CUstream stream)
{
    for (int d = 0; d < MS_TORCH_MAX_DEVICES; d++) {
        memsnap_alloc *a = __atomic_load_n(&g_alloc[d], __ATOMIC_ACQUIRE);
        if (a && memsnap_alloc_record_stream(a, (CUdeviceptr)(uintptr_t)ptr, stream) ==
                     MEMSNAP_ALLOC_OK)
            return;
    }
}

MS_EXPORT void memsnap_torch_empty_cache(void)
{
    for (int d = 0; d < MS_TORCH_MAX_DEVICES; d++) {
        memsnap_alloc *a = __atomic_load_n(&g_alloc[d], __ATOMIC_ACQUIRE);
        if (a)
            memsnap_alloc_empty_cache(a);
    }
}

MS_EXPORT uint64_t memsnap_torch_stat(int device, const char *name)
{
    memsnap_alloc *a = device >= 0 && device < MS_TORCH_MAX_DEVICES
                           ? __atomic_load_n(&g_alloc[device], __ATOMIC_ACQUIRE)
                           : NULL;
    if (!a || !name)
        return 0;
    memsnap_alloc_stats st;
    /* only inactive_split needs the walk of every block */
    if (!strcmp(name, "inactive_split"))
        memsnap_alloc_stats_get(a, &st);
    else
        memsnap_alloc_counters_get(a, &st);
    return memsnap_alloc_stat_by_name(&st, name, NULL);
}

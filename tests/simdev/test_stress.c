/* 16 threads x 20000 allocate/free pairs (mixed sizes, some kept live for a
 * while, some stream-ordered) on one device: every call succeeds, live
 * pointers never overlap another thread's (each thread writes a tag into
 * its blocks and checks it), and used() is back to 0 at the end. */
#include "simtest.h"

#include <pthread.h>

#define THREADS 16
#define ITERS 20000
#define KEEP 32

static CUcontext g_ctx;
static int g_errors[THREADS];

/* One worker: ITERS allocations, at most KEEP live at once. */
static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUdeviceptr live[KEEP] = {0};
    unsigned seed = (unsigned)id * 2654435761u;
    if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) {
        g_errors[id]++;
        return NULL;
    }
    for (int i = 0; i < ITERS; i++) {
        seed = seed * 1103515245u + 12345u;
        int slot = (int)(seed >> 16) % KEEP;
        if (live[slot]) {
            if (*(volatile int *)(uintptr_t)live[slot] != id)
                g_errors[id]++;
            CUresult rc = (i & 1) ? cuMemFree(live[slot]) : cuMemFreeAsync(live[slot], NULL);
            if (rc != CUDA_SUCCESS)
                g_errors[id]++;
            live[slot] = 0;
        }
        size_t size = 64 + ((seed >> 8) % 65536);
        CUresult rc = (i & 2) ? cuMemAlloc(&live[slot], size) : cuMemAllocAsync(&live[slot], size, NULL);
        if (rc != CUDA_SUCCESS) {
            g_errors[id]++;
            live[slot] = 0;
            continue;
        }
        *(volatile int *)(uintptr_t)live[slot] = id;
    }
    for (int k = 0; k < KEEP; k++)
        if (live[k] && cuMemFree(live[k]) != CUDA_SUCCESS)
            g_errors[id]++;
    return NULL;
}

int main(void)
{
    g_ctx = sim_start();
    memsnap_sim_live l0 = sim_live_now();
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    int errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        errors += g_errors[i];
    }
    CHECK(errors == 0);
    CHECK_EQ_U64(sim.used(0), 0);
    CHECK(live_eq(sim_live_now(), l0));
    CHECK(sim.calls("cuMemAlloc_v2") + sim.calls("cuMemAllocAsync") >= (long)THREADS * ITERS);
    return check_summary();
}

/* 8 threads x 50k random malloc/free on one allocator (each thread on its own
 * stream, every 4th op on the shared default stream), in both modes; every
 * block is written with a tag and read back before its free (the simulated
 * device is host memory, so a block handed to two threads at once shows up
 * as a wrong tag).  Then the invariant walker, a full free, and the device
 * back to its baseline. */
#define _GNU_SOURCE        /* before any header: simtest.h's RTLD_DEFAULT (glibc < 2.34) */
#include <pthread.h>

#include "alloctest.h"

#define NTHREADS 8
#define NOPS 50000
#define NLIVE 64

static memsnap_alloc *A;
static int bad_tags, errors;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUstream own;
    if (cuCtxSetCurrent(NULL) != CUDA_SUCCESS) /* no context: the allocator pushes its own */
        __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    if (cuStreamCreate(&own, 0) != CUDA_SUCCESS)
        own = NULL;
    if (id % 2)
        cuCtxSetCurrent(NULL); /* odd threads run without a current context */
    CUdeviceptr p[NLIVE] = {0};
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
    for (int i = 0; i < NOPS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % NLIVE);
        if (p[k]) {
            uint64_t tag = 0;
            memcpy(&tag, (void *)(uintptr_t)p[k], sizeof tag);
            if (tag != ((uint64_t)id << 32 | (uint64_t)k))
                __atomic_add_fetch(&bad_tags, 1, __ATOMIC_RELAXED);
            if (memsnap_alloc_free(A, p[k]) != 0)
                __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
            p[k] = 0;
        } else {
            size_t sz = 8 + (x >> 20) % ((x >> 40) % 8 == 0 ? (8u << 20) : 65536);
            CUstream s = (i % 4 == 0) ? NULL : own;
            if (memsnap_alloc_malloc(A, sz, s, &p[k]) != 0) {
                __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
                p[k] = 0;
                continue;
            }
            uint64_t tag = (uint64_t)id << 32 | (uint64_t)k;
            memcpy((void *)(uintptr_t)p[k], &tag, sizeof tag);
        }
    }
    for (int k = 0; k < NLIVE; k++)
        if (p[k] && memsnap_alloc_free(A, p[k]) != 0)
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    cuCtxSetCurrent(ctx);
    if (own)
        cuStreamDestroy(own);
    return NULL;
}

static void run(const char *conf)
{
    A = make_alloc(conf);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ_U64(bad_tags, 0);
    CHECK_EQ_U64(errors, 0);
    CHECK_INV(A);
    memsnap_alloc_stats st = stats_of(A);
    CHECK_EQ_U64(st.allocated, 0);
    CHECK_EQ_U64(st.malloc_calls, st.free_calls);
    ACK(memsnap_alloc_empty_cache(A));
    CHECK_EQ_U64(stats_of(A).reserved, 0);
    memsnap_alloc_destroy(A);
}

int main(void)
{
    sim_start();
    memsnap_sim_live live0 = sim_live_now();
    uint64_t used0 = sim.used(0);
    run("");
    run("expandable_segments:true,expandable_va:8G");
    CHECK(live_eq(live0, sim_live_now()));
    CHECK_EQ_U64(sim.used(0), used0);
    return check_summary();
}

/* bench_alloc: the allocator's benchmarks (not a test; results go to
 * docs/benchmarks.md with their conditions).
 *
 *   bench_alloc [--quick]
 *
 * Runs on whatever libcuda.so.1 the loader finds: a real GPU, or the
 * simulated device (LD_LIBRARY_PATH=build/simdev); the header line says which.
 *
 * 1. Cache-hit malloc+free pair, median and p99 ns, 1 thread and 8 threads
 *    (each thread on its own stream, one shared allocator), sizes 512 B to
 *    64 MiB, for fixed segments, expandable segments and the block pool; side
 *    by side with the driver's cuMemAlloc+cuMemFree (what cudaMalloc/cudaFree
 *    end in) and cuMemAllocAsync+cuMemFreeAsync (cudaMallocAsync/FreeAsync).
 *    Each pair is timed alone with CLOCK_MONOTONIC (the timer's own cost is
 *    printed and included).
 * 2. Fragmentation on two synthetic traces, per mode: peak requested / peak
 *    reserved (1.0 = no waste).  "random": 200k ops, sizes 1 B-64 MiB skewed
 *    to small, random frees; "growing": 64 buffers that grow by 5-30% at a
 *    time (free old, allocate new), with small temporaries in between — the
 *    classic pattern that strands free memory in fixed segments.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memsnap/alloc.h"

#define MiB (1ull << 20)
#define MAXTHREADS 8

static int quick;
static CUcontext g_ctx;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef enum { K_FIXED, K_EXPANDABLE, K_POOL, K_DRIVER, K_ASYNC } kind;
static const char *kind_name[] = {"memsnap fixed", "memsnap expandable", "memsnap block pool",
                                  "cuMemAlloc+cuMemFree", "cuMemAllocAsync+FreeAsync"};

typedef struct {
    kind k;
    size_t size;
    int iters;
    memsnap_alloc *a;
    memsnap_blockpool *pool;
    uint64_t *samples; /* iters per thread */
    int failed;
} job;

typedef struct {
    job *j;
    int tid;
} targ;

static void *run_pairs(void *arg)
{
    targ *t = arg;
    job *j = t->j;
    cuCtxSetCurrent(g_ctx);
    CUstream s = NULL;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        s = NULL;
    uint64_t *out = j->samples + (size_t)t->tid * (size_t)j->iters;
    CUdeviceptr p = 0;
    for (int i = -16; i < j->iters; i++) { /* 16 warm-up pairs */
        uint64_t t0 = now_ns();
        int bad = 0;
        switch (j->k) {
        case K_FIXED:
        case K_EXPANDABLE:
            bad = memsnap_alloc_malloc(j->a, j->size, s, &p) || memsnap_alloc_free(j->a, p);
            break;
        case K_POOL:
            bad = memsnap_blockpool_alloc(j->pool, &p) || memsnap_blockpool_free(j->pool, p);
            break;
        case K_DRIVER:
            bad = cuMemAlloc(&p, j->size) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS;
            break;
        case K_ASYNC:
            bad = cuMemAllocAsync(&p, j->size, s) != CUDA_SUCCESS ||
                  cuMemFreeAsync(p, s) != CUDA_SUCCESS;
            break;
        }
        uint64_t t1 = now_ns();
        if (bad)
            j->failed = 1;
        if (i >= 0)
            out[i] = t1 - t0;
    }
    if (s) {
        cuStreamSynchronize(s);
        cuStreamDestroy(s);
    }
    return NULL;
}

/* Runs one cell; prints "median / p99". */
static void cell(kind k, size_t size, int nthreads)
{
    job j = {k, size, 0, NULL, NULL, NULL, 0};
    int slow = k == K_DRIVER;
    j.iters = quick ? (slow ? 200 : 2000) : (slow ? 2000 : 20000);
    if (k == K_FIXED || k == K_EXPANDABLE) {
        memsnap_alloc_config cfg;
        memsnap_alloc_config_default(&cfg);
        cfg.mode = k == K_EXPANDABLE ? MEMSNAP_ALLOC_EXPANDABLE : MEMSNAP_ALLOC_FIXED;
        cfg.trace = 0;
        if (memsnap_alloc_create(&cfg, 0, NULL, &j.a) != 0) {
            printf(" %19s", "error");
            return;
        }
    } else if (k == K_POOL) {
        if (memsnap_blockpool_create(0, size, MAXTHREADS * 2, NULL, &j.pool) != 0) {
            printf(" %19s", "error");
            return;
        }
    }
    j.samples = malloc((size_t)nthreads * (size_t)j.iters * sizeof *j.samples);
    pthread_t th[MAXTHREADS];
    targ ta[MAXTHREADS];
    for (int i = 0; i < nthreads; i++) {
        ta[i] = (targ){&j, i};
        pthread_create(&th[i], NULL, run_pairs, &ta[i]);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    size_t n = (size_t)nthreads * (size_t)j.iters;
    qsort(j.samples, n, sizeof *j.samples, cmp_u64);
    char buf[64];
    if (j.failed)
        snprintf(buf, sizeof buf, "failed");
    else
        snprintf(buf, sizeof buf, "%llu / %llu", (unsigned long long)j.samples[n / 2],
                 (unsigned long long)j.samples[n * 99 / 100]);
    printf(" %19s", buf);
    fflush(stdout);
    free(j.samples);
    memsnap_alloc_destroy(j.a);
    memsnap_blockpool_destroy(j.pool);
}

/* ------------------------------------------------------------ fragmentation */

typedef struct {
    int free_slot; /* -1: malloc into slot; else free slot */
    int slot;
    size_t size;
} op;

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t skewed_size(void)
{
    uint64_t r = rnd() % 100;
    int lo = r < 60 ? 0 : r < 85 ? 12 : r < 97 ? 20 : 24;
    int hi = r < 60 ? 12 : r < 85 ? 20 : r < 97 ? 24 : 26;
    int e = lo + (int)(rnd() % (uint64_t)(hi - lo));
    return (size_t)((1ull << e) + rnd() % (1ull << e));
}

#define NSLOTS 2048

/* Trace "random": malloc with p=0.52 into a free slot, else free a live slot. */
static op *trace_random(int *nops)
{
    int n = quick ? 50000 : 200000, m = 0;
    op *t = malloc((size_t)n * sizeof *t);
    int live[NSLOTS], nlive = 0, freeslots[NSLOTS], nfree = NSLOTS;
    for (int i = 0; i < NSLOTS; i++)
        freeslots[i] = NSLOTS - 1 - i;
    rng_state = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n; i++) {
        if ((rnd() % 100 < 52 || !nlive) && nfree) {
            int s = freeslots[--nfree];
            t[m++] = (op){-1, s, skewed_size()};
            live[nlive++] = s;
        } else {
            int k = (int)(rnd() % (uint64_t)nlive);
            t[m++] = (op){1, live[k], 0};
            freeslots[nfree++] = live[k];
            live[k] = live[--nlive];
        }
    }
    *nops = m;
    return t;
}

/* Trace "growing": 64 buffers growing 5-30% per step from 1-8 MiB, each step
 * also allocating and freeing a few temporaries (64 KiB-4 MiB). */
static op *trace_growing(int *nops)
{
    int steps = quick ? 3000 : 12000, m = 0;
    op *t = malloc((size_t)steps * 8 * sizeof *t);
    size_t cur[64];
    rng_state = 0xD1B54A32D192ED03ull;
    for (int b = 0; b < 64; b++) {
        cur[b] = MiB + rnd() % (7 * MiB);
        t[m++] = (op){-1, b, cur[b]};
    }
    for (int s = 0; s < steps; s++) {
        int b = (int)(rnd() % 64);
        size_t grown = cur[b] + cur[b] * (5 + rnd() % 26) / 100;
        if (grown > 256 * MiB) /* a finished buffer starts over small */
            grown = MiB + rnd() % (7 * MiB);
        t[m++] = (op){-1, 64 + 2, (size_t)(64 << 10) + rnd() % (4 * MiB)}; /* temp */
        t[m++] = (op){-1, 64 + 1, grown}; /* new buffer while the old is live */
        t[m++] = (op){1, b, 0};
        t[m++] = (op){2, 64 + 1, b};      /* move slot 65 -> b */
        t[m++] = (op){1, 64 + 2, 0};
        cur[b] = grown;
    }
    *nops = m;
    return t;
}

static void frag(const char *name, op *t, int n)
{
    printf("| %-8s |", name);
    for (int mode = 0; mode < 2; mode++) {
        memsnap_alloc_config cfg;
        memsnap_alloc_config_default(&cfg);
        cfg.mode = mode ? MEMSNAP_ALLOC_EXPANDABLE : MEMSNAP_ALLOC_FIXED;
        cfg.trace = 0;
        memsnap_alloc *a;
        if (memsnap_alloc_create(&cfg, 0, NULL, &a) != 0) {
            printf(" error: %s |", memsnap_alloc_error());
            continue;
        }
        CUdeviceptr slot[NSLOTS + 8] = {0};
        size_t req[NSLOTS + 8] = {0};
        uint64_t requested = 0, peak_req = 0;
        int oom = 0;
        for (int i = 0; i < n; i++) {
            const op *o = &t[i];
            if (o->free_slot == -1) {
                if (memsnap_alloc_malloc(a, o->size, NULL, &slot[o->slot]) != 0) {
                    oom++;
                    slot[o->slot] = 0;
                    continue;
                }
                req[o->slot] = o->size;
                requested += o->size;
                if (requested > peak_req)
                    peak_req = requested;
            } else if (o->free_slot == 1) {
                if (slot[o->slot]) {
                    memsnap_alloc_free(a, slot[o->slot]);
                    requested -= req[o->slot];
                }
                slot[o->slot] = 0;
            } else { /* move */
                slot[o->size] = slot[o->slot];
                req[o->size] = req[o->slot];
                slot[o->slot] = 0;
            }
        }
        memsnap_alloc_stats st;
        memsnap_alloc_stats_get(a, &st);
        printf(" %.3f (%.0f / %.0f MiB%s) |", (double)peak_req / (double)st.peak_reserved,
               peak_req / (double)MiB, st.peak_reserved / (double)MiB, oom ? ", OOM" : "");
        memsnap_alloc_destroy(a);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "bench_alloc: cuInit failed (no driver? for the simulated device: "
                        "LD_LIBRARY_PATH=build/simdev)\n");
        return 1;
    }
    char name[256] = "";
    cuDeviceGetName(name, sizeof name, 0);
    int drv = 0;
    cuDriverGetVersion(&drv);
    int sim = dlsym(RTLD_DEFAULT, "memsnap_sim_fail") != NULL;
    cuDevicePrimaryCtxRetain(&g_ctx, 0);
    cuCtxSetCurrent(g_ctx);
    size_t total = 0;
    cuDeviceTotalMem(&total, 0);
    printf("# bench_alloc: device 0 = %s (%s), %.1f GiB, driver API %d.%d%s\n", name,
           sim ? "SIMULATED: host memory, no GPU" : "real GPU", total / (double)(1ull << 30),
           drv / 1000, (drv % 1000) / 10, quick ? ", --quick" : "");
    printf("# timer: each malloc+free pair timed alone with CLOCK_MONOTONIC; ns, median / p99\n");

    static const size_t sizes[] = {512, 4096, 65536, MiB, 16 * MiB, 64 * MiB};
    static const char *size_names[] = {"512 B", "4 KiB", "64 KiB", "1 MiB", "16 MiB", "64 MiB"};
    const int nsizes = 6;
    uint64_t t0 = now_ns(), t1 = now_ns();
    for (int i = 0; i < 1000; i++)
        t1 = now_ns();
    printf("# timer overhead ~%llu ns per reading\n\n", (unsigned long long)((t1 - t0) / 1000));
    for (int threads = 1; threads <= MAXTHREADS; threads += MAXTHREADS - 1) {
        printf("## cache-hit malloc+free pair, %d thread%s (ns, median / p99)\n\n", threads,
               threads > 1 ? "s" : "");
        printf("| %-26s |", "allocator");
        for (int s = 0; s < nsizes; s++)
            printf(" %19s |", size_names[s]);
        printf("\n|%s|", "----------------------------");
        for (int s = 0; s < nsizes; s++)
            printf("%s|", "---------------------");
        printf("\n");
        for (int k = K_FIXED; k <= K_ASYNC; k++) {
            printf("| %-26s |", kind_name[k]);
            for (int s = 0; s < nsizes; s++) {
                cell((kind)k, sizes[s], threads);
                printf(" |");
            }
            printf("\n");
        }
        printf("\n");
    }

    printf("## fragmentation: peak requested / peak reserved (1.000 = no waste)\n\n");
    printf("| trace    | fixed segments | expandable segments |\n|---|---|---|\n");
    int n;
    op *t = trace_random(&n);
    frag("random", t, n);
    free(t);
    t = trace_growing(&n);
    frag("growing", t, n);
    free(t);
    printf("\n(block pool: fixed-size blocks, no fragmentation between blocks; its waste is "
           "the rounding of a request up to the block size)\n");
    return 0;
}

/* bench_recorder: what the recorder costs per event, and what a dump costs.
 *
 *   bench_recorder [--api async|sync] [--pairs N] [--batches B] [--depth D] [--dump]
 *
 * Calls cuMemAllocAsync/cuMemFreeAsync (default: the cheapest driver
 * allocation, ~0.6 us per call on an H200) or cuMemAlloc/cuMemFree in
 * batches of N pairs from D frames deep (so a 32-frame stack is really 32
 * frames), and prints the median and p99 ns per call over B batches.  Run it
 * bare and under `memsnap run` (bench_recorder.sh does): the difference is
 * the recorder's cost per event.  --dump then calls memsnap_dump() (if the
 * recorder is loaded) and prints how long it took, with the event count.
 * Works on a GPU and on the simulated device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

static int use_async = 1, pairs = 1000, batches = 200, depth = 40, do_dump = 0;
static CUstream stream;
static double *batch_ns;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(CUresult r, const char *what)
{
    const char *s = NULL;
    cuGetErrorString(r, &s);
    fprintf(stderr, "bench_recorder: %s: %s\n", what, s ? s : "?");
    exit(1);
}

static __attribute__((noinline)) void run_batches(void)
{
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < pairs; i++) {
            CUdeviceptr p;
            CUresult r;
            if (use_async) {
                if ((r = cuMemAllocAsync(&p, 4096 + (size_t)(i & 7) * 512, stream)))
                    die(r, "cuMemAllocAsync");
                if ((r = cuMemFreeAsync(p, stream)))
                    die(r, "cuMemFreeAsync");
            } else {
                if ((r = cuMemAlloc(&p, 4096 + (size_t)(i & 7) * 512)))
                    die(r, "cuMemAlloc");
                if ((r = cuMemFree(p)))
                    die(r, "cuMemFree");
            }
        }
        batch_ns[b] = (now_ns() - t0) / (2.0 * pairs);
        cuStreamSynchronize(stream);
    }
}

/* Recurse so the calls happen `depth` frames deep. */
static __attribute__((noinline)) int deep(int d)
{
    if (d <= 0) {
        run_batches();
        return 0;
    }
    int r = deep(d - 1);
    __asm__ volatile("" ::: "memory");   /* not a tail call */
    return r + 1;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--api") && i + 1 < argc) {
            use_async = strcmp(argv[++i], "sync") != 0;
        } else if (!strcmp(argv[i], "--pairs") && i + 1 < argc) {
            pairs = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
            batches = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--depth") && i + 1 < argc) {
            depth = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--dump")) {
            do_dump = 1;
        } else {
            fprintf(stderr, "usage: bench_recorder [--api async|sync] [--pairs N] "
                            "[--batches B] [--depth D] [--dump]\n");
            return 2;
        }
    }
    if (pairs < 1 || batches < 1 || depth < 0) {
        fprintf(stderr, "bench_recorder: --pairs and --batches must be positive\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CUresult r;
    if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)) ||
        (r = cuDevicePrimaryCtxRetain(&ctx, dev)) || (r = cuCtxSetCurrent(ctx)))
        die(r, "init");
    if ((r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)))
        die(r, "cuStreamCreate");
    char name[128];
    cuDeviceGetName(name, sizeof name, dev);
    batch_ns = calloc((size_t)batches, sizeof *batch_ns);
    deep(depth);
    qsort(batch_ns, (size_t)batches, sizeof *batch_ns, cmp);
    double med = batch_ns[batches / 2], p99 = batch_ns[(batches * 99) / 100];
    printf("device %s | api %s | %d batches x %d pairs | depth %d | ns/call median %.1f p99 %.1f\n",
           name, use_async ? "cuMemAllocAsync+cuMemFreeAsync" : "cuMemAlloc+cuMemFree", batches,
           pairs, depth, med, p99);
    if (do_dump) {
        int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_dump");
        if (!dump) {
            printf("dump: the recorder is not loaded\n");
        } else {
            double t0 = now_ns();
            int rc = dump("bench");
            printf("dump: %.1f ms for %lld events (rc %d)\n", (now_ns() - t0) / 1e6,
                   2LL * pairs * batches, rc);
        }
    }
    return 0;
}

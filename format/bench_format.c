/* msnap_format_bench: what the snapshot format costs, for a realistic mix.
 *
 * Generates N events shaped like a training/decode process seen by the
 * recorder: alloc/free pairs (half cuMemAlloc_v2 with no stream, half
 * cuMemAllocAsync/cuMemFreeAsync on one stream), sizes log-uniform from
 * 512 B to 1 GiB, 512-byte aligned addresses in one device VA range,
 * ~2000 distinct stacks with a skewed popularity, 4 threads, 2 devices,
 * timestamps advancing 1..50 us.  It then reports
 *   - ns per msnap_fmt_event (formatting only, into a memory buffer);
 *   - bytes per event in a file: plain, zstd level 1, zstd level 3 (written
 *     through msnap_out with a flush every 10000 events, as a recorder
 *     flushing a few times per second would);
 *   - ns per event for msnap_reader_next over the plain and the zstd files.
 * Usage: msnap_format_bench [events] [dir]   (defaults: 1000000, /tmp);
 * KEEP=1 in the environment keeps the three files for inspection.
 * Not run by ctest: numbers depend on the machine; they belong in
 * docs/benchmarks.md with the machine named. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memsnap/format.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: deterministic, fast. */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* Fills ev[0..n) with the mix described above. */
static void make_events(msnap_event *ev, size_t n)
{
    enum { LIVE_MAX = 4096 };
    static uint64_t live_addr[LIVE_MAX], live_size[LIVE_MAX];
    static uint32_t live_stack[LIVE_MAX];
    static uint8_t live_async[LIVE_MAX];
    size_t nlive = 0;
    uint64_t t = 1000000, next_addr = 0x7f3a40000000ull;
    const uint64_t stream = 0x55d0c8a3b2f0ull;
    const uint32_t tids[4] = {41211, 41230, 41231, 41232};

    for (size_t i = 0; i < n; i++) {
        msnap_event *e = &ev[i];
        memset(e, 0, sizeof *e);
        t += 1000 + rnd() % 49000;
        e->t_ns = t;
        e->tid = tids[rnd() % 4];
        e->device = (int16_t)(rnd() % 8 == 0);
        int do_free = nlive == LIVE_MAX || (nlive > 0 && rnd() % 2);
        if (do_free) {
            size_t k = rnd() % nlive;
            e->addr = live_addr[k];
            e->size = live_size[k];
            e->stack = live_stack[k] + 1;
            if (live_async[k]) {
                e->action = MSNAP_A_ASYNC_FREE;
                e->api = MSNAP_API_cuMemFreeAsync;
                e->stream = stream;
            } else {
                e->action = MSNAP_A_FREE;
                e->api = MSNAP_API_cuMemFree_v2;
            }
            nlive--;
            live_addr[k] = live_addr[nlive];
            live_size[k] = live_size[nlive];
            live_stack[k] = live_stack[nlive];
            live_async[k] = live_async[nlive];
            continue;
        }
        int shift = 9 + (int)(rnd() % 21); /* 512 B .. 1 GiB */
        uint64_t size = (1ull << shift) + (rnd() % (1ull << shift) & ~511ull);
        if (size > (1ull << 30))
            size = 1ull << 30;
        int async = rnd() % 2;
        /* skewed stack popularity: most allocations from few stacks */
        uint32_t stack = (uint32_t)(rnd() % 8 ? rnd() % 64 : rnd() % 2000) + 1;
        e->action = async ? MSNAP_A_ASYNC_ALLOC : MSNAP_A_ALLOC;
        e->api = async ? MSNAP_API_cuMemAllocAsync : MSNAP_API_cuMemAlloc_v2;
        e->stream = async ? stream : 0;
        e->addr = next_addr;
        e->size = size;
        e->stack = stack;
        next_addr += (size + 511) & ~511ull;
        if (next_addr > 0x7f5a40000000ull)
            next_addr = 0x7f3a40000000ull;
        live_addr[nlive] = e->addr;
        live_size[nlive] = size;
        live_stack[nlive] = stack - 1;
        live_async[nlive] = (uint8_t)async;
        nlive++;
    }
}

/* Writes header + events to path at zstd level (0 plain).  Returns bytes. */
static uint64_t write_file(const char *path, int level, const msnap_event *ev, size_t n)
{
    char buf[4096];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(path);
        exit(2);
    }
    msnap_out *o = msnap_out_fdopen(fd, level);
    msnap_header h = {.pid = 1234, .argc = 0, .ndevices = 0};
    strcpy(h.host, "bench");
    strcpy(h.clock, "CLOCK_MONOTONIC");
    strcpy(h.mode, "stream");
    msnap_out_write(o, buf, msnap_fmt_header(buf, sizeof buf, &h));
    for (size_t i = 0; i < n; i++) {
        size_t len = msnap_fmt_event(buf, sizeof buf, &ev[i]);
        msnap_out_write(o, buf, len);
        if (i % 10000 == 9999)
            msnap_out_flush(o);
    }
    msnap_out_flush(o);
    uint64_t bytes = msnap_out_bytes(o);
    if (msnap_out_close(o) < 0) {
        perror("close");
        exit(2);
    }
    return bytes;
}

/* Reads path back; returns ns per event (checks the count). */
static double read_file(const char *path, size_t n)
{
    char err[512];
    double t0 = now_s();
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s: %s\n", path, err);
        exit(2);
    }
    static msnap_record rec;
    size_t events = 0;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1)
        events += rec.type == MSNAP_REC_EVENT;
    if (rc < 0 || events != n) {
        fprintf(stderr, "%s: read %zu events, rc %d: %s\n", path, events, rc,
                msnap_reader_error(r));
        exit(2);
    }
    msnap_reader_close(r);
    return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    msnap_event *ev = malloc(n * sizeof *ev);
    char *mem = malloc(n * MSNAP_FMT_EVENT_MAX);
    if (!ev || !mem || n == 0)
        return 2;
    make_events(ev, n);

    double best = 1e9;
    size_t total = 0;
    for (int rep = 0; rep < 3; rep++) {
        char *p = mem;
        double t0 = now_s();
        for (size_t i = 0; i < n; i++)
            p += msnap_fmt_event(p, MSNAP_FMT_EVENT_MAX, &ev[i]);
        double dt = now_s() - t0;
        total = (size_t)(p - mem);
        if (dt < best)
            best = dt;
    }
    printf("events: %zu\n", n);
    printf("msnap_fmt_event: %.1f ns/event, %.1f bytes/event (text)\n", best * 1e9 / (double)n,
           (double)total / (double)n);

    static const int levels[] = {0, 1, 3};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/msnap_bench_%d.msnap%s", dir, levels[i],
                 levels[i] ? ".zst" : "");
        double t0 = now_s();
        uint64_t bytes = write_file(path, levels[i], ev, n);
        double wt = (now_s() - t0) * 1e9 / (double)n;
        double rt = read_file(path, n);
        printf("%-7s level %d: %6.2f bytes/event, write %.1f ns/event, read %.1f ns/event\n",
               levels[i] ? "zstd" : "plain", levels[i], (double)bytes / (double)n, wt, rt);
        if (!getenv("KEEP"))
            unlink(path);
    }
    free(mem);
    free(ev);
    return 0;
}

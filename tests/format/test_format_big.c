/* A million events through the format library, plain and zstd level 1:
 * every event written with msnap_fmt_event + msnap_out (flushing every
 * 50000 events, as the recorder does on a timer) must come back from
 * msnap_reader_next with the same fields, in order, followed by the
 * trailer.  Timing is printed for information only (benchmarks are never
 * assertions; see bench/ and format/bench_format.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memsnap/format.h"
#include "../check.h"

#define NEVENTS 1000000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Event i, deterministic, covering big values every so often. */
static void make_event(uint64_t i, msnap_event *e)
{
    memset(e, 0, sizeof *e);
    e->t_ns = i * 1237;
    e->action = (uint16_t)(i % 2 ? MSNAP_A_FREE : MSNAP_A_ALLOC);
    e->api = (uint16_t)(i % 2 ? MSNAP_API_cuMemFree_v2 : MSNAP_API_cuMemAlloc_v2);
    e->addr = 0x7f0000000000ull + (i / 2) * 4096;
    e->size = i % 2 ? 0 : 512ull << (i % 21);
    e->stack = (uint32_t)(i % 977);
    e->tid = 1000 + (uint32_t)(i % 4);
    e->device = (int16_t)(i % 5 == 0 ? -1 : (int)(i % 3));
    if (i % 1000 == 0)
        e->aux = UINT64_MAX - i; /* hex string on file */
}

static void round_trip(const char *path, int level)
{
    char buf[4096];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    msnap_out *o = msnap_out_fdopen(fd, level);
    CHECK(o != NULL);
    if (!o)
        return;
    msnap_header h = {0};
    strcpy(h.mode, "stream");
    double t0 = now_s();
    CHECK(msnap_out_write(o, buf, msnap_fmt_header(buf, sizeof buf, &h)) == 0);
    int werr = 0;
    for (uint64_t i = 0; i < NEVENTS; i++) {
        msnap_event e;
        make_event(i, &e);
        size_t n = msnap_fmt_event(buf, sizeof buf, &e);
        werr |= n == 0 || msnap_out_write(o, buf, n) != 0;
        if (i % 50000 == 49999)
            werr |= msnap_out_flush(o) != 0;
    }
    msnap_trailer t = {.t_ns = NEVENTS * 1237ull, .events = NEVENTS, .reason = "exit"};
    werr |= msnap_out_write(o, buf, msnap_fmt_trailer(buf, sizeof buf, &t)) != 0;
    CHECK(!werr);
    uint64_t bytes = msnap_out_bytes(o);
    CHECK(msnap_out_close(o) == 0);
    double t1 = now_s();

    char err[512];
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    CHECK(r != NULL);
    if (!r)
        return;
    static msnap_record rec;
    uint64_t nev = 0, bad = 0, trailer_events = 0;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        if (rec.type == MSNAP_REC_EVENT) {
            msnap_event e;
            make_event(nev, &e);
            bad += memcmp(&e, &rec.u.event, sizeof e) != 0;
            bad += rec.line != nev + 2;
            nev++;
        } else if (rec.type == MSNAP_REC_TRAILER) {
            trailer_events = rec.u.trailer.events;
        }
    }
    double t2 = now_s();
    CHECK(rc == 0);
    CHECK(!msnap_reader_truncated(r));
    CHECK_EQ_U64(nev, NEVENTS);
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(trailer_events, NEVENTS);
    msnap_reader_close(r);
    printf("%s (zstd %d): %.1f bytes/event, write %.0f ns/event, read %.0f ns/event\n", path,
           level, (double)bytes / NEVENTS, (t1 - t0) * 1e9 / NEVENTS, (t2 - t1) * 1e9 / NEVENTS);
}

int main(void)
{
    char dir[] = "/tmp/msnap_test_format_big_XXXXXX";
    char path[128];
    if (!mkdtemp(dir))
        return 2;
    snprintf(path, sizeof path, "%s/big.msnap", dir);
    round_trip(path, 0);
    unlink(path);
    snprintf(path, sizeof path, "%s/big.msnap.zst", dir);
    round_trip(path, 1);
    unlink(path);
    rmdir(dir);
    return check_summary();
}

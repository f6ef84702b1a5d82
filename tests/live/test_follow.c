/* live.follow: the format reader's follow mode (msnap_reader_follow) and
 * the live view over a file that grows (analyze/live.h), plain and zstd.
 *
 * A file is written a piece at a time, as the recorder's writer does: a
 * line is never handed out before its '\n' is there (nor a zstd block
 * before it is flushed), nothing is "cut off" while following, a later
 * call reads on, and with following off a cut-off last line is truncated
 * as for any file.  Then the live view: levels, peaks and the events count
 * move as lines come, and the trailer ends the recording.
 *
 *   test_follow DIR
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "analyze/live.h"
#include "memsnap/format.h"

static char line[1 << 16];

static size_t header_line(char *buf, size_t cap)
{
    msnap_header h;
    memset(&h, 0, sizeof h);
    h.major = MSNAP_FORMAT_MAJOR;
    h.minor = MSNAP_FORMAT_MINOR;
    h.pid = 42;
    snprintf(h.host, sizeof h.host, "testhost");
    snprintf(h.clock, sizeof h.clock, "CLOCK_MONOTONIC");
    snprintf(h.mode, sizeof h.mode, "stream");
    h.ndevices = 1;
    h.devices[0].index = 0;
    snprintf(h.devices[0].name, sizeof h.devices[0].name, "Test GPU");
    h.devices[0].total = 1ull << 30;
    return msnap_fmt_header(buf, cap, &h);
}

static size_t alloc_line(char *buf, size_t cap, uint64_t t, uint64_t addr, uint64_t size)
{
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = t;
    e.action = MSNAP_A_ALLOC;
    e.api = MSNAP_API_cuMemAlloc_v2;
    e.device = 0;
    e.addr = addr;
    e.size = size;
    return msnap_fmt_event(buf, cap, &e);
}

static void append(int fd, const char *p, size_t n)
{
    CHECK(write(fd, p, n) == (ssize_t)n);
}

/* Plain text: a line in two pieces. */
static void plain(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/follow-plain.msnap", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    append(fd, line, header_line(line, sizeof line));
    size_t n = alloc_line(line, sizeof line, 1000, 0x1000, 4096);
    append(fd, line, 10);                            /* half an event line */
    char err[512];
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    CHECK(r != NULL);
    msnap_reader_follow(r, 1);
    msnap_record rec;
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_HEADER);
    CHECK(msnap_reader_next(r, &rec) == 0);          /* not yet: the line is not whole */
    CHECK(!msnap_reader_truncated(r));
    CHECK(msnap_reader_next(r, &rec) == 0);
    append(fd, line + 10, n - 10);                   /* the rest, and one more */
    n = alloc_line(line, sizeof line, 2000, 0x2000, 8192);
    append(fd, line, n);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_EVENT &&
          rec.u.event.addr == 0x1000 && rec.u.event.size == 4096);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.u.event.addr == 0x2000);
    CHECK(msnap_reader_next(r, &rec) == 0);
    append(fd, line, 7);                             /* a cut-off line, then the end */
    CHECK(msnap_reader_next(r, &rec) == 0 && !msnap_reader_truncated(r));
    msnap_reader_follow(r, 0);
    CHECK(msnap_reader_next(r, &rec) == 0 && msnap_reader_truncated(r));
    msnap_reader_close(r);
    close(fd);
}

/* zstd: what is flushed is read, what is not waits. */
static void zstd(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/follow-zstd.msnap", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    msnap_out *o = msnap_out_fdopen(fd, 1);
    CHECK(o != NULL);
    CHECK(msnap_out_write(o, line, header_line(line, sizeof line)) == 0);
    CHECK(msnap_out_flush(o) == 0);
    char err[512];
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    CHECK(r != NULL && msnap_reader_is_zstd(r));
    msnap_reader_follow(r, 1);
    msnap_record rec;
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_HEADER);
    size_t n = alloc_line(line, sizeof line, 1000, 0x1000, 4096);
    CHECK(msnap_out_write(o, line, n) == 0);         /* buffered, not flushed */
    CHECK(msnap_reader_next(r, &rec) == 0 && !msnap_reader_truncated(r));
    CHECK(msnap_out_flush(o) == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.u.event.addr == 0x1000);
    n = alloc_line(line, sizeof line, 2000, 0x2000, 8192);
    CHECK(msnap_out_write(o, line, 12) == 0);        /* half a line, flushed */
    CHECK(msnap_out_flush(o) == 0);
    CHECK(msnap_reader_next(r, &rec) == 0 && !msnap_reader_truncated(r));
    CHECK(msnap_out_write(o, line + 12, n - 12) == 0);
    CHECK(msnap_out_flush(o) == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.u.event.addr == 0x2000 &&
          rec.u.event.size == 8192);
    CHECK(msnap_out_close(o) == 0);                  /* the frame's end */
    msnap_reader_follow(r, 0);
    CHECK(msnap_reader_next(r, &rec) == 0 && !msnap_reader_truncated(r));
    msnap_reader_close(r);
}

/* The live view of a stream as it grows, then ends. */
static void view(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/follow-view.msnap", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    append(fd, line, header_line(line, sizeof line));
    append(fd, line, alloc_line(line, sizeof line, 1000, 0x1000, 1 << 20));
    char err[1280];
    an_live_opts o = {.at_ns = UINT64_MAX, .sites = 4};
    an_live *l = an_live_open(path, &o, err, sizeof err);
    CHECK(l != NULL);
    if (!l) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    const an_live_view *v = an_live_view_of(l);
    CHECK(v->source == AN_LIVE_FOLLOW && !v->finished && v->events == 1);
    CHECK(v->ndev == 1 && v->dev[0].reserved == 1 << 20 && v->dev[0].total == 1ull << 30);
    CHECK(!strcmp(v->dev[0].name, "Test GPU") && v->dev[0].nsites == 1);
    /* a second later: one more MiB, a history point for the second passed */
    append(fd, line, alloc_line(line, sizeof line, 1000001000ull, 0x200000, 1 << 20));
    CHECK(an_live_update(l, err, sizeof err) == 0);
    v = an_live_view_of(l);
    CHECK(v->events == 2 && v->dev[0].reserved == 2 << 20 && v->dev[0].peak_reserved == 2 << 20);
    CHECK(v->dev[0].nhist == 1 && v->dev[0].hist[0].reserved == 1 << 20);
    CHECK(v->dev[0].nsites == 1 && v->dev[0].sites[0].bytes == 2 << 20 &&
          v->dev[0].sites[0].trend == 1 << 20);
    /* a free, then the trailer: the recording is finished */
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = 1000002000ull;
    e.action = MSNAP_A_FREE;
    e.api = MSNAP_API_cuMemFree_v2;
    e.device = 0;
    e.addr = 0x1000;
    append(fd, line, msnap_fmt_event(line, sizeof line, &e));
    msnap_trailer t = {.t_ns = 1000003000ull, .events = 3, .reason = "exit"};
    append(fd, line, msnap_fmt_trailer(line, sizeof line, &t));
    CHECK(an_live_update(l, err, sizeof err) == 0);
    v = an_live_view_of(l);
    CHECK(v->finished && !strcmp(v->reason, "exit") && v->events == 3);
    CHECK(v->dev[0].reserved == 1 << 20 && v->dev[0].peak_reserved == 2 << 20);
    an_live_close(l);
    close(fd);
    /* a file read two records an update: catching up until the end */
    an_live_opts small = o;
    small.budget = 2;
    l = an_live_open(path, &small, err, sizeof err);
    CHECK(l != NULL);
    int updates = 1;
    while (l && an_live_view_of(l)->catching_up && updates < 100) {
        CHECK(an_live_update(l, err, sizeof err) == 0);
        updates++;
    }
    if (l) {
        v = an_live_view_of(l);
        CHECK(updates >= 3 && v->finished && v->events == 3 && v->dev[0].reserved == 1 << 20);
        an_live_close(l);
    }
    /* not a recording: one line naming the file */
    snprintf(path, sizeof path, "%s/follow-garbage.msnap", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    append(fd, "hello\n", 6);
    close(fd);
    CHECK(an_live_open(path, &o, err, sizeof err) == NULL);
    CHECK(strstr(err, "follow-garbage.msnap: ") && strstr(err, "not a memsnap snapshot") &&
          !strchr(err, '\n'));
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    plain(dir);
    zstd(dir);
    view(dir);
    return check_summary();
}

/* Unit tests of the snapshot format library (format/, docs/format.md).
 *
 * Every record type is written with msnap_fmt_* through msnap_out (plain and
 * zstd) and read back field by field, including 64-bit values at and above
 * 2^53 (hex strings on file) and device -1.  Then the reader's promises:
 * a cut-off last line (plain, and zstd cut at every kind of offset) yields a
 * prefix of the records and no error; unknown keys, line types and actions
 * are skipped; a newer major version is refused with the documented message;
 * garbage, binary and empty files give one-line errors, never crashes;
 * strings survive escaping (quotes, backslash, control characters) and
 * invalid UTF-8 becomes U+FFFD; the fast event parser and the cJSON path
 * agree. */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memsnap/format.h"
#include "../check.h"

static char tmpdir[] = "/tmp/msnap_test_format_XXXXXX";

/* A path inside the test's temporary directory. */
static const char *tpath(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    return p;
}

static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

/* Reads a whole file; *n = its size.  Caller frees. */
static char *read_raw(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (!p) {
        fclose(f);
        return NULL;
    }
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

/* Writes text through msnap_out at level (0 plain) to path. */
static void write_text(const char *path, int level, const char *text, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    msnap_out *o = msnap_out_fdopen(fd, level);
    CHECK(o != NULL);
    CHECK(msnap_out_write(o, text, n) == 0);
    CHECK(msnap_out_close(o) == 0);
}

/* Opens path; on failure copies the message to err and returns NULL. */
static msnap_reader *ropen(const char *path, char *err)
{
    err[0] = 0;
    return msnap_reader_open(path, err, 512);
}

/* Counts the records of path; returns -1 on an error (message in err),
 * *trunc = truncated flag, *nev = event count. */
static long count_records(const char *path, char *err, int *trunc, long *nev)
{
    msnap_reader *r = ropen(path, err);
    static msnap_record rec;
    long n = 0;
    int rc;
    *trunc = 0;
    if (nev)
        *nev = 0;
    if (!r)
        return -1;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        n++;
        if (nev && rec.type == MSNAP_REC_EVENT)
            (*nev)++;
    }
    if (rc < 0) {
        snprintf(err, 512, "%s", msnap_reader_error(r));
        n = -1;
    }
    *trunc = msnap_reader_truncated(r);
    msnap_reader_close(r);
    return n;
}

static const char *HDR = "{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\"}\n";

/* Writes HDR + body as a plain file and counts its records. */
static long count_text(const char *body, char *err, int *trunc)
{
    const char *p = tpath("text.msnap");
    size_t hn = strlen(HDR), bn = strlen(body);
    char *all = malloc(hn + bn);
    memcpy(all, HDR, hn);
    memcpy(all + hn, body, bn);
    write_raw(p, all, hn + bn);
    free(all);
    return count_records(p, err, trunc, NULL);
}

/* ---- 1. Round trip of every record type. -------------------------------- */

#define BIG (UINT64_C(1) << 53)

static const char *argv_in[] = {"python3", "train.py", "--name=\"x\"", "a\\b\nc"};

static msnap_event ev_in[] = {
    {.t_ns = 1, .addr = 0x7f0000000000, .size = 512, .stack = 3, .tid = 100,
     .action = MSNAP_A_ALLOC, .api = MSNAP_API_cuMemAlloc_v2},
    {.t_ns = 2, .addr = 0x7f0000000000, .action = MSNAP_A_FREE, .api = MSNAP_API_cuMemFree_v2,
     .tid = 100},
    {.t_ns = BIG - 1, .addr = BIG, .size = UINT64_MAX, .stream = BIG + 1, .aux = UINT64_MAX - 1,
     .aux2 = 0xdeadbeefcafef00dull, .stack = UINT32_MAX, .tid = UINT32_MAX,
     .action = MSNAP_A_VMM_MAP, .api = MSNAP_API_cuMemMap, .device = -1, .result = -32768},
    {.t_ns = BIG, .size = 1 << 30, .aux = 123, .aux2 = 456, .device = 7, .result = 2,
     .action = MSNAP_A_OOM, .api = MSNAP_API_cuMemAllocAsync_ptsz},
    {.t_ns = 5, .aux = 9, .action = MSNAP_A_NVTX_MARK, .api = MSNAP_API_NVTX},
    {.t_ns = 6, .action = MSNAP_A_DUMP},
    {.t_ns = 0, .device = INT16_MAX, .result = INT16_MAX, .action = MSNAP_A_BLOCK_FREE,
     .api = MSNAP_API_ALLOCATOR},
    /* PyTorch's: the autograd sequence number (format 1.2), small and huge */
    {.t_ns = 7, .addr = 0x7f0000200000, .size = 1536, .stream = 0x5000, .aux2 = 1000,
     .seq = 42, .stack = 2, .tid = 101, .action = MSNAP_A_BLOCK_ALLOC, .api = MSNAP_API_TORCH},
    {.t_ns = 8, .addr = 0x7f0000400000, .size = 512, .seq = UINT64_MAX, .action = MSNAP_A_BLOCK_ALLOC,
     .api = MSNAP_API_TORCH},
};
#define NEV ((int)(sizeof ev_in / sizeof ev_in[0]))

static const uint64_t ips_in[] = {0x7f1234567890, 0x401000, BIG, UINT64_MAX, 0};

static size_t write_all_types(char *text)
{
    size_t n = 0;
    msnap_header h = {0};
    h.pid = 4242;
    strcpy(h.host, "gpu-node-7");
    h.argv = argv_in;
    h.argc = 4;
    strcpy(h.clock, "CLOCK_MONOTONIC");
    h.t0_unix_ns = 1700000000123456789ull;
    strcpy(h.mode, "ring");
    h.settings_json = "{ \"ring\": 100000, \"stacks\": true, \"out\": \"a\\\"b\" }";
    h.ndevices = 2;
    h.devices[0] = (msnap_device_info){.index = 0, .total = 150ull << 30};
    strcpy(h.devices[0].name, "NVIDIA H200");
    h.devices[1] = (msnap_device_info){.index = 1, .total = BIG + 5};
    strcpy(h.devices[1].name, "sim \"1\"");
    n += msnap_fmt_header(text + n, 65536, &h);

    msnap_device_info d = {.index = 3, .total = 80ull << 30};
    strcpy(d.name, "NVIDIA A100-SXM4-80GB");
    n += msnap_fmt_device(text + n, 4096, &d);
    msnap_module m = {.base = 0x7f0000000000, .size = 0x21000, .path = "/usr/lib/libcuda.so.1",
                      .build_id = "0123abcd"};
    n += msnap_fmt_module(text + n, 4096, &m);
    msnap_stack st = {.id = 3, .depth = 5, .ips = ips_in};
    n += msnap_fmt_stack(text + n, 4096, &st);
    msnap_stack st0 = {.id = 4, .depth = 0, .ips = NULL};
    n += msnap_fmt_stack(text + n, 4096, &st0);
    msnap_symbol sy = {.ip = UINT64_MAX, .function = "at::native::empty_cuda(c10::ArrayRef<long>)",
                       .file = "/src/a.cpp", .line = 88, .offset = BIG};
    n += msnap_fmt_symbol(text + n, 4096, &sy);
    msnap_str s = {.id = 9, .s = "step 12 \"fwd\""};
    n += msnap_fmt_str(text + n, 4096, &s);
    for (int i = 0; i < NEV; i++)
        n += msnap_fmt_event(text + n, MSNAP_FMT_EVENT_MAX, &ev_in[i]);
    msnap_counters c = {.t_ns = 77, .device = -1, .reserved = 1, .allocated = 2, .async = 3,
                        .managed = 4, .host = BIG, .vmm_mapped = UINT64_MAX};
    size_t c_at = n;
    n += msnap_fmt_counters(text + n, 4096, &c);
    CHECK(!memmem(text + c_at, n - c_at, "device_used", 11)); /* 0: left out */
    msnap_counters c2 = {.t_ns = 78, .device = 1, .reserved = 5, .device_used = BIG};
    n += msnap_fmt_counters(text + n, 4096, &c2);
    n += msnap_fmt_state_begin(text + n, 4096, 88, 2);
    msnap_live l1 = {.kind = MSNAP_A_ASYNC_ALLOC, .device = -1, .addr = 0x1000, .size = BIG,
                     .stream = 0x55d0c8a3b2f0, .aux = 5, .stack = 3, .t_ns = 9};
    msnap_live l2 = {.kind = MSNAP_A_VMM_CREATE, .aux = UINT64_MAX, .size = 2 << 20};
    n += msnap_fmt_live(text + n, 4096, &l1);
    n += msnap_fmt_live(text + n, 4096, &l2);
    msnap_trailer t = {.t_ns = 99, .events = NEV, .dropped = 1, .stacks_dropped = 2,
                       .reason = "exit"};
    n += msnap_fmt_trailer(text + n, 4096, &t);
    return n;
}

static int ev_equal(const msnap_event *a, const msnap_event *b)
{
    return a->t_ns == b->t_ns && a->addr == b->addr && a->size == b->size &&
           a->stream == b->stream && a->aux == b->aux && a->aux2 == b->aux2 &&
           a->seq == b->seq && a->stack == b->stack && a->tid == b->tid && a->action == b->action &&
           a->api == b->api && a->device == b->device && a->result == b->result;
}

static void check_all_types(const char *path)
{
    char err[512];
    msnap_reader *r = ropen(path, err);
    CHECK(r != NULL);
    if (!r) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    static msnap_record rec;
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_HEADER && rec.line == 1);
    const msnap_header *h = &rec.u.header;
    CHECK(h->major == 1 && h->minor == MSNAP_FORMAT_MINOR);
    CHECK(h->pid == 4242);
    CHECK(strcmp(h->host, "gpu-node-7") == 0);
    CHECK(h->argc == 4);
    for (int i = 0; i < 4 && i < h->argc; i++)
        CHECK(strcmp(h->argv[i], argv_in[i]) == 0);
    CHECK(strcmp(h->clock, "CLOCK_MONOTONIC") == 0);
    CHECK_EQ_U64(h->t0_unix_ns, 1700000000123456789ull);
    CHECK(strcmp(h->mode, "ring") == 0);
    CHECK(strcmp(h->settings_json, "{\"ring\":100000,\"stacks\":true,\"out\":\"a\\\"b\"}") == 0);
    CHECK(h->ndevices == 2);
    CHECK(strcmp(h->devices[1].name, "sim \"1\"") == 0 && h->devices[1].total == BIG + 5);
    CHECK(h->devices[0].total == 150ull << 30 && h->devices[1].index == 1);
    CHECK(msnap_reader_header(r)->pid == 4242);

    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_DEVICE && rec.line == 2);
    CHECK(rec.u.device.index == 3 && rec.u.device.total == 80ull << 30);
    CHECK(strcmp(rec.u.device.name, "NVIDIA A100-SXM4-80GB") == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_MODULE);
    CHECK(rec.u.module.base == 0x7f0000000000 && rec.u.module.size == 0x21000);
    CHECK(strcmp(rec.u.module.path, "/usr/lib/libcuda.so.1") == 0);
    CHECK(strcmp(rec.u.module.build_id, "0123abcd") == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_STACK);
    CHECK(rec.u.stack.id == 3 && rec.u.stack.depth == 5);
    for (int i = 0; i < 5 && i < rec.u.stack.depth; i++)
        CHECK_EQ_U64(rec.u.stack.ips[i], ips_in[i]);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_STACK);
    CHECK(rec.u.stack.id == 4 && rec.u.stack.depth == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_SYMBOL);
    CHECK_EQ_U64(rec.u.symbol.ip, UINT64_MAX);
    CHECK(strcmp(rec.u.symbol.function, "at::native::empty_cuda(c10::ArrayRef<long>)") == 0);
    CHECK(strcmp(rec.u.symbol.file, "/src/a.cpp") == 0 && rec.u.symbol.line == 88);
    CHECK_EQ_U64(rec.u.symbol.offset, BIG);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_STR);
    CHECK(rec.u.str.id == 9 && strcmp(rec.u.str.s, "step 12 \"fwd\"") == 0);
    for (int i = 0; i < NEV; i++) {
        CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_EVENT);
        CHECK(ev_equal(&rec.u.event, &ev_in[i]));
        if (!ev_equal(&rec.u.event, &ev_in[i]))
            fprintf(stderr, "  event %d differs\n", i);
    }
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_COUNTERS);
    CHECK(rec.u.counters.t_ns == 77 && rec.u.counters.device == -1);
    CHECK(rec.u.counters.reserved == 1 && rec.u.counters.allocated == 2);
    CHECK(rec.u.counters.async == 3 && rec.u.counters.managed == 4);
    CHECK(rec.u.counters.host == BIG && rec.u.counters.vmm_mapped == UINT64_MAX);
    CHECK(rec.u.counters.device_used == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_COUNTERS);
    CHECK(rec.u.counters.t_ns == 78 && rec.u.counters.device == 1);
    CHECK(rec.u.counters.reserved == 5 && rec.u.counters.device_used == BIG);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_STATE_BEGIN);
    CHECK(rec.u.state_begin.t_ns == 88 && rec.u.state_begin.nlive == 2);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_LIVE);
    CHECK(rec.u.live.kind == MSNAP_A_ASYNC_ALLOC && rec.u.live.device == -1);
    CHECK(rec.u.live.addr == 0x1000 && rec.u.live.size == BIG);
    CHECK(rec.u.live.stream == 0x55d0c8a3b2f0 && rec.u.live.aux == 5);
    CHECK(rec.u.live.stack == 3 && rec.u.live.t_ns == 9);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_LIVE);
    CHECK(rec.u.live.kind == MSNAP_A_VMM_CREATE && rec.u.live.aux == UINT64_MAX);
    CHECK(rec.u.live.device == 0 && rec.u.live.stream == 0 && rec.u.live.stack == 0);
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_TRAILER);
    CHECK(rec.u.trailer.t_ns == 99 && rec.u.trailer.events == (uint64_t)NEV);
    CHECK(rec.u.trailer.dropped == 1 && rec.u.trailer.stacks_dropped == 2);
    CHECK(strcmp(rec.u.trailer.reason, "exit") == 0);
    CHECK(msnap_reader_next(r, &rec) == 0);
    CHECK(msnap_reader_next(r, &rec) == 0);
    CHECK(!msnap_reader_truncated(r));
    CHECK(strcmp(msnap_reader_header(r)->argv[3], "a\\b\nc") == 0);
    msnap_reader_close(r);
}

static void test_round_trip(void)
{
    static char text[1 << 17];
    size_t n = write_all_types(text);
    CHECK(n > 0);
    for (size_t i = 0; i < n; i++)
        CHECK(text[i] != 0);
    write_text(tpath("all.msnap"), 0, text, n);
    check_all_types(tpath("all.msnap"));
    write_text(tpath("all.msnap.zst"), 3, text, n);
    check_all_types(tpath("all.msnap.zst"));
    /* the same through stdin-like fd opening */
    char err[512];
    int fd = open(tpath("all.msnap.zst"), O_RDONLY);
    msnap_reader *r = msnap_reader_fdopen(fd, err, sizeof err);
    CHECK(r != NULL);
    msnap_reader_close(r);
    /* the writer refuses placeholder actions and a small cap */
    char small[8];
    msnap_event none = {.action = MSNAP_A_NONE};
    CHECK(msnap_fmt_event(text, sizeof text, &none) == 0);
    CHECK(msnap_fmt_event(small, sizeof small, &ev_in[0]) == 0);
    msnap_str s = {.id = 1, .s = "hello"};
    CHECK(msnap_fmt_str(small, sizeof small, &s) == 0);
    size_t need = msnap_fmt_str(text, sizeof text, &s);
    CHECK(msnap_fmt_str(text, need, &s) == need && msnap_fmt_str(text, need - 1, &s) == 0);
    /* event into an exact-size buffer (the copy path) */
    size_t en = msnap_fmt_event(text, sizeof text, &ev_in[2]);
    CHECK(msnap_fmt_event(small, 0, &ev_in[2]) == 0);
    char exact[MSNAP_FMT_EVENT_MAX];
    CHECK(msnap_fmt_event(exact, en, &ev_in[2]) == en && memcmp(exact, text, en) == 0);
}

/* ---- 2. String escaping. ------------------------------------------------ */

static void test_escaping(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"q\"uote \\ back", "q\"uote \\ back"},
        {"nl\ncr\rtab\tbs\bff\f", "nl\ncr\rtab\tbs\bff\f"},
        {"\x01\x02\x1f\x7f", "\x01\x02\x1f\x7f"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"bad\xff\xfe!", "bad\xef\xbf\xbd\xef\xbf\xbd!"},
        {"cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd"},
        {"overlong\xc0\xaf", "overlong\xef\xbf\xbd\xef\xbf\xbd"},
        {"surrogate\xed\xa0\x80", "surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"", ""},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    static char text[65536];
    size_t len = 0;
    len += (size_t)sprintf(text, "%s", HDR);
    for (int i = 0; i < n; i++) {
        msnap_str s = {.id = (uint32_t)i + 1, .s = cases[i].in};
        size_t k = msnap_fmt_str(text + len, sizeof text - len, &s);
        CHECK(k > 0 && text[len + k - 1] == '\n');
        CHECK(memchr(text + len, '\n', k - 1) == NULL); /* one line */
        len += k;
    }
    msnap_module m = {.path = "/a\"b\\c\n", .build_id = ""};
    len += msnap_fmt_module(text + len, sizeof text - len, &m);
    write_text(tpath("esc.msnap"), 0, text, len);
    char err[512];
    msnap_reader *r = ropen(tpath("esc.msnap"), err);
    CHECK(r != NULL);
    if (!r)
        return;
    static msnap_record rec;
    CHECK(msnap_reader_next(r, &rec) == 1);
    for (int i = 0; i < n; i++) {
        CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_STR);
        CHECK(rec.u.str.id == (uint32_t)i + 1);
        CHECK(strcmp(rec.u.str.s, cases[i].out) == 0);
        if (strcmp(rec.u.str.s, cases[i].out) != 0)
            fprintf(stderr, "  escape case %d differs\n", i);
    }
    CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_MODULE);
    CHECK(strcmp(rec.u.module.path, "/a\"b\\c\n") == 0);
    CHECK(msnap_reader_next(r, &rec) == 0);
    msnap_reader_close(r);
}

/* ---- 3. Truncation. ----------------------------------------------------- */

static void test_truncated_plain(void)
{
    char err[512];
    int trunc;
    /* a last line cut in the middle: not an error, flagged */
    CHECK(count_text("{\"a\":\"alloc\",\"t\":1}\n{\"a\":\"free\",\"t\":2,\"p\":12", err, &trunc) ==
          2);
    CHECK(trunc == 1);
    /* cut inside a key, inside a string, inside a non-event line */
    CHECK(count_text("{\"a\":\"alloc\",\"t\":1}\n{\"type\":\"str\",\"id\":1,\"s\":\"ab", err,
                     &trunc) == 2 && trunc);
    CHECK(count_text("{\"a\":\"al", err, &trunc) == 1 && trunc);
    CHECK(count_text("{", err, &trunc) == 1 && trunc);
    /* a complete last line without '\n' is a record */
    CHECK(count_text("{\"a\":\"alloc\",\"t\":1}", err, &trunc) == 2 && !trunc);
    CHECK(count_text("{\"type\":\"str\",\"id\":1,\"s\":\"x\"}", err, &trunc) == 2 && !trunc);
    /* a cut header */
    const char *p = tpath("cuthdr.msnap");
    write_raw(p, HDR, 20);
    CHECK(count_records(p, err, &trunc, NULL) == -1);
    CHECK(strstr(err, "line 1: the header is cut off") != NULL);
    /* every cut of a complete file: a prefix, never an error */
    static char text[1 << 17];
    size_t n = write_all_types(text);
    long full = -1, prev = 0;
    for (size_t cut = strlen(HDR) + 10; cut <= n; cut += 7) {
        size_t hl = (size_t)(strchr(text, '\n') - text) + 1;
        if (cut < hl)
            continue;
        write_raw(tpath("cut.msnap"), text, cut);
        long k = count_records(tpath("cut.msnap"), err, &trunc, NULL);
        CHECK(k >= prev);
        if (k < 0)
            fprintf(stderr, "  cut at %zu: %s\n", cut, err);
        prev = k;
    }
    write_raw(tpath("cut.msnap"), text, n);
    full = count_records(tpath("cut.msnap"), err, &trunc, NULL);
    CHECK(full == 1 + 6 + NEV + 6);
}

static void test_truncated_zstd(void)
{
    static char text[1 << 20];
    size_t n = 0;
    /* header, then enough events for several zstd blocks, flushed in parts */
    msnap_header h = {0};
    n += msnap_fmt_header(text, sizeof text, &h);
    const char *path = tpath("z.msnap.zst");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    msnap_out *o = msnap_out_fdopen(fd, 1);
    CHECK(msnap_out_write(o, text, n) == 0);
    CHECK(msnap_out_flush(o) == 0);
    long written = 0;
    for (int i = 0; i < 5000; i++) {
        msnap_event e = {.t_ns = (uint64_t)i * 1000, .addr = 0x7f0000000000ull + (uint64_t)i * 512,
                         .size = 512, .stack = (uint32_t)(i % 50), .tid = 7,
                         .action = (uint16_t)(i % 2 ? MSNAP_A_FREE : MSNAP_A_ALLOC)};
        size_t k = msnap_fmt_event(text, sizeof text, &e);
        CHECK(msnap_out_write(o, text, k) == 0);
        written++;
        if (i % 700 == 0)
            CHECK(msnap_out_flush(o) == 0);
    }
    CHECK(msnap_out_close(o) == 0);
    size_t zn = 0;
    char *z = read_raw(path, &zn);
    char err[512];
    int trunc;
    long nev, all = count_records(path, err, &trunc, &nev);
    CHECK(all == written + 1 && nev == written && !trunc);
    /* cut at many offsets: every byte near the start, then strided */
    long prev = 0;
    int errors = 0;
    for (size_t cut = 0; cut < zn; cut += cut < 64 ? 1 : 97) {
        write_raw(tpath("zcut.msnap.zst"), z, cut);
        long k = count_records(tpath("zcut.msnap.zst"), err, &trunc, &nev);
        if (k < 0) {
            /* only acceptable when nothing at all is decodable yet */
            if (!(strstr(err, "empty file") || strstr(err, "header is cut off") ||
                  strstr(err, "no header"))) {
                errors++;
                fprintf(stderr, "  zstd cut at %zu: %s\n", cut, err);
            }
            k = 0;
        }
        CHECK(k >= prev);
        prev = k;
    }
    CHECK(errors == 0);
    CHECK(prev > 1); /* late cuts recover events */
    free(z);

    /* the header flushed (as the recorder does), then events in one block
     * never flushed, cut inside that block: the text decoded so far ends at
     * the header's end, and still the reader says it was cut off */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    o = msnap_out_fdopen(fd, 1);
    n = msnap_fmt_header(text, sizeof text, &h);
    CHECK(msnap_out_write(o, text, n) == 0);
    CHECK(msnap_out_flush(o) == 0);
    size_t header_end = (size_t)msnap_out_bytes(o);
    for (int i = 0; i < 20000; i++) {
        msnap_event e = {.t_ns = (uint64_t)i * 1000, .addr = 0x7f0000000000ull + (uint64_t)i * 512,
                         .size = 512, .stack = (uint32_t)(i % 50), .tid = 7,
                         .action = (uint16_t)(i % 2 ? MSNAP_A_FREE : MSNAP_A_ALLOC)};
        size_t k = msnap_fmt_event(text, sizeof text, &e);
        CHECK(msnap_out_write(o, text, k) == 0);
    }
    CHECK(msnap_out_close(o) == 0);
    z = read_raw(path, &zn);
    CHECK(count_records(path, err, &trunc, &nev) == 20001 && !trunc);
    /* the header alone, flushed: a recording still being written */
    write_raw(tpath("zcut.msnap.zst"), z, header_end);
    CHECK(count_records(tpath("zcut.msnap.zst"), err, &trunc, &nev) == 1 && !trunc);
    write_raw(tpath("zcut.msnap.zst"), z, header_end + 40);
    CHECK(count_records(tpath("zcut.msnap.zst"), err, &trunc, &nev) == 1 && trunc);
    int cut_seen = 0;
    for (size_t cut = zn / 4; cut < zn - 8; cut += zn / 7) {
        write_raw(tpath("zcut.msnap.zst"), z, cut);
        long k = count_records(tpath("zcut.msnap.zst"), err, &trunc, &nev);
        CHECK(k >= 0 && k < 20001 && trunc);
        cut_seen++;
    }
    CHECK(cut_seen >= 3);
    free(z);
}

/* ---- 4. Forward compatibility. ------------------------------------------ */

static void test_unknowns(void)
{
    char err[512];
    int trunc;
    const char *body =
        "{\"type\":\"future_thing\",\"x\":[1,2,{\"deep\":true}]}\n"
        "{\"a\":\"alloc\",\"t\":1,\"p\":4096,\"n\":512,\"zz\":\"new key\",\"w\":[1]}\n"
        "{\"a\":\"teleport\",\"t\":2}\n"
        "{\"type\":\"live\",\"kind\":\"quantum_alloc\",\"p\":1}\n"
        "{\"type\":\"str\",\"id\":3,\"s\":\"x\",\"lang\":\"en\"}\n"
        "{\"type\":\"trailer\",\"t\":5,\"future\":{\"a\":1}}\n";
    CHECK(count_text(body, err, &trunc) == 4 && !trunc);

    /* fast path and cJSON path agree: same event written two ways */
    const char *p = tpath("agree.msnap");
    const char *two =
        "{\"a\":\"vmm_map\",\"t\":10,\"d\":-1,\"p\":\"0x20000000000000\",\"n\":2097152,"
        "\"s\":5,\"x\":\"0xffffffffffffffff\",\"y\":4096,\"k\":4294967295,\"th\":12,"
        "\"f\":\"cuMemMap\",\"r\":-3}\n"
        "{ \"a\" : \"vmm_map\", \"r\": -3, \"f\":\"cuMemMap\", \"th\":12, \"k\":4294967295,"
        " \"y\":4096, \"x\":\"0xFFFFFFFFFFFFFFFF\", \"s\":5, \"n\":2097152.0,"
        " \"p\":\"0x20000000000000\", \"d\":-1, \"t\":10 }\n"
        "{\"a\":\"vmm_map\",\"t\":10,\"d\":-1,\"p\":\"0x20000000000000\",\"n\":2097152,"
        "\"s\":5,\"x\":\"0xffffffffffffffff\",\"y\":4096,\"k\":4294967295,\"th\":12,"
        "\"f\":\"cuMemMap\",\"r\":-3,\"new\":1}\n"
        "{\"a\":\"alloc\",\"t\":1,\"f\":\"cuFutureAlloc\"}\n"
        /* q (format 1.2): fast path (hex and decimal) and cJSON (spaces) agree */
        "{\"a\":\"block_alloc\",\"t\":3,\"p\":4096,\"n\":1024,\"y\":1000,\"f\":\"torch\","
        "\"q\":\"0xffffffffffffffff\"}\n"
        "{ \"a\":\"block_alloc\", \"q\": \"0xFFFFFFFFFFFFFFFF\", \"t\":3, \"p\":4096, \"n\":1024,"
        " \"y\":1000, \"f\":\"torch\" }\n"
        "{\"a\":\"block_alloc\",\"t\":3,\"p\":4096,\"n\":1024,\"y\":1000,\"f\":\"torch\","
        "\"q\":77}\n"
        "{ \"a\":\"block_alloc\",\"t\":3,\"p\":4096,\"n\":1024,\"y\":1000,\"f\":\"torch\","
        "\"q\":77.0}\n";
    char buf[2048];
    snprintf(buf, sizeof buf, "%s%s", HDR, two);
    write_raw(p, buf, strlen(buf));
    msnap_reader *r = ropen(p, err);
    static msnap_record a, b, c;
    CHECK(r && msnap_reader_next(r, &a) == 1);
    CHECK(msnap_reader_next(r, &a) == 1 && msnap_reader_next(r, &b) == 1 &&
          msnap_reader_next(r, &c) == 1);
    CHECK(ev_equal(&a.u.event, &b.u.event) && ev_equal(&a.u.event, &c.u.event));
    CHECK(a.u.event.device == -1 && a.u.event.addr == BIG && a.u.event.aux == UINT64_MAX);
    CHECK(a.u.event.result == -3 && a.u.event.api == MSNAP_API_cuMemMap);
    CHECK(b.line == 3 && c.line == 4);
    CHECK(msnap_reader_next(r, &a) == 1 && a.u.event.api == MSNAP_API_NONE);
    CHECK(a.u.event.seq == 0);                  /* no q: 0 (files before 1.2) */
    CHECK(msnap_reader_next(r, &a) == 1 && msnap_reader_next(r, &b) == 1);
    CHECK(ev_equal(&a.u.event, &b.u.event) && a.u.event.seq == UINT64_MAX &&
          a.u.event.aux2 == 1000 && a.u.event.api == MSNAP_API_TORCH);
    CHECK(msnap_reader_next(r, &a) == 1 && msnap_reader_next(r, &b) == 1);
    CHECK(ev_equal(&a.u.event, &b.u.event) && a.u.event.seq == 77);
    CHECK(msnap_reader_next(r, &a) == 0);
    msnap_reader_close(r);

    /* a newer minor version is read */
    p = tpath("minor.msnap");
    const char *minor = "{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.7\","
                        "\"new\":{}}\n{\"a\":\"alloc\",\"t\":1}\n";
    write_raw(p, minor, strlen(minor));
    CHECK(count_records(p, err, &trunc, NULL) == 2);
}

/* ---- 5. Errors. --------------------------------------------------------- */

/* Writes data to a file; expects open or next to fail with a message
 * containing want. */
static void expect_error(const void *data, size_t n, const char *want)
{
    const char *p = tpath("bad.msnap");
    char err[512];
    int trunc;
    write_raw(p, data, n);
    long k = count_records(p, err, &trunc, NULL);
    CHECK(k == -1);
    CHECK(strchr(err, '\n') == NULL);
    if (k != -1 || !strstr(err, want)) {
        check_failed_++;
        fprintf(stderr, "  expected error \"%s\", got %ld \"%s\"\n", want, k, err);
    }
}

#define EXPECT_ERROR(s, want) expect_error((s), strlen(s), (want))

static void test_errors(void)
{
    EXPECT_ERROR("", "empty file");
    EXPECT_ERROR("hello world\n", "line 1: not a memsnap snapshot (no header)");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"other\",\"version\":\"1.0\"}\n",
                 "line 1: not a memsnap snapshot (no header)");
    EXPECT_ERROR("{\"a\":\"alloc\",\"t\":1}\n", "line 1: not a memsnap snapshot (no header)");
    EXPECT_ERROR("{not json}\n{}\n", "line 1: not a memsnap snapshot (no header)");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"2.0\"}\n",
                 "line 1: snapshot format version 2.0 is newer than this memsnap reads (1.x); "
                 "upgrade memsnap");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"0.9\"}\n",
                 "line 1: snapshot format version 0.9 is not supported");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1\"}\n",
                 "line 1: header has a malformed version");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"memsnap\"}\n", "line 1: header has no");

    char buf[4096];
#define WITH_BODY(body) (snprintf(buf, sizeof buf, "%s%s", HDR, body), buf)
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1}\n{\"a\":\"free\",\"t\":\n{\"a\":\"free\"}\n"),
                 "line 3: not valid JSON");
    EXPECT_ERROR(WITH_BODY("[1,2]\n"), "line 2: not a JSON object");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1} x\n"), "line 2: not valid JSON");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1}{\"a\":\"free\"}\n"), "line 2: not valid JSON");
    EXPECT_ERROR(WITH_BODY("{\"type\":\"str\",\"id\":1,\"s\":\"x\"}}\n"), "line 2: not valid JSON");
    EXPECT_ERROR("{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\"} junk\n",
                 "line 1: not a memsnap snapshot (no header)");
    EXPECT_ERROR(WITH_BODY("{\"x\":1}\n"), "line 2: neither \"type\" nor \"a\"");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":-1}\n"), "line 2: \"t\" is out of range");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1.5}\n"), "line 2: \"t\" is not an integer");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"p\":\"12\"}\n"), "line 2: \"p\" is not an integer");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"d\":40000}\n"), "line 2: \"d\" is out of range");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"k\":4294967296}\n"), "line 2: \"k\" is out of range");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"block_alloc\",\"q\":-2}\n"), "line 2: \"q\" is out of range");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"block_alloc\",\"q\":\"7\"}\n"), "line 2: \"q\" is not an integer");
    EXPECT_ERROR(WITH_BODY("{\"a\":7}\n"), "line 2: \"a\" is not a string");
    EXPECT_ERROR(WITH_BODY("{\"type\":\"stack\",\"id\":1,\"ips\":[\"0xzz\"]}\n"),
                 "line 2: \"ips\" is not an integer");
    EXPECT_ERROR(WITH_BODY("{\"type\":\"str\",\"id\":1,\"s\":5}\n"), "line 2: \"s\" is not a string");
    EXPECT_ERROR(WITH_BODY("{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\"}\n"),
                 "line 2: a second header");
    static const char nul[] = "{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\"}\n"
                              "{\"a\":\"alloc\"}\n{\"a\":\"fr\0ee\"}\n{}\n";
    expect_error(nul, sizeof nul - 1, "line 3: not valid JSON");

    /* binary garbage, with and without a leading brace, and NUL bytes */
    static unsigned char bin[1 << 16];
    uint64_t x = 12345;
    for (size_t i = 0; i < sizeof bin; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        bin[i] = (unsigned char)(x >> 56);
    }
    bin[0] = 0x7f;
    expect_error(bin, sizeof bin, "line 1: not a memsnap snapshot (no header)");
    bin[0] = '{';
    expect_error(bin, sizeof bin, "line 1:");
    /* zstd magic followed by garbage */
    bin[0] = 0x28, bin[1] = 0xB5, bin[2] = 0x2F, bin[3] = 0xFD;
    expect_error(bin, sizeof bin, "zstd data is corrupt");
    /* a valid header then binary */
    size_t hl = strlen(HDR);
    memcpy(bin, HDR, hl);
    bin[hl] = '{';
    for (size_t i = hl + 1; i < sizeof bin; i++)
        if (bin[i] == '\n')
            bin[i] = 'x';
    bin[sizeof bin - 1] = '\n';
    expect_error(bin, sizeof bin, "line 2: not valid JSON");
    /* a blank line is an error (empty, or only \r, spaces, tabs), not skipped */
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1}\n\n{\"a\":\"free\",\"t\":2}\n"),
                 "line 3: blank line");
    EXPECT_ERROR(WITH_BODY("\n"), "line 2: blank line");
    EXPECT_ERROR(WITH_BODY("{\"a\":\"alloc\",\"t\":1}\n \t\r\n"), "line 3: blank line");
    /* ... also deep inside a small zstd file that inflates to 64 MiB of
     * newlines: the reader stops at the first one */
    {
        size_t nl = (size_t)64 << 20, hn = strlen(HDR);
        char *big = malloc(hn + 20 + nl);
        CHECK(big != NULL);
        memcpy(big, HDR, hn);
        memcpy(big + hn, "{\"a\":\"alloc\",\"t\":1}\n", 20);
        memset(big + hn + 20, '\n', nl);
        const char *zp = tpath("blank.msnap");
        write_text(zp, 3, big, hn + 20 + nl);
        free(big);
        char zerr[512];
        int ztrunc;
        CHECK(count_records(zp, zerr, &ztrunc, NULL) == -1);
        CHECK(strcmp(zerr, "line 3: blank line") == 0);
    }
    /* the newline that ends the last line is not a blank line */
    {
        char e2[512];
        int t2;
        CHECK(count_text("{\"a\":\"alloc\",\"t\":1}\n", e2, &t2) == 2 && !t2);
    }
    /* errors are sticky */
    const char *p = tpath("sticky.msnap");
    const char *s = WITH_BODY("[]\n{\"a\":\"alloc\"}\n");
    write_raw(p, s, strlen(s));
    char err[512];
    msnap_reader *r = ropen(p, err);
    static msnap_record rec;
    CHECK(r && msnap_reader_next(r, &rec) == 1);
    CHECK(msnap_reader_next(r, &rec) == -1 && msnap_reader_next(r, &rec) == -1);
    msnap_reader_close(r);
    /* a missing file */
    CHECK(ropen(tpath("does-not-exist"), err) == NULL && strstr(err, "cannot open") != NULL);
}

/* A line longer than the 64 MiB limit is an error naming the line. */
static void test_long_line(void)
{
    const char *p = tpath("long.msnap");
    FILE *f = fopen(p, "wb");
    fputs(HDR, f);
    fputs("{\"type\":\"str\",\"id\":1,\"s\":\"", f);
    static char chunk[1 << 20];
    memset(chunk, 'a', sizeof chunk);
    for (int i = 0; i < 65; i++)
        fwrite(chunk, 1, sizeof chunk, f);
    fputs("\"}\n", f);
    fclose(f);
    char err[512];
    int trunc;
    CHECK(count_records(p, err, &trunc, NULL) == -1);
    CHECK(strstr(err, "line 2: longer than 64 MiB") != NULL);
    /* a 9 MiB line is fine */
    f = fopen(p, "wb");
    fputs(HDR, f);
    fputs("{\"type\":\"str\",\"id\":1,\"s\":\"", f);
    for (int i = 0; i < 9; i++)
        fwrite(chunk, 1, sizeof chunk, f);
    fputs("\"}\n{\"a\":\"alloc\",\"t\":1}\n", f);
    fclose(f);
    CHECK(count_records(p, err, &trunc, NULL) == 3);
    unlink(p);
}

/* msnap_out: flush makes everything so far decodable; bytes are counted. */
static void test_out(void)
{
    const char *p = tpath("flush.msnap.zst");
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    msnap_out *o = msnap_out_fdopen(fd, 3);
    CHECK(o != NULL);
    CHECK(msnap_out_write(o, HDR, strlen(HDR)) == 0);
    const char *ev = "{\"a\":\"alloc\",\"t\":1,\"p\":4096,\"n\":512}\n";
    for (int i = 0; i < 100; i++)
        CHECK(msnap_out_write(o, ev, strlen(ev)) == 0);
    CHECK(msnap_out_flush(o) == 0);
    struct stat st;
    fstat(fd, &st);
    CHECK((uint64_t)st.st_size == msnap_out_bytes(o) && st.st_size > 0);
    char err[512];
    int trunc;
    long nev;
    CHECK(count_records(p, err, &trunc, &nev) == 101 && nev == 100 && !trunc);
    CHECK(msnap_out_close(o) == 0);
    CHECK(count_records(p, err, &trunc, &nev) == 101 && !trunc);
    /* a write error is reported and sticky */
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    close(pfd[0]);
    signal(SIGPIPE, SIG_IGN);
    o = msnap_out_fdopen(pfd[1], 0);
    CHECK(msnap_out_write(o, HDR, strlen(HDR)) == 0);
    CHECK(msnap_out_flush(o) == -1);
    CHECK(msnap_out_write(o, HDR, 1) == -1);
    CHECK(msnap_out_close(o) == -1);
}

/* Name tables. */
static void test_names(void)
{
    for (int a = 0; a < MSNAP_A_COUNT; a++)
        CHECK(msnap_action_from_name(msnap_action_name(a)) == a);
    for (int a = 0; a < MSNAP_API_COUNT; a++)
        CHECK(msnap_api_from_name(msnap_api_name(a)) == a);
    CHECK(strcmp(msnap_action_name(-1), "?") == 0 && strcmp(msnap_action_name(999), "?") == 0);
    CHECK(msnap_action_from_name("nope") == -1 && msnap_api_from_name(NULL) == -1);
    CHECK(msnap_action_from_name("allocx") == -1 && msnap_action_from_name("") == -1);
}

/* Every record carries its line's text (trailing blanks left out; the
 * header's from open); lines of unknown types (a line type, an action, a
 * live kind) are skipped, or come back as MSNAP_REC_OTHER with their text
 * after msnap_reader_keep_unknown.  memsnap symbolize copies lines through
 * by these. */
static void test_line_text(void)
{
    const char *lines[] = {
        "{\"type\":\"future_thing\",\"x\":[1,2,{\"deep\":true}]}",
        "{\"a\":\"alloc\",\"t\":1,\"p\":4096,\"n\":512}",
        "{\"a\":\"teleport\",\"t\":2}",
        "{\"type\":\"live\",\"kind\":\"quantum_alloc\",\"p\":1}",
        "{\"type\":\"str\",\"id\":3,\"s\":\"x\"}",
        "{\"type\":\"trailer\",\"t\":5}",
    };
    int known[] = {0, 1, 0, 0, 1, 1};
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text, "%s", HDR);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s\n", lines[i],
                              i == 1 ? " \t" : "");
    for (int zstd = 0; zstd < 2; zstd++)
        for (int keep = 0; keep < 2; keep++) {
            const char *p = tpath(zstd ? "text.msnap.zst" : "text.msnap");
            write_text(p, zstd ? 3 : 0, text, n);
            char err[512];
            msnap_reader *r = ropen(p, err);
            CHECK(r != NULL);
            if (!r)
                continue;
            CHECK(msnap_reader_is_zstd(r) == zstd);
            if (keep)
                msnap_reader_keep_unknown(r);
            static msnap_record rec;
            CHECK(msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_HEADER);
            CHECK(rec.text && rec.text_len == strlen(HDR) - 1 &&
                  memcmp(rec.text, HDR, rec.text_len) == 0);
            for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
                if (!keep && !known[i])
                    continue;
                CHECK(msnap_reader_next(r, &rec) == 1);
                CHECK((rec.type == MSNAP_REC_OTHER) == !known[i]);
                CHECK(rec.line == i + 2);
                CHECK(rec.text && rec.text_len == strlen(lines[i]) &&
                      strcmp(rec.text, lines[i]) == 0);
            }
            CHECK(msnap_reader_next(r, &rec) == 0);
            msnap_reader_close(r);
        }
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_names();
    test_round_trip();
    test_escaping();
    test_truncated_plain();
    test_truncated_zstd();
    test_unknowns();
    test_line_text();
    test_errors();
    test_long_line();
    test_out();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}

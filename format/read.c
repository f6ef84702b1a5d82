/* Reader side of the snapshot format: streams a snapshot line by line in
 * constant memory.
 *
 * Three layers, bottom up:
 *
 *   1. Bytes.  The first bytes of the file decide the encoding: the zstd
 *      frame magic (28 B5 2F FD) selects streaming decompression
 *      (ZSTD_decompressStream, frames may be concatenated), anything else is
 *      read as plain text.  A zstd stream that simply stops (the recorder was
 *      killed between two flushes, or in the middle of one) is not an error:
 *      everything decodable is delivered, and what follows is a cut-off
 *      last line like in a plain file.  Corrupt zstd data is an error.
 *   2. Lines.  Decoded text accumulates in one buffer; a line is handed out
 *      in place (its '\n' replaced by a NUL), so nothing is copied.  The
 *      buffer grows only to the longest line, up to MSNAP_MAX_LINE (64 MiB),
 *      beyond which the reader gives up with an error naming the line.
 *   3. Records.  Event lines (the bulk) written in the canonical form
 *      {"a":"...","t":...} go through a hand-written parser; anything it does
 *      not recognise exactly (other key order is fine, but unknown keys,
 *      escapes, spaces, fractions, out-of-range values, duplicate keys) falls
 *      back to cJSON, which is the reference: both paths give the same
 *      record for every line the fast path accepts.  All other lines go
 *      through cJSON.  Strings in a record point into the cJSON tree of that
 *      line, which lives until the next msnap_reader_next call.
 *
 * The header is read by msnap_reader_open (so a file that is not a snapshot
 * fails there, with a clear message) and returned again by the first
 * msnap_reader_next; its strings (argv, settings_json) live until close.
 *
 * Every record carries its line's text (msnap_record.text), for a tool that
 * copies lines through (memsnap symbolize); the header's is kept until close.
 *
 * Error policy (docs/format.md, "Reading"): unknown keys are ignored, unknown
 * line types (unless msnap_reader_keep_unknown asks for them as
 * MSNAP_REC_OTHER records) and unknown actions are skipped, a blank line is an error, a
 * last line without '\n' that does not parse is a cut-off line (end of data,
 * msnap_reader_truncated() = 1), anything else that is wrong is an error of
 * one line "line N: what was wrong". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zstd.h>

#include "memsnap/format.h"
#include "internal.h"

#define TEXT_BUF_INITIAL ((size_t)256 << 10)

struct msnap_reader {
    int fd;
    int own_fd;
    /* zstd input side (zstd mode only) */
    ZSTD_DCtx *dctx;
    char *in;
    size_t in_len, in_pos, in_cap;
    int in_eof;
#define ZSTD_BLOCK_HEADER 3 /* bytes (the zstd format, RFC 8878 3.1.1.2) */
    size_t zret;          /* last ZSTD_decompressStream result that moved data: 0 =
                             the frame is done, else it was cut off at the end */
    /* decoded text: [start, end) not yet handed out */
    char *buf;
    size_t cap, start, end;
    int eof;              /* no more text will come */
    int follow;           /* msnap_reader_follow: the end of the input is
                             only where the writer has got to */
    int stalled;          /* follow: the last fill found nothing new */
    uint64_t lineno;
    int failed;
    int truncated;
    char err[512];
    /* header, owned until close */
    int header_pending;
    msnap_header hdr;
    cJSON *hdr_json;
    char *settings;
    char *hdr_text;       /* line 1 as read (the header record's text) */
    size_t hdr_len;
    int keep_unknown;     /* msnap_reader_keep_unknown */
    const char **argv;
    /* progress reports (msnap_progress): "reading NAME", bytes so far */
    char what[96];
    uint64_t bytes_in, bytes_total;
    /* per-record storage, valid until the next call */
    cJSON *cur;
    uint64_t *ips;
    size_t ips_cap;
};

/* Records an error message (once; the first error wins).  Returns -1. */
static int fail(msnap_reader *r, const char *fmt, ...)
{
    if (r->failed)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->failed = 1;
    return -1;
}

/* ---- Layer 1: bytes. ---------------------------------------------------- */

/* read() that retries on EINTR; returns bytes, 0 at EOF, -1 on error. */
static ssize_t read_some(int fd, void *p, size_t n)
{
    for (;;) {
        ssize_t got = read(fd, p, n);
        if (got >= 0 || errno != EINTR)
            return got;
    }
}

/* Counts input bytes consumed and reports them (msnap_progress). */
static void count_in(msnap_reader *r, ssize_t got)
{
    if (got <= 0)
        return;
    r->bytes_in += (uint64_t)got;
    msnap_progress(r->what, r->bytes_in, r->bytes_total, 1);
}

/* Appends decoded text at buf[end..cap-1) (one byte stays free for a NUL).
 * Returns 0 (some text added, or eof set), -1 on error. */
static int fill(msnap_reader *r)
{
    size_t room = r->cap - 1 - r->end;
    if (!r->dctx) {
        ssize_t got = read_some(r->fd, r->buf + r->end, room);
        count_in(r, got);
        if (got < 0)
            return fail(r, "read error after line %llu: %s",
                        (unsigned long long)r->lineno, strerror(errno));
        if (got == 0 && r->follow)
            r->stalled = 1;
        else if (got == 0)
            r->eof = 1;
        r->end += (size_t)got;
        return 0;
    }
    for (;;) {
        if (r->in_pos == r->in_len && !r->in_eof) {
            ssize_t got = read_some(r->fd, r->in, r->in_cap);
            count_in(r, got);
            if (got < 0)
                return fail(r, "read error after line %llu: %s",
                            (unsigned long long)r->lineno, strerror(errno));
            r->in_len = (size_t)got;
            r->in_pos = 0;
            if (got == 0 && r->follow) {
                r->stalled = 1;   /* all decodable text is out: wait for more */
                return 0;
            }
            if (got == 0)
                r->in_eof = 1;
        }
        ZSTD_inBuffer in = {r->in, r->in_len, r->in_pos};
        ZSTD_outBuffer out = {r->buf + r->end, room, 0};
        size_t ret = ZSTD_decompressStream(r->dctx, &out, &in);
        if (ZSTD_isError(ret))
            return fail(r, "line %llu: zstd data is corrupt (%s)",
                        (unsigned long long)r->lineno + 1, ZSTD_getErrorName(ret));
        /* a call with nothing to do says nothing of the frame (after the
         * last frame's end it gives the next frame's header size) */
        if (in.pos > r->in_pos || out.pos)
            r->zret = ret;
        r->in_pos = in.pos;
        r->end += out.pos;
        if (out.pos)
            return 0;
        if (r->in_pos == r->in_len && r->in_eof) {
            r->eof = 1; /* zret != 0 here means the stream was cut off */
            return 0;
        }
    }
}

/* ---- Layer 2: lines. ---------------------------------------------------- */

/* Next line, NUL-terminated in place, without its '\n'.  Returns 1 with
 * *line, *len and *complete (1 when it ended with '\n'), 0 at end of data,
 * -1 on error.  The line is valid until the next call. */
static int next_line(msnap_reader *r, char **line, size_t *len, int *complete)
{
    size_t scanned = 0;
    for (;;) {
        char *s = r->buf + r->start;
        char *nl = memchr(s + scanned, '\n', r->end - r->start - scanned);
        if (nl) {
            *nl = 0;
            *line = s;
            *len = (size_t)(nl - s);
            *complete = 1;
            r->start += *len + 1;
            return 1;
        }
        scanned = r->end - r->start;
        if (scanned > MSNAP_MAX_LINE)
            return fail(r, "line %llu: longer than %zu MiB; not a memsnap snapshot line",
                        (unsigned long long)r->lineno + 1, MSNAP_MAX_LINE >> 20);
        if (r->stalled) {
            /* following: the writer has not finished this line yet; it
             * stays in the buffer for the next call */
            r->stalled = 0;
            return 0;
        }
        if (r->eof) {
            if (scanned == 0)
                return 0;
            s[scanned] = 0;
            *line = s;
            *len = scanned;
            *complete = 0;
            r->start = r->end;
            return 1;
        }
        if (r->start > 0 && r->end - r->start < r->cap / 2) {
            memmove(r->buf, s, scanned);
            r->start = 0;
            r->end = scanned;
        } else if (r->cap - 1 - r->end < 4096) {
            size_t ncap = r->cap * 2;
            if (r->start > 0) {
                memmove(r->buf, s, scanned);
                r->start = 0;
                r->end = scanned;
            }
            if (ncap > MSNAP_MAX_LINE + TEXT_BUF_INITIAL)
                ncap = MSNAP_MAX_LINE + TEXT_BUF_INITIAL;
            if (ncap > r->cap) {
                char *nb = realloc(r->buf, ncap);
                if (!nb)
                    return fail(r, "line %llu: out of memory", (unsigned long long)r->lineno + 1);
                r->buf = nb;
                r->cap = ncap;
            }
        }
        if (fill(r) < 0)
            return -1;
    }
}

/* ---- Layer 3a: the fast event-line parser. ------------------------------ */

enum { K_T, K_D, K_P, K_N, K_S, K_X, K_Y, K_K, K_TH, K_F, K_R, K_Q };

/* Key index for a 1-2 character key span, -1 for anything else. */
static int event_key(const char *k, size_t n)
{
    if (n == 1) {
        switch (k[0]) {
        case 't': return K_T;
        case 'd': return K_D;
        case 'p': return K_P;
        case 'n': return K_N;
        case 's': return K_S;
        case 'x': return K_X;
        case 'y': return K_Y;
        case 'k': return K_K;
        case 'f': return K_F;
        case 'r': return K_R;
        case 'q': return K_Q;
        }
        return -1;
    }
    if (n == 2 && k[0] == 't' && k[1] == 'h')
        return K_TH;
    return -1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses "0x" + 1..16 hex digits from s (exactly n bytes).  0 or -1. */
static int parse_hex(const char *s, size_t n, uint64_t *out)
{
    if (n < 3 || n > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return -1;
    uint64_t v = 0;
    for (size_t i = 2; i < n; i++) {
        int h = hexval((unsigned char)s[i]);
        if (h < 0)
            return -1;
        v = v << 4 | (uint64_t)h;
    }
    *out = v;
    return 0;
}

/* Parses one canonical event line [p, end) into *e.  Returns 1 on success,
 * 0 when the line is not in the form this parser knows (the caller then uses
 * cJSON, which decides whether it is valid, invalid or skipped). */
static int parse_event_fast(const char *p, const char *end, msnap_event *e)
{
    if (end - p < 8 || memcmp(p, "{\"a\":\"", 6) != 0)
        return 0;
    p += 6;
    const char *q = p;
    while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    if (q >= end || *q != '"')
        return 0;
    int a = msnap__action_from_span(p, (size_t)(q - p));
    if (a <= MSNAP_A_NONE)
        return 0;
    memset(e, 0, sizeof *e);
    e->action = (uint16_t)a;
    p = q + 1;
    unsigned seen = 0;
    for (;;) {
        if (p >= end)
            return 0;
        if (*p == '}')
            return p + 1 == end;
        if (*p != ',' || p + 1 >= end || p[1] != '"')
            return 0;
        p += 2;
        q = p;
        while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
            q++;
        if (q + 1 >= end || *q != '"' || q[1] != ':')
            return 0;
        int key = event_key(p, (size_t)(q - p));
        if (key < 0 || (seen & (1u << key)))
            return 0;
        seen |= 1u << key;
        p = q + 2;
        if (p >= end)
            return 0;
        if (key == K_F) {
            if (*p != '"')
                return 0;
            q = ++p;
            while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
                q++;
            if (q >= end || *q != '"')
                return 0;
            int api = msnap__api_from_span(p, (size_t)(q - p));
            e->api = (uint16_t)(api < 0 ? MSNAP_API_NONE : api);
            p = q + 1;
            continue;
        }
        uint64_t v = 0;
        int neg = 0;
        if (*p == '"') {
            q = ++p;
            while (q < end && *q != '"')
                q++;
            if (q >= end || parse_hex(p, (size_t)(q - p), &v) < 0)
                return 0;
            p = q + 1;
        } else {
            if (*p == '-') {
                neg = 1;
                p++;
            }
            q = p;
            while (q < end && *q >= '0' && *q <= '9' && q - p < 19)
                v = v * 10 + (uint64_t)(*q++ - '0');
            if (q == p || q >= end || (*q != ',' && *q != '}'))
                return 0; /* empty, 20+ digits, fraction, exponent, space */
            p = q;
        }
        if (key == K_D || key == K_R) {
            if (v > (neg ? 32768u : 32767u))
                return 0;
            int16_t sv = (int16_t)(neg ? -(int64_t)v : (int64_t)v);
            if (key == K_D)
                e->device = sv;
            else
                e->result = sv;
            continue;
        }
        if (neg && v)
            return 0;
        switch (key) {
        case K_T: e->t_ns = v; break;
        case K_P: e->addr = v; break;
        case K_N: e->size = v; break;
        case K_S: e->stream = v; break;
        case K_X: e->aux = v; break;
        case K_Y: e->aux2 = v; break;
        case K_Q: e->seq = v; break;
        case K_K:
            if (v > UINT32_MAX)
                return 0;
            e->stack = (uint32_t)v;
            break;
        case K_TH:
            if (v > UINT32_MAX)
                return 0;
            e->tid = (uint32_t)v;
            break;
        }
    }
}

/* ---- Layer 3b: cJSON records. ------------------------------------------- */

/* Integer value of item it (a JSON number, or a "0x..." hex string) for key,
 * in [min, max] (min < 0 allows negative numbers).  0 or -1 (error set). */
static int item_int(msnap_reader *r, const cJSON *it, const char *key,
                    int64_t min, uint64_t max, int64_t *sv, uint64_t *uv)
{
    uint64_t v;
    int neg = 0;
    if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        if (d < 0) {
            neg = 1;
            d = -d;
        }
        if (!(d < 18446744073709551616.0) || d != (double)(uint64_t)d)
            return fail(r, "line %llu: \"%s\" is not an integer",
                        (unsigned long long)r->lineno, key);
        v = (uint64_t)d;
    } else if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        if (parse_hex(s, strlen(s), &v) < 0)
            return fail(r, "line %llu: \"%s\" is not an integer (strings must be \"0x\" + hex)",
                        (unsigned long long)r->lineno, key);
    } else {
        return fail(r, "line %llu: \"%s\" is not an integer",
                    (unsigned long long)r->lineno, key);
    }
    if (neg && v) {
        if (min >= 0 || v > (uint64_t)0 - (uint64_t)min)
            return fail(r, "line %llu: \"%s\" is out of range",
                        (unsigned long long)r->lineno, key);
        if (sv)
            *sv = (int64_t)((uint64_t)0 - v);
        return 0;
    }
    if (v > max)
        return fail(r, "line %llu: \"%s\" is out of range", (unsigned long long)r->lineno, key);
    if (sv)
        *sv = (int64_t)v;
    if (uv)
        *uv = v;
    return 0;
}

/* Unsigned key of object o, at most max; absent or null = 0. */
static int get_u64(msnap_reader *r, const cJSON *o, const char *key, uint64_t max, uint64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = 0;
    if (!it || cJSON_IsNull(it))
        return 0;
    return item_int(r, it, key, 0, max, NULL, out);
}

/* Signed key of object o in [min, max]; absent or null = 0. */
static int get_i64(msnap_reader *r, const cJSON *o, const char *key, int64_t min, int64_t max,
                   int64_t *out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = 0;
    if (!it || cJSON_IsNull(it))
        return 0;
    return item_int(r, it, key, min, (uint64_t)max, out, NULL);
}

/* String key of object o; absent or null = "".  Points into o. */
static int get_str(msnap_reader *r, const cJSON *o, const char *key, const char **out)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = "";
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsString(it))
        return fail(r, "line %llu: \"%s\" is not a string", (unsigned long long)r->lineno, key);
    *out = it->valuestring;
    return 0;
}

/* Copies string key into a fixed array (truncating). */
static int get_str_into(msnap_reader *r, const cJSON *o, const char *key, char *dst, size_t n)
{
    const char *s;
    if (get_str(r, o, key, &s) < 0)
        return -1;
    snprintf(dst, n, "%s", s);
    return 0;
}

/* Action named by string key; -1 with no error when the name is unknown
 * (the line is skipped), -2 on error. */
static int get_action(msnap_reader *r, const cJSON *o, const char *key)
{
    const char *s;
    if (get_str(r, o, key, &s) < 0)
        return -2;
    int a = msnap_action_from_name(s);
    return a <= MSNAP_A_NONE ? -1 : a;
}

#define U64(key, max, dst)                                      \
    do {                                                        \
        uint64_t v_;                                            \
        if (get_u64(r, o, key, max, &v_) < 0)                   \
            return -1;                                          \
        (dst) = v_;                                             \
    } while (0)
#define I64(key, min, max, dst)                                 \
    do {                                                        \
        int64_t v_;                                             \
        if (get_i64(r, o, key, min, max, &v_) < 0)              \
            return -1;                                          \
        (dst) = v_;                                             \
    } while (0)
#define STR(key, dst)                                           \
    do {                                                        \
        if (get_str(r, o, key, &(dst)) < 0)                     \
            return -1;                                          \
    } while (0)

/* Event from a cJSON object with an "a" key.  1 ok, 0 skip, -1 error. */
static int event_from_json(msnap_reader *r, const cJSON *o, msnap_event *e)
{
    int a = get_action(r, o, "a");
    if (a == -2)
        return -1;
    if (a < 0)
        return 0;
    memset(e, 0, sizeof *e);
    e->action = (uint16_t)a;
    U64("t", UINT64_MAX, e->t_ns);
    I64("d", INT16_MIN, INT16_MAX, e->device);
    U64("p", UINT64_MAX, e->addr);
    U64("n", UINT64_MAX, e->size);
    U64("s", UINT64_MAX, e->stream);
    U64("x", UINT64_MAX, e->aux);
    U64("y", UINT64_MAX, e->aux2);
    U64("k", UINT32_MAX, e->stack);
    U64("th", UINT32_MAX, e->tid);
    I64("r", INT16_MIN, INT16_MAX, e->result);
    U64("q", UINT64_MAX, e->seq);
    const char *f;
    STR("f", f);
    int api = msnap_api_from_name(f);
    e->api = (uint16_t)(api < 0 ? MSNAP_API_NONE : api);
    return 1;
}

/* index/name/total of a device object. */
static int device_from_json(msnap_reader *r, const cJSON *o, msnap_device_info *d)
{
    memset(d, 0, sizeof *d);
    I64("index", -1, MSNAP_MAX_DEVICES * 1024, d->index);
    U64("total", UINT64_MAX, d->total);
    return get_str_into(r, o, "name", d->name, sizeof d->name);
}

static int stack_from_json(msnap_reader *r, const cJSON *o, msnap_stack *s)
{
    U64("id", UINT32_MAX, s->id);
    s->depth = 0;
    s->ips = r->ips;
    const cJSON *ips = cJSON_GetObjectItemCaseSensitive(o, "ips");
    if (!ips || cJSON_IsNull(ips))
        return 1;
    if (!cJSON_IsArray(ips))
        return fail(r, "line %llu: \"ips\" is not an array", (unsigned long long)r->lineno);
    size_t n = (size_t)cJSON_GetArraySize(ips);
    if (n > r->ips_cap) {
        uint64_t *p = realloc(r->ips, n * sizeof *p);
        if (!p)
            return fail(r, "line %llu: out of memory", (unsigned long long)r->lineno);
        r->ips = p;
        r->ips_cap = n;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, ips) {
        if (item_int(r, it, "ips", 0, UINT64_MAX, NULL, &r->ips[s->depth]) < 0)
            return -1;
        s->depth++;
    }
    s->ips = r->ips;
    return 1;
}

static int module_from_json(msnap_reader *r, const cJSON *o, msnap_module *m)
{
    U64("base", UINT64_MAX, m->base);
    U64("size", UINT64_MAX, m->size);
    STR("path", m->path);
    STR("build_id", m->build_id);
    return 1;
}

static int symbol_from_json(msnap_reader *r, const cJSON *o, msnap_symbol *s)
{
    U64("ip", UINT64_MAX, s->ip);
    STR("fn", s->function);
    STR("file", s->file);
    I64("line", 0, INT32_MAX, s->line);
    U64("off", UINT64_MAX, s->offset);
    return 1;
}

static int str_from_json(msnap_reader *r, const cJSON *o, msnap_str *s)
{
    U64("id", UINT32_MAX, s->id);
    STR("s", s->s);
    return 1;
}

static int counters_from_json(msnap_reader *r, const cJSON *o, msnap_counters *c)
{
    U64("t", UINT64_MAX, c->t_ns);
    I64("d", INT16_MIN, INT16_MAX, c->device);
    U64("reserved", UINT64_MAX, c->reserved);
    U64("allocated", UINT64_MAX, c->allocated);
    U64("async", UINT64_MAX, c->async);
    U64("managed", UINT64_MAX, c->managed);
    U64("host", UINT64_MAX, c->host);
    U64("vmm_mapped", UINT64_MAX, c->vmm_mapped);
    U64("device_used", UINT64_MAX, c->device_used); /* absent: 0 */
    return 1;
}

/* 1 ok, 0 skip (unknown kind), -1 error. */
static int live_from_json(msnap_reader *r, const cJSON *o, msnap_live *l)
{
    int a = get_action(r, o, "kind");
    if (a == -2)
        return -1;
    if (a < 0)
        return 0;
    l->kind = a;
    U64("t", UINT64_MAX, l->t_ns);
    I64("d", INT16_MIN, INT16_MAX, l->device);
    U64("p", UINT64_MAX, l->addr);
    U64("n", UINT64_MAX, l->size);
    U64("s", UINT64_MAX, l->stream);
    U64("x", UINT64_MAX, l->aux);
    U64("k", UINT32_MAX, l->stack);
    return 1;
}

static int trailer_from_json(msnap_reader *r, const cJSON *o, msnap_trailer *t)
{
    U64("t", UINT64_MAX, t->t_ns);
    U64("events", UINT64_MAX, t->events);
    U64("dropped", UINT64_MAX, t->dropped);
    U64("stacks_dropped", UINT64_MAX, t->stacks_dropped);
    STR("reason", t->reason);
    return 1;
}

/* Fills r->hdr from the header object o (line 1).  0 or -1. */
static int header_from_json(msnap_reader *r, const cJSON *o)
{
    msnap_header *h = &r->hdr;
    const char *fmt, *ver;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "header") != 0 ||
        !cJSON_IsString(format) || strcmp(format->valuestring, MSNAP_FORMAT_NAME) != 0)
        return fail(r, "line 1: not a memsnap snapshot (no header)");
    fmt = format->valuestring;
    (void)fmt;
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(o, "version");
    int major, minor, used = 0;
    if (!cJSON_IsString(version))
        return fail(r, "line 1: header has no \"version\" string");
    ver = version->valuestring;
    if (sscanf(ver, "%d.%d%n", &major, &minor, &used) != 2 || ver[used] != 0 || major < 0 ||
        minor < 0)
        return fail(r, "line 1: header has a malformed version \"%.32s\" (expected MAJOR.MINOR)",
                    ver);
    if (major > MSNAP_FORMAT_MAJOR)
        return fail(r, "line 1: snapshot format version %s is newer than this memsnap reads "
                       "(%d.x); upgrade memsnap", ver, MSNAP_FORMAT_MAJOR);
    if (major < MSNAP_FORMAT_MAJOR)
        return fail(r, "line 1: snapshot format version %s is not supported "
                       "(this memsnap reads %d.x)", ver, MSNAP_FORMAT_MAJOR);
    h->major = major;
    h->minor = minor;
    I64("pid", INT32_MIN, INT32_MAX, h->pid);
    {
        const cJSON *rk = cJSON_GetObjectItemCaseSensitive(o, "rank");
        if (rk && !cJSON_IsNull(rk)) {
            I64("rank", 0, INT32_MAX, h->rank);
            h->has_rank = 1;
        }
    }
    if (get_str_into(r, o, "host", h->host, sizeof h->host) < 0 ||
        get_str_into(r, o, "clock", h->clock, sizeof h->clock) < 0 ||
        get_str_into(r, o, "mode", h->mode, sizeof h->mode) < 0)
        return -1;
    U64("t0_unix_ns", UINT64_MAX, h->t0_unix_ns);

    const cJSON *argv = cJSON_GetObjectItemCaseSensitive(o, "argv");
    if (argv && !cJSON_IsNull(argv)) {
        if (!cJSON_IsArray(argv))
            return fail(r, "line 1: \"argv\" is not an array");
        int n = cJSON_GetArraySize(argv);
        r->argv = calloc((size_t)n + 1, sizeof *r->argv);
        if (!r->argv)
            return fail(r, "line 1: out of memory");
        const cJSON *it;
        cJSON_ArrayForEach(it, argv) {
            if (!cJSON_IsString(it))
                return fail(r, "line 1: \"argv\" is not an array of strings");
            r->argv[h->argc++] = it->valuestring;
        }
    }
    h->argv = r->argv;

    const cJSON *settings = cJSON_GetObjectItemCaseSensitive(o, "settings");
    if (settings && !cJSON_IsNull(settings) && !cJSON_IsObject(settings))
        return fail(r, "line 1: \"settings\" is not an object");
    r->settings = settings && cJSON_IsObject(settings) ? cJSON_PrintUnformatted(settings)
                                                         : strdup("{}");
    if (!r->settings)
        return fail(r, "line 1: out of memory");
    h->settings_json = r->settings;

    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(o, "devices");
    if (devs && !cJSON_IsNull(devs)) {
        if (!cJSON_IsArray(devs))
            return fail(r, "line 1: \"devices\" is not an array");
        const cJSON *it;
        cJSON_ArrayForEach(it, devs) {
            if (!cJSON_IsObject(it))
                return fail(r, "line 1: \"devices\" is not an array of objects");
            if (h->ndevices == MSNAP_MAX_DEVICES)
                break;
            if (device_from_json(r, it, &h->devices[h->ndevices]) < 0)
                return -1;
            h->ndevices++;
        }
    }
    return 0;
}

/* Parses line (NUL-terminated at line[len]) with cJSON into rec; trailing
 * non-space text after the object makes the line invalid.  1 record, 0 skip, 2 cut-off last line,
 * -1 error.  The tree is kept in r->cur until the next call. */
static int parse_json_line(msnap_reader *r, char *line, size_t len, int complete,
                           msnap_record *rec)
{
    cJSON *o = memchr(line, 0, len) ? NULL : cJSON_ParseWithLengthOpts(line, len + 1, NULL, 1);
    if (!o) {
        if (!complete)
            return 2;
        return fail(r, "line %llu: not valid JSON", (unsigned long long)r->lineno);
    }
    r->cur = o;
    if (!cJSON_IsObject(o))
        return fail(r, "line %llu: not a JSON object", (unsigned long long)r->lineno);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!type) {
        if (!cJSON_GetObjectItemCaseSensitive(o, "a"))
            return fail(r, "line %llu: neither \"type\" nor \"a\" (event) key",
                        (unsigned long long)r->lineno);
        rec->type = MSNAP_REC_EVENT;
        return event_from_json(r, o, &rec->u.event);
    }
    if (!cJSON_IsString(type))
        return fail(r, "line %llu: \"type\" is not a string", (unsigned long long)r->lineno);
    const char *t = type->valuestring;
    if (strcmp(t, "header") == 0)
        return fail(r, "line %llu: a second header (two snapshots concatenated?)",
                    (unsigned long long)r->lineno);
    if (strcmp(t, "device") == 0) {
        rec->type = MSNAP_REC_DEVICE;
        return device_from_json(r, o, &rec->u.device) < 0 ? -1 : 1;
    }
    memset(&rec->u, 0, sizeof rec->u.device); /* the largest member but the header */
    if (strcmp(t, "stack") == 0) {
        rec->type = MSNAP_REC_STACK;
        return stack_from_json(r, o, &rec->u.stack);
    }
    if (strcmp(t, "module") == 0) {
        rec->type = MSNAP_REC_MODULE;
        return module_from_json(r, o, &rec->u.module);
    }
    if (strcmp(t, "sym") == 0) {
        rec->type = MSNAP_REC_SYMBOL;
        return symbol_from_json(r, o, &rec->u.symbol);
    }
    if (strcmp(t, "str") == 0) {
        rec->type = MSNAP_REC_STR;
        return str_from_json(r, o, &rec->u.str);
    }
    if (strcmp(t, "counters") == 0) {
        rec->type = MSNAP_REC_COUNTERS;
        return counters_from_json(r, o, &rec->u.counters);
    }
    if (strcmp(t, "state") == 0) {
        rec->type = MSNAP_REC_STATE_BEGIN;
        U64("t", UINT64_MAX, rec->u.state_begin.t_ns);
        U64("nlive", UINT64_MAX, rec->u.state_begin.nlive);
        return 1;
    }
    if (strcmp(t, "live") == 0) {
        rec->type = MSNAP_REC_LIVE;
        return live_from_json(r, o, &rec->u.live);
    }
    if (strcmp(t, "trailer") == 0) {
        rec->type = MSNAP_REC_TRAILER;
        return trailer_from_json(r, o, &rec->u.trailer);
    }
    return 0; /* a line type from a newer minor version: skip */
}

/* ---- Public API. -------------------------------------------------------- */

/* Sets up r->fd for reading: detects zstd from the first 4 bytes and puts
 * those bytes where the right layer will read them.  0 or -1. */
static int detect_encoding(msnap_reader *r)
{
    static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    size_t got = 0;
    while (got < 4) {
        ssize_t n = read_some(r->fd, r->buf + got, 4 - got);
        count_in(r, n);
        if (n < 0)
            return fail(r, "read error: %s", strerror(errno));
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == 4 && memcmp(r->buf, magic, 4) == 0) {
        r->in_cap = ZSTD_DStreamInSize();
        r->in = malloc(r->in_cap);
        r->dctx = ZSTD_createDCtx();
        if (!r->in || !r->dctx)
            return fail(r, "out of memory");
        memcpy(r->in, magic, 4);
        r->in_len = 4;
        return 0;
    }
    r->end = got;
    if (got < 4)
        r->eof = 1;
    return 0;
}

/* Opens the snapshot on fd and reads its header; closes fd at the end when
 * own is set.  NULL with a one-line message in err on failure. */
/* name: the path (progress reports name its last component), or NULL. */
static msnap_reader *reader_open(int fd, int own, const char *name, char *err, size_t errlen)
{
    msnap_reader *r = calloc(1, sizeof *r);
    char *line;
    size_t len;
    int complete;

    if (!r) {
        snprintf(err, errlen, "out of memory");
        if (own)
            close(fd);
        return NULL;
    }
    r->fd = fd;
    r->own_fd = own;
    struct stat sb;
    if (!fstat(fd, &sb) && S_ISREG(sb.st_mode))
        r->bytes_total = (uint64_t)sb.st_size;
    const char *base = name ? strrchr(name, '/') : NULL;
    snprintf(r->what, sizeof r->what, "reading %s", base ? base + 1 : name ? name : "the input");
    r->cap = TEXT_BUF_INITIAL;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        fail(r, "out of memory");
        goto err;
    }
    if (detect_encoding(r) < 0)
        goto err;
    while (r->end == 0 && !r->eof)
        if (fill(r) < 0)
            goto err;
    if (r->end == 0) {
        fail(r, r->dctx && r->zret ? "empty file (the zstd stream ends before any data)"
                                   : "empty file");
        goto err;
    }
    if (r->buf[0] != '{') {
        fail(r, "line 1: not a memsnap snapshot (no header)");
        goto err;
    }
    int rc = next_line(r, &line, &len, &complete);
    if (rc < 0)
        goto err;
    r->lineno = 1;
    if (!memchr(line, 0, len))
        r->hdr_json = cJSON_ParseWithLengthOpts(line, len + 1, NULL, 1);
    if (!r->hdr_json) {
        fail(r, complete ? "line 1: not a memsnap snapshot (no header)"
                         : "line 1: the header is cut off (the file ends inside it)");
        goto err;
    }
    if (!cJSON_IsObject(r->hdr_json)) {
        fail(r, "line 1: not a memsnap snapshot (no header)");
        goto err;
    }
    if (header_from_json(r, r->hdr_json) < 0)
        goto err;
    r->hdr_text = malloc(len + 1);
    if (!r->hdr_text) {
        fail(r, "out of memory");
        goto err;
    }
    memcpy(r->hdr_text, line, len + 1);
    r->hdr_len = len;
    r->header_pending = 1;
    return r;
err:
    snprintf(err, errlen, "%s", r->err);
    msnap_reader_close(r);
    return NULL;
}

/* Opens the snapshot on fd, which the reader owns from now on (closed by
 * msnap_reader_close, or here on failure). */
msnap_reader *msnap_reader_fdopen(int fd, char *err, size_t errlen)
{
    return reader_open(fd, 1, NULL, err, errlen);
}

/* Opens path ("-" = stdin, never closed) and reads its header.  NULL with a
 * one-line message in err on failure (the caller adds the path). */
msnap_reader *msnap_reader_open(const char *path, char *err, size_t errlen)
{
    if (strcmp(path, "-") == 0)
        return reader_open(0, 0, "stdin", err, errlen);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    return reader_open(fd, 1, path, err, errlen);
}

/* The header read by open; valid until close. */
const msnap_header *msnap_reader_header(const msnap_reader *r)
{
    return &r->hdr;
}

/* Next record: 1 (rec filled), 0 end of data, -1 error (sticky). */
int msnap_reader_next(msnap_reader *r, msnap_record *rec)
{
    if (r->failed)
        return -1;
    cJSON_Delete(r->cur);
    r->cur = NULL;
    if (r->header_pending) {
        r->header_pending = 0;
        rec->type = MSNAP_REC_HEADER;
        rec->line = 1;
        rec->text = r->hdr_text;
        rec->text_len = r->hdr_len;
        rec->u.header = r->hdr;
        return 1;
    }
    for (;;) {
        char *line;
        size_t len;
        int complete;
        int rc = next_line(r, &line, &len, &complete);
        /* the data ended between two lines, inside a zstd block: the rest
         * of the block was cut off (a frame flushed but not yet ended, as
         * a recording still being written, stops at a block's end, where
         * the decoder asks for no more than a block header) */
        if (rc == 0 && r->dctx && r->zret > ZSTD_BLOCK_HEADER && !r->follow)
            r->truncated = 1;
        if (rc <= 0)
            return rc;
        r->lineno++;
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = 0;
        if (len == 0) {
            /* The writers never write one; skipping them would let a small
             * compressed file of nothing but newlines keep a reader busy
             * for minutes with nothing to show. */
            if (!complete) {
                r->truncated = 1;
                return 0;
            }
            return fail(r, "line %llu: blank line", (unsigned long long)r->lineno);
        }
        rec->line = r->lineno;
        rec->text = line;
        rec->text_len = len;
        if (line[1] == '"' && line[2] == 'a' && parse_event_fast(line, line + len, &rec->u.event)) {
            rec->type = MSNAP_REC_EVENT;
            return 1;
        }
        rc = parse_json_line(r, line, len, complete, rec);
        if (rc == 1 || rc == -1)
            return rc;
        if (rc == 2) {
            r->truncated = 1;
            return 0;
        }
        cJSON_Delete(r->cur); /* a line of an unknown type */
        r->cur = NULL;
        if (r->keep_unknown) {
            rec->type = MSNAP_REC_OTHER;
            return 1;
        }
    }
}

/* Message of the last error, "" when none. */
const char *msnap_reader_error(const msnap_reader *r)
{
    return r->err;
}

/* 1 when the data ended inside a line (a recording cut off by a crash). */
int msnap_reader_truncated(const msnap_reader *r)
{
    return r->truncated;
}

/* 1 when the input is zstd-compressed (known from open on). */
int msnap_reader_is_zstd(const msnap_reader *r)
{
    return r->dctx != NULL;
}

/* Following a file being written (msnap_reader_follow). */
void msnap_reader_follow(msnap_reader *r, int on)
{
    r->follow = on;
    r->stalled = 0;
}

/* Lines of unknown types come back as MSNAP_REC_OTHER from now on. */
void msnap_reader_keep_unknown(msnap_reader *r)
{
    r->keep_unknown = 1;
}

/* Frees everything; closes the fd unless it is stdin.  NULL is a no-op. */
void msnap_reader_close(msnap_reader *r)
{
    if (!r)
        return;
    if (r->bytes_in)
        msnap_progress(r->what, MSNAP_PROGRESS_END, r->bytes_total, 1);
    if (r->own_fd)
        close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->in);
    free(r->buf);
    cJSON_Delete(r->cur);
    cJSON_Delete(r->hdr_json);
    free(r->hdr_text);
    free(r->settings);
    free(r->argv);
    free(r->ips);
    free(r);
}

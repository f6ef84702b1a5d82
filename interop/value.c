/* value: reference-counted Python-like values and the buffered reader the
 * two parsers share (see value.h). */
#include "value.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memsnap/format.h"

#define IV_IN_BUF (256 * 1024)

ival *iv_new(int type)
{
    ival *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->type = (uint8_t)type;
    v->refs = 1;
    v->memo = -1;
    return v;
}

ival *iv_new_str(int type, const char *p, size_t n)
{
    ival *v = iv_new(type);
    if (!v)
        return NULL;
    v->u.s.p = malloc(n + 1);
    if (!v->u.s.p) {
        free(v);
        return NULL;
    }
    if (n)
        memcpy(v->u.s.p, p, n);
    v->u.s.p[n] = 0;
    v->u.s.n = n;
    return v;
}

/* Frees v when its last reference goes; containers iteratively release
 * their items (recursion depth is bounded by the readers' nesting limit). */
void iv_unref(ival *v)
{
    /* Iterative, with an explicit work list: a hostile input may nest
     * millions of levels. */
    ival *small[64], **work = small;
    size_t n = 0, cap = 64;
    if (!v)
        return;
    work[n++] = v;
    while (n) {
        v = work[--n];
        if (v->type == IV_MARK || --v->refs)
            continue;
        switch (v->type) {
        case IV_STR:
        case IV_BYTES:
            free(v->u.s.p);
            break;
        case IV_LIST:
        case IV_TUPLE:
        case IV_DICT:
            for (size_t i = 0; i < v->u.a.n; i++) {
                if (n == cap) {
                    ival **nw = malloc(2 * cap * sizeof *nw);
                    if (!nw) { /* leak the rest rather than crash */
                        v->u.a.n = 0;
                        break;
                    }
                    memcpy(nw, work, n * sizeof *nw);
                    if (work != small)
                        free(work);
                    work = nw;
                    cap *= 2;
                }
                work[n++] = v->u.a.v[i];
            }
            free(v->u.a.v);
            break;
        }
        free(v);
    }
    if (work != small)
        free(work);
}

int iv_push(ival *c, ival *item)
{
    if (c->u.a.n == c->u.a.cap) {
        size_t ncap = c->u.a.cap ? c->u.a.cap * 2 : 4;
        ival **nv = realloc(c->u.a.v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        c->u.a.v = nv;
        c->u.a.cap = ncap;
    }
    c->u.a.v[c->u.a.n++] = item;
    return 0;
}

ival *iv_get(const ival *d, const char *key, uint64_t *steps)
{
    if (!d || d->type != IV_DICT)
        return NULL;
    size_t kl = strlen(key), i;
    ival *found = NULL;
    for (i = 0; i + 1 < d->u.a.n; i += 2) {
        const ival *k = d->u.a.v[i];
        if (k->type == IV_STR && k->u.s.n == kl && !memcmp(k->u.s.p, key, kl)) {
            found = d->u.a.v[i + 1];
            break;
        }
    }
    if (steps)
        *steps += i / 2 + 1;
    return found;
}

const char *iv_budget_why(const iv_in *in, char *buf, size_t len)
{
    snprintf(buf, len, "%llu steps of work for the first %llu bytes, past the budget of %u a "
                       "byte; refused (a shape no PyTorch snapshot has: docs/interop.md, Limits)",
             (unsigned long long)in->steps, (unsigned long long)iv_in_offset(in),
             IV_STEPS_PER_BYTE);
    return buf;
}

int iv_budget_fail(const iv_in *in, char *err, size_t errlen)
{
    char why[256];
    snprintf(err, errlen, "byte %llu: %s", (unsigned long long)iv_in_offset(in),
             iv_budget_why(in, why, sizeof why));
    return -1;
}

int64_t iv_int(const ival *v, int *ok)
{
    if (!v || v->type == IV_NONE)
        return 0;
    if (v->type == IV_INT || v->type == IV_BOOL) {
        if (v->u.i < INT64_MIN || v->u.i > INT64_MAX) {
            *ok = 0;
            return 0;
        }
        return (int64_t)v->u.i;
    }
    if (v->type == IV_FLOAT && v->u.f == floor(v->u.f) && fabs(v->u.f) < 9.2e18)
        return (int64_t)v->u.f;
    *ok = 0;
    return 0;
}

uint64_t iv_u64(const ival *v, int *ok)
{
    if (v && (v->type == IV_INT || v->type == IV_BOOL)) {
        if (v->u.i > (__int128)UINT64_MAX || v->u.i < INT64_MIN) {
            *ok = 0;
            return 0;
        }
        return (uint64_t)v->u.i;
    }
    if (v && v->type == IV_FLOAT && v->u.f >= 0 && v->u.f < 1.8e19 &&
        v->u.f == floor(v->u.f))
        return (uint64_t)v->u.f;
    return (uint64_t)iv_int(v, ok);
}

double iv_num(const ival *v, int *ok)
{
    if (v && v->type == IV_FLOAT)
        return v->u.f;
    if (v && (v->type == IV_INT || v->type == IV_BOOL))
        return (double)v->u.i;
    if (!v || v->type == IV_NONE)
        return 0;
    *ok = 0;
    return 0;
}

const char *iv_str(const ival *v)
{
    return v && v->type == IV_STR ? v->u.s.p : NULL;
}

int iv_is_str(const ival *v, const char *s)
{
    return v && v->type == IV_STR && !strcmp(v->u.s.p, s);
}

int iv_in_open(iv_in *in, const char *path, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    in->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(0);
    if (in->fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    int have_st = fstat(in->fd, &sb) == 0;
    if (have_st && S_ISDIR(sb.st_mode)) {
        close(in->fd);
        in->fd = -1;
        snprintf(err, errlen, "is a directory, not a file");
        return -1;
    }
    in->buf = malloc(IV_IN_BUF);
    if (!in->buf) {
        close(in->fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (have_st && S_ISREG(sb.st_mode))
        in->total = (uint64_t)sb.st_size;
    const char *base = strrchr(path, '/');
    snprintf(in->what, sizeof in->what, "reading %s", base ? base + 1 : path);
    return 0;
}

void iv_in_close(iv_in *in)
{
    if (in->off || in->len)
        msnap_progress(in->what, MSNAP_PROGRESS_END, in->total, 1);
    if (in->fd >= 0)
        close(in->fd);
    free(in->buf);
    in->fd = -1;
    in->buf = NULL;
}

int iv_in_fill(iv_in *in)
{
    if (in->eof || in->error)
        return in->error ? -1 : 0;
    in->off += in->len;
    in->len = in->pos = 0;
    for (;;) {
        ssize_t n = read(in->fd, in->buf, IV_IN_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            in->error = errno;
            return -1;
        }
        if (n == 0) {
            in->eof = 1;
            return 0;
        }
        in->len = (size_t)n;
        msnap_progress(in->what, in->off + in->len, in->total, 1);
        return 1;
    }
}

/* ---- iv_to_json --------------------------------------------------------- */

/* Output buffer.  *left is the byte budget shared by the buffer and the
 * scratch buffers of non-string keys: a pickle can share one list many
 * times (a DAG of 40 levels of [x, x] is 80 bytes and 2^40 leaves) or nest
 * dicts as keys (each level escapes the one inside again, doubling it), so
 * the text is cut off, and the walk stopped, at the budget. */
typedef struct sbuf { char *p; size_t n, cap; int oom; size_t *left; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (n > *b->left) {
        b->oom = 1;
        return;
    }
    *b->left -= n;
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 256);
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s, size_t n)
{
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n && !b->oom; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)&s[i], 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* Writes v; every call writes at least one byte before it recurses and
 * returns at once once the budget is spent, so the walk is as long as the
 * text it may write. */
static void sb_val(sbuf *b, const ival *v, int depth)
{
    char num[64];
    if (b->oom)
        return;
    if (depth > 64) {
        sb_put(b, "null", 4);
        return;
    }
    switch (v ? v->type : IV_NONE) {
    case IV_BOOL:
        sb_put(b, v->u.i ? "true" : "false", v->u.i ? 4 : 5);
        return;
    case IV_INT:
        if (v->u.i >= 0 && v->u.i <= (__int128)UINT64_MAX)
            snprintf(num, sizeof num, "%llu", (unsigned long long)v->u.i);
        else if (v->u.i < 0 && v->u.i >= INT64_MIN)
            snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        else
            snprintf(num, sizeof num, "null");
        sb_put(b, num, strlen(num));
        return;
    case IV_FLOAT:
        if (isfinite(v->u.f))
            snprintf(num, sizeof num, "%.17g", v->u.f);
        else
            snprintf(num, sizeof num, "null");
        sb_put(b, num, strlen(num));
        return;
    case IV_STR:
        sb_str(b, v->u.s.p, v->u.s.n);
        return;
    case IV_BYTES:
        sb_put(b, "\"", 1);
        for (size_t i = 0; i < v->u.s.n && !b->oom; i++) {
            snprintf(num, sizeof num, "%02x", (unsigned char)v->u.s.p[i]);
            sb_put(b, num, 2);
        }
        sb_put(b, "\"", 1);
        return;
    case IV_LIST:
    case IV_TUPLE:
        sb_put(b, "[", 1);
        for (size_t i = 0; i < v->u.a.n && !b->oom; i++) {
            if (i)
                sb_put(b, ",", 1);
            sb_val(b, v->u.a.v[i], depth + 1);
        }
        sb_put(b, "]", 1);
        return;
    case IV_DICT:
        sb_put(b, "{", 1);
        for (size_t i = 0; i + 1 < v->u.a.n && !b->oom; i += 2) {
            if (i)
                sb_put(b, ",", 1);
            const ival *k = v->u.a.v[i];
            if (k->type == IV_STR) {
                sb_str(b, k->u.s.p, k->u.s.n);
            } else {
                sbuf kb = {.left = b->left};
                sb_val(&kb, k, depth + 1);
                if (kb.oom)
                    b->oom = 1;
                else
                    sb_str(b, kb.p ? kb.p : "", kb.n);
                free(kb.p);
            }
            sb_put(b, ":", 1);
            sb_val(b, v->u.a.v[i + 1], depth + 1);
        }
        sb_put(b, "}", 1);
        return;
    default:
        sb_put(b, "null", 4);
    }
}

char *iv_to_json(const ival *v, size_t max)
{
    sbuf b = {.left = &max};
    sb_val(&b, v, 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* jsonpull: a streaming JSON reader for PyTorch snapshots saved as JSON
 * (json.dump(torch.cuda.memory._snapshot(), f)).
 *
 * Recursive descent over the buffered reader (value.h), building ivals,
 * except that the big lists are never built: the items of top["segments"],
 * of each list in top["device_traces"] and of top["memsnap"]["events"] go
 * to the sink one at a time and are freed right after.  Memory is one item
 * plus the small rest of the dict.
 *
 * Strict JSON (RFC 8259) plus NaN/Infinity/-Infinity, which Python's json
 * writes for non-finite floats.  Nesting deeper than 200 is refused.
 * Errors name the line and byte offset: "line 3, byte 57: expected ':'".
 */
#include "value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JP_MAX_DEPTH 200

typedef struct jp {
    iv_in *in;
    const iv_sink *sink;
    uint64_t line;
    char *err;
    size_t errlen;
    int failed;
    char *tmp;       /* string scratch */
    size_t tmpn, tmpcap;
} jp;

static void jp_fail(jp *p, const char *fmt, const char *what)
{
    if (p->failed)
        return;
    p->failed = 1;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    snprintf(p->err, p->errlen, "line %llu, byte %llu: %s",
             (unsigned long long)p->line, (unsigned long long)iv_in_offset(p->in), msg);
}

/* Fails with the work budget's message (value.h).  A JSON value is at least
 * a byte and the reader never goes back, so only the importer's work on
 * the streamed items can reach the budget; it is checked all the same. */
static void budget_fail(jp *p)
{
    char why[256];
    jp_fail(p, "%s", iv_budget_why(p->in, why, sizeof why));
}

static int jp_ws(jp *p)
{
    for (;;) {
        int c = iv_in_peek(p->in);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            if (c == '\n')
                p->line++;
            p->in->pos++;
            continue;
        }
        return c;
    }
}

static int tmp_put(jp *p, const char *s, size_t n)
{
    if (p->tmpn + n > p->tmpcap) {
        size_t nc = p->tmpcap ? p->tmpcap * 2 : 256;
        while (nc < p->tmpn + n)
            nc *= 2;
        char *np = realloc(p->tmp, nc);
        if (!np) {
            jp_fail(p, "%s", "out of memory");
            return -1;
        }
        p->tmp = np;
        p->tmpcap = nc;
    }
    memcpy(p->tmp + p->tmpn, s, n);
    p->tmpn += n;
    return 0;
}

static int hex4(jp *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = iv_in_get(p->in);
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else {
            jp_fail(p, "%s", "bad \\u escape in a string");
            return -1;
        }
    }
    *out = v;
    return 0;
}

static int put_utf8(jp *p, unsigned cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return tmp_put(p, b, n);
}

/* Reads a string after its opening quote into p->tmp (NUL-terminated). */
static int jp_string(jp *p)
{
    p->tmpn = 0;
    for (;;) {
        /* fast path: copy a run of plain bytes */
        iv_in *in = p->in;
        if (in->pos == in->len && iv_in_fill(in) <= 0) {
            jp_fail(p, "%s", "the input ends inside a string");
            return -1;
        }
        size_t s = in->pos;
        while (in->pos < in->len && in->buf[in->pos] != '"' && in->buf[in->pos] != '\\' &&
               in->buf[in->pos] >= 0x20)
            in->pos++;
        if (in->pos > s && tmp_put(p, (const char *)in->buf + s, in->pos - s))
            return -1;
        if (in->pos == in->len)
            continue;
        int c = in->buf[in->pos++];
        if (c == '"')
            break;
        if (c < 0x20) {
            jp_fail(p, "%s", "a control character inside a string");
            return -1;
        }
        c = iv_in_get(in);
        char ch;
        switch (c) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            unsigned cp;
            if (hex4(p, &cp))
                return -1;
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (iv_in_get(in) != '\\' || iv_in_get(in) != 'u' || hex4(p, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF) {
                    jp_fail(p, "%s", "a lone surrogate in a string");
                    return -1;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            if (put_utf8(p, cp))
                return -1;
            continue;
        }
        default:
            jp_fail(p, "%s", "bad escape in a string");
            return -1;
        }
        if (tmp_put(p, &ch, 1))
            return -1;
    }
    char z = 0;
    if (tmp_put(p, &z, 1))
        return -1;
    p->tmpn--;
    return 0;
}

static int jp_lit(jp *p, const char *word)
{
    for (const char *w = word; *w; w++)
        if (iv_in_get(p->in) != *w) {
            jp_fail(p, "%s", "not valid JSON (bad literal)");
            return -1;
        }
    return 0;
}

static ival *jp_number(jp *p)
{
    char b[400];
    size_t n = 0;
    int isf = 0;
    for (;;) {
        int c = iv_in_peek(p->in);
        if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        } else if (c == '.' || c == 'e' || c == 'E') {
            isf = 1;
        } else {
            break;
        }
        if (n + 1 >= sizeof b) {
            jp_fail(p, "%s", "a number longer than 400 characters");
            return NULL;
        }
        b[n++] = (char)c;
        p->in->pos++;
    }
    b[n] = 0;
    if (!strcmp(b, "-")) {
        if (jp_lit(p, "Infinity"))
            return NULL;
        ival *v = iv_new(IV_FLOAT);
        if (v)
            v->u.f = -INFINITY;
        return v;
    }
    char *end;
    if (!isf) {
        const char *q = b[0] == '-' ? b + 1 : b;
        if (!*q || (q[0] == '0' && q[1])) {
            jp_fail(p, "%s", "not valid JSON (bad number)");
            return NULL;
        }
        __int128 x = 0;
        for (; *q; q++) {
            if (*q < '0' || *q > '9') {
                jp_fail(p, "%s", "not valid JSON (bad number)");
                return NULL;
            }
            if (x > ((__int128)1 << 120)) {
                isf = 1; /* huge: keep as a float */
                break;
            }
            x = x * 10 + (*q - '0');
        }
        if (!isf) {
            ival *v = iv_new(IV_INT);
            if (v)
                v->u.i = b[0] == '-' ? -x : x;
            return v;
        }
    }
    double d = strtod(b, &end);
    if (*end || end == b) {
        jp_fail(p, "%s", "not valid JSON (bad number)");
        return NULL;
    }
    ival *v = iv_new(IV_FLOAT);
    if (v)
        v->u.f = d;
    return v;
}

static ival *jp_value(jp *p, int depth, int role, unsigned index);

/* Streams or builds the items of an array whose '[' was consumed. */
static ival *jp_array(jp *p, int depth, int role, unsigned index)
{
    ival *a = iv_new(IV_LIST);
    if (!a) {
        jp_fail(p, "%s", "out of memory");
        return NULL;
    }
    a->role = (uint8_t)role;
    a->index = index;
    int c = jp_ws(p);
    if (c == ']') {
        p->in->pos++;
        return a;
    }
    for (unsigned n = 0;; n++) {
        int item_role = role == IV_ROLE_TRACES ? IV_ROLE_DEVICE : IV_ROLE_NONE;
        ival *it = jp_value(p, depth + 1, item_role, n);
        if (!it)
            goto fail;
        p->in->steps++;
        if (role == IV_ROLE_SEGMENTS || role == IV_ROLE_DEVICE || role == IV_ROLE_EXT_EVENTS) {
            int rc = p->sink->item(p->sink->ctx, role, index, it, p->err, p->errlen);
            iv_unref(it);
            if (rc) {
                p->failed = 1;
                goto fail;
            }
            if (iv_over_budget(p->in)) {
                budget_fail(p);
                goto fail;
            }
        } else if (iv_push(a, it)) {
            iv_unref(it);
            jp_fail(p, "%s", "out of memory");
            goto fail;
        }
        c = jp_ws(p);
        p->in->pos++;
        if (c == ']')
            return a;
        if (c != ',') {
            if (c < 0)
                jp_fail(p, "%s", "the input ends inside an array");
            else
                jp_fail(p, "%s", "expected ',' or ']' in an array");
            goto fail;
        }
    }
fail:
    iv_unref(a);
    return NULL;
}

static ival *jp_object(jp *p, int depth, int role)
{
    ival *d = iv_new(IV_DICT);
    if (!d) {
        jp_fail(p, "%s", "out of memory");
        return NULL;
    }
    d->role = (uint8_t)role;
    int c = jp_ws(p);
    if (c == '}') {
        p->in->pos++;
        return d;
    }
    for (;;) {
        c = jp_ws(p);
        if (c != '"') {
            jp_fail(p, "%s", c < 0 ? "the input ends inside an object" : "expected a string key");
            goto fail;
        }
        p->in->pos++;
        if (jp_string(p))
            goto fail;
        ival *k = iv_new_str(IV_STR, p->tmp, p->tmpn);
        if (!k || iv_push(d, k)) {
            iv_unref(k);
            jp_fail(p, "%s", "out of memory");
            goto fail;
        }
        if (jp_ws(p) != ':') {
            jp_fail(p, "%s", "expected ':'");
            goto fail;
        }
        p->in->pos++;
        int vrole = IV_ROLE_NONE;
        if (depth == 0) {
            if (!strcmp(k->u.s.p, "segments"))
                vrole = IV_ROLE_SEGMENTS;
            else if (!strcmp(k->u.s.p, "device_traces"))
                vrole = IV_ROLE_TRACES;
            else if (!strcmp(k->u.s.p, "memsnap"))
                vrole = IV_ROLE_EXT;
        } else if (role == IV_ROLE_EXT && !strcmp(k->u.s.p, "events")) {
            vrole = IV_ROLE_EXT_EVENTS;
        }
        ival *v = jp_value(p, depth + 1, vrole, 0);
        if (!v)
            goto fail;
        p->in->steps++;
        if (iv_push(d, v)) {
            iv_unref(v);
            jp_fail(p, "%s", "out of memory");
            goto fail;
        }
        c = jp_ws(p);
        p->in->pos++;
        if (c == '}')
            return d;
        if (c != ',') {
            jp_fail(p, "%s", c < 0 ? "the input ends inside an object" : "expected ',' or '}' in an object");
            goto fail;
        }
    }
fail:
    iv_unref(d);
    return NULL;
}

/* One value; role applies when it is a container (arrays: the streaming
 * roles; objects: IV_ROLE_EXT). */
static ival *jp_value(jp *p, int depth, int role, unsigned index)
{
    if (++p->in->steps, iv_over_budget(p->in)) {
        budget_fail(p);
        return NULL;
    }
    if (depth > JP_MAX_DEPTH) {
        jp_fail(p, "%s", "nested deeper than 200 levels");
        return NULL;
    }
    int c = jp_ws(p);
    ival *v = NULL;
    switch (c) {
    case '{':
        p->in->pos++;
        return jp_object(p, depth, role == IV_ROLE_EXT || depth == 0 ? role : IV_ROLE_NONE);
    case '[':
        p->in->pos++;
        return jp_array(p, depth, role == IV_ROLE_EXT ? IV_ROLE_NONE : role, index);
    case '"':
        p->in->pos++;
        if (jp_string(p))
            return NULL;
        v = iv_new_str(IV_STR, p->tmp, p->tmpn);
        break;
    case 't':
        if (jp_lit(p, "true"))
            return NULL;
        if ((v = iv_new(IV_BOOL)))
            v->u.i = 1;
        break;
    case 'f':
        if (jp_lit(p, "false"))
            return NULL;
        v = iv_new(IV_BOOL);
        break;
    case 'n':
        if (jp_lit(p, "null"))
            return NULL;
        v = iv_new(IV_NONE);
        break;
    case 'N':
        if (jp_lit(p, "NaN"))
            return NULL;
        if ((v = iv_new(IV_FLOAT)))
            v->u.f = NAN;
        break;
    case 'I':
        if (jp_lit(p, "Infinity"))
            return NULL;
        if ((v = iv_new(IV_FLOAT)))
            v->u.f = INFINITY;
        break;
    case -1:
        jp_fail(p, "%s", p->in->error ? "read error" : "the input ends where a value belongs");
        return NULL;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return jp_number(p);
        jp_fail(p, "%s", "not valid JSON (unexpected character)");
        return NULL;
    }
    if (!v)
        jp_fail(p, "%s", "out of memory");
    return v;
}

ival *iv_read_json(iv_in *in, const iv_sink *sink, char *err, size_t errlen)
{
    jp p = {.in = in, .sink = sink, .line = 1, .err = err, .errlen = errlen};
    if (jp_ws(&p) != '{') {
        jp_fail(&p, "%s", "not a PyTorch snapshot (JSON input must be an object)");
        return NULL;
    }
    ival *top = jp_value(&p, 0, IV_ROLE_NONE, 0);
    if (top && jp_ws(&p) != -1) {
        jp_fail(&p, "%s", "text after the JSON object");
        iv_unref(top);
        top = NULL;
    }
    free(p.tmp);
    return top;
}

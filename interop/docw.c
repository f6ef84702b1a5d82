/* docw: plain data as JSON or as a protocol-4 pickle (docw.h has the
 * contract and the opcode list).
 *
 * Pickle framing of a container: EMPTY_DICT/EMPTY_LIST, then (lazily, before
 * its first item) MARK, the items, and SETITEMS/APPENDS every DOCW_BATCH
 * items and at the end.  MARK is lazy so that a BINPUT right after the
 * container opens stores the container itself: Python's unpickler refuses a
 * BINPUT whose stack top lies below the last MARK.  JSON: commas and colons
 * are decided from the count of values written in the open container.
 */
#include "docw.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "util/hash.h"

enum {
    OP_MARK = '(', OP_STOP = '.', OP_NONE = 'N', OP_BINFLOAT = 'G', OP_BININT = 'J',
    OP_BININT1 = 'K', OP_BININT2 = 'M', OP_BINUNICODE = 'X', OP_APPENDS = 'e',
    OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
    OP_SETITEMS = 'u', OP_EMPTY_DICT = '}', OP_EMPTY_LIST = ']', OP_PROTO = 0x80,
    OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_SHORT_BINUNICODE = 0x8c,
};

static void put_u32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, f);
}

void docw_init(docw *w, FILE *f, docw_mode mode)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->mode = mode;
    w->next_big = 256;
    if (mode == DOCW_PICKLE) {
        putc(OP_PROTO, f);
        putc(4, f);
    }
}

int docw_finish(docw *w)
{
    if (w->mode == DOCW_PICKLE)
        putc(OP_STOP, w->f);
    else
        putc('\n', w->f);
    for (size_t i = 0; i < w->nstrs; i++)
        free(w->strs[i]);
    free(w->strs);
    free(w->str_memo);
    u64map_free(&w->str_ix);
    return w->failed ? -1 : 0;
}

/* Before a value (or a key) goes into the innermost container: pickle opens
 * the batch's MARK, JSON writes the separator. */
static void pre_value(docw *w)
{
    int d = w->depth;
    if (!d)
        return;
    if (w->mode == DOCW_PICKLE) {
        if (!w->n[d - 1] && !(w->total[d - 1] & 1u << 31)) {
            putc(OP_MARK, w->f);
            w->total[d - 1] |= 1u << 31; /* a MARK is open */
        }
        return;
    }
    /* JSON: in a dict, even counts are keys (docw_key writes the colon) */
    if (w->total[d - 1] && (!w->is_dict[d - 1] || !(w->n[d - 1] & 1)))
        putc(',', w->f);
}

/* After a value: counts it; pickle closes a full batch. */
static void post_value(docw *w)
{
    int d = w->depth;
    if (!d)
        return;
    w->n[d - 1]++;
    if (w->mode == DOCW_JSON) {
        w->total[d - 1]++;
        return;
    }
    uint32_t n = w->n[d - 1];
    if (w->is_dict[d - 1] ? (n >= 2 * DOCW_BATCH && !(n & 1)) : n >= DOCW_BATCH) {
        putc(w->is_dict[d - 1] ? OP_SETITEMS : OP_APPENDS, w->f);
        w->n[d - 1] = 0;
        w->total[d - 1] &= ~(1u << 31);
    }
}

static void open_container(docw *w, int dict)
{
    pre_value(w);
    if (w->depth >= DOCW_MAX_DEPTH) { /* a caller bug; keep the output parseable */
        w->failed = 1;
        return;
    }
    if (w->mode == DOCW_PICKLE)
        putc(dict ? OP_EMPTY_DICT : OP_EMPTY_LIST, w->f);
    else
        putc(dict ? '{' : '[', w->f);
    w->is_dict[w->depth] = (uint8_t)dict;
    w->n[w->depth] = 0;
    w->total[w->depth] = 0;
    w->depth++;
}

void docw_dict(docw *w) { open_container(w, 1); }
void docw_list(docw *w) { open_container(w, 0); }

void docw_end(docw *w)
{
    if (!w->depth)
        return;
    int d = w->depth - 1;
    if (w->mode == DOCW_PICKLE) {
        if (w->total[d] & 1u << 31)
            putc(w->is_dict[d] ? OP_SETITEMS : OP_APPENDS, w->f);
    } else {
        putc(w->is_dict[d] ? '}' : ']', w->f);
    }
    w->depth--;
    post_value(w);
}

/* The opcode for a string of n bytes, then the bytes. */
static void pk_str(docw *w, const char *s)
{
    size_t n = strlen(s);
    if (n < 256) {
        putc(OP_SHORT_BINUNICODE, w->f);
        putc((int)n, w->f);
    } else {
        putc(OP_BINUNICODE, w->f);
        put_u32(w->f, (uint32_t)n);
    }
    fwrite(s, 1, n, w->f);
}

void docw_str(docw *w, const char *s)
{
    pre_value(w);
    if (w->mode == DOCW_PICKLE)
        pk_str(w, s ? s : "");
    else
        jw_str(w->f, s);
    post_value(w);
}

static uint64_t str_hash(const char *s)
{
    return msnap_fnv1a_str(MSNAP_FNV_BASIS, s);
}

static void pk_put(docw *w, uint64_t id)
{
    if (id < 256) {
        putc(OP_BINPUT, w->f);
        putc((int)id, w->f);
    } else {
        putc(OP_LONG_BINPUT, w->f);
        put_u32(w->f, (uint32_t)id);
    }
}

static void pk_get(docw *w, uint64_t id)
{
    if (id < 256) {
        putc(OP_BINGET, w->f);
        putc((int)id, w->f);
    } else {
        putc(OP_LONG_BINGET, w->f);
        put_u32(w->f, (uint32_t)id);
    }
}

/* Pickle: the string by memo reference, stored on first use (small ids
 * first: interned strings are the ones repeated in every entry). */
static void pk_istr(docw *w, const char *s)
{
    uint64_t h = str_hash(s);
    uint32_t probe = 0;
    for (;; probe++) {
        uint64_t *ix = u64map_get(&w->str_ix, probe, h);
        if (!ix)
            break;
        if (!strcmp(w->strs[*ix], s)) {
            pk_get(w, w->str_memo[*ix]);
            return;
        }
    }
    pk_str(w, s);
    if (w->nstrs == w->capstrs) {
        size_t nc = w->capstrs ? w->capstrs * 2 : 64;
        char **ns = realloc(w->strs, nc * sizeof *ns);
        if (ns)
            w->strs = ns;
        uint64_t *nm = realloc(w->str_memo, nc * sizeof *nm);
        if (nm)
            w->str_memo = nm;
        if (!ns || !nm) {
            w->failed = 1;
            return;
        }
        w->capstrs = nc;
    }
    char *copy = strdup(s);
    if (!copy || u64map_put(&w->str_ix, probe, h, w->nstrs)) {
        free(copy);
        w->failed = 1;
        return;
    }
    uint64_t id = w->next_small < 256 ? w->next_small++ : w->next_big++;
    w->strs[w->nstrs] = copy;
    w->str_memo[w->nstrs++] = id;
    pk_put(w, id);
}

void docw_istr(docw *w, const char *s)
{
    pre_value(w);
    if (w->mode == DOCW_PICKLE)
        pk_istr(w, s ? s : "");
    else
        jw_str(w->f, s);
    post_value(w);
}

void docw_key(docw *w, const char *k)
{
    docw_istr(w, k);
    if (w->mode == DOCW_JSON)
        putc(':', w->f);
}

void docw_int(docw *w, int64_t v)
{
    pre_value(w);
    if (w->mode == DOCW_JSON) {
        fprintf(w->f, "%lld", (long long)v);
    } else if (v >= 0 && v < 256) {
        putc(OP_BININT1, w->f);
        putc((int)v, w->f);
    } else if (v >= 0 && v < 65536) {
        putc(OP_BININT2, w->f);
        putc((int)(v & 0xff), w->f);
        putc((int)(v >> 8), w->f);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        putc(OP_BININT, w->f);
        put_u32(w->f, (uint32_t)(int32_t)v);
    } else {
        /* LONG1: little-endian two's complement, as few bytes as keep the sign */
        unsigned char b[8];
        int n = 0;
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(u >> (8 * i));
        n = 8;
        while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) ||
                         (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
            n--;
        putc(OP_LONG1, w->f);
        putc(n, w->f);
        fwrite(b, 1, (size_t)n, w->f);
    }
    post_value(w);
}

void docw_uint(docw *w, uint64_t v)
{
    if (v <= INT64_MAX) {
        docw_int(w, (int64_t)v);
        return;
    }
    pre_value(w);
    if (w->mode == DOCW_JSON) {
        fprintf(w->f, "%llu", (unsigned long long)v);
    } else {
        unsigned char b[9];
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(v >> (8 * i));
        b[8] = 0; /* keeps it positive */
        putc(OP_LONG1, w->f);
        putc(9, w->f);
        fwrite(b, 1, 9, w->f);
    }
    post_value(w);
}

void docw_float(docw *w, double v)
{
    if (w->mode == DOCW_JSON && !isfinite(v)) {
        docw_none(w);
        return;
    }
    pre_value(w);
    if (w->mode == DOCW_JSON) {
        fprintf(w->f, "%.17g", v);
    } else {
        uint64_t u;
        memcpy(&u, &v, sizeof u);
        putc(OP_BINFLOAT, w->f);
        for (int i = 7; i >= 0; i--) /* big-endian */
            putc((int)(unsigned char)(u >> (8 * i)), w->f);
    }
    post_value(w);
}

void docw_bool(docw *w, int v)
{
    pre_value(w);
    if (w->mode == DOCW_JSON)
        fputs(v ? "true" : "false", w->f);
    else
        putc(v ? OP_NEWTRUE : OP_NEWFALSE, w->f);
    post_value(w);
}

void docw_none(docw *w)
{
    pre_value(w);
    if (w->mode == DOCW_JSON)
        fputs("null", w->f);
    else
        putc(OP_NONE, w->f);
    post_value(w);
}

/* One cJSON value, recursively. */
static void json_value(docw *w, const cJSON *v)
{
    if (cJSON_IsObject(v)) {
        docw_dict(w);
        for (const cJSON *c = v->child; c; c = c->next) {
            docw_key(w, c->string ? c->string : "");
            json_value(w, c);
        }
        docw_end(w);
    } else if (cJSON_IsArray(v)) {
        docw_list(w);
        for (const cJSON *c = v->child; c; c = c->next)
            json_value(w, c);
        docw_end(w);
    } else if (cJSON_IsString(v)) {
        docw_str(w, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        docw_bool(w, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 9.0e15)
            docw_int(w, (int64_t)d);
        else
            docw_float(w, d);
    } else {
        docw_none(w);
    }
}

int docw_json(docw *w, const char *json_text)
{
    cJSON *v = json_text ? cJSON_Parse(json_text) : NULL;
    if (!v) {
        docw_dict(w);
        docw_end(w);
        return -1;
    }
    json_value(w, v);
    cJSON_Delete(v);
    return 0;
}

uint64_t docw_new_id(docw *w)
{
    return w->mode == DOCW_PICKLE ? w->next_big++ : 0;
}

void docw_put(docw *w, uint64_t id)
{
    if (w->mode == DOCW_PICKLE)
        pk_put(w, id);
}

void docw_get(docw *w, uint64_t id)
{
    pre_value(w);
    if (w->mode == DOCW_PICKLE)
        pk_get(w, id);
    post_value(w);
}

void docw_raw(docw *w, const char *json_text)
{
    pre_value(w);
    if (w->mode == DOCW_JSON)
        fputs(json_text, w->f);
    else
        putc(OP_NONE, w->f); /* a caller bug: raw JSON has no pickle form */
    post_value(w);
}

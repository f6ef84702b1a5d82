/* The Python API's tables (pyapi.h): one read of a snapshot through the
 * analysis library, kept as C column arrays that Python copies into numpy
 * arrays.
 *
 * The read (analysis.h) carries, by what was asked:
 *   events  an observer that appends each event's fields to the columns,
 *           after the state model applied it, with the bytes the event
 *           removed from live memory (the state's change callbacks) and
 *           the process's reserved and allocated levels then;
 *   state   a moment (analysis.h an_moment) marked after every event at or
 *           before the time asked (render --at's rule), or at the peak of
 *           the allocated layer (reserved without blocks), or at the first
 *           OOM; its objects are labelled by the file's labels (label.h,
 *           an_labels), as `memsnap summary` and `render` label their sites.
 * The sites themselves are the summary's (mpy_summary: its top sites with
 * every site asked for), so they are defined, grouped and ranked once.
 *
 * Columns grow by doubling (realloc: large blocks move with mremap, not a
 * copy).  Memory for events: about 95 bytes per event until Python has
 * taken the columns.
 */
#include "pyapi.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "category.h"
#include "job.h"
#include "metrics.h"
#include "model.h"
#include "report.h"
#include "format/state.h"
#include "symtab.h"
#include "util/hash.h"

#define MPY_API __attribute__((visibility("default")))

#ifndef MEMSNAP_VERSION
#define MEMSNAP_VERSION "0+unknown"
#endif

/* ---- columns and tables ------------------------------------------------- */

typedef struct mpy_col {
    const char *name;
    const char *type;      /* numpy dtype, or "cat:<dtype>" */
    size_t item;           /* bytes per value */
    void *data;            /* rows x item bytes; NULL once handed over */
    char *text;            /* cat: the categories */
    size_t ntext, captext;
    uint64_t nstr;
} mpy_col;

#define MPY_MAX_COLS 20

typedef struct mpy_table_t {
    char name[32];
    uint64_t rows, cap;    /* rows filled, rows the data arrays hold */
    int ncols;
    mpy_col col[MPY_MAX_COLS];
} mpy_table_t;

#define MPY_MAX_TABLES 5

struct mpy_result {
    mpy_table_t tab[MPY_MAX_TABLES];
    int ntab;
    char *info;
    char *summary;         /* mpy_read_all: the summary's JSON text */
    int summary_rc;        /* its exit status: 0, 1 (an OOM) */
};

static mpy_table_t *table_new(mpy_result *r, const char *name)
{
    if (r->ntab == MPY_MAX_TABLES)
        return NULL;
    mpy_table_t *t = &r->tab[r->ntab++];
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

/* Adds a column; its index. */
static int col_add(mpy_table_t *t, const char *name, const char *type, size_t item)
{
    mpy_col *c = &t->col[t->ncols];
    c->name = name;
    c->type = type;
    c->item = item;
    return t->ncols++;
}

/* Room for at least rows rows in every column.  0 ok, -1 out of memory. */
static int table_reserve(mpy_table_t *t, uint64_t rows)
{
    if (rows <= t->cap)
        return 0;
    uint64_t cap = t->cap ? t->cap : 4096;
    while (cap < rows)
        cap *= 2;
    for (int i = 0; i < t->ncols; i++) {
        mpy_col *c = &t->col[i];
        void *d = realloc(c->data, cap * c->item);
        if (!d)
            return -1;
        c->data = d;
    }
    t->cap = cap;
    return 0;
}

/* Appends s and its NUL to a column's text.  0 ok, -1 out of memory. */
static int text_add(mpy_col *c, const char *s)
{
    size_t n = strlen(s) + 1;
    if (c->ntext + n > c->captext) {
        size_t cap = c->captext ? c->captext : 4096;
        while (cap < c->ntext + n)
            cap *= 2;
        char *t = realloc(c->text, cap);
        if (!t)
            return -1;
        c->text = t;
        c->captext = cap;
    }
    memcpy(c->text + c->ntext, s, n);
    c->ntext += n;
    c->nstr++;
    return 0;
}

static void table_free(mpy_table_t *t)
{
    for (int i = 0; i < t->ncols; i++) {
        free(t->col[i].data);
        free(t->col[i].text);
    }
    memset(t, 0, sizeof *t);
}

/* The categories of an action or API column: every name, by code. */
static int names_text(mpy_col *c, int n, const char *(*name)(int))
{
    for (int i = 0; i < n; i++)
        if (text_add(c, name(i)))
            return -1;
    return 0;
}

/* ---- the events --------------------------------------------------------- */

enum { E_ACTION, E_T, E_DEVICE, E_ADDR, E_SIZE, E_STREAM, E_STACK, E_API, E_TID, E_AUX,
       E_AUX2, E_RESULT, E_SEQ, E_FREED, E_RESERVED, E_ALLOCATED, E_NCOLS };

typedef struct ev_reader {
    mpy_table_t *t;
    uint64_t freed;        /* the current event's removed bytes */
    /* the column arrays, refreshed when the table grows */
    int8_t *action, *api;
    int16_t *device, *result;
    uint32_t *stack, *tid;
    uint64_t *t_ns, *addr, *size, *stream, *aux, *aux2, *seq, *fr, *res, *alc;
} ev_reader;

static int ev_table(mpy_result *r, ev_reader *e)
{
    mpy_table_t *t = table_new(r, "events");
    if (!t)
        return -1;
    e->t = t;
    col_add(t, "action", "cat:|i1", 1);
    col_add(t, "t_ns", "<u8", 8);
    col_add(t, "device", "<i2", 2);
    col_add(t, "addr", "<u8", 8);
    col_add(t, "size", "<u8", 8);
    col_add(t, "stream", "<u8", 8);
    col_add(t, "stack", "<u4", 4);
    col_add(t, "api", "cat:|i1", 1);
    col_add(t, "tid", "<u4", 4);
    col_add(t, "aux", "<u8", 8);
    col_add(t, "aux2", "<u8", 8);
    col_add(t, "result", "<i2", 2);
    col_add(t, "seq", "<u8", 8);
    col_add(t, "freed", "<u8", 8);
    col_add(t, "reserved", "<u8", 8);
    col_add(t, "allocated", "<u8", 8);
    if (names_text(&t->col[E_ACTION], MSNAP_A_COUNT, msnap_action_name) ||
        names_text(&t->col[E_API], MSNAP_API_COUNT, msnap_api_name))
        return -1;
    return 0;
}

static void ev_arrays(ev_reader *e)
{
    mpy_col *c = e->t->col;
    e->action = c[E_ACTION].data;
    e->t_ns = c[E_T].data;
    e->device = c[E_DEVICE].data;
    e->addr = c[E_ADDR].data;
    e->size = c[E_SIZE].data;
    e->stream = c[E_STREAM].data;
    e->stack = c[E_STACK].data;
    e->api = c[E_API].data;
    e->tid = c[E_TID].data;
    e->aux = c[E_AUX].data;
    e->aux2 = c[E_AUX2].data;
    e->result = c[E_RESULT].data;
    e->seq = c[E_SEQ].data;
    e->fr = c[E_FREED].data;
    e->res = c[E_RESERVED].data;
    e->alc = c[E_ALLOCATED].data;
}

static int ev_before(void *ctx, an_file *f, const msnap_event *ev)
{
    (void)f;
    (void)ev;
    ((ev_reader *)ctx)->freed = 0;
    return 0;
}

static int ev_change(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    (void)f;
    if (sign < 0)
        ((ev_reader *)ctx)->freed += o->size;
    return 0;
}

static int ev_record(void *ctx, an_file *f, const msnap_record *rec)
{
    ev_reader *e = ctx;
    if (rec->type != MSNAP_REC_EVENT)
        return 0;
    mpy_table_t *t = e->t;
    uint64_t i = t->rows;
    if (i == t->cap) {
        if (table_reserve(t, i + 1))
            return -1;
        ev_arrays(e);
    }
    const msnap_event *v = &rec->u.event;
    e->action[i] = v->action < MSNAP_A_COUNT ? (int8_t)v->action : -1;
    e->t_ns[i] = v->t_ns;
    e->device[i] = v->device;
    e->addr[i] = v->addr;
    e->size[i] = v->size;
    e->stream[i] = v->stream;
    e->stack[i] = v->stack;
    e->api[i] = v->api < MSNAP_API_COUNT ? (int8_t)v->api : -1;
    e->tid[i] = v->tid;
    e->aux[i] = v->aux;
    e->aux2[i] = v->aux2;
    e->result[i] = v->result;
    e->seq[i] = v->seq;
    e->fr[i] = e->freed;
    e->res[i] = f->st.all[MSNAP_LAYER_RESERVED].cur;
    e->alc[i] = f->st.all[MSNAP_LAYER_ALLOCATED].cur;
    t->rows = i + 1;
    return 0;
}

/* At the end: the levels with the pre-window objects in them (a ring
 * dump's state section, frees of memory allocated before the recording),
 * as summary's (analysis.c folds them into the state's levels): each adds
 * its size to the rows before the event that freed it, or to every row. */
static int ev_end(void *ctx, an_file *f)
{
    ev_reader *e = ctx;
    const msnap_state *st = &f->st;
    uint64_t rows = e->t->rows;
    if (!st->npre || !rows || !f->pre_freed)
        return 0;
    /* 128-bit: the sizes of a hostile file add up past 2^64 (a signed
     * 64-bit sum overflowed, UB, and the column wrapped); a level past
     * 2^64 - 1 reads 2^64 - 1, as the state's saturating levels do */
    __int128 *d = calloc(2 * (rows + 1), sizeof *d);
    if (!d)
        return -1;
    for (size_t k = 0; k < st->npre; k++) {
        const msnap_obj *o = &st->pre[k].o;
        int layer = msnap_state_site_layer(o->kind, o->device);
        int col = layer == MSNAP_LAYER_RESERVED ? 0 : layer == MSNAP_LAYER_ALLOCATED ? 1 : -1;
        if (col < 0)
            continue;
        /* row i is after event i + 1: live there while i + 1 < the freeing event */
        uint64_t end = f->pre_freed[k] == UINT64_MAX ? rows
                     : f->pre_freed[k] ? f->pre_freed[k] - 1 : 0;
        if (end > rows)
            end = rows;
        d[col * (rows + 1)] += (__int128)o->size;
        d[col * (rows + 1) + end] -= (__int128)o->size;
    }
    __int128 run[2] = {0, 0};
    const __int128 top = (__int128)UINT64_MAX;
    for (uint64_t i = 0; i < rows; i++) {
        run[0] += d[i];
        run[1] += d[rows + 1 + i];
        __int128 r = (__int128)e->res[i] + run[0], a = (__int128)e->alc[i] + run[1];
        e->res[i] = r > top ? UINT64_MAX : r < 0 ? 0 : (uint64_t)r;
        e->alc[i] = a > top ? UINT64_MAX : a < 0 ? 0 : (uint64_t)a;
    }
    free(d);
    return 0;
}

/* ---- the moment of the state table -------------------------------------- */

enum { AT_TIME, AT_PEAK, AT_OOM, AT_END };

typedef struct at_reader {
    an_moment *k;
    int at;                /* AT_* */
    uint64_t t;            /* AT_TIME */
    int found;             /* AT_OOM: an OOM was seen */
} at_reader;

static int at_record(void *ctx, an_file *f, const msnap_record *rec)
{
    at_reader *a = ctx;
    if (rec->type != MSNAP_REC_EVENT)
        return 0;
    const msnap_event *v = &rec->u.event;
    const msnap_state *st = &f->st;
    switch (a->at) {
    case AT_TIME:
        if (v->t_ns <= a->t)
            an_moment_mark(a->k);
        break;
    case AT_PEAK: {
        /* a later mark replaces an earlier one: the last rise of the
         * allocated peak, or of reserved while no block was seen */
        int layer = st->allocated_seen ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED;
        if (st->all[layer].peak_ev == f->ev_idx)
            an_moment_mark(a->k);
        break;
    }
    case AT_OOM:
        if (v->action == MSNAP_A_OOM && !a->found) {
            an_moment_mark(a->k);
            an_moment_freeze(a->k);
            a->found = 1;
        }
        break;
    default:
        break;
    }
    return 0;
}

/* Parses at into a; 0, or -1 with a message. */
static int at_parse(at_reader *a, const char *at, char *err, size_t errlen)
{
    if (!at || !*at) {
        snprintf(err, errlen, "no moment given");
        return -1;
    }
    int kind;
    uint64_t t = 0;
    if (sm_parse_at(at, &kind, &t) != 0) {
        snprintf(err, errlen, "bad moment \"%s\": give peak, oom, end, or a time such as "
                 "12.5s, 800ms or 1500ns", at);
        return -1;
    }
    a->at = kind == SM_AT_PEAK ? AT_PEAK : kind == SM_AT_OOM ? AT_OOM
          : kind == SM_AT_END ? AT_END : AT_TIME;
    a->t = t;
    return 0;
}

/* ---- after the read: sites and state ----------------------------------- */

enum { O_ADDR, O_SIZE, O_T, O_DEVICE, O_STREAM, O_STACK, O_KIND, O_LAYER, O_LABEL, O_AUX,
       O_PRE };

/* The layer an object counts in, as a name: its site layer (reserved,
 * allocated, pinned), else vmm_va or vmm_mapped. */
static const char *obj_layer(const msnap_obj *o)
{
    int l = msnap_state_site_layer(o->kind, o->device);
    if (l >= 0)
        return msnap_layer_name(l);
    if (o->kind == MSNAP_A_VMM_RESERVE)
        return msnap_layer_name(MSNAP_LAYER_VMM_VA);
    if (o->kind == MSNAP_A_VMM_MAP)
        return msnap_layer_name(MSNAP_LAYER_VMM_MAPPED);
    return "";
}

/* Categories of a text: codes for strings, each string once. */
typedef struct cat_index {
    mpy_col *c;
    u64map by_hash;        /* FNV-1a of the string -> code */
    uint64_t *off;         /* code -> offset in c->text */
    size_t cap;
} cat_index;

/* The code of s (a new category when it is new).  0 ok, -1 out of
 * memory.  Two strings with one hash (never seen): the second gets a
 * code, and later equal ones get that code again only through a scan. */
static int cat_code(cat_index *x, const char *s, int32_t *code)
{
    uint64_t h = msnap_fnv1a_str(MSNAP_FNV_BASIS, s);
    uint64_t *v = u64map_get(&x->by_hash, 1, h);
    if (v && strcmp(x->c->text + x->off[*v], s) == 0) {
        *code = (int32_t)*v;
        return 0;
    }
    if (v)                                  /* a collision: look at them all */
        for (uint64_t i = 0; i < x->c->nstr; i++)
            if (strcmp(x->c->text + x->off[i], s) == 0) {
                *code = (int32_t)i;
                return 0;
            }
    if (x->c->nstr == x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 256;
        uint64_t *no = realloc(x->off, nc * sizeof *no);
        if (!no)
            return -1;
        x->off = no;
        x->cap = nc;
    }
    uint64_t i = x->c->nstr;
    x->off[i] = x->c->ntext;
    if (text_add(x->c, s) || (!v && u64map_put(&x->by_hash, 1, h, i)))
        return -1;
    *code = (int32_t)i;
    return 0;
}

static void cat_index_free(cat_index *x)
{
    u64map_free(&x->by_hash);
    free(x->off);
}

/* The "state" table from the moment's objects. */
static int state_table(mpy_result *r, an_file *f, at_reader *a,
                       uint64_t *ev_idx, uint64_t *t_ns)
{
    mpy_table_t *t = table_new(r, "state");
    if (!t)
        return -1;
    col_add(t, "addr", "<u8", 8);
    col_add(t, "size", "<u8", 8);
    col_add(t, "t_ns", "<u8", 8);
    col_add(t, "device", "<i2", 2);
    col_add(t, "stream", "<u8", 8);
    col_add(t, "stack", "<u4", 4);
    col_add(t, "kind", "cat:|i1", 1);
    col_add(t, "layer", "cat:<i4", 4);
    col_add(t, "label", "cat:<i4", 4);
    col_add(t, "aux", "<u8", 8);
    col_add(t, "pre_window", "|b1", 1);
    if (names_text(&t->col[O_KIND], MSNAP_A_COUNT, msnap_action_name))
        return -1;
    msnap_obj *objs = NULL;
    size_t n = 0;
    int marked = an_moment_marked(a->k);
    if (an_moment_objects(a->k, &objs, &n, ev_idx, t_ns))
        return -1;
    /* the pre-window objects live at the moment (analysis.c's rule): no
     * other object live then has their key */
    u64map pre = {0};
    uint64_t at = marked ? *ev_idx : UINT64_MAX;
    int rc = table_reserve(t, n ? n : 1);
    for (size_t i = 0; i < f->st.npre && rc == 0; i++)
        if (f->pre_freed[i] > at || (at == UINT64_MAX && f->pre_freed[i] == UINT64_MAX))
            rc = u64map_put(&pre, f->st.pre[i].o.space, an_obj_key(&f->st.pre[i].o), 1);
    cat_index layers = {.c = &t->col[O_LAYER]}, labels = {.c = &t->col[O_LABEL]};
    u64map by_stack = {0};                  /* stack -> label code */
    char lab[SM_LABEL_MAX];
    for (size_t i = 0; i < n && rc == 0; i++) {
        const msnap_obj *o = &objs[i];
        ((uint64_t *)t->col[O_ADDR].data)[i] = o->addr;
        ((uint64_t *)t->col[O_SIZE].data)[i] = o->size;
        ((uint64_t *)t->col[O_T].data)[i] = o->t_ns;
        ((int16_t *)t->col[O_DEVICE].data)[i] = o->device == MSNAP_ST_HOST ? -1 : o->device;
        ((uint64_t *)t->col[O_STREAM].data)[i] = o->stream;
        ((uint32_t *)t->col[O_STACK].data)[i] = o->stack;
        ((int8_t *)t->col[O_KIND].data)[i] = o->kind < MSNAP_A_COUNT ? (int8_t)o->kind : -1;
        ((uint64_t *)t->col[O_AUX].data)[i] = o->aux;
        ((uint8_t *)t->col[O_PRE].data)[i] = u64map_get(&pre, o->space, an_obj_key(o)) != NULL;
        int32_t code;
        if (cat_code(&layers, obj_layer(o), &code)) {
            rc = -1;
            break;
        }
        ((int32_t *)t->col[O_LAYER].data)[i] = code;
        uint64_t *v = u64map_get(&by_stack, 1, o->stack);
        if (v) {
            code = (int32_t)*v;
        } else {
            sm_site_label(an_labels(f), o->stack, lab, sizeof lab);
            if (cat_code(&labels, lab, &code) ||
                u64map_put(&by_stack, 1, o->stack, (uint64_t)code)) {
                rc = -1;
                break;
            }
        }
        ((int32_t *)t->col[O_LABEL].data)[i] = code;
        t->rows = i + 1;
    }
    cat_index_free(&layers);
    cat_index_free(&labels);
    u64map_free(&by_stack);
    u64map_free(&pre);
    free(objs);
    return rc;
}

/* ---- the read ----------------------------------------------------------- */

MPY_API mpy_result *mpy_read(const char *path, unsigned want, const char *at, char *err,
                             size_t errlen)
{
    mpy_result *r = calloc(1, sizeof *r);
    an_file f;
    an_init(&f, path);
    ev_reader ev = {0};
    at_reader ar = {0};
    char why[512];
    int oom = 0;
    if (!r) {
        snprintf(err, errlen, "%s: out of memory", path);
        an_free(&f);
        return NULL;
    }
    if ((want & MPY_STATE) && at_parse(&ar, at, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto fail;
    }
    if (want & MPY_STATE)
        sm_demangle_allow_loading(1);          /* as the CLI: labels read the same */
    if (want & MPY_EVENTS) {
        an_observer o = {.ctx = &ev, .record = ev_record, .event_before = ev_before,
                         .change = ev_change, .end = ev_end};
        if (ev_table(r, &ev) || table_reserve(ev.t, 1) || an_observe(&f, &o))
            goto oom;
        ev_arrays(&ev);
    }
    if (want & MPY_STATE) {
        an_observer o = {.ctx = &ar, .record = at_record};
        if (!(ar.k = an_moment_new(&f)) || an_observe(&f, &o))
            goto oom;
        if (ar.at == AT_TIME)
            an_moment_mark(ar.k);   /* before any event, unless one comes by then */
    }
    if (an_read(&f, err, errlen) != 0)
        goto fail;
    uint64_t at_idx = 0, at_t = 0;
    if ((want & MPY_STATE) && state_table(r, &f, &ar, &at_idx, &at_t))
        goto oom;
    cJSON *info = cJSON_CreateObject();
    if (!info)
        goto oom;
    msnap_json_u64(info, "events", f.ev_idx);
    if (f.have_first)
        msnap_json_u64(info, "first_t_ns", f.t_first);
    cJSON_AddBoolToObject(info, "allocated_seen", f.st.allocated_seen);
    cJSON_AddBoolToObject(info, "truncated", f.truncated);
    if (want & MPY_STATE) {
        cJSON *a = cJSON_AddObjectToObject(info, "at");
        msnap_json_u64(a, "event_index", at_idx);
        msnap_json_u64(a, "t_ns", at_t);
        cJSON_AddBoolToObject(a, "found", ar.at != AT_OOM || ar.found);
    }
    r->info = cJSON_PrintUnformatted(info);
    cJSON_Delete(info);
    if (!r->info)
        goto oom;
    an_free(&f);
    return r;
oom:
    oom = 1;
fail:
    if (oom)
        snprintf(err, errlen, "%s: out of memory", path);
    an_free(&f);
    mpy_free(r);
    return NULL;
}

/* ---- one read for the tables and the summary (mpy_read_all) ------------- */

typedef struct all_ctx {
    mpy_result *r;
    unsigned want;
    ev_reader ev;
    at_reader ar;
    int failed;
} all_ctx;

static int all_attach(void *ctx, an_file *f)
{
    all_ctx *c = ctx;
    if (c->want & MPY_EVENTS) {
        an_observer o = {.ctx = &c->ev, .record = ev_record, .event_before = ev_before,
                         .change = ev_change, .end = ev_end};
        if (ev_table(c->r, &c->ev) || table_reserve(c->ev.t, 1) || an_observe(f, &o))
            return -1;
        ev_arrays(&c->ev);
    }
    if (c->want & MPY_STATE) {
        an_observer o = {.ctx = &c->ar, .record = at_record};
        if (!(c->ar.k = an_moment_new(f)) || an_observe(f, &o))
            return -1;
        if (c->ar.at == AT_TIME)
            an_moment_mark(c->ar.k);
    }
    return 0;
}

static int all_done(void *ctx, const an_file *cf, const struct sm_model *m, cJSON *root)
{
    (void)m;
    (void)root;
    all_ctx *c = ctx;
    an_file *f = (an_file *)cf;   /* the moment's objects are read, nothing changed */
    uint64_t at_idx = 0, at_t = 0;
    if ((c->want & MPY_STATE) && state_table(c->r, f, &c->ar, &at_idx, &at_t))
        return -1;
    cJSON *info = cJSON_CreateObject();
    if (!info)
        return -1;
    msnap_json_u64(info, "events", f->ev_idx);
    if (f->have_first)
        msnap_json_u64(info, "first_t_ns", f->t_first);
    cJSON_AddBoolToObject(info, "allocated_seen", f->st.allocated_seen);
    cJSON_AddBoolToObject(info, "truncated", f->truncated);
    if (c->want & MPY_STATE) {
        cJSON *a = cJSON_AddObjectToObject(info, "at");
        msnap_json_u64(a, "event_index", at_idx);
        msnap_json_u64(a, "t_ns", at_t);
        cJSON_AddBoolToObject(a, "found", c->ar.at != AT_OOM || c->ar.found);
    }
    c->r->info = cJSON_PrintUnformatted(info);
    cJSON_Delete(info);
    return c->r->info ? 0 : -1;
}

MPY_API mpy_result *mpy_read_all(const char *path, unsigned want, const char *at, int top,
                                 int marks, const char *rules_path, char *err, size_t errlen)
{
    mpy_result *r = calloc(1, sizeof *r);
    cat_rules *rules = cat_rules_new();
    all_ctx c = {.r = r, .want = want};
    cJSON *root = NULL;
    char why[512];
    if (!r || !rules) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if ((want & MPY_STATE) && at_parse(&c.ar, at, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        goto fail;
    }
    if (rules_path && *rules_path && cat_rules_load(rules, rules_path, err, errlen) != 0)
        goto fail;
    sm_demangle_allow_loading(1);              /* as `memsnap summary` */
    msnap_summary_opts o = {.marks = marks, .top = top, .rules = rules,
                            .attach = all_attach, .done = all_done, .ctx = &c};
    int rc = msnap_summarize(path, &o, &root, NULL, err, errlen);
    if (rc == 2)
        goto fail;
    r->summary = cJSON_PrintUnformatted(root);
    r->summary_rc = rc;
    cJSON_Delete(root);
    root = NULL;
    if (!r->summary) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    cat_rules_free(rules);
    return r;
fail:
    cJSON_Delete(root);
    cat_rules_free(rules);
    mpy_free(r);
    return NULL;
}

MPY_API const char *mpy_result_summary(const mpy_result *r, int *rc)
{
    if (rc)
        *rc = r ? r->summary_rc : 2;
    return r && r->summary ? r->summary : NULL;
}

/* The progress hook of the reads (format.h msnap_progress): fn gets each
 * report (what, done, total; done = UINT64_MAX at the end); NULL: none. */
typedef void (*mpy_progress_fn)(const char *what, uint64_t done, uint64_t total);
static mpy_progress_fn progress_fn;

static void progress_hook(void *ctx, const char *what, uint64_t done, uint64_t total,
                          int bytes)
{
    (void)ctx;
    (void)bytes;
    if (progress_fn)
        progress_fn(what, done, total);
}

MPY_API void mpy_set_progress(mpy_progress_fn fn)
{
    progress_fn = fn;
    msnap_set_progress(fn ? progress_hook : NULL, NULL);
}

MPY_API void mpy_free(mpy_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->ntab; i++)
        table_free(&r->tab[i]);
    cJSON_free(r->info);
    cJSON_free(r->summary);
    free(r);
}

MPY_API int mpy_table(const mpy_result *r, const char *name)
{
    for (int i = 0; r && name && i < r->ntab; i++)
        if (strcmp(r->tab[i].name, name) == 0)
            return i;
    return -1;
}

static const mpy_col *col_of(const mpy_result *r, int table, int col)
{
    if (!r || table < 0 || table >= r->ntab || col < 0 || col >= r->tab[table].ncols)
        return NULL;
    return &r->tab[table].col[col];
}

MPY_API uint64_t mpy_rows(const mpy_result *r, int table)
{
    return r && table >= 0 && table < r->ntab ? r->tab[table].rows : 0;
}

MPY_API int mpy_columns(const mpy_result *r, int table)
{
    return r && table >= 0 && table < r->ntab ? r->tab[table].ncols : 0;
}

MPY_API const char *mpy_column_name(const mpy_result *r, int table, int col)
{
    const mpy_col *c = col_of(r, table, col);
    return c ? c->name : NULL;
}

MPY_API const char *mpy_column_type(const mpy_result *r, int table, int col)
{
    const mpy_col *c = col_of(r, table, col);
    return c ? c->type : NULL;
}

MPY_API void *mpy_column_release(mpy_result *r, int table, int col, uint64_t *nbytes)
{
    mpy_col *c = (mpy_col *)col_of(r, table, col);
    *nbytes = 0;
    if (!c || !c->item || !c->data)
        return NULL;
    uint64_t n = r->tab[table].rows * c->item;
    void *d = c->data;
    c->data = NULL;
    if (n) {
        void *s = realloc(d, n);       /* give back the growth's spare room */
        if (s)
            d = s;
    }
    *nbytes = n;
    return d;
}

MPY_API void mpy_free_buffer(void *p)
{
    free(p);
}

MPY_API const char *mpy_column_text(const mpy_result *r, int table, int col, uint64_t *count,
                                    uint64_t *nbytes)
{
    const mpy_col *c = col_of(r, table, col);
    *count = 0;
    *nbytes = 0;
    if (!c || strncmp(c->type, "cat:", 4) != 0)
        return NULL;
    *count = c->nstr;
    *nbytes = c->ntext;
    return c->text ? c->text : "";
}

MPY_API const char *mpy_info(const mpy_result *r)
{
    return r && r->info ? r->info : "{}";
}

/* ---- the summary -------------------------------------------------------- */

MPY_API char *mpy_summary(const char *path, int top, int marks, const char *rules_path,
                          int *rc, char *err, size_t errlen)
{
    cat_rules *rules = cat_rules_new();
    cJSON *root = NULL;
    char *text = NULL;
    *rc = 2;
    if (!rules) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (rules_path && *rules_path && cat_rules_load(rules, rules_path, err, errlen) != 0) {
        cat_rules_free(rules);
        return NULL;
    }
    sm_demangle_allow_loading(1);              /* as `memsnap summary` */
    msnap_summary_opts o = {.marks = marks, .top = top, .rules = rules};
    int r = msnap_summarize(path, &o, &root, NULL, err, errlen);
    if (r != 2) {
        text = cJSON_PrintUnformatted(root);
        if (!text)
            snprintf(err, errlen, "%s: out of memory", path);
        else
            *rc = r;
    }
    cJSON_Delete(root);
    cat_rules_free(rules);
    return text;
}

MPY_API char *mpy_job_file(const char *path, int *rc, char *err, size_t errlen)
{
    cJSON *rec = NULL;
    char *text = NULL;
    sm_demangle_allow_loading(1);              /* as `memsnap job` */
    *rc = job_read_file(path, NULL, &rec, err, errlen);
    if (*rc != 2) {
        text = cJSON_PrintUnformatted(rec);
        if (!text) {
            snprintf(err, errlen, "%s: out of memory", path);
            *rc = 2;
        }
    }
    cJSON_Delete(rec);
    return text;
}

MPY_API char *mpy_job_reduce(const char *records, char *err, size_t errlen)
{
    cJSON *a = job_parse(records);
    char *text = NULL;
    if (!cJSON_IsArray(a)) {
        snprintf(err, errlen, "the rank records are not a JSON array");
        cJSON_Delete(a);
        return NULL;
    }
    int n = cJSON_GetArraySize(a), i = 0;
    cJSON **recs = malloc(((size_t)n + 1) * sizeof *recs);
    const cJSON *x;
    if (recs) {
        cJSON_ArrayForEach(x, a)
            recs[i++] = (cJSON *)x;
        cJSON *job = job_reduce(recs, n);
        text = job ? cJSON_PrintUnformatted(job) : NULL;
        cJSON_Delete(job);
    }
    if (!text)
        snprintf(err, errlen, "out of memory");
    free(recs);
    cJSON_Delete(a);
    return text;
}

MPY_API void mpy_free_text(char *text)
{
    cJSON_free(text);
}

MPY_API const char *mpy_version(void)
{
    return MEMSNAP_VERSION;
}

/* ---- memsnap.record(..., metrics=PORT) ------------------------------------ */

MPY_API void *mpy_metrics_start(const char *spec, const char *path, const char *rank,
                                char *err, size_t errlen)
{
    an_metrics *m = an_metrics_listen(spec, err, errlen);
    if (!m)
        return NULL;
    if (an_metrics_start(m, NULL, path, rank) != 0) {
        snprintf(err, errlen, "cannot start the metrics thread");
        an_metrics_stop(m);
        return NULL;
    }
    return m;
}

MPY_API const char *mpy_metrics_address(void *m)
{
    return m ? an_metrics_address(m) : "";
}

MPY_API void mpy_metrics_stop(void *m)
{
    an_metrics_stop(m);
}

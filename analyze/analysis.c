/* The analysis library's core (analysis.h): the one read loop, the change
 * log and the moments.
 *
 * The read loop.  One reader, one pass.  Per record: the tables (stack,
 * sym, module, str lines) or the header copy, then the state model
 * (state.h), whose changes come back through dispatch_before/_after to the
 * moments, the log and the observers, then the observers' record hooks.
 *
 * The log.  Byte-coded entries in chunks of LOG_CHUNK bytes, appended as
 * the read goes and read back in order by an_replay.  An entry starts with
 * a tag byte: the low 3 bits are the kind, the others flags; numbers follow
 * as LEB128 varints (signed ones zigzag-coded):
 *
 *   EVENT    bit 3: the index moved by exactly 1 (else a varint delta
 *            follows); then the time as a zigzag delta from the previous
 *            EVENT's.  Written lazily, before the first other entry of an
 *            event, so events that change nothing cost nothing.
 *   CHANGE   bit 3: added (else removed); bit 4: api torch; bit 5: a pool
 *            follows; site, size, the object's key (an_obj_key: which
 *            object, for observers that follow objects), the pool index
 *            (a private pool's block only).
 *   COUNTERS device + 1, t, reserved, allocated, async, managed, host,
 *            vmm_mapped, device_used.
 *   NVTX     bit 3: push (else pop); tid; string id (push only).
 *   SEGMENT  bit 3: made (else given back); bit 4: a pool follows; device
 *            + 1; size; the pool index (a private pool's segment only).
 *   OOM      device + 1 (an oom event; alloc_error is not logged).
 *
 * A typical event costs 6-10 bytes (an EVENT of 2-3 bytes and a CHANGE of
 * 4-7).
 *
 * The moments.  A mark says "the live set now".  From the mark on, each
 * change is appended to the moment's undo list; the list is folded into a
 * copy of the live set (materialized: the live set now, each listed change
 * undone from the newest) once it is longer than twice the live set, and
 * further changes are then ignored until the next mark.  So a mark costs
 * O(1), a change O(1) amortized, and memory stays within about three
 * times the live set however far the read goes past the mark.
 */
#include "analysis.h"

#include <inttypes.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readahead.h"
#include "util/u64map.h"

/* ---- the log ------------------------------------------------------------- */

#define LOG_CHUNK (1u << 20)

enum { L_EVENT = 0, L_CHANGE, L_COUNTERS, L_NVTX, L_SEGMENT, L_OOM };

typedef struct log_chunk {
    struct log_chunk *next;
    size_t used;
    unsigned char b[LOG_CHUNK];
} log_chunk;

struct an_log {
    log_chunk *head, *tail;
    size_t bytes;
    uint64_t last_idx, last_t;   /* of the last EVENT entry */
    uint64_t pending_idx;        /* the current event, not written yet (0: none) */
    uint64_t pending_t;
    int err;                     /* out of memory: the log is incomplete */
    uint32_t *pre_site;          /* site of st.pre[i] (MSNAP_NO_SITE: none) */
};

/* Makes room for n bytes in the tail chunk; NULL when out of memory. */
static unsigned char *log_room(an_log *l, size_t n)
{
    if (l->err)
        return NULL;
    if (!l->tail || l->tail->used + n > LOG_CHUNK) {
        log_chunk *c = malloc(sizeof *c);
        if (!c) {
            l->err = 1;
            return NULL;
        }
        c->next = NULL;
        c->used = 0;
        if (l->tail)
            l->tail->next = c;
        else
            l->head = c;
        l->tail = c;
    }
    return l->tail->b + l->tail->used;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Appends one entry: a tag and up to 9 varints. */
static void log_put(an_log *l, unsigned tag, const uint64_t *v, int nv)
{
    unsigned char *p = log_room(l, 1 + 10 * (size_t)nv);
    if (!p)
        return;
    size_t n = 0;
    p[n++] = (unsigned char)tag;
    for (int i = 0; i < nv; i++)
        n += put_varint(p + n, v[i]);
    l->tail->used += n;
    l->bytes += n;
}

/* Writes the current event's EVENT entry if it is still pending. */
static void log_flush_event(an_log *l)
{
    if (!l->pending_idx)
        return;
    uint64_t d = l->pending_idx - l->last_idx;
    uint64_t v[2];
    int nv = 0;
    if (d != 1)
        v[nv++] = d;
    v[nv++] = zigzag((int64_t)(l->pending_t - l->last_t));
    log_put(l, L_EVENT | (d == 1 ? 8u : 0u), v, nv);
    l->last_idx = l->pending_idx;
    l->last_t = l->pending_t;
    l->pending_idx = 0;
}

static void log_change(an_log *l, uint32_t site, int sign, uint64_t size, int torch,
                       uint64_t key, uint32_t pool)
{
    log_flush_event(l);
    uint64_t v[4] = {site, size, key, pool};
    log_put(l, L_CHANGE | (sign > 0 ? 8u : 0u) | (torch ? 16u : 0u) | (pool ? 32u : 0u), v,
            pool ? 4 : 3);
}

static void log_free(an_log *l)
{
    if (!l)
        return;
    for (log_chunk *c = l->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(l->pre_site);
    free(l);
}

size_t an_log_bytes(const an_file *f)
{
    return f->log ? f->log->bytes : 0;
}

/* Reads one varint at *p (the log is trusted: written above). */
static uint64_t get_varint(const unsigned char **p)
{
    uint64_t v = 0;
    int sh = 0;
    while (**p & 0x80) {
        v |= (uint64_t)(**p & 0x7f) << sh;
        sh += 7;
        (*p)++;
    }
    v |= (uint64_t)**p << sh;
    (*p)++;
    return v;
}

int an_replay(const an_file *f, const an_visitor *v)
{
    const an_log *l = f->log;
    if (!l || l->err)
        return -1;
    const msnap_state *st = &f->st;
    for (size_t i = 0; i < st->npre; i++) {
        if (l->pre_site[i] == MSNAP_NO_SITE)
            continue;
        const msnap_obj *o = &st->pre[i].o;
        if (v->change)
            v->change(v->ctx, l->pre_site[i], 1, o->size, o->api == MSNAP_API_TORCH,
                      an_obj_key(o));
        if (v->pchange)
            v->pchange(v->ctx, l->pre_site[i], 1, o->size, o->api == MSNAP_API_TORCH,
                       an_obj_key(o), an_obj_pool(f, o));
    }
    uint64_t idx = 0, t = 0;
    for (const log_chunk *c = l->head; c; c = c->next) {
        const unsigned char *p = c->b, *end = c->b + c->used;
        while (p < end) {
            unsigned tag = *p++;
            switch (tag & 7) {
            case L_EVENT:
                idx += tag & 8 ? 1 : get_varint(&p);
                t += (uint64_t)unzigzag(get_varint(&p));
                if (v->event)
                    v->event(v->ctx, idx, t);
                break;
            case L_CHANGE: {
                uint32_t site = (uint32_t)get_varint(&p);
                uint64_t size = get_varint(&p);
                uint64_t key = get_varint(&p);
                uint32_t pool = tag & 32 ? (uint32_t)get_varint(&p) : 0;
                if (v->change)
                    v->change(v->ctx, site, tag & 8 ? 1 : -1, size, (tag & 16) != 0, key);
                if (v->pchange)
                    v->pchange(v->ctx, site, tag & 8 ? 1 : -1, size, (tag & 16) != 0, key, pool);
                break;
            }
            case L_COUNTERS: {
                msnap_counters k;
                k.device = (int)get_varint(&p) - 1;
                k.t_ns = get_varint(&p);
                k.reserved = get_varint(&p);
                k.allocated = get_varint(&p);
                k.async = get_varint(&p);
                k.managed = get_varint(&p);
                k.host = get_varint(&p);
                k.vmm_mapped = get_varint(&p);
                k.device_used = get_varint(&p);
                if (v->counters)
                    v->counters(v->ctx, &k);
                break;
            }
            case L_NVTX: {
                uint32_t tid = (uint32_t)get_varint(&p);
                uint32_t str = tag & 8 ? (uint32_t)get_varint(&p) : 0;
                if (v->nvtx)
                    v->nvtx(v->ctx, (tag & 8) != 0, tid, str);
                break;
            }
            case L_SEGMENT: {
                int dev = (int)get_varint(&p) - 1;
                uint64_t size = get_varint(&p);
                uint32_t pool = tag & 16 ? (uint32_t)get_varint(&p) : 0;
                if (v->segment)
                    v->segment(v->ctx, dev, tag & 8 ? 1 : -1, size);
                if (v->psegment)
                    v->psegment(v->ctx, dev, tag & 8 ? 1 : -1, size, pool);
                break;
            }
            case L_OOM: {
                int dev = (int)get_varint(&p) - 1;
                if (v->oom)
                    v->oom(v->ctx, dev);
                break;
            }
            default:
                return -1;
            }
        }
    }
    return 0;
}

/* ---- moments --------------------------------------------------------------- */

typedef struct undo_rec {
    msnap_obj o;
    int sign;
} undo_rec;

struct an_moment {
    an_file *f;
    int marked, frozen, folded;   /* folded: snap holds the live set at the mark */
    uint64_t idx, t;
    msnap_obj *snap;
    size_t nsnap, cap_snap;
    undo_rec *undo;               /* changes since the mark (not folded) */
    size_t nundo, cap_undo;
};

an_moment *an_moment_new(an_file *f)
{
    if (f->nmoments == AN_MAX_MOMENTS)
        return NULL;
    an_moment *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->f = f;
    f->moments[f->nmoments++] = k;
    return k;
}

static void moment_free(an_moment *k)
{
    if (!k)
        return;
    free(k->snap);
    free(k->undo);
    free(k);
}

void an_moment_mark(an_moment *k)
{
    if (k->frozen)
        return;
    k->marked = 1;
    k->folded = 0;
    k->idx = k->f->ev_idx;
    k->t = k->f->t;
    k->nsnap = k->nundo = 0;
}

void an_moment_freeze(an_moment *k)
{
    k->frozen = 1;
}

int an_moment_marked(const an_moment *k)
{
    return k->marked;
}

int an_live_objects(const an_file *f, msnap_obj **out, size_t *n)
{
    const msnap_state *st = &f->st;
    *n = 0;
    *out = malloc((st->map.n + 1) * sizeof **out);
    if (!*out)
        return -1;
    for (size_t i = 0; i < st->map.cap; i++)
        if (st->map.slots[i].used)
            (*out)[(*n)++] = st->objs[st->map.slots[i].value];
    return 0;
}

/* The live set now with k's undo list undone (newest first), into a new
 * array.  0 ok, -1 out of memory. */
static int moment_unwind(const an_moment *k, msnap_obj **out, size_t *n)
{
    if (an_live_objects(k->f, out, n))
        return -1;
    u64map ix = {0};
    size_t cap = *n + 1;
    int rc = -1;
    for (size_t i = 0; i < *n; i++)
        if (u64map_put(&ix, (*out)[i].space, an_obj_key(&(*out)[i]), i))
            goto done;
    for (size_t j = k->nundo; j-- > 0;) {
        const undo_rec *u = &k->undo[j];
        uint64_t key = an_obj_key(&u->o), i;
        if (u->sign > 0) {
            /* added after the mark: take it out (the hole is filled by
             * the last element) */
            if (!u64map_del(&ix, u->o.space, key, &i))
                continue;
            size_t last = --*n;
            if (i != last) {
                (*out)[i] = (*out)[last];
                uint64_t *v = u64map_get(&ix, (*out)[i].space, an_obj_key(&(*out)[i]));
                if (v)
                    *v = i;
            }
        } else {
            /* removed after the mark: put it back */
            if (u64map_get(&ix, u->o.space, key))
                continue;
            if (*n + 1 > cap) {
                size_t nc = cap * 2;
                msnap_obj *na = realloc(*out, nc * sizeof *na);
                if (!na)
                    goto done;
                *out = na;
                cap = nc;
            }
            if (u64map_put(&ix, u->o.space, key, *n))
                goto done;
            (*out)[(*n)++] = u->o;
        }
    }
    rc = 0;
done:
    u64map_free(&ix);
    if (rc) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* A change after the mark: listed, or folded when the list is long. */
static int moment_change(an_moment *k, const msnap_obj *o, int sign)
{
    if (!k->marked || k->folded)
        return 0;
    if (k->nundo == k->cap_undo) {
        size_t nc = k->cap_undo ? k->cap_undo * 2 : 256;
        undo_rec *nu = realloc(k->undo, nc * sizeof *nu);
        if (!nu)
            return -1;
        k->undo = nu;
        k->cap_undo = nc;
    }
    k->undo[k->nundo++] = (undo_rec){*o, sign};
    if (k->nundo > 1024 && k->nundo > 2 * k->f->st.map.n) {
        free(k->snap);
        k->snap = NULL;
        if (moment_unwind(k, &k->snap, &k->nsnap))
            return -1;
        k->folded = 1;
        k->nundo = 0;
    }
    return 0;
}

int an_moment_objects(an_moment *k, msnap_obj **out, size_t *n, uint64_t *ev_idx,
                      uint64_t *t_ns)
{
    const an_file *f = k->f;
    uint64_t at = k->marked ? k->idx : UINT64_MAX;
    *ev_idx = k->marked ? k->idx : f->ev_idx;
    *t_ns = k->marked ? k->t : f->t_max;
    if (k->marked && k->folded) {
        *out = malloc((k->nsnap + f->st.npre + 1) * sizeof **out);
        if (!*out)
            return -1;
        memcpy(*out, k->snap, k->nsnap * sizeof **out);
        *n = k->nsnap;
    } else if (k->marked) {
        if (moment_unwind(k, out, n))
            return -1;
    } else if (an_live_objects(f, out, n)) {
        return -1;
    }
    /* the pre-window objects live at that moment: freed after it, or
     * never (a state section's) */
    size_t npre = 0;
    for (size_t i = 0; i < f->st.npre; i++)
        npre += f->pre_freed[i] > at || (at == UINT64_MAX && f->pre_freed[i] == UINT64_MAX);
    if (npre) {
        msnap_obj *na = realloc(*out, (*n + npre) * sizeof *na);
        if (!na) {
            free(*out);
            *out = NULL;
            return -1;
        }
        *out = na;
        for (size_t i = 0; i < f->st.npre; i++)
            if (f->pre_freed[i] > at || (at == UINT64_MAX && f->pre_freed[i] == UINT64_MAX))
                (*out)[(*n)++] = f->st.pre[i].o;
    }
    return 0;
}

/* ---- the read loop --------------------------------------------------------- */

void an_init(an_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    msnap_state_init(&f->st);
}

const sm_labels *an_labels(an_file *f)
{
    if (sm_labels_current(f->labels))
        return f->labels;
    sm_labels_free(f->labels);
    f->labels = sm_labels_new(&f->tab, f->have_header && !strcmp(f->hdr.mode, "ring"));
    return f->labels;
}

void an_free(an_file *f)
{
    sm_labels_free(f->labels);
    for (int i = 0; f->argv && i < f->hdr.argc; i++)
        free(f->argv[i]);
    free(f->argv);
    free(f->settings);
    sm_symtab_free(&f->tab);
    msnap_state_free(&f->st);
    u64map_free(&f->fwd_stack);
    u64map_free(&f->bwd_stack);
    u64map_free(&f->pool_map);
    free(f->pools);
    free(f->pre_freed);
    log_free(f->log);
    for (int i = 0; i < f->nmoments; i++)
        moment_free(f->moments[i]);
    memset(f, 0, sizeof *f);
}

int an_observe(an_file *f, const an_observer *o)
{
    if (f->nobs == AN_MAX_OBSERVERS)
        return -1;
    f->obs[f->nobs++] = *o;
    return 0;
}

int an_want_log(an_file *f)
{
    if (!f->log && !(f->log = calloc(1, sizeof *f->log)))
        return -1;
    return 0;
}

void an_strip_path(const an_file *f, char *err)
{
    size_t n = strlen(f->path);
    if (!strncmp(err, f->path, n) && err[n] == ':' && err[n + 1] == ' ')
        memmove(err, err + n + 2, strlen(err + n + 2) + 1);
}

void an_fail(an_file *f, const char *msg)
{
    snprintf(f->fail, sizeof f->fail, "%s", msg);
}

static void dispatch_before(void *ctx, const msnap_state *st, const msnap_obj *o, int sign)
{
    (void)st;
    an_file *f = ctx;
    for (int i = 0; i < f->nobs; i++)
        if (f->obs[i].change_before)
            f->obs[i].change_before(f->obs[i].ctx, f, o, sign);
}

static int dispatch_after(void *ctx, const msnap_state *st, const msnap_obj *o, int sign)
{
    (void)st;
    an_file *f = ctx;
    for (int i = 0; i < f->nmoments; i++)
        if (moment_change(f->moments[i], o, sign))
            return -1;
    if (f->log && o->site != MSNAP_NO_SITE)
        log_change(f->log, o->site, sign, o->size, o->api == MSNAP_API_TORCH, an_obj_key(o),
                   an_obj_pool(f, o));
    for (int i = 0; i < f->nobs; i++)
        if (f->obs[i].change && f->obs[i].change(f->obs[i].ctx, f, o, sign))
            return -1;
    return 0;
}

/* A pre-window object leaves at this event (state.h's pre callback). */
static int dispatch_pre(void *ctx, const msnap_state *st, size_t i)
{
    an_file *f = ctx;
    if (msnap_grow((void **)&f->pre_freed, &f->cap_pre_freed, i, sizeof *f->pre_freed))
        return -1;
    f->pre_freed[i] = f->ev_idx;
    if (f->log) {
        uint32_t site = msnap_state_site_for(&f->st, &st->pre[i].o);
        if (site != MSNAP_NO_SITE)
            log_change(f->log, site, -1, st->pre[i].o.size,
                       st->pre[i].o.api == MSNAP_API_TORCH, an_obj_key(&st->pre[i].o),
                       an_obj_pool(f, &st->pre[i].o));
    }
    return 0;
}

/* Copies the header (argv and settings owned).  -1 out of memory. */
static int take_header(an_file *f, const msnap_header *h)
{
    f->have_header = 1;
    f->hdr = *h;
    int argc = h->argc > 0 ? h->argc : 0;
    f->hdr.argc = 0;
    f->argv = calloc((size_t)argc + 1, sizeof *f->argv);
    if (!f->argv)
        return -1;
    for (int i = 0; i < argc; i++) {
        if (!(f->argv[i] = sm_dupstr(h->argv[i])))
            return -1;
        f->hdr.argc = i + 1;
    }
    f->hdr.argv = (const char *const *)f->argv;
    f->settings = h->settings_json ? strdup(h->settings_json) : NULL;
    if (h->settings_json && !f->settings)
        return -1;
    f->hdr.settings_json = f->settings;
    f->ndev = h->ndevices < 0 ? 0 : h->ndevices > MSNAP_MAX_DEVICES ? MSNAP_MAX_DEVICES
                                                                   : h->ndevices;
    memcpy(f->dev, h->devices, (size_t)f->ndev * sizeof *f->dev);
    return 0;
}

/* A device line adds or replaces a device. */
static void take_device(an_file *f, const msnap_device_info *d)
{
    for (int i = 0; i < f->ndev; i++)
        if (f->dev[i].index == d->index) {
            f->dev[i] = *d;
            return;
        }
    if (f->ndev < MSNAP_MAX_DEVICES)
        f->dev[f->ndev++] = *d;
}

/* ---- backward stacks (analysis.h) ------------------------------------------ */

#define AN_STACK_BASE 0xC0000000u   /* ids of the stacks made here */
#define AN_BWD_FRAMES 255           /* forward frames a backward stack copies, at most */
#define AN_BWD_OUTER 64             /* of which the outermost */

/* Adds a stack of n frames to the tables under a new id.  0 when out of
 * memory. */
static uint32_t make_stack(an_file *f, const uint64_t *ips, int n)
{
    if (!f->next_stack)
        f->next_stack = AN_STACK_BASE;
    msnap_record r = {.type = MSNAP_REC_STACK};
    r.u.stack = (msnap_stack){.id = f->next_stack, .depth = n, .ips = ips};
    if (sm_symtab_take(&f->tab, &r))
        return 0;
    return f->next_stack++;
}

/* The frames of stack id in the tables; depth 0 when unknown. */
static const uint64_t *stack_ips(const an_file *f, uint32_t id, int *depth)
{
    const uint64_t *ix = id ? u64map_get(&f->tab.stack_map, 0, id) : NULL;
    *depth = ix ? f->tab.stacks[*ix].depth : 0;
    return ix ? f->tab.stacks[*ix].ips : NULL;
}

/* Whether a backward allocation's own stack (node first) names where it was
 * made better than the forward allocation would: its innermost Python
 * frame is a hook's or a Python autograd function's (FSDP's all-gathers and
 * reduce-scatters run there), not autograd's entry (torch/autograd/,
 * Tensor.backward: the thread that called backward() running a node). */
static int own_python_frames(const an_file *f, uint32_t stack, int depth)
{
    for (int i = 1; i < depth; i++) {
        sm_frame_info fi;
        sm_symtab_frame_get(&f->tab, stack, i, &fi);
        if (!msnap_ip_is_python(fi.ip) || msnap_ip_is_autograd(fi.ip))
            continue;
        const char *file = fi.file ? fi.file : "";
        return !(fnmatch("*/torch/autograd/*", file, 0) == 0 ||
                 fnmatch("*/torch/_tensor.py", file, 0) == 0);
    }
    return 0;
}

/* Whether the frames of stack a from its frame `from` on read as stack b's
 * (function, file, line): a backward allocation whose own stack already
 * is its node on the forward allocation's frames (an import of PyTorch's
 * snapshot that memsnap exported writes them so). */
static int same_frames(const an_file *f, uint32_t a, int from, uint32_t b)
{
    sm_frame_info x, y;
    int na = sm_symtab_frame_get(&f->tab, a, 0, &x), nb = b ? sm_symtab_frame_get(&f->tab, b, 0, &y) : 0;
    if (!nb || na - from != nb)
        return 0;
    for (int i = 0; i < nb; i++) {
        sm_symtab_frame_get(&f->tab, a, from + i, &x);
        sm_symtab_frame_get(&f->tab, b, i, &y);
        if (x.line != y.line || strcmp(x.fn ? x.fn : "", y.fn ? y.fn : "") ||
            strcmp(x.file ? x.file : "", y.file ? y.file : ""))
            return 0;
    }
    return 1;
}

/* The stack event e is seen with: a backward allocation's as described in
 * analysis.h; a forward one's is remembered under its sequence key.  Its
 * own stack otherwise; 0 when out of memory. */
static uint32_t torch_stack(an_file *f, const msnap_event *e)
{
    int depth;
    const uint64_t *ips = stack_ips(f, e->stack, &depth);
    if (!depth)
        return e->stack;
    if (!msnap_ip_is_autograd(ips[0])) {
        if (e->seq && e->action == MSNAP_A_BLOCK_ALLOC && !u64map_get(&f->fwd_stack, 0, e->seq) &&
            u64map_put(&f->fwd_stack, 0, e->seq, e->stack))
            return 0;
        return e->stack;
    }
    const uint64_t *fx = e->seq ? u64map_get(&f->fwd_stack, 0, e->seq) : NULL;
    uint32_t fwd = fx ? (uint32_t)*fx : 0;
    if (depth > 1 && own_python_frames(f, e->stack, depth) && !same_frames(f, e->stack, 1, fwd))
        return e->stack;
    uint64_t key = (ips[0] & 0xffffffffu) << 32 | fwd;
    const uint64_t *bx = u64map_get(&f->bwd_stack, 0, key);
    if (bx)
        return (uint32_t)*bx;
    int fd;
    const uint64_t *fips = stack_ips(f, fwd, &fd);
    /* at most AN_BWD_FRAMES of the forward stack are copied: its innermost
     * and its outermost (the program's line); a real stack is far shorter,
     * and a hostile one (100,000 frames, a node each) would otherwise cost
     * 8 x depth x nodes bytes */
    int in = fd, out = 0;
    if (fd > AN_BWD_FRAMES) {
        in = AN_BWD_FRAMES - AN_BWD_OUTER;
        out = AN_BWD_OUTER;
    }
    uint64_t *n = malloc(((size_t)in + (size_t)out + 1) * sizeof *n);
    if (!n)
        return 0;
    n[0] = ips[0];
    if (in)
        memcpy(n + 1, fips, (size_t)in * sizeof *n);
    if (out)
        memcpy(n + 1 + in, fips + fd - out, (size_t)out * sizeof *n);
    uint32_t id = make_stack(f, n, in + out + 1);
    free(n);
    if (!id || u64map_put(&f->bwd_stack, 0, key, id))
        return 0;
    return id;
}

int an_in_process(const an_file *f)
{
    const char *s = f->hdr.settings_json;
    return s && strstr(s, "\"in_process\":1") != NULL;
}

/* ---- pools (analysis.h) ------------------------------------------------------ */

const char *an_pool_kind_name(int kind)
{
    static const char *const names[AN_POOL_KINDS] = {"default", "graph", "mempool"};
    return kind >= 0 && kind < AN_POOL_KINDS ? names[kind] : "?";
}

int an_pool_kind(const an_file *f, uint32_t idx)
{
    if (!idx || idx > f->npools)
        return AN_POOL_DEFAULT;
    const an_pool *p = &f->pools[idx - 1];
    return !(p->id & MSNAP_POOL_HANDLE) || p->capturing ? AN_POOL_GRAPH : AN_POOL_MEMPOOL;
}

uint32_t an_pool_lookup(const an_file *f, int slot, uint64_t x)
{
    uint64_t id = msnap_pool_id(x);
    if (!id)
        return 0;
    const uint64_t *v = u64map_get(&f->pool_map, (uint32_t)slot + 1, id);
    return v ? (uint32_t)*v : 0;
}

uint32_t an_obj_pool(const an_file *f, const msnap_obj *o)
{
    return o->kind == MSNAP_A_BLOCK_ALLOC && o->aux ? an_pool_lookup(f, o->device, o->aux) : 0;
}

int an_pool_torch_id(const an_file *f, uint64_t id, uint64_t out[2])
{
    int known = f->hdr.major > 1 || f->hdr.minor >= 3;
    out[0] = id & MSNAP_POOL_HANDLE ? 0 : id;
    out[1] = id & MSNAP_POOL_HANDLE ? id & ~MSNAP_POOL_HANDLE : 0;
    return known;
}

/* Notes the pool x names on slot (a new one gets the next index).  -1 out
 * of memory. */
static int pool_note(an_file *f, int slot, uint64_t x)
{
    uint64_t id = msnap_pool_id(x);
    if (!id)
        return 0;
    uint32_t i = an_pool_lookup(f, slot, x);
    if (!i) {
        if (msnap_grow((void **)&f->pools, &f->cap_pools, f->npools, sizeof *f->pools) ||
            u64map_put(&f->pool_map, (uint32_t)slot + 1, id, f->npools + 1))
            return -1;
        f->pools[f->npools] = (an_pool){.id = id, .device = (int16_t)slot};
        i = ++f->npools;
    }
    if (x & MSNAP_POOL_CAPTURING)
        f->pools[i - 1].capturing = 1;
    return 0;
}

/* The pool an event names, noted before the state applies it: a block's
 * (x of a block_alloc), a PyTorch segment's (format 1.3). */
static int pool_of_event(an_file *f, const msnap_event *e)
{
    if (!e->aux)
        return 0;
    switch (e->action) {
    case MSNAP_A_BLOCK_ALLOC:
        return pool_note(f, msnap_st_slot(e->device), e->aux);
    case MSNAP_A_SEGMENT_ALLOC: case MSNAP_A_SEGMENT_MAP:
    case MSNAP_A_SEGMENT_FREE: case MSNAP_A_SEGMENT_UNMAP:
        return e->api == MSNAP_API_TORCH ? pool_note(f, msnap_st_slot(e->device), e->aux) : 0;
    default:
        return 0;
    }
}

/* What an event adds to the log besides its changes (which the state's
 * observer logs as they happen). */
static void log_event_extra(an_file *f, an_log *l, const msnap_event *e)
{
    switch (e->action) {
    case MSNAP_A_NVTX_PUSH: {
        log_flush_event(l);
        uint64_t v[2] = {e->tid, (uint32_t)e->aux};
        log_put(l, L_NVTX | 8u, v, 2);
        break;
    }
    case MSNAP_A_NVTX_POP: {
        log_flush_event(l);
        uint64_t v[1] = {e->tid};
        log_put(l, L_NVTX, v, 1);
        break;
    }
    case MSNAP_A_SEGMENT_ALLOC: case MSNAP_A_SEGMENT_MAP:
    case MSNAP_A_SEGMENT_FREE: case MSNAP_A_SEGMENT_UNMAP: {
        log_flush_event(l);
        int made = e->action == MSNAP_A_SEGMENT_ALLOC || e->action == MSNAP_A_SEGMENT_MAP;
        uint32_t pool = e->api == MSNAP_API_TORCH
                            ? an_pool_lookup(f, msnap_st_slot(e->device), e->aux) : 0;
        uint64_t v[3] = {(uint64_t)(e->device + 1), e->size, pool};
        log_put(l, L_SEGMENT | (made ? 8u : 0u) | (pool ? 16u : 0u), v, pool ? 3 : 2);
        break;
    }
    case MSNAP_A_OOM: {
        log_flush_event(l);
        uint64_t v[1] = {(uint64_t)(e->device + 1)};
        log_put(l, L_OOM, v, 1);
        break;
    }
    default:
        break;
    }
}

static void log_counters(an_log *l, const msnap_counters *c)
{
    uint64_t v[9] = {(uint64_t)(c->device + 1), c->t_ns, c->reserved, c->allocated,
                     c->async, c->managed, c->host, c->vmm_mapped, c->device_used};
    log_put(l, L_COUNTERS, v, 9);
}

/* One record through the tables, the state, the log and the observers.
 * 0 ok, -1 out of memory or an observer stopped. */
static int feed_record(an_file *f, const msnap_record *r)
{
    switch (r->type) {
    case MSNAP_REC_HEADER:
        if (!f->have_header && take_header(f, &r->u.header))
            return -1;
        break;
    case MSNAP_REC_DEVICE:
        take_device(f, &r->u.device);
        break;
    case MSNAP_REC_EVENT: {
        const msnap_event *e = &r->u.event;
        f->ev_idx++;
        f->t = e->t_ns;
        if (!f->have_first) {
            f->have_first = 1;
            f->t_first = e->t_ns;
        }
        if (e->t_ns > f->t_max)
            f->t_max = e->t_ns;
        if (f->log) {
            f->log->pending_idx = f->ev_idx;
            f->log->pending_t = e->t_ns;
        }
        if (pool_of_event(f, e))
            return -1;
        for (int i = 0; i < f->nobs; i++)
            if (f->obs[i].event_before && f->obs[i].event_before(f->obs[i].ctx, f, e))
                return -1;
        break;
    }
    case MSNAP_REC_LIVE:
        if (r->u.live.kind == MSNAP_A_BLOCK_ALLOC && r->u.live.aux &&
            pool_note(f, msnap_st_slot(r->u.live.device), r->u.live.aux))
            return -1;
        break;
    case MSNAP_REC_STACK: case MSNAP_REC_MODULE: case MSNAP_REC_SYMBOL: case MSNAP_REC_STR:
        if (sm_symtab_take(&f->tab, r))
            return -1;
        break;
    case MSNAP_REC_COUNTERS:
        if (r->u.counters.t_ns > f->t_max)
            f->t_max = r->u.counters.t_ns;
        if (f->log)
            log_counters(f->log, &r->u.counters);
        break;
    case MSNAP_REC_TRAILER:
        if (r->u.trailer.t_ns > f->t_max)
            f->t_max = r->u.trailer.t_ns;
        break;
    default:
        break;
    }
    if (msnap_state_record(&f->st, r))
        return -1;
    if (r->type == MSNAP_REC_EVENT && f->log)
        log_event_extra(f, f->log, &r->u.event);
    for (int i = 0; i < f->nobs; i++)
        if (f->obs[i].record && f->obs[i].record(f->obs[i].ctx, f, r))
            return -1;
    return 0;
}

/* A record as the read sees it: PyTorch's events with their backward
 * stacks (analysis.h), everything else as it is. */
static int feed(an_file *f, const msnap_record *r)
{
    if (r->type == MSNAP_REC_OTHER) { /* an_want_text: to the observers only */
        for (int i = 0; i < f->nobs; i++)
            if (f->obs[i].record && f->obs[i].record(f->obs[i].ctx, f, r))
                return -1;
        return 0;
    }
    if (r->type != MSNAP_REC_EVENT || r->u.event.api != MSNAP_API_TORCH || !r->u.event.stack)
        return feed_record(f, r);
    uint32_t stack = torch_stack(f, &r->u.event);
    if (!stack)
        return -1;
    if (stack == r->u.event.stack)
        return feed_record(f, r);
    msnap_record rr;
    rr.type = r->type;
    rr.line = r->line;
    rr.text = r->text;
    rr.text_len = r->text_len;
    rr.u.event = r->u.event;
    rr.u.event.stack = stack;
    return feed_record(f, &rr);
}

/* The levels with the pre-window objects in them.  The state moves its
 * levels only on events, so memory live before the window (a ring dump's
 * state section, frees of memory allocated before the recording) is in no
 * level; the log, replayed, has those objects live from its start.  The
 * site layers (reserved, allocated, pinned) are recounted from it, per
 * slot and for the process, so summary's peaks and finals agree with the
 * sites', the findings' and the recorder's own state. */
typedef struct fold {
    const msnap_state *st;
    msnap_level lv[MSNAP_ST_NDEV][MSNAP_LAYER_COUNT];
    msnap_level all[MSNAP_LAYER_COUNT];
    /* the levels in 128 bits: pre-window objects of a hostile file add up
     * past 2^64, and a level that saturated must come back down exactly */
    unsigned __int128 wlv[MSNAP_ST_NDEV][MSNAP_LAYER_COUNT], wall[MSNAP_LAYER_COUNT];
    uint64_t idx, t;
} fold;

static void fold_event(void *ctx, uint64_t idx, uint64_t t)
{
    fold *x = ctx;
    x->idx = idx;
    x->t = t;
}

static void fold_move(msnap_level *l, unsigned __int128 *w, int sign, uint64_t n, uint64_t idx,
                      uint64_t t)
{
    *w = sign > 0 ? *w + n : *w - (n < *w ? n : *w);
    /* a level past 2^64 - 1 bytes reads 2^64 - 1 (16 EiB), as state.c's */
    l->cur = *w > UINT64_MAX ? UINT64_MAX : (uint64_t)*w;
    if (sign > 0 && l->cur > l->peak) {
        l->peak = l->cur;
        l->peak_t = t;
        l->peak_ev = idx;
    }
}

static void fold_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch, uint64_t key)
{
    (void)torch;
    (void)key;
    fold *x = ctx;
    if (site >= x->st->nsites)
        return;
    const msnap_site *s = &x->st->sites[site];
    fold_move(&x->lv[s->device][s->layer], &x->wlv[s->device][s->layer], sign, n, x->idx, x->t);
    fold_move(&x->all[s->layer], &x->wall[s->layer], sign, n, x->idx, x->t);
}

static int fold_pre(an_file *f)
{
    fold *x = calloc(1, sizeof *x);
    if (!x)
        return -1;
    x->st = &f->st;
    x->t = f->t_first;
    an_visitor v = {.ctx = x, .event = fold_event, .change = fold_change};
    if (an_replay(f, &v)) {
        free(x);
        return -1;
    }
    static const int layers[] = {MSNAP_LAYER_RESERVED, MSNAP_LAYER_ALLOCATED,
                                 MSNAP_LAYER_PINNED};
    for (size_t k = 0; k < sizeof layers / sizeof *layers; k++) {
        int l = layers[k];
        for (int d = 0; d < MSNAP_ST_NDEV; d++)
            if (x->lv[d][l].peak > f->st.lv[d][l].peak || x->lv[d][l].cur != f->st.lv[d][l].cur)
                f->st.lv[d][l] = x->lv[d][l];
        if (x->all[l].peak > f->st.all[l].peak || x->all[l].cur != f->st.all[l].cur)
            f->st.all[l] = x->all[l];
    }
    free(x);
    return 0;
}

/* After the last record: the state's pre-window objects (their sites for
 * the log), then the observers' end.  0 ok, -1 out of memory. */
static int finish(an_file *f)
{
    size_t before = f->st.npre;
    if (msnap_state_finish(&f->st))
        return -1;
    if (f->st.npre && msnap_grow((void **)&f->pre_freed, &f->cap_pre_freed, f->st.npre - 1,
                              sizeof *f->pre_freed))
        return -1;
    for (size_t i = before; i < f->st.npre; i++)
        f->pre_freed[i] = UINT64_MAX;
    if (f->log) {
        if (f->log->err)
            return -1;
        f->log->pre_site = malloc((f->st.npre + 1) * sizeof *f->log->pre_site);
        if (!f->log->pre_site)
            return -1;
        for (size_t i = 0; i < f->st.npre; i++)
            f->log->pre_site[i] = msnap_state_site_for(&f->st, &f->st.pre[i].o);
        if (f->st.npre && fold_pre(f))
            return -1;
    }
    for (int i = 0; i < f->nobs; i++)
        if (f->obs[i].end && f->obs[i].end(f->obs[i].ctx, f))
            return -1;
    return 0;
}

void an_want_text(an_file *f)
{
    f->want_text = 1;
}

/* Hooks the state's changes to the moments, the log and the observers. */
static void feed_begin(an_file *f)
{
    static const msnap_state_observer so = {dispatch_before, dispatch_after, dispatch_pre, NULL};
    msnap_state_observer o = so;
    o.ctx = f;
    msnap_state_observe(&f->st, &o);
}

/* One record of the read: the header check, then feed.  0 ok, 2 with
 * "PATH: why" in err. */
static int feed_checked(an_file *f, const msnap_record *rec, char *err, size_t errlen)
{
    f->lines = rec->line;
    if (!f->have_header && rec->type != MSNAP_REC_HEADER) {
        snprintf(err, errlen, "%s: line %" PRIu64 ": not a memsnap snapshot "
                 "(the first line is not a header)", f->path, rec->line);
        return 2;
    }
    if (feed(f, rec)) {
        snprintf(err, errlen, "%s: %s", f->path, f->fail[0] ? f->fail : "out of memory");
        return 2;
    }
    return 0;
}

/* After the last record: the header check, then finish.  0 ok, 2. */
static int feed_end(an_file *f, char *err, size_t errlen)
{
    if (!f->have_header) {
        snprintf(err, errlen, "%s: not a memsnap snapshot (no header line)", f->path);
        return 2;
    }
    if (finish(f)) {
        snprintf(err, errlen, "%s: %s", f->path, f->fail[0] ? f->fail : "out of memory");
        return 2;
    }
    return 0;
}

int an_read(an_file *f, char *err, size_t errlen)
{
    char rerr[512] = "";
    const char *path = f->path;
    ra_reader *r = ra_open(path, f->want_text, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s: %s", path, rerr[0] ? rerr : "cannot open");
        return 2;
    }
    f->zstd = ra_zstd(r);
    feed_begin(f);
    const msnap_record *rec;
    int rc, ret = 0;
    while ((rc = ra_next(r, &rec)) == 1)
        if ((ret = feed_checked(f, rec, err, errlen)))
            break;
    if (!ret && rc < 0) {
        snprintf(err, errlen, "%s: %s", path, ra_error(r));
        ret = 2;
    }
    f->truncated = ra_truncated(r);
    ra_close(r);
    if (!ret)
        ret = feed_end(f, err, errlen);
    return ret;
}

/* ---- records fed one at a time (analysis.h) ------------------------------ */

void an_feed_begin(an_file *f, int zstd)
{
    f->zstd = zstd;
    feed_begin(f);
}

int an_feed(an_file *f, const msnap_record *rec, char *err, size_t errlen)
{
    return feed_checked(f, rec, err, errlen);
}

int an_feed_end(an_file *f, int truncated, char *err, size_t errlen)
{
    f->truncated = truncated;
    return feed_end(f, err, errlen);
}

void an_forget_log(an_file *f)
{
    log_free(f->log);
    f->log = NULL;
}

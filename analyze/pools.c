/* The memory pools of a recording (pools.h has what each figure is): an
 * observer of the one read that, at its end, replays the change log (each
 * change and segment record carries its pool, analysis.h) into running
 * levels per pool, per kind and per (pool, site).
 */
#include "pools.h"

#include <stdlib.h>
#include <string.h>

#include "label.h"
#include "report.h"
#include "util/grow.h"
#include "util/u64map.h"

/* Bytes of one site live in one pool. */
typedef struct fig {
    uint32_t entry, site;
    uint64_t live, peak;
} fig;

struct pl_pools {
    an_file *f;
    pl_pool *pools;
    size_t npools, cap_pools;
    u64map ix;                 /* (slot + 1, an_pool index) -> index into pools */
    fig *figs;
    size_t nfigs, cap_figs;
    u64map fig_ix;             /* entry << 32 | site -> index into figs */
    pl_kind kinds[AN_POOL_KINDS];
    int torch_blocks;          /* the file has PyTorch's blocks */
    uint64_t idx, t;           /* the event being replayed */
    int err;
};

pl_pools *pl_new(void)
{
    return calloc(1, sizeof(pl_pools));
}

void pl_free(pl_pools *p)
{
    if (!p)
        return;
    free(p->pools);
    free(p->figs);
    u64map_free(&p->ix);
    u64map_free(&p->fig_ix);
    free(p);
}

static void level_move(msnap_level *l, int sign, uint64_t n, uint64_t idx, uint64_t t)
{
    l->cur = sign > 0 ? l->cur + n : l->cur - (n < l->cur ? n : l->cur);
    if (sign > 0 && l->cur > l->peak) {
        l->peak = l->cur;
        l->peak_t = t;
        l->peak_ev = idx;
    }
}

/* The entry of (slot, pool), made when new.  -1 out of memory. */
static long entry_of(pl_pools *p, int slot, uint32_t pool)
{
    uint64_t *v = u64map_get(&p->ix, (uint32_t)slot + 1, pool);
    if (v)
        return (long)*v;
    if (msnap_grow((void **)&p->pools, &p->cap_pools, p->npools, sizeof *p->pools) ||
        u64map_put(&p->ix, (uint32_t)slot + 1, pool, p->npools)) {
        p->err = 1;
        return -1;
    }
    pl_pool *e = &p->pools[p->npools];
    memset(e, 0, sizeof *e);
    e->device = slot == MSNAP_ST_HOST ? -1 : slot;
    e->index = pool;
    e->id = pool ? p->f->pools[pool - 1].id : 0;
    e->kind = an_pool_kind(p->f, pool);
    p->kinds[e->kind].pools++;
    return (long)p->npools++;
}

static void on_event(void *ctx, uint64_t idx, uint64_t t)
{
    pl_pools *p = ctx;
    p->idx = idx;
    p->t = t;
}

/* A block in or out of a pool. */
static void on_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch, uint64_t key,
                      uint32_t pool)
{
    (void)key;
    pl_pools *p = ctx;
    const msnap_state *st = &p->f->st;
    if (site >= st->nsites || st->sites[site].layer != MSNAP_LAYER_ALLOCATED)
        return;
    if (!torch && !pool && !p->torch_blocks)
        return;
    long e = entry_of(p, st->sites[site].device, pool);
    if (e < 0)
        return;
    pl_pool *x = &p->pools[e];
    level_move(&x->allocated, sign, n, p->idx, p->t);
    level_move(&p->kinds[x->kind].allocated, sign, n, p->idx, p->t);
    if (sign > 0)
        x->blocks++;
    uint64_t k = (uint64_t)e << 32 | site;
    uint64_t *v = u64map_get(&p->fig_ix, 0, k);
    if (!v) {
        if (sign < 0)
            return;
        if (msnap_grow((void **)&p->figs, &p->cap_figs, p->nfigs, sizeof *p->figs) ||
            u64map_put(&p->fig_ix, 0, k, p->nfigs)) {
            p->err = 1;
            return;
        }
        p->figs[p->nfigs] = (fig){.entry = (uint32_t)e, .site = site};
        v = u64map_get(&p->fig_ix, 0, k);
        p->nfigs++;
    }
    fig *g = &p->figs[*v];
    g->live = sign > 0 ? g->live + n : g->live - (n < g->live ? n : g->live);
    if (g->live > g->peak)
        g->peak = g->live;
}

/* A PyTorch segment record: the pool's reserved. */
static void on_segment(void *ctx, int device, int sign, uint64_t n, uint32_t pool)
{
    pl_pools *p = ctx;
    long e = entry_of(p, msnap_st_slot(device), pool);
    if (e < 0)
        return;
    pl_pool *x = &p->pools[e];
    level_move(&x->reserved, sign, n, p->idx, p->t);
    level_move(&p->kinds[x->kind].reserved, sign, n, p->idx, p->t);
    if (sign > 0)
        x->segments++;
}

static int on_event_before(void *ctx, an_file *f, const msnap_event *e)
{
    (void)f;
    pl_pools *p = ctx;
    if (e->action == MSNAP_A_BLOCK_ALLOC && e->api == MSNAP_API_TORCH)
        p->torch_blocks = 1;
    return 0;
}

static int by_peak(const void *a, const void *b)
{
    const pl_site *x = a, *y = b;
    return x->peak < y->peak ? 1 : x->peak > y->peak ? -1 : (x->site > y->site) - (x->site < y->site);
}

static int by_place(const void *a, const void *b)
{
    const pl_pool *x = a, *y = b;
    int dx = x->device < 0 ? MSNAP_MAX_DEVICES : x->device;
    int dy = y->device < 0 ? MSNAP_MAX_DEVICES : y->device;
    if (dx != dy)
        return dx - dy;
    return (x->index > y->index) - (x->index < y->index);
}

static int on_end(void *ctx, an_file *f)
{
    pl_pools *p = ctx;
    an_visitor v = {.ctx = p, .event = on_event, .pchange = on_change, .psegment = on_segment};
    if (an_replay(f, &v) || p->err)
        return -1;
    /* a file before format 1.3 names no segment's pool: with a private pool
     * in it, the default pool's segment records hold the private ones too */
    int known = f->hdr.major > 1 || f->hdr.minor >= 3 || !f->npools;
    for (size_t i = 0; i < p->npools; i++)
        p->pools[i].reserved_known = known;
    for (int k = 0; k < AN_POOL_KINDS; k++)
        p->kinds[k].reserved_known = known;
    /* each pool's top sites */
    for (size_t i = 0; i < p->nfigs; i++) {
        const fig *g = &p->figs[i];
        pl_pool *x = &p->pools[g->entry];
        pl_site s = {.stack = f->st.sites[g->site].stack, .site = g->site, .peak = g->peak};
        if (x->ntop < PL_TOP) {
            x->top[x->ntop++] = s;
            qsort(x->top, (size_t)x->ntop, sizeof *x->top, by_peak);
        } else if (by_peak(&s, &x->top[PL_TOP - 1]) < 0) {
            x->top[PL_TOP - 1] = s;
            qsort(x->top, PL_TOP, sizeof *x->top, by_peak);
        }
    }
    if (p->npools)
        qsort(p->pools, p->npools, sizeof *p->pools, by_place);
    return 0;
}

int pl_attach(pl_pools *p, an_file *f)
{
    p->f = f;
    an_observer o = {.ctx = p, .event_before = on_event_before, .end = on_end};
    return an_want_log(f) || an_observe(f, &o) ? -1 : 0;
}

const pl_pool *pl_pools_of(const pl_pools *p, size_t *n)
{
    *n = p->npools;
    return p->pools;
}

const pl_kind *pl_kind_of(const pl_pools *p, int kind)
{
    return kind >= 0 && kind < AN_POOL_KINDS ? &p->kinds[kind] : NULL;
}

int pl_private_seen(const pl_pools *p)
{
    return p->kinds[AN_POOL_GRAPH].pools || p->kinds[AN_POOL_MEMPOOL].pools;
}

static void json_reserved(cJSON *o, const char *key, int known, uint64_t v)
{
    if (known)
        msnap_json_u64(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *pl_json(const pl_pools *p)
{
    cJSON *a = cJSON_CreateArray();
    if (!a)
        return NULL;
    const sm_labels *lab = an_labels(p->f);
    for (size_t i = 0; i < p->npools; i++) {
        const pl_pool *x = &p->pools[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", x->device);
        msnap_json_u64(o, "pool", x->id);
        uint64_t tid[2];
        if (x->index && an_pool_torch_id(p->f, x->id, tid)) {
            cJSON *t = cJSON_AddArrayToObject(o, "torch_id");
            cJSON_AddItemToArray(t, cJSON_CreateNumber((double)tid[0]));
            cJSON_AddItemToArray(t, cJSON_CreateNumber((double)tid[1]));
        } else if (x->index) {
            cJSON_AddNullToObject(o, "torch_id");
        } else {
            cJSON *t = cJSON_AddArrayToObject(o, "torch_id");
            cJSON_AddItemToArray(t, cJSON_CreateNumber(0));
            cJSON_AddItemToArray(t, cJSON_CreateNumber(0));
        }
        cJSON_AddStringToObject(o, "kind", an_pool_kind_name(x->kind));
        json_reserved(o, "peak_reserved", x->reserved_known, x->reserved.peak);
        msnap_json_u64(o, "peak_allocated", x->allocated.peak);
        json_reserved(o, "final_reserved", x->reserved_known, x->reserved.cur);
        msnap_json_u64(o, "final_allocated", x->allocated.cur);
        msnap_json_u64(o, "blocks", x->blocks);
        msnap_json_u64(o, "segments", x->segments);
        cJSON *ts = cJSON_AddArrayToObject(o, "top_sites");
        for (int k = 0; k < x->ntop; k++) {
            char label[SM_LABEL_MAX];
            sm_site_label(lab, x->top[k].stack, label, sizeof label);
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "label", label);
            cJSON_AddNumberToObject(s, "stack", x->top[k].stack);
            msnap_json_u64(s, "peak", x->top[k].peak);
            cJSON_AddItemToArray(ts, s);
        }
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *pl_kinds_json(const pl_pools *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    for (int k = 0; k < AN_POOL_KINDS; k++) {
        const pl_kind *x = &p->kinds[k];
        if (!x->pools)
            continue;
        cJSON *j = cJSON_AddObjectToObject(o, an_pool_kind_name(k));
        msnap_json_u64(j, "pools", x->pools);
        json_reserved(j, "peak_reserved", x->reserved_known, x->reserved.peak);
        msnap_json_u64(j, "peak_allocated", x->allocated.peak);
    }
    return o;
}

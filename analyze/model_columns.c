/* Pass 2 of the findings model (model_columns.h): the file's change log
 * replayed (analysis.h an_replay) into the timeline's pixel columns, a
 * value per band at each column's highest total; by site the bands are
 * the top sites' ranks, by category the categories the breakdown gave each
 * change (breakdown.c met the same changes in the same order); and the
 * NVTX ranges of the main thread wide enough to see.
 */
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pass 2: before a change on device slot d, fills the columns since the
 * device's last one with its current (pre-change) state. */
static void touch_before(sm_model *m, int d)
{
    sm_dev *v = &m->dev[d];
    if (m->pass != 2 || !v->cols)
        return;
    int col = m->cur_col;
    int K = SM_MAX_TOP + 1;
    for (int c = v->last_col + 1; c <= col; c++) {
        sm_col *k = &v->cols[c];
        uint64_t cnt_res = k->cnt_res, cnt_alloc = k->cnt_alloc;
        uint8_t has_cnt = k->has_cnt;
        *k = (sm_col){.total_max = v->stacked, .total_min = v->stacked,
                      .res_max = v->reserved, .res_min = v->reserved,
                      .cnt_res = cnt_res, .cnt_alloc = cnt_alloc,
                      .has = 1, .has_cnt = has_cnt};
        memcpy(&v->colvals[(size_t)c * K], v->cur, sizeof v->cur);
    }
    if (col > v->last_col)
        v->last_col = col;
}

/* Pass 2, after a change on device slot d: the column's highest and
 * lowest totals and reserved, the bands at the highest; by category the
 * bands at the peak of the total. */
static void column_after(sm_model *m, int d)
{
    sm_dev *v = &m->dev[d];
    v->seen = 1;
    if (m->o.by != SM_BY_SITE && v->stacked > v->peak_stacked) {
        v->peak_stacked = v->stacked;
        v->peak_stacked_t = m->cur_x;
        memcpy(v->band_at_peak, v->cur, sizeof v->cur);
    }
    if (!v->cols || v->last_col < 0)
        return;
    sm_col *k = &v->cols[v->last_col];
    if (v->stacked > k->total_max) {
        k->total_max = v->stacked;
        memcpy(&v->colvals[(size_t)v->last_col * (SM_MAX_TOP + 1)], v->cur,
               sizeof v->cur);
    }
    if (v->stacked < k->total_min)
        k->total_min = v->stacked;
    if (v->reserved > k->res_max)
        k->res_max = v->reserved;
    if (v->reserved < k->res_min)
        k->res_min = v->reserved;
}

/* Pass 2, a change replayed from the log (analysis.h an_replay): the
 * columns up to now get the state before it, then the device's levels and
 * the site's rank move. */
static void rp_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                        uint64_t key)
{
    (void)torch;
    (void)key;
    sm_model *m = ctx;
    /* by category: this change's byte (the breakdown met the same
     * changes in the same order) */
    int cat = BD_NOT_COUNTED;
    if (m->o.by == SM_BY_CATEGORY) {
        size_t i = m->chg++;
        cat = i < m->nchg_cat ? m->chg_cat[i] : BD_NOT_COUNTED;
    }
    sm_site *s = sm__site_at(m, site);
    if (!s || !s->cls) {
        m->err |= !s;
        return;
    }
    int d = s->device;
    touch_before(m, d);
    sm_dev *v = &m->dev[d];
    int band = -1;
    if (m->o.by == SM_BY_CATEGORY) {
        if (cat != BD_NOT_COUNTED && cat < CAT_MAX)
            band = m->cat_band[d][cat] >= 0 ? m->cat_band[d][cat] : v->nbands;
    } else if (s->cls == stacked_cls(m)) {
        band = s->rank >= 0 ? s->rank : v->ntop;
    }
#define MOVE(x) ((x) = sign > 0 ? (x) + n : ((x) > n ? (x) - n : 0))
    if (s->cls == SM_CLS_MEM) {
        MOVE(v->reserved);
        v->mem = v->reserved;
    } else {
        MOVE(v->allocated);
    }
    if (band >= 0) {
        MOVE(v->cur[band]);
        MOVE(v->stacked);
        if (v->cur[band] > v->band_peak[band])
            v->band_peak[band] = v->cur[band];
    }
#undef MOVE
    column_after(m, d);
}

/* ---- by pool -------------------------------------------------------------- */

/* Moves band b of device d by n bytes (sign), the stacked total with it. */
static void band_move(sm_dev *v, int b, int sign, uint64_t n)
{
#define MOVE(x) ((x) = sign > 0 ? (x) + n : ((x) > n ? (x) - n : 0))
    uint64_t before = v->cur[b];
    MOVE(v->cur[b]);
#undef MOVE
    v->stacked = v->stacked - before + v->cur[b];
    if (v->cur[b] > v->band_peak[b])
        v->band_peak[b] = v->cur[b];
}

/* A private pool's cache band: its reserved less its blocks. */
static void pool_cache(sm_model *m, int d, uint32_t pool)
{
    size_t i = (size_t)d * m->pool_n + pool;
    int b = m->pool_band[i];
    if (!pool || b < 0)
        return;
    sm_dev *v = &m->dev[d];
    int cb = b == v->nbands ? b : b + 1;
    uint64_t want = m->pool_res[i] > m->pool_alc[i] ? m->pool_res[i] - m->pool_alc[i] : 0;
    if (cb == v->nbands) {
        /* the rest band holds several pools: move it by the difference */
        return;
    }
    if (want > v->cur[cb])
        band_move(v, cb, 1, want - v->cur[cb]);
    else
        band_move(v, cb, -1, v->cur[cb] - want);
}

/* Pass 2 by pool, a change: the block's pool band (driver memory: the
 * reserved line only). */
static void rp_pool_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                           uint64_t key, uint32_t pool)
{
    (void)torch;
    (void)key;
    sm_model *m = ctx;
    sm_site *s = sm__site_at(m, site);
    if (!s || !s->cls) {
        m->err |= !s;
        return;
    }
    int d = s->device;
    touch_before(m, d);
    sm_dev *v = &m->dev[d];
#define MOVE(x) ((x) = sign > 0 ? (x) + n : ((x) > n ? (x) - n : 0))
    if (s->cls == SM_CLS_MEM) {
        MOVE(v->reserved);
        v->mem = v->reserved;
    } else {
        MOVE(v->allocated);
        if (pool >= m->pool_n)
            pool = 0;
        size_t i = (size_t)d * m->pool_n + pool;
        MOVE(m->pool_alc[i]);
        int b = m->pool_band[i];
        band_move(v, b < 0 ? v->nbands : b, sign, n);
        pool_cache(m, d, pool);
    }
#undef MOVE
    column_after(m, d);
}

/* Pass 2 by pool, PyTorch's segment record: the pool's cache band. */
static void rp_pool_segment(void *ctx, int device, int sign, uint64_t n, uint32_t pool)
{
    sm_model *m = ctx;
    int d = dev_slot(device);
    if (pool >= m->pool_n)
        pool = 0;
    touch_before(m, d);
    size_t i = (size_t)d * m->pool_n + pool;
    m->pool_res[i] = sign > 0 ? m->pool_res[i] + n : m->pool_res[i] > n ? m->pool_res[i] - n : 0;
    pool_cache(m, d, pool);
    column_after(m, d);
}

/* By pool, before pass 2: each device's bands, the default pool first,
 * then each private pool's blocks and cache. */
static int pool_bands(sm_model *m)
{
    const an_file *f = m->f;
    m->pool_n = f->npools + 1;
    size_t n = (size_t)SM_NDEV * m->pool_n;
    free(m->pool_band);
    free(m->pool_res);
    free(m->pool_alc);
    m->pool_band = malloc(n * sizeof *m->pool_band);
    m->pool_res = calloc(n, sizeof *m->pool_res);
    m->pool_alc = calloc(n, sizeof *m->pool_alc);
    if (!m->pool_band || !m->pool_res || !m->pool_alc)
        return -1;
    for (size_t i = 0; i < n; i++)
        m->pool_band[i] = -1;
    for (int d = 0; d < SM_NDEV; d++) {
        sm_dev *v = &m->dev[d];
        v->nbands = 1;
        m->pool_band[(size_t)d * m->pool_n] = 0;
        m->band_pool[d][0] = 0;
        m->band_cached[d][0] = 0;
        for (uint32_t p = 1; p < m->pool_n; p++) {
            if (f->pools[p - 1].device != d || v->nbands + 2 > SM_MAX_TOP)
                continue;
            m->pool_band[(size_t)d * m->pool_n + p] = (int16_t)v->nbands;
            m->band_pool[d][v->nbands] = p;
            m->band_cached[d][v->nbands] = 0;
            m->band_pool[d][v->nbands + 1] = p;
            m->band_cached[d][v->nbands + 1] = 1;
            v->nbands += 2;
        }
        memset(v->band_peak, 0, sizeof v->band_peak);
        memset(v->band_at_peak, 0, sizeof v->band_at_peak);
        v->peak_stacked = v->peak_stacked_t = 0;
    }
    return 0;
}

const char *sm_band_name(const sm_model *m, int slot, int band, char *buf, size_t cap)
{
    if (m->o.by == SM_BY_CATEGORY)
        return sm_band_category(m, slot, band);
    if (m->o.by != SM_BY_POOL || slot < 0 || slot >= SM_NDEV || !cap)
        return NULL;
    const sm_dev *v = &m->dev[slot];
    if (band < 0 || band > v->nbands)
        return NULL;
    if (band == v->nbands) {
        snprintf(buf, cap, "other pools");
        return buf;
    }
    uint32_t p = m->band_pool[slot][band];
    if (!p) {
        snprintf(buf, cap, "default pool");
        return buf;
    }
    uint64_t id[2];
    an_pool_torch_id(m->f, m->f->pools[p - 1].id, id);
    int kind = an_pool_kind(m->f, p);
    snprintf(buf, cap, "%s (%llu, %llu)%s", kind == AN_POOL_GRAPH ? "graph pool" : "mempool",
             (unsigned long long)id[0], (unsigned long long)id[1],
             m->band_cached[slot][band] ? " cache" : "");
    return buf;
}

static sm_thread *thread_for(sm_model *m, uint32_t tid)
{
    for (int i = 0; i < m->nthreads; i++)
        if (m->threads[i].tid == tid)
            return &m->threads[i];
    if (m->nthreads == MAX_THREADS)
        return NULL;
    sm_thread *t = &m->threads[m->nthreads++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    return t;
}

static void range_close(sm_model *m, sm_thread *t, uint64_t x1)
{
    t->depth--;
    if (t->depth >= MAX_DEPTH)
        return;
    m->total_ranges++;
    if (!m->have_main || t->tid != m->main_tid || t->depth >= SM_RANGE_DEPTHS)
        return;
    uint64_t x0 = t->x0[t->depth];
    if (m->nranges >= SM_MAX_RANGES)
        return;
    if (!m->ranges) {
        m->ranges = malloc(SM_MAX_RANGES * sizeof *m->ranges);
        if (!m->ranges)
            return;
    }
    /* Ranges narrower than two pixel columns cannot be seen: not kept. */
    if (m->o.columns && sm_col_of(m, x1) - sm_col_of(m, x0) < 2)
        return;
    m->ranges[m->nranges++] = (sm_range){.t0 = x0, .t1 = x1,
                                         .str = t->str[t->depth],
                                         .lane = (uint8_t)t->depth};
}

/* Pass 2: an nvtx_push (str) or nvtx_pop of thread tid at the current x. */
static void nvtx_event(sm_model *m, int push, uint32_t tid, uint32_t str)
{
    sm_thread *t = thread_for(m, tid);
    if (!t)
        return;
    if (push) {
        if (!m->have_main) {
            m->have_main = 1;
            m->main_tid = tid;
        }
        if (t->depth < MAX_DEPTH) {
            t->x0[t->depth] = m->cur_x;
            t->str[t->depth] = str;
        }
        t->depth++;
    } else if (t->depth > 0) {
        range_close(m, t, m->cur_x);
    }
}

/* By category, before pass 2: the bands of each device, the categories
 * with bytes in the view summary shows for it, from the longest-lived to
 * the shortest (band_order, then the user's own in the rules' order), so
 * the floor of the area is what stays and the spikes are on top; "other"
 * (and any beyond SM_MAX_TOP) the rest. */
static const char *const band_order[] = {
    "parameters", "optimizer_state", "gradients", "workspaces", "communication",
    "all_gather", "reduce_scatter", "kv_cache", "graph_pool", "inputs", "activations", "temporaries"};

static void category_bands(sm_model *m)
{
    size_t n;
    m->chg_cat = bd_change_categories(m->bd, &n);
    m->nchg_cat = n;
    m->chg = 0;
    const cat_rules *r = m->o.rules ? m->o.rules : m->own_rules;
    int ncat = cat_count(r) < CAT_MAX ? cat_count(r) : CAT_MAX;
    int order[CAT_MAX], norder = 0;
    uint8_t placed[CAT_MAX] = {0};
    for (size_t i = 0; i < sizeof band_order / sizeof band_order[0]; i++) {
        int c = cat_index_of(r, band_order[i]);
        if (c != CAT_OTHER && !placed[c]) {
            placed[c] = 1;
            order[norder++] = c;
        }
    }
    for (int c = 1; c < ncat; c++)
        if (!placed[c])
            order[norder++] = c;
    for (int d = 0; d < SM_NDEV; d++) {
        sm_dev *v = &m->dev[d];
        const bd_cats *k = bd_cats_shown(m->bd, d, NULL);
        v->nbands = 0;
        memset(m->cat_band[d], -1, sizeof m->cat_band[d]);
        for (int i = 0; i < norder; i++) {
            int c = order[i];
            if (k && k->peak[c] && v->nbands < SM_MAX_TOP) {
                m->cat_band[d][c] = (int8_t)v->nbands;
                v->band_cat[v->nbands++] = (uint8_t)c;
            }
        }
        v->band_cat[v->nbands] = CAT_OTHER;
        memset(v->band_peak, 0, sizeof v->band_peak);
        memset(v->band_at_peak, 0, sizeof v->band_at_peak);
        v->peak_stacked = v->peak_stacked_t = 0;   /* pass 2 finds this total's */
    }
}

/* By category, pass 2 at event idx: the stacked level at every OOM before
 * it (the bar of the request starts on the area's top). */
static void oom_levels(sm_model *m, uint64_t idx)
{
    while (m->oom_cur < m->nooms && m->ooms[m->oom_cur].event_index < idx) {
        sm_oom *o = &m->ooms[m->oom_cur++];
        o->allocated = m->dev[dev_slot(o->device)].stacked;
    }
}

/* ---- pass 2: the log replayed -------------------------------------------- */

static void rp_event(void *ctx, uint64_t idx, uint64_t t)
{
    sm_model *m = ctx;
    if (m->o.by != SM_BY_SITE)
        oom_levels(m, idx);
    m->ev_idx = idx;
    if (m->o.x_mode == SM_X_MARKS)
        m->cur_x = sm__marks_x_at(m, idx, &m->anc_cur);
    else
        m->cur_x = m->o.x_mode == SM_X_EVENTS ? idx - 1 : t;
    m->cur_col = sm_col_of(m, m->cur_x);
}

/* Pass 2, a counters line: the highest in its column (time axis only). */
static void rp_counters(void *ctx, const msnap_counters *c)
{
    sm_model *m = ctx;
    if (c->device < 0)
        return;
    sm_dev *v = &m->dev[dev_slot(c->device)];
    uint64_t res = c->reserved + c->async + c->managed;
    uint64_t alloc = m->blocks_seen ? c->allocated : res;
    if (!v->cols || m->o.x_mode != SM_X_TIME)
        return;
    sm_col *k = &v->cols[sm_col_of(m, c->t_ns)];
    if (res > k->cnt_res)
        k->cnt_res = res;
    if (alloc > k->cnt_alloc)
        k->cnt_alloc = alloc;
    k->has_cnt = 1;
}

static void rp_nvtx(void *ctx, int push, uint32_t tid, uint32_t str)
{
    nvtx_event(ctx, push, tid, str);
}

int sm_finish(sm_model *m)
{
    if (!m->o.columns || m->pass == 2)
        return 0;
    /* Clean replay state; tables, sites' totals and peaks stay. */
    m->pass = 2;
    m->ev_idx = 0;
    if (m->o.by == SM_BY_CATEGORY) {
        if (!m->bd)
            return -1;
        category_bands(m);
        m->oom_cur = 0;
    } else if (m->o.by == SM_BY_POOL) {
        if (pool_bands(m))
            return -1;
        m->oom_cur = 0;
    }
    int K = SM_MAX_TOP + 1;
    for (int d = 0; d < SM_NDEV; d++) {
        sm_dev *v = &m->dev[d];
        v->reserved = v->stacked = v->allocated = v->mem = 0;
        memset(v->cur, 0, sizeof v->cur);
        v->last_col = -1;
        if (!v->seen)
            continue;
        v->cols = calloc((size_t)m->o.columns, sizeof *v->cols);
        v->colvals = calloc((size_t)m->o.columns * K, sizeof *v->colvals);
        if (!v->cols || !v->colvals)
            return -1;
        /* Columns before the first event belong to the counters series. */
        if (m->o.x_mode == SM_X_TIME && m->have_first)
            v->last_col = sm_col_of(m, m->t_first) - 1;
    }
    m->anc_cur = 0;
    m->cur_x = m->o.x_mode == SM_X_TIME ? m->t_first
             : m->o.x_mode == SM_X_MARKS ? sm__marks_x_at(m, 1, NULL) : 0;
    m->cur_col = sm_col_of(m, m->cur_x);
    an_visitor v = {.ctx = m, .event = rp_event, .counters = rp_counters, .nvtx = rp_nvtx};
    if (m->o.by == SM_BY_POOL) {
        v.pchange = rp_pool_change;
        v.psegment = rp_pool_segment;
    } else {
        v.change = rp_change;
    }
    if (an_replay(m->f, &v) || m->err)
        return -1;
    if (m->o.by != SM_BY_SITE)
        oom_levels(m, UINT64_MAX);
    /* the columns up to the end */
    uint64_t lo, hi;
    sm_x_range(m, &lo, &hi);
    if (m->x_override) {
        /* on an axis shared with longer runs, this run's columns stop at
         * its own end */
        m->x_override = 0;
        sm_x_range(m, &lo, &hi);
        m->x_override = 1;
    }
    m->cur_x = hi;
    m->cur_col = sm_col_of(m, hi);
    for (int d = 0; d < SM_NDEV; d++)
        if (m->dev[d].seen && m->dev[d].cols)
            touch_before(m, d);
    for (int i = 0; i < m->nthreads; i++)
        while (m->threads[i].depth > 0)
            range_close(m, &m->threads[i], hi);
    return 0;
}

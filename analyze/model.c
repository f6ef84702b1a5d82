/* The renderer's model: see model.h for the two passes and what each
 * learns.  What an event does to live memory is the state model's
 * (analyze/state.h): every event goes to msnap_state_event, and the
 * model observes each change of a level (obj_before / obj_after), where the
 * pass-1 bookkeeping (peaks, the valley detector of the leak finder) and the
 * pass-2 bookkeeping (column buckets) hang (touch_before / touch_after).
 * Sites are the state's: sm_sites()[i] is the state's site i, with the
 * model's rank and leak figures beside it.
 *
 * The leak finder (pass 1), the fragmentation numbers and the OOM verdict
 * are findings.c's.
 */
#include "human.h"
#include "model.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analysis.h"
#include "breakdown.h"
#include "category.h"
#include "findings.h"
#include "state.h"

#define NO_SITE MSNAP_NO_SITE
#define MAX_THREADS 64
#define MAX_DEPTH 32

typedef struct sm_thread {
    uint32_t tid;
    int depth;
    uint64_t x0[MAX_DEPTH];
    uint32_t str[MAX_DEPTH];
} sm_thread;

struct sm_model {
    sm_opts o;
    int pass;

    /* header */
    int have_header;
    char mode[16];
    msnap_header hdr;            /* copied scalars; argv/settings not kept */
    uint64_t cap_header;

    sm_dev dev[SM_NDEV];

    /* the input: its tables, state (live objects, levels, sites) and log
     * (analysis.h); own is used when the model reads a file itself */
    an_file *f;
    an_file own;
    int owns;
    int err;                     /* an observer ran out of memory */

    /* by category (model.h "Bands"): the breakdown observing the same read
     * (after the model), its rules, and pass 2's place in its bytes */
    breakdown *bd;
    cat_rules *own_rules;        /* when opts.rules is NULL */
    const uint8_t *chg_cat;
    size_t nchg_cat, chg;
    int8_t cat_band[SM_NDEV][CAT_MAX];   /* category -> band, -1 = the rest */
    size_t oom_cur;              /* pass 2: the next OOM whose level is taken */

    /* the state's sites with the model's figures; nsites <= st.nsites */
    sm_site *sites;
    size_t nsites, cap_sites;
    sm_group *groups;            /* sites by label (sm_groups), after the read */
    size_t ngroups;

    /* progress */
    uint64_t events, ev_idx, t_max, t_first;
    int have_first;
    uint64_t t_first_cnt;        /* t of the earliest counters line */
    int have_first_cnt;
    int blocks_seen;             /* pass 1: seen so far; pass 2: final */
    int counters_seen;
    uint64_t cur_x;              /* x of the current event (pass 2) */
    int cur_col;

    /* the capture moment: the live set at the process's latest new peak
     * of reserved, at the first OOM, or after the last event at or before
     * --at TIME (analysis.h moments), kept as the read passes them */
    an_moment *mk_peak, *mk_oom, *mk_time, *mk_end;
    int peak_block_pending;      /* mk_peak was just marked at a new peak of
                                    reserved: the next block joins it */
    an_moment *mk_capture;       /* the one the layout was taken at */
    uint64_t peak_idx;
    uint64_t peak_reserved1, peak_stacked1; /* the process's peaks after pass 1
                                               (state.h, counters included),
                                               as `memsnap summary` reads them */
    int capture_at;
    sm_layout layout;

    /* OOMs */
    sm_oom ooms[SM_MAX_OOMS];
    size_t nooms;
    uint64_t total_ooms, first_oom_idx;

    sm_leakfinder lf;            /* findings.h; lf.T = the stacked total */

    /* NVTX (pass 2) */
    sm_thread threads[MAX_THREADS];
    int nthreads;
    uint32_t main_tid;
    int have_main;
    sm_range *ranges;
    size_t nranges;
    uint64_t total_ranges;

    /* marks axis: (event index, mark string) in pass 1, then the anchors
     * (event index, value in x units), non-decreasing in both */
    uint64_t *mark_ev;
    uint32_t *mark_str;
    size_t nmark_raw, cap_mark_raw;
    uint64_t *anc_ev, *anc_x;
    size_t nanc;
    size_t nmarks;               /* marks read (the implicit origin not counted) */
    char mark_word[32];
    int x_override;
    uint64_t x_lo, x_hi;
    size_t anc_cur;              /* pass 2 cursor into the anchors */
};

/* ---- small helpers ---------------------------------------------------- */

static int dev_slot(int d)
{
    return d >= 0 && d < MSNAP_MAX_DEVICES ? d : SM_DEV_UNKNOWN;
}

/* Site class of an allocation kind on a device slot. */
static int cls_of(int kind, int slot)
{
    switch (msnap_state_site_layer(kind, slot)) {
    case MSNAP_LAYER_RESERVED: return SM_CLS_MEM;
    case MSNAP_LAYER_ALLOCATED: return SM_CLS_BLOCK;
    default: return SM_CLS_NONE;
    }
}

static int stacked_cls(const sm_model *m)
{
    return m->blocks_seen ? SM_CLS_BLOCK : SM_CLS_MEM;
}


sm_model *sm_new(const sm_opts *o)
{
    sm_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->o = *o;
    if (m->o.top < 0)
        m->o.top = 0;
    if (m->o.top > SM_MAX_TOP)
        m->o.top = SM_MAX_TOP;
    if (m->o.columns < 0)
        m->o.columns = 0;
    m->pass = 1;
    m->first_oom_idx = UINT64_MAX;
    return m;
}

static void layout_free(sm_layout *l)
{
    free(l->segs);
    free(l->spans);
    memset(l, 0, sizeof *l);
}

void sm_free(sm_model *m)
{
    if (!m)
        return;
    if (m->owns)
        an_free(&m->own);
    bd_free(m->bd);
    cat_rules_free(m->own_rules);
    free(m->sites);
    free(m->groups);
    sm_lf_free(&m->lf);
    free(m->ranges);
    free(m->mark_ev);
    free(m->mark_str);
    free(m->anc_ev);
    free(m->anc_x);
    for (int d = 0; d < SM_NDEV; d++) {
        free(m->dev[d].cols);
        free(m->dev[d].colvals);
    }
    layout_free(&m->layout);
    free(m);
}

/* ---- x axis ----------------------------------------------------------- */

/* ---- the marks axis ---------------------------------------------------- */

static int is_word_ch(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The number at s after spaces, ':' or '=' (at most 3 of them): 0 ok. */
static int number_after(const char *s, double *v)
{
    int k = 0;
    while ((*s == ' ' || *s == ':' || *s == '=') && k < 3) {
        s++;
        k++;
    }
    if (!((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
        return -1;
    char *end;
    double d = strtod(s, &end);
    if (end == s || d != d)
        return -1;
    *v = d;
    return 0;
}

int sm_mark_value(const char *text, const char *word, double *v, char *found,
                  size_t cap)
{
    if (!text)
        return -1;
    if (found && cap)
        found[0] = '\0';
    if (!word || !*word) {
        const char *p = text;
        while (*p == ' ')
            p++;
        if (!number_after(p, v))
            return 0;
    }
    size_t wl = word ? strlen(word) : 0;
    for (const char *p = text; *p; p++) {
        if (!is_word_ch(*p) || (p > text && is_word_ch(p[-1])))
            continue;
        const char *e = p;
        while (is_word_ch(*e))
            e++;
        if (wl && ((size_t)(e - p) != wl || strncasecmp(p, word, wl))) {
            p = e - 1;
            continue;
        }
        if (!number_after(e, v)) {
            if (found && cap)
                snprintf(found, cap, "%.*s", (int)(e - p), p);
            return 0;
        }
        p = e - 1;
    }
    return -1;
}

/* x units of a mark value: value x SM_MARK_SCALE, negative values at 0. */
static uint64_t mark_x(double v)
{
    double x = v * SM_MARK_SCALE;
    if (!(x > 0))
        return 0;
    return x >= 1.8e19 ? UINT64_MAX / 2 : (uint64_t)x;
}

/* After pass 1: the anchors of the marks axis from the marks seen.  The
 * word is the option's, else the first mark's; a mark whose value is below
 * the previous one is skipped (the axis only moves forward).  When the
 * first mark comes after the first event with a positive value, the first
 * event is value 0 (a counter - hour, step, epoch - starts where the
 * recording starts).  0 ok, -1 out of memory. */
static int marks_finish(sm_model *m)
{
    m->nanc = m->nmarks = 0;
    snprintf(m->mark_word, sizeof m->mark_word, "%s", m->o.x_word);
    if (m->o.x_mode != SM_X_MARKS || !m->nmark_raw)
        return 0;
    m->anc_ev = malloc((m->nmark_raw + 1) * sizeof *m->anc_ev);
    m->anc_x = malloc((m->nmark_raw + 1) * sizeof *m->anc_x);
    if (!m->anc_ev || !m->anc_x)
        return -1;
    for (size_t i = 0; i < m->nmark_raw; i++) {
        double v;
        char found[32];
        if (sm_mark_value(sm_str(m, m->mark_str[i]), m->mark_word, &v, found,
                          sizeof found))
            continue;
        if (!m->mark_word[0] && found[0])
            snprintf(m->mark_word, sizeof m->mark_word, "%s", found);
        uint64_t x = mark_x(v);
        if (m->nanc && x < m->anc_x[m->nanc - 1])
            continue;
        if (!m->nanc && m->mark_ev[i] > 1 && x > 0) {
            m->anc_ev[0] = 1;
            m->anc_x[0] = 0;
            m->nanc = 1;
        }
        m->anc_ev[m->nanc] = m->mark_ev[i];
        m->anc_x[m->nanc++] = x;
        m->nmarks++;
    }
    return 0;
}

size_t sm_marks(const sm_model *m, const char **word)
{
    if (word)
        *word = m->mark_word;
    return m->nmarks;
}

/* The value in x units at event idx: linear in the event index between
 * two anchors; before the first, the first's; after the last, on the slope
 * of the last two (the last's value when there is only one). */
static uint64_t marks_x_at(const sm_model *m, uint64_t idx, size_t *cur)
{
    size_t n = m->nanc;
    if (!n)
        return 0;
    if (idx <= m->anc_ev[0])
        return m->anc_x[0];
    size_t i = cur ? *cur : 0;
    if (i >= n || m->anc_ev[i] > idx)
        i = 0;
    while (i + 1 < n && m->anc_ev[i + 1] <= idx)
        i++;
    if (cur)
        *cur = i;
    size_t a = i, b = i + 1;
    if (b >= n) {
        if (n < 2)
            return m->anc_x[n - 1];
        a = n - 2;
        b = n - 1;
    }
    uint64_t de = m->anc_ev[b] - m->anc_ev[a];
    if (!de)
        return m->anc_x[i];
    double slope = (double)(m->anc_x[b] - m->anc_x[a]) / (double)de;
    double x = (double)m->anc_x[a] + slope * (double)(idx - m->anc_ev[a]);
    return x >= 1.8e19 ? UINT64_MAX / 2 : (uint64_t)x;
}

uint64_t sm_x_of_event(const sm_model *m, uint64_t idx, uint64_t t_ns)
{
    switch (m->o.x_mode) {
    case SM_X_EVENTS: return idx ? idx - 1 : 0;
    case SM_X_MARKS: return marks_x_at(m, idx, NULL);
    default: return t_ns;
    }
}

void sm_set_x_range(sm_model *m, uint64_t lo, uint64_t hi)
{
    m->x_override = 1;
    m->x_lo = lo;
    m->x_hi = hi > lo ? hi : lo + 1;
}

void sm_x_range(const sm_model *m, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    if (m->x_override) {
        *lo = m->x_lo;
        *hi = m->x_hi;
        return;
    }
    if (m->o.x_mode == SM_X_MARKS) {
        *lo = marks_x_at(m, 1, NULL);
        *hi = marks_x_at(m, m->events ? m->events : 1, NULL);
        if (*hi <= *lo)
            *hi = *lo + 1;
        return;
    }
    if (m->o.x_mode == SM_X_EVENTS) {
        *hi = m->events > 1 ? m->events - 1 : 1;
        return;
    }
    *hi = m->t_max ? m->t_max : 1;
    if (m->o.x_from == SM_FROM_FIRST) {
        uint64_t first = UINT64_MAX;
        if (m->have_first)
            first = m->t_first;
        if (m->have_first_cnt && m->t_first_cnt < first)
            first = m->t_first_cnt;
        if (first != UINT64_MAX && first < *hi)
            *lo = first;
    }
}

int sm_col_of(const sm_model *m, uint64_t x)
{
    uint64_t lo, hi;
    int n = m->o.columns;
    if (n <= 0)
        return 0;
    sm_x_range(m, &lo, &hi);
    if (x <= lo)
        return 0;
    if (x >= hi)
        return n - 1;
    unsigned __int128 v = (unsigned __int128)(x - lo) * (unsigned)n;
    uint64_t c = (uint64_t)(v / (hi - lo + 1));
    return c >= (uint64_t)n ? n - 1 : (int)c;
}

/* ---- sites ------------------------------------------------------------ */

/* The model's entry for the state's site idx, made when new (the state's
 * sites only grow).  NULL when out of memory. */
static sm_site *site_at(sm_model *m, uint32_t idx)
{
    while (m->nsites <= idx) {
        if (sm_grow((void **)&m->sites, &m->cap_sites, m->nsites, sizeof *m->sites))
            return NULL;
        const msnap_site *s = &m->f->st.sites[m->nsites];
        m->sites[m->nsites++] = (sm_site){
            .stack = s->stack, .cls = (uint8_t)cls_of(s->kind, s->device),
            .kind = s->kind, .device = s->device, .rank = -1};
    }
    return &m->sites[idx];
}

/* ---- per-device bookkeeping around a change --------------------------- */

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

/* After a change on device slot d: peaks (pass 1) or the column (pass 2). */
static void touch_after(sm_model *m, int d)
{
    sm_dev *v = &m->dev[d];
    v->seen = 1;
    if (m->pass == 1) {
        if (v->reserved > v->peak_reserved) {
            v->peak_reserved = v->reserved;
            v->peak_reserved_t = m->cur_x;
        }
        if (v->stacked > v->peak_stacked) {
            v->peak_stacked = v->stacked;
            v->peak_stacked_t = m->cur_x;
        }
        if (v->allocated > v->peak_allocated)
            v->peak_allocated = v->allocated;
        return;
    }
    if (m->o.by == SM_BY_CATEGORY && v->stacked > v->peak_stacked) {
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

/* Before a change of live memory (pass 1): lets the leak finder save the
 * site's bytes at the candidate valley. */
static void obj_before(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    (void)f;
    (void)sign;
    sm_model *m = ctx;
    int cls = cls_of(o->kind, o->device);
    if (!cls || m->err || o->site == NO_SITE)
        return;
    sm_site *s = site_at(m, o->site);
    if (!s || (s->cls == stacked_cls(m) && sm_lf_touch(&m->lf, s, o->site)))
        m->err = 1;
}

/* After a change of live memory (pass 1): the device's levels, the
 * site's figures, the stacked total and the leak finder, the peaks.
 * -1 out of memory. */
static int obj_after(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    sm_model *m = ctx;
    const msnap_state *st = &f->st;
    int d = o->device, cls = cls_of(o->kind, d);
    if (!cls || m->err)
        return m->err ? -1 : 0;
    sm_dev *v = &m->dev[d];
    uint64_t n = o->size;
#define MOVE(x) ((x) = sign > 0 ? (x) + n : ((x) > n ? (x) - n : 0))
    v->reserved = v->mem = st->lv[d][MSNAP_LAYER_RESERVED].cur;
    v->allocated = st->lv[d][MSNAP_LAYER_ALLOCATED].cur;
    if (o->site != NO_SITE) {
        sm_site *s = site_at(m, o->site);
        if (!s)
            return -1;
        s->live = st->sites[o->site].live;
        s->peak = st->sites[o->site].peak;
        s->peak_t = st->sites[o->site].peak_t;
    }
    if (cls == stacked_cls(m)) {
        MOVE(v->stacked);
        MOVE(m->lf.T);
        if (sm_lf_step(&m->lf, m->sites, stacked_cls(m)))
            return -1;
    }
#undef MOVE
    touch_after(m, d);
    return 0;
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
    sm_site *s = site_at(m, site);
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
    touch_after(m, d);
}

/* ---- layout ----------------------------------------------------------- */

static int cmp_live_addr(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_addr_only(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Appends a span, merging with the previous one when both are free (or
 * both unmapped) and contiguous. */
static int span_push(sm_layout *l, size_t *cap, sm_segment *sg, uint64_t a,
                     uint64_t b, int what, uint32_t site)
{
    if (b <= a)
        return 0;
    if (sg->nspans) {
        sm_span *p = &l->spans[l->nspans - 1];
        if (p->what == what && p->addr + p->size == a &&
            (what == SM_SPAN_FREE || what == SM_SPAN_UNMAPPED)) {
            p->size += b - a;
            if (what == SM_SPAN_FREE && p->size > sg->largest_free)
                sg->largest_free = p->size;
            return 0;
        }
    }
    if (sm_grow((void **)&l->spans, cap, l->nspans, sizeof *l->spans))
        return -1;
    l->spans[l->nspans++] = (sm_span){.addr = a, .size = b - a, .site = site,
                                      .what = (uint8_t)what};
    sg->nspans++;
    if (what == SM_SPAN_FREE && b - a > sg->largest_free)
        sg->largest_free = b - a;
    return 0;
}

/* First index in sorted arr[0..n) with addr >= a. */
static size_t lower_bound(const msnap_obj *arr, size_t n, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (arr[mid].addr < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Fills the spans of [a, b) given the mapped intervals maps[0..nm) (sorted,
 * clamped by the caller) and the sorted blocks. */
/* Whether driver memory made with `stack` belongs to a library that uses it
 * itself (cuBLAS's workspaces, cuDNN, NCCL): with an allocator's blocks in
 * the file, such memory is neither the allocator's cache nor free. */
static int other_library(const sm_model *m, uint32_t stack)
{
    static const char *const libs[] = {"cuBLAS", "cuDNN", "NCCL"};
    char buf[128];
    if (!m->f || !stack)
        return 0;
    const char *lib = cat_library_stack(&m->f->tab, stack, buf, sizeof buf);
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strcmp(lib, libs[i]))
            return 1;
    return 0;
}

static int fill_segment(sm_model *m, sm_layout *l, size_t *cap, sm_segment *sg,
                        const msnap_obj *maps, size_t nm, const msnap_obj *blocks,
                        size_t nb, int other)
{
    uint64_t a = sg->addr, b = sg->addr + sg->size, pos = a;
    size_t bi = lower_bound(blocks, nb, a);
    if (bi > 0 && blocks[bi - 1].addr + blocks[bi - 1].size > a)
        bi--;   /* a block that starts before the segment reaches into it */
    for (size_t i = 0; i < nm; i++) {
        uint64_t ma = maps[i].addr < a ? a : maps[i].addr;
        uint64_t mb = maps[i].addr + maps[i].size > b ? b
                                                      : maps[i].addr + maps[i].size;
        if (mb <= pos)
            continue;
        if (ma < pos)
            ma = pos;
        if (span_push(l, cap, sg, pos, ma, SM_SPAN_UNMAPPED, NO_SITE))
            return -1;
        pos = ma;
        if (m->blocks_seen && !other) {
            /* Blocks are sorted and do not overlap, so their ends are
             * sorted too.  A block may span several mappings (expandable
             * segments map 2 MiB pages): it fills its part of each, and
             * stays current for the next mapping. */
            while (bi < nb && blocks[bi].addr + blocks[bi].size <= ma)
                bi++;
            for (; bi < nb && blocks[bi].addr < mb; bi++) {
                uint64_t end = blocks[bi].addr + blocks[bi].size;
                uint64_t ba = blocks[bi].addr < pos ? pos : blocks[bi].addr;
                uint64_t be = end > mb ? mb : end;
                if (be > ba) {
                    if (span_push(l, cap, sg, pos, ba, SM_SPAN_FREE, NO_SITE) ||
                        span_push(l, cap, sg, ba, be, SM_SPAN_BLOCK,
                                  blocks[bi].site))
                        return -1;
                    pos = be;
                }
                if (end > mb)
                    break;
            }
            if (span_push(l, cap, sg, pos, mb, SM_SPAN_FREE, NO_SITE))
                return -1;
        } else {
            uint32_t site = maps[i].site;
            if (span_push(l, cap, sg, ma, mb, SM_SPAN_USED, site))
                return -1;
        }
        pos = mb;
    }
    return span_push(l, cap, sg, pos, b, SM_SPAN_UNMAPPED, NO_SITE);
}

/* Builds the layout of the live objects objs[0..n) (the moment after
 * event ev_idx, at x) into *l.  0 ok, -1 no memory. */
static int layout_build(sm_model *m, const msnap_obj *objs, size_t n, uint64_t ev_idx,
                        uint64_t t_ns, sm_layout *l)
{
    memset(l, 0, sizeof *l);
    size_t ns = 0, nb = 0, nm = 0;
    msnap_obj *segs = malloc((n + 1) * sizeof *segs);
    msnap_obj *blocks = malloc((n + 1) * sizeof *blocks);
    msnap_obj *maps = malloc((n + 1) * sizeof *maps);
    size_t cap_segs = 0, cap_spans = 0;
    u64map phys = {0};           /* cuMemCreate handle -> index into objs */
    int rc = -1;
    if (!segs || !blocks || !maps)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (objs[i].space == MSNAP_SP_PHYS && u64map_put(&phys, 0, objs[i].aux, i))
            goto out;
    for (size_t i = 0; i < n; i++) {
        msnap_obj e = objs[i];
        switch (e.kind) {
        case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_MANAGED_ALLOC:
        case MSNAP_A_VMM_RESERVE:
            segs[ns++] = e;
            break;
        case MSNAP_A_BLOCK_ALLOC:
            blocks[nb++] = e;
            break;
        case MSNAP_A_VMM_MAP: {
            /* The site of a mapping is the site of its physical memory. */
            const uint64_t *hi = u64map_get(&phys, 0, e.aux);
            const msnap_obj *h = hi ? &objs[*hi] : NULL;
            e.site = h ? h->site : NO_SITE;
            if (h && e.device == SM_DEV_UNKNOWN)
                e.device = h->device;
            maps[nm++] = e;
            break;
        }
        default:
            break;
        }
    }
    qsort(blocks, nb, sizeof *blocks, cmp_addr_only);
    qsort(maps, nm, sizeof *maps, cmp_addr_only);
    /* A VA reservation on an unknown device takes its mappings' device. */
    for (size_t i = 0; i < ns; i++) {
        if (segs[i].kind != MSNAP_A_VMM_RESERVE || segs[i].device != SM_DEV_UNKNOWN)
            continue;
        size_t j = lower_bound(maps, nm, segs[i].addr);
        if (j < nm && maps[j].addr < segs[i].addr + segs[i].size)
            segs[i].device = maps[j].device;
        else {
            int only = -1, count = 0;
            for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
                if (m->dev[d].seen) {
                    only = d;
                    count++;
                }
            if (count == 1)
                segs[i].device = (int16_t)only;
        }
    }
    qsort(segs, ns, sizeof *segs, cmp_live_addr);
    for (size_t i = 0; i < ns; i++) {
        if (sm_grow((void **)&l->segs, &cap_segs, l->nsegs, sizeof *l->segs))
            goto out;
        sm_segment *sg = &l->segs[l->nsegs++];
        *sg = (sm_segment){.addr = segs[i].addr, .size = segs[i].size,
                           .kind = segs[i].kind, .device = segs[i].device,
                           .site = segs[i].site, .first_span = l->nspans};
        int r, other = m->blocks_seen && other_library(m, segs[i].stack);
        if (segs[i].kind == MSNAP_A_VMM_RESERVE) {
            size_t j = lower_bound(maps, nm, segs[i].addr), k = j;
            while (k < nm && maps[k].addr < segs[i].addr + segs[i].size)
                k++;
            r = fill_segment(m, l, &cap_spans, sg, maps + j, k - j, blocks, nb, other);
        } else {
            msnap_obj whole = segs[i];
            r = fill_segment(m, l, &cap_spans, sg, &whole, 1, blocks, nb, other);
        }
        if (r)
            goto out;
        sm_dev_layout *dl = &l->dev[sg->device];
        dl->segments++;
        dl->segment_bytes += sg->size;
        for (size_t s = sg->first_span; s < sg->first_span + sg->nspans; s++) {
            const sm_span *sp = &l->spans[s];
            if (sp->what != SM_SPAN_UNMAPPED)
                dl->mapped_bytes += sp->size;
            if (sp->what == SM_SPAN_BLOCK)
                dl->block_bytes += sp->size;
            if (sp->what == SM_SPAN_USED && other)
                dl->other_bytes += sp->size;
            if (sp->what == SM_SPAN_FREE)
                dl->total_free += sp->size;
        }
        if (sg->largest_free > dl->largest_free)
            dl->largest_free = sg->largest_free;
    }
    /* Blocks outside every recorded segment: one extra row per device. */
    if (m->blocks_seen) {
        for (size_t i = 0; i < nb; i++) {
            size_t lo = 0, hi = ns;   /* last segment with addr <= block */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (cmp_live_addr(&segs[mid], &blocks[i]) <= 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int inside = 0;
            for (size_t j = lo; j-- > 0;) {
                if (segs[j].device != blocks[i].device)
                    break;
                if (blocks[i].addr < segs[j].addr + segs[j].size)
                    inside = 1;
                break;
            }
            if (inside)
                continue;
            int d = blocks[i].device;
            if (sm_grow((void **)&l->segs, &cap_segs, l->nsegs, sizeof *l->segs))
                goto out;
            sm_segment *sg = &l->segs[l->nsegs++];
            *sg = (sm_segment){.addr = blocks[i].addr, .size = blocks[i].size,
                               .kind = 0, .device = (int16_t)d, .site = NO_SITE,
                               .first_span = l->nspans};
            if (span_push(l, &cap_spans, sg, blocks[i].addr,
                          blocks[i].addr + blocks[i].size, SM_SPAN_BLOCK,
                          blocks[i].site))
                goto out;
            l->dev[d].block_bytes += blocks[i].size;
        }
    }
    l->valid = 1;
    l->t_ns = t_ns; /* the time, whatever the x axis is (events, marks) */
    l->event_index = ev_idx;
    rc = 0;
out:
    free(segs);
    free(blocks);
    free(maps);
    u64map_free(&phys);
    if (rc)
        layout_free(l);
    return rc;
}

/* ---- events ----------------------------------------------------------- */

static int oom_record(sm_model *m, const msnap_event *e)
{
    if (e->action == MSNAP_A_OOM) {
        m->total_ooms++;
        if (m->first_oom_idx == UINT64_MAX)
            m->first_oom_idx = m->ev_idx;
    }
    if (m->nooms >= SM_MAX_OOMS)
        return 0;
    int d = dev_slot(e->device);
    sm_oom *o = &m->ooms[m->nooms++];
    *o = (sm_oom){.t_ns = e->t_ns, .event_index = m->ev_idx,
                  .requested = e->size, .dev_free = e->aux,
                  .dev_total = e->aux2, .device = e->device,
                  .action = e->action, .api = e->api, .result = e->result,
                  .stack = e->stack, .allocated = m->dev[d].stacked,
                  .reserved = m->dev[d].reserved,
                  .blocks_seen = m->blocks_seen};
    sm_layout l;
    msnap_obj *objs;
    size_t n;
    if (an_live_objects(m->f, &objs, &n))
        return -1;
    int rc = layout_build(m, objs, n, m->ev_idx, e->t_ns, &l);
    free(objs);
    if (rc)
        return -1;
    o->total_free = l.dev[d].total_free;
    o->largest_free = l.dev[d].largest_free;
    layout_free(&l);
    m->dev[d].seen = 1;
    return 0;
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

/* Pass 1, an event before the state applies it: the clock, and the
 * stacked layer becomes the blocks at the first block. */
static int ev_before(void *ctx, an_file *f, const msnap_event *e)
{
    sm_model *m = ctx;
    m->ev_idx = f->ev_idx;
    m->events++;
    if (!m->have_first) {
        m->have_first = 1;
        m->t_first = e->t_ns;
    }
    if (e->t_ns > m->t_max)
        m->t_max = e->t_ns;
    m->cur_x = e->t_ns;
    if (e->action == MSNAP_A_BLOCK_ALLOC && !m->blocks_seen) {
        /* The stacked layer becomes the blocks: restart the finder. */
        m->blocks_seen = 1;
        uint64_t T = 0;
        for (int d = 0; d < SM_NDEV; d++) {
            m->dev[d].stacked = m->dev[d].allocated;
            m->dev[d].peak_stacked = m->dev[d].allocated;
            T += m->dev[d].stacked;
        }
        sm_lf_restart(&m->lf, T);
    }
    return m->err ? -1 : 0;
}

/* Pass 1, an event after the state applied it: OOM stories, marks, the
 * capture moments.  -1 out of memory. */
static int ev_after(sm_model *m, an_file *f, const msnap_event *e)
{
    switch (e->action) {
    case MSNAP_A_OOM: case MSNAP_A_ALLOC_ERROR:
        if (oom_record(m, e))
            return -1;
        if (e->action == MSNAP_A_OOM && m->mk_oom && !an_moment_marked(m->mk_oom)) {
            an_moment_mark(m->mk_oom);
            an_moment_freeze(m->mk_oom);
        }
        break;
    case MSNAP_A_NVTX_MARK:
        /* kept by string id: the text is read after pass 1, when every
         * str line is known */
        if (m->o.x_mode == SM_X_MARKS) {
            if (m->nmark_raw == m->cap_mark_raw) {
                size_t nc = m->cap_mark_raw ? m->cap_mark_raw * 2 : 64;
                uint64_t *ne = realloc(m->mark_ev, nc * sizeof *ne);
                if (ne)
                    m->mark_ev = ne;
                uint32_t *ns = ne ? realloc(m->mark_str, nc * sizeof *ns) : NULL;
                if (!ns)
                    return -1;
                m->mark_str = ns;
                m->cap_mark_raw = nc;
            }
            m->mark_ev[m->nmark_raw] = m->ev_idx;
            m->mark_str[m->nmark_raw++] = (uint32_t)e->aux;
        }
        break;
    default:
        break;
    }
    /* the moments: the process's reserved peak just rose; the last event
     * at or before --at TIME */
    int pl = m->o.peak_allocated && f->st.allocated_seen ? MSNAP_LAYER_ALLOCATED
                                                         : MSNAP_LAYER_RESERVED;
    if (m->mk_peak && f->st.all[pl].peak_ev == f->ev_idx) {
        an_moment_mark(m->mk_peak);
        m->peak_block_pending = pl == MSNAP_LAYER_RESERVED && m->blocks_seen;
    } else if (m->peak_block_pending) {
        /* the new peak of reserved was a segment made for a request: the
         * allocator's block for it comes next, and the moment is after it
         * (as the allocator's own counters see it, and a replay) */
        m->peak_block_pending = 0;
        if (e->action == MSNAP_A_BLOCK_ALLOC)
            an_moment_mark(m->mk_peak);
    }
    if (m->mk_time && e->t_ns <= m->o.at_t_ns)
        an_moment_mark(m->mk_time);
    return 0;
}

/* ---- other records ----------------------------------------------------- */

/* A cap in the header settings: "cap", "cap_bytes", "memory_cap" or
 * "max_bytes" as an integer number of bytes. */
static uint64_t settings_cap(const char *json)
{
    if (!json || !*json)
        return 0;
    cJSON *root = cJSON_Parse(json);
    uint64_t cap = 0;
    static const char *keys[] = {"cap", "cap_bytes", "memory_cap", "max_bytes"};
    for (size_t i = 0; root && i < sizeof keys / sizeof keys[0] && !cap; i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1.8e19)
            cap = (uint64_t)v->valuedouble;
    }
    cJSON_Delete(root);
    return cap;
}

static void take_device(sm_model *m, const msnap_device_info *d)
{
    sm_dev *v = &m->dev[dev_slot(d->index)];
    v->total = d->total;
    snprintf(v->name, sizeof v->name, "%s", d->name);
}

static void take_counters(sm_model *m, const msnap_counters *c)
{
    if (c->device < 0)
        return;
    sm_dev *v = &m->dev[dev_slot(c->device)];
    uint64_t res = c->reserved + c->async + c->managed;
    uint64_t alloc = m->blocks_seen ? c->allocated : res;
    if (m->pass == 1) {
        m->counters_seen = 1;
        if (!m->have_first_cnt || c->t_ns < m->t_first_cnt) {
            m->have_first_cnt = 1;
            m->t_first_cnt = c->t_ns;
        }
        if (c->t_ns > m->t_max)
            m->t_max = c->t_ns;
        if (res > v->cnt_peak_reserved)
            v->cnt_peak_reserved = res;
        if (c->allocated > v->cnt_peak_allocated)
            v->cnt_peak_allocated = c->allocated;
        if (res || c->allocated)
            v->seen = 1;
        return;
    }
    if (!v->cols || m->o.x_mode != SM_X_TIME)
        return;
    sm_col *k = &v->cols[sm_col_of(m, c->t_ns)];
    if (res > k->cnt_res)
        k->cnt_res = res;
    if (alloc > k->cnt_alloc)
        k->cnt_alloc = alloc;
    k->has_cnt = 1;
}

/* Pass 1, every record after the tables and the state took it. */
static int on_record(void *ctx, an_file *f, const msnap_record *r)
{
    sm_model *m = ctx;
    switch (r->type) {
    case MSNAP_REC_HEADER:
        if (!m->have_header) {
            m->have_header = 1;
            m->hdr = r->u.header;
            m->hdr.argv = NULL;
            m->hdr.argc = 0;
            m->hdr.settings_json = NULL;
            snprintf(m->mode, sizeof m->mode, "%s", r->u.header.mode);
            m->cap_header = settings_cap(r->u.header.settings_json);
            for (int i = 0; i < r->u.header.ndevices && i < MSNAP_MAX_DEVICES; i++)
                take_device(m, &r->u.header.devices[i]);
        }
        return 0;
    case MSNAP_REC_DEVICE:
        take_device(m, &r->u.device);
        return 0;
    case MSNAP_REC_EVENT:
        return m->err || ev_after(m, f, &r->u.event) ? -1 : 0;
    case MSNAP_REC_COUNTERS:
        take_counters(m, &r->u.counters);
        return 0;
    case MSNAP_REC_TRAILER:
        if (r->u.trailer.t_ns > m->t_max)
            m->t_max = r->u.trailer.t_ns;
        return 0;
    default:
        return 0;
    }
}

/* The layout at the capture moment (an_moment_objects).  -1 no memory. */
static int capture(sm_model *m, an_moment *k)
{
    m->mk_capture = k;
    msnap_obj *objs;
    size_t n;
    uint64_t idx, t;
    if (an_moment_objects(k, &objs, &n, &idx, &t))
        return -1;
    int rc = layout_build(m, objs, n, idx, t, &m->layout);
    free(objs);
    m->layout.at = m->capture_at;
    return rc;
}

static const sm_model *sort_model; /* qsort has no context argument */

static int cmp_group_peak(const void *a, const void *b)
{
    const sm_group *x = &sort_model->groups[*(const uint32_t *)a];
    const sm_group *y = &sort_model->groups[*(const uint32_t *)b];
    if (x->peak != y->peak)
        return x->peak > y->peak ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The index of the site that names group g (its representative's). */
static uint32_t site_of_stack(const sm_model *m, const sm_group *g)
{
    for (size_t i = 0; i < m->nsites; i++)
        if (m->sites[i].stack == g->stack && m->sites[i].device == g->device &&
            &m->groups[m->sites[i].grp] == g)
            return (uint32_t)i;
    return 0;
}

static void grp_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                        uint64_t key)
{
    (void)torch;
    (void)key;
    sm_model *m = ctx;
    if (site >= m->nsites)
        return;
    sm_group *g = &m->groups[m->sites[site].grp];
    if (sign > 0) {
        g->live += n;
        if (g->live > g->peak) {
            g->peak = g->live;
            g->peak_t = m->cur_x;
        }
    } else {
        g->live = g->live > n ? g->live - n : 0;
    }
}

static void grp_event(void *ctx, uint64_t idx, uint64_t t)
{
    (void)idx;
    ((sm_model *)ctx)->cur_x = t;
}

/* Groups the sites by label, layer and device, and replays the log for
 * their peaks (with the objects live before the first event, as the
 * timeline has them).  0 ok, -1 out of memory. */
static int build_groups(sm_model *m)
{
    const msnap_state *st = &m->f->st;
    u64map ix = {0};
    free(m->groups);
    m->groups = calloc(m->nsites + 1, sizeof *m->groups);
    m->ngroups = 0;
    if (!m->groups)
        return -1;
    for (size_t i = 0; i < m->nsites; i++) {
        sm_site *s = &m->sites[i];
        const msnap_site *ss = &st->sites[i];
        uint32_t lg = s->stack ? sm_site_group(m, s->stack) : UINT32_MAX;
        /* unknown stacks stay sites of their own */
        uint64_t key = lg != UINT32_MAX ? lg : (uint64_t)s->stack << 32 | 0x80000000u;
        uint32_t tag = 1 + ss->layer * (SM_NDEV + 1) + (uint32_t)s->device;
        uint64_t *v = u64map_get(&ix, tag, key);
        sm_group *g;
        if (v) {
            g = &m->groups[*v];
        } else {
            if (u64map_put(&ix, tag, key, m->ngroups)) {
                u64map_free(&ix);
                return -1;
            }
            v = u64map_get(&ix, tag, key);
            g = &m->groups[m->ngroups++];
            *g = (sm_group){.stack = s->stack, .layer = ss->layer, .cls = s->cls,
                            .kind = s->kind, .device = s->device, .rank = -1};
        }
        s->grp = (uint32_t)*v;
        if (g->nmembers && s->peak > m->sites[site_of_stack(m, g)].peak) {
            g->stack = s->stack;
            g->kind = s->kind;
        }
        g->nmembers++;
        g->count += s->count;
        g->bytes += s->bytes;
        g->live_count += s->live_count;
    }
    u64map_free(&ix);
    if (m->f->log) {
        an_visitor vis = {.ctx = m, .event = grp_event, .change = grp_change};
        uint64_t x = m->cur_x;
        if (an_replay(m->f, &vis))
            return -1;
        m->cur_x = x;
    } else {
        /* no log: each site's own figures (one member per group, mostly) */
        for (size_t i = 0; i < m->nsites; i++) {
            sm_group *g = &m->groups[m->sites[i].grp];
            g->live += m->sites[i].live;
            if (m->sites[i].peak > g->peak) {
                g->peak = m->sites[i].peak;
                g->peak_t = m->sites[i].peak_t;
            }
        }
    }
    return 0;
}

/* The end of pass 1: top sites, leak suspects, the marks axis, the
 * capture moment and its layout.  -1 out of memory. */
static int on_end(void *ctx, an_file *f)
{
    sm_model *m = ctx;
    const msnap_state *st = &f->st;
    /* Objects live before the first recorded event (ring window, late
     * start: state.h) count towards their sites' peaks (an estimate: they
     * were live from the start of the window). */
    for (size_t i = 0; i < st->npre; i++) {
        const msnap_obj *e = &st->pre[i].o;
        if (!cls_of(e->kind, e->device))
            continue;
        uint32_t si = msnap_state_site_for(&f->st, e);
        sm_site *s = si == NO_SITE ? NULL : site_at(m, si);
        if (!s)
            return -1;
        s->peak += e->size;
    }
    if (m->nsites < st->nsites && !site_at(m, (uint32_t)st->nsites - 1))
        return -1;
    for (size_t i = 0; i < m->nsites; i++) {
        m->sites[i].count = st->sites[i].count;
        m->sites[i].bytes = st->sites[i].bytes;
        m->sites[i].live_count = st->sites[i].live_count;
    }
    m->peak_reserved1 = msnap_state_peak(st, -1, MSNAP_LAYER_RESERVED);
    m->peak_stacked1 = msnap_state_peak(st, -1, m->blocks_seen
                                        ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED);
    m->peak_idx = st->all[MSNAP_LAYER_RESERVED].peak_ev;
    /* The sites as every view shows them, then the top ones per device. */
    int cls = stacked_cls(m);
    if (build_groups(m))
        return -1;
    uint32_t *idx = malloc((m->ngroups + 1) * sizeof *idx);
    if (!idx)
        return -1;
    for (int d = 0; d < SM_NDEV; d++) {
        size_t n = 0;
        for (size_t i = 0; i < m->ngroups; i++)
            if (m->groups[i].device == d && m->groups[i].cls == cls && m->groups[i].peak)
                idx[n++] = (uint32_t)i;
        sort_model = m;
        qsort(idx, n, sizeof *idx, cmp_group_peak);
        sm_dev *v = &m->dev[d];
        v->ntop = 0;
        for (size_t i = 0; i < n && v->ntop < m->o.top; i++) {
            sm_group *g = &m->groups[idx[i]];
            g->rank = v->ntop;
            v->top[v->ntop++] = site_of_stack(m, g);
        }
    }
    for (size_t i = 0; i < m->nsites; i++)
        m->sites[i].rank = m->groups[m->sites[i].grp].rank;
    for (int d = 0; d < SM_NDEV; d++)
        m->dev[d].nbands = m->dev[d].ntop;   /* by site; by category: sm_finish */
    free(idx);
    if (sm_lf_finish(&m->lf, m->sites, m->nsites, cls) || marks_finish(m))
        return -1;
    /* The capture moment. */
    int at = m->o.at;
    if (at == SM_AT_DEFAULT)
        at = m->total_ooms ? SM_AT_OOM : m->peak_idx ? SM_AT_PEAK : SM_AT_END;
    if (at == SM_AT_OOM && !m->total_ooms)
        at = SM_AT_END;
    m->capture_at = at;
    an_moment *k = at == SM_AT_OOM ? m->mk_oom : at == SM_AT_PEAK ? m->mk_peak
                 : at == SM_AT_TIME ? m->mk_time : NULL;
    if (k && !an_moment_marked(k))
        k = NULL;      /* --at peak with no peak: the end */
    if (!k)
        k = m->mk_end;   /* never marked: the live set at the end */
    return capture(m, k);
}

int sm_attach(sm_model *m, an_file *f)
{
    m->f = f;
    static const an_observer obs = {NULL, on_record, ev_before, obj_before, obj_after,
                                    on_end};
    an_observer o = obs;
    o.ctx = m;
    if (an_observe(f, &o))
        return -1;
    /* the moments: the end needs one never marked */
    if (!(m->mk_peak = an_moment_new(f)) || !(m->mk_oom = an_moment_new(f)) ||
        !(m->mk_end = an_moment_new(f)))
        return -1;
    if (m->o.at == SM_AT_TIME) {
        if (!(m->mk_time = an_moment_new(f)))
            return -1;
        an_moment_mark(m->mk_time);    /* before any event, unless one comes by then */
    }
    /* the sites' figures by label and pass 2 (columns, NVTX ranges)
     * replay the log */
    if (an_want_log(f))
        return -1;
    /* by category: the breakdown observes after the model, so its end (the
     * categories, the bytes of the changes) comes after pass 1's end and
     * before sm_finish */
    if (m->o.by == SM_BY_CATEGORY) {
        const cat_rules *r = m->o.rules;
        if (!r && !(r = m->own_rules = cat_rules_new()))
            return -1;
        if (!(m->bd = bd_new(r)))
            return -1;
        bd_keep_change_categories(m->bd);
        if (bd_attach(m->bd, f))
            return -1;
    }
    return 0;
}

/* By category, before pass 2: the bands of each device, the categories
 * with bytes in the view summary shows for it, from the longest-lived to
 * the shortest (band_order, then the user's own in the rules' order), so
 * the floor of the area is what stays and the spikes are on top; "other"
 * (and any beyond SM_MAX_TOP) the rest. */
static const char *const band_order[] = {
    "parameters", "optimizer_state", "gradients", "workspaces", "communication",
    "kv_cache", "inputs", "activations", "temporaries"};

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
    if (m->o.by == SM_BY_CATEGORY)
        oom_levels(m, idx);
    m->ev_idx = idx;
    if (m->o.x_mode == SM_X_MARKS)
        m->cur_x = marks_x_at(m, idx, &m->anc_cur);
    else
        m->cur_x = m->o.x_mode == SM_X_EVENTS ? idx - 1 : t;
    m->cur_col = sm_col_of(m, m->cur_x);
}

static void rp_counters(void *ctx, const msnap_counters *c)
{
    take_counters(ctx, c);
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
             : m->o.x_mode == SM_X_MARKS ? marks_x_at(m, 1, NULL) : 0;
    m->cur_col = sm_col_of(m, m->cur_x);
    an_visitor v = {.ctx = m, .event = rp_event, .change = rp_change,
                    .counters = rp_counters, .nvtx = rp_nvtx};
    if (an_replay(m->f, &v) || m->err)
        return -1;
    if (m->o.by == SM_BY_CATEGORY)
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

int sm_read_file(sm_model *m, const char *path, int pass2, char *err, size_t errlen)
{
    if (!m->f) {
        an_init(&m->own, path);
        m->owns = 1;
        if (sm_attach(m, &m->own)) {
            snprintf(err, errlen, "%s: out of memory", path);
            return 2;
        }
    }
    int rc = an_read(m->f, err, errlen);
    if (rc == 0 && pass2 && sm_finish(m)) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = 2;
    }
    return rc;
}

/* ---- results ------------------------------------------------------------ */

const sm_opts *sm_options(const sm_model *m) { return &m->o; }
const sm_dev *sm_device(const sm_model *m, int slot) { return &m->dev[slot]; }
int sm_blocks_seen(const sm_model *m) { return m->blocks_seen; }
uint64_t sm_events(const sm_model *m) { return m->events; }
uint64_t sm_first_event_t(const sm_model *m) { return m->t_first; }
int sm_counters_seen(const sm_model *m) { return m->counters_seen; }
uint64_t sm_cap(const sm_model *m) { return m->o.cap ? m->o.cap : m->cap_header; }
int sm_ring_mode(const sm_model *m) { return !strcmp(m->mode, "ring"); }
uint64_t sm_truncated_after(const sm_model *m) { return m->f && m->f->truncated ? m->f->lines : 0; }
const sm_layout *sm_layout_at(const sm_model *m) { return &m->layout; }

const msnap_header *sm_header_info(const sm_model *m, char *mode, size_t len)
{
    snprintf(mode, len, "%s", m->mode);
    return &m->hdr;
}

const sm_site *sm_sites(const sm_model *m, size_t *n)
{
    *n = m->nsites;
    return m->sites;
}

int sm_capture_objects(const sm_model *m, msnap_obj **out, size_t *n, uint64_t *t_ns)
{
    uint64_t idx;
    if (!m->mk_capture) {
        *out = NULL;
        *n = 0;
        return -1;
    }
    return an_moment_objects(m->mk_capture, out, n, &idx, t_ns);
}

const sm_group *sm_groups(const sm_model *m, size_t *n)
{
    *n = m->ngroups;
    return m->groups;
}

const sm_leak *sm_leaks(const sm_model *m, size_t *n, uint64_t *nvalleys)
{
    *n = m->lf.nleaks;
    if (nvalleys)
        *nvalleys = m->lf.nvalleys;
    return m->lf.leaks;
}

void sm_floor(const sm_model *m, uint64_t *first, uint64_t *last)
{
    *first = m->lf.floor_first;
    *last = m->lf.floor_last;
}

const sm_oom *sm_ooms(const sm_model *m, size_t *n, uint64_t *total)
{
    *n = m->nooms;
    if (total)
        *total = m->total_ooms;
    return m->ooms;
}

const sm_range *sm_ranges(const sm_model *m, size_t *n, uint64_t *total)
{
    *n = m->nranges;
    if (total)
        *total = m->total_ranges;
    return m->ranges;
}

uint64_t sm_col_value(const sm_model *m, int slot, int col, int band)
{
    const sm_dev *v = &m->dev[slot];
    if (!v->colvals || col < 0 || col >= m->o.columns || band < 0 ||
        band > SM_MAX_TOP)
        return 0;
    return v->colvals[(size_t)col * (SM_MAX_TOP + 1) + band];
}

const char *sm_band_category(const sm_model *m, int slot, int band)
{
    if (m->o.by != SM_BY_CATEGORY || !m->bd || slot < 0 || slot >= SM_NDEV)
        return NULL;
    const sm_dev *v = &m->dev[slot];
    if (band < 0 || band > v->nbands)
        return NULL;
    return cat_name(m->o.rules ? m->o.rules : m->own_rules, v->band_cat[band]);
}

const struct breakdown *sm_breakdown(const sm_model *m)
{
    return m->bd;
}

const sm_symtab *sm_symtab_of(const sm_model *m) { return &m->f->tab; }

const char *sm_str(const sm_model *m, uint32_t id)
{
    return sm_symtab_str(&m->f->tab, id);
}

int sm_frame(const sm_model *m, uint32_t stack, int i, char *buf, size_t cap)
{
    return sm_symtab_frame(&m->f->tab, stack, i, SM_MOD_SIZED, buf, cap);
}

int sm_frame_get(const sm_model *m, uint32_t stack, int i, sm_frame_info *f)
{
    return sm_symtab_frame_get(&m->f->tab, stack, i, f);
}

void sm_peak_totals(const sm_model *m, uint64_t *stacked, uint64_t *reserved)
{
    *stacked = m->peak_stacked1;
    *reserved = m->peak_reserved1;
}

void sm_set_colour(sm_model *m, int slot, int rank, uint32_t rgb)
{
    if (slot < 0 || slot >= SM_NDEV || rank < 0 || rank >= SM_MAX_TOP)
        return;
    m->dev[slot].colour[rank] = rgb;
    m->dev[slot].colour_set[rank] = 1;
}

int sm_parse_at(const char *s, int *at, uint64_t *t_ns)
{
    *t_ns = 0;
    if (!strcmp(s, "oom")) { *at = SM_AT_OOM; return 0; }
    if (!strcmp(s, "peak")) { *at = SM_AT_PEAK; return 0; }
    if (!strcmp(s, "end")) { *at = SM_AT_END; return 0; }
    if (msnap_time_parse(s, t_ns))
        return -1;
    *at = SM_AT_TIME;
    return 0;
}

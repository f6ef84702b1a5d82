/* The findings model, pass 1 and its life (model.h says what the two
 * passes learn; model_int.h lists the files the model is split into).
 * What an event does to live memory is the state model's (state.h): every
 * event goes to msnap_state_event, and the model observes each change of a
 * level (obj_before / obj_after), where pass 1's bookkeeping hangs (the
 * peaks, the valley detector of the leak finder); pass 2 replays the same
 * changes from the log into the columns (model_columns.c).  Sites are the
 * state's: sm_sites()[i] is the state's site i, with the model's rank and
 * leak figures beside it.
 *
 * The leak finder (pass 1), the fragmentation numbers and the OOM verdict
 * are findings.c's.
 */
#include "model_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    free(m->pool_band);
    free(m->pool_res);
    free(m->pool_alc);
    free(m->mark_ev);
    free(m->mark_t);
    free(m->mark_str);
    free(m->anc_ev);
    free(m->anc_x);
    for (int d = 0; d < SM_NDEV; d++) {
        free(m->dev[d].cols);
        free(m->dev[d].colvals);
    }
    sm__layout_free(&m->layout);
    free(m);
}

/* ---- sites ------------------------------------------------------------ */

/* The model's entry for the state's site idx, made when new (the state's
 * sites only grow).  NULL when out of memory. */
sm_site *sm__site_at(sm_model *m, uint32_t idx)
{
    while (m->nsites <= idx) {
        if (msnap_grow((void **)&m->sites, &m->cap_sites, m->nsites, sizeof *m->sites))
            return NULL;
        const msnap_site *s = &m->f->st.sites[m->nsites];
        m->sites[m->nsites++] = (sm_site){
            .stack = s->stack, .cls = (uint8_t)cls_of(s->kind, s->device),
            .kind = s->kind, .device = s->device, .rank = -1};
    }
    return &m->sites[idx];
}

/* ---- a change of live memory ------------------------------------------ */

/* Pass 1, after a change on device slot d: the device's peaks. */
static void peaks_after(sm_model *m, int d)
{
    sm_dev *v = &m->dev[d];
    v->seen = 1;
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
    sm_site *s = sm__site_at(m, o->site);
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
        sm_site *s = sm__site_at(m, o->site);
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
    peaks_after(m, d);
    return 0;
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
    int rc = sm__layout_build(m, objs, n, m->ev_idx, e->t_ns, &l);
    free(objs);
    if (rc)
        return -1;
    o->total_free = l.dev[d].total_free;
    o->largest_free = l.dev[d].largest_free;
    sm__layout_free(&l);
    m->dev[d].seen = 1;
    return 0;
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
    if (m->o.x_mode == SM_X_AUTO)
        sm__time_note(m, e->t_ns);
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

/* The moment at a new peak of reserved waits for the block the new memory
 * was made for.  PyTorch's trace brings a new segment as the driver's
 * alloc, then its own segment_alloc, then the block_alloc (an expandable
 * segment: vmm_create, vmm_map, segment_map, block_alloc); memsnap's
 * allocator as alloc, block_alloc.  So the moment moves to after the first
 * block inside the new memory, as long as reserved has not moved since
 * (records of the allocator's own segments, marks, other threads' blocks
 * in between leave the peak where it is).  A handle (vmm_create) has no
 * address: its range is the first mapping made while waiting.  Memory no
 * block ever lands in (cuBLAS's workspace) leaves the moment at its alloc. */
static void peak_pending_start(sm_model *m, an_file *f, const msnap_event *e, int pl)
{
    m->peak_pending = pl == MSNAP_LAYER_RESERVED;
    m->pend_reserved = f->st.all[MSNAP_LAYER_RESERVED].cur;
    m->pend_lo = e->action == MSNAP_A_VMM_CREATE ? 0 : e->addr;
    m->pend_hi = e->action == MSNAP_A_VMM_CREATE || e->addr + e->size < e->addr
                     ? 0 : e->addr + e->size;
}

static void peak_pending_step(sm_model *m, an_file *f, const msnap_event *e)
{
    if (f->st.all[MSNAP_LAYER_RESERVED].cur != m->pend_reserved) {
        m->peak_pending = 0;           /* reserved moved: the peak is behind */
        return;
    }
    if (m->pend_hi == 0 && (e->action == MSNAP_A_VMM_MAP || e->action == MSNAP_A_SEGMENT_MAP) &&
        e->addr + e->size > e->addr) {
        m->pend_lo = e->addr;          /* a handle's memory: where it is mapped */
        m->pend_hi = e->addr + e->size;
        return;
    }
    if (e->action != MSNAP_A_BLOCK_ALLOC)
        return;
    if (m->pend_hi && (e->addr < m->pend_lo || e->addr >= m->pend_hi))
        return;                        /* another segment's block */
    m->peak_pending = 0;
    an_moment_mark(m->mk_peak);
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
        if (sm__mark_add(m, m->ev_idx, e->t_ns, (uint32_t)e->aux))
            return -1;
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
        peak_pending_start(m, f, e, pl);
    } else if (m->peak_pending) {
        peak_pending_step(m, f, e);
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

/* Pass 1, a counters line: the first time, the peaks it reports. */
static void take_counters(sm_model *m, const msnap_counters *c)
{
    if (c->device < 0)
        return;
    sm_dev *v = &m->dev[dev_slot(c->device)];
    uint64_t res = c->reserved + c->async + c->managed;
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
    int rc = sm__layout_build(m, objs, n, idx, t, &m->layout);
    free(objs);
    m->layout.at = m->capture_at;
    return rc;
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
        sm_site *s = si == NO_SITE ? NULL : sm__site_at(m, si);
        if (!s)
            return -1;
        s->peak += e->size;
    }
    if (m->nsites < st->nsites && !sm__site_at(m, (uint32_t)st->nsites - 1))
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
    if (sm__build_groups(m) || sm__rank_groups(m))
        return -1;
    sm__x_choose(m);
    if (sm_lf_finish(&m->lf, m->sites, m->nsites, cls) || sm__marks_finish(m))
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

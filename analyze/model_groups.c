/* Site groups (model_groups.h): the sites of one layer and device whose
 * labels read the same (label.h sm_site_group) are one (driver memory: of
 * one library, category.h, and the same label), with the figures of
 * their sum over time, from the file's change log replayed (analysis.h);
 * the top groups of the stacked layer per device by peak get the ranks
 * (the timeline's colours, the legends, summary's lists).
 */
#include "model_int.h"

#include <stdlib.h>

#include "util/hash.h"

static _Thread_local const sm_model *sort_model; /* qsort has no context argument; one per thread (-j) */

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
int sm__build_groups(sm_model *m)
{
    const msnap_state *st = &m->f->st;
    const sm_labels *lab = an_labels(m->f);
    u64map ix = {0};
    free(m->groups);
    m->groups = calloc(m->nsites + 1, sizeof *m->groups);
    m->ngroups = 0;
    if (!m->groups)
        return -1;
    for (size_t i = 0; i < m->nsites; i++) {
        sm_site *s = &m->sites[i];
        const msnap_site *ss = &st->sites[i];
        uint32_t lg = s->stack ? sm_site_group(lab, s->stack) : UINT32_MAX;
        /* unknown stacks stay sites of their own */
        uint64_t key = lg != UINT32_MAX ? lg : (uint64_t)s->stack << 32 | 0x80000000u;
        /* driver memory: by library first, then label (a cuBLAS handle and a
         * PyTorch segment made under one line of the model are two sites) */
        if (lg != UINT32_MAX && ss->layer == MSNAP_LAYER_RESERVED) {
            char lib[128];
            cat_library_stack(&m->f->tab, s->stack, lib, sizeof lib);
            key |= (uint64_t)(msnap_fnv1a32_str(lib) & 0x7fffffffu) << 32;
        }
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


/* After sm__build_groups: the top groups of the stacked layer per device
 * by peak (the timeline's colours, the legends' order), their ranks given
 * to their sites.  0 ok, -1 out of memory. */
int sm__rank_groups(sm_model *m)
{
    int cls = stacked_cls(m);
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
    return 0;
}

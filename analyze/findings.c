/* Findings over the state model (findings.h has what each one means and
 * the leak finder's algorithm). */
#include "findings.h"

#include <stdlib.h>
#include <string.h>

int sm_lf_touch(sm_leakfinder *m, sm_site *s, uint32_t idx)
{
    if (s->snap_ver != m->cand_ver) {
        s->snap = s->live;
        s->snap_ver = m->cand_ver;
    }
    if (s->dirty != m->serial + 1) {
        if (msnap_grow((void **)&m->dirty, &m->cap_dirty, m->ndirty,
                 sizeof *m->dirty))
            return -1;
        m->dirty[m->ndirty++] = idx;
        s->dirty = m->serial + 1;
    }
    return 0;
}

/* Confirms the candidate valley: folds the live bytes at the candidate of
 * every site touched since the previous valley into its rise/fall counts. */
static int valley_commit(sm_leakfinder *m, sm_site *sites, int cls)
{
    size_t keep = 0;
    for (size_t i = 0; i < m->ndirty; i++) {
        sm_site *s = &sites[m->dirty[i]];
        if (s->cls != cls)
            continue;
        uint64_t v = s->snap_ver == m->cand_ver ? s->snap : s->live;
        if (!m->nvalleys) {
            s->v_first = s->v_last = v;
            s->in_valleys = 1;
        } else {
            if (!s->in_valleys) {
                s->v_first = s->v_last = 0;
                s->in_valleys = 1;
            }
            if (v > s->v_last)
                s->rises++;
            else if (v < s->v_last)
                s->falls++;
            s->v_last = v;
        }
        /* Touched after the valley: its bytes may differ at the next one. */
        if (s->snap_ver == m->cand_ver)
            m->dirty[keep++] = m->dirty[i];
    }
    m->ndirty = keep;
    m->serial++;
    for (size_t i = 0; i < m->ndirty; i++)
        sites[m->dirty[i]].dirty = m->serial + 1;
    if (!m->nvalleys)
        m->floor_first = m->lk_min;
    m->floor_last = m->lk_min;
    m->nvalleys++;
    return 0;
}

int sm_lf_step(sm_leakfinder *m, sm_site *sites, int cls)
{
    if (m->T > m->lk_maxever)
        m->lk_maxever = m->T;
    uint64_t thr = m->lk_maxever / 100;
    if (thr < 1)
        thr = 1;
    if (!m->falling) {
        if (m->T > m->lk_max)
            m->lk_max = m->T;
        else if (m->lk_max - m->T >= thr) {
            m->falling = 1;
            m->lk_min = m->T;
            m->cand_ver++;
        }
    } else if (m->T < m->lk_min) {
        m->lk_min = m->T;
        m->cand_ver++;
    } else if (m->T - m->lk_min >= thr) {
        if (valley_commit(m, sites, cls))
            return -1;
        m->falling = 0;
        m->lk_max = m->T;
    }
    return 0;
}

void sm_lf_restart(sm_leakfinder *f, uint64_t T)
{
    f->T = T;
    f->nvalleys = 0;
    f->falling = 0;
    f->lk_max = f->lk_maxever = T;
    f->ndirty = 0;
    f->serial++;
    f->cand_ver++;
}

/* Largest growth first, then site index. */
static int cmp_leak(const void *a, const void *b)
{
    const sm_leak *x = a, *y = b;
    uint64_t gx = x->last - x->first, gy = y->last - y->first;
    if (gx != gy)
        return gx > gy ? -1 : 1;
    return x->site < y->site ? -1 : x->site > y->site;
}

int sm_lf_finish(sm_leakfinder *f, const sm_site *sites, size_t n, int cls)
{
    f->nleaks = 0;
    if (f->nvalleys < 3)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const sm_site *s = &sites[i];
        if (s->cls != cls || !s->in_valleys)
            continue;
        /* ... and still holds memory at the end: a step that settles
         * (gradients after the first backward) is not a leak */
        if (s->rises >= 2 && s->falls * 3 <= s->rises && s->v_last > s->v_first && s->live) {
            sm_leak *nl = realloc(f->leaks, (f->nleaks + 1) * sizeof *nl);
            if (!nl)
                return -1;
            f->leaks = nl;
            f->leaks[f->nleaks++] = (sm_leak){.site = (uint32_t)i,
                                              .first = s->v_first,
                                              .last = s->v_last,
                                              .rises = s->rises,
                                              .falls = s->falls};
        }
    }
    if (f->nleaks)
        qsort(f->leaks, f->nleaks, sizeof *f->leaks, cmp_leak);
    return 0;
}

void sm_lf_free(sm_leakfinder *f)
{
    free(f->dirty);
    free(f->leaks);
    memset(f, 0, sizeof *f);
}

double sm_frag_free(uint64_t total_free, uint64_t largest_free)
{
    return total_free ? 1.0 - (double)largest_free / (double)total_free : 0.0;
}

double sm_frag_peak(uint64_t peak_allocated, uint64_t peak_reserved)
{
    return peak_reserved ? 1.0 - (double)peak_allocated / (double)peak_reserved
                         : -1.0;
}

const char *sm_oom_verdict(const sm_oom *o)
{
    if (!o->blocks_seen) {
        if (o->dev_total && o->requested > o->dev_free)
            return "the device did not have the requested bytes free; no "
                   "allocator blocks, so memory cached inside reserved is "
                   "not known";
        return "no allocator blocks, so memory cached inside reserved is "
               "not known";
    }
    if (o->largest_free >= o->requested)
        return "the largest free block inside reserved would have held it: "
               "the allocator asked the driver instead of reusing its cache";
    if (o->total_free >= o->requested)
        return "enough memory was free in total (inside reserved + on the "
               "device), but no single free block was large enough: "
               "fragmentation";
    /* An allocator's own refusal while the device still had the bytes: the
     * allocator's limit (PyTorch's per-process memory fraction, memsnap's
     * cap), not the device and not fragmentation, stopped it. */
    if ((o->api == MSNAP_API_TORCH || o->api == MSNAP_API_ALLOCATOR) &&
        o->dev_total && o->dev_free >= o->requested)
        return "the device had the requested bytes free, but the allocator's "
               "own limit refused them (PyTorch: "
               "torch.cuda.set_per_process_memory_fraction; memsnap's "
               "allocator: its cap)";
    if (o->total_free + o->dev_free >= o->requested)
        return "enough memory was free in total (inside reserved + on the "
               "device), but no single free block was large enough: "
               "fragmentation";
    return "the device was full: even all free memory together was smaller "
           "than the request";
}

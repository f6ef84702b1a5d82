/* What was live at the peak, by site (atpeak.h): one replay of the change
 * log, the sites' live bytes kept by group and category, copied when the
 * replay passes the peak's event. */
#include "atpeak.h"

#include <stdlib.h>
#include <string.h>

typedef struct ap_run {
    const an_file *f;
    const sm_site *sites;
    size_t nsites;
    int layer;
    uint64_t peak_ev;
    const uint8_t *chg;        /* the breakdown's category of each change */
    size_t nchg, ichg;
    size_t ngroups;
    uint64_t *bytes, *objects, *cat;   /* live now: per group, per group x CAT_MAX */
    uint64_t *pbytes, *pobjects, *pcat; /* at the peak */
    uint64_t t_ns;
    int taken;
} ap_run;

static void take(ap_run *a)
{
    if (a->taken)
        return;
    a->taken = 1;
    memcpy(a->pbytes, a->bytes, a->ngroups * sizeof *a->bytes);
    memcpy(a->pobjects, a->objects, a->ngroups * sizeof *a->objects);
    memcpy(a->pcat, a->cat, a->ngroups * CAT_MAX * sizeof *a->cat);
}

static void ap_event(void *ctx, uint64_t idx, uint64_t t)
{
    ap_run *a = ctx;
    if (idx > a->peak_ev)
        take(a);
    else
        a->t_ns = t;
}

static void ap_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch, uint64_t key)
{
    (void)torch;
    (void)key;
    ap_run *a = ctx;
    uint8_t c = a->ichg < a->nchg ? a->chg[a->ichg] : BD_NOT_COUNTED;
    a->ichg++;
    if (a->taken || site >= a->nsites || site >= a->f->st.nsites ||
        a->f->st.sites[site].layer != a->layer)
        return;
    uint32_t g = a->sites[site].grp;
    if (g >= a->ngroups)
        return;
#define ADJ(x) ((x) = sign > 0 ? (x) + n : (x) - (n < (x) ? n : (x)))
    ADJ(a->bytes[g]);
    if (c != BD_NOT_COUNTED && c < CAT_MAX)
        ADJ(a->cat[(size_t)g * CAT_MAX + c]);
#undef ADJ
    if (sign > 0)
        a->objects[g]++;
    else if (a->objects[g])
        a->objects[g]--;
}

static int cmp_site(const void *x, const void *y)
{
    const ap_site *a = x, *b = y;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->grp < b->grp ? -1 : a->grp > b->grp;
}

int ap_compute(ap_result *r, const an_file *f, const sm_model *m, const breakdown *bd)
{
    memset(r, 0, sizeof *r);
    ap_run a = {.f = f};
    a.layer = f->st.allocated_seen ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED;
    r->layer = a.layer;
    a.peak_ev = f->st.all[a.layer].peak_ev;
    if (!a.peak_ev || !f->st.all[a.layer].peak)
        return 0;                      /* nothing ever lived */
    a.sites = sm_sites(m, &a.nsites);
    sm_groups(m, &a.ngroups);
    if (bd)
        a.chg = bd_change_categories(bd, &a.nchg);
    size_t ng = a.ngroups + 1;
    a.bytes = calloc(ng, sizeof *a.bytes);
    a.objects = calloc(ng, sizeof *a.objects);
    a.cat = calloc(ng * CAT_MAX, sizeof *a.cat);
    a.pbytes = calloc(ng, sizeof *a.pbytes);
    a.pobjects = calloc(ng, sizeof *a.pobjects);
    a.pcat = calloc(ng * CAT_MAX, sizeof *a.pcat);
    int rc = -1;
    if (!a.bytes || !a.objects || !a.cat || !a.pbytes || !a.pobjects || !a.pcat)
        goto out;
    an_visitor v = {.ctx = &a, .event = ap_event, .change = ap_change};
    if (an_replay(f, &v))
        goto out;
    take(&a);                          /* the peak's event was the last one */
    size_t n = 0;
    for (size_t g = 0; g < a.ngroups; g++)
        n += a.pbytes[g] > 0;
    if (!(r->sites = calloc(n + 1, sizeof *r->sites)))
        goto out;
    for (size_t g = 0; g < a.ngroups; g++) {
        if (!a.pbytes[g])
            continue;
        ap_site *s = &r->sites[r->nsites++];
        s->grp = (uint32_t)g;
        s->bytes = a.pbytes[g];
        s->objects = a.pobjects[g];
        memcpy(s->cat, &a.pcat[g * CAT_MAX], sizeof s->cat);
        r->bytes += s->bytes;
        r->objects += s->objects;
        for (int c = 0; c < CAT_MAX; c++)
            r->cat[c] += s->cat[c];
    }
    if (r->nsites)
        qsort(r->sites, r->nsites, sizeof *r->sites, cmp_site);
    r->found = 1;
    r->event_index = a.peak_ev;
    r->t_ns = f->st.all[a.layer].peak_t;
    rc = 0;
out:
    free(a.bytes);
    free(a.objects);
    free(a.cat);
    free(a.pbytes);
    free(a.pobjects);
    free(a.pcat);
    if (rc)
        ap_free(r);
    return rc;
}

void ap_free(ap_result *r)
{
    free(r->sites);
    memset(r, 0, sizeof *r);
}

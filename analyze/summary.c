/* The summary's counts (summary.h): an observer of the one read
 * (analysis.h).  What an event does to live memory is the state model's
 * (state.h); this file keeps the counts, failures and marks that only the
 * summary prints. */
#include "summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symtab.h" /* sm_dupstr */

void summary_init(summary *s, int want_marks)
{
    memset(s, 0, sizeof *s);
    s->want_marks = want_marks;
}

/* Appends a failure to a list capped at SUM_MAX_LISTED.  -1 no memory. */
static int fail_push(sum_fail **list, size_t *n, const msnap_event *e)
{
    if (*n >= SUM_MAX_LISTED)
        return 0;
    sum_fail *nl = realloc(*list, (*n + 1) * sizeof **list);
    if (!nl)
        return -1;
    *list = nl;
    nl[(*n)++] = (sum_fail){.t = e->t_ns, .size = e->size, .dev_free = e->aux,
                           .dev_total = e->aux2, .addr = e->addr,
                           .action = e->action, .api = e->api,
                           .device = e->device, .result = e->result,
                           .stack = e->stack};
    return 0;
}

/* Records the per-device values at an nvtx_mark.  -1 no memory. */
static int mark_push(summary *s, const msnap_event *e)
{
    if (s->nmarks >= SUM_MAX_LISTED * 100)
        return 0;
    int ndev = s->ndevinfo;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (s->st->seen[d] && d + 1 > ndev)
            ndev = d + 1;
    sum_mark *nm = realloc(s->marks, (s->nmarks + 1) * sizeof *nm);
    if (!nm)
        return -1;
    s->marks = nm;
    sum_mark *m = &nm[s->nmarks];
    m->t = e->t_ns;
    m->str = (uint32_t)e->aux;
    m->ndev = ndev;
    m->vals = ndev ? calloc((size_t)ndev, sizeof *m->vals) : NULL;
    if (ndev && !m->vals)
        return -1;
    for (int d = 0; d < ndev; d++) {
        m->vals[d].reserved = s->st->lv[d][MSNAP_LAYER_RESERVED].cur;
        m->vals[d].async = s->st->lv[d][MSNAP_LAYER_ASYNC].cur;
        m->vals[d].allocated = s->st->lv[d][MSNAP_LAYER_ALLOCATED].cur;
    }
    s->nmarks++;
    return 0;
}

/* Counts one event and keeps it when it is a failure or a mark; what it
 * does to live memory is the state's.  -1 out of memory. */
static int count_event(summary *s, const msnap_event *e)
{
    s->events++;
    if (e->action == MSNAP_A_BLOCK_ALLOC && e->api == MSNAP_API_TORCH)
        s->torch_blocks = 1;
    if (e->action < MSNAP_A_COUNT)
        s->by_action[e->action]++;
    if (e->api < MSNAP_API_COUNT)
        s->by_api[e->api]++;
    if (e->t_ns > s->t_last)
        s->t_last = e->t_ns;
    switch (e->action) {
    case MSNAP_A_OOM:
        s->n_oom++;
        return fail_push(&s->fails, &s->nfails, e);
    case MSNAP_A_ALLOC_ERROR:
        s->n_alloc_error++;
        return fail_push(&s->fails, &s->nfails, e);
    case MSNAP_A_FREE_ERROR:
        s->n_free_error++;
        return fail_push(&s->free_fails, &s->nfree_fails, e);
    case MSNAP_A_NVTX_MARK:
        s->n_marks++;
        return s->want_marks ? mark_push(s, e) : 0;
    default:
        return 0;
    }
}

/* Records the header.  -1 no memory. */
static int take_header(summary *s, const msnap_header *h)
{
    s->have_header = 1;
    s->major = h->major;
    s->minor = h->minor;
    s->pid = h->pid;
    s->has_rank = h->has_rank;
    s->rank = h->rank;
    snprintf(s->host, sizeof s->host, "%s", h->host);
    snprintf(s->mode, sizeof s->mode, "%s", h->mode);
    s->t0_unix_ns = h->t0_unix_ns;
    s->argc = h->argc > 0 ? h->argc : 0;
    s->argv = calloc((size_t)s->argc + 1, sizeof *s->argv);
    if (!s->argv)
        return -1;
    for (int i = 0; i < s->argc; i++)
        if (!(s->argv[i] = sm_dupstr(h->argv[i])))
            return -1;
    s->ndevinfo = h->ndevices < 0 ? 0
                : h->ndevices > MSNAP_MAX_DEVICES ? MSNAP_MAX_DEVICES
                                                  : h->ndevices;
    memcpy(s->devinfo, h->devices, (size_t)s->ndevinfo * sizeof *s->devinfo);
    return 0;
}

/* Adds or replaces a device description from a "device" record. */
static void take_device(summary *s, const msnap_device_info *d)
{
    for (int i = 0; i < s->ndevinfo; i++)
        if (s->devinfo[i].index == d->index) {
            s->devinfo[i] = *d;
            return;
        }
    if (s->ndevinfo < MSNAP_MAX_DEVICES)
        s->devinfo[s->ndevinfo++] = *d;
}

/* Live-at-end count/bytes per slot: RESERVED objects on device slots,
 * PINNED objects on the host slot; the pre-window objects still live at
 * the end (a ring dump's state section) included. */
static void finish_live(summary *s, const an_file *f)
{
    const msnap_state *st = s->st;
    for (size_t i = 0; i < st->map.cap + st->npre; i++) {
        const msnap_obj *o;
        if (i < st->map.cap) {
            if (!st->map.slots[i].used)
                continue;
            o = &st->objs[st->map.slots[i].value];
        } else {
            size_t k = i - st->map.cap;
            if (!f->pre_freed || f->pre_freed[k] != UINT64_MAX)
                continue;
            o = &st->pre[k].o;
        }
        if (msnap_state_counts_in(o->kind, o->device, MSNAP_LAYER_RESERVED) ||
            msnap_state_counts_in(o->kind, o->device, MSNAP_LAYER_PINNED)) {
            s->live_count[o->device]++;
            s->live_bytes[o->device] += o->size;
        }
        if (o->kind == MSNAP_A_BLOCK_ALLOC) {
            s->blocks_live_count++;
            s->blocks_live_bytes += o->size;
        }
    }
}

/* Every record of the read (an_observer.record), after the state took it. */
static int on_record(void *ctx, an_file *f, const msnap_record *r)
{
    summary *s = ctx;
    (void)f;
    s->lines = r->line;
    switch (r->type) {
    case MSNAP_REC_HEADER:
        return s->have_header ? 0 : take_header(s, &r->u.header);
    case MSNAP_REC_DEVICE:
        take_device(s, &r->u.device);
        return 0;
    case MSNAP_REC_EVENT:
        return count_event(s, &r->u.event);
    case MSNAP_REC_COUNTERS:
        if (r->u.counters.t_ns > s->t_last)
            s->t_last = r->u.counters.t_ns;
        return 0;
    case MSNAP_REC_TRAILER:
        s->trailer_seen = 1;
        s->tr_events = r->u.trailer.events;
        s->tr_dropped = r->u.trailer.dropped;
        s->tr_stacks_dropped = r->u.trailer.stacks_dropped;
        snprintf(s->tr_reason, sizeof s->tr_reason, "%s",
                 r->u.trailer.reason ? r->u.trailer.reason : "");
        if (r->u.trailer.t_ns > s->t_last)
            s->t_last = r->u.trailer.t_ns;
        return 0;
    default:
        return 0;
    }
}

/* After the read: what is live at the end, per slot. */
static int on_end(void *ctx, an_file *f)
{
    summary *s = ctx;
    s->truncated = f->truncated;
    finish_live(s, f);
    return 0;
}

/* A block came or went: the requested bytes live, and their value when the
 * device's allocated level reaches a new peak. */
static int on_change(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    summary *s = ctx;
    if (o->kind != MSNAP_A_BLOCK_ALLOC || !o->req)
        return 0;
    int d = o->device;
    s->req_seen = 1;
    if (sign > 0)
        s->req_live[d] += o->req;
    else
        s->req_live[d] -= o->req < s->req_live[d] ? o->req : s->req_live[d];
    const msnap_level *l = &f->st.lv[d][MSNAP_LAYER_ALLOCATED];
    if (sign > 0 && l->peak_ev == f->ev_idx && l->cur == l->peak)
        s->req_at_peak[d] = s->req_live[d];
    return 0;
}

int summary_attach(summary *s, an_file *f)
{
    static const an_observer obs = {NULL, on_record, NULL, NULL, on_change, on_end};
    an_observer o = obs;
    o.ctx = s;
    s->st = &f->st;
    return an_observe(f, &o);
}

/* Orders sites by peak descending, then stack id ascending. */
static int site_before(const msnap_site *x, const msnap_site *y)
{
    if (x->peak != y->peak)
        return x->peak > y->peak;
    return x->stack < y->stack;
}

size_t summary_top_sites(const summary *s, int layer, const msnap_site **out,
                         size_t max)
{
    /* Insertion into a short sorted list: max is a --top count. */
    size_t n = 0;
    for (size_t i = 0; i < s->st->nsites && max; i++) {
        const msnap_site *x = &s->st->sites[i];
        if (x->layer != layer || !x->count)
            continue;
        size_t j = n < max ? n++ : max;
        while (j > 0 && site_before(x, out[j - 1])) {
            if (j < max)
                out[j] = out[j - 1];
            j--;
        }
        if (j < max)
            out[j] = x;
    }
    return n;
}

void summary_free(summary *s)
{
    for (int i = 0; s->argv && i < s->argc; i++)
        free(s->argv[i]);
    free(s->argv);
    free(s->fails);
    free(s->free_fails);
    for (size_t i = 0; i < s->nmarks; i++)
        free(s->marks[i].vals);
    free(s->marks);
    memset(s, 0, sizeof *s);
}

/* The request stream of a recording (requests.h): one read through the
 * analysis library, the replay's events spilled as they come. */
#include "requests.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The events a replay looks at (whatever the level it ends up at). */
static int wanted(int action)
{
    switch (action) {
    case MSNAP_A_BLOCK_ALLOC: case MSNAP_A_BLOCK_FREE: case MSNAP_A_OOM: case MSNAP_A_ALLOC_ERROR:
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_FREE: case MSNAP_A_ASYNC_FREE:
    case MSNAP_A_VMM_MAP: case MSNAP_A_VMM_UNMAP: case MSNAP_A_VMM_CREATE:
    case MSNAP_A_SEGMENT_ALLOC: case MSNAP_A_SEGMENT_FREE:
    case MSNAP_A_SEGMENT_MAP: case MSNAP_A_SEGMENT_UNMAP:
    case MSNAP_A_NVTX_PUSH: case MSNAP_A_NVTX_POP: case MSNAP_A_NVTX_MARK:
        return 1;
    default:
        return 0;
    }
}

static int put(rq_stream *q, an_file *f, const spill_rec *r)
{
    if (spill_put(&q->items, r)) {
        char m[200];
        snprintf(m, sizeof m, "cannot write a temporary file: %s", strerror(errno));
        an_fail(f, m);
        return -1;
    }
    q->n++;
    return 0;
}

static int rq_event_before(void *ctx, an_file *f, const msnap_event *e)
{
    (void)f;
    rq_stream *q = ctx;
    q->in_free_error = e->action == MSNAP_A_FREE_ERROR;
    if (e->action == MSNAP_A_BLOCK_ALLOC && !q->blocks) {
        q->blocks = 1;
        if (e->api == MSNAP_API_TORCH)
            q->torch = q->torch_api = 1;
    }
    return 0;
}

/* An object a refused free put back (state.h): a request of its own. */
static int rq_change(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    rq_stream *q = ctx;
    if (!q->in_free_error || sign < 0 ||
        (o->kind != MSNAP_A_ALLOC && o->kind != MSNAP_A_ASYNC_ALLOC &&
         o->kind != MSNAP_A_BLOCK_ALLOC))
        return 0;
    spill_rec r = {.k1 = RQ_RESTORE};
    r.e = (msnap_event){.t_ns = f->t, .addr = o->addr, .size = o->size, .stream = o->stream,
                        .aux = o->kind == MSNAP_A_BLOCK_ALLOC ? o->aux : 0,
                        .stack = o->stack, .action = o->kind, .api = o->api,
                        .device = (int16_t)(o->device == MSNAP_ST_HOST ? -1 : o->device)};
    return put(q, f, &r);
}

static int rq_record(void *ctx, an_file *f, const msnap_record *rec)
{
    rq_stream *q = ctx;
    if (rec->type == MSNAP_REC_HEADER) {
        const msnap_header *h = &rec->u.header;
        /* memsnap import names its source in argv[0]: the blocks are PyTorch's */
        if (h->argc > 0 && h->argv[0] && !strncmp(h->argv[0], "imported from", 13))
            q->torch = 1;
        for (int i = 0; i < h->ndevices && !q->device_total; i++)
            q->device_total = h->devices[i].total;
        return 0;
    }
    if (rec->type == MSNAP_REC_DEVICE && !q->device_total) {
        q->device_total = rec->u.device.total;
        return 0;
    }
    if (rec->type != MSNAP_REC_EVENT || !wanted(rec->u.event.action))
        return 0;
    spill_rec r = {.k1 = RQ_EVENT, .k2 = f->st.freed.size, .e = rec->u.event};
    return put(q, f, &r);
}

int rq_init(rq_stream *q, const char *path)
{
    memset(q, 0, sizeof *q);
    an_init(&q->f, path);
    an_observer o = {.ctx = q, .record = rq_record, .event_before = rq_event_before,
                     .change = rq_change};
    if (an_observe(&q->f, &o))
        return -1;
    /* the reconciliation (requests.h): the default rules (the categories
     * go unused; the libraries are the same under any rules) */
    if (!(q->bd_rules = cat_rules_new()) || !(q->bd = bd_new(q->bd_rules)) ||
        an_want_log(&q->f) || bd_attach(q->bd, &q->f))
        return -1;
    return 0;
}

int rq_load(rq_stream *q, char *err, size_t errlen)
{
    int rc = an_read(&q->f, err, errlen);
    if (!rc && q->bd) {
        /* the device where the most was measured outside */
        for (int d = 0; d < BD_NDEV; d++) {
            uint64_t ctx, libs;
            int measured = bd_outside(q->bd, d, q->blocks, &ctx, &libs);
            if (ctx + libs > q->outside_context + q->outside_libs) {
                q->outside_context = ctx;
                q->outside_libs = libs;
            }
            q->outside_measured |= measured;
        }
    }
    bd_free(q->bd);
    q->bd = NULL;
    cat_rules_free(q->bd_rules);
    q->bd_rules = NULL;
    return rc;
}

int rq_read(rq_stream *q, const char *path, char *err, size_t errlen)
{
    if (rq_init(q, path)) {
        snprintf(err, errlen, "%s: out of memory", path);
        return 2;
    }
    return rq_load(q, err, errlen);
}

void rq_synth_init(rq_stream *q, const rq_stream *like, const char *name)
{
    memset(q, 0, sizeof *q);
    an_init(&q->f, name);
    q->blocks = like->blocks;
    q->torch = like->torch;
    q->torch_api = like->torch_api;
    q->device_total = like->device_total;
    q->outside_context = like->outside_context;
    q->outside_libs = like->outside_libs;
    q->outside_measured = like->outside_measured;
}

int rq_put(rq_stream *q, const spill_rec *r)
{
    if (spill_put(&q->items, r))
        return -1;
    q->n++;
    return 0;
}

static int is_driver_alloc_api(int api)
{
    return api == MSNAP_API_cuMemAlloc_v2 || api == MSNAP_API_cuMemAllocPitch_v2 ||
           api == MSNAP_API_cuMemAllocAsync || api == MSNAP_API_cuMemAllocAsync_ptsz ||
           api == MSNAP_API_cuMemAllocFromPoolAsync || api == MSNAP_API_cuMemAllocFromPoolAsync_ptsz;
}

int rq_kind(const rq_stream *q, const spill_rec *r)
{
    const msnap_event *e = &r->e;
    int a = e->action, blocks = q->blocks, restore = r->k1 == RQ_RESTORE;
    if (!restore && a == MSNAP_A_OOM &&
        (blocks ? e->api == MSNAP_API_ALLOCATOR || e->api == MSNAP_API_TORCH
                : is_driver_alloc_api(e->api)))
        return RQ_FAILED;
    if (blocks ? a == MSNAP_A_BLOCK_ALLOC : a == MSNAP_A_ALLOC || a == MSNAP_A_ASYNC_ALLOC)
        return RQ_ALLOC;
    if (!restore && (blocks ? a == MSNAP_A_BLOCK_FREE : a == MSNAP_A_FREE || a == MSNAP_A_ASYNC_FREE))
        return RQ_FREE;
    return RQ_OTHER;
}

void rq_free(rq_stream *q)
{
    bd_free(q->bd);
    q->bd = NULL;
    cat_rules_free(q->bd_rules);
    q->bd_rules = NULL;
    an_free(&q->f);
    spill_close(&q->items);
}

int rq_reopen(rq_stream *q)
{
    return spill_reopen(&q->items);
}

int rq_rewind(rq_stream *q)
{
    return spill_rewind(&q->items);
}

int rq_next(rq_stream *q, spill_rec *r)
{
    return spill_get(&q->items, r);
}

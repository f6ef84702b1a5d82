/* events.c: stream safety.
 *
 * Rule: a block freed on stream S is reusable at once by S (S's later work is
 * ordered after the free), by any other stream only after an event recorded
 * on S after the free has completed, and — if record_stream named streams
 * U1..Uk — by nobody until events recorded on U1..Uk at the free complete.
 *
 *  - Streams get a small index in order of first use (deterministic).
 *  - FREE(S) -> FREE(ANY) is lazy and off the hot path: when a malloc on T
 *    misses, every other stream S holding FREE blocks gets one event recorded
 *    (if none is in flight) covering the blocks freed so far (free_seq <=
 *    reclaim_seq); once cuEventQuery says it completed, those blocks become
 *    ANY.  Recording later than the free is conservative, never unsafe.
 *  - PENDING blocks (record_stream) sit in a->pending with one event per
 *    extra stream; ms_process_events (at the start of every malloc while any
 *    are pending) frees them when all their events have completed.  A record
 *    that fails leaves a NULL event, resolved only by a context synchronize.
 *  - After a successful cuCtxSynchronize (empty_cache, OOM retry, GC) every
 *    event is complete: ms_process_events(a, 1) and ms_all_free_to_any.
 *  - Events are recycled through a->events.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int ms_stream_index(memsnap_alloc *a, CUstream s)
{
    if (a->last_stream < a->nstreams && a->streams[a->last_stream].stream == s)
        return a->last_stream;
    for (int i = 0; i < a->nstreams; i++)
        if (a->streams[i].stream == s)
            return a->last_stream = i;
    if (a->nstreams == a->streams_cap) {
        int cap = a->streams_cap ? a->streams_cap * 2 : 8;
        ms_stream *ns = realloc(a->streams, (size_t)cap * sizeof *ns);
        if (!ns) {
            ms_set_error("memsnap_alloc: out of host memory");
            return -1;
        }
        a->streams = ns;
        a->streams_cap = cap;
    }
    ms_stream *st = &a->streams[a->nstreams];
    memset(st, 0, sizeof *st);
    st->stream = s;
    return a->last_stream = a->nstreams++;
}

int ms_event_get(memsnap_alloc *a, CUevent *ev)
{
    if (a->nevents) {
        *ev = a->events[--a->nevents];
        return MEMSNAP_ALLOC_OK;
    }
    CUresult rc = a->drv.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING);
    if (rc != CUDA_SUCCESS)
        return ms_driver_error(&a->drv, "cuEventCreate", rc);
    return MEMSNAP_ALLOC_OK;
}

void ms_event_put(memsnap_alloc *a, CUevent ev)
{
    if (a->nevents == a->events_cap) {
        size_t cap = a->events_cap ? a->events_cap * 2 : 16;
        CUevent *e = realloc(a->events, cap * sizeof *e);
        if (!e) {
            a->drv.cuEventDestroy_v2(ev);
            return;
        }
        a->events = e;
        a->events_cap = cap;
    }
    a->events[a->nevents++] = ev;
}

/* Records a fresh event on stream index si; NULL when that fails. */
static CUevent ms_record_on(memsnap_alloc *a, int si)
{
    CUevent ev;
    if (ms_event_get(a, &ev) != MEMSNAP_ALLOC_OK)
        return NULL;
    CUresult rc = a->drv.cuEventRecord(ev, a->streams[si].stream);
    if (rc != CUDA_SUCCESS) {
        ms_driver_error(&a->drv, "cuEventRecord", rc);
        ms_event_put(a, ev);
        return NULL;
    }
    a->st.event_records++;
    return ev;
}

int ms_pending_add(memsnap_alloc *a, ms_block *b)
{
    size_t need = a->npending + (size_t)b->nuses;
    if (need > a->pending_cap) {
        size_t cap = a->pending_cap ? a->pending_cap : 16;
        while (cap < need)
            cap *= 2;
        ms_pending *p = realloc(a->pending, cap * sizeof *p);
        if (!p) {
            ms_set_error("memsnap_alloc: out of host memory");
            return MEMSNAP_ALLOC_ERR_NOMEM;
        }
        a->pending = p;
        a->pending_cap = cap;
    }
    int pushed = 0;
    int entered = ms_ctx_enter(a, &pushed) == MEMSNAP_ALLOC_OK;
    for (int i = 0; i < b->nuses; i++) {
        ms_pending *p = &a->pending[a->npending++];
        p->b = b;
        p->ev = entered ? ms_record_on(a, b->uses[i]) : NULL;
    }
    if (entered)
        ms_ctx_leave(a, pushed);
    b->npending = b->nuses;
    b->nuses = 0;
    b->state = MEMSNAP_BLOCK_PENDING;
    return MEMSNAP_ALLOC_OK;
}

/* A PENDING block whose last event completed becomes FREE for its stream. */
static void ms_pending_done(memsnap_alloc *a, ms_block *b)
{
    if (--b->npending > 0)
        return;
    a->st.active -= b->size;
    a->st.active_blocks--;
    b->seg->nactive--;
    ms_make_free(a, b, b->stream, ++a->free_seq);
}

void ms_process_events(memsnap_alloc *a, int synced)
{
    size_t keep = 0;
    int pushed = 0, entered = 0;
    if (!synced)
        entered = ms_ctx_enter(a, &pushed) == MEMSNAP_ALLOC_OK;
    for (size_t i = 0; i < a->npending; i++) {
        ms_pending p = a->pending[i];
        int done;
        if (synced)
            done = 1;
        else if (!p.ev || !entered)
            done = 0;
        else
            done = a->drv.cuEventQuery(p.ev) == CUDA_SUCCESS;
        if (!done) {
            a->pending[keep++] = p;
            continue;
        }
        if (p.ev)
            ms_event_put(a, p.ev);
        ms_pending_done(a, p.b);
    }
    a->npending = keep;
    if (entered)
        ms_ctx_leave(a, pushed);
}

static void ms_collect(ms_block *t, ms_block **arr, size_t *n)
{
    if (!t)
        return;
    ms_collect(t->left, arr, n);
    arr[(*n)++] = t;
    ms_collect(t->right, arr, n);
}

/* FREE blocks of stream si with free_seq <= upto become ANY (and merge). */
static void ms_to_any(memsnap_alloc *a, int si, uint64_t upto)
{
    ms_stream *st = &a->streams[si];
    if (!st->nfree)
        return;
    ms_block **arr = malloc(st->nfree * sizeof *arr);
    if (!arr)
        return; /* host OOM: they stay the stream's; still correct */
    size_t n = 0;
    for (int p = 0; p < MS_POOLS; p++)
        ms_collect(st->free_root[p], arr, &n);
    for (size_t i = 0; i < n; i++) {
        ms_block *b = arr[i];
        if (b->free_seq > upto)
            continue;
        ms_free_remove(a, b);
        ms_make_free(a, b, MS_ANY, b->free_seq);
    }
    free(arr);
}

void ms_reclaim(memsnap_alloc *a, int except, int synced)
{
    for (int i = 0; i < a->nstreams; i++) {
        ms_stream *st = &a->streams[i];
        if (i == except || !a->streams[i].nfree)
            continue;
        if (!synced && !st->reclaim_ev) {
            st->reclaim_ev = ms_record_on(a, i);
            if (!st->reclaim_ev)
                continue;
            st->reclaim_seq = a->free_seq;
        }
        if (!synced && a->drv.cuEventQuery(st->reclaim_ev) != CUDA_SUCCESS)
            continue;
        uint64_t upto = synced ? UINT64_MAX : a->streams[i].reclaim_seq;
        if (a->streams[i].reclaim_ev) {
            ms_event_put(a, a->streams[i].reclaim_ev);
            a->streams[i].reclaim_ev = NULL;
        }
        ms_to_any(a, i, upto);
    }
}

void ms_all_free_to_any(memsnap_alloc *a)
{
    ms_reclaim(a, -1, 1);
}

void ms_events_destroy(memsnap_alloc *a)
{
    for (size_t i = 0; i < a->npending; i++)
        if (a->pending[i].ev)
            a->drv.cuEventDestroy_v2(a->pending[i].ev);
    a->npending = 0;
    for (int i = 0; i < a->nstreams; i++)
        if (a->streams[i].reclaim_ev) {
            a->drv.cuEventDestroy_v2(a->streams[i].reclaim_ev);
            a->streams[i].reclaim_ev = NULL;
        }
    for (size_t i = 0; i < a->nevents; i++)
        a->drv.cuEventDestroy_v2(a->events[i]);
    a->nevents = 0;
}

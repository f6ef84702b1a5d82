/* torch_export: a memsnap snapshot as PyTorch's memory snapshot dict —
 * what torch.cuda.memory._snapshot() returns, _dump_snapshot() pickles and
 * PyTorch's memory_viz page loads.  docs/interop.md has the mapping.
 *
 * Two encodings through one writer (docw.c):
 *   - pickle (default): protocol 4, plain data, the shape and keys PyTorch
 *     writes; every distinct frame dict and frames list is written once and
 *     then referred to through the memo, so an entry costs ~50 bytes however
 *     deep its stack.  This is what keeps a 1.4M-entry export at ~80 MB, a
 *     size the browser loads (the same data as JSON is 1.1 GB, past what a
 *     browser string holds).
 *   - JSON: the same dict as text, plus the "memsnap" extension that carries
 *     what torch's schema cannot (header, exact ns times, threads, APIs, raw
 *     stacks, events with no torch action, the exact live set at the
 *     window's end) so `memsnap import` gives back the same events and
 *     knows what was live when the window started.
 *
 * One read of the input through the analysis library (analyze/analysis.h),
 * which keeps the tables and the live state (the live set at the end of
 * the window, a moment, becomes "segments"); the window's events are
 * spilled to a temporary file per device (torch events) or one more (JSON
 * extension events).  The
 * window is --from/--to (time or event index); --max-entries then keeps the
 * newest N trace entries: a ring of the event index of the last N entries
 * gives the first event to keep.  Then the output is written from the spills.
 *
 * time_us is Unix-epoch microseconds (the header's t0_unix_ns + t), which
 * is what torch writes and what memory_viz formats as a date.
 *
 * Beside allocator blocks, another library's driver memory (cuBLAS's
 * workspaces, cuDNN, NCCL: category.h names the library of a stack) is no
 * segment of the allocator's: PyTorch's snapshot has no place for it, and
 * as a segment memory_viz would draw it as the allocator's cache (an
 * inactive block the size of the allocation).  It is left out of
 * "segments" and of the trace (its alloc and free), counted in
 * msnap_interop_stats.other_lib_*, and, in the JSON, kept in the
 * extension's events and live set, so `memsnap import` gives it back.
 */
#include "interop.h"
#include "analyze/analysis.h"
#include "analyze/category.h"
#include "common.h"
#include "docw.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct texp {
    an_file f;                    /* the input: header, tables, state */
    an_moment *win_end;           /* the live set at the window's end */
    msnap_obj *end_objs;          /* its objects (write_segments), for the JSON's "live" */
    size_t nend_objs;
    const msnap_header *hdr;      /* f's, after the read */
    const char *settings;
    msnap_device_info devs[MSNAP_MAX_DEVICES];
    int have_dev[MSNAP_MAX_DEVICES];
    u64map frames_ix;             /* stack id -> index in frames_txt */
    char **frames_txt; size_t nframes_txt, capframes_txt;
    int have_blocks, max_device;
    spill dev[MSNAP_MAX_DEVICES]; /* torch events, per device */
    spill other;                  /* events torch has no action for (JSON) */
    uint64_t nevents;
    const msnap_export_opts *o;
    /* --max-entries: the event index of each of the last max_entries trace
     * entries, a ring; head = oldest once full */
    uint64_t *ring;
    uint64_t ring_head, ring_n, ring_dropped_last;
    int ring_dropped;
    uint64_t entries_window;      /* trace entries without synthesized ones */
    uint64_t syn_extra;           /* synthesized entries, if no block event comes */
    uint64_t first_kept;          /* events with a smaller index are not written */
    uint64_t cut_t_ns;            /* time of the first event written (when cut) */
    uint64_t to_write;            /* trace entries to write (progress reports) */
    int saw_vmm;
    /* pickle memo ids: stack id -> list, ip -> frame dict */
    u64map stack_memo, frame_memo;
    uint64_t empty_frames_id;
    /* other libraries' driver memory beside allocator blocks (left out of
     * torch's segments and trace: other_library) */
    u64map lib_of;                /* stack id -> 1 other library, 2 the allocator's */
    u64map left_addr;             /* (device, addr) of a left-out allocation */
    spill left;                   /* JSON: the left-out events, for the extension */
    docw w;
} texp;

#define GROW(arr, n, cap)                                                            \
    ((n) < (cap) ? 0 : (((cap) = (cap) ? (cap) * 2 : 64),                              \
                         (arr = realloc_or_keep(arr, (cap) * sizeof *(arr))) ? 0 : -1))
static void *realloc_or_keep(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        free(p);
    return q;
}

static int is_torch_event(int a)
{
    switch (a) {
    case MSNAP_A_BLOCK_ALLOC: case MSNAP_A_BLOCK_FREE: case MSNAP_A_ALLOC: case MSNAP_A_FREE:
    case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_ASYNC_FREE: case MSNAP_A_VMM_MAP:
    case MSNAP_A_VMM_UNMAP: case MSNAP_A_OOM:
        return 1;
    }
    return 0;
}

/* Whether a driver allocation made on stack is another library's memory
 * beside the allocator's blocks (the file comment): the file has blocks and
 * the stack's library is known and no allocator (an unknown one, a file
 * without modules, stays a segment). */
static int other_library(texp *x, uint32_t stack)
{
    if (!x->have_blocks || !stack)
        return 0;
    uint64_t *v = u64map_get(&x->lib_of, 1, stack);
    if (v)
        return *v == 1;
    char lib[128];
    cat_library_stack(&x->f.tab, stack, lib, sizeof lib);
    int other = strcmp(lib, CAT_LIB_TORCH) && strcmp(lib, CAT_LIB_MEMSNAP) &&
                strcmp(lib, CAT_LIB_UNKNOWN);
    u64map_put(&x->lib_of, 1, stack, other ? 1 : 2);  /* out of memory: asked again */
    return other;
}

/* Trace entries an event becomes (see write_traces); syn: no allocator
 * blocks seen so far, so reserved allocations get a block of their own. */
static int entries_of(const msnap_event *e, int syn)
{
    switch (e->action) {
    case MSNAP_A_BLOCK_ALLOC: case MSNAP_A_VMM_MAP: case MSNAP_A_VMM_UNMAP: case MSNAP_A_OOM:
        return 1;
    case MSNAP_A_BLOCK_FREE:
        return 2;
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC:
        return syn ? 2 : 1;
    case MSNAP_A_FREE: case MSNAP_A_ASYNC_FREE:
        return syn ? 3 : 1;
    }
    return 0;
}

/* Notes n trace entries of event idx in the --max-entries ring. */
static void ring_note(texp *x, uint64_t idx, int n)
{
    uint64_t cap = x->o->max_entries;
    for (int i = 0; i < n; i++) {
        if (!cap)
            continue;
        if (x->ring_n < cap) {
            x->ring[x->ring_n++] = idx;
            continue;
        }
        x->ring_dropped = 1;
        x->ring_dropped_last = x->ring[x->ring_head];
        x->ring[x->ring_head] = idx;
        x->ring_head = (x->ring_head + 1) % cap;
    }
}

/* An event of the read (an_observer.record, after the state applied it):
 * the window and the spills. */
static int on_record(void *ctx, an_file *f, const msnap_record *rec)
{
    texp *x = ctx;
    if (rec->type != MSNAP_REC_EVENT)
        return 0;
    const msnap_event *e = &rec->u.event;
    const msnap_export_opts *o = x->o;
    uint64_t idx = x->nevents++;
    if (o->to_set && (o->to_is_index ? idx > o->to : e->t_ns > o->to))
        return 0; /* past the window: the state at its end is the moment's */
    an_moment_mark(x->win_end);
    if (e->device > x->max_device && e->device < MSNAP_MAX_DEVICES)
        x->max_device = e->device;
    x->have_blocks = f->st.allocated_seen;
    if (e->action == MSNAP_A_VMM_MAP)
        x->saw_vmm = 1;
    if (o->from_set && (o->from_is_index ? idx < o->from : e->t_ns < o->from))
        return 0; /* before the window: only the state needs it */
    spill_rec sr = {.k1 = idx, .k2 = e->size ? e->size : f->st.freed.size, .e = *e};
    spill *dst = &x->other;
    int torch = is_torch_event(e->action) && e->device >= 0 && e->device < MSNAP_MAX_DEVICES;
    /* a cuMemFree of managed memory: its allocation is no segment_alloc,
     * so its free is no segment_free (memory_viz would take the segment
     * as live before the trace) */
    if (e->action == MSNAP_A_FREE &&
        (f->st.freed.kind == MSNAP_A_MANAGED_ALLOC || f->st.freed.kind == MSNAP_A_HOST_ALLOC))
        torch = 0;
    if (torch) {
        dst = &x->dev[e->device];
        /* the ring counts the entries as they look now (a block event
         * later only makes it keep fewer); the total is made exact at
         * the end, when it is known whether entries are synthesized */
        ring_note(x, idx, entries_of(e, !x->have_blocks));
        x->entries_window += (uint64_t)entries_of(e, 0);
        x->syn_extra += (uint64_t)(entries_of(e, 1) - entries_of(e, 0));
    } else if (!o->json) {
        return 0; /* the pickle has no extension */
    }
    if (spill_put(dst, &sr)) {
        char m[200];
        snprintf(m, sizeof m, "cannot write a temporary file: %s", strerror(errno));
        an_fail(f, m);
        return -1;
    }
    return 0;
}

/* Reads the whole input once: tables, state, spills. */
static int texp_read(texp *x, const char *path, msnap_interop_stats *st, char *err, size_t errlen)
{
    an_init(&x->f, path);
    an_observer o = {.ctx = x, .record = on_record};
    if (an_observe(&x->f, &o) || !(x->win_end = an_moment_new(&x->f))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    x->max_device = -1;
    if (an_read(&x->f, err, errlen)) {
        an_strip_path(&x->f, err);
        return -1;
    }
    x->hdr = &x->f.hdr;
    x->settings = x->f.settings;
    for (int i = 0; i < x->f.ndev; i++)
        if (x->f.dev[i].index >= 0 && x->f.dev[i].index < MSNAP_MAX_DEVICES) {
            x->devs[x->f.dev[i].index] = x->f.dev[i];
            x->have_dev[x->f.dev[i].index] = 1;
        }
    st->events_in = x->nevents;
    if (x->ring_dropped) {
        /* the oldest kept entry's event; if that event also had an entry
         * dropped, start at the next event so no event is half written */
        x->first_kept = x->ring[x->ring_head];
        if (x->ring_dropped_last == x->first_kept)
            x->first_kept++;
    }
    return 0;
}

/* The name, file and line torch shows for one ip: its sym record, else
 * module+0xoffset (file = module path), else 0x<ip> (file "??"). */
static void frame_of(texp *x, uint64_t ip, char *name, size_t namelen, const char **file, int *line)
{
    const sm_symtab *t = &x->f.tab;
    uint64_t *yi = u64map_get(&t->sym_map, 0, ip);
    const sm_sym *y = yi ? &t->syms[*yi] : NULL;
    if (y && y->fn[0]) {
        snprintf(name, namelen, "%s", y->fn);
        *file = y->file[0] ? y->file : "??";
        *line = y->line;
        return;
    }
    const sm_module *mod = NULL;
    for (size_t k = 0; k < t->nmods; k++)
        if (ip >= t->mods[k].base && ip - t->mods[k].base < t->mods[k].size)
            mod = &t->mods[k];
    *line = 0;
    if (mod) {
        const char *base = strrchr(mod->path, '/');
        snprintf(name, namelen, "%s+0x%" PRIx64, base ? base + 1 : mod->path, ip - mod->base);
        *file = mod->path;
    } else {
        snprintf(name, namelen, "0x%" PRIx64, ip);
        *file = "??";
    }
}

/* The stack record of an id, NULL when the file has none. */
static const sm_stack_rec *stack_of(texp *x, uint32_t id)
{
    uint64_t *ix = id ? u64map_get(&x->f.tab.stack_map, 0, id) : NULL;
    return ix ? &x->f.tab.stacks[*ix] : NULL;
}

/* The frames list of a stack id as JSON text, cached. */
static const char *frames_json(texp *x, uint32_t id)
{
    const sm_stack_rec *s = stack_of(x, id);
    if (!s)
        return "[]";
    uint64_t *fx = u64map_get(&x->frames_ix, 0, id);
    if (fx)
        return x->frames_txt[*fx];
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return "[]";
    putc('[', m);
    for (int i = 0; i < s->depth; i++) {
        char name[600];
        const char *file;
        int line;
        frame_of(x, s->ips[i], name, sizeof name, &file, &line);
        fputs(i ? ",{\"name\":" : "{\"name\":", m);
        jw_str(m, name);
        fputs(",\"filename\":", m);
        jw_str(m, file);
        fprintf(m, ",\"line\":%d}", line);
    }
    putc(']', m);
    fclose(m);
    if (!buf)
        return "[]";
    if (GROW(x->frames_txt, x->nframes_txt, x->capframes_txt) ||
        u64map_put(&x->frames_ix, 0, id, x->nframes_txt)) {
        x->w.failed = 1;
        free(buf);
        return "[]";
    }
    x->frames_txt[x->nframes_txt++] = buf;
    return buf;
}

/* The frames list of a stack id as a value: JSON text, or in the pickle a
 * memo reference once the list (and each frame dict) has been written. */
static void write_frames(texp *x, uint32_t id)
{
    docw *w = &x->w;
    if (w->mode == DOCW_JSON) {
        docw_raw(w, frames_json(x, id));
        return;
    }
    const sm_stack_rec *s = stack_of(x, id);
    if (!s || !s->depth) {
        if (x->empty_frames_id) {
            docw_get(w, x->empty_frames_id);
            return;
        }
        docw_list(w);
        x->empty_frames_id = docw_new_id(w);
        docw_put(w, x->empty_frames_id);
        docw_end(w);
        return;
    }
    uint64_t *memo = u64map_get(&x->stack_memo, 0, id);
    if (memo) {
        docw_get(w, *memo);
        return;
    }
    docw_list(w);
    uint64_t lid = docw_new_id(w);
    docw_put(w, lid);
    for (int i = 0; i < s->depth; i++) {
        uint64_t ip = s->ips[i];
        uint64_t *fm = u64map_get(&x->frame_memo, 0, ip);
        if (fm) {
            docw_get(w, *fm);
            continue;
        }
        char name[600];
        const char *file;
        int line;
        frame_of(x, ip, name, sizeof name, &file, &line);
        docw_dict(w);
        uint64_t fid = docw_new_id(w);
        docw_put(w, fid);
        docw_key(w, "name");
        docw_str(w, name);
        docw_key(w, "filename");
        docw_str(w, file);
        docw_key(w, "line");
        docw_int(w, line);
        docw_end(w);
        if (u64map_put(&x->frame_memo, 0, ip, fid))
            w->failed = 1;
    }
    docw_end(w);
    if (u64map_put(&x->stack_memo, 0, id, lid))
        w->failed = 1;
}

/* Our event as a JSON object in the snapshot's own short keys, plus "i". */
static void event_json(FILE *f, const msnap_event *e, uint64_t i)
{
    fprintf(f, "{\"i\":%" PRIu64 ",\"a\":\"%s\",\"t\":%" PRIu64, i, msnap_action_name(e->action), e->t_ns);
    if (e->device) fprintf(f, ",\"d\":%d", e->device);
    if (e->addr) fprintf(f, ",\"p\":%" PRIu64, e->addr);
    if (e->size) fprintf(f, ",\"n\":%" PRIu64, e->size);
    if (e->stream) fprintf(f, ",\"s\":%" PRIu64, e->stream);
    if (e->aux) fprintf(f, ",\"x\":%" PRIu64, e->aux);
    if (e->aux2) fprintf(f, ",\"y\":%" PRIu64, e->aux2);
    if (e->stack) fprintf(f, ",\"k\":%u", e->stack);
    if (e->seq) fprintf(f, ",\"q\":%" PRIu64, e->seq);
    if (e->tid) fprintf(f, ",\"th\":%u", e->tid);
    if (e->api) fprintf(f, ",\"f\":\"%s\"", msnap_api_name(e->api));
    if (e->result) fprintf(f, ",\"r\":%d", e->result);
    putc('}', f);
}

/* One torch trace entry, keys in the order torch writes them.  syn:
 * synthesized (no allocator blocks seen); JSON adds the exact event. */
static void entry(texp *x, const char *action, uint64_t addr, uint64_t size,
                  const msnap_event *e, uint64_t i, uint64_t time_us, int syn, int oom)
{
    docw *w = &x->w;
    docw_dict(w);
    docw_key(w, "action");
    docw_istr(w, action);
    docw_key(w, oom ? "device_free" : "addr");
    docw_uint(w, addr);
    docw_key(w, "size");
    docw_uint(w, size);
    docw_key(w, "stream");
    docw_int(w, (int64_t)e->stream);
    docw_key(w, "time_us");
    docw_uint(w, time_us);
    docw_key(w, "frames");
    write_frames(x, e->stack);
    if (w->mode == DOCW_JSON) {
        docw_key(w, "memsnap");
        if (syn) {
            docw_raw(w, "{\"syn\":1}");
        } else {
            char *buf = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&buf, &len);
            if (m) {
                event_json(m, e, i);
                fclose(m);
            }
            docw_raw(w, buf ? buf : "{}");
            free(buf);
        }
    }
    docw_end(w);
}

/* ---- segments (the final state) ------------------------------------------- */

typedef struct vec { void *v; size_t n, cap, sz; } vec;

static void vec_add(void *ctx, const trk_obj *o)
{
    vec *v = ctx;
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        void *nv = realloc(v->v, nc * v->sz);
        if (!nv)
            return;
        v->v = nv;
        v->cap = nc;
    }
    memcpy((char *)v->v + v->n++ * v->sz, o, v->sz);
}

static int cmp_obj(const void *a, const void *b)
{
    const trk_obj *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* One block of a segment, keys in torch's order. */
static void write_block(texp *x, uint64_t addr, uint64_t size, const char *state, uint32_t stack)
{
    docw *w = &x->w;
    docw_dict(w);
    docw_key(w, "address");
    docw_uint(w, addr);
    docw_key(w, "size");
    docw_uint(w, size);
    docw_key(w, "requested_size");
    docw_uint(w, strcmp(state, "inactive") ? size : 0);
    docw_key(w, "state");
    docw_istr(w, state);
    docw_key(w, "frames");
    write_frames(x, stack);
    docw_end(w);
}

/* A segment's own keys, up to "blocks" (left open for the caller); pool:
 * the pool of its blocks (memsnap/format.h, "Memory pools"; 0 the default),
 * written as PyTorch's MempoolId_t. */
static void segment_head(texp *x, const trk_obj *s, uint64_t used, int expandable, int synthesized,
                         uint32_t stack, uint64_t pool)
{
    docw *w = &x->w;
    docw_dict(w);
    docw_key(w, "device");
    docw_int(w, s->device);
    docw_key(w, "address");
    docw_uint(w, s->addr);
    docw_key(w, "total_size");
    docw_uint(w, s->size);
    docw_key(w, "allocated_size");
    docw_uint(w, used);
    docw_key(w, "active_size");
    docw_uint(w, used);
    docw_key(w, "requested_size");
    docw_uint(w, used);
    docw_key(w, "stream");
    docw_int(w, (int64_t)s->stream);
    docw_key(w, "segment_type");
    docw_istr(w, s->size <= (synthesized ? (1u << 20) : (2u << 20)) ? "small" : "large");
    docw_key(w, "segment_pool_id");
    docw_list(w);
    docw_int(w, pool & MSNAP_POOL_HANDLE ? 0 : (int64_t)pool);
    docw_int(w, pool & MSNAP_POOL_HANDLE ? (int64_t)(pool & ~MSNAP_POOL_HANDLE) : 0);
    docw_end(w);
    docw_key(w, "is_expandable");
    docw_bool(w, expandable);
    if (synthesized) {
        docw_key(w, "memsnap_synthesized");
        docw_bool(w, 1);
    }
    docw_key(w, "frames");
    write_frames(x, stack);
    docw_key(w, "blocks");
    docw_list(w);
}

static int write_segments(texp *x, msnap_interop_stats *st)
{
    docw *w = &x->w;
    vec segs = {.sz = sizeof(trk_obj)}, maps = {.sz = sizeof(trk_obj)}, blocks = {.sz = sizeof(trk_obj)};
    msnap_obj *objs;
    size_t n;
    uint64_t idx, t;
    if (an_moment_objects(x->win_end, &objs, &n, &idx, &t))
        return -1;
    for (size_t i = 0; i < n; i++) {
        trk_obj o = trk_of(&objs[i]);
        switch (o.layer) {
        case TRK_ALLOC: case TRK_ASYNC:
            if (other_library(x, o.stack)) {
                st->other_lib_allocs++;
                st->other_lib_bytes += o.size;
            } else {
                vec_add(&segs, &o);
            }
            break;
        case TRK_VMM_MAP: vec_add(&maps, &o); break;
        case TRK_BLOCK: vec_add(&blocks, &o); break;
        default: break;
        }
    }
    x->end_objs = objs;
    x->nend_objs = n;
    if (maps.n) /* qsort wants a non-NULL base even for 0 elements */
        qsort(maps.v, maps.n, sizeof(trk_obj), cmp_obj);
    /* neighbouring mappings are one expandable segment */
    trk_obj *mp = maps.v;
    for (size_t i = 0; i < maps.n;) {
        trk_obj run = mp[i];
        size_t j = i + 1;
        while (j < maps.n && mp[j].device == run.device && mp[j].addr == run.addr + run.size)
            run.size += mp[j++].size;
        run.layer = TRK_VMM_MAP;
        vec_add(&segs, &run);
        i = j;
    }
    if (segs.n)
        qsort(segs.v, segs.n, sizeof(trk_obj), cmp_obj);
    if (blocks.n)
        qsort(blocks.v, blocks.n, sizeof(trk_obj), cmp_obj);
    trk_obj *sg = segs.v, *bk = blocks.v;
    size_t bi = 0;
    docw_key(w, "segments");
    docw_list(w);
    for (size_t si = 0; si <= segs.n; si++) {
        /* blocks before this segment that no segment holds: a segment each */
        while (bi < blocks.n && (si == segs.n || bk[bi].device < sg[si].device ||
                                 (bk[bi].device == sg[si].device && bk[bi].addr < sg[si].addr))) {
            const trk_obj *b = &bk[bi++];
            segment_head(x, b, b->size, 0, 1, 0, msnap_pool_id(b->aux));
            write_block(x, b->addr, b->size, "active_allocated", b->stack);
            docw_end(w);
            docw_end(w);
            st->segments++;
            st->blocks++;
        }
        if (si == segs.n)
            break;
        const trk_obj *s = &sg[si];
        uint64_t end = s->addr + s->size, cur = s->addr, used = 0;
        size_t b0 = bi;
        while (bi < blocks.n && bk[bi].device == s->device && bk[bi].addr < end)
            used += bk[bi++].size;
        int syn = !x->have_blocks;
        if (syn)
            used = s->size;
        uint64_t pool = 0;   /* its blocks' (PyTorch's segments hold one pool's) */
        for (size_t k = b0; k < bi && !pool; k++)
            pool = msnap_pool_id(bk[k].aux);
        segment_head(x, s, used, s->layer == TRK_VMM_MAP, 0, s->stack, pool);
        st->segments++;
        if (syn) {
            write_block(x, s->addr, s->size, "active_allocated", s->stack);
            st->blocks++;
        } else {
            for (size_t k = b0; k < bi; k++) {
                const trk_obj *b = &bk[k];
                uint64_t ba = b->addr < cur ? cur : b->addr; /* overlaps are clipped */
                uint64_t be = b->addr + b->size > end ? end : b->addr + b->size;
                if (be <= ba)
                    continue;
                if (ba > cur)
                    write_block(x, cur, ba - cur, "inactive", 0);
                write_block(x, ba, be - ba, "active_allocated", b->stack);
                st->blocks++;
                cur = be;
            }
            if (cur < end)
                write_block(x, cur, end - cur, "inactive", 0);
        }
        docw_end(w); /* blocks */
        docw_end(w); /* segment */
    }
    docw_end(w);
    free(segs.v);
    free(maps.v);
    free(blocks.v);
    return 0;
}

/* Whether the trace leaves event e of device d out: another library's
 * driver allocation (other_library) and the free of one. */
static int left_out(texp *x, const msnap_event *e, int d)
{
    uint64_t key = (uint64_t)d << 56 ^ e->addr;
    switch (e->action) {
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC:
        if (!other_library(x, e->stack))
            return 0;
        u64map_put(&x->left_addr, 1, key, 1);
        return 1;
    case MSNAP_A_FREE: case MSNAP_A_ASYNC_FREE:
        if (!u64map_get(&x->left_addr, 1, key))
            return 0;
        u64map_del(&x->left_addr, 1, key, NULL);
        return 1;
    default:
        return 0;
    }
}

static int write_traces(texp *x, msnap_interop_stats *st, msnap_export_report *rep, char *err,
                        size_t errlen)
{
    docw *w = &x->w;
    int ndev = x->max_device + 1;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (x->have_dev[d] && d + 1 > ndev)
            ndev = d + 1;
    uint64_t t0_us = x->hdr->t0_unix_ns / 1000, t0_rem = x->hdr->t0_unix_ns % 1000;
    msnap_progress("writing trace entries", 0, x->to_write, 0);
    docw_key(w, "device_traces");
    docw_list(w);
    for (int d = 0; d < ndev; d++) {
        spill *s = &x->dev[d];
        if (spill_rewind(s)) {
            snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
            return -1;
        }
        docw_list(w);
        int rc;
        uint64_t last_us = 0;
        spill_rec r;
        int syn = !x->have_blocks;
        while ((rc = spill_get(s, &r)) == 1) {
            if (r.k1 < x->first_kept)
                continue;
            const msnap_event *e = &r.e;
            if (e->t_ns < x->cut_t_ns)
                x->cut_t_ns = e->t_ns;
            uint64_t us = t0_us + (t0_rem + e->t_ns) / 1000;
            if (us < last_us)
                us = last_us; /* memory_viz wants time_us ascending */
            last_us = us;
            uint64_t size = r.k2, n0 = rep->entries_written;
            if (left_out(x, e, d)) {
                if (x->o->json && spill_put(&x->left, &r)) {
                    snprintf(err, errlen, "cannot write a temporary file: %s", strerror(errno));
                    return -1;
                }
                continue;
            }
            switch (e->action) {
            case MSNAP_A_BLOCK_ALLOC:
                entry(x, "alloc", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written++;
                break;
            case MSNAP_A_BLOCK_FREE:
                entry(x, "free_requested", e->addr, size, e, r.k1, us, 1, 0);
                entry(x, "free_completed", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written += 2;
                break;
            case MSNAP_A_ALLOC:
            case MSNAP_A_ASYNC_ALLOC:
                entry(x, "segment_alloc", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written++;
                if (syn) {
                    entry(x, "alloc", e->addr, size, e, r.k1, us, 1, 0);
                    rep->entries_written++;
                }
                break;
            case MSNAP_A_FREE:
            case MSNAP_A_ASYNC_FREE:
                if (syn) {
                    entry(x, "free_requested", e->addr, size, e, r.k1, us, 1, 0);
                    entry(x, "free_completed", e->addr, size, e, r.k1, us, 1, 0);
                    rep->entries_written += 2;
                }
                entry(x, "segment_free", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written++;
                break;
            case MSNAP_A_VMM_MAP:
                entry(x, "segment_map", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written++;
                break;
            case MSNAP_A_VMM_UNMAP:
                entry(x, "segment_unmap", e->addr, size, e, r.k1, us, 0, 0);
                rep->entries_written++;
                break;
            case MSNAP_A_OOM:
                entry(x, "oom", e->aux, e->size, e, r.k1, us, 0, 1);
                rep->entries_written++;
                break;
            }
            if (rep->entries_written > n0)
                st->events_out++;
            if ((rep->entries_written & 4095) < (n0 & 4095) || rep->entries_written - n0 >= 4096)
                msnap_progress("writing trace entries", rep->entries_written, x->to_write, 0);
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
            return -1;
        }
        docw_end(w);
        st->devices++;
    }
    docw_end(w);
    msnap_progress("writing trace entries", MSNAP_PROGRESS_END, x->to_write, 0);
    return 0;
}

/* "allocator_settings": the imported snapshot's own (kept in the header
 * settings by memsnap import), else torch's keys filled from what memsnap
 * knows (the allocator config a replay ran with, expandable segments when
 * VMM mappings were seen) with torch's defaults for the rest, plus the
 * recorder's settings under "memsnap_settings". */
static void write_allocator_settings(texp *x)
{
    docw *w = &x->w;
    docw_key(w, "allocator_settings");
    cJSON *set = x->settings && x->settings[0] ? cJSON_Parse(x->settings) : NULL;
    cJSON *as = set ? cJSON_GetObjectItemCaseSensitive(set, "allocator_settings") : NULL;
    if (cJSON_IsObject(as)) {
        char *txt = cJSON_PrintUnformatted(as);
        docw_json(w, txt);
        free(txt);
        cJSON_Delete(set);
        return;
    }
    const char *conf = "";
    cJSON *c = set ? cJSON_GetObjectItemCaseSensitive(set, "alloc_conf") : NULL;
    if (!cJSON_IsString(c) && set)
        c = cJSON_GetObjectItemCaseSensitive(set, "conf");
    if (cJSON_IsString(c))
        conf = c->valuestring;
    docw_dict(w);
    docw_key(w, "PYTORCH_CUDA_ALLOC_CONF");
    docw_str(w, conf);
    docw_key(w, "max_split_size");
    docw_int(w, -1);
    docw_key(w, "garbage_collection_threshold");
    docw_float(w, 0.0);
    docw_key(w, "expandable_segments");
    docw_bool(w, x->saw_vmm);
    docw_key(w, "pinned_num_register_threads");
    docw_int(w, 1);
    docw_key(w, "release_lock_on_cudamalloc");
    docw_bool(w, 0);
    docw_key(w, "pinned_use_cuda_host_register");
    docw_bool(w, 0);
    docw_key(w, "roundup_power2_divisions");
    docw_dict(w);
    docw_end(w);
    docw_key(w, "memsnap_settings");
    docw_json(w, x->settings && x->settings[0] ? x->settings : "{}");
    docw_end(w);
    cJSON_Delete(set);
}

/* The JSON extension, the top dict's last key (written straight to f after
 * the keys docw wrote, hence the leading comma). */
static int write_ext(texp *x, FILE *f, char *err, size_t errlen)
{
    fprintf(f, ",\n\"memsnap\":{\"format\":\"memsnap torch export\",\"version\":\"%d.%d\","
               "\"header\":{\"pid\":%" PRId64 ",\"host\":",
            MSNAP_FORMAT_MAJOR, MSNAP_FORMAT_MINOR, x->hdr->pid);
    jw_str(f, x->hdr->host);
    fputs(",\"argv\":[", f);
    for (int i = 0; i < x->hdr->argc; i++) {
        if (i)
            putc(',', f);
        jw_str(f, x->hdr->argv[i] ? x->hdr->argv[i] : "");
    }
    fprintf(f, "],\"t0_unix_ns\":\"0x%" PRIx64 "\",\"mode\":", x->hdr->t0_unix_ns);
    jw_str(f, x->hdr->mode);
    fprintf(f, ",\"settings\":%s},\n\"devices\":[", x->settings && x->settings[0] ? x->settings : "{}");
    int first = 1;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++) {
        if (!x->have_dev[d])
            continue;
        fprintf(f, "%s{\"index\":%d,\"name\":", first ? "" : ",", d);
        jw_str(f, x->devs[d].name);
        fprintf(f, ",\"total\":%" PRIu64 "}", x->devs[d].total);
        first = 0;
    }
    const sm_symtab *t = &x->f.tab;
    fputs("],\n\"stacks\":[", f);
    for (size_t i = 0; i < t->nstacks; i++) {
        fprintf(f, "%s{\"id\":%u,\"ips\":[", i ? ",\n" : "", t->stacks[i].id);
        for (int k = 0; k < t->stacks[i].depth; k++)
            fprintf(f, "%s\"0x%" PRIx64 "\"", k ? "," : "", t->stacks[i].ips[k]);
        fputs("]}", f);
    }
    fputs("],\n\"syms\":[", f);
    for (size_t i = 0; i < t->nsyms; i++) {
        const sm_sym *y = &t->syms[i];
        fprintf(f, "%s{\"ip\":\"0x%" PRIx64 "\",\"fn\":", i ? ",\n" : "", y->ip);
        jw_str(f, y->fn);
        fputs(",\"file\":", f);
        jw_str(f, y->file);
        fprintf(f, ",\"line\":%d}", y->line);
    }
    fputs("],\n\"modules\":[", f);
    for (size_t i = 0; i < t->nmods; i++) {
        fprintf(f, "%s{\"base\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"path\":", i ? ",\n" : "",
                t->mods[i].base, t->mods[i].size);
        jw_str(f, t->mods[i].path);
        fputs(",\"build_id\":", f);
        jw_str(f, t->mods[i].build_id);
        putc('}', f);
    }
    fputs("],\n\"strs\":[", f);
    first = 1;
    for (size_t i = 0; i < t->str_map.cap; i++) {
        if (!t->str_map.slots[i].used)
            continue;
        fprintf(f, "%s{\"id\":%u,\"s\":", first ? "" : ",\n", (uint32_t)t->str_map.slots[i].key);
        jw_str(f, t->strs[t->str_map.slots[i].value]);
        putc('}', f);
        first = 0;
    }
    /* the live set at the window's end, exactly (a state section's live
     * lines, in the events' short keys): torch's segments hold blocks and
     * segments without their kinds, handles and stacks, and `memsnap
     * import` needs them to know what was live at the window's start */
    fputs("],\n\"live\":[", f);
    for (size_t i = 0; i < x->nend_objs; i++) {
        const msnap_obj *o = &x->end_objs[i];
        fprintf(f, "%s{\"kind\":\"%s\",\"t\":%" PRIu64, i ? ",\n" : "", msnap_action_name(o->kind),
                o->t_ns);
        int d = o->device == MSNAP_ST_HOST ? -1 : o->device;
        if (d)
            fprintf(f, ",\"d\":%d", d);
        if (o->addr) fprintf(f, ",\"p\":%" PRIu64, o->addr);
        if (o->size) fprintf(f, ",\"n\":%" PRIu64, o->size);
        if (o->stream) fprintf(f, ",\"s\":%" PRIu64, o->stream);
        if (o->aux) fprintf(f, ",\"x\":%" PRIu64, o->aux);
        if (o->stack) fprintf(f, ",\"k\":%u", o->stack);
        putc('}', f);
    }
    fputs("],\n\"events\":[", f);
    if (spill_rewind(&x->other)) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        return -1;
    }
    if (spill_rewind(&x->left)) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        return -1;
    }
    /* the events torch has no action for and the left-out ones (the file
     * comment), merged in file order */
    spill_rec r, l;
    int rc = spill_get(&x->other, &r), lc = spill_get(&x->left, &l);
    first = 1;
    while (rc == 1 || lc == 1) {
        int take_left = lc == 1 && (rc != 1 || l.k1 < r.k1);
        const spill_rec *y = take_left ? &l : &r;
        if (y->k1 >= x->first_kept) {
            if (!first)
                fputs(",\n", f);
            event_json(f, &y->e, y->k1);
            first = 0;
        }
        if (take_left)
            lc = spill_get(&x->left, &l);
        else
            rc = spill_get(&x->other, &r);
    }
    if (rc < 0 || lc < 0) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        return -1;
    }
    fputs("]}", f);
    return 0;
}

static void texp_free(texp *x)
{
    free(x->end_objs);
    for (size_t i = 0; i < x->nframes_txt; i++)
        free(x->frames_txt[i]);
    free(x->frames_txt);
    u64map_free(&x->frames_ix);
    u64map_free(&x->stack_memo);
    u64map_free(&x->frame_memo);
    u64map_free(&x->lib_of);
    u64map_free(&x->left_addr);
    spill_close(&x->left);
    an_free(&x->f);
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        spill_close(&x->dev[d]);
    spill_close(&x->other);
}

int msnap_export_torch(const char *in_path, FILE *out, const msnap_export_opts *opts,
                       msnap_interop_stats *st, msnap_export_report *rep, char *err,
                       size_t errlen)
{
    msnap_interop_stats dummy;
    msnap_export_report drep;
    static const msnap_export_opts defaults = {0};
    if (!st)
        st = &dummy;
    if (!rep)
        rep = &drep;
    if (!opts)
        opts = &defaults;
    memset(st, 0, sizeof *st);
    memset(rep, 0, sizeof *rep);
    texp *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    x->o = opts;
    x->cut_t_ns = UINT64_MAX;
    if (opts->max_entries && !(x->ring = malloc(opts->max_entries * sizeof *x->ring))) {
        free(x);
        snprintf(err, errlen, "out of memory (--max-entries %llu)",
                 (unsigned long long)opts->max_entries);
        return -1;
    }
    int rc = texp_read(x, in_path, st, err, errlen);
    if (!rc) {
        st->synthesized_blocks = !x->have_blocks;
        st->stacks = x->f.tab.nstacks;
        rep->entries_window = x->entries_window + (x->have_blocks ? 0 : x->syn_extra);
        x->to_write = x->ring_dropped ? x->ring_n : rep->entries_window;
        rep->cut = x->ring_dropped;
        rep->no_wall_clock = !x->hdr->t0_unix_ns;
        docw_init(&x->w, out, opts->json ? DOCW_JSON : DOCW_PICKLE);
        docw_dict(&x->w);
        if (write_segments(x, st))
            x->w.failed = 1;
        rc = write_traces(x, st, rep, err, errlen);
        write_allocator_settings(x);
        if (!rc && opts->json)
            rc = write_ext(x, out, err, errlen);
        docw_end(&x->w);
        if (docw_finish(&x->w) && !rc) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
        if (!rc && (fflush(out) || ferror(out))) {
            snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
            rc = -1;
        }
    }
    if (rep->cut) {
        rep->cut_index = x->first_kept;
        rep->cut_t_ns = x->cut_t_ns;
    }
    texp_free(x);
    free(x->ring);
    free(x);
    return rc;
}

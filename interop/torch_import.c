/* torch_import: a PyTorch memory snapshot (torch.cuda.memory._snapshot() as
 * JSON, or the pickle _dump_snapshot writes) as a memsnap snapshot.
 * docs/interop.md has the mapping; in short:
 *
 *   alloc -> block_alloc          free_completed -> block_free
 *   free_requested -> (dropped)   segment_alloc/free -> alloc/free
 *   segment_map -> vmm_create + vmm_map (one synthesized handle per map)
 *   segment_unmap -> vmm_unmap + vmm_release (+ create/map of a remainder)
 *   oom -> oom (x = device_free)  snapshot -> dump
 *   frames -> stack + sym records; each distinct frame gets a synthesized
 *             ip (1, 2, 3, ...) that is only an id; its sym record names it;
 *             a frame of a .py file has MSNAP_PYFRAME_BIT set in its ip, so
 *             readers treat it as a Python frame
 *   segments (the state at the snapshot) -> state + live records
 *   what was live when the trace started -> allocation events at its
 *             first time (start_state: memory_viz's "initially allocated")
 *
 * A file that `memsnap export --format torch` wrote carries the "memsnap"
 * extension (exact events, stacks, symbols, strings, header, the exact
 * live set at the end): then the events and the final state come back
 * exactly as they were, from it.
 *
 * Reading streams (jsonpull.c / pickle.c); converted events go to a spill
 * file per device (spill.c) and are merged at the end in time order (torch
 * keeps one list per device), or in original order for our own exports.
 * Memory: the final-state segments, the frame and stack tables, and for a
 * pickle one small node per distinct traceback; while writing, the live set
 * of one replay of the events (start_state).
 */
#include "interop.h"
#include "common.h"
#include "format/state.h"
#include "value.h"
#include "util/grow.h"
#include "util/hash.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct frame_ent { char *file, *name; int64_t line; } frame_ent;
typedef struct stack_ent { uint32_t *fids; int depth; } stack_ent;
typedef struct map_ent { uint64_t size, handle; } map_ent;

#define NSRC (MSNAP_MAX_DEVICES + 1) /* one spill per device + extension events */

typedef struct timp {
    u64map frame_ix;     /* tag = probe, key = content hash -> frame index */
    frame_ent *frames; size_t nframes, capframes;
    u64map stack_ix;     /* tag = probe, key = hash of fids -> stack index */
    stack_ent *stacks; size_t nstacks, capstacks;
    msnap_live *live; size_t nlive, caplive; /* the final state: torch's segments */
    msnap_live *xlive; size_t nxlive;        /* and our export's exact "live" list */
    spill src[NSRC];
    uint64_t seq;
    u64map maps[MSNAP_MAX_DEVICES > 0 ? 1 : 1]; /* (device, addr) -> index in mapv */
    map_ent *mapv; size_t nmapv, capmapv;
    uint64_t next_handle;
    int dev_seen[MSNAP_MAX_DEVICES];
    uint64_t skipped;
    int have_snapshot_marker;
    uint64_t t_min;      /* earliest torch time (ns since the epoch); 0 = none */
    int have_t;
    msnap_interop_stats *st;
    iv_in *in;           /* the input: its work budget (value.h) counts lookups too */
} timp;

#define SETTINGS_MAX (256u << 10) /* bytes of JSON for allocator_settings, argv */

/* A dict lookup that counts against the input's work budget. */
#define GET(d, key) iv_get((d), (key), &m->in->steps)

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    return msnap_fnv1a(h, p, n);
}

static uint32_t frame_id_(timp *m, ival *f);

/* Frame id (from 1) of a frame dict.  Once converted the dict is emptied:
 * a pickle may refer to it again, and then its id is enough. */
static uint32_t frame_id(timp *m, ival *f)
{
    uint32_t id = frame_id_(m, f);
    if (id) {
        for (size_t i = 0; i < f->u.a.n; i++)
            iv_unref(f->u.a.v[i]);
        f->u.a.n = 0;
    }
    return id;
}

static uint32_t frame_id_(timp *m, ival *f)
{
    if (f->cache_id)
        return f->cache_id;
    const char *file = iv_str(GET(f, "filename")), *name = iv_str(GET(f, "name"));
    int ok = 1;
    int64_t line = iv_int(GET(f, "line"), &ok);
    if (!file)
        file = "??";
    if (!name)
        name = "??";
    size_t fl = strlen(file), nl = strlen(name);
    /* hashing and comparing the strings (FNV goes a byte at a time, then
     * strcmp): a step for each 4 bytes, about what a step costs elsewhere
     * (a pickle can give many small frame dicts one long memoized name) */
    m->in->steps += (fl + nl) / 4 + 1;
    uint64_t h = fnv(file, fl + 1, MSNAP_FNV_BASIS);
    h = fnv(name, nl + 1, h);
    h = fnv(&line, sizeof line, h);
    for (uint32_t probe = 0;; probe++) {
        m->in->steps++;
        uint64_t *ix = u64map_get(&m->frame_ix, probe, h);
        if (!ix)
            break;
        frame_ent *e = &m->frames[*ix];
        if (e->line == line && !strcmp(e->file, file) && !strcmp(e->name, name))
            return f->cache_id = (uint32_t)*ix + 1;
        if (probe > 64)
            return 0;
    }
    if (msnap_grow((void **)&m->frames, &m->capframes, m->nframes, sizeof *m->frames))
        return 0;
    frame_ent *nf = m->frames;
    uint32_t probe = 0;
    while (u64map_get(&m->frame_ix, probe, h))
        probe++;
    nf[m->nframes] = (frame_ent){strdup(file), strdup(name), line};
    if (u64map_put(&m->frame_ix, probe, h, m->nframes))
        return 0;
    m->nframes++;
    return f->cache_id = (uint32_t)m->nframes;
}

/* The ip written for frame id fid (from 1): the id itself, with the Python
 * bit set when the frame's file is a .py file. */
static uint64_t synth_ip(const timp *m, uint32_t fid)
{
    if (fid == 0 || fid > m->nframes)
        return fid;
    const char *f = m->frames[fid - 1].file;
    size_t n = f ? strlen(f) : 0;
    return n >= 3 && !strcmp(f + n - 3, ".py") ? MSNAP_PYFRAME_BIT | fid : fid;
}

/* Stack id (from 1; 0 = none) of a frames list.  The list is compacted once
 * converted: a pickle may refer to it again, and then the id is enough. */
static uint32_t stack_id(timp *m, ival *l)
{
    if (!l || l->type != IV_LIST)
        return 0;
    if (l->cache_id)
        return l->cache_id;
    int depth = (int)(l->u.a.n > MSNAP_MAX_FRAMES ? MSNAP_MAX_FRAMES : l->u.a.n);
    if (!depth)
        return 0;
    uint32_t fids[MSNAP_MAX_FRAMES];
    m->in->steps += (uint64_t)depth;
    for (int i = 0; i < depth; i++) {
        ival *f = l->u.a.v[i];
        fids[i] = f->type == IV_DICT ? frame_id(m, f) : 0;
    }
    uint64_t h = fnv(fids, (size_t)depth * sizeof fids[0], MSNAP_FNV_BASIS);
    uint32_t id = 0, probe = 0;
    for (;; probe++) {
        m->in->steps++;
        uint64_t *ix = u64map_get(&m->stack_ix, probe, h);
        if (!ix)
            break;
        stack_ent *s = &m->stacks[*ix];
        if (s->depth == depth && !memcmp(s->fids, fids, (size_t)depth * sizeof fids[0])) {
            id = (uint32_t)*ix + 1;
            break;
        }
    }
    if (!id) {
        if (msnap_grow((void **)&m->stacks, &m->capstacks, m->nstacks, sizeof *m->stacks))
            return 0;
        stack_ent *ns = m->stacks;
        ns[m->nstacks].fids = malloc((size_t)depth * sizeof fids[0]);
        if (!ns[m->nstacks].fids)
            return 0;
        memcpy(ns[m->nstacks].fids, fids, (size_t)depth * sizeof fids[0]);
        ns[m->nstacks].depth = depth;
        if (u64map_put(&m->stack_ix, probe, h, m->nstacks))
            return 0;
        id = (uint32_t)++m->nstacks;
    }
    for (size_t i = 0; i < l->u.a.n; i++)
        iv_unref(l->u.a.v[i]);
    l->u.a.n = 0;
    l->cache_id = id;
    return id;
}

static int put_ev(timp *m, int src, uint64_t k1, const msnap_event *e, char *err, size_t errlen)
{
    spill_rec r = {.k1 = k1, .k2 = m->seq++, .e = *e};
    if (spill_put(&m->src[src], &r)) {
        snprintf(err, errlen, "cannot write a temporary file: %s", strerror(errno));
        return -1;
    }
    m->st->events_out++;
    return 0;
}

/* Our event from its short-key JSON object (extension). */
static int ext_event(timp *m, const ival *v, msnap_event *e, uint64_t *idx)
{
    int ok = 1;
    memset(e, 0, sizeof *e);
    int a = msnap_action_from_name(iv_str(GET(v, "a")) ? iv_str(GET(v, "a")) : "");
    if (a <= 0)
        return -1;
    e->action = (uint16_t)a;
    *idx = iv_u64(GET(v, "i"), &ok);
    e->t_ns = iv_u64(GET(v, "t"), &ok);
    e->device = (int16_t)iv_int(GET(v, "d"), &ok);
    e->addr = iv_u64(GET(v, "p"), &ok);
    e->size = iv_u64(GET(v, "n"), &ok);
    e->stream = iv_u64(GET(v, "s"), &ok);
    e->aux = iv_u64(GET(v, "x"), &ok);
    e->aux2 = iv_u64(GET(v, "y"), &ok);
    e->stack = (uint32_t)iv_u64(GET(v, "k"), &ok);
    e->seq = iv_u64(GET(v, "q"), &ok);
    e->tid = (uint32_t)iv_u64(GET(v, "th"), &ok);
    const char *f = iv_str(GET(v, "f"));
    int api = f ? msnap_api_from_name(f) : 0;
    e->api = (uint16_t)(api > 0 ? api : 0);
    e->result = (int16_t)iv_int(GET(v, "r"), &ok);
    return ok ? 0 : -1;
}

static int on_trace(timp *m, unsigned dev, ival *v, char *err, size_t errlen)
{
    if (v->type != IV_DICT) {
        snprintf(err, errlen, "device_traces[%u]: an entry that is not a dict", dev);
        return -1;
    }
    m->st->events_in++;
    ival *ext = GET(v, "memsnap");
    if (ext && ext->type == IV_DICT) {
        if (GET(ext, "syn"))
            return 0;
        msnap_event e;
        uint64_t idx;
        if (ext_event(m, ext, &e, &idx)) {
            snprintf(err, errlen, "device_traces[%u]: a bad \"memsnap\" event", dev);
            return -1;
        }
        return put_ev(m, (int)dev, idx, &e, err, errlen);
    }
    const char *action = iv_str(GET(v, "action"));
    int ok = 1;
    uint64_t addr = iv_u64(GET(v, "addr"), &ok);
    uint64_t size = iv_u64(GET(v, "size"), &ok);
    uint64_t stream = iv_u64(GET(v, "stream"), &ok);
    double us = iv_num(GET(v, "time_us"), &ok);
    /* time_us must fit in uint64 nanoseconds (and not be NaN): the
     * conversion below is undefined otherwise */
    if (!action || !ok || !(us >= 0 && us < 1.8e16)) {
        snprintf(err, errlen, "device_traces[%u]: an entry without a valid action, addr, size, "
                              "stream or time_us", dev);
        return -1;
    }
    msnap_event e = {0};
    /* an integer time_us (what torch writes) converts exactly: a double
     * holds epoch nanoseconds only to ~256 ns */
    ival *tv = GET(v, "time_us");
    if (tv && tv->type == IV_INT && tv->u.i >= 0 && tv->u.i < (__int128)18000000000000000)
        e.t_ns = (uint64_t)tv->u.i * 1000u;
    else
        e.t_ns = (uint64_t)(us * 1000.0 + 0.5);
    if (!m->have_t || e.t_ns < m->t_min) {
        m->t_min = e.t_ns;
        m->have_t = 1;
    }
    e.device = (int16_t)dev;
    e.addr = addr;
    e.size = size;
    e.stream = stream;
    e.stack = stack_id(m, GET(v, "frames"));
    uint64_t key = e.t_ns;
    if (!strcmp(action, "alloc")) {
        e.action = MSNAP_A_BLOCK_ALLOC;
        e.api = MSNAP_API_ALLOCATOR;
    } else if (!strcmp(action, "free_completed")) {
        e.action = MSNAP_A_BLOCK_FREE;
        e.api = MSNAP_API_ALLOCATOR;
    } else if (!strcmp(action, "free_requested")) {
        return 0;
    } else if (!strcmp(action, "segment_alloc")) {
        e.action = MSNAP_A_ALLOC;
        e.api = MSNAP_API_cuMemAlloc_v2;
    } else if (!strcmp(action, "segment_free")) {
        e.action = MSNAP_A_FREE;
        e.api = MSNAP_API_cuMemFree_v2;
    } else if (!strcmp(action, "segment_map")) {
        msnap_event c = e;
        c.action = MSNAP_A_VMM_CREATE;
        c.api = MSNAP_API_cuMemCreate;
        c.addr = 0;
        c.stream = 0;
        c.aux = ++m->next_handle;
        if (put_ev(m, (int)dev, key, &c, err, errlen))
            return -1;
        e.action = MSNAP_A_VMM_MAP;
        e.api = MSNAP_API_cuMemMap;
        e.stream = 0;
        e.aux = c.aux;
        if (msnap_grow((void **)&m->mapv, &m->capmapv, m->nmapv, sizeof *m->mapv))
            goto oom;
        map_ent *nm = m->mapv;
        nm[m->nmapv] = (map_ent){size, c.aux};
        if (u64map_put(&m->maps[0], (uint32_t)dev, addr, m->nmapv++))
            goto oom;
    } else if (!strcmp(action, "segment_unmap")) {
        e.action = MSNAP_A_VMM_UNMAP;
        e.api = MSNAP_API_cuMemUnmap;
        e.stream = 0;
        if (put_ev(m, (int)dev, key, &e, err, errlen))
            return -1;
        /* release the handles of the mappings it covers; a mapping it only
         * partly covers is released and its rest created and mapped again */
        uint64_t cur = addr, end = addr + size, ix;
        int before = 0; /* [cur, end) was mapped before the trace started */
        while (cur < end) {
            if (!u64map_del(&m->maps[0], (uint32_t)dev, cur, &ix)) {
                before = 1;
                break;
            }
            map_ent me = m->mapv[ix];
            msnap_event r = {.t_ns = e.t_ns, .device = e.device, .action = MSNAP_A_VMM_RELEASE,
                             .api = MSNAP_API_cuMemRelease, .aux = me.handle};
            if (put_ev(m, (int)dev, key, &r, err, errlen))
                return -1;
            if (cur + me.size > end) {
                uint64_t rest = cur + me.size - end;
                msnap_event c = {.t_ns = e.t_ns, .device = e.device, .action = MSNAP_A_VMM_CREATE,
                                 .api = MSNAP_API_cuMemCreate, .size = rest, .aux = ++m->next_handle};
                msnap_event mp = {.t_ns = e.t_ns, .device = e.device, .action = MSNAP_A_VMM_MAP,
                                  .api = MSNAP_API_cuMemMap, .addr = end, .size = rest, .aux = c.aux};
                if (put_ev(m, (int)dev, key, &c, err, errlen) || put_ev(m, (int)dev, key, &mp, err, errlen))
                    return -1;
                m->mapv[ix] = (map_ent){rest, c.aux};
                if (u64map_put(&m->maps[0], (uint32_t)dev, end, ix))
                    goto oom;
            }
            if (!me.size)
                break;
            cur += me.size;
        }
        if (before) {
            /* its memory goes with a handle of its own, which the state at
             * the trace's start creates (start_state) */
            msnap_event r = {.t_ns = e.t_ns, .device = e.device, .action = MSNAP_A_VMM_RELEASE,
                             .api = MSNAP_API_cuMemRelease, .size = end - cur,
                             .aux = ++m->next_handle};
            if (put_ev(m, (int)dev, key, &r, err, errlen))
                return -1;
        }
        return 0;
    } else if (!strcmp(action, "oom")) {
        e.action = MSNAP_A_OOM;
        e.api = MSNAP_API_ALLOCATOR;
        e.addr = 0;
        e.aux = iv_u64(GET(v, "device_free"), &ok);
        e.result = 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    } else if (!strcmp(action, "snapshot")) {
        e.action = MSNAP_A_DUMP;
        e.api = MSNAP_API_ALLOCATOR;
        e.addr = e.size = 0;
        e.aux = 1; /* str id 1: "torch.cuda.memory._snapshot()" */
        m->have_snapshot_marker = 1;
    } else {
        m->skipped++;
        return 0;
    }
    return put_ev(m, (int)dev, key, &e, err, errlen);
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

static int add_live(timp *m, const msnap_live *l)
{
    if (msnap_grow((void **)&m->live, &m->caplive, m->nlive, sizeof *m->live))
        return -1;
    m->live[m->nlive++] = *l;
    return 0;
}

static int on_segment(timp *m, ival *s, char *err, size_t errlen)
{
    if (s->type != IV_DICT) {
        snprintf(err, errlen, "segments: an entry that is not a dict");
        return -1;
    }
    int ok = 1;
    msnap_live l = {0};
    l.device = (int)iv_int(GET(s, "device"), &ok);
    l.addr = iv_u64(GET(s, "address"), &ok);
    l.size = iv_u64(GET(s, "total_size"), &ok);
    l.stream = iv_u64(GET(s, "stream"), &ok);
    ival *exp = GET(s, "is_expandable");
    l.kind = exp && exp->type == IV_BOOL && exp->u.i ? MSNAP_A_VMM_MAP : MSNAP_A_ALLOC;
    l.stack = stack_id(m, GET(s, "frames"));
    if (!ok || l.device < 0 || l.device >= MSNAP_MAX_DEVICES) {
        snprintf(err, errlen, "segments: a segment without a valid device, address, total_size or stream");
        return -1;
    }
    ival *synth = GET(s, "memsnap_synthesized");
    if (!(synth && synth->type == IV_BOOL && synth->u.i)) {
        if (add_live(m, &l))
            goto oom;
        m->st->segments++;
    }
    m->dev_seen[l.device] = 1;
    ival *blocks = GET(s, "blocks");
    if (blocks && blocks->type == IV_LIST) {
        /* a pickle could give every segment one shared list of a million
         * blocks: each would read it again and keep its blocks again */
        if (blocks->visited) {
            snprintf(err, errlen, "segments: one blocks list in two segments; not a layout "
                                  "PyTorch writes");
            return -1;
        }
        blocks->visited = 1;
    }
    for (size_t i = 0; blocks && blocks->type == IV_LIST && i < blocks->u.a.n; i++) {
        if (++m->in->steps, iv_over_budget(m->in))
            return iv_budget_fail(m->in, err, errlen);
        ival *b = blocks->u.a.v[i];
        const char *state = iv_str(GET(b, "state"));
        if (!state || strncmp(state, "active", 6))
            continue;
        msnap_live bl = {.kind = MSNAP_A_BLOCK_ALLOC, .device = l.device, .stream = l.stream};
        bl.addr = iv_u64(GET(b, "address"), &ok);
        bl.size = iv_u64(GET(b, "size"), &ok);
        bl.stack = stack_id(m, GET(b, "frames"));
        if (!ok) {
            snprintf(err, errlen, "segments: a block without a valid address or size");
            return -1;
        }
        if (add_live(m, &bl))
            goto oom;
        m->st->blocks++;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

static int sink_item(void *ctx, int role, unsigned index, ival *v, char *err, size_t errlen)
{
    timp *m = ctx;
    if (role == IV_ROLE_SEGMENTS)
        return on_segment(m, v, err, errlen);
    if (role == IV_ROLE_DEVICE) {
        if (index >= MSNAP_MAX_DEVICES) {
            snprintf(err, errlen, "device_traces: more than %d devices", MSNAP_MAX_DEVICES);
            return -1;
        }
        m->dev_seen[index] = 1;
        return on_trace(m, index, v, err, errlen);
    }
    if (role == IV_ROLE_EXT_EVENTS) {
        msnap_event e;
        uint64_t idx;
        if (v->type != IV_DICT || ext_event(m, v, &e, &idx)) {
            snprintf(err, errlen, "memsnap.events: a bad event");
            return -1;
        }
        m->st->events_in++;
        return put_ev(m, NSRC - 1, idx, &e, err, errlen);
    }
    return 0;
}

/* ---- the state at the trace's start ------------------------------------------
 * A snapshot's "segments" are the state at its end, and its trace may start
 * long after the program did: torch's trace is a ring that drops its oldest
 * entries, recording may begin after the model was loaded, and `memsnap
 * export --from/--max-entries` cuts a window.  What was live when the trace
 * starts is then only implied.  memory_viz (process_alloc_data.js) takes as
 * "initially allocated" each free in the trace of something the trace never
 * allocated (with the free's size) and each active block or segment of the
 * final state that the trace did not allocate.  One replay of the converted
 * events through the state model (format/state.h) with the final state as
 * its state section finds exactly these: its pre-window objects.  They are
 * written as allocation events at the trace's first time, before its first
 * event, so that every reader's levels count them from the start; without
 * them an imported window showed its allocated blocks (46.82 GiB) above a
 * reserved that lacked the segments made before it (33.50 GiB; issue 19).
 *
 * Expandable segments.  torch has no handles: the importer makes one per
 * segment_map.  A segment_unmap of a range no segment_map of the trace made
 * releases a handle of its own (on_trace), which the start creates; the
 * part of a final expandable segment that no mapping of the trace covers
 * gets a handle and a mapping at the start.  Our own JSON export carries
 * the exact live set at its end (handles included) and exact events: there
 * the state model's rules alone give the start.
 */

/* The merge of the spills in the order they are written, (k1, source, k2);
 * torch events' times rebased (the extension's are exact). */
typedef struct merge {
    spill_rec head[NSRC];
    int have[NSRC];
    uint64_t rebase;
} merge;

/* Rewinds every spill.  0, or -1 (errno). */
static int merge_start(timp *m, merge *g, uint64_t rebase)
{
    g->rebase = rebase;
    for (int s = 0; s < NSRC; s++)
        if (spill_rewind(&m->src[s]) || (g->have[s] = spill_get(&m->src[s], &g->head[s])) < 0)
            return -1;
    return 0;
}

/* The next event into *e: 1, 0 after the last, -1 cannot read (errno). */
static int merge_next(timp *m, merge *g, msnap_event *e)
{
    int best = -1;
    for (int s = 0; s < NSRC; s++)
        if (g->have[s] == 1 &&
            (best < 0 || g->head[s].k1 < g->head[best].k1 ||
             (g->head[s].k1 == g->head[best].k1 && g->head[s].k2 < g->head[best].k2)))
            best = s;
    if (best < 0)
        return 0;
    *e = g->head[best].e;
    if (best < NSRC - 1)
        e->t_ns = e->t_ns >= g->rebase ? e->t_ns - g->rebase : 0;
    g->have[best] = spill_get(&m->src[best], &g->head[best]);
    return g->have[best] < 0 ? -1 : 1;
}

/* What was live at the trace's start: objects of the state model (kind,
 * device slot, addr, size, aux, stack), written as events at time t. */
typedef struct start_set {
    msnap_obj *o;
    size_t n, cap;
    uint64_t t;         /* the trace's first time (rebased); 0 without events */
    int block_api;      /* api of the trace's block events (allocator or torch) */
} start_set;

static int start_add(start_set *s, const msnap_obj *o)
{
    if (msnap_grow((void **)&s->o, &s->cap, s->n, sizeof *s->o))
        return -1;
    s->o[s->n++] = *o;
    return 0;
}

static int cmp_map_obj(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Adds a handle and its mapping for [addr, addr+size) of a final
 * expandable segment that no mapping of the trace covers. */
static int start_map(start_set *s, const msnap_live *l, uint64_t addr, uint64_t size,
                     uint64_t handle)
{
    int16_t slot = (int16_t)msnap_st_slot(l->device);
    msnap_obj c = {.size = size, .aux = handle, .device = slot, .kind = MSNAP_A_VMM_CREATE,
                   .space = MSNAP_SP_PHYS, .api = MSNAP_API_cuMemCreate};
    msnap_obj p = {.addr = addr, .size = size, .aux = handle, .stack = l->stack, .device = slot,
                   .kind = MSNAP_A_VMM_MAP, .space = MSNAP_SP_MAP, .api = MSNAP_API_cuMemMap};
    return start_add(s, &c) || start_add(s, &p) ? -1 : 0;
}

/* Final expandable segments (torch's, fin[nfin] of kind vmm_map): each part
 * that no mapping live in st (the trace replayed) covers was mapped before
 * the trace started; it gets a handle above hmax and a mapping in *out.
 * 0 ok, -1 out of memory. */
static int start_gaps(const msnap_state *st, const msnap_live *fin, size_t nfin, int ext,
                      uint64_t hmax, start_set *out)
{
    size_t nmaps = 0;
    for (size_t i = 0; i < st->map.cap; i++)
        if (st->map.slots[i].used && st->objs[st->map.slots[i].value].space == MSNAP_SP_MAP)
            nmaps++;
    msnap_obj *maps = malloc((nmaps + 1) * sizeof *maps);
    if (!maps)
        return -1;
    nmaps = 0;
    for (size_t i = 0; i < st->map.cap; i++)
        if (st->map.slots[i].used && st->objs[st->map.slots[i].value].space == MSNAP_SP_MAP)
            maps[nmaps++] = st->objs[st->map.slots[i].value];
    qsort(maps, nmaps, sizeof *maps, cmp_map_obj);
    for (size_t i = 0; i < nfin; i++) {
        msnap_live l = fin[i];
        if (l.kind != MSNAP_A_VMM_MAP)
            continue;
        if (ext)
            l.stack = 0;
        int16_t slot = (int16_t)msnap_st_slot(l.device);
        uint64_t cur = l.addr, end = l.addr + l.size;
        /* the first mapping of the device that ends after cur */
        size_t lo = 0, hi = nmaps;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (maps[mid].device < slot || (maps[mid].device == slot && maps[mid].addr < cur))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && maps[lo - 1].device == slot && maps[lo - 1].addr + maps[lo - 1].size > cur)
            lo--;
        for (size_t j = lo; cur < end; j++) {
            int in = j < nmaps && maps[j].device == slot && maps[j].addr < end;
            uint64_t next = in ? maps[j].addr : end;
            if (next > cur && start_map(out, &l, cur, next - cur, ++hmax))
                goto fail;
            if (!in)
                break;
            if (maps[j].addr + maps[j].size > cur)
                cur = maps[j].addr + maps[j].size;
        }
    }
    free(maps);
    return 0;
fail:
    free(maps);
    return -1;
}

/* The state at the trace's start into *out (see above).  fin[nfin]: the
 * final state; exact: it is our own JSON export's "live" list (every kind,
 * handles and stacks as recorded), else torch's segments (m->live).  ext:
 * the input is our own JSON export (exact events; the stack ids of its
 * segments are not the file's).  0 ok, -1 with err. */
static int start_state(timp *m, uint64_t rebase, const msnap_live *fin, size_t nfin, int exact,
                       int ext, start_set *out, char *err, size_t errlen)
{
    msnap_state st;
    msnap_state_init(&st);
    merge g;
    msnap_event e;
    uint64_t hmax = m->next_handle;
    int rc, first = 1;
    out->block_api = MSNAP_API_ALLOCATOR;
    if (merge_start(m, &g, rebase))
        goto ioerr;
    while ((rc = merge_next(m, &g, &e)) == 1) {
        if (first) {
            out->t = e.t_ns;
            first = 0;
        }
        if ((e.action == MSNAP_A_BLOCK_ALLOC || e.action == MSNAP_A_BLOCK_FREE) &&
            !st.allocated_seen && e.api)
            out->block_api = e.api;
        if ((e.action == MSNAP_A_VMM_CREATE || e.action == MSNAP_A_VMM_RELEASE ||
             e.action == MSNAP_A_VMM_MAP) && e.aux > hmax)
            hmax = e.aux;
        if (msnap_state_event(&st, &e))
            goto oom;
    }
    if (rc < 0)
        goto ioerr;
    /* an export of ours without its "live" list (before format 1.2's
     * "live"): its segments' blocks are stand-ins when it had no blocks */
    int skip_blocks = !exact && ext && !st.allocated_seen;
    /* the final state as a state section: what the trace did not allocate
     * becomes a pre-window object at msnap_state_finish */
    msnap_record r = {.type = MSNAP_REC_STATE_BEGIN};
    r.u.state_begin.nlive = nfin;
    if (msnap_state_record(&st, &r))
        goto oom;
    for (size_t i = 0; i < nfin; i++) {
        const msnap_live *l = &fin[i];
        if ((!exact && l->kind == MSNAP_A_VMM_MAP) ||
            (skip_blocks && l->kind == MSNAP_A_BLOCK_ALLOC))
            continue;
        r.type = MSNAP_REC_LIVE;
        r.u.live = *l;
        if (ext && !exact)
            r.u.live.stack = 0;
        if (msnap_state_record(&st, &r))
            goto oom;
    }
    if (msnap_state_finish(&st))
        goto oom;
    for (size_t i = 0; i < st.npre; i++)
        if (start_add(out, &st.pre[i].o))
            goto oom;
    if (!exact && start_gaps(&st, fin, nfin, ext, hmax, out))
        goto oom;
    msnap_state_free(&st);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    goto fail;
ioerr:
    snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
fail:
    msnap_state_free(&st);
    return -1;
}

/* The order of the start's events: address space, memory (segments,
 * handles), mappings, blocks; then device and address. */
static int start_rank(int kind)
{
    switch (kind) {
    case MSNAP_A_VMM_RESERVE: return 0;
    case MSNAP_A_VMM_MAP: return 2;
    case MSNAP_A_BLOCK_ALLOC: return 3;
    default: return 1;
    }
}

static int cmp_start(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    int rx = start_rank(x->kind), ry = start_rank(y->kind);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->aux < y->aux ? -1 : x->aux > y->aux;
}

/* The event that makes a start object, at time t. */
static msnap_event start_event(const start_set *s, const msnap_obj *o)
{
    msnap_event e = {.t_ns = s->t, .action = o->kind, .addr = o->addr, .size = o->size,
                     .stream = o->stream, .aux = o->aux, .stack = o->stack,
                     .device = (int16_t)(o->device == MSNAP_ST_HOST ? -1 : o->device)};
    switch (o->kind) {
    case MSNAP_A_ALLOC: e.api = MSNAP_API_cuMemAlloc_v2; break;
    case MSNAP_A_ASYNC_ALLOC: e.api = MSNAP_API_cuMemAllocAsync; break;
    case MSNAP_A_MANAGED_ALLOC: e.api = MSNAP_API_cuMemAllocManaged; break;
    case MSNAP_A_HOST_ALLOC: e.api = MSNAP_API_cuMemHostAlloc; break;
    case MSNAP_A_VMM_RESERVE: e.api = MSNAP_API_cuMemAddressReserve; break;
    case MSNAP_A_VMM_CREATE: e.api = MSNAP_API_cuMemCreate; e.addr = 0; break;
    case MSNAP_A_VMM_MAP: e.api = MSNAP_API_cuMemMap; break;
    case MSNAP_A_BLOCK_ALLOC:
        e.api = o->api == MSNAP_API_TORCH || o->api == MSNAP_API_ALLOCATOR
                    ? o->api : (uint16_t)s->block_api;
        break;
    }
    return e;
}

/* ---- output ---------------------------------------------------------------- */

typedef struct wr { msnap_out *o; char buf[1 << 16]; int fail; } wr;

static void wline(wr *w, size_t n)
{
    if (!n || msnap_out_write(w->o, w->buf, n))
        w->fail = 1;
}

/* A line of the extension's tables: counted against the work budget by
 * its length, a step for each 4 bytes formatted and written (a pickle can
 * list one memoized dict with a long string many times). */
static void ext_line(timp *m, wr *w, size_t n)
{
    wline(w, n);
    m->in->steps += n / 4 + 1;
}

/* Writes the extension's tables (stacks, syms, modules, strs); 0, or -1
 * past the work budget (checked at each item). */
static int write_ext_tables(timp *m, wr *w, ival *ext)
{
    int ok = 1;
    ival *l = GET(ext, "strs");
    for (size_t i = 0; l && l->type == IV_LIST && i < l->u.a.n; i++) {
        if (iv_over_budget(m->in))
            return -1;
        msnap_str s = {(uint32_t)iv_u64(GET(l->u.a.v[i], "id"), &ok), iv_str(GET(l->u.a.v[i], "s"))};
        if (!s.id || !s.s)
            continue;
        ext_line(m, w, msnap_fmt_str(w->buf, sizeof w->buf, &s));
    }
    l = GET(ext, "stacks");
    for (size_t i = 0; l && l->type == IV_LIST && i < l->u.a.n; i++) {
        if (iv_over_budget(m->in))
            return -1;
        ival *ips = GET(l->u.a.v[i], "ips");
        uint64_t v[MSNAP_MAX_FRAMES];
        int n = 0;
        for (size_t k = 0; ips && ips->type == IV_LIST && k < ips->u.a.n && n < MSNAP_MAX_FRAMES; k++) {
            const char *h = iv_str(ips->u.a.v[k]);
            v[n++] = h ? strtoull(h, NULL, 16) : iv_u64(ips->u.a.v[k], &ok);
        }
        m->in->steps += (uint64_t)n;
        msnap_stack s = {(uint32_t)iv_u64(GET(l->u.a.v[i], "id"), &ok), n, v};
        if (s.id) {
            ext_line(m, w, msnap_fmt_stack(w->buf, sizeof w->buf, &s));
            m->st->stacks++;
        }
    }
    l = GET(ext, "modules");
    for (size_t i = 0; l && l->type == IV_LIST && i < l->u.a.n; i++) {
        if (iv_over_budget(m->in))
            return -1;
        ival *x = l->u.a.v[i];
        const char *b = iv_str(GET(x, "base"));
        msnap_module md = {b ? strtoull(b, NULL, 16) : 0, iv_u64(GET(x, "size"), &ok),
                           iv_str(GET(x, "path")) ? iv_str(GET(x, "path")) : "",
                           iv_str(GET(x, "build_id")) ? iv_str(GET(x, "build_id")) : ""};
        ext_line(m, w, msnap_fmt_module(w->buf, sizeof w->buf, &md));
    }
    l = GET(ext, "syms");
    for (size_t i = 0; l && l->type == IV_LIST && i < l->u.a.n; i++) {
        if (iv_over_budget(m->in))
            return -1;
        ival *x = l->u.a.v[i];
        const char *ip = iv_str(GET(x, "ip"));
        msnap_symbol y = {ip ? strtoull(ip, NULL, 16) : 0,
                          iv_str(GET(x, "fn")) ? iv_str(GET(x, "fn")) : "",
                          iv_str(GET(x, "file")) ? iv_str(GET(x, "file")) : "",
                          (int)iv_int(GET(x, "line"), &ok), 0};
        ext_line(m, w, msnap_fmt_symbol(w->buf, sizeof w->buf, &y));
    }
    return iv_over_budget(m->in) ? -1 : 0;
}

/* Our export's "live" list (the exact live set at the window's end, in
 * the events' short keys) into m->xlive; *exact = 1 when there is one.
 * Objects of kinds this reader does not know are skipped.  0 ok, -1 with
 * err (a bad object, out of memory, past the work budget). */
static int ext_live(timp *m, ival *l, int *exact, char *err, size_t errlen)
{
    *exact = 0;
    if (!l || l->type != IV_LIST)
        return 0;
    *exact = 1;
    if (!(m->xlive = malloc((l->u.a.n + 1) * sizeof *m->xlive))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < l->u.a.n; i++) {
        if (++m->in->steps, iv_over_budget(m->in))
            return iv_budget_fail(m->in, err, errlen);
        ival *v = l->u.a.v[i];
        const char *kind = v->type == IV_DICT ? iv_str(GET(v, "kind")) : NULL;
        int ok = kind != NULL;
        int a = kind ? msnap_action_from_name(kind) : 0;
        msnap_live x = {.kind = a};
        x.t_ns = iv_u64(GET(v, "t"), &ok);
        x.device = (int)iv_int(GET(v, "d"), &ok);
        x.addr = iv_u64(GET(v, "p"), &ok);
        x.size = iv_u64(GET(v, "n"), &ok);
        x.stream = iv_u64(GET(v, "s"), &ok);
        x.aux = iv_u64(GET(v, "x"), &ok);
        x.stack = (uint32_t)iv_u64(GET(v, "k"), &ok);
        if (!ok || x.device < -1 || x.device >= MSNAP_MAX_DEVICES) {
            snprintf(err, errlen, "memsnap.live: a bad live object");
            return -1;
        }
        switch (a) { /* the kinds of live lines (docs/format.md, "live") */
        case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_HOST_ALLOC:
        case MSNAP_A_MANAGED_ALLOC: case MSNAP_A_BLOCK_ALLOC: case MSNAP_A_VMM_RESERVE:
        case MSNAP_A_VMM_CREATE: case MSNAP_A_VMM_MAP:
            m->xlive[m->nxlive++] = x;
            break;
        }
    }
    return 0;
}

static int write_output(timp *m, ival *top, int out_fd, int zstd_level, const char *source,
                        char *err, size_t errlen)
{
    wr *w = calloc(1, sizeof *w);
    if (!w) {
        close(out_fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->o = msnap_out_fdopen(out_fd, zstd_level);
    if (!w->o) {
        close(out_fd);
        free(w);
        snprintf(err, errlen, "cannot open the output: %s", strerror(errno));
        return -1;
    }
    ival *ext = GET(top, "memsnap");
    if (ext && ext->type != IV_DICT)
        ext = NULL;
    ival *eh = GET(ext, "header");
    int ok = 1;
    /* header */
    msnap_header *h = calloc(1, sizeof *h);
    char argv0[512];
    snprintf(argv0, sizeof argv0, "imported from %s", source ? source : "a PyTorch snapshot");
    const char *argv[] = {argv0};
    h->major = MSNAP_FORMAT_MAJOR;
    h->minor = MSNAP_FORMAT_MINOR;
    h->argv = argv;
    h->argc = 1;
    snprintf(h->clock, sizeof h->clock, "CLOCK_MONOTONIC");
    snprintf(h->mode, sizeof h->mode, "import");
    /* torch's time_us are wall-clock microseconds: the first event becomes
     * t = 0 and its wall-clock time the header's t0_unix_ns, so durations
     * and time axes read like those of a recording.  Our own JSON export
     * carries exact times and t0 in its extension instead. */
    uint64_t rebase = 0;
    if (eh) {
        h->pid = iv_int(GET(eh, "pid"), &ok);
        snprintf(h->host, sizeof h->host, "%s", iv_str(GET(eh, "host")) ? iv_str(GET(eh, "host")) : "");
        const char *t0 = iv_str(GET(eh, "t0_unix_ns"));
        h->t0_unix_ns = t0 ? strtoull(t0, NULL, 16) : 0;
    } else if (m->have_t) {
        rebase = m->t_min;
        h->t0_unix_ns = m->t_min;
    }
    /* settings: where it came from, and what torch said about its allocator
     * (at most SETTINGS_MAX bytes of JSON each: a pickle can share one list
     * into 2^40 leaves in 80 bytes; a bigger one is replaced by a note) */
    char *settings = NULL;
    {
        ival *as = GET(top, "allocator_settings");
        char *asj = as ? iv_to_json(as, SETTINGS_MAX) : NULL;
        char *argvj = eh ? iv_to_json(GET(eh, "argv"), SETTINGS_MAX) : NULL;
        if (as && !asj)
            asj = strdup("\"(not kept: more than 256 KiB as JSON)\"");
        size_t n = 200 + (asj ? strlen(asj) : 0) + (argvj ? strlen(argvj) : 0);
        settings = malloc(n);
        if (settings)
            snprintf(settings, n, "{\"imported\":\"%s\"%s%s%s%s}",
                     ext ? "memsnap torch export" : "pytorch", asj ? ",\"allocator_settings\":" : "",
                     asj ? asj : "", argvj ? ",\"original_argv\":" : "", argvj ? argvj : "");
        free(asj);
        free(argvj);
    }
    h->settings_json = settings ? settings : "{}";
    char *hb = malloc(1 << 20);
    size_t hn = hb ? msnap_fmt_header(hb, 1 << 20, h) : 0;
    if (!hn || msnap_out_write(w->o, hb, hn))
        w->fail = 1;
    free(hb);
    free(settings);
    free(h);
    /* devices */
    ival *devs = GET(ext, "devices");
    if (devs && devs->type == IV_LIST && devs->u.a.n) {
        for (size_t i = 0; i < devs->u.a.n; i++) {
            if (iv_over_budget(m->in))
                goto budget;
            msnap_device_info d = {0};
            d.index = (int)iv_int(GET(devs->u.a.v[i], "index"), &ok);
            snprintf(d.name, sizeof d.name, "%s", iv_str(GET(devs->u.a.v[i], "name")) ? iv_str(GET(devs->u.a.v[i], "name")) : "");
            d.total = iv_u64(GET(devs->u.a.v[i], "total"), &ok);
            ext_line(m, w, msnap_fmt_device(w->buf, sizeof w->buf, &d));
        }
    } else {
        for (int d = 0; d < MSNAP_MAX_DEVICES; d++) {
            if (!m->dev_seen[d])
                continue;
            /* PyTorch does not record the device's memory: total 0 is
             * "unknown" (docs/format.md, device), never "0 B" */
            msnap_device_info di = {.index = d, .total = 0};
            snprintf(di.name, sizeof di.name, "PyTorch device %d (imported)", d);
            wline(w, msnap_fmt_device(w->buf, sizeof w->buf, &di));
        }
    }
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        m->st->devices += m->dev_seen[d];
    /* tables */
    if (ext) {
        if (write_ext_tables(m, w, ext))
            goto budget;
    } else {
        if (m->have_snapshot_marker) {
            msnap_str s = {1, "torch.cuda.memory._snapshot()"};
            wline(w, msnap_fmt_str(w->buf, sizeof w->buf, &s));
        }
        for (size_t i = 0; i < m->nstacks; i++) {
            uint64_t ips[MSNAP_MAX_FRAMES];
            for (int k = 0; k < m->stacks[i].depth; k++)
                ips[k] = synth_ip(m, m->stacks[i].fids[k]);
            msnap_stack s = {(uint32_t)i + 1, m->stacks[i].depth, ips};
            wline(w, msnap_fmt_stack(w->buf, sizeof w->buf, &s));
        }
        for (size_t i = 0; i < m->nframes; i++) {
            msnap_symbol y = {synth_ip(m, (uint32_t)i + 1), m->frames[i].name, m->frames[i].file, (int)m->frames[i].line, 0};
            wline(w, msnap_fmt_symbol(w->buf, sizeof w->buf, &y));
        }
        m->st->stacks = m->nstacks;
    }
    /* the final state: our own export's exact "live" list, else the
     * segments */
    int exact = 0;
    if (ext_live(m, GET(ext, "live"), &exact, err, errlen)) {
        msnap_out_close(w->o);
        free(w);
        return -1;
    }
    const msnap_live *fin = exact ? m->xlive : m->live;
    size_t nfin = exact ? m->nxlive : m->nlive;
    /* what was live at the trace's start, as events at its first time */
    start_set start = {0};
    if (start_state(m, rebase, fin, nfin, exact, ext != NULL, &start, err, errlen)) {
        free(start.o);
        msnap_out_close(w->o);
        free(w);
        return -1;
    }
    uint64_t last_t = start.t, nev = 0, total_ev;
    if (start.n)
        qsort(start.o, start.n, sizeof *start.o, cmp_start);
    for (size_t i = 0; i < start.n; i++) {
        msnap_event e = start_event(&start, &start.o[i]);
        wline(w, msnap_fmt_event(w->buf, sizeof w->buf, &e));
        nev++;
    }
    m->st->start_objects = start.n;
    free(start.o);
    /* events: merge the spills by (k1, source, k2); as long as the reading
     * for a big trace, so it has its own progress item */
    merge g;
    msnap_event ev;
    int rc;
    total_ev = nev;
    for (int s = 0; s < NSRC; s++)
        total_ev += m->src[s].n;
    msnap_progress("writing events", 0, total_ev, 0);
    if (merge_start(m, &g, rebase))
        goto ioerr;
    while ((rc = merge_next(m, &g, &ev)) == 1) {
        if (ev.t_ns > last_t)
            last_t = ev.t_ns;
        wline(w, msnap_fmt_event(w->buf, sizeof w->buf, &ev));
        if (!(++nev & 0xffff))
            msnap_progress("writing events", nev, total_ev, 0);
    }
    if (rc < 0)
        goto ioerr;
    msnap_progress("writing events", MSNAP_PROGRESS_END, total_ev, 0);
    /* the state the snapshot was taken in */
    wline(w, msnap_fmt_state_begin(w->buf, sizeof w->buf, last_t, nfin));
    for (size_t i = 0; i < nfin; i++) {
        msnap_live l = fin[i];
        if (!exact) {
            l.t_ns = last_t;
            if (ext)
                l.stack = 0; /* synthesized ids do not match the extension's stacks */
        }
        wline(w, msnap_fmt_live(w->buf, sizeof w->buf, &l));
    }
    msnap_trailer tr = {last_t, nev, 0, 0, "import"};
    wline(w, msnap_fmt_trailer(w->buf, sizeof w->buf, &tr));
    rc = msnap_out_close(w->o);
    w->o = NULL;
    if (rc || w->fail) {
        snprintf(err, errlen, "cannot write the output: %s", strerror(errno ? errno : EIO));
        free(w);
        return -1;
    }
    free(w);
    return 0;
budget:
    iv_budget_fail(m->in, err, errlen);
    msnap_out_close(w->o);
    free(w);
    return -1;
ioerr:
    snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
    msnap_out_close(w->o);
    free(w);
    return -1;
}

int msnap_import_torch(const char *in_path, msnap_import_kind kind, int out_fd, int zstd_level,
                       const char *source_name, msnap_interop_stats *st, char *err, size_t errlen)
{
    msnap_interop_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    iv_in in;
    if (iv_in_open(&in, in_path, err, errlen)) {
        close(out_fd);
        return -1;
    }
    timp *m = calloc(1, sizeof *m);
    int rc = -1;
    if (!m) {
        snprintf(err, errlen, "out of memory");
        close(out_fd);
        goto done;
    }
    m->st = st;
    m->in = &in;
    iv_sink sink = {m, sink_item};
    int c = iv_in_peek(&in);
    if (c < 0) {
        if (in.error)
            snprintf(err, errlen, "cannot read: %s", strerror(in.error));
        else
            snprintf(err, errlen, "is empty: no PyTorch snapshot in it");
        close(out_fd);
        goto done;
    }
    if (kind == MSNAP_IMPORT_AUTO)
        kind = c == 0x80 ? MSNAP_IMPORT_PICKLE : MSNAP_IMPORT_JSON;
    ival *top = kind == MSNAP_IMPORT_PICKLE ? iv_read_pickle(&in, &sink, err, errlen)
                                            : iv_read_json(&in, &sink, err, errlen);
    msnap_progress(in.what, MSNAP_PROGRESS_END, in.total, 1); /* read: the writing is next */
    if (!top) {
        close(out_fd);
        goto done;
    }
    if (top->type != IV_DICT || (!GET(top, "segments") && !GET(top, "device_traces"))) {
        snprintf(err, errlen, "not a PyTorch memory snapshot (a dict with \"segments\" and "
                              "\"device_traces\")");
        iv_unref(top);
        close(out_fd);
        goto done;
    }
    rc = write_output(m, top, out_fd, zstd_level, source_name, err, errlen);
    iv_unref(top);
done:
    st->bytes_read = iv_in_offset(&in);
    st->work_steps = in.steps;
    iv_in_close(&in);
    if (m) {
        for (size_t i = 0; i < m->nframes; i++) {
            free(m->frames[i].file);
            free(m->frames[i].name);
        }
        free(m->frames);
        for (size_t i = 0; i < m->nstacks; i++)
            free(m->stacks[i].fids);
        free(m->stacks);
        free(m->live);
        free(m->xlive);
        free(m->mapv);
        u64map_free(&m->frame_ix);
        u64map_free(&m->stack_ix);
        u64map_free(&m->maps[0]);
        for (int s = 0; s < NSRC; s++)
            spill_close(&m->src[s]);
        free(m);
    }
    return rc;
}

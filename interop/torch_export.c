/* torch_export: a memsnap snapshot as PyTorch's memory snapshot dict, in
 * JSON — what torch.cuda.memory._snapshot() returns and what
 * pytorch.org/memory_viz loads.  docs/interop.md has the mapping.
 *
 * One streaming pass over the input: the tracker (track.c) keeps the live
 * state (it becomes "segments" at the end), the id tables (stacks, symbols,
 * modules, strings) are kept, and every event is spilled to a temporary file
 * per device (torch events) or to one more (events torch has no action
 * for).  Then the output is written: segments, device_traces (one list per
 * device, read back from the spills), and the "memsnap" extension, which
 * carries what torch's schema cannot (header, exact ns times, threads,
 * APIs, raw stacks, other events), so that `memsnap import` gives back the
 * same events.  memory_viz ignores keys it does not know.
 */
#include "interop.h"
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct sym_ent { char *fn, *file; int line; } sym_ent;
typedef struct mod_ent { uint64_t base, size; char *path, *build_id; } mod_ent;
typedef struct stk_ent { uint32_t id; int depth; uint64_t *ips; char *frames_json; } stk_ent;

typedef struct texp {
    msnap_header hdr;
    char **argv;
    int argc;
    char *settings;
    msnap_device_info devs[MSNAP_MAX_DEVICES];
    int have_dev[MSNAP_MAX_DEVICES];
    u64map stack_ix;              /* stack id -> index in stacks */
    stk_ent *stacks; size_t nstacks, capstacks;
    u64map sym_ix;                /* ip -> index in syms */
    sym_ent *syms; size_t nsyms, capsyms;
    mod_ent *mods; size_t nmods, capmods;
    msnap_str *strs; size_t nstrs, capstrs;
    track tr;
    spill dev[MSNAP_MAX_DEVICES]; /* torch events, per device */
    spill other;                  /* events torch has no action for */
    uint64_t nevents;
} texp;

static char *dupz(const char *s) { return strdup(s ? s : ""); }

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

/* Reads the whole input: tables, tracker, spills. */
static int texp_read(texp *x, const char *path, msnap_interop_stats *st, char *err, size_t errlen)
{
    char rerr[256];
    msnap_reader *r = msnap_reader_open(path, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s", rerr);
        return -1;
    }
    msnap_record rec;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        switch (rec.type) {
        case MSNAP_REC_HEADER: {
            const msnap_header *h = &rec.u.header;
            x->hdr = *h;
            x->argc = h->argc;
            x->argv = calloc((size_t)h->argc + 1, sizeof *x->argv);
            for (int i = 0; x->argv && i < h->argc; i++)
                x->argv[i] = dupz(h->argv[i]);
            x->settings = dupz(h->settings_json);
            for (int i = 0; i < h->ndevices; i++)
                if (h->devices[i].index >= 0 && h->devices[i].index < MSNAP_MAX_DEVICES) {
                    x->devs[h->devices[i].index] = h->devices[i];
                    x->have_dev[h->devices[i].index] = 1;
                }
            break;
        }
        case MSNAP_REC_DEVICE:
            if (rec.u.device.index >= 0 && rec.u.device.index < MSNAP_MAX_DEVICES) {
                x->devs[rec.u.device.index] = rec.u.device;
                x->have_dev[rec.u.device.index] = 1;
            }
            break;
        case MSNAP_REC_STACK: {
            if (GROW(x->stacks, x->nstacks, x->capstacks))
                goto oom;
            stk_ent *s = &x->stacks[x->nstacks];
            s->id = rec.u.stack.id;
            s->depth = rec.u.stack.depth;
            s->frames_json = NULL;
            s->ips = malloc(((size_t)s->depth + 1) * sizeof *s->ips);
            if (!s->ips)
                goto oom;
            memcpy(s->ips, rec.u.stack.ips, (size_t)s->depth * sizeof *s->ips);
            uint64_t *old = u64map_get(&x->stack_ix, 0, s->id);
            if (old) { /* a repeated id replaces the earlier stack */
                free(x->stacks[*old].ips);
                x->stacks[*old] = *s;
            } else {
                if (u64map_put(&x->stack_ix, 0, s->id, x->nstacks))
                    goto oom;
                x->nstacks++;
            }
            break;
        }
        case MSNAP_REC_SYMBOL: {
            const msnap_symbol *y = &rec.u.symbol;
            uint64_t *old = u64map_get(&x->sym_ix, 0, y->ip);
            if (old) {
                if (!y->function[0])
                    break; /* keep a named one */
                free(x->syms[*old].fn);
                free(x->syms[*old].file);
                x->syms[*old] = (sym_ent){dupz(y->function), dupz(y->file), y->line};
                break;
            }
            if (GROW(x->syms, x->nsyms, x->capsyms))
                goto oom;
            x->syms[x->nsyms] = (sym_ent){dupz(y->function), dupz(y->file), y->line};
            if (u64map_put(&x->sym_ix, 0, y->ip, x->nsyms))
                goto oom;
            x->nsyms++;
            break;
        }
        case MSNAP_REC_MODULE:
            if (GROW(x->mods, x->nmods, x->capmods))
                goto oom;
            x->mods[x->nmods++] = (mod_ent){rec.u.module.base, rec.u.module.size,
                                            dupz(rec.u.module.path), dupz(rec.u.module.build_id)};
            break;
        case MSNAP_REC_STR:
            if (GROW(x->strs, x->nstrs, x->capstrs))
                goto oom;
            x->strs[x->nstrs].id = rec.u.str.id;
            x->strs[x->nstrs++].s = dupz(rec.u.str.s);
            break;
        case MSNAP_REC_EVENT: {
            const msnap_event *e = &rec.u.event;
            trk_obj freed;
            if (track_event(&x->tr, e, &freed) < 0)
                goto oom;
            spill_rec sr = {.k1 = x->nevents++, .k2 = e->size ? e->size : freed.size, .e = *e};
            spill *dst = &x->other;
            if (is_torch_event(e->action) && e->device >= 0 && e->device < MSNAP_MAX_DEVICES)
                dst = &x->dev[e->device];
            if (spill_put(dst, &sr)) {
                snprintf(err, errlen, "cannot write a temporary file: %s", strerror(errno));
                msnap_reader_close(r);
                return -1;
            }
            break;
        }
        default:
            break;
        }
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s", msnap_reader_error(r));
        msnap_reader_close(r);
        return -1;
    }
    msnap_reader_close(r);
    st->events_in = x->nevents;
    return 0;
oom:
    msnap_reader_close(r);
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* The frames list of a stack id as JSON text, cached. */
static const char *frames_json(texp *x, uint32_t id)
{
    uint64_t *ix = id ? u64map_get(&x->stack_ix, 0, id) : NULL;
    if (!ix)
        return "[]";
    stk_ent *s = &x->stacks[*ix];
    if (s->frames_json)
        return s->frames_json;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return "[]";
    putc('[', m);
    for (int i = 0; i < s->depth; i++) {
        uint64_t ip = s->ips[i];
        if (i)
            putc(',', m);
        uint64_t *yi = u64map_get(&x->sym_ix, 0, ip);
        const sym_ent *y = yi ? &x->syms[*yi] : NULL;
        if (y && y->fn[0]) {
            fputs("{\"filename\":", m);
            jw_str(m, y->file[0] ? y->file : "??");
            fprintf(m, ",\"line\":%d,\"name\":", y->line);
            jw_str(m, y->fn);
            putc('}', m);
            continue;
        }
        const mod_ent *mod = NULL;
        for (size_t k = 0; k < x->nmods; k++)
            if (ip >= x->mods[k].base && ip - x->mods[k].base < x->mods[k].size)
                mod = &x->mods[k];
        char name[600];
        if (mod) {
            const char *base = strrchr(mod->path, '/');
            snprintf(name, sizeof name, "%s+0x%" PRIx64, base ? base + 1 : mod->path, ip - mod->base);
            fputs("{\"filename\":", m);
            jw_str(m, mod->path);
        } else {
            snprintf(name, sizeof name, "0x%" PRIx64, ip);
            fputs("{\"filename\":\"??\"", m);
        }
        fputs(",\"line\":0,\"name\":", m);
        jw_str(m, name);
        putc('}', m);
    }
    putc(']', m);
    fclose(m);
    s->frames_json = buf;
    return buf ? buf : "[]";
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
    if (e->tid) fprintf(f, ",\"th\":%u", e->tid);
    if (e->api) fprintf(f, ",\"f\":\"%s\"", msnap_api_name(e->api));
    if (e->result) fprintf(f, ",\"r\":%d", e->result);
    putc('}', f);
}

/* One torch trace entry.  syn: synthesized (no allocator blocks seen). */
static void entry(texp *x, FILE *f, int *first, const char *action, uint64_t addr, uint64_t size,
                  const msnap_event *e, uint64_t i, uint64_t time_us, int syn, int oom)
{
    fputs(*first ? "\n{" : ",\n{", f);
    *first = 0;
    fprintf(f, "\"action\":\"%s\",\"%s\":%" PRIu64 ",\"size\":%" PRIu64 ",\"stream\":%" PRId64
               ",\"time_us\":%" PRIu64 ",\"frames\":%s,\"memsnap\":",
            action, oom ? "device_free" : "addr", addr, size, (int64_t)e->stream, time_us,
            frames_json(x, e->stack));
    if (syn)
        fputs("{\"syn\":1}", f);
    else
        event_json(f, e, i);
    putc('}', f);
}

/* ---- segments (the final state) ------------------------------------------- */

typedef struct seg { uint64_t addr, size, stream; uint32_t stack; int16_t device; uint8_t expandable, orphan; } seg;
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

static void write_block(FILE *f, int *bfirst, uint64_t addr, uint64_t size, const char *state,
                        const char *frames)
{
    fprintf(f, "%s{\"address\":%" PRIu64 ",\"size\":%" PRIu64 ",\"requested_size\":%" PRIu64
               ",\"state\":\"%s\",\"frames\":%s}",
            *bfirst ? "" : ",", addr, size, strcmp(state, "inactive") ? size : 0, state, frames);
    *bfirst = 0;
}

static void write_segments(texp *x, FILE *f, msnap_interop_stats *st)
{
    vec segs = {.sz = sizeof(trk_obj)}, maps = {.sz = sizeof(trk_obj)}, blocks = {.sz = sizeof(trk_obj)};
    track_each(&x->tr, TRK_ALLOC, vec_add, &segs);
    track_each(&x->tr, TRK_ASYNC, vec_add, &segs);
    track_each(&x->tr, TRK_VMM_MAP, vec_add, &maps);
    track_each(&x->tr, TRK_BLOCK, vec_add, &blocks);
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
    int sfirst = 1;
    fputs("\"segments\":[", f);
    for (size_t si = 0; si <= segs.n; si++) {
        /* blocks before this segment that no segment holds: a segment each */
        while (bi < blocks.n && (si == segs.n || bk[bi].device < sg[si].device ||
                                 (bk[bi].device == sg[si].device && bk[bi].addr < sg[si].addr))) {
            const trk_obj *b = &bk[bi++];
            const char *fr = frames_json(x, b->stack);
            fprintf(f, "%s\n{\"device\":%d,\"address\":%" PRIu64 ",\"total_size\":%" PRIu64
                       ",\"allocated_size\":%" PRIu64 ",\"active_size\":%" PRIu64
                       ",\"requested_size\":%" PRIu64 ",\"stream\":%" PRId64
                       ",\"segment_type\":\"%s\",\"segment_pool_id\":[0,0],\"is_expandable\":false,"
                       "\"memsnap_synthesized\":true,\"frames\":[],\"blocks\":[",
                    sfirst ? "" : ",", b->device, b->addr, b->size, b->size, b->size, b->size,
                    (int64_t)b->stream, b->size <= (1u << 20) ? "small" : "large");
            int bf = 1;
            write_block(f, &bf, b->addr, b->size, "active_allocated", fr);
            fputs("]}", f);
            sfirst = 0;
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
        int syn = !x->tr.have_blocks;
        if (syn)
            used = s->size;
        fprintf(f, "%s\n{\"device\":%d,\"address\":%" PRIu64 ",\"total_size\":%" PRIu64
                   ",\"allocated_size\":%" PRIu64 ",\"active_size\":%" PRIu64
                   ",\"requested_size\":%" PRIu64 ",\"stream\":%" PRId64
                   ",\"segment_type\":\"%s\",\"segment_pool_id\":[0,0],\"is_expandable\":%s,"
                   "\"frames\":%s,\"blocks\":[",
                sfirst ? "" : ",", s->device, s->addr, s->size, used, used, used, (int64_t)s->stream,
                s->size <= (2u << 20) ? "small" : "large",
                s->layer == TRK_VMM_MAP ? "true" : "false", frames_json(x, s->stack));
        sfirst = 0;
        st->segments++;
        int bf = 1;
        if (syn) {
            write_block(f, &bf, s->addr, s->size, "active_allocated", frames_json(x, s->stack));
            st->blocks++;
        } else {
            for (size_t k = b0; k < bi; k++) {
                const trk_obj *b = &bk[k];
                uint64_t ba = b->addr < cur ? cur : b->addr; /* overlaps are clipped */
                uint64_t be = b->addr + b->size > end ? end : b->addr + b->size;
                if (be <= ba)
                    continue;
                if (ba > cur)
                    write_block(f, &bf, cur, ba - cur, "inactive", "[]");
                write_block(f, &bf, ba, be - ba, "active_allocated", frames_json(x, b->stack));
                st->blocks++;
                cur = be;
            }
            if (cur < end)
                write_block(f, &bf, cur, end - cur, "inactive", "[]");
        }
        fputs("]}", f);
    }
    fputs("]", f);
    free(segs.v);
    free(maps.v);
    free(blocks.v);
}

static int write_traces(texp *x, FILE *f, msnap_interop_stats *st, char *err, size_t errlen)
{
    int ndev = x->tr.max_device + 1;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (x->have_dev[d] && d + 1 > ndev)
            ndev = d + 1;
    fputs(",\n\"device_traces\":[", f);
    for (int d = 0; d < ndev; d++) {
        spill *s = &x->dev[d];
        if (spill_rewind(s)) {
            snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
            return -1;
        }
        fputs(d ? ",\n[" : "[", f);
        int first = 1, rc;
        uint64_t last_us = 0;
        spill_rec r;
        int syn = !x->tr.have_blocks;
        while ((rc = spill_get(s, &r)) == 1) {
            const msnap_event *e = &r.e;
            uint64_t us = e->t_ns / 1000;
            if (us < last_us)
                us = last_us; /* memory_viz wants time_us ascending */
            last_us = us;
            uint64_t size = r.k2;
            switch (e->action) {
            case MSNAP_A_BLOCK_ALLOC:
                entry(x, f, &first, "alloc", e->addr, size, e, r.k1, us, 0, 0);
                break;
            case MSNAP_A_BLOCK_FREE:
                entry(x, f, &first, "free_requested", e->addr, size, e, r.k1, us, 1, 0);
                entry(x, f, &first, "free_completed", e->addr, size, e, r.k1, us, 0, 0);
                break;
            case MSNAP_A_ALLOC:
            case MSNAP_A_ASYNC_ALLOC:
                entry(x, f, &first, "segment_alloc", e->addr, size, e, r.k1, us, 0, 0);
                if (syn)
                    entry(x, f, &first, "alloc", e->addr, size, e, r.k1, us, 1, 0);
                break;
            case MSNAP_A_FREE:
            case MSNAP_A_ASYNC_FREE:
                if (syn) {
                    entry(x, f, &first, "free_requested", e->addr, size, e, r.k1, us, 1, 0);
                    entry(x, f, &first, "free_completed", e->addr, size, e, r.k1, us, 1, 0);
                }
                entry(x, f, &first, "segment_free", e->addr, size, e, r.k1, us, 0, 0);
                break;
            case MSNAP_A_VMM_MAP:
                entry(x, f, &first, "segment_map", e->addr, size, e, r.k1, us, 0, 0);
                break;
            case MSNAP_A_VMM_UNMAP:
                entry(x, f, &first, "segment_unmap", e->addr, size, e, r.k1, us, 0, 0);
                break;
            case MSNAP_A_OOM:
                entry(x, f, &first, "oom", e->aux, e->size, e, r.k1, us, 0, 1);
                break;
            }
            st->events_out++;
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
            return -1;
        }
        fputs("]", f);
        st->devices++;
    }
    fputs("]", f);
    return 0;
}

static int write_ext(texp *x, FILE *f, char *err, size_t errlen)
{
    fprintf(f, ",\n\"memsnap\":{\"format\":\"memsnap torch export\",\"version\":\"%d.%d\","
               "\"header\":{\"pid\":%" PRId64 ",\"host\":",
            MSNAP_FORMAT_MAJOR, MSNAP_FORMAT_MINOR, x->hdr.pid);
    jw_str(f, x->hdr.host);
    fputs(",\"argv\":[", f);
    for (int i = 0; i < x->argc; i++) {
        if (i)
            putc(',', f);
        jw_str(f, x->argv && x->argv[i] ? x->argv[i] : "");
    }
    fprintf(f, "],\"t0_unix_ns\":\"0x%" PRIx64 "\",\"mode\":", x->hdr.t0_unix_ns);
    jw_str(f, x->hdr.mode);
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
    fputs("],\n\"stacks\":[", f);
    for (size_t i = 0; i < x->nstacks; i++) {
        fprintf(f, "%s{\"id\":%u,\"ips\":[", i ? ",\n" : "", x->stacks[i].id);
        for (int k = 0; k < x->stacks[i].depth; k++)
            fprintf(f, "%s\"0x%" PRIx64 "\"", k ? "," : "", x->stacks[i].ips[k]);
        fputs("]}", f);
    }
    fputs("],\n\"syms\":[", f);
    first = 1;
    for (size_t i = 0; i < x->sym_ix.cap; i++) {
        if (!x->sym_ix.slots[i].used)
            continue;
        const sym_ent *y = &x->syms[x->sym_ix.slots[i].value];
        fprintf(f, "%s{\"ip\":\"0x%" PRIx64 "\",\"fn\":", first ? "" : ",\n", x->sym_ix.slots[i].key);
        jw_str(f, y->fn);
        fputs(",\"file\":", f);
        jw_str(f, y->file);
        fprintf(f, ",\"line\":%d}", y->line);
        first = 0;
    }
    fputs("],\n\"modules\":[", f);
    for (size_t i = 0; i < x->nmods; i++) {
        fprintf(f, "%s{\"base\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"path\":", i ? ",\n" : "",
                x->mods[i].base, x->mods[i].size);
        jw_str(f, x->mods[i].path);
        fputs(",\"build_id\":", f);
        jw_str(f, x->mods[i].build_id);
        putc('}', f);
    }
    fputs("],\n\"strs\":[", f);
    for (size_t i = 0; i < x->nstrs; i++) {
        fprintf(f, "%s{\"id\":%u,\"s\":", i ? ",\n" : "", x->strs[i].id);
        jw_str(f, x->strs[i].s);
        putc('}', f);
    }
    fputs("],\n\"events\":[", f);
    if (spill_rewind(&x->other)) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        return -1;
    }
    spill_rec r;
    int rc;
    first = 1;
    while ((rc = spill_get(&x->other, &r)) == 1) {
        if (!first)
            fputs(",\n", f);
        event_json(f, &r.e, r.k1);
        first = 0;
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        return -1;
    }
    fputs("]}", f);
    return 0;
}

static void texp_free(texp *x)
{
    for (int i = 0; x->argv && i < x->argc; i++)
        free(x->argv[i]);
    free(x->argv);
    free(x->settings);
    for (size_t i = 0; i < x->nstacks; i++) {
        free(x->stacks[i].ips);
        free(x->stacks[i].frames_json);
    }
    free(x->stacks);
    for (size_t i = 0; i < x->nsyms; i++) {
        free(x->syms[i].fn);
        free(x->syms[i].file);
    }
    free(x->syms);
    for (size_t i = 0; i < x->nmods; i++) {
        free(x->mods[i].path);
        free(x->mods[i].build_id);
    }
    free(x->mods);
    for (size_t i = 0; i < x->nstrs; i++)
        free((char *)x->strs[i].s);
    free(x->strs);
    u64map_free(&x->stack_ix);
    u64map_free(&x->sym_ix);
    track_free(&x->tr);
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        spill_close(&x->dev[d]);
    spill_close(&x->other);
}

int msnap_export_torch(const char *in_path, FILE *out, msnap_interop_stats *st, char *err,
                       size_t errlen)
{
    msnap_interop_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    texp *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    track_init(&x->tr);
    int rc = texp_read(x, in_path, st, err, errlen);
    if (!rc) {
        st->synthesized_blocks = !x->tr.have_blocks;
        st->stacks = x->nstacks;
        fputs("{", out);
        write_segments(x, out, st);
        rc = write_traces(x, out, st, err, errlen);
        if (!rc)
            rc = write_ext(x, out, err, errlen);
        fputs("}\n", out);
        if (!rc && (fflush(out) || ferror(out))) {
            snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
            rc = -1;
        }
    }
    texp_free(x);
    free(x);
    return rc;
}

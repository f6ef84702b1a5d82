/* The live view of a recording (live.h): the source is found once, then
 * each update reads what came and recomputes the view from the one read's
 * tables and state, with the findings model beside it for the labels, the
 * segment layout and the floor.
 *
 * One read.  follow and file sources own one an_file with a model (pass 1
 * only: no columns) and this file's observer, fed a record at a time by a
 * format reader of their own (in follow mode for a stream recording), so
 * the view after each update is that of a read of the file up to there:
 * what `memsnap summary` says of the same lines.  A ring source reads its
 * live file into a fresh an_file at each update (it is small and whole).
 *
 * The observer keeps what the state does not: one point a second of
 * recording time per device for the sparkline (the levels as the read
 * passes each second; a ring-mode file's counters lines instead, which
 * cover its whole run), each second's live bytes per site for the trends
 * (the last minute of them), the OOMs per device, NVML's last used figure,
 * the trailer.
 *
 * Trends.  A site's trend is its live bytes now minus its live bytes at the
 * sample AN_LIVE_TREND_NS of recording time earlier (the oldest sample when
 * the recording is shorter), summed over the stacks its label groups.  A
 * follow or file source samples by state site index each second; a ring
 * source, whose file is read anew each time, keeps one sample per update
 * by group key.
 */
#define _GNU_SOURCE
#include "live.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "breakdown.h"
#include "findings.h"
#include "format/state.h"
#include "symbolize/symbolize.h"
#include "util/u64map.h"

#define SEC 1000000000ull
#define NSAMPLES 64                 /* site samples kept: a minute and more */
#define BUDGET (1u << 20)           /* records an update reads at most */

/* Live bytes per site (or per group) at one second of recording time. */
typedef struct sample {
    uint64_t t;
    int by_group;                   /* keys are group keys, not site indexes */
    size_t n, cap;
    uint64_t *key, *bytes;
} sample;

typedef struct hist {
    an_live_point p[AN_LIVE_HISTORY];
    size_t head, n;                 /* ring: the oldest at head */
} hist;

struct an_live {
    char *path;
    char live_path[PATH_MAX], want_path[PATH_MAX];
    an_live_opts o;
    int source;
    int hist_from_counters;         /* a ring-mode file: its counters */
    cat_rules *rules;

    /* the read */
    int have_file;
    an_file f;
    sm_model *m;
    msnap_reader *rd;
    int follow;                     /* rd follows a file being written */
    int trailer;                    /* the trailer was read */
    int at_reached;                 /* --at: the first event after it came */
    int fed_end;                    /* an_feed_end was called */
    uint64_t lines_read;

    /* the observer */
    int tick_started;
    uint64_t next_tick;
    uint64_t ooms[MSNAP_ST_NDEV];
    uint64_t used[MSNAP_ST_NDEV];
    int torch;
    char reason[32];
    uint64_t tr_events, tr_dropped, tr_t;
    hist hist[MSNAP_ST_NDEV];
    sample samples[NSAMPLES];
    size_t s_head, s_n;
    sm_leakfinder lf;               /* a ring file's floor, over its counters */
    uint64_t cnt_stacked[MSNAP_ST_NDEV];

    /* follow: the file followed (a new recording renamed over the path is
     * another file) */
    dev_t dev;
    ino_t ino;
    int replaced;

    /* ring: the live file last read */
    struct timespec live_mtime;
    int have_live_mtime;
    double last_data;               /* wall clock (s) when new data came */

    /* native frames named here (an_live_opts.symbolize): the symbolizer,
     * its modules (base ^ size) and the ips tried for this read */
    msnap_symbolizer *sym;
    u64map sym_mods, sym_tried;
    size_t sym_nmods, sym_nstacks;

    /* categories by stack (+1; 0: not known) for the tables as they are */
    u64map cat_cache;
    size_t cat_nsyms, cat_nstacks;

    an_live_view *view;
};

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int an_live_file_path(const char *path, const char *suffix, char *buf, size_t cap)
{
    return (size_t)snprintf(buf, cap, "%s%s", path, suffix) < cap ? 0 : -1;
}

/* ---- the observer ---------------------------------------------------------- */

static hist *hist_of(an_live *l, int slot)
{
    return &l->hist[slot];
}

static void hist_push(hist *h, uint64_t t, uint64_t reserved, uint64_t allocated)
{
    an_live_point pt = {t, reserved, allocated};
    if (h->n && h->p[(h->head + h->n - 1) % AN_LIVE_HISTORY].t_ns == t) {
        h->p[(h->head + h->n - 1) % AN_LIVE_HISTORY] = pt;
        return;
    }
    if (h->n < AN_LIVE_HISTORY) {
        h->p[(h->head + h->n++) % AN_LIVE_HISTORY] = pt;
    } else {
        h->p[h->head] = pt;
        h->head = (h->head + 1) % AN_LIVE_HISTORY;
    }
}

/* A new sample slot (the oldest reused); NULL never. */
static sample *sample_new(an_live *l, uint64_t t, int by_group)
{
    sample *s;
    if (l->s_n < NSAMPLES) {
        s = &l->samples[(l->s_head + l->s_n++) % NSAMPLES];
    } else {
        s = &l->samples[l->s_head];
        l->s_head = (l->s_head + 1) % NSAMPLES;
    }
    s->t = t;
    s->by_group = by_group;
    s->n = 0;
    return s;
}

static int sample_put(sample *s, uint64_t key, uint64_t bytes)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint64_t *k = realloc(s->key, nc * sizeof *k);
        if (!k)
            return -1;
        s->key = k;
        uint64_t *b = realloc(s->bytes, nc * sizeof *b);
        if (!b)
            return -1;
        s->bytes = b;
        s->cap = nc;
    }
    s->key[s->n] = key;
    s->bytes[s->n++] = bytes;
    return 0;
}

/* The seconds of recording time up to t (before the event at t changes
 * anything): a history point per device and one site sample. */
static int tick(an_live *l, an_file *f, uint64_t t)
{
    if (l->source == AN_LIVE_RING)
        return 0;   /* its samples are by group, one an update */
    if (!l->tick_started) {
        l->tick_started = 1;
        l->next_tick = t - t % SEC + SEC;
        return 0;
    }
    if (t < l->next_tick)
        return 0;
    uint64_t missed = (t - l->next_tick) / SEC + 1;
    uint64_t last = l->next_tick + (missed - 1) * SEC;
    uint64_t from = missed > AN_LIVE_HISTORY ? last - (AN_LIVE_HISTORY - 1) * SEC
                                             : l->next_tick;
    const msnap_state *st = &f->st;
    if (!l->hist_from_counters)
        for (int d = 0; d < MSNAP_MAX_DEVICES; d++) {
            if (!st->seen[d])
                continue;
            uint64_t r = st->lv[d][MSNAP_LAYER_RESERVED].cur;
            uint64_t a = st->lv[d][MSNAP_LAYER_ALLOCATED].cur;
            for (uint64_t x = from; x <= last; x += SEC)
                hist_push(hist_of(l, d), x, r, a);
        }
    l->next_tick = last + SEC;
    sample *s = sample_new(l, last, 0);
    for (size_t i = 0; i < st->nsites; i++) {
        const msnap_site *ss = &st->sites[i];
        if (ss->live && (ss->layer == MSNAP_LAYER_ALLOCATED || ss->layer == MSNAP_LAYER_RESERVED) &&
            sample_put(s, i, ss->live))
            return -1;
    }
    return 0;
}

static int obs_event(void *ctx, an_file *f, const msnap_event *e)
{
    an_live *l = ctx;
    if (e->api == MSNAP_API_TORCH)
        l->torch = 1;
    if (e->action == MSNAP_A_OOM)
        l->ooms[msnap_st_slot(e->device)]++;
    return tick(l, f, e->t_ns);
}

/* A ring file's counters: the sparkline's points and the floor. */
static void counters_point(an_live *l, const msnap_counters *c)
{
    if (c->device < 0 || c->device >= MSNAP_MAX_DEVICES)
        return;
    hist_push(hist_of(l, c->device), c->t_ns, c->reserved + c->async + c->managed,
              c->allocated);
    int blocks = l->f.st.allocated_seen;
    l->cnt_stacked[c->device] = blocks ? c->allocated : c->reserved + c->async + c->managed;
    uint64_t T = 0;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        T += l->cnt_stacked[d];
    l->lf.T = T;
    sm_lf_step(&l->lf, NULL, 0);
}

static int obs_record(void *ctx, an_file *f, const msnap_record *r)
{
    (void)f;
    an_live *l = ctx;
    switch (r->type) {
    case MSNAP_REC_COUNTERS: {
        const msnap_counters *c = &r->u.counters;
        int slot = msnap_st_slot(c->device);
        if (c->device_used)
            l->used[slot] = c->device_used;
        if (l->hist_from_counters)
            counters_point(l, c);
        break;
    }
    case MSNAP_REC_TRAILER:
        l->trailer = 1;
        snprintf(l->reason, sizeof l->reason, "%s", r->u.trailer.reason ? r->u.trailer.reason : "");
        l->tr_events = r->u.trailer.events;
        l->tr_dropped = r->u.trailer.dropped;
        l->tr_t = r->u.trailer.t_ns;
        break;
    default:
        break;
    }
    return 0;
}

/* ---- the read ---------------------------------------------------------------- */

static void read_free(an_live *l)
{
    if (l->rd)
        msnap_reader_close(l->rd);
    l->rd = NULL;
    if (l->m)
        sm_free(l->m);
    l->m = NULL;
    if (l->have_file)
        an_free(&l->f);
    l->have_file = 0;
    l->trailer = l->at_reached = l->fed_end = 0;
    l->tick_started = 0;
    memset(l->ooms, 0, sizeof l->ooms);
    memset(l->used, 0, sizeof l->used);
    memset(l->cnt_stacked, 0, sizeof l->cnt_stacked);
    sm_lf_free(&l->lf);
    memset(&l->lf, 0, sizeof l->lf);
    l->torch = 0;
    l->reason[0] = 0;
    l->tr_events = l->tr_dropped = l->tr_t = 0;
    u64map_free(&l->cat_cache);
    memset(&l->cat_cache, 0, sizeof l->cat_cache);
    l->cat_nsyms = l->cat_nstacks = 0;
    u64map_free(&l->sym_tried);
    memset(&l->sym_tried, 0, sizeof l->sym_tried);
    l->sym_nmods = l->sym_nstacks = 0;
}

/* A new read of rd (owned from here on): the an_file, the model and the
 * observer.  follow: rd follows a file being written.  0, or 2. */
static int read_start(an_live *l, msnap_reader *rd, int follow, char *err, size_t errlen)
{
    read_free(l);
    l->rd = rd;
    l->follow = follow;
    an_init(&l->f, l->path);
    l->have_file = 1;
    sm_opts mo = {.top = 8, .at = SM_AT_END};
    an_observer ob = {.ctx = l, .record = obs_record, .event_before = obs_event};
    if (!(l->m = sm_new(&mo)) || sm_attach(l->m, &l->f) || an_observe(&l->f, &ob)) {
        snprintf(err, errlen, "%s: out of memory", l->path);
        return 2;
    }
    /* a stream is followed for as long as it runs: no log (live.h) */
    if (follow)
        an_forget_log(&l->f);
    const msnap_header *h = msnap_reader_header(rd);
    l->hist_from_counters = !strcmp(h->mode, "ring");
    for (int d = 0; d < MSNAP_ST_NDEV; d++)
        l->hist[d].n = l->hist[d].head = 0;
    an_feed_begin(&l->f, msnap_reader_is_zstd(rd));
    l->last_data = wall_s();
    return 0;
}

static int is_table(int type)
{
    return type == MSNAP_REC_STACK || type == MSNAP_REC_SYMBOL || type == MSNAP_REC_MODULE ||
           type == MSNAP_REC_STR || type == MSNAP_REC_DEVICE || type == MSNAP_REC_TRAILER;
}

/* Reads on: at most `budget` records (0: to the end of what is there).
 * Sets *more when it stopped at the budget.  0, or 2. */
static int read_on(an_live *l, unsigned budget, int *more, char *err, size_t errlen)
{
    *more = 0;
    if (!l->rd)
        return 0;
    msnap_record rec;
    unsigned n = 0;
    int rc;
    while ((rc = msnap_reader_next(l->rd, &rec)) == 1) {
        l->lines_read++;
        if (rec.type == MSNAP_REC_EVENT && rec.u.event.t_ns > l->o.at_ns)
            l->at_reached = 1;
        if (rec.type == MSNAP_REC_COUNTERS && rec.u.counters.t_ns > l->o.at_ns)
            continue;
        if (!l->at_reached || is_table(rec.type)) {
            int r = an_feed(&l->f, &rec, err, errlen);
            if (r)
                return r;
        }
        if (rec.type == MSNAP_REC_TRAILER && l->follow) {
            msnap_reader_follow(l->rd, 0);   /* nothing comes after it */
            l->follow = 0;
        }
        if (++n >= budget && budget) {
            *more = 1;
            break;
        }
    }
    if (n)
        l->last_data = wall_s();
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", l->path, msnap_reader_error(l->rd));
        return 2;
    }
    if (rc == 0 && !l->follow && !l->fed_end) {
        l->fed_end = 1;
        int trunc = msnap_reader_truncated(l->rd);
        msnap_reader_close(l->rd);
        l->rd = NULL;
        return an_feed_end(&l->f, trunc, err, errlen);
    }
    return 0;
}

/* ---- naming native frames before the file does -------------------------------- */

/* A recording being written has no sym lines for its native frames yet
 * (the recorder writes them at exit): the frames of the live sites are
 * named here from the module records, by the resolver `memsnap symbolize`
 * and the recorder's exit use (symbolize.h, return addresses), and added
 * to the tables as the sym records the file will have. */
static void name_frames(an_live *l)
{
    an_file *f = &l->f;
    sm_symtab *t = &f->tab;
    if (!l->o.symbolize)
        return;
    if (!l->sym && !(l->sym = msnap_symbolizer_new()))
        return;
    for (; l->sym_nmods < t->nmods; l->sym_nmods++) {
        const sm_module *md = &t->mods[l->sym_nmods];
        uint64_t k = md->base ^ (md->size << 1) ^ 1;
        if (u64map_get(&l->sym_mods, 0, k))
            continue;
        u64map_put(&l->sym_mods, 0, k, 1);
        msnap_symbolizer_add_module(l->sym, md->path, md->base, md->size, md->build_id);
    }
    /* every stack, not only the live ones: a label is told apart from the
     * labels of all the file's sites (label.c), named or not */
    for (size_t i = l->sym_nstacks; i < t->nstacks; i++) {
        const sm_stack_rec *sr = &t->stacks[i];
        for (int k = 0; k < sr->depth; k++) {
            uint64_t ip = sr->ips[k];
            if (msnap_ip_is_python(ip) || u64map_get(&l->sym_tried, 0, ip))
                continue;
            u64map_put(&l->sym_tried, 0, ip, 1);
            const uint64_t *sx = u64map_get(&t->sym_map, 0, ip);
            if (sx && t->syms[*sx].fn[0])
                continue;
            msnap_symbol sym;
            if (msnap_symbolizer_resolve_frame(l->sym, ip, 1, &sym) < 0 ||
                (!sym.function[0] && !sym.file[0]))
                continue;
            sym.ip = ip;
            msnap_record r = {.type = MSNAP_REC_SYMBOL};
            r.u.symbol = sym;
            sm_symtab_take(t, &r);
        }
    }
    l->sym_nstacks = t->nstacks;
}

/* ---- the view ---------------------------------------------------------------- */

typedef struct grp {
    uint64_t key, bytes, rep_bytes;
    uint32_t stack;
    int slot;
} grp;

/* The group key of stack on slot in layer: the label's hash (sm_site_key)
 * with the layer and the device. */
static uint64_t group_key(const sm_labels *lab, uint32_t stack, int layer, int slot)
{
    uint64_t k = sm_site_key(lab, stack);
    return k ^ ((uint64_t)(layer + 1) << 56) ^ ((uint64_t)(slot + 1) << 48);
}

static int cmp_grp(const void *a, const void *b)
{
    const grp *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The sample a trend compares with: the latest at or before t - window,
 * else the oldest before t; NULL when none. */
static const sample *trend_sample(const an_live *l, uint64_t t)
{
    const sample *best = NULL;
    for (size_t i = 0; i < l->s_n; i++) {
        const sample *s = &l->samples[(l->s_head + i) % NSAMPLES];
        if (s->t >= t)
            break;
        if (s->t + AN_LIVE_TREND_NS <= t) {
            best = s;
        } else {
            if (!best)
                best = s;
            break;
        }
    }
    return best;
}

/* The category of stack for the tables as they are now. */
static int live_category(an_live *l, uint32_t stack, int block)
{
    const sm_symtab *t = &l->f.tab;
    if (t->nsyms != l->cat_nsyms || t->nstacks != l->cat_nstacks) {
        u64map_free(&l->cat_cache);
        memset(&l->cat_cache, 0, sizeof l->cat_cache);
        l->cat_nsyms = t->nsyms;
        l->cat_nstacks = t->nstacks;
    }
    uint64_t *v = u64map_get(&l->cat_cache, 1 + (uint32_t)block, stack);
    if (v)
        return (int)*v - 1;
    int c = bd_live_category(l->rules, t, stack, block);
    u64map_put(&l->cat_cache, 1 + (uint32_t)block, stack, (uint64_t)c + 1);
    return c;
}

static int cmp_cat(const void *a, const void *b)
{
    const an_live_cat *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Recomputes l->view from the read.  0, -1 out of memory. */
static int compute_view(an_live *l)
{
    an_live_view *v = l->view;
    an_file *f = &l->f;
    msnap_state *st = &f->st;
    sm_model *m = l->m;
    memset(v, 0, sizeof *v);
    v->source = l->source;
    v->path = l->path;
    v->at_ns = l->o.at_ns;
    if (!l->have_file)
        return 0;
    v->pid = f->hdr.pid;
    snprintf(v->host, sizeof v->host, "%s", f->hdr.host);
    snprintf(v->mode, sizeof v->mode, "%s", f->hdr.mode);
    v->t0_unix_ns = f->hdr.t0_unix_ns;
    size_t off = 0;
    for (int i = 0; i < f->hdr.argc && off + 2 < sizeof v->command; i++)
        off += (size_t)snprintf(v->command + off, sizeof v->command - off, "%s%s", i ? " " : "",
                                f->argv[i]);
    v->t_ns = f->t_max > l->tr_t ? f->t_max : l->tr_t;
    if (l->at_reached && l->o.at_ns < v->t_ns)
        v->t_ns = l->o.at_ns;
    v->finished = l->trailer && l->source != AN_LIVE_RING;
    snprintf(v->reason, sizeof v->reason, "%s", l->reason);
    v->truncated = f->truncated;
    v->idle_s = l->source == AN_LIVE_FILE ? 0 : wall_s() - l->last_data;
    v->replaced = l->replaced;
    v->events = l->source == AN_LIVE_RING ? l->tr_events : f->ev_idx;
    v->dropped = l->tr_dropped;
    v->torch = l->torch;
    v->in_process = an_in_process(f);
    /* allocator blocks: events, counters, or (a ring file) live lines */
    int blocks = st->allocated_seen || sm_blocks_seen(m);
    for (size_t i = 0; i < st->npre && !blocks; i++)
        blocks = st->pre[i].o.kind == MSNAP_A_BLOCK_ALLOC;
    v->blocks_seen = blocks;
    if (l->source == AN_LIVE_RING) {
        v->floor_first = l->lf.floor_first;
        v->floor_last = l->lf.floor_last;
        v->valleys = l->lf.nvalleys;
    } else {
        size_t nl;
        sm_floor(m, &v->floor_first, &v->floor_last);
        sm_leaks(m, &nl, &v->valleys);
    }
    int layer = blocks ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED;
    name_frames(l);
    const sm_labels *lab = an_labels(f);   /* after the names: labels of the tables now */

    /* the objects live now: the state's, and after a whole read those
     * live before the first event that are still live (a ring file) */
    msnap_obj *objs = NULL;
    size_t nobjs = 0;
    if (an_live_objects(f, &objs, &nobjs))
        return -1;
    uint64_t *extra = calloc(st->nsites + st->npre + 1, sizeof *extra);
    if (!extra) {
        free(objs);
        return -1;
    }
    if (l->fed_end && st->npre) {
        msnap_obj *na = realloc(objs, (nobjs + st->npre) * sizeof *na);
        if (!na)
            goto oom;
        objs = na;
        for (size_t i = 0; i < st->npre; i++) {
            if (f->pre_freed[i] != UINT64_MAX)
                continue;
            objs[nobjs++] = st->pre[i].o;
            uint32_t si = msnap_state_site_for(st, &st->pre[i].o);
            if (si != MSNAP_NO_SITE && si < st->nsites + st->npre)
                extra[si] += st->pre[i].o.size;
        }
    }
    sm_layout lay;
    if (sm_layout_of(m, blocks, objs, nobjs, f->ev_idx, v->t_ns, &lay))
        goto oom;

    /* the sites of the stacked layer by group */
    u64map gix = {0};
    grp *g = calloc(st->nsites + 1, sizeof *g);
    size_t ng = 0;
    if (!g) {
        sm_layout_release(&lay);
        goto oom;
    }
    for (size_t i = 0; i < st->nsites; i++) {
        const msnap_site *s = &st->sites[i];
        uint64_t bytes = s->live + extra[i];
        if (s->layer != layer || !bytes || s->device >= MSNAP_MAX_DEVICES)
            continue;
        uint64_t key = group_key(lab, s->stack, layer, s->device);
        uint64_t *ix = u64map_get(&gix, 1, key);
        if (!ix) {
            if (u64map_put(&gix, 1, key, ng))
                goto oom2;
            g[ng] = (grp){.key = key, .stack = s->stack, .slot = s->device};
            ix = u64map_get(&gix, 1, key);
            ng++;
        }
        grp *x = &g[*ix];
        x->bytes += bytes;
        if (bytes > x->rep_bytes) {
            x->rep_bytes = bytes;
            x->stack = s->stack;
        }
    }
    /* the old bytes of each group, for the trends */
    uint64_t *old = calloc(ng + 1, sizeof *old);
    if (!old)
        goto oom2;
    const sample *ts = trend_sample(l, v->t_ns);
    if (ts)
        for (size_t j = 0; j < ts->n; j++) {
            uint64_t key = ts->key[j];
            if (!ts->by_group) {
                if (key >= st->nsites || st->sites[key].layer != layer)
                    continue;
                key = group_key(lab, st->sites[key].stack, layer, st->sites[key].device);
            }
            uint64_t *ix = u64map_get(&gix, 1, key);
            if (ix)
                old[*ix] += ts->bytes[j];
        }
    /* a ring file: this update's groups are a later update's sample, one
     * a second of recording time at most (updates may come faster, or
     * read the same file again) */
    const sample *newest = l->s_n ? &l->samples[(l->s_head + l->s_n - 1) % NSAMPLES] : NULL;
    if (l->source == AN_LIVE_RING && (!newest || v->t_ns >= newest->t + SEC)) {
        sample *s = sample_new(l, v->t_ns, 1);
        for (size_t i = 0; i < ng; i++)
            if (sample_put(s, g[i].key, g[i].bytes))
                goto oom3;
    }
    for (size_t i = 0; i < ng; i++)
        g[i].rep_bytes = old[i];   /* carried through the sort */
    qsort(g, ng, sizeof *g, cmp_grp);

    /* per device */
    int nsites = l->o.sites > 0 && l->o.sites <= AN_LIVE_SITES ? l->o.sites : 10;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++) {
        if (!st->seen[d])
            continue;
        an_live_dev *x = &v->dev[v->ndev++];
        x->device = d;
        for (int i = 0; i < f->ndev; i++)
            if (f->dev[i].index == d) {
                snprintf(x->name, sizeof x->name, "%s", f->dev[i].name);
                x->total = f->dev[i].total;
            }
        msnap_level r = msnap_state_level(st, d, MSNAP_LAYER_RESERVED);
        msnap_level a = msnap_state_level(st, d, MSNAP_LAYER_ALLOCATED);
        x->reserved = r.cur;
        x->peak_reserved = r.peak;
        x->allocated = a.cur;
        x->peak_allocated = a.peak;
        x->device_used = l->used[d];
        /* blocks, and driver memory to hold them (memsnap.record has none) */
        x->frag_known = blocks && r.peak > 0;
        x->free_in_reserved = lay.dev[d].total_free;
        x->largest_free = lay.dev[d].largest_free;
        x->ooms = l->ooms[d];
        x->site_layer = layer;
        for (size_t i = 0; i < ng && x->nsites < nsites; i++) {
            if (g[i].slot != d)
                continue;
            an_live_site *s = &x->sites[x->nsites++];
            sm_site_label(lab, g[i].stack, s->label, sizeof s->label);
            s->bytes = g[i].bytes;
            if (ts) {
                s->trend = (int64_t)(g[i].bytes - g[i].rep_bytes);
                s->trend_span_ns = v->t_ns - ts->t;
            }
        }
        const hist *h = &l->hist[d];
        for (size_t i = 0; i < h->n; i++)
            x->hist[x->nhist++] = h->p[(h->head + i) % AN_LIVE_HISTORY];
        /* the categories of a PyTorch program's live memory */
        if (l->torch && l->rules) {
            uint64_t by[CAT_MAX] = {0};
            for (size_t i = 0; i < st->nsites; i++) {
                const msnap_site *s = &st->sites[i];
                uint64_t bytes = s->live + extra[i];
                if (s->layer != layer || s->device != d || !bytes)
                    continue;
                int c = live_category(l, s->stack, layer == MSNAP_LAYER_ALLOCATED);
                if (c >= 0 && c < CAT_MAX)
                    by[c] += bytes;
            }
            for (int c = 0; c < cat_count(l->rules) && c < CAT_MAX; c++)
                if (by[c]) {
                    snprintf(x->cats[x->ncats].name, sizeof x->cats[0].name, "%s",
                             cat_name(l->rules, c));
                    x->cats[x->ncats++].bytes = by[c];
                }
            qsort(x->cats, (size_t)x->ncats, sizeof *x->cats, cmp_cat);
        }
    }
    free(old);
    free(g);
    u64map_free(&gix);
    sm_layout_release(&lay);
    free(objs);
    free(extra);
    return 0;
oom3:
    free(old);
oom2:
    free(g);
    u64map_free(&gix);
    sm_layout_release(&lay);
oom:
    free(objs);
    free(extra);
    return -1;
}

/* ---- sources -------------------------------------------------------------------- */

/* Touches PATH.live.want: a ring-mode run writes PATH.live while it is
 * fresh. */
static void want_touch(an_live *l)
{
    int fd = open(l->want_path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0)
        return;
    futimens(fd, NULL);
    close(fd);
}

/* Whether PATH.live was written in the last AN_LIVE_FRESH_S seconds; its
 * mtime into *mt. */
static int live_fresh(const an_live *l, struct timespec *mt)
{
    struct stat sb;
    if (stat(l->live_path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return 0;
    *mt = sb.st_mtim;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec - sb.st_mtim.tv_sec <= AN_LIVE_FRESH_S;
}

/* Asks for PATH.live and waits up to ms for one written after the asking
 * (a file left by an earlier watcher's request may be seconds old).  1
 * when one came, or, at the end of the wait, when a fresh one is there. */
static int live_wait(an_live *l, int ms)
{
    struct timespec asked, mt;
    clock_gettime(CLOCK_REALTIME, &asked);
    want_touch(l);
    for (int waited = 0; waited < ms; waited += 50) {
        struct stat sb;
        if (stat(l->live_path, &sb) == 0 && S_ISREG(sb.st_mode) &&
            (sb.st_mtim.tv_sec > asked.tv_sec ||
             (sb.st_mtim.tv_sec == asked.tv_sec && sb.st_mtim.tv_nsec >= asked.tv_nsec)))
            return 1;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        if (waited % 1000 == 950)
            want_touch(l);
    }
    return live_fresh(l, &mt);
}

/* Whether the process that wrote header h still runs on this machine. */
static int writer_alive(const msnap_header *h)
{
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0 || strcmp(host, h->host) || h->pid <= 0)
        return 0;
    return kill((pid_t)h->pid, 0) == 0 || errno == EPERM;
}

/* Reads the ring live file anew.  0, or 2. */
static int ring_read(an_live *l, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(l->live_path, &sb) != 0)
        return 0;   /* between two renames, or gone: keep the last view */
    if (l->have_live_mtime && sb.st_mtim.tv_sec == l->live_mtime.tv_sec &&
        sb.st_mtim.tv_nsec == l->live_mtime.tv_nsec)
        return 0;
    char rerr[512];
    msnap_reader *rd = msnap_reader_open(l->live_path, rerr, sizeof rerr);
    if (!rd) {
        snprintf(err, errlen, "%s: %s", l->live_path, rerr);
        return 2;
    }
    l->live_mtime = sb.st_mtim;
    l->have_live_mtime = 1;
    int rc = read_start(l, rd, 0, err, errlen), more;
    while (!rc && l->rd && !(rc = read_on(l, 0, &more, err, errlen)) && more)
        ;
    l->last_data = wall_s();
    return rc;
}

/* Opens path itself as a file (follow: a stream being written).  0, 2. */
static int open_path(an_live *l, msnap_reader *rd, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(l->path, &sb) == 0) {
        l->dev = sb.st_dev;
        l->ino = sb.st_ino;
    }
    const msnap_header *h = msnap_reader_header(rd);
    int stream = !strcmp(h->mode, "stream");
    l->source = stream && l->o.at_ns == UINT64_MAX ? AN_LIVE_FOLLOW : AN_LIVE_FILE;
    if (stream)
        msnap_reader_follow(rd, 1);   /* --at too: the time may not have come yet */
    return read_start(l, rd, stream, err, errlen);
}

an_live *an_live_open(const char *path, const an_live_opts *o, char *err, size_t errlen)
{
    an_live *l = calloc(1, sizeof *l);
    if (!l || !(l->view = calloc(1, sizeof *l->view)) || !(l->path = strdup(path))) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    l->o = *o;
    if (an_live_file_path(path, ".live", l->live_path, sizeof l->live_path) ||
        an_live_file_path(path, ".live.want", l->want_path, sizeof l->want_path)) {
        snprintf(err, errlen, "%s: the path is too long", path);
        goto fail;
    }
    if (!(l->rules = cat_rules_new())) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    if (o->category_rules && cat_rules_load(l->rules, o->category_rules, err, errlen))
        goto fail;
    int wait = o->wait_ms > 0 ? o->wait_ms : 3000;
    char rerr[512];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT && o->at_ns == UINT64_MAX && live_wait(l, wait)) {
            l->source = AN_LIVE_RING;
            if (ring_read(l, err, errlen))
                goto fail;
            goto ready;
        }
        if (e == ENOENT)
            snprintf(err, errlen, "%s: no such file, and no ring-mode recording wrote %s "
                     "within %d s (is the program running under memsnap run -o %s?)", path,
                     l->live_path, wait / 1000, path);
        else
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        goto fail;
    }
    msnap_reader *rd = msnap_reader_open(path, rerr, sizeof rerr);
    if (!rd) {
        snprintf(err, errlen, "%s: %s", path, rerr);
        goto fail;
    }
    const msnap_header *h = msnap_reader_header(rd);
    struct timespec mt;
    if (!strcmp(h->mode, "ring") && o->at_ns == UINT64_MAX &&
        (writer_alive(h) || live_fresh(l, &mt)) && live_wait(l, wait)) {
        /* a dump (an OOM's) of a ring-mode run that goes on */
        msnap_reader_close(rd);
        l->source = AN_LIVE_RING;
        if (ring_read(l, err, errlen))
            goto fail;
        goto ready;
    }
    if (open_path(l, rd, err, errlen))
        goto fail;
    if (an_live_update(l, err, errlen))   /* computes the view */
        goto fail;
    return l;
ready:
    if (compute_view(l)) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    return l;
fail:
    an_live_close(l);
    return NULL;
}

int an_live_update(an_live *l, char *err, size_t errlen)
{
    int rc = 0, more = 0;
    if (l->source == AN_LIVE_RING) {
        want_touch(l);
        struct timespec mt;
        struct stat sb;
        if (!live_fresh(l, &mt) && l->have_live_mtime && stat(l->path, &sb) == 0 &&
            (sb.st_mtim.tv_sec > l->live_mtime.tv_sec ||
             (sb.st_mtim.tv_sec == l->live_mtime.tv_sec &&
              sb.st_mtim.tv_nsec >= l->live_mtime.tv_nsec))) {
            /* the run ended: its last dump is the file now */
            char rerr[512];
            msnap_reader *rd = msnap_reader_open(l->path, rerr, sizeof rerr);
            if (!rd) {
                snprintf(err, errlen, "%s: %s", l->path, rerr);
                return 2;
            }
            l->source = AN_LIVE_FILE;
            if ((rc = open_path(l, rd, err, errlen)))
                return rc;
            unlink(l->want_path);
        } else {
            rc = ring_read(l, err, errlen);
        }
    }
    if (!rc && l->source != AN_LIVE_RING)
        rc = read_on(l, l->o.budget ? l->o.budget : BUDGET, &more, err, errlen);
    struct stat sb;
    if (!rc && l->source == AN_LIVE_FOLLOW && (l->trailer || wall_s() - l->last_data > 2) &&
        stat(l->path, &sb) == 0)
        l->replaced = sb.st_dev != l->dev || sb.st_ino != l->ino;
    if (rc)
        return rc;
    if (compute_view(l)) {
        snprintf(err, errlen, "%s: out of memory", l->path);
        return 2;
    }
    l->view->catching_up = more;
    return 0;
}

const an_live_view *an_live_view_of(const an_live *l)
{
    return l->view;
}

void an_live_close(an_live *l)
{
    if (!l)
        return;
    if (l->source == AN_LIVE_RING)
        unlink(l->want_path);
    read_free(l);
    for (int i = 0; i < NSAMPLES; i++) {
        free(l->samples[i].key);
        free(l->samples[i].bytes);
    }
    cat_rules_free(l->rules);
    msnap_symbolizer_free(l->sym);
    u64map_free(&l->sym_mods);
    free(l->view);
    free(l->path);
    free(l);
}

/* grow: the sites of --grow found in a request stream, and the bisection
 * of their largest size (grow.h has the rules). */
#include "grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "requests.h"
#include "util/human.h"
#include "util/size.h"

int gr_add(gr_sites *s, const char *arg, char *err, size_t errlen)
{
    if (s->n >= GR_MAX_SITES) {
        snprintf(err, errlen, "--grow: at most %d sites", GR_MAX_SITES);
        return -1;
    }
    const char *eq = strrchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    if (!n || n >= sizeof s->spec[0]) {
        snprintf(err, errlen, "--grow %s: give a site (a label, FUNCTION or FILE:LINE)", arg);
        return -1;
    }
    uint64_t size = 0;
    if (eq && (msnap_size_parse(eq + 1, &size) || !size)) {
        snprintf(err, errlen, "--grow %s: \"%s\" is not a size (e.g. 24G, 512MiB)", arg, eq + 1);
        return -1;
    }
    memcpy(s->spec[s->n], arg, n);
    s->spec[s->n][n] = 0;
    s->size[s->n] = size;
    s->n++;
    return 0;
}

void gr_free(gr_sites *s)
{
    u64map_free(&s->stacks);
}

/* Whether FILE:LINE names frame file:line (a path, or a tail after '/'). */
static int file_line_is(const char *spec, const char *file, int line)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || !colon[1] || !file || !*file)
        return 0;
    char *end;
    long l = strtol(colon + 1, &end, 10);
    if (*end || l != line)
        return 0;
    size_t n = (size_t)(colon - spec), fl = strlen(file);
    if (!n || n > fl || memcmp(file + fl - n, spec, n))
        return 0;
    return n == fl || file[fl - n - 1] == '/';
}

/* Whether stack matches site spec (grow.h). */
static int site_is(const char *spec, const sm_labels *lab, const sm_symtab *t, uint32_t stack)
{
    char label[SM_LABEL_MAX];
    sm_site_label(lab, stack, label, sizeof label);
    if (!strcmp(label, spec))
        return 1;
    size_t n = strlen(spec);
    if (!strncmp(label, spec, n) && !strncmp(label + n, " (", 2))
        return 1;
    int skip = sm_runtime_frames(lab, stack);
    sm_frame_info fi;
    int depth = sm_symtab_frame_get(t, stack, 0, &fi);
    for (int i = skip; i < depth; i++) {
        sm_symtab_frame_get(t, stack, i, &fi);
        if (msnap_ip_is_autograd(fi.ip))
            continue;   /* a backward's node: the forward frames name it */
        return file_line_is(spec, fi.file, fi.line);
    }
    return 0;
}

int gr_match(gr_sites *s, rq_stream *q, an_file *f, int torch, char *err, size_t errlen)
{
    const sm_labels *lab = an_labels(f);
    u64map seen = {0};             /* stack -> site + 1 (0: none) */
    spill_rec rec;
    int more, rc = -1;
    for (int i = 0; i < s->n; i++) {
        s->base[i] = s->requests[i] = s->bytes[i] = 0;
        s->label[i][0] = 0;
    }
    if (rq_rewind(q)) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        goto out;
    }
    while ((more = rq_next(q, &rec)) == 1) {
        int k = rq_kind(q, &rec);
        if (k != RQ_ALLOC && k != RQ_FAILED)
            continue;
        uint32_t stack = rec.e.stack;
        uint64_t *v = u64map_get(&seen, 0, stack), site;
        if (v) {
            site = *v;
        } else {
            site = 0;
            for (int i = 0; i < s->n && !site; i++)
                if (stack && site_is(s->spec[i], lab, &f->tab, stack))
                    site = (uint64_t)i + 1;
            if (u64map_put(&seen, 0, stack, site) ||
                (site && u64map_put(&s->stacks, 0, stack, site - 1))) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            if (site && !s->label[site - 1][0])
                sm_site_label(lab, stack, s->label[site - 1], sizeof s->label[0]);
        }
        if (!site)
            continue;
        uint64_t n = rq_request_size(&rec.e, torch);
        s->requests[site - 1]++;
        s->bytes[site - 1] += n;
        if (n > s->base[site - 1])
            s->base[site - 1] = n;
    }
    if (more < 0) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        goto out;
    }
    for (int i = 0; i < s->n; i++)
        if (!s->requests[i] || !s->base[i]) {
            snprintf(err, errlen, "--grow %s: no allocation site matches it (sites are named "
                     "as memsnap summary lists them: a label, its function, or FILE:LINE)",
                     s->spec[i]);
            goto out;
        } else {
            s->ref[i] = s->size[i] ? s->size[i] : s->base[i];
        }
    rc = 0;
out:
    u64map_free(&seen);
    return rc;
}

uint64_t gr_size_of(const gr_sites *s, int i, uint64_t x)
{
    if (!i)
        return x;
    unsigned __int128 v = (unsigned __int128)x * s->ref[i] + s->ref[0] - 1;
    v /= s->ref[0];
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

void gr_spec(const gr_sites *s, uint64_t x, msnap_grow_spec *g)
{
    memset(g, 0, sizeof *g);
    g->stacks = &s->stacks;
    g->n = s->n;
    for (int i = 0; i < s->n; i++) {
        g->base[i] = s->base[i];
        g->size[i] = gr_size_of(s, i, x);
    }
}

/* The most conf lets the device hold: memory_fraction of it (the torch
 * engine's key), else all of it. */
static uint64_t limit_of(const char *conf, uint64_t device_mem)
{
    const char *f = conf ? strstr(conf, "memory_fraction:") : NULL;
    if (f) {
        double x = strtod(f + strlen("memory_fraction:"), NULL);
        if (x > 0 && x <= 1)
            return (uint64_t)(x * (double)device_mem);
    }
    return device_mem;
}

/* Replays q at each of the n sizes xs into res.  0, or -1 with err. */
static int try_sizes(rq_stream *q, const gr_sites *s, const char *conf, uint64_t device_mem,
                     int engine, const uint64_t *xs, int n, int jobs, const char *show,
                     msnap_replay_result *res, char *err, size_t errlen)
{
    msnap_grow_spec *g = calloc((size_t)n, sizeof *g);
    msnap_replay_opts *o = calloc((size_t)n, sizeof *o);
    rq_stream **qs = calloc((size_t)n, sizeof *qs);
    int rc = -1;
    if (!g || !o || !qs) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        gr_spec(s, xs[i], &g[i]);
        o[i] = (msnap_replay_opts){.conf = conf, .device_mem = device_mem, .engine = engine,
                                   .grow = &g[i]};
        qs[i] = q;
    }
    rc = msnap_replay_streams(qs, o, n, jobs, show, res, err, errlen);
out:
    free(g);
    free(o);
    free(qs);
    return rc;
}

#define GR_POINTS 3   /* sizes tried a round of the search */

/* Whether a replay ran to the end. */
static int ran(const msnap_replay_result *r)
{
    return !r->oom;
}

int gr_find_max(rq_stream *q, const gr_sites *s, const char *conf, uint64_t device_mem,
                int engine, int jobs, const char *show, gr_answer *out, char *err,
                size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->conf = conf;
    if (jobs < 1)
        jobs = 1;
    if (jobs > 16)
        jobs = 16;
    msnap_replay_result r[16];
    /* the recorded (or given) size, and the device's limit: the bracket */
    uint64_t base = s->ref[0];
    uint64_t xs[2] = {base, 0};
    if (try_sizes(q, s, conf, device_mem, engine, xs, 1, 1, show, r, err, errlen))
        return -1;
    out->replays++;
    uint64_t mem = r[0].device_mem;
    uint64_t limit = limit_of(conf, mem);
    out->limit = limit;
    uint64_t lo = 0, hi = 0;           /* lo runs (0: none known), hi fails (0: none known) */
    msnap_replay_result at_lo, at_hi;
    memset(&at_lo, 0, sizeof at_lo);
    memset(&at_hi, 0, sizeof at_hi);
    if (ran(&r[0])) {
        lo = base;
        at_lo = r[0];
        if (limit > base) {
            xs[0] = limit;
            if (try_sizes(q, s, conf, device_mem, engine, xs, 1, 1, show, r, err, errlen))
                return -1;
            out->replays++;
            if (ran(&r[0])) {
                out->unbounded = 1;
                out->max = limit;
                out->at_max = r[0];
                return 0;
            }
            hi = limit;
            at_hi = r[0];
        } else {
            out->unbounded = 1;
            out->max = lo;
            out->at_max = at_lo;
            return 0;
        }
    } else {
        hi = base;
        at_hi = r[0];
        xs[0] = 512;
        if (base > 512) {
            if (try_sizes(q, s, conf, device_mem, engine, xs, 1, 1, show, r, err, errlen))
                return -1;
            out->replays++;
        }
        if (base <= 512 || !ran(&r[0])) {
            out->none = 1;
            out->fails_at = base <= 512 ? base : 512;
            out->at_fail = base <= 512 ? at_hi : r[0];
            return 0;
        }
        lo = 512;
        at_lo = r[0];
    }
    /* 4-ary search: GR_POINTS sizes a round, evenly between lo and hi (up
     * to jobs of them replayed at once), down to a step of 1/4096 of the
     * size, at most 2 MiB (the granule of a large segment), at least 512 B
     * (of a block).  The points do not depend on jobs: where fitting is not
     * monotonic in the size (a cached block that fits one size and not the
     * next), the answer is still the same on every machine. */
    for (;;) {
        uint64_t granule = lo / 4096;
        if (granule > (2ull << 20))
            granule = 2ull << 20;
        if (granule < 512)
            granule = 512;
        if (hi - lo <= granule)
            break;
        uint64_t step = (hi - lo) / (GR_POINTS + 1);
        int n = 0;
        uint64_t pts[GR_POINTS];
        for (int i = 1; i <= GR_POINTS; i++) {
            uint64_t x = lo + step * (uint64_t)i;
            x = x / 512 * 512;
            if (x > lo && x < hi && (!n || x > pts[n - 1]))
                pts[n++] = x;
        }
        if (!n) {
            uint64_t x = lo + (hi - lo) / 2;
            if (x <= lo || x >= hi)
                break;
            pts[n++] = x;
        }
        if (try_sizes(q, s, conf, device_mem, engine, pts, n, jobs, show, r, err, errlen))
            return -1;
        out->replays += n;
        /* the first that fails bounds from above; the one before it, below;
         * one past a failure that runs says fitting is not monotonic here */
        int first_fail = n;
        for (int i = 0; i < n; i++)
            if (!ran(&r[i])) {
                first_fail = i;
                break;
            }
        for (int i = first_fail + 1; i < n; i++)
            if (ran(&r[i]) && pts[i] > out->also_runs)
                out->also_runs = pts[i];
        if (first_fail > 0) {
            lo = pts[first_fail - 1];
            at_lo = r[first_fail - 1];
        }
        if (first_fail < n) {
            hi = pts[first_fail];
            at_hi = r[first_fail];
        }
    }
    out->max = lo;
    out->fails_at = hi;
    out->at_max = at_lo;
    out->at_fail = at_hi;
    return 0;
}

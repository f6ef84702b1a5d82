/* --grow for replay and predict (grow_print.h): one search or one replay
 * per config, then the text or the JSON list of docs/interop.md
 * ({config, site, max_bytes, fails_at_bytes, first_failure} per config and
 * site). */
#include "grow_print.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress_term.h"
#include "util/human.h"

static void size_text(uint64_t b, int bytes, char *buf, size_t n)
{
    msnap_size_or_bytes(b, bytes, buf, n);
}

/* The first failed request of a replay, in words: "request 27, 128.00 MiB
 * at model_step (engine.py:41), after "capture"". */
static void failure_text(const grow_run *g, const msnap_replay_result *r, char *buf, size_t n)
{
    char sz[32], label[SM_LABEL_MAX];
    size_text(r->oom_size, g->bytes, sz, sizeof sz);
    sm_site_label(an_labels(g->tab), r->oom_stack, label, sizeof label);
    const char *where = r->oom_where ? sm_symtab_str(&g->tab->tab, r->oom_where) : NULL;
    snprintf(buf, n, "request %" PRIu64 " of %" PRIu64 ", %s at %s%s%s%s", r->oom_index,
             r->requests, sz, label, where ? ", after \"" : "", where ? where : "",
             where ? "\"" : "");
}

static cJSON *failure_json(const grow_run *g, const msnap_replay_result *r)
{
    if (!r->oom)
        return cJSON_CreateNull();
    char label[SM_LABEL_MAX];
    sm_site_label(an_labels(g->tab), r->oom_stack, label, sizeof label);
    const char *where = r->oom_where ? sm_symtab_str(&g->tab->tab, r->oom_where) : NULL;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "request", (double)r->oom_index);
    cJSON_AddNumberToObject(f, "size", (double)r->oom_size);
    cJSON_AddNumberToObject(f, "t_ns", (double)r->oom_t_ns);
    cJSON_AddStringToObject(f, "site", label);
    if (where)
        cJSON_AddStringToObject(f, "where", where);
    else
        cJSON_AddNullToObject(f, "where");
    return f;
}

static const char *conf_name(const char *c)
{
    return c && c[0] ? c : "(defaults)";
}

/* The head line: what grows and where. */
static void print_head(const grow_run *g, const msnap_replay_result *r)
{
    const gr_sites *s = g->sites;
    char m[32];
    size_text(r->device_mem, g->bytes, m, sizeof m);
    printf("%s on a simulated device of %s (from %s; %s engine), growing:\n", g->what, m,
           r->device_mem_from, r->engine);
    for (int i = 0; i < s->n; i++) {
        char b[32], rf[32];
        size_text(s->base[i], g->bytes, b, sizeof b);
        size_text(s->ref[i], g->bytes, rf, sizeof rf);
        printf("  %s: %" PRIu64 " request%s, the largest %s%s%s\n", s->label[i], s->requests[i],
               s->requests[i] == 1 ? "" : "s", b, s->size[i] ? ", made " : "",
               s->size[i] ? rf : "");
    }
    printf("\n");
}

static int run_find_max(grow_run *g)
{
    const gr_sites *s = g->sites;
    int rc = 0;
    char err[1280];
    for (int c = 0; c < g->nconf; c++) {
        gr_answer a;
        char show[256];
        snprintf(show, sizeof show, "finding the largest %s under config %d", s->label[0], c + 1);
        if (gr_find_max(g->q, s, g->confs[c], g->device_mem, g->engine, g->jobs,
                        !g->quiet && progress_enabled() ? show : NULL, &a, err, sizeof err)) {
            fprintf(stderr, "memsnap %s: %s\n", g->cmd, err);
            return 2;
        }
        if (a.none)
            rc = 1;
        const msnap_replay_result *r0 = a.none ? &a.at_fail : &a.at_max;
        if (g->json) {
            for (int i = 0; i < s->n; i++) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "config", g->confs[c]);
                cJSON_AddStringToObject(o, "site", s->label[i]);
                cJSON_AddStringToObject(o, "spec", s->spec[i]);
                cJSON_AddStringToObject(o, "engine", r0->engine);
                cJSON_AddNumberToObject(o, "device_mem", (double)r0->device_mem);
                cJSON_AddNumberToObject(o, "limit", (double)a.limit);
                cJSON_AddNumberToObject(o, "requests", (double)s->requests[i]);
                cJSON_AddNumberToObject(o, "recorded_bytes", (double)s->base[i]);
                if (a.none)
                    cJSON_AddNullToObject(o, "max_bytes");
                else
                    cJSON_AddNumberToObject(o, "max_bytes", (double)gr_size_of(s, i, a.max));
                if (a.unbounded)
                    cJSON_AddNullToObject(o, "fails_at_bytes");
                else
                    cJSON_AddNumberToObject(o, "fails_at_bytes",
                                            (double)gr_size_of(s, i, a.fails_at));
                cJSON_AddBoolToObject(o, "unbounded", a.unbounded);
                if (a.none) {
                    cJSON_AddNullToObject(o, "peak_reserved");
                } else {
                    cJSON_AddNumberToObject(o, "peak_reserved", (double)a.at_max.peak_reserved);
                    cJSON_AddNumberToObject(o, "peak_allocated", (double)a.at_max.peak_allocated);
                }
                cJSON_AddItemToObject(o, "first_failure",
                                      a.unbounded ? cJSON_CreateNull()
                                                  : failure_json(g, &a.at_fail));
                cJSON_AddNumberToObject(o, "replays", a.replays);
                if (a.also_runs)
                    cJSON_AddNumberToObject(o, "larger_also_runs",
                                            (double)gr_size_of(s, i, a.also_runs));
                else
                    cJSON_AddNullToObject(o, "larger_also_runs");
                cJSON_AddItemToArray(g->out, o);
            }
            continue;
        }
        if (!c)
            print_head(g, r0);
        char lim[32];
        size_text(a.limit, g->bytes, lim, sizeof lim);
        printf("config %d %s (the most it may reserve: %s; %d replays)\n", c + 1,
               conf_name(g->confs[c]), lim, a.replays);
        if (a.none) {
            char f[512];
            failure_text(g, &a.at_fail, f, sizeof f);
            printf("  nothing fits: at %s %s\n      %s fails\n", s->label[0],
                   a.fails_at < 1024 ? "the smallest size" : "a small size", f);
            continue;
        }
        for (int i = 0; i < s->n; i++) {
            char mx[32], mb[32];
            size_text(gr_size_of(s, i, a.max), g->bytes, mx, sizeof mx);
            size_text(gr_size_of(s, i, a.max), 1, mb, sizeof mb);
            if (a.unbounded)
                printf("  %s: runs to the end at %s (%s bytes), the limit itself\n", s->label[i],
                       mx, mb);
            else
                printf("  %s: runs to the end up to %s (%s bytes)\n", s->label[i], mx, mb);
        }
        if (!a.unbounded) {
            char fa[32], f[512], pr[32];
            size_text(gr_size_of(s, 0, a.fails_at), g->bytes, fa, sizeof fa);
            size_text(a.at_max.peak_reserved, g->bytes, pr, sizeof pr);
            failure_text(g, &a.at_fail, f, sizeof f);
            printf("  peak reserved there %s; just past it, at %s, %s fails\n", pr, fa, f);
        }
        if (a.also_runs) {
            char ar[32];
            size_text(gr_size_of(s, 0, a.also_runs), g->bytes, ar, sizeof ar);
            printf("  note: %s also ran to the end: fitting is not monotonic in this size "
                   "here (a cached block that one size fits and the next does not)\n", ar);
        }
    }
    return rc;
}

static int run_sizes(grow_run *g)
{
    const gr_sites *s = g->sites;
    char err[1280];
    msnap_grow_spec spec;
    gr_spec(s, s->ref[0], &spec);
    msnap_replay_opts *o = calloc((size_t)g->nconf, sizeof *o);
    msnap_replay_result *res = calloc((size_t)g->nconf, sizeof *res);
    rq_stream **qs = calloc((size_t)g->nconf, sizeof *qs);
    int rc = 0;
    if (!o || !res || !qs) {
        fprintf(stderr, "memsnap %s: out of memory\n", g->cmd);
        rc = 2;
        goto out;
    }
    for (int c = 0; c < g->nconf; c++) {
        o[c] = (msnap_replay_opts){.conf = g->confs[c], .device_mem = g->device_mem,
                                   .engine = g->engine, .grow = &spec};
        qs[c] = g->q;
    }
    if (msnap_replay_streams(qs, o, g->nconf, g->jobs,
                             !g->quiet && progress_enabled() ? "replaying with --grow" : NULL, res,
                             err, sizeof err)) {
        fprintf(stderr, "memsnap %s: %s\n", g->cmd, err);
        rc = 2;
        goto out;
    }
    if (!g->json)
        print_head(g, &res[0]);
    for (int c = 0; c < g->nconf; c++) {
        const msnap_replay_result *r = &res[c];
        if (r->oom)
            rc = 1;
        if (g->json) {
            for (int i = 0; i < s->n; i++) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "config", g->confs[c]);
                cJSON_AddStringToObject(j, "site", s->label[i]);
                cJSON_AddStringToObject(j, "spec", s->spec[i]);
                cJSON_AddStringToObject(j, "engine", r->engine);
                cJSON_AddNumberToObject(j, "device_mem", (double)r->device_mem);
                cJSON_AddNumberToObject(j, "requests", (double)s->requests[i]);
                cJSON_AddNumberToObject(j, "recorded_bytes", (double)s->base[i]);
                cJSON_AddNumberToObject(j, "bytes", (double)gr_size_of(s, i, s->ref[0]));
                cJSON_AddBoolToObject(j, "oom", r->oom);
                cJSON_AddNumberToObject(j, "peak_reserved", (double)r->peak_reserved);
                cJSON_AddNumberToObject(j, "peak_allocated", (double)r->peak_allocated);
                cJSON_AddItemToObject(j, "first_failure", failure_json(g, r));
                cJSON_AddItemToArray(g->out, j);
            }
            continue;
        }
        char pa[32], pr[32];
        size_text(r->peak_allocated, g->bytes, pa, sizeof pa);
        size_text(r->peak_reserved, g->bytes, pr, sizeof pr);
        printf("config %d %s: peak allocated %s, peak reserved %s: ", c + 1,
               conf_name(g->confs[c]), pa, pr);
        if (r->oom) {
            char f[512];
            failure_text(g, r, f, sizeof f);
            printf("out of memory; first %s\n", f);
        } else {
            printf("runs to the end\n");
        }
    }
out:
    free(o);
    free(res);
    free(qs);
    return rc;
}

int grow_run_all(grow_run *g)
{
    return g->find_max ? run_find_max(g) : run_sizes(g);
}

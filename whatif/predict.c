/* predict: the peak and the OOM at another size, from two or three small
 * recordings (predict.h says what and why; docs/interop.md, "Predict").
 *
 * The pieces, in the order pr_build and pr_predict run them:
 *
 *   read_input     one read per recording: its request stream (requests.h);
 *                  site labels and keys from the stream's file (label.h);
 *   collect        each input's requests in order: the hash of its stack's
 *                  frames as text, the size asked for, the stack id; for
 *                  the template also the time and the mark or NVTX range
 *                  it came in;
 *   align          the template against each other input, greedily: equal
 *                  keys with sizes one request could have match
 *                  (same_request); at a difference, the nearest pair of
 *                  positions up to ALIGN_WINDOW ahead in each where
 *                  ALIGN_RUN requests match again;
 *   fit            per template request, from its matched sizes;
 *   make_stream    the template's stream with predicted sizes (rq_put);
 *   walk           the predicted allocated bytes: the peak, what is live
 *                  there;
 *   pr_predict     streams for every value, replayed under every config at
 *                  once (msnap_replay_streams), then the OOM's site.
 */
#include "predict.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/human.h"
#include "analyze/model.h"
#include "requests.h"
#include "torchalloc.h"
#include "util/hash.h"
#include "util/size.h"

#define ALIGN_WINDOW 256        /* requests looked ahead in each input at a difference */
#define ALIGN_RUN 8             /* keys that must match again to go on */
#define ALIGN_MAX_REGIONS 4096  /* past this many differences the rest is unaligned */
#define NONE UINT64_MAX
#define FNV0 MSNAP_FNV_BASIS
#define MAX_WHERE_DEPTH 32

/* One request of the template: its size as a function of x. */
typedef struct pr_req {
    double a, b, c;     /* size(x) = a + b*x + c*x^2 */
    uint32_t site;      /* index into sites */
    uint32_t where;     /* string id of the template's mark / NVTX range then, 0 none */
    uint8_t fit;        /* enum pr_fit */
    uint8_t aligned;    /* matched in every input */
    uint8_t bent;       /* three points, a parabola bending down: the line of the two largest */
} pr_req;

typedef struct pr_site {
    uint64_t key;       /* sm_site_key */
    uint32_t stack;     /* the first stack of the site in the template */
} pr_site;

/* One input's requests, in order. */
typedef struct in_reqs {
    uint64_t *key;      /* the stack's frames as text, hashed */
    uint64_t *size;     /* bytes asked for */
    uint32_t *stack;
    uint64_t *t;        /* template only: event time */
    uint32_t *where;    /* template only */
    uint64_t n, cap;
} in_reqs;

struct pr_model {
    int n, tmpl, torch;
    double x[PR_MAX_INPUTS];
    char *path[PR_MAX_INPUTS];
    rq_stream *q;       /* the template's request stream, kept for the predictions */
    const sm_labels *lab; /* the template's labels (its file's: m->q->f) */
    pr_req *req;
    uint64_t nreq;
    pr_site *sites;
    size_t nsites, capsites;
    int grows;                  /* some aligned request is larger at a larger value */
    uint64_t shrink;            /* aligned requests smaller at a larger value */
    pr_alignment al;
};

static uint64_t fnv(uint64_t h, const char *s)
{
    return msnap_fnv1a_str(h, s);
}

/* ---- reading and collecting ------------------------------------------------ */

/* Reads path once into q.  0, or 2 with "PATH: why" in err.  q is to be
 * freed by the caller either way. */
static int read_input(const char *path, rq_stream *q, char *err, size_t errlen)
{
    if (rq_init(q, path)) {
        snprintf(err, errlen, "%s: out of memory", path);
        return 2;
    }
    return rq_load(q, err, errlen) ? 2 : 0;
}

/* The hash of a stack's frames as text, each as the symbol table writes
 * it (never the ip itself when a sym or module names it): the same code
 * path in another run of the program hashes the same.  cache: stack ->
 * hash. */
static uint64_t frames_key(const sm_symtab *t, uint32_t stack, u64map *cache)
{
    if (!stack)
        return fnv(FNV0, "(no stack)");
    uint64_t *v = u64map_get(cache, 0, stack);
    if (v)
        return *v;
    char buf[1024];
    uint64_t h = FNV0;
    int depth = sm_symtab_frame(t, stack, 0, SM_MOD_SIZED, buf, sizeof buf);
    if (!depth)
        h = fnv(h, "(unknown stack)");
    for (int i = 0; i < depth; i++) {
        sm_symtab_frame(t, stack, i, SM_MOD_SIZED, buf, sizeof buf);
        h = fnv(fnv(h, buf), "\n");
    }
    u64map_put(cache, 0, stack, h);
    return h;
}

static int reqs_push(in_reqs *r, int tmpl, uint64_t key, uint64_t size, uint32_t stack,
                     uint64_t t, uint32_t where)
{
    if (r->n == r->cap) {
        uint64_t nc = r->cap ? r->cap * 2 : 4096;
        uint64_t *k = realloc(r->key, nc * sizeof *k);
        if (k)
            r->key = k;
        uint64_t *s = realloc(r->size, nc * sizeof *s);
        if (s)
            r->size = s;
        uint32_t *st = realloc(r->stack, nc * sizeof *st);
        if (st)
            r->stack = st;
        if (!k || !s || !st)
            return -1;
        if (tmpl) {
            uint64_t *tt = realloc(r->t, nc * sizeof *tt);
            if (tt)
                r->t = tt;
            uint32_t *w = realloc(r->where, nc * sizeof *w);
            if (w)
                r->where = w;
            if (!tt || !w)
                return -1;
        }
        r->cap = nc;
    }
    r->key[r->n] = key;
    r->size[r->n] = size;
    r->stack[r->n] = stack;
    if (tmpl) {
        r->t[r->n] = t;
        r->where[r->n] = where;
    }
    r->n++;
    return 0;
}

static void reqs_free(in_reqs *r)
{
    free(r->key);
    free(r->size);
    free(r->stack);
    free(r->t);
    free(r->where);
    memset(r, 0, sizeof *r);
}

/* q's requests (RQ_ALLOC entries that ask for bytes), in order, into r;
 * for the template (tmpl) also their time and the mark or NVTX range
 * they came in.  0, or -1 (errno: out of memory or the temporary file). */
static int collect(rq_stream *q, int torch, int tmpl, in_reqs *r)
{
    u64map cache = {0};
    uint32_t ranges[MAX_WHERE_DEPTH];
    int depth = 0;
    uint32_t last_mark = 0, where = 0;
    spill_rec rec;
    int more, rc = -1;
    if (rq_rewind(q))
        goto out;
    while ((more = rq_next(q, &rec)) == 1) {
        const msnap_event *e = &rec.e;
        if (tmpl && rec.k1 == RQ_EVENT) {
            if (e->action == MSNAP_A_NVTX_MARK) {
                where = last_mark = (uint32_t)e->aux;
            } else if (e->action == MSNAP_A_NVTX_PUSH) {
                if (depth < MAX_WHERE_DEPTH)
                    ranges[depth++] = (uint32_t)e->aux;
                where = (uint32_t)e->aux;
            } else if (e->action == MSNAP_A_NVTX_POP) {
                if (depth)
                    depth--;
                where = depth ? ranges[depth - 1] : last_mark;
            }
        }
        if (rq_kind(q, &rec) != RQ_ALLOC)
            continue;
        uint64_t size = rq_request_size(e, torch);
        if (!size)
            continue; /* the replay skips it too */
        if (reqs_push(r, tmpl, frames_key(&q->f.tab, e->stack, &cache), size, e->stack, e->t_ns,
                      where)) {
            errno = ENOMEM;
            goto out;
        }
    }
    rc = more < 0 ? -1 : 0;
out:
    u64map_free(&cache);
    return rc;
}

/* ---- alignment ---------------------------------------------------------------- */

/* Whether request i of the template (at x_t, the largest value) and
 * request j of another input (at x_o) can be one request: the same frames,
 * and sizes a request could have at the two values - not smaller at the
 * larger value than half the other, not more than (x_t/x_o)^3 times it
 * (plus 64 KiB for small sizes).  A tensor's bytes grow with the
 * parameter, at most as its cube; the check keeps the alignment from
 * pairing two requests of one line of code that are not the same (the
 * backward of a broadcast multiplication allocates twice at batch 2 and
 * once at batch 1, from one stack). */
typedef struct pair_ctx {
    const in_reqs *a, *b;
    double r3;          /* (x_t / x_o)^3 */
} pair_ctx;

static int same_request(const pair_ctx *p, uint64_t i, uint64_t j)
{
    if (p->a->key[i] != p->b->key[j])
        return 0;
    double st = (double)p->a->size[i], so = (double)p->b->size[j];
    return st * 2 >= so && st <= so * p->r3 + 65536;
}

/* 1 when the n requests from i and j are the same. */
static int run_eq(const pair_ctx *p, uint64_t i, uint64_t j, uint64_t n)
{
    for (uint64_t k = 0; k < n; k++)
        if (!same_request(p, i + k, j + k))
            return 0;
    return 1;
}

/* Aligns b (at x_o) to the template a (at x_t): map[i] = b's index of a's
 * request i, or NONE.  Returns the number of stretches where they differ;
 * *first_a and *first_b the first difference (NONE when none), *gave_up
 * when no match was found again. */
static uint64_t align(const in_reqs *a, double x_t, const in_reqs *b, double x_o, uint64_t *map,
                      uint64_t *first_a, uint64_t *first_b, int *gave_up)
{
    uint64_t i = 0, j = 0, regions = 0;
    double r = x_t / x_o;
    pair_ctx p = {a, b, r * r * r * 1.01};
    *first_a = *first_b = NONE;
    *gave_up = 0;
    for (uint64_t k = 0; k < a->n; k++)
        map[k] = NONE;
    while (i < a->n && j < b->n) {
        if (same_request(&p, i, j)) {
            map[i++] = j++;
            continue;
        }
        if (!regions++) {
            *first_a = i;
            *first_b = j;
        }
        if (regions > ALIGN_MAX_REGIONS) {
            *gave_up = 1;
            break;
        }
        /* the nearest pair of positions (fewest requests skipped in all)
         * where ALIGN_RUN requests match again */
        int found = 0;
        uint64_t di = 0, dj = 0;
        for (uint64_t d = 1; d <= 2 * ALIGN_WINDOW && !found; d++) {
            for (uint64_t x = d > ALIGN_WINDOW ? d - ALIGN_WINDOW : 0; x <= d && x <= ALIGN_WINDOW; x++) {
                uint64_t y = d - x;
                if (i + x >= a->n || j + y >= b->n)
                    continue;
                uint64_t left = a->n - (i + x) < b->n - (j + y) ? a->n - (i + x) : b->n - (j + y);
                if (run_eq(&p, i + x, j + y, left < ALIGN_RUN ? left : ALIGN_RUN)) {
                    di = x;
                    dj = y;
                    found = 1;
                    break;
                }
            }
        }
        if (!found) {
            *gave_up = 1;
            break;
        }
        i += di;
        j += dj;
    }
    if (i < a->n && !regions++) {
        /* b ended first: the rest of the template is unaligned */
        *first_a = i;
        *first_b = NONE;
    }
    return regions;
}

/* ---- fitting ------------------------------------------------------------------- */

/* 1 when s[i] / x[i]^k is the same for every point (to 1e-12). */
static int monomial(int n, const double *x, const double *s, int k)
{
    long double c0 = (long double)s[0] / powl(x[0], k);
    for (int i = 1; i < n; i++) {
        long double c = (long double)s[i] / powl(x[i], k);
        if (fabsl(c - c0) > 1e-12L * fabsl(c0))
            return 0;
    }
    return 1;
}

/* The size of one request as a function of x from n points (x distinct;
 * the template's first, the largest value).  With three points a parabola
 * that bends down (c < 0) would shrink the request at larger values, which
 * a tensor does not: the smallest recording is then taken as a special
 * case (batch 1 often is: a view instead of a copy, another kernel) and
 * the line through the two largest values is used.  degree 1: lines only
 * (no size grows with the square of a batch size). */
static void fit(int n, const double *x, const double *s, int degree, pr_req *r)
{
    r->a = s[0];
    r->b = r->c = 0;
    if (n == 1) {
        r->fit = PR_FIT_NONE;
        return;
    }
    int same = 1;
    for (int i = 1; i < n; i++)
        same &= s[i] == s[0];
    if (same) {
        r->fit = PR_FIT_CONST;
        return;
    }
    if (monomial(n, x, s, 1)) {
        r->fit = PR_FIT_LINEAR;
        r->a = 0;
        r->b = (double)((long double)s[0] / x[0]);
        return;
    }
    if (degree >= 2 && monomial(n, x, s, 2)) {
        r->fit = PR_FIT_QUAD;
        r->a = 0;
        r->c = (double)((long double)s[0] / ((long double)x[0] * x[0]));
        return;
    }
    int o = 1, bent = 0;   /* the line's other point: with three, the larger of the two */
    if (n == 3) {
        long double b01 = ((long double)s[1] - s[0]) / ((long double)x[1] - x[0]);
        long double b02 = ((long double)s[2] - s[0]) / ((long double)x[2] - x[0]);
        long double c = (b02 - b01) / ((long double)x[2] - x[1]);
        if (x[2] > x[1])
            o = 2;
        bent = fabsl(b02 - b01) > 1e-12L * (fabsl(b01) + 1);
        if (bent && c > 0 && degree >= 2) {
            long double b = b01 - c * ((long double)x[0] + x[1]);
            r->fit = PR_FIT_QUAD;
            r->c = (double)c;
            r->b = (double)b;
            r->a = (double)((long double)s[0] - b * x[0] - c * (long double)x[0] * x[0]);
            return;
        }
    }
    long double b = ((long double)s[o] - s[0]) / ((long double)x[o] - x[0]);
    r->fit = PR_FIT_LINEAR;
    r->b = (double)b;
    r->a = (double)((long double)s[0] - b * x[0]);
    r->bent = (uint8_t)bent;
}

/* A request's predicted bytes at x: at least 1 (a fit that reaches 0 or
 * below keeps the request, so that the replay's request count stays the
 * template's), at most 2^62. */
static uint64_t size_at(const pr_req *r, double x)
{
    long double v = (long double)r->a + (long double)r->b * x + (long double)r->c * x * x;
    if (!(v >= 1))
        return 1;
    if (v > 4611686018427387904.0L)
        return 4611686018427387904ULL;
    return (uint64_t)llroundl(v);
}

/* What the walk counts for a request: PyTorch rounds to 512 bytes. */
static uint64_t counted(const pr_model *m, uint64_t s)
{
    if (!m->torch)
        return s;
    return s < 512 ? 512 : (s + 511) & ~511ULL;
}

/* ---- building ----------------------------------------------------------------- */

static int site_of(pr_model *m, u64map *by_key, u64map *by_stack, uint32_t stack, uint32_t *out)
{
    uint64_t *v = u64map_get(by_stack, 0, stack);
    if (v) {
        *out = (uint32_t)*v;
        return 0;
    }
    uint64_t key = sm_site_key(m->lab, stack);
    v = u64map_get(by_key, 0, key);
    uint64_t idx;
    if (v) {
        idx = *v;
    } else {
        if (m->nsites == m->capsites) {
            size_t nc = m->capsites ? m->capsites * 2 : 256;
            pr_site *ns = realloc(m->sites, nc * sizeof *ns);
            if (!ns)
                return -1;
            m->sites = ns;
            m->capsites = nc;
        }
        idx = m->nsites++;
        m->sites[idx] = (pr_site){key, stack};
        if (u64map_put(by_key, 0, key, idx))
            return -1;
    }
    if (u64map_put(by_stack, 0, stack, idx))
        return -1;
    *out = (uint32_t)idx;
    return 0;
}

static const char *base_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

int pr_build(pr_model **out, const char *const *paths, const double *values, int n, int engine,
             int degree, char *err, size_t errlen)
{
    *out = NULL;
    if (n < 2 || n > PR_MAX_INPUTS) {
        snprintf(err, errlen, "predict takes 2 or 3 recordings, not %d", n);
        return 2;
    }
    pr_model *m = calloc(1, sizeof *m);
    rq_stream *qs[PR_MAX_INPUTS] = {0};   /* apart: the template's is kept (m->q) */
    in_reqs rs[PR_MAX_INPUTS];
    uint64_t *maps[PR_MAX_INPUTS] = {0};
    u64map by_key = {0}, by_stack = {0};
    memset(rs, 0, sizeof rs);
    int rc = 2, inited[PR_MAX_INPUTS] = {0};
    for (int i = 0; i < n; i++)
        qs[i] = calloc(1, sizeof *qs[i]);
    if (!m || !qs[0] || !qs[1] || (n > 2 && !qs[2])) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    m->n = n;
    m->tmpl = 0;
    for (int i = 0; i < n; i++) {
        m->x[i] = values[i];
        if (!(m->path[i] = strdup(paths[i]))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        if (values[i] > values[m->tmpl])
            m->tmpl = i;
    }
    /* each input read once */
    int eng0 = 0;
    for (int i = 0; i < n; i++) {
        inited[i] = 1;
        if (read_input(paths[i], qs[i], err, errlen))
            goto out;
        int eng = engine == MSNAP_ENGINE_AUTO ? msnap_replay_engine_of(qs[i]) : engine;
        if (i && qs[i]->blocks != qs[0]->blocks) {
            snprintf(err, errlen, "%s has allocator blocks and %s has not: they are not "
                     "recordings of one program seen the same way", qs[i]->blocks ? paths[i] : paths[0],
                     qs[i]->blocks ? paths[0] : paths[i]);
            goto out;
        }
        if (i && eng != eng0) {
            snprintf(err, errlen, "%s and %s need different engines (%s is a PyTorch trace); give "
                     "--engine", paths[0], paths[i], eng == MSNAP_ENGINE_TORCH ? paths[i] : paths[0]);
            goto out;
        }
        eng0 = eng;
    }
    m->torch = eng0 == MSNAP_ENGINE_TORCH;
    /* one recording given twice (or a copy of it) says nothing of the size */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            const msnap_header *hi = &qs[i]->f.hdr, *hj = &qs[j]->f.hdr;
            if (qs[i]->f.have_header && qs[j]->f.have_header && hi->pid == hj->pid &&
                hi->t0_unix_ns == hj->t0_unix_ns && !strcmp(hi->host, hj->host)) {
                snprintf(err, errlen, "%s and %s are the same recording (one process, one "
                         "start): predict needs recordings of runs at different values",
                         paths[i], paths[j]);
                goto out;
            }
        }
    for (int i = 0; i < n; i++) {
        if (collect(qs[i], m->torch, i == m->tmpl, &rs[i])) {
            snprintf(err, errlen, "%s: %s", paths[i], errno == ENOMEM ? "out of memory"
                                                      : "cannot read a temporary file");
            goto out;
        }
        if (!rs[i].n) {
            snprintf(err, errlen, "%s: no allocation requests to predict from", paths[i]);
            goto out;
        }
        m->al.requests[i] = rs[i].n;
    }
    /* align every input with the template */
    pr_alignment *al = &m->al;
    al->ninputs = n;
    al->tmpl = m->tmpl;
    const in_reqs *t = &rs[m->tmpl];
    uint64_t first = NONE;
    for (int i = 0; i < n; i++) {
        if (i == m->tmpl)
            continue;
        if (!(maps[i] = malloc(t->n * sizeof *maps[i]))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        uint64_t fa, fb;
        int gave_up;
        uint64_t regions = align(t, m->x[m->tmpl], &rs[i], m->x[i], maps[i], &fa, &fb, &gave_up);
        al->regions += regions;
        al->gave_up |= gave_up;
        uint64_t matched = 0;
        for (uint64_t k = 0; k < t->n; k++)
            matched += maps[i][k] != NONE;
        if (fa != NONE && (first == NONE || fa < first)) {
            first = fa;
            al->div_input = i;
            al->div_index = fa + 1;
            al->div_other = fb == NONE ? 0 : fb + 1;
            al->div_t_ns = t->t[fa];
            al->div_size[0] = t->size[fa];
            al->div_size[1] = fb == NONE ? 0 : rs[i].size[fb];
            sm_site_label(an_labels(&qs[m->tmpl]->f), t->stack[fa], al->div_site[0], PR_LABEL_MAX);
            if (fb != NONE)
                sm_site_label(an_labels(&qs[i]->f), rs[i].stack[fb], al->div_site[1], PR_LABEL_MAX);
            else
                snprintf(al->div_site[1], PR_LABEL_MAX, "(no more requests)");
        }
        if (matched * 2 < t->n) {
            char a0[32], a1[32];
            if (fa == NONE)
                fa = 0;
            msnap_size_text(t->size[fa], a0, sizeof a0);
            if (fb != NONE)
                msnap_size_text(rs[i].size[fb], a1, sizeof a1);
            char l0[PR_LABEL_MAX], l1[PR_LABEL_MAX] = "nothing more";
            sm_site_label(an_labels(&qs[m->tmpl]->f), t->stack[fa], l0, sizeof l0);
            if (fb != NONE)
                sm_site_label(an_labels(&qs[i]->f), rs[i].stack[fb], l1, sizeof l1);
            snprintf(err, errlen, "%s and %s do not align: %" PRIu64 " of %" PRIu64 " requests "
                     "(%.1f%%) match in order and stack; they first differ at request %" PRIu64
                     " (%s for %s in %s; %s%s%s in %s); predict needs recordings of one program "
                     "at two or three values of one size parameter",
                     base_of(paths[m->tmpl]), base_of(paths[i]), matched, t->n,
                     100.0 * (double)matched / (double)t->n, fa + 1, a0, l0, base_of(paths[m->tmpl]),
                     fb != NONE ? a1 : "", fb != NONE ? " for " : "", l1, base_of(paths[i]));
            goto out;
        }
    }
    /* the template's requests: sites and fits */
    if (!(m->req = calloc(t->n, sizeof *m->req))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    m->nreq = t->n;
    m->lab = an_labels(&qs[m->tmpl]->f);
    uint64_t shrink = 0;
    for (uint64_t k = 0; k < t->n; k++) {
        pr_req *r = &m->req[k];
        double xs[PR_MAX_INPUTS], ss[PR_MAX_INPUTS];
        int np = 0, all = 1;
        xs[np] = m->x[m->tmpl];
        ss[np++] = (double)t->size[k];
        for (int i = 0; i < n; i++) {
            if (i == m->tmpl)
                continue;
            if (maps[i][k] == NONE) {
                all = 0;
                continue;
            }
            xs[np] = m->x[i];
            ss[np++] = (double)rs[i].size[maps[i][k]];
        }
        fit(np, xs, ss, degree, r);
        r->aligned = (uint8_t)all;
        r->where = t->where[k];
        al->aligned += all;
        al->fits[r->fit]++;
        al->bent += r->bent;
        if (r->fit == PR_FIT_LINEAR || r->fit == PR_FIT_QUAD) {
            /* growing or shrinking with x, at the template's value */
            double d = r->b + 2 * r->c * m->x[m->tmpl];
            if (d > 0)
                m->grows = 1;
            else if (d < 0)
                shrink++;
        }
        if (site_of(m, &by_key, &by_stack, t->stack[k], &r->site)) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    /* what the fits say of the inputs, for the caller to warn about */
    m->shrink = shrink;
    /* keep the template's stream and labels; the others are done with */
    m->q = qs[m->tmpl];
    qs[m->tmpl] = NULL;
    inited[m->tmpl] = 0;
    *out = m;
    m = NULL;
    rc = 0;
out:
    for (int i = 0; i < n; i++) {
        if (inited[i])
            rq_free(qs[i]);
        free(qs[i]);
        reqs_free(&rs[i]);
        free(maps[i]);
    }
    u64map_free(&by_key);
    u64map_free(&by_stack);
    pr_free(m);
    return rc;
}

void pr_free(pr_model *m)
{
    if (!m)
        return;
    if (m->q)
        rq_free(m->q);
    free(m->q);
    for (int i = 0; i < m->n; i++)
        free(m->path[i]);
    free(m->req);
    free(m->sites);
    free(m);
}

const pr_alignment *pr_alignment_of(const pr_model *m) { return &m->al; }
const char *pr_path(const pr_model *m, int i) { return m->path[i]; }
double pr_value(const pr_model *m, int i) { return m->x[i]; }
int pr_engine(const pr_model *m) { return m->torch ? MSNAP_ENGINE_TORCH : MSNAP_ENGINE_MEMSNAP; }
uint64_t pr_device_total(const pr_model *m) { return m->q->device_total; }
int pr_grows(const pr_model *m) { return m->grows; }
uint64_t pr_shrinks(const pr_model *m) { return m->shrink; }

/* ---- the predicted stream -------------------------------------------------------- */

/* The template's stream with every request's size at x, into *out
 * (rq_synth_init: rq_free it).  Failed requests of the template are left
 * out (they are the recording's, not the prediction's).  0, or -1 (errno). */
static int make_stream(pr_model *m, double x, rq_stream *out, const char *name)
{
    rq_synth_init(out, m->q, name);
    if (rq_rewind(m->q))
        return -1;
    spill_rec rec;
    uint64_t k = 0;
    int more;
    while ((more = rq_next(m->q, &rec)) == 1) {
        int kind = rq_kind(m->q, &rec);
        if (kind == RQ_FAILED)
            continue;
        if (kind == RQ_ALLOC) {
            if (!rq_request_size(&rec.e, m->torch))
                continue;
            if (k >= m->nreq) {
                errno = EINVAL;
                return -1;
            }
            uint64_t s = size_at(&m->req[k++], x);
            rec.e.size = s;
            if (rec.e.api == MSNAP_API_TORCH && rec.e.aux2)
                rec.e.aux2 = s;
        }
        if (rq_put(out, &rec))
            return -1;
    }
    return more < 0 ? -1 : 0;
}

int pr_stream_at(pr_model *m, double x, rq_stream *out, const char *name, char *err,
                 size_t errlen)
{
    if (make_stream(m, x, out, name)) {
        snprintf(err, errlen, "cannot write a temporary file: %s", strerror(errno));
        return -1;
    }
    return 0;
}

an_file *pr_template(pr_model *m)
{
    return &m->q->f;
}

/* The walk: the prediction's allocated bytes at x, entry by entry of the
 * template's stream.  *peak and *peak_at (entries read when it was
 * reached); with stop > 0 it stops after that many entries and leaves
 * the live requests in live ((device, address) -> request index).  0, or
 * -1 (errno). */
static int walk(pr_model *m, double x, uint64_t stop, u64map *live, uint64_t *peak,
                uint64_t *peak_at)
{
    uint64_t cur = 0, entries = 0, k = 0;
    *peak = *peak_at = 0;
    if (rq_rewind(m->q))
        return -1;
    spill_rec rec;
    int more;
    while ((more = rq_next(m->q, &rec)) == 1) {
        entries++;
        int kind = rq_kind(m->q, &rec);
        uint32_t tag = (uint16_t)rec.e.device;
        if (kind == RQ_ALLOC && rq_request_size(&rec.e, m->torch)) {
            uint64_t idx = k++, old;
            if (idx >= m->nreq)
                break;
            if (u64map_del(live, tag, rec.e.addr, &old))
                cur -= counted(m, size_at(&m->req[old], x));
            if (u64map_put(live, tag, rec.e.addr, idx)) {
                errno = ENOMEM;
                return -1;
            }
            cur += counted(m, size_at(&m->req[idx], x));
            if (cur > *peak) {
                *peak = cur;
                *peak_at = entries;
            }
        } else if (kind == RQ_FREE) {
            uint64_t idx;
            if (u64map_del(live, tag, rec.e.addr, &idx))
                cur -= counted(m, size_at(&m->req[idx], x));
        }
        if (stop && entries == stop)
            return 0;
    }
    return more < 0 ? -1 : 0;
}

/* The live requests at the walk's peak at x, into *live.  0 or -1. */
static int live_at_peak(pr_model *m, double x, u64map *live, uint64_t *peak)
{
    uint64_t at;
    u64map scratch = {0};
    int rc = walk(m, x, 0, &scratch, peak, &at);
    u64map_free(&scratch);
    if (rc)
        return -1;
    return walk(m, x, at, live, peak, &at);
}

/* ---- predictions --------------------------------------------------------------------- */

/* What a config lets the allocator reserve on device_mem bytes of which it
 * can get available (the rest held outside it, whatif.h). */
static uint64_t limit_of(const pr_model *m, const char *conf, uint64_t device_mem,
                         uint64_t available)
{
    uint64_t lim = device_mem;
    if (m->torch) {
        ta_config c;
        char e[256];
        ta_config_default(&c);
        if (!ta_config_parse(&c, conf, e, sizeof e) && c.fraction > 0)
            lim = (uint64_t)(c.fraction * (double)device_mem);
    } else {
        const char *p = strstr(conf, "device_limit:");
        if (p) {
            char v[64];
            size_t n = strcspn(p + 13, ",");
            uint64_t b;
            snprintf(v, sizeof v, "%.*s", (int)(n < 63 ? n : 63), p + 13);
            if (!msnap_size_parse(v, &b) && b && b < device_mem)
                lim = b;
        }
    }
    return available && available < lim ? available : lim;
}

/* The walk's share of aligned requests at x's peak. */
static int share_at(pr_model *m, double x, uint64_t *peak, double *share)
{
    u64map live = {0};
    uint64_t pk;
    if (live_at_peak(m, x, &live, &pk)) {
        u64map_free(&live);
        return -1;
    }
    uint64_t total = 0, aligned = 0;
    for (size_t i = 0; i < live.cap; i++) {
        if (!live.slots[i].used)
            continue;
        const pr_req *r = &m->req[live.slots[i].value];
        uint64_t s = counted(m, size_at(r, x));
        total += s;
        if (r->aligned)
            aligned += s;
    }
    u64map_free(&live);
    *peak = total;
    *share = total ? (double)aligned / (double)total : 1.0;
    return 0;
}

int pr_predict(pr_model *m, const double *at, int nat, const char *const *confs, int nconf,
               uint64_t device_mem, int jobs, const char *show, pr_result *res, char *err,
               size_t errlen)
{
    int total = nat * nconf, rc = -1;
    if (total <= 0)
        return 0;
    for (int c = 0; c < nconf; c++)
        if (m->torch && msnap_replay_check_conf(confs[c], 1, err, errlen)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "bad config \"%s\": %s", confs[c], why);
            return -1;
        }
    rq_stream *streams = calloc((size_t)nat, sizeof *streams);
    rq_stream **qs = calloc((size_t)total, sizeof *qs);
    msnap_replay_opts *opts = calloc((size_t)total, sizeof *opts);
    msnap_replay_result *rp = calloc((size_t)total, sizeof *rp);
    char (*names)[64] = calloc((size_t)nat, sizeof *names);
    int made = 0;
    if (!streams || !qs || !opts || !rp || !names) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int v = 0; v < nat; v++) {
        snprintf(names[v], sizeof names[v], "the prediction at %g", at[v]);
        made = v + 1;
        if (make_stream(m, at[v], &streams[v], names[v])) {
            snprintf(err, errlen, "cannot write a temporary file: %s", strerror(errno));
            goto out;
        }
        for (int c = 0; c < nconf; c++) {
            int i = v * nconf + c;
            qs[i] = &streams[v];
            opts[i] = (msnap_replay_opts){.conf = confs[c], .device_mem = device_mem,
                                          .engine = m->torch ? MSNAP_ENGINE_TORCH
                                                             : MSNAP_ENGINE_MEMSNAP};
        }
    }
    if (msnap_replay_streams(qs, opts, total, jobs, show, rp, err, errlen))
        goto out;
    for (int v = 0; v < nat; v++) {
        uint64_t wpeak;
        double share;
        if (share_at(m, at[v], &wpeak, &share)) {
            snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
            goto out;
        }
        for (int c = 0; c < nconf; c++) {
            pr_result *r = &res[v * nconf + c];
            memset(r, 0, sizeof *r);
            r->at = at[v];
            r->conf = confs[c];
            r->rp = rp[v * nconf + c];
            r->limit = limit_of(m, confs[c], r->rp.device_mem, r->rp.available);
            r->headroom = !r->rp.oom && r->limit > r->rp.peak_reserved
                              ? r->limit - r->rp.peak_reserved : 0;
            r->walk_peak = wpeak;
            r->aligned_share = share;
            if (r->rp.oom && r->rp.oom_index >= 1 && r->rp.oom_index <= m->nreq) {
                const pr_req *q = &m->req[r->rp.oom_index - 1];
                r->oom_request = r->rp.oom_index;
                sm_site_label(m->lab, m->sites[q->site].stack, r->oom_site, sizeof r->oom_site);
                if (q->where)
                    snprintf(r->oom_where, sizeof r->oom_where, "%s",
                             sm_symtab_str(&m->q->f.tab, q->where));
            }
        }
    }
    rc = 0;
out:
    for (int v = 0; v < made; v++)
        rq_free(&streams[v]);
    free(streams);
    free(qs);
    free(opts);
    free(rp);
    free(names);
    return rc;
}

/* Predicts the whole values xs[0..n) under conf into res. */
static int eval(pr_model *m, const uint64_t *xs, int n, const char *conf, uint64_t device_mem,
                int jobs, const char *show, pr_result *res, char *err, size_t errlen)
{
    double at[16];
    for (int i = 0; i < n; i++)
        at[i] = (double)xs[i];
    const char *confs[1] = {conf};
    return pr_predict(m, at, n, confs, 1, device_mem, jobs, show, res, err, errlen);
}

#define FIND_MAX_TOP (1ULL << 40)

int pr_find_max(pr_model *m, const char *conf, uint64_t device_mem, int jobs, const char *show,
                pr_result *fit_r, pr_result *next, char *err, size_t errlen)
{
    int J = jobs < 1 ? 1 : jobs > 16 ? 16 : jobs;
    pr_result r[16];
    uint64_t xs[16];
    memset(fit_r, 0, sizeof *fit_r);
    memset(next, 0, sizeof *next);
    double top = 0;
    for (int i = 0; i < m->n; i++)
        if (m->x[i] > top)
            top = m->x[i];
    uint64_t x0 = top >= 1 ? (uint64_t)top : 1;
    uint64_t lo = 0, hi = 0;   /* lo fits (0: none known); hi does not (0: none known) */
    xs[0] = x0;
    if (eval(m, xs, 1, conf, device_mem, jobs, show, r, err, errlen))
        return -1;
    if (r[0].rp.oom) {
        hi = x0;
        *next = r[0];
    } else {
        lo = x0;
        *fit_r = r[0];
    }
    if (!m->grows) {
        /* the same at every value: the answer is the template's */
        if (lo)
            next->at = 0;
        return 0;
    }
    /* doubling until something fails */
    while (!hi && lo < FIND_MAX_TOP) {
        int n = 0;
        for (uint64_t x = lo * 2; n < J && x <= FIND_MAX_TOP; x *= 2)
            xs[n++] = x;
        if (!n)
            break;
        if (eval(m, xs, n, conf, device_mem, jobs, show, r, err, errlen))
            return -1;
        for (int i = 0; i < n; i++) {
            if (r[i].rp.oom) {
                hi = xs[i];
                *next = r[i];
                break;
            }
            lo = xs[i];
            *fit_r = r[i];
        }
    }
    if (!hi)
        return 0; /* nothing fails below 2^40 */
    /* J-ary search between lo (fits, or 0) and hi (fails) */
    while (hi - lo > 1) {
        uint64_t gap = hi - lo - 1;
        int n = gap < (uint64_t)J ? (int)gap : J;
        int k = 0;
        for (int i = 0; i < n; i++) {
            uint64_t x = lo + (uint64_t)((long double)(hi - lo) * (i + 1) / (n + 1));
            if (x <= lo || x >= hi || (k && xs[k - 1] == x))
                continue;
            xs[k++] = x;
        }
        if (!k)
            xs[k++] = lo + 1;
        if (eval(m, xs, k, conf, device_mem, jobs, show, r, err, errlen))
            return -1;
        for (int i = 0; i < k; i++) {
            if (r[i].rp.oom) {
                hi = xs[i];
                *next = r[i];
                break;
            }
            lo = xs[i];
            *fit_r = r[i];
        }
    }
    if (!lo)
        memset(fit_r, 0, sizeof *fit_r);
    return 0;
}

/* ---- growth ------------------------------------------------------------------------------ */

typedef struct growth_acc {
    uint64_t bytes, requests;
    double b, c;
    double d;           /* b + 2cx */
    size_t site;
} growth_acc;

static int growth_cmp(const void *pa, const void *pb)
{
    const growth_acc *a = pa, *b = pb;
    return a->d < b->d ? 1 : a->d > b->d ? -1 : a->site < b->site ? -1 : a->site > b->site;
}

int pr_growth_at(pr_model *m, double x, pr_growth *out, int max)
{
    u64map live = {0};
    uint64_t pk;
    growth_acc *acc = calloc(m->nsites ? m->nsites : 1, sizeof *acc);
    if (!acc || live_at_peak(m, x, &live, &pk)) {
        free(acc);
        u64map_free(&live);
        return -1;
    }
    for (size_t i = 0; i < live.cap; i++) {
        if (!live.slots[i].used)
            continue;
        const pr_req *r = &m->req[live.slots[i].value];
        growth_acc *a = &acc[r->site];
        a->bytes += counted(m, size_at(r, x));
        a->requests++;
        a->b += r->b;
        a->c += r->c;
    }
    u64map_free(&live);
    size_t n = 0;
    for (size_t s = 0; s < m->nsites; s++) {
        acc[s].d = acc[s].b + 2 * acc[s].c * x;
        acc[s].site = s;
        if (acc[s].requests && acc[s].d > 0.5)
            acc[n++] = acc[s];
    }
    qsort(acc, n, sizeof *acc, growth_cmp);
    int k = 0;
    for (size_t i = 0; i < n && k < max; i++, k++) {
        out[k] = (pr_growth){.bytes = acc[i].bytes, .requests = acc[i].requests,
                             .per_unit = acc[i].b, .per_unit2 = acc[i].c};
        sm_site_label(m->lab, m->sites[acc[i].site].stack, out[k].label, sizeof out[k].label);
    }
    free(acc);
    return k;
}

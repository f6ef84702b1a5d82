/* The job view's reduce: rank records (job.c) to the job object (job.h
 * says what it holds).  It reads no file and keeps, besides the records,
 * one entry per (site, rank that lists it) and one per distinct site.
 *
 * Ranks.  A record's own rank wins (none has one yet: format 1.2 headers
 * say no rank); else the file names
 * say it: the part where the names of all the files differ, when it is a
 * number in every name (run-0.msnap ... run-1023.msnap, the recorder's
 * `%q{RANK}`; a shared prefix that ends in digits gives them back:
 * run-10 .. run-19 differ in "0".."9" after "run-1"), else the number after
 * "rank" in a name (snap-rank3.msnap).  A file with neither has none.
 *
 * Medians are lower medians (element (n-1)/2 of the sorted values): a
 * rank's own figure, never an average of two.
 */
#define _GNU_SOURCE   /* qsort_r */
#include "job.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report.h"
#include "util/hash.h"
#include "util/u64map.h"
#include "result_json.h"

#define ALIGN_LISTED 8         /* ranks named per step group */

/* Whether v is a number (a cJSON number, or a raw one: records parsed by
 * job_parse), its value in *out. */
static int jnum(const cJSON *v, double *out)
{
    if (cJSON_IsNumber(v)) {
        *out = v->valuedouble;
        return 1;
    }
    if (cJSON_IsRaw(v) && v->valuestring) {
        char *end;
        double d = strtod(v->valuestring, &end);
        if (end != v->valuestring && !*end) {
            *out = d;
            return 1;
        }
    }
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- ranks ----------------------------------------------------------------- */

typedef struct rank_of {
    long long rank;
    int known;                 /* 0 none, 1 header, 2 name */
} rank_of;

/* The number after "rank" (any case; '-', '_', '.' or nothing between) in
 * a name; -1 when none. */
static long long rank_word(const char *name)
{
    for (const char *s = name; *s; s++) {
        if (strncasecmp(s, "rank", 4))
            continue;
        const char *d = s + 4;
        while (*d == '-' || *d == '_' || *d == '.')
            d++;
        if (isdigit((unsigned char)*d))
            return strtoll(d, NULL, 10);
    }
    return -1;
}

static void name_ranks(cJSON *const *recs, int n, rank_of *r, const char **from)
{
    int header = 0, named = 0;
    for (int i = 0; i < n; i++) {
        double v;
        r[i].known = jnum(jo(recs[i], "rank"), &v) && v >= 0;
        r[i].rank = r[i].known ? (long long)v : -1;
        header += r[i].known;
    }
    /* the part of the names that differs, when it is a number in each */
    size_t pre = SIZE_MAX, suf = SIZE_MAX;
    const char *first = n ? base_name(js(recs[0], "file")) : "";
    size_t flen = strlen(first);
    for (int i = 1; i < n; i++) {
        const char *b = base_name(js(recs[i], "file"));
        size_t bl = strlen(b), k = 0;
        while (k < flen && k < bl && first[k] == b[k])
            k++;
        if (k < pre)
            pre = k;
        k = 0;
        while (k < flen && k < bl && first[flen - 1 - k] == b[bl - 1 - k])
            k++;
        if (k < suf)
            suf = k;
    }
    int by_diff = n >= 2;
    if (by_diff) {
        while (pre && isdigit((unsigned char)first[pre - 1]))
            pre--;
        while (suf && isdigit((unsigned char)first[flen - suf]))
            suf--;
        for (int i = 0; i < n && by_diff; i++) {
            const char *b = base_name(js(recs[i], "file"));
            size_t bl = strlen(b);
            if (bl < pre + suf + 1) {
                by_diff = 0;
                break;
            }
            for (size_t k = pre; k < bl - suf; k++)
                if (!isdigit((unsigned char)b[k]) || k - pre > 15)
                    by_diff = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (r[i].known)
            continue;
        const char *b = base_name(js(recs[i], "file"));
        long long v = by_diff ? strtoll(b + pre, NULL, 10) : rank_word(b);
        if (v >= 0) {
            r[i].rank = v;
            r[i].known = 2;
            named++;
        }
    }
    *from = header == n ? "header" : named == n ? "name" : header + named ? "mixed" : "none";
}

/* ---- order --------------------------------------------------------------- */

typedef struct row_key {
    int idx;
    const rank_of *r;
} row_key;

static int cmp_row(const void *a, const void *b)
{
    const row_key *x = a, *y = b;
    int kx = x->r[x->idx].known != 0, ky = y->r[y->idx].known != 0;
    if (kx != ky)
        return ky - kx;
    if (kx && x->r[x->idx].rank != y->r[y->idx].rank)
        return x->r[x->idx].rank < y->r[y->idx].rank ? -1 : 1;
    return x->idx - y->idx;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}


/* ---- sites across ranks -------------------------------------------------- */

typedef struct site_entry {
    uint32_t site;             /* index into the distinct sites */
    uint32_t row;              /* row (rank table order) */
    uint64_t peak;
} site_entry;

typedef struct site_stat {
    const char *label;         /* borrowed from a record */
    uint32_t with;             /* rows that list it */
    uint64_t min, median, max, spread;
    int min_row, max_row;      /* -1: a rank that lists it not (0 B) */
    size_t first;              /* its entries: ent[first .. first + with) by row */
} site_stat;

static uint64_t fnv(const char *s)
{
    return msnap_fnv1a_str(MSNAP_FNV_BASIS, s);
}

static int cmp_entry(const void *a, const void *b)
{
    const site_entry *x = a, *y = b;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return x->row < y->row ? -1 : x->row > y->row;
}

typedef struct sites_ctx {
    site_stat *st;
    size_t nst;
    site_entry *ent;
    size_t nent;
    const uint8_t *complete;   /* per row */
    int nrows;
    int ncomplete;             /* rows whose lists are complete */
} sites_ctx;

/* The stats of every site over the rows: those that list it with their
 * peak, the complete rows that do not with 0, the others unknown. */
static int site_stats(sites_ctx *c)
{
    uint64_t *v = malloc(((size_t)c->nrows + 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t s = 0; s < c->nst; s++) {
        site_stat *t = &c->st[s];
        const site_entry *e = &c->ent[t->first];
        int zeros = c->ncomplete;      /* complete rows without it */
        size_t k = 0;
        t->min = UINT64_MAX;
        t->max = 0;
        t->min_row = t->max_row = -1;
        for (uint32_t i = 0; i < t->with; i++) {
            zeros -= c->complete[e[i].row];
            v[k++] = e[i].peak;
            if (e[i].peak > t->max || t->max_row < 0) {
                t->max = e[i].peak;
                t->max_row = (int)e[i].row;
            }
            if (e[i].peak < t->min) {
                t->min = e[i].peak;
                t->min_row = (int)e[i].row;
            }
        }
        if (zeros > 0) {
            t->min = 0;
            /* the first complete row without it */
            t->min_row = -1;
            for (int r = 0, i = 0; r < c->nrows; r++) {
                while (i < (int)t->with && (int)e[i].row < r)
                    i++;
                if (c->complete[r] && !(i < (int)t->with && (int)e[i].row == r)) {
                    t->min_row = r;
                    break;
                }
            }
        }
        qsort(v, k, sizeof *v, cmp_u64);
        size_t total = k + (size_t)(zeros > 0 ? zeros : 0), mid = (total - 1) / 2;
        size_t z = total - k;
        t->median = mid < z ? 0 : v[mid - z];
        t->spread = t->max - t->min;
    }
    free(v);
    return 0;
}

static int cmp_spread(const void *a, const void *b, void *arg)
{
    const sites_ctx *c = arg;
    const site_stat *x = &c->st[*(const uint32_t *)a], *y = &c->st[*(const uint32_t *)b];
    if (x->spread != y->spread)
        return x->spread > y->spread ? -1 : 1;
    return strcmp(x->label, y->label);
}

/* Distinct sites (by label) and an entry per (site, row that lists it),
 * the entries sorted by site then row. */
static int collect_sites(sites_ctx *c, cJSON *const *recs, const int *rows)
{
    u64map ids = {0};
    size_t cap_st = 0, cap_ent = 0;
    for (int r = 0; r < c->nrows; r++) {
        const cJSON *x;
        cJSON_ArrayForEach(x, jo(recs[rows[r]], "sites")) {
            const char *l = js(x, "label");
            uint64_t h = fnv(l), *id = u64map_get(&ids, 0, h);
            uint32_t s;
            if (id) {
                s = (uint32_t)(*id - 1);
            } else {
                if (c->nst == cap_st) {
                    size_t nc = cap_st ? cap_st * 2 : 64;
                    site_stat *ns = realloc(c->st, nc * sizeof *ns);
                    if (!ns)
                        goto oom;
                    c->st = ns;
                    cap_st = nc;
                }
                s = (uint32_t)c->nst++;
                c->st[s] = (site_stat){.label = l};
                if (u64map_put(&ids, 0, h, (uint64_t)s + 1))
                    goto oom;
            }
            if (c->nent == cap_ent) {
                size_t nc = cap_ent ? cap_ent * 2 : 256;
                site_entry *ne = realloc(c->ent, nc * sizeof *ne);
                if (!ne)
                    goto oom;
                c->ent = ne;
                cap_ent = nc;
            }
            c->ent[c->nent++] = (site_entry){s, (uint32_t)r, ju(x, "peak")};
        }
    }
    u64map_free(&ids);
    if (c->nent)
        qsort(c->ent, c->nent, sizeof *c->ent, cmp_entry);
    /* a label listed twice by one rank (job.c never writes that; records
     * from elsewhere might): one entry, the larger peak */
    size_t k = 0;
    for (size_t i = 0; i < c->nent; i++) {
        if (k && c->ent[k - 1].site == c->ent[i].site && c->ent[k - 1].row == c->ent[i].row) {
            if (c->ent[i].peak > c->ent[k - 1].peak)
                c->ent[k - 1].peak = c->ent[i].peak;
            continue;
        }
        c->ent[k++] = c->ent[i];
    }
    c->nent = k;
    for (size_t i = 0; i < c->nent; i++) {
        site_stat *t = &c->st[c->ent[i].site];
        if (!t->with)
            t->first = i;
        t->with++;
    }
    return site_stats(c);
oom:
    u64map_free(&ids);
    return -1;
}

/* The peak of site s at row r: its entry's, 0 for a complete row that
 * does not list it, else unknown (returns 0 and *known = 0). */
static uint64_t site_peak_at(const sites_ctx *c, uint32_t s, int r, int *known)
{
    const site_stat *t = &c->st[s];
    size_t lo = t->first, hi = t->first + t->with;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((int)c->ent[mid].row < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->first + t->with && (int)c->ent[lo].row == r) {
        *known = 1;
        return c->ent[lo].peak;
    }
    *known = c->complete[r];
    return 0;
}

/* ---- the reduce ---------------------------------------------------------- */

/* The rank of a row as JSON: its number or null. */
static cJSON *rank_json(const rank_of *r, int row)
{
    return r[row].known ? cJSON_CreateNumber((double)r[row].rank) : cJSON_CreateNull();
}

/* {file, rank, peak} of a row. */
static cJSON *row_peak(cJSON *const *recs, const int *rows, const rank_of *rr, int row,
                       uint64_t peak)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", js(recs[rows[row]], "file"));
    cJSON_AddItemToObject(o, "rank", rank_json(rr, row));
    msnap_json_u64(o, "peak", peak);
    return o;
}

static int cmp_peak_row(const void *a, const void *b, void *arg)
{
    const uint64_t *peaks = arg;
    int x = *(const int *)a, y = *(const int *)b;
    if (peaks[x] != peaks[y])
        return peaks[x] < peaks[y] ? -1 : 1;
    return x - y;
}

/* The step of a record's member as its group key: the number (as text),
 * else the text; "" when none. */
static void step_key(const cJSON *step, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!step || cJSON_IsNull(step))
        return;
    double num;
    if (jnum(jo(step, "number"), &num))
        snprintf(buf, cap, "%s %.0f", js(step, "word"), num);
    else
        snprintf(buf, cap, "%s", js(step, "text"));
}

typedef struct wall_ctx {
    cJSON *const *recs;
    const int *rows;
} wall_ctx;

static int cmp_wall(const void *a, const void *b, void *arg)
{
    const wall_ctx *w = arg;
    int i = *(const int *)a, k = *(const int *)b;
    uint64_t x = ju(jo(w->recs[w->rows[i]], "oom"), "wall_ns");
    uint64_t y = ju(jo(w->recs[w->rows[k]], "oom"), "wall_ns");
    if (x != y)
        return x < y ? -1 : 1;
    return i - k;
}

typedef struct step_group {
    char key[128];
    const cJSON *step;         /* the first row's */
    int count, first_row;
    cJSON *ranks;              /* up to ALIGN_LISTED */
} step_group;

static int cmp_group(const void *a, const void *b)
{
    const step_group *x = a, *y = b;
    if (x->count != y->count)
        return y->count - x->count;
    return x->first_row - y->first_row;
}

/* alignment: in which step each rank peaked (job.h). */
static int add_alignment(cJSON *job, cJSON *const *recs, const int *rows, const rank_of *rr,
                         int n)
{
    step_group *g = calloc((size_t)n + 1, sizeof *g);
    u64map idx = {0};
    int ng = 0, ranged = 0, marked = 0;
    if (!g)
        return -1;
    for (int r = 0; r < n; r++) {
        const cJSON *st = jo(jo(recs[rows[r]], "steps"), "at_peak");
        char key[128];
        step_key(st, key, sizeof key);
        if (*key) {
            if (!strncmp(js(st, "text"), "after ", 6))
                marked++;
            else
                ranged++;
        }
        uint64_t h = fnv(key), *i = u64map_get(&idx, 0, h);
        step_group *x;
        if (i) {
            x = &g[*i - 1];
        } else {
            x = &g[ng];
            snprintf(x->key, sizeof x->key, "%s", key);
            x->step = st;
            x->first_row = r;
            x->ranks = cJSON_CreateArray();
            if (u64map_put(&idx, 0, h, (uint64_t)++ng)) {
                u64map_free(&idx);
                for (int k = 0; k < ng; k++)
                    cJSON_Delete(g[k].ranks);
                free(g);
                return -1;
            }
        }
        if (x->count++ < ALIGN_LISTED)
            cJSON_AddItemToArray(x->ranks, rank_json(rr, r));
    }
    u64map_free(&idx);
    qsort(g, (size_t)ng, sizeof *g, cmp_group);
    cJSON *a = cJSON_AddObjectToObject(job, "alignment");
    cJSON_AddStringToObject(a, "by", ranged ? "steps" : marked ? "marks" : "none");
    /* the word of the first group with one */
    const char *word = NULL;
    for (int k = 0; k < ng && !word; k++)
        if (g[k].step && cJSON_IsString(jo(g[k].step, "word")))
            word = jo(g[k].step, "word")->valuestring;
    if (word)
        cJSON_AddStringToObject(a, "word", word);
    else
        cJSON_AddNullToObject(a, "word");
    cJSON_AddBoolToObject(a, "same_step", ng == 1 && *g[0].key);
    cJSON *ps = cJSON_AddArrayToObject(a, "peak_steps");
    for (int k = 0; k < ng; k++) {
        cJSON *o = cJSON_CreateObject();
        double num;
        if (!*g[k].key)
            cJSON_AddNullToObject(o, "step");
        else if (g[k].step && jnum(jo(g[k].step, "number"), &num))
            cJSON_AddNumberToObject(o, "step", num);
        else
            cJSON_AddStringToObject(o, "step", js(g[k].step, "text"));
        cJSON_AddNumberToObject(o, "ranks", g[k].count);
        cJSON_AddItemToObject(o, "first_ranks", g[k].ranks);
        cJSON_AddItemToArray(ps, o);
    }
    free(g);
    return 0;
}

/* Copies member key of from into to (null when absent). */
static void copy_member(cJSON *to, const cJSON *from, const char *key)
{
    const cJSON *v = jo(from, key);
    cJSON_AddItemToObject(to, key, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
}

cJSON *job_reduce(cJSON *const *recs, int n)
{
    cJSON *job = cJSON_CreateObject();
    rank_of *rk = calloc((size_t)n + 1, sizeof *rk), *rr = calloc((size_t)n + 1, sizeof *rr);
    row_key *order = calloc((size_t)n + 1, sizeof *order);
    int *rows = calloc((size_t)n + 1, sizeof *rows), *byp = calloc((size_t)n + 1, sizeof *byp);
    uint64_t *peaks = calloc((size_t)n + 1, sizeof *peaks);
    uint8_t *complete = calloc((size_t)n + 1, 1);
    uint32_t *pick = NULL;
    sites_ctx sc = {0};
    u64map hosts = {0};
    if (!job || !rk || !rr || !order || !rows || !byp || !peaks || !complete)
        goto oom;

    const char *from;
    name_ranks(recs, n, rk, &from);
    for (int i = 0; i < n; i++)
        order[i] = (row_key){i, rk};
    qsort(order, (size_t)n, sizeof *order, cmp_row);
    for (int r = 0; r < n; r++) {
        rows[r] = order[r].idx;
        rr[r] = rk[rows[r]];
        peaks[r] = ju(recs[rows[r]], "peak_reserved");
        complete[r] = (uint8_t)cJSON_IsTrue(jo(recs[rows[r]], "sites_complete"));
        byp[r] = r;
    }

    cJSON_AddNumberToObject(job, "files", n);
    cJSON_AddStringToObject(job, "ranks_from", from);
    int nhosts = 0, failed = 0;
    for (int r = 0; r < n; r++) {
        uint64_t h = fnv(js(recs[rows[r]], "host"));
        if (!u64map_get(&hosts, 0, h)) {
            if (u64map_put(&hosts, 0, h, 1))
                goto oom;
            nhosts++;
        }
        failed += ju(recs[rows[r]], "ooms") > 0;
    }
    cJSON_AddNumberToObject(job, "hosts", nhosts);
    cJSON_AddNumberToObject(job, "failed", failed);

    /* peak reserved over the ranks: the median row is the (n-1)/2-th by
     * peak (ties by row); the highest the first row of the largest */
    qsort_r(byp, (size_t)n, sizeof *byp, cmp_peak_row, peaks);
    int hi = 0, lo = 0, md = n ? byp[(n - 1) / 2] : 0;
    for (int r = 1; r < n; r++) {
        if (peaks[r] > peaks[hi])
            hi = r;
        if (peaks[r] < peaks[lo])
            lo = r;
    }
    cJSON *pr = cJSON_AddObjectToObject(job, "peak_reserved");
    if (n) {
        cJSON_AddItemToObject(pr, "min", row_peak(recs, rows, rr, lo, peaks[lo]));
        cJSON_AddItemToObject(pr, "median", row_peak(recs, rows, rr, md, peaks[md]));
        cJSON_AddItemToObject(pr, "max", row_peak(recs, rows, rr, hi, peaks[hi]));
    }
    /* the imbalance's layer: allocated when every rank has allocator
     * blocks (what the program holds: an allocator's reserved memory is
     * often the same on every rank, its cache filling the segments),
     * else reserved; the same order rules */
    int by_alloc = n > 0;
    for (int r = 0; r < n; r++)
        by_alloc &= !jnull(recs[rows[r]], "peak_allocated");
    if (by_alloc) {
        for (int r = 0; r < n; r++) {
            peaks[r] = ju(recs[rows[r]], "peak_allocated");
            byp[r] = r;
        }
        qsort_r(byp, (size_t)n, sizeof *byp, cmp_peak_row, peaks);
        md = byp[(n - 1) / 2];
        hi = 0;
        for (int r = 1; r < n; r++)
            if (peaks[r] > peaks[hi])
                hi = r;
    }

    /* the rank table */
    cJSON *ra = cJSON_AddArrayToObject(job, "ranks");
    for (int r = 0; r < n; r++) {
        const cJSON *x = recs[rows[r]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", js(x, "file"));
        cJSON_AddItemToObject(o, "rank", rank_json(rr, r));
        cJSON_AddStringToObject(o, "host", js(x, "host"));
        copy_member(o, x, "pid");
        copy_member(o, x, "device");
        copy_member(o, x, "device_name");
        copy_member(o, x, "mode");
        copy_member(o, x, "events");
        copy_member(o, x, "peak_reserved");
        copy_member(o, x, "peak_allocated");
        copy_member(o, x, "ooms");
        const cJSON *ts = jo(x, "top_site");
        if (jnull(x, "top_site")) {
            cJSON_AddNullToObject(o, "top_site");
            cJSON_AddNullToObject(o, "top_site_peak");
        } else {
            cJSON_AddStringToObject(o, "top_site", js(ts, "label"));
            msnap_json_u64(o, "top_site_peak", ju(ts, "peak"));
        }
        cJSON_AddItemToArray(ra, o);
    }

    /* sites across the ranks */
    sc.complete = complete;
    sc.nrows = n;
    for (int r = 0; r < n; r++)
        sc.ncomplete += complete[r];
    if (collect_sites(&sc, recs, rows))
        goto oom;
    pick = malloc((sc.nst + 1) * sizeof *pick);
    if (!pick)
        goto oom;

    /* imbalance: the highest rank's sites most above their medians */
    if (n < 2) {
        cJSON_AddNullToObject(job, "imbalance");
    } else {
        cJSON *im = cJSON_AddObjectToObject(job, "imbalance");
        cJSON_AddStringToObject(im, "layer", by_alloc ? "allocated" : "reserved");
        cJSON_AddItemToObject(im, "highest", row_peak(recs, rows, rr, hi, peaks[hi]));
        cJSON_AddItemToObject(im, "median", row_peak(recs, rows, rr, md, peaks[md]));
        msnap_json_u64(im, "above_median", peaks[hi] - peaks[md]);
        if (peaks[md])
            cJSON_AddNumberToObject(im, "above_median_pct",
                                    100.0 * (double)(peaks[hi] - peaks[md]) / (double)peaks[md]);
        else
            cJSON_AddNullToObject(im, "above_median_pct");
        size_t k = 0;
        uint64_t dif[JOB_SITES + 1];
        uint32_t idx[JOB_SITES + 1];
        for (size_t i = 0; i < sc.nst; i++) {
            int known;
            uint64_t p = site_peak_at(&sc, (uint32_t)i, hi, &known);
            if (!known || p <= sc.st[i].median)
                continue;
            /* insertion into the top JOB_SHOWN, largest difference first
             * (ties by label) */
            uint64_t d = p - sc.st[i].median;
            size_t j = k < JOB_SHOWN ? k++ : JOB_SHOWN;
            while (j > 0 && (dif[j - 1] < d ||
                             (dif[j - 1] == d && strcmp(sc.st[idx[j - 1]].label,
                                                        sc.st[i].label) > 0))) {
                if (j < JOB_SHOWN) {
                    dif[j] = dif[j - 1];
                    idx[j] = idx[j - 1];
                }
                j--;
            }
            if (j < JOB_SHOWN) {
                dif[j] = d;
                idx[j] = (uint32_t)i;
            }
        }
        cJSON *sa = cJSON_AddArrayToObject(im, "sites");
        for (size_t i = 0; i < k; i++) {
            int known;
            const site_stat *t = &sc.st[idx[i]];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "label", t->label);
            msnap_json_u64(o, "peak", site_peak_at(&sc, idx[i], hi, &known));
            msnap_json_u64(o, "median", t->median);
            msnap_json_u64(o, "difference", dif[i]);
            cJSON_AddItemToArray(sa, o);
        }
    }

    /* divergent sites: the site x rank table */
    cJSON *dv = cJSON_AddObjectToObject(job, "divergent_sites");
    cJSON *dr = cJSON_AddArrayToObject(dv, "ranks");
    for (int r = 0; r < n; r++)
        cJSON_AddItemToArray(dr, rank_json(rr, r));
    size_t np = 0;
    for (size_t i = 0; i < sc.nst; i++)
        if (sc.st[i].spread)
            pick[np++] = (uint32_t)i;
    qsort_r(pick, np, sizeof *pick, cmp_spread, &sc);
    cJSON *ds = cJSON_AddArrayToObject(dv, "sites");
    for (size_t i = 0; i < np && i < JOB_TABLE_SITES; i++) {
        const site_stat *t = &sc.st[pick[i]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "label", t->label);
        msnap_json_u64(o, "min", t->min);
        cJSON_AddItemToObject(o, "min_rank", t->min_row >= 0 ? rank_json(rr, t->min_row)
                                                             : cJSON_CreateNull());
        cJSON_AddStringToObject(o, "min_file",
                                t->min_row >= 0 ? js(recs[rows[t->min_row]], "file") : "");
        msnap_json_u64(o, "median", t->median);
        msnap_json_u64(o, "max", t->max);
        cJSON_AddItemToObject(o, "max_rank", t->max_row >= 0 ? rank_json(rr, t->max_row)
                                                             : cJSON_CreateNull());
        cJSON_AddStringToObject(o, "max_file",
                                t->max_row >= 0 ? js(recs[rows[t->max_row]], "file") : "");
        msnap_json_u64(o, "spread", t->spread);
        cJSON_AddNumberToObject(o, "ranks_with", t->with);
        cJSON *pa = cJSON_AddArrayToObject(o, "peaks");
        for (int r = 0; r < n; r++) {
            int known;
            uint64_t p = site_peak_at(&sc, pick[i], r, &known);
            if (known) {
                char num[24];
                snprintf(num, sizeof num, "%" PRIu64, p);
                cJSON_AddItemToArray(pa, cJSON_CreateRaw(num));
            } else {
                cJSON_AddItemToArray(pa, cJSON_CreateNull());
            }
        }
        cJSON_AddItemToArray(ds, o);
    }

    /* failures, the first to fail first */
    int nf = 0;
    for (int r = 0; r < n; r++)
        if (ju(recs[rows[r]], "ooms") && !jnull(recs[rows[r]], "oom"))
            byp[nf++] = r;
    wall_ctx wc = {recs, rows};
    qsort_r(byp, (size_t)nf, sizeof *byp, cmp_wall, &wc);
    cJSON *fa = cJSON_AddArrayToObject(job, "failures");
    for (int i = 0; i < nf; i++) {
        const cJSON *x = recs[rows[byp[i]]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", js(x, "file"));
        cJSON_AddItemToObject(o, "rank", rank_json(rr, byp[i]));
        cJSON_AddStringToObject(o, "host", js(x, "host"));
        copy_member(o, x, "ooms");
        copy_member(o, x, "peak_reserved");
        copy_member(o, x, "oom");
        cJSON_AddItemToArray(fa, o);
    }

    if (add_alignment(job, recs, rows, rr, n))
        goto oom;

    /* windows: ring dumps and files cut off */
    cJSON *wo = cJSON_AddObjectToObject(job, "windows");
    int nring = 0, ncut = 0;
    cJSON *wf = cJSON_CreateArray();
    for (int r = 0; r < n; r++) {
        const cJSON *x = recs[rows[r]];
        int ring = !strcmp(js(x, "mode"), "ring"), cut = cJSON_IsTrue(jo(x, "truncated"));
        nring += ring;
        ncut += cut;
        if (!ring && !cut)
            continue;
        const cJSON *w = jo(x, "window");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", js(x, "file"));
        cJSON_AddItemToObject(o, "rank", rank_json(rr, r));
        cJSON_AddStringToObject(o, "mode", js(x, "mode"));
        cJSON_AddBoolToObject(o, "truncated", cut);
        copy_member(o, w, "first_event_t_ns");
        copy_member(o, w, "last_t_ns");
        copy_member(o, w, "dropped");
        copy_member(o, w, "step");
        cJSON_AddItemToArray(wf, o);
    }
    cJSON_AddNumberToObject(wo, "ring", nring);
    cJSON_AddNumberToObject(wo, "truncated", ncut);
    cJSON_AddItemToObject(wo, "files", wf);
    goto done;
oom:
    cJSON_Delete(job);
    job = NULL;
done:
    free(pick);
    free(sc.st);
    free(sc.ent);
    u64map_free(&hosts);
    free(rk);
    free(rr);
    free(order);
    free(rows);
    free(byp);
    free(peaks);
    free(complete);
    return job;
}

/* ---- records as text ------------------------------------------------------
 * cJSON_Parse turns every number into a double, exact only below 2^53 (a
 * wall-clock time in ns is not): records that traveled as text are parsed
 * here instead, integers kept as raw numbers, as job.c wrote them. */

typedef struct jp {
    const char *s;
    int depth;
} jp;

static void jp_space(jp *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
        p->s++;
}

static cJSON *jp_value(jp *p);

/* A string token: its end found here, its text decoded by cJSON. */
static cJSON *jp_string(jp *p)
{
    const char *b = p->s++;
    while (*p->s && *p->s != '"') {
        if (*p->s == '\\' && p->s[1])
            p->s++;
        p->s++;
    }
    if (*p->s != '"')
        return NULL;
    p->s++;
    return cJSON_ParseWithLength(b, (size_t)(p->s - b));
}

static cJSON *jp_value(jp *p)
{
    jp_space(p);
    if (++p->depth > 64)
        return NULL;
    cJSON *v = NULL;
    const char *c = p->s;
    if (*c == '"') {
        v = jp_string(p);
    } else if (*c == '{' || *c == '[') {
        int obj = *c == '{';
        v = obj ? cJSON_CreateObject() : cJSON_CreateArray();
        p->s++;
        jp_space(p);
        if (*p->s == (obj ? '}' : ']')) {
            p->s++;
        } else {
            for (;;) {
                cJSON *key = NULL;
                jp_space(p);
                if (obj) {
                    if (*p->s != '"' || !(key = jp_string(p)))
                        goto bad;
                    jp_space(p);
                    if (*p->s++ != ':') {
                        cJSON_Delete(key);
                        goto bad;
                    }
                }
                cJSON *x = jp_value(p);
                if (!x) {
                    cJSON_Delete(key);
                    goto bad;
                }
                if (obj) {
                    cJSON_AddItemToObject(v, key->valuestring, x);
                    cJSON_Delete(key);
                } else {
                    cJSON_AddItemToArray(v, x);
                }
                jp_space(p);
                if (*p->s == ',') {
                    p->s++;
                    continue;
                }
                if (*p->s++ != (obj ? '}' : ']'))
                    goto bad;
                break;
            }
        }
    } else if (!strncmp(c, "true", 4)) {
        v = cJSON_CreateTrue();
        p->s += 4;
    } else if (!strncmp(c, "false", 5)) {
        v = cJSON_CreateFalse();
        p->s += 5;
    } else if (!strncmp(c, "null", 4)) {
        v = cJSON_CreateNull();
        p->s += 4;
    } else if (*c == '-' || (*c >= '0' && *c <= '9')) {
        const char *e = c + (*c == '-');
        int integer = 1;
        while ((*e >= '0' && *e <= '9') || *e == '.' || *e == 'e' || *e == 'E' ||
               *e == '+' || *e == '-') {
            if (!(*e >= '0' && *e <= '9'))
                integer = 0;
            e++;
        }
        char num[64];
        if (e - c >= (long)sizeof num)
            return NULL;
        memcpy(num, c, (size_t)(e - c));
        num[e - c] = '\0';
        v = integer ? cJSON_CreateRaw(num) : cJSON_CreateNumber(strtod(num, NULL));
        p->s = e;
    }
    p->depth--;
    return v;
bad:
    cJSON_Delete(v);
    return NULL;
}

cJSON *job_parse(const char *text)
{
    jp p = {text, 0};
    cJSON *v = jp_value(&p);
    jp_space(&p);
    if (v && *p.s) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

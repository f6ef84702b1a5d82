/* The job view's map (one file to its rank record) and reduce (the records
 * to the job object); job.h says what each holds.
 *
 * The map is summary's read (report.h msnap_summarize, without the
 * breakdown's two replays) with one more observer, the steps: the
 * outermost NVTX range of each thread and the NVTX marks, kept as times
 * and string ids (about 24 bytes a range), so that the end can say in
 * which step the peak, the first OOM and a ring dump's window fell.  The
 * record is then cut from summary's result and the findings model (the
 * OOM's site label), so every figure is summary's own.
 *
 * The reduce never reads a file.  Sites are matched across ranks by their
 * label (label.c: the same line of code has the same label in every
 * rank's file); per site it keeps only the ranks that list it, so its
 * work and memory are O(records x JOB_SITES), whatever the number of
 * distinct sites.
 */
#include "job.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "model.h"
#include "report.h"
#include "util/grow.h"
#include "util/u64map.h"
#include "result_json.h"

#define FRAMES_KEPT 4          /* of an OOM's program frames */
#define STEP_TEXT 96

/* ---- reading a result object ------------------------------------------- */

/* A copy of member key of from into to (null when absent). */
static void copy_member(cJSON *to, const cJSON *from, const char *key)
{
    const cJSON *v = jo(from, key);
    cJSON_AddItemToObject(to, key, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
}

/* ---- the steps: an observer of the read -------------------------------- */

typedef struct step_range {
    uint64_t t0, t1;           /* t1 UINT64_MAX: still open at the end */
    uint32_t str;
} step_range;

typedef struct step_mark {
    uint64_t t;
    uint32_t str;
} step_mark;

typedef struct job_read {
    step_range *ranges;
    size_t nranges, cap_ranges;
    step_mark *marks;
    size_t nmarks, cap_marks;
    u64map depth;              /* tid -> NVTX depth (tag 0), open range index + 1 (tag 1) */
    uint64_t t_first, t_max;
    int have_first;
    const an_file *f;
    cJSON *rec;                /* built by the done hook */
    int err;
} job_read;

static int on_record(void *ctx, an_file *f, const msnap_record *r)
{
    job_read *j = ctx;
    (void)f;
    if (r->type != MSNAP_REC_EVENT)
        return 0;
    const msnap_event *e = &r->u.event;
    if (!j->have_first) {
        j->t_first = e->t_ns;
        j->have_first = 1;
    }
    if (e->t_ns > j->t_max)
        j->t_max = e->t_ns;
    if (e->action == MSNAP_A_NVTX_MARK) {
        if (msnap_grow((void **)&j->marks, &j->cap_marks, j->nmarks, sizeof *j->marks))
            return -1;
        j->marks[j->nmarks++] = (step_mark){e->t_ns, (uint32_t)e->aux};
        return 0;
    }
    if (e->action != MSNAP_A_NVTX_PUSH && e->action != MSNAP_A_NVTX_POP)
        return 0;
    uint64_t *d = u64map_get(&j->depth, 0, e->tid);
    uint64_t depth = d ? *d : 0;
    if (e->action == MSNAP_A_NVTX_PUSH) {
        if (depth == 0) {
            if (msnap_grow((void **)&j->ranges, &j->cap_ranges, j->nranges, sizeof *j->ranges) ||
                u64map_put(&j->depth, 1, e->tid, j->nranges + 1))
                return -1;
            j->ranges[j->nranges++] = (step_range){e->t_ns, UINT64_MAX, (uint32_t)e->aux};
        }
        return u64map_put(&j->depth, 0, e->tid, depth + 1);
    }
    if (depth == 0)
        return 0;            /* a pop of a range opened before the window */
    if (depth == 1) {
        uint64_t *open = u64map_get(&j->depth, 1, e->tid);
        if (open && *open)
            j->ranges[*open - 1].t1 = e->t_ns;
    }
    return u64map_put(&j->depth, 0, e->tid, depth - 1);
}

/* The step at time t as a new object, or a JSON null (see job.h). */
static cJSON *step_at(const job_read *j, uint64_t t)
{
    const sm_symtab *tab = &j->f->tab;
    char text[STEP_TEXT + 8];
    uint64_t at = 0;
    int found = 0;
    /* the latest outermost range started at or before t that holds t
     * (threads' ranges may overlap: a few back are looked at) */
    size_t lo = 0, hi = j->nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->ranges[mid].t0 <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
        const step_range *r = &j->ranges[i - 1];
        if (r->t1 >= t) {
            snprintf(text, sizeof text, "%.*s", STEP_TEXT, sm_symtab_str(tab, r->str));
            at = r->t0;
            found = 1;
            break;
        }
    }
    if (!found) {
        lo = 0, hi = j->nmarks;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (j->marks[mid].t <= t)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo) {
            snprintf(text, sizeof text, "after %.*s", STEP_TEXT,
                     sm_symtab_str(tab, j->marks[lo - 1].str));
            at = j->marks[lo - 1].t;
            found = 2;
        }
    }
    if (!found)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "text", text);
    double v;
    char word[32] = "";
    const char *body = found == 2 ? text + 6 : text;
    if (sm_mark_value(body, "", &v, word, sizeof word) == 0 && v >= 0 && v < 9e15 &&
        v == (double)(long long)v) {
        cJSON_AddNumberToObject(o, "number", v);
        cJSON_AddStringToObject(o, "word", word);
    } else {
        cJSON_AddNullToObject(o, "number");
        cJSON_AddNullToObject(o, "word");
    }
    msnap_json_u64(o, "t_ns", at);
    return o;
}

static int on_attach(void *ctx, an_file *f)
{
    job_read *j = ctx;
    j->f = f;
    an_observer o = {.ctx = j, .record = on_record};
    return an_observe(f, &o);
}

/* ---- the rank record ------------------------------------------------------ */

/* Adds a site {label, peak} unless one of that label is listed (the
 * blocks a call made and the segment an allocator reserved for them share
 * one).  Returns 0 when added or already there, 1 when the list is full. */
static int add_site(cJSON *sites, const cJSON *site)
{
    const char *l = js(site, "label");
    const cJSON *x;
    cJSON_ArrayForEach(x, sites)
        if (!strcmp(js(x, "label"), l))
            return 0;
    if (cJSON_GetArraySize(sites) >= JOB_SITES)
        return 1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", l);
    msnap_json_u64(o, "peak", ju(site, "peak"));
    cJSON_AddItemToArray(sites, o);
    return 0;
}

/* The first OOM as the record keeps it (summary's ooms[0] and oom_story[0]
 * together), with its site's label and the step. */
static cJSON *first_oom(const job_read *j, const sm_model *m, const cJSON *root)
{
    const cJSON *x = cJSON_GetArrayItem(jo(root, "ooms"), 0);
    const cJSON *st = cJSON_GetArrayItem(jo(jo(root, "findings"), "oom_story"), 0);
    if (!x || !ju(root, "oom_count"))
        return cJSON_CreateNull();
    /* the first "oom" action of the list (alloc errors come in it too) */
    const cJSON *y;
    cJSON_ArrayForEach(y, jo(root, "ooms"))
        if (!strcmp(js(y, "action"), "oom")) {
            x = y;
            break;
        }
    cJSON *o = cJSON_CreateObject();
    uint64_t t = ju(x, "t_ns");
    msnap_json_u64(o, "t_ns", t);
    msnap_json_u64(o, "wall_ns", ju(jo(root, "header"), "t0_unix_ns") + t);
    cJSON_AddNumberToObject(o, "device", ji(x, "device"));
    msnap_json_u64(o, "requested", ju(x, "requested"));
    msnap_json_u64(o, "device_free", ju(x, "device_free"));
    msnap_json_u64(o, "device_total", ju(x, "device_total"));
    cJSON_AddStringToObject(o, "api", js(x, "api"));
    /* the story of the same OOM (findings: the first oom of the file) */
    if (st && ju(st, "t_ns") == t) {
        copy_member(o, st, "allocated");
        copy_member(o, st, "reserved");
        copy_member(o, st, "free_inside_reserved");
        copy_member(o, st, "largest_free_block");
        cJSON_AddStringToObject(o, "verdict", js(st, "verdict"));
    } else {
        cJSON_AddNullToObject(o, "allocated");
        cJSON_AddNullToObject(o, "reserved");
        cJSON_AddNullToObject(o, "free_inside_reserved");
        cJSON_AddNullToObject(o, "largest_free_block");
        cJSON_AddNullToObject(o, "verdict");
    }
    uint32_t stack = (uint32_t)ju(x, "stack");
    if (stack) {
        char lab[SM_LABEL_MAX];
        sm_site_label(sm_labels_of(m), stack, lab, sizeof lab);
        cJSON_AddStringToObject(o, "site", lab);
    } else {
        cJSON_AddNullToObject(o, "site");
    }
    cJSON *fr = cJSON_AddArrayToObject(o, "frames");
    const cJSON *all = jo(x, "frames");
    int depth = cJSON_GetArraySize(all), skip = ji(x, "runtime_frames");
    if (skip < 0 || skip >= depth)
        skip = 0;
    for (int i = skip; i < depth && i < skip + FRAMES_KEPT; i++)
        cJSON_AddItemToArray(fr, cJSON_CreateString(cJSON_GetArrayItem(all, i)->valuestring));
    cJSON_AddItemToObject(o, "step", step_at(j, t));
    return o;
}

static int on_done(void *ctx, const an_file *f, const sm_model *m, cJSON *root)
{
    job_read *j = ctx;
    cJSON *r = cJSON_CreateObject();
    if (!r)
        return -1;
    const cJSON *h = jo(root, "header");
    cJSON_AddStringToObject(r, "file", js(root, "file"));
    /* the header's rank when the recorder wrote one (RANK and the like at its
     * start), else null: the reduce names the rank from the file names */
    const cJSON *hr = jo(h, "rank");
    if (cJSON_IsNumber(hr) && hr->valuedouble >= 0)
        cJSON_AddNumberToObject(r, "rank", hr->valuedouble);
    else
        cJSON_AddNullToObject(r, "rank");
    cJSON_AddStringToObject(r, "host", js(h, "host"));
    msnap_json_u64(r, "pid", ju(h, "pid"));
    cJSON_AddStringToObject(r, "mode", js(h, "mode"));
    cJSON_AddStringToObject(r, "version", js(root, "version"));

    /* the device: the one whose reserved memory peaked highest */
    int dev = -1;
    uint64_t best = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, jo(root, "devices")) {
        uint64_t p = ju(jo(d, "reserved"), "peak");
        if (ji(d, "device") >= 0 && (dev < 0 || p > best)) {
            dev = ji(d, "device");
            best = p;
        }
    }
    cJSON_AddNumberToObject(r, "device", dev);
    const char *dname = "";
    uint64_t dtotal = 0;
    cJSON_ArrayForEach(d, jo(h, "devices"))
        if (ji(d, "index") == dev) {
            dname = js(d, "name");
            dtotal = ju(d, "total");
        }
    for (int i = 0; i < f->ndev && !*dname; i++)
        if (f->dev[i].index == dev) {
            dname = f->dev[i].name;
            dtotal = f->dev[i].total;
        }
    cJSON_AddStringToObject(r, "device_name", dname);
    msnap_json_u64(r, "device_total", dtotal);

    msnap_json_u64(r, "events", ju(jo(root, "events"), "total"));
    msnap_json_u64(r, "duration_ns", ju(h, "duration_ns"));
    cJSON_AddBoolToObject(r, "truncated", cJSON_IsTrue(jo(root, "truncated")));
    if (jnull(root, "trailer"))
        cJSON_AddNullToObject(r, "trailer");
    else
        cJSON_AddStringToObject(r, "trailer", js(jo(root, "trailer"), "reason"));

    const cJSON *p = jo(root, "process");
    msnap_json_u64(r, "peak_reserved", ju(jo(p, "reserved"), "peak"));
    msnap_json_u64(r, "peak_reserved_t_ns", ju(jo(p, "reserved"), "peak_t_ns"));
    if (jnull(p, "allocated")) {
        cJSON_AddNullToObject(r, "peak_allocated");
        cJSON_AddNullToObject(r, "peak_allocated_t_ns");
    } else {
        msnap_json_u64(r, "peak_allocated", ju(jo(p, "allocated"), "peak"));
        msnap_json_u64(r, "peak_allocated_t_ns", ju(jo(p, "allocated"), "peak_t_ns"));
    }
    msnap_json_u64(r, "ooms", ju(root, "oom_count"));
    msnap_json_u64(r, "alloc_errors", ju(root, "alloc_error_count"));

    /* sites: the allocated layer's first (what fills an allocator's
     * segments), then the reserved layer's; the top site is the first */
    const cJSON *ts = jo(root, "top_sites");
    const char *layers[] = {"allocated", "reserved"};
    cJSON *sites = cJSON_CreateArray();
    int full = 0;
    const cJSON *top = NULL;
    const char *top_layer = NULL;
    for (int k = 0; k < 2; k++) {
        const cJSON *s;
        cJSON_ArrayForEach(s, jo(ts, layers[k])) {
            if (!top) {
                top = s;
                top_layer = layers[k];
            }
            full |= add_site(sites, s);
        }
    }
    if (top) {
        cJSON *o = cJSON_AddObjectToObject(r, "top_site");
        cJSON_AddStringToObject(o, "label", js(top, "label"));
        cJSON_AddStringToObject(o, "layer", top_layer);
        msnap_json_u64(o, "peak", ju(top, "peak"));
    } else {
        cJSON_AddNullToObject(r, "top_site");
    }
    cJSON_AddItemToObject(r, "sites", sites);
    /* complete: nothing was left off here, summary listed fewer than it
     * was asked for in each layer (so it listed them all), and the file
     * is not a ring dump (whose sites are its window's: a site of the
     * whole run, live before the window, is not among them) */
    int complete = !full && strcmp(js(h, "mode"), "ring") != 0;
    for (int k = 0; k < 2; k++)
        complete &= cJSON_GetArraySize(jo(ts, layers[k])) < JOB_SITES;
    cJSON_AddBoolToObject(r, "sites_complete", complete);

    cJSON_AddItemToObject(r, "oom", first_oom(j, m, root));

    cJSON *w = cJSON_AddObjectToObject(r, "window");
    if (j->have_first)
        msnap_json_u64(w, "first_event_t_ns", j->t_first);
    else
        cJSON_AddNullToObject(w, "first_event_t_ns");
    msnap_json_u64(w, "last_t_ns", ju(h, "duration_ns"));
    msnap_json_u64(w, "dropped", jnull(root, "trailer") ? 0 : ju(jo(root, "trailer"), "dropped"));
    if (jo(root, "state"))
        msnap_json_u64(w, "state_t_ns", ju(jo(root, "state"), "t_ns"));
    else
        cJSON_AddNullToObject(w, "state_t_ns");
    cJSON_AddItemToObject(w, "step", j->have_first ? step_at(j, j->t_first)
                                                   : cJSON_CreateNull());

    cJSON *so = cJSON_AddObjectToObject(r, "steps");
    cJSON_AddNumberToObject(so, "ranges", (double)j->nranges);
    cJSON_AddNumberToObject(so, "marks", (double)j->nmarks);
    /* the allocated layer's peak where there is one: an allocator's
     * reserved memory often peaks once, when its segments are made */
    const cJSON *pk = jnull(p, "allocated") ? jo(p, "reserved") : jo(p, "allocated");
    cJSON_AddItemToObject(so, "at_peak", step_at(j, ju(pk, "peak_t_ns")));
    j->rec = r;
    return 0;
}

int job_read_file(const char *path, const cat_rules *rules, cJSON **rec, char *err,
                  size_t errlen)
{
    job_read j = {0};
    msnap_summary_opts o = {.top = JOB_SITES, .rules = rules, .no_breakdown = 1,
                            .attach = on_attach, .done = on_done, .ctx = &j};
    cJSON *root = NULL;
    *rec = NULL;
    int rc = msnap_summarize(path, &o, &root, NULL, err, errlen);
    cJSON_Delete(root);
    free(j.ranges);
    free(j.marks);
    u64map_free(&j.depth);
    if (rc == 2) {
        cJSON_Delete(j.rec);
        return 2;
    }
    *rec = j.rec;
    return rc;
}

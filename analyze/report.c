/* The summary's result: one snapshot read once (analysis.h) by the counts
 * (summary.h), the findings model (model.h) and the breakdown
 * (breakdown.h), gathered into the one object that `memsnap summary
 * --json` prints, that its text is printed from (cli/cmd_summary.c), and
 * that the Python API returns (memsnap.Snapshot.summary()).  Exact byte
 * counts are JSON integers written as raw numbers (cJSON's doubles are
 * exact only below 2^53).
 */
#include "report.h"
#include "pools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atpeak.h"
#include "findings.h"
#include "model.h"
#include "summary.h"

/* The header's argv joined with spaces into buf. */
static const char *command_line(const summary *s, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->argc && n + 1 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? " " : "",
                              s->argv[i]);
    return buf;
}

/* ---- text --------------------------------------------------------------- */

/* The layers whose sites are ranked, each on its own (state.h). */
static const int site_layers[] = {MSNAP_LAYER_RESERVED, MSNAP_LAYER_ALLOCATED,
                                  MSNAP_LAYER_PINNED};

/* Whether a device slot gets a section: a device of the file, or the
 * unknown slot when memory other than pinned host memory lives there. */
static int device_shown(const summary *s, int d)
{
    if (d != MSNAP_ST_HOST)
        return s->st->seen[d];
    for (int l = 0; l < MSNAP_LAYER_COUNT; l++)
        if (l != MSNAP_LAYER_PINNED && msnap_state_peak(s->st, d, l))
            return 1;
    return 0;
}

/* Frame i of a stack as the summary prints it, from the file's tables that
 * the findings model keeps (analyze/symtab.h; a size-0 last module record
 * reaches upwards).  Returns the stack's depth, 0 when unknown. */
static int frame(const sm_model *m, uint32_t stack, int i, char *buf,
                 size_t cap)
{
    return sm_symtab_frame(sm_symtab_of(m), stack, i, SM_MOD_OPEN_LAST, buf,
                           cap);
}

/* ---- JSON --------------------------------------------------------------- */

/* Adds key: v as an exact JSON integer (cJSON numbers are doubles, which
 * are exact only below 2^53: byte counts are, t0_unix_ns is not). */
void msnap_json_u64(cJSON *o, const char *key, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON_AddRawToObject(o, key, num);
}

/* {"peak":..,"peak_t_ns":..,"final":..} */
static cJSON *json_level(msnap_level lv)
{
    const msnap_level *l = &lv;
    cJSON *o = cJSON_CreateObject();
    msnap_json_u64(o, "peak", l->peak);
    msnap_json_u64(o, "peak_t_ns", l->peak_t);
    msnap_json_u64(o, "final", l->cur);
    return o;
}

/* ["frame", ...] for a stack (at most TOP_FRAMES... all frames in JSON). */
static cJSON *json_frames(const sm_model *m, uint32_t stack)
{
    cJSON *a = cJSON_CreateArray();
    char f[1024];
    int depth = stack ? frame(m, stack, 0, f, sizeof f) : 0;
    for (int i = 0; i < depth; i++) {
        frame(m, stack, i, f, sizeof f);
        cJSON_AddItemToArray(a, cJSON_CreateString(f));
    }
    return a;
}

/* {"action":n,...} / {"api":n,...} for the non-zero counts. */
static cJSON *json_counts(const uint64_t *v, int n, const char *(*name)(int))
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < n; i++)
        if (v[i])
            msnap_json_u64(o, name(i), v[i]);
    return o;
}

/* One failure entry. */
static cJSON *json_fail(const sm_model *m, const sum_fail *f, int is_free)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", msnap_action_name(f->action));
    msnap_json_u64(o, "t_ns", f->t);
    cJSON_AddNumberToObject(o, "device", f->device);
    if (is_free) {
        msnap_json_u64(o, "addr", f->addr);
    } else {
        msnap_json_u64(o, "requested", f->size);
        msnap_json_u64(o, "device_free", f->dev_free);
        msnap_json_u64(o, "device_total", f->dev_total);
    }
    cJSON_AddStringToObject(o, "api", msnap_api_name(f->api));
    cJSON_AddNumberToObject(o, "result", f->result);
    cJSON_AddNumberToObject(o, "stack", f->stack);
    char lab[SM_LABEL_MAX];
    sm_site_label(sm_labels_of(m), f->stack, lab, sizeof lab);
    cJSON_AddStringToObject(o, "label", lab);
    /* the memory runtime's frames lead; listings start after them */
    cJSON_AddNumberToObject(o, "runtime_frames", sm_runtime_frames(sm_labels_of(m), f->stack));
    cJSON_AddItemToObject(o, "frames", json_frames(m, f->stack));
    return o;
}


/* Adds "layer": [sites by peak] (null for the allocated layer when the
 * file has no blocks). */
static _Thread_local const sm_model *sort_groups_model; /* qsort has no context argument; one per thread (-j) */

static int cmp_group(const void *a, const void *b)
{
    size_t n;
    const sm_group *g = sm_groups(sort_groups_model, &n);
    const sm_group *x = &g[*(const uint32_t *)a], *y = &g[*(const uint32_t *)b];
    if (x->peak != y->peak)
        return x->peak > y->peak ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static void json_sites(cJSON *ts, const summary *s, const sm_model *m,
                       int layer, int top)
{
    const char *name = msnap_layer_name(layer);
    if (layer == MSNAP_LAYER_ALLOCATED && !s->st->allocated_seen) {
        cJSON_AddNullToObject(ts, name);
        return;
    }
    cJSON *ta = cJSON_AddArrayToObject(ts, name);
    size_t ng, n = 0;
    const sm_group *g = sm_groups(m, &ng);
    uint32_t *order = malloc((ng + 1) * sizeof *order);
    if (!order)
        return;
    /* a PyTorch run's reserved layer: its segments are what the allocated
     * layer lists; the other libraries' driver memory is listed here */
    int torch_res = s->torch_blocks && layer == MSNAP_LAYER_RESERVED;
    for (size_t i = 0; i < ng; i++) {
        char lib[128];
        if (g[i].layer != layer || !g[i].count)
            continue;
        if (torch_res && !strcmp(cat_library_stack(sm_symtab_of(m), g[i].stack, lib, sizeof lib),
                                 CAT_LIB_TORCH))
            continue;
        order[n++] = (uint32_t)i;
    }
    sort_groups_model = m;
    qsort(order, n, sizeof *order, cmp_group);
    for (size_t i = 0; i < n && (int)i < top; i++) {
        const sm_group *x = &g[order[i]];
        char lab[SM_LABEL_MAX];
        sm_site_label(sm_labels_of(m), x->stack, lab, sizeof lab);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", x->stack);
        cJSON_AddStringToObject(o, "label", lab);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(x->kind));
        cJSON_AddNumberToObject(o, "device", x->device == MSNAP_ST_HOST ? -1 : x->device);
        msnap_json_u64(o, "peak", x->peak);
        msnap_json_u64(o, "peak_t_ns", x->peak_t);
        msnap_json_u64(o, "count", x->count);
        msnap_json_u64(o, "bytes_total", x->bytes);
        msnap_json_u64(o, "live_at_end", x->live);
        msnap_json_u64(o, "live_count_at_end", x->live_count);
        cJSON_AddNumberToObject(o, "stacks", x->nmembers);
        if (layer != MSNAP_LAYER_ALLOCATED) {
            char lib[128];
            cJSON_AddStringToObject(o, "library",
                                    cat_library_stack(sm_symtab_of(m), x->stack, lib, sizeof lib));
        }
        cJSON_AddNumberToObject(o, "runtime_frames", sm_runtime_frames(sm_labels_of(m), x->stack));
        cJSON_AddItemToObject(o, "frames", json_frames(m, x->stack));
        cJSON_AddItemToArray(ta, o);
    }
    free(order);
}

/* ---- findings (analyze/model.h) --------------------------------------- */

static const char *at_name(int at)
{
    switch (at) {
    case SM_AT_OOM: return "oom";
    case SM_AT_PEAK: return "peak";
    case SM_AT_TIME: return "time";
    default: return "end";
    }
}

/* The findings as a JSON object. */
static cJSON *json_findings(sm_model *m)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "stacked_layer",
                            sm_blocks_seen(m) ? "blocks" : "reserved");
    size_t nleaks, nsites;
    uint64_t nvalleys, f0, f1;
    const sm_leak *leaks = sm_leaks(m, &nleaks, &nvalleys);
    const sm_site *sites = sm_sites(m, &nsites);
    sm_floor(m, &f0, &f1);
    msnap_json_u64(f, "valleys", nvalleys);
    cJSON *fl = cJSON_AddObjectToObject(f, "floor");
    msnap_json_u64(fl, "first", f0);
    msnap_json_u64(fl, "last", f1);
    cJSON *la = cJSON_AddArrayToObject(f, "leak_suspects");
    for (size_t i = 0; i < nleaks; i++) {
        const sm_site *st = &sites[leaks[i].site];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", st->stack);
        char lab[SM_LABEL_MAX];
        sm_site_label(sm_labels_of(m), st->stack, lab, sizeof lab);
        cJSON_AddStringToObject(o, "label", lab);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(st->kind));
        cJSON_AddNumberToObject(o, "device", st->device == SM_DEV_UNKNOWN ? -1 : st->device);
        msnap_json_u64(o, "first_valley_bytes", leaks[i].first);
        msnap_json_u64(o, "last_valley_bytes", leaks[i].last);
        msnap_json_u64(o, "rises", leaks[i].rises);
        msnap_json_u64(o, "falls", leaks[i].falls);
        msnap_json_u64(o, "live_at_end", st->live);
        cJSON_AddNumberToObject(o, "runtime_frames", sm_runtime_frames(sm_labels_of(m), st->stack));
        cJSON_AddItemToObject(o, "frames", json_frames(m, st->stack));
        cJSON_AddItemToArray(la, o);
    }
    const sm_layout *l = sm_layout_at(m);
    cJSON *fr = cJSON_AddObjectToObject(f, "fragmentation");
    cJSON_AddStringToObject(fr, "at", l->valid ? at_name(l->at) : "none");
    msnap_json_u64(fr, "t_ns", l->t_ns);
    cJSON *fd = cJSON_AddArrayToObject(fr, "devices");
    for (int dv = 0; dv < SM_NDEV; dv++) {
        const sm_dev *v = sm_device(m, dv);
        const sm_dev_layout *dl = &l->dev[dv];
        if (!v->seen || (!v->peak_reserved && !dl->segments))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", dv == SM_DEV_UNKNOWN ? -1 : dv);
        msnap_json_u64(o, "segments", dl->segments);
        msnap_json_u64(o, "memory_bytes", dl->mapped_bytes);
        msnap_json_u64(o, "address_space_bytes", dl->segment_bytes);
        if (sm_blocks_seen(m)) {
            msnap_json_u64(o, "block_bytes", dl->block_bytes);
            msnap_json_u64(o, "other_library_bytes", dl->other_bytes);
            msnap_json_u64(o, "total_free", dl->total_free);
            msnap_json_u64(o, "largest_free", dl->largest_free);
            cJSON_AddNumberToObject(o, "frag_free",
                                    sm_frag_free(dl->total_free, dl->largest_free));
            msnap_json_u64(o, "peak_allocated", v->peak_allocated);
            msnap_json_u64(o, "peak_reserved", v->peak_reserved);
            if (v->peak_reserved)
                cJSON_AddNumberToObject(o, "frag_peak",
                                        sm_frag_peak(v->peak_allocated, v->peak_reserved));
            else
                cJSON_AddNullToObject(o, "frag_peak");
        } else {
            cJSON_AddNullToObject(o, "block_bytes");
            cJSON_AddNullToObject(o, "total_free");
            cJSON_AddNullToObject(o, "largest_free");
            cJSON_AddNullToObject(o, "frag_free");
            cJSON_AddNullToObject(o, "peak_allocated");
            msnap_json_u64(o, "peak_reserved", v->peak_reserved);
            cJSON_AddNullToObject(o, "frag_peak");
        }
        cJSON_AddItemToArray(fd, o);
    }
    size_t nooms;
    const sm_oom *oo = sm_ooms(m, &nooms, NULL);
    cJSON *oa = cJSON_AddArrayToObject(f, "oom_story");
    for (size_t i = 0; i < nooms; i++) {
        const sm_oom *o = &oo[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "action", msnap_action_name(o->action));
        msnap_json_u64(x, "t_ns", o->t_ns);
        cJSON_AddNumberToObject(x, "device", o->device);
        msnap_json_u64(x, "requested", o->requested);
        if (o->blocks_seen)
            msnap_json_u64(x, "allocated", o->allocated);
        else
            cJSON_AddNullToObject(x, "allocated");
        msnap_json_u64(x, "reserved", o->reserved);
        msnap_json_u64(x, "device_free", o->dev_free);
        msnap_json_u64(x, "device_total", o->dev_total);
        if (o->blocks_seen) {
            msnap_json_u64(x, "free_inside_reserved", o->total_free);
            msnap_json_u64(x, "largest_free_block", o->largest_free);
        } else {
            cJSON_AddNullToObject(x, "free_inside_reserved");
            cJSON_AddNullToObject(x, "largest_free_block");
        }
        cJSON_AddStringToObject(x, "verdict", sm_oom_verdict(o));
        cJSON_AddItemToArray(oa, x);
    }
    return f;
}

/* [{"category", "bytes"}] of the non-zero ones, largest first (ties in
 * the rules' order). */
static cJSON *json_cats(const uint64_t *cat, const cat_rules *rules)
{
    cJSON *a = cJSON_CreateArray();
    int order[CAT_MAX], n = 0;
    for (int c = 0; rules && c < CAT_MAX && c < cat_count(rules); c++)
        if (cat[c])
            order[n++] = c;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && cat[order[j]] > cat[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "category", cat_name(rules, order[i]));
        msnap_json_u64(o, "bytes", cat[order[i]]);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* "at_peak": what was live at the peak by site (atpeak.h), the first top
 * sites; null when nothing ever lived. */
static cJSON *json_at_peak(const sm_model *m, const ap_result *ap, const cat_rules *rules,
                           int top)
{
    if (!ap->found)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "layer", msnap_layer_name(ap->layer));
    msnap_json_u64(o, "event_index", ap->event_index);
    msnap_json_u64(o, "t_ns", ap->t_ns);
    msnap_json_u64(o, "bytes", ap->bytes);
    msnap_json_u64(o, "objects", ap->objects);
    msnap_json_u64(o, "sites_total", ap->nsites);
    cJSON_AddItemToObject(o, "categories", json_cats(ap->cat, rules));
    cJSON *sa = cJSON_AddArrayToObject(o, "sites");
    size_t ng;
    const sm_group *g = sm_groups(m, &ng);
    for (size_t i = 0; i < ap->nsites && (int)i < top; i++) {
        const ap_site *x = &ap->sites[i];
        if (x->grp >= ng)
            continue;
        const sm_group *y = &g[x->grp];
        char lab[SM_LABEL_MAX];
        sm_site_label(sm_labels_of(m), y->stack, lab, sizeof lab);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "label", lab);
        cJSON_AddNumberToObject(e, "stack", y->stack);
        cJSON_AddStringToObject(e, "kind", msnap_action_name(y->kind));
        cJSON_AddNumberToObject(e, "device", y->device == MSNAP_ST_HOST ? -1 : y->device);
        msnap_json_u64(e, "bytes", x->bytes);
        msnap_json_u64(e, "objects", x->objects);
        cJSON_AddNumberToObject(e, "stacks", y->nmembers);
        cJSON_AddItemToObject(e, "categories", json_cats(x->cat, rules));
        cJSON_AddNumberToObject(e, "runtime_frames", sm_runtime_frames(sm_labels_of(m), y->stack));
        cJSON_AddItemToObject(e, "frames", json_frames(m, y->stack));
        cJSON_AddItemToArray(sa, e);
    }
    return o;
}

/* Builds the whole JSON object; NULL when out of memory. */
static cJSON *build_json(summary *s, sm_model *m, const char *path, int top,
                         const ap_result *ap, const cat_rules *rules)
{
    cJSON *root = cJSON_CreateObject();
    char cmd[2048];
    cJSON_AddStringToObject(root, "file", path);
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d", s->major, s->minor);
    cJSON_AddStringToObject(root, "version", ver);

    cJSON *h = cJSON_AddObjectToObject(root, "header");
    cJSON_AddStringToObject(h, "command", command_line(s, cmd, sizeof cmd));
    cJSON *argv = cJSON_AddArrayToObject(h, "argv");
    for (int i = 0; i < s->argc; i++)
        cJSON_AddItemToArray(argv, cJSON_CreateString(s->argv[i]));
    msnap_json_u64(h, "pid", s->pid);
    if (s->has_rank)
        cJSON_AddNumberToObject(h, "rank", (double)s->rank);
    cJSON_AddStringToObject(h, "host", s->host);
    cJSON_AddStringToObject(h, "mode", s->mode);
    msnap_json_u64(h, "t0_unix_ns", s->t0_unix_ns);
    msnap_json_u64(h, "duration_ns", s->t_last);
    cJSON *devs = cJSON_AddArrayToObject(h, "devices");
    for (int i = 0; i < s->ndevinfo; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "index", s->devinfo[i].index);
        cJSON_AddStringToObject(d, "name", s->devinfo[i].name);
        msnap_json_u64(d, "total", s->devinfo[i].total);
        cJSON_AddItemToArray(devs, d);
    }
    cJSON_AddBoolToObject(root, "truncated", s->truncated);
    msnap_json_u64(root, "lines", s->lines);
    if (s->trailer_seen) {
        cJSON *t = cJSON_AddObjectToObject(root, "trailer");
        cJSON_AddStringToObject(t, "reason", s->tr_reason);
        msnap_json_u64(t, "events", s->tr_events);
        msnap_json_u64(t, "dropped", s->tr_dropped);
        msnap_json_u64(t, "stacks_dropped", s->tr_stacks_dropped);
    } else {
        cJSON_AddNullToObject(root, "trailer");
    }

    cJSON *ev = cJSON_AddObjectToObject(root, "events");
    msnap_json_u64(ev, "total", s->events);
    cJSON_AddItemToObject(ev, "by_action",
                          json_counts(s->by_action, MSNAP_A_COUNT,
                                      msnap_action_name));
    cJSON_AddItemToObject(ev, "by_api",
                          json_counts(s->by_api, MSNAP_API_COUNT,
                                      msnap_api_name));

    const msnap_state *st = s->st;
    cJSON_AddBoolToObject(root, "allocated_seen", st->allocated_seen);
    /* The process (all devices at one moment): the rank table's figures. */
    cJSON *po = cJSON_AddObjectToObject(root, "process");
    cJSON_AddItemToObject(po, "reserved",
                          json_level(msnap_state_level(st, -1, MSNAP_LAYER_RESERVED)));
    if (st->allocated_seen)
        cJSON_AddItemToObject(po, "allocated",
                              json_level(msnap_state_level(st, -1, MSNAP_LAYER_ALLOCATED)));
    else
        cJSON_AddNullToObject(po, "allocated");
    cJSON *da = cJSON_AddArrayToObject(root, "devices");
    for (int d = 0; d < MSNAP_ST_NDEV; d++) {
        if (!device_shown(s, d))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d == MSNAP_ST_HOST ? -1 : d);
        for (int l = 0; l < MSNAP_LAYER_COUNT; l++) {
            if (l == MSNAP_LAYER_PINNED)
                continue;
            if (l == MSNAP_LAYER_ALLOCATED && !st->allocated_seen) {
                cJSON_AddNullToObject(o, msnap_layer_name(l));
                continue;
            }
            cJSON *lv = json_level(msnap_state_level(st, d, l));
            /* PyTorch's blocks: allocated counts blocks as PyTorch does
             * (memory_allocated()); what the program asked for beside */
            if (l == MSNAP_LAYER_ALLOCATED && s->req_seen)
                msnap_json_u64(lv, "requested_at_peak", s->req_at_peak[d]);
            cJSON_AddItemToObject(o, msnap_layer_name(l), lv);
        }
        cJSON *l = cJSON_AddObjectToObject(o, "live_at_end");
        msnap_json_u64(l, "count", s->live_count[d]);
        msnap_json_u64(l, "bytes", s->live_bytes[d]);
        cJSON_AddItemToArray(da, o);
    }
    cJSON *ho = json_level(msnap_state_level(st, MSNAP_ST_HOST, MSNAP_LAYER_PINNED));
    msnap_json_u64(ho, "live_count", s->live_count[MSNAP_ST_HOST]);
    msnap_json_u64(ho, "live_bytes", s->live_bytes[MSNAP_ST_HOST]);
    cJSON_AddItemToObject(root, "pinned_host", ho);

    msnap_json_u64(root, "oom_count", s->n_oom);
    msnap_json_u64(root, "alloc_error_count", s->n_alloc_error);
    cJSON *oa = cJSON_AddArrayToObject(root, "ooms");
    for (size_t i = 0; i < s->nfails; i++)
        cJSON_AddItemToArray(oa, json_fail(m, &s->fails[i], 0));
    msnap_json_u64(root, "failed_free_count", s->n_free_error);
    cJSON *fa = cJSON_AddArrayToObject(root, "failed_frees");
    for (size_t i = 0; i < s->nfree_fails; i++)
        cJSON_AddItemToArray(fa, json_fail(m, &s->free_fails[i], 1));
    msnap_json_u64(root, "unmatched_frees", st->unknown_frees);

    uint64_t lc = 0, lb = 0;
    for (int d = 0; d < MSNAP_ST_HOST; d++) {
        lc += s->live_count[d];
        lb += s->live_bytes[d];
    }
    cJSON *le = cJSON_AddObjectToObject(root, "live_at_end");
    msnap_json_u64(le, "count", lc);
    msnap_json_u64(le, "bytes", lb);
    if (st->allocated_seen) {
        msnap_json_u64(le, "blocks", s->blocks_live_count);
        msnap_json_u64(le, "block_bytes", s->blocks_live_bytes);
    }
    cJSON_AddBoolToObject(root, "pytorch", s->torch_blocks);
    if (st->state_seen) {
        cJSON *so = cJSON_AddObjectToObject(root, "state");
        msnap_json_u64(so, "t_ns", st->state_t);
        msnap_json_u64(so, "live", st->state_nlive);
        msnap_json_u64(so, "bytes", st->state_bytes);
    }

    cJSON *ts = cJSON_AddObjectToObject(root, "top_sites");
    for (size_t k = 0; k < sizeof site_layers / sizeof site_layers[0]; k++)
        json_sites(ts, s, m, site_layers[k], top);

    cJSON_AddItemToObject(root, "at_peak", json_at_peak(m, ap, rules, top));
    cJSON_AddItemToObject(root, "findings", json_findings(m));
    msnap_json_u64(root, "nvtx_marks", s->n_marks);
    if (s->want_marks) {
        cJSON *ma = cJSON_AddArrayToObject(root, "marks");
        for (size_t i = 0; i < s->nmarks; i++) {
            const sum_mark *mk = &s->marks[i];
            cJSON *o = cJSON_CreateObject();
            msnap_json_u64(o, "t_ns", mk->t);
            cJSON_AddStringToObject(o, "message", sm_str(m, mk->str));
            cJSON *dv = cJSON_AddArrayToObject(o, "devices");
            for (int d = 0; d < mk->ndev; d++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "device", d);
                msnap_json_u64(x, "reserved", mk->vals[d].reserved);
                msnap_json_u64(x, "async", mk->vals[d].async);
                msnap_json_u64(x, "allocated", mk->vals[d].allocated);
                cJSON_AddItemToArray(dv, x);
            }
            cJSON_AddItemToArray(ma, o);
        }
    }
    return root;
}

/* Contract in report.h. */
int msnap_summarize(const char *path, const msnap_summary_opts *o, cJSON **root,
                    breakdown **bdp, char *err, size_t errlen)
{
    int marks = o->marks, top = o->top;
    const cat_rules *rules = o->rules;
    summary s;
    an_file f;
    *root = NULL;
    if (bdp)
        *bdp = NULL;
    summary_init(&s, marks);
    an_init(&f, path);
    sm_opts mo = {.top = 8, .columns = 0, .at = SM_AT_DEFAULT};
    sm_model *m = sm_new(&mo);
    breakdown *bd = o->no_breakdown ? NULL : bd_new(rules);
    ap_result ap = {0};
    pl_pools *pl = pl_new();
    int rc = 0;
    if (bd)     /* the categories of "at_peak" (atpeak.h) */
        bd_keep_change_categories(bd);
    if (!m || (!bd && !o->no_breakdown) || !pl || summary_attach(&s, &f) || sm_attach(m, &f) ||
        (bd && bd_attach(bd, &f)) || pl_attach(pl, &f) || (o->attach && o->attach(o->ctx, &f))) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = 2;
    } else if (an_read(&f, err, errlen) != 0) {
        rc = 2;
    } else if (ap_compute(&ap, &f, m, bd) ||
               !(*root = build_json(&s, m, path, top, &ap, rules))) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = 2;
    } else {
        rc = s.n_oom ? 1 : 0;
        if (bd)
            bd_add_json(bd, *root);
        /* the pools of PyTorch's allocator (pools.h) */
        cJSON *pj = pl_json(pl), *pk = pl_kinds_json(pl);
        if (pj)
            cJSON_AddItemToObject(*root, "pools", pj);
        if (pk)
            cJSON_AddItemToObject(*root, "pool_kinds", pk);
        if (o->done && o->done(o->ctx, &f, m, *root)) {
            snprintf(err, errlen, "%s: out of memory", path);
            cJSON_Delete(*root);
            *root = NULL;
            rc = 2;
        }
        if (bdp) {
            *bdp = bd;
            bd = NULL;
        }
    }
    ap_free(&ap);
    bd_free(bd);
    pl_free(pl);
    summary_free(&s);
    sm_free(m);
    an_free(&f);
    return rc;
}

/* memsnap summary: what a snapshot says, in one screen (or one JSON object).
 *
 * This file parses the arguments and prints; the counting is summary.c.
 * The text and the JSON carry the same content: header, event counts per
 * action and per API, per-device peaks (reserved, async, managed, allocated,
 * VMM), pinned host, OOMs and other failed allocations, failed frees, what
 * was still live at the end, the top allocation sites by peak live bytes,
 * NVTX marks (and, with --marks, the per-device values at every mark).
 *
 * Several files (one per rank): a section per file, then a short
 * cross-rank table (peak reserved, OOMs, the rank with the highest peak).
 *
 * Exit status: 0 nothing alarming, 1 the snapshot contains an OOM event,
 * 2 usage error or unreadable input (one line on stderr).
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "breakdown.h"
#include "cli.h"
#include "options.h"
#include "findings.h"
#include "model.h"
#include "ranks.h"
#include "summary.h"

#define TOP_FRAMES 4 /* frames shown per allocation site / OOM */

static const char usage_text[] =
    "usage: memsnap summary SNAP [SNAP...] [--json] [--top N] [--marks]\n"
    "                       [--category-rules FILE]\n"
    "\n"
    "Reads a snapshot (plain or zstd; \"-\" = stdin) once and\n"
    "prints: the header, event counts per action and API, per-device peaks\n"
    "(reserved, async, managed, allocated, VMM), pinned host memory, OOM\n"
    "events, failed frees, what was still live at the end, the top\n"
    "allocation sites by peak live bytes (each named by its first frame\n"
    "outside the CUDA / allocator libraries), findings, and NVTX marks.\n"
    "Several SNAPs (one per rank): a section per file, then a table of peak\n"
    "reserved and OOMs per file and the file with the highest peak.\n"
    "\n"
    "  --json       one JSON object with the same content (exact byte counts)\n"
    "  --top N      allocation sites to list (default 10, 0 = none)\n"
    "  --marks      reserved/async/allocated per device at every nvtx_mark\n"
    "  --category-rules FILE  category rules tried before the defaults\n"
    "               (default: $MEMSNAP_CATEGORY_RULES; format in docs/cli.md)\n"
    "  -h, --help   this help\n"
    "\n"
    "Exit status: 0 ok, 1 a snapshot contains an OOM event, 2 bad usage or\n"
    "unreadable input.\n";

/* "" or "s" for a count. */
static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

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

/* The labels of the listed sites, told apart (viz/label.c); NULL when out
 * of memory.  free() the result. */
static char (*site_labels(const sm_model *m, const msnap_site *const *sites,
                          size_t n))[SM_LABEL_MAX]
{
    char (*labs)[SM_LABEL_MAX] = malloc((n + 1) * sizeof *labs);
    uint32_t *stacks = malloc((n + 1) * sizeof *stacks);
    if (!labs || !stacks) {
        free(labs);
        free(stacks);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        stacks[i] = sites[i]->stack;
    sm_site_labels(m, stacks, (int)n, labs);
    free(stacks);
    return labs;
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
 * the findings model keeps (viz/symtab.h; a size-0 last module record
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
static void add_u64(cJSON *o, const char *key, uint64_t v)
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
    add_u64(o, "peak", l->peak);
    add_u64(o, "peak_t_ns", l->peak_t);
    add_u64(o, "final", l->cur);
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
            add_u64(o, name(i), v[i]);
    return o;
}

/* One failure entry. */
static cJSON *json_fail(const sm_model *m, const sum_fail *f, int is_free)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", msnap_action_name(f->action));
    add_u64(o, "t_ns", f->t);
    cJSON_AddNumberToObject(o, "device", f->device);
    if (is_free) {
        add_u64(o, "addr", f->addr);
    } else {
        add_u64(o, "requested", f->size);
        add_u64(o, "device_free", f->dev_free);
        add_u64(o, "device_total", f->dev_total);
    }
    cJSON_AddStringToObject(o, "api", msnap_api_name(f->api));
    cJSON_AddNumberToObject(o, "result", f->result);
    cJSON_AddNumberToObject(o, "stack", f->stack);
    cJSON_AddItemToObject(o, "frames", json_frames(m, f->stack));
    return o;
}


/* Adds "layer": [sites by peak] (null for the allocated layer when the
 * file has no blocks). */
static void json_sites(cJSON *ts, const summary *s, const sm_model *m,
                       int layer, int top)
{
    const char *name = msnap_layer_name(layer);
    if (layer == MSNAP_LAYER_ALLOCATED && !s->st->allocated_seen) {
        cJSON_AddNullToObject(ts, name);
        return;
    }
    cJSON *ta = cJSON_AddArrayToObject(ts, name);
    const msnap_site **sites = top > 0 ? malloc((size_t)top * sizeof *sites) : NULL;
    size_t shown = sites ? summary_top_sites(s, layer, sites, (size_t)top) : 0;
    char (*labs)[SM_LABEL_MAX] = shown ? site_labels(m, sites, shown) : NULL;
    for (size_t i = 0; i < shown; i++) {
        const msnap_site *x = sites[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", x->stack);
        if (labs)
            cJSON_AddStringToObject(o, "label", labs[i]);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(x->kind));
        cJSON_AddNumberToObject(o, "device", x->device == MSNAP_ST_HOST ? -1 : x->device);
        add_u64(o, "peak", x->peak);
        add_u64(o, "peak_t_ns", x->peak_t);
        add_u64(o, "count", x->count);
        add_u64(o, "bytes_total", x->bytes);
        add_u64(o, "live_at_end", x->live);
        add_u64(o, "live_count_at_end", x->live_count);
        cJSON_AddItemToObject(o, "frames", json_frames(m, x->stack));
        cJSON_AddItemToArray(ta, o);
    }
    free(labs);
    free(sites);
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
    add_u64(f, "valleys", nvalleys);
    cJSON *fl = cJSON_AddObjectToObject(f, "floor");
    add_u64(fl, "first", f0);
    add_u64(fl, "last", f1);
    cJSON *la = cJSON_AddArrayToObject(f, "leak_suspects");
    for (size_t i = 0; i < nleaks; i++) {
        const sm_site *st = &sites[leaks[i].site];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", st->stack);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(st->kind));
        cJSON_AddNumberToObject(o, "device", st->device == SM_DEV_UNKNOWN ? -1 : st->device);
        add_u64(o, "first_valley_bytes", leaks[i].first);
        add_u64(o, "last_valley_bytes", leaks[i].last);
        add_u64(o, "rises", leaks[i].rises);
        add_u64(o, "falls", leaks[i].falls);
        add_u64(o, "live_at_end", st->live);
        cJSON_AddItemToObject(o, "frames", json_frames(m, st->stack));
        cJSON_AddItemToArray(la, o);
    }
    const sm_layout *l = sm_layout_at(m);
    cJSON *fr = cJSON_AddObjectToObject(f, "fragmentation");
    cJSON_AddStringToObject(fr, "at", l->valid ? at_name(l->at) : "none");
    add_u64(fr, "t_ns", l->t_ns);
    cJSON *fd = cJSON_AddArrayToObject(fr, "devices");
    for (int dv = 0; dv < SM_NDEV; dv++) {
        const sm_dev *v = sm_device(m, dv);
        const sm_dev_layout *dl = &l->dev[dv];
        if (!v->seen || (!v->peak_reserved && !dl->segments))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", dv == SM_DEV_UNKNOWN ? -1 : dv);
        add_u64(o, "segments", dl->segments);
        add_u64(o, "memory_bytes", dl->mapped_bytes);
        add_u64(o, "address_space_bytes", dl->segment_bytes);
        if (sm_blocks_seen(m)) {
            add_u64(o, "block_bytes", dl->block_bytes);
            add_u64(o, "total_free", dl->total_free);
            add_u64(o, "largest_free", dl->largest_free);
            cJSON_AddNumberToObject(o, "frag_free",
                                    sm_frag_free(dl->total_free, dl->largest_free));
            add_u64(o, "peak_allocated", v->peak_allocated);
            add_u64(o, "peak_reserved", v->peak_reserved);
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
            add_u64(o, "peak_reserved", v->peak_reserved);
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
        add_u64(x, "t_ns", o->t_ns);
        cJSON_AddNumberToObject(x, "device", o->device);
        add_u64(x, "requested", o->requested);
        if (o->blocks_seen)
            add_u64(x, "allocated", o->allocated);
        else
            cJSON_AddNullToObject(x, "allocated");
        add_u64(x, "reserved", o->reserved);
        add_u64(x, "device_free", o->dev_free);
        add_u64(x, "device_total", o->dev_total);
        if (o->blocks_seen) {
            add_u64(x, "free_inside_reserved", o->total_free);
            add_u64(x, "largest_free_block", o->largest_free);
        } else {
            cJSON_AddNullToObject(x, "free_inside_reserved");
            cJSON_AddNullToObject(x, "largest_free_block");
        }
        cJSON_AddStringToObject(x, "verdict", sm_oom_verdict(o));
        cJSON_AddItemToArray(oa, x);
    }
    return f;
}

/* Builds the whole JSON object; NULL when out of memory. */
static cJSON *build_json(summary *s, sm_model *m, const char *path, int top)
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
    add_u64(h, "pid", s->pid);
    cJSON_AddStringToObject(h, "host", s->host);
    cJSON_AddStringToObject(h, "mode", s->mode);
    add_u64(h, "t0_unix_ns", s->t0_unix_ns);
    add_u64(h, "duration_ns", s->t_last);
    cJSON *devs = cJSON_AddArrayToObject(h, "devices");
    for (int i = 0; i < s->ndevinfo; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "index", s->devinfo[i].index);
        cJSON_AddStringToObject(d, "name", s->devinfo[i].name);
        add_u64(d, "total", s->devinfo[i].total);
        cJSON_AddItemToArray(devs, d);
    }
    cJSON_AddBoolToObject(root, "truncated", s->truncated);
    add_u64(root, "lines", s->lines);
    if (s->trailer_seen) {
        cJSON *t = cJSON_AddObjectToObject(root, "trailer");
        cJSON_AddStringToObject(t, "reason", s->tr_reason);
        add_u64(t, "events", s->tr_events);
        add_u64(t, "dropped", s->tr_dropped);
        add_u64(t, "stacks_dropped", s->tr_stacks_dropped);
    } else {
        cJSON_AddNullToObject(root, "trailer");
    }

    cJSON *ev = cJSON_AddObjectToObject(root, "events");
    add_u64(ev, "total", s->events);
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
            if (l == MSNAP_LAYER_ALLOCATED && !st->allocated_seen)
                cJSON_AddNullToObject(o, msnap_layer_name(l));
            else
                cJSON_AddItemToObject(o, msnap_layer_name(l),
                                      json_level(msnap_state_level(st, d, l)));
        }
        cJSON *l = cJSON_AddObjectToObject(o, "live_at_end");
        add_u64(l, "count", s->live_count[d]);
        add_u64(l, "bytes", s->live_bytes[d]);
        cJSON_AddItemToArray(da, o);
    }
    cJSON *ho = json_level(msnap_state_level(st, MSNAP_ST_HOST, MSNAP_LAYER_PINNED));
    add_u64(ho, "live_count", s->live_count[MSNAP_ST_HOST]);
    add_u64(ho, "live_bytes", s->live_bytes[MSNAP_ST_HOST]);
    cJSON_AddItemToObject(root, "pinned_host", ho);

    add_u64(root, "oom_count", s->n_oom);
    add_u64(root, "alloc_error_count", s->n_alloc_error);
    cJSON *oa = cJSON_AddArrayToObject(root, "ooms");
    for (size_t i = 0; i < s->nfails; i++)
        cJSON_AddItemToArray(oa, json_fail(m, &s->fails[i], 0));
    add_u64(root, "failed_free_count", s->n_free_error);
    cJSON *fa = cJSON_AddArrayToObject(root, "failed_frees");
    for (size_t i = 0; i < s->nfree_fails; i++)
        cJSON_AddItemToArray(fa, json_fail(m, &s->free_fails[i], 1));
    add_u64(root, "unmatched_frees", st->unknown_frees);

    uint64_t lc = 0, lb = 0;
    for (int d = 0; d < MSNAP_ST_HOST; d++) {
        lc += s->live_count[d];
        lb += s->live_bytes[d];
    }
    cJSON *le = cJSON_AddObjectToObject(root, "live_at_end");
    add_u64(le, "count", lc);
    add_u64(le, "bytes", lb);
    if (st->state_seen) {
        cJSON *so = cJSON_AddObjectToObject(root, "state");
        add_u64(so, "t_ns", st->state_t);
        add_u64(so, "live", st->state_nlive);
        add_u64(so, "bytes", st->state_bytes);
    }

    cJSON *ts = cJSON_AddObjectToObject(root, "top_sites");
    for (size_t k = 0; k < sizeof site_layers / sizeof site_layers[0]; k++)
        json_sites(ts, s, m, site_layers[k], top);

    cJSON_AddItemToObject(root, "findings", json_findings(m));
    add_u64(root, "nvtx_marks", s->n_marks);
    if (s->want_marks) {
        cJSON *ma = cJSON_AddArrayToObject(root, "marks");
        for (size_t i = 0; i < s->nmarks; i++) {
            const sum_mark *mk = &s->marks[i];
            cJSON *o = cJSON_CreateObject();
            add_u64(o, "t_ns", mk->t);
            cJSON_AddStringToObject(o, "message", sm_str(m, mk->str));
            cJSON *dv = cJSON_AddArrayToObject(o, "devices");
            for (int d = 0; d < mk->ndev; d++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "device", d);
                add_u64(x, "reserved", mk->vals[d].reserved);
                add_u64(x, "async", mk->vals[d].async);
                add_u64(x, "allocated", mk->vals[d].allocated);
                cJSON_AddItemToArray(dv, x);
            }
            cJSON_AddItemToArray(ma, o);
        }
    }
    return root;
}

/* ---- text, printed from the result -------------------------------------- */

/* An integer member of a result object (add_u64 writes raw numbers). */
static uint64_t ju(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsRaw(v))
        return strtoull(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* A signed integer member (device ordinals, CUresults). */
static int ji(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* A string member, "" when absent. */
static const char *js(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static const cJSON *jo(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Size of a member, as text into buf. */
static const char *jsize(const cJSON *o, const char *key, char *buf)
{
    return msnap_size_text(ju(o, key), buf, 32);
}

/* Prints up to TOP_FRAMES frames of an entry with "stack" and "frames". */
static void print_frames(const cJSON *o, const char *indent)
{
    const cJSON *fr = jo(o, "frames");
    int depth = cJSON_GetArraySize(fr);
    if (!ju(o, "stack")) {
        printf("%s(no stack recorded)\n", indent);
        return;
    }
    if (!depth) {
        printf("%s(stack %" PRIu64 " not in the file)\n", indent, ju(o, "stack"));
        return;
    }
    for (int i = 0; i < depth && i < TOP_FRAMES; i++)
        printf("%s%s\n", indent, cJSON_GetArrayItem(fr, i)->valuestring);
    if (depth > TOP_FRAMES)
        printf("%s... %d more frames\n", indent, depth - TOP_FRAMES);
}

/* "peak X at T s, final Y" for one level object. */
static void print_level(const char *name, const cJSON *l)
{
    char a[32], b[32], t[32];
    printf("  %-10s peak %-11s at %-12s final %s\n", name, jsize(l, "peak", a),
           msnap_time_text(ju(l, "peak_t_ns"), t, sizeof t), jsize(l, "final", b));
}

/* Prints "name count, name count, ..." for the members of a counts object. */
static void print_counts(const char *title, const cJSON *counts)
{
    int col = printf("  %-10s", title), first = 1;
    const cJSON *c;
    cJSON_ArrayForEach(c, counts) {
        char item[96];
        uint64_t v = strtoull(c->valuestring, NULL, 10);
        int len = snprintf(item, sizeof item, "%s%s %" PRIu64, first ? "" : ", ",
                           c->string, v);
        if (col + len > 78) {
            printf(",\n  %-10s", "");
            col = 12;
            len = snprintf(item, sizeof item, "%s %" PRIu64, c->string, v);
        }
        col += printf("%s", item);
        first = 0;
    }
    if (first)
        printf("none");
    printf("\n");
}

/* The top sites of one layer; null: the layer was not seen. */
static void print_sites(const cJSON *ts, const char *layer, int top)
{
    char a[32], b[32], c[32];
    const cJSON *list = jo(ts, layer);
    if (top <= 0)
        return;
    if (cJSON_IsNull(list)) {
        printf("\n%s sites: none (%s layer: not seen)\n", layer, layer);
        return;
    }
    int n = cJSON_GetArraySize(list);
    if (!n)
        return;
    printf("\ntop %d %s site%s by peak live bytes:\n", n, layer, plural((uint64_t)n));
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, list) {
        uint64_t count = ju(x, "count");
        printf("  #%-2d peak %-11s %6" PRIu64 " alloc%s, %s total, "
               "live at end %s  [%s, device %d, stack %" PRIu64 "]\n",
               ++i, jsize(x, "peak", a), count, plural(count),
               jsize(x, "bytes_total", b), jsize(x, "live_at_end", c),
               js(x, "kind"), ji(x, "device"), ju(x, "stack"));
        if (jo(x, "label"))
            printf("      site: %s\n", js(x, "label"));
        print_frames(x, "      ");
    }
}

/* The findings part of the result. */
static void print_findings(const cJSON *f)
{
    char a[32], b[32], c[32], d[32], t[32];
    int blocks = !strcmp(js(f, "stacked_layer"), "blocks");
    const cJSON *leaks = jo(f, "leak_suspects"), *x;
    uint64_t nvalleys = ju(f, "valleys");
    printf("\nfindings (stacked layer: %s)\n",
           blocks ? "allocator blocks"
                  : "reserved only, the allocator reports no blocks");
    printf("leak suspects: %d", cJSON_GetArraySize(leaks));
    if (nvalleys >= 2)
        printf(" (%" PRIu64 " valleys of the total; the floor went "
               "from %s to %s)", nvalleys, jsize(jo(f, "floor"), "first", a),
               jsize(jo(f, "floor"), "last", b));
    else
        printf(" (%" PRIu64 " valleys of the total: too few to judge)", nvalleys);
    printf("\n");
    int i = 0;
    cJSON_ArrayForEach(x, leaks) {
        if (i == 10)
            break;
        uint64_t rises = ju(x, "rises");
        printf("  #%-2d live at valleys %s -> %s, rose %" PRIu64 " time%s, fell %"
               PRIu64 "; live at end %s  [%s, stack %" PRIu64 "]\n",
               ++i, jsize(x, "first_valley_bytes", a),
               jsize(x, "last_valley_bytes", b), rises, plural(rises),
               ju(x, "falls"), jsize(x, "live_at_end", c), js(x, "kind"),
               ju(x, "stack"));
        print_frames(x, "      ");
    }

    const cJSON *fr = jo(f, "fragmentation");
    const char *at = js(fr, "at");
    printf("fragmentation");
    if (strcmp(at, "none"))
        printf(" (at %s, t = %s)", !strcmp(at, "oom") ? "the first OOM"
                                   : !strcmp(at, "peak") ? "the peak of reserved"
                                   : !strcmp(at, "time") ? "the chosen time"
                                                         : "the end",
               msnap_time_text(ju(fr, "t_ns"), t, sizeof t));
    printf("\n");
    cJSON_ArrayForEach(x, jo(fr, "devices")) {
        printf("  device %d: %" PRIu64 " segments, %s of memory", ji(x, "device"),
               ju(x, "segments"), jsize(x, "memory_bytes", a));
        if (blocks)
            printf(", %s in blocks; free inside reserved %s, largest free "
                   "block %s\n", jsize(x, "block_bytes", b),
                   jsize(x, "total_free", c), jsize(x, "largest_free", d));
        else
            printf("\n");
        if (blocks && ju(x, "total_free"))
            printf("    1 - largest_free/total_free     = %.3f\n",
                   jo(x, "frag_free")->valuedouble);
        else if (blocks)
            printf("    1 - largest_free/total_free     = 0 (nothing free)\n");
        else
            printf("    1 - largest_free/total_free     = n/a (no allocator blocks)\n");
        if (blocks && ju(x, "peak_reserved"))
            printf("    1 - peak_allocated/peak_reserved = %.3f (peaks %s / %s)\n",
                   jo(x, "frag_peak")->valuedouble, jsize(x, "peak_allocated", a),
                   jsize(x, "peak_reserved", b));
        else
            printf("    1 - peak_allocated/peak_reserved = n/a (no allocator blocks)\n");
    }

    const cJSON *story = jo(f, "oom_story");
    int nooms = cJSON_GetArraySize(story);
    if (!nooms)
        return;
    printf("OOM story (%d of %d failed allocation%s):\n", nooms < 3 ? nooms : 3,
           nooms, nooms == 1 ? "" : "s");
    i = 0;
    cJSON_ArrayForEach(x, story) {
        if (i++ == 3)
            break;
        printf("  at %s on device %d: requested %s; ",
               msnap_time_text(ju(x, "t_ns"), t, sizeof t), ji(x, "device"),
               jsize(x, "requested", a));
        if (cJSON_IsNull(jo(x, "allocated")))
            printf("allocated layer: not seen, ");
        else
            printf("allocated %s, ", jsize(x, "allocated", b));
        printf("reserved %s, device free %s", jsize(x, "reserved", c),
               ju(x, "device_total") || ju(x, "device_free") ? jsize(x, "device_free", d)
                                                             : "unknown");
        if (!cJSON_IsNull(jo(x, "free_inside_reserved")))
            printf(", free inside reserved %s, largest free block %s",
                   jsize(x, "free_inside_reserved", a),
                   jsize(x, "largest_free_block", b));
        printf("\n    -> %s\n", js(x, "verdict"));
    }
}

/* The whole result of one file as text. */
static void print_text(const cJSON *r, int top)
{
    char a[32], b[32], c[32], t[32];
    const cJSON *h = jo(r, "header"), *x;
    printf("snapshot   %s (format %s, mode %s)\n", js(r, "file"), js(r, "version"),
           js(h, "mode")[0] ? js(h, "mode") : "?");
    printf("command    %s\n", js(h, "command"));
    printf("process    pid %" PRId64 " on %s, duration %s\n",
           (int64_t)ju(h, "pid"), js(h, "host")[0] ? js(h, "host") : "?",
           msnap_time_text(ju(h, "duration_ns"), t, sizeof t));
    cJSON_ArrayForEach(x, jo(h, "devices"))
        printf("device %-3d %s, %s\n", ji(x, "index"), js(x, "name"),
               ju(x, "total") ? jsize(x, "total", a) : "memory unknown");
    if (cJSON_IsTrue(jo(r, "truncated")))
        printf("(file truncated after line %" PRIu64
               ": the process probably died; shown up to there)\n", ju(r, "lines"));
    const cJSON *tr = jo(r, "trailer");
    if (!cJSON_IsNull(tr))
        printf("trailer    reason %s, %" PRIu64 " events written, %" PRIu64
               " dropped, %" PRIu64 " without stack\n", js(tr, "reason"),
               ju(tr, "events"), ju(tr, "dropped"), ju(tr, "stacks_dropped"));

    const cJSON *ev = jo(r, "events");
    printf("\nevents     %" PRIu64 "\n", ju(ev, "total"));
    print_counts("by action", jo(ev, "by_action"));
    print_counts("by api", jo(ev, "by_api"));

    int allocated_seen = cJSON_IsTrue(jo(r, "allocated_seen"));
    cJSON_ArrayForEach(x, jo(r, "devices")) {
        int d = ji(x, "device");
        if (d < 0)
            printf("\ndevice ? (unknown ordinal)\n");
        else
            printf("\ndevice %d\n", d);
        /* The unknown slot often holds only address space (a VA
         * reservation names no device): its zero levels are not shown. */
        static const struct { const char *key, *name; int always; } lv[] = {
            {"reserved", "reserved", 1}, {"async", "  async", 0},
            {"managed", "  managed", 0}, {"vmm_va", "vmm VA", 0},
            {"vmm_mapped", "vmm mapped", 0}, {"allocated", "allocated", 1}};
        for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) {
            const cJSON *l = jo(x, lv[i].key);
            if (!cJSON_IsNull(l) && (ju(l, "peak") || (lv[i].always && d >= 0)))
                print_level(lv[i].name, l);
        }
        const cJSON *le = jo(x, "live_at_end");
        printf("  live at end: %" PRIu64 " allocation%s, %s\n", ju(le, "count"),
               plural(ju(le, "count")), jsize(le, "bytes", a));
    }
    if (!allocated_seen)
        printf("\nallocated layer: not seen (no allocator blocks in this "
               "file); reserved shown\n");
    const cJSON *pin = jo(r, "pinned_host");
    uint64_t hc = ju(pin, "live_count");
    if (ju(pin, "peak") || hc)
        printf("\npinned host  peak %s at %s, live at end %" PRIu64
               " allocation%s, %s\n", jsize(pin, "peak", a),
               msnap_time_text(ju(pin, "peak_t_ns"), t, sizeof t), hc,
               plural(hc), jsize(pin, "live_bytes", b));

    uint64_t nerr = ju(r, "alloc_error_count");
    printf("\nOOM events: %" PRIu64, ju(r, "oom_count"));
    if (nerr)
        printf(" (and %" PRIu64 " other failed allocations)", nerr);
    printf("\n");
    cJSON_ArrayForEach(x, jo(r, "ooms")) {
        char dev[96];
        if (ju(x, "device_total") || ju(x, "device_free"))
            snprintf(dev, sizeof dev, "device free %s of %s", jsize(x, "device_free", b),
                     ju(x, "device_total") ? jsize(x, "device_total", c) : "unknown");
        else
            snprintf(dev, sizeof dev, "device free unknown");
        printf("  %s at %s on device %d: requested %s, %s, %s (CUresult %d)\n",
               !strcmp(js(x, "action"), "oom") ? "OOM" : "alloc error",
               msnap_time_text(ju(x, "t_ns"), t, sizeof t), ji(x, "device"),
               jsize(x, "requested", a), dev, js(x, "api"), ji(x, "result"));
        print_frames(x, "      ");
    }
    printf("failed frees: %" PRIu64 "\n", ju(r, "failed_free_count"));
    cJSON_ArrayForEach(x, jo(r, "failed_frees")) {
        printf("  at %s: 0x%" PRIx64 " %s (CUresult %d)\n",
               msnap_time_text(ju(x, "t_ns"), t, sizeof t), ju(x, "addr"),
               js(x, "api"), ji(x, "result"));
        print_frames(x, "      ");
    }
    if (ju(r, "unmatched_frees"))
        printf("frees of allocations not in the file: %" PRIu64
               " (ring window, or recording started late)\n",
               ju(r, "unmatched_frees"));

    const cJSON *le = jo(r, "live_at_end");
    uint64_t lc = ju(le, "count");
    printf("\nstill live at end: %" PRIu64 " device allocation%s, %s%s\n",
           lc, plural(lc), jsize(le, "bytes", a),
           lc ? " (at a clean exit, a leak hint)" : "");
    const cJSON *so = jo(r, "state");
    if (so)
        printf("recorder state at %s: %" PRIu64 " live objects holding %s of device memory\n",
               msnap_time_text(ju(so, "t_ns"), t, sizeof t), ju(so, "live"),
               jsize(so, "bytes", a));

    for (size_t k = 0; k < sizeof site_layers / sizeof site_layers[0]; k++)
        print_sites(jo(r, "top_sites"), msnap_layer_name(site_layers[k]), top);

    print_findings(jo(r, "findings"));

    printf("\nnvtx marks: %" PRIu64 "\n", ju(r, "nvtx_marks"));
    cJSON_ArrayForEach(x, jo(r, "marks")) {
        printf("  %-12s \"%s\"\n", msnap_time_text(ju(x, "t_ns"), t, sizeof t),
               js(x, "message"));
        const cJSON *dv;
        cJSON_ArrayForEach(dv, jo(x, "devices")) {
            printf("      device %d: reserved %s, async %s, allocated %s\n",
                   ji(dv, "device"), jsize(dv, "reserved", a), jsize(dv, "async", b),
                   allocated_seen ? jsize(dv, "allocated", c) : "not seen");
        }
    }
}

/* ---- entry point -------------------------------------------------------- */

/* Summarizes one file into *root (the one result that both the text and
 * the JSON come from), reading it once (analysis.h): the counts
 * (summary.h), the findings model (model.h) and the breakdown by library
 * and category (breakdown.h) observe the same read.  Returns 0, 1 (an
 * OOM) or 2 (unreadable, message printed). */
static int summarize(const char *path, int marks, int top, const cat_rules *rules,
                     cJSON **root, breakdown **bdp)
{
    summary s;
    an_file f;
    char err[1024];
    summary_init(&s, marks);
    an_init(&f, path);
    sm_opts mo = {.top = 8, .columns = 0, .at = SM_AT_DEFAULT};
    sm_model *m = sm_new(&mo);
    breakdown *bd = bd_new(rules);
    int rc = 0;
    if (!m || !bd || summary_attach(&s, &f) || sm_attach(m, &f) || bd_attach(bd, &f)) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        rc = 2;
    } else if (an_read(&f, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        rc = 2;
    } else if (!(*root = build_json(&s, m, path, top))) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        rc = 2;
    } else {
        rc = s.n_oom ? 1 : 0;
        bd_add_json(bd, *root);
        *bdp = bd;
        bd = NULL;
    }
    bd_free(bd);
    summary_free(&s);
    sm_free(m);
    an_free(&f);
    return rc;
}

/* The file's peak (reserved, all devices) and its top reserved sites by
 * label, from its result, for the cross-rank comparison (ranks.h). */
static void rank_of(const cJSON *root, const char *path, rank_file *r)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->peak = ju(jo(jo(root, "process"), "reserved"), "peak");
    const cJSON *site;
    cJSON_ArrayForEach(site, jo(jo(root, "top_sites"), "reserved")) {
        if (r->nsites == RANK_SITES)
            break;
        const cJSON *lab = jo(site, "label");
        snprintf(r->sites[r->nsites].label, sizeof r->sites[r->nsites].label, "%s",
                 cJSON_IsString(lab) ? lab->valuestring : "?");
        r->sites[r->nsites].peak = ju(site, "peak");
        r->nsites++;
    }
}

/* Prints a result: JSON text or the summary's text. */
static void print_result(const cJSON *root, const breakdown *bd, int json, int top)
{
    if (!json) {
        print_text(root, top);
        if (bd)
            bd_print_text(bd);
        return;
    }
    char *text = cJSON_PrintUnformatted(root);
    if (text)
        printf("%s\n", text);
    else
        fprintf(stderr, "memsnap summary: out of memory\n");
    cJSON_free(text);
}

/* Several files: a section per file, then the cross-rank table, read from
 * each file's result (its "process" peaks, the figures its own lines
 * print). */
static int summarize_several(char **paths, int n, int json, int marks, int top,
                             const cat_rules *rules)
{
    cJSON *all = cJSON_CreateObject();
    cJSON *files = all ? cJSON_AddArrayToObject(all, "files") : NULL;
    cJSON *ra = all ? cJSON_AddArrayToObject(all, "ranks") : NULL;
    if (!files || !ra) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        cJSON_Delete(all);
        return 2;
    }
    rank_file *rf = calloc((size_t)n, sizeof *rf);
    if (!rf) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        cJSON_Delete(all);
        return 2;
    }
    int rc = 0, hi = 0;
    uint64_t hi_res = 0;
    for (int i = 0; i < n; i++) {
        cJSON *root = NULL;
        breakdown *bd = NULL;
        int r = summarize(paths[i], marks, top, rules, &root, &bd);
        if (r == 2) {
            free(rf);
            cJSON_Delete(all);
            return 2;
        }
        if (!json) {
            printf("%s==== %s (%d of %d) ====\n", i ? "\n" : "", paths[i], i + 1, n);
            print_result(root, bd, 0, top);
        }
        bd_free(bd);
        rank_of(root, paths[i], &rf[i]);
        cJSON_AddItemToArray(files, root);
        if (r > rc)
            rc = r;
        const cJSON *p = jo(root, "process");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", paths[i]);
        add_u64(o, "peak_reserved", ju(jo(p, "reserved"), "peak"));
        if (cJSON_IsNull(jo(p, "allocated")))
            cJSON_AddNullToObject(o, "peak_allocated");
        else
            add_u64(o, "peak_allocated", ju(jo(p, "allocated"), "peak"));
        add_u64(o, "ooms", ju(root, "oom_count"));
        cJSON_AddItemToArray(ra, o);
        if (i == 0 || ju(o, "peak_reserved") > hi_res) {
            hi = i;
            hi_res = ju(o, "peak_reserved");
        }
    }
    cJSON_AddStringToObject(all, "highest_peak_reserved", paths[hi]);
    if (json) {
        ranks_add_json(rf, n, all);
        print_result(all, NULL, 1, top);
    } else {
        char a[32], b[32];
        int w = 4;
        for (int i = 0; i < n; i++)
            if ((int)strlen(paths[i]) > w)
                w = (int)strlen(paths[i]);
        printf("\n==== %d files (one per rank) ====\n", n);
        printf("  %-*s  %-14s %-14s %s\n", w, "file", "peak reserved",
               "peak allocated", "OOMs");
        int i = 0;
        const cJSON *o;
        cJSON_ArrayForEach(o, ra) {
            printf("  %-*s  %-14s %-14s %" PRIu64 "%s\n", w, paths[i],
                   jsize(o, "peak_reserved", a),
                   cJSON_IsNull(jo(o, "peak_allocated")) ? "n/a"
                                                         : jsize(o, "peak_allocated", b),
                   ju(o, "ooms"), i == hi ? "   <- highest peak" : "");
            i++;
        }
        printf("highest peak reserved: %s (%s)\n", paths[hi], msnap_size_text(hi_res, a, sizeof a));
        ranks_print_text(rf, n);
    }
    free(rf);
    cJSON_Delete(all);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "memsnap summary: cannot write the output\n");
        return 2;
    }
    return rc;
}

/* memsnap summary: see usage_text.  Returns the process exit status. */
int cmd_summary(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"top", required_argument, NULL, 't'},
        {"marks", no_argument, NULL, 'm'},
        {"category-rules", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int json = 0, marks = 0, top = 10, c;
    const char *rules_path = getenv("MEMSNAP_CATEGORY_RULES");
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'm': marks = 1; break;
        case 'c': rules_path = optarg; break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 1000000)
                return cli_usage_error("summary", "--top wants a count, got \"%s\"", optarg);
            top = (int)v;
            break;
        }
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return cli_option_error("summary", argv, "h", opts);
        }
    }
    int nfiles = argc - optind;
    if (nfiles < 1)
        return cli_usage_error("summary", "expected one snapshot file or more, got 0");
    cat_rules *rules = cat_rules_new();
    char err[1024];
    if (!rules) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        return 2;
    }
    if (rules_path && *rules_path &&
        cat_rules_load(rules, rules_path, err, sizeof err) != 0) {
        fprintf(stderr, "memsnap summary: %s\n", err);
        cat_rules_free(rules);
        return 2;
    }
    sm_demangle_allow_loading(1);
    int rc;
    if (nfiles == 1) {
        cJSON *root = NULL;
        breakdown *bd = NULL;
        rc = summarize(argv[optind], marks, top, rules, &root, &bd);
        if (rc != 2) {
            print_result(root, bd, json, top);
            if (fflush(stdout) != 0) {
                fprintf(stderr, "memsnap summary: cannot write the output\n");
                rc = 2;
            }
        }
        bd_free(bd);
        cJSON_Delete(root);
    } else {
        rc = summarize_several(argv + optind, nfiles, json, marks, top, rules);
    }
    cat_rules_free(rules);
    return rc;
}

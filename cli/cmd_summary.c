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
#include "model.h"
#include "ranks.h"
#include "summary.h"

#define TOP_FRAMES 4 /* frames shown per allocation site / OOM */

static const char usage_text[] =
    "usage: memsnap summary SNAP [SNAP...] [--json] [--top N] [--marks]\n"
    "                       [--category-rules FILE]\n"
    "\n"
    "Reads a snapshot (plain or zstd; \"-\" = stdin) in one streaming pass and\n"
    "prints: the header, event counts per action and API, per-device peaks\n"
    "(reserved, async, managed, allocated, VMM), pinned host memory, OOM\n"
    "events, failed frees, what was still live at the end, the top\n"
    "allocation sites by peak live bytes (each named by its first frame\n"
    "outside the CUDA / allocator libraries), findings, NVTX marks, and per\n"
    "device: the driver's used memory (NVML, when recorded) against what was\n"
    "recorded, by library, and memory by category (parameters, gradients,\n"
    "optimizer state, activations, KV cache, workspaces, communication).\n"
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

/* A duration in ns for people: "850 ns", "12.500 us", "3.250 ms",
 * "12.345 s".  Returns buf. */
static const char *fmt_time(uint64_t ns, char *buf, size_t cap)
{
    if (ns < 1000)
        snprintf(buf, cap, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, cap, "%.3f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, cap, "%.3f ms", (double)ns / 1e6);
    else
        snprintf(buf, cap, "%.3f s", (double)ns / 1e9);
    return buf;
}

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

static void print_findings(vm_model *m);

/* The labels of the listed sites, told apart (viz/label.c); NULL when out
 * of memory.  free() the result. */
static char (*site_labels(const vm_model *m, const sm_site *sites, size_t n))[VM_LABEL_MAX]
{
    char (*labs)[VM_LABEL_MAX] = malloc((n + 1) * sizeof *labs);
    uint32_t *stacks = malloc((n + 1) * sizeof *stacks);
    if (!labs || !stacks) {
        free(labs);
        free(stacks);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        stacks[i] = sites[i].stack;
    vm_site_labels(m, stacks, (int)n, labs);
    free(stacks);
    return labs;
}

/* ---- text --------------------------------------------------------------- */

/* "peak X at T s, final Y" for one level. */
static void print_level(const char *name, const sm_level *l)
{
    char a[32], b[32], t[32];
    printf("  %-10s peak %-11s at %-12s final %s\n", name,
           summary_fmt_size(l->peak, a, sizeof a),
           fmt_time(l->peak_t, t, sizeof t),
           summary_fmt_size(l->cur, b, sizeof b));
}

/* Frame i of a stack as the summary prints it, from the file's tables that
 * the findings model keeps (viz/symtab.h; a size-0 last module record
 * reaches upwards).  Returns the stack's depth, 0 when unknown. */
static int frame(const vm_model *m, uint32_t stack, int i, char *buf,
                 size_t cap)
{
    return vm_symtab_frame(vm_symtab_of(m), stack, i, VM_MOD_OPEN_LAST, buf,
                           cap);
}

/* Prints up to TOP_FRAMES frames of a stack, indented. */
static void print_frames(const vm_model *m, uint32_t stack, const char *indent)
{
    char f[1024];
    if (!stack) {
        printf("%s(no stack recorded)\n", indent);
        return;
    }
    int depth = frame(m, stack, 0, f, sizeof f);
    if (!depth) {
        printf("%s(stack %" PRIu32 " not in the file)\n", indent, stack);
        return;
    }
    for (int i = 0; i < depth && i < TOP_FRAMES; i++) {
        frame(m, stack, i, f, sizeof f);
        printf("%s%s\n", indent, f);
    }
    if (depth > TOP_FRAMES)
        printf("%s... %d more frames\n", indent, depth - TOP_FRAMES);
}

/* Prints "name count, name count, ..." for the non-zero entries. */
static void print_counts(const char *title, const uint64_t *v, int n,
                         const char *(*name)(int))
{
    int col = printf("  %-10s", title), first = 1;
    for (int i = 0; i < n; i++) {
        if (!v[i])
            continue;
        char item[96];
        int len = snprintf(item, sizeof item, "%s%s %" PRIu64,
                           first ? "" : ", ", name(i), v[i]);
        if (col + len > 78) {
            printf(",\n  %-10s", "");
            col = 12;
            len = snprintf(item, sizeof item, "%s %" PRIu64, name(i), v[i]);
        }
        col += printf("%s", item);
        first = 0;
    }
    if (first)
        printf("none");
    printf("\n");
}

static void print_text(summary *s, vm_model *m, const char *path, int top)
{
    char a[32], b[32], c[32], t[32], cmd[2048];
    printf("snapshot   %s (format %d.%d, mode %s)\n", path, s->major,
           s->minor, s->mode[0] ? s->mode : "?");
    printf("command    %s\n", command_line(s, cmd, sizeof cmd));
    printf("process    pid %" PRId64 " on %s, duration %s\n", s->pid,
           s->host[0] ? s->host : "?", fmt_time(s->t_last, t, sizeof t));
    for (int i = 0; i < s->ndevinfo; i++)
        printf("device %-3d %s, %s\n", s->devinfo[i].index,
               s->devinfo[i].name,
               summary_fmt_size(s->devinfo[i].total, a, sizeof a));
    if (s->truncated)
        printf("(file truncated after line %" PRIu64
               ": the process probably died; shown up to there)\n", s->lines);
    if (s->trailer_seen)
        printf("trailer    reason %s, %" PRIu64 " events written, %" PRIu64
               " dropped, %" PRIu64 " without stack\n",
               s->tr_reason, s->tr_events, s->tr_dropped,
               s->tr_stacks_dropped);

    printf("\nevents     %" PRIu64 "\n", s->events);
    print_counts("by action", s->by_action, MSNAP_A_COUNT, msnap_action_name);
    print_counts("by api", s->by_api, MSNAP_API_COUNT, msnap_api_name);

    for (int d = 0; d < SM_NDEV; d++) {
        sm_device *v = &s->dev[d];
        if (!v->seen)
            continue;
        if (d == SM_DEV_UNKNOWN)
            printf("\ndevice ? (unknown ordinal)\n");
        else
            printf("\ndevice %d\n", d);
        print_level("reserved", &v->reserved);
        if (v->async.peak)
            print_level("async", &v->async);
        if (v->managed.peak)
            print_level("managed", &v->managed);
        if (v->vmm_va.peak)
            print_level("vmm VA", &v->vmm_va);
        if (v->vmm_mapped.peak)
            print_level("vmm mapped", &v->vmm_mapped);
        if (s->allocated_seen)
            print_level("allocated", &v->allocated);
        printf("  live at end: %" PRIu64 " allocation%s, %s\n", v->live_count,
               plural(v->live_count),
               summary_fmt_size(v->live_bytes, a, sizeof a));
    }
    if (!s->allocated_seen)
        printf("\nallocated layer: not seen (no memsnap allocator in this "
               "process); reserved shown\n");
    uint64_t hc, hb;
    summary_host_live(s, &hc, &hb);
    if (s->pinned.peak || hc)
        printf("\npinned host  peak %s at %s, live at end %" PRIu64
               " allocation%s, %s\n",
               summary_fmt_size(s->pinned.peak, a, sizeof a),
               fmt_time(s->pinned.peak_t, t, sizeof t), hc, plural(hc),
               summary_fmt_size(hb, b, sizeof b));

    printf("\nOOM events: %" PRIu64, s->n_oom);
    if (s->n_alloc_error)
        printf(" (and %" PRIu64 " other failed allocations)",
               s->n_alloc_error);
    printf("\n");
    for (size_t i = 0; i < s->nfails; i++) {
        const sm_fail *f = &s->fails[i];
        printf("  %s at %s on device %d: requested %s, device free %s of "
               "%s, %s (CUresult %d)\n",
               f->action == MSNAP_A_OOM ? "OOM" : "alloc error",
               fmt_time(f->t, t, sizeof t),
               f->device, summary_fmt_size(f->size, a, sizeof a),
               f->dev_total ? summary_fmt_size(f->dev_free, b, sizeof b) : "?",
               f->dev_total ? summary_fmt_size(f->dev_total, c, sizeof c) : "?",
               msnap_api_name(f->api), f->result);
        print_frames(m, f->stack, "      ");
    }
    printf("failed frees: %" PRIu64 "\n", s->n_free_error);
    for (size_t i = 0; i < s->nfree_fails; i++) {
        const sm_fail *f = &s->free_fails[i];
        printf("  at %s: 0x%" PRIx64 " %s (CUresult %d)\n",
               fmt_time(f->t, t, sizeof t),
               f->addr, msnap_api_name(f->api), f->result);
        print_frames(m, f->stack, "      ");
    }
    if (s->unmatched_frees)
        printf("frees of allocations not in the file: %" PRIu64
               " (ring window, or recording started late)\n",
               s->unmatched_frees);

    uint64_t lc = 0, lb = 0;
    for (int d = 0; d < SM_NDEV; d++) {
        lc += s->dev[d].live_count;
        lb += s->dev[d].live_bytes;
    }
    printf("\nstill live at end: %" PRIu64 " device allocation%s, %s%s\n",
           lc, plural(lc), summary_fmt_size(lb, a, sizeof a),
           lc ? " (at a clean exit, a leak hint)" : "");
    if (s->state_seen)
        printf("recorder state at %s: %" PRIu64 " live objects holding %s of device memory\n",
               fmt_time(s->state_t, t, sizeof t), s->state_nlive,
               summary_fmt_size(s->state_bytes, a, sizeof a));

    size_t nsites;
    const sm_site *sites = summary_sites_by_peak(s, &nsites);
    if (top > 0 && nsites) {
        size_t shown = nsites < (size_t)top ? nsites : (size_t)top;
        char (*labs)[VM_LABEL_MAX] = site_labels(m, sites, shown);
        printf("\ntop %zu allocation sites by peak live bytes:\n", shown);
        for (size_t i = 0; i < shown; i++) {
            const sm_site *st = &sites[i];
            printf("  #%-2zu peak %-11s %6" PRIu64 " alloc%s, %s total, "
                   "live at end %s  [%s, stack %" PRIu32 "]\n",
                   i + 1, summary_fmt_size(st->peak, a, sizeof a), st->count,
                   plural(st->count),
                   summary_fmt_size(st->bytes, b, sizeof b),
                   summary_fmt_size(st->live, c, sizeof c),
                   msnap_action_name(st->kind), st->stack);
            if (labs)
                printf("      site: %s\n", labs[i]);
            print_frames(m, st->stack, "      ");
        }
        free(labs);
    }

    print_findings(m);

    printf("\nnvtx marks: %" PRIu64 "\n", s->n_marks);
    for (size_t i = 0; i < s->nmarks; i++) {
        const sm_mark *mk = &s->marks[i];
        printf("  %-12s \"%s\"\n", fmt_time(mk->t, t, sizeof t),
               vm_str(m, mk->str));
        for (int d = 0; d < mk->ndev; d++)
            printf("      device %d: reserved %s, async %s, allocated %s\n",
                   d, summary_fmt_size(mk->vals[d].reserved, a, sizeof a),
                   summary_fmt_size(mk->vals[d].async, b, sizeof b),
                   s->allocated_seen
                       ? summary_fmt_size(mk->vals[d].allocated, c, sizeof c)
                       : "not seen");
    }
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
static cJSON *json_level(const sm_level *l)
{
    cJSON *o = cJSON_CreateObject();
    add_u64(o, "peak", l->peak);
    add_u64(o, "peak_t_ns", l->peak_t);
    add_u64(o, "final", l->cur);
    return o;
}

/* ["frame", ...] for a stack (at most TOP_FRAMES... all frames in JSON). */
static cJSON *json_frames(const vm_model *m, uint32_t stack)
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
static cJSON *json_fail(const vm_model *m, const sm_fail *f, int is_free)
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


/* ---- findings (viz/model.h) --------------------------------------------- */

/* Feeds a record read by summary_read to the findings model. */
static int feed_model(void *ctx, const msnap_record *r)
{
    return vm_feed(ctx, r);
}

static const char *at_name(int at)
{
    switch (at) {
    case VM_AT_OOM: return "oom";
    case VM_AT_PEAK: return "peak";
    case VM_AT_TIME: return "time";
    default: return "end";
    }
}

/* What the numbers of an OOM say, in one sentence. */
static const char *oom_verdict(const vm_oom *o)
{
    if (!o->blocks_seen) {
        if (o->dev_total && o->requested > o->dev_free)
            return "the device did not have the requested bytes free; no "
                   "allocator blocks, so memory cached inside reserved is "
                   "not known";
        return "no allocator blocks, so memory cached inside reserved is "
               "not known";
    }
    if (o->largest_free >= o->requested)
        return "the largest free block inside reserved would have held it: "
               "the allocator asked the driver instead of reusing its cache";
    if (o->total_free + o->dev_free >= o->requested)
        return "enough memory was free in total (inside reserved + on the "
               "device), but no single free block was large enough: "
               "fragmentation";
    return "the device was full: even all free memory together was smaller "
           "than the request";
}

static void print_findings(vm_model *m)
{
    char a[32], b[32], c[32], d[32], t[32];
    size_t nleaks;
    uint64_t nvalleys, f0, f1;
    const vm_leak *leaks = vm_leaks(m, &nleaks, &nvalleys);
    size_t nsites;
    const vm_site *sites = vm_sites(m, &nsites);
    vm_floor(m, &f0, &f1);
    printf("\nfindings (stacked layer: %s)\n",
           vm_blocks_seen(m) ? "allocator blocks"
                             : "reserved only, the allocator reports no blocks");
    printf("leak suspects: %zu", nleaks);
    if (nvalleys >= 2)
        printf(" (%" PRIu64 " valleys of the total; the floor went "
               "from %s to %s)", nvalleys, summary_fmt_size(f0, a, sizeof a),
               summary_fmt_size(f1, b, sizeof b));
    else
        printf(" (%" PRIu64 " valleys of the total: too few to judge)",
               nvalleys);
    printf("\n");
    for (size_t i = 0; i < nleaks && i < 10; i++) {
        const vm_site *st = &sites[leaks[i].site];
        printf("  #%-2zu live at valleys %s -> %s, rose %" PRIu32 " time%s, fell %"
               PRIu32 "; live at end %s  [%s, stack %" PRIu32 "]\n",
               i + 1, summary_fmt_size(leaks[i].first, a, sizeof a),
               summary_fmt_size(leaks[i].last, b, sizeof b), leaks[i].rises,
               plural(leaks[i].rises), leaks[i].falls,
               summary_fmt_size(st->live, c, sizeof c),
               msnap_action_name(st->kind), st->stack);
        print_frames(m, st->stack, "      ");
    }

    const vm_layout *l = vm_layout_at(m);
    printf("fragmentation");
    if (l->valid)
        printf(" (at %s, t = %s)", l->at == VM_AT_OOM ? "the first OOM"
                                   : l->at == VM_AT_PEAK ? "the peak of reserved"
                                   : l->at == VM_AT_TIME ? "the chosen time"
                                                         : "the end",
               fmt_time(l->t_ns, t, sizeof t));
    printf("\n");
    for (int dv = 0; dv < VM_NDEV; dv++) {
        const vm_dev *v = vm_device(m, dv);
        const vm_dev_layout *dl = l->valid ? &l->dev[dv] : NULL;
        if (!v->seen || (!v->peak_reserved && (!dl || !dl->segments)))
            continue;
        printf("  device %d: %" PRIu64 " segments, %s of memory",
               dv == VM_DEV_UNKNOWN ? -1 : dv, dl ? dl->segments : 0,
               summary_fmt_size(dl ? dl->mapped_bytes : 0, a, sizeof a));
        if (vm_blocks_seen(m) && dl)
            printf(", %s in blocks; free inside reserved %s, largest free "
                   "block %s\n", summary_fmt_size(dl->block_bytes, b, sizeof b),
                   summary_fmt_size(dl->total_free, c, sizeof c),
                   summary_fmt_size(dl->largest_free, d, sizeof d));
        else
            printf("\n");
        if (vm_blocks_seen(m) && dl && dl->total_free)
            printf("    1 - largest_free/total_free     = %.3f\n",
                   1.0 - (double)dl->largest_free / (double)dl->total_free);
        else if (vm_blocks_seen(m))
            printf("    1 - largest_free/total_free     = 0 (nothing free)\n");
        else
            printf("    1 - largest_free/total_free     = n/a (no allocator blocks)\n");
        if (vm_blocks_seen(m) && v->peak_reserved)
            printf("    1 - peak_allocated/peak_reserved = %.3f (peaks %s / %s)\n",
                   1.0 - (double)v->peak_allocated / (double)v->peak_reserved,
                   summary_fmt_size(v->peak_allocated, a, sizeof a),
                   summary_fmt_size(v->peak_reserved, b, sizeof b));
        else
            printf("    1 - peak_allocated/peak_reserved = n/a (no allocator blocks)\n");
    }

    size_t nooms;
    uint64_t total_ooms;
    const vm_oom *oo = vm_ooms(m, &nooms, &total_ooms);
    if (nooms) {
        printf("OOM story (%zu of %zu failed allocation%s):\n", nooms < 3 ? nooms : 3,
               nooms, nooms == 1 ? "" : "s");
        for (size_t i = 0; i < nooms && i < 3; i++) {
            const vm_oom *o = &oo[i];
            printf("  at %s on device %d: requested %s; allocated %s, reserved %s, "
                   "device free %s",
                   fmt_time(o->t_ns, t, sizeof t), o->device,
                   summary_fmt_size(o->requested, a, sizeof a),
                   summary_fmt_size(o->allocated, b, sizeof b),
                   summary_fmt_size(o->reserved, c, sizeof c),
                   o->dev_total ? summary_fmt_size(o->dev_free, d, sizeof d) : "?");
            if (o->blocks_seen)
                printf(", free inside reserved %s, largest free block %s",
                       summary_fmt_size(o->total_free, a, sizeof a),
                       summary_fmt_size(o->largest_free, b, sizeof b));
            printf("\n    -> %s\n", oom_verdict(o));
        }
    }
}

/* The findings as a JSON object. */
static cJSON *json_findings(vm_model *m)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "stacked_layer",
                            vm_blocks_seen(m) ? "blocks" : "reserved");
    size_t nleaks, nsites;
    uint64_t nvalleys, f0, f1;
    const vm_leak *leaks = vm_leaks(m, &nleaks, &nvalleys);
    const vm_site *sites = vm_sites(m, &nsites);
    vm_floor(m, &f0, &f1);
    add_u64(f, "valleys", nvalleys);
    cJSON *fl = cJSON_AddObjectToObject(f, "floor");
    add_u64(fl, "first", f0);
    add_u64(fl, "last", f1);
    cJSON *la = cJSON_AddArrayToObject(f, "leak_suspects");
    for (size_t i = 0; i < nleaks; i++) {
        const vm_site *st = &sites[leaks[i].site];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", st->stack);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(st->kind));
        cJSON_AddNumberToObject(o, "device", st->device == VM_DEV_UNKNOWN ? -1 : st->device);
        add_u64(o, "first_valley_bytes", leaks[i].first);
        add_u64(o, "last_valley_bytes", leaks[i].last);
        add_u64(o, "rises", leaks[i].rises);
        add_u64(o, "falls", leaks[i].falls);
        add_u64(o, "live_at_end", st->live);
        cJSON_AddItemToObject(o, "frames", json_frames(m, st->stack));
        cJSON_AddItemToArray(la, o);
    }
    const vm_layout *l = vm_layout_at(m);
    cJSON *fr = cJSON_AddObjectToObject(f, "fragmentation");
    cJSON_AddStringToObject(fr, "at", l->valid ? at_name(l->at) : "none");
    add_u64(fr, "t_ns", l->t_ns);
    cJSON *fd = cJSON_AddArrayToObject(fr, "devices");
    for (int dv = 0; dv < VM_NDEV; dv++) {
        const vm_dev *v = vm_device(m, dv);
        const vm_dev_layout *dl = &l->dev[dv];
        if (!v->seen || (!v->peak_reserved && !dl->segments))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", dv == VM_DEV_UNKNOWN ? -1 : dv);
        add_u64(o, "segments", dl->segments);
        add_u64(o, "memory_bytes", dl->mapped_bytes);
        add_u64(o, "address_space_bytes", dl->segment_bytes);
        if (vm_blocks_seen(m)) {
            add_u64(o, "block_bytes", dl->block_bytes);
            add_u64(o, "total_free", dl->total_free);
            add_u64(o, "largest_free", dl->largest_free);
            cJSON_AddNumberToObject(o, "frag_free",
                                    dl->total_free ? 1.0 - (double)dl->largest_free /
                                                               (double)dl->total_free
                                                   : 0.0);
            add_u64(o, "peak_allocated", v->peak_allocated);
            add_u64(o, "peak_reserved", v->peak_reserved);
            if (v->peak_reserved)
                cJSON_AddNumberToObject(o, "frag_peak",
                                        1.0 - (double)v->peak_allocated /
                                                  (double)v->peak_reserved);
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
    const vm_oom *oo = vm_ooms(m, &nooms, NULL);
    cJSON *oa = cJSON_AddArrayToObject(f, "oom_story");
    for (size_t i = 0; i < nooms; i++) {
        const vm_oom *o = &oo[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "action", msnap_action_name(o->action));
        add_u64(x, "t_ns", o->t_ns);
        cJSON_AddNumberToObject(x, "device", o->device);
        add_u64(x, "requested", o->requested);
        add_u64(x, "allocated", o->allocated);
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
        cJSON_AddStringToObject(x, "verdict", oom_verdict(o));
        cJSON_AddItemToArray(oa, x);
    }
    return f;
}

/* Builds the whole JSON object; NULL when out of memory. */
static cJSON *build_json(summary *s, vm_model *m, const char *path, int top)
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

    cJSON_AddBoolToObject(root, "allocated_seen", s->allocated_seen);
    cJSON *da = cJSON_AddArrayToObject(root, "devices");
    for (int d = 0; d < SM_NDEV; d++) {
        sm_device *v = &s->dev[d];
        if (!v->seen)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", d == SM_DEV_UNKNOWN ? -1 : d);
        cJSON_AddItemToObject(o, "reserved", json_level(&v->reserved));
        cJSON_AddItemToObject(o, "async", json_level(&v->async));
        cJSON_AddItemToObject(o, "managed", json_level(&v->managed));
        cJSON_AddItemToObject(o, "vmm_va", json_level(&v->vmm_va));
        cJSON_AddItemToObject(o, "vmm_mapped", json_level(&v->vmm_mapped));
        if (s->allocated_seen)
            cJSON_AddItemToObject(o, "allocated", json_level(&v->allocated));
        else
            cJSON_AddNullToObject(o, "allocated");
        cJSON *l = cJSON_AddObjectToObject(o, "live_at_end");
        add_u64(l, "count", v->live_count);
        add_u64(l, "bytes", v->live_bytes);
        cJSON_AddItemToArray(da, o);
    }
    uint64_t hc, hb;
    summary_host_live(s, &hc, &hb);
    cJSON *ho = json_level(&s->pinned);
    add_u64(ho, "live_count", hc);
    add_u64(ho, "live_bytes", hb);
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
    add_u64(root, "unmatched_frees", s->unmatched_frees);

    uint64_t lc = 0, lb = 0;
    for (int d = 0; d < SM_NDEV; d++) {
        lc += s->dev[d].live_count;
        lb += s->dev[d].live_bytes;
    }
    cJSON *le = cJSON_AddObjectToObject(root, "live_at_end");
    add_u64(le, "count", lc);
    add_u64(le, "bytes", lb);
    if (s->state_seen) {
        cJSON *st = cJSON_AddObjectToObject(root, "state");
        add_u64(st, "t_ns", s->state_t);
        add_u64(st, "live", s->state_nlive);
        add_u64(st, "bytes", s->state_bytes);
    }

    size_t nsites;
    const sm_site *sites = summary_sites_by_peak(s, &nsites);
    cJSON *ta = cJSON_AddArrayToObject(root, "top_sites");
    size_t shown = top > 0 ? (nsites < (size_t)top ? nsites : (size_t)top) : 0;
    char (*labs)[VM_LABEL_MAX] = shown ? site_labels(m, sites, shown) : NULL;
    for (size_t i = 0; i < shown; i++) {
        const sm_site *st = &sites[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stack", st->stack);
        if (labs)
            cJSON_AddStringToObject(o, "label", labs[i]);
        cJSON_AddStringToObject(o, "kind", msnap_action_name(st->kind));
        cJSON_AddNumberToObject(o, "device", st->device);
        add_u64(o, "peak", st->peak);
        add_u64(o, "peak_t_ns", st->peak_t);
        add_u64(o, "count", st->count);
        add_u64(o, "bytes_total", st->bytes);
        add_u64(o, "live_at_end", st->live);
        add_u64(o, "live_count_at_end", st->live_count);
        cJSON_AddItemToObject(o, "frames", json_frames(m, st->stack));
        cJSON_AddItemToArray(ta, o);
    }
    free(labs);

    cJSON_AddItemToObject(root, "findings", json_findings(m));
    add_u64(root, "nvtx_marks", s->n_marks);
    if (s->want_marks) {
        cJSON *ma = cJSON_AddArrayToObject(root, "marks");
        for (size_t i = 0; i < s->nmarks; i++) {
            const sm_mark *mk = &s->marks[i];
            cJSON *o = cJSON_CreateObject();
            add_u64(o, "t_ns", mk->t);
            cJSON_AddStringToObject(o, "message", vm_str(m, mk->str));
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

/* ---- entry point -------------------------------------------------------- */

/* What the cross-rank table needs of one file. */
typedef struct rank_row {
    uint64_t peak_reserved, peak_allocated, ooms;
    int blocks;
    rank_file sites;   /* for which rank peaked highest and where (ranks.h) */
} rank_row;

/* Fills r with the file's peak and its top sites by label. */
static void rank_sites(summary *s, const vm_model *m, const char *path,
                       uint64_t peak, rank_file *r)
{
    size_t n;
    const sm_site *sites = summary_sites_by_peak(s, &n);
    r->path = path;
    r->peak = peak;
    r->nsites = n < RANK_SITES ? n : RANK_SITES;
    char (*labs)[VM_LABEL_MAX] = r->nsites ? site_labels(m, sites, r->nsites) : NULL;
    for (size_t i = 0; i < r->nsites; i++) {
        snprintf(r->sites[i].label, sizeof r->sites[i].label, "%s",
                 labs ? labs[i] : "?");
        r->sites[i].peak = sites[i].peak;
    }
    free(labs);
}

/* Summarizes one file: prints the text (json == 0) or builds the JSON
 * object into *root.  Fills *row.  Returns 0, 1 (an OOM) or 2 (unreadable,
 * message printed). */
static int summarize(const char *path, int json, int marks, int top,
                     const cat_rules *rules, cJSON **root, rank_row *row)
{
    summary s;
    char err[1024];
    summary_init(&s, marks);
    /* The findings model (viz/model.h) sees the same records in the same
     * pass; a second pass only when the fragmentation moment is the peak
     * (known at the end) and the input is a file. */
    vm_opts mo = {.top = 8, .columns = 0, .at = VM_AT_DEFAULT};
    vm_model *m = vm_new(&mo);
    if (!m) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        return 2;
    }
    s.feed = feed_model;
    s.feed_ctx = m;
    if (summary_read(&s, path, err, sizeof err) != 0 ||
        (vm_end_pass1(m) != 0 &&
         snprintf(err, sizeof err, "%s: out of memory", path) > 0)) {
        fprintf(stderr, "%s\n", err);
        summary_free(&s);
        vm_free(m);
        return 2;
    }
    if (strcmp(path, "-") != 0 && vm_read_pass2(m, path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        summary_free(&s);
        vm_free(m);
        return 2;
    }
    /* Reconciliation and categories (breakdown.h): a pass of their own,
     * once the tables (stacks, modules, syms) are complete. */
    breakdown *bd = strcmp(path, "-") != 0 ? bd_new(rules) : NULL;
    if (bd && bd_read(bd, path, vm_symtab_of(m), err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        bd_free(bd);
        summary_free(&s);
        vm_free(m);
        return 2;
    }
    int rc = s.n_oom ? 1 : 0;
    vm_peak_totals(m, &row->peak_allocated, &row->peak_reserved);
    row->blocks = vm_blocks_seen(m);
    row->ooms = s.n_oom;
    rank_sites(&s, m, path, row->peak_reserved, &row->sites);
    if (json) {
        *root = build_json(&s, m, path, top);
        if (*root && bd)
            bd_add_json(bd, *root);
        if (!*root) {
            fprintf(stderr, "memsnap summary: out of memory\n");
            rc = 2;
        }
    } else {
        print_text(&s, m, path, top);
        if (bd)
            bd_print_text(bd);
    }
    bd_free(bd);
    summary_free(&s);
    vm_free(m);
    return rc;
}

/* The rows' rank_file parts as one array (ranks.h); NULL when out of
 * memory.  free() it. */
static rank_file *rank_files(const rank_row *rows, int n)
{
    rank_file *rf = malloc((size_t)n * sizeof *rf);
    for (int i = 0; rf && i < n; i++)
        rf[i] = rows[i].sites;
    return rf;
}

/* Several files: a section per file, then the cross-rank table. */
static int summarize_several(char **paths, int n, int json, int marks, int top,
                             const cat_rules *rules)
{
    rank_row *rows = calloc((size_t)n, sizeof *rows);
    cJSON *all = json ? cJSON_CreateObject() : NULL;
    cJSON *files = all ? cJSON_AddArrayToObject(all, "files") : NULL;
    if (!rows || (json && !files)) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        free(rows);
        cJSON_Delete(all);
        return 2;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (!json)
            printf("%s==== %s (%d of %d) ====\n", i ? "\n" : "", paths[i], i + 1, n);
        cJSON *root = NULL;
        int r = summarize(paths[i], json, marks, top, rules, json ? &root : NULL,
                          &rows[i]);
        if (r == 2) {
            free(rows);
            cJSON_Delete(all);
            return 2;
        }
        if (root)
            cJSON_AddItemToArray(files, root);
        if (r > rc)
            rc = r;
    }
    int hi = 0;
    for (int i = 1; i < n; i++)
        if (rows[i].peak_reserved > rows[hi].peak_reserved)
            hi = i;
    char a[32], b[32];
    if (json) {
        cJSON *ra = cJSON_AddArrayToObject(all, "ranks");
        for (int i = 0; i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", paths[i]);
            add_u64(o, "peak_reserved", rows[i].peak_reserved);
            if (rows[i].blocks)
                add_u64(o, "peak_allocated", rows[i].peak_allocated);
            else
                cJSON_AddNullToObject(o, "peak_allocated");
            add_u64(o, "ooms", rows[i].ooms);
            cJSON_AddItemToArray(ra, o);
        }
        cJSON_AddStringToObject(all, "highest_peak_reserved", paths[hi]);
        {
            rank_file *rf = rank_files(rows, n);
            if (rf)
                ranks_add_json(rf, n, all);
            free(rf);
        }
        char *text = cJSON_PrintUnformatted(all);
        cJSON_Delete(all);
        if (!text) {
            fprintf(stderr, "memsnap summary: out of memory\n");
            free(rows);
            return 2;
        }
        printf("%s\n", text);
        cJSON_free(text);
    } else {
        int w = 4;
        for (int i = 0; i < n; i++)
            if ((int)strlen(paths[i]) > w)
                w = (int)strlen(paths[i]);
        printf("\n==== %d files (one per rank) ====\n", n);
        printf("  %-*s  %-14s %-14s %s\n", w, "file", "peak reserved",
               "peak allocated", "OOMs");
        for (int i = 0; i < n; i++)
            printf("  %-*s  %-14s %-14s %" PRIu64 "%s\n", w, paths[i],
                   summary_fmt_size(rows[i].peak_reserved, a, sizeof a),
                   rows[i].blocks ? summary_fmt_size(rows[i].peak_allocated, b, sizeof b)
                                  : "n/a",
                   rows[i].ooms, i == hi ? "   <- highest peak" : "");
        printf("highest peak reserved: %s (%s)\n", paths[hi],
               summary_fmt_size(rows[hi].peak_reserved, a, sizeof a));
        rank_file *rf = rank_files(rows, n);
        if (rf)
            ranks_print_text(rf, n);
        free(rf);
    }
    free(rows);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "memsnap summary: cannot write the output\n");
        return 2;
    }
    return rc;
}

static int summarize_files(char **paths, int nfiles, int json, int marks,
                           int top, const cat_rules *rules);

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
            if (!*optarg || *end || v < 0 || v > 1000000) {
                fprintf(stderr, "memsnap summary: --top wants a count, got "
                                "\"%s\"; try memsnap summary --help\n", optarg);
                return 2;
            }
            top = (int)v;
            break;
        }
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            fprintf(stderr, "memsnap summary: unknown or incomplete option "
                            "\"%s\"; try memsnap --help\n", argv[optind - 1]);
            return 2;
        }
    }
    int nfiles = argc - optind;
    if (nfiles < 1) {
        fprintf(stderr, "memsnap summary: expected one snapshot file or more, "
                        "got 0; try memsnap --help\n");
        return 2;
    }
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
    vm_demangle_allow_loading(1);
    int rc = summarize_files(argv + optind, nfiles, json, marks, top, rules);
    cat_rules_free(rules);
    return rc;
}

/* One file or several (see usage_text); returns the exit status. */
static int summarize_files(char **paths, int nfiles, int json, int marks,
                           int top, const cat_rules *rules)
{
    if (nfiles == 1) {
        cJSON *root = NULL;
        rank_row row;
        int rc = summarize(paths[0], json, marks, top, rules,
                           json ? &root : NULL, &row);
        if (rc == 2)
            return 2;
        if (json) {
            char *text = cJSON_PrintUnformatted(root);
            cJSON_Delete(root);
            if (!text) {
                fprintf(stderr, "memsnap summary: out of memory\n");
                return 2;
            }
            printf("%s\n", text);
            cJSON_free(text);
        }
        if (fflush(stdout) != 0) {
            fprintf(stderr, "memsnap summary: cannot write the output\n");
            return 2;
        }
        return rc;
    }
    return summarize_several(paths, nfiles, json, marks, top, rules);
}

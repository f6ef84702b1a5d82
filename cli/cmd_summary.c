/* memsnap summary: what a snapshot says, in one screen (or one JSON object).
 *
 * This file parses the arguments and prints; the result object it prints
 * from is analyze/report.c's (msnap_summarize: one read of the file).
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
#include "report.h"
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

/* The layers whose sites are ranked, each on its own (state.h). */
static const int site_layers[] = {MSNAP_LAYER_RESERVED, MSNAP_LAYER_ALLOCATED,
                                  MSNAP_LAYER_PINNED};

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

/* Prints up to TOP_FRAMES frames of an entry with "stack" and "frames",
 * after its "runtime_frames" (sites, leak suspects, OOMs, failed frees). */
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
    /* the memory runtime's frames (driver, allocator, recorder) are not the
     * program's: the listing starts after them */
    int skip = ji(o, "runtime_frames");
    if (skip < 0 || skip >= depth)
        skip = 0;
    for (int i = skip; i < depth && i < skip + TOP_FRAMES; i++)
        printf("%s%s\n", indent, cJSON_GetArrayItem(fr, i)->valuestring);
    if (depth > skip + TOP_FRAMES)
        printf("%s... %d more frames\n", indent, depth - skip - TOP_FRAMES);
}

/* "peak X at T s, final Y" for one level object (and, for PyTorch's
 * blocks, the bytes requested at the peak). */
static void print_level(const char *name, const cJSON *l)
{
    char a[32], b[32], t[32];
    printf("  %-10s peak %-11s at %-12s final %s", name, jsize(l, "peak", a),
           msnap_time_text(ju(l, "peak_t_ns"), t, sizeof t), jsize(l, "final", b));
    if (jo(l, "requested_at_peak") && ju(l, "requested_at_peak") != ju(l, "peak"))
        printf(" (as PyTorch counts it; %s requested)", jsize(l, "requested_at_peak", a));
    printf("\n");
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

/* The top sites of one layer; null: the layer was not seen.  pytorch: the
 * reserved layer of a PyTorch run, whose PyTorch segments are one line
 * (what they hold is the allocated layer's list). */
static void print_sites(const cJSON *ts, const char *layer, int top, int pytorch,
                        uint64_t reserved_peak)
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
    if (!n && !(pytorch && !strcmp(layer, "reserved")))
        return;
    int i = 0;
    const cJSON *x;
    if (pytorch && !strcmp(layer, "reserved")) {
        printf("\nreserved (driver memory): peak %s, PyTorch's segments (what they hold is the\n"
               "allocated layer above; the rest is its cache)%s\n",
               msnap_size_text(reserved_peak, a, sizeof a),
               n ? " and other libraries':" : "");
    } else {
        printf("\ntop %d %s site%s by peak live bytes:\n", n, layer, plural((uint64_t)n));
    }
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
    int nleaks = cJSON_GetArraySize(leaks);
    if (nvalleys < 3)
        printf("leak suspects: none (%" PRIu64 " valley%s of the total: too few to judge)",
               nvalleys, plural(nvalleys));
    else if (!nleaks)
        printf("leak suspects: none (no site's live bytes kept rising across the %" PRIu64
               " valleys of the total)", nvalleys);
    else
        printf("leak suspects: %d (sites whose live bytes kept rising across the %" PRIu64
               " valleys of the total, which went from %s to %s)", nleaks, nvalleys,
               jsize(jo(f, "floor"), "first", a), jsize(jo(f, "floor"), "last", b));
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
        if (blocks && ju(x, "other_library_bytes"))
            printf(", %s in blocks, %s other libraries' (cuBLAS, cuDNN, NCCL); free "
                   "inside reserved %s, largest free block %s\n",
                   jsize(x, "block_bytes", b), jsize(x, "other_library_bytes", t),
                   jsize(x, "total_free", c), jsize(x, "largest_free", d));
        else if (blocks)
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
    else if (!strcmp(js(h, "mode"), "stream") || !strcmp(js(h, "mode"), "ring"))
        /* the recorder writes one at exit and at every dump */
        printf("trailer    none: the process did not end through the recorder (killed, "
               "crashed, _exit, or still running); what came after the last flush "
               "(MEMSNAP_FLUSH_MS, 100 ms by default) is not here\n");

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
    if (jo(le, "blocks")) {
        /* with an allocator, its blocks are what the program still holds;
         * the driver memory is the allocator's cache (freed at exit) */
        uint64_t bc = ju(le, "blocks");
        printf("\nstill allocated at end: %" PRIu64 " block%s, %s%s\n", bc, plural(bc),
               jsize(le, "block_bytes", a), bc ? " (at a clean exit, a leak hint)" : "");
        printf("still reserved at end: %" PRIu64 " device allocation%s, %s (the allocator's "
               "segments and other libraries' memory)\n", lc, plural(lc), jsize(le, "bytes", b));
    } else {
        printf("\nstill live at end: %" PRIu64 " device allocation%s, %s%s\n",
               lc, plural(lc), jsize(le, "bytes", a),
               lc ? " (at a clean exit, a leak hint)" : "");
    }
    const cJSON *so = jo(r, "state");
    if (so)
        printf("recorder state at %s: %" PRIu64 " live objects holding %s of device memory\n",
               msnap_time_text(ju(so, "t_ns"), t, sizeof t), ju(so, "live"),
               jsize(so, "bytes", a));

    /* a PyTorch run: the allocated layer first (the program's tensors),
     * then the driver memory around it */
    int pytorch = cJSON_IsTrue(jo(r, "pytorch"));
    static const int torch_layers[] = {MSNAP_LAYER_ALLOCATED, MSNAP_LAYER_RESERVED,
                                       MSNAP_LAYER_PINNED};
    const int *order = pytorch ? torch_layers : site_layers;
    uint64_t res_peak = ju(jo(jo(r, "process"), "reserved"), "peak");
    for (size_t k = 0; k < sizeof site_layers / sizeof site_layers[0]; k++)
        print_sites(jo(r, "top_sites"), msnap_layer_name(order[k]), top, pytorch, res_peak);

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

/* msnap_summarize (report.h), its error on stderr.  0, 1 (an OOM) or 2. */
static int summarize(const char *path, int marks, int top, const cat_rules *rules,
                     cJSON **root, breakdown **bd)
{
    char err[1280];
    msnap_summary_opts o = {.marks = marks, .top = top, .rules = rules};
    int rc = msnap_summarize(path, &o, root, bd, err, sizeof err);
    if (rc == 2)
        fprintf(stderr, "%s\n", err);
    return rc;
}

/* Adds a site by label unless one of that label is there (the blocks a
 * call made and the segment the allocator reserved for it share one). */
static void rank_add(rank_file *r, const cJSON *site)
{
    const cJSON *lab = jo(site, "label");
    const char *l = cJSON_IsString(lab) ? lab->valuestring : "?";
    if (r->nsites == RANK_SITES)
        return;
    for (size_t i = 0; i < r->nsites; i++)
        if (!strncmp(r->sites[i].label, l, sizeof r->sites[i].label - 1))
            return;
    snprintf(r->sites[r->nsites].label, sizeof r->sites[r->nsites].label, "%s", l);
    r->sites[r->nsites].peak = ju(site, "peak");
    r->nsites++;
}

/* The file's peak (reserved, all devices) and the sites that hold its
 * memory, by label, from its result, for the cross-rank comparison
 * (ranks.h): the allocated layer's sites first when it has one (what
 * fills an allocator's segments: a PyTorch run's reserved list leaves
 * PyTorch's segments out), then the reserved layer's. */
static void rank_of(const cJSON *root, const char *path, rank_file *r)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->peak = ju(jo(jo(root, "process"), "reserved"), "peak");
    const cJSON *site;
    cJSON_ArrayForEach(site, jo(jo(root, "top_sites"), "allocated"))
        rank_add(r, site);
    cJSON_ArrayForEach(site, jo(jo(root, "top_sites"), "reserved"))
        rank_add(r, site);
}

/* Keeps the first `top` sites of each layer's list (--top). */
static void trim_sites(cJSON *root, int top)
{
    cJSON *layer;
    cJSON_ArrayForEach(layer, jo(root, "top_sites"))
        while (cJSON_GetArraySize(layer) > top)
            cJSON_DeleteItemFromArray(layer, cJSON_GetArraySize(layer) - 1);
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
        /* the comparison sees up to RANK_SITES sites of each file, whatever
         * --top shows (a site beyond one file's top N is still its site) */
        int r = summarize(paths[i], marks, top > RANK_SITES ? top : RANK_SITES, rules, &root,
                          &bd);
        if (r == 2) {
            free(rf);
            cJSON_Delete(all);
            return 2;
        }
        rank_of(root, paths[i], &rf[i]);
        trim_sites(root, top);
        if (!json) {
            printf("%s==== %s (%d of %d) ====\n", i ? "\n" : "", paths[i], i + 1, n);
            print_result(root, bd, 0, top);
        }
        bd_free(bd);
        cJSON_AddItemToArray(files, root);
        if (r > rc)
            rc = r;
        const cJSON *p = jo(root, "process");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", paths[i]);
        msnap_json_u64(o, "peak_reserved", ju(jo(p, "reserved"), "peak"));
        if (cJSON_IsNull(jo(p, "allocated")))
            cJSON_AddNullToObject(o, "peak_allocated");
        else
            msnap_json_u64(o, "peak_allocated", ju(jo(p, "allocated"), "peak"));
        msnap_json_u64(o, "ooms", ju(root, "oom_count"));
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

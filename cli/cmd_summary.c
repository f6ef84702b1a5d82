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
 * Several files (one per rank): the job view (cmd_job.c, analyze/job.h),
 * read on -j threads; with --each, a section per file, then a short
 * cross-rank table (peak reserved, OOMs, the rank with the highest peak).
 * Either way the output is the same for every -j.
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

#include "analyze/breakdown.h"
#include "cli.h"
#include "options.h"
#include "summary_pools.h"
#include "analyze/findings.h"
#include "analyze/model.h"
#include "analyze/ranks.h"
#include "analyze/report.h"
#include "analyze/summary.h"
#include "parallel.h"
#include "summary_text.h"
#include "analyze/result_json.h"

static int show_stacks; /* --stacks: every site's frames in the text */

static const char usage_text[] =
    "usage: memsnap summary SNAP [SNAP...] [--json] [--top N] [--stacks]\n"
    "                       [--marks] [--category-rules FILE] [--each] [-j N]\n"
    "\n"
    "Reads a snapshot (plain or zstd; \"-\" = stdin) once and prints first the\n"
    "answer: the peaks (allocated: what flame --at peak draws; reserved:\n"
    "render's segment map at --at peak; the driver's used figure), what was\n"
    "live at the peak by site (the top 5, each with its share and categories),\n"
    "and the findings (OOMs, leak suspects, fragmentation, what was still\n"
    "allocated at the end).  Then the details: event counts per action and\n"
    "API, per-device levels (reserved, async, managed, allocated, VMM),\n"
    "pinned host memory, failed frees, the top allocation sites of every\n"
    "layer by peak live bytes (each named by its first frame outside the\n"
    "CUDA / allocator libraries), the findings in full, NVTX marks, the\n"
    "driver table and the categories.\n"
    "Several SNAPs (one per rank): the job view, as memsnap job prints it\n"
    "(ranks, imbalance, divergent sites, failures; memsnap job --help).\n"
    "\n"
    "  --json       one JSON object with the same content (exact byte counts)\n"
    "  --top N      allocation sites to list (default 10, 0 = none)\n"
    "  --stacks     each site's frames (and each OOM's, leak suspect's)\n"
    "  --marks      reserved/async/allocated per device at every nvtx_mark\n"
    "  --category-rules FILE  category rules tried before the defaults\n"
    "               (default: $MEMSNAP_CATEGORY_RULES; format in docs/cli.md)\n"
    "  --each       several SNAPs: every file's full summary, then a table of\n"
    "               peak reserved and OOMs per file and the file with the\n"
    "               highest peak (--top, --marks and --category-rules apply to\n"
    "               each file's summary)\n"
    "  -j, --jobs N files read at once (default: the number of cores); the\n"
    "               output is the same for every N\n"
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

/* Size of a member, as text into buf. */
static const char *jsize(const cJSON *o, const char *key, char *buf)
{
    return msnap_size_text(ju(o, key), buf, 32);
}

/* Prints the frames of an entry with "stack" and "frames" (--stacks),
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
        printf("%s(its stack is not in the file)\n", indent);
        return;
    }
    /* the memory runtime's frames (driver, allocator, recorder) are not the
     * program's: the listing starts after them */
    int skip = ji(o, "runtime_frames");
    if (skip < 0 || skip >= depth)
        skip = 0;
    for (int i = skip; i < depth; i++)
        printf("%s%s\n", indent, cJSON_GetArrayItem(fr, i)->valuestring);
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

/* "  #1  peak ... [kind, device N]" and its label; with stacks its frames. */
static void print_site(const cJSON *x, int i, int stacks)
{
    char a[32], b[32], c[32];
    uint64_t count = ju(x, "count");
    printf("  #%-2d peak %-11s %6" PRIu64 " alloc%s, %s total, live at end %s  [%s, device %d]\n",
           i, jsize(x, "peak", a), count, plural(count), jsize(x, "bytes_total", b),
           jsize(x, "live_at_end", c), js(x, "kind"), ji(x, "device"));
    if (jo(x, "label"))
        printf("      site: %s\n", js(x, "label"));
    if (stacks)
        print_frames(x, "      ");
}

/* The top sites of one layer; null: the layer was not seen.  pytorch: the
 * reserved layer of a PyTorch run, whose PyTorch segments are one line
 * (what they hold is the allocated layer's list), the other libraries'
 * memory by library. */
static void print_sites(const cJSON *ts, const char *layer, int top, int pytorch,
                        uint64_t reserved_peak, int stacks)
{
    char a[32];
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
               n ? " and other libraries', by library:" : "");
        /* by library, in the order of each library's first (largest) site */
        const char *libs[32];
        int nlibs = 0;
        cJSON_ArrayForEach(x, list) {
            int k = 0;
            while (k < nlibs && strcmp(libs[k], js(x, "library")))
                k++;
            if (k == nlibs && nlibs < 32)
                libs[nlibs++] = js(x, "library");
        }
        for (int k = 0; k < nlibs; k++) {
            uint64_t live = 0, peak = 0;
            int ns = 0;
            cJSON_ArrayForEach(x, list)
                if (!strcmp(js(x, "library"), libs[k])) {
                    live += ju(x, "live_at_end");
                    peak += ju(x, "peak");
                    ns++;
                }
            char b[32];
            printf("  %s: %d site%s, live at end %s (peaks add up to %s)\n", libs[k], ns,
                   plural((uint64_t)ns), msnap_size_text(live, a, sizeof a),
                   msnap_size_text(peak, b, sizeof b));
            cJSON_ArrayForEach(x, list)
                if (!strcmp(js(x, "library"), libs[k]))
                    print_site(x, ++i, stacks);
        }
        return;
    }
    printf("\ntop %d %s site%s by peak live bytes:\n", n, layer, plural((uint64_t)n));
    cJSON_ArrayForEach(x, list)
        print_site(x, ++i, stacks);
}

/* The fragmentation part of the findings, in full. */
static void print_fragmentation(const cJSON *f, int blocks)
{
    char a[32], b[32], c[32], d[32], t[32];
    const cJSON *fr = jo(f, "fragmentation"), *x;
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
}

/* The leak suspects line and, with max > 0, the first max of them. */
static void print_leaks(const cJSON *f, int max, int stacks)
{
    char a[32], b[32], c[32];
    const cJSON *leaks = jo(f, "leak_suspects"), *x;
    uint64_t nvalleys = ju(f, "valleys");
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
        if (i == max)
            break;
        uint64_t rises = ju(x, "rises");
        printf("  #%-2d live at valleys %s -> %s, rose %" PRIu64 " time%s, fell %" PRIu64
               "; live at end %s  [%s]\n", ++i, jsize(x, "first_valley_bytes", a),
               jsize(x, "last_valley_bytes", b), rises, plural(rises), ju(x, "falls"),
               jsize(x, "live_at_end", c), js(x, "kind"));
        printf("      site: %s\n", js(x, "label"));
        if (stacks)
            print_frames(x, "      ");
    }
    if (nleaks > max && max > 0)
        printf("  ... %d more (--json lists them all)\n", nleaks - max);
}

/* The OOM story (the model's verdicts), up to max. */
static void print_story(const cJSON *f, int max)
{
    char a[32], b[32], c[32], d[32], t[32];
    const cJSON *story = jo(f, "oom_story"), *x;
    int nooms = cJSON_GetArraySize(story);
    if (!nooms)
        return;
    printf("OOM story (%d of %d failed allocation%s):\n", nooms < max ? nooms : max,
           nooms, nooms == 1 ? "" : "s");
    int i = 0;
    cJSON_ArrayForEach(x, story) {
        if (i++ == max)
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

/* The failed allocations: a count, then the first max, each with its site
 * (with stacks, its frames). */
static void print_ooms(const cJSON *r, int max, int stacks)
{
    char a[32], b[32], c[32], t[32];
    uint64_t noom = ju(r, "oom_count"), nerr = ju(r, "alloc_error_count");
    printf("OOM events: %" PRIu64, noom);
    if (nerr)
        printf(" (and %" PRIu64 " other failed allocation%s)", nerr, plural(nerr));
    printf("\n");
    const cJSON *x;
    int i = 0, n = cJSON_GetArraySize(jo(r, "ooms"));
    cJSON_ArrayForEach(x, jo(r, "ooms")) {
        if (i++ == max)
            break;
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
        printf("      site: %s\n", js(x, "label"));
        if (stacks)
            print_frames(x, "      ");
    }
    uint64_t all = noom + nerr;
    if (all > (uint64_t)(max < n ? max : n) && n)
        printf("  ... %" PRIu64 " more%s\n", all - (uint64_t)(max < n ? max : n),
               all > (uint64_t)n ? " (the file keeps the first ones; --json lists those)"
                                 : " (--json lists them all)");
}

/* Whether a device's result has a reserved or an allocated peak. */
static int device_has_peak(const cJSON *x)
{
    return ju(jo(x, "reserved"), "peak") ||
           (!cJSON_IsNull(jo(x, "allocated")) && ju(jo(x, "allocated"), "peak"));
}

/* The peaks of one device in the first screen: allocated (what flame --at
 * peak draws), reserved (render's segment map at --at peak), and the
 * driver's used figure with what no allocation explains. */
static void print_peaks(const cJSON *r, const cJSON *x, int pytorch)
{
    char a[32], b[32], c[32], t[32];
    int d = ji(x, "device");
    const cJSON *al = jo(x, "allocated"), *rs = jo(x, "reserved");
    if (d < 0)
        printf("  device ? (unknown ordinal)\n");
    if (!cJSON_IsNull(al) && ju(al, "peak")) {
        printf("  allocated  %-11s at %-11s", jsize(al, "peak", a),
               msnap_time_text(ju(al, "peak_t_ns"), t, sizeof t));
        if (pytorch && jo(al, "requested_at_peak") && ju(al, "requested_at_peak") != ju(al, "peak"))
            printf(" PyTorch's tensors (%s requested);", jsize(al, "requested_at_peak", a));
        else
            printf(" the allocator's blocks;");
        printf(" what flame --at peak draws\n");
    }
    printf("  reserved   %-11s at %-11s", jsize(rs, "peak", a),
           msnap_time_text(ju(rs, "peak_t_ns"), t, sizeof t));
    const cJSON *rc, *rec = NULL;
    cJSON_ArrayForEach(rc, jo(r, "reconcile"))
        if (ji(rc, "device") == d)
            rec = rc;
    if (!cJSON_IsNull(al))
        printf(" driver memory; render's segment map at --at peak\n");
    else
        printf(" driver memory (no allocator blocks seen); render --at peak\n");
    if (rec && !cJSON_IsNull(jo(rec, "device_used"))) {
        const cJSON *u = jo(rec, "unexplained");
        const char *s = cJSON_IsRaw(u) ? u->valuestring : "0";
        printf("  device     %-11s used (NVML) at %s: ", jsize(rec, "device_used", a),
               msnap_time_text(ju(rec, "t_ns"), t, sizeof t));
        if (s[0] == '-')
            printf("%s recorded, more than NVML saw then\n", jsize(rec, "recorded", b));
        else
            printf("%s of it outside any allocation (CUDA context, module images, other "
                   "processes)\n", msnap_size_text(strtoull(s, NULL, 10), c, sizeof c));
    }
}

/* "live at the peak" (at_peak): the first max sites with their share and
 * categories, the rest in one line, then the categories. */
static void print_at_peak(const cJSON *r, int max, int stacks)
{
    char a[32], b[32], t[32];
    const cJSON *p = jo(r, "at_peak"), *x;
    if (!p || cJSON_IsNull(p))
        return;
    uint64_t total = ju(p, "bytes"), nsites = ju(p, "sites_total");
    int blocks = !strcmp(js(p, "layer"), "allocated");
    printf("\nlive at the peak of %s (t = %s): %s in %" PRIu64 " site%s\n",
           blocks ? "allocated" : "reserved", msnap_time_text(ju(p, "t_ns"), t, sizeof t),
           msnap_size_text(total, a, sizeof a), nsites, plural(nsites));
    int i = 0;
    uint64_t shown = 0;
    cJSON_ArrayForEach(x, jo(p, "sites")) {
        if (i == max)
            break;
        char cats[96] = "";
        const cJSON *c;
        int nc = 0;
        cJSON_ArrayForEach(c, jo(x, "categories")) {
            if (nc++ == 2)
                break;
            size_t l = strlen(cats);
            snprintf(cats + l, sizeof cats - l, "%s%s", l ? "+" : "", js(c, "category"));
        }
        shown += ju(x, "bytes");
        printf("  #%-2d %-11s %3.0f%%  %-16s %s\n", ++i, jsize(x, "bytes", a),
               total ? 100.0 * (double)ju(x, "bytes") / (double)total : 0.0,
               cats[0] ? cats : "-", js(x, "label"));
        if (stacks)
            print_frames(x, "      ");
    }
    if (nsites > (uint64_t)i)
        printf("      %" PRIu64 " more site%s: %s\n", nsites - (uint64_t)i,
               plural(nsites - (uint64_t)i), msnap_size_text(total - shown, b, sizeof b));
    const cJSON *c;
    int first = 1;
    cJSON_ArrayForEach(c, jo(p, "categories")) {
        printf("%s%s %s", first ? "  by category: " : ", ", js(c, "category"),
               jsize(c, "bytes", a));
        first = 0;
    }
    if (!first)
        printf("\n");
}

/* The first screen of findings: OOMs, leaks, fragmentation in one line,
 * what was still allocated at the end. */
static void print_findings_short(const cJSON *r, int stacks)
{
    char a[32], b[32], t[32];
    const cJSON *f = jo(r, "findings"), *x;
    int blocks = !strcmp(js(f, "stacked_layer"), "blocks");
    printf("\nfindings\n");
    print_ooms(r, 3, stacks);
    print_story(f, 1);
    print_leaks(f, 3, stacks);
    const cJSON *fr = jo(f, "fragmentation");
    cJSON_ArrayForEach(x, jo(fr, "devices")) {
        if (!blocks)
            break;
        printf("fragmentation at %s (%s), device %d: %s free inside reserved, largest free "
               "block %s",
               !strcmp(js(fr, "at"), "oom") ? "the first OOM" : "the peak of reserved",
               msnap_time_text(ju(fr, "t_ns"), t, sizeof t), ji(x, "device"),
               jsize(x, "total_free", a), jsize(x, "largest_free", b));
        if (ju(x, "total_free"))
            printf(" (1 - largest/free = %.3f)", jo(x, "frag_free")->valuedouble);
        if (ju(x, "peak_reserved"))
            printf("; 1 - peak allocated/peak reserved = %.3f", jo(x, "frag_peak")->valuedouble);
        printf("\n");
    }
    const cJSON *le = jo(r, "live_at_end");
    if (jo(le, "blocks")) {
        uint64_t bc = ju(le, "blocks");
        printf("still allocated at end: %" PRIu64 " block%s, %s%s\n", bc, plural(bc),
               jsize(le, "block_bytes", a), bc ? " (at a clean exit, a leak hint)" : "");
    } else {
        uint64_t lc = ju(le, "count");
        printf("still live at end: %" PRIu64 " device allocation%s, %s%s\n",
               lc, plural(lc), jsize(le, "bytes", a),
               lc ? " (at a clean exit, a leak hint)" : "");
    }
}

/* The whole result of one file as text: the first screen (the peaks, what
 * was live at the peak by site, the findings), then the details (events,
 * levels, the top sites of every layer, the findings in full, marks). */
static void print_text(const cJSON *r, int top, int stacks)
{
    char a[32], b[32], c[32], t[32];
    const cJSON *h = jo(r, "header"), *x;
    printf("snapshot   %s (format %s, mode %s)\n", js(r, "file"), js(r, "version"),
           js(h, "mode")[0] ? js(h, "mode") : "?");
    printf("command    %s\n", js(h, "command"));
    printf("process    pid %" PRId64 " on %s, duration %s, %" PRIu64 " events\n",
           (int64_t)ju(h, "pid"), js(h, "host")[0] ? js(h, "host") : "?",
           msnap_time_text(ju(h, "duration_ns"), t, sizeof t), ju(jo(r, "events"), "total"));
    cJSON_ArrayForEach(x, jo(h, "devices"))
        printf("device %-3d %s, %s\n", ji(x, "index"), js(x, "name"),
               ju(x, "total") ? jsize(x, "total", a) : "memory unknown");
    if (cJSON_IsTrue(jo(r, "truncated")))
        printf("(file truncated after line %" PRIu64
               ": the process probably died; shown up to there)\n", ju(r, "lines"));
    const cJSON *tr = jo(r, "trailer");
    if (!cJSON_IsNull(tr) && (ju(tr, "dropped") || ju(tr, "stacks_dropped")))
        printf("trailer    reason %s, %" PRIu64 " events written, %" PRIu64
               " dropped, %" PRIu64 " without stack\n", js(tr, "reason"),
               ju(tr, "events"), ju(tr, "dropped"), ju(tr, "stacks_dropped"));
    else if (cJSON_IsNull(tr) && (!strcmp(js(h, "mode"), "stream") || !strcmp(js(h, "mode"), "ring")))
        /* the recorder writes one at exit and at every dump */
        printf("trailer    none: the process did not end through the recorder (killed, "
               "crashed, _exit, or still running); what came after the last flush "
               "(MEMSNAP_FLUSH_MS, 100 ms by default) is not here\n");

    /* ---- the first screen ---- */
    int pytorch = cJSON_IsTrue(jo(r, "pytorch"));
    int allocated_seen = cJSON_IsTrue(jo(r, "allocated_seen"));
    printf("\npeaks\n");
    int ndev = 0;
    cJSON_ArrayForEach(x, jo(r, "devices"))
        ndev += device_has_peak(x);
    cJSON_ArrayForEach(x, jo(r, "devices")) {
        if (!device_has_peak(x))
            continue;     /* nothing on it (address space only, a device line) */
        if (ndev > 1 && ji(x, "device") >= 0)
            printf("  device %d\n", ji(x, "device"));
        print_peaks(r, x, pytorch);
    }
    if (!ndev)
        printf("  none: no device memory was live\n");
    if (!allocated_seen)
        printf("  allocated layer: not seen (no allocator blocks in this file); reserved "
               "shown\n");
    print_at_peak(r, top < 5 ? top : 5, stacks);
    print_findings_short(r, stacks);
    printf("\n(below: events, levels, every layer's sites, the findings in full, the driver "
           "table and the categories;\n --stacks adds each site's frames, --json has it all)\n");

    /* ---- the details ---- */
    printf("\n---- details\n");
    const cJSON *ev = jo(r, "events");
    printf("events     %" PRIu64 "\n", ju(ev, "total"));
    print_counts("by action", jo(ev, "by_action"));
    print_counts("by api", jo(ev, "by_api"));
    if (!cJSON_IsNull(tr))
        printf("trailer    reason %s, %" PRIu64 " events written, %" PRIu64
               " dropped, %" PRIu64 " without stack\n", js(tr, "reason"),
               ju(tr, "events"), ju(tr, "dropped"), ju(tr, "stacks_dropped"));

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
    const cJSON *pin = jo(r, "pinned_host");
    uint64_t hc = ju(pin, "live_count");
    if (ju(pin, "peak") || hc)
        printf("\npinned host  peak %s at %s, live at end %" PRIu64
               " allocation%s, %s\n", jsize(pin, "peak", a),
               msnap_time_text(ju(pin, "peak_t_ns"), t, sizeof t), hc,
               plural(hc), jsize(pin, "live_bytes", b));

    summary_print_pools(r);
    printf("\nfailed frees: %" PRIu64 "\n", ju(r, "failed_free_count"));
    cJSON_ArrayForEach(x, jo(r, "failed_frees")) {
        printf("  at %s: 0x%" PRIx64 " %s (CUresult %d)\n",
               msnap_time_text(ju(x, "t_ns"), t, sizeof t), ju(x, "addr"),
               js(x, "api"), ji(x, "result"));
        printf("      site: %s\n", js(x, "label"));
        if (stacks)
            print_frames(x, "      ");
    }
    if (ju(r, "unmatched_frees"))
        printf("frees of allocations not in the file: %" PRIu64
               " (ring window, or recording started late)\n",
               ju(r, "unmatched_frees"));

    const cJSON *le = jo(r, "live_at_end");
    uint64_t lc = ju(le, "count");
    if (jo(le, "blocks"))
        printf("still reserved at end: %" PRIu64 " device allocation%s, %s (the allocator's "
               "segments and other libraries' memory)\n", lc, plural(lc), jsize(le, "bytes", b));
    const cJSON *so = jo(r, "state");
    if (so) {
        /* its own count of live objects mixes blocks and segments: only its
         * bytes are shown, against what the read found live */
        printf("recorder state at %s: %s of device memory live", msnap_time_text(ju(so, "t_ns"), t,
                                                                                 sizeof t),
               jsize(so, "bytes", a));
        if (ju(so, "bytes") == ju(le, "bytes"))
            printf(", as read\n");
        else
            printf(" (the events read leave %s)\n", jsize(le, "bytes", c));
    }

    /* a PyTorch run: the allocated layer first (the program's tensors),
     * then the driver memory around it */
    static const int torch_layers[] = {MSNAP_LAYER_ALLOCATED, MSNAP_LAYER_RESERVED,
                                       MSNAP_LAYER_PINNED};
    const int *order = pytorch ? torch_layers : site_layers;
    uint64_t res_peak = ju(jo(jo(r, "process"), "reserved"), "peak");
    for (size_t k = 0; k < sizeof site_layers / sizeof site_layers[0]; k++)
        print_sites(jo(r, "top_sites"), msnap_layer_name(order[k]), top, pytorch, res_peak,
                    stacks);

    const cJSON *f = jo(r, "findings");
    int blocks = !strcmp(js(f, "stacked_layer"), "blocks");
    printf("\nfindings (stacked layer: %s)\n",
           blocks ? "allocator blocks" : "reserved only, the allocator reports no blocks");
    print_ooms(r, 10, stacks);
    print_story(f, 3);
    print_leaks(f, 10, stacks);
    print_fragmentation(f, blocks);

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

/* msnap_summarize (report.h) into *root, its error ("PATH: why") in err.
 * 0, 1 (an OOM) or 2. */
static int summarize(const char *path, int marks, int top, const cat_rules *rules,
                     cJSON **root, char *err, size_t errlen)
{
    msnap_summary_opts o = {.marks = marks, .top = top, .rules = rules};
    return msnap_summarize(path, &o, root, NULL, err, errlen);
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

/* Prints a result: JSON text or the summary's text (its driver breakdown
 * and categories from the result's own members, summary_text.h). */
static void print_result(const cJSON *root, int json, int top)
{
    if (!json) {
        print_text(root, top, show_stacks);
        summary_print_breakdown(root);
        return;
    }
    char *text = cJSON_PrintUnformatted(root);
    if (text)
        printf("%s\n", text);
    else
        fprintf(stderr, "memsnap summary: out of memory\n");
    cJSON_free(text);
}

/* --each: the files read on threads (parallel.h), each file's result
 * printed in file order as it comes. */
typedef struct each_ctx {
    char **paths;
    int n, json, marks, top;
    const cat_rules *rules;
    cJSON **roots;
    int *rcs;
    char (*errs)[1280];
    rank_file *rf;
    cJSON *files, *ra;
    int rc, hi;
    uint64_t hi_res;
} each_ctx;

static int each_read(void *c, int i)
{
    each_ctx *e = c;
    /* the comparison sees up to RANK_SITES sites of each file, whatever
     * --top shows (a site beyond one file's top N is still its site) */
    return summarize(e->paths[i], e->marks, e->top > RANK_SITES ? e->top : RANK_SITES,
                     e->rules, &e->roots[i], e->errs[i], sizeof e->errs[i]);
}

static int each_take(void *c, int i, int r)
{
    each_ctx *e = c;
    if (r == 2) {
        fprintf(stderr, "%s\n", e->errs[i]);
        return 2;
    }
    cJSON *root = e->roots[i];
    e->roots[i] = NULL;
    rank_of(root, e->paths[i], &e->rf[i]);
    trim_sites(root, e->top);
    if (!e->json) {
        printf("%s==== %s (%d of %d) ====\n", i ? "\n" : "", e->paths[i], i + 1, e->n);
        print_result(root, 0, e->top);
    }
    cJSON_AddItemToArray(e->files, root);
    if (r > e->rc)
        e->rc = r;
    const cJSON *p = jo(root, "process");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", e->paths[i]);
    msnap_json_u64(o, "peak_reserved", ju(jo(p, "reserved"), "peak"));
    if (cJSON_IsNull(jo(p, "allocated")))
        cJSON_AddNullToObject(o, "peak_allocated");
    else
        msnap_json_u64(o, "peak_allocated", ju(jo(p, "allocated"), "peak"));
    msnap_json_u64(o, "ooms", ju(root, "oom_count"));
    cJSON_AddItemToArray(e->ra, o);
    if (i == 0 || ju(o, "peak_reserved") > e->hi_res) {
        e->hi = i;
        e->hi_res = ju(o, "peak_reserved");
    }
    return 0;
}

/* Several files with --each: a section per file, then the cross-rank
 * table, read from each file's result (its "process" peaks, the figures
 * its own lines print). */
static int summarize_each(char **paths, int n, int json, int marks, int top,
                          const cat_rules *rules, int jobs)
{
    each_ctx e = {.paths = paths, .n = n, .json = json, .marks = marks, .top = top,
                  .rules = rules};
    cJSON *all = cJSON_CreateObject();
    e.files = all ? cJSON_AddArrayToObject(all, "files") : NULL;
    e.ra = all ? cJSON_AddArrayToObject(all, "ranks") : NULL;
    e.rf = calloc((size_t)n, sizeof *e.rf);
    e.roots = calloc((size_t)n, sizeof *e.roots);
    e.errs = malloc((size_t)n * sizeof *e.errs);
    int rc;
    if (!e.files || !e.ra || !e.rf || !e.roots || !e.errs) {
        fprintf(stderr, "memsnap summary: out of memory\n");
        rc = 2;
    } else if ((rc = par_run(n, jobs, each_read, each_take, &e, paths)) == 0) {
        cJSON_AddStringToObject(all, "highest_peak_reserved", paths[e.hi]);
        ranks_add_json(e.rf, n, all);
        if (json) {
            print_result(all, 1, top);
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
            cJSON_ArrayForEach(o, e.ra) {
                printf("  %-*s  %-14s %-14s %" PRIu64 "%s\n", w, paths[i],
                       jsize(o, "peak_reserved", a),
                       cJSON_IsNull(jo(o, "peak_allocated")) ? "n/a"
                                                             : jsize(o, "peak_allocated", b),
                       ju(o, "ooms"), i == e.hi ? "   <- highest peak" : "");
                i++;
            }
            printf("highest peak reserved: %s (%s)\n", paths[e.hi],
                   msnap_size_text(e.hi_res, a, sizeof a));
            summary_print_highest(jo(all, "highest_peak"));
        }
        rc = e.rc;
        if (fflush(stdout) != 0) {
            fprintf(stderr, "memsnap summary: cannot write the output\n");
            rc = 2;
        }
    }
    for (int i = 0; e.roots && i < n; i++)
        cJSON_Delete(e.roots[i]);
    free(e.roots);
    free(e.errs);
    free(e.rf);
    cJSON_Delete(all);
    return rc;
}

/* memsnap summary: see usage_text.  Returns the process exit status. */
int cmd_summary(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'J'},
        {"top", required_argument, NULL, 't'},
        {"marks", no_argument, NULL, 'm'},
        {"category-rules", required_argument, NULL, 'c'},
        {"stacks", no_argument, NULL, 's'},
        {"each", no_argument, NULL, 'e'},
        {"jobs", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int json = 0, marks = 0, top = 10, each = 0, jobs = par_default_jobs(), c;
    const char *rules_path = getenv("MEMSNAP_CATEGORY_RULES");
    show_stacks = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj:", opts, NULL)) != -1) {
        switch (c) {
        case 'J': json = 1; break;
        case 'e': each = 1; break;
        case 'j': case 'P':
            if (par_parse_jobs("summary", optarg, &jobs))
                return 2;
            break;
        case 'm': marks = 1; break;
        case 's': show_stacks = 1; break;
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
            return cli_option_error("summary", argv, "hj:", opts);
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
        char e1[1280];
        rc = summarize(argv[optind], marks, top, rules, &root, e1, sizeof e1);
        if (rc == 2) {
            fprintf(stderr, "%s\n", e1);
        } else {
            print_result(root, json, top);
            if (fflush(stdout) != 0) {
                fprintf(stderr, "memsnap summary: cannot write the output\n");
                rc = 2;
            }
        }
        cJSON_Delete(root);
    } else if (each) {
        rc = summarize_each(argv + optind, nfiles, json, marks, top, rules, jobs);
    } else {
        rc = job_run("summary", argv + optind, nfiles, json, jobs);
    }
    cat_rules_free(rules);
    return rc;
}

/* Sections of summary's text from its result object (summary_text.h).
 * The words and columns are those the library printed before (the golden
 * files of tests/cli/golden hold them); every figure is a member of the
 * result, so the text and --json cannot disagree. */
#include "summary_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/human.h"
#include "analyze/result_json.h"

static const char *sz(uint64_t v, char *buf)
{
    return msnap_size_text(v, buf, 32);
}

/* One reconcile entry (breakdown.h: the moment, device used, recorded by
 * library, PyTorch's two figures, what no allocation explains). */
static void print_reconcile(const cJSON *o)
{
    char a[32], c[32], t[32];
    int used = !jnull(o, "device_used");
    printf("\ndevice %d against the driver (at %s, t = %s)\n",
           (int)cJSON_GetNumberValue(jo(o, "device")),
           used ? "the counters sample with the highest device used"
                : "the peak of recorded memory",
           msnap_time_text(ju(o, "t_ns"), t, sizeof t));
    const cJSON *pk = jo(o, "recorded_peak");
    if (used && pk && !cJSON_IsNull(pk))
        printf("  (recorded memory peaked between samples: %s at %s)\n",
               sz(ju(pk, "bytes"), a), msnap_time_text(ju(pk, "t_ns"), c, sizeof c));
    if (used)
        printf("  device used (NVML, nvidia-smi) %s\n", sz(ju(o, "device_used"), a));
    else
        printf("  device used: not recorded (no NVML in the recording, or a "
               "file from before format 1.1)\n");
    printf("  recorded, all libraries       %s\n", sz(ju(o, "recorded"), a));
    const cJSON *l;
    cJSON_ArrayForEach(l, jo(o, "libraries"))
        printf("    %-27s %s\n", js(l, "library"), sz(ju(l, "bytes"), a));
    if (!jnull(o, "torch_reserved")) {
        printf("  PyTorch reserved              %s%s\n", sz(ju(o, "torch_reserved"), a),
               !strcmp(js(o, "torch_reserved_from"), "segments")
                   ? " (its segment events)" : " (driver memory from libc10_cuda)");
        if (!jnull(o, "torch_allocated"))
            printf("  PyTorch allocated             %s\n", sz(ju(o, "torch_allocated"), a));
        else
            printf("  PyTorch allocated             n/a (no torch block events)\n");
    }
    if (used) {
        /* "unexplained" is signed: a raw "-N" when recorded > device used */
        const cJSON *u = jo(o, "unexplained");
        const char *raw = cJSON_IsRaw(u) ? u->valuestring : "0";
        int neg = raw[0] == '-';
        printf("  not explained by allocations  %s%s (device used - "
               "recorded: CUDA context, module images, other processes)\n",
               neg ? "-" : "", sz(strtoull(raw + neg, NULL, 10), a));
    }
}

/* One categories entry. */
static void print_categories(const cJSON *o)
{
    char a[32], c[32], d[32], t[32];
    int oom = !jnull(o, "oom_t_ns");
    printf("\ndevice %d by category (layer: %s)\n", (int)cJSON_GetNumberValue(jo(o, "device")),
           !strcmp(js(o, "layer"), "blocks") ? "allocator blocks + other libraries' driver memory"
                                            : "driver allocations, no allocator blocks seen");
    if (oom)
        printf("  %-18s %-12s %-14s %s\n", "category", "peak", "at total peak", "at first OOM");
    else
        printf("  %-18s %-12s %s\n", "category", "peak", "at total peak");
    const cJSON *x;
    cJSON_ArrayForEach(x, jo(o, "items")) {
        if (oom)
            printf("  %-18s %-12s %-14s %s\n", js(x, "category"), sz(ju(x, "peak"), a),
                   sz(ju(x, "at_total_peak"), c), sz(ju(x, "at_oom"), d));
        else
            printf("  %-18s %-12s %s\n", js(x, "category"), sz(ju(x, "peak"), a),
                   sz(ju(x, "at_total_peak"), c));
    }
    printf("  %-18s %-12s at %s\n", "total", sz(ju(o, "total_peak"), a),
           msnap_time_text(ju(o, "total_peak_t_ns"), t, sizeof t));
}

void summary_print_breakdown(const cJSON *root)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, jo(root, "reconcile"))
        print_reconcile(x);
    cJSON_ArrayForEach(x, jo(root, "categories"))
        print_categories(x);
}

void summary_print_highest(const cJSON *hp)
{
    char a[32], b[32], c[32];
    if (!hp)
        return;
    printf("  by %s", sz(ju(hp, "above_next"), b));
    if (!jnull(hp, "above_next_pct"))
        printf(" (%.1f%%)", cJSON_GetNumberValue(jo(hp, "above_next_pct")));
    printf(" above the next highest, %s (%s)\n", js(hp, "next_file"),
           sz(ju(hp, "next_peak"), c));
    const cJSON *sites = jo(hp, "sites"), *x;
    if (cJSON_GetArraySize(sites))
        printf("sites higher on %s than on %s:\n", js(hp, "file"), js(hp, "next_file"));
    cJSON_ArrayForEach(x, sites)
        printf("  +%-11s %s (peak %s vs %s)\n", sz(ju(x, "difference"), a), js(x, "label"),
               sz(ju(x, "peak"), b), sz(ju(x, "peak_next"), c));
}

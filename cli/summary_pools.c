/* The pools section of `memsnap summary` (summary_pools.h): text from the
 * JSON that analyze/pools.c made, so the text and --json never disagree. */
#include "summary_pools.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/human.h"
#include "analyze/result_json.h"

static int known(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsRaw(v) || cJSON_IsNumber(v);
}

/* A size member as text, "unknown" when null. */
static const char *sz(const cJSON *o, const char *key, char *buf)
{
    return known(o, key) ? msnap_size_text(ju(o, key), buf, 32) : "unknown";
}

void summary_print_pools(const cJSON *root)
{
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(root, "pool_kinds");
    const cJSON *pools = cJSON_GetObjectItemCaseSensitive(root, "pools");
    static const struct { const char *key, *name; } kind[] = {
        {"graph", "CUDA graphs"}, {"mempool", "torch.cuda.MemPool"}};
    int any = 0;
    for (size_t k = 0; k < sizeof kind / sizeof kind[0]; k++)
        any |= cJSON_GetObjectItemCaseSensitive(kinds, kind[k].key) != NULL;
    if (!any)
        return;
    char a[32], b[32], c[32];
    printf("\npools (PyTorch's caching allocator)\n");
    for (size_t k = 0; k < sizeof kind / sizeof kind[0]; k++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(kinds, kind[k].key);
        if (!x)
            continue;
        uint64_t n = ju(x, "pools");
        printf("  %s: %" PRIu64 " pool%s, peak %s reserved, %s allocated\n", kind[k].name, n,
               n == 1 ? "" : "s", sz(x, "peak_reserved", a), sz(x, "peak_allocated", b));
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, pools) {
        const cJSON *kd = cJSON_GetObjectItemCaseSensitive(p, "kind");
        const char *kn = cJSON_IsString(kd) ? kd->valuestring : "?";
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(p, "torch_id");
        char idtext[64] = "";
        if (!strcmp(kn, "default"))
            snprintf(idtext, sizeof idtext, "default pool");
        else if (cJSON_GetArraySize(tid) == 2)
            snprintf(idtext, sizeof idtext, "%s pool (%" PRIu64 ", %" PRIu64 ")", kn,
                     (uint64_t)cJSON_GetArrayItem(tid, 0)->valuedouble,
                     (uint64_t)cJSON_GetArrayItem(tid, 1)->valuedouble);
        else
            snprintf(idtext, sizeof idtext, "%s pool %" PRIu64, kn, ju(p, "pool"));
        int dev = (int)cJSON_GetObjectItemCaseSensitive(p, "device")->valuedouble;
        printf("  device %d %s: peak %s reserved, %s allocated; at end %s reserved\n", dev,
               idtext, sz(p, "peak_reserved", a), sz(p, "peak_allocated", b),
               sz(p, "final_reserved", c));
        const cJSON *s;
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(p, "top_sites")) {
            const cJSON *l = cJSON_GetObjectItemCaseSensitive(s, "label");
            printf("      %10s  %s\n", sz(s, "peak", a), cJSON_IsString(l) ? l->valuestring : "?");
        }
    }
}

/* Which rank peaked highest, by how much, on which sites (ranks.h). */
#include "ranks.h"

#include <inttypes.h>
#include <stdio.h>

#include "util/human.h"
#include <string.h>

int ranks_highest(const rank_file *f, int n)
{
    int hi = 0;
    for (int i = 1; i < n; i++)
        if (f[i].peak > f[hi].peak)
            hi = i;
    return hi;
}

/* The file with the highest peak after hi (-1 when n < 2). */
static int next_highest(const rank_file *f, int n, int hi)
{
    int nx = -1;
    for (int i = 0; i < n; i++)
        if (i != hi && (nx < 0 || f[i].peak > f[nx].peak))
            nx = i;
    return nx;
}

/* Peak of the site labelled `label` in file f, 0 when it is not listed. */
static uint64_t site_peak(const rank_file *f, const char *label)
{
    for (size_t i = 0; i < f->nsites; i++)
        if (strcmp(f->sites[i].label, label) == 0)
            return f->sites[i].peak;
    return 0;
}

/* Sites of hi higher than in nx, largest difference first; returns how
 * many (at most RANK_SHOWN) with their indexes in idx. */
static int diff_sites(const rank_file *hi, const rank_file *nx, size_t *idx)
{
    size_t all[RANK_SITES];
    uint64_t dif[RANK_SITES];
    int n = 0;
    for (size_t i = 0; i < hi->nsites && i < RANK_SITES; i++) {
        uint64_t o = site_peak(nx, hi->sites[i].label);
        if (hi->sites[i].peak <= o)
            continue;
        int j = n++;
        for (; j > 0 && dif[j - 1] < hi->sites[i].peak - o; j--) {
            dif[j] = dif[j - 1];
            all[j] = all[j - 1];
        }
        dif[j] = hi->sites[i].peak - o;
        all[j] = i;
    }
    if (n > RANK_SHOWN)
        n = RANK_SHOWN;
    memcpy(idx, all, (size_t)n * sizeof *idx);
    return n;
}

/* Percent of a above b (b > 0). */
static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)(a - b) / (double)b : 0.0;
}

/* Adds key: v as an exact JSON integer. */
static void add_u64(cJSON *o, const char *key, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON_AddRawToObject(o, key, num);
}

void ranks_add_json(const rank_file *f, int n, cJSON *root)
{
    int hi = ranks_highest(f, n), nx = next_highest(f, n, hi);
    if (nx < 0)
        return;
    cJSON *o = cJSON_AddObjectToObject(root, "highest_peak");
    uint64_t d = f[hi].peak - f[nx].peak;
    cJSON_AddStringToObject(o, "file", f[hi].path);
    add_u64(o, "peak", f[hi].peak);
    cJSON_AddStringToObject(o, "next_file", f[nx].path);
    add_u64(o, "next_peak", f[nx].peak);
    add_u64(o, "above_next", d);
    if (f[nx].peak)
        cJSON_AddNumberToObject(o, "above_next_pct", pct(f[hi].peak, f[nx].peak));
    else
        cJSON_AddNullToObject(o, "above_next_pct");
    cJSON *sa = cJSON_AddArrayToObject(o, "sites");
    size_t idx[RANK_SHOWN];
    int k = d ? diff_sites(&f[hi], &f[nx], idx) : 0;
    for (int i = 0; i < k; i++) {
        const rank_site *s = &f[hi].sites[idx[i]];
        uint64_t p = site_peak(&f[nx], s->label);
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "label", s->label);
        add_u64(x, "peak", s->peak);
        add_u64(x, "peak_next", p);
        add_u64(x, "difference", s->peak - p);
        cJSON_AddItemToArray(sa, x);
    }
}

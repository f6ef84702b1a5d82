/* The timeline PNG (render.h).  A panel per device, top to bottom:
 *
 *   title            "GPU memory over time - device N (name, capacity)"
 *   subtitle         what the stacked area is (allocator blocks, or
 *                    "reserved only: ..."; by category summary's layer
 *                    and total peak), what the lines are
 *   NVTX lanes       one lane per nesting depth of the first thread that
 *                    pushed a range; a box per range, labelled when it fits
 *   plot             grid, shading of depth-0 NVTX ranges, the stacked area
 *                    (per column: the breakdown at the moment of the
 *                    column's highest total, so the top of the area is the
 *                    column's maximum), the reserved line (min..max per
 *                    column), capacity / cap lines, counters series before
 *                    the first event, OOM markers
 *   x axis           time (ns / us / ms / s / min / h ticks) or event index
 *   legend           the bands by colour with their peaks (by category
 *                    also at the total's peak), then the lines
 */
#include "render.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/breakdown.h"
#include "util/hash.h"

#define GRID 0xe6e6e6u
#define AXIS 0x444444u
#define TEXT 0x111111u
#define MUTED 0x555555u
#define CAPACITY 0x000000u
#define CAP 0x7b2d8bu
#define COUNTERS 0x8a8a8au
#define NVTX_A 0xdce8f5u
#define NVTX_B 0xc3d6ec
#define NVTX_SHADE 0x5b84b1u

static const uint32_t palette[] = {
    0x3b75afu, 0xef8a17u, 0x4f9d4au, 0x8e6bb8u, 0x2aa5a0u, 0x9c6b4eu,
    0xd46fa8u, 0xa3a13au, 0x7fb8e6u, 0xe9c46au, 0x6b7a8fu, 0x9fd36bu};
#define NPAL (int)(sizeof palette / sizeof palette[0])

uint32_t viz_site_colour(int rank)
{
    if (rank < 0)
        return VIZ_OTHER;
    uint32_t c = palette[rank % NPAL];
    return rank >= NPAL ? rgb_lighten(c, 110) : c;
}

/* Fixed colours of the built-in categories, so that every picture by
 * category reads the same; the user's categories take one of user_palette
 * by a hash of the name (the same in every picture too). */
static const struct { const char *name; uint32_t rgb; } cat_colours[] = {
    {"parameters", 0x3b75afu},      {"gradients", 0xef8a17u},
    {"optimizer_state", 0x8e6bb8u}, {"activations", 0x4f9d4au},
    {"temporaries", 0xe9c46au},     {"inputs", 0x2aa5a0u},
    {"kv_cache", 0xd46fa8u},        {"workspaces", 0x9c6b4eu},
    {"communication", 0x6b7a8fu},   {"all_gather", 0x7d9fc8u},
    {"reduce_scatter", 0xc9a36bu},  {"graph_pool", 0xc44e52u}};
static const uint32_t user_palette[] = {
    0x7fb8e6u, 0x9fd36bu, 0xa3a13au, 0xc44e52u, 0xf2a6a0u, 0x5fc4b8u,
    0xb39ddbu, 0xd8a05au};

uint32_t viz_category_colour(const char *name)
{
    if (!name || !strcmp(name, "other"))
        return VIZ_OTHER;
    for (size_t i = 0; i < sizeof cat_colours / sizeof cat_colours[0]; i++)
        if (!strcmp(name, cat_colours[i].name))
            return cat_colours[i].rgb;
    uint32_t h = msnap_fnv1a32_str(name);
    return user_palette[h % (sizeof user_palette / sizeof user_palette[0])];
}

uint32_t viz_band_colour(const sm_model *m, int slot, int band)
{
    const char *cat = sm_band_category(m, slot, band);
    if (cat)
        return viz_category_colour(cat);
    if (sm_options(m)->by == SM_BY_POOL) {
        /* the default pool in the first colour, each private pool in one
         * of its own, its cache a lighter shade of it */
        const sm_dev *v = sm_device(m, slot);
        if (band >= v->nbands)
            return VIZ_OTHER;
        char name[96];
        sm_band_name(m, slot, band, name, sizeof name);
        int cache = strstr(name, " cache") != NULL;
        int r = band == 0 ? 0 : (band + 1) / 2;
        uint32_t c = viz_site_colour(r);
        if (cache)   /* halfway to white */
            c = (((c >> 16 & 0xff) + 255) / 2) << 16 | (((c >> 8 & 0xff) + 255) / 2) << 8 |
                ((c & 0xff) + 255) / 2;
        return c;
    }
    return band < sm_device(m, slot)->ntop ? viz_rank_colour(m, slot, band) : VIZ_OTHER;
}

uint32_t viz_rank_colour(const sm_model *m, int slot, int rank)
{
    if (rank < 0 || rank >= SM_MAX_TOP || slot < 0 || slot >= SM_NDEV)
        return VIZ_OTHER;
    const sm_dev *v = sm_device(m, slot);
    return v->colour_set[rank] ? v->colour[rank] : viz_site_colour(rank);
}

void viz_fit_label(char *s, int n)
{
    if ((int)strlen(s) <= n)
        return;
    /* First drop the leading namespaces of the function that names the
     * site ("at::detail::empty_generic" -> "detail::empty_generic" ->
     * "empty_generic"), keeping what tells it apart (" from ...", the
     * file:line); then cut the end. */
    for (;;) {
        char *sep = strstr(s, "::");
        char *stop = strpbrk(s, " (");
        if (!sep || (stop && stop < sep) || (int)strlen(s) <= n)
            break;
        memmove(s, sep + 2, strlen(sep + 2) + 1);
    }
    if ((int)strlen(s) > n && n >= 3) {
        s[n - 2] = '.';
        s[n - 1] = '.';
        s[n] = '\0';
    } else if ((int)strlen(s) > n && n >= 0) {
        s[n] = '\0';
    }
}

int viz_text_scale(int width)
{
    return width >= 1000 ? 2 : 1;
}

/* Left margin: room for "1023.5 MiB" at the text scale. */
static int left_margin(int ts)
{
    /* Constants, not canvas_text_w: the plot's columns (this margin) are
     * needed before the model's two passes, and measuring there would start
     * cairo and fontconfig before them; their start-up allocations made the
     * passes about 9% slower (10M events: 3.4 s -> 3.7 s, the heap laid out
     * differently).  "1023.5 MiB" is 54 pixels per text scale in DejaVu
     * Sans; test_viz checks that the label fits. */
    return 56 * ts + 18;
}

/* Right margin: room for half of a tick label past the last column ("0000"
 * is 24 pixels per scale; constant for the reason above). */
static int right_margin(int ts)
{
    return 25 * ts + 10;
}

int viz_timeline_columns(int width)
{
    int ts = viz_text_scale(width);
    int n = width - left_margin(ts) - right_margin(ts);
    return n > 16 ? n : 16;
}

int viz_y_of(const viz_geom *g, uint64_t v)
{
    if (!g->ymax)
        return g->y1;
    double h = (double)(g->y1 - g->y0);
    long y = g->y1 - lround((double)v * h / (double)g->ymax);
    if (y < g->y0)
        y = g->y0;
    if (y > g->y1)
        y = g->y1;
    return (int)y;
}

/* A power-of-two step giving 4..8 ticks up to ymax. */
static uint64_t size_step(uint64_t ymax)
{
    uint64_t s = 1;
    while (s < ymax / 8)
        s <<= 1;
    return s ? s : 1;
}

/* A time tick step (ns) so that about n ticks fit in span ns. */
static uint64_t time_step(uint64_t span, int n)
{
    static const uint64_t steps[] = {
        1, 2, 5, 10, 20, 50, 100, 200, 500,
        1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000,
        1000000ull, 2000000ull, 5000000ull, 10000000ull, 20000000ull,
        50000000ull, 100000000ull, 200000000ull, 500000000ull,
        1000000000ull, 2000000000ull, 5000000000ull, 10000000000ull,
        15000000000ull, 30000000000ull, 60000000000ull, 120000000000ull,
        300000000000ull, 600000000000ull, 900000000000ull, 1800000000000ull,
        3600000000000ull, 7200000000000ull, 10800000000000ull,
        21600000000000ull, 43200000000000ull, 86400000000000ull};
    if (n < 1)
        n = 1;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span / steps[i] <= (uint64_t)n)
            return steps[i];
    return 86400000000000ull * (span / 86400000000000ull / (uint64_t)n + 1);
}

/* Tick label of a time t for a step: the unit is chosen by the step, and
 * by the largest value hi of the axis when that would need 4+ digits (an
 * axis that starts at 3.6 s with 1 ms steps reads "3.612 s", not
 * "3612 ms"); as many decimals as the step needs. */
static void time_label(uint64_t t, uint64_t step, uint64_t hi, char *buf,
                       size_t cap)
{
    static const struct { double ns; const char *name; } units[] = {
        {1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "s"}, {60e9, "min"},
        {3600e9, "h"}};
    int u = 0;
    if (step >= 3600000000000ull) u = 5;
    else if (step >= 60000000000ull) u = 4;
    else if (step >= 1000000000ull) u = 3;
    else if (step >= 1000000ull) u = 2;
    else if (step >= 1000) u = 1;
    while (u < 3 && (double)hi / units[u].ns >= 1000.0)
        u++;
    int dec = 0;
    double st = (double)step / units[u].ns;
    while (dec < 9 && st * pow(10, dec) - floor(st * pow(10, dec) + 1e-9) > 1e-6)
        dec++;
    snprintf(buf, cap, "%.*f %s", dec, (double)t / units[u].ns, units[u].name);
}

static uint64_t count_step(uint64_t span, int n)
{
    uint64_t s = 1;
    if (n < 1)
        n = 1;
    for (;;) {
        if (span / s <= (uint64_t)n) return s;
        if (span / (2 * s) <= (uint64_t)n) return 2 * s;
        if (span / (5 * s) <= (uint64_t)n) return 5 * s;
        s *= 10;
    }
}

static void count_label(uint64_t v, char *buf, size_t cap)
{
    if (v >= 1000000 && v % 100000 == 0)
        snprintf(buf, cap, "%gM", (double)v / 1e6);
    else if (v >= 1000 && v % 100 == 0)
        snprintf(buf, cap, "%gk", (double)v / 1e3);
    else
        snprintf(buf, cap, "%" PRIu64, v);
}

/* Draws s (when c != NULL) in lines at most max_w pixels wide at this
 * scale, broken at spaces (a word wider than a line is cut with ".."),
 * from (x, y) down with line height lh; at most maxl lines, the last cut
 * with ".." if the text still does not fit.  Returns the number of lines
 * (at least 1). */
static int text_wrapped(canvas *c, int x, int y, const char *s, uint32_t col,
                        int scale, int max_w, int lh, int maxl)
{
    int lines = 0;
    char line[600];
    while (*s && lines < maxl) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        /* the longest run of whole words that fits; one word at least */
        const char *start = s;
        int len = (int)strlen(s), take = 0;
        if (len >= (int)sizeof line)
            len = (int)sizeof line - 1;
        for (int k = 1; k <= len; k++) {
            if (k < len && s[k] != ' ')
                continue;
            memcpy(line, s, (size_t)k);
            line[k] = '\0';
            if (take && canvas_text_w(line, scale) > max_w)
                break;
            take = k;
            if (canvas_text_w(line, scale) > max_w)
                break;
        }
        memcpy(line, s, (size_t)take);
        line[take] = '\0';
        s += take;
        while (*s == ' ')
            s++;
        if (lines == maxl - 1 && *s)
            snprintf(line, sizeof line, "%s", start);
        canvas_fit(line, max_w, scale);
        if (c)
            canvas_text(c, x, y + lines * lh, line, col, scale);
        lines++;
    }
    return lines ? lines : 1;
}

/* ---- legend ----------------------------------------------------------- */

typedef struct legend_item {
    char text[160];
    uint32_t colour;
    int style;           /* 0 swatch, 1 solid line, 2 dashed line, 3 shade */
} legend_item;

#define MAX_ITEMS (SM_MAX_TOP + 12)

/* Lays the items out in rows from x0 to x1; draws them when c != NULL.
 * Returns the height used. */
static int legend_flow(canvas *c, const legend_item *it, int n, int x0,
                       int x1, int y, int ts)
{
    int lh = (CANVAS_LINE_H + 4) * ts, x = x0, rows = n ? 1 : 0;
    char text[sizeof it->text];
    if (c)
        canvas_group(c, "legend", NULL);
    for (int i = 0; i < n; i++) {
        /* an item wider than a whole row is cut to the row */
        snprintf(text, sizeof text, "%s", it[i].text);
        canvas_fit(text, x1 - x0 - 28 * ts - 6, ts);
        int w = 14 * ts + 6 + canvas_text_w(text, ts) + 14 * ts;
        if (x > x0 && x + w > x1) {
            x = x0;
            y += lh;
            rows++;
        }
        if (c) {
            int sy = y + 1 * ts, sh = CANVAS_CAP_H * ts;
            canvas_group(c, "legend-item", text);
            switch (it[i].style) {
            case 0: canvas_rect(c, x, sy, x + 12 * ts, sy + sh, it[i].colour);
                    canvas_frame(c, x, sy, x + 12 * ts, sy + sh, rgb_darken(it[i].colour, 60));
                    break;
            case 1: canvas_rect(c, x, sy + sh / 2 - ts, x + 12 * ts, sy + sh / 2 + ts, it[i].colour); break;
            case 2: canvas_hline(c, x, x + 12 * ts, sy + sh / 2 - ts / 2, ts, it[i].colour, 3); break;
            default: canvas_blend_rect(c, x, sy - ts, x + 12 * ts, sy + sh + ts, it[i].colour, 60); break;
            }
            canvas_text(c, x + 14 * ts + 4, y, text, TEXT, ts);
            canvas_group_end(c);
        }
        x += w;
    }
    if (c)
        canvas_group_end(c);
    return rows * lh;
}

/* The legend items of the bands by site: the top sites, "other". */
static int site_items(const sm_model *m, int slot, legend_item *it)
{
    const sm_dev *v = sm_device(m, slot);
    size_t nsites, ngroups;
    const sm_site *sites = sm_sites(m, &nsites);
    const sm_group *groups = sm_groups(m, &ngroups);
    int n = 0;
    char sz[32];
    uint32_t stacks[SM_MAX_TOP];
    char (*labs)[SM_LABEL_MAX] = malloc(SM_MAX_TOP * sizeof *labs);
    for (int r = 0; r < v->ntop; r++)
        stacks[r] = sites[v->top[r]].stack;
    if (labs)
        sm_site_labels(sm_labels_of(m), stacks, v->ntop, labs);
    for (int r = 0; r < v->ntop; r++) {
        const sm_site *s = &sites[v->top[r]];
        char lab[SM_LABEL_MAX];
        if (labs)
            snprintf(lab, sizeof lab, "%s", labs[r]);
        else
            sm_site_label(sm_labels_of(m), s->stack, lab, sizeof lab);
        viz_fit_label(lab, 84);
        /* the site's peak as summary prints it: its group's */
        snprintf(it[n].text, sizeof it[n].text, "%.100s  peak %s", lab,
                 msnap_size_text(groups[s->grp].peak, sz, sizeof sz));
        it[n].colour = viz_rank_colour(m, slot, r);
        it[n++].style = 0;
    }
    free(labs);
    size_t others = 0;
    int cls = sm_blocks_seen(m) ? SM_CLS_BLOCK : SM_CLS_MEM;
    for (size_t i = 0; i < ngroups; i++)
        if (groups[i].device == slot && groups[i].cls == cls && groups[i].rank < 0 &&
            groups[i].peak)
            others++;
    if (others) {
        snprintf(it[n].text, sizeof it[n].text, "other (%zu site%s)", others,
                 others == 1 ? "" : "s");
        it[n].colour = VIZ_OTHER;
        it[n++].style = 0;
    }
    return n;
}

/* The legend items of the bands by category, with the figures of
 * summary's table: each category's peak and its bytes at the total's
 * peak; "other" when it has bytes. */
static int category_items(const sm_model *m, int slot, legend_item *it)
{
    const sm_dev *v = sm_device(m, slot);
    int n = 0;
    char a[32], b[32];
    for (int r = 0; r <= v->nbands; r++) {
        if (r == v->nbands && !v->band_peak[r])
            break;
        char name[96];
        snprintf(it[n].text, sizeof it[n].text, "%s  peak %s, %s at total peak",
                 sm_band_name(m, slot, r, name, sizeof name),
                 msnap_size_text(v->band_peak[r], a, sizeof a),
                 msnap_size_text(v->band_at_peak[r], b, sizeof b));
        it[n].colour = viz_band_colour(m, slot, r);
        it[n++].style = 0;
    }
    return n;
}

/* The legend items of a panel: the bands, then the lines and marks. */
static int legend_items(const sm_model *m, int slot, legend_item *it,
                        int has_cap, int has_capacity, int has_oom,
                        int has_nvtx, int has_counters)
{
    int n = sm_options(m)->by != SM_BY_SITE ? category_items(m, slot, it)
                                            : site_items(m, slot, it);
    snprintf(it[n].text, sizeof it[n].text,
             "reserved (driver memory)");
    it[n].colour = VIZ_RESERVED;
    it[n++].style = 1;
    if (has_capacity) {
        snprintf(it[n].text, sizeof it[n].text, "device capacity");
        it[n].colour = CAPACITY;
        it[n++].style = 2;
    }
    if (has_cap) {
        snprintf(it[n].text, sizeof it[n].text, "configured cap");
        it[n].colour = CAP;
        it[n++].style = 2;
    }
    if (viz_leak_rank(m, slot) >= 0) {
        snprintf(it[n].text, sizeof it[n].text,
                 "hatched band: leak suspect (its floor keeps rising)");
        it[n].colour = VIZ_LEAK;
        it[n++].style = 3;
    }
    if (has_oom) {
        snprintf(it[n].text, sizeof it[n].text, "OOM (bar = requested size)");
        it[n].colour = VIZ_OOM;
        it[n++].style = 1;
    }
    if (has_nvtx) {
        snprintf(it[n].text, sizeof it[n].text, "NVTX range");
        it[n].colour = NVTX_SHADE;
        it[n++].style = 3;
    }
    if (has_counters) {
        snprintf(it[n].text, sizeof it[n].text,
                 "counters series: reserved, sampled (before the first recorded event)");
        it[n].colour = COUNTERS;
        it[n++].style = 1;
    }
    return n;
}

/* ---- panel -------------------------------------------------------------- */

typedef struct panel_info {
    const sm_model *m;
    char title[256];
    int slot;
    int lanes;
    int nitems;
    legend_item items[MAX_ITEMS];
    uint64_t ymax, capacity, cap;
    int show_capacity, show_cap, has_oom, has_counters;
    int legend_h;        /* legend height to leave room for; 0: its own */
} panel_info;

static int oom_on(const sm_model *m, int slot)
{
    size_t n;
    const sm_oom *o = sm_ooms(m, &n, NULL);
    for (size_t i = 0; i < n; i++)
        if ((o[i].device < 0 ? SM_DEV_UNKNOWN : o[i].device) == slot ||
            (slot == 0 && o[i].device < 0))
            return 1;
    return 0;
}

static void panel_prepare(const sm_model *m, int slot, panel_info *p,
                          int lanes)
{
    const sm_dev *v = sm_device(m, slot);
    memset(p, 0, sizeof *p);
    p->m = m;
    p->slot = slot;
    p->lanes = lanes;
    uint64_t top = v->peak_reserved > v->peak_stacked ? v->peak_reserved
                                                       : v->peak_stacked;
    if (v->cnt_peak_reserved > top)
        top = v->cnt_peak_reserved;
    size_t no;
    const sm_oom *o = sm_ooms(m, &no, NULL);
    for (size_t i = 0; i < no; i++)
        if (o[i].device == slot || (slot == 0 && o[i].device < 0)) {
            uint64_t want = o[i].allocated + o[i].requested;
            if (want > top && want < top * 4 + 1)
                top = want;
        }
    p->capacity = v->total;
    p->cap = sm_cap(m);
    /* Capacity and cap are drawn when they do not squash the data below a
     * quarter of the height; otherwise they are written as text. */
    if (p->capacity && p->capacity <= top * 4 + 1024) {
        p->show_capacity = 1;
        if (p->capacity > top)
            top = p->capacity;
    }
    if (p->cap && p->cap <= top * 4 + 1024) {
        p->show_cap = 1;
        if (p->cap > top)
            top = p->cap;
    }
    if (!top)
        top = 1024;
    top += top / 20;
    uint64_t step = size_step(top);
    p->ymax = (top + step - 1) / step * step;
    p->has_oom = oom_on(m, slot);
    /* The counters series is drawn where the events do not reach: the
     * columns before the first event, when counters lines fall there. */
    p->has_counters = 0;
    if (sm_counters_seen(m) && sm_options(m)->x_mode == SM_X_TIME && v->cols) {
        int first_col = sm_col_of(m, sm_first_event_t(m));
        for (int col = 0; col + 1 < first_col; col++)
            if (v->cols[col].has_cnt)
                p->has_counters = 1;
    }
}

/* The two subtitle texts of a panel: what the area and the line are, then
 * the notes (capacity or cap far above, NVTX ranges too narrow, ring mode)
 * and the event count. */
static void panel_subtitle(const panel_info *p, char *s1, char *s2, size_t cap)
{
    const sm_model *m = p->m;
    const sm_dev *v = sm_device(m, p->slot);
    char a[32], b[32], t[48] = "";
    const char *layer = NULL;
    const struct breakdown *bd = sm_breakdown(m);
    if (bd)
        bd_cats_shown(bd, p->slot, &layer);
    if (bd && sm_options(m)->x_mode == SM_X_TIME) {
        memcpy(t, " at ", 5);
        msnap_time_text(v->peak_stacked_t, t + 4, sizeof t - 4);
    }
    if (sm_options(m)->by == SM_BY_POOL)
        snprintf(s1, cap,
                 "Coloured area by pool (PyTorch's caching allocator), as MemoryViz's "
                 "\"Allocated Memory (incl. Private Pools)\": the default pool's blocks, "
                 "then each private pool's blocks and its cache (its segments less its "
                 "blocks: memory no other pool may use); line: reserved. Total peak %s, "
                 "reserved %s.",
                 msnap_size_text(v->peak_stacked, a, sizeof a),
                 msnap_size_text(v->peak_reserved, b, sizeof b));
    else if (bd && layer && !strncmp(layer, "allocator blocks", 16))
        snprintf(s1, cap,
                 "Coloured area by category, as memsnap summary counts them: "
                 "allocated bytes (allocator blocks) plus other libraries' driver "
                 "memory (cuBLAS workspaces, NCCL buffers; not the allocator's "
                 "cache); line: reserved. Total peak %s%s, reserved %s.",
                 msnap_size_text(v->peak_stacked, a, sizeof a), t,
                 msnap_size_text(v->peak_reserved, b, sizeof b));
    else if (bd)
        snprintf(s1, cap,
                 "Reserved only: the process's allocator does not report blocks. "
                 "Coloured area: driver allocations by category, as memsnap "
                 "summary counts them. Total peak %s%s.",
                 msnap_size_text(v->peak_stacked, a, sizeof a), t);
    else if (sm_blocks_seen(m))
        snprintf(s1, cap,
                 "Coloured area: allocated bytes (allocator blocks) stacked by "
                 "allocation site, first allocated at the bottom; line: reserved. "
                 "Peak allocated %s, reserved %s.",
                 msnap_size_text(v->peak_stacked, a, sizeof a),
                 msnap_size_text(v->peak_reserved, b, sizeof b));
    else
        snprintf(s1, cap,
                 "Reserved only: the process's allocator does not report blocks. "
                 "Coloured area: driver allocations by site. Peak %s.",
                 msnap_size_text(v->peak_reserved > v->cnt_peak_reserved
                                 ? v->peak_reserved : v->cnt_peak_reserved,
                             a, sizeof a));
    s2[0] = '\0';
    size_t n = 0;
    if (p->capacity && !p->show_capacity)
        n += (size_t)snprintf(s2 + n, cap - n,
                              "Device capacity %s is far above (not drawn). ",
                              msnap_size_text(p->capacity, a, sizeof a));
    if (p->cap && !p->show_cap && n < cap)
        n += (size_t)snprintf(s2 + n, cap - n,
                              "Configured cap %s is far above (not drawn). ",
                              msnap_size_text(p->cap, a, sizeof a));
    size_t nkept;
    uint64_t nall;
    sm_ranges(m, &nkept, &nall);
    if (nall > nkept && n < cap)
        n += (size_t)snprintf(s2 + n, cap - n,
                              "%" PRIu64 " NVTX ranges, %" PRIu64 " too narrow to draw. ",
                              nall, nall - nkept);
    if (sm_ring_mode(m) && n < cap)
        n += (size_t)snprintf(s2 + n, cap - n,
                              "Ring snapshot: events cover the last window only. ");
    if (n < cap)
        snprintf(s2 + n, cap - n, "%" PRIu64 " events.", sm_events(m));
}

/* Lines of the title and of the subtitle at this width (wrapped, never
 * cut short of 3 and 4 lines). */
#define TITLE_MAXL 3
#define SUB_MAXL 4
static void panel_text_lines(const panel_info *p, int width, int ts,
                             int *tl, int *sl)
{
    char s1[512], s2[512];
    *tl = text_wrapped(NULL, 0, 0, p->title, 0, ts + 1, width - 20, 0,
                       TITLE_MAXL);
    panel_subtitle(p, s1, s2, sizeof s1);
    int n = width - 20;
    *sl = text_wrapped(NULL, 0, 0, s1, 0, ts, n, 0, SUB_MAXL) +
          text_wrapped(NULL, 0, 0, s2, 0, ts, n, 0, SUB_MAXL);
}

/* Height of the fixed parts of a panel (everything but the plot). */
static int panel_chrome_h(const panel_info *p, int width, int ts)
{
    int tl, sl;
    panel_text_lines(p, width, ts, &tl, &sl);
    int h = 8 + (CANVAS_LINE_H + 2) * (ts + 1) * tl + 4   /* title */
            + (CANVAS_LINE_H + 3) * ts * sl + 4     /* subtitle */
            + p->lanes * (CANVAS_LINE_H + 4) * ts   /* NVTX lanes */
            + 6 + (CANVAS_LINE_H + 6) * ts          /* x tick labels */
            + (CANVAS_LINE_H + 4) * ts + 6;         /* x axis title */
    h += legend_flow(NULL, p->items, p->nitems, left_margin(ts),
                     width - right_margin(ts), 0, ts) + 12;
    return h;
}

/* What the parts of one panel share. */
typedef struct panel_ctx {
    canvas *c;
    const panel_info *p;
    const sm_model *m;
    const sm_dev *v;
    const sm_opts *o;
    int ts, slot;
    viz_geom g;            /* the plot area */
} panel_ctx;

/* The title and subtitle from y, wrapped to the width.  Returns the y
 * below them. */
static int panel_head(canvas *c, const panel_info *p, int ts, int y)
{
    int W = c->w, ncw = W - 20;
    canvas_group(c, "title", NULL);
    int tl = text_wrapped(c, 10, y, p->title, TEXT, ts + 1, W - 20,
                          (CANVAS_LINE_H + 2) * (ts + 1), TITLE_MAXL);
    canvas_group_end(c);
    y += (CANVAS_LINE_H + 2) * (ts + 1) * tl + 4;
    char s1[512], s2[512];
    panel_subtitle(p, s1, s2, sizeof s1);
    int lh = (CANVAS_LINE_H + 3) * ts;
    canvas_group(c, "subtitle", NULL);
    y += lh * text_wrapped(c, 10, y, s1, MUTED, ts, ncw, lh, SUB_MAXL);
    y += lh * text_wrapped(c, 10, y, s2, MUTED, ts, ncw, lh, SUB_MAXL) + 4;
    canvas_group_end(c);
    return y;
}

/* The NVTX lanes from lanes_y (lane_h each), named where the name fits,
 * and the shading of the plot under every other depth-0 range. */
static void draw_nvtx(const panel_ctx *x, int lanes_y, int lane_h)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[512];
    size_t nr;
    const sm_range *rg = sm_ranges(m, &nr, NULL);
    canvas_group(c, "nvtx", NULL);
    for (size_t i = 0; i < nr; i++) {
        int x0 = g->x0 + sm_col_of(m, rg[i].t0), x1 = g->x0 + sm_col_of(m, rg[i].t1) + 1;
        if (rg[i].lane >= x->p->lanes)
            continue;
        int ly = lanes_y + rg[i].lane * lane_h;
        uint32_t col = (i % 2) ? NVTX_A : NVTX_B;
        canvas_rect(c, x0, ly, x1, ly + lane_h - 2, col);
        canvas_vline(c, x0, ly, ly + lane_h - 3, 1, NVTX_SHADE, 0);
        snprintf(buf, sizeof buf, "%s", sm_str(m, rg[i].str));
        /* The label at the text scale, else smaller, else cut. */
        int room = x1 - x0 - 4;
        if (canvas_text_w(buf, ts) <= room ||
            (ts == 1 && room >= canvas_text_w("abcd..", 1))) {
            canvas_fit(buf, room, ts);
            canvas_text(c, x0 + 3, ly + 2 * ts, buf, TEXT, ts);
        } else if (ts > 1 && room >= canvas_text_w("a..", 1)) {
            canvas_fit(buf, room, 1);
            canvas_text(c, x0 + 2, ly + (lane_h - CANVAS_LINE_H) / 2 + 1, buf, TEXT, 1);
        }
        if (rg[i].lane == 0 && (i % 2) == 0)
            canvas_blend_rect(c, x0, g->y0, x1, g->y1, NVTX_SHADE, 28);
    }
    if (x->p->lanes) {
        canvas_text(c, 10, lanes_y + 2 * ts, "NVTX", MUTED, ts);
    }
    canvas_group_end(c);
}

/* The grid and the y axis's ticks, in bytes. */
static void draw_y_axis(const panel_ctx *x)
{
    canvas *c = x->c;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[64];
    canvas_group(c, "axis-y", NULL);
    uint64_t ystep = size_step(g->ymax);
    for (uint64_t val = 0; val <= g->ymax; val += ystep) {
        int yy = viz_y_of(g, val);
        if (val)
            canvas_hline(c, g->x0, g->x1 - 1, yy, 1, GRID, 0);
        msnap_size_text_short(val, buf, sizeof buf);
        canvas_text(c, g->x0 - 8 - canvas_text_w(buf, ts),
                    yy - CANVAS_CAP_H * ts / 2, buf, TEXT, ts);
        canvas_hline(c, g->x0 - 5, g->x0 - 1, yy, 1, AXIS, 0);
        if (g->ymax - val < ystep)
            break;
    }
    canvas_group_end(c);
}

/* The x axis's ticks (time, event index or the marks' numbers) and its
 * title, which says where the axis starts. */
static void draw_x_axis(const panel_ctx *x)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const sm_opts *o = x->o;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[512], a[32];
    uint64_t xlo, xhi;
    sm_x_range(m, &xlo, &xhi);
    canvas_group(c, "axis-x", NULL);
    int label_w = canvas_text_w("00.00 min", ts) + 16;
    int nt = o->columns / label_w;
    uint64_t xstep = o->x_mode != SM_X_TIME ? count_step(xhi - xlo, nt)
                                            : time_step(xhi - xlo, nt);
    /* Ticks at multiples of the step from the axis start on. */
    uint64_t xfirst = (xlo + xstep - 1) / xstep * xstep;
    for (uint64_t xv = xfirst; xv <= xhi; xv += xstep) {
        int xx = g->x0 + sm_col_of(m, xv);
        canvas_vline(c, xx, g->y0, g->y1 - 1, 1, GRID, 0);
        canvas_vline(c, xx, g->y1, g->y1 + 5, 1, AXIS, 0);
        if (o->x_mode == SM_X_EVENTS)
            count_label(xv, buf, sizeof buf);
        else if (o->x_mode == SM_X_MARKS) {
            /* the number only: the word is the axis title's */
            viz_mark_label(m, xv, xstep, buf, sizeof buf);
            const char *sp = strrchr(buf, ' ');
            if (sp)
                memmove(buf, sp + 1, strlen(sp + 1) + 1);
        }
        else
            time_label(xv, xstep, xhi, buf, sizeof buf);
        int tw = canvas_text_w(buf, ts);
        int tx = xx - tw / 2;
        /* clear of the y axis's "0 B", which ends 8 pixels left of the plot */
        if (tx < g->x0 - 4)
            tx = g->x0 - 4;
        canvas_text(c, tx, g->y1 + 8, buf, TEXT, ts);
        if (xhi - xv < xstep)
            break;
    }
    size_t nmk = sm_nmarks_all(m);
    char xt[512], ticks[96] = "";
    if (nmk)
        snprintf(ticks, sizeof ticks, "; blue ticks: %zu mark%s", nmk, nmk == 1 ? "" : "s");
    const char *mword;
    double evs, tms;
    uint64_t tlo, thi;
    uint64_t first_mark;
    uint64_t before = sm_marks_before(m, &first_mark);
    if (o->x_mode == SM_X_EVENTS && sm_x_auto(m, &evs, &tms, &tlo, &thi)) {
        char b2[32];
        snprintf(xt, sizeof xt, "event index (chosen: %.0f%% of the events fall in %.0f%% of "
                 "the time, %s to %s; --x time)%s", 100 * evs, 100 * tms,
                 msnap_time_text(tlo, a, sizeof a), msnap_time_text(thi, b2, sizeof b2), ticks);
    } else if (o->x_mode == SM_X_EVENTS)
        snprintf(xt, sizeof xt, "event index (events in file order)%s", ticks);
    else if (o->x_mode == SM_X_MARKS && sm_marks(m, &mword) && before)
        snprintf(xt, sizeof xt, "%s%sfrom %zu mark%s the program wrote "
                 "(between marks: in proportion to events); the %" PRIu64 " events before "
                 "the first, event %" PRIu64 ", are drawn at its place", mword,
                 *mword ? ", " : "", sm_marks(m, NULL),
                 sm_marks(m, NULL) == 1 ? "" : "s", before, first_mark);
    else if (o->x_mode == SM_X_MARKS && sm_marks(m, &mword))
        snprintf(xt, sizeof xt, "%s%sfrom %zu mark%s the program wrote "
                 "(between marks: in proportion to events)", mword,
                 *mword ? ", " : "", sm_marks(m, NULL),
                 sm_marks(m, NULL) == 1 ? "" : "s");
    else if (xlo > 0 && sm_first_event_t(m) > xlo) {
        /* several files on one axis: it starts at the earliest of them */
        char own[32];
        snprintf(xt, sizeof xt, "time since the recorder started (the plot "
                 "starts at %s, the first event of all the files; this file's is at %s; "
                 "--from 0 shows from 0)", msnap_time_text(xlo, a, sizeof a),
                 msnap_time_text(sm_first_event_t(m), own, sizeof own));
    } else if (xlo > 0)
        snprintf(xt, sizeof xt, "time since the recorder started (the plot "
                 "starts at the first event, %s; --from 0 shows from 0)%s",
                 msnap_time_text(xlo, a, sizeof a), ticks);
    else
        snprintf(xt, sizeof xt, "time since the recorder started%s", ticks);
    canvas_fit(xt, o->columns, ts);
    canvas_text(c, g->x0 + (o->columns - canvas_text_w(xt, ts)) / 2,
                g->y1 + 8 + (CANVAS_LINE_H + 6) * ts, xt, MUTED, ts);
    canvas_group_end(c);
}

/* The program's marks as ticks under the x axis, one a column (the SVG's
 * <g class="mark"> names each). */
static void draw_marks(const panel_ctx *x)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const viz_geom *g = &x->g;
    int ts = x->ts, last_col = -1;
    char a[32], lab[320];
    for (size_t i = 0; i < sm_nmarks_all(m); i++) {
        uint64_t ev, t;
        const char *text;
        if (sm_mark_at(m, i, &ev, &t, &text))
            break;
        int col = sm_col_of(m, sm_x_of_event(m, ev, t));
        if (col == last_col)
            continue;
        last_col = col;
        snprintf(lab, sizeof lab, "mark at %s: %s", msnap_time_text(t, a, sizeof a),
                 text ? text : "");
        canvas_group(c, "mark", lab);
        canvas_vline(c, g->x0 + col, g->y1 + 1, g->y1 + 6, ts, VIZ_MARK, 0);
        canvas_group_end(c);
    }
}

/* The stacked area: the bands bottom to top (viz_stack_order: sites in
 * the order they first allocated, categories the longest-lived first),
 * "other" on top; the leak suspect's band (rank leak_rank) hatched with
 * its top edge outlined.  *leak_x, *leak_y: where its label goes (-1:
 * nowhere). */
static void draw_area(const panel_ctx *x, int leak_rank, int *leak_x, int *leak_y)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const sm_dev *v = x->v;
    const sm_opts *o = x->o;
    const viz_geom *g = &x->g;
    int slot = x->slot, ts = x->ts;
    int K = v->nbands;
    int order[SM_MAX_TOP + 1];
    int norder = viz_stack_order(m, slot, order);
    *leak_x = *leak_y = -1;
    /* Band by band, each a run of columns (one path in the SVG); the
     * bands of a column never overlap, so this draws what a column by
     * column loop would.  Then the leak suspect's hatch and top edge. */
    canvas_group(c, "area", NULL);
    for (int j = 0; j < norder && v->cols; j++) {
        int r = order[j];
        char lab[SM_LABEL_MAX], name[SM_LABEL_MAX];
        const char *cat = sm_band_name(m, slot, r, name, sizeof name);
        if (cat)
            snprintf(lab, sizeof lab, "%s", cat);
        else if (r < K)
            viz_site_label_in(m, slot, r, lab, sizeof lab);
        else
            snprintf(lab, sizeof lab, "other");
        canvas_group(c, r == leak_rank ? "band leak" : "band", lab);
        uint32_t colour = viz_band_colour(m, slot, r);
        for (int col = 0; col < o->columns; col++) {
            if (!v->cols[col].has)
                continue;
            uint64_t cum = 0;
            for (int i = 0; i < j; i++)
                cum += sm_col_value(m, slot, col, order[i]);
            uint64_t val = sm_col_value(m, slot, col, r);
            if (!val)
                continue;
            int ya = viz_y_of(g, cum + val), yb = viz_y_of(g, cum);
            canvas_rect(c, g->x0 + col, ya, g->x0 + col + 1, yb, colour);
            if (r == leak_rank && yb > ya &&
                /* the label goes above the band where its top is highest
                 * (the latest such column), clear of the teardown at exit
                 * that leaves the band alone at the bottom */
                (*leak_y < 0 || ya <= *leak_y)) {
                *leak_x = g->x0 + col;
                *leak_y = ya;
            }
        }
        canvas_group_end(c);
    }
    if (*leak_y >= 0) {
        canvas_group(c, "leak-hatch", NULL);
        for (int pass = 0; pass < 2; pass++)
            for (int col = 0; col < o->columns; col++) {
                if (!v->cols[col].has)
                    continue;
                uint64_t cum = 0;
                for (int i = 0; i < norder && order[i] != leak_rank; i++)
                    cum += sm_col_value(m, slot, col, order[i]);
                uint64_t val = sm_col_value(m, slot, col, leak_rank);
                int ya = viz_y_of(g, cum + val), yb = viz_y_of(g, cum);
                if (!val || yb <= ya)
                    continue;
                int xx = g->x0 + col;
                if (pass == 0)
                    canvas_hatch(c, xx, ya, xx + 1, yb, VIZ_LEAK, 7);
                else
                    canvas_rect(c, xx, ya, xx + 1, ya + ts + 1, VIZ_LEAK);
            }
        canvas_group_end(c);
    }
    canvas_group_end(c);
}

/* The counters series where events do not reach (before the first
 * recorded event), straight segments between consecutive samples. */
static void draw_counters(const panel_ctx *x)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const sm_dev *v = x->v;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[64];
    canvas_group(c, "counters", NULL);
    int first_col = sm_col_of(m, sm_first_event_t(m));
    int px = -1, py = -1, pya = -1;
    for (int col = 0; col <= first_col && col < x->o->columns; col++) {
        const sm_col *k = &v->cols[col];
        if (!k->has_cnt)
            continue;
        int xx = g->x0 + col;
        int yr = viz_y_of(g, k->cnt_res), ya = viz_y_of(g, k->cnt_alloc);
        if (px >= 0) {
            canvas_line(c, px, py, xx, yr, ts, COUNTERS);
            if (sm_blocks_seen(m))
                canvas_line(c, px, pya, xx, ya, 1, rgb_lighten(COUNTERS, 60));
        } else {
            canvas_rect(c, xx, yr, xx + ts, yr + ts, COUNTERS);
        }
        px = xx;
        py = yr;
        pya = ya;
    }
    if (first_col > 0) {
        canvas_vline(c, g->x0 + first_col, g->y0, g->y1 - 1, 1, MUTED, 4);
        snprintf(buf, sizeof buf, "first recorded event");
        int tw = canvas_text_w(buf, ts);
        int tx = g->x0 + first_col - tw - 4;
        canvas_text(c, tx < g->x0 + 2 ? g->x0 + first_col + 4 : tx, g->y0 + 4, buf, MUTED, ts);
    }
    canvas_group_end(c);
}

/* The reserved line (the highest value of each column, joined), then the
 * device's capacity and the cap when the panel shows them. */
static void draw_lines(const panel_ctx *x)
{
    canvas *c = x->c;
    const panel_info *p = x->p;
    const sm_dev *v = x->v;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[128], a[32];
    int prev = -1;
    canvas_group(c, "reserved", NULL);
    for (int col = 0; col < x->o->columns && v->cols; col++) {
        const sm_col *k = &v->cols[col];
        if (!k->has) {
            prev = -1;
            continue;
        }
        int yr = viz_y_of(g, k->res_max);
        int ya = yr, yb = yr;
        if (prev >= 0) {
            if (prev < ya) ya = prev;
            if (prev > yb) yb = prev;
        }
        canvas_rect(c, g->x0 + col, ya - 1, g->x0 + col + 1, yb + 1, VIZ_RESERVED);
        prev = yr;
    }
    canvas_group_end(c);
    if (p->show_capacity) {
        canvas_group(c, "capacity", NULL);
        int yy = viz_y_of(g, p->capacity);
        canvas_hline(c, g->x0, g->x1 - 1, yy, ts, CAPACITY, 6);
        snprintf(buf, sizeof buf, "device capacity %s",
                 msnap_size_text(p->capacity, a, sizeof a));
        canvas_text(c, g->x1 - canvas_text_w(buf, ts) - 4,
                    yy - (CANVAS_LINE_H + 1) * ts, buf, CAPACITY, ts);
        canvas_group_end(c);
    }
    if (p->show_cap) {
        canvas_group(c, "cap", NULL);
        int yy = viz_y_of(g, p->cap);
        canvas_hline(c, g->x0, g->x1 - 1, yy, ts, CAP, 6);
        snprintf(buf, sizeof buf, "cap %s", msnap_size_text(p->cap, a, sizeof a));
        canvas_text(c, g->x0 + 6, yy - (CANVAS_LINE_H + 1) * ts, buf, CAP, ts);
        canvas_group_end(c);
    }
}

/* The OOMs of the panel's device: a line at each, the request as a bar on
 * the area's top, and its label where it does not run into the last. */
static void draw_ooms(const panel_ctx *x)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const sm_opts *o = x->o;
    const viz_geom *g = &x->g;
    int ts = x->ts;
    char buf[512], a[32];
    size_t no;
    const sm_oom *oo = sm_ooms(m, &no, NULL);
    int last_label_x = -100000;
    for (size_t i = 0; i < no; i++) {
        int od = oo[i].device < 0 ? 0 : oo[i].device;
        if (od != x->slot)
            continue;
        uint64_t xv = sm_x_of_event(m, oo[i].event_index, oo[i].t_ns);
        int xx = g->x0 + sm_col_of(m, xv);
        char where[64] = "";
        if (o->x_mode != SM_X_TIME) {
            where[0] = ' ';
            where[1] = 'a';
            where[2] = 't';
            where[3] = ' ';
            if (o->x_mode == SM_X_MARKS)
                viz_mark_label(m, xv, 100000, where + 4, sizeof where - 4);
            else
                snprintf(where + 4, sizeof where - 4, "event %" PRIu64,
                         oo[i].event_index);
        }
        snprintf(buf, sizeof buf, "%s%s: requested %s",
                 oo[i].action == MSNAP_A_OOM ? "OOM" : "alloc error", where,
                 msnap_size_text(oo[i].requested, a, sizeof a));
        canvas_group(c, "oom", buf);
        canvas_vline(c, xx, g->y0, g->y1 - 1, ts, VIZ_OOM, 0);
        int yb = viz_y_of(g, oo[i].allocated);
        int ya = viz_y_of(g, oo[i].allocated + oo[i].requested);
        canvas_rect(c, xx + ts + 1, ya, xx + ts + 1 + 5 * ts, yb, VIZ_OOM);
        int tw = canvas_text_w(buf, ts);
        if (xx - last_label_x > tw + 10) {
            int tx = xx + 8 * ts;
            if (tx + tw > g->x1)
                tx = xx - tw - 4 * ts;
            canvas_rect(c, tx - 2, g->y0 + 2, tx + tw + 2, g->y0 + 4 + CANVAS_LINE_H * ts, 0xffffff);
            canvas_text(c, tx, g->y0 + 4, buf, VIZ_OOM, ts);
            last_label_x = xx;
        }
        canvas_group_end(c);
    }
}

/* The leak suspect's label (rank leak_rank), above the last column of its
 * band at (leak_x, leak_y). */
static void draw_leak_label(const panel_ctx *x, int leak_rank, int leak_x, int leak_y)
{
    canvas *c = x->c;
    const sm_model *m = x->m;
    const viz_geom *g = &x->g;
    int ts = x->ts, slot = x->slot;
    char buf[512], a[32], b[32];
    size_t nl, nsites;
    const sm_leak *lk = sm_leaks(m, &nl, NULL);
    const sm_site *sites = sm_sites(m, &nsites);
    for (size_t i = 0; i < nl; i++) {
        if (sites[lk[i].site].rank != leak_rank ||
            sites[lk[i].site].device != slot)
            continue;
        char lab[SM_LABEL_MAX];
        viz_site_label_in(m, slot, leak_rank, lab, sizeof lab);
        viz_fit_label(lab, 40);
        snprintf(buf, sizeof buf, "leak suspect: %s, floor %s -> %s", lab,
                 msnap_size_text(lk[i].first, a, sizeof a),
                 msnap_size_text(lk[i].last, b, sizeof b));
        int tw = canvas_text_w(buf, ts);
        if (tw > g->x1 - g->x0 - 8) {
            snprintf(buf, sizeof buf, "leak suspect: floor %s -> %s",
                     msnap_size_text(lk[i].first, a, sizeof a),
                     msnap_size_text(lk[i].last, b, sizeof b));
            tw = canvas_text_w(buf, ts);
        }
        int tx = leak_x - tw - 6 * ts;
        if (tx < g->x0 + 4)
            tx = g->x0 + 4;
        int ty = leak_y - (CANVAS_LINE_H + 4) * ts;
        if (ty < g->y0 + (CANVAS_LINE_H + 6) * ts)
            ty = leak_y + 4 * ts;
        canvas_group(c, "leak-label", NULL);
        canvas_rect(c, tx - 2, ty - 1, tx + tw + 2, ty + CANVAS_LINE_H * ts + 1, 0xffffff);
        canvas_text(c, tx, ty, buf, VIZ_LEAK, ts);
        canvas_group_end(c);
        break;
    }
}

/* Draws one panel into the band [top, top + h): the title, the NVTX
 * lanes, the axes, the stacked area, the counters, the reserved line and
 * the limits, the OOMs, the leak suspect, the legend. */
static void panel_draw(canvas *c, const panel_info *p, int top, int h,
                       viz_geom *geom)
{
    panel_ctx x = {.c = c, .p = p, .m = p->m, .slot = p->slot,
                   .v = sm_device(p->m, p->slot), .o = sm_options(p->m)};
    int W = c->w, ts = x.ts = viz_text_scale(W);

    canvas_group(c, "panel", p->title);
    int y = panel_head(c, p, ts, top + 8);

    /* geometry */
    int lane_h = (CANVAS_LINE_H + 4) * ts;
    int lanes_y = y;
    y += p->lanes * lane_h;
    int own_legend_h = legend_flow(NULL, p->items, p->nitems, left_margin(ts),
                                   W - right_margin(ts), 0, ts);
    int legend_h = p->legend_h > own_legend_h ? p->legend_h : own_legend_h;
    viz_geom *g = &x.g;
    g->x0 = left_margin(ts);
    g->x1 = g->x0 + x.o->columns;
    g->y0 = y + 4;
    g->y1 = top + h - legend_h - 12 - (CANVAS_LINE_H + 4) * ts - 6 -
            (CANVAS_LINE_H + 6) * ts - 6;
    if (g->y1 < g->y0 + 20)
        g->y1 = g->y0 + 20;
    g->ymax = p->ymax;
    g->slot = x.slot;
    g->leak_rank = -1;
    if (geom)
        *geom = *g;

    draw_nvtx(&x, lanes_y, lane_h);
    draw_y_axis(&x);
    draw_x_axis(&x);
    int leak_rank = viz_leak_rank(x.m, x.slot), leak_x, leak_y;
    draw_area(&x, leak_rank, &leak_x, &leak_y);
    if (p->has_counters && x.v->cols)
        draw_counters(&x);
    draw_lines(&x);
    draw_marks(&x);
    draw_ooms(&x);
    if (leak_rank >= 0 && leak_x >= 0)
        draw_leak_label(&x, leak_rank, leak_x, leak_y);
    if (geom)
        geom->leak_rank = leak_rank;
    /* axes */
    canvas_group(c, "axes", NULL);
    canvas_vline(c, g->x0 - 1, g->y0, g->y1, 1, AXIS, 0);
    canvas_hline(c, g->x0 - 1, g->x1 - 1, g->y1, 1, AXIS, 0);
    canvas_group_end(c);

    /* legend */
    legend_flow(c, p->items, p->nitems, left_margin(ts), W - right_margin(ts),
                top + h - legend_h - 8, ts);
    canvas_group_end(c);   /* panel */
}

void viz_mark_label(const sm_model *m, uint64_t x, uint64_t step, char *buf,
                    size_t cap)
{
    const char *word = "";
    sm_marks(m, &word);
    int dec = 0;
    for (double s = (double)step; s < SM_MARK_SCALE && dec < 6; s *= 10)
        dec++;
    snprintf(buf, cap, "%s%s%.*f", word, *word ? " " : "", dec,
             (double)x / SM_MARK_SCALE);
}

int viz_stack_order(const sm_model *m, int slot, int *ranks)
{
    const sm_dev *v = sm_device(m, slot);
    int n = 0;
    if (sm_options(m)->by != SM_BY_SITE) {
        /* the bands' order: the longest-lived at the bottom, "other" on top
         * (by pool: the default pool, then each private pool, its blocks
         * under its cache) */
        for (int b = 0; b <= v->nbands; b++)
            ranks[n++] = b;
        return n;
    }
    /* The state numbers sites as they first allocate (and those live before
     * the first event first of all), so the site index is the order of
     * first allocation: insertion sort of the ranks by it. */
    for (int r = 0; r < v->ntop; r++) {
        int j = n++;
        while (j > 0 && v->top[ranks[j - 1]] > v->top[r]) {
            ranks[j] = ranks[j - 1];
            j--;
        }
        ranks[j] = r;
    }
    ranks[n++] = v->ntop;
    return n;
}

int viz_leak_rank(const sm_model *m, int slot)
{
    if (sm_options(m)->by != SM_BY_SITE)
        return -1;   /* a leak suspect is a site; the bands are categories or pools */
    size_t nl, nsites;
    const sm_leak *lk = sm_leaks(m, &nl, NULL);
    const sm_site *sites = sm_sites(m, &nsites);
    for (size_t i = 0; i < nl; i++)
        if (lk[i].site < nsites && sites[lk[i].site].device == slot &&
            sites[lk[i].site].rank >= 0)
            return sites[lk[i].site].rank;
    return -1;
}

void viz_site_label_in(const sm_model *m, int slot, int rank, char *buf,
                       size_t cap)
{
    const sm_dev *v = sm_device(m, slot);
    size_t nsites;
    const sm_site *sites = sm_sites(m, &nsites);
    uint32_t stacks[SM_MAX_TOP];
    buf[0] = '\0';
    if (rank < 0 || rank >= v->ntop)
        return;
    char (*labs)[SM_LABEL_MAX] = malloc(SM_MAX_TOP * sizeof *labs);
    for (int r = 0; r < v->ntop; r++)
        stacks[r] = sites[v->top[r]].stack;
    if (labs) {
        sm_site_labels(sm_labels_of(m), stacks, v->ntop, labs);
        snprintf(buf, cap, "%s", labs[rank]);
    } else {
        sm_site_label(sm_labels_of(m), stacks[rank], buf, cap);
    }
    free(labs);
}

int viz_model_slots(const sm_model *m, int *slots)
{
    int np = 0;
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev *v = sm_device(m, d);
        if (v->seen && (v->peak_reserved || v->peak_stacked ||
                        v->cnt_peak_reserved || d != SM_DEV_UNKNOWN))
            slots[np++] = d;
    }
    if (!np)
        slots[np++] = 0;
    return np;
}

void viz_panel_title(const sm_model *m, int slot, const char *prefix,
                     char *buf, size_t cap)
{
    const sm_dev *v = sm_device(m, slot);
    char a[32];
    if (slot == SM_DEV_UNKNOWN)
        snprintf(buf, cap, "%s - device ? (unknown ordinal)", prefix);
    else if (v->name[0] || v->total)
        snprintf(buf, cap, "%s - device %d (%s, %s)", prefix, slot,
                 v->name[0] ? v->name : "?", msnap_size_text(v->total, a, sizeof a));
    else
        snprintf(buf, cap, "%s - device %d", prefix, slot);
}

uint64_t viz_timeline_ymax(const sm_model *m, int slot)
{
    panel_info p;
    panel_prepare(m, slot, &p, 0);
    return p.ymax;
}

int viz_timeline_panels(const viz_panel *pan, int n, canvas *c, int width,
                        int height, int top_h, int shared_y, viz_geom *geoms,
                        int max_geoms, int *ngeoms)
{
    int ts = viz_text_scale(width);
    if (n < 1)
        return -1;
    panel_info *p = calloc((size_t)n, sizeof *p);
    if (!p)
        return -1;
    uint64_t ymax = 0;
    int max_lanes = 0;
    for (int i = 0; i < n; i++) {
        size_t nr;
        const sm_range *rg = sm_ranges(pan[i].m, &nr, NULL);
        for (size_t k = 0; k < nr; k++)
            if (rg[k].lane + 1 > max_lanes)
                max_lanes = rg[k].lane + 1;
    }
    for (int i = 0; i < n; i++) {
        size_t nr;
        const sm_range *rg = sm_ranges(pan[i].m, &nr, NULL);
        int lanes = 0;
        for (size_t k = 0; k < nr; k++)
            if (rg[k].lane + 1 > lanes)
                lanes = rg[k].lane + 1;
        /* One y scale also means one plot height: same lanes, same room
         * for the legend in every panel. */
        panel_prepare(pan[i].m, pan[i].slot, &p[i], shared_y ? max_lanes : lanes);
        snprintf(p[i].title, sizeof p[i].title, "%s", pan[i].title);
        if (p[i].ymax > ymax)
            ymax = p[i].ymax;
    }
    /* One y scale: the largest panel's; capacity and cap lines are drawn
     * where they fall inside it. */
    for (int i = 0; shared_y && i < n; i++) {
        p[i].ymax = ymax;
        p[i].show_capacity = p[i].capacity && p[i].capacity <= ymax;
        p[i].show_cap = p[i].cap && p[i].cap <= ymax;
    }
    int chrome = 0;
    for (int i = 0; i < n; i++) {
        size_t nranges;
        sm_ranges(pan[i].m, &nranges, NULL);
        p[i].nitems = legend_items(pan[i].m, pan[i].slot, p[i].items,
                                   p[i].show_cap, p[i].show_capacity,
                                   p[i].has_oom, nranges > 0, p[i].has_counters);
        int ch = panel_chrome_h(&p[i], width, ts);
        if (ch > chrome)
            chrome = ch;
    }
    int legend_max = 0;
    for (int i = 0; shared_y && i < n; i++) {
        int lh = legend_flow(NULL, p[i].items, p[i].nitems, left_margin(ts),
                             width - right_margin(ts), 0, ts);
        if (lh > legend_max)
            legend_max = lh;
    }
    for (int i = 0; i < n; i++)
        p[i].legend_h = legend_max;
    int plot_h = n > 2 ? width / 4 : width * 2 / 5;
    int panel_h = chrome + plot_h;
    if (height > 0) {
        panel_h = (height - top_h) / n;
        if (panel_h < chrome + 40)
            panel_h = chrome + 40;
    }
    if (canvas_init(c, width, top_h + panel_h * n, VIZ_BG)) {
        free(p);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        viz_geom g;
        int top = top_h + i * panel_h;
        panel_draw(c, &p[i], top, panel_h, &g);
        if (geoms && i < max_geoms)
            geoms[i] = g;
        if (i || top_h)
            canvas_hline(c, 0, width - 1, top, i ? 1 : 2, 0x999999, 0);
    }
    if (ngeoms)
        *ngeoms = n;
    free(p);
    return 0;
}

int viz_timeline(const sm_model *m, canvas *c, int width, int height,
                 const char *title, viz_geom *geoms, int max_geoms,
                 int *ngeoms)
{
    int slots[SM_NDEV];
    int np = viz_model_slots(m, slots);
    viz_panel pan[SM_NDEV];
    char titles[SM_NDEV][256];
    for (int i = 0; i < np; i++) {
        viz_panel_title(m, slots[i], title, titles[i], sizeof titles[i]);
        pan[i] = (viz_panel){.m = m, .slot = slots[i], .title = titles[i]};
    }
    return viz_timeline_panels(pan, np, c, width, height, 0, 0, geoms,
                               max_geoms, ngeoms);
}

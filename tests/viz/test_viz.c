/* Renderer tests: what the pixels and the findings mean, on hand-made
 * snapshots (docs/format.md) written to a scratch directory.
 *
 *   - the top of the stacked area in a column is at viz_y_of(allocated),
 *     within one pixel, read back from the written PNG with libpng;
 *   - segment-map pixels in the middle of each block have the colour of the
 *     block's site; free space is the free colour; unmapped is grey;
 *   - the title area holds text pixels, antialiased (many grey levels);
 *   - canvas: proportional text widths, cutting to a width, the SVG writer
 *     (groups, escaping, a run of columns as one path);
 *   - leak suspects on a climbing floor, none on a healthy sawtooth;
 *   - --x marks: numbers read from mark texts, the axis in mark values;
 *     --x events on a range shared by two runs;
 *   - a long title wraps at width 800 (the plot moves down), never cut;
 *   - segment map at an OOM: the request bar beside the free blocks;
 *   - segment map folding of equal full segments, none with all_segments;
 *   - stacking order: the first-allocated site at the bottom; the leak
 *     suspect's band hatched and labelled;
 *   - by category: the categories as bands in their fixed colours, with
 *     the breakdown's figures;
 *   - fragmentation numbers exact; the OOM story; free_error undo;
 *   - the time axis starts at the first event (first coloured column at the
 *     plot's left edge), or at 0 with SM_FROM_ZERO;
 *   - site labels: the first frame outside the allocator libraries, short
 *     C++ names, sites told apart;
 *   - compare: one y scale (same bytes, same height in every panel), the
 *     table and the changed sites.
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "analyze/breakdown.h"
#include "analyze/category.h"
#include "viz/compare.h"
#include "analyze/findings.h"
#include "analyze/model.h"
#include "viz/render.h"

#define MiB (1ull << 20)

static char dir[4096];

/* Writes text to DIR/name and returns the path (static buffer per call). */
static const char *write_snap(const char *name, const char *text)
{
    static char paths[8][4200];
    static int k;
    char *p = paths[k++ % 8];
    snprintf(p, 4200, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
    return p;
}

static const char header[] =
    "{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\",\"pid\":1,"
    "\"host\":\"t\",\"argv\":[\"t\"],\"clock\":\"CLOCK_MONOTONIC\",\"t0_unix_ns\":0,"
    "\"mode\":\"stream\",\"settings\":{},\"devices\":[{\"index\":0,\"name\":\"T\","
    "\"total\":1073741824}]}\n"
    "{\"type\":\"stack\",\"id\":1,\"ips\":[\"0x1000\"]}\n"
    "{\"type\":\"stack\",\"id\":2,\"ips\":[\"0x2000\"]}\n"
    "{\"type\":\"stack\",\"id\":3,\"ips\":[\"0x3000\"]}\n"
    "{\"type\":\"sym\",\"ip\":\"0x1000\",\"fn\":\"weights\",\"file\":\"a.c\",\"line\":1}\n"
    "{\"type\":\"sym\",\"ip\":\"0x2000\",\"fn\":\"activations\",\"file\":\"a.c\",\"line\":2}\n"
    "{\"type\":\"sym\",\"ip\":\"0x3000\",\"fn\":\"cache\",\"file\":\"a.c\",\"line\":3}\n";

/* A growing buffer of snapshot text. */
typedef struct sb {
    char *s;
    size_t n, cap;
} sb;

static void sbf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sbf(sb *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->s && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
}

/* Reads a PNG into RGB; returns pixels (free()) and sets w, h. */
static uint8_t *read_png(const char *path, int *w, int *h)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path))
        return NULL;
    img.format = PNG_FORMAT_RGB;
    uint8_t *px = malloc(PNG_IMAGE_SIZE(img));
    if (!px || !png_image_finish_read(&img, NULL, px, 0, NULL)) {
        free(px);
        return NULL;
    }
    *w = (int)img.width;
    *h = (int)img.height;
    return px;
}

static uint32_t px_at(const uint8_t *px, int w, int x, int y)
{
    const uint8_t *p = px + ((size_t)y * (size_t)w + (size_t)x) * 3;
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static int is_site_colour(uint32_t c)
{
    if (c == VIZ_OTHER)
        return 1;
    for (int r = 0; r < SM_MAX_TOP; r++)
        if (viz_site_colour(r) == c)
            return 1;
    return 0;
}

static sm_model *load(const char *path, int top, int columns, int at)
{
    sm_opts o = {.top = top, .columns = columns, .at = at};
    sm_model *m = sm_new(&o);
    char err[512];
    if (sm_read_file(m, path, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return m;
}

/* Stacked area: allocations at known times; the top edge in the PNG at a
 * column equals viz_y_of(allocated at that time) within one pixel. */
static void test_timeline_height(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    /* t in ms: 100 weights 256 MiB; 200..900 activations climb 32 MiB per
     * 100 ms; 950 all activations freed; end at 1000 ms. */
    sbf(&b, "{\"a\":\"alloc\",\"t\":100000000,\"p\":1000000000,\"n\":%llu,\"k\":1}\n", 256 * MiB);
    for (int i = 0; i < 8; i++)
        sbf(&b, "{\"a\":\"alloc\",\"t\":%d00000000,\"p\":%llu,\"n\":%llu,\"k\":2}\n",
            i + 2, 4000000000ull + (unsigned long long)i * 100000000ull, 32 * MiB);
    for (int i = 0; i < 8; i++)
        sbf(&b, "{\"a\":\"free\",\"t\":950000000,\"p\":%llu}\n",
            4000000000ull + (unsigned long long)i * 100000000ull);
    sbf(&b, "{\"type\":\"trailer\",\"t\":1000000000,\"events\":17,\"dropped\":0,\"stacks_dropped\":0,\"reason\":\"exit\"}\n");
    const char *path = write_snap("height.msnap", b.s);
    free(b.s);

    int W = 1200;
    sm_model *m = load(path, 8, viz_timeline_columns(W), SM_AT_DEFAULT);
    canvas c;
    viz_geom g[4];
    int ng = 0;
    CHECK(viz_timeline(m, &c, W, 0, "T", g, 4, &ng) == 0);
    CHECK(ng == 1);
    char png[4200], err[256];
    snprintf(png, sizeof png, "%s/height.png", dir);
    CHECK(canvas_write_png(&c, png, err, sizeof err) == 0);
    canvas_free(&c);
    int w, h;
    uint8_t *px = read_png(png, &w, &h);
    CHECK(px != NULL);
    if (!px) {
        sm_free(m);
        return;
    }
    /* Times strictly inside the steps, and the value there. */
    struct { uint64_t t; uint64_t v; } pts[] = {
        {150000000, 256 * MiB}, {250000000, 288 * MiB}, {550000000, 384 * MiB},
        {920000000, 512 * MiB}, {975000000, 256 * MiB}};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        int col = sm_col_of(m, pts[i].t);
        int x = g[0].x0 + col;
        int want = viz_y_of(&g[0], pts[i].v);
        int top = -1;
        for (int y = g[0].y0; y < g[0].y1; y++)
            if (is_site_colour(px_at(px, w, x, y))) {
                top = y;
                break;
            }
        if (abs(top - want) > 1)
            fprintf(stderr, "point %zu: top %d want %d\n", i, top, want);
        CHECK(abs(top - want) <= 1);
        /* and the model's bucket agrees exactly */
        uint64_t sum = 0;
        for (int r = 0; r <= SM_MAX_TOP; r++)
            sum += sm_col_value(m, 0, col, r);
        CHECK_EQ_U64(sum, pts[i].v);
    }
    /* The two sites have the two first colours: weights at the bottom. */
    int x = g[0].x0 + sm_col_of(m, 550000000);
    CHECK(px_at(px, w, x, g[0].y1 - 2) == viz_site_colour(0));
    CHECK(px_at(px, w, x, viz_y_of(&g[0], 300 * MiB)) == viz_site_colour(1));
    /* Labels: the title band holds dark text pixels. */
    int ink = 0;
    for (int y = 0; y < g[0].y0 - 40 && y < h; y++)
        for (int xx = 0; xx < 400; xx++)
            if (px_at(px, w, xx, y) == 0x111111)
                ink++;
    CHECK(ink > 50);
    /* and the text is antialiased: its edges are greys between the text
     * colour and the white background, of many levels */
    int levels[256] = {0}, nlevels = 0;
    for (int y = 0; y < g[0].y0 - 40 && y < h; y++)
        for (int xx = 0; xx < 400; xx++) {
            uint32_t p = px_at(px, w, xx, y);
            int r = (int)(p >> 16), gg = (int)(p >> 8) & 255, bb = (int)p & 255;
            if (r == gg && gg == bb && r > 0x11 && r < 0xff && !levels[r]++)
                nlevels++;
        }
    CHECK(nlevels >= 16);
    free(px);
    sm_free(m);
}

/* Reads a whole file into a NUL-terminated string (free()); NULL when it
 * cannot. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    size_t n = 0, cap = 0, k;
    char buf[4096];
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        if (n + k + 1 > cap) {
            cap = (n + k + 1) * 2;
            s = realloc(s, cap);
        }
        memcpy(s + n, buf, k);
        n += k;
    }
    fclose(f);
    if (s)
        s[n] = '\0';
    return s;
}

/* The canvas: text widths come from a proportional font and scale with
 * the text scale; canvas_fit cuts to the width with ".."; a group, text
 * with XML's special characters and a run of columns come out of the SVG
 * writer as <g class>, escaped text and one path; the PNG has the run's
 * pixels. */
static void test_canvas_text_and_svg(void)
{
    CHECK(canvas_text_w("iiii", 1) < canvas_text_w("MMMM", 1));
    /* the timeline's left margin (constant, timeline.c) holds the widest y
     * tick label, 8 pixels from the axis, at both text scales */
    for (int width = 800; width <= 1600; width += 800) {
        int ts = viz_text_scale(width);
        CHECK(canvas_text_w("1023.5 MiB", ts) + 8 + 2 <=
              width - viz_timeline_columns(width) - (25 * ts + 10) - 2);
    }
    int w1 = canvas_text_w("GPU memory over time", 1);
    int w2 = canvas_text_w("GPU memory over time", 2);
    CHECK(w1 > 60 && abs(w2 - 2 * w1) <= 4);
    char s[64] = "a long label that cannot fit in sixty pixels";
    CHECK(canvas_fit(s, 60, 1) == 1);
    CHECK(canvas_text_w(s, 1) <= 60 && strlen(s) > 3 &&
          !strcmp(s + strlen(s) - 2, ".."));
    char t[16] = "fits";
    CHECK(canvas_fit(t, 200, 1) == 0 && !strcmp(t, "fits"));

    canvas c;
    CHECK(canvas_init(&c, 200, 100, 0xffffff) == 0);
    canvas_group(&c, "title", "a \"quoted\" <label>");
    canvas_text(&c, 4, 4, "x < y & z", 0x111111, 1);
    canvas_group_end(&c);
    canvas_group(&c, "band", NULL);
    for (int x = 10; x < 110; x++)
        canvas_rect(&c, x, 50 - x % 7, x + 1, 80, 0x3b75af);
    canvas_group_end(&c);
    canvas_group(&c, "empty", NULL);
    canvas_group_end(&c);
    CHECK(canvas_get(&c, 50, 79) == 0x3b75af && canvas_get(&c, 50, 81) == 0xffffff);
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/canvas.svg", dir);
    CHECK(canvas_write(&c, path, CANVAS_SVG, err, sizeof err) == 0);
    canvas_free(&c);
    char *svg = slurp(path);
    CHECK(svg != NULL);
    if (svg) {
        CHECK(strstr(svg, "<g class=\"title\" data-label=\"a &quot;quoted&quot; &lt;label&gt;\">") != NULL);
        CHECK(strstr(svg, ">x &lt; y &amp; z</text>") != NULL);
        const char *band = strstr(svg, "<g class=\"band\">");
        CHECK(band != NULL);
        /* the 100 columns are one path */
        if (band) {
            const char *end = strstr(band, "</g>");
            int paths = 0, rects = 0;
            for (const char *q = band; q && q < end; q++) {
                paths += !strncmp(q, "<path", 5);
                rects += !strncmp(q, "<rect", 5);
            }
            CHECK(paths == 1 && rects == 0);
        }
        CHECK(strstr(svg, "class=\"empty\"") == NULL);
        free(svg);
    }
}

/* Segment map: a 64 MiB segment with blocks of two sites; the middle of
 * each block has its site's colour, the gaps are free. */
static void test_segmap_colours_and_fragmentation(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    uint64_t base = 0x700000000000ull;
    sbf(&b, "{\"a\":\"alloc\",\"t\":1000,\"p\":%llu,\"n\":%llu,\"k\":1}\n",
        (unsigned long long)base, 64 * MiB);
    /* blocks: [0,8) site 2, [18,26) site 3, [26,30) site 2, [60,64) site 3;
     * free: [8,18)=10, [30,60)=30 -> total 40, largest 30. */
    struct { uint64_t off, len; int k; } blk[] = {
        {0, 8, 2}, {18, 8, 3}, {26, 4, 2}, {60, 4, 3}};
    for (int i = 0; i < 4; i++)
        sbf(&b, "{\"a\":\"block_alloc\",\"t\":%d,\"p\":%llu,\"n\":%llu,\"k\":%d,\"f\":\"allocator\"}\n",
            2000 + i, (unsigned long long)(base + blk[i].off * MiB),
            (unsigned long long)(blk[i].len * MiB), blk[i].k);
    /* a block allocated and freed earlier made the peak allocated 28 MiB */
    sbf(&b, "{\"a\":\"block_alloc\",\"t\":3000,\"p\":%llu,\"n\":%llu,\"k\":2}\n",
        (unsigned long long)(base + 40 * MiB), 4 * MiB);
    sbf(&b, "{\"a\":\"block_free\",\"t\":3001,\"p\":%llu}\n",
        (unsigned long long)(base + 40 * MiB));
    const char *path = write_snap("seg.msnap", b.s);
    free(b.s);

    sm_model *m = load(path, 8, 0, SM_AT_END);
    const sm_layout *l = sm_layout_at(m);
    CHECK(l->valid);
    CHECK(l->nsegs == 1);
    CHECK_EQ_U64(l->dev[0].total_free, 40 * MiB);
    CHECK_EQ_U64(l->dev[0].largest_free, 30 * MiB);
    CHECK_EQ_U64(l->dev[0].block_bytes, 24 * MiB);
    const sm_dev *v = sm_device(m, 0);
    CHECK_EQ_U64(v->peak_allocated, 28 * MiB);
    CHECK_EQ_U64(v->peak_reserved, 64 * MiB);

    canvas c;
    viz_segmap_geom g;
    CHECK(viz_segmap(m, &c, 1200, 0, "S", &g) == 0);
    char png[4200], err[256];
    snprintf(png, sizeof png, "%s/seg.png", dir);
    CHECK(canvas_write_png(&c, png, err, sizeof err) == 0);
    canvas_free(&c);
    int w, h;
    uint8_t *px = read_png(png, &w, &h);
    CHECK(px != NULL);
    size_t ns;
    const sm_site *sites = sm_sites(m, &ns);
    for (size_t i = 0; px && i < l->nspans; i++) {
        const sm_span *sp = &l->spans[i];
        int x, y;
        CHECK(viz_segmap_pixel(&g, l, 0, sp->addr + sp->size / 2, &x, &y) == 0);
        uint32_t want = sp->what == SM_SPAN_FREE ? VIZ_FREE
                        : viz_site_colour(sites[sp->site].rank);
        uint32_t got = px_at(px, w, x, y);
        if (got != want)
            fprintf(stderr, "span %zu (%d): got %06x want %06x\n", i, sp->what, got, want);
        CHECK(got == want);
    }
    /* blocks of sites 2 and 3 have different colours */
    CHECK(sites[l->spans[0].site].rank != sites[l->spans[2].site].rank);
    free(px);
    free(g.rows);
    sm_free(m);
}

/* Leak finder: a climbing floor gives one suspect (the cache site); a
 * healthy sawtooth gives none. */
static void test_leaks(void)
{
    for (int leak = 0; leak <= 1; leak++) {
        sb b = {0};
        sbf(&b, "%s", header);
        uint64_t t = 1000;
        sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":100,\"n\":%llu,\"k\":1}\n",
            (unsigned long long)t++, 512 * MiB);
        for (int step = 0; step < 20; step++) {
            for (int i = 0; i < 6; i++)
                sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":%llu,\"n\":%llu,\"k\":2}\n",
                    (unsigned long long)t++, 1000000000000ull + (unsigned long long)i * 1000000000ull,
                    (unsigned long long)(16 + i) * MiB);
            for (int i = 0; i < 6; i++)
                sbf(&b, "{\"a\":\"free\",\"t\":%llu,\"p\":%llu}\n", (unsigned long long)t++,
                    1000000000000ull + (unsigned long long)i * 1000000000ull);
            if (leak && step % 3 == 1)
                sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":%llu,\"n\":%llu,\"k\":3}\n",
                    (unsigned long long)t++, 2000000000000ull + (unsigned long long)step * 1000000000ull,
                    4 * MiB);
        }
        const char *path = write_snap(leak ? "climb.msnap" : "saw.msnap", b.s);
        free(b.s);
        sm_model *m = load(path, 8, 0, SM_AT_END);
        size_t n;
        uint64_t nv;
        const sm_leak *lk = sm_leaks(m, &n, &nv);
        CHECK(nv >= 15);
        if (leak) {
            size_t ns;
            const sm_site *sites = sm_sites(m, &ns);
            CHECK(n == 1);
            if (n) {
                CHECK(sites[lk[0].site].stack == 3);
                CHECK(lk[0].falls == 0);
                CHECK(lk[0].rises >= 5);
                CHECK_EQ_U64(lk[0].first, 0);
                CHECK(lk[0].last >= 20 * MiB);
            }
            char lab[128];
            sm_site_label(sm_labels_of(m), 3, lab, sizeof lab);
            CHECK(!strcmp(lab, "cache (a.c:3)"));
        } else {
            CHECK(n == 0);
        }
        sm_free(m);
    }
}

/* OOM story and free_error: the refused free leaves the allocation live. */
static void test_oom_and_free_error(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    uint64_t base = 0x500000000000ull;
    sbf(&b, "{\"a\":\"alloc\",\"t\":10,\"p\":%llu,\"n\":%llu,\"k\":1}\n", (unsigned long long)base, 100 * MiB);
    sbf(&b, "{\"a\":\"block_alloc\",\"t\":11,\"p\":%llu,\"n\":%llu,\"k\":2}\n", (unsigned long long)base, 40 * MiB);
    sbf(&b, "{\"a\":\"block_alloc\",\"t\":12,\"p\":%llu,\"n\":%llu,\"k\":2}\n", (unsigned long long)(base + 50 * MiB), 20 * MiB);
    sbf(&b, "{\"a\":\"block_free\",\"t\":13,\"p\":%llu}\n", (unsigned long long)(base + 50 * MiB));
    sbf(&b, "{\"a\":\"free_error\",\"t\":14,\"p\":%llu,\"r\":1}\n", (unsigned long long)(base + 50 * MiB));
    sbf(&b, "{\"a\":\"oom\",\"t\":20,\"n\":%llu,\"x\":%llu,\"y\":1073741824,\"k\":3,\"r\":2}\n",
        45 * MiB, 8 * MiB);
    const char *path = write_snap("oom.msnap", b.s);
    free(b.s);
    sm_model *m = load(path, 8, 100, SM_AT_DEFAULT);
    size_t n;
    const sm_oom *o = sm_ooms(m, &n, NULL);
    CHECK(n == 1);
    if (n) {
        CHECK_EQ_U64(o[0].requested, 45 * MiB);
        CHECK_EQ_U64(o[0].allocated, 60 * MiB);      /* the free was undone */
        CHECK_EQ_U64(o[0].reserved, 100 * MiB);
        CHECK_EQ_U64(o[0].dev_free, 8 * MiB);
        CHECK_EQ_U64(o[0].total_free, 40 * MiB);     /* [40,50) + [70,100) */
        CHECK_EQ_U64(o[0].largest_free, 30 * MiB);
    }
    const sm_layout *l = sm_layout_at(m);
    CHECK(l->valid && l->at == SM_AT_OOM);
    CHECK_EQ_U64(l->dev[0].block_bytes, 60 * MiB);
    sm_free(m);
}

/* --at parsing. */
static void test_parse_at(void)
{
    int at;
    uint64_t t;
    CHECK(sm_parse_at("oom", &at, &t) == 0 && at == SM_AT_OOM);
    CHECK(sm_parse_at("12.5s", &at, &t) == 0 && at == SM_AT_TIME && t == 12500000000ull);
    CHECK(sm_parse_at("800ms", &at, &t) == 0 && t == 800000000ull);
    CHECK(sm_parse_at("3min", &at, &t) == 0 && t == 180000000000ull);
    CHECK(sm_parse_at("1h", &at, &t) == 0 && t == 3600000000000ull);
    CHECK(sm_parse_at("2", &at, &t) == 0 && t == 2000000000ull);
    CHECK(sm_parse_at("soon", &at, &t) != 0);
    CHECK(sm_parse_at("-1", &at, &t) != 0);
    CHECK(sm_parse_at("5parsecs", &at, &t) != 0);
}


/* Renders m's timeline, writes it, reads it back; returns the pixels. */
static uint8_t *timeline_png(sm_model *m, int W, const char *name, viz_geom *g,
                             int *w, int *h)
{
    canvas c;
    int ng = 0;
    CHECK(viz_timeline(m, &c, W, 0, "T", g, 1, &ng) == 0);
    char png[4200], err[256];
    snprintf(png, sizeof png, "%s/%s", dir, name);
    CHECK(canvas_write_png(&c, png, err, sizeof err) == 0);
    canvas_free(&c);
    return read_png(png, w, h);
}

/* First column (from the plot's left edge) with a site colour; -1 none. */
static int first_coloured_col(const uint8_t *px, int w, const viz_geom *g)
{
    for (int x = g->x0; x < g->x1; x++)
        for (int y = g->y0; y < g->y1; y++)
            if (is_site_colour(px_at(px, w, x, y)) && px_at(px, w, x, y) != VIZ_OTHER)
                return x - g->x0;
    return -1;
}

/* The process started 5 s before its first allocation: the plot starts at
 * the first event (its first coloured column is at the left edge); with
 * SM_FROM_ZERO the data sits in the right sixth. */
static void test_xrange(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    sbf(&b, "{\"a\":\"alloc\",\"t\":5000000000,\"p\":4096,\"n\":%llu,\"k\":1}\n", 64 * MiB);
    sbf(&b, "{\"a\":\"alloc\",\"t\":5500000000,\"p\":8192000000,\"n\":%llu,\"k\":2}\n", 32 * MiB);
    sbf(&b, "{\"a\":\"free\",\"t\":5900000000,\"p\":8192000000}\n");
    sbf(&b, "{\"type\":\"trailer\",\"t\":6000000000,\"events\":3,\"dropped\":0,\"stacks_dropped\":0,\"reason\":\"exit\"}\n");
    const char *path = write_snap("late.msnap", b.s);
    free(b.s);
    int W = 1200;
    for (int from = SM_FROM_FIRST; from <= SM_FROM_ZERO; from++) {
        sm_opts o = {.top = 8, .columns = viz_timeline_columns(W), .x_from = from};
        sm_model *m = sm_new(&o);
        char err[512];
        CHECK(sm_read_file(m, path, 1, err, sizeof err) == 0);
        uint64_t lo, hi;
        sm_x_range(m, &lo, &hi);
        CHECK_EQ_U64(lo, from == SM_FROM_FIRST ? 5000000000ull : 0);
        CHECK_EQ_U64(hi, 6000000000ull);
        viz_geom g;
        int w, h;
        uint8_t *px = timeline_png(m, W, from ? "late-zero.png" : "late.png", &g, &w, &h);
        CHECK(px != NULL);
        if (px) {
            int col = first_coloured_col(px, w, &g);
            int cols = g.x1 - g.x0;
            if (from == SM_FROM_FIRST)
                CHECK(col >= 0 && col <= 2);
            else
                CHECK(abs(col - cols * 5 / 6) <= 2);
        }
        free(px);
        sm_free(m);
    }
}

/* Labels: a PyTorch-like stack (allocator frames in libc10_cuda, cudaMalloc
 * in libcudart with no file) is named by its first frame outside them, in
 * short form; two sites that would read the same are told apart. */
static void test_labels(void)
{
    char buf[SM_LABEL_MAX];
    /* Short names, without a demangler first (the mini demangler), then
     * with libstdc++'s. */
    sm_short_name("_ZN2at6native10empty_cudaEN3c108ArrayRefIlEESt8optionalINS1_10ScalarTypeEE", buf, sizeof buf);
    CHECK(!strcmp(buf, "at::native::empty_cuda"));
    sm_short_name("_ZN3c104cuda20CUDACachingAllocator6Native12_GLOBAL__N_117ExpandableSegment3mapENS3_12SegmentRangeE", buf, sizeof buf);
    CHECK(!strcmp(buf, "c10::cuda::CUDACachingAllocator::Native::ExpandableSegment::map"));
    sm_demangle_allow_loading(1);
    sm_short_name("_ZN2at4cuda4blas20gemm_internal_cublasIffEEvcclllNS_10OpMathTypeIT_E4typeEPKS4_lS8_lS6_PT0_l", buf, sizeof buf);
    CHECK(!strcmp(buf, "at::cuda::blas::gemm_internal_cublas"));
    sm_short_name("_ZN2at5emptyEN3c108ArrayRefIlEENS0_13TensorOptionsESt8optionalINS0_12MemoryFormatEE.constprop.0", buf, sizeof buf);
    CHECK(!strcmp(buf, "at::empty"));
    sm_short_name("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)", buf, sizeof buf);
    CHECK(!strcmp(buf, "at::native::empty_cuda"));
    sm_short_name("void at::native::(anonymous namespace)::launch<float, 4>(int) [clone .isra.0]", buf, sizeof buf);
    CHECK(!strcmp(buf, "at::native::launch"));
    sm_short_name("std::vector<int, std::allocator<int> >::operator[](unsigned long)", buf, sizeof buf);
    CHECK(!strcmp(buf, "std::vector::operator[]"));
    sm_short_name("main", buf, sizeof buf);
    CHECK(!strcmp(buf, "main"));
    sm_short_name("_Zjunk", buf, sizeof buf);
    CHECK(!strcmp(buf, "_Zjunk"));

    static const char snap[] =
        "{\"type\":\"header\",\"format\":\"memsnap\",\"version\":\"1.0\",\"pid\":1,"
        "\"host\":\"t\",\"argv\":[\"t\"],\"clock\":\"CLOCK_MONOTONIC\",\"t0_unix_ns\":0,"
        "\"mode\":\"stream\",\"settings\":{},\"devices\":[]}\n"
        "{\"type\":\"module\",\"base\":\"0x100000\",\"size\":65536,\"path\":\"/x/libcudart.so.13\",\"build_id\":\"\"}\n"
        "{\"type\":\"module\",\"base\":\"0x200000\",\"size\":65536,\"path\":\"/x/torch/lib/libc10_cuda.so\",\"build_id\":\"\"}\n"
        "{\"type\":\"module\",\"base\":\"0x300000\",\"size\":65536,\"path\":\"/x/torch/lib/libtorch_cuda.so\",\"build_id\":\"\"}\n"
        "{\"type\":\"module\",\"base\":\"0x400000\",\"size\":65536,\"path\":\"/usr/bin/python3\",\"build_id\":\"\"}\n"
        /* stacks 1..3: cudart, c10_cuda, then torch; 1 and 2 from different
         * callers; 3 the same path as 1 but another line inside c10 */
        "{\"type\":\"stack\",\"id\":1,\"ips\":[\"0x100010\",\"0x200010\",\"0x300010\",\"0x300100\",\"0x400001\",\"0x400002\",\"0x400003\",\"0x400004\",\"0x400005\"]}\n"
        "{\"type\":\"stack\",\"id\":2,\"ips\":[\"0x100010\",\"0x200010\",\"0x300010\",\"0x300200\",\"0x400001\",\"0x400002\",\"0x400003\",\"0x400004\",\"0x400005\"]}\n"
        "{\"type\":\"stack\",\"id\":3,\"ips\":[\"0x100010\",\"0x200020\",\"0x300010\",\"0x300100\",\"0x400001\",\"0x400002\",\"0x400003\",\"0x400004\",\"0x400005\"]}\n"
        /* stack 4: every frame in the runtime: the innermost names it */
        "{\"type\":\"stack\",\"id\":4,\"ips\":[\"0x100010\",\"0x200010\"]}\n"
        /* stack 5: no module records; names decide */
        "{\"type\":\"stack\",\"id\":5,\"ips\":[\"0x900010\",\"0x900020\"]}\n"
        "{\"type\":\"sym\",\"ip\":\"0x100010\",\"fn\":\"cudaMalloc\",\"file\":\"\",\"line\":0,\"off\":16}\n"
        "{\"type\":\"sym\",\"ip\":\"0x200010\",\"fn\":\"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)\",\"file\":\"c10/cuda/CUDACachingAllocator.cpp\",\"line\":1200}\n"
        "{\"type\":\"sym\",\"ip\":\"0x200020\",\"fn\":\"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)\",\"file\":\"c10/cuda/CUDACachingAllocator.cpp\",\"line\":1250}\n"
        "{\"type\":\"sym\",\"ip\":\"0x300010\",\"fn\":\"at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)\",\"file\":\"aten/src/ATen/native/cuda/EmptyTensor.cpp\",\"line\":42}\n"
        "{\"type\":\"sym\",\"ip\":\"0x300100\",\"fn\":\"_ZN2at6native5randnEN3c108ArrayRefIlEE\",\"file\":\"\",\"line\":0,\"off\":8}\n"
        "{\"type\":\"sym\",\"ip\":\"0x300200\",\"fn\":\"at::native::zeros(c10::ArrayRef<long>)\",\"file\":\"\",\"line\":0,\"off\":8}\n"
        "{\"type\":\"sym\",\"ip\":\"0x900010\",\"fn\":\"memsnap_alloc_malloc\",\"file\":\"alloc.c\",\"line\":314}\n"
        "{\"type\":\"sym\",\"ip\":\"0x900020\",\"fn\":\"kv_reserve\",\"file\":\"server.c\",\"line\":88}\n"
        "{\"a\":\"alloc\",\"t\":10,\"p\":4096,\"n\":1048576,\"k\":1}\n"
        "{\"a\":\"alloc\",\"t\":11,\"p\":8192,\"n\":2097152,\"k\":2}\n"
        "{\"a\":\"alloc\",\"t\":12,\"p\":12288,\"n\":3145728,\"k\":3}\n"
        "{\"a\":\"alloc\",\"t\":13,\"p\":16384,\"n\":4194304,\"k\":4}\n"
        "{\"a\":\"alloc\",\"t\":14,\"p\":20480,\"n\":5242880,\"k\":5}\n";
    const char *path = write_snap("labels.msnap", snap);
    sm_model *m = load(path, 8, 0, SM_AT_END);
    /* libtorch is a library, not the user's code; with nothing else left
     * the first frame outside the memory runtime names the site, told
     * apart from stack 2's by the first caller only it has */
    sm_site_label(sm_labels_of(m), 1, buf, sizeof buf);
    CHECK(!strcmp(buf, "at::native::empty_cuda (EmptyTensor.cpp:42) from native::randn"));
    sm_site_label(sm_labels_of(m), 4, buf, sizeof buf);
    CHECK(!strcmp(buf, "cudaMalloc"));
    sm_site_label(sm_labels_of(m), 5, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv_reserve (server.c:88)"));
    uint32_t st[3] = {1, 2, 3};
    char labs[3][SM_LABEL_MAX];
    sm_site_labels(sm_labels_of(m), st, 3, labs);
    /* 2 has a caller of its own; 1 and 3 differ only inside c10: one site,
     * one label */
    CHECK(!strcmp(labs[1], "at::native::empty_cuda (EmptyTensor.cpp:42) from native::zeros"));
    CHECK(!strcmp(labs[0], "at::native::empty_cuda (EmptyTensor.cpp:42) from native::randn"));
    CHECK(!strcmp(labs[2], labs[0]));
    /* 1 and 3 are the same site for matching across snapshots, 2 is not */
    CHECK(sm_site_key(sm_labels_of(m), 1) == sm_site_key(sm_labels_of(m), 3));
    CHECK(sm_site_key(sm_labels_of(m), 1) != sm_site_key(sm_labels_of(m), 2));
    sm_free(m);
}

/* compare: A holds 100 MiB; B the same 100 MiB and 300 MiB more later.  On
 * one y scale the 100 MiB are equally high in both panels; the table and
 * the changed site are right. */
static void test_compare(void)
{
    const char *paths[2];
    for (int k = 0; k < 2; k++) {
        sb b = {0};
        sbf(&b, "%s", header);
        sbf(&b, "{\"a\":\"alloc\",\"t\":1000000,\"p\":4096,\"n\":%llu,\"k\":1}\n", 100 * MiB);
        if (k)
            sbf(&b, "{\"a\":\"alloc\",\"t\":600000000,\"p\":900000000,\"n\":%llu,\"k\":2}\n", 300 * MiB);
        sbf(&b, "{\"type\":\"trailer\",\"t\":1000000000,\"events\":2,\"dropped\":0,\"stacks_dropped\":0,\"reason\":\"exit\"}\n");
        paths[k] = write_snap(k ? "cmp-b.msnap" : "cmp-a.msnap", b.s);
        free(b.s);
    }
    int W = 1000;
    sm_model *models[2];
    for (int k = 0; k < 2; k++)
        models[k] = load(paths[k], 8, viz_timeline_columns(W), SM_AT_DEFAULT);
    sm_opts o = {.top = 8, .columns = viz_timeline_columns(W)};
    for (int k = 0; k < 2; k++) {
        sm_free(models[k]);
        models[k] = sm_new(&o);
        char err[512];
        CHECK(sm_read_file(models[k], paths[k], 1, err, sizeof err) == 0);
    }
    viz_match_colours(models, 2);
    viz_cmp cmp;
    CHECK(viz_cmp_build(models, 2, 5, &cmp) == 0);
    CHECK_EQ_U64(cmp.rows[0].peak_reserved, 100 * MiB);
    CHECK_EQ_U64(cmp.rows[1].peak_reserved, 400 * MiB);
    CHECK(cmp.nchanges == 1);
    if (cmp.nchanges) {
        CHECK(cmp.changes[0].other == 1);
        CHECK_EQ_U64(cmp.changes[0].before, 0);
        CHECK_EQ_U64(cmp.changes[0].after, 300 * MiB);
        CHECK(!strcmp(cmp.changes[0].label, "activations (a.c:2)"));
    }
    const char *names[2] = {"a.msnap", "b.msnap"};
    canvas c;
    viz_geom g[2];
    int ng = 0;
    CHECK(viz_compare(models, names, 2, &cmp, &c, W, 0, g, 2, &ng) == 0);
    CHECK(ng == 2);
    CHECK(g[0].ymax == g[1].ymax);
    CHECK(g[0].y1 - g[0].y0 == g[1].y1 - g[1].y0);
    char png[4200], err[256];
    snprintf(png, sizeof png, "%s/cmp.png", dir);
    CHECK(canvas_write_png(&c, png, err, sizeof err) == 0);
    canvas_free(&c);
    int w, h;
    uint8_t *px = read_png(png, &w, &h);
    CHECK(px != NULL);
    /* the 100 MiB site: same colour, same height, in both panels */
    int hts[2] = {-1, -1};
    uint32_t cols[2] = {0, 0};
    for (int k = 0; px && k < 2; k++) {
        int x = g[k].x0 + sm_col_of(models[k], 300000000);
        for (int y = g[k].y0; y < g[k].y1; y++)
            if (is_site_colour(px_at(px, w, x, y))) {
                hts[k] = g[k].y1 - y;
                cols[k] = px_at(px, w, x, y);
                break;
            }
    }
    if (!(hts[0] > 0 && abs(hts[0] - hts[1]) <= 1))
        fprintf(stderr, "heights %d %d\n", hts[0], hts[1]);
    CHECK(hts[0] > 0 && abs(hts[0] - hts[1]) <= 1);
    CHECK(abs(hts[0] - (g[0].y1 - viz_y_of(&g[0], 100 * MiB))) <= 1);
    CHECK(cols[0] == cols[1]);
    free(px);
    viz_cmp_free(&cmp);
    for (int k = 0; k < 2; k++)
        sm_free(models[k]);
}

/* Stacking order and the leak band: site 2 allocates first (64 MiB, kept),
 * site 1 later with a larger peak, site 3 leaks 4 MiB every third step.
 * The bottom of the stacked area is site 2's colour (first allocated, not
 * largest), and site 3's band carries the leak hatch. */
static void test_stack_order_and_leak_band(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    uint64_t t = 1000;
    sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":50,\"n\":%llu,\"k\":2}\n",
        (unsigned long long)t++, 64 * MiB);
    sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":100,\"n\":%llu,\"k\":1}\n",
        (unsigned long long)t++, 512 * MiB);
    for (int step = 0; step < 20; step++) {
        for (int i = 0; i < 6; i++)
            sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":%llu,\"n\":%llu,\"k\":1}\n",
                (unsigned long long)t++, 1000000000000ull + (unsigned long long)i * 1000000000ull,
                (unsigned long long)(16 + i) * MiB);
        for (int i = 0; i < 6; i++)
            sbf(&b, "{\"a\":\"free\",\"t\":%llu,\"p\":%llu}\n", (unsigned long long)t++,
                1000000000000ull + (unsigned long long)i * 1000000000ull);
        if (step % 3 == 1)
            sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":%llu,\"n\":%llu,\"k\":3}\n",
                (unsigned long long)t++, 2000000000000ull + (unsigned long long)step * 1000000000ull,
                4 * MiB);
    }
    const char *path = write_snap("order.msnap", b.s);
    free(b.s);
    sm_model *m = load(path, 8, viz_timeline_columns(1600), SM_AT_END);
    size_t ns;
    const sm_site *sites = sm_sites(m, &ns);
    int rank_of[4] = {-1, -1, -1, -1};
    for (size_t i = 0; i < ns; i++)
        if (sites[i].stack <= 3)
            rank_of[sites[i].stack] = sites[i].rank;
    CHECK(rank_of[1] == 0);   /* largest peak */
    CHECK(rank_of[2] == 1);
    CHECK(rank_of[3] == 2);
    int order[SM_MAX_TOP + 1];
    int n = viz_stack_order(m, 0, order);
    CHECK(n == 4);
    CHECK(order[0] == rank_of[2] && order[1] == rank_of[1] &&
          order[2] == rank_of[3] && order[3] == 3);
    CHECK(viz_leak_rank(m, 0) == rank_of[3]);
    viz_geom g;
    int w, h;
    uint8_t *px = timeline_png(m, 1600, "order.png", &g, &w, &h);
    CHECK(px != NULL);
    if (px) {
        int x = g.x1 - 3;
        CHECK(px_at(px, w, x, g.y1 - 1) == viz_site_colour(rank_of[2]));
        CHECK(g.leak_rank == rank_of[3]);
        int hatch = 0;
        for (int y = g.y0; y < g.y1; y++)
            hatch += px_at(px, w, x, y) == VIZ_LEAK;
        CHECK(hatch >= 2);
        /* the label "leak suspect: ..." is text in the leak colour above
         * the band: more leak-coloured pixels in the plot than the band's */
        int all = 0;
        for (int y = g.y0; y < g.y1; y++)
            for (int xx = g.x0; xx < g.x1; xx++)
                all += px_at(px, w, xx, y) == VIZ_LEAK;
        CHECK(all > g.x1 - g.x0);
        free(px);
    }
    sm_free(m);
}

/* By category (render --by category): the bands are the categories the
 * rules give (a user's rules file here: weights -> parameters, activations
 * -> activations, cache -> a category of the user's own), bottom to top
 * from the longest-lived, each in its fixed colour in the PNG; the bands
 * add up to the total in every column; each band's peak and its value at
 * the total's peak are the breakdown's (summary's) figures; no leak band. */
static void test_by_category(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    /* t in ms: 100 weights 256 MiB; 200..500 activations 4 x 32 MiB; 600
     * cache 64 MiB; 700 activations freed; cache 16 MiB more at 800 */
    sbf(&b, "{\"a\":\"alloc\",\"t\":100000000,\"p\":1000000000,\"n\":%llu,\"k\":1}\n", 256 * MiB);
    for (int i = 0; i < 4; i++)
        sbf(&b, "{\"a\":\"alloc\",\"t\":%d00000000,\"p\":%llu,\"n\":%llu,\"k\":2}\n",
            i + 2, 4000000000ull + (unsigned long long)i * 100000000ull, 32 * MiB);
    sbf(&b, "{\"a\":\"alloc\",\"t\":600000000,\"p\":8000000000,\"n\":%llu,\"k\":3}\n", 64 * MiB);
    for (int i = 0; i < 4; i++)
        sbf(&b, "{\"a\":\"free\",\"t\":700000000,\"p\":%llu}\n",
            4000000000ull + (unsigned long long)i * 100000000ull);
    sbf(&b, "{\"a\":\"alloc\",\"t\":800000000,\"p\":9000000000,\"n\":%llu,\"k\":3}\n", 16 * MiB);
    sbf(&b, "{\"type\":\"trailer\",\"t\":1000000000,\"events\":11,\"dropped\":0,\"stacks_dropped\":0,\"reason\":\"exit\"}\n");
    const char *path = write_snap("bycat.msnap", b.s);
    free(b.s);
    const char *rpath = write_snap("bycat.rules",
                                   "parameters native weights\n"
                                   "activations native activations\n"
                                   "my_cache native cache\n");
    cat_rules *rules = cat_rules_new();
    char err[512];
    CHECK(rules && cat_rules_load(rules, rpath, err, sizeof err) == 0);
    int W = 1200;
    sm_opts o = {.top = 8, .columns = viz_timeline_columns(W), .at = SM_AT_DEFAULT,
                 .by = SM_BY_CATEGORY, .rules = rules};
    sm_model *m = sm_new(&o);
    CHECK(m && sm_read_file(m, path, 1, err, sizeof err) == 0);
    const sm_dev *v = sm_device(m, 0);
    CHECK(v->nbands == 3);
    CHECK(!strcmp(sm_band_category(m, 0, 0), "parameters"));
    CHECK(!strcmp(sm_band_category(m, 0, 1), "activations"));
    CHECK(!strcmp(sm_band_category(m, 0, 2), "my_cache"));
    CHECK(!strcmp(sm_band_category(m, 0, 3), "other"));
    CHECK(viz_leak_rank(m, 0) == -1);
    int order[SM_MAX_TOP + 1];
    CHECK(viz_stack_order(m, 0, order) == 4 && order[0] == 0 && order[1] == 1 &&
          order[2] == 2 && order[3] == 3);
    /* the total peaks at 600 ms: 256 + 128 + 64 MiB */
    CHECK_EQ_U64(v->peak_stacked, 448 * MiB);
    CHECK_EQ_U64(v->band_at_peak[0], 256 * MiB);
    CHECK_EQ_U64(v->band_at_peak[1], 128 * MiB);
    CHECK_EQ_U64(v->band_at_peak[2], 64 * MiB);
    CHECK_EQ_U64(v->band_peak[2], 80 * MiB);
    /* ... as the breakdown counts them (summary's table) */
    const bd_cats *k = bd_cats_shown(sm_breakdown(m), 0, NULL);
    CHECK(k != NULL);
    for (int band = 0; k && band < v->nbands; band++) {
        int c = cat_index_of(rules, sm_band_category(m, 0, band));
        CHECK_EQ_U64(v->band_peak[band], k->peak[c]);
        CHECK_EQ_U64(v->band_at_peak[band], k->at_peak[c]);
    }
    CHECK(k && k->total_peak == v->peak_stacked);
    /* every column's bands add up to its top */
    for (int col = 0; col < o.columns; col++) {
        uint64_t sum = 0;
        for (int band = 0; band <= SM_MAX_TOP; band++)
            sum += sm_col_value(m, 0, col, band);
        if (v->cols[col].has && sum != v->cols[col].total_max) {
            CHECK_EQ_U64(sum, v->cols[col].total_max);
            break;
        }
    }
    /* the colours: fixed per category, a user's by its name */
    CHECK(viz_band_colour(m, 0, 0) == viz_category_colour("parameters"));
    CHECK(viz_category_colour("parameters") == 0x3b75afu);
    CHECK(viz_band_colour(m, 0, 3) == VIZ_OTHER);
    CHECK(viz_category_colour("my_cache") == viz_band_colour(m, 0, 2));
    viz_geom g;
    int w, h;
    uint8_t *px = timeline_png(m, W, "bycat.png", &g, &w, &h);
    CHECK(px != NULL);
    if (px) {
        int x = g.x0 + sm_col_of(m, 650000000);
        CHECK(px_at(px, w, x, g.y1 - 2) == viz_category_colour("parameters"));
        CHECK(px_at(px, w, x, viz_y_of(&g, 320 * MiB)) == viz_category_colour("activations"));
        CHECK(px_at(px, w, x, viz_y_of(&g, 416 * MiB)) == viz_category_colour("my_cache"));
        free(px);
    }
    sm_free(m);
    cat_rules_free(rules);
}

/* Snapshot text: n alloc/free pairs (2n events) with a mark "... hour H"
 * after every k-th pair (H = pair / k), and one mark without "hour". */
static char *marks_snap(int n, int k)
{
    sb b = {0};
    sbf(&b, "%s", header);
    sbf(&b, "{\"type\":\"str\",\"id\":7,\"s\":\"warm-up done\"}\n");
    uint64_t t = 1000;
    for (int i = 0; i < n; i++) {
        sbf(&b, "{\"a\":\"alloc\",\"t\":%llu,\"p\":%d,\"n\":%llu,\"k\":1}\n",
            (unsigned long long)t++, 4096 + i, 8 * MiB);
        sbf(&b, "{\"a\":\"free\",\"t\":%llu,\"p\":%d}\n", (unsigned long long)t++,
            4096 + i);
        if ((i + 1) % k == 0) {
            sbf(&b, "{\"type\":\"str\",\"id\":%d,\"s\":\"server: step %d, simulated "
                "hour %d.00: ok\"}\n", 100 + i, i, (i + 1) / k);
            sbf(&b, "{\"a\":\"nvtx_mark\",\"t\":%llu,\"x\":%d,\"th\":1,\"f\":\"memsnap_api\"}\n",
                (unsigned long long)t++, 100 + i);
        }
        if (i == 3)
            sbf(&b, "{\"a\":\"nvtx_mark\",\"t\":%llu,\"x\":7,\"th\":1,\"f\":\"memsnap_api\"}\n",
                (unsigned long long)t++);
    }
    return b.s;
}

/* --x marks: the number after the word in each mark's text; the axis is
 * the mark value (0 at the first event, linear in events between marks);
 * --x events on a shared range (compare): a shorter run ends mid-axis. */
static void test_marks_and_shared_axis(void)
{
    double v;
    char w[32];
    CHECK(sm_mark_value("memsnap-decode: out of memory at step 12, simulated "
                        "hour 5.80: KV of 1 bytes", "hour", &v, w, sizeof w) == 0);
    CHECK(v > 5.79 && v < 5.81);
    CHECK(sm_mark_value("out of memory at step 12, simulated hour 5.80", "",
                        &v, w, sizeof w) == 0);
    CHECK(v == 12 && !strcmp(w, "step"));
    CHECK(sm_mark_value("5.5", "", &v, w, sizeof w) == 0 && v == 5.5 && !w[0]);
    CHECK(sm_mark_value("hourly 3", "hour", &v, w, sizeof w) == -1);
    CHECK(sm_mark_value("epoch=3", "EPOCH", &v, w, sizeof w) == 0 && v == 3);
    CHECK(sm_mark_value("no number here", "", &v, w, sizeof w) == -1);

    char *text = marks_snap(40, 10);   /* marks at hours 1..4 */
    const char *path = write_snap("marks.msnap", text);
    free(text);
    sm_opts o = {.top = 8, .columns = viz_timeline_columns(800),
                 .x_mode = SM_X_MARKS, .at = SM_AT_END};
    snprintf(o.x_word, sizeof o.x_word, "hour");
    sm_model *m = sm_new(&o);
    char err[512];
    CHECK(sm_read_file(m, path, 1, err, sizeof err) == 0);
    const char *word = NULL;
    CHECK(sm_marks(m, &word) == 4);
    CHECK(word && !strcmp(word, "hour"));
    uint64_t lo, hi;
    sm_x_range(m, &lo, &hi);
    CHECK_EQ_U64(lo, 0);
    /* the last mark (hour 4) is the last event but one: hi is hour 4 plus
     * a little (on the last segment's slope) */
    CHECK(hi >= 4 * (uint64_t)SM_MARK_SCALE && hi < 4 * (uint64_t)SM_MARK_SCALE + (uint64_t)SM_MARK_SCALE / 10);
    /* the 20th pair's free is event 40 + 1 non-hour mark + 1 hour mark = 42:
     * the hour-2 mark is event 43 */
    CHECK_EQ_U64(sm_x_of_event(m, 43, 0), 2 * (uint64_t)SM_MARK_SCALE);
    char lab[64];
    viz_mark_label(m, sm_x_of_event(m, 43, 0), 100000, lab, sizeof lab);
    CHECK(!strcmp(lab, "hour 2.0"));
    /* the hour-2 column is near the middle of the plot */
    int col = sm_col_of(m, 2 * (uint64_t)SM_MARK_SCALE);
    CHECK(col > o.columns * 45 / 100 && col < o.columns * 55 / 100);
    sm_free(m);

    /* no "hour" mark: zero marks (the CLI refuses with a message) */
    snprintf(o.x_word, sizeof o.x_word, "epoch");
    m = sm_new(&o);
    CHECK(sm_read_file(m, path, 1, err, sizeof err) == 0);
    CHECK(sm_marks(m, NULL) == 0);
    sm_free(m);

    /* --x events on one range for two runs: the short one (82 events)
     * stops near the middle of a 164-event axis */
    text = marks_snap(80, 1000);
    const char *longp = write_snap("long.msnap", text);
    free(text);
    sm_opts oe = {.top = 8, .columns = viz_timeline_columns(800),
                  .x_mode = SM_X_EVENTS, .at = SM_AT_END};
    sm_model *a = sm_new(&oe), *b = sm_new(&oe);
    CHECK(sm_read_file(a, path, 0, err, sizeof err) == 0);
    CHECK(sm_read_file(b, longp, 0, err, sizeof err) == 0);
    uint64_t blo, bhi;
    sm_x_range(b, &blo, &bhi);
    sm_set_x_range(a, blo, bhi);
    sm_set_x_range(b, blo, bhi);
    CHECK(sm_finish(a) == 0);
    CHECK(sm_finish(b) == 0);
    const sm_dev *va = sm_device(a, 0), *vb = sm_device(b, 0);
    int last = oe.columns - 1;
    CHECK(vb->cols && vb->cols[last].has);
    CHECK(va->cols && !va->cols[last].has);
    int end_a = sm_col_of(a, sm_events(a) - 1);
    CHECK(end_a > oe.columns * 40 / 100 && end_a < oe.columns * 60 / 100);
    CHECK(va->cols && va->cols[end_a > 0 ? end_a - 1 : 0].has);
    sm_free(a);
    sm_free(b);
}

/* At --width 800 a long title wraps (the plot moves down by whole title
 * lines) instead of being cut. */
static void test_title_wraps(void)
{
    char *text = marks_snap(10, 1000);
    const char *path = write_snap("title.msnap", text);
    free(text);
    sm_model *m = load(path, 8, viz_timeline_columns(800), SM_AT_END);
    canvas c;
    viz_geom g1, g2;
    int ng;
    CHECK(viz_timeline(m, &c, 800, 0, "T", &g1, 1, &ng) == 0);
    canvas_free(&c);
    CHECK(viz_timeline(m, &c, 800, 0,
                       "GPU memory over time of a rather long run name that "
                       "does not fit in one line of an 800 pixel picture",
                       &g2, 1, &ng) == 0);
    canvas_free(&c);
    CHECK(g2.y0 - g1.y0 >= 2 * 9);   /* at least one more title line */
    sm_free(m);
}

/* The failed request beside the largest free blocks: free 30 and 10 MiB
 * inside a 64 MiB segment, a block request of 45 MiB fails.  The request
 * bar is red, the free bars follow largest first, widths in proportion. */
static void test_segmap_request_bar(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    uint64_t base = 0x700000000000ull;
    sbf(&b, "{\"a\":\"alloc\",\"t\":1000,\"p\":%llu,\"n\":%llu,\"k\":1}\n",
        (unsigned long long)base, 64 * MiB);
    struct { uint64_t off, len; int k; } blk[] = {
        {0, 8, 2}, {18, 8, 3}, {26, 4, 2}, {60, 4, 3}};
    for (int i = 0; i < 4; i++)
        sbf(&b, "{\"a\":\"block_alloc\",\"t\":%d,\"p\":%llu,\"n\":%llu,\"k\":%d,\"f\":\"allocator\"}\n",
            2000 + i, (unsigned long long)(base + blk[i].off * MiB),
            (unsigned long long)(blk[i].len * MiB), blk[i].k);
    sbf(&b, "{\"a\":\"oom\",\"t\":5000,\"n\":%llu,\"x\":1048576,\"y\":1073741824,"
        "\"r\":2,\"k\":2,\"f\":\"allocator\"}\n", 45 * MiB);
    const char *path = write_snap("req.msnap", b.s);
    free(b.s);
    sm_model *m = load(path, 8, 0, SM_AT_DEFAULT);
    canvas c;
    viz_segmap_geom g;
    CHECK(viz_segmap(m, &c, 1200, 0, "S", &g) == 0);
    CHECK(g.nreq == 3);   /* the request, free 30 MiB, free 10 MiB */
    if (g.nreq == 3) {
        CHECK(canvas_get(&c, g.req_x + 2, g.req_y[0] + 2) == VIZ_OOM);
        /* one scale: 45 : 30 : 10 within a pixel */
        CHECK(abs(g.req_w[1] - g.req_w[0] * 30 / 45) <= 1);
        CHECK(abs(g.req_w[2] - g.req_w[0] * 10 / 45) <= 1);
        CHECK(g.req_y[1] > g.req_y[0] && g.req_y[2] > g.req_y[1]);
    }
    /* the SVG of the same picture names the request and the free blocks */
    char svgp[4200], err[256];
    snprintf(svgp, sizeof svgp, "%s/req.svg", dir);
    CHECK(canvas_write(&c, svgp, CANVAS_SVG, err, sizeof err) == 0);
    char *svg = slurp(svgp);
    CHECK(svg && strstr(svg, "<g class=\"oom-request\">") &&
          strstr(svg, ">requested 45.00 MiB</text>") &&
          strstr(svg, ">largest free block 30.00 MiB</text>"));
    free(svg);
    canvas_free(&c);
    free(g.rows);
    sm_free(m);
}

/* Folding: four 32 MiB segments each full of one site-1 block fold into
 * one row; a half-full 32 MiB segment and a 64 MiB one keep their rows;
 * with all_segments every segment has its row. */
static void test_segmap_fold(void)
{
    sb b = {0};
    sbf(&b, "%s", header);
    uint64_t base = 0x700000000000ull;
    for (int i = 0; i < 6; i++) {
        uint64_t sz = i == 5 ? 64 * MiB : 32 * MiB;
        uint64_t at = base + (uint64_t)i * 128 * MiB;
        sbf(&b, "{\"a\":\"alloc\",\"t\":%d,\"p\":%llu,\"n\":%llu,\"k\":1}\n",
            1000 + i, (unsigned long long)at, (unsigned long long)sz);
        sbf(&b, "{\"a\":\"block_alloc\",\"t\":%d,\"p\":%llu,\"n\":%llu,\"k\":1,\"f\":\"allocator\"}\n",
            2000 + i, (unsigned long long)at,
            (unsigned long long)(i == 4 ? 16 * MiB : sz));
    }
    const char *path = write_snap("fold.msnap", b.s);
    free(b.s);
    for (int all = 0; all <= 1; all++) {
        sm_opts o = {.top = 8, .at = SM_AT_END, .all_segments = all};
        sm_model *m = sm_new(&o);
        char err[512];
        CHECK(sm_read_file(m, path, 1, err, sizeof err) == 0);
        canvas c;
        viz_segmap_geom g;
        CHECK(viz_segmap(m, &c, 1200, 0, "S", &g) == 0);
        CHECK(g.hidden == 0);
        if (!all) {
            CHECK(g.folded == 3);
            CHECK(g.nrows == 3);
            CHECK(g.nrows >= 1 && g.rows[0].seg == 0);   /* at the first of them */
        } else {
            CHECK(g.folded == 0);
            CHECK(g.nrows == 6);
        }
        canvas_free(&c);
        free(g.rows);
        sm_free(m);
    }
}

/* The OOM verdict tells an allocator's own limit (PyTorch's memory
 * fraction, memsnap's cap) from fragmentation and a full device. */
static void test_oom_verdict(void)
{
    sm_oom o = {.requested = 1ull << 30, .dev_free = 100ull << 30, .dev_total = 140ull << 30,
                .api = MSNAP_API_TORCH, .blocks_seen = 1,
                .total_free = 134ull << 20, .largest_free = 64ull << 20};
    CHECK(strstr(sm_oom_verdict(&o), "own limit") != NULL);
    o.total_free = 2ull << 30;           /* the cache alone held enough */
    CHECK(strstr(sm_oom_verdict(&o), "fragmentation") != NULL);
    o.total_free = 134ull << 20;
    o.api = MSNAP_API_cuMemAlloc_v2;     /* the driver refused: not a limit */
    CHECK(strstr(sm_oom_verdict(&o), "fragmentation") != NULL);
    o.dev_free = 0;
    CHECK(strstr(sm_oom_verdict(&o), "device was full") != NULL);
}

int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "/tmp");
    test_timeline_height();
    test_segmap_colours_and_fragmentation();
    test_leaks();
    test_oom_and_free_error();
    test_parse_at();
    test_xrange();
    test_labels();
    test_compare();
    test_stack_order_and_leak_band();
    test_by_category();
    test_marks_and_shared_axis();
    test_title_wraps();
    test_canvas_text_and_svg();
    test_segmap_request_bar();
    test_segmap_fold();
    test_oom_verdict();
    return check_summary();
}

/* The segment-map PNG (render.h).  Top to bottom:
 *
 *   title     "Memory segments at the OOM / peak / end / t = ..."
 *   numbers   per device: reserved, blocks, free inside reserved (total and
 *             largest block), fragmentation = 1 - largest_free/total_free
 *             and 1 - peak_allocated/peak_reserved
 *   request   at an OOM: the failed request (red bar) beside the largest
 *             free blocks, on one scale of their own
 *   rows      one per segment in address order, grouped by device (three or
 *             more of one size and kind, each full of one site's blocks,
 *             fold into one labelled row "N x SIZE segments, full: SITE" at
 *             the first of them, unless all_segments); a label
 *             (address, size, kind) on the left, the bar on the right.  All
 *             bars share one scale (bytes per pixel, chosen so every row
 *             fits the height), so a wider bar is a bigger segment; a
 *             segment longer than the bar width wraps onto more lines.
 *             Each pixel takes the colour of whatever covers most of its
 *             bytes: a block (its site's colour, as in the timeline), free
 *             space (white), unmapped address space (grey, hatched) or,
 *             without allocator blocks, the segment's own site colour.
 *             The largest free block is framed in red.
 *   legend    sites present at that moment, then free / unmapped.
 */
#include "render.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/findings.h"

#define TEXT 0x111111u
#define MUTED 0x555555u
#define OUTLINE 0x777777u
#define LARGEST 0xd62728u
#define REQ_FREE 5            /* free blocks drawn beside the failed request */

static const char *kind_name(int kind)
{
    switch (kind) {
    case MSNAP_A_ALLOC: return "cuMemAlloc";
    case MSNAP_A_ASYNC_ALLOC: return "async";
    case MSNAP_A_MANAGED_ALLOC: return "managed";
    case MSNAP_A_VMM_RESERVE: return "VMM";
    default: return "blocks";
    }
}

/* Colour of a span. */
static uint32_t span_colour(const sm_model *m, const sm_span *s)
{
    size_t ns;
    const sm_site *sites = sm_sites(m, &ns);
    switch (s->what) {
    case SM_SPAN_FREE: return VIZ_FREE;
    case SM_SPAN_UNMAPPED: return VIZ_UNMAPPED;
    case SM_SPAN_USED:
        if (sm_blocks_seen(m)) /* beside blocks: another library's memory */
            return VIZ_OTHER_LIB;
        /* fall through */
    default:
        if (s->site == UINT32_MAX || s->site >= ns)
            return VIZ_OTHER;
        return viz_rank_colour(m, sites[s->site].device, sites[s->site].rank);
    }
}

/* Lines a segment takes at bpp bytes per pixel over bar_w pixels. */
static uint64_t seg_lines(uint64_t size, double bpp, int bar_w)
{
    double per_line = bpp * bar_w;
    uint64_t n = (uint64_t)ceil((double)size / per_line);
    return n ? n : 1;
}

int viz_segmap_pixel(const viz_segmap_geom *g, const sm_layout *l,
                     size_t seg, uint64_t a, int *x, int *y)
{
    for (size_t i = 0; i < g->nrows; i++) {
        const viz_segrow *r = &g->rows[i];
        if (r->seg != seg)
            continue;
        const sm_segment *s = &l->segs[seg];
        if (a < s->addr || a >= s->addr + s->size)
            return -1;
        uint64_t px = (uint64_t)((double)(a - s->addr) / g->bytes_per_px);
        int line = (int)(px / (uint64_t)r->bar_w);
        if (line >= r->lines)
            line = r->lines - 1;
        *x = r->x0 + (int)(px - (uint64_t)line * (uint64_t)r->bar_w);
        *y = r->y0 + line * r->line_h + r->h / 2;
        return 0;
    }
    return -1;
}

typedef struct item {
    char text[160];
    uint32_t colour;
    int hatch;
} item;

/* Draws one line of the numbers at (x, y), cut with ".." to max_w pixels
 * (only narrow pictures, --width below about 700, need the cut). */
static void text_fit(canvas *c, int max_w, int x, int y, const char *s,
                     uint32_t colour, int ts)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%s", s);
    canvas_fit(buf, max_w, ts);
    canvas_text(c, x, y, buf, colour, ts);
}

/* Flows legend items; draws when c != NULL; returns the height. */
static int flow(canvas *c, const item *it, int n, int x0, int x1, int y, int ts)
{
    int lh = (CANVAS_LINE_H + 4) * ts, x = x0, rows = n ? 1 : 0;
    char text[sizeof it->text];
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
            int sy = y + ts, sh = CANVAS_CAP_H * ts;
            canvas_group(c, "legend-item", text);
            canvas_rect(c, x, sy, x + 12 * ts, sy + sh, it[i].colour);
            if (it[i].hatch)
                canvas_hatch(c, x, sy, x + 12 * ts, sy + sh, 0x9a9a9a, 6);
            canvas_frame(c, x, sy, x + 12 * ts, sy + sh, OUTLINE);
            canvas_text(c, x + 14 * ts + 4, y, text, TEXT, ts);
            canvas_group_end(c);
        }
        x += w;
    }
    return rows * lh;
}

/* The site that fills segment s entirely (one block or used span over
 * all of it), else UINT32_MAX. */
static uint32_t full_site(const sm_layout *l, const sm_segment *s)
{
    if (s->nspans != 1)
        return UINT32_MAX;
    const sm_span *sp = &l->spans[s->first_span];
    return (sp->what == SM_SPAN_BLOCK || sp->what == SM_SPAN_USED) &&
           sp->addr == s->addr && sp->size == s->size ? sp->site : UINT32_MAX;
}

static const sm_layout *fold_layout;

/* Orders segment indexes by (device, size, kind, full site), then index. */
static int cmp_fold(const void *a, const void *b)
{
    const sm_segment *x = &fold_layout->segs[*(const size_t *)a];
    const sm_segment *y = &fold_layout->segs[*(const size_t *)b];
    uint32_t fx = full_site(fold_layout, x), fy = full_site(fold_layout, y);
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (fx != fy) return fx < fy ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* The rows of the map: row_seg[i] the segment drawn in row i (address
 * order), row_n[i] how many segments it stands for.  Without `all`,
 * segments of one device, size and kind, each filled entirely by blocks of
 * one site, fold into one row at the first of them when there are at least
 * FOLD_MIN of them (weights loaded as dozens of equal segments).  Returns
 * the number of rows; -1 out of memory (nothing allocated). */
#define FOLD_MIN 3
static long fold_rows(const sm_layout *l, int all, size_t **row_seg,
                      uint32_t **row_n)
{
    size_t n = l->nsegs;
    *row_seg = malloc((n + 1) * sizeof **row_seg);
    *row_n = malloc((n + 1) * sizeof **row_n);
    size_t *idx = malloc((n + 1) * sizeof *idx);
    uint32_t *cnt = calloc(n + 1, sizeof *cnt);  /* per segment: run size at its first, 0 folded away */
    if (!*row_seg || !*row_n || !idx || !cnt) {
        free(*row_seg);
        free(*row_n);
        free(idx);
        free(cnt);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
        cnt[i] = 1;
    }
    if (!all && n) {
        fold_layout = l;
        qsort(idx, n, sizeof *idx, cmp_fold);
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            const sm_segment *a = &l->segs[idx[i]];
            uint32_t fa = full_site(l, a);
            while (fa != UINT32_MAX && j < n) {
                const sm_segment *b = &l->segs[idx[j]];
                if (b->device != a->device || b->size != a->size ||
                    b->kind != a->kind || full_site(l, b) != fa)
                    break;
                j++;
            }
            if (j - i >= FOLD_MIN) {
                cnt[idx[i]] = (uint32_t)(j - i);   /* idx[i] is the lowest index */
                for (size_t k = i + 1; k < j; k++)
                    cnt[idx[k]] = 0;
            }
            i = j;
        }
    }
    size_t r = 0;
    for (size_t i = 0; i < n; i++)
        if (cnt[i]) {
            (*row_seg)[r] = i;
            (*row_n)[r++] = cnt[i];
        }
    free(idx);
    free(cnt);
    return (long)r;
}

/* What the parts of one segment map share: the picture's geometry, fixed
 * before anything is drawn. */
typedef struct segmap {
    const sm_model *m;
    const sm_layout *l;
    const sm_site *sites;
    size_t nsites;
    canvas *c;
    int width, ts, margin;
    int ndev_rows;           /* devices with rows */
    int title_h, stats_h;
    int label_w, bar_x, bar_w;
    int row_h, line_h, dev_h;
    double bpp;              /* bytes per pixel of every bar */
} segmap;

/* The legend's items into it (room for SM_MAX_TOP * SM_NDEV + 4): the
 * sites present in the layout, by rank, then other sites, other
 * libraries' memory, free and unmapped.  Returns how many. */
static int legend_items(const segmap *g, item *it)
{
    const sm_model *m = g->m;
    const sm_layout *l = g->l;
    const sm_site *sites = g->sites;
    char a[32];
    int nit = 0, other = 0;
    for (int d = 0; d < SM_NDEV && nit < SM_MAX_TOP * 2; d++) {
        const sm_dev *v = sm_device(m, d);
        if (!l->dev[d].segments)
            continue;
        uint32_t stacks[SM_MAX_TOP];
        char (*labs)[SM_LABEL_MAX] = malloc(SM_MAX_TOP * sizeof *labs);
        for (int r = 0; r < v->ntop; r++)
            stacks[r] = sites[v->top[r]].stack;
        if (labs)
            sm_site_labels(sm_labels_of(m), stacks, v->ntop, labs);
        for (int r = 0; r < v->ntop; r++) {
            /* the site as every view counts it: all its stacks (one
             * group, one rank, one colour), not the one that names it */
            uint64_t bytes = 0;
            for (size_t i = 0; i < l->nspans; i++) {
                const sm_span *sp = &l->spans[i];
                if ((sp->what == SM_SPAN_BLOCK ||
                     (sp->what == SM_SPAN_USED && !sm_blocks_seen(m))) &&
                    sp->site < g->nsites && sites[sp->site].rank == r &&
                    sites[sp->site].device == d)
                    bytes += sp->size;
            }
            if (!bytes)
                continue;
            char lab[SM_LABEL_MAX];
            if (labs)
                snprintf(lab, sizeof lab, "%s", labs[r]);
            else
                sm_site_label(sm_labels_of(m), sites[v->top[r]].stack, lab, sizeof lab);
            viz_fit_label(lab, 84);
            snprintf(it[nit].text, sizeof it[nit].text, "%s%.100s  %s here",
                     g->ndev_rows > 1 ? "" : "", lab, msnap_size_text(bytes, a, sizeof a));
            it[nit++].colour = viz_rank_colour(m, d, r);
        }
        free(labs);
    }
    uint64_t other_lib = 0;
    for (size_t i = 0; i < l->nspans; i++) {
        const sm_span *sp = &l->spans[i];
        if (sp->what == SM_SPAN_USED && sm_blocks_seen(m))
            other_lib += sp->size;
        else if ((sp->what == SM_SPAN_BLOCK || sp->what == SM_SPAN_USED) &&
                 (sp->site >= g->nsites || sites[sp->site].rank < 0))
            other = 1;
    }
    if (other) {
        snprintf(it[nit].text, sizeof it[nit].text, "other sites");
        it[nit++].colour = VIZ_OTHER;
    }
    if (other_lib) {
        snprintf(it[nit].text, sizeof it[nit].text,
                 "other libraries' memory (cuBLAS, cuDNN, NCCL)  %s",
                 msnap_size_text(other_lib, a, sizeof a));
        it[nit++].colour = VIZ_OTHER_LIB;
    }
    if (sm_blocks_seen(m)) {
        snprintf(it[nit].text, sizeof it[nit].text,
                 "free inside reserved (cached by the allocator)");
        it[nit++].colour = VIZ_FREE;
    }
    snprintf(it[nit].text, sizeof it[nit].text, "reserved address space, not mapped");
    it[nit].colour = VIZ_UNMAPPED;
    it[nit++].hatch = 1;
    return nit;
}

/* At an OOM with allocator blocks: the failed request (returned; 0 when
 * none) and the largest free blocks of its device, largest first, into
 * fr[0..*nfr) (at most REQ_FREE). */
static uint64_t oom_request(const sm_model *m, const sm_layout *l, uint64_t *fr, int *nfr)
{
    *nfr = 0;
    if (l->at != SM_AT_OOM || !sm_blocks_seen(m))
        return 0;
    size_t no;
    const sm_oom *oo = sm_ooms(m, &no, NULL);
    if (!no)
        return 0;
    int od = oo[0].device < 0 ? SM_DEV_UNKNOWN : oo[0].device;
    for (size_t k = 0; k < l->nsegs; k++)
    for (size_t i = l->segs[k].first_span;
         i < l->segs[k].first_span + l->segs[k].nspans; i++) {
        const sm_span *sp = &l->spans[i];
        int sd = l->segs[k].device;
        if (sp->what != SM_SPAN_FREE ||
            (sd != od && !(od == SM_DEV_UNKNOWN && sd < 0)))
            continue;
        int j = *nfr < REQ_FREE ? (*nfr)++ : REQ_FREE;
        if (j == REQ_FREE && sp->size <= fr[REQ_FREE - 1])
            continue;
        if (j == REQ_FREE)
            j = REQ_FREE - 1;
        while (j > 0 && fr[j - 1] < sp->size) {
            fr[j] = fr[j - 1];
            j--;
        }
        fr[j] = sp->size;
    }
    return oo[0].requested;
}

/* Bytes per pixel: the smallest that fits the rows row_seg[0..nrow) into
 * max_lines lines of bar_w pixels (each segment at least one line); when
 * even the coarsest scale does not fit, *shown < nrow rows are drawn. */
static double fit_scale(const sm_layout *l, const size_t *row_seg, size_t nrow, int bar_w,
                        int max_lines, size_t *shown)
{
    uint64_t biggest = 1;
    for (size_t i = 0; i < nrow; i++)
        if (l->segs[row_seg[i]].size > biggest)
            biggest = l->segs[row_seg[i]].size;
    double lo = 1e-3, hi = (double)biggest / bar_w + 1;
    uint64_t nlines_hi = 0;
    for (size_t i = 0; i < nrow; i++)
        nlines_hi += seg_lines(l->segs[row_seg[i]].size, hi, bar_w);
    *shown = nrow;
    if (nlines_hi > (uint64_t)max_lines) {
        *shown = (size_t)max_lines > 1 ? (size_t)max_lines - 1 : 1;
        if (*shown > nrow)
            *shown = nrow;
    } else {
        for (int it2 = 0; it2 < 60; it2++) {
            double mid = (lo + hi) / 2;
            uint64_t nl = 0;
            for (size_t i = 0; i < nrow && nl <= (uint64_t)max_lines; i++)
                nl += seg_lines(l->segs[row_seg[i]].size, mid, bar_w);
            if (nl <= (uint64_t)max_lines)
                hi = mid;
            else
                lo = mid;
        }
        /* Never finer than one byte per pixel when segments are tiny. */
        if (hi < 1.0 && (double)biggest / bar_w < 1.0)
            hi = (double)biggest / bar_w;
    }
    return hi > 0 ? hi : 1;
}

/* The title line. */
static void draw_title(const segmap *g, const char *title)
{
    canvas *c = g->c;
    const sm_layout *l = g->l;
    char buf[512], a[32];
    canvas_group(c, "title", NULL);
    const char *when = l->at == SM_AT_OOM ? "at the first OOM"
                     : l->at == SM_AT_PEAK ? "at the peak of reserved memory"
                     : l->at == SM_AT_TIME ? "at the chosen time"
                                           : "at the end";
    snprintf(buf, sizeof buf, "%s %s (t = %s, after event %" PRIu64 ")", title,
             when, msnap_time_text(l->t_ns, a, sizeof a), l->event_index);
    if (canvas_text_w(buf, g->ts + 1) > g->width - 2 * g->margin) {
        canvas_fit(buf, g->width - 2 * g->margin, g->ts);
        canvas_text(c, g->margin, 8, buf, TEXT, g->ts);
    } else
        canvas_text(c, g->margin, 8, buf, TEXT, g->ts + 1);
    canvas_group_end(c);
}

/* The numbers: the scale, what the colours mean, then per device its
 * segments, free memory and fragmentation. */
static void draw_numbers(const segmap *g)
{
    canvas *c = g->c;
    const sm_model *m = g->m;
    const sm_layout *l = g->l;
    int ts = g->ts, margin = g->margin, tw = g->width - 2 * margin;
    int step = (CANVAS_LINE_H + 3) * ts;
    char buf[512], a[32], b[32], d1[32];
    canvas_group(c, "numbers", NULL);
    int y = g->title_h;
    snprintf(buf, sizeof buf,
             "One row per segment, laid out by address; every pixel is %s%s.",
             g->bpp >= 1 ? "" : "less than 1 B",
             g->bpp >= 1 ? msnap_size_text_short((uint64_t)llround(g->bpp), a, sizeof a) : "");
    text_fit(c, tw, margin, y, buf, MUTED, ts);
    y += step;
    text_fit(c, tw, margin, y, sm_blocks_seen(m)
                    ? "Colour = allocation site of the block; white = free."
                    : "No allocator blocks: segments show their own allocation site.",
                MUTED, ts);
    y += step;
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev_layout *dl = &l->dev[d];
        if (!dl->segments && !dl->block_bytes)
            continue;
        const sm_dev *v = sm_device(m, d);
        if (sm_blocks_seen(m))
            snprintf(buf, sizeof buf,
                     "device %d: %" PRIu64 " segments with %s of memory, %s of it in blocks",
                     d == SM_DEV_UNKNOWN ? -1 : d, dl->segments,
                     msnap_size_text(dl->mapped_bytes, a, sizeof a),
                     msnap_size_text(dl->block_bytes, b, sizeof b));
        else
            snprintf(buf, sizeof buf,
                     "device %d: %" PRIu64 " segments with %s of memory",
                     d == SM_DEV_UNKNOWN ? -1 : d, dl->segments,
                     msnap_size_text(dl->mapped_bytes, a, sizeof a));
        if (dl->segment_bytes > dl->mapped_bytes) {
            size_t n = strlen(buf);
            snprintf(buf + n, sizeof buf - n, " (+%s of address space not mapped)",
                     msnap_size_text(dl->segment_bytes - dl->mapped_bytes, d1, sizeof d1));
        }
        text_fit(c, tw, margin, y, buf, TEXT, ts);
        y += step;
        if (sm_blocks_seen(m)) {
            if (dl->other_bytes)
                snprintf(buf, sizeof buf, "  other libraries' memory %s; free inside reserved "
                         "%s, largest free block %s",
                         msnap_size_text(dl->other_bytes, d1, sizeof d1),
                         msnap_size_text(dl->total_free, a, sizeof a),
                         msnap_size_text(dl->largest_free, b, sizeof b));
            else
                snprintf(buf, sizeof buf, "  free inside reserved %s, largest free block %s",
                         msnap_size_text(dl->total_free, a, sizeof a),
                         msnap_size_text(dl->largest_free, b, sizeof b));
            text_fit(c, tw, margin, y, buf, TEXT, ts);
            y += step;
            if (dl->total_free)
                snprintf(buf, sizeof buf, "  fragmentation 1 - largest_free/total_free = %.3f",
                         sm_frag_free(dl->total_free, dl->largest_free));
            else
                snprintf(buf, sizeof buf, "  fragmentation 1 - largest_free/total_free = 0 (nothing free)");
        } else {
            snprintf(buf, sizeof buf, "  free inside reserved: unknown (no allocator blocks)");
            text_fit(c, tw, margin, y, buf, TEXT, ts);
            y += step;
            snprintf(buf, sizeof buf, "  1 - largest_free/total_free: n/a");
        }
        text_fit(c, tw, margin, y, buf, TEXT, ts);
        y += step;
        if (sm_blocks_seen(m) && v->peak_reserved)
            snprintf(buf, sizeof buf,
                     "  1 - peak_allocated/peak_reserved = %.3f (whole run: %s / %s)",
                     sm_frag_peak(v->peak_allocated, v->peak_reserved),
                     msnap_size_text(v->peak_allocated, a, sizeof a),
                     msnap_size_text(v->peak_reserved, b, sizeof b));
        else
            snprintf(buf, sizeof buf,
                     "  1 - peak_allocated/peak_reserved: n/a (peak reserved %s)",
                     msnap_size_text(v->peak_reserved, a, sizeof a));
        text_fit(c, tw, margin, y, buf, TEXT, ts);
        y += step;
    }
    if (!l->nsegs)
        canvas_text(c, margin, y + 10, "No segments were live at this moment.",
                    MUTED, ts);
    canvas_group_end(c);
}

/* The failed request req beside the free blocks fr[0..nfr), on a scale of
 * their own (the larger of the request and the largest free block fills
 * 60% of the bar width), below the numbers. */
static void draw_request(const segmap *g, uint64_t req, const uint64_t *fr, int nfr,
                         int req_line, viz_segmap_geom *geom)
{
    canvas *c = g->c;
    int ts = g->ts, bar_x = g->bar_x;
    char buf[512], a[32];
    canvas_group(c, "oom-request", NULL);
    int ry = g->title_h + g->stats_h;
    text_fit(c, g->width - 2 * g->margin, g->margin, ry, "The failed request next to the largest free "
                "blocks inside reserved (one scale):", TEXT, ts);
    ry += (CANVAS_LINE_H + 3) * ts;
    uint64_t big = req > fr[0] ? req : fr[0];
    double rbpp = (double)big / (g->bar_w * 0.6);
    for (int k = 0; k <= nfr; k++) {
        uint64_t v = k ? fr[k - 1] : req;
        int w = (int)llround((double)v / rbpp);
        if (w < 1)
            w = 1;
        int bh = CANVAS_LINE_H * ts;
        if (k == 0)
            canvas_rect(c, bar_x, ry, bar_x + w, ry + bh, VIZ_OOM);
        else {
            canvas_rect(c, bar_x, ry, bar_x + w, ry + bh, VIZ_FREE);
            canvas_frame(c, bar_x, ry, bar_x + w, ry + bh, LARGEST);
        }
        if (k == 0)
            snprintf(buf, sizeof buf, "requested %s",
                     msnap_size_text(v, a, sizeof a));
        else
            snprintf(buf, sizeof buf, "%s free block %s",
                     k == 1 ? "largest" : "next", msnap_size_text(v, a, sizeof a));
        canvas_text(c, g->margin, ry + ts, buf, k ? TEXT : VIZ_OOM, ts);
        if (geom && k <= REQ_FREE) {
            geom->req_w[k] = w;
            geom->req_y[k] = ry;
            geom->nreq = k + 1;
        }
        ry += req_line;
    }
    if (geom)
        geom->req_x = bar_x;
    canvas_group_end(c);
}

/* The label of a row at y: the segment's address, size and kind, or for a
 * folded row of n segments their count, size and kind (the site that fills
 * them goes after the bar: draw_fold_note). */
static void draw_row_label(const segmap *g, const sm_segment *s, uint32_t n, int y)
{
    canvas *c = g->c;
    int ts = g->ts;
    char buf[512], a[32];
    if (n > 1) {
        snprintf(buf, sizeof buf, "%u x %s %s", n,
                 msnap_size_text_short(s->size, a, sizeof a), kind_name(s->kind));
        canvas_fit(buf, g->label_w - 6, ts);
        canvas_text(c, g->margin, y + 2, buf, TEXT, ts);
    } else {
        snprintf(buf, sizeof buf, "0x%" PRIx64 " %s %s", s->addr,
                 msnap_size_text_short(s->size, a, sizeof a), kind_name(s->kind));
        canvas_fit(buf, g->label_w - 6, ts);
        canvas_text(c, g->margin, y + 2, buf, TEXT, ts);
    }
}

/* A folded row's note, "N x SIZE segments, full: SITE", after its bar is
 * drawn: right of the bar where it fits, else over the bar's end on a
 * white ground, so it is never behind the bar. */
static void draw_fold_note(const segmap *g, const sm_segment *s, uint32_t n, int y)
{
    if (n < 2)
        return;
    canvas *c = g->c;
    int ts = g->ts;
    char buf[512], a[32], lab[SM_LABEL_MAX];
    uint32_t fs = full_site(g->l, s);
    int fr = fs < g->nsites ? g->sites[fs].rank : -1;
    if (fr >= 0)
        viz_site_label_in(g->m, s->device < 0 ? SM_DEV_UNKNOWN : s->device, fr, lab,
                          sizeof lab);
    else
        snprintf(lab, sizeof lab, "other sites");
    viz_fit_label(lab, 60);
    snprintf(buf, sizeof buf, "%u x %s segments, full: %s", n,
             msnap_size_text(s->size, a, sizeof a), lab);
    canvas_fit(buf, g->bar_w, ts);
    int tw = canvas_text_w(buf, ts);
    int bw = (int)ceil((double)s->size / g->bpp);
    if (bw > g->bar_w)
        bw = g->bar_w;
    int tx = g->bar_x + bw + 6;
    if (tx + tw > g->width - g->margin) {
        tx = g->width - g->margin - tw;
        if (tx < g->bar_x)
            tx = g->bar_x;
        canvas_rect(c, tx - 3, y + 1, tx + tw + 3, y + 3 + CANVAS_LINE_H * ts, 0xffffff);
    }
    canvas_text(c, tx, y + 2, buf, MUTED, ts);
}

/* Per pixel of one line of a bar: the colour of what covers most of its
 * bytes, and what it is (SM_SPAN_*, negative where a block starts). */
typedef struct px_best {
    int *what;
    uint32_t *colour;
    uint64_t *bytes;
} px_best;

/* The bar of segment s from y, `lines` lines of bar_w pixels. */
static void draw_bar(const segmap *g, const sm_segment *s, int lines, int y, px_best *px)
{
    canvas *c = g->c;
    const sm_layout *l = g->l;
    double bpp = g->bpp;
    int bar_x = g->bar_x, bar_w = g->bar_w, row_h = g->row_h;
    int *best_w = px->what;
    uint32_t *best_c = px->colour;
    uint64_t *best_b = px->bytes;
    size_t sp = s->first_span, spe = s->first_span + s->nspans;
    for (int ln = 0; ln < lines; ln++) {
        uint64_t la = s->addr + (uint64_t)((double)ln * bar_w * bpp);
        uint64_t lb = s->addr + (uint64_t)((double)(ln + 1) * bar_w * bpp);
        if (lb > s->addr + s->size || ln == lines - 1)
            lb = s->addr + s->size;
        int npx = (int)ceil((double)(lb - la) / bpp);
        if (npx > bar_w)
            npx = bar_w;
        if (npx < 1)
            npx = 1;
        memset(best_b, 0, (size_t)bar_w * sizeof *best_b);
        memset(best_w, 0, (size_t)bar_w * sizeof *best_w);
        while (sp < spe && l->spans[sp].addr + l->spans[sp].size <= la)
            sp++;
        for (size_t k = sp; k < spe && l->spans[k].addr < lb; k++) {
            const sm_span *spn = &l->spans[k];
            uint64_t sa = spn->addr > la ? spn->addr : la;
            uint64_t se = spn->addr + spn->size < lb ? spn->addr + spn->size : lb;
            int p0 = (int)((double)(sa - la) / bpp), p1 = (int)((double)(se - 1 - la) / bpp);
            if (p1 >= npx)
                p1 = npx - 1;
            uint32_t col = span_colour(g->m, spn);
            for (int p = p0; p <= p1; p++) {
                double pa = la + p * bpp, pb = la + (p + 1) * bpp;
                double ov = (se < pb ? se : pb) - (sa > pa ? sa : pa);
                uint64_t ob = ov > 0 ? (uint64_t)ceil(ov) : 0;
                if (ob > best_b[p]) {
                    best_b[p] = ob;
                    best_c[p] = col;
                    best_w[p] = spn->what;
                }
            }
            /* block boundary tick when the block is at least 3 px wide */
            if ((spn->what == SM_SPAN_BLOCK || spn->what == SM_SPAN_USED) &&
                p1 - p0 >= 3 && spn->addr >= la)
                best_w[p0] = -spn->what;
        }
        int ry = y + ln * g->line_h;
        /* the colours, then the hatching, then the block ticks: each a
         * run of columns (one path per colour run in the SVG) */
        for (int p = 0; p < npx; p++)
            canvas_rect(c, bar_x + p, ry, bar_x + p + 1, ry + row_h,
                        best_b[p] ? best_c[p] : VIZ_FREE);
        for (int p = 0; p < npx; p++)
            if ((best_w[p] < 0 ? -best_w[p] : best_w[p]) == SM_SPAN_UNMAPPED)
                canvas_hatch(c, bar_x + p, ry, bar_x + p + 1, ry + row_h, 0x9a9a9a, 6);
        for (int p = 0; p < npx; p++)
            if (best_w[p] < 0)
                canvas_rect(c, bar_x + p, ry, bar_x + p + 1, ry + row_h,
                            rgb_darken(best_b[p] ? best_c[p] : VIZ_FREE, 90));
        canvas_frame(c, bar_x - 1, ry - 1, bar_x + npx + 1, ry + row_h + 1, OUTLINE);
    }
}

/* Frames the largest free block of its device in red, when it is in s
 * (drawn from y), over every line it spans. */
static void frame_largest_free(const segmap *g, const sm_segment *s, int y)
{
    const sm_layout *l = g->l;
    const sm_dev_layout *dl = &l->dev[s->device];
    int bar_x = g->bar_x, bar_w = g->bar_w, row_h = g->row_h;
    if (!sm_blocks_seen(g->m) || !dl->largest_free || s->largest_free != dl->largest_free)
        return;
    for (size_t k = s->first_span; k < s->first_span + s->nspans; k++) {
        const sm_span *spn = &l->spans[k];
        if (spn->what != SM_SPAN_FREE || spn->size != dl->largest_free)
            continue;
        uint64_t off0 = spn->addr - s->addr, off1 = off0 + spn->size;
        uint64_t p0 = (uint64_t)((double)off0 / g->bpp), p1 = (uint64_t)((double)off1 / g->bpp);
        for (uint64_t p = p0; p < p1 || p == p0; p += (uint64_t)bar_w - p % (uint64_t)bar_w) {
            int ln = (int)(p / (uint64_t)bar_w);
            uint64_t e = ((uint64_t)ln + 1) * (uint64_t)bar_w;
            if (e > p1) e = p1 > p ? p1 : p + 1;
            int x0 = bar_x + (int)(p % (uint64_t)bar_w), x1 = bar_x + (int)(e - (uint64_t)ln * bar_w);
            int ry = y + ln * g->line_h;
            canvas_frame(g->c, x0, ry, x1, ry + row_h, LARGEST);
            canvas_frame(g->c, x0 + 1, ry + 1, x1 - 1, ry + row_h - 1, LARGEST);
            if (e >= p1)
                break;
        }
        break;
    }
}

/* The rows row_seg[0..shown) from y, each under its device's heading when
 * the device changes, down to H.  Returns the y below the last row;
 * -1 out of memory. */
static int draw_rows(const segmap *g, const size_t *row_seg, const uint32_t *row_n, size_t shown,
                     int y, int H, viz_segmap_geom *geom)
{
    canvas *c = g->c;
    int ts = g->ts;
    char buf[512];
    px_best px = {calloc((size_t)g->bar_w, sizeof *px.what),
                  calloc((size_t)g->bar_w, sizeof *px.colour),
                  calloc((size_t)g->bar_w, sizeof *px.bytes)};
    if (!px.what || !px.colour || !px.bytes) {
        free(px.what);
        free(px.colour);
        free(px.bytes);
        return -1;
    }
    int cur_dev = -2;
    canvas_group(c, "segments", NULL);
    for (size_t ri = 0; ri < shown && y < H; ri++) {
        size_t si = row_seg[ri];
        const sm_segment *s = &g->l->segs[si];
        if (s->device != cur_dev) {
            cur_dev = s->device;
            snprintf(buf, sizeof buf, "device %d", cur_dev == SM_DEV_UNKNOWN ? -1 : cur_dev);
            canvas_group(c, "device", buf);
            canvas_text(c, g->margin, y + 3 * ts, buf, TEXT, ts);
            canvas_hline(c, g->margin + canvas_text_w(buf, ts) + 8, g->width - g->margin,
                         y + 3 * ts + CANVAS_CAP_H * ts / 2, 1, 0xbbbbbb, 0);
            canvas_group_end(c);
            y += g->dev_h;
        }
        snprintf(buf, sizeof buf, "0x%" PRIx64, s->addr);
        canvas_group(c, row_n[ri] > 1 ? "segment folded" : "segment", buf);
        int lines = (int)seg_lines(s->size, g->bpp, g->bar_w);
        draw_row_label(g, s, row_n[ri], y);
        if (geom) {
            geom->rows[geom->nrows++] = (viz_segrow){
                .seg = si, .x0 = g->bar_x, .y0 = y, .h = g->row_h, .bar_w = g->bar_w,
                .line_h = g->line_h, .lines = lines};
        }
        draw_bar(g, s, lines, y, &px);
        draw_fold_note(g, s, row_n[ri], y);
        frame_largest_free(g, s, y);
        y += lines * g->line_h;
        canvas_group_end(c);
    }
    canvas_group_end(c);
    free(px.what);
    free(px.colour);
    free(px.bytes);
    return y;
}

int viz_segmap(const sm_model *m, canvas *c, int width, int height,
               const char *title, viz_segmap_geom *geom)
{
    segmap g = {.m = m, .l = sm_layout_at(m), .c = c, .width = width,
                .ts = viz_text_scale(width), .margin = 10};
    const sm_layout *l = g.l;
    int ts = g.ts, margin = g.margin;
    char buf[512];
    g.sites = sm_sites(m, &g.nsites);

    /* Which devices have rows. */
    for (int d = 0; d < SM_NDEV; d++)
        if (l->dev[d].segments || l->dev[d].block_bytes)
            g.ndev_rows++;

    /* Legend: sites present in the layout, by rank. */
    item *it = calloc(SM_MAX_TOP * SM_NDEV + 4, sizeof *it);
    if (!it)
        return -1;
    int nit = legend_items(&g, it);

    /* Rows: similar full segments folded (sm_opts.all_segments: none). */
    size_t *row_seg;
    uint32_t *row_n;
    int all = sm_options(m)->all_segments;
    long nrow_l = fold_rows(l, all, &row_seg, &row_n);
    if (nrow_l < 0) {
        free(it);
        return -1;
    }
    size_t nrow = (size_t)nrow_l;

    /* Geometry. */
    g.title_h = 8 + CANVAS_LINE_H * (ts + 1) + 8;
    int stat_lines = 2 + 4 * (g.ndev_rows ? g.ndev_rows : 1);
    g.stats_h = stat_lines * (CANVAS_LINE_H + 3) * ts + 8;
    int legend_h = flow(NULL, it, nit, margin, width - margin, 0, ts) + 10;
    g.label_w = canvas_text_w("0x000000000000 000.00 MiB cuMemAlloc", ts) + 12;
    if (g.label_w > width / 2)
        g.label_w = width / 2;
    g.bar_x = margin + g.label_w;
    g.bar_w = width - g.bar_x - margin;
    if (g.bar_w < 16)
        g.bar_w = 16;
    g.row_h = 10 * ts + 4;
    g.line_h = g.row_h + 2 * ts;
    g.dev_h = (CANVAS_LINE_H + 6) * ts;
    /* The failed request beside the largest free blocks (at an OOM with
     * allocator blocks): a title line, the request bar, up to REQ_FREE
     * free-block bars. */
    uint64_t fr[REQ_FREE] = {0};
    int nfr;
    uint64_t req = oom_request(m, l, fr, &nfr);
    int req_line = (CANVAS_LINE_H + 6) * ts;
    int req_h = req ? (CANVAS_LINE_H + 3) * ts + (1 + nfr) * req_line + 10 : 0;
    int rows_top = g.title_h + g.stats_h + req_h;
    int avail;
    if (height > 0)
        avail = height - rows_top - legend_h - 10 - g.ndev_rows * g.dev_h;
    else
        avail = all ? 15000 - rows_top - legend_h : 2400;
    int max_lines = avail / g.line_h;
    if (max_lines < 1)
        max_lines = 1;
    /* Automatic height: a little wrapping (up to half again as many lines
     * as segments) keeps big segments wide without a very tall picture. */
    if (height <= 0) {
        size_t extra = nrow / 2 > 8 ? nrow / 2 : nrow * 2 < 8 ? nrow * 2 : 8;
        size_t want = nrow + extra;
        if ((size_t)max_lines > want)
            max_lines = (int)want;
    }
    size_t shown;
    g.bpp = fit_scale(l, row_seg, nrow, g.bar_w, max_lines, &shown);
    size_t hidden = nrow - shown;
    uint64_t total_lines = 0;
    for (size_t i = 0; i < shown; i++)
        total_lines += seg_lines(l->segs[row_seg[i]].size, g.bpp, g.bar_w);
    size_t hidden_segs = 0;
    for (size_t i = shown; i < nrow; i++)
        hidden_segs += row_n[i];
    int rows_h = (int)total_lines * g.line_h + g.ndev_rows * g.dev_h + (hidden ? g.line_h : 0);
    int H = height > 0 ? height : rows_top + rows_h + legend_h + g.row_h + 20;
    if (H > 16000)
        H = 16000;
    int rc = -1;
    if (canvas_init(c, width, H, VIZ_BG))
        goto out;
    if (geom) {
        memset(geom, 0, sizeof *geom);
        geom->bytes_per_px = g.bpp;
        geom->rows = calloc(shown + 1, sizeof *geom->rows);
        geom->hidden = hidden;
        geom->folded = nrow < l->nsegs ? l->nsegs - nrow : 0;
        if (!geom->rows)
            goto out;
    }

    draw_title(&g, title);
    draw_numbers(&g);
    if (req)
        draw_request(&g, req, fr, nfr, req_line, geom);
    int y = draw_rows(&g, row_seg, row_n, shown, rows_top, H, geom);
    if (y < 0)
        goto out;
    if (hidden) {
        snprintf(buf, sizeof buf, "... %zu more segments not drawn (too many "
                 "for the height; --all-segments draws every one)", hidden_segs);
        text_fit(c, width - 2 * margin, margin, y + 2, buf, MUTED, ts);
        y += g.line_h;
    }

    /* Legend, plus a note for the red frame. */
    int ly = H - legend_h;
    canvas_group(c, "legend", NULL);
    if (sm_blocks_seen(m)) {
        canvas_frame(c, margin, ly - 2 - g.row_h, margin + 12 * ts,
                     ly - 2 - g.row_h + CANVAS_CAP_H * ts, LARGEST);
        canvas_text(c, margin + 14 * ts + 4, ly - 2 - g.row_h - ts,
                    "largest free block (red frame)", TEXT, ts);
    }
    flow(c, it, nit, margin, width - margin, ly, ts);
    canvas_group_end(c);
    rc = 0;
out:
    free(it);
    free(row_seg);
    free(row_n);
    return rc;
}

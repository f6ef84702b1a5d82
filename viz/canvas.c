/* canvas: see canvas.h.  The operations are kept in one growing array
 * (struct op) with their strings in one arena; the PNG is the array
 * replayed into a cairo image surface, the SVG the array written as
 * elements.  Replay is incremental (ops[done..n) on the next read), so a
 * painter may draw, a test read pixels, and drawing go on.
 *
 * Pixel-aligned work (rectangles, blends, hatching, frames, axis-parallel
 * lines) writes the surface's 32-bit pixels directly: cairo would produce
 * the same pixels for integer rectangles, and a timeline has one such
 * rectangle per column and site.  Around it the surface is flushed (before
 * direct writes follow cairo drawing) and marked dirty (before cairo draws
 * again), as cairo's image-surface contract asks.
 *
 * Text: DejaVu Sans through cairo's toy font API (fontconfig finds it in
 * fonts-dejavu-core) -- or, when a DejaVuSans.ttf is shipped beside the
 * binary (the pip package bundles one: bundled_face), that file through
 * FreeType, with no fontconfig at all -- grey antialiasing, slight hinting, hinted metrics
 * (whole-pixel advances: at 10 pixels unhinted advances put glyphs at
 * uneven whole-pixel positions, "1.00 0").  The SVG gives every <text> the
 * width measured here (textLength), so a viewer's unhinted layout, or a
 * substitute font, takes the same room and never runs into what is next.
 * The size puts the capital letters CANVAS_CAP_H * scale pixels high
 * (DejaVu's cap height is 0.729 em).  Measuring uses a 1 x 1 surface of its
 * own, made once (the renderer is single-threaded). */
#include "canvas.h"

#include <cairo.h>
#include <cairo-ft.h>
#include <errno.h>
#include <ft2build.h>
#include FT_FREETYPE_H
#include <limits.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/outfile.h"

#define FONT_FAMILY "DejaVu Sans"
#define SVG_FONTS "DejaVu Sans, Verdana, Bitstream Vera Sans, sans-serif"
#define FONT_PX (CANVAS_CAP_H / 0.729)  /* font size at scale 1 */
#define NO_STR UINT32_MAX
#ifndef MEMSNAP_BIN_TO_FONT   /* relative to the binary's folder (viz/CMakeLists.txt) */
#define MEMSNAP_BIN_TO_FONT "../lib/memsnap/fonts/DejaVuSans.ttf"
#endif

enum op_kind { OP_RECT, OP_BLEND, OP_HATCH, OP_FRAME, OP_HLINE, OP_VLINE,
               OP_LINE, OP_TEXT, OP_TEXT_UP, OP_GROUP, OP_END };

/* One drawing operation.  Rectangles are [x0, x1) x [y0, y1) and never
 * empty; lines keep their arguments as given. */
typedef struct op {
    uint8_t kind;    /* enum op_kind */
    uint8_t a;       /* OP_BLEND: alpha; OP_HATCH: period; OP_TEXT*: scale */
    uint16_t t;      /* thickness of lines */
    int32_t x0, y0, x1, y1;
    int32_t dash;    /* dashed lines: pixels on and off; 0 solid */
    uint32_t rgb;
    uint32_t s, s2;  /* offsets into strs: text or class, label; NO_STR none */
} op;

struct canvas_list {
    op *ops;
    size_t n, cap;
    char *strs;          /* NUL-terminated strings, back to back */
    size_t slen, scap;
    int failed;          /* an allocation failed: the picture is incomplete */
    int depth;           /* open groups while recording */
    /* raster */
    cairo_surface_t *surf;
    cairo_t *cr;
    size_t done;         /* ops replayed into surf */
    int drawn;           /* cairo drew since the last flush */
    int touched;         /* direct writes since the last mark_dirty */
};

/* ---- recording ---- */

/* Appends an op; a failed allocation marks the list failed. */
static op *push(canvas *c, int kind)
{
    struct canvas_list *L = c->list;
    if (!L || L->failed)
        return NULL;
    if (L->n == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 1024;
        op *p = realloc(L->ops, nc * sizeof *p);
        if (!p) {
            L->failed = 1;
            return NULL;
        }
        L->ops = p;
        L->cap = nc;
    }
    op *o = &L->ops[L->n++];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)kind;
    o->s = o->s2 = NO_STR;
    return o;
}

/* Copies s into the arena with bytes outside printable ASCII as '?' (the
 * font draws ASCII; cairo refuses invalid UTF-8; XML wants no control
 * bytes).  Returns its offset, NO_STR on failure. */
static uint32_t intern(canvas *c, const char *s)
{
    struct canvas_list *L = c->list;
    size_t n = strlen(s) + 1;
    if (!L || L->failed)
        return NO_STR;
    if (L->slen + n > L->scap) {
        size_t nc = L->scap ? L->scap * 2 : 4096;
        while (nc < L->slen + n)
            nc *= 2;
        char *p = nc < NO_STR ? realloc(L->strs, nc) : NULL;
        if (!p) {
            L->failed = 1;
            return NO_STR;
        }
        L->strs = p;
        L->scap = nc;
    }
    char *d = L->strs + L->slen;
    for (size_t i = 0; i < n - 1; i++)
        d[i] = s[i] >= 32 && s[i] <= 126 ? s[i] : '?';
    d[n - 1] = '\0';
    uint32_t off = (uint32_t)L->slen;
    L->slen += n;
    return off;
}

int canvas_init(canvas *c, int w, int h, uint32_t bg)
{
    c->w = c->h = 0;
    c->list = NULL;
    if (w < 1 || h < 1 || w > 16384 || h > 16384)
        return -1;
    c->list = calloc(1, sizeof *c->list);
    if (!c->list)
        return -1;
    c->w = w;
    c->h = h;
    canvas_rect(c, 0, 0, w, h, bg);
    if (c->list->failed) {
        canvas_free(c);
        return -1;
    }
    return 0;
}

void canvas_free(canvas *c)
{
    struct canvas_list *L = c->list;
    if (L) {
        if (L->cr)
            cairo_destroy(L->cr);
        if (L->surf)
            cairo_surface_destroy(L->surf);
        free(L->ops);
        free(L->strs);
        free(L);
    }
    c->list = NULL;
    c->w = c->h = 0;
}

/* Records a rectangle-like op; empty rectangles are dropped. */
static op *push_box(canvas *c, int kind, int x0, int y0, int x1, int y1,
                    uint32_t rgb)
{
    if (x0 >= x1 || y0 >= y1)
        return NULL;
    op *o = push(c, kind);
    if (o) {
        o->x0 = x0; o->y0 = y0; o->x1 = x1; o->y1 = y1;
        o->rgb = rgb & 0xffffffu;
    }
    return o;
}

void canvas_set(canvas *c, int x, int y, uint32_t rgb)
{
    push_box(c, OP_RECT, x, y, x + 1, y + 1, rgb);
}

void canvas_rect(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
    push_box(c, OP_RECT, x0, y0, x1, y1, rgb);
}

void canvas_blend_rect(canvas *c, int x0, int y0, int x1, int y1,
                       uint32_t rgb, int alpha)
{
    if (alpha <= 0)
        return;
    op *o = push_box(c, OP_BLEND, x0, y0, x1, y1, rgb);
    if (o)
        o->a = (uint8_t)(alpha > 255 ? 255 : alpha);
}

void canvas_hatch(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb,
                  int period)
{
    if (period < 1 || period > 255)
        return;
    op *o = push_box(c, OP_HATCH, x0, y0, x1, y1, rgb);
    if (o)
        o->a = (uint8_t)period;
}

void canvas_frame(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
    push_box(c, OP_FRAME, x0, y0, x1, y1, rgb);
}

void canvas_hline(canvas *c, int x0, int x1, int y, int t, uint32_t rgb,
                  int dash)
{
    if (x1 < x0) {
        int tmp = x0;
        x0 = x1;
        x1 = tmp;
    }
    if (t < 1)
        return;
    if (dash <= 0) {
        canvas_rect(c, x0, y, x1 + 1, y + t, rgb);
        return;
    }
    op *o = push_box(c, OP_HLINE, x0, y, x1 + 1, y + t, rgb);
    if (o)
        o->dash = dash;
}

void canvas_vline(canvas *c, int x, int y0, int y1, int t, uint32_t rgb,
                  int dash)
{
    if (y1 < y0) {
        int tmp = y0;
        y0 = y1;
        y1 = tmp;
    }
    if (t < 1)
        return;
    if (dash <= 0) {
        canvas_rect(c, x, y0, x + t, y1 + 1, rgb);
        return;
    }
    op *o = push_box(c, OP_VLINE, x, y0, x + t, y1 + 1, rgb);
    if (o)
        o->dash = dash;
}

void canvas_line(canvas *c, int x0, int y0, int x1, int y1, int t,
                 uint32_t rgb)
{
    if (t < 1)
        return;
    op *o = push(c, OP_LINE);
    if (o) {
        o->x0 = x0; o->y0 = y0; o->x1 = x1; o->y1 = y1;
        o->t = (uint16_t)(t > 255 ? 255 : t);
        o->rgb = rgb & 0xffffffu;
    }
}

/* Records a text op (TEXT or TEXT_UP). */
static void push_text(canvas *c, int kind, int x, int y, const char *s,
                      uint32_t rgb, int scale)
{
    if (!*s)
        return;
    uint32_t off = intern(c, s);
    op *o = off == NO_STR ? NULL : push(c, kind);
    if (o) {
        o->x0 = x; o->y0 = y;
        o->a = (uint8_t)(scale < 1 ? 1 : scale > 16 ? 16 : scale);
        o->rgb = rgb & 0xffffffu;
        o->s = off;
    }
}

int canvas_text(canvas *c, int x, int y, const char *s, uint32_t rgb,
                int scale)
{
    push_text(c, OP_TEXT, x, y, s, rgb, scale);
    return canvas_text_w(s, scale);
}

void canvas_text_up(canvas *c, int x, int y, const char *s, uint32_t rgb,
                    int scale)
{
    push_text(c, OP_TEXT_UP, x, y, s, rgb, scale);
}

void canvas_group(canvas *c, const char *cls, const char *label)
{
    uint32_t s = intern(c, cls), s2 = label ? intern(c, label) : NO_STR;
    op *o = s == NO_STR || (label && s2 == NO_STR) ? NULL : push(c, OP_GROUP);
    if (o) {
        o->s = s;
        o->s2 = s2;
        c->list->depth++;
    }
}

void canvas_group_tip(canvas *c, const char *cls, const char *label)
{
    canvas_group(c, cls, label);
    if (c->list && c->list->n && c->list->ops[c->list->n - 1].kind == OP_GROUP && label)
        c->list->ops[c->list->n - 1].a = 1;
}

void canvas_group_end(canvas *c)
{
    if (!c->list || c->list->depth <= 0)
        return;
    if (push(c, OP_END))
        c->list->depth--;
}

/* ---- text metrics ---- */

/* The font shipped beside the running binary (MEMSNAP_BIN_TO_FONT from its
 * folder), loaded through FreeType so that neither fontconfig nor an
 * installed font is needed: the pip package bundles DejaVuSans.ttf there for
 * machines that have no fonts.  NULL when there is no such file (the build
 * tree, the Debian package: fontconfig finds fonts-dejavu-core).  The face,
 * and the FT_Face under it, live as long as the process. */
static cairo_font_face_t *bundled_face(void)
{
    char path[PATH_MAX + sizeof MEMSNAP_BIN_TO_FONT + 1];
    ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
    char *slash;
    if (n <= 0)
        return NULL;
    path[n] = 0;
    if (!(slash = strrchr(path, '/')))
        return NULL;
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", MEMSNAP_BIN_TO_FONT);
    static FT_Library ft;
    FT_Face ff;
    if (access(path, R_OK) != 0 || (!ft && FT_Init_FreeType(&ft) != 0) ||
        FT_New_Face(ft, path, 0, &ff) != 0)
        return NULL;
    cairo_font_face_t *face = cairo_ft_font_face_create_for_ft_face(ff, 0);
    if (cairo_font_face_status(face) != CAIRO_STATUS_SUCCESS) {
        cairo_font_face_destroy(face);
        FT_Done_Face(ff);
        return NULL;
    }
    return face;
}

/* Sets the renderer's font at this scale on cr. */
static void set_font(cairo_t *cr, int scale)
{
    static cairo_font_options_t *fo;
    if (!fo) {
        fo = cairo_font_options_create();
        cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
        cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
        cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_ON);
    }
    static cairo_font_face_t *face;   /* made once: fontconfig matches once */
    if (!face && !(face = bundled_face()))
        face = cairo_toy_font_face_create(FONT_FAMILY, CAIRO_FONT_SLANT_NORMAL,
                                          CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_face(cr, face);
    cairo_set_font_size(cr, FONT_PX * (scale < 1 ? 1 : scale));
    cairo_set_font_options(cr, fo);
}

int canvas_text_w(const char *s, int scale)
{
    static cairo_t *m;
    if (!*s)
        return 0;
    if (!m) {
        cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
        m = cairo_create(sf);
        cairo_surface_destroy(sf);
    }
    char small[512], *buf = small;
    size_t n = strlen(s);
    if (n >= sizeof small && !(buf = malloc(n + 1)))
        return (int)n * 10 * (scale < 1 ? 1 : scale);  /* an upper bound */
    for (size_t i = 0; i <= n; i++)
        buf[i] = i == n ? '\0' : s[i] >= 32 && s[i] <= 126 ? s[i] : '?';
    set_font(m, scale);
    cairo_text_extents_t e;
    cairo_text_extents(m, buf, &e);
    if (buf != small)
        free(buf);
    return (int)ceil(e.x_advance);
}

int canvas_text_h(int scale)
{
    return CANVAS_LINE_H * (scale < 1 ? 1 : scale);
}

int canvas_fit(char *s, int max_w, int scale)
{
    if (canvas_text_w(s, scale) <= max_w)
        return 0;
    size_t n = strlen(s);
    /* widths grow with the length: binary search the longest prefix that
     * fits with ".." after it */
    size_t lo = 0, hi = n;
    char *t = malloc(n + 3);
    if (!t) {
        s[0] = '\0';
        return 1;
    }
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        memcpy(t, s, mid);
        memcpy(t + mid, "..", 3);
        if (canvas_text_w(t, scale) <= max_w)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (lo > 0 && s[lo - 1] == ' ')   /* "step.." rather than "step .." */
        lo--;
    memcpy(t, s, lo);
    memcpy(t + lo, "..", 3);
    if (canvas_text_w(t, scale) <= max_w)
        memcpy(s, t, lo + 3);
    else
        s[0] = '\0';
    free(t);
    return 1;
}

/* ---- PNG: replay into a cairo image surface ---- */

/* Clips [*a, *b) to [0, n); 0 when empty. */
static int clip(int *a, int *b, int n)
{
    if (*a < 0)
        *a = 0;
    if (*b > n)
        *b = n;
    return *a < *b;
}

/* Fills [x0, x1) x [y0, y1) of the surface's pixels with rgb. */
static void px_fill(uint8_t *data, int stride, int w, int h, int x0, int y0,
                    int x1, int y1, uint32_t rgb)
{
    if (!clip(&x0, &x1, w) || !clip(&y0, &y1, h))
        return;
    for (int y = y0; y < y1; y++) {
        uint32_t *p = (uint32_t *)(data + (size_t)y * (size_t)stride) + x0;
        for (int x = x0; x < x1; x++)
            *p++ = rgb;
    }
}

/* Replays one pixel-aligned op into the pixels. */
static void px_op(const op *o, uint8_t *data, int stride, int w, int h)
{
    int x0 = o->x0, y0 = o->y0, x1 = o->x1, y1 = o->y1;
    switch (o->kind) {
    case OP_RECT:
        px_fill(data, stride, w, h, x0, y0, x1, y1, o->rgb);
        break;
    case OP_BLEND: {
        if (!clip(&x0, &x1, w) || !clip(&y0, &y1, h))
            break;
        int al = o->a, r = (int)(o->rgb >> 16) & 255, g = (int)(o->rgb >> 8) & 255,
            b = (int)o->rgb & 255;
        for (int y = y0; y < y1; y++) {
            uint32_t *p = (uint32_t *)(data + (size_t)y * (size_t)stride) + x0;
            for (int x = x0; x < x1; x++, p++) {
                int pr = (int)(*p >> 16) & 255, pg = (int)(*p >> 8) & 255, pb = (int)*p & 255;
                pr = (pr * (255 - al) + r * al) / 255;
                pg = (pg * (255 - al) + g * al) / 255;
                pb = (pb * (255 - al) + b * al) / 255;
                *p = (uint32_t)pr << 16 | (uint32_t)pg << 8 | (uint32_t)pb;
            }
        }
        break;
    }
    case OP_HATCH:
        if (!clip(&x0, &x1, w) || !clip(&y0, &y1, h))
            break;
        for (int y = y0; y < y1; y++) {
            uint32_t *p = (uint32_t *)(data + (size_t)y * (size_t)stride);
            for (int x = x0; x < x1; x++)
                if ((x + y) % o->a == 0)
                    p[x] = o->rgb;
        }
        break;
    case OP_FRAME:
        px_fill(data, stride, w, h, x0, y0, x1, y0 + 1, o->rgb);
        px_fill(data, stride, w, h, x0, y1 - 1, x1, y1, o->rgb);
        px_fill(data, stride, w, h, x0, y0, x0 + 1, y1, o->rgb);
        px_fill(data, stride, w, h, x1 - 1, y0, x1, y1, o->rgb);
        break;
    case OP_HLINE:
        for (int x = x0; x < x1; x++)
            if (((x - x0) / o->dash) % 2 == 0)
                px_fill(data, stride, w, h, x, y0, x + 1, y1, o->rgb);
        break;
    case OP_VLINE:
        for (int y = y0; y < y1; y++)
            if (((y - y0) / o->dash) % 2 == 0)
                px_fill(data, stride, w, h, x0, y, x1, y + 1, o->rgb);
        break;
    default:
        break;
    }
}

/* Sets cr's source to 0xRRGGBB. */
static void source(cairo_t *cr, uint32_t rgb)
{
    cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0,
                         ((rgb >> 8) & 255) / 255.0, (rgb & 255) / 255.0);
}

/* Replays one op that cairo draws (lines, text). */
static void cairo_op(const struct canvas_list *L, const op *o, cairo_t *cr)
{
    source(cr, o->rgb);
    switch (o->kind) {
    case OP_LINE: {
        double hf = o->t / 2.0;
        cairo_set_line_width(cr, o->t);
        cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE);
        cairo_move_to(cr, o->x0 + hf, o->y0 + hf);
        cairo_line_to(cr, o->x1 + hf, o->y1 + hf);
        cairo_stroke(cr);
        break;
    }
    case OP_TEXT:
        set_font(cr, o->a);
        cairo_move_to(cr, o->x0, o->y0 + CANVAS_CAP_H * o->a);
        cairo_show_text(cr, L->strs + o->s);
        cairo_new_path(cr);
        break;
    case OP_TEXT_UP:
        set_font(cr, o->a);
        cairo_save(cr);
        cairo_translate(cr, o->x0, o->y0);
        cairo_rotate(cr, -M_PI / 2);
        cairo_move_to(cr, 0, CANVAS_CAP_H * o->a);
        cairo_show_text(cr, L->strs + o->s);
        cairo_new_path(cr);
        cairo_restore(cr);
        break;
    default:
        break;
    }
}

/* Brings the raster up to date with the list.  0 ok, -1 out of memory. */
static int raster(const canvas *c)
{
    struct canvas_list *L = c->list;
    if (!L || L->failed)
        return -1;
    if (!L->surf) {
        L->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, c->w, c->h);
        if (cairo_surface_status(L->surf) != CAIRO_STATUS_SUCCESS)
            goto err;
        L->cr = cairo_create(L->surf);
        if (cairo_status(L->cr) != CAIRO_STATUS_SUCCESS)
            goto err;
        L->done = 0;
    }
    uint8_t *data = cairo_image_surface_get_data(L->surf);
    int stride = cairo_image_surface_get_stride(L->surf);
    for (; L->done < L->n; L->done++) {
        const op *o = &L->ops[L->done];
        if (o->kind == OP_GROUP || o->kind == OP_END)
            continue;
        if (o->kind == OP_LINE || o->kind == OP_TEXT || o->kind == OP_TEXT_UP) {
            if (L->touched) {
                cairo_surface_mark_dirty(L->surf);
                L->touched = 0;
            }
            cairo_op(L, o, L->cr);
            L->drawn = 1;
        } else {
            if (L->drawn) {
                cairo_surface_flush(L->surf);
                L->drawn = 0;
            }
            px_op(o, data, stride, c->w, c->h);
            L->touched = 1;
        }
    }
    if (L->drawn) {
        cairo_surface_flush(L->surf);
        L->drawn = 0;
    }
    if (L->touched) {
        cairo_surface_mark_dirty(L->surf);
        L->touched = 0;
    }
    return cairo_status(L->cr) == CAIRO_STATUS_SUCCESS ? 0 : -1;
err:
    if (L->cr)
        cairo_destroy(L->cr);
    if (L->surf)
        cairo_surface_destroy(L->surf);
    L->cr = NULL;
    L->surf = NULL;
    return -1;
}

uint32_t canvas_get(const canvas *c, int x, int y)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h || raster(c))
        return 0;
    const struct canvas_list *L = c->list;
    const uint8_t *data = cairo_image_surface_get_data(L->surf);
    int stride = cairo_image_surface_get_stride(L->surf);
    return ((const uint32_t *)(data + (size_t)y * (size_t)stride))[x] & 0xffffffu;
}

/* Writes the raster as an 8-bit RGB PNG to f through libpng rather than
 * cairo's own writer, which leaves libpng's defaults: every row tried with
 * all five filters.  One filter (Up: the pictures are bands and rows that
 * repeat downwards) and zlib level 6 write the 10M-event pictures in less
 * time at about the same size (docs/benchmarks.md).  The surface's 32-bit
 * pixels go in as they are: libpng drops the filler byte and swaps to RGB.
 * NULL ok, else what failed. */
static const char *png_out(cairo_surface_t *surf, FILE *f)
{
    const char *volatile why;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    why = "out of memory";
    if (!info)
        goto done;
    if (setjmp(png_jmpbuf(png))) {
        why = "libpng error";
        goto done;
    }
    int w = cairo_image_surface_get_width(surf), h = cairo_image_surface_get_height(surf);
    int stride = cairo_image_surface_get_stride(surf);
    const uint8_t *data = cairo_image_surface_get_data(surf);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
    png_set_compression_level(png, 6);
    png_write_info(png, info);
    /* CAIRO_FORMAT_RGB24 is a native-endian 0x00RRGGBB word per pixel */
    const uint32_t one = 1;
    if (*(const uint8_t *)&one) {
        png_set_bgr(png);
        png_set_filler(png, 0, PNG_FILLER_AFTER);
    } else {
        png_set_filler(png, 0, PNG_FILLER_BEFORE);
    }
    for (int y = 0; y < h; y++)
        png_write_row(png, (png_const_bytep)(data + (size_t)y * (size_t)stride));
    png_write_end(png, NULL);
    why = NULL;
done:
    png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
    return why;
}

/* ---- SVG ---- */

/* Writes s with XML's five special characters escaped. */
static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(*s, f);
        }
}

/* Whether ops a and b (b right after a) continue one run: the same kind and
 * paint, b starting at or right of where a ends on x. */
static int same_run(const op *a, const op *b)
{
    return b->kind == a->kind && b->rgb == a->rgb && b->a == a->a &&
           b->x0 >= a->x1 &&
           (a->kind == OP_RECT || a->kind == OP_BLEND || a->kind == OP_HATCH);
}

/* The fill attributes of a run's kind. */
static void svg_paint(FILE *f, const op *o)
{
    if (o->kind == OP_HATCH)
        fprintf(f, "fill=\"url(#hatch-%06x-%d)\"", o->rgb, o->a);
    else
        fprintf(f, "fill=\"#%06x\"", o->rgb);
    if (o->kind == OP_BLEND)
        fprintf(f, " fill-opacity=\"%.3f\"", o->a / 255.0);
}

/* A pen for path data of horizontal and vertical steps: a step along the
 * same axis as the one before replaces it, a step to where the pen is
 * already is dropped. */
typedef struct pen {
    FILE *f;
    int x, y;        /* where the written steps end */
    int axis, v;     /* the pending step: axis 'H' or 'V' (0 none), to v */
} pen;

static void pen_flush(pen *p)
{
    if (p->axis == 'H' && p->v != p->x)
        fprintf(p->f, "H%d", p->x = p->v);
    else if (p->axis == 'V' && p->v != p->y)
        fprintf(p->f, "V%d", p->y = p->v);
    p->axis = 0;
}

static void pen_step(pen *p, int axis, int v)
{
    if (p->axis != axis && v == (axis == 'H' ? p->x : p->y))
        return;   /* no move: the pending step on the other axis goes on */
    if (p->axis && p->axis != axis)
        pen_flush(p);
    p->axis = axis;
    p->v = v;
}

/* Path of the union of the run r[0..n): rectangles left to right, each
 * [x0, x1) x [y0, y1), gaps between them allowed: along the tops left to
 * right, down the last one, along the bottoms right to left.  Across a gap
 * both walks run at the bottom of the rectangle before it, so the gap
 * encloses nothing; at every x the path crosses once at the top and once
 * at the bottom, so it fills exactly the rectangles (any fill rule). */
static void svg_run_path(FILE *f, const op *r, size_t n)
{
    pen p = {f, r[0].x0, r[0].y0, 0, 0};
    fprintf(f, "M%d %d", p.x, p.y);
    for (size_t k = 0; k < n; k++) {
        if (k > 0) {
            if (r[k].x0 > r[k - 1].x1) {
                pen_step(&p, 'V', r[k - 1].y1);
                pen_step(&p, 'H', r[k].x0);
            }
            pen_step(&p, 'V', r[k].y0);
        }
        pen_step(&p, 'H', r[k].x1);
    }
    pen_step(&p, 'V', r[n - 1].y1);
    for (size_t k = n; k-- > 0;) {
        pen_step(&p, 'H', r[k].x0);
        if (k > 0) {
            pen_step(&p, 'V', r[k - 1].y1);
            if (r[k].x0 > r[k - 1].x1)
                pen_step(&p, 'H', r[k - 1].x1);
        }
    }
    pen_flush(&p);
    fputc('Z', f);
}

/* Writes the <pattern>s of the hatchings in use. */
static void svg_patterns(FILE *f, const struct canvas_list *L)
{
    uint32_t seen[32];
    int nseen = 0;
    for (size_t i = 0; i < L->n; i++) {
        const op *o = &L->ops[i];
        if (o->kind != OP_HATCH)
            continue;
        uint32_t key = o->rgb << 8 | o->a;
        int k = 0;
        while (k < nseen && seen[k] != key)
            k++;
        if (k < nseen)
            continue;
        if (nseen < 32)
            seen[nseen++] = key;
        int p = o->a;
        fprintf(f, "<pattern id=\"hatch-%06x-%d\" patternUnits=\"userSpaceOnUse\" "
                   "width=\"%d\" height=\"%d\"><path fill=\"#%06x\" d=\"",
                o->rgb, p, p, p, o->rgb);
        /* the pixels with (x + y) % p == 0 of one p x p tile */
        for (int x = 0; x < p; x++)
            fprintf(f, "M%d %dh1v1h-1Z", x, (p - x) % p);
        fputs("\"/></pattern>\n", f);
    }
}

/* Writes the list as an SVG document to f. */
static void svg_write(const canvas *c, FILE *f)
{
    const struct canvas_list *L = c->list;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
               "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"%s\" xml:space=\"preserve\" "
               "shape-rendering=\"crispEdges\">\n",
            c->w, c->h, c->w, c->h, SVG_FONTS);
    fputs("<defs>\n", f);
    svg_patterns(f, L);
    fputs("</defs>\n", f);
    int depth = 0;
    for (size_t i = 0; i < L->n;) {
        const op *o = &L->ops[i];
        switch (o->kind) {
        case OP_RECT: case OP_BLEND: case OP_HATCH: {
            size_t j = i + 1;
            while (j < L->n && same_run(&L->ops[j - 1], &L->ops[j]))
                j++;
            if (j - i == 1 && o->kind != OP_HATCH) {
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" ",
                        o->x0, o->y0, o->x1 - o->x0, o->y1 - o->y0);
            } else {
                fputs("<path d=\"", f);
                svg_run_path(f, o, j - i);
                fputs("\" ", f);
            }
            svg_paint(f, o);
            fputs("/>\n", f);
            i = j;
            continue;
        }
        case OP_FRAME:
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
                       "fill=\"none\" stroke=\"#%06x\" stroke-width=\"1\"/>\n",
                    o->x0 + 0.5, o->y0 + 0.5, o->x1 - o->x0 - 1,
                    o->y1 - o->y0 - 1, o->rgb);
            break;
        case OP_HLINE:
            fprintf(f, "<path d=\"M%d %.1fH%d\" stroke=\"#%06x\" stroke-width=\"%d\" "
                       "stroke-dasharray=\"%d\"/>\n",
                    o->x0, (o->y0 + o->y1) / 2.0, o->x1, o->rgb, o->y1 - o->y0, o->dash);
            break;
        case OP_VLINE:
            fprintf(f, "<path d=\"M%.1f %dV%d\" stroke=\"#%06x\" stroke-width=\"%d\" "
                       "stroke-dasharray=\"%d\"/>\n",
                    (o->x0 + o->x1) / 2.0, o->y0, o->y1, o->rgb, o->x1 - o->x0, o->dash);
            break;
        case OP_LINE: {
            /* consecutive segments of one colour and width joined end to
             * start become one polyline */
            double hf = o->t / 2.0;
            fprintf(f, "<polyline fill=\"none\" stroke=\"#%06x\" stroke-width=\"%d\" "
                       "stroke-linecap=\"square\" shape-rendering=\"auto\" "
                       "points=\"%g,%g %g,%g",
                    o->rgb, o->t, o->x0 + hf, o->y0 + hf, o->x1 + hf, o->y1 + hf);
            size_t j = i + 1;
            while (j < L->n && L->ops[j].kind == OP_LINE && L->ops[j].rgb == o->rgb &&
                   L->ops[j].t == o->t && L->ops[j].x0 == L->ops[j - 1].x1 &&
                   L->ops[j].y0 == L->ops[j - 1].y1) {
                fprintf(f, " %g,%g", L->ops[j].x1 + hf, L->ops[j].y1 + hf);
                j++;
            }
            fputs("\"/>\n", f);
            i = j;
            continue;
        }
        case OP_TEXT:
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"%.2f\" fill=\"#%06x\" "
                       "textLength=\"%d\" lengthAdjust=\"spacing\">",
                    o->x0, o->y0 + CANVAS_CAP_H * o->a, FONT_PX * o->a, o->rgb,
                    canvas_text_w(L->strs + o->s, o->a));
            xml_text(f, L->strs + o->s);
            fputs("</text>\n", f);
            break;
        case OP_TEXT_UP:
            fprintf(f, "<text transform=\"translate(%d %d) rotate(-90)\" x=\"0\" "
                       "y=\"%d\" font-size=\"%.2f\" fill=\"#%06x\" "
                       "textLength=\"%d\" lengthAdjust=\"spacing\">",
                    o->x0, o->y0, CANVAS_CAP_H * o->a, FONT_PX * o->a, o->rgb,
                    canvas_text_w(L->strs + o->s, o->a));
            xml_text(f, L->strs + o->s);
            fputs("</text>\n", f);
            break;
        case OP_GROUP:
            if (i + 1 < L->n && L->ops[i + 1].kind == OP_END) {
                i += 2;   /* an empty group (no NVTX lanes, an empty band) */
                continue;
            }
            fputs("<g class=\"", f);
            xml_text(f, L->strs + o->s);
            if (o->s2 != NO_STR) {
                fputs("\" data-label=\"", f);
                xml_text(f, L->strs + o->s2);
            }
            fputs("\">\n", f);
            if (o->a && o->s2 != NO_STR) {   /* canvas_group_tip: a hover title */
                fputs("<title>", f);
                xml_text(f, L->strs + o->s2);
                fputs("</title>\n", f);
            }
            depth++;
            break;
        case OP_END:
            if (depth > 0) {
                fputs("</g>\n", f);
                depth--;
            }
            break;
        default:
            break;
        }
        i++;
    }
    while (depth-- > 0)
        fputs("</g>\n", f);
    fputs("</svg>\n", f);
}

/* ---- files ---- */

const char *canvas_format_ext(canvas_format f)
{
    return f == CANVAS_SVG ? "svg" : "png";
}

int canvas_format_of(const char *path, canvas_format *f)
{
    size_t n = strlen(path);
    if (n > 4 && !strcasecmp(path + n - 4, ".png"))
        *f = CANVAS_PNG;
    else if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
        *f = CANVAS_SVG;
    else
        return -1;
    return 0;
}

int canvas_write(const canvas *c, const char *path, canvas_format fmt,
                 char *err, size_t errlen)
{
    if (!c->list || c->list->failed || (fmt == CANVAS_PNG && raster(c))) {
        snprintf(err, errlen, "%s: out of memory drawing the picture", path);
        return -1;
    }
    /* never written in place: a new file renamed over path (util/outfile.h) */
    char tmp[4096 + 32];
    int fd = outfile_create(path, OUTFILE_REPLACE_LINK, tmp, sizeof tmp);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        outfile_discard(tmp);
        return -1;
    }
    const char *why = NULL;
    if (fmt == CANVAS_PNG) {
        why = png_out(c->list->surf, f);
    } else {
        svg_write(c, f);
    }
    int werr = ferror(f) ? EIO : 0;
    if (fclose(f) != 0 && !werr)
        werr = errno;
    if (why || werr) {
        snprintf(err, errlen, "%s: cannot write the %s (%s)", path,
                 fmt == CANVAS_PNG ? "PNG" : "SVG", why ? why : strerror(werr));
        outfile_discard(tmp);
        return -1;
    }
    if (outfile_commit(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int canvas_write_png(const canvas *c, const char *path, char *err,
                     size_t errlen)
{
    return canvas_write(c, path, CANVAS_PNG, err, errlen);
}

uint32_t rgb_lighten(uint32_t rgb, int f)
{
    uint32_t out = 0;
    for (int sh = 16; sh >= 0; sh -= 8) {
        int v = (int)(rgb >> sh) & 255;
        v = v + (255 - v) * f / 255;
        out |= (uint32_t)v << sh;
    }
    return out;
}

uint32_t rgb_darken(uint32_t rgb, int f)
{
    uint32_t out = 0;
    for (int sh = 16; sh >= 0; sh -= 8) {
        int v = (int)(rgb >> sh) & 255;
        v = v * (255 - f) / 255;
        out |= (uint32_t)v << sh;
    }
    return out;
}

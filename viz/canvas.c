/* canvas: see canvas.h.  Plain loops over an RGB byte array; libpng only
 * for the final write (the simplified png_image API), into a new file that
 * is renamed over the output path when complete (cli/outfile.h). */
#include "canvas.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "font.h"
#include "../cli/outfile.h"

int canvas_init(canvas *c, int w, int h, uint32_t bg)
{
    c->w = c->h = 0;
    c->px = NULL;
    if (w < 1 || h < 1 || w > 16384 || h > 16384)
        return -1;
    c->px = malloc((size_t)w * (size_t)h * 3);
    if (!c->px)
        return -1;
    c->w = w;
    c->h = h;
    canvas_rect(c, 0, 0, w, h, bg);
    return 0;
}

void canvas_free(canvas *c)
{
    free(c->px);
    c->px = NULL;
    c->w = c->h = 0;
}

uint32_t canvas_get(const canvas *c, int x, int y)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return 0;
    const uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

void canvas_set(canvas *c, int x, int y, uint32_t rgb)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return;
    uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = (uint8_t)(rgb >> 16);
    p[1] = (uint8_t)(rgb >> 8);
    p[2] = (uint8_t)rgb;
}

/* Clips [*a, *b) to [0, n). */
static void clip(int *a, int *b, int n)
{
    if (*a < 0)
        *a = 0;
    if (*b > n)
        *b = n;
}

void canvas_rect(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
    clip(&x0, &x1, c->w);
    clip(&y0, &y1, c->h);
    if (x0 >= x1 || y0 >= y1)
        return;
    uint8_t r = (uint8_t)(rgb >> 16), g = (uint8_t)(rgb >> 8), b = (uint8_t)rgb;
    for (int y = y0; y < y1; y++) {
        uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x0) * 3;
        for (int x = x0; x < x1; x++, p += 3) {
            p[0] = r;
            p[1] = g;
            p[2] = b;
        }
    }
}

void canvas_blend_rect(canvas *c, int x0, int y0, int x1, int y1,
                       uint32_t rgb, int alpha)
{
    clip(&x0, &x1, c->w);
    clip(&y0, &y1, c->h);
    int r = (int)(rgb >> 16) & 255, g = (int)(rgb >> 8) & 255, b = (int)rgb & 255;
    for (int y = y0; y < y1; y++) {
        uint8_t *p = c->px + ((size_t)y * (size_t)c->w + (size_t)x0) * 3;
        for (int x = x0; x < x1; x++, p += 3) {
            p[0] = (uint8_t)((p[0] * (255 - alpha) + r * alpha) / 255);
            p[1] = (uint8_t)((p[1] * (255 - alpha) + g * alpha) / 255);
            p[2] = (uint8_t)((p[2] * (255 - alpha) + b * alpha) / 255);
        }
    }
}

void canvas_frame(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb)
{
    canvas_rect(c, x0, y0, x1, y0 + 1, rgb);
    canvas_rect(c, x0, y1 - 1, x1, y1, rgb);
    canvas_rect(c, x0, y0, x0 + 1, y1, rgb);
    canvas_rect(c, x1 - 1, y0, x1, y1, rgb);
}

void canvas_hline(canvas *c, int x0, int x1, int y, int t, uint32_t rgb,
                  int dash)
{
    if (x1 < x0) {
        int tmp = x0;
        x0 = x1;
        x1 = tmp;
    }
    for (int x = x0; x <= x1; x++)
        if (dash <= 0 || ((x - x0) / dash) % 2 == 0)
            canvas_rect(c, x, y, x + 1, y + t, rgb);
}

void canvas_vline(canvas *c, int x, int y0, int y1, int t, uint32_t rgb,
                  int dash)
{
    if (y1 < y0) {
        int tmp = y0;
        y0 = y1;
        y1 = tmp;
    }
    for (int y = y0; y <= y1; y++)
        if (dash <= 0 || ((y - y0) / dash) % 2 == 0)
            canvas_rect(c, x, y, x + t, y + 1, rgb);
}

void canvas_line(canvas *c, int x0, int y0, int x1, int y1, int t,
                 uint32_t rgb)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        canvas_rect(c, x0, y0, x0 + t, y0 + t, rgb);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

int canvas_text(canvas *c, int x, int y, const char *s, uint32_t rgb,
                int scale)
{
    int x0 = x;
    if (scale < 1)
        scale = 1;
    for (; *s; s++, x += FONT_CELL_W * scale) {
        const unsigned char *g = font_glyph((unsigned char)*s);
        for (int gy = 0; gy < FONT_GLYPH_H; gy++)
            for (int gx = 0; gx < FONT_GLYPH_W; gx++)
                if (g[gy] & (1u << (FONT_GLYPH_W - 1 - gx)))
                    canvas_rect(c, x + gx * scale, y + gy * scale,
                                x + (gx + 1) * scale, y + (gy + 1) * scale,
                                rgb);
    }
    return x - x0;
}

int canvas_text_w(const char *s, int scale)
{
    return (int)strlen(s) * FONT_CELL_W * (scale < 1 ? 1 : scale);
}

int canvas_text_h(int scale)
{
    return FONT_CELL_H * (scale < 1 ? 1 : scale);
}

void canvas_text_up(canvas *c, int x, int y, const char *s, uint32_t rgb,
                    int scale)
{
    if (scale < 1)
        scale = 1;
    /* Column gx of a glyph becomes a row going up; row gy a column. */
    for (int i = 0; s[i]; i++) {
        const unsigned char *g = font_glyph((unsigned char)s[i]);
        int base = y - i * FONT_CELL_W * scale;
        for (int gy = 0; gy < FONT_GLYPH_H; gy++)
            for (int gx = 0; gx < FONT_GLYPH_W; gx++)
                if (g[gy] & (1u << (FONT_GLYPH_W - 1 - gx))) {
                    int px = x + gy * scale, py = base - (gx + 1) * scale;
                    canvas_rect(c, px, py, px + scale, py + scale, rgb);
                }
    }
}

int canvas_write_png(const canvas *c, const char *path, char *err,
                     size_t errlen)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)c->w;
    img.height = (png_uint_32)c->h;
    img.format = PNG_FORMAT_RGB;
    /* never written in place: a new file renamed over path (outfile.h) */
    char tmp[4096 + 32];
    int fd = cli_out_create(path, tmp, sizeof tmp);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        cli_out_discard(tmp);
        return -1;
    }
    int ok = png_image_write_to_stdio(&img, f, 0, c->px, 0, NULL);
    int werr = fclose(f) != 0 ? errno : 0;
    if (!ok || werr) {
        snprintf(err, errlen, "%s: cannot write the PNG (%s)", path,
                 !ok && img.message[0] ? img.message : werr ? strerror(werr) : "libpng error");
        png_image_free(&img);
        cli_out_discard(tmp);
        return -1;
    }
    if (cli_out_commit(tmp, path)) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    return 0;
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

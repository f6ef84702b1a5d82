/* canvas: an RGB picture in memory, the few drawing operations the renderer
 * needs (rectangles, lines, translucent fills, text in the bitmap font of
 * font.h), and PNG output through libpng.
 *
 * Coordinates are pixels, x to the right and y down from the top-left
 * corner; every operation clips to the picture, so callers may pass
 * coordinates outside it.  Colours are 0xRRGGBB.
 */
#ifndef MEMSNAP_VIZ_CANVAS_H
#define MEMSNAP_VIZ_CANVAS_H

#include <stddef.h>
#include <stdint.h>

typedef struct canvas {
    int w, h;
    uint8_t *px; /* w*h*3 bytes, row-major RGB */
} canvas;

/* Allocates a w x h picture filled with bg.  0 ok, -1 out of memory or a
 * size outside 1..16384. */
int canvas_init(canvas *c, int w, int h, uint32_t bg);
void canvas_free(canvas *c);

/* The pixel at (x, y) as 0xRRGGBB; 0 outside the picture. */
uint32_t canvas_get(const canvas *c, int x, int y);
void canvas_set(canvas *c, int x, int y, uint32_t rgb);

/* Filled rectangle [x0, x1) x [y0, y1). */
void canvas_rect(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb);
/* Rectangle [x0, x1) x [y0, y1) blended with rgb at alpha/255. */
void canvas_blend_rect(canvas *c, int x0, int y0, int x1, int y1,
                       uint32_t rgb, int alpha);
/* 1-pixel outline of [x0, x1) x [y0, y1). */
void canvas_frame(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb);
/* Horizontal line from x0 to x1 inclusive, thickness t downwards from y;
 * dash > 0 draws dash pixels on, dash off. */
void canvas_hline(canvas *c, int x0, int x1, int y, int t, uint32_t rgb,
                  int dash);
/* Vertical line from y0 to y1 inclusive, thickness t to the right of x. */
void canvas_vline(canvas *c, int x, int y0, int y1, int t, uint32_t rgb,
                  int dash);
/* Straight line (Bresenham), thickness t (a t x t square per point). */
void canvas_line(canvas *c, int x0, int y0, int x1, int y1, int t,
                 uint32_t rgb);

/* Draws s with its top-left corner at (x, y), scale 1, 2, ...; returns the
 * width drawn in pixels.  Characters outside printable ASCII show as '?'. */
int canvas_text(canvas *c, int x, int y, const char *s, uint32_t rgb,
                int scale);
/* Width and height s would take at this scale. */
int canvas_text_w(const char *s, int scale);
int canvas_text_h(int scale);
/* Draws s rotated 90 degrees counter-clockwise (reading upwards), its
 * bottom-left corner at (x, y). */
void canvas_text_up(canvas *c, int x, int y, const char *s, uint32_t rgb,
                    int scale);

/* Writes the picture as an 8-bit RGB PNG.  0 ok, -1 with a one-line reason
 * in err. */
int canvas_write_png(const canvas *c, const char *path, char *err,
                     size_t errlen);

/* 0xRRGGBB mixed with white: f = 0 gives rgb, f = 255 gives white. */
uint32_t rgb_lighten(uint32_t rgb, int f);
/* 0xRRGGBB mixed with black. */
uint32_t rgb_darken(uint32_t rgb, int f);

#endif

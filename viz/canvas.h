/* canvas: a picture the painters draw into, written as PNG or SVG.
 *
 * A canvas records the drawing operations in order (a display list: filled
 * rectangles, translucent fills, hatching, lines, text, named groups); the
 * two outputs are made from the same list, so the PNG and the SVG of one
 * paint hold the same elements:
 *   PNG  the list is replayed into a cairo image surface (CAIRO_FORMAT_RGB24):
 *        pixel-aligned rectangles and axis-parallel lines are written into
 *        the surface's pixels directly (what cairo would draw for them, at a
 *        fraction of the cost), diagonal lines and text go through cairo,
 *        antialiased; text in DejaVu Sans (cairo's toy font API, fontconfig).
 *        canvas_get reads that surface (replayed on first use).
 *   SVG  a small writer of our own (cairo's SVG surface writes neither ids
 *        nor classes and one element per 1-pixel column): groups become
 *        <g class="...">, runs of same-coloured rectangles that touch
 *        column by column become one <path>, text stays <text>.
 *
 * Coordinates are pixels, x to the right and y down from the top-left
 * corner; every operation clips to the picture (PNG) or is cut by the
 * viewBox (SVG), so callers may pass coordinates outside it.  Colours are
 * 0xRRGGBB.  Text: a line is CANVAS_LINE_H * scale pixels high, its capital
 * letters CANVAS_CAP_H * scale pixels above the baseline; widths come from
 * the font (canvas_text_w), never from a character count.
 */
#ifndef MEMSNAP_VIZ_CANVAS_H
#define MEMSNAP_VIZ_CANVAS_H

#include <stddef.h>
#include <stdint.h>

#define CANVAS_LINE_H 10  /* line height at scale 1 */
#define CANVAS_CAP_H 7    /* cap height (baseline below the text's top) at scale 1 */

struct canvas_list;

typedef struct canvas {
    int w, h;
    struct canvas_list *list; /* the operations and the raster (canvas.c) */
} canvas;

/* Output formats of canvas_write. */
typedef enum canvas_format { CANVAS_PNG, CANVAS_SVG } canvas_format;

/* Starts a w x h picture filled with bg.  0 ok, -1 out of memory or a
 * size outside 1..16384 (then c is empty and canvas_free is harmless). */
int canvas_init(canvas *c, int w, int h, uint32_t bg);
/* Frees everything; c becomes empty.  Harmless on a zeroed canvas. */
void canvas_free(canvas *c);

/* The pixel at (x, y) of the PNG rendering as 0xRRGGBB; 0 outside the
 * picture or when the raster cannot be made (out of memory). */
uint32_t canvas_get(const canvas *c, int x, int y);
/* One pixel. */
void canvas_set(canvas *c, int x, int y, uint32_t rgb);

/* Filled rectangle [x0, x1) x [y0, y1). */
void canvas_rect(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb);
/* Rectangle [x0, x1) x [y0, y1) blended with rgb at alpha/255. */
void canvas_blend_rect(canvas *c, int x0, int y0, int x1, int y1,
                       uint32_t rgb, int alpha);
/* Hatching inside [x0, x1) x [y0, y1): the pixels with (x + y) % period
 * == 0 in rgb, the others untouched. */
void canvas_hatch(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb,
                  int period);
/* 1-pixel outline of [x0, x1) x [y0, y1). */
void canvas_frame(canvas *c, int x0, int y0, int x1, int y1, uint32_t rgb);
/* Horizontal line from x0 to x1 inclusive, thickness t downwards from y;
 * dash > 0 draws dash pixels on, dash off. */
void canvas_hline(canvas *c, int x0, int x1, int y, int t, uint32_t rgb,
                  int dash);
/* Vertical line from y0 to y1 inclusive, thickness t to the right of x. */
void canvas_vline(canvas *c, int x, int y0, int y1, int t, uint32_t rgb,
                  int dash);
/* Straight antialiased line of width t through the centres of the t x t
 * squares whose top-left corners are (x0, y0) and (x1, y1). */
void canvas_line(canvas *c, int x0, int y0, int x1, int y1, int t,
                 uint32_t rgb);

/* Draws s with the top of its line box at y, starting at x, scale 1, 2,
 * ...; returns canvas_text_w(s, scale).  Bytes outside printable ASCII
 * show as '?'. */
int canvas_text(canvas *c, int x, int y, const char *s, uint32_t rgb,
                int scale);
/* Width s takes at this scale in DejaVu Sans, whole pixels rounded up. */
int canvas_text_w(const char *s, int scale);
/* Height of a line at this scale: CANVAS_LINE_H * scale. */
int canvas_text_h(int scale);
/* Cuts s (in place) with ".." at its end until it is at most max_w
 * pixels wide at this scale; "" when not even ".." fits.  Returns 1 when
 * it cut. */
int canvas_fit(char *s, int max_w, int scale);
/* Draws s rotated 90 degrees counter-clockwise (reading upwards), the
 * bottom-left corner of its line box at (x, y). */
void canvas_text_up(canvas *c, int x, int y, const char *s, uint32_t rgb,
                    int scale);

/* Groups: the operations until the matching canvas_group_end form one
 * element of the SVG, <g class="cls"> (with data-label="label" when label
 * is not NULL), so a reader or a test finds the title, the legend, each
 * site's band.  cls is one or more class names (letters, digits, '-')
 * separated by spaces.  Groups nest; a group with nothing in it is left
 * out; the PNG ignores them. */
void canvas_group(canvas *c, const char *cls, const char *label);
/* canvas_group whose label is also the SVG's hover text (a <title> first
 * in the group: a viewer shows it under the pointer). */
void canvas_group_tip(canvas *c, const char *cls, const char *label);
void canvas_group_end(canvas *c);

/* Writes the picture to path in format f: PNG 8-bit RGB, or SVG.  Written
 * to a new file renamed over path when complete (util/outfile.h).  0 ok,
 * -1 with a one-line reason in err. */
int canvas_write(const canvas *c, const char *path, canvas_format f,
                 char *err, size_t errlen);
/* canvas_write(c, path, CANVAS_PNG, err, errlen). */
int canvas_write_png(const canvas *c, const char *path, char *err,
                     size_t errlen);
/* "png" or "svg" (the file extension of a format). */
const char *canvas_format_ext(canvas_format f);
/* The format a file name's extension says (.png or .svg, any case) into
 * *f: 0, or -1 for any other name. */
int canvas_format_of(const char *path, canvas_format *f);

/* 0xRRGGBB mixed with white: f = 0 gives rgb, f = 255 gives white. */
uint32_t rgb_lighten(uint32_t rgb, int f);
/* 0xRRGGBB mixed with black. */
uint32_t rgb_darken(uint32_t rgb, int f);

#endif

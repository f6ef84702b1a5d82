/* The flame graph of one moment (render.h viz_flame): the tree of
 * analyze/flame.h drawn with the root at the bottom, each frame a box as
 * wide as the bytes live under it, its callees stacked above it in name
 * order.  A name that does not fit is cut ("..") or left out when the box
 * is narrower than a few characters; every box is an SVG group whose
 * data-label carries its full name and bytes, so nothing is lost in the
 * picture's file, and its <title> is the box's hover text.
 *
 * Colours: warm hues picked by the name (the same frame, the same colour in
 * every picture); with a second moment (--vs), red for what grew, blue for
 * what shrank, as strong as the change is against the box, grey for what
 * stayed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/flame.h"
#include "render.h"
#include "util/hash.h"

#define ROW 18        /* box height, 1 px of it a gap */
#define MARGIN 12
#define MIN_TEXT_W 28 /* narrower boxes carry no name */

/* A warm colour from a name. */
static uint32_t warm(const char *name)
{
    uint32_t h = msnap_fnv1a32_str(name);
    unsigned r = 205 + (h & 0x1f), g = 90 + ((h >> 5) % 120), b = 40 + ((h >> 12) % 50);
    return r << 16 | g << 8 | b;
}

/* Red for growth, blue for shrinking, by the change relative to the box. */
static uint32_t diff_colour(const fl_node *n)
{
    uint64_t base = n->bytes > n->vs ? n->bytes : n->vs;
    if (!base || n->bytes == n->vs)
        return 0xc8c8c8;
    uint64_t d = n->bytes > n->vs ? n->bytes - n->vs : n->vs - n->bytes;
    int f = (int)(200.0 * (double)d / (double)base);
    f = f < 40 ? 40 : f > 200 ? 200 : f;
    return n->bytes > n->vs ? rgb_lighten(0xc0392b, 200 - f) : rgb_lighten(0x2e6da4, 200 - f);
}

/* Draws node i over [x, x + w) and its children above it. */
static void draw_node(const fl_tree *t, uint32_t i, canvas *c, double x, double w, int base_y,
                      double scale)
{
    const fl_node *n = &t->n[i];
    int x0 = (int)(x + 0.5), x1 = (int)(x + w + 0.5);
    if (x1 <= x0)
        return;
    int y1 = base_y - n->depth * ROW, y0 = y1 - ROW + 1;
    char size[32], label[700];
    msnap_size_text(n->bytes, size, sizeof size);
    if (t->has_vs) {
        char vs[32];
        msnap_size_text(n->vs, vs, sizeof vs);
        snprintf(label, sizeof label, "%s: %s (%" PRIu64 " bytes; the other moment %s, %"
                 PRIu64 " bytes)", n->name, size, n->bytes, vs, n->vs);
    } else {
        snprintf(label, sizeof label, "%s: %s (%" PRIu64 " bytes)", n->name, size, n->bytes);
    }
    canvas_group_tip(c, "frame", label);
    canvas_rect(c, x0, y0, x1 > x0 + 1 ? x1 - 1 : x1, y1,
                t->has_vs ? diff_colour(n) : n->name[0] == '(' ? 0xc8c8c8 : warm(n->name));
    if (x1 - x0 >= MIN_TEXT_W) {
        char text[600];
        snprintf(text, sizeof text, "%s  %s", n->name, size);
        if (canvas_text_w(text, 1) > x1 - x0 - 6)
            snprintf(text, sizeof text, "%s", n->name);
        canvas_fit(text, x1 - x0 - 6, 1);
        if (text[0])
            canvas_text(c, x0 + 3, y0 + (ROW - CANVAS_LINE_H) / 2, text, 0x111111, 1);
    }
    canvas_group_end(c);
    double cx = x;
    for (uint32_t k = n->first; k != FL_NONE && cx < x + w; k = t->n[k].next) {
        /* within the parent's box: sizes that saturated at 2^64 - 1 (a
         * hostile file) can make the children add up to more */
        double cw = (double)t->n[k].bytes * scale;
        if (cw > x + w - cx)
            cw = x + w - cx;
        draw_node(t, k, c, cx, cw, base_y, scale);
        cx += cw;
    }
}

int viz_flame(const fl_tree *t, canvas *c, int width, const char *title, const char *subtitle)
{
    int top = MARGIN + 2 * canvas_text_h(1) + 8;
    if (t->maxdepth > (16384 - top - MARGIN) / ROW - 1 || width > 16384)
        return VIZ_TOO_LARGE;
    int h = top + (t->maxdepth + 1) * ROW + MARGIN;
    if (canvas_init(c, width, h, 0xffffff))
        return -1;
    canvas_group(c, "title", NULL);
    canvas_text(c, MARGIN, MARGIN, title, 0x111111, 1);
    if (subtitle)
        canvas_text(c, MARGIN, MARGIN + canvas_text_h(1) + 2, subtitle, 0x555555, 1);
    canvas_group_end(c);
    const fl_node *root = &t->n[0];
    if (!root->bytes)
        return 0;
    double scale = (double)(width - 2 * MARGIN) / (double)root->bytes;
    draw_node(t, 0, c, MARGIN, (double)root->bytes * scale, h - MARGIN, scale);
    return 0;
}

/* The two pictures of `memsnap render`, painted from a sm_model (model.h):
 *
 *   timeline  one panel per device: allocated bytes over time as a stacked
 *             area by allocation site (top N by peak, each its own colour,
 *             the rest "other") or by category (sm_opts.by, model.h
 *             "Bands"; each category its fixed colour), the reserved line above it, the device
 *             capacity and a configured cap as dashed lines, OOMs in red
 *             with the requested size, NVTX ranges as labelled lanes and
 *             shading, the counters series where the events do not reach.
 *   segments  the segment map at one moment: each segment (cuMemAlloc
 *             allocation, stream-ordered/managed allocation, VMM
 *             reservation with its mappings) a row laid out by address, at
 *             one scale (bytes per pixel) for all rows, long segments
 *             wrapping onto more lines; blocks coloured by site, free space,
 *             unmapped space; the fragmentation numbers written on it.
 *
 * The geometry is exposed (viz_geom, viz_y_of) so tests can check what a
 * pixel means: the top of the stacked area in column c is at
 * viz_y_of(g, total at c).
 */
#ifndef MEMSNAP_VIZ_RENDER_H
#define MEMSNAP_VIZ_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "canvas.h"
#include "analyze/model.h"

#define VIZ_BG 0xffffffu
#define VIZ_OTHER 0xb4b4b4u      /* "other" sites */
#define VIZ_FREE 0xffffffu       /* free inside a segment */
#define VIZ_UNMAPPED 0xd2d2d2u   /* reserved address space, not mapped */
#define VIZ_OTHER_LIB 0x7a7a7au  /* beside an allocator's blocks: another
                                    library's driver memory (cuBLAS, ...) */
#define VIZ_RESERVED 0x1f1f1fu   /* reserved line */
#define VIZ_OOM 0xd62728u
#define VIZ_MARK 0x2b5fa8u       /* a mark's tick on the timeline's x axis */
#define VIZ_LEAK 0x4a0a0au       /* hatch, outline and label of a leak suspect's band */

/* Colour of site rank r (0-based) in the palette; r < 0 is "other". */
uint32_t viz_site_colour(int rank);
/* Colour of rank r of device slot in this model: sm_set_colour's when set
 * (compare and several files give a site the same colour in every panel),
 * else the palette's. */
uint32_t viz_rank_colour(const sm_model *m, int slot, int rank);
/* The fixed colour of a category by name (parameters, gradients, ...;
 * "other" is VIZ_OTHER; a user's category one picked by its name), the
 * same in every picture. */
uint32_t viz_category_colour(const char *name);
/* Colour of band b of a slot: its category's (by category), else its
 * site rank's (viz_rank_colour), the rest VIZ_OTHER. */
uint32_t viz_band_colour(const sm_model *m, int slot, int band);
/* Fits a site label into n characters: drops leading namespaces of the
 * naming function first, then cuts the end with "..". */
void viz_fit_label(char *s, int n);

/* Text scale for a picture width: 1 below 1000 pixels, 2 from there. */
int viz_text_scale(int width);

/* Plot columns (pixels of the x axis) of a timeline of this width: what
 * sm_opts.columns must be for viz_timeline. */
int viz_timeline_columns(int width);

/* One timeline panel's plot rectangle and y scale. */
typedef struct viz_geom {
    int x0, y0, x1, y1;  /* plot interior: columns x0..x1-1, rows y0..y1-1; value 0 at y1 */
    uint64_t ymax;       /* value at y0 */
    int slot;            /* device slot of the panel */
    int leak_rank;       /* rank whose band is drawn as a leak suspect; -1 none */
} viz_geom;

/* The marks-axis label of x ("hour 5.8"): the mark word and the value
 * with as many decimals as a tick step of step x units needs. */
void viz_mark_label(const sm_model *m, uint64_t x, uint64_t step, char *buf,
                    size_t cap);
/* The bands of a device slot bottom to top as the stacked area draws
 * them.  By site: the top sites by first allocation (the site allocated
 * first at the bottom, so long-lived memory such as weights is the floor),
 * then "other" (rank ntop) on top.  By category: the band order
 * (model.h "Bands": the longest-lived at the bottom), "other" on top.  ranks has room for
 * SM_MAX_TOP + 1; returns the count. */
int viz_stack_order(const sm_model *m, int slot, int *ranks);
/* The rank of the largest leak suspect among the top sites of a slot
 * (its band gets the hatch and the label); -1 when none has a rank, and
 * by category (the bands are not sites). */
int viz_leak_rank(const sm_model *m, int slot);
/* The legend label of rank r of a slot (told apart from the other top
 * sites as the legend does); "" for a rank out of range. */
void viz_site_label_in(const sm_model *m, int slot, int rank, char *buf,
                       size_t cap);

/* Row of value v: y1 - round(v * (y1 - y0) / ymax), clamped to y0..y1. */
int viz_y_of(const viz_geom *g, uint64_t v);

/* Paints the timeline into *c (which it allocates: width x height, height
 * 0 = automatic).  geoms (may be NULL) receives up to max_geoms panels and
 * *ngeoms their count.  0 ok, -1 out of memory. */
int viz_timeline(const sm_model *m, canvas *c, int width, int height,
                 const char *title, viz_geom *geoms, int max_geoms,
                 int *ngeoms);

/* One timeline panel: a device slot of a model, with its title line. */
typedef struct viz_panel {
    const sm_model *m;
    int slot;
    const char *title;
} viz_panel;

/* The device slots of a model that get a panel (at least one); returns
 * their count, slots[] has room for SM_NDEV. */
int viz_model_slots(const sm_model *m, int *slots);

struct fl_tree;
/* The flame graph of a tree (analyze/flame.h) into *c (allocated), width
 * pixels wide, its height from the tree's depth: title and subtitle (may
 * be NULL) above.  0 ok, -1 out of memory, VIZ_TOO_LARGE when the picture
 * would not fit a canvas (16384 pixels; nothing allocated). */
#define VIZ_TOO_LARGE (-2)
int viz_flame(const struct fl_tree *t, canvas *c, int width, const char *title,
              const char *subtitle);
/* "PREFIX - device N (name, capacity)". */
void viz_panel_title(const sm_model *m, int slot, const char *prefix,
                     char *buf, size_t cap);
/* The top of the y scale a panel of this slot would use on its own. */
uint64_t viz_timeline_ymax(const sm_model *m, int slot);

/* Paints n panels stacked top to bottom below a blank band of top_h
 * pixels (for the caller's own header).  shared_y: every panel on the
 * largest panel's y scale, so equal bytes are equal heights.  height 0 =
 * automatic.  geoms as for viz_timeline.  0 ok, -1 out of memory. */
int viz_timeline_panels(const viz_panel *p, int n, canvas *c, int width,
                        int height, int top_h, int shared_y, viz_geom *geoms,
                        int max_geoms, int *ngeoms);

/* Segment-map geometry for tests: where the bytes of segment i start. */
typedef struct viz_segrow {
    size_t seg;          /* index into the layout's segments */
    int x0, y0, h;       /* first line: bar starts at x0, row top y0, height h */
    int bar_w, line_h;   /* bar width per line, distance between lines */
    int lines;
} viz_segrow;

typedef struct viz_segmap_geom {
    double bytes_per_px;
    viz_segrow *rows;    /* owned by the caller after viz_segmap: free() */
    size_t nrows;
    size_t hidden;       /* rows not drawn (too many for the height) */
    size_t folded;       /* segments drawn as part of another's folded row */
    /* the failed request and the largest free blocks, at an OOM: bar k
     * (0 = the request, in VIZ_OOM; 1.. the free blocks, largest first)
     * from x req_x, width req_w[k], top req_y[k]; nreq bars (0: none) */
    int req_x, req_w[6], req_y[6], nreq;
} viz_segmap_geom;

/* Pixel (x, y) of address a in a drawn segment row; -1 when not drawn. */
int viz_segmap_pixel(const viz_segmap_geom *g, const sm_layout *l,
                     size_t seg, uint64_t a, int *x, int *y);

/* Paints the segment map of the model's captured layout.  height 0 =
 * automatic.  geom may be NULL.  0 ok, -1 out of memory. */
int viz_segmap(const sm_model *m, canvas *c, int width, int height,
               const char *title, viz_segmap_geom *geom);


#endif

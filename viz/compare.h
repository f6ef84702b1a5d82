/* Several snapshots in one picture: `memsnap compare A B [...]` (before /
 * after runs, expandable segments vs fixed pools) and `memsnap render`
 * with one file per rank.
 *
 *   viz_match_colours  gives a site the same colour in every model: sites
 *                      are matched by sm_site_key (frame names from the
 *                      first frame outside the memory runtime outwards,
 *                      no addresses), ranked by
 *                      their largest peak in any model, and coloured by
 *                      that global rank.
 *   viz_cmp_build      the comparison table (per snapshot: peak allocated,
 *                      peak reserved, both fragmentation metrics, OOMs,
 *                      events) and, for each snapshot after the first, the
 *                      sites whose peak changed most against the first.
 *   viz_compare        the table and the changes above the timelines, all
 *                      panels on one y scale.
 *   viz_multi          one panel per file (and device) on one y scale, the
 *                      file name as the panel title.
 *
 * Every model must have been read through both passes (sm_read_file with
 * pass2), with the same sm_opts.columns (viz_timeline_columns(width)).
 */
#ifndef MEMSNAP_VIZ_COMPARE_H
#define MEMSNAP_VIZ_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "canvas.h"
#include "analyze/model.h"
#include "render.h"

/* One snapshot's row of the table. */
typedef struct viz_cmp_row {
    uint64_t peak_stacked;   /* allocated (blocks) or the driver layer */
    uint64_t peak_reserved;
    int blocks;              /* stacked layer = allocator blocks */
    int frag_known;          /* both metrics need allocator blocks */
    double frag_free;        /* 1 - largest_free/total_free at frag_at */
    double frag_peak;        /* 1 - peak_allocated/peak_reserved */
    int frag_at;             /* enum sm_at of the layout */
    uint64_t frag_t;
    uint64_t ooms, oom_t, oom_requested;   /* count; the first one */
    uint64_t events;
} viz_cmp_row;

/* A site whose peak changed between the first snapshot and snapshot
 * `other`.  before/after are the site's peaks (summed over devices). */
typedef struct viz_cmp_change {
    int other;
    char label[SM_LABEL_MAX];
    uint64_t before, after;
    uint32_t colour;         /* its colour in the panels; grey when in no top list */
} viz_cmp_change;

typedef struct viz_cmp {
    int n;
    viz_cmp_row *rows;
    viz_cmp_change *changes; /* grouped by other (1..n-1), largest change first */
    size_t nchanges;
} viz_cmp;

/* Same colour for the same site in every model (sm_set_colour). */
void viz_match_colours(sm_model **models, int n);

/* Fills *out; per_other: changes listed per snapshot after the first.
 * 0 ok, -1 out of memory. */
int viz_cmp_build(sm_model **models, int n, int per_other, viz_cmp *out);
void viz_cmp_free(viz_cmp *c);

/* "A", "B", ... "Z", "27", ...: the letter of snapshot i. */
const char *viz_cmp_letter(int i, char *buf, size_t cap);

/* The compare picture into *c (allocated): title, table, changes, then a
 * timeline panel per snapshot and device on one y scale.  names: what the
 * panels and the table call each snapshot (file names).  0 ok, -1 out of
 * memory.  geoms as for viz_timeline (one per panel). */
int viz_compare(sm_model **models, const char **names, int n,
                const viz_cmp *cmp, canvas *c, int width, int height,
                viz_geom *geoms, int max_geoms, int *ngeoms);

/* Several files (one per rank): a header line, then a panel per file and
 * device on one y scale, titled with the file name.  0 ok, -1 no memory. */
int viz_multi(sm_model **models, const char **names, int n, canvas *c,
              int width, int height, viz_geom *geoms, int max_geoms,
              int *ngeoms);

#endif

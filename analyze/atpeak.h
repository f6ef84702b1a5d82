/* What was live at the peak, by site: the first question about a run
 * that did not run out of memory but is too big (`memsnap summary`'s
 * "live at the peak", JSON "at_peak").
 *
 * The moment is the process's peak of the stacked layer (analyze/model.h):
 * allocated when the file has allocator blocks, else reserved; the first
 * event after which that level reached its peak (format/state.h), the
 * moment `memsnap flame --at peak` draws when the file has no OOM, and
 * the Python API's state_at("peak").  What is counted is that layer's live
 * objects (blocks, or driver allocations), by site as every view shows
 * them (model.h sm_group: the stacks whose labels read the same), each
 * with the bytes of every category its objects had then (the breakdown's
 * categories, analyze/breakdown.h, change by change: a site's blocks may
 * be activations and temporaries at once).  So the sites add up to the
 * peak, and the categories to summary's category table where its moment
 * is the same.
 *
 * Built after the read from the file's change log (analysis.h an_replay),
 * with the breakdown's change categories (bd_keep_change_categories
 * before the read); both observers must have watched the read.
 */
#ifndef MEMSNAP_ANALYZE_ATPEAK_H
#define MEMSNAP_ANALYZE_ATPEAK_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "breakdown.h"
#include "model.h"

/* A site's live objects at the peak. */
typedef struct ap_site {
    uint32_t grp;              /* index into sm_groups() */
    uint64_t bytes, objects;
    uint64_t cat[CAT_MAX];     /* bytes per category (cat_name), BD_NOT_COUNTED left out */
} ap_site;

typedef struct ap_result {
    int found;                 /* a peak was reached (some object lived) */
    int layer;                 /* MSNAP_LAYER_ALLOCATED or _RESERVED */
    uint64_t event_index, t_ns;
    uint64_t bytes, objects;   /* over every site: the layer's peak */
    uint64_t cat[CAT_MAX];     /* over every site */
    ap_site *sites;            /* by bytes, largest first (ties by group) */
    size_t nsites;
} ap_result;

/* Computes the live set at the peak by site (see the top) into *r.  bd may
 * be NULL (no categories).  0 ok, -1 out of memory or no log (*r zeroed
 * either way; ap_free it). */
int ap_compute(ap_result *r, const an_file *f, const sm_model *m, const breakdown *bd);
void ap_free(ap_result *r);

#endif

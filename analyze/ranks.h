/* Several snapshots, one per rank: which rank peaked highest, by how much,
 * and on which allocation sites.
 *
 * Each file is described by its peak (reserved, all devices) and its top
 * sites by peak live bytes (the allocated layer's sites, then the reserved
 * layer's), named by their site labels (analyze/label.c), so the same line
 * of code gets the same name in every rank's file.  The
 * comparison is between the highest file and the next highest: the peak
 * difference (bytes and percent), and the sites whose peak is higher in
 * the highest file than in the next one (a site missing there counts as
 * 0), largest difference first.
 */
#ifndef MEMSNAP_ANALYZE_RANKS_H
#define MEMSNAP_ANALYZE_RANKS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define RANK_SITES 32        /* sites kept per file */
#define RANK_LABEL_MAX 160   /* = SM_LABEL_MAX */
#define RANK_SHOWN 3         /* differing sites shown */

typedef struct rank_site {
    char label[RANK_LABEL_MAX];
    uint64_t peak;
} rank_site;

typedef struct rank_file {
    const char *path;
    uint64_t peak;
    rank_site sites[RANK_SITES];
    size_t nsites;
} rank_file;

/* Index of the file with the highest peak (the first of equals). */
int ranks_highest(const rank_file *f, int n);

/* The comparison as members of root (`memsnap summary --each` prints
 * them: cli/summary_text.c): "highest_peak" {file, peak, next_file,
 * next_peak, above_next, above_next_pct, sites: [{label, peak,
 * peak_next, difference}]}; nothing when n < 2. */
void ranks_add_json(const rank_file *f, int n, cJSON *root);

#endif

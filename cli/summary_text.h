/* summary_text: sections of `memsnap summary`'s text printed from its
 * result object (analyze/report.h), so that the analysis library prints
 * nothing: the driver breakdown and the categories (the result's
 * "reconcile" and "categories", analyze/breakdown.h) and, for several
 * files with --each, the comparison of the highest rank with the next
 * ("highest_peak", analyze/ranks.h). */
#ifndef MEMSNAP_CLI_SUMMARY_TEXT_H
#define MEMSNAP_CLI_SUMMARY_TEXT_H

#include <cjson/cJSON.h>

/* "device N against the driver ..." per reconcile entry, then "device N by
 * category ..." per categories entry; nothing when root has neither. */
void summary_print_breakdown(const cJSON *root);

/* "  by X (P%) above the next highest, FILE (Y)" and the sites that make
 * the difference, from a highest_peak object; nothing when it is NULL. */
void summary_print_highest(const cJSON *hp);

#endif

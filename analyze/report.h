/* The summary's result object (report.c): what `memsnap summary --json`
 * prints for one snapshot and what its text is printed from. */
#ifndef MEMSNAP_ANALYZE_REPORT_H
#define MEMSNAP_ANALYZE_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "breakdown.h"
#include "category.h"

struct sm_model;

typedef struct msnap_summary_opts {
    int marks;                 /* per-device values at every nvtx_mark */
    int top;                   /* allocation sites listed per layer */
    const cat_rules *rules;    /* category rules (borrowed) */
    int no_breakdown;          /* no reconciliation and categories: the
                                  result has no "reconcile"/"categories"
                                  (memsnap job: a cheaper read) */
    /* Another look at the same read (analyze/job.c): attach is called
     * with the an_file before the read (to observe it), done after the
     * result is built, with the findings model (site labels) and the
     * result.  Either may be NULL; non-zero from either fails the call
     * with "PATH: out of memory". */
    int (*attach)(void *ctx, an_file *f);
    int (*done)(void *ctx, const an_file *f, const struct sm_model *m, cJSON *root);
    void *ctx;
} msnap_summary_opts;

/* Reads the snapshot at path ("-" = stdin) once and builds its result
 * object into *root (cJSON_Delete it); *bd (when bd is not NULL) receives
 * the breakdown (bd_free it; its figures are in the result too).  Returns 0,
 * 1 when the snapshot has an OOM event, 2 with "PATH: why" in err. */
int msnap_summarize(const char *path, const msnap_summary_opts *o, cJSON **root,
                    breakdown **bd, char *err, size_t errlen);

/* Adds key: v as an exact JSON integer (a raw number). */
void msnap_json_u64(cJSON *o, const char *key, uint64_t v);

#endif

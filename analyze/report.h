/* The summary's result object (report.c): what `memsnap summary --json`
 * prints for one snapshot and what its text is printed from. */
#ifndef MEMSNAP_ANALYZE_REPORT_H
#define MEMSNAP_ANALYZE_REPORT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "breakdown.h"
#include "category.h"

typedef struct msnap_summary_opts {
    int marks;                 /* per-device values at every nvtx_mark */
    int top;                   /* allocation sites listed per layer */
    const cat_rules *rules;    /* category rules (borrowed) */
} msnap_summary_opts;

/* Reads the snapshot at path ("-" = stdin) once and builds its result
 * object into *root (cJSON_Delete it); *bd (when bd is not NULL) receives
 * the breakdown, whose text bd_print_text prints (bd_free it).  Returns 0,
 * 1 when the snapshot has an OOM event, 2 with "PATH: why" in err. */
int msnap_summarize(const char *path, const msnap_summary_opts *o, cJSON **root,
                    breakdown **bd, char *err, size_t errlen);

/* Adds key: v as an exact JSON integer (a raw number). */
void msnap_json_u64(cJSON *o, const char *key, uint64_t v);

#endif

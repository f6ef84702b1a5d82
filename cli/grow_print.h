/* --grow for `memsnap replay` and `memsnap predict` (grow_print.c): the
 * sites' sizes under each config, or the largest that fits
 * (whatif/grow.h), printed as text or as the JSON list docs/interop.md
 * gives.  The stream may be a recording's or a prediction's (its tables
 * are then the template's: tab). */
#ifndef MEMSNAP_CLI_GROW_PRINT_H
#define MEMSNAP_CLI_GROW_PRINT_H

#include <stdint.h>

#include "whatif/grow.h"

typedef struct grow_run {
    const char *cmd;          /* "replay" or "predict", for messages */
    const char *what;         /* what the stream is ("serving.msnap", "the prediction at
                                 batch 64") */
    rq_stream *q;
    an_file *tab;             /* its tables and labels */
    gr_sites *sites;          /* matched (gr_match) */
    const char *const *confs;
    int nconf;
    uint64_t device_mem;      /* 0: the recording's */
    int engine;               /* MSNAP_ENGINE_* */
    int find_max, json, jobs, quiet, bytes;
    struct cJSON *out;        /* --json: entries are appended here (a list) */
} grow_run;

/* Runs and prints (or, with json, appends to g->out).  Returns the exit
 * status: 0 every config ran to the end (find_max: found a size), 1 one
 * did not (find_max: nothing fits under one), 2 an error (said on
 * stderr). */
int grow_run_all(grow_run *g);

#endif

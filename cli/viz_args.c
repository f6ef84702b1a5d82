/* Options shared by `memsnap render` and `memsnap compare` (viz_args.h). */
#include "viz_args.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "parallel.h"
#include "viz/render.h"
#include "analyze/siterules.h"

void viz_args_init(viz_args *a, const char *cmd, const char *usage)
{
    *a = (viz_args){.cmd = cmd, .usage = usage, .max_height = 8192,
                    .min_files = 1, .max_files = 64,
                    .stdin_msg = "reads stdin once: give \"-\" at most once",
                    .o = {.top = 8, .x_mode = SM_X_AUTO, .at = SM_AT_DEFAULT},
                    .width = 1600, .height = 0, .format = CANVAS_PNG,
                    .jobs = par_default_jobs()};
}

int viz_args_bad(const viz_args *a, const char *what, const char *arg)
{
    fprintf(stderr, "memsnap %s: %s \"%s\"; try memsnap %s --help\n", a->cmd,
            what, arg, a->cmd);
    return 2;
}

int viz_args_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int viz_args_option(viz_args *a, int c, const char *arg, char **argv)
{
    char what[96];
    switch (c) {
    case 't':
        if (viz_args_int(arg, 0, SM_MAX_TOP, &a->o.top))
            return viz_args_bad(a, "--top wants a count from 0 to 24, got", arg);
        return VIZ_ARGS_MORE;
    case 'f':
        if (!strcmp(arg, "first")) a->o.x_from = SM_FROM_FIRST;
        else if (!strcmp(arg, "0")) a->o.x_from = SM_FROM_ZERO;
        else return viz_args_bad(a, "--from wants first or 0, got", arg);
        return VIZ_ARGS_MORE;
    case 'x':
        if (!strcmp(arg, "time")) {
            a->o.x_mode = SM_X_TIME;
        } else if (!strcmp(arg, "events")) {
            a->o.x_mode = SM_X_EVENTS;
        } else if (!strncmp(arg, "marks", 5) &&
                   (!arg[5] || ((arg[5] == ':' || arg[5] == '=') && arg[6] &&
                                strlen(arg + 6) < sizeof a->o.x_word))) {
            a->o.x_mode = SM_X_MARKS;
            snprintf(a->o.x_word, sizeof a->o.x_word, "%s", arg[5] ? arg + 6 : "");
            for (const char *p = a->o.x_word; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
                    return viz_args_bad(a, "--x marks:WORD wants a word of letters, got", arg);
        } else {
            return viz_args_bad(a, "--x wants time, events, marks or marks:WORD, got", arg);
        }
        return VIZ_ARGS_MORE;
    case 'W':
        if (viz_args_int(arg, 320, 8192, &a->width))
            return viz_args_bad(a, "--width wants pixels from 320 to 8192, got", arg);
        return VIZ_ARGS_MORE;
    case 'H':
        if (viz_args_int(arg, 200, a->max_height, &a->height)) {
            snprintf(what, sizeof what,
                     "--height wants pixels from 200 to %d, got", a->max_height);
            return viz_args_bad(a, what, arg);
        }
        return VIZ_ARGS_MORE;
    case 'F':
        if (!strcmp(arg, "png")) a->format = CANVAS_PNG;
        else if (!strcmp(arg, "svg")) a->format = CANVAS_SVG;
        else return viz_args_bad(a, "--format wants png or svg, got", arg);
        a->format_set = 1;
        return VIZ_ARGS_MORE;
    case 'j':
        return par_parse_jobs(a->cmd, arg, &a->jobs) ? 2 : VIZ_ARGS_MORE;
    case 'h':
        fputs(a->usage, stdout);
        return 0;
    default:
        return cli_option_error(a->cmd, argv, a->shortopts, a->longopts);
    }
}

int viz_args_files(viz_args *a, int argc, char **argv, char ***paths, int *n)
{
    static const char *count[] = {"zero", "one", "two", "three"};
    int nfiles = argc - optind;
    if (nfiles < a->min_files) {
        return cli_usage_error(a->cmd, "expected %s snapshot file%s or more, got %d",
                               count[a->min_files & 3], a->min_files == 1 ? "" : "s", nfiles);
    }
    if (nfiles > a->max_files) {
        return cli_usage_error(a->cmd, "at most %d snapshot files, got %d", a->max_files, nfiles);
    }
    *paths = argv + optind;
    *n = nfiles;
    int nstdin = 0;
    for (int i = 0; i < nfiles; i++)
        if (!strcmp((*paths)[i], "-") && ++nstdin > 1)
            return cli_usage_error(a->cmd, "%s", a->stdin_msg);
    sm_demangle_allow_loading(1);
    a->o.columns = viz_timeline_columns(a->width);
    return 0;
}

int viz_args_site_rules(const char *cmd)
{
    char err[1200];
    if (sr_load_env(err, sizeof err)) {
        fprintf(stderr, "memsnap %s: %s\n", cmd, err);
        return 2;
    }
    return 0;
}

/* The reads on threads (parallel.h): pass 1 of each file, then, after
 * the x range is set, pass 2; messages in file order, as one thread
 * would print them. */
typedef struct read_ctx {
    const viz_args *a;
    char **paths;
    sm_model **models;
    char (*errs)[1024];
} read_ctx;

static int read_pass1(void *c, int i)
{
    read_ctx *r = c;
    if (!(r->models[i] = sm_new(&r->a->o))) {
        snprintf(r->errs[i], sizeof r->errs[i], "memsnap %s: out of memory", r->a->cmd);
        return 2;
    }
    return sm_read_file(r->models[i], r->paths[i], 0, r->errs[i], sizeof r->errs[i]) ? 2 : 0;
}

static int take_pass1(void *c, int i, int rc)
{
    read_ctx *r = c;
    const viz_args *a = r->a;
    if (rc) {
        fprintf(stderr, "%s\n", r->errs[i]);
        return 2;
    }
    uint64_t cut = sm_truncated_after(r->models[i]);
    if (cut)
        fprintf(stderr, "memsnap %s: %s is cut off after line %" PRIu64 " (the process "
                "probably died): drawn up to there\n", a->cmd, r->paths[i], cut);
    if (a->o.x_mode == SM_X_MARKS && !sm_marks(r->models[i], NULL)) {
        if (a->o.x_word[0])
            fprintf(stderr, "memsnap %s: --x marks: %s has no mark with a "
                    "number after \"%s\" (NVTX marks, memsnap_annotate); "
                    "try --x events\n", a->cmd, r->paths[i], a->o.x_word);
        else
            fprintf(stderr, "memsnap %s: --x marks: %s has no mark with a "
                    "number (NVTX marks, memsnap_annotate); try --x events\n",
                    a->cmd, r->paths[i]);
        return 2;
    }
    return 0;
}

static int read_pass2(void *c, int i)
{
    read_ctx *r = c;
    return sm_finish(r->models[i]) ? 2 : 0;
}

static int take_pass2(void *c, int i, int rc)
{
    read_ctx *r = c;
    (void)i;
    if (rc) {
        fprintf(stderr, "memsnap %s: out of memory\n", r->a->cmd);
        return 2;
    }
    return 0;
}

int viz_args_read(const viz_args *a, char **paths, int n, sm_model **models)
{
    read_ctx r = {a, paths, models, calloc((size_t)n, sizeof *r.errs)};
    if (!r.errs) {
        fprintf(stderr, "memsnap %s: out of memory\n", a->cmd);
        return 2;
    }
    int jobs = a->jobs > 0 ? a->jobs : 1;
    if (par_run(n, jobs, read_pass1, take_pass1, &r, paths)) {
        free(r.errs);
        return 2;
    }
    if (n > 1) {
        /* one axis for all: the event index when any file chose it
         * (SM_X_AUTO), then the union of their ranges */
        int events = 0;
        for (int i = 0; i < n; i++)
            events |= sm_options(models[i])->x_mode == SM_X_EVENTS;
        for (int i = 0; events && i < n; i++)
            sm_set_x_mode(models[i], SM_X_EVENTS);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < n; i++) {
            uint64_t l, h;
            sm_x_range(models[i], &l, &h);
            if (l < lo) lo = l;
            if (h > hi) hi = h;
        }
        for (int i = 0; i < n; i++)
            sm_set_x_range(models[i], lo, hi);
    }
    int rc = par_run(n, jobs, read_pass2, take_pass2, &r, paths);
    free(r.errs);
    if (rc)
        return 2;
    /* --at oom where no file has one: say so (where only some have one,
     * the others' maps are at their end, and each says so in its title) */
    if (a->o.at == SM_AT_OOM) {
        int any = 0;
        for (int i = 0; i < n; i++)
            any |= sm_layout_at(models[i])->at == SM_AT_OOM;
        if (!any) {
            if (n > 1)
                fprintf(stderr, "memsnap %s: --at oom: none of these files has an OOM; try "
                        "--at peak or --at end\n", a->cmd);
            else
                fprintf(stderr, "memsnap %s: --at oom: %s has no OOM; try --at peak or "
                        "--at end\n", a->cmd, paths[0]);
            return 2;
        }
    }
    return 0;
}

/* The command-line options `memsnap render` and `memsnap compare` share:
 * --top, --x, --from, --width, --height, --format, -h/--help, the
 * unknown-option message,
 * and the checks on the snapshot files after the options (how many; stdin
 * at most once: each file is read once).  Each command keeps its own option
 * table, usage text and own options; its getopt switch hands every other
 * character to viz_args_option.  Messages are one line on stderr:
 * "memsnap CMD: ...". */
#ifndef MEMSNAP_CLI_VIZ_ARGS_H
#define MEMSNAP_CLI_VIZ_ARGS_H

#include <getopt.h>

#include "viz/canvas.h"
#include "analyze/model.h"

typedef struct viz_args {
    /* set by the command (viz_args_init sets the rest) */
    const char *cmd;          /* "render", "compare" */
    const char *usage;        /* printed by --help */
    int max_height;           /* --height upper bound */
    int min_files, max_files;
    const char *stdin_msg;    /* the refusal of "-", after "memsnap CMD: " */
    const char *shortopts;    /* what the command gives getopt_long (for */
    const struct option *longopts; /* cli_option_error's messages) */
    /* results */
    sm_opts o;                /* top and x_from from here; columns set by viz_args_files */
    int width, height;        /* default 1600, 0 (automatic) */
    canvas_format format;     /* --format png|svg; default png */
    int format_set;           /* --format was given */
    int jobs;                 /* -j N: files read at once (default: the cores) */
} viz_args;

/* Defaults: top 8, time axis from the first event, width 1600, height
 * automatic, 1..64 files. */
void viz_args_init(viz_args *a, const char *cmd, const char *usage);

/* "memsnap CMD: WHAT "ARG"; try memsnap CMD --help" on stderr; returns 2. */
int viz_args_bad(const viz_args *a, const char *what, const char *arg);

/* A whole decimal integer in [lo, hi] into *out.  0 ok, -1 bad. */
int viz_args_int(const char *s, long lo, long hi, int *out);

/* Handles getopt_long's character c when it is not the command's own:
 * 't' --top, 'x' --x (time, events, marks, marks:WORD), 'f' --from,
 * 'W' --width, 'H' --height, 'F' --format (png, svg), 'j' -j/--jobs,
 * 'h' --help, anything
 * else an unknown option (argv for its name).  Returns VIZ_ARGS_MORE when
 * the option was taken, else the exit status (0 after --help, 2 after a
 * message). */
#define VIZ_ARGS_MORE (-1)
int viz_args_option(viz_args *a, int c, const char *arg, char **argv);

/* The snapshot files after the options (argv + optind): checks their
 * number and that "-" (stdin) comes at most once, then lets the demangler load libstdc++ and
 * sets a->o.columns from the width.  0 with *paths and *n set, else 2
 * after a message. */
int viz_args_files(viz_args *a, int argc, char **argv, char ***paths, int *n);

/* Reads the snapshots into new models (models[] has room for n; the
 * caller frees the ones made, also after an error), on up to a->jobs
 * threads (cli/parallel.h; messages as one thread prints them): each file
 * once (pass 1), then, with several, one x range for all (the union of theirs:
 * events or marks put different runs on one axis), then pass 2 from each
 * file's change log (model.h).  --x marks refuses
 * a file without a mark to read.  0 ok, else 2 after a one-line message. */
int viz_args_read(const viz_args *a, char **paths, int n, sm_model **models);

/* The user's site rules (analyze/siterules.h) for the commands that label
 * allocation sites (summary, render, compare): the file named by
 * MEMSNAP_SITE_RULES, when set.  0 ok, else 2 after one line on stderr:
 * "memsnap CMD: MEMSNAP_SITE_RULES=PATH: line N: why". */
int viz_args_site_rules(const char *cmd);

#endif

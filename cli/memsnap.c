/* memsnap: the command-line tool.  `memsnap SUBCOMMAND [ARGS...]`.
 *
 * Git/zstd style: this file only finds the subcommand in a table and hands
 * it argv starting at the subcommand name (so getopt_long works per
 * subcommand as in a program of its own); each subcommand lives in its own
 * file (cmd_NAME.c) and parses its own flags.  Help goes to stdout with
 * exit 0; a usage error is one line on stderr ending in "try memsnap
 * --help" (a subcommand's: "try memsnap SUB --help", options.h), exit 2.  Exit codes for every subcommand: 0 ok, 1 a finding
 * (documented per subcommand, e.g. summary: the snapshot has an OOM),
 * 2 bad input or usage.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "util/outfile.h"
#include "manpage.h"
#include "memsnap/format.h"
#include "viz_args.h"
#include "progress_term.h"

#include "symbolize/symbolize.h"

#ifndef MEMSNAP_VERSION
#define MEMSNAP_VERSION "0.0.0"
#endif

/* One subcommand: its name, one line of help, and its function, which gets
 * (argc, argv) with argv[0] = the subcommand name. */
typedef struct subcommand {
    const char *name;
    const char *synopsis;
    int (*fn)(int argc, char **argv);
} subcommand;

/* In the order a user meets them: record, read, then the what-if and
 * interchange tools. */
static const subcommand subcommands[] = {
    {"run", "run a command under the recorder, writing a snapshot", cmd_run},
    {"summary", "what a snapshot says: peaks, OOMs, leaks, top sites",
     cmd_summary},
    {"job", "many snapshots of one job, one per rank: imbalance, divergent sites, failures",
     cmd_job},
    {"render", "timeline and segment-map pictures (PNG, SVG) of a snapshot", cmd_render},
    {"compare", "snapshots side by side on one scale, with the sites that changed",
     cmd_compare},
    {"flame", "a flame graph of what holds the memory at the peak or the OOM", cmd_flame},
    {"top", "a live terminal view of a recording while it is written", cmd_top},
    {"symbolize", "attach function/file:line to a snapshot's stacks",
     cmd_symbolize},
    {"replay", "the allocation sequence through other allocator configs",
     cmd_replay},
    {"predict", "will it fit? the peak and the OOM at another batch size or length",
     cmd_predict},
    {"export", "a snapshot as a PyTorch memory_viz snapshot, a Perfetto trace or SQLite",
     cmd_export},
    {"import", "a PyTorch memory snapshot (JSON or pickle) as a snapshot",
     cmd_import},
    {"torch-setup", "build the recorder's PyTorch plugin for this machine's PyTorch",
     cmd_torch_setup},
};

#define NSUB (sizeof subcommands / sizeof subcommands[0])

/* Prints the top-level usage to f. */
static void usage(FILE *f)
{
    fprintf(f, "usage: memsnap SUBCOMMAND [ARGS...]\n"
               "       memsnap SUBCOMMAND --help\n"
               "       memsnap --help | --version\n\n"
               "-q/--quiet, before or after the subcommand: no progress line (one\n"
               "is drawn on a terminal for work past a second).\n\n"
               "memsnap records where GPU memory goes in CUDA processes.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < NSUB; i++)
        fprintf(f, "  %-11s %s\n", subcommands[i].name,
                subcommands[i].synopsis);
    fprintf(f, "\nexit status: 0 ok, 1 a finding (e.g. summary: the snapshot "
               "contains an OOM),\n2 bad input or usage.  See docs/cli.md.\n");
}

/* Whether subcommand cmd names allocation sites (and so reads the user's
 * site rules, MEMSNAP_SITE_RULES) in this run: summary, job, render, compare
 * and predict, unless asked for their help. */
static int labels_sites(const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "summary") && strcmp(cmd, "render") && strcmp(cmd, "compare") &&
        strcmp(cmd, "predict") && strcmp(cmd, "job"))
        return 0;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 0;
    return 1;
}

/* Takes -q/--quiet (no progress line) out of a subcommand's arguments, so
 * that every subcommand accepts it without its own option table knowing:
 * `memsnap summary --quiet X` and `memsnap --quiet summary X` alike.  Stops
 * at "--".  For run (own_only) nothing is taken: its -q is its own and what
 * follows the command line belongs to the program.  Returns 1 when found. */
static int strip_quiet(int *argc, char **argv, int own_only)
{
    int found = 0, j = 2;
    if (own_only)
        return 0;
    for (int i = 2; i < *argc; i++) {
        if (!strcmp(argv[i], "--")) {
            while (i < *argc)
                argv[j++] = argv[i++];
            break;
        }
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            found = 1;
            continue;
        }
        argv[j++] = argv[i];
    }
    *argc = j;
    argv[j] = NULL;
    return found;
}

/* The tools that the build and the shell completion use, from the table
 * and the help texts (manpage.c):
 *   memsnap help --commands        the subcommand names, one a line
 *   memsnap help --man             memsnap(1) in roff
 *   memsnap help --man SUBCOMMAND  memsnap-SUBCOMMAND(1) in roff
 *   memsnap help --bash-completion the bash completion script (packaging/
 *                                  memsnap.bash-completion, built in), for
 *                                  eval "$(memsnap help --bash-completion)"
 *                                  where it is not installed (a pip install)
 * argv[0] is the flag.  Exit 0, or 2 for a bad request. */
extern const unsigned char msnap_bash_completion[];
extern const size_t msnap_bash_completion_len;
static int help_tools(int argc, char **argv)
{
    if (!strcmp(argv[0], "--bash-completion") && argc == 1)
        return fwrite(msnap_bash_completion, 1, msnap_bash_completion_len, stdout) ==
                       msnap_bash_completion_len && fflush(stdout) == 0 ? 0 : 2;
    if (!strcmp(argv[0], "--commands") && argc == 1) {
        for (size_t i = 0; i < NSUB; i++)
            printf("%s\n", subcommands[i].name);
        return fflush(stdout) == 0 ? 0 : 2;
    }
    if (!strcmp(argv[0], "--man") && argc == 1) {
        memsnap_man_entry e[NSUB];
        for (size_t i = 0; i < NSUB; i++)
            e[i] = (memsnap_man_entry){subcommands[i].name, subcommands[i].synopsis};
        return memsnap_man_index(stdout, e, NSUB, MEMSNAP_VERSION) == 0 &&
                       fflush(stdout) == 0 ? 0 : 2;
    }
    if (!strcmp(argv[0], "--man") && argc == 2) {
        for (size_t i = 0; i < NSUB; i++)
            if (!strcmp(argv[1], subcommands[i].name))
                return memsnap_man_page(stdout, subcommands[i].name, subcommands[i].synopsis,
                                        subcommands[i].fn, MEMSNAP_VERSION) == 0 &&
                               fflush(stdout) == 0 ? 0 : 2;
        fprintf(stderr, "memsnap: unknown subcommand \"%s\"; try memsnap --help\n", argv[1]);
        return 2;
    }
    fprintf(stderr, "memsnap help: unknown option \"%s\"; try memsnap --help\n", argv[0]);
    return 2;
}

/* SIGINT, SIGTERM, SIGHUP: the temporary files this command is writing go
 * (util/outfile.h), then it dies of the signal as it would have. */
static void on_fatal_signal(int sig)
{
    outfile_unlink_tracked();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void clean_up_on_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    outfile_track(1);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal the caller ignores (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    }
}

/* Dispatches to the subcommand named by argv[1]. */
int main(int argc, char **argv)
{
    msnap_symbolizer_allow_loading(1);   /* demangle C++ names in symbolize/summary */
    if (argc < 2) {
        fprintf(stderr, "memsnap: no subcommand; try memsnap --help\n");
        return 2;
    }
    int global_quiet = 0;
    if (argc > 2 && (!strcmp(argv[1], "-q") || !strcmp(argv[1], "--quiet"))) {
        global_quiet = 1; /* memsnap --quiet SUBCOMMAND ...: as if given after it */
        argv[1] = argv[2];
        argv[2] = "--quiet";
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") && argc > 2 && argv[2][0] == '-')
        return help_tools(argc - 2, argv + 2);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        if (!strcmp(cmd, "help") && argc > 2) {
            /* memsnap help SUBCOMMAND == memsnap SUBCOMMAND --help */
            for (size_t i = 0; i < NSUB; i++)
                if (!strcmp(argv[2], subcommands[i].name)) {
                    char *sub_argv[] = {argv[2], "--help", NULL};
                    return subcommands[i].fn(2, sub_argv);
                }
            fprintf(stderr, "memsnap: unknown subcommand \"%s\"; try memsnap "
                            "--help\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return fflush(stdout) == 0 ? 0 : 2;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("memsnap %s (snapshot format %d.%d: reads %d.x, writes %d.%d)\n",
               MEMSNAP_VERSION, MSNAP_FORMAT_MAJOR, MSNAP_FORMAT_MINOR, MSNAP_FORMAT_MAJOR,
               MSNAP_FORMAT_MAJOR, MSNAP_FORMAT_MINOR);
        return fflush(stdout) == 0 ? 0 : 2;
    }
    for (size_t i = 0; i < NSUB; i++)
        if (!strcmp(cmd, subcommands[i].name)) {
            if (labels_sites(cmd, argc, argv) && viz_args_site_rules(cmd))
                return 2;
            /* memsnap run keeps its own signals (the program's); every
             * other command writes its files under temporary names */
            if (strcmp(cmd, "run"))
                clean_up_on_signals();
            int quiet = strip_quiet(&argc, argv, !strcmp(cmd, "run")) || global_quiet;
            progress_init(quiet);
            msnap_set_progress(progress_hook, NULL);
            int rc = subcommands[i].fn(argc - 1, argv + 1);
            progress_clear();
            return rc;
        }
    if (!strcmp(cmd, "-q") || !strcmp(cmd, "--quiet"))
        fprintf(stderr, "memsnap: %s goes with a subcommand (memsnap %s summary FILE); try "
                "memsnap --help\n", cmd, cmd);
    else if (cmd[0] == '-')
        fprintf(stderr, "memsnap: unknown option \"%s\"; try memsnap --help\n",
                cmd);
    else
        fprintf(stderr, "memsnap: unknown subcommand \"%s\"; try memsnap "
                        "--help\n", cmd);
    return 2;
}

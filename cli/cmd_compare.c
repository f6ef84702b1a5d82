/* memsnap compare: two or more snapshots side by side — before/after runs,
 * expandable segments vs fixed pools, one rank against another.
 *
 * This file parses the arguments and prints; the comparison (table, site
 * matching, the sites whose peak changed most) and the picture are the viz
 * library (viz/compare.h, docs/render.md).  Prints the table and the
 * changes, writes OUT (a PNG or an SVG: the same table above a timeline
 * panel per snapshot, all on one y scale) and prints its path last.
 *
 * Exit status: 0 ok, 2 usage error, unreadable input or an unwritable picture
 * (one line on stderr).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "viz/compare.h"
#include "analyze/model.h"
#include "options.h"
#include "viz/render.h"
#include "viz_args.h"

#define MAX_FILES 26

static const char usage_text[] =
    "usage: memsnap compare A B [C...] [-o OUT.png|OUT.svg] [--top N]\n"
    "                       [--changes N] [--x time|events|marks[:WORD]]\n"
    "                       [--from first|0] [--width W] [--height H]\n"
    "                       [--format png|svg] [-j N]\n"
    "\n"
    "Compares snapshots (plain or zstd; \"-\" = stdin, once):\n"
    "a table per snapshot (peak allocated, peak reserved, fragmentation\n"
    "1 - largest_free/total_free at the OOM or the peak, 1 - peak allocated /\n"
    "peak reserved, OOMs, events), the allocation sites whose peak changed\n"
    "most between A and each other snapshot (sites are matched by their\n"
    "frames, not by address), and a picture with the same table above one\n"
    "timeline per snapshot, all on one y scale, a site in one colour in\n"
    "every panel.\n"
    "\n"
    "  -o, --output OUT     the picture (default: compare.png, compare.svg\n"
    "                       with --format svg)\n"
    "  --top N              sites with their own colour per panel (default 8,\n"
    "                       at most 24)\n"
    "  --changes N          changed sites listed per snapshot (default 5, 0..20)\n"
    "  --x time|events|marks[:WORD]\n"
    "                       one x axis for every panel: time, event index, or\n"
    "                       the numbers in the program's marks (as for render);\n"
    "                       events and marks line up runs whose wall times\n"
    "                       differ.  Default as render's: the event index when\n"
    "                       any snapshot has most of its events in a small part\n"
    "                       of its time, else time\n"
    "  --from first|0       time axes start at the first event (default) or 0\n"
    "  --width W            picture width, 320..8192 (default 1600)\n"
    "  --height H           picture height (default: automatic)\n"
    "  --format png|svg     PNG (default) or SVG (vector: zooms, pastes; its\n"
    "                       parts are <g class=...> groups); with -o, OUT's\n"
    "                       extension (.png or .svg) says it\n"
    "  -j, --jobs N         files read at once (default: the number of cores);\n"
    "                       the table and the picture are the same for every N\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 ok, 2 bad usage, unreadable input or unwritable output.\n";

/* The table and the changes as text. */
static void print_table(const viz_cmp *cmp, char **paths)
{
    char l[16], a[32], b[32], t[32];
    int w = 8;
    for (int i = 0; i < cmp->n; i++)
        if ((int)strlen(paths[i]) > w)
            w = (int)strlen(paths[i]);
    printf("   %-*s  %-15s %-14s %-10s %-10s %-7s %s\n", w, "snapshot",
           "peak allocated", "peak reserved", "frag free", "frag peak",
           "events", "OOM");
    for (int i = 0; i < cmp->n; i++) {
        const viz_cmp_row *r = &cmp->rows[i];
        char ff[16], fp[16], ev[24];
        if (r->frag_known) {
            snprintf(ff, sizeof ff, "%.3f", r->frag_free);
            snprintf(fp, sizeof fp, "%.3f", r->frag_peak);
        } else {
            snprintf(ff, sizeof ff, "n/a");
            snprintf(fp, sizeof fp, "n/a");
        }
        snprintf(ev, sizeof ev, "%" PRIu64, r->events);
        printf("%s: %-*s  %-15s %-14s %-10s %-10s %-7s ",
               viz_cmp_letter(i, l, sizeof l), w, paths[i],
               r->blocks ? msnap_size_text(r->peak_stacked, a, sizeof a)
                         : "n/a (no blocks)",
               msnap_size_text(r->peak_reserved, b, sizeof b), ff, fp, ev);
        if (r->ooms)
            printf("%" PRIu64 " (first at %s, requested %s)\n", r->ooms,
                   msnap_time_text(r->oom_t, t, sizeof t),
                   msnap_size_text(r->oom_requested, a, sizeof a));
        else
            printf("none\n");
    }
    printf("(frag free = 1 - largest_free/total_free inside reserved at the OOM, "
           "else the peak; frag peak = 1 - peak allocated/peak reserved; n/a "
           "without allocator blocks)\n");
    for (int j = 1; j < cmp->n; j++) {
        char l0[16];
        int any = 0;
        for (size_t k = 0; k < cmp->nchanges; k++)
            any |= cmp->changes[k].other == j;
        printf("\nsites whose peak changed most, %s against %s:%s\n",
               viz_cmp_letter(j, l, sizeof l), viz_cmp_letter(0, l0, sizeof l0),
               any ? "" : " none");
        for (size_t k = 0; k < cmp->nchanges; k++) {
            const viz_cmp_change *c = &cmp->changes[k];
            if (c->other != j)
                continue;
            uint64_t d = c->after > c->before ? c->after - c->before
                                              : c->before - c->after;
            char dd[32];
            printf("  %s%-11s %11s -> %-11s %s\n", c->after > c->before ? "+" : "-",
                   msnap_size_text(d, dd, sizeof dd),
                   msnap_size_text(c->before, a, sizeof a),
                   msnap_size_text(c->after, b, sizeof b), c->label);
        }
    }
}

int cmd_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"top", required_argument, NULL, 't'},
        {"changes", required_argument, NULL, 'c'},
        {"x", required_argument, NULL, 'x'},
        {"from", required_argument, NULL, 'f'},
        {"width", required_argument, NULL, 'W'},
        {"height", required_argument, NULL, 'H'},
        {"format", required_argument, NULL, 'F'},
        {"jobs", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    viz_args a;
    viz_args_init(&a, "compare", usage_text);
    a.max_height = 16384;
    a.min_files = 2;
    a.max_files = MAX_FILES;
    const char *out = NULL;
    int changes = 5, c, rc;
    optind = 1;
    opterr = 0;
    a.shortopts = "ho:j:";
    a.longopts = opts;
    while ((c = getopt_long(argc, argv, "ho:j:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'c':
            if (viz_args_int(optarg, 0, 20, &changes))
                return viz_args_bad(&a, "--changes wants a count from 0 to 20, got", optarg);
            break;
        default:
            if ((rc = viz_args_option(&a, c, optarg, argv)) != VIZ_ARGS_MORE)
                return rc;
        }
    }
    char **paths;
    int n, width = a.width, height = a.height;
    if ((rc = viz_args_files(&a, argc, argv, &paths, &n)) != 0)
        return rc;
    /* the format: the output name's extension (which --format, when given,
     * must agree with), else --format, else PNG */
    if (out) {
        canvas_format ext;
        if (canvas_format_of(out, &ext))
            return cli_usage_error("compare", "-o wants a .png or .svg file, got \"%s\"", out);
        if (a.format_set && a.format != ext)
            return cli_usage_error("compare", "--format %s does not match -o \"%s\"",
                                   a.format == CANVAS_SVG ? "svg" : "png", out);
        a.format = ext;
    }
    if (!out)
        out = a.format == CANVAS_SVG ? "compare.svg" : "compare.png";
    sm_model *models[MAX_FILES] = {0};
    const char *names[MAX_FILES];
    char err[1024];
    rc = 0;
    for (int i = 0; i < n; i++)
        names[i] = sm_base_name(paths[i]);
    rc = viz_args_read(&a, paths, n, models);
    viz_cmp cmp = {0};
    if (!rc) {
        viz_match_colours(models, n);
        if (viz_cmp_build(models, n, changes, &cmp)) {
            fprintf(stderr, "memsnap compare: out of memory\n");
            rc = 2;
        }
    }
    canvas cv = {0};
    if (!rc && viz_compare(models, names, n, &cmp, &cv, width, height, NULL, 0,
                           NULL)) {
        fprintf(stderr, "memsnap compare: out of memory\n");
        rc = 2;
    }
    if (!rc && canvas_write(&cv, out, a.format, err, sizeof err)) {
        fprintf(stderr, "memsnap compare: %s\n", err);
        rc = 2;
    }
    if (!rc) {
        print_table(&cmp, paths);
        printf("\n%s\n", out);
    }
    canvas_free(&cv);
    viz_cmp_free(&cmp);
    for (int i = 0; i < n; i++)
        sm_free(models[i]);
    if (!rc && fflush(stdout) != 0)
        rc = 2;
    return rc;
}

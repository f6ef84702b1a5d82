/* memsnap render: the timeline and segment-map pictures (PNG, or SVG with
 * --format svg) of a snapshot, or of several (one per rank).
 *
 * This file parses the arguments; the model (analyze/model.h: one read of
 * the file, its change log replayed for the columns) and the painters
 * (viz/render.h, viz/compare.h, docs/render.md) do the work.  One file: PREFIX-timeline.png and
 * PREFIX-segments.png.  Several files: one PREFIX-timeline.png with a panel
 * per file on one y scale, and a FILEPREFIX-segments.png per file.  Prints
 * the paths written.
 *
 * Exit status: 0 ok, 2 usage error, unreadable input or a picture that could
 * not be written (one line on stderr).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/category.h"
#include "cli.h"
#include "viz/compare.h"
#include "analyze/model.h"
#include "options.h"
#include "viz/render.h"
#include "viz_args.h"
#include "util/size.h"

#define MAX_FILES 64

static const char usage_text[] =
    "usage: memsnap render SNAP [SNAP...] [-o PREFIX] [--at oom|peak|end|TIME]\n"
    "                      [--top N] [--x time|events|marks[:WORD]]\n"
    "                      [--from first|0]\n"
    "                      [--width W] [--height H] [--cap SIZE]\n"
    "                      [--all-segments] [--format png|svg]\n"
    "                      [--by site|category|pool] [--category-rules FILE] [-j N]\n"
    "\n"
    "Draws two PNGs (or SVGs) from a snapshot (plain or zstd; \"-\" = stdin):\n"
    "  PREFIX-timeline.png  allocated bytes over time stacked by allocation site\n"
    "                       (or by category: --by), reserved, capacity, cap,\n"
    "                       OOMs, NVTX ranges; a panel per device\n"
    "  PREFIX-segments.png  every segment as a row by address at one moment:\n"
    "                       blocks by site, free and unmapped space, the largest\n"
    "                       free block and the fragmentation numbers\n"
    "Several SNAPs (one per rank, e.g. snap-rank0.msnap snap-rank1.msnap): one\n"
    "PREFIX-timeline.png with a panel per file, titled with the file name, all\n"
    "on one y scale, and a segment map per file (FILEPREFIX-segments.png).\n"
    "\n"
    "  -o, --output PREFIX  output prefix (default: SNAP without .msnap/.zst;\n"
    "                       several files: the part their names share)\n"
    "  --at WHEN            moment of the segment map: oom, peak (of reserved),\n"
    "                       end, or a time since the start (12.5s, 800ms, 3min,\n"
    "                       1h; a bare number is seconds).  Default: the first\n"
    "                       OOM if any, else the peak, else the end\n"
    "  --top N              sites with their own colour per device (default 8,\n"
    "                       at most 24; the rest is \"other\")\n"
    "  --by site|category|pool\n"
    "                       what the timeline's bands are: the top sites\n"
    "                       (default), or the memory categories (parameters,\n"
    "                       gradients, optimizer_state, activations,\n"
    "                       temporaries, inputs, kv_cache, workspaces,\n"
    "                       communication, all_gather, reduce_scatter,\n"
    "                       graph_pool, the rules' own, other), each in a\n"
    "                       fixed colour, with the figures and the layer of\n"
    "                       memsnap summary's category table: allocator blocks\n"
    "                       plus other libraries' driver memory (cuBLAS\n"
    "                       workspaces, NCCL buffers), or driver allocations\n"
    "                       where no blocks are seen; or PyTorch's pools, as\n"
    "                       MemoryViz's \"Allocated Memory (incl. Private\n"
    "                       Pools)\": the default pool's blocks, then each CUDA\n"
    "                       graph's or MemPool's blocks and its cache.  The\n"
    "                       segment map stays by site\n"
    "  --category-rules FILE  with --by category: category rules tried before\n"
    "                       the defaults (default: $MEMSNAP_CATEGORY_RULES;\n"
    "                       format in docs/cli.md)\n"
    "  --x time|events|marks[:WORD]\n"
    "                       x axis: real time, event index, or the numbers in\n"
    "                       the marks the program wrote (NVTX marks,\n"
    "                       memsnap_annotate): the number after WORD (\"hour\"\n"
    "                       in \"... simulated hour 5.80 ...\"), else after the\n"
    "                       first word followed by one; in between, in\n"
    "                       proportion to events.  Default: the event index\n"
    "                       when 80% of the events fall in 20% of the time (a\n"
    "                       training run's slow first step), else time; the\n"
    "                       axis title says which and why.  Marks are ticks on\n"
    "                       every axis\n"
    "  --from first|0       where the time axis starts: at the first event or\n"
    "                       counters sample (default; the recorder starts with\n"
    "                       the process, often seconds earlier) or at 0\n"
    "  --width W            picture width in pixels (default 1600; text is\n"
    "                       drawn at 2x from 1000 pixels, 1x below)\n"
    "  --height H           timeline height (default: automatic); the segment\n"
    "                       map takes what its rows need\n"
    "  --cap SIZE           draw a configured cap (bytes, or 40G, 512M, 1.5T)\n"
    "  --all-segments       segment map: a row for every segment (a taller\n"
    "                       picture; by default three or more segments of one\n"
    "                       size, each full of one site's blocks, fold into\n"
    "                       one row \"37 x 32 MiB segments, full: SITE\")\n"
    "  --format png|svg     PNG (default) or SVG: PREFIX-timeline.svg and\n"
    "                       PREFIX-segments.svg, vector pictures to zoom and\n"
    "                       paste, their parts <g class=...> groups (title,\n"
    "                       legend, band, oom, ...)\n"
    "  -j, --jobs N         several SNAPs: files read at once (default: the\n"
    "                       number of cores); the pictures are the same for\n"
    "                       every N\n"
    "  -h, --help           this help\n"
    "\n"
    "Exit status: 0 ok, 2 bad usage, unreadable input or unwritable output.\n";

/* PREFIX from SNAP: SNAP without a trailing .zst and .msnap; "memsnap"
 * for stdin. */
static void default_prefix(const char *snap, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", strcmp(snap, "-") ? snap : "memsnap");
    size_t n = strlen(buf);
    if (n > 4 && !strcmp(buf + n - 4, ".zst"))
        buf[n -= 4] = '\0';
    if (n > 6 && !strcmp(buf + n - 6, ".msnap"))
        buf[n - 6] = '\0';
}

/* PREFIX for several files: the longest common start of their default
 * prefixes, without a trailing "rank" and separators (snap-rank0.msnap,
 * snap-rank1.msnap -> "snap"); "memsnap" when they share nothing. */
static void common_prefix(char **paths, int n, char *buf, size_t cap)
{
    char first[4096], other[4096];
    default_prefix(paths[0], first, sizeof first);
    size_t len = strlen(first);
    for (int i = 1; i < n; i++) {
        default_prefix(paths[i], other, sizeof other);
        size_t k = 0;
        while (k < len && first[k] == other[k])
            k++;
        len = k;
    }
    first[len] = '\0';
    for (;;) {
        size_t l = strlen(first);
        if (l && strchr("-_.", first[l - 1]))
            first[l - 1] = '\0';
        else if (l >= 4 && !strcmp(first + l - 4, "rank"))
            first[l - 4] = '\0';
        else
            break;
    }
    size_t l = strlen(first);
    if (!l || first[l - 1] == '/')
        snprintf(buf, cap, "%.4000smemsnap", first);
    else
        snprintf(buf, cap, "%.4000s", first);
}

/* Several files: one timeline with a panel per file on one y scale, a
 * segment map per file.  Returns the exit status. */
static int render_several(char **paths, int n, const viz_args *a,
                          const char *prefix, int width, int height)
{
    sm_model *models[MAX_FILES] = {0};
    const char *names[MAX_FILES];
    char err[1024], pfx[4096], out[4200];
    const char *ext = canvas_format_ext(a->format);
    for (int i = 0; i < n; i++)
        names[i] = sm_base_name(paths[i]);
    int rc = viz_args_read(a, paths, n, models);
    if (!rc) {
        viz_match_colours(models, n);
        if (prefix)
            snprintf(pfx, sizeof pfx, "%s", prefix);
        else
            common_prefix(paths, n, pfx, sizeof pfx);
        snprintf(out, sizeof out, "%s-timeline.%s", pfx, ext);
        canvas cv;
        if (viz_multi(models, names, n, &cv, width, height, NULL, 0, NULL)) {
            fprintf(stderr, "memsnap render: out of memory\n");
            rc = 2;
        } else {
            if (canvas_write(&cv, out, a->format, err, sizeof err)) {
                fprintf(stderr, "memsnap render: %s\n", err);
                rc = 2;
            } else {
                printf("%s\n", out);
            }
            canvas_free(&cv);
        }
    }
    for (int i = 0; i < n && !rc; i++) {
        char fp[4096], title[512];
        default_prefix(paths[i], fp, sizeof fp);
        if (prefix)   /* -o PREFIX: PREFIX-FILE-segments.png */
            snprintf(out, sizeof out, "%s-%s-segments.%s", prefix, sm_base_name(fp), ext);
        else
            snprintf(out, sizeof out, "%s-segments.%s", fp, ext);
        snprintf(title, sizeof title, "Memory segments of %s", names[i]);
        canvas cv;
        if (viz_segmap(models[i], &cv, width, 0, title, NULL)) {
            fprintf(stderr, "memsnap render: out of memory\n");
            rc = 2;
            break;
        }
        if (canvas_write(&cv, out, a->format, err, sizeof err)) {
            fprintf(stderr, "memsnap render: %s\n", err);
            rc = 2;
        } else {
            printf("%s\n", out);
        }
        canvas_free(&cv);
    }
    for (int i = 0; i < n; i++)
        sm_free(models[i]);
    if (!rc && fflush(stdout) != 0)
        rc = 2;
    return rc;
}

/* One file: PREFIX-timeline and PREFIX-segments.  Returns the exit
 * status. */
static int render_one(const char *path, const viz_args *a, const char *prefix)
{
    int rc;
    char *paths[1] = {(char *)path};
    char pfx[4096], tl[4200], sg[4200], err[1024];
    if (prefix)
        snprintf(pfx, sizeof pfx, "%s", prefix);
    else
        default_prefix(path, pfx, sizeof pfx);
    const char *ext = canvas_format_ext(a->format);
    snprintf(tl, sizeof tl, "%s-timeline.%s", pfx, ext);
    snprintf(sg, sizeof sg, "%s-segments.%s", pfx, ext);

    sm_model *m = NULL;
    if (viz_args_read(a, paths, 1, &m)) {
        sm_free(m);
        return 2;
    }
    canvas cv;
    if (viz_timeline(m, &cv, a->width, a->height,
                     a->o.by == SM_BY_CATEGORY ? "GPU memory by category over time"
                     : a->o.by == SM_BY_POOL   ? "GPU memory by pool over time"
                                               : "GPU memory over time",
                     NULL, 0, NULL)) {
        fprintf(stderr, "memsnap render: out of memory\n");
        sm_free(m);
        return 2;
    }
    rc = canvas_write(&cv, tl, a->format, err, sizeof err);
    canvas_free(&cv);
    if (rc == 0) {
        if (viz_segmap(m, &cv, a->width, 0, "Memory segments", NULL)) {
            fprintf(stderr, "memsnap render: out of memory\n");
            sm_free(m);
            return 2;
        }
        rc = canvas_write(&cv, sg, a->format, err, sizeof err);
        canvas_free(&cv);
    }
    sm_free(m);
    if (rc) {
        fprintf(stderr, "memsnap render: %s\n", err);
        return 2;
    }
    printf("%s\n%s\n", tl, sg);
    return fflush(stdout) == 0 ? 0 : 2;
}

int cmd_render(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"at", required_argument, NULL, 'a'},
        {"top", required_argument, NULL, 't'},
        {"x", required_argument, NULL, 'x'},
        {"from", required_argument, NULL, 'f'},
        {"width", required_argument, NULL, 'W'},
        {"height", required_argument, NULL, 'H'},
        {"cap", required_argument, NULL, 'c'},
        {"all-segments", no_argument, NULL, 'A'},
        {"format", required_argument, NULL, 'F'},
        {"by", required_argument, NULL, 'b'},
        {"category-rules", required_argument, NULL, 'r'},
        {"jobs", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    viz_args a;
    viz_args_init(&a, "render", usage_text);
    a.max_files = MAX_FILES;
    sm_opts *o = &a.o;
    const char *prefix = NULL;
    const char *rules_path = getenv("MEMSNAP_CATEGORY_RULES");
    int c, rc, rules_given = 0;
    optind = 1;
    opterr = 0;
    a.shortopts = "ho:j:";
    a.longopts = opts;
    while ((c = getopt_long(argc, argv, "ho:j:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': prefix = optarg; break;
        case 'a':
            if (sm_parse_at(optarg, &o->at, &o->at_t_ns))
                return viz_args_bad(&a, "--at wants oom, peak, end or a time like 12.5s, got", optarg);
            break;
        case 'A': o->all_segments = 1; break;
        case 'b':
            if (!strcmp(optarg, "site")) o->by = SM_BY_SITE;
            else if (!strcmp(optarg, "category")) o->by = SM_BY_CATEGORY;
            else if (!strcmp(optarg, "pool")) o->by = SM_BY_POOL;
            else return viz_args_bad(&a, "--by wants site, category or pool, got", optarg);
            break;
        case 'r': rules_path = optarg; rules_given = 1; break;
        case 'c':
            if (msnap_size_parse(optarg, &o->cap))
                return viz_args_bad(&a, "--cap wants a size like 40G or 512M, got", optarg);
            break;
        default:
            if ((rc = viz_args_option(&a, c, optarg, argv)) != VIZ_ARGS_MORE)
                return rc;
        }
    }
    if (rules_given && o->by != SM_BY_CATEGORY)
        return cli_usage_error("render", "--category-rules goes with --by category (the bands "
                               "are sites otherwise)");
    char **paths;
    int nfiles;
    if ((rc = viz_args_files(&a, argc, argv, &paths, &nfiles)) != 0)
        return rc;
    cat_rules *rules = NULL;
    if (o->by == SM_BY_CATEGORY) {
        char err[1024];
        if (!(rules = cat_rules_new())) {
            fprintf(stderr, "memsnap render: out of memory\n");
            return 2;
        }
        if (rules_path && *rules_path &&
            cat_rules_load(rules, rules_path, err, sizeof err) != 0) {
            fprintf(stderr, "memsnap render: %s\n", err);
            cat_rules_free(rules);
            return 2;
        }
        o->rules = rules;
    }
    rc = nfiles > 1 ? render_several(paths, nfiles, &a, prefix, a.width, a.height)
                    : render_one(paths[0], &a, prefix);
    cat_rules_free(rules);
    return rc;
}

/* memsnap flame: what holds the memory at the moment that matters, as one
 * picture: a flame graph of the live bytes by stack at the peak, at the
 * OOM or at a time, optionally against another moment of the same run or
 * the same moment of another run (--vs: red grew, blue shrank).
 *
 * This file parses the arguments and prints; the tree is analyze/flame.c
 * (the model's capture moment, the same the segment map shows), the
 * picture viz/flame.c.
 *
 * Exit status: 0 ok, 2 usage error, unreadable input or an unwritable picture.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze/analysis.h"
#include "viz/canvas.h"
#include "cli.h"
#include "analyze/flame.h"
#include "util/human.h"
#include "analyze/model.h"
#include "options.h"
#include "viz/render.h"
#include "analyze/siterules.h"
#include "format/state.h"

static const char usage_text[] =
    "usage: memsnap flame SNAP [-o FILE.svg|FILE.png] [--at peak|oom|end|TIME]\n"
    "                     [--layer allocated|reserved] [--device N]\n"
    "                     [--vs TIME|FILE] [--width W] [--pool POOL] [--all-frames]\n"
    "\n"
    "Draws the live bytes at one moment by stack (a flame graph, root at the\n"
    "bottom, each frame as wide as the bytes live under it; Python and native\n"
    "frames merged, the memory runtime's own frames left out): what holds the\n"
    "memory at the peak or at the OOM, without a browser.  In the SVG every box\n"
    "has a hover title with its full name and bytes.  A stack of more than 200\n"
    "frames keeps its outer and inner 100 and one box for the frames between.\n"
    "\n"
    "  -o, --output FILE  the picture: FILE.png or FILE.svg (default:\n"
    "                     SNAP-flame.svg)\n"
    "  --at MOMENT        peak (of the layer drawn; the default without an\n"
    "                     OOM), oom (the first; the default with one), end, or\n"
    "                     a time (12.5s, 800ms, 3min, ...: the last event at or\n"
    "                     before it; nothing before the first event)\n"
    "  --layer LAYER      allocated (allocator blocks: the default when the file\n"
    "                     has them) or reserved (driver memory)\n"
    "  --device N         one device (default: all)\n"
    "  --vs TIME|FILE     colour what grew (red) and shrank (blue) against\n"
    "                     another time of SNAP, or the same moment of another\n"
    "                     snapshot; widths stay SNAP's (the subtitle says how\n"
    "                     much of the other moment is in frames not drawn)\n"
    "  --width W          picture width in pixels (default 1600)\n"
    "  --all-frames       keep the framework's pass-through frames\n"
    "                     (Module._call_impl, _wrapped_call_impl, decorators'\n"
    "                     wrappers), which are folded by default (the\n"
    "                     subtitle says how many)\n"
    "  --pool POOL        only the blocks of PyTorch's pools: default, graph (every\n"
    "                     CUDA graph's pool), mempool (torch.cuda.MemPool), private\n"
    "                     (every pool but the default), or one pool by its id (as\n"
    "                     summary --json \"pool\") or MempoolId_t (\"0,1\"); what a\n"
    "                     graph's pool holds at the moment\n"
    "  -h, --help         this help\n"
    "\n"
    "Prints the picture's path.  Exit status: 0 ok, 2 bad usage, unreadable\n"
    "input or unwritable output.\n";

/* A model of path read once with the capture moment at/at_t.  NULL after a
 * message. */
static sm_model *read_model(const char *path, int at, uint64_t at_t, int palloc)
{
    sm_opts o = {.top = 8, .columns = 0, .at = at, .at_t_ns = at_t, .peak_allocated = palloc};
    sm_model *m = sm_new(&o);
    char err[1280];
    if (!m) {
        fprintf(stderr, "memsnap flame: out of memory\n");
        return NULL;
    }
    if (sm_read_file(m, path, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        sm_free(m);
        return NULL;
    }
    return m;
}

/* Whether m's moment is a time before its first event (or m has no
 * event): nothing is recorded live then. */
static int before_first_event(const sm_model *m, int at, uint64_t at_t)
{
    return at == SM_AT_TIME && (!sm_events(m) || at_t < sm_first_event_t(m));
}

/* " (the first event is at t = X)", or " (the file has no events)". */
static const char *first_event_note(const sm_model *m, char *buf, size_t cap)
{
    char tt[32];
    if (!sm_events(m))
        snprintf(buf, cap, " (the file has no events)");
    else
        snprintf(buf, cap, " (the first event is at t = %s)",
                 msnap_time_text(sm_first_event_t(m), tt, sizeof tt));
    return buf;
}

static const char *moment_name(int at, int layer)
{
    switch (at) {
    case SM_AT_OOM: return "the first OOM";
    case SM_AT_PEAK:
        return layer == MSNAP_LAYER_ALLOCATED ? "the peak of allocated" : "the peak of reserved";
    case SM_AT_TIME: return "the chosen time";
    default: return "the end";
    }
}

int cmd_flame(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"at", required_argument, NULL, 'a'},
        {"layer", required_argument, NULL, 'l'},  {"device", required_argument, NULL, 'd'},
        {"vs", required_argument, NULL, 'v'},     {"width", required_argument, NULL, 'W'},
        {"all-frames", no_argument, NULL, 'A'},
        {"pool", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    fl_pool pool;
    int pool_given = 0;
    const char *out = NULL, *vs = NULL, *layer_s = NULL;
    int at = SM_AT_DEFAULT, dev = -1, width = 1600, all_frames = 0, c;
    uint64_t at_t = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        char *end;
        long v;
        switch (c) {
        case 'o': out = optarg; break;
        case 'a':
            if (sm_parse_at(optarg, &at, &at_t))
                return cli_usage_error("flame", "--at wants peak, oom, end or a time, got \"%s\"",
                                       optarg);
            break;
        case 'l':
            if (strcmp(optarg, "allocated") && strcmp(optarg, "reserved"))
                return cli_usage_error("flame", "--layer wants allocated or reserved, got \"%s\"",
                                       optarg);
            layer_s = optarg;
            break;
        case 'd':
            v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v >= MSNAP_MAX_DEVICES)
                return cli_usage_error("flame", "--device wants a device number, got \"%s\"",
                                       optarg);
            dev = (int)v;
            break;
        case 'v': vs = optarg; break;
        case 'A': all_frames = 1; break;
        case 'W':
            v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 300 || v > 20000)
                return cli_usage_error("flame", "--width wants pixels from 300 to 20000, got \"%s\"",
                                       optarg);
            width = (int)v;
            break;
        case 'P':
            if (fl_pool_parse(optarg, &pool))
                return cli_usage_error("flame", "--pool wants default, graph, mempool, private, "
                                       "a pool id or a MempoolId_t like 0,1, got \"%s\"", optarg);
            pool_given = 1;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return cli_option_error("flame", argv, "ho:", opts);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("flame", "expected one snapshot file, got %d", argc - optind);
    const char *path = argv[optind];
    char def_out[4096];
    if (!out) {
        snprintf(def_out, sizeof def_out, "%s", strcmp(path, "-") ? path : "memsnap");
        size_t n = strlen(def_out);
        if (n > 4 && !strcmp(def_out + n - 4, ".zst"))
            def_out[n -= 4] = '\0';
        if (n > 6 && !strcmp(def_out + n - 6, ".msnap"))
            def_out[n - 6] = '\0';
        strncat(def_out, "-flame.svg", sizeof def_out - strlen(def_out) - 1);
        out = def_out;
    }
    canvas_format fmt;
    if (canvas_format_of(out, &fmt))
        return cli_usage_error("flame", "-o wants a .png or .svg file, got \"%s\"", out);
    /* --vs: a time of SNAP or another file */
    int vs_at = 0;
    uint64_t vs_t = 0;
    int vs_time = vs && !sm_parse_at(vs, &vs_at, &vs_t) && vs_at == SM_AT_TIME;
    if (vs && !strcmp(vs, "-") && !strcmp(path, "-"))
        return cli_usage_error("flame", "reads stdin once: give \"-\" at most once");
    char err[1280];
    if (sr_load_env(err, sizeof err)) {
        fprintf(stderr, "memsnap flame: %s\n", err);
        return 2;
    }
    sm_demangle_allow_loading(1);

    int rc = 2;
    /* the peak is the drawn layer's: allocated unless --layer reserved */
    int palloc = !layer_s || !strcmp(layer_s, "allocated");
    sm_model *m = NULL, *mv = NULL;
    an_file f;
    an_init(&f, path);
    fl_tree t = {0};
    canvas cv = {0};
    if (vs_time) {
        /* two moments of one read */
        sm_opts o = {.top = 8, .at = at, .at_t_ns = at_t, .peak_allocated = palloc},
                ov = {.top = 8, .at = SM_AT_TIME, .at_t_ns = vs_t};
        if (!(m = sm_new(&o)) || !(mv = sm_new(&ov)) || sm_attach(m, &f) || sm_attach(mv, &f)) {
            fprintf(stderr, "memsnap flame: out of memory\n");
            goto out;
        }
        if (an_read(&f, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            goto out;
        }
    } else {
        if (!(m = read_model(path, at, at_t, palloc)))
            goto out;
        if (vs && !(mv = read_model(vs, at, at_t, palloc)))
            goto out;
    }
    if (sm_truncated_after(m))
        fprintf(stderr, "memsnap flame: %s is cut off after line %" PRIu64 " (the process "
                "probably died): drawn up to there\n", path, sm_truncated_after(m));
    /* a moment or a device the file does not have: say so, draw nothing */
    if (at == SM_AT_OOM && sm_layout_at(m)->at != SM_AT_OOM) {
        fprintf(stderr, "memsnap flame: --at oom: %s has no OOM; try --at peak or --at end\n",
                path);
        goto out;
    }
    if (dev >= 0 && (dev >= SM_NDEV - 1 || !sm_device(m, dev)->seen)) {
        char have[256] = "";
        for (int d = 0; d < SM_NDEV - 1; d++)
            if (sm_device(m, d)->seen)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%d",
                         have[0] ? ", " : "", d);
        fprintf(stderr, "memsnap flame: --device %d: %s has no device %d (%s%s)\n", dev, path,
                dev, have[0] ? "it has " : "no device is seen", have);
        goto out;
    }
    int layer = layer_s ? (!strcmp(layer_s, "allocated") ? MSNAP_LAYER_ALLOCATED
                                                         : MSNAP_LAYER_RESERVED)
                        : (sm_blocks_seen(m) ? MSNAP_LAYER_ALLOCATED : MSNAP_LAYER_RESERVED);
    if (layer == MSNAP_LAYER_ALLOCATED && !sm_blocks_seen(m)) {
        fprintf(stderr, "memsnap flame: %s has no allocator blocks: try --layer reserved\n", path);
        goto out;
    }
    uint64_t t_ns = 0, t_vs = 0;
    unsigned fl = all_frames ? 0 : FL_FOLD_PASSES;
    const fl_pool *pp = pool_given ? &pool : NULL;
    if (fl_init(&t) || fl_add_model_pool(&t, m, layer, dev, 0, fl, pp, &t_ns) ||
        (mv && fl_add_model_pool(&t, mv, layer, dev, 1, fl, pp, &t_vs))) {
        fprintf(stderr, "memsnap flame: out of memory\n");
        goto out;
    }
    fl_finish(&t);
    char title[1024], sub[1024], total[32], tt[32], note[96];
    const char *lname = layer == MSNAP_LAYER_ALLOCATED ? "allocated" : "reserved";
    const sm_layout *l = sm_layout_at(m);
    if (before_first_event(m, at, at_t))
        /* the moment is t = 0 then: say what was asked, and why it is empty */
        snprintf(title, sizeof title, "%s bytes live at t = %s: none recorded yet%s", lname,
                 msnap_time_text(at_t, tt, sizeof tt), first_event_note(m, note, sizeof note));
    else
        snprintf(title, sizeof title, "%s bytes live at %s (t = %s): %s", lname,
                 moment_name(l->at, layer), msnap_time_text(t_ns, tt, sizeof tt),
                 msnap_size_text(t.n[0].bytes, total, sizeof total));
    if (dev >= 0) {
        size_t n = strlen(title);
        snprintf(title + n, sizeof title - n, " on device %d", dev);
    }
    if (mv) {
        char other[32], d[32], when[160], undrawn[160] = "";
        uint64_t a = t.n[0].bytes, b = t.n[0].vs;
        int vs_empty = vs_time ? before_first_event(mv, SM_AT_TIME, vs_t)
                               : before_first_event(mv, at, at_t);
        if (vs_time)
            snprintf(when, sizeof when, "t = %s",
                     msnap_time_text(vs_empty ? vs_t : t_vs, tt, sizeof tt));
        else
            snprintf(when, sizeof when, "%s", vs);
        /* The widths are SNAP's: what the other moment has in frames that
         * hold nothing here has no box.  Say how much that is. */
        size_t nf;
        uint64_t u = fl_vs_undrawn(&t, &nf);
        char ub[32];
        if (u && !a)
            snprintf(undrawn, sizeof undrawn, ", none of it drawn (nothing live here)");
        else if (u)
            snprintf(undrawn, sizeof undrawn, ", %s of it in %zu frame%s not live here (not drawn)",
                     msnap_size_text(u, ub, sizeof ub), nf, nf == 1 ? "" : "s");
        if (vs_empty)
            snprintf(sub, sizeof sub, "against %s: none recorded yet%s; red grew (+%s)", when,
                     first_event_note(mv, note, sizeof note), msnap_size_text(a, d, sizeof d));
        else
            snprintf(sub, sizeof sub, "against %s: %s there%s; red grew, blue shrank (%s%s)",
                     when, msnap_size_text(b, other, sizeof other), undrawn, a >= b ? "+" : "-",
                     msnap_size_text(a >= b ? a - b : b - a, d, sizeof d));
    } else {
        snprintf(sub, sizeof sub, "%s; each frame as wide as the bytes live under it", path);
    }
    /* what was folded, said after the rest */
    size_t sn = strlen(sub);
    if (t.passes_folded)
        snprintf(sub + sn, sizeof sub - sn, "; %" PRIu64 " pass-through frame%s folded "
                 "(Module._call_impl, wrappers: --all-frames keeps them)", t.passes_folded,
                 t.passes_folded == 1 ? "" : "s");
    sn = strlen(sub);
    if (t.deep_stacks)
        snprintf(sub + sn, sizeof sub - sn, "; %" PRIu64 " stack%s of up to %d frames drawn "
                 "with the middle folded into one box", t.deep_stacks,
                 t.deep_stacks == 1 ? "" : "s", t.deepest);
    int vrc = viz_flame(&t, &cv, width, title, sub);
    if (vrc) {
        if (vrc == VIZ_TOO_LARGE)
            fprintf(stderr, "memsnap flame: the picture would be larger than 16384 pixels (a "
                    "tree %d frames deep, %d wide); try --width\n", t.maxdepth, width);
        else
            fprintf(stderr, "memsnap flame: out of memory\n");
        goto out;
    }
    if (canvas_write(&cv, out, fmt, err, sizeof err)) {
        fprintf(stderr, "memsnap flame: %s\n", err);
        goto out;
    }
    printf("%s\n", out);
    rc = fflush(stdout) ? 2 : 0;
out:
    canvas_free(&cv);
    fl_free(&t);
    sm_free(m);
    sm_free(mv);
    an_free(&f);
    return rc;
}

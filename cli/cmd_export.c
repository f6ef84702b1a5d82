/* memsnap export: a snapshot for the viewers and tools people already use.
 *
 *   --format torch       PyTorch's memory snapshot as a pickle, the file
 *                        torch.cuda.memory._dump_snapshot() writes (open it
 *                        at pytorch.org/memory_viz)
 *   --format torch-json  the same dict as JSON, with the "memsnap" extension
 *                        (exact round trip through `memsnap import`)
 *   --format perfetto    a Chrome/Perfetto trace (ui.perfetto.dev)
 *   --format sqlite      tables for SQL over many rank files (sqlite_export.c)
 *
 * The work is in interop/ (torch_export.c, perfetto.c, sqlite_export.c);
 * docs/interop.md has the mappings.  This file parses flags and reports.
 * Exit status: 0 ok, 2 bad usage, input or output.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/human.h"
#include "interop/interop.h"
#include "options.h"
#include "util/outfile.h"

static const char usage_text[] =
    "usage: memsnap export SNAP --format torch|torch-json|perfetto [-o OUT]\n"
    "                      [--from T] [--to T] [--max-entries N]\n"
    "       memsnap export --format sqlite -o OUT.db SNAP...\n"
    "\n"
    "Converts a snapshot (plain or zstd; \"-\" = stdin) in one streaming pass.\n"
    "\n"
    "  -f, --format torch      PyTorch memory snapshot pickle (protocol 4, plain data,\n"
    "                          frames shared): segments with blocks, device_traces,\n"
    "                          allocator_settings.  Open it at\n"
    "                          https://pytorch.org/memory_viz, or pickle.load it.\n"
    "  -f, --format torch-json the same as JSON, plus a \"memsnap\" key so that\n"
    "                          `memsnap import` gives the exact events back\n"
    "      --json              with --format torch: the same as torch-json\n"
    "  -f, --format perfetto   Chrome/Perfetto trace JSON: allocated and reserved\n"
    "                          counters per device, OOM instants, NVTX slices;\n"
    "                          open it at https://ui.perfetto.dev\n"
    "  -f, --format sqlite     an SQLite database (-o needed) of one or more\n"
    "                          snapshots, e.g. the rank files of a job: events,\n"
    "                          stacks, frames, sites, segments, counters, each row\n"
    "                          with its file and rank (docs/interop.md has queries)\n"
    "      --from T, --to T    torch: only events from/to T (inclusive); T is a\n"
    "                          time since the recording started (\"2.5s\", \"300ms\",\n"
    "                          \"40us\", \"1500ns\", \"2m\"; a bare number is seconds)\n"
    "                          or an event index (\"#120000\", from 0).  Segments\n"
    "                          are the state at the end of the window.\n"
    "      --max-entries N     torch: keep the newest N trace entries (default\n"
    "                          1500000 for the pickle, 500000 for JSON: what\n"
    "                          memory_viz holds; 0 = all); a note on stderr says\n"
    "                          when it cut\n"
    "  -o, --output OUT        write to OUT (default: stdout)\n"
    "  -q, --quiet             no progress line (also: memsnap --quiet ...)\n"
    "  -h, --help              this help\n"
    "\n"
    "time_us in the torch formats is Unix-epoch microseconds (the header's\n"
    "t0_unix_ns + t), as PyTorch writes it.  Exit status: 0 ok, 2 bad usage,\n"
    "unreadable input or unwritable output.\n";

/* export --format sqlite: the snapshots into the database outp.  Returns
 * the exit status. */
static int export_sqlite(int n, char **paths, const char *outp)
{
    char err[1280];
    if (!outp || !strcmp(outp, "-")) {
        return cli_usage_error("export", "--format sqlite needs -o FILE.db");
    }
    if (n < 1) {
        return cli_usage_error("export", "expected one or more snapshots");
    }
    if (msnap_export_sqlite(paths, n, outp, err, sizeof err)) {
        fprintf(stderr, "memsnap export: %s\n", err);
        return 2;
    }
    fprintf(stderr, "memsnap export: %d snapshot%s -> %s (SQLite)\n", n, n == 1 ? "" : "s", outp);
    return 0;
}

/* Parses T of --from/--to: "#N" (an event index) or a number with an
 * optional unit (msnap_time_parse: ns, us, ms, s, m/min, h; bare = seconds).
 * 0 ok, -1 bad. */
static int parse_point(const char *s, uint64_t *v, int *is_index)
{
    char *end;
    errno = 0;
    if (s[0] == '#') {
        if (s[1] < '0' || s[1] > '9')
            return -1;
        unsigned long long n = strtoull(s + 1, &end, 10);
        if (errno || *end)
            return -1;
        *v = n;
        *is_index = 1;
        return 0;
    }
    if (msnap_time_parse(s, v))
        return -1;
    *is_index = 0;
    return 0;
}

int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'J'},
        {"from", required_argument, NULL, 'F'},
        {"to", required_argument, NULL, 'T'},
        {"max-entries", required_argument, NULL, 'M'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *format = NULL, *outp = NULL;
    msnap_export_opts eo = {0};
    int json = 0, max_set = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 'o': outp = optarg; break;
        case 'J': json = 1; break;
        case 'q': break; /* memsnap.c turned progress off already */
        case 'F':
        case 'T': {
            uint64_t v;
            int ix;
            if (parse_point(optarg, &v, &ix))
                return cli_usage_error("export", "--%s wants a time (2.5s, 300ms, 40us, 1500ns, "
                                       "2m) or an event index (#120000), got \"%s\"",
                                       c == 'F' ? "from" : "to", optarg);
            if (c == 'F') { eo.from_set = 1; eo.from = v; eo.from_is_index = ix; }
            else { eo.to_set = 1; eo.to = v; eo.to_is_index = ix; }
            break;
        }
        case 'M': {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || n > (1ull << 32)) {
                fprintf(stderr, "memsnap export: --max-entries wants a count from 0 to 4294967296, "
                                "got \"%s\"\n", optarg);
                return 2;
            }
            eo.max_entries = n;
            max_set = 1;
            break;
        }
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return cli_option_error("export", argv, "f:o:qh", opts);
        }
    }
    if (!format || !*format)
        return cli_usage_error("export", "--format is needed: torch, torch-json, perfetto or sqlite");
    if (strcmp(format, "torch") && strcmp(format, "torch-json") && strcmp(format, "perfetto") &&
        strcmp(format, "sqlite")) {
        return cli_usage_error("export", "unknown format %s; choose torch, torch-json, perfetto "
                               "or sqlite", format);
    }
    int torch = !strcmp(format, "torch") || !strcmp(format, "torch-json");
    if (!strcmp(format, "torch-json"))
        json = 1;
    if (!torch && (json || eo.from_set || eo.to_set || max_set))
        return cli_usage_error("export", "--json, --from, --to and --max-entries go with --format "
                                         "torch");
    if (!strcmp(format, "sqlite"))
        return export_sqlite(argc - optind, argv + optind, outp);
    if (optind != argc - 1)
        return cli_usage_error("export", "expected one snapshot");
    if (eo.from_set && eo.to_set && eo.from_is_index == eo.to_is_index && eo.from > eo.to)
        return cli_usage_error("export", "--from is after --to");
    eo.json = json;
    if (!max_set)
        eo.max_entries = json ? MSNAP_EXPORT_MAX_ENTRIES_JSON : MSNAP_EXPORT_MAX_ENTRIES_PICKLE;
    const char *in = argv[optind];
    FILE *out = stdout;
    char tmp[PATH_MAX + 32] = "";
    if (outp && strcmp(outp, "-")) {
        /* a new file renamed over OUT at the end (util/outfile.h) */
        int fd = outfile_create(outp, OUTFILE_REPLACE_LINK, tmp, sizeof tmp);
        if (fd < 0 || !(out = fdopen(fd, "w"))) {
            fprintf(stderr, "memsnap export: %s: %s\n", outp, strerror(errno));
            if (fd >= 0)
                close(fd);
            outfile_discard(tmp);
            return 2;
        }
    }
    char err[512];
    msnap_interop_stats st;
    msnap_export_report rep;
    int rc = torch ? msnap_export_torch(in, out, &eo, &st, &rep, err, sizeof err)
                   : msnap_export_perfetto(in, out, &st, err, sizeof err);
    if (out != stdout && fclose(out) && !rc) {
        snprintf(err, sizeof err, "cannot write the output: %s", strerror(errno));
        rc = -1;
    }
    if (out != stdout && !rc && outfile_commit(tmp, outp) != 0) {
        snprintf(err, sizeof err, "cannot write the output: %s", strerror(errno));
        rc = -1;
    }
    if (out != stdout && rc)
        outfile_discard(tmp);
    if (rc) {
        fprintf(stderr, "%s: %s\n", in, err);
        return 2;
    }
    if (!torch && !strcmp(format, "perfetto")) {
        fprintf(stderr, "memsnap export: %" PRIu64 " events -> %" PRIu64 " trace events (%" PRIu64
                        " device%s), Perfetto JSON; %s\n", st.events_in, st.events_out,
                st.devices, st.devices == 1 ? "" : "s",
                st.wall_clock ? "times are Unix-epoch microseconds, as PyTorch's profiler "
                                "writes them: open both traces in ui.perfetto.dev to line them up"
                              : "the snapshot has no wall-clock start (t0_unix_ns): times count "
                                "from the recording's start");
        return 0;
    }
    if (!torch)
        return 0;
    fprintf(stderr, "memsnap export: %" PRIu64 " events -> %" PRIu64 " trace entries (%" PRIu64
                    " device%s), %" PRIu64 " segments, %" PRIu64 " blocks, %s%s\n",
            st.events_in, rep.entries_written, st.devices, st.devices == 1 ? "" : "s", st.segments,
            st.blocks, json ? "JSON" : "pickle",
            st.synthesized_blocks ? " (no allocator blocks: one block per segment)" : "");
    if (st.other_lib_allocs)
        fprintf(stderr, "memsnap export: %" PRIu64 " driver allocation%s of other libraries "
                        "(cuBLAS, cuDNN, NCCL: %s live at the end) left out of PyTorch's "
                        "segments and trace: not the allocator's cache%s\n",
                st.other_lib_allocs, st.other_lib_allocs == 1 ? "" : "s",
                msnap_size_text(st.other_lib_bytes, (char[32]){0}, 32),
                json ? " (the JSON's memsnap extension keeps them)" : "");
    if (rep.cut)
        fprintf(stderr, "memsnap export: kept the newest %" PRIu64 " of %" PRIu64 " trace entries "
                        "(from event #%" PRIu64 ", t=%.6f s) so that memory_viz can hold them; "
                        "--max-entries 0 keeps all, --from/--to pick a window\n",
                rep.entries_written, rep.entries_window, rep.cut_index, rep.cut_t_ns / 1e9);
    if (rep.no_wall_clock)
        fprintf(stderr, "memsnap export: the snapshot has no wall-clock start (t0_unix_ns); "
                        "time_us counts from the recording start\n");
    if (!rep.entries_written && (eo.from_set || eo.to_set) && st.events_in)
        fprintf(stderr, "memsnap export: warning: no event of the %" PRIu64 " falls in the "
                        "window of --from/--to: the file holds the state at the window's start "
                        "only\n", st.events_in);
    return 0;
}

/* memsnap export: a snapshot for the viewers people already use.
 *
 *   --format torch     PyTorch's memory snapshot dict as JSON (load it at
 *                      pytorch.org/memory_viz)
 *   --format perfetto  a Chrome/Perfetto trace (ui.perfetto.dev)
 *
 * The work is in interop/ (torch_export.c, perfetto.c); docs/interop.md has
 * the mappings.  Exit status: 0 ok, 2 bad usage, input or output.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "interop.h"
#include "outfile.h"

static const char usage_text[] =
    "usage: memsnap export SNAP --format torch|perfetto [-o OUT]\n"
    "\n"
    "Converts a snapshot (plain or zstd; \"-\" = stdin) in one streaming pass.\n"
    "\n"
    "  -f, --format torch     PyTorch memory snapshot JSON: segments with blocks,\n"
    "                         device_traces (alloc, free_requested, free_completed,\n"
    "                         segment_alloc/free/map/unmap, oom); open it at\n"
    "                         https://pytorch.org/memory_viz.  Carries a \"memsnap\"\n"
    "                         key so that `memsnap import` gives the events back.\n"
    "  -f, --format perfetto  Chrome/Perfetto trace JSON: allocated and reserved\n"
    "                         counters per device, OOM instants, NVTX slices;\n"
    "                         open it at https://ui.perfetto.dev\n"
    "  -o, --output OUT       write to OUT (default: stdout)\n"
    "  -h, --help             this help\n"
    "\n"
    "Per-rank files (one per process) export one by one.  Exit status: 0 ok,\n"
    "2 bad usage, unreadable input or unwritable output.\n";

int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *format = NULL, *outp = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 'o': outp = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            fprintf(stderr, "memsnap export: bad option \"%s\"; try memsnap --help\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsnap export: expected one snapshot; try memsnap --help\n");
        return 2;
    }
    if (!format || (strcmp(format, "torch") && strcmp(format, "perfetto"))) {
        fprintf(stderr, "memsnap export: --format torch or --format perfetto is needed; try memsnap --help\n");
        return 2;
    }
    const char *in = argv[optind];
    FILE *out = stdout;
    char tmp[PATH_MAX + 32] = "";
    if (outp && strcmp(outp, "-")) {
        /* a new file renamed over OUT at the end (outfile.h) */
        int fd = cli_out_create(outp, tmp, sizeof tmp);
        if (fd < 0 || !(out = fdopen(fd, "w"))) {
            fprintf(stderr, "memsnap export: %s: %s\n", outp, strerror(errno));
            if (fd >= 0)
                close(fd);
            cli_out_discard(tmp);
            return 2;
        }
    }
    char err[512];
    msnap_interop_stats st;
    int rc = !strcmp(format, "torch") ? msnap_export_torch(in, out, &st, err, sizeof err)
                                       : msnap_export_perfetto(in, out, &st, err, sizeof err);
    if (out != stdout && fclose(out) && !rc) {
        snprintf(err, sizeof err, "cannot write the output: %s", strerror(errno));
        rc = -1;
    }
    if (out != stdout && !rc && cli_out_commit(tmp, outp) != 0) {
        snprintf(err, sizeof err, "cannot write the output: %s", strerror(errno));
        rc = -1;
    }
    if (out != stdout && rc)
        cli_out_discard(tmp);
    if (rc) {
        fprintf(stderr, "%s: %s\n", in, err);
        return 2;
    }
    if (!strcmp(format, "torch"))
        fprintf(stderr, "memsnap export: %llu events -> %llu trace entries, %llu segments, %llu "
                        "blocks%s\n", (unsigned long long)st.events_in,
                (unsigned long long)st.events_out, (unsigned long long)st.segments,
                (unsigned long long)st.blocks,
                st.synthesized_blocks ? " (no allocator blocks: one block per segment)" : "");
    return 0;
}

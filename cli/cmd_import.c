/* memsnap import: a PyTorch memory snapshot as a memsnap snapshot, so that
 * summary, render, compare and replay work on it.  Reads the dict from
 * torch.cuda.memory._snapshot() saved as JSON, and the pickle
 * torch.cuda.memory._dump_snapshot() writes (protocols 2-5; only plain data
 * is read, nothing is ever executed: a pickle that asks to import or call
 * anything is refused).  The work is in interop/ (torch_import.c,
 * pickle.c, jsonpull.c).  Exit status: 0 ok, 2 bad usage or input.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "memsnap/format.h"
#include "interop/interop.h"
#include "options.h"
#include "util/outfile.h"

static const char usage_text[] =
    "usage: memsnap import TORCH_SNAPSHOT -o OUT.msnap [--json|--pickle] [--zstd]\n"
    "\n"
    "Reads a PyTorch memory snapshot: the pickle that\n"
    "torch.cuda.memory._dump_snapshot() writes, or torch.cuda.memory._snapshot()\n"
    "saved with json.dump (detected by the first byte; \"-\" = stdin).  Pickles\n"
    "are parsed as plain data and never executed: GLOBAL, REDUCE, BUILD and the\n"
    "other opcodes that import or call code are refused.\n"
    "\n"
    "  -o, --output OUT   the memsnap snapshot to write (\"-\" = stdout)\n"
    "      --json         the input is JSON\n"
    "      --pickle       the input is a pickle\n"
    "      --zstd         compress the output (zstd level 3)\n"
    "  -h, --help         this help\n"
    "\n"
    "Events: alloc -> block_alloc, free_completed -> block_free, segment_alloc/\n"
    "free -> alloc/free, segment_map/unmap -> vmm_*, oom -> oom; frames become\n"
    "stacks with sym records; \"segments\" becomes the final state.  See\n"
    "docs/interop.md.  Exit status: 0 ok, 2 bad usage or input.\n"
    "\n"
    "The import's work is bounded by the input's size: one that would take more\n"
    "than 32 steps of work a byte (no PyTorch snapshot comes near) is refused.\n"
    "MEMSNAP_IMPORT_STATS=1 prints the steps it took.\n";

/* Whether path (a file, not stdin: it would be read twice) is a memsnap
 * snapshot: its first record a memsnap header.  Nothing is said when it
 * is not (the import says what is wrong with it). */
static int is_memsnap_snapshot(const char *path)
{
    if (!strcmp(path, "-"))
        return 0;
    char err[256];
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    if (!r)
        return 0;
    msnap_record rec;
    int yes = msnap_reader_next(r, &rec) == 1 && rec.type == MSNAP_REC_HEADER;
    msnap_reader_close(r);
    return yes;
}

int cmd_import(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'J'},
        {"pickle", no_argument, NULL, 'P'},
        {"zstd", no_argument, NULL, 'z'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *outp = NULL;
    msnap_import_kind kind = MSNAP_IMPORT_AUTO;
    int zstd = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': outp = optarg; break;
        case 'J': kind = MSNAP_IMPORT_JSON; break;
        case 'P': kind = MSNAP_IMPORT_PICKLE; break;
        case 'z': zstd = 3; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return cli_option_error("import", argv, "o:h", opts);
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("import", "expected one PyTorch snapshot");
    if (!outp)
        return cli_usage_error("import", "-o OUT is needed");
    const char *in = argv[optind];
    if (is_memsnap_snapshot(in)) {
        fprintf(stderr, "memsnap import: %s is a memsnap snapshot already; import reads "
                "PyTorch's (torch.cuda.memory._snapshot(), pickle or JSON): memsnap summary, "
                "render and the rest read it as it is\n", in);
        return 2;
    }
    /* a new file renamed into place (util/outfile.h): a failed import leaves
     * nothing, and the file gets 0666 less the umask like any other */
    char tmp[PATH_MAX + 32] = "";
    int fd = !strcmp(outp, "-") ? dup(1)
                                : outfile_create(outp, OUTFILE_REPLACE_LINK, tmp, sizeof tmp);
    if (fd < 0) {
        fprintf(stderr, "memsnap import: %s: %s\n", outp, strerror(errno));
        return 2;
    }
    const char *base = strrchr(in, '/');
    char err[512];
    msnap_interop_stats st;
    int rc = msnap_import_torch(in, kind, fd, zstd, base ? base + 1 : in, &st, err, sizeof err);
    const char *ws = getenv("MEMSNAP_IMPORT_STATS");
    if (ws && *ws && strcmp(ws, "0")) /* the work budget (docs/interop.md, Limits) */
        fprintf(stderr, "memsnap import: work: %llu steps for %llu bytes (%.2f a byte; budget %u a "
                        "byte)\n", (unsigned long long)st.work_steps,
                (unsigned long long)st.bytes_read,
                st.bytes_read ? (double)st.work_steps / (double)st.bytes_read : 0.0,
                MSNAP_IMPORT_STEPS_PER_BYTE);
    if (rc) {
        outfile_discard(tmp);
        fprintf(stderr, "%s: %s\n", in, err);
        return 2;
    }
    if (outfile_commit(tmp, outp)) {
        fprintf(stderr, "memsnap import: %s: %s\n", outp, strerror(errno));
        return 2;
    }
    char start[64] = "";
    if (st.start_objects) /* docs/interop.md: the state at the trace's start */
        snprintf(start, sizeof start, " + %llu live at its start",
                 (unsigned long long)st.start_objects);
    fprintf(stderr, "memsnap import: %llu trace entries -> %llu events%s, %llu segments, %llu "
                    "blocks, %llu stacks, %llu device%s -> %s\n",
            (unsigned long long)st.events_in, (unsigned long long)st.events_out, start,
            (unsigned long long)st.segments, (unsigned long long)st.blocks,
            (unsigned long long)st.stacks, (unsigned long long)st.devices,
            st.devices == 1 ? "" : "s", outp);
    return 0;
}

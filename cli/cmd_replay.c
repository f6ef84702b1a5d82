/* memsnap replay: would another allocator config have avoided this OOM?
 * Feeds a snapshot's allocation sequence through libmemsnap_alloc on the
 * simulated device, once per --alloc-conf, writes PREFIX-N.msnap per config
 * and prints a table.  The work is in interop/replay.c (semantics and
 * determinism are documented there and in docs/interop.md).
 * Exit status: 0 ok (OOMs in a replay are results), 2 bad usage or input.
 */
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "interop.h"
#include "parts.h"

#define MAX_CONFS 16

static const char usage_text[] =
    "usage: memsnap replay SNAP --alloc-conf CONF [--alloc-conf CONF2 ...]\n"
    "                      [--device-mem 80G] [-o PREFIX]\n"
    "\n"
    "Replays the snapshot's allocation sequence - allocator blocks (block_alloc/\n"
    "block_free) when it has them, else the driver allocations (alloc/free,\n"
    "async_alloc/async_free) - in order and per stream through the memsnap\n"
    "caching allocator configured by CONF, on the simulated device (no GPU).\n"
    "CONF uses MEMSNAP_ALLOC_CONF syntax, e.g. \"expandable_segments:true\",\n"
    "\"max_split_size_mb:128\", \"\" for the defaults.\n"
    "\n"
    "  -c, --alloc-conf CONF  a config to try (up to 16; at least one)\n"
    "  -m, --device-mem SIZE  simulated device memory, e.g. 80G (default 80G)\n"
    "  -o, --output PREFIX    write PREFIX-1.msnap, PREFIX-2.msnap, ... (one per\n"
    "                         config): the replayed blocks and driver calls\n"
    "  -h, --help             this help\n"
    "\n"
    "Prints per config: peak allocated, peak reserved, fragmentation (free:\n"
    "1 - largest free block / cached bytes at the peak of reserved; peak:\n"
    "1 - peak allocated / peak reserved), the first OOM (time, request) or\n"
    "none, and driver calls.  Same input and config give the same output,\n"
    "byte for byte.  Exit status: 0 ok, 2 bad usage or input.\n";

static void human(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.2f MiB", (double)b / (double)(1ull << 20));
    else if (b >= 1024)
        snprintf(buf, n, "%.2f KiB", (double)b / 1024.0);
    else
        snprintf(buf, n, "%" PRIu64 " B", b);
}

int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"alloc-conf", required_argument, NULL, 'c'},
        {"device-mem", required_argument, NULL, 'm'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *confs[MAX_CONFS], *prefix = NULL;
    int nconf = 0, c;
    uint64_t mem = 80ull << 30;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:m:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (nconf == MAX_CONFS) {
                fprintf(stderr, "memsnap replay: at most %d --alloc-conf; try memsnap --help\n", MAX_CONFS);
                return 2;
            }
            confs[nconf++] = optarg;
            break;
        case 'm':
            if (msnap_parse_size(optarg, &mem) || mem < (2u << 20)) {
                fprintf(stderr, "memsnap replay: --device-mem \"%s\" is not a size such as 80G "
                                "(at least 2M); try memsnap --help\n", optarg);
                return 2;
            }
            break;
        case 'o': prefix = optarg; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            fprintf(stderr, "memsnap replay: bad option \"%s\"; try memsnap --help\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "memsnap replay: expected one snapshot; try memsnap --help\n");
        return 2;
    }
    if (!nconf) {
        fprintf(stderr, "memsnap replay: at least one --alloc-conf is needed; try memsnap --help\n");
        return 2;
    }
    /* replay.c dlopens the simulated device and the allocator from these
     * variables: point them at this memsnap's own parts (parts.h). */
    char part[PATH_MAX + 64];
    if (!getenv("MEMSNAP_SIMDEV_LIB") &&
        memsnap_part_find(MEMSNAP_PART_SIMDEV_DIR, part, sizeof part - 16) == 0) {
        strcat(part, "/libcuda.so.1");
        setenv("MEMSNAP_SIMDEV_LIB", part, 1);
    }
    if (memsnap_part_find(MEMSNAP_PART_ALLOC, part, sizeof part) == 0)
        setenv("MEMSNAP_ALLOC_LIB", part, 1);
    const char *in = argv[optind];
    msnap_replay_result res[MAX_CONFS];
    for (int i = 0; i < nconf; i++) {
        char out[4096], err[512];
        if (prefix)
            snprintf(out, sizeof out, "%s-%d.msnap", prefix, i + 1);
        if (msnap_replay(in, confs[i], mem, prefix ? out : NULL, &res[i], err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", in, err);
            return 2;
        }
    }
    char m[32];
    human(mem, m, sizeof m);
    printf("replay of %s on a simulated device of %s (%s level: %" PRIu64 " requests, %" PRIu64
           " frees)\n\n", in, m, res[0].level, res[0].requests, res[0].frees);
    printf("%-3s %-32s %12s %12s %9s %9s %-30s %8s\n", "#", "config", "peak alloc", "peak reserv",
           "frag free", "frag peak", "OOM", "driver");
    for (int i = 0; i < nconf; i++) {
        char pa[32], pr[32], oom[64], rq[32];
        human(res[i].peak_allocated, pa, sizeof pa);
        human(res[i].peak_reserved, pr, sizeof pr);
        if (res[i].oom) {
            human(res[i].oom_size, rq, sizeof rq);
            snprintf(oom, sizeof oom, "%.3f s, %s (x%" PRIu64 ")", (double)res[i].oom_t_ns / 1e9, rq,
                     res[i].ooms);
        } else {
            snprintf(oom, sizeof oom, "none");
        }
        printf("%-3d %-32s %12s %12s %9.4f %9.4f %-30s %8" PRIu64 "\n", i + 1,
               confs[i][0] ? confs[i] : "(defaults)", pa, pr, res[i].frag_free_at_peak,
               res[i].frag_peak, oom, res[i].driver_calls);
    }
    uint64_t skipped = res[0].skipped_frees;
    if (skipped)
        printf("\n%" PRIu64 " frees of addresses the replay never allocated were skipped "
               "(allocated before the recording started, or their request failed)\n", skipped);
    if (prefix)
        printf("\nwrote %s-1.msnap .. %s-%d.msnap\n", prefix, prefix, nconf);
    return fflush(stdout) ? 2 : 0;
}

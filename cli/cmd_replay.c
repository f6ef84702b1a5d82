/* memsnap replay: would another allocator config have avoided this OOM?
 * Feeds each snapshot's allocation sequence (its failed requests included)
 * through each config, one child process per config, as many at once as
 * there are cores; prints a table per snapshot and, when the snapshot has
 * failed requests, what each config did at the first one.  --suggest tries
 * a built-in grid of configs instead and prints them best first.  The work
 * is in whatif/replay.c (semantics and determinism are documented there
 * and in docs/interop.md).
 * Exit status: 0 ok (OOMs in a replay are results), 2 bad usage or input.
 */
#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "device_mem_text.h"
#include "util/human.h"
#include "options.h"
#include "whatif/whatif.h"
#include "whatif/requests.h"
#include "parts.h"
#include "whatif/torchalloc.h"
#include "progress_term.h"
#include "util/size.h"
#include "whatif/grow.h"
#include "grow_print.h"
#include <cjson/cJSON.h>

#define MAX_CONFS 16
#define MAX_SNAPS 64

static const char usage_text[] =
    "usage: memsnap replay SNAP... --alloc-conf CONF [--alloc-conf CONF2 ...]\n"
    "       memsnap replay SNAP... --suggest [--alloc-conf BASE]\n"
    "       memsnap replay SNAP --grow SITE[=SIZE] [--grow SITE2[=SIZE2] ...]\n"
    "                      [--find-max] [--alloc-conf CONF ...] [--json]\n"
    "                      [--device-mem SIZE] [--engine auto|memsnap|torch]\n"
    "                      [-o PREFIX] [-j JOBS] [-q] [-b]\n"
    "\n"
    "Replays each snapshot's allocation sequence - allocator blocks (block_alloc/\n"
    "block_free) when it has them, else the driver allocations (alloc/free,\n"
    "async_alloc/async_free) - in order and per stream, with the requests that\n"
    "failed (its oom events) where they failed, through an allocator configured\n"
    "by CONF.  Two engines: traces of PyTorch (memsnap import, or api torch\n"
    "blocks) go through an emulation of PyTorch's caching allocator and CONF is a\n"
    "PYTORCH_CUDA_ALLOC_CONF (\"expandable_segments:True\", \"max_split_size_mb:128\",\n"
    "\"roundup_power2_divisions:4\", \"garbage_collection_threshold:0.6\", plus\n"
    "\"memory_fraction:0.5\" for set_per_process_memory_fraction); other traces go\n"
    "through the memsnap allocator on the simulated device and CONF uses\n"
    "MEMSNAP_ALLOC_CONF syntax (\"expandable_segments:true\").  \"\" = defaults.\n"
    "\n"
    "  -c, --alloc-conf CONF  a config to try (up to 16); with --suggest, a base\n"
    "                         added to every config of the grid\n"
    "  -s, --suggest          try a built-in grid of configs (expandable segments,\n"
    "                         max_split_size_mb, roundup_power2_divisions, garbage\n"
    "                         collection) and print them best first: those that\n"
    "                         avoid the OOM in every snapshot, then the lowest peak\n"
    "                         reserved, with the string to paste\n"
    "  -m, --device-mem SIZE  the allocator's device memory, e.g. 80G (default:\n"
    "                         the recording's device, else 80G, less what the\n"
    "                         recording measured outside the allocator: the\n"
    "                         CUDA context from its device-used samples and\n"
    "                         other libraries' driver memory, as summary's\n"
    "                         driver table has them); memory_fraction:F in a\n"
    "                         PyTorch CONF is a fraction of the device\n"
    "  -g, --grow SITE[=SIZE] replay with the requests made at SITE (its label as\n"
    "                         summary lists it, its function, or FILE:LINE of its\n"
    "                         innermost user frame) at SIZE instead (scaled: its\n"
    "                         largest request becomes SIZE); up to 8 sites, one\n"
    "                         snapshot; the configs default to PyTorch's defaults\n"
    "  -F, --find-max         with --grow: the largest size of the sites (several:\n"
    "                         the largest common scale of their sizes) that still\n"
    "                         runs to the end under each config, and what fails\n"
    "                         just past it; exit 1 when nothing fits\n"
    "      --json             with --grow: a JSON list, one object per config and\n"
    "                         site (config, site, max_bytes, fails_at_bytes,\n"
    "                         first_failure, ...)\n"
    "  -e, --engine NAME      auto (default), memsnap or torch\n"
    "  -o, --output PREFIX    write PREFIX-1.msnap, PREFIX-2.msnap, ... (one per\n"
    "                         config; one snapshot only): the replayed blocks and\n"
    "                         driver calls, zstd-compressed like `memsnap run`'s\n"
    "  -j, --jobs N           replays at once (default: the number of cores)\n"
    "  -q, --quiet            no progress line on stderr\n"
    "  -b, --bytes            sizes as exact byte counts\n"
    "  -h, --help             this help\n"
    "\n"
    "Prints per config: peak allocated, peak reserved, fragmentation (free:\n"
    "1 - largest free block / cached bytes at the peak of reserved; peak:\n"
    "1 - peak allocated / peak reserved), the first OOM of the replay (time,\n"
    "request) or none, and driver calls.  When the snapshot has failed\n"
    "requests: for the first, whether each config served it, and its headroom\n"
    "there (the largest request it could still serve: the larger of its\n"
    "largest cached block and the device memory it has not reserved),\n"
    "reserved and fragmentation.  Same input and config give the same output,\n"
    "byte for byte.  Exit status: 0 ok, 2 bad usage or input.\n";

static int exact_bytes; /* --bytes: sizes as byte counts */

static void human(uint64_t b, char *buf, size_t n)
{
    msnap_size_or_bytes(b, exact_bytes, buf, n);
}

/* The built-in grid: what each engine's config syntax calls them. */
static const char *const grid_torch[] = {
    "",
    "expandable_segments:True",
    "expandable_segments:True,roundup_power2_divisions:4",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "max_split_size_mb:128,roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.8",
};
static const char *const grid_memsnap[] = {
    "",
    "expandable_segments:true",
    "expandable_segments:true,roundup_power2_divisions:4",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "max_split_size_mb:128,roundup_power2_divisions:4",
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.8",
};
#define GRID_N ((int)(sizeof grid_torch / sizeof *grid_torch))

static void print_table(const char *in, const char *const *confs, int nconf,
                        const msnap_replay_result *res, const char *prefix)
{
    char m[32];
    human(res[0].device_mem, m, sizeof m);
    /* the recording's frees: each config replays some and skips the rest
     * (below), so the header counts both */
    char dm[640];
    cli_device_mem_text(&res[0], exact_bytes, dm, sizeof dm);
    printf("replay of %s on a simulated device of %s (from %s; %s level, %s engine: %" PRIu64
           " requests, %" PRIu64 " frees)\n%s\n\n", in, m, res[0].device_mem_from, res[0].level,
           res[0].engine, res[0].requests, res[0].frees + res[0].skipped_frees, dm);
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
    if (res[0].rec_ooms) {
        char rq[32];
        human(res[0].rec_oom_size, rq, sizeof rq);
        printf("\nthe recording's first failed request: %s on stream %" PRIu64 " at %.3f s "
               "(request %" PRIu64 " of %" PRIu64 "; %" PRIu64 " failed in all)\n",
               rq, res[0].rec_oom_stream, (double)res[0].rec_oom_t_ns / 1e9, res[0].rec_oom_index,
               res[0].requests, res[0].rec_ooms);
        printf("%-3s %-32s %-18s %12s %12s %12s %9s\n", "#", "config", "there", "headroom",
               "reserved", "peak reserv", "frag free");
        for (int i = 0; i < nconf; i++) {
            char hr[32], rs[32], pk[32];
            human(res[i].headroom, hr, sizeof hr);
            human(res[i].reserved_at, rs, sizeof rs);
            human(res[i].peak_reserved_at, pk, sizeof pk);
            printf("%-3d %-32s %-18s %12s %12s %12s %9.4f\n", i + 1,
                   confs[i][0] ? confs[i] : "(defaults)",
                   res[i].rec_oom_served ? "served: avoided" : "OOM again", hr, rs, pk,
                   res[i].frag_at);
        }
    }
    if (res[0].empty_cache_calls)
        printf("\n%" PRIu64 " empty_cache calls read from the trace (segments released, and no "
               "OOM retry after) were replayed\n", res[0].empty_cache_calls);
    /* Frees the replay skipped differ by config: a request that fails in
     * one config and not another leaves its free without a block. */
    int same = 1, any = 0;
    for (int i = 0; i < nconf; i++) {
        same &= res[i].skipped_frees == res[0].skipped_frees;
        any |= res[i].skipped_frees != 0;
    }
    if (any && same)
        printf("\n%" PRIu64 " %s the replay never allocated %s skipped%s (allocated before "
               "the recording started, or their request failed)\n", res[0].skipped_frees,
               res[0].skipped_frees == 1 ? "free of an address" : "frees of addresses",
               res[0].skipped_frees == 1 ? "was" : "were", nconf > 1 ? " in each config" : "");
    else if (any) {
        printf("\nfrees of addresses the replay never allocated were skipped (allocated before "
               "the recording started, or their request failed):");
        for (int i = 0; i < nconf; i++)
            printf("%s %" PRIu64 " in config %d", i ? "," : "", res[i].skipped_frees, i + 1);
        printf("\n");
    }
    if (prefix && nconf == 1)
        printf("\nwrote %s-1.msnap (the replay, zstd-compressed)\n", prefix);
    else if (prefix)
        printf("\nwrote %s-1.msnap to %s-%d.msnap (one replay per config, in the order above, "
               "zstd-compressed)\n", prefix, prefix, nconf);
}

/* --suggest: one line per grid config, best first. */
static void print_suggest(int nin, const char *const *confs, int nconf,
                          const msnap_replay_result *res, int torch)
{
    int order[GRID_N];
    int fails[GRID_N];
    uint64_t peak[GRID_N] = {0};   /* = {0}: GCC 10 (Debian 11) cannot tell nconf >= 1 */
    for (int c = 0; c < nconf; c++) {
        order[c] = c;
        fails[c] = 0;
        peak[c] = 0;
        for (int f = 0; f < nin; f++) {
            const msnap_replay_result *r = &res[f * nconf + c];
            fails[c] += r->oom != 0;
            if (r->peak_reserved > peak[c])
                peak[c] = r->peak_reserved;
        }
    }
    /* stable insertion sort: fewer snapshots with an OOM, then lower peak */
    for (int i = 1; i < nconf; i++)
        for (int j = i; j > 0; j--) {
            int a = order[j - 1], b = order[j];
            if (fails[b] < fails[a] || (fails[b] == fails[a] && peak[b] < peak[a])) {
                order[j - 1] = b;
                order[j] = a;
            } else {
                break;
            }
        }
    printf("suggested allocator configs for %d snapshot%s (%s engine), best first:\n\n", nin,
           nin == 1 ? "" : "s", res[0].engine);
    uint64_t base = peak[0];
    for (int i = 0; i < nconf; i++) {
        int c = order[i];
        char pk[32], shown[512];
        human(peak[c], pk, sizeof pk);
        if (torch) {
            ta_config tc;
            char e[256];
            ta_config_default(&tc);
            if (ta_config_parse(&tc, confs[c], e, sizeof e))
                snprintf(shown, sizeof shown, "%s", confs[c]);
            else
                ta_config_string(&tc, shown, sizeof shown);
        } else {
            snprintf(shown, sizeof shown, "%s", confs[c]);
        }
        char what[64];
        if (fails[c])
            snprintf(what, sizeof what, "OOM in %d of %d", fails[c], nin);
        else
            snprintf(what, sizeof what, "no OOM");
        printf("%2d. %-16s peak reserved %10s (%+6.1f%%)  %s=%s%s\n", i + 1, what, pk,
               base ? 100.0 * ((double)peak[c] - (double)base) / (double)base : 0.0,
               torch ? "PYTORCH_CUDA_ALLOC_CONF" : "MEMSNAP_ALLOC_CONF", shown,
               shown[0] ? "" : "(the defaults)");
    }
}

/* A config as key:value pairs, the last value of each key, keys and values
 * in lower case, keys sorted: two spellings of one config compare equal. */
static void conf_canon(const char *conf, char *out, size_t n)
{
    char keys[32][128], vals[32][128];
    int nk = 0;
    char buf[600];
    snprintf(buf, sizeof buf, "%s", conf);
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        char *c = strchr(t, ':');
        char k[128], v[128];
        snprintf(k, sizeof k, "%.*s", c ? (int)(c - t) : (int)strlen(t), t);
        snprintf(v, sizeof v, "%s", c ? c + 1 : "");
        for (char *p = k; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        for (char *p = v; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        int j = 0;
        while (j < nk && strcmp(keys[j], k))
            j++;
        if (j == nk) {
            if (nk == 32)
                continue;
            snprintf(keys[nk++], sizeof keys[0], "%s", k);
        }
        snprintf(vals[j], sizeof vals[0], "%s", v);
    }
    /* keys sorted (insertion sort, a handful) */
    for (int i = 1; i < nk; i++)
        for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            char tk[128], tv[128];
            memcpy(tk, keys[j], sizeof tk), memcpy(tv, vals[j], sizeof tv);
            memcpy(keys[j], keys[j - 1], sizeof tk), memcpy(vals[j], vals[j - 1], sizeof tv);
            memcpy(keys[j - 1], tk, sizeof tk), memcpy(vals[j - 1], tv, sizeof tv);
        }
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < nk && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, "%s%s:%s", i ? "," : "", keys[i], vals[i]);
}

/* replay.c dlopens the simulated device and the allocator from these
 * variables: point them at this memsnap's own parts (parts.h). */
static void set_part_paths(void)
{
    char part[PATH_MAX + 64];
    if (!getenv("MEMSNAP_SIMDEV_LIB") &&
        memsnap_part_find(MEMSNAP_PART_SIMDEV_DIR, part, sizeof part - 16) == 0) {
        strcat(part, "/libcuda.so.1");
        setenv("MEMSNAP_SIMDEV_LIB", part, 1);
    }
    if (!getenv("MEMSNAP_ALLOC_LIB") && memsnap_part_find(MEMSNAP_PART_ALLOC, part, sizeof part) == 0)
        setenv("MEMSNAP_ALLOC_LIB", part, 1);
}

/* Replays every stream through every config and prints the tables (or,
 * with --suggest, the ranking).  Returns the exit status. */
static int replay_all(rq_stream *qs, char **ins, int nin, const char **confs, int nconf,
                      int suggest, int torch, uint64_t mem, const char *prefix, int jobs,
                      int quiet)
{
    char err[1280];
    if (msnap_replay_available(err, sizeof err)) {
        fprintf(stderr, "memsnap replay: %s\n", err);
        return 2;
    }
    /* the configs: given, or the grid (each after the base) */
    static char gridbuf[GRID_N][600];
    const char *base = nconf ? confs[0] : "";
    if (suggest) {
        const char *const *grid = torch ? grid_torch : grid_memsnap;
        static char canon[GRID_N][600];
        nconf = 0;
        for (int i = 0; i < GRID_N; i++) {
            /* PyTorch collects garbage only under a memory fraction */
            if (torch && strstr(grid[i], "garbage_collection") && !strstr(base, "memory_fraction"))
                continue;
            snprintf(gridbuf[nconf], sizeof gridbuf[nconf], "%s%s%s", base,
                     base[0] && grid[i][0] ? "," : "", grid[i]);
            /* a grid entry the base already says is the same config: once */
            conf_canon(gridbuf[nconf], canon[nconf], sizeof canon[nconf]);
            int dup = 0;
            for (int j = 0; j < nconf && !dup; j++)
                dup = !strcmp(canon[j], canon[nconf]);
            if (dup)
                continue;
            confs[nconf] = gridbuf[nconf];
            nconf++;
        }
    }
    for (int i = 0; i < nconf; i++)
        if (msnap_replay_check_conf(confs[i], torch, err, sizeof err)) {
            fprintf(stderr, "memsnap replay: bad config \"%s\": %s\n", confs[i], err);
            return 2;
        }
    set_part_paths();
    int total = nin * nconf;
    msnap_replay_opts *o = calloc((size_t)total, sizeof *o);
    msnap_replay_result *res = calloc((size_t)total, sizeof *res);
    static char outs[MAX_CONFS][4096];
    if (!o || !res) {
        fprintf(stderr, "memsnap replay: out of memory\n");
        free(o);
        free(res);
        return 2;
    }
    int rc = 0;
    for (int f = 0; f < nin && !rc; f++) {
        for (int i = 0; i < nconf; i++) {
            msnap_replay_opts *x = &o[f * nconf + i];
            x->conf = confs[i];
            x->device_mem = mem;
            x->engine = torch ? MSNAP_ENGINE_TORCH : MSNAP_ENGINE_MEMSNAP;
            if (prefix) {
                snprintf(outs[i], sizeof outs[i], "%s-%d.msnap", prefix, i + 1);
                x->out_path = outs[i];
            }
        }
        if (msnap_replay_many(&qs[f], &o[f * nconf], nconf, jobs, !quiet && progress_enabled(),
                              &res[f * nconf], err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", ins[f], err);
            rc = 2;
            break;
        }
        if (!suggest) {
            if (f)
                printf("\n");
            print_table(ins[f], confs, nconf, &res[f * nconf], prefix);
        }
    }
    if (!rc && suggest)
        print_suggest(nin, confs, nconf, res, torch);
    free(o);
    free(res);
    if (rc)
        return rc;
    return fflush(stdout) ? 2 : 0;
}

/* --grow: one snapshot, its sites, each config (grow_print.h).  Returns
 * the exit status. */
static int replay_grow(const char *in, gr_sites *grow, const char **confs, int nconf, int engine,
                       uint64_t mem, int find_max, int json, int jobs, int quiet)
{
    char err[1280];
    if (msnap_replay_available(err, sizeof err)) {
        fprintf(stderr, "memsnap replay: %s\n", err);
        return 2;
    }
    rq_stream *q = calloc(1, sizeof *q);
    if (!q) {
        fprintf(stderr, "memsnap replay: out of memory\n");
        return 2;
    }
    int rc = 0;
    cJSON *out = NULL;
    if (rq_read(q, in, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        rc = 2;
        goto done;
    }
    int eng = engine == MSNAP_ENGINE_AUTO ? msnap_replay_engine_of(q) : engine;
    int torch = eng == MSNAP_ENGINE_TORCH;
    for (int i = 0; i < nconf; i++)
        if (msnap_replay_check_conf(confs[i], torch, err, sizeof err)) {
            fprintf(stderr, "memsnap replay: bad config \"%s\": %s\n", confs[i], err);
            rc = 2;
            goto done;
        }
    if (gr_match(grow, q, &q->f, torch, err, sizeof err)) {
        fprintf(stderr, "memsnap replay: %s: %s\n", in, err);
        rc = 2;
        goto done;
    }
    set_part_paths();
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "replay of %s", in);
    out = json ? cJSON_CreateArray() : NULL;
    grow_run g = {.cmd = "replay", .what = what, .q = q, .tab = &q->f, .sites = grow,
                  .confs = confs, .nconf = nconf, .device_mem = mem, .engine = eng,
                  .find_max = find_max,
                  .json = json, .jobs = jobs, .quiet = quiet, .bytes = exact_bytes, .out = out};
    rc = grow_run_all(&g);
    if (out && rc < 2) {
        char *t = cJSON_PrintUnformatted(out);
        if (!t) {
            fprintf(stderr, "memsnap replay: out of memory\n");
            rc = 2;
        } else {
            printf("%s\n", t);
            free(t);
        }
    }
    if (rc < 2 && fflush(stdout))
        rc = 2;
done:
    cJSON_Delete(out);
    gr_free(grow);
    rq_free(q);
    free(q);
    return rc;
}

int cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"alloc-conf", required_argument, NULL, 'c'},
        {"suggest", no_argument, NULL, 's'},
        {"device-mem", required_argument, NULL, 'm'},
        {"engine", required_argument, NULL, 'e'},
        {"output", required_argument, NULL, 'o'},
        {"jobs", required_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},
        {"bytes", no_argument, NULL, 'b'},
        {"grow", required_argument, NULL, 'g'},
        {"find-max", no_argument, NULL, 'F'},
        {"json", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *confs[MAX_CONFS], *prefix = NULL;
    int nconf = 0, c, suggest = 0, quiet = 0, engine = MSNAP_ENGINE_AUTO;
    int find_max = 0, json = 0;
    gr_sites grow;
    char gerr[512];
    memset(&grow, 0, sizeof grow);
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t mem = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:sm:e:o:j:qbg:Fh", opts, NULL)) != -1) {
        switch (c) {
        case 'g':
            if (gr_add(&grow, optarg, gerr, sizeof gerr))
                return cli_usage_error("replay", "%s", gerr);
            break;
        case 'F': find_max = 1; break;
        case 'J': json = 1; break;
        case 'c':
            if (nconf == MAX_CONFS)
                return cli_usage_error("replay", "at most %d --alloc-conf", MAX_CONFS);
            confs[nconf++] = optarg;
            break;
        case 's': suggest = 1; break;
        case 'm':
            if (msnap_size_parse(optarg, &mem) || mem < (2u << 20))
                return cli_usage_error("replay", "--device-mem \"%s\" is not a size such as 80G "
                                                 "(at least 2M)", optarg);
            break;
        case 'e':
            if (!strcmp(optarg, "auto"))
                engine = MSNAP_ENGINE_AUTO;
            else if (!strcmp(optarg, "memsnap"))
                engine = MSNAP_ENGINE_MEMSNAP;
            else if (!strcmp(optarg, "torch"))
                engine = MSNAP_ENGINE_TORCH;
            else {
                fprintf(stderr, "memsnap replay: --engine \"%s\": expected auto, memsnap or torch\n",
                        optarg);
                return 2;
            }
            break;
        case 'o': prefix = optarg; break;
        case 'j': {
            char *end;
            jobs = strtol(optarg, &end, 10);
            if (*end || end == optarg || jobs < 1 || jobs > 256) {
                fprintf(stderr, "memsnap replay: --jobs \"%s\" is not a number from 1 to 256\n", optarg);
                return 2;
            }
            break;
        }
        case 'q': quiet = 1; break;
        case 'b': exact_bytes = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return cli_option_error("replay", argv, "c:sm:e:o:j:qbg:Fh", opts);
        }
    }
    int nin = argc - optind;
    if (nin < 1)
        return cli_usage_error("replay", "expected a snapshot");
    if (grow.n || find_max || json) {
        if (!grow.n)
            return cli_usage_error("replay", "--find-max and --json go with --grow SITE");
        if (nin > 1 || suggest || prefix)
            return cli_usage_error("replay", "--grow takes one snapshot, no --suggest and no -o");
        if (!find_max)
            for (int i = 0; i < grow.n; i++)
                if (!grow.size[i])
                    return cli_usage_error("replay", "--grow %s: give its size (SITE=SIZE), or "
                                                     "--find-max to search it", grow.spec[i]);
        if (!nconf)
            confs[nconf++] = "";
        return replay_grow(argv[optind], &grow, confs, nconf, engine, mem, find_max, json,
                           (int)jobs, quiet);
    }
    if (nin > MAX_SNAPS) {
        fprintf(stderr, "memsnap replay: at most %d snapshots at once\n", MAX_SNAPS);
        return 2;
    }
    if (!suggest && !nconf)
        return cli_usage_error("replay", "at least one --alloc-conf (or --suggest) is needed");
    if (suggest && nconf > 1) {
        fprintf(stderr, "memsnap replay: --suggest takes at most one --alloc-conf (a base)\n");
        return 2;
    }
    if (prefix && (nin > 1 || suggest)) {
        fprintf(stderr, "memsnap replay: -o needs one snapshot and no --suggest\n");
        return 2;
    }
    if (jobs < 1)
        jobs = 1;
    char **ins = argv + optind;
    int torch = 0, nstdin = 0;
    char err[1280];
    for (int f = 0; f < nin; f++)
        if (!strcmp(ins[f], "-") && ++nstdin > 1) {
            fprintf(stderr, "memsnap replay: reads stdin once: give \"-\" at most once; "
                            "try memsnap replay --help\n");
            return 2;
        }
    /* each snapshot read once, into its request stream */
    rq_stream *qs = calloc((size_t)nin, sizeof *qs);
    if (!qs) {
        fprintf(stderr, "memsnap replay: out of memory\n");
        return 2;
    }
    int rc = 0;
    for (int f = 0; f < nin && !rc; f++) {
        if (rq_read(&qs[f], ins[f], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            rc = 2;
            break;
        }
        int eng = engine;
        if (eng == MSNAP_ENGINE_AUTO)
            eng = msnap_replay_engine_of(&qs[f]);
        if (f && (eng == MSNAP_ENGINE_TORCH) != torch) {
            fprintf(stderr, "memsnap replay: %s and %s need different engines; replay them apart "
                            "or give --engine\n", ins[0], ins[f]);
            rc = 2;
            break;
        }
        torch = eng == MSNAP_ENGINE_TORCH;
    }
    if (!rc)
        rc = replay_all(qs, ins, nin, confs, nconf, suggest, torch, mem, prefix, (int)jobs, quiet);
    for (int f = 0; f < nin; f++)
        rq_free(&qs[f]);
    free(qs);
    return rc;
}

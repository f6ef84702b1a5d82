/* Recorder settings: one table of MEMSNAP_* variables, read once in the
 * constructor (no CUDA call, no thread).
 *
 * A bad value turns recording off with one line on stderr that names the
 * variable, the value and what was expected; the program itself runs
 * unchanged.  `memsnap run` validates the same values before it starts the
 * program (it sets these variables), so users of the CLI see the error first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "recorder.h"
#include "util/size.h"

/* output set from the start: a hook that runs before config_load (another
 * preload's constructor) reads an empty pattern, as before it was a pointer */
static char cfg_output[REC_OUTPUT_MAX];
MSNAP_HOT_DATA rec_config g_cfg = {.output = cfg_output};

int config_for_run; /* recorder.h */

static int bad(const char *var, const char *val, const char *want)
{
    if (config_for_run)
        fprintf(stderr, "memsnap run: %s=\"%s\" is not valid (%s); nothing was run\n", var,
                val, want);
    else
        fprintf(stderr, "memsnap: %s=\"%s\" is not valid (%s); recording off\n", var, val,
                want);
    return -1;
}

/* Parses an unsigned integer, or when allow_suffix also a size with a
 * unit (util/size.h).  Returns 0 and *out, or -1. */
static int parse_u64(const char *s, uint64_t *out, int allow_suffix)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return -1;
    if (allow_suffix && *end)
        return msnap_size_parse(s, out);   /* util/size.h: 64K, 1M, 2GiB */
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static int parse_range(const char *var, uint64_t lo, uint64_t hi, uint64_t *out,
                       int allow_suffix)
{
    const char *s = getenv(var);
    if (!s)
        return 0;
    uint64_t v;
    if (parse_u64(s, &v, allow_suffix) != 0 || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected an integer from %llu to %llu",
                 (unsigned long long)lo, (unsigned long long)hi);
        return bad(var, s, want);
    }
    *out = v;
    return 0;
}

static int parse_signal(const char *s, int *out)
{
    if (strcasecmp(s, "none") == 0 || strcmp(s, "0") == 0) {
        *out = 0;
        return 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    static const struct { const char *name; int sig; } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
        {"PWR", SIGPWR},   {"URG", SIGURG},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].sig;
            return 0;
        }
    uint64_t v;
    /* not the ones that cannot be caught or that mean a fault, and not the
     * C library's own below SIGRTMIN (32, 33: glibc's threads) */
    if (parse_u64(s, &v, 0) == 0 && v > 0 && (v < 32 || ((int)v >= SIGRTMIN && (int)v <= SIGRTMAX)) &&
        v != SIGKILL && v != SIGSTOP && v != SIGSEGV && v != SIGBUS && v != SIGFPE &&
        v != SIGILL) {
        *out = (int)v;
        return 0;
    }
    return -1;
}

/* A CPU list as taskset and /sys write them ("0-3,8,10-11") into mask
 * (1024 bits).  0, or -1 for anything else (an empty list, a range going
 * down, a CPU past 1023). */
static int parse_cpu_list(const char *s, uint64_t mask[16])
{
    memset(mask, 0, 16 * sizeof mask[0]);
    for (;;) {
        char *e;
        if (*s < '0' || *s > '9')
            return -1;
        unsigned long lo = strtoul(s, &e, 10), hi = lo;
        if (*e == '-') {
            s = e + 1;
            if (*s < '0' || *s > '9')
                return -1;
            hi = strtoul(s, &e, 10);
        }
        if (lo > hi || hi > 1023)
            return -1;
        for (unsigned long c = lo; c <= hi; c++)
            mask[c / 64] |= 1ull << (c % 64);
        if (*e == 0)
            return 0;
        if (*e != ',')
            return -1;
        s = e + 1;
    }
}

int config_load(void)
{
    memset(&g_cfg, 0, sizeof g_cfg);
    g_cfg.output = cfg_output;
    g_cfg.enabled = 1;
    snprintf(g_cfg.output, REC_OUTPUT_MAX, "memsnap-%%p.msnap");
    g_cfg.mode = MODE_STREAM;
    g_cfg.ring_events = 1000000;
    g_cfg.stack_depth = 32;
    g_cfg.flush_ms = 100;
    g_cfg.counters_ms = 1000;
    g_cfg.oom_dump = OOM_DUMP_FIRST;
    g_cfg.dump_signal = SIGUSR1;
    g_cfg.dump_at_exit = 1;
    g_cfg.zstd_level = 1;   /* level 3 was no smaller on event data (docs/benchmarks.md) */
    g_cfg.symbolize = 1;
    g_cfg.fork_mode = FORK_FOLLOW;
    g_cfg.queue_events = 65536;
    g_cfg.max_stacks = 262144;
    g_cfg.py_frames = 1;
    g_cfg.py_watch = 1;
    g_cfg.py_depth = 64;
    g_cfg.py_native_depth = 16;
    /* PyTorch's allocations: the innermost native frames are the plugin's
     * callback and c10's allocator, the same in every stack; where the thread
     * has Python frames they say where the tensor was made, so by default
     * (TORCH_NATIVE_AUTO) only threads without them (autograd's) unwind any
     * native frames (docs/recorder.md, docs/benchmarks.md). */
    g_cfg.torch_native_depth = TORCH_NATIVE_AUTO;
    g_cfg.torch_free_stacks = 0;
    g_cfg.torch_nodes = 1;
    g_cfg.nvtx = NVTX_ALL;

    const char *s;
    int rc = 0;
    /* The job's rank of this process, as its launcher set it (torchrun,
     * mpirun, srun): the header says it, so a job's files need no rank in
     * their names.  Not a setting of ours: a value that is not a number is
     * simply not a rank. */
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0] && !g_cfg.has_rank; i++) {
        uint64_t r;
        if ((s = getenv(rank_vars[i])) && parse_u64(s, &r, 0) == 0 && r <= INT32_MAX) {
            g_cfg.has_rank = 1;
            g_cfg.rank = (int64_t)r;
        }
    }
    if ((s = getenv("MEMSNAP_DISABLE")) && strcmp(s, "0") != 0 && *s) {
        g_cfg.enabled = 0;
        return 0;
    }
    if ((s = getenv("MEMSNAP_OUTPUT"))) {
        if (!*s || strlen(s) >= REC_OUTPUT_MAX)
            rc |= bad("MEMSNAP_OUTPUT", s, "expected a non-empty path pattern");
        else
            snprintf(g_cfg.output, REC_OUTPUT_MAX, "%s", s);
    }
    if ((s = getenv("MEMSNAP_MODE"))) {
        if (strcmp(s, "stream") == 0)
            g_cfg.mode = MODE_STREAM;
        else if (strcmp(s, "ring") == 0)
            g_cfg.mode = MODE_RING;
        else
            rc |= bad("MEMSNAP_MODE", s, "expected stream or ring");
    }
    if ((s = getenv("MEMSNAP_WRITER_CPUS")) && *s) {
        if (strlen(s) >= sizeof g_cfg.writer_cpus || parse_cpu_list(s, g_cfg.writer_mask) != 0)
            rc |= bad("MEMSNAP_WRITER_CPUS", s, "expected CPU numbers 0-1023 and ranges, e.g. 14,15 or 12-15");
        else
            snprintf(g_cfg.writer_cpus, sizeof g_cfg.writer_cpus, "%s", s);
    }
    uint64_t v;
    v = g_cfg.ring_events;
    rc |= parse_range("MEMSNAP_RING_EVENTS", 1000, 1ull << 30, &v, 1);
    g_cfg.ring_events = v;
    v = (uint64_t)g_cfg.stack_depth;
    rc |= parse_range("MEMSNAP_STACK_DEPTH", 0, MSNAP_MAX_FRAMES, &v, 0);
    g_cfg.stack_depth = (int)v;
    v = (uint64_t)g_cfg.flush_ms;
    rc |= parse_range("MEMSNAP_FLUSH_MS", 1, 100, &v, 0);
    g_cfg.flush_ms = (int)v;
    v = (uint64_t)g_cfg.counters_ms;
    rc |= parse_range("MEMSNAP_COUNTERS_MS", 10, 1000, &v, 0);
    g_cfg.counters_ms = (int)v;
    v = g_cfg.queue_events;
    rc |= parse_range("MEMSNAP_QUEUE_EVENTS", 1024, 1ull << 24, &v, 1);
    g_cfg.queue_events = v;
    v = g_cfg.max_stacks;
    rc |= parse_range("MEMSNAP_MAX_STACKS", 1024, 1ull << 24, &v, 1);
    g_cfg.max_stacks = v;
    v = (uint64_t)g_cfg.py_depth;
    rc |= parse_range("MEMSNAP_PYTHON_DEPTH", 1, MSNAP_MAX_FRAMES, &v, 0);
    g_cfg.py_depth = (int)v;
    v = (uint64_t)g_cfg.py_native_depth;
    rc |= parse_range("MEMSNAP_PYTHON_NATIVE_DEPTH", 0, MSNAP_MAX_FRAMES, &v, 0);
    g_cfg.py_native_depth = (int)v;
    if ((s = getenv("MEMSNAP_TORCH_NATIVE_DEPTH")) && strcmp(s, "auto") != 0) {
        uint64_t d;
        if (parse_u64(s, &d, 0) != 0 || d > MSNAP_MAX_FRAMES)
            rc |= bad("MEMSNAP_TORCH_NATIVE_DEPTH", s, "expected auto or an integer from 0 to 128");
        else
            g_cfg.torch_native_depth = (int)d;
    }
    if ((s = getenv("MEMSNAP_TORCH_FREE_STACKS"))) {
        if (strcmp(s, "1") == 0) g_cfg.torch_free_stacks = 1;
        else if (strcmp(s, "0") == 0) g_cfg.torch_free_stacks = 0;
        else rc |= bad("MEMSNAP_TORCH_FREE_STACKS", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_TORCH_FREE_REQUESTED"))) {
        if (strcmp(s, "1") == 0) g_cfg.torch_free_requested = 1;
        else if (strcmp(s, "0") == 0) g_cfg.torch_free_requested = 0;
        else rc |= bad("MEMSNAP_TORCH_FREE_REQUESTED", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_TORCH_NODES"))) {
        if (strcmp(s, "1") == 0) g_cfg.torch_nodes = 1;
        else if (strcmp(s, "0") == 0) g_cfg.torch_nodes = 0;
        else rc |= bad("MEMSNAP_TORCH_NODES", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_PYTHON_FRAMES"))) {
        if (strcmp(s, "1") == 0) g_cfg.py_frames = 1;
        else if (strcmp(s, "0") == 0) g_cfg.py_frames = 0;
        else if (strcmp(s, "gil") == 0) g_cfg.py_frames = 2;
        else rc |= bad("MEMSNAP_PYTHON_FRAMES", s, "expected 0, 1 or gil");
    }
    if ((s = getenv("MEMSNAP_PYTHON_WATCH"))) {
        if (strcmp(s, "1") == 0) g_cfg.py_watch = 1;
        else if (strcmp(s, "0") == 0) g_cfg.py_watch = 0;
        else rc |= bad("MEMSNAP_PYTHON_WATCH", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_DUMP_ON_OOM"))) {
        if (strcmp(s, "first") == 0) g_cfg.oom_dump = OOM_DUMP_FIRST;
        else if (strcmp(s, "every") == 0) g_cfg.oom_dump = OOM_DUMP_EVERY;
        else if (strcmp(s, "none") == 0) g_cfg.oom_dump = OOM_DUMP_NONE;
        else rc |= bad("MEMSNAP_DUMP_ON_OOM", s, "expected first, every or none");
    }
    if ((s = getenv("MEMSNAP_DUMP_SIGNAL")) && parse_signal(s, &g_cfg.dump_signal) != 0)
        rc |= bad("MEMSNAP_DUMP_SIGNAL", s, "expected USR1, USR2, a signal number or none");
    if ((s = getenv("MEMSNAP_DUMP_AT_EXIT"))) {
        if (strcmp(s, "1") == 0) g_cfg.dump_at_exit = 1;
        else if (strcmp(s, "0") == 0) g_cfg.dump_at_exit = 0;
        else rc |= bad("MEMSNAP_DUMP_AT_EXIT", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_COMPRESS"))) {
        if (strcmp(s, "none") == 0) {
            g_cfg.zstd_level = 0;
        } else if (strcmp(s, "zstd") == 0) {
            g_cfg.zstd_level = 1;
        } else if (strncmp(s, "zstd:", 5) == 0 && parse_u64(s + 5, &v, 0) == 0 && v >= 1 &&
                   v <= 19) {
            g_cfg.zstd_level = (int)v;
        } else {
            rc |= bad("MEMSNAP_COMPRESS", s, "expected none, zstd or zstd:1..19");
        }
    }
    if ((s = getenv("MEMSNAP_SYMBOLIZE"))) {
        if (strcmp(s, "1") == 0) g_cfg.symbolize = 1;
        else if (strcmp(s, "0") == 0) g_cfg.symbolize = 0;
        else rc |= bad("MEMSNAP_SYMBOLIZE", s, "expected 0 or 1");
    }
    if ((s = getenv("MEMSNAP_FORK"))) {
        if (strcmp(s, "follow") == 0) g_cfg.fork_mode = FORK_FOLLOW;
        else if (strcmp(s, "stop") == 0) g_cfg.fork_mode = FORK_STOP;
        else rc |= bad("MEMSNAP_FORK", s, "expected follow or stop");
    }
    if ((s = getenv("MEMSNAP_QUIET")))
        g_cfg.quiet = strcmp(s, "0") != 0;
    if ((s = getenv("MEMSNAP_NVTX"))) {
        if (strcmp(s, "off") == 0) g_cfg.nvtx = NVTX_OFF;
        else if (strcmp(s, "default") == 0) g_cfg.nvtx = NVTX_DEFAULT_DOMAIN;
        else if (strcmp(s, "all") == 0) g_cfg.nvtx = NVTX_ALL;
        else rc |= bad("MEMSNAP_NVTX", s, "expected off, default or all");
    }
    if ((s = getenv("MEMSNAP_CLOCK"))) {
        if (strcmp(s, "auto") == 0) g_cfg.clock_monotonic = 0;
        else if (strcmp(s, "monotonic") == 0) g_cfg.clock_monotonic = 1;
        else rc |= bad("MEMSNAP_CLOCK", s, "expected auto or monotonic");
    }
    if ((s = getenv("MEMSNAP_TORCH"))) {
        if (strcmp(s, "auto") == 0) g_cfg.torch_off = 0;
        else if (strcmp(s, "off") == 0) g_cfg.torch_off = 1;
        else rc |= bad("MEMSNAP_TORCH", s, "expected auto or off");
    }
    if (rc != 0) {
        g_cfg.enabled = 0;
        return -1;
    }
    return 0;
}

size_t config_to_json(char *buf, size_t cap, int in_process)
{
    static const char *oom[] = {"first", "every", "none"};
    char tnd[16] = "\"auto\"";
    if (g_cfg.torch_native_depth != TORCH_NATIVE_AUTO)
        snprintf(tnd, sizeof tnd, "%d", g_cfg.torch_native_depth);
    int n = snprintf(buf, cap,
                     "{\"mode\":\"%s\",\"ring_events\":%llu,\"stack_depth\":%d,"
                     "\"flush_ms\":%d,\"counters_ms\":%d,\"dump_on_oom\":\"%s\","
                     "\"dump_signal\":%d,\"dump_at_exit\":%d,\"zstd_level\":%d,"
                     "\"symbolize\":%d,\"fork\":\"%s\",\"queue_events\":%llu,"
                     "\"max_stacks\":%llu,\"python_frames\":%d,\"python_depth\":%d,\"python_native_depth\":%d,"
                     "\"torch_native_depth\":%s,\"torch_free_stacks\":%d,\"torch_nodes\":%d,"
                     "\"torch_free_requested\":%d,"
                     "\"nvtx\":\"%s\",\"in_process\":%d%s%s%s}",
                     g_cfg.mode == MODE_RING ? "ring" : "stream",
                     (unsigned long long)g_cfg.ring_events, g_cfg.stack_depth, g_cfg.flush_ms,
                     g_cfg.counters_ms, oom[g_cfg.oom_dump], g_cfg.dump_signal,
                     g_cfg.dump_at_exit, g_cfg.zstd_level, g_cfg.symbolize,
                     g_cfg.fork_mode == FORK_FOLLOW ? "follow" : "stop",
                     (unsigned long long)g_cfg.queue_events,
                     (unsigned long long)g_cfg.max_stacks, g_cfg.py_frames, g_cfg.py_depth,
                     g_cfg.py_native_depth, tnd, g_cfg.torch_free_stacks, g_cfg.torch_nodes,
                     g_cfg.torch_free_requested,
                     g_cfg.nvtx == NVTX_OFF ? "off" : g_cfg.nvtx == NVTX_ALL ? "all" : "default",
                     in_process, g_cfg.writer_cpus[0] ? ",\"writer_cpus\":\"" : "",
                     g_cfg.writer_cpus, g_cfg.writer_cpus[0] ? "\"" : "");
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

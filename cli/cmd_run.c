/* memsnap run: start a program with the recorder preloaded.
 *
 * It turns the flags into MEMSNAP_* variables, puts libmemsnap.so in front of
 * LD_PRELOAD and NVTX_INJECTION64_PATH (unless the user set one), optionally
 * puts the simulated device in front of LD_LIBRARY_PATH, then forks and
 * execs the program and waits for it.  Signals that ask for a dump or an end
 * (USR1, USR2, TERM, INT, HUP, QUIT) are passed on to the program.  The exit
 * code is the program's (128 + N when it died of signal N), so memsnap run
 * can stand in front of any command in a script.
 *
 * Where things are found: parts.h (MEMSNAP_LIB and MEMSNAP_SIMDEV_DIR, else
 * next to this binary in the installed or the build-tree layout).
 *
 * PyTorch: before the program starts, a Python program whose PyTorch has no
 * recorder plugin yet gets one built into the cache, once, with one line on
 * stderr (torch_autobuild, torch_setup.h; --no-torch-build skips it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <glob.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "analyze/metrics.h"
#include "options.h"
#include "parts.h"
#include "torch_setup.h"
#include "../recorder/pathpat.h"
#include "../simdev/size.h"

static const char run_usage[] =
    "usage: memsnap run [options] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND with the memsnap recorder preloaded and writes a snapshot of\n"
    "every device-memory event it makes (JSON Lines, docs/format.md).\n"
    "\n"
    "options:\n"
    "  -o, --output PATTERN    snapshot path (default memsnap-%p.msnap); %p pid,\n"
    "                          %h host, %n dump number, %t start time (unix s),\n"
    "                          %q{VAR} value of environment variable VAR (e.g. RANK)\n"
    "      --mode MODE         stream (default: every event to the file, flushed\n"
    "                          every 100 ms) or ring (last N events + live state +\n"
    "                          counters for the whole run, written at dumps)\n"
    "      --ring-events N     ring mode: events kept (default 1000000)\n"
    "      --stack-depth N     native frames per event, 0-128 (default 32; 0 = none)\n"
    "      --python-frames WHEN  CPython 3.9-3.13 frames merged into the stacks of\n"
    "                          threads running Python: all (default), gil (only\n"
    "                          threads that hold the GIL) or none\n"
    "      --no-python-frames  the same as --python-frames none\n"
    "      --python-depth N    Python frames per event, 1-128 (default 64)\n"
    "      --python-native-depth N  native frames per event when it has Python\n"
    "                          frames, 0-128 (default 16)\n"
    "      --dump-on-oom WHEN  first (default), every or none\n"
    "      --dump-signal SIG   signal that asks for a dump: USR1 (default), USR2,\n"
    "                          a number, or none\n"
    "      --no-exit-dump      do not write the live state at exit\n"
    "      --compress C        zstd (default), zstd:LEVEL (1-19) or none\n"
    "      --no-symbolize      do not resolve function/file:line at exit\n"
    "                          (`memsnap symbolize` can do it later)\n"
    "      --fork MODE         follow (default: a child that uses CUDA writes its\n"
    "                          own file) or stop (children are not recorded)\n"
    "      --nvtx all|default|off  NVTX ranges and marks recorded: all (default:\n"
    "                          every domain), default (nvtxRangePush/Pop and marks\n"
    "                          of the default domain, as torch.cuda.nvtx makes) or\n"
    "                          off (no NVTX injection)\n"
    "      --sim-device SIZE   run on the simulated device of SIZE memory, 2M to\n"
    "                          64T (e.g. 80G), instead of the GPU (for machines\n"
    "                          without one); driver-API programs only: programs\n"
    "                          on the CUDA runtime (PyTorch, nvcc-built ones)\n"
    "                          need a GPU, and the simulated device says so\n"
    "      --sim-devices N     number of simulated devices (default 1)\n"
    "      --summary           print `memsnap summary` of the snapshot afterwards\n"
    "      --metrics [ADDR:]PORT  serve Prometheus metrics of the program's\n"
    "                          allocators at http://ADDR:PORT/metrics while it\n"
    "                          runs (ADDR 127.0.0.1 unless given; from this\n"
    "                          process, never the program's), one series per\n"
    "                          process and device (docs/recorder.md)\n"
    "      --no-torch-build    do not build the PyTorch plugin before a Python\n"
    "                          program whose PyTorch has none (by default it is\n"
    "                          built once, into the cache, as torch-setup does)\n"
    "  -q, --quiet             no closing line from the recorder\n"
    "  -h, --help              this help\n"
    "\n"
    "Settings without a flag are MEMSNAP_* environment variables, checked like\n"
    "the flags (docs/recorder.md lists them all); for PyTorch, e.g.\n"
    "MEMSNAP_TORCH_NODES=0: allocations made by the backward pass do not name\n"
    "their autograd node, and none carries its autograd sequence number.\n"
    "\n"
    "Exit code: COMMAND's own (128+N if it died of signal N); 2 for bad options,\n"
    "a snapshot folder that cannot be written or a --metrics port that is taken\n"
    "(COMMAND is then not run); 127 if COMMAND cannot be run.\n"
    "\n"
    "examples:\n"
    "  memsnap run -o train-%p.msnap -- python3 train.py               (a GPU)\n"
    "  memsnap run --sim-device 80G -o smoke.msnap -- memsnap-smoke 10  (no GPU)\n"
    "  memsnap run --metrics 9464 -o serve.msnap -- python3 serve.py   (Prometheus)\n";

/* One line (options.h): the message from fmt and arg, then where help is. */
static int usage_error(const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    return cli_usage_error("run", "%s", msg);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Prepends value to the ':'-separated variable var. */
static int env_prepend(const char *var, const char *value)
{
    const char *old = getenv(var);
    if (!old || !*old)
        return setenv(var, value, 1);
    size_t n = strlen(value) + strlen(old) + 2;
    char *buf = malloc(n);
    if (!buf)
        return -1;
    snprintf(buf, n, "%s:%s", value, old);
    int rc = setenv(var, buf, 1);
    free(buf);
    return rc;
}

static int check_uint(const char *s, unsigned long long lo, unsigned long long hi)
{
    if (!s || !*s || *s == '-')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return !errno && !*end && v >= lo && v <= hi;
}

/* Whether the recorder wrote a snapshot for the run started at `since`:
 * a file the output pattern can name (%p, %n, %t any value: the program's
 * children write their own), modified since then. */
static int snapshot_written(const char *pat, time_t since)
{
    char g[PATH_MAX * 2];
    size_t o = 0;
    for (const char *p = pat; *p && o + 8 < sizeof g; p++) {
        if (*p == '%' && (p[1] == 'p' || p[1] == 'n' || p[1] == 't')) {
            g[o++] = '*';
            p++;
        } else if (*p == '%' && (p[1] == 'h' || p[1] == 'q')) {
            g[o++] = '*';         /* a host or a variable: any value */
            p++;
            if (*p == 'q' && p[1] == '{')
                while (p[1] && *p != '}')
                    p++;
        } else if (*p == '%' && p[1] == '%') {
            g[o++] = '%';
            p++;
        } else if (*p == '*' || *p == '?' || *p == '[' || *p == '\\') {
            g[o++] = '\\';
            g[o++] = *p;
        } else {
            g[o++] = *p;
        }
    }
    g[o] = 0;
    glob_t gl;
    int found = 0;
    if (glob(g, GLOB_NOSORT, NULL, &gl) == 0) {
        for (size_t i = 0; i < gl.gl_pathc && !found; i++) {
            struct stat st;
            found = stat(gl.gl_pathv[i], &st) == 0 && st.st_mtime >= since;
        }
        globfree(&gl);
    }
    return found;
}

/* Whether the snapshot the output pattern names can be created: its folder
 * exists and may be written (a device or FIFO at the path is written in
 * place, so then the path itself).  A folder that depends on the program
 * (%p, %n or %t in it) is left to the recorder.  0 ok; else one line on
 * stderr and 2, and the program is not run: a recording that cannot be
 * written is not worth running it for. */
static int check_output(void)
{
    const char *pat = getenv("MEMSNAP_OUTPUT");
    if (!pat || !*pat)
        pat = "memsnap-%p.msnap";
    /* relative to where memsnap run was started, not to wherever the
     * program (or a child of it) has changed directory by the time it
     * writes */
    static char abs_pat[PATH_MAX + 8];
    if (pat[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) ||
            (size_t)snprintf(abs_pat, sizeof abs_pat, "%s/%s", strcmp(cwd, "/") ? cwd : "",
                             pat) >= sizeof abs_pat) {
            fprintf(stderr, "memsnap run: the snapshot path %s is too long\n", pat);
            return 2;
        }
        setenv("MEMSNAP_OUTPUT", abs_pat, 1);
        pat = getenv("MEMSNAP_OUTPUT");
    }
    if (pat[strlen(pat) - 1] == '/') {
        fprintf(stderr, "memsnap run: the snapshot path %s names a folder: give a file name "
                        "(e.g. %smemsnap-%%p.msnap); nothing was run\n", pat, pat);
        return 2;
    }
    const char *slash = strrchr(pat, '/');
    for (const char *p = pat; slash && p < slash; p++)
        if (p[0] == '%' && (p[1] == 'p' || p[1] == 'n' || p[1] == 't'))
            return 0;
    char path[PATH_MAX], dir[PATH_MAX];
    if (pathpat_expand(pat, (long)getpid(), 0, 0, path, sizeof path) != 0) {
        fprintf(stderr, "memsnap run: the snapshot path %s is too long\n", pat);
        return 2;
    }
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        fprintf(stderr, "memsnap run: the snapshot path %s is a symbolic link, which memsnap "
                        "does not write through; nothing was run\n", path);
        return 2;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "memsnap run: the snapshot path %s is a folder: give a file name "
                        "(e.g. %s/memsnap-%%p.msnap); nothing was run\n", path, path);
        return 2;
    }
    if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        if (access(path, W_OK) == 0)
            return 0;
        fprintf(stderr, "memsnap run: cannot write the snapshot to %s: %s; nothing was run\n",
                path, strerror(errno));
        return 2;
    }
    char *end = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", end ? (end == path ? 1 : (int)(end - path)) : 1,
             end ? path : ".");
    const char *why = NULL;
    if (stat(dir, &st) != 0)
        why = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        why = "not a folder";
    else if (access(dir, W_OK | X_OK) != 0)
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "memsnap run: cannot write the snapshot %s: folder %s: %s; nothing was "
                        "run\n", pat, dir, why);
        return 2;
    }
    return 0;
}

static pid_t child;

/* Removes the registration folder of --metrics (its files, then itself). */
static void live_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[PATH_MAX];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.' &&
                (size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < sizeof p)
                unlink(p);
        closedir(d);
    }
    rmdir(dir);
}

/* The dump signals (USR1, USR2) are passed on only while the program's
 * process catches or ignores them, as read from /proc/PID/status: until
 * the recorder's constructor has installed its handler (the dynamic
 * loader, a sanitizer's start-up and other libraries' constructors can
 * take a second), and again in the moments after the program execs
 * another (env, a shell's exec, a launcher), the signal's default action
 * would kill it.  One that arrives then is held and passed on once it is
 * caught; a program that never loads the recorder (a static binary) and
 * never handles it never gets it.  Other signals go on at once. */
static volatile sig_atomic_t held[2]; /* USR1, USR2 held */

/* Whether child catches or ignores sig now (1), does not (0), or is gone
 * (-1).  Async-signal-safe: open, read, close and hand parsing. */
static int child_takes(int sig)
{
    char path[64] = "/proc/", buf[4096];
    /* the pid in decimal, by hand */
    char d[16];
    int n = 0;
    for (long v = child; v > 0 && n < 15; v /= 10)
        d[n++] = (char)('0' + v % 10);
    size_t k = strlen(path);
    while (n > 0)
        path[k++] = d[--n];
    memcpy(path + k, "/status", 8);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = 0, r;
    while (len < (ssize_t)sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += r;
    close(fd);
    buf[len > 0 ? len : 0] = 0;
    int takes = 0;
    static const char *const keys[] = {"SigIgn:", "SigCgt:"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(buf, keys[i]);
        if (!p)
            return 1;          /* no masks to read: pass it on as before */
        p += 7;
        while (*p == ' ' || *p == '\t')
            p++;
        /* a hex mask, bit sig - 1 counted from the right */
        const char *e = p;
        while ((*e >= '0' && *e <= '9') || (*e >= 'a' && *e <= 'f'))
            e++;
        int bit = sig - 1, digit = bit / 4;
        if (e - p > digit) {
            char c = e[-1 - digit];
            int v = c <= '9' ? c - '0' : c - 'a' + 10;
            if (v & (1 << (bit % 4)))
                takes = 1;
        }
    }
    return takes;
}

static void forward(int sig)
{
    int saved = errno;
    if ((sig == SIGUSR1 || sig == SIGUSR2) && (child <= 0 || child_takes(sig) == 0))
        held[sig == SIGUSR2] = 1;
    else if (child > 0)
        kill(child, sig);
    errno = saved;
}

/* Passes on the dump signals held that the program now takes. */
static void pass_held(void)
{
    for (int i = 0; i < 2 && child > 0; i++) {
        int sig = i ? SIGUSR2 : SIGUSR1;
        if (held[i] && child_takes(sig) != 0) {
            held[i] = 0;
            kill(child, sig);
        }
    }
}

int cmd_run(int argc, char **argv)
{
    enum { O_MODE = 256, O_RING, O_DEPTH, O_OOM, O_SIG, O_NOEXIT, O_COMPRESS, O_NOSYM,
           O_FORK, O_SIM, O_SIMN, O_SUMMARY, O_NOPY, O_PYDEPTH, O_PYFRAMES, O_PYNATIVE,
           O_NOTORCHBUILD, O_NVTX, O_METRICS };
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},
        {"mode", required_argument, 0, O_MODE},
        {"ring-events", required_argument, 0, O_RING},
        {"stack-depth", required_argument, 0, O_DEPTH},
        {"no-python-frames", no_argument, 0, O_NOPY},
        {"python-frames", required_argument, 0, O_PYFRAMES},
        {"python-native-depth", required_argument, 0, O_PYNATIVE},
        {"python-depth", required_argument, 0, O_PYDEPTH},
        {"dump-on-oom", required_argument, 0, O_OOM},
        {"dump-signal", required_argument, 0, O_SIG},
        {"no-exit-dump", no_argument, 0, O_NOEXIT},
        {"compress", required_argument, 0, O_COMPRESS},
        {"no-symbolize", no_argument, 0, O_NOSYM},
        {"fork", required_argument, 0, O_FORK},
        {"nvtx", required_argument, 0, O_NVTX},
        {"sim-device", required_argument, 0, O_SIM},
        {"sim-devices", required_argument, 0, O_SIMN},
        {"summary", no_argument, 0, O_SUMMARY},
        {"no-torch-build", no_argument, 0, O_NOTORCHBUILD},
        {"metrics", required_argument, 0, O_METRICS},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *sim = NULL, *simn = NULL, *metrics_spec = NULL;
    int summary = 0, torch_build = 1;
    optind = 1;
    opterr = 0;
    int c;
    /* '+': stop at the first non-option, so COMMAND's own flags are its own. */
    while ((c = getopt_long(argc, argv, "+o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (!*optarg)
                return usage_error("--output needs a path%s", "");
            setenv("MEMSNAP_OUTPUT", optarg, 1);
            break;
        case O_MODE:
            if (strcmp(optarg, "stream") && strcmp(optarg, "ring"))
                return usage_error("--mode must be stream or ring, not '%s'", optarg);
            setenv("MEMSNAP_MODE", optarg, 1);
            break;
        case O_RING:
            if (!check_uint(optarg, 1000, 1ull << 30))
                return usage_error("--ring-events must be an integer from 1000 to 2^30, not '%s'", optarg);
            setenv("MEMSNAP_RING_EVENTS", optarg, 1);
            break;
        case O_DEPTH:
            if (!check_uint(optarg, 0, 128))
                return usage_error("--stack-depth must be an integer from 0 to 128, not '%s'", optarg);
            setenv("MEMSNAP_STACK_DEPTH", optarg, 1);
            break;
        case O_NOPY:
            setenv("MEMSNAP_PYTHON_FRAMES", "0", 1);
            break;
        case O_PYFRAMES:
            if (strcmp(optarg, "all") && strcmp(optarg, "gil") && strcmp(optarg, "none"))
                return usage_error("--python-frames must be all, gil or none, not '%s'", optarg);
            setenv("MEMSNAP_PYTHON_FRAMES",
                   !strcmp(optarg, "all") ? "1" : !strcmp(optarg, "gil") ? "gil" : "0", 1);
            break;
        case O_PYNATIVE:
            if (!check_uint(optarg, 0, 128))
                return usage_error("--python-native-depth must be an integer from 0 to 128, not '%s'", optarg);
            setenv("MEMSNAP_PYTHON_NATIVE_DEPTH", optarg, 1);
            break;
        case O_PYDEPTH:
            if (!check_uint(optarg, 1, 128))
                return usage_error("--python-depth must be an integer from 1 to 128, not '%s'", optarg);
            setenv("MEMSNAP_PYTHON_DEPTH", optarg, 1);
            break;
        case O_OOM:
            if (strcmp(optarg, "first") && strcmp(optarg, "every") && strcmp(optarg, "none"))
                return usage_error("--dump-on-oom must be first, every or none, not '%s'", optarg);
            setenv("MEMSNAP_DUMP_ON_OOM", optarg, 1);
            break;
        case O_SIG:
            setenv("MEMSNAP_DUMP_SIGNAL", optarg, 1);
            break;
        case O_NOEXIT:
            setenv("MEMSNAP_DUMP_AT_EXIT", "0", 1);
            break;
        case O_COMPRESS: {
            /* what the recorder takes (recorder/config.c): checked here, so a
             * bad value is this option's error, not a recording turned off */
            char *end = NULL;
            long lv = 0;
            if (!strncmp(optarg, "zstd:", 5))
                lv = strtol(optarg + 5, &end, 10);
            if (strcmp(optarg, "none") && strcmp(optarg, "zstd") &&
                (strncmp(optarg, "zstd:", 5) || !end || end == optarg + 5 || *end || lv < 1 ||
                 lv > 19))
                return cli_usage_error("run", "--compress wants zstd, zstd:LEVEL (1-19) or "
                                       "none, got \"%s\"", optarg);
            setenv("MEMSNAP_COMPRESS", optarg, 1);
            break;
        }
        case O_NOSYM:
            setenv("MEMSNAP_SYMBOLIZE", "0", 1);
            break;
        case O_FORK:
            if (strcmp(optarg, "follow") && strcmp(optarg, "stop"))
                return usage_error("--fork must be follow or stop, not '%s'", optarg);
            setenv("MEMSNAP_FORK", optarg, 1);
            break;
        case O_NVTX:
            if (strcmp(optarg, "off") && strcmp(optarg, "default") && strcmp(optarg, "all"))
                return usage_error("--nvtx must be off, default or all, not '%s'", optarg);
            setenv("MEMSNAP_NVTX", optarg, 1);
            break;
        case O_SIM: {
            uint64_t bytes;
            if (sim_size_parse(optarg, &bytes))
                return usage_error("--sim-device wants a size " SIM_SIZE_RANGE " (binary units: "
                                   "80G, 512M, 1T), not '%s'", optarg);
            sim = optarg;
            break;
        }
        case O_SIMN:
            if (!check_uint(optarg, 1, 8))
                return usage_error("--sim-devices must be from 1 to 8, not '%s'", optarg);
            simn = optarg;
            break;
        case O_SUMMARY:
            summary = 1;
            break;
        case O_NOTORCHBUILD:
            torch_build = 0;
            break;
        case O_METRICS:
            metrics_spec = optarg;
            break;
        case 'q':
            setenv("MEMSNAP_QUIET", "1", 1);
            break;
        case 'h':
            fputs(run_usage, stdout);
            return 0;
        default:
            return cli_option_error("run", argv, "+o:qh", opts);
        }
    }
    if (optind >= argc)
        return usage_error("no command given%s (memsnap run [options] -- COMMAND)", "");

    /* The same checks the recorder makes, so a bad value stops here. */
    if (memsnap_cli_check_settings() != 0)
        return 2;
    if (check_output() != 0)
        return 2;
    /* The metrics' port before anything runs: taken or bad is one line. */
    an_metrics *metrics = NULL;
    char live_dir[PATH_MAX] = "";
    if (metrics_spec) {
        char merr[512];
        if (!(metrics = an_metrics_listen(metrics_spec, merr, sizeof merr))) {
            fprintf(stderr, "memsnap run: --metrics %s: %s; nothing was run\n", metrics_spec,
                    merr);
            return 2;
        }
    }

#ifndef MEMSNAP_HAVE_RECORDER
    fprintf(stderr, "memsnap run: this memsnap is a reader-only build (no CUDA toolkit): "
                    "it has no recorder\n");
    return 2;
#endif
    char lib[PATH_MAX + 64], simdir[PATH_MAX + 64];
    if (memsnap_part_find(MEMSNAP_PART_RECORDER, lib, sizeof lib) != 0) {
        fprintf(stderr, "memsnap run: recorder library %s not found; set MEMSNAP_LIB\n", lib);
        return 2;
    }
    char real_lib[PATH_MAX];
    if (!realpath(lib, real_lib)) {
        fprintf(stderr, "memsnap run: recorder library %s not found; set MEMSNAP_LIB\n", lib);
        return 2;
    }
    /* The dump signals are taken from here on: one sent while the PyTorch
     * plugin builds (seconds), or before the program runs, is passed on once
     * there is a program, never fatal to memsnap run itself */
    struct sigaction early;
    memset(&early, 0, sizeof early);
    early.sa_handler = forward;
    early.sa_flags = SA_RESTART;
    sigemptyset(&early.sa_mask);
    sigaction(SIGUSR1, &early, NULL);
    sigaction(SIGUSR2, &early, NULL);
    /* Before the environment is changed: the build is not recorded. */
    if (torch_build)
        torch_autobuild(&argv[optind], real_lib);
    if (!sim) {
        /* no driver here: the program will say it has no GPU; say what to do */
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (drv)
            dlclose(drv);
        else if (!getenv("MEMSNAP_QUIET") || strcmp(getenv("MEMSNAP_QUIET"), "1"))
            fprintf(stderr, "memsnap run: no CUDA driver on this machine (libcuda.so.1 not "
                            "found): the program finds no GPU; --sim-device SIZE (e.g. 80G) "
                            "runs it on the simulated device\n");
    }
    if (sim) {
        char real_sim[PATH_MAX];
        if (memsnap_part_find(MEMSNAP_PART_SIMDEV_DIR, simdir, sizeof simdir) != 0 ||
            !realpath(simdir, real_sim)) {
            fprintf(stderr, "memsnap run: simulated device %s/libcuda.so.1 not found; set "
                            "MEMSNAP_SIMDEV_DIR\n", simdir);
            return 2;
        }
        env_prepend("LD_LIBRARY_PATH", real_sim);
        setenv("MEMSNAP_SIM_DEVICE_MEM", sim, 1);
        if (simn)
            setenv("MEMSNAP_SIM_DEVICES", simn, 1);
    }
    env_prepend("LD_PRELOAD", real_lib);
    /* NVTX's injection, unless the user named one or asked for no NVTX (then
     * the program's NVTX calls stay the no-ops they are without a tool) */
    const char *nvtx = getenv("MEMSNAP_NVTX");
    if (!getenv("NVTX_INJECTION64_PATH") && !(nvtx && strcmp(nvtx, "off") == 0))
        setenv("NVTX_INJECTION64_PATH", real_lib, 1);

    if (metrics) {
        /* where each process of the run registers (recorder/live.c) */
        const char *tmp = getenv("TMPDIR");
        snprintf(live_dir, sizeof live_dir, "%s/memsnap-run-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(live_dir)) {
            fprintf(stderr, "memsnap run: --metrics: cannot make a folder in %s: %s; nothing "
                            "was run\n", tmp && *tmp ? tmp : "/tmp", strerror(errno));
            an_metrics_stop(metrics);
            return 2;
        }
        setenv("MEMSNAP_LIVE_DIR", live_dir, 1);
    }
    fflush(NULL);
    time_t started = time(NULL);
    child = fork();
    if (child < 0) {
        fprintf(stderr, "memsnap run: fork failed: %s\n", strerror(errno));
        if (metrics) {
            an_metrics_stop(metrics);
            live_dir_remove(live_dir);
        }
        return 2;
    }
    if (child == 0) {
        execvp(argv[optind], &argv[optind]);
        fprintf(stderr, "memsnap run: cannot run %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    if (metrics) {
        /* the program runs; the metrics are served from here, fed by the
         * files its processes register (analyze/metrics.h) */
        msnap_set_progress(NULL, NULL);
        if (an_metrics_start(metrics, live_dir, NULL, NULL) != 0)
            fprintf(stderr, "memsnap run: --metrics: cannot start serving: %s\n",
                    strerror(errno));
        else if (!getenv("MEMSNAP_QUIET") || strcmp(getenv("MEMSNAP_QUIET"), "1"))
            fprintf(stderr, "memsnap run: metrics at http://%s/metrics\n",
                    an_metrics_address(metrics));
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    int fwd[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++) {
        /* a held dump signal must wake the wait below (no restart) */
        sa.sa_flags = i < 2 ? 0 : SA_RESTART;
        sigaction(fwd[i], &sa, NULL);
    }
    int status = 0;
    for (;;) {
        pass_held();
        /* while a dump signal is held, look again every 20 ms */
        pid_t w = waitpid(child, &status, held[0] || held[1] ? WNOHANG : 0);
        if (w == child)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "memsnap run: waitpid: %s\n", strerror(errno));
            return 2;
        }
        if (w == 0)
            poll(NULL, 0, 20);
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status)
                               : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (metrics) {
        an_metrics_refresh(metrics);   /* the program's last lines */
        an_metrics_stop(metrics);
        live_dir_remove(live_dir);
    }
    const char *pat = getenv("MEMSNAP_OUTPUT");
    pat = pat && *pat ? pat : "memsnap-%p.msnap";
    /* a program that never touched device memory: the recorder never
     * started, so there is no snapshot; say so (127: it did not run) */
    int none = rc != 127 && !snapshot_written(pat, started);
    if (none && (!getenv("MEMSNAP_QUIET") || strcmp(getenv("MEMSNAP_QUIET"), "1")))
        fprintf(stderr, "memsnap run: no snapshot: %s made no device-memory call (the recorder "
                "starts at the first one), so there was nothing to record\n", argv[optind]);
    if (summary && !none) {
        char path[PATH_MAX];
        pathpat_expand(pat, (long)child, 0, 0, path, sizeof path);
        if (!file_exists(path)) {
            fprintf(stderr, "memsnap run: no snapshot at %s (a process the program started "
                    "wrote its own)\n", path);
        } else {
            char *sargv[] = {"summary", path, NULL};
            fflush(stdout);
            cmd_summary(2, sargv);
        }
    }
    return rc;
}

/* What the recorder exposes for watching a run live (`memsnap top`,
 * `memsnap run --metrics`; analyze/live.h reads it), on the writer thread,
 * once a second, never on the hot path.
 *
 * The writer loop calls live_tick with its clock and a view of its own
 * state (live_src: its live set, the state model of format/state.h; the
 * ring, the counters series, the dropped count).  It returns at once but once a second, and then:
 *
 *   registers  when MEMSNAP_LIVE_DIR is set (memsnap run --metrics sets it
 *              to a private folder of its own): once per process, after a
 *              fork too, DIR/PID.reg, a few "key value" lines (pid, rank
 *              from $RANK, mode, the snapshot path, the live path), so that
 *              memsnap run finds every process of its run, forked workers
 *              and the ranks of a launcher included;
 *   ring mode  counts the OOMs among the events that came into the ring
 *              since the last second (kept: the first LIVE_OOMS of them), and
 *              when someone watches - MEMSNAP_LIVE_DIR is set, or
 *              PATH.live.want (PATH: the snapshot path of dump 0) was touched
 *              in the last LIVE_WANT_S seconds - writes PATH.live: a complete
 *              small snapshot in the format every reader reads (docs/format.md),
 *              plain JSON Lines, under a temporary name in the same folder,
 *              renamed into place:
 *                header (mode ring), device lines, module lines;
 *                the counters of the whole run, cut to the last LIVE_SERIES
 *                samples of each device plus, of the older ones, the sample
 *                with the highest reserved and the one with the highest
 *                allocated (so the peaks of the run stay);
 *                the OOM events kept, with their stacks;
 *                a counters line now, then a state section: every live
 *                object, after its stack line (and the sym lines of its
 *                Python and autograd frames, named as the stream names them);
 *                a trailer: reason "live", the events processed and those
 *                the ring dropped.
 *              The writer thread only copies what the file is made of
 *              (the live objects, the counters, the OOMs: about a
 *              millisecond for 30,000 objects); a thread of this file's
 *              own formats and writes it (about 40 ms for as many on the
 *              dev VM), so the writer, and through its queue the program,
 *              never waits for it.  A second comes and goes without a
 *              file while the last one is being written.  Nothing of it
 *              runs while nobody watches but one stat() a second.
 *
 * At exit (atexit, registered with the first live file) PATH.live is
 * removed: the exit dump at PATH is then the file to read.  Stream mode
 * writes nothing here but the registration: the stream itself is what a
 * watcher follows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/outfile.h"
#include "pathpat.h"
#include "pyframes.h"
#include "recorder.h"
#include "format/state.h"
#include "symbolize/symbolize.h"
#include "util/u64map.h"

#define LIVE_WANT_S 30       /* a watcher's request holds this long (analyze/live.h) */
#define LIVE_OOMS 64         /* OOM events kept for the live file */
#define LIVE_SERIES 600      /* counters samples kept per device */

static pid_t live_pid;               /* the process these statics belong to */
static char live_pattern[REC_OUTPUT_MAX]; /* and the output pattern */
static char live_dir[PATH_MAX];      /* MEMSNAP_LIVE_DIR, "" when unset */
static uint64_t last_ms;
static int registered;
static char snap_path[PATH_MAX], live_path[PATH_MAX + 8], want_path[PATH_MAX + 16];
static int exit_hook;
static int wrote_live;

static uint64_t ring_seen;           /* ring_n at the last tick */
static msnap_event ooms[LIVE_OOMS];
static size_t nooms;

static char line[1 << 16];         /* the helper's: one formatted line */

/* What one live file is made of, copied on the writer thread (the
 * writer's structures change as it goes on) for the helper thread. */
typedef struct live_job {
    msnap_live *objs;
    size_t nobjs;
    msnap_counters *cnt;            /* the series kept, then the counters now */
    size_t ncnt, ncnt_series;
    msnap_event ooms[LIVE_OOMS];
    size_t nooms;
    uint64_t t, processed, dropped;
    char path[PATH_MAX + 8];
} live_job;

static pthread_t helper;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cv = PTHREAD_COND_INITIALIZER;
static live_job *job;                /* handed over, not yet written */
static int helper_busy, helper_started, exiting;


/* The process starts afresh (the first tick, after a fork). */
static void live_reset(void)
{
    if (live_pid && live_pid != getpid()) {
        /* a forked child: the parent's helper is not here, and it may have
         * held the lock at the fork; its job is abandoned */
        pthread_mutex_init(&job_lock, NULL);
        pthread_cond_init(&job_cv, NULL);
        job = NULL;
        helper_busy = helper_started = 0;
    }
    live_pid = getpid();
    memcpy(live_pattern, g_cfg.output, sizeof live_pattern);
    const char *dir = getenv("MEMSNAP_LIVE_DIR");
    snprintf(live_dir, sizeof live_dir, "%s", dir ? dir : "");
    registered = 0;
    wrote_live = 0;
    ring_seen = 0;
    nooms = 0;
    snap_path[0] = live_path[0] = want_path[0] = 0;
    if (pathpat_expand(g_cfg.output, (long)live_pid, 0, core_t0_unix_ns() / 1000000000ull,
                       snap_path, sizeof snap_path) == 0) {
        snprintf(live_path, sizeof live_path, "%s.live", snap_path);
        snprintf(want_path, sizeof want_path, "%s.live.want", snap_path);
    }
}

static void live_at_exit(void)
{
    if (!wrote_live || live_pid != getpid() || !live_path[0])
        return;
    pthread_mutex_lock(&job_lock);
    exiting = 1;                 /* the helper renames nothing from now on */
    pthread_mutex_unlock(&job_lock);
    unlink(live_path);
}

/* DIR/PID.reg for memsnap run --metrics (see the top of the file). */
static void live_register(const char *dir)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%ld.reg", dir, (long)live_pid) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= sizeof tmp)
        return;
    int fd = outfile_open_new(tmp);
    if (fd < 0)
        return;
    const char *rank = getenv("RANK");
    char text[2 * PATH_MAX + 128];
    int n = snprintf(text, sizeof text, "pid %ld\nrank %s\nmode %s\npath %s\nlive %s\n",
                     (long)live_pid, rank ? rank : "",
                     g_cfg.mode == MODE_RING ? "ring" : "stream", snap_path,
                     g_cfg.mode == MODE_RING ? live_path : "");
    int ok = n > 0 && (size_t)n < sizeof text && write(fd, text, (size_t)n) == n;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0)
        unlink(tmp);
}

/* Whether someone asked for the live file in the last LIVE_WANT_S s. */
static int wanted(void)
{
    struct stat sb;
    if (!want_path[0] || stat(want_path, &sb) != 0)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec - sb.st_mtim.tv_sec <= LIVE_WANT_S;
}

/* The OOM events that came into the ring since the last tick. */
static void scan_ring(const live_src *s)
{
    if (!s->ring || s->ring_n <= ring_seen) {
        ring_seen = s->ring_n;
        return;
    }
    uint64_t from = ring_seen;
    if (s->ring_n - from > g_cfg.ring_events)
        from = s->ring_n - g_cfg.ring_events;   /* overwritten before we looked */
    for (uint64_t i = from; i < s->ring_n && nooms < LIVE_OOMS; i++) {
        const msnap_event *e = &s->ring[i % g_cfg.ring_events];
        if (e->action == MSNAP_A_OOM)
            ooms[nooms++] = *e;
    }
    ring_seen = s->ring_n;
}

/* ---- the live file ------------------------------------------------------------- */

typedef struct lw {
    msnap_out *o;
    u64map stacks;          /* stack ids written */
    u64map pysyms;          /* Python / autograd entries named */
    int err;
} lw;

static void put(lw *w, size_t n)
{
    if (!n || msnap_out_write(w->o, line, n) != 0)
        w->err = 1;
}

/* The stack line of id (once), then the sym lines of its Python and
 * autograd frames, as the writer's stream has them. */
static void put_stack(lw *w, uint32_t id)
{
    if (!id || u64map_get(&w->stacks, 0, id))
        return;
    u64map_put(&w->stacks, 0, id, 1);
    const uint64_t *ips;
    int depth = core_stack_get(id, &ips);
    if (depth <= 0)
        return;
    msnap_stack st = {.id = id, .depth = depth, .ips = ips};
    put(w, msnap_fmt_stack(line, sizeof line, &st));
    for (int i = 0; i < depth; i++) {
        if (!msnap_ip_is_python(ips[i]) || u64map_get(&w->pysyms, 0, ips[i]))
            continue;
        u64map_put(&w->pysyms, 0, ips[i], 1);
        msnap_symbol sym = {.ip = ips[i]};
        if (msnap_ip_is_autograd(ips[i])) {
            sym.function = core_str_get((uint32_t)ips[i]);
            sym.file = MSNAP_AUTOGRAD_FILE;
        } else {
            pyframes_name(ips[i], &sym.function, &sym.file, &sym.line, &sym.offset);
        }
        put(w, msnap_fmt_symbol(line, sizeof line, &sym));
    }
}

static int module_cb(const msnap_module *m, void *ctx)
{
    put(ctx, msnap_fmt_module(line, sizeof line, m));
    return 0;
}

static void put_header(lw *w)
{
    static char cmd[65536];
    static const char *argv[256];
    static int argc = -1;
    static pid_t cmd_pid;
    if (argc < 0 || cmd_pid != live_pid) {
        argc = 0;
        cmd_pid = live_pid;
        FILE *f = fopen("/proc/self/cmdline", "re");
        size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
        if (f)
            fclose(f);
        cmd[n] = 0;
        for (size_t i = 0; i < n && argc < 256; i += strlen(cmd + i) + 1)
            argv[argc++] = cmd + i;
    }
    static msnap_header h;
    memset(&h, 0, sizeof h);
    h.major = MSNAP_FORMAT_MAJOR;
    h.minor = MSNAP_FORMAT_MINOR;
    h.pid = live_pid;
    if (gethostname(h.host, sizeof h.host) != 0)
        snprintf(h.host, sizeof h.host, "unknown");
    h.host[sizeof h.host - 1] = 0;
    h.argv = argv;
    h.argc = argc;
    snprintf(h.clock, sizeof h.clock, "CLOCK_MONOTONIC");
    h.t0_unix_ns = core_t0_unix_ns();
    snprintf(h.mode, sizeof h.mode, "ring");
    char settings[1024];
    config_to_json(settings, sizeof settings, g_inproc);
    h.settings_json = settings;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (core_device_ready(d))
            h.devices[h.ndevices++] = g_devices[d].info;
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    size_t n = buf ? msnap_fmt_header_compact(buf, cap, &h) : 0;
    if (buf && !n) {
        h.argc = 0;
        n = msnap_fmt_header_compact(buf, cap, &h);
    }
    if (!n || msnap_out_write(w->o, buf, n) != 0)
        w->err = 1;
    free(buf);
}

/* Writes job's file (see the top of the file), on the helper thread.
 * 0, -1. */
static int write_live(const live_job *j)
{
    char tmp[PATH_MAX + 32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", j->path) >= sizeof tmp)
        return -1;
    int fd = outfile_open_new(tmp);
    if (fd < 0)
        return -1;
    lw w = {.o = msnap_out_fdopen(fd, 0)};
    if (!w.o) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    put_header(&w);
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (core_device_ready(d))
            put(&w, msnap_fmt_device(line, sizeof line, &g_devices[d].info));
    core_dl_lock();                  /* not while fork copies the loader's lock */
    msnap_self_modules(module_cb, &w);
    core_dl_unlock();
    for (size_t i = 0; i < j->ncnt_series; i++)
        put(&w, msnap_fmt_counters(line, sizeof line, &j->cnt[i]));
    for (size_t i = 0; i < j->nooms; i++) {
        put_stack(&w, j->ooms[i].stack);
        put(&w, msnap_fmt_event(line, sizeof line, &j->ooms[i]));
    }
    for (size_t i = j->ncnt_series; i < j->ncnt; i++)
        put(&w, msnap_fmt_counters(line, sizeof line, &j->cnt[i]));
    put(&w, msnap_fmt_state_begin(line, sizeof line, j->t, j->nobjs));
    for (size_t i = 0; i < j->nobjs; i++) {
        put_stack(&w, j->objs[i].stack);
        put(&w, msnap_fmt_live(line, sizeof line, &j->objs[i]));
    }
    msnap_trailer tr = {.t_ns = j->t, .events = j->processed, .dropped = j->dropped,
                        .stacks_dropped = core_stacks_dropped(), .reason = "live"};
    put(&w, msnap_fmt_trailer(line, sizeof line, &tr));
    u64map_free(&w.stacks);
    u64map_free(&w.pysyms);
    int rc = msnap_out_close(w.o) != 0 || w.err ? -1 : 0;
    pthread_mutex_lock(&job_lock);
    if (!rc && (exiting || rename(tmp, j->path) != 0))
        rc = -1;
    pthread_mutex_unlock(&job_lock);
    if (rc)
        unlink(tmp);
    return rc;
}

static void job_free(live_job *j)
{
    if (!j)
        return;
    free(j->objs);
    free(j->cnt);
    free(j);
}

static void *helper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&job_lock);
    for (;;) {
        while (!job)
            pthread_cond_wait(&job_cv, &job_lock);
        live_job *j = job;
        job = NULL;
        pthread_mutex_unlock(&job_lock);
        write_live(j);
        job_free(j);
        pthread_mutex_lock(&job_lock);
        helper_busy = 0;
    }
    return NULL;
}

/* The counters of the run into j->cnt: per device the last LIVE_SERIES
 * samples and, of the older ones, those with the highest reserved and
 * allocated; then the counters now (with NVML's figure: NVML is read on
 * the writer thread only).  0, -1 out of memory. */
static int copy_counters(live_job *j, const live_src *s)
{
    size_t cap = 2 * (MSNAP_MAX_DEVICES + 1) + MSNAP_MAX_DEVICES, n = 0;
    for (size_t i = 0; i < s->series_n; i++)
        n++;
    cap += n < (size_t)LIVE_SERIES * (MSNAP_MAX_DEVICES + 1) ? n
                                                              : (size_t)LIVE_SERIES * (MSNAP_MAX_DEVICES + 1);
    if (!(j->cnt = malloc(cap * sizeof *j->cnt)))
        return -1;
    for (int d = -1; d < MSNAP_MAX_DEVICES; d++) {
        size_t nd = 0, hi_r = SIZE_MAX, hi_a = SIZE_MAX, k = 0;
        for (size_t i = 0; i < s->series_n; i++)
            nd += s->series[i].device == d;
        if (!nd)
            continue;
        size_t keep_from = nd > LIVE_SERIES ? nd - LIVE_SERIES : 0;
        uint64_t br = 0, ba = 0;
        for (size_t i = 0; i < s->series_n && k < keep_from; i++) {
            const msnap_counters *c = &s->series[i];
            if (c->device != d)
                continue;
            k++;
            uint64_t r = c->reserved + c->async + c->managed;
            if (hi_r == SIZE_MAX || r > br) {
                br = r;
                hi_r = i;
            }
            if (hi_a == SIZE_MAX || c->allocated > ba) {
                ba = c->allocated;
                hi_a = i;
            }
        }
        k = 0;
        for (size_t i = 0; i < s->series_n && j->ncnt < cap; i++) {
            const msnap_counters *c = &s->series[i];
            if (c->device != d)
                continue;
            if (k++ >= keep_from || i == hi_r || i == hi_a)
                j->cnt[j->ncnt++] = *c;
        }
    }
    j->ncnt_series = j->ncnt;
    uint64_t du[MSNAP_MAX_DEVICES], t_du;
    writer_device_used_settled(du, &t_du);
    for (int d = 0; d < MSNAP_MAX_DEVICES && j->ncnt < cap; d++) {
        uint64_t v[6];
        if (writer_totals(d, v) != 0)
            continue;
        int ready = core_device_ready(d);
        if (!ready && !v[0] && !v[1] && !v[2] && !v[3] && !v[4])
            continue;
        msnap_counters k = {.t_ns = j->t, .device = d, .reserved = v[0], .allocated = v[1],
                            .async = v[2], .managed = v[3], .vmm_mapped = v[4]};
        k.device_used = du[d];   /* 0 for a device not ready */
        j->cnt[j->ncnt++] = k;
    }
    return 0;
}

/* Copies what the next live file is made of and hands it to the helper
 * (started at the first), unless it is still writing the last one. */
static void live_hand_over(const live_src *s)
{
    pthread_mutex_lock(&job_lock);
    int busy = helper_busy;
    pthread_mutex_unlock(&job_lock);
    if (busy)
        return;
    live_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->t = core_now_ns();
    snprintf(j->path, sizeof j->path, "%s", live_path);
    const msnap_state *st = s->live;
    size_t nlive = st ? st->map.n : 0;
    j->objs = malloc((nlive + 1) * sizeof *j->objs);
    if (!j->objs || copy_counters(j, s)) {
        job_free(j);
        return;
    }
    /* the live lines as the writer's dumps write them (writer.c write_state) */
    for (size_t i = 0; st && i < st->map.cap && j->nobjs < nlive; i++) {
        if (!st->map.slots[i].used)
            continue;
        const msnap_obj *b = &st->objs[st->map.slots[i].value];
        j->objs[j->nobjs++] = (msnap_live){
            .kind = b->kind, .device = b->device == MSNAP_ST_HOST ? -1 : b->device,
            .addr = b->addr, .size = b->size, .stream = b->stream,
            .aux = b->kind == MSNAP_A_BLOCK_ALLOC ? 0 : b->aux, .stack = b->stack,
            .t_ns = b->t_ns};
    }
    memcpy(j->ooms, ooms, nooms * sizeof *ooms);
    j->nooms = nooms;
    uint64_t v[6] = {0};
    writer_totals(-1, v);
    j->processed = v[5];
    j->dropped = s->dropped;
    if (!helper_started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* the program's signals stay its own */
        helper_started = pthread_create(&helper, NULL, helper_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!helper_started) {
            job_free(j);
            return;
        }
        pthread_detach(helper);
    }
    pthread_mutex_lock(&job_lock);
    job = j;
    helper_busy = 1;
    pthread_cond_signal(&job_cv);
    pthread_mutex_unlock(&job_lock);
    if (!wrote_live) {
        wrote_live = 1;
        if (!exit_hook) {
            exit_hook = 1;
            atexit(live_at_exit);
        }
    }
}

void live_tick(uint64_t now_ms, const live_src *s)
{
    if (now_ms - last_ms < 1000 && live_pid)
        return;
    last_ms = now_ms;
    /* a fork, or the next in-process recording (inproc.c) */
    if (live_pid != getpid() || strcmp(live_pattern, g_cfg.output))
        live_reset();
    if (live_dir[0] && !registered && snap_path[0]) {
        live_register(live_dir);
        registered = 1;
    }
    if (g_cfg.mode != MODE_RING || !live_path[0])
        return;
    scan_ring(s);
    if (!live_dir[0] && !wanted())
        return;
    live_hand_over(s);
}

/* The recorder's writer thread: everything slow happens here.
 *
 * It drains the hot-path queue in ticket order and, per event:
 *   1. updates the live set (the one state model, format/state.h, that
 *      every reader of the file applies too) and the per-device counters,
 *      and fills in what the hot path could not know (a free's size and
 *      device, from the allocation it frees);
 *   2. stream mode: writes the event line (after the stack, string, device
 *      and module lines it refers to, each written once); ring mode: keeps it
 *      in a ring of the last N events (the oldest is overwritten and counted
 *      as dropped).
 * Timers: stream mode flushes the file every flush_ms; both modes sample
 * the counters every counters_ms (stream: a "counters" line when something
 * changed; ring: a series kept for the whole run, halved in resolution when
 * it gets long, so an OOM at hour 6 still shows six hours).
 *
 * Dumps (at OOM per dump_on_oom, on the dump signal, through memsnap_dump(),
 * at exit): stream mode writes a "state" block (every live object) into the
 * stream and flushes; at exit it also writes "sym" lines for every IP (when
 * symbolize is on) and a trailer.  Ring mode writes a complete snapshot to
 * a temporary file in the target folder and renames it over the target.
 * Every file is created new under a temporary name in the target folder
 * and renamed over the target (stream mode: right after its header, then
 * written on in place), as util/outfile.h says for every file memsnap
 * writes; a symbolic link at the path is refused (OUTFILE_REFUSE_LINK:
 * outfile.h says why the recorder differs from the commands there).
 *
 * Failed frees: the hot path commits a free before the driver call; when
 * the driver refuses it a free_error follows, and the state model puts the
 * object back (format/state.h says by which rule, and why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stacks.h"
#include "util/outfile.h"
#include "pathpat.h"
#include "pyframes.h"
#include "recorder.h"
#include "format/state.h"
#include "util/u64map.h"

/* ---- live state ----------------------------------------------------------------------- */

/* The live set is the one state model's (format/state.h: what an event does
 * to live memory is decided there, for the recorder and every reader
 * alike), fed every event in order on this thread.  The per-device counters
 * (counters lines, memsnap_totals_get) follow its changes through an
 * observer: atomics, because the program's threads read them. */

typedef struct counters_dev {
    _Atomic uint64_t reserved, allocated, async, managed, host, vmm_mapped;
} counters_dev;

/* Index 0 is "device -1" (host / unknown), device d is d + 1. */
static counters_dev cnt[MSNAP_MAX_DEVICES + 1];

static counters_dev *cdev(int dev)
{
    if (dev < -1 || dev >= MSNAP_MAX_DEVICES)
        dev = -1;
    return &cnt[dev + 1];
}

static _Atomic uint64_t *counter_for(int kind, int dev)
{
    counters_dev *c = cdev(dev);
    switch (kind) {
    case MSNAP_A_ALLOC: return &c->reserved;
    case MSNAP_A_VMM_CREATE: return dev >= 0 ? &c->reserved : &c->host;
    case MSNAP_A_ASYNC_ALLOC: return &c->async;
    case MSNAP_A_MANAGED_ALLOC: return &c->managed;
    case MSNAP_A_HOST_ALLOC: return &c->host;
    case MSNAP_A_VMM_MAP: return &c->vmm_mapped;
    case MSNAP_A_BLOCK_ALLOC: return &c->allocated;
    default: return NULL;
    }
}

/* The device ordinal of a state slot (the host slot is device -1). */
static int device_of(int slot)
{
    return slot == MSNAP_ST_HOST ? -1 : slot;
}

/* The state's observer: a change of live memory moves its counter. */
static int count_change(void *ctx, const msnap_state *st, const msnap_obj *o, int sign)
{
    (void)ctx;
    (void)st;
    _Atomic uint64_t *c = counter_for(o->kind, device_of(o->device));
    if (c && sign > 0)
        atomic_fetch_add_explicit(c, o->size, memory_order_relaxed);
    else if (c)
        atomic_fetch_sub_explicit(c, o->size, memory_order_relaxed);
    return 0;
}

#define LIVE_INIT {.obs = {.after = count_change}, .no_sites = 1}
static msnap_state live = LIVE_INIT;

/* Feeds e to the live set and fills in what the hot path could not know: a
 * free's size and device (the object it removed), a mapping's device (its
 * handle's), the size of a block whose free was requested (it stays live).
 * Out of memory, an object is not kept, as any reader would then. */
static void apply(msnap_event *e)
{
    if (e->action == MSNAP_A_VMM_MAP) {
        const msnap_obj *h = msnap_state_find(&live, MSNAP_SP_PHYS, e->aux);
        if (h)
            e->device = (int16_t)device_of(h->device);
    }
    msnap_state_event(&live, e);
    const msnap_obj *freed = &live.freed;   /* the first object e removed */
    switch (e->action) {
    case MSNAP_A_FREE: case MSNAP_A_ASYNC_FREE: case MSNAP_A_HOST_FREE:
    case MSNAP_A_VMM_RELEASE: case MSNAP_A_BLOCK_FREE:
        if (freed->kind) {
            e->size = freed->size;
            e->device = (int16_t)device_of(freed->device);
        }
        break;
    case MSNAP_A_VMM_UNMAP:
        if (freed->kind)
            e->device = (int16_t)device_of(freed->device);
        break;
    case MSNAP_A_BLOCK_FREE_REQUESTED: {
        const msnap_obj *b = msnap_state_find(&live, MSNAP_SP_BLOCK, e->addr);
        if (b)
            e->size = b->size;
        break;
    }
    default:
        break;
    }
}

/* ---- output ------------------------------------------------------------------------------ */

static msnap_out *out;              /* stream mode: the open file */
static char out_path[PATH_MAX];
static uint64_t dump_count;         /* %n */
static uint64_t events_written, events_dropped;
static char line[1 << 16];          /* one formatted line */

/* Expands the output pattern for dump number n.  0, or -1 (too long). */
static int expand_path(char *dst, size_t cap, uint64_t n)
{
    return pathpat_expand(g_cfg.output, (long)getpid(), n, core_t0_unix_ns() / 1000000000ull,
                          dst, cap);
}

static int put(msnap_out *o, size_t n)
{
    return n ? msnap_out_write(o, line, n) : 0;
}

static void read_cmdline(char **argv_buf, const char **argv, int *argc, int max)
{
    *argc = 0;
    *argv_buf = NULL;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return;
    char *buf = malloc(65536);
    if (!buf) {
        fclose(f);
        return;
    }
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i < n && *argc < max; i += strlen(buf + i) + 1)
        argv[(*argc)++] = buf + i;
    *argv_buf = buf;
}

static int write_header(msnap_out *o, int with_devices)
{
    static msnap_header h;
    memset(&h, 0, sizeof h);
    h.major = MSNAP_FORMAT_MAJOR;
    h.minor = MSNAP_FORMAT_MINOR;
    h.pid = getpid();
    if (gethostname(h.host, sizeof h.host) != 0)
        snprintf(h.host, sizeof h.host, "unknown");
    h.host[sizeof h.host - 1] = 0;
    const char *argv[256];
    char *argv_buf;
    read_cmdline(&argv_buf, argv, &h.argc, 256);
    h.argv = argv;
    snprintf(h.clock, sizeof h.clock, "CLOCK_MONOTONIC");
    h.t0_unix_ns = core_t0_unix_ns();
    snprintf(h.mode, sizeof h.mode, "%s", g_cfg.mode == MODE_RING ? "ring" : "stream");
    h.has_rank = g_cfg.has_rank;
    h.rank = g_cfg.rank;
    char settings[1024];
    h.settings_json = config_to_json(settings, sizeof settings, g_inproc) ? settings : NULL;
    if (with_devices)
        for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
            if (core_device_ready(d))
                h.devices[h.ndevices++] = g_devices[d].info;
    /* The header holds the whole command line (up to 64 KiB, escaped): format
     * it into a buffer of its own; if even that is too small, drop argv
     * rather than the header. */
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    int rc = -1;
    if (buf) {
        size_t n = msnap_fmt_header_compact(buf, cap, &h);
        if (!n) {
            h.argc = 0;
            n = msnap_fmt_header_compact(buf, cap, &h);
        }
        rc = n ? msnap_out_write(o, buf, n) : -1;
        free(buf);
    }
    free(argv_buf);
    return rc;
}

/* ---- what has been written to the current file (stream mode) ----------------------------- */

static uint8_t *stack_done;          /* bitmap by stack id */
static uint64_t stack_done_cap;      /* bits */
static uint8_t *str_done;
static uint64_t str_done_cap;
static uint64_t devices_done;        /* bitmap */
static u64map modules_done;          /* base -> 1 */
static u64map pysyms_done;           /* Python stack entry -> 1 (sym line written) */
static unsigned long long modules_gen = ~0ull; /* loader adds+subs when last written */

static int bit_test_set(uint8_t **bm, uint64_t *cap, uint64_t i)
{
    if (i >= *cap) {
        uint64_t ncap = *cap ? *cap : 4096;
        while (ncap <= i)
            ncap *= 2;
        uint8_t *n = realloc(*bm, ncap / 8);
        if (!n)
            return 1;        /* pretend written: never loop on failure */
        memset(n + *cap / 8, 0, (ncap - *cap) / 8);
        *bm = n;
        *cap = ncap;
    }
    int was = ((*bm)[i / 8] >> (i % 8)) & 1;
    (*bm)[i / 8] |= (uint8_t)(1u << (i % 8));
    return was;
}

static void written_reset(void)
{
    free(stack_done);
    stack_done = NULL;
    stack_done_cap = 0;
    free(str_done);
    str_done = NULL;
    str_done_cap = 0;
    devices_done = 0;
    u64map_free(&modules_done);
    memset(&modules_done, 0, sizeof modules_done);
    u64map_free(&pysyms_done);
    memset(&pysyms_done, 0, sizeof pysyms_done);
    modules_gen = ~0ull;
}

static int module_cb(const msnap_module *m, void *ctx)
{
    msnap_out *o = ctx;
    if (u64map_get(&modules_done, 0, m->base ^ m->size))
        return 0;
    u64map_put(&modules_done, 0, m->base ^ m->size, 1);
    return put(o, msnap_fmt_module(line, sizeof line, m));
}

static int gen_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    unsigned long long *g = ctx;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *g = info->dlpi_adds + info->dlpi_subs;
    return 1;
}

/* Module lines for every module not yet written; cheap when nothing was
 * loaded or unloaded since the last call. */
static void write_modules(msnap_out *o)
{
    unsigned long long g = 0;
    core_dl_lock();                  /* not while fork copies the loader's lock */
    dl_iterate_phdr(gen_cb, &g);
    if (g != modules_gen || g == 0) {
        msnap_self_modules(module_cb, o);
        modules_gen = g;
    }
    core_dl_unlock();
}

/* The sym line of Python frame ip (named from pyframes.c's copy), or of
 * an autograd frame (the node's name, interned by memsnap_torch_node_id). */
static void write_python_sym(msnap_out *o, uint64_t ip)
{
    msnap_symbol sym = {.ip = ip};
    if (msnap_ip_is_autograd(ip)) {
        sym.function = core_str_get((uint32_t)ip);
        sym.file = MSNAP_AUTOGRAD_FILE;
        sym.line = 0;
        sym.offset = 0;
    } else {
        pyframes_name(ip, &sym.function, &sym.file, &sym.line, &sym.offset);
    }
    put(o, msnap_fmt_symbol(line, sizeof line, &sym));
}

/* The stack line, then a sym line for each of its Python (and autograd)
 * frames not yet named in this file: they are named at once, whatever the
 * symbolize setting, since nothing offline could name them. */
static void write_stack(msnap_out *o, uint32_t id)
{
    const uint64_t *ips;
    int depth = core_stack_get(id, &ips);
    if (depth <= 0)
        return;
    msnap_stack s = {.id = id, .depth = depth, .ips = ips};
    put(o, msnap_fmt_stack(line, sizeof line, &s));
    for (int i = 0; i < depth; i++) {
        if (!msnap_ip_is_python(ips[i]) || u64map_get(&pysyms_done, 0, ips[i]))
            continue;
        u64map_put(&pysyms_done, 0, ips[i], 1);
        write_python_sym(o, ips[i]);
    }
}

static void write_str(msnap_out *o, uint32_t id)
{
    msnap_str s = {.id = id, .s = core_str_get(id)};
    put(o, msnap_fmt_str(line, sizeof line, &s));
}

static void write_devices(msnap_out *o)
{
    uint64_t owed = atomic_load_explicit(&g_devices_ready_mask, memory_order_acquire) &
                    ~devices_done;
    devices_done |= owed;
    for (; owed; owed &= owed - 1)
        put(o, msnap_fmt_device(line, sizeof line, &g_devices[__builtin_ctzll(owed)].info));
}

static int uses_str(const msnap_event *e)
{
    return e->action == MSNAP_A_NVTX_PUSH || e->action == MSNAP_A_NVTX_MARK ||
           e->action == MSNAP_A_DUMP;
}

/* Writes what e refers to (once per file), then e. */
static void write_event(msnap_out *o, const msnap_event *e)
{
    if (e->device >= 0 && e->device < 64 && !((devices_done >> e->device) & 1))
        write_devices(o);
    if (e->stack && !bit_test_set(&stack_done, &stack_done_cap, e->stack)) {
        write_modules(o);    /* code may have been loaded since the last stack */
        write_stack(o, e->stack);
    }
    if (uses_str(e) && e->aux && !bit_test_set(&str_done, &str_done_cap, e->aux))
        write_str(o, (uint32_t)e->aux);
    put(o, msnap_fmt_event(line, sizeof line, e));
    events_written++;
}

/* What the driver says is used on each device the program has used
 * (nvml.c), into du (0 where it cannot be read). */
static void read_device_used(uint64_t du[MSNAP_MAX_DEVICES])
{
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (!core_device_ready(d) ||
            nvml_device_used(g_devices[d].pci_bus_id, &du[d]) != 0)
            du[d] = 0;
}

/* The counters of device d (-1: host) at time t, with what the driver
 * says is used on a device the program has used: du[d] when du is given
 * (read before the events up to t were drained: sample_counters), else
 * read now (nvml.c; 0 when it cannot be read). */
static msnap_counters counters_of(int d, uint64_t t, const uint64_t *du)
{
    counters_dev *c = cdev(d);
    msnap_counters k = {
        .t_ns = t, .device = d,
        .reserved = atomic_load(&c->reserved), .allocated = atomic_load(&c->allocated),
        .async = atomic_load(&c->async), .managed = atomic_load(&c->managed),
        .host = atomic_load(&c->host), .vmm_mapped = atomic_load(&c->vmm_mapped),
    };
    if (d >= 0 && d < MSNAP_MAX_DEVICES && du)
        k.device_used = du[d];
    else if (d >= 0 && d < MSNAP_MAX_DEVICES &&
             core_device_ready(d) &&
             nvml_device_used(g_devices[d].pci_bus_id, &k.device_used) != 0)
        k.device_used = 0;
    return k;
}

static void write_counters_line(msnap_out *o, uint64_t t, const uint64_t *du)
{
    for (int d = -1; d < MSNAP_MAX_DEVICES; d++) {
        msnap_counters k = counters_of(d, t, du);
        if (d >= 0 && !core_device_ready(d) && !k.reserved && !k.async &&
            !k.managed && !k.allocated && !k.vmm_mapped)
            continue;
        if (d < 0 && !k.host && !k.reserved)
            continue;
        put(o, msnap_fmt_counters(line, sizeof line, &k));
    }
}

static void write_state(msnap_out *o, uint64_t t)
{
    put(o, msnap_fmt_state_begin(line, sizeof line, t, live.map.n));
    for (size_t i = 0; i < live.map.cap; i++) {
        if (!live.map.slots[i].used)
            continue;
        const msnap_obj *b = &live.objs[live.map.slots[i].value];
        msnap_live l = {.kind = b->kind, .device = device_of(b->device), .addr = b->addr,
                        .size = b->size, .stream = b->stream,
                        .aux = b->kind == MSNAP_A_BLOCK_ALLOC ? 0 : b->aux,
                        .stack = b->stack, .t_ns = b->t_ns};
        if (l.stack && !bit_test_set(&stack_done, &stack_done_cap, l.stack))
            write_stack(o, l.stack);
        put(o, msnap_fmt_live(line, sizeof line, &l));
    }
}

/* "sym" lines for every IP of every stack written to this file. */
static void write_symbols(msnap_out *o)
{
    if (!g_cfg.symbolize)
        return;
    const memsnap_stacks_api *api = g_stacks_api;   /* stacks.h */
    msnap_symbolizer *s = api ? api->sym_new() : NULL;
    if (!s)
        return;
    api->sym_add_self(s);
    u64map seen = {0};
    uint32_t n = core_stack_count();
    for (uint32_t id = 1; id <= n; id++) {
        if (id >= stack_done_cap || !((stack_done[id / 8] >> (id % 8)) & 1))
            continue;
        const uint64_t *ips;
        int depth = core_stack_get(id, &ips);
        for (int i = 0; i < depth; i++) {
            /* Python frames were named with their stack line. */
            if (msnap_ip_is_python(ips[i]) || u64map_get(&seen, 0, ips[i]))
                continue;
            u64map_put(&seen, 0, ips[i], 1);
            msnap_symbol sym;
            api->sym_resolve_frame(s, ips[i], 1, &sym);
            sym.ip = ips[i];
            put(o, msnap_fmt_symbol(line, sizeof line, &sym));
        }
    }
    u64map_free(&seen);
    api->sym_free(s);
}

static void write_trailer(msnap_out *o, const char *reason)
{
    msnap_trailer t = {.t_ns = core_now_ns(), .events = events_written,
                       .dropped = events_dropped,
                       .stacks_dropped = core_stacks_dropped(), .reason = reason};
    put(o, msnap_fmt_trailer(line, sizeof line, &t));
}

/* ---- ring mode --------------------------------------------------------------------------- */

static msnap_event *ring;
static uint64_t ring_n;             /* events ever put in */
static msnap_counters *series;
static size_t series_n, series_cap;
static uint64_t series_every = 1;   /* keep one sample in series_every */
static uint64_t series_tick;

static void ring_put(const msnap_event *e)
{
    if (!ring) {
        ring = malloc(g_cfg.ring_events * sizeof *ring);
        if (!ring)
            return;
    }
    if (ring_n >= g_cfg.ring_events)
        events_dropped++;
    ring[ring_n++ % g_cfg.ring_events] = *e;
}

static void series_sample(uint64_t t, const uint64_t *du)
{
    if (series_tick++ % series_every)
        return;
    for (int d = -1; d < MSNAP_MAX_DEVICES; d++) {
        msnap_counters k = counters_of(d, t, du);
        if (d >= 0 && !core_device_ready(d))
            continue;
        if (d < 0 && !k.host)
            continue;
        if (series_n == series_cap) {
            if (series_cap >= (1u << 20)) {
                /* Long run: keep every other sample, sample half as often. */
                size_t j = 0;
                for (size_t i = 0; i < series_n; i += 2)
                    series[j++] = series[i];
                series_n = j;
                series_every *= 2;
            } else {
                size_t ncap = series_cap ? series_cap * 2 : 4096;
                msnap_counters *ns = realloc(series, ncap * sizeof *ns);
                if (!ns)
                    return;
                series = ns;
                series_cap = ncap;
            }
        }
        series[series_n++] = k;
    }
}

/* Writes a complete ring snapshot to the output path (temp + rename). */
static int ring_dump(const char *reason)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    if (expand_path(path, sizeof path, dump_count) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = outfile_create(path, OUTFILE_REFUSE_LINK, tmp, sizeof tmp);
    if (fd < 0)
        return -1;
    msnap_out *o = msnap_out_fdopen(fd, g_cfg.zstd_level);
    if (!o) {
        close(fd);
        outfile_discard(tmp);
        return -1;
    }
    written_reset();
    uint64_t saved_written = events_written;
    events_written = 0;
    int rc = write_header(o, 1);
    write_devices(o);
    write_modules(o);
    for (size_t i = 0; i < series_n; i++)
        put(o, msnap_fmt_counters(line, sizeof line, &series[i]));
    uint64_t n = ring_n < g_cfg.ring_events ? ring_n : g_cfg.ring_events;
    for (uint64_t i = ring_n - n; i < ring_n; i++)
        write_event(o, &ring[i % g_cfg.ring_events]);
    uint64_t t = core_now_ns();
    write_counters_line(o, t, NULL);
    write_state(o, t);
    write_symbols(o);
    write_trailer(o, reason);
    events_written = saved_written;
    if (msnap_out_close(o) != 0)
        rc = -1;
    if (rc == 0 && outfile_commit(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        outfile_discard(tmp);
        return -1;
    }
    snprintf(out_path, sizeof out_path, "%s", path);
    dump_count++;
    return 0;
}

/* ---- the thread ---------------------------------------------------------------------------- */

static pthread_t thread;
static _Atomic int stop_req;
static _Atomic int sig_dump_req;
static _Atomic uint64_t g_processed;        /* tickets fully processed */
static int oom_dumped;

/* API dump requests: one at a time. */
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t api_req, api_done;
static const char *api_reason;
static int api_result;

static void futex_wait(_Atomic uint32_t *w, uint32_t val, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

/* A dump of the current state, whatever the mode. */
static int do_dump(const char *reason)
{
    if (g_cfg.mode == MODE_RING)
        return ring_dump(reason);
    if (!out)
        return -1;
    msnap_event d;
    memset(&d, 0, sizeof d);
    d.t_ns = core_now_ns();
    d.action = MSNAP_A_DUMP;
    d.api = MSNAP_API_RECORDER;
    d.device = -1;
    d.tid = core_tid();
    d.aux = core_intern(reason);
    write_event(out, &d);
    write_counters_line(out, d.t_ns, NULL);
    write_state(out, d.t_ns);
    dump_count++;
    return msnap_out_flush(out);
}

static void process(msnap_event *e)
{
    e->t_ns = core_stamp_to_ns(e->t_ns);   /* core.c: the hot path's stamp */
    apply(e);
    if (g_cfg.mode == MODE_STREAM) {
        if (out)
            write_event(out, e);
    } else {
        ring_put(e);
    }
    if (e->action == MSNAP_A_OOM) {
        /* PyTorch's OOM follows the driver's (PyTorch frees its cache and
         * retries first), and is the one the program sees: with "first" it
         * gets a dump of its own. */
        int bit = e->api == MSNAP_API_TORCH ? 2 : 1;
        int want = g_cfg.oom_dump == OOM_DUMP_EVERY ||
                   (g_cfg.oom_dump == OOM_DUMP_FIRST && !(oom_dumped & bit));
        if (want) {
            oom_dumped |= bit;
            if (do_dump("oom") != 0)
                fprintf(stderr, "memsnap: OOM dump failed: %s\n", strerror(errno));
        }
    }
}

/* Processes every committed event; returns how many. */
/* Processes the queued events in order, up to the first stamped after
 * t_max (ns since t0; UINT64_MAX: all of them).  Returns how many. */
static uint64_t drain_upto(uint64_t t_max)
{
    uint64_t n = 0;
    uint64_t t = atomic_load_explicit(&g_queue_tail, memory_order_relaxed);
    for (;;) {
        core_slot *s = &g_queue[t & g_queue_mask];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != t + 1)
            break;
        if (t_max != UINT64_MAX && core_stamp_to_ns(s->ev.t_ns) > t_max)
            break;
        msnap_event e = s->ev;
        atomic_store_explicit(&s->seq, t + g_queue_mask + 1, memory_order_release);
        t++;
        atomic_store_explicit(&g_queue_tail, t, memory_order_release);
        process(&e);
        atomic_store_explicit(&g_processed, t, memory_order_release);
        n++;
    }
    return n;
}

static uint64_t drain(void)
{
    return drain_upto(UINT64_MAX);
}

/* Reads the driver's used figures into du and the moment they describe
 * into *t when no driver memory call is in flight from before *t until
 * after the read (g_memops_*, hooks.c), trying up to eight times over
 * about 6 ms; when no try settles, du is all 0: the sample carries no
 * driver figure rather than one that disagrees with its totals.  A call
 * in flight is the one race the order below cannot close: a free is
 * stamped before the driver frees, so one stamped after *t but done
 * before the read is in the driver's figure and not in the events up to
 * *t (CI's two-rank dry run, loaded: a 150 MiB block missing from 500 MiB
 * "not explained"). */
void writer_device_used_settled(uint64_t du[MSNAP_MAX_DEVICES], uint64_t *t)
{
    static const long pause_us[] = {100, 200, 400, 800, 1000, 1500, 2000};
    for (int i = 0;; i++) {
        uint64_t done = atomic_load(&g_memops_done);
        uint64_t begun = atomic_load(&g_memops_begun);
        *t = core_now_ns();
        read_device_used(du);
        if (begun == done && atomic_load(&g_memops_begun) == begun)
            return;
        if (i == (int)(sizeof pause_us / sizeof pause_us[0])) {
            memset(du, 0, MSNAP_MAX_DEVICES * sizeof *du);
            return;
        }
        struct timespec ts = {0, pause_us[i] * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The periodic sample (stream: a counters line when something happened
 * since the last; ring: the series).  The driver's used figures are read
 * first, then the events stamped before that read are drained, then the
 * recorder's totals are taken: both halves of the sample describe one
 * moment.  Taken the other way round, the totals ran ahead of or behind
 * the driver by whatever the program did between the drain and the read
 * (on the simulated device, a freed 152 MiB block not yet drained showed
 * as 348 MiB "not explained" of a 500 MiB context).  Returns whether a
 * line was written. */
static int sample_counters(uint64_t last_counted)
{
    uint64_t du[MSNAP_MAX_DEVICES];
    uint64_t t;
    writer_device_used_settled(du, &t);
    drain_upto(t);
    if (g_cfg.mode == MODE_RING)
        series_sample(t, du);
    else if (out && atomic_load(&g_processed) != last_counted)
        write_counters_line(out, t, du);
    else
        return 0;
    return 1;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* How long the writer may sleep with nothing to do: until its next timer
 * (the stream's flush, the counters' sample), at least 1 ms.  Events do not
 * need it awake: a producer wakes it when the queue is a quarter full, and
 * whoever waits for it (a dump, memsnap_totals_get, an in-process stop)
 * wakes it too.  It used to wake every 10 ms whatever the timers said: 100
 * wake-ups a second on a core of the program's. */
static int idle_wait_ms(uint64_t now, uint64_t last_flush, uint64_t last_counters)
{
    uint64_t due = last_counters + (uint64_t)g_cfg.counters_ms;
    if (out && last_flush + (uint64_t)g_cfg.flush_ms < due)
        due = last_flush + (uint64_t)g_cfg.flush_ms;
    return due <= now + 1 ? 1 : (int)(due - now);
}

/* The writer's own thread: named, so that top and a profiler tell it
 * apart from the program's, and pinned where MEMSNAP_WRITER_CPUS says (off
 * the cores a training step's threads run on, say); CPUs it may not use
 * leave it where it was, with one line. */
static void writer_thread_setup(void)
{
    pthread_setname_np(pthread_self(), "memsnap-writer");
    if (!g_cfg.writer_cpus[0])
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0; c < 1024 && c < CPU_SETSIZE; c++)
        if (g_cfg.writer_mask[c / 64] >> (c % 64) & 1)
            CPU_SET(c, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e && !g_cfg.quiet)
        fprintf(stderr, "memsnap: MEMSNAP_WRITER_CPUS=%s: the writer thread cannot run there "
                        "(%s); it runs where the program's threads may\n",
                g_cfg.writer_cpus, strerror(e));
}

static void *writer_main(void *arg)
{
    (void)arg;
    writer_thread_setup();
    uint64_t last_flush = wall_ms(), last_counters = 0;
    uint64_t last_counted = 0;   /* no counters line before the first event */
    for (;;) {
        uint32_t wake = atomic_load(&g_writer_wake);
        core_clock_calibrate();
        uint64_t n = drain();
        uint64_t now = wall_ms();
        if (atomic_exchange(&sig_dump_req, 0)) {
            if (do_dump("signal") != 0)
                fprintf(stderr, "memsnap: dump on signal failed: %s\n", strerror(errno));
            else if (!g_cfg.quiet && g_cfg.mode == MODE_RING)
                fprintf(stderr, "memsnap: dump written to %s\n", out_path);
        }
        if (atomic_load(&api_req) != atomic_load(&api_done)) {
            api_result = do_dump(api_reason ? api_reason : "api");
            atomic_fetch_add(&api_done, 1);
        }
        if (now - last_counters >= (uint64_t)g_cfg.counters_ms) {
            sample_counters(last_counted);
            last_counted = atomic_load(&g_processed);
            last_counters = now;
        }
        live_tick(now, &(live_src){&live, ring, ring_n, series, series_n, events_dropped});
        if (out && now - last_flush >= (uint64_t)g_cfg.flush_ms) {
            msnap_out_flush(out);
            last_flush = now;
        }
        if (atomic_load(&stop_req)) {
            drain();
            break;
        }
        if (n == 0)
            futex_wait(&g_writer_wake, wake, idle_wait_ms(now, last_flush, last_counters));
    }
    return NULL;
}

int writer_start(void)
{
    events_written = events_dropped = 0;
    oom_dumped = 0;
    atomic_store(&stop_req, 0);
    /* tickets go on from where an earlier recording of this process left
     * them (inproc.c); 0 at the first start and after fork */
    atomic_store(&g_processed, atomic_load(&g_queue_tail));
    if (g_cfg.mode == MODE_STREAM) {
        if (expand_path(out_path, sizeof out_path, 0) != 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        /* The stream is written to a new file that is renamed to the
         * output path as soon as its header is on disk, and then written
         * on in place: a SIGKILL at any later moment leaves a readable
         * snapshot at the path, and an existing file (or a hard link to
         * someone else's) is replaced, never written through. */
        char tmp[PATH_MAX + 32];
        int fd = outfile_create(out_path, OUTFILE_REFUSE_LINK, tmp, sizeof tmp);
        if (fd < 0) {
            int e = errno;
            fprintf(stderr, "memsnap: cannot create %s: %s\n", out_path,
                    e == ELOOP ? "it is a symbolic link" : strerror(e));
            errno = e;
            return -1;
        }
        out = msnap_out_fdopen(fd, g_cfg.zstd_level);
        if (!out) {
            close(fd);
            outfile_discard(tmp);
            return -1;
        }
        written_reset();
        if (write_header(out, 0) != 0 || msnap_out_flush(out) != 0 ||
            outfile_commit(tmp, out_path) != 0) {
            int e = errno;
            fprintf(stderr, "memsnap: cannot create %s: %s\n", out_path, strerror(e));
            outfile_discard(tmp);
            msnap_out_close(out);
            out = NULL;
            errno = e;
            return -1;
        }
    } else {
        /* Ring: nothing is written until a dump, but a bad folder is an
         * error now, not at the OOM six hours later. */
        char path[PATH_MAX], tmp[PATH_MAX + 32];
        if (expand_path(path, sizeof path, 0) != 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = outfile_create(path, OUTFILE_REFUSE_LINK, tmp, sizeof tmp);
        if (fd < 0) {
            int e = errno;
            fprintf(stderr, "memsnap: cannot write in the folder of %s: %s\n", path,
                    e == ELOOP ? "it is a symbolic link" : strerror(e));
            errno = e;
            return -1;
        }
        close(fd);
        outfile_discard(tmp);
        ring = malloc(g_cfg.ring_events * sizeof *ring);
        if (!ring)
            return -1;
        ring_n = 0;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

void writer_stop_at_exit(void)
{
    writer_stop(!g_cfg.quiet, NULL);
}

int writer_stop(int say, uint64_t *events)
{
    int rc = 0;
    atomic_store(&stop_req, 1);
    core_wake_writer();
    pthread_join(thread, NULL);
    if (events)
        *events = 0;
    if (g_cfg.mode == MODE_STREAM) {
        if (!out)
            return 0;
        if (g_cfg.dump_at_exit) {
            write_counters_line(out, core_now_ns(), NULL);
            write_state(out, core_now_ns());
        }
        write_symbols(out);
        write_trailer(out, "exit");
        rc = msnap_out_close(out);
        out = NULL;
        if (events)
            *events = events_written;
        if (rc != 0)
            fprintf(stderr, "memsnap: error writing %s: %s\n", out_path, strerror(errno));
        else if (say)
            fprintf(stderr, "memsnap: %llu events written to %s\n",
                    (unsigned long long)events_written, out_path);
    } else if (g_cfg.dump_at_exit) {
        uint64_t kept = ring_n < g_cfg.ring_events ? ring_n : g_cfg.ring_events;
        if (events)
            *events = kept;
        rc = ring_dump("exit");
        if (rc != 0)
            fprintf(stderr, "memsnap: exit dump failed: %s\n", strerror(errno));
        else if (say)
            fprintf(stderr, "memsnap: snapshot (last %llu events) written to %s\n",
                    (unsigned long long)kept, out_path);
    }
    return rc;
}

void writer_forget(void)
{
    msnap_state_free(&live);
    live = (msnap_state)LIVE_INIT;
    for (int d = 0; d <= MSNAP_MAX_DEVICES; d++) {
        atomic_store(&cnt[d].reserved, 0);
        atomic_store(&cnt[d].allocated, 0);
        atomic_store(&cnt[d].async, 0);
        atomic_store(&cnt[d].managed, 0);
        atomic_store(&cnt[d].host, 0);
        atomic_store(&cnt[d].vmm_mapped, 0);
    }
    free(ring);
    ring = NULL;
    ring_n = 0;
    free(series);
    series = NULL;
    series_n = series_cap = 0;
    series_every = 1;
    series_tick = 0;
    dump_count = 0;
}

void writer_request_signal_dump(void)
{
    atomic_store(&sig_dump_req, 1);
    atomic_fetch_add(&g_writer_wake, 1);
    syscall(SYS_futex, (uint32_t *)&g_writer_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void writer_sync(uint64_t upto)
{
    while (atomic_load_explicit(&g_processed, memory_order_acquire) < upto) {
        core_wake_writer();
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

int writer_dump_sync(const char *reason)
{
    pthread_mutex_lock(&api_lock);
    writer_sync(atomic_load(&g_queue_head.v));
    api_reason = reason;
    uint64_t want = atomic_fetch_add(&api_req, 1) + 1;
    while (atomic_load(&api_done) < want) {
        core_wake_writer();
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    int rc = api_result;
    pthread_mutex_unlock(&api_lock);
    return rc;
}

int writer_totals(int device, uint64_t o[6])
{
    if (device < -1 || device >= MSNAP_MAX_DEVICES)
        return -1;
    counters_dev *c = cdev(device);
    o[0] = atomic_load(&c->reserved);
    o[1] = atomic_load(&c->allocated);
    o[2] = atomic_load(&c->async);
    o[3] = atomic_load(&c->managed);
    o[4] = atomic_load(&c->vmm_mapped);
    o[5] = atomic_load(&g_processed);
    return 0;
}

/* Child after fork: the writer thread is gone, and it may have been in the
 * middle of changing any of its structures (a map being resized, a buffer
 * half written), and the file is the parent's.  So nothing is freed, closed
 * or flushed here: every structure is abandoned (a one-time leak in the
 * child) and the child starts from zero at its first event. */
void writer_after_fork_child(void)
{
    out = NULL;
    nvml_after_fork_child();
    /* A driver call another thread of the parent was in never finishes
     * here: only the forking thread came along. */
    atomic_store(&g_memops_done, atomic_load(&g_memops_begun));
    live = (msnap_state)LIVE_INIT;   /* the parent's is abandoned */
    for (int d = 0; d <= MSNAP_MAX_DEVICES; d++) {
        atomic_store(&cnt[d].reserved, 0);
        atomic_store(&cnt[d].allocated, 0);
        atomic_store(&cnt[d].async, 0);
        atomic_store(&cnt[d].managed, 0);
        atomic_store(&cnt[d].host, 0);
        atomic_store(&cnt[d].vmm_mapped, 0);
    }
    stack_done = NULL;
    stack_done_cap = 0;
    str_done = NULL;
    str_done_cap = 0;
    devices_done = 0;
    memset(&modules_done, 0, sizeof modules_done);
    memset(&pysyms_done, 0, sizeof pysyms_done);
    modules_gen = ~0ull;
    ring = NULL;
    ring_n = 0;
    series = NULL;
    series_n = series_cap = 0;
    series_every = 1;
    dump_count = 0;
    pthread_mutex_init(&api_lock, NULL);
    atomic_store(&api_req, 0);
    atomic_store(&api_done, 0);
}

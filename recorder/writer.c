/* The recorder's writer thread: everything slow happens here.
 *
 * It drains the hot-path queue in ticket order and, per event:
 *   1. updates the live state (one map per kind of object: allocations,
 *      VA reservations, physical handles, mappings, allocator blocks) and the
 *      per-device counters, and fills in what the hot path could not know
 *      (a free's size and device, from the allocation it frees);
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
 * Every file is created new (O_EXCL; mode 0666 less the umask, like any
 * file the program makes: outfile_open_new, format/outfile.h) under a
 * temporary name in the target folder and renamed over the target (stream
 * mode: right after its header, then written on in place), so an existing
 * file or a hard link at the path is replaced, never written through; a
 * symlink there is refused; a device or FIFO there (/dev/null, a named
 * pipe) is written in place.
 *
 * Failed frees: the hot path commits a free before the driver call; when
 * the driver refuses it a free_error follows, and the writer puts the object
 * back (it keeps the last few removed objects for that).
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

#include "symbolize.h"
#include "outfile.h"
#include "pathpat.h"
#include "pyframes.h"
#include "recorder.h"
#include "u64map.h"

/* ---- live state ----------------------------------------------------------------------- */

enum { TAG_ALLOC = 1, TAG_RESERVE, TAG_HANDLE, TAG_MAP, TAG_BLOCK };

typedef struct counters_dev {
    _Atomic uint64_t reserved, allocated, async, managed, host, vmm_mapped;
} counters_dev;

/* Index 0 is "device -1" (host / unknown), device d is d + 1. */
static counters_dev cnt[MSNAP_MAX_DEVICES + 1];
static u64map live;                 /* (tag, key) -> msnap_live * */
static uint64_t live_count;

#define STASH 64
static struct {
    uint32_t tag;
    uint64_t key;
    msnap_live *l;
} stash[STASH];                     /* recently removed, for free_error */
static unsigned stash_next;

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

static void live_add(uint32_t tag, uint64_t key, const msnap_event *e, int kind, uint64_t aux)
{
    msnap_live *l = malloc(sizeof *l);
    if (!l)
        return;
    l->kind = kind;
    l->device = e->device;
    l->addr = e->addr;
    l->size = e->size;
    l->stream = e->stream;
    l->aux = aux;
    l->stack = e->stack;
    l->t_ns = e->t_ns;
    uint64_t *old = u64map_get(&live, tag, key);
    if (old) {              /* the same key twice: the driver reused it */
        msnap_live *o = (msnap_live *)(uintptr_t)*old;
        _Atomic uint64_t *c = counter_for(o->kind, o->device);
        if (c)
            atomic_fetch_sub_explicit(c, o->size, memory_order_relaxed);
        free(o);
        *old = (uint64_t)(uintptr_t)l;
    } else if (u64map_put(&live, tag, key, (uint64_t)(uintptr_t)l) != 0) {
        free(l);
        return;
    } else {
        live_count++;
    }
    _Atomic uint64_t *c = counter_for(kind, l->device);
    if (c)
        atomic_fetch_add_explicit(c, l->size, memory_order_relaxed);
}

/* Removes (tag, key); returns the object (kept in the stash) or NULL. */
static msnap_live *live_remove(uint32_t tag, uint64_t key)
{
    uint64_t *v = u64map_get(&live, tag, key);
    if (!v)
        return NULL;
    msnap_live *l = (msnap_live *)(uintptr_t)*v;
    u64map_del(&live, tag, key, NULL);
    live_count--;
    _Atomic uint64_t *c = counter_for(l->kind, l->device);
    if (c)
        atomic_fetch_sub_explicit(c, l->size, memory_order_relaxed);
    unsigned i = stash_next++ % STASH;
    free(stash[i].l);
    stash[i].tag = tag;
    stash[i].key = key;
    stash[i].l = l;
    return l;
}

/* A free the driver refused: put the object back. */
static void live_restore(uint32_t tag, uint64_t key)
{
    for (unsigned n = 0; n < STASH; n++) {
        unsigned i = (stash_next - 1 - n) % STASH;
        if (!stash[i].l || stash[i].tag != tag || stash[i].key != key)
            continue;
        msnap_live *l = stash[i].l;
        stash[i].l = NULL;
        if (u64map_get(&live, tag, key) || u64map_put(&live, tag, key, (uint64_t)(uintptr_t)l)) {
            free(l);
            return;
        }
        live_count++;
        _Atomic uint64_t *c = counter_for(l->kind, l->device);
        if (c)
            atomic_fetch_add_explicit(c, l->size, memory_order_relaxed);
        return;
    }
}

/* Updates the live state for e and fills in the free's size and device. */
static void apply(msnap_event *e)
{
    msnap_live *l;
    switch (e->action) {
    case MSNAP_A_ALLOC:
    case MSNAP_A_MANAGED_ALLOC:
    case MSNAP_A_ASYNC_ALLOC:
    case MSNAP_A_HOST_ALLOC:
        live_add(TAG_ALLOC, e->addr, e, e->action, e->aux);
        break;
    case MSNAP_A_FREE:
    case MSNAP_A_ASYNC_FREE:
    case MSNAP_A_HOST_FREE:
        if ((l = live_remove(TAG_ALLOC, e->addr))) {
            e->size = l->size;
            e->device = (int16_t)l->device;
        }
        break;
    case MSNAP_A_VMM_RESERVE:
        live_add(TAG_RESERVE, e->addr, e, e->action, e->aux);
        break;
    case MSNAP_A_VMM_ADDR_FREE:
        live_remove(TAG_RESERVE, e->addr);
        break;
    case MSNAP_A_VMM_CREATE:
        live_add(TAG_HANDLE, e->aux, e, e->action, e->aux);
        break;
    case MSNAP_A_VMM_RELEASE:
        if ((l = live_remove(TAG_HANDLE, e->aux))) {
            e->size = l->size;
            e->device = (int16_t)l->device;
        }
        break;
    case MSNAP_A_VMM_MAP: {
        uint64_t *h = u64map_get(&live, TAG_HANDLE, e->aux);
        if (h)
            e->device = (int16_t)((msnap_live *)(uintptr_t)*h)->device;
        live_add(TAG_MAP, e->addr, e, e->action, e->aux);
        break;
    }
    case MSNAP_A_VMM_UNMAP: {
        /* One unmap may cover several neighbouring mappings. */
        uint64_t a = e->addr, end = e->addr + e->size;
        while (a < end && (l = live_remove(TAG_MAP, a))) {
            e->device = (int16_t)l->device;
            a += l->size ? l->size : end - a;
        }
        break;
    }
    case MSNAP_A_BLOCK_ALLOC:
        live_add(TAG_BLOCK, e->addr, e, e->action, 0);
        break;
    case MSNAP_A_BLOCK_FREE:
        if ((l = live_remove(TAG_BLOCK, e->addr))) {
            e->size = l->size;
            e->device = (int16_t)l->device;
        }
        break;
    case MSNAP_A_BLOCK_FREE_REQUESTED: {   /* still allocated: its size, kept */
        uint64_t *b = u64map_get(&live, TAG_BLOCK, e->addr);
        if (b)
            e->size = ((msnap_live *)(uintptr_t)*b)->size;
        break;
    }
    case MSNAP_A_FREE_ERROR:
        switch (e->api) {
        case MSNAP_API_cuMemRelease: live_restore(TAG_HANDLE, e->aux); break;
        case MSNAP_API_cuMemUnmap: live_restore(TAG_MAP, e->addr); break;
        case MSNAP_API_cuMemAddressFree: live_restore(TAG_RESERVE, e->addr); break;
        default: live_restore(TAG_ALLOC, e->addr); break;
        }
        break;
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

/* Creates a new file next to path, named path.tmp.XXXXXX (written into
 * tmp, of cap bytes), for writing: O_EXCL, so nothing that exists
 * (a file, a hard link to another file) is ever opened or written through;
 * the caller renames tmp over path.  A symlink already at path is refused
 * (errno ELOOP), as a planted link is more likely an attack or a mistake
 * than a wish to replace it.  A device or a FIFO at path (-o /dev/null, a
 * named pipe) is opened and written in place, never replaced: tmp is then
 * "" and there is nothing to rename.  Returns the fd, or -1 with errno set
 * (nothing is left behind). */
static int create_temp_for(const char *path, char *tmp, size_t cap)
{
    struct stat st;
    tmp[0] = 0;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            errno = ELOOP;
            return -1;
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if ((size_t)snprintf(tmp, cap, "%s.tmp.XXXXXX", path) >= cap) {
        tmp[0] = 0;
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = outfile_open_new(tmp);   /* O_CREAT | O_EXCL, 0666 less the umask */
    if (fd < 0)
        tmp[0] = 0;
    return fd;
}

/* Puts the file made by create_temp_for in place: renames tmp over path
 * (nothing to do when it was written in place).  0, or -1 with errno. */
static int publish(const char *tmp, const char *path)
{
    return tmp[0] ? rename(tmp, path) : 0;
}

/* Removes what create_temp_for made, after a failure (errno kept). */
static void discard(const char *tmp)
{
    int e = errno;
    if (tmp[0])
        unlink(tmp);
    errno = e;
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
    char settings[1024];
    config_to_json(settings, sizeof settings);
    h.settings_json = settings;
    if (with_devices)
        for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
            if (atomic_load_explicit(&g_devices[d].ready, memory_order_acquire))
                h.devices[h.ndevices++] = g_devices[d].info;
    /* The header holds the whole command line (up to 64 KiB, escaped): format
     * it into a buffer of its own; if even that is too small, drop argv
     * rather than the header. */
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    int rc = -1;
    if (buf) {
        size_t n = msnap_fmt_header(buf, cap, &h);
        if (!n) {
            h.argc = 0;
            n = msnap_fmt_header(buf, cap, &h);
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
    dl_iterate_phdr(gen_cb, &g);
    if (g == modules_gen && g != 0)
        return;
    msnap_self_modules(module_cb, o);
    modules_gen = g;
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
    for (int d = 0; d < MSNAP_MAX_DEVICES && d < 64; d++) {
        if ((devices_done >> d) & 1)
            continue;
        if (!atomic_load_explicit(&g_devices[d].ready, memory_order_acquire))
            continue;
        devices_done |= 1ull << d;
        put(o, msnap_fmt_device(line, sizeof line, &g_devices[d].info));
    }
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

/* The counters of device d (-1: host) at time t, with what the driver
 * says is used on a device the program has used (nvml.c; 0 when it cannot
 * be read). */
static msnap_counters counters_of(int d, uint64_t t)
{
    counters_dev *c = cdev(d);
    msnap_counters k = {
        .t_ns = t, .device = d,
        .reserved = atomic_load(&c->reserved), .allocated = atomic_load(&c->allocated),
        .async = atomic_load(&c->async), .managed = atomic_load(&c->managed),
        .host = atomic_load(&c->host), .vmm_mapped = atomic_load(&c->vmm_mapped),
    };
    if (d >= 0 && d < MSNAP_MAX_DEVICES &&
        atomic_load_explicit(&g_devices[d].ready, memory_order_acquire) &&
        nvml_device_used(g_devices[d].pci_bus_id, &k.device_used) != 0)
        k.device_used = 0;
    return k;
}

static void write_counters_line(msnap_out *o, uint64_t t)
{
    for (int d = -1; d < MSNAP_MAX_DEVICES; d++) {
        msnap_counters k = counters_of(d, t);
        if (d >= 0 && !atomic_load(&g_devices[d].ready) && !k.reserved && !k.async &&
            !k.managed && !k.allocated && !k.vmm_mapped)
            continue;
        if (d < 0 && !k.host && !k.reserved)
            continue;
        put(o, msnap_fmt_counters(line, sizeof line, &k));
    }
}

static void write_state(msnap_out *o, uint64_t t)
{
    put(o, msnap_fmt_state_begin(line, sizeof line, t, live_count));
    for (size_t i = 0; i < live.cap; i++) {
        if (!live.slots[i].used)
            continue;
        msnap_live *l = (msnap_live *)(uintptr_t)live.slots[i].value;
        if (l->stack && !bit_test_set(&stack_done, &stack_done_cap, l->stack))
            write_stack(o, l->stack);
        put(o, msnap_fmt_live(line, sizeof line, l));
    }
}

/* "sym" lines for every IP of every stack written to this file. */
static void write_symbols(msnap_out *o)
{
    if (!g_cfg.symbolize)
        return;
    msnap_symbolizer *s = msnap_symbolizer_new();
    if (!s)
        return;
    msnap_symbolizer_add_self(s);
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
            msnap_symbolizer_resolve_frame(s, ips[i], 1, &sym);
            sym.ip = ips[i];
            put(o, msnap_fmt_symbol(line, sizeof line, &sym));
        }
    }
    u64map_free(&seen);
    msnap_symbolizer_free(s);
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

static void series_sample(uint64_t t)
{
    if (series_tick++ % series_every)
        return;
    for (int d = -1; d < MSNAP_MAX_DEVICES; d++) {
        msnap_counters k = counters_of(d, t);
        if (d >= 0 && !atomic_load(&g_devices[d].ready))
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
    int fd = create_temp_for(path, tmp, sizeof tmp);
    if (fd < 0)
        return -1;
    msnap_out *o = msnap_out_fdopen(fd, g_cfg.zstd_level);
    if (!o) {
        close(fd);
        discard(tmp);
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
    write_counters_line(o, t);
    write_state(o, t);
    write_symbols(o);
    write_trailer(o, reason);
    events_written = saved_written;
    if (msnap_out_close(o) != 0)
        rc = -1;
    if (rc == 0 && publish(tmp, path) != 0)
        rc = -1;
    if (rc != 0) {
        discard(tmp);
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
    write_counters_line(out, d.t_ns);
    write_state(out, d.t_ns);
    dump_count++;
    return msnap_out_flush(out);
}

static void process(msnap_event *e)
{
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
static uint64_t drain(void)
{
    uint64_t n = 0;
    uint64_t t = atomic_load_explicit(&g_queue_tail, memory_order_relaxed);
    for (;;) {
        core_slot *s = &g_queue[t & g_queue_mask];
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != t + 1)
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

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *writer_main(void *arg)
{
    (void)arg;
    uint64_t last_flush = wall_ms(), last_counters = 0;
    uint64_t last_counted = 0;   /* no counters line before the first event */
    for (;;) {
        uint32_t wake = atomic_load(&g_writer_wake);
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
            uint64_t processed = atomic_load(&g_processed);
            if (g_cfg.mode == MODE_RING)
                series_sample(core_now_ns());
            else if (out && processed != last_counted)
                write_counters_line(out, core_now_ns());
            last_counted = processed;
            last_counters = now;
        }
        if (out && now - last_flush >= (uint64_t)g_cfg.flush_ms) {
            msnap_out_flush(out);
            last_flush = now;
        }
        if (atomic_load(&stop_req)) {
            drain();
            break;
        }
        if (n == 0)
            futex_wait(&g_writer_wake, wake, g_cfg.flush_ms < 10 ? g_cfg.flush_ms : 10);
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
        int fd = create_temp_for(out_path, tmp, sizeof tmp);
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
            discard(tmp);
            return -1;
        }
        written_reset();
        if (write_header(out, 0) != 0 || msnap_out_flush(out) != 0 || publish(tmp, out_path) != 0) {
            int e = errno;
            fprintf(stderr, "memsnap: cannot create %s: %s\n", out_path, strerror(e));
            discard(tmp);
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
        int fd = create_temp_for(path, tmp, sizeof tmp);
        if (fd < 0) {
            int e = errno;
            fprintf(stderr, "memsnap: cannot write in the folder of %s: %s\n", path,
                    e == ELOOP ? "it is a symbolic link" : strerror(e));
            errno = e;
            return -1;
        }
        close(fd);
        discard(tmp);
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
            write_counters_line(out, core_now_ns());
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
    for (size_t i = 0; i < live.cap; i++)
        if (live.slots[i].used)
            free((msnap_live *)(uintptr_t)live.slots[i].value);
    u64map_free(&live);
    memset(&live, 0, sizeof live);
    live_count = 0;
    for (unsigned i = 0; i < STASH; i++)
        free(stash[i].l);
    memset(stash, 0, sizeof stash);
    stash_next = 0;
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
    writer_sync(atomic_load(&g_queue_head));
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
    memset(&live, 0, sizeof live);
    live_count = 0;
    memset(stash, 0, sizeof stash);
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

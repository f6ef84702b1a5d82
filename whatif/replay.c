/* replay: a recorded allocation sequence through another allocator config,
 * to answer "would expandable segments, or another max_split_size, have
 * avoided this OOM?" without a GPU.
 *
 * What is fed: the allocated-level events (block_alloc / block_free) when
 * the snapshot has any, else the reserved-level allocation sequence
 * (alloc / free / async_alloc / async_free of device memory) - the
 * requests a process made to the driver, now served by a caching
 * allocator.  The requests that failed are part of the sequence: an `oom`
 * event of the allocator (blocks level) or of a driver allocation call
 * (reserved level) is replayed where it happened, with the size and stream
 * it asked for.  When the replay serves it, the block is measured (the
 * headroom left: the largest request that could still be served, reserved,
 * fragmentation) and freed again at once, since the program never had it.
 * In file order, each on its recorded stream and device (one allocator per
 * device).  A free of an address the replay did not allocate (allocated
 * before the recording, or its request failed in the replay) is skipped
 * and counted.  A request that fails is an OOM of the replay: it is written
 * as an `oom` event and the replay goes on.
 *
 * Two engines:
 *   memsnap  libmemsnap_alloc on the simulated device (below), for traces of
 *            memsnap's own allocator and of plain driver calls: exact.
 *   torch    torchalloc.c, an emulation of PyTorch's caching allocator, for
 *            traces that came from PyTorch (memsnap import, or block events
 *            with api torch); the config is a PYTORCH_CUDA_ALLOC_CONF.  The
 *            trace does not say when the program called empty_cache, so a
 *            run of segment releases is taken as an empty_cache call, made
 *            before the next request, unless it was an OOM retry (recorded
 *            live: a driver allocation failed before it; imported: a
 *            segment creation follows it).  PyTorch's private pools (a CUDA
 *            graph's, a MemPool) are kept apart (torchalloc.h), a pool
 *            taken as freeable once the recording gives back a segment of
 *            it; requests of a grown site (grow.h) are made at their new
 *            size.
 *
 * How the device is simulated for the memsnap engine: in-process.  The
 * simulated libcuda.so.1 is dlopen'ed (RTLD_GLOBAL) and then
 * libmemsnap_alloc.so, whose dlopen("libcuda.so.1") finds the already
 * loaded simulation (the loader matches the SONAME), so the CLI
 * itself never links to a driver.  Paths: $MEMSNAP_SIMDEV_LIB and
 * $MEMSNAP_ALLOC_LIB, else ../simdev/libcuda.so.1 and
 * ../lib/libmemsnap_alloc.so next to the memsnap binary (the build tree
 * layout).  The device memory is set through MEMSNAP_SIM_DEVICE_MEM before
 * the first cuInit, so it is one value per process: msnap_replay_many runs
 * each config in a child process of its own, as many at once as there are
 * cores.
 *
 * The allocator gets the default driver table with the memory functions
 * wrapped: each call becomes a reserved-level event of the new snapshot,
 * and the addresses the simulation hands out (host mmap addresses, which
 * change from run to run) are translated to synthetic device addresses
 * given out in creation order from 0x100000000000, never reused; handles
 * are numbered 1, 2, ...  Recorded streams are opaque numbers to the
 * allocator; event records and stream syncs go to the simulation's null
 * stream (its streams are always idle).  Output times are the input's.
 * Nothing in the output depends on the clock, the pid or ASLR, so the same
 * input and config give the same bytes.
 *
 * Cost: one pass over the input, O(1) amortized work per event besides the
 * allocator's own (its counters are read without walking its blocks), and
 * memory for the live blocks only.
 */
#include "whatif.h"
#include "interop/interop.h"
#include "interop/common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "util/outfile.h"
#include "memsnap/alloc.h"
#include "requests.h"
#include "torchalloc.h"

#define VIRT_BASE 0x100000000000ULL
#define VIRT_GAP (2ull << 20)
#define NDEV 8

/* ---- the libraries ----------------------------------------------------------- */

typedef struct alloc_api {
    void (*config_default)(memsnap_alloc_config *);
    int (*config_parse)(memsnap_alloc_config *, const char *, char *, size_t);
    const memsnap_alloc_driver *(*driver_default)(void);
    int (*create)(const memsnap_alloc_config *, int, const memsnap_alloc_driver *, memsnap_alloc **);
    void (*destroy)(memsnap_alloc *);
    int (*malloc_)(memsnap_alloc *, size_t, CUstream, CUdeviceptr *);
    int (*free_)(memsnap_alloc *, CUdeviceptr);
    void (*counters_get)(memsnap_alloc *, memsnap_alloc_stats *);
    const char *(*error)(void);
} alloc_api;

static alloc_api A;
static int loaded;
static uint64_t loaded_mem;

static void lib_path(char *out, size_t n, const char *env, const char *rel)
{
    const char *e = getenv(env);
    if (e && *e) {
        snprintf(out, n, "%s", e);
        return;
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        snprintf(out, n, "%s", rel);
        return;
    }
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    if ((size_t)snprintf(out, n, "%.*s/../%s", (int)(n > 64 ? n - 64 : 1), exe, rel) >= n)
        snprintf(out, n, "%s", rel);
}

static int load(uint64_t device_mem, char *err, size_t errlen)
{
    if (loaded) {
        if (device_mem != loaded_mem) {
            snprintf(err, errlen, "the simulated device's memory is set once per process");
            return -1;
        }
        return 0;
    }
    char sim[PATH_MAX], al[PATH_MAX], mem[32];
    lib_path(sim, sizeof sim, "MEMSNAP_SIMDEV_LIB", "simdev/libcuda.so.1");
    lib_path(al, sizeof al, "MEMSNAP_ALLOC_LIB", "lib/libmemsnap_alloc.so");
    snprintf(mem, sizeof mem, "%" PRIu64, device_mem);
    setenv("MEMSNAP_SIM_DEVICE_MEM", mem, 1);
    char devs[8];
    snprintf(devs, sizeof devs, "%d", NDEV);
    setenv("MEMSNAP_SIM_DEVICES", devs, 1);
    unsetenv("MEMSNAP_SIM_FAIL");
    if (!dlopen(sim, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(err, errlen, "cannot load the simulated device (%s); set MEMSNAP_SIMDEV_LIB", dlerror());
        return -1;
    }
    void *h = dlopen(al, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load the allocator (%s); set MEMSNAP_ALLOC_LIB", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                 \
    if (!(*(void **)&A.field = dlsym(h, name))) {                                        \
        snprintf(err, errlen, "the allocator library lacks %s", name);                   \
        return -1;                                                                       \
    }
    SYM(config_default, "memsnap_alloc_config_default");
    SYM(config_parse, "memsnap_alloc_config_parse");
    SYM(driver_default, "memsnap_alloc_driver_default");
    SYM(create, "memsnap_alloc_create");
    SYM(destroy, "memsnap_alloc_destroy");
    SYM(malloc_, "memsnap_alloc_malloc");
    SYM(free_, "memsnap_alloc_free");
    SYM(counters_get, "memsnap_alloc_counters_get");
    SYM(error, "memsnap_alloc_error");
#undef SYM
    loaded = 1;
    loaded_mem = device_mem;
    return 0;
}

/* ---- one replay's state (the driver wrappers reach it through `cur`) ---- */

typedef struct region { uint64_t sim, size, virt; } region;

typedef struct rp {
    memsnap_alloc_driver real;
    region *reg; size_t nreg, capreg;   /* sorted by sim */
    uint64_t next_virt;
    u64map handles;                     /* sim handle -> our number */
    uint64_t next_handle;
    u64map ptrs;                        /* (device, recorded addr) -> sim ptr */
    msnap_out *out;
    char buf[1 << 16];
    int wfail;
    uint64_t t_ns;                      /* time of the input event being replayed */
    uint32_t tid;
    int device;
    uint64_t nev;
    uint64_t reserve_changes;
    msnap_replay_result *res;
    int torch;                          /* engine: torchalloc, else libmemsnap_alloc */
    u64map pages;                       /* torch engine: mapped page -> handle */
    const msnap_grow_spec *grow;             /* requests at other sizes, or NULL */
    uint32_t where, last_mark;          /* the NVTX mark or range the stream is in */
    uint32_t ranges[16];
    int depth;
} rp;

static rp *cur;

static void emit(rp *r, const msnap_event *e)
{
    if (!r->out)
        return;
    size_t n = msnap_fmt_event(r->buf, sizeof r->buf, e);
    if (!n || msnap_out_write(r->out, r->buf, n))
        r->wfail = 1;
    r->nev++;
}

/* The number of regions whose sim is <= sim (binary search): the region
 * that holds sim, if any, is the one before. */
static size_t region_upper(const rp *r, uint64_t sim)
{
    size_t lo = 0, hi = r->nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->reg[mid].sim <= sim)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The region that starts at sim, or NULL. */
static region *region_at(rp *r, uint64_t sim)
{
    size_t i = region_upper(r, sim);
    return i && r->reg[i - 1].sim == sim ? &r->reg[i - 1] : NULL;
}

static uint64_t virt_of(rp *r, uint64_t sim)
{
    size_t lo = region_upper(r, sim);
    if (lo && sim - r->reg[lo - 1].sim < r->reg[lo - 1].size + 1)
        return r->reg[lo - 1].virt + (sim - r->reg[lo - 1].sim);
    return sim; /* not ours: should not happen */
}

static uint64_t region_add(rp *r, uint64_t sim, uint64_t size)
{
    if (r->nreg == r->capreg) {
        size_t nc = r->capreg ? r->capreg * 2 : 64;
        region *nr = realloc(r->reg, nc * sizeof *nr);
        if (!nr)
            return sim;
        r->reg = nr;
        r->capreg = nc;
    }
    /* its place by binary search (it used to be found by moving the
     * regions above it up one at a time: O(live segments) compares a call) */
    size_t i = region_upper(r, sim);
    memmove(&r->reg[i + 1], &r->reg[i], (r->nreg - i) * sizeof *r->reg);
    uint64_t v = r->next_virt;
    r->next_virt += ((size + VIRT_GAP - 1) & ~(VIRT_GAP - 1)) + VIRT_GAP;
    r->reg[i] = (region){sim, size, v};
    r->nreg++;
    return v;
}

static void region_del(rp *r, uint64_t sim)
{
    region *g = region_at(r, sim);
    if (!g)
        return;
    size_t i = (size_t)(g - r->reg);
    memmove(&r->reg[i], &r->reg[i + 1], (r->nreg - i - 1) * sizeof *r->reg);
    r->nreg--;
}

static msnap_event drv_ev(int action, int api)
{
    msnap_event e = {.t_ns = cur->t_ns, .action = (uint16_t)action, .api = (uint16_t)api,
                     .tid = cur->tid, .device = (int16_t)cur->device};
    return e;
}

static CUresult w_alloc(CUdeviceptr *p, size_t size)
{
    CUresult rc = cur->real.cuMemAlloc_v2(p, size);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        msnap_event e = drv_ev(MSNAP_A_ALLOC, MSNAP_API_cuMemAlloc_v2);
        e.addr = region_add(cur, *p, size);
        e.size = size;
        emit(cur, &e);
        cur->reserve_changes++;
    }
    return rc;
}

static CUresult w_free(CUdeviceptr p)
{
    msnap_event e = drv_ev(MSNAP_A_FREE, MSNAP_API_cuMemFree_v2);
    e.addr = virt_of(cur, p);
    region *g = region_at(cur, p);
    if (g)
        e.size = g->size;
    CUresult rc = cur->real.cuMemFree_v2(p);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        emit(cur, &e);
        region_del(cur, p);
    }
    return rc;
}

static CUresult w_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                          unsigned long long flags)
{
    CUresult rc = cur->real.cuMemAddressReserve(p, size, align, addr, flags);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        msnap_event e = drv_ev(MSNAP_A_VMM_RESERVE, MSNAP_API_cuMemAddressReserve);
        e.addr = region_add(cur, *p, size);
        e.size = size;
        e.aux = align;
        emit(cur, &e);
    }
    return rc;
}

static CUresult w_addr_free(CUdeviceptr p, size_t size)
{
    msnap_event e = drv_ev(MSNAP_A_VMM_ADDR_FREE, MSNAP_API_cuMemAddressFree);
    e.addr = virt_of(cur, p);
    e.size = size;
    CUresult rc = cur->real.cuMemAddressFree(p, size);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        emit(cur, &e);
        region_del(cur, p);
    }
    return rc;
}

static CUresult w_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                         unsigned long long flags)
{
    CUresult rc = cur->real.cuMemCreate(h, size, prop, flags);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        msnap_event e = drv_ev(MSNAP_A_VMM_CREATE, MSNAP_API_cuMemCreate);
        e.aux = ++cur->next_handle;
        u64map_put(&cur->handles, 0, (uint64_t)*h, e.aux);
        e.size = size;
        emit(cur, &e);
        cur->reserve_changes++;
    }
    return rc;
}

static CUresult w_release(CUmemGenericAllocationHandle h)
{
    uint64_t *n = u64map_get(&cur->handles, 0, (uint64_t)h);
    msnap_event e = drv_ev(MSNAP_A_VMM_RELEASE, MSNAP_API_cuMemRelease);
    e.aux = n ? *n : 0;
    CUresult rc = cur->real.cuMemRelease(h);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        emit(cur, &e);
        u64map_del(&cur->handles, 0, (uint64_t)h, NULL);
    }
    return rc;
}

static CUresult w_map(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                      unsigned long long flags)
{
    CUresult rc = cur->real.cuMemMap(p, size, off, h, flags);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        uint64_t *n = u64map_get(&cur->handles, 0, (uint64_t)h);
        msnap_event e = drv_ev(MSNAP_A_VMM_MAP, MSNAP_API_cuMemMap);
        e.addr = virt_of(cur, p);
        e.size = size;
        e.aux = n ? *n : 0;
        e.aux2 = off;
        emit(cur, &e);
    }
    return rc;
}

static CUresult w_unmap(CUdeviceptr p, size_t size)
{
    CUresult rc = cur->real.cuMemUnmap(p, size);
    cur->res->driver_calls++;
    if (rc == CUDA_SUCCESS) {
        msnap_event e = drv_ev(MSNAP_A_VMM_UNMAP, MSNAP_API_cuMemUnmap);
        e.addr = virt_of(cur, p);
        e.size = size;
        emit(cur, &e);
    }
    return rc;
}

static CUresult w_set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
    cur->res->driver_calls++;
    return cur->real.cuMemSetAccess(p, size, d, n);
}

static CUresult w_event_record(CUevent ev, CUstream s)
{
    (void)s; /* recorded stream handles mean nothing to the simulation */
    return cur->real.cuEventRecord(ev, NULL);
}

static CUresult w_stream_sync(CUstream s)
{
    (void)s;
    return cur->real.cuStreamSynchronize(NULL);
}

/* ---- what the input is (first pass, up to the first block event) ------- */

/* ---- the torch engine's driver-level events --------------------------------- */

/* torchalloc's segment and page changes as reserved-level events: fixed
 * segments as cuMemAlloc/cuMemFree, expandable ones as a reservation with
 * one cuMemCreate + cuMemMap per page (PyTorch maps page by page). */
static void ta_seg_event(void *ctx, int kind, uint64_t addr, uint64_t size, uint64_t stream)
{
    rp *r = ctx;
    (void)stream;
    r->res->driver_calls++;
    msnap_event e = drv_ev(MSNAP_A_ALLOC, MSNAP_API_cuMemAlloc_v2);
    e.addr = addr;
    e.size = size;
    switch (kind) {
    case TA_SEG_ALLOC: break;
    case TA_SEG_FREE: e.action = MSNAP_A_FREE; e.api = MSNAP_API_cuMemFree_v2; break;
    case TA_SEG_RESERVE: e.action = MSNAP_A_VMM_RESERVE; e.api = MSNAP_API_cuMemAddressReserve; break;
    case TA_SEG_ADDR_FREE: e.action = MSNAP_A_VMM_ADDR_FREE; e.api = MSNAP_API_cuMemAddressFree; break;
    case TA_PAGE_MAP: {
        msnap_event c = drv_ev(MSNAP_A_VMM_CREATE, MSNAP_API_cuMemCreate);
        c.size = size;
        c.aux = ++r->next_handle;
        emit(r, &c);
        u64map_put(&r->pages, (uint32_t)r->device, addr, c.aux);
        e.action = MSNAP_A_VMM_MAP;
        e.api = MSNAP_API_cuMemMap;
        e.aux = c.aux;
        break;
    }
    case TA_PAGE_UNMAP: {
        uint64_t h = 0;
        u64map_del(&r->pages, (uint32_t)r->device, addr, &h);
        e.action = MSNAP_A_VMM_UNMAP;
        e.api = MSNAP_API_cuMemUnmap;
        emit(r, &e);
        e = drv_ev(MSNAP_A_VMM_RELEASE, MSNAP_API_cuMemRelease);
        e.aux = h;
        break;
    }
    }
    emit(r, &e);
}

/* ---- the two engines behind one set of calls ------------------------------ */

typedef struct engine {
    int torch;
    memsnap_alloc *al[NDEV];
    ta_alloc *ta[NDEV];
    memsnap_alloc_config cfg;
    ta_config tcfg;
    memsnap_alloc_driver drv;
    uint64_t device_mem;        /* the device (a memory fraction is of it) */
    uint64_t available;         /* what the allocator can get of it */
} engine;

typedef struct probe_t {
    uint64_t allocated, reserved, peak_allocated, peak_reserved, largest_free, device_free;
} probe_t;

/* Device d's allocator, created on first use.  0, or -1 with err. */
static int eng_get(engine *g, rp *r, int d, char *err, size_t errlen)
{
    if (g->torch) {
        if (!g->ta[d] && !(g->ta[d] = ta_create(&g->tcfg, g->device_mem, g->available,
                                                VIRT_BASE + (uint64_t)d * (1ull << 44),
                                                ta_seg_event, r))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (!g->al[d] && A.create(&g->cfg, d, &g->drv, &g->al[d])) {
        snprintf(err, errlen, "cannot create the allocator: %s", A.error());
        return -1;
    }
    return 0;
}

/* 0 served (*p), 1 out of memory, -1 error (err).  pool: PyTorch's pool
 * (memsnap/format.h; 0 the default pool): the torch engine keeps private
 * pools apart, memsnap's allocator has none. */
static int eng_malloc(engine *g, int d, uint64_t size, uint64_t stream, uint64_t pool,
                      uint64_t *p, char *err, size_t errlen)
{
    if (g->torch) {
        int rc = ta_malloc_pool(g->ta[d], size, stream, pool, p);
        if (rc == TA_NOMEM)
            snprintf(err, errlen, "out of memory");
        return rc == TA_OK ? 0 : rc == TA_OOM ? 1 : -1;
    }
    CUdeviceptr dp = 0;
    int rc = A.malloc_(g->al[d], size, (CUstream)(uintptr_t)stream, &dp);
    *p = dp;
    if (rc == MEMSNAP_ALLOC_OK)
        return 0;
    if (rc == MEMSNAP_ALLOC_ERR_OOM)
        return 1;
    snprintf(err, errlen, "the allocator failed: %s", A.error());
    return -1;
}

static int eng_free(engine *g, int d, uint64_t p, char *err, size_t errlen)
{
    if (g->torch ? ta_free(g->ta[d], p) : A.free_(g->al[d], (CUdeviceptr)p)) {
        snprintf(err, errlen, "the allocator refused a free%s%s", g->torch ? "" : ": ",
                 g->torch ? "" : A.error());
        return -1;
    }
    return 0;
}

/* The allocator's counters; with walk, also largest_free and device_free. */
static void eng_probe(engine *g, rp *r, int d, int walk, probe_t *o)
{
    memset(o, 0, sizeof *o);
    if (g->torch) {
        ta_stats s;
        if (walk) {
            ta_stats_get(g->ta[d], &s);
        } else {
            /* the counters alone: no walk of the free blocks */
            ta_stats_get_counters(g->ta[d], &s);
        }
        *o = (probe_t){s.allocated, s.reserved, s.peak_allocated, s.peak_reserved,
                       s.largest_free, s.device_free};
        return;
    }
    memsnap_alloc_stats s;
    A.counters_get(g->al[d], &s);
    *o = (probe_t){s.allocated, s.reserved, s.peak_allocated, s.peak_reserved, s.largest_free, 0};
    if (walk) {
        size_t fr = 0, tot = 0;
        r->real.cuMemGetInfo_v2(&fr, &tot);
        o->device_free = fr;
    }
}

static double frag_of(const probe_t *p)
{
    uint64_t cached = p->reserved > p->allocated ? p->reserved - p->allocated : 0;
    return cached ? 1.0 - (double)p->largest_free / (double)cached : 0.0;
}

/* ---- the replay ------------------------------------------------------------------ */

static void write_header(rp *r, const char *conf, const char *engine_name, uint64_t device_mem)
{
    msnap_header *h = calloc(1, sizeof *h);
    if (!h) {
        r->wfail = 1;
        return;
    }
    const char *argv[] = {"memsnap", "replay", "--alloc-conf", conf};
    h->major = MSNAP_FORMAT_MAJOR;
    h->minor = MSNAP_FORMAT_MINOR;
    snprintf(h->host, sizeof h->host, "replay");
    h->argv = argv;
    h->argc = 4;
    snprintf(h->clock, sizeof h->clock, "CLOCK_MONOTONIC");
    snprintf(h->mode, sizeof h->mode, "replay");
    char settings[700];
    snprintf(settings, sizeof settings,
             "{\"alloc_conf\":\"%s\",\"engine\":\"%s\",\"device_mem\":%" PRIu64 ",\"level\":\"%s\"}",
             strchr(conf, '"') || strchr(conf, '\\') ? "" : conf, engine_name, device_mem,
             r->res->level);
    h->settings_json = settings;
    for (int d = 0; d < NDEV; d++) {
        h->devices[d].index = d;
        snprintf(h->devices[d].name, sizeof h->devices[d].name, "memsnap simulated device");
        h->devices[d].total = device_mem;
    }
    h->ndevices = 1;
    char *hb = malloc(1 << 16);
    size_t hn = hb ? msnap_fmt_header(hb, 1 << 16, h) : 0;
    if (r->out && (!hn || msnap_out_write(r->out, hb, hn)))
        r->wfail = 1;
    free(hb);
    free(h);
}

/* A new peak of reserved on device d: remember the fragmentation there. */
static void note_peak(engine *g, rp *r, int d)
{
    probe_t p;
    eng_probe(g, r, d, 0, &p);
    if (p.reserved > r->res->peak_reserved) {
        eng_probe(g, r, d, 1, &p);
        r->res->peak_reserved = p.reserved;
        r->res->frag_free_at_peak = frag_of(&p);
    }
}

/* The tables of the stream's recording as lines of the new snapshot. */
static void write_tables(rp *r, const sm_symtab *t)
{
    size_t n;
    for (size_t i = 0; i < t->nmods && r->out; i++) {
        msnap_module m = {t->mods[i].base, t->mods[i].size, t->mods[i].path, t->mods[i].build_id};
        if ((n = msnap_fmt_module(r->buf, sizeof r->buf, &m)) && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    for (size_t i = 0; i < t->nstacks && r->out; i++) {
        msnap_stack st = {t->stacks[i].id, t->stacks[i].depth, t->stacks[i].ips};
        if ((n = msnap_fmt_stack(r->buf, sizeof r->buf, &st)) && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    for (size_t i = 0; i < t->nsyms && r->out; i++) {
        msnap_symbol y = {t->syms[i].ip, t->syms[i].fn, t->syms[i].file, t->syms[i].line,
                          t->syms[i].off};
        if ((n = msnap_fmt_symbol(r->buf, sizeof r->buf, &y)) && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    for (size_t i = 0; i < t->str_map.cap && r->out; i++) {
        if (!t->str_map.slots[i].used)
            continue;
        msnap_str x = {(uint32_t)t->str_map.slots[i].key, t->strs[t->str_map.slots[i].value]};
        if ((n = msnap_fmt_str(r->buf, sizeof r->buf, &x)) && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
}

/* The engine for conf: PyTorch's allocator emulated (g->torch), or
 * memsnap's allocator on the simulated device, loaded now, its driver
 * calls going through the w_* wrappers.  0 ok; -1 with err (a bad config:
 * res->bad_config). */
static int engine_setup(engine *g, rp *r, const char *conf, msnap_replay_result *res, char *err,
                        size_t errlen)
{
    char perr[256];
    if (g->torch) {
        ta_config_default(&g->tcfg);
        if (ta_config_parse(&g->tcfg, conf, perr, sizeof perr)) {
            snprintf(err, errlen, "bad config \"%s\": %s", conf, perr);
            res->bad_config = 1;
            return -1;
        }
        return 0;
    }
    if (load(g->available, err, errlen))
        return -1;
    A.config_default(&g->cfg);
    if (A.config_parse(&g->cfg, conf, perr, sizeof perr)) {
        snprintf(err, errlen, "bad config \"%s\": %s", conf, perr);
        res->bad_config = 1;
        return -1;
    }
    g->cfg.trace = 0;
    r->real = *A.driver_default();
    g->drv = r->real;
    g->drv.cuMemAlloc_v2 = w_alloc;
    g->drv.cuMemFree_v2 = w_free;
    g->drv.cuMemAddressReserve = w_reserve;
    g->drv.cuMemAddressFree = w_addr_free;
    g->drv.cuMemCreate = w_create;
    g->drv.cuMemRelease = w_release;
    g->drv.cuMemMap = w_map;
    g->drv.cuMemUnmap = w_unmap;
    g->drv.cuMemSetAccess = w_set_access;
    g->drv.cuEventRecord = w_event_record;
    g->drv.cuStreamSynchronize = w_stream_sync;
    return 0;
}

/* Where the replay stands at the recorded OOM: the headroom, reserved and
 * fragmentation there, from the walk w. */
static void at_recorded_oom(msnap_replay_result *res, const probe_t *w)
{
    res->headroom = w->largest_free > w->device_free ? w->largest_free : w->device_free;
    res->reserved_at = w->reserved;
    res->peak_reserved_at = res->peak_reserved;
    res->frag_at = frag_of(w);
}

/* A request of size bytes (event e, on device d; failed: one that failed
 * in the recording; restore: a refused free put back) through the engine:
 * a block_alloc in the new snapshot, or its OOM.  0 ok, -1 with err. */
static int replay_alloc(engine *g, rp *r, const msnap_event *e, int d, uint64_t size, int failed,
                        int restore, char *err, size_t errlen)
{
    msnap_replay_result *res = r->res;
    res->requests++;
    res->restored += restore;
    uint64_t p = 0, before = r->reserve_changes;
    probe_t pb;
    eng_probe(g, r, d, 0, &pb);
    uint64_t pool = e->action == MSNAP_A_BLOCK_ALLOC ? msnap_pool_id(e->aux) : 0;
    int arc = eng_malloc(g, d, size, e->stream, pool, &p, err, errlen);
    if (arc < 0)
        return -1;
    if (failed && !res->rec_ooms++) {
        res->rec_oom_size = size;
        res->rec_oom_stream = e->stream;
        res->rec_oom_t_ns = e->t_ns;
        res->rec_oom_index = res->requests;
    }
    if (arc != 0) {
        if (!res->ooms++) {
            res->oom = 1;
            res->oom_t_ns = e->t_ns;
            res->oom_size = size;
            res->oom_index = res->requests;
            res->oom_stack = e->stack;
            res->oom_where = r->where;
        }
        probe_t w;
        eng_probe(g, r, d, 1, &w);
        if (failed && res->rec_ooms == 1)
            at_recorded_oom(res, &w);
        /* the memory this allocator could have: what it reserved and what
         * it could still get (a memory fraction's or device_limit's cap, the
         * device less what was outside it), not the whole device */
        msnap_event o = {.t_ns = e->t_ns, .size = size, .aux = w.device_free,
                         .aux2 = w.reserved + w.device_free, .stack = e->stack, .tid = e->tid,
                         .stream = e->stream, .action = MSNAP_A_OOM,
                         .api = MSNAP_API_ALLOCATOR, .device = (int16_t)d, .result = 2};
        emit(r, &o);
        return 0;
    }
    probe_t pa;
    eng_probe(g, r, d, 0, &pa);
    msnap_event o = *e;
    o.action = MSNAP_A_BLOCK_ALLOC;
    o.api = MSNAP_API_ALLOCATOR;
    o.addr = g->torch ? p : virt_of(r, p);
    o.size = size;
    o.device = (int16_t)d;
    o.aux = o.aux2 = 0;
    if (g->torch && pa.allocated > pb.allocated) {
        /* as the recorder writes PyTorch's blocks: the block's size (what
         * PyTorch's allocated counts), the request beside it */
        o.size = pa.allocated - pb.allocated;
        o.aux2 = size;
    }
    o.result = 0;
    emit(r, &o);
    if (pa.reserved != pb.reserved || r->reserve_changes != before || res->requests == 1)
        note_peak(g, r, d);
    if (!failed) {
        if (u64map_put(&r->ptrs, (uint32_t)d, e->addr, p)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (res->rec_ooms == 1) {
        probe_t w;
        eng_probe(g, r, d, 1, &w);
        res->rec_oom_served = 1;
        at_recorded_oom(res, &w);
    }
    res->rec_ooms_served++;
    /* the program never had it: give it back at once */
    if (eng_free(g, d, p, err, errlen))
        return -1;
    o.action = MSNAP_A_BLOCK_FREE;
    o.size = 0;
    emit(r, &o);
    return 0;
}

/* A free (event e, on device d) through the engine: a block_free in the
 * new snapshot; a free of nothing the replay allocated is counted and
 * passed by.  0 ok, -1 with err. */
static int replay_free(engine *g, rp *r, const msnap_event *e, int d, char *err, size_t errlen)
{
    uint64_t p;
    if (!u64map_del(&r->ptrs, (uint32_t)d, e->addr, &p)) {
        r->res->skipped_frees++;
        return 0;
    }
    msnap_event o = *e;
    o.action = MSNAP_A_BLOCK_FREE;
    o.api = MSNAP_API_ALLOCATOR;
    o.addr = g->torch ? p : virt_of(r, p);
    o.size = 0;
    o.device = (int16_t)d;
    if (eng_free(g, d, p, err, errlen))
        return -1;
    emit(r, &o);
    r->res->frees++;
    return 0;
}

/* One entry of the request stream: NVTX events copied, PyTorch's segment
 * records noted (segments released with no new one after: its
 * empty_cache()), requests and frees replayed.  *n: bytes of a line in
 * r->buf to write after it; *last_t: the latest event time.  0 ok, -1 with
 * err. */
enum { PR_RELEASED = 1,        /* torch: segments released, empty_cache() pending */
       PR_DRIVER_FAILED = 2 };  /* a driver allocation failed since the last request */

static int replay_entry(engine *g, rp *r, rq_stream *q, const spill_rec *rec,
                        int *pending_release, uint64_t *last_t, size_t *n, char *err,
                        size_t errlen)
{
    const msnap_event *e = &rec->e;
    int a = e->action;
    int restore = rec->k1 == RQ_RESTORE;
    if ((a == MSNAP_A_OOM || a == MSNAP_A_ALLOC_ERROR) && e->api != MSNAP_API_TORCH &&
        e->api != MSNAP_API_ALLOCATOR)
        *pending_release |= PR_DRIVER_FAILED;
    if (a == MSNAP_A_NVTX_PUSH || a == MSNAP_A_NVTX_POP || a == MSNAP_A_NVTX_MARK) {
        /* where the stream is, for the first failed request (as predict's) */
        if (a == MSNAP_A_NVTX_MARK) {
            r->where = r->last_mark = (uint32_t)e->aux;
        } else if (a == MSNAP_A_NVTX_PUSH) {
            if (r->depth < (int)(sizeof r->ranges / sizeof r->ranges[0]))
                r->ranges[r->depth++] = (uint32_t)e->aux;
            r->where = (uint32_t)e->aux;
        } else {
            if (r->depth)
                r->depth--;
            r->where = r->depth ? r->ranges[r->depth - 1] : r->last_mark;
        }
        if (r->out) {
            *n = msnap_fmt_event(r->buf, sizeof r->buf, e);
            r->nev++;
        }
        return 0;
    }
    if (g->torch && q->blocks && !restore) {
        /* PyTorch's segment records: its own (api torch) when recorded
         * live - the driver calls there include other libraries' - else
         * the imported ones, which are driver-level events */
        int rel = q->torch_api ? a == MSNAP_A_SEGMENT_FREE || a == MSNAP_A_SEGMENT_UNMAP
                               : a == MSNAP_A_FREE || a == MSNAP_A_VMM_UNMAP;
        int mk = q->torch_api ? a == MSNAP_A_SEGMENT_ALLOC || a == MSNAP_A_SEGMENT_MAP
                              : a == MSNAP_A_ALLOC || a == MSNAP_A_VMM_MAP ||
                                    a == MSNAP_A_VMM_CREATE;
        if (rel || mk) {
            /* a creation after releases: an OOM retry of the same request
             * (it releases, then allocates), not empty_cache.  Recorded
             * live, a retry follows a failed driver allocation (PyTorch
             * retries after cudaMalloc fails; an imported trace cannot
             * tell, and a retry under a memory fraction makes no driver
             * call): without one, the releases were empty_cache() */
            if (rel)
                *pending_release |= PR_RELEASED;
            else if (!q->torch_api || (*pending_release & PR_DRIVER_FAILED))
                *pending_release &= ~PR_RELEASED;
            /* PyTorch gives a private pool's segment back only once the
             * pool is freeable (its graphs are gone; or an oversize block
             * of the requesting pool, with max_split_size): from here on,
             * the replay may release that pool's cache too */
            uint64_t pool = msnap_pool_id(e->aux);
            if (rel && pool && q->torch_api) {
                int d = e->device >= 0 && e->device < NDEV ? e->device : 0;
                if (eng_get(g, r, d, err, errlen))
                    return -1;
                if (g->torch && ta_pool_release(g->ta[d], pool)) {
                    snprintf(err, errlen, "out of memory");
                    return -1;
                }
            }
            return 0;
        }
    }
    int kind = rq_kind(q, rec); /* requests.h: the same rule for every reader */
    int failed = kind == RQ_FAILED;
    int is_alloc = failed || kind == RQ_ALLOC;
    if (!is_alloc && kind != RQ_FREE)
        return 0;
    int d = e->device >= 0 && e->device < NDEV ? e->device : 0;
    r->t_ns = e->t_ns;
    r->tid = e->tid;
    r->device = d;
    if (e->t_ns > *last_t)
        *last_t = e->t_ns;
    if (eng_get(g, r, d, err, errlen))
        return -1;
    if (*pending_release & PR_RELEASED) {
        /* segments went back with no new one after: empty_cache() */
        ta_empty_cache(g->ta[d]);
        r->res->empty_cache_calls++;
    }
    *pending_release = 0;
    if (!is_alloc)
        return replay_free(g, r, e, d, err, errlen);
    /* PyTorch's own record: the size the program asked for */
    uint64_t size = rq_request_size(e, g->torch);
    const uint64_t *gi = r->grow && size ? u64map_get(r->grow->stacks, 0, e->stack) : NULL;
    if (gi && *gi < (uint64_t)r->grow->n && r->grow->base[*gi]) {
        /* a grown site (grow.h): its size scaled, rounded up */
        unsigned __int128 v = (unsigned __int128)size * r->grow->size[*gi];
        uint64_t b = r->grow->base[*gi];
        v = (v + b - 1) / b;
        size = v > UINT64_MAX ? UINT64_MAX : v ? (uint64_t)v : 1;
        r->res->grown++;
    }
    return size ? replay_alloc(g, r, e, d, size, failed, restore, err, errlen) : 0;
}

/* After the stream: the peaks and the driver calls of every device's
 * engine into res. */
static void replay_totals(engine *g, rp *r, msnap_replay_result *res)
{
    for (int d = 0; d < NDEV; d++) {
        if (!g->al[d] && !g->ta[d])
            continue;
        probe_t p;
        eng_probe(g, r, d, 0, &p);
        if (p.peak_allocated > res->peak_allocated)
            res->peak_allocated = p.peak_allocated;
        if (p.peak_reserved > res->peak_reserved) {
            /* reached inside a request that then failed */
            res->peak_reserved = p.peak_reserved;
        }
        if (g->al[d]) {
            memsnap_alloc_stats s;
            A.counters_get(g->al[d], &s);
            res->driver_allocs += s.driver_allocs;
            res->driver_frees += s.driver_frees;
            res->driver_maps += s.driver_maps;
            res->driver_unmaps += s.driver_unmaps;
        } else {
            ta_stats s;
            ta_stats_get_counters(g->ta[d], &s);
            res->driver_allocs += s.segment_allocs;
            res->driver_frees += s.segment_frees;
        }
    }
    res->frag_peak = res->peak_reserved ? 1.0 - (double)res->peak_allocated / (double)res->peak_reserved : 0;
}

int msnap_replay_stream(rq_stream *q, const msnap_replay_opts *opt, msnap_replay_result *res,
                        char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    const char *conf = opt->conf ? opt->conf : "";
    engine *g = calloc(1, sizeof *g);
    rp *r = calloc(1, sizeof *r);
    if (!g || !r) {
        free(g);
        free(r);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->torch = opt->engine == MSNAP_ENGINE_TORCH || (opt->engine == MSNAP_ENGINE_AUTO && q->torch);
    g->device_mem = opt->device_mem ? opt->device_mem
                    : q->device_total ? q->device_total : MSNAP_REPLAY_DEFAULT_MEM;
    res->device_mem = g->device_mem;
    if (!opt->device_mem) {
        /* what the recording measured outside the allocator is not the
         * replayed allocator's to have (requests.h); 2 MiB stay at least */
        uint64_t out = q->outside_context + q->outside_libs;
        uint64_t most = g->device_mem > (2u << 20) ? g->device_mem - (2u << 20) : 0;
        res->outside = out < most ? out : most;
        res->outside_context = q->outside_context;
        res->outside_libs = q->outside_libs;
        res->outside_measured = q->outside_measured;
    }
    res->available = g->available = g->device_mem - res->outside;
    snprintf(res->device_mem_from, sizeof res->device_mem_from, "%s",
             opt->device_mem ? "--device-mem" : q->device_total ? "the recording" : "the default");
    snprintf(res->level, sizeof res->level, "%s", q->blocks ? "blocks" : "reserved");
    snprintf(res->engine, sizeof res->engine, "%s", g->torch ? "torch" : "memsnap");
    r->res = res;
    r->torch = g->torch;
    r->grow = opt->grow;
    r->next_virt = VIRT_BASE;
    int rc = -1, more;
    char out_tmp[PATH_MAX + 32] = ""; /* the new snapshot's temporary name (util/outfile.h) */
    if (engine_setup(g, r, conf, res, err, errlen))
        goto done;
    cur = r;
    if (rq_rewind(q)) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        goto done;
    }
    if (opt->progress)
        opt->progress->bytes_total = q->n;
    if (opt->out_path) {
        /* never written in place: a new file renamed over out_path at the end */
        int ofd = outfile_create(opt->out_path, OUTFILE_REPLACE_LINK, out_tmp, sizeof out_tmp);
        /* zstd level 1, as `memsnap run` writes by default (recorder/config.c) */
        if (ofd < 0 || !(r->out = msnap_out_fdopen(ofd, 1))) {
            snprintf(err, errlen, "%s: cannot write: %s", opt->out_path, strerror(errno));
            if (ofd >= 0)
                close(ofd);
            goto done;
        }
    }
    write_header(r, conf, res->engine, g->device_mem);
    write_tables(r, &q->f.tab);
    spill_rec rec;
    uint64_t last_t = 0, nrec = 0;
    int pending_release = 0; /* torch: PR_* */
    while ((more = rq_next(q, &rec)) == 1) {
        size_t n = 0;
        if (opt->progress && !(++nrec & 0xffff)) {
            opt->progress->bytes_done = nrec;
            opt->progress->records = nrec;
        }
        if (replay_entry(g, r, q, &rec, &pending_release, &last_t, &n, err, errlen))
            goto done;
        if (n && r->out && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    if (more < 0) {
        snprintf(err, errlen, "cannot read a temporary file: %s", strerror(errno));
        goto done;
    }
    if (opt->progress)
        opt->progress->bytes_done = opt->progress->bytes_total;
    replay_totals(g, r, res);
    if (r->out) {
        msnap_trailer tr = {last_t, r->nev, 0, 0, "replay"};
        size_t n = msnap_fmt_trailer(r->buf, sizeof r->buf, &tr);
        if (!n || msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    rc = 0;
done:
    /* tear down without recording: the new snapshot ends at the last event */
    if (r->out) {
        msnap_out *o = r->out;
        r->out = NULL;
        if (msnap_out_close(o) && !rc) {
            snprintf(err, errlen, "%s: cannot write: %s", opt->out_path, strerror(errno));
            rc = -1;
        }
    }
    if (r->wfail && !rc) {
        snprintf(err, errlen, "%s: cannot write", opt->out_path);
        rc = -1;
    }
    /* complete: renamed into place; failed: the old file stays as it was */
    if (rc)
        outfile_discard(out_tmp);
    else if (outfile_commit(out_tmp, opt->out_path)) {
        snprintf(err, errlen, "%s: cannot write: %s", opt->out_path, strerror(errno));
        rc = -1;
    }
    for (int d = 0; d < NDEV; d++) {
        if (g->al[d])
            A.destroy(g->al[d]);
        ta_destroy(g->ta[d]);
    }
    u64map_free(&r->handles);
    u64map_free(&r->ptrs);
    u64map_free(&r->pages);
    free(r->reg);
    free(r);
    free(g);
    cur = NULL;
    return rc;
}

int msnap_replay(const char *in_path, const msnap_replay_opts *opt, msnap_replay_result *res,
                 char *err, size_t errlen)
{
    rq_stream *q = malloc(sizeof *q);
    if (!q) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = rq_read(q, in_path, err, errlen) ? -1 : msnap_replay_stream(q, opt, res, err, errlen);
    if (rc && !strncmp(err, in_path, strlen(in_path)))
        an_strip_path(&q->f, err);
    rq_free(q);
    free(q);
    return rc;
}

/* ---- several configs, one child process each --------------------------------- */

typedef struct child_msg {
    msnap_replay_result res;
    int rc;
    char err[512];
} child_msg;

/* The progress of the whole run as one item of the process's progress line
 * (msnap_progress): the entries every replay has done, of the sum of its
 * streams' lengths.  The children report nothing themselves. */
static void show_progress(const msnap_replay_progress *pr, rq_stream *const *qs, int n,
                          const char *what, int final)
{
    uint64_t done = 0, total = 0;
    for (int i = 0; i < n; i++) {
        done += pr[i].bytes_done < qs[i]->n ? pr[i].bytes_done : qs[i]->n;
        total += qs[i]->n;
    }
    msnap_progress(what, final ? MSNAP_PROGRESS_END : done, total, 0);
}

int msnap_replay_many(rq_stream *q, const msnap_replay_opts *opts, int n, int jobs,
                      int show, msnap_replay_result *res, char *err, size_t errlen)
{
    if (n <= 0)
        return 0;
    rq_stream **qs = malloc((size_t)n * sizeof *qs);
    if (!qs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        qs[i] = q;
    const char *base = strrchr(q->f.path, '/');
    char what[160];
    snprintf(what, sizeof what, "replaying %s through %d config%s",
             base ? base + 1 : q->f.path, n, n == 1 ? "" : "s");
    int rc = msnap_replay_streams(qs, opts, n, jobs, show ? what : NULL, res, err, errlen);
    free(qs);
    return rc;
}

int msnap_replay_streams(rq_stream *const *qs, const msnap_replay_opts *opts, int n, int jobs,
                         const char *show, msnap_replay_result *res, char *err, size_t errlen)
{
    if (n <= 0)
        return 0;
    if (jobs < 1)
        jobs = 1;
    msnap_replay_progress *pr = mmap(NULL, (size_t)n * sizeof *pr, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pr == MAP_FAILED) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(pr, 0, (size_t)n * sizeof *pr);
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    int *pfd = calloc((size_t)n, sizeof *pfd);
    int *got = calloc((size_t)n, sizeof *got);
    int rc = 0, next = 0, running = 0, finished = 0, shown = 0;
    if (!pid || !pfd || !got) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto out;
    }
    fflush(NULL);
    while (finished < n) {
        while (running < jobs && next < n && !rc) {
            int p[2];
            if (pipe(p)) {
                snprintf(err, errlen, "pipe: %s", strerror(errno));
                rc = -1;
                break;
            }
            pid_t c = fork();
            if (c < 0) {
                snprintf(err, errlen, "fork: %s", strerror(errno));
                close(p[0]);
                close(p[1]);
                rc = -1;
                break;
            }
            if (!c) {
                msnap_set_progress(NULL, NULL); /* one line: the parent's */
                close(p[0]);
                child_msg m;
                memset(&m, 0, sizeof m);
                msnap_replay_opts o = opts[next];
                o.progress = &pr[next];
                if (rq_reopen(qs[next])) {
                    m.rc = -1;
                    snprintf(m.err, sizeof m.err, "cannot read a temporary file: %s",
                             strerror(errno));
                } else {
                    m.rc = msnap_replay_stream(qs[next], &o, &m.res, m.err, sizeof m.err);
                }
                const char *b = (const char *)&m;
                size_t left = sizeof m;
                while (left) {
                    ssize_t k = write(p[1], b, left);
                    if (k <= 0)
                        _exit(3);
                    b += k;
                    left -= (size_t)k;
                }
                _exit(0);
            }
            close(p[1]);
            pid[next] = c;
            pfd[next] = p[0];
            next++;
            running++;
        }
        if (!running)
            break;
        /* reap whoever is done; show progress while they work */
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w == 0) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if (show) {
                show_progress(pr, qs, n, show, 0);
                shown = 1;
            }
            continue;
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < next; i++) {
            if (pid[i] != w)
                continue;
            child_msg m;
            char *b = (char *)&m;
            size_t left = sizeof m;
            while (left) {
                ssize_t k = read(pfd[i], b, left);
                if (k <= 0)
                    break;
                b += k;
                left -= (size_t)k;
            }
            close(pfd[i]);
            pid[i] = 0;
            running--;
            finished++;
            if (left || !WIFEXITED(status) || WEXITSTATUS(status)) {
                if (!rc)
                    snprintf(err, errlen, "the replay of config %d died (%s %d)", i + 1,
                             WIFSIGNALED(status) ? "signal" : "status",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                rc = -1;
            } else if (m.rc) {
                if (!rc)
                    snprintf(err, errlen, "%s", m.err);
                res[i] = m.res;
                rc = -1;
            } else {
                res[i] = m.res;
                got[i] = 1;
            }
        }
        if (rc) {
            /* stop the others: the answer is an error */
            for (int i = 0; i < next; i++)
                if (pid[i] > 0)
                    kill(pid[i], SIGTERM);
        }
    }
    if (shown)
        show_progress(pr, qs, n, show, 1);
out:
    if (pid)
        for (int i = 0; i < next; i++)
            if (pid[i] > 0) {
                waitpid(pid[i], NULL, 0);
                close(pfd[i]);
            }
    free(pid);
    free(pfd);
    free(got);
    munmap(pr, (size_t)n * sizeof *pr);
    return rc;
}

int msnap_replay_available(char *err, size_t errlen)
{
    (void)err, (void)errlen;
    return 0;
}

int msnap_replay_check_conf(const char *conf, int torch, char *err, size_t errlen)
{
    if (!torch)
        return 0; /* the allocator's parser runs in the replay itself */
    ta_config c;
    ta_config_default(&c);
    return ta_config_parse(&c, conf, err, errlen);
}

int msnap_replay_engine_of(const rq_stream *q)
{
    return q->torch ? MSNAP_ENGINE_TORCH : MSNAP_ENGINE_MEMSNAP;
}

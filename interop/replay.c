/* replay: a recorded allocation sequence through libmemsnap_alloc on the
 * simulated device, to answer "would expandable segments, or another
 * max_split_size, have avoided this OOM?" without a GPU.
 *
 * What is fed: the allocated-level events (block_alloc / block_free) when
 * the snapshot has any, else the reserved-level allocation sequence
 * (alloc / free / async_alloc / async_free of device memory) — the
 * requests a process made to the driver, now served by the caching
 * allocator.  In file order, each on its recorded stream and device (one
 * allocator per device).  A free of an address the replay did not allocate
 * (allocated before the recording, or its request failed in the replay) is
 * skipped and counted.  A request that fails is an OOM of the replay: it is
 * written as an `oom` event and the replay goes on.
 *
 * How the device is simulated: in-process.  The simulated libcuda.so.1 is
 * dlopen'ed (RTLD_GLOBAL) and then libmemsnap_alloc.so, whose DT_NEEDED
 * libcuda.so.1 is satisfied by the already loaded simulation (the loader
 * matches the SONAME), so the CLI itself never links to a driver.  Paths:
 * $MEMSNAP_SIMDEV_LIB and $MEMSNAP_ALLOC_LIB, else ../simdev/libcuda.so.1
 * and ../lib/libmemsnap_alloc.so next to the memsnap binary (the build
 * tree layout).  The device memory is set through MEMSNAP_SIM_DEVICE_MEM
 * before the first cuInit, so it is one value per process.
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
 */
#include "interop.h"
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memsnap/alloc.h"

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
    void (*stats_get)(memsnap_alloc *, memsnap_alloc_stats *);
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
    SYM(stats_get, "memsnap_alloc_stats_get");
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

static uint64_t virt_of(rp *r, uint64_t sim)
{
    size_t lo = 0, hi = r->nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->reg[mid].sim <= sim)
            lo = mid + 1;
        else
            hi = mid;
    }
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
    size_t i = r->nreg;
    while (i && r->reg[i - 1].sim > sim) {
        r->reg[i] = r->reg[i - 1];
        i--;
    }
    uint64_t v = r->next_virt;
    r->next_virt += ((size + VIRT_GAP - 1) & ~(VIRT_GAP - 1)) + VIRT_GAP;
    r->reg[i] = (region){sim, size, v};
    r->nreg++;
    return v;
}

static void region_del(rp *r, uint64_t sim)
{
    for (size_t i = 0; i < r->nreg; i++)
        if (r->reg[i].sim == sim) {
            memmove(&r->reg[i], &r->reg[i + 1], (r->nreg - i - 1) * sizeof *r->reg);
            r->nreg--;
            return;
        }
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
    for (size_t i = 0; i < cur->nreg; i++)
        if (cur->reg[i].sim == p)
            e.size = cur->reg[i].size;
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

/* 1 when the file has allocator block events (first pass). */
static int has_blocks(const char *path, char *err, size_t errlen)
{
    char rerr[256];
    msnap_reader *r = msnap_reader_open(path, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s", rerr);
        return -1;
    }
    msnap_record rec;
    int rc, found = 0;
    while ((rc = msnap_reader_next(r, &rec)) == 1)
        if (rec.type == MSNAP_REC_EVENT && rec.u.event.action == MSNAP_A_BLOCK_ALLOC) {
            found = 1;
            break;
        }
    if (rc < 0) {
        snprintf(err, errlen, "%s", msnap_reader_error(r));
        msnap_reader_close(r);
        return -1;
    }
    msnap_reader_close(r);
    return found;
}

static void take_stats(rp *r, memsnap_alloc *a)
{
    memsnap_alloc_stats s;
    A.stats_get(a, &s);
    if (s.peak_reserved > r->res->peak_reserved) {
        r->res->peak_reserved = s.peak_reserved;
        r->res->frag_free_at_peak = s.frag_free;
    }
    if (s.peak_allocated > r->res->peak_allocated)
        r->res->peak_allocated = s.peak_allocated;
}

int msnap_replay(const char *in_path, const char *conf, uint64_t device_mem, const char *out_path,
                 msnap_replay_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (!strcmp(in_path, "-")) {
        snprintf(err, errlen, "replay reads its input twice; give a file, not stdin");
        return -1;
    }
    int blocks = has_blocks(in_path, err, errlen);
    if (blocks < 0)
        return -1;
    snprintf(res->level, sizeof res->level, "%s", blocks ? "blocks" : "reserved");
    if (load(device_mem, err, errlen))
        return -1;
    memsnap_alloc_config cfg;
    A.config_default(&cfg);
    char perr[256];
    if (A.config_parse(&cfg, conf, perr, sizeof perr)) {
        snprintf(err, errlen, "%s", perr);
        return -1;
    }
    cfg.trace = 0;
    rp *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->res = res;
    r->next_virt = VIRT_BASE;
    r->real = *A.driver_default();
    memsnap_alloc_driver drv = r->real;
    drv.cuMemAlloc_v2 = w_alloc;
    drv.cuMemFree_v2 = w_free;
    drv.cuMemAddressReserve = w_reserve;
    drv.cuMemAddressFree = w_addr_free;
    drv.cuMemCreate = w_create;
    drv.cuMemRelease = w_release;
    drv.cuMemMap = w_map;
    drv.cuMemUnmap = w_unmap;
    drv.cuMemSetAccess = w_set_access;
    drv.cuEventRecord = w_event_record;
    drv.cuStreamSynchronize = w_stream_sync;
    cur = r;
    memsnap_alloc *al[NDEV] = {0};
    int rc = -1, more;
    char rerr[256];
    msnap_reader *in = msnap_reader_open(in_path, rerr, sizeof rerr);
    if (!in) {
        snprintf(err, errlen, "%s", rerr);
        goto done;
    }
    if (out_path) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || !(r->out = msnap_out_fdopen(fd, 0))) {
            snprintf(err, errlen, "%s: cannot write: %s", out_path, strerror(errno));
            if (fd >= 0)
                close(fd);
            goto done;
        }
    }
    msnap_record rec;
    uint64_t last_t = 0;
    while ((more = msnap_reader_next(in, &rec)) == 1) {
        size_t n = 0;
        switch (rec.type) {
        case MSNAP_REC_HEADER: {
            msnap_header *h = calloc(1, sizeof *h);
            if (!h)
                break;
            const char *argv[] = {"memsnap", "replay", "--alloc-conf", conf};
            h->major = MSNAP_FORMAT_MAJOR;
            h->minor = MSNAP_FORMAT_MINOR;
            snprintf(h->host, sizeof h->host, "replay");
            h->argv = argv;
            h->argc = 4;
            snprintf(h->clock, sizeof h->clock, "CLOCK_MONOTONIC");
            snprintf(h->mode, sizeof h->mode, "replay");
            char settings[600];
            snprintf(settings, sizeof settings,
                     "{\"alloc_conf\":\"%s\",\"device_mem\":%" PRIu64 ",\"level\":\"%s\"}",
                     strchr(conf, '"') || strchr(conf, '\\') ? "" : conf, device_mem, res->level);
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
            break;
        }
        case MSNAP_REC_STACK:
            n = msnap_fmt_stack(r->buf, sizeof r->buf, &rec.u.stack);
            break;
        case MSNAP_REC_SYMBOL:
            n = msnap_fmt_symbol(r->buf, sizeof r->buf, &rec.u.symbol);
            break;
        case MSNAP_REC_MODULE:
            n = msnap_fmt_module(r->buf, sizeof r->buf, &rec.u.module);
            break;
        case MSNAP_REC_STR:
            n = msnap_fmt_str(r->buf, sizeof r->buf, &rec.u.str);
            break;
        case MSNAP_REC_EVENT: {
            const msnap_event *e = &rec.u.event;
            int a = e->action;
            int is_alloc = blocks ? a == MSNAP_A_BLOCK_ALLOC : (a == MSNAP_A_ALLOC || a == MSNAP_A_ASYNC_ALLOC);
            int is_free = blocks ? a == MSNAP_A_BLOCK_FREE : (a == MSNAP_A_FREE || a == MSNAP_A_ASYNC_FREE);
            if (a == MSNAP_A_NVTX_PUSH || a == MSNAP_A_NVTX_POP || a == MSNAP_A_NVTX_MARK) {
                if (r->out) {
                    n = msnap_fmt_event(r->buf, sizeof r->buf, e);
                    r->nev++;
                }
                break;
            }
            if (!is_alloc && !is_free)
                break;
            int d = e->device >= 0 && e->device < NDEV ? e->device : 0;
            r->t_ns = e->t_ns;
            r->tid = e->tid;
            r->device = d;
            if (e->t_ns > last_t)
                last_t = e->t_ns;
            if (!al[d]) {
                if (A.create(&cfg, d, &drv, &al[d])) {
                    snprintf(err, errlen, "cannot create the allocator: %s", A.error());
                    goto done;
                }
            }
            if (is_alloc) {
                res->requests++;
                CUdeviceptr p = 0;
                uint64_t before = r->reserve_changes;
                int arc = A.malloc_(al[d], e->size, (CUstream)(uintptr_t)e->stream, &p);
                if (arc == MEMSNAP_ALLOC_OK) {
                    u64map_put(&r->ptrs, (uint32_t)d, e->addr, p);
                    msnap_event o = *e;
                    o.action = MSNAP_A_BLOCK_ALLOC;
                    o.api = MSNAP_API_ALLOCATOR;
                    o.addr = virt_of(r, p);
                    o.device = (int16_t)d;
                    o.aux = o.aux2 = 0;
                    emit(r, &o);
                    if (r->reserve_changes != before || res->requests == 1)
                        take_stats(r, al[d]);
                    else {
                        memsnap_alloc_stats s;
                        A.stats_get(al[d], &s);
                        if (s.peak_allocated > res->peak_allocated)
                            res->peak_allocated = s.peak_allocated;
                    }
                } else if (arc == MEMSNAP_ALLOC_ERR_OOM) {
                    take_stats(r, al[d]);
                    if (!res->ooms++) {
                        res->oom = 1;
                        res->oom_t_ns = e->t_ns;
                        res->oom_size = e->size;
                        res->oom_index = res->requests;
                    }
                    size_t fr = 0, tot = 0;
                    r->real.cuMemGetInfo_v2(&fr, &tot);
                    msnap_event o = {.t_ns = e->t_ns, .size = e->size, .aux = fr, .aux2 = tot,
                                     .stack = e->stack, .tid = e->tid, .action = MSNAP_A_OOM,
                                     .api = MSNAP_API_ALLOCATOR, .device = (int16_t)d, .result = 2};
                    emit(r, &o);
                } else {
                    snprintf(err, errlen, "the allocator failed: %s", A.error());
                    goto done;
                }
            } else {
                uint64_t p;
                if (!u64map_del(&r->ptrs, (uint32_t)d, e->addr, &p)) {
                    res->skipped_frees++;
                    break;
                }
                msnap_event o = *e;
                o.action = MSNAP_A_BLOCK_FREE;
                o.api = MSNAP_API_ALLOCATOR;
                o.addr = virt_of(r, p);
                o.size = 0;
                o.device = (int16_t)d;
                if (A.free_(al[d], (CUdeviceptr)p)) {
                    snprintf(err, errlen, "the allocator refused a free: %s", A.error());
                    goto done;
                }
                emit(r, &o);
                res->frees++;
            }
            break;
        }
        default:
            break;
        }
        if (n && r->out && msnap_out_write(r->out, r->buf, n))
            r->wfail = 1;
    }
    if (more < 0) {
        snprintf(err, errlen, "%s", msnap_reader_error(in));
        goto done;
    }
    for (int d = 0; d < NDEV; d++) {
        if (!al[d])
            continue;
        memsnap_alloc_stats s;
        A.stats_get(al[d], &s);
        take_stats(r, al[d]);
        res->driver_allocs += s.driver_allocs;
        res->driver_frees += s.driver_frees;
        res->driver_maps += s.driver_maps;
        res->driver_unmaps += s.driver_unmaps;
    }
    res->frag_peak = res->peak_reserved ? 1.0 - (double)res->peak_allocated / (double)res->peak_reserved : 0;
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
            snprintf(err, errlen, "%s: cannot write: %s", out_path, strerror(errno));
            rc = -1;
        }
    }
    if (r->wfail && !rc) {
        snprintf(err, errlen, "%s: cannot write", out_path);
        rc = -1;
    }
    for (int d = 0; d < NDEV; d++)
        if (al[d])
            A.destroy(al[d]);
    if (in)
        msnap_reader_close(in);
    u64map_free(&r->handles);
    u64map_free(&r->ptrs);
    free(r->reg);
    free(r);
    cur = NULL;
    return rc;
}

/* Core of the simulated device: the one lock, call counting and fault
 * injection, the object and address-range registries, cuInit and its
 * settings, error strings, and the memsnap_sim_* control functions.
 *
 * Call counting: each driver function owns a static sim_fn descriptor that
 * SIM_API places in the memsnap_simfn linker section; the control functions
 * walk that section (__start/__stop symbols) to find a function by name,
 * so faults can be armed before the function is ever called.  Names are
 * resolved like cuGetProcAddress does ("cuMemAlloc" -> cuMemAlloc_v2) and
 * exported aliases (cuMemAllocAsync_ptsz, cuCtxDestroy) share the counter of
 * the function they alias.
 *
 * Settings are read once, at the first cuInit.  A bad value prints one line
 * on stderr naming the variable and the value; that cuInit and every later
 * one return CUDA_ERROR_INVALID_VALUE.  Nothing here exits or aborts.
 */
#define _GNU_SOURCE
#include "sim.h"
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From entry.c: the function a driver name resolves to (as
 * cuGetProcAddress would, newest version, legacy stream), or NULL. */
void *sim_proc_resolve(const char *name);

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;

sim_device sim_dev[SIM_MAX_DEVICES];
int sim_ndev;
int sim_initialized;
memsnap_sim_live sim_live;
uint64_t sim_next_id = 1;

extern sim_fn *const __start_memsnap_simfn[] __attribute__((visibility("hidden")));
extern sim_fn *const __stop_memsnap_simfn[] __attribute__((visibility("hidden")));

/* Settings parse state: 0 not yet parsed, 1 good, -1 bad. */
static int env_state;

/* Take the global lock. */
void sim_lock(void) { pthread_mutex_lock(&sim_mu); }

/* Drop the global lock. */
void sim_unlock(void) { pthread_mutex_unlock(&sim_mu); }

/* Drop the lock and return rc (the tail of every driver function). */
CUresult sim_return(CUresult rc)
{
    pthread_mutex_unlock(&sim_mu);
    return rc;
}

/* 1 if the call just counted on fn must fail by injection. */
static int fault_hits(const sim_fn *fn)
{
    if (!fn->fail_at)
        return 0;
    return fn->calls == fn->fail_at || (fn->persistent && fn->calls > fn->fail_at);
}

/* The error an injected fault returns for fn. */
static CUresult fault_code(const sim_fn *fn)
{
    return (fn->kind & SIM_ALLOCATING) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
}

/* See sim.h. */
CUresult sim_enter(sim_fn *fn)
{
    pthread_mutex_lock(&sim_mu);
    fn->calls++;
    if (!(fn->kind & SIM_NOINIT) && !sim_initialized) {
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (fault_hits(fn)) {
        CUresult rc = fault_code(fn);
        pthread_mutex_unlock(&sim_mu);
        return rc;
    }
    return CUDA_SUCCESS;
}

/* See sim.h: exact descriptor name first, then the driver-name resolution of
 * entry.c matched against the descriptors' function names. */
sim_fn *sim_fn_find(const char *name)
{
    if (!name)
        return NULL;
    for (sim_fn *const *p = __start_memsnap_simfn; p < __stop_memsnap_simfn; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    void *impl = sim_proc_resolve(name);
    if (!impl)
        return NULL;
    /* Find the descriptor whose name resolves to the same function. */
    for (sim_fn *const *p = __start_memsnap_simfn; p < __stop_memsnap_simfn; p++)
        if (sim_proc_resolve((*p)->name) == impl)
            return *p;
    return NULL;
}

/* ---- registries ----------------------------------------------------- */

static void *obj_root, *range_root, *res_root;

/* Order objects by address. */
static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y ? -1 : x > y;
}

/* Order ranges; overlapping ranges compare equal (they never coexist in a
 * tree, so equality means "the one containing/overlapping the key"). */
static int cmp_range(const void *a, const void *b)
{
    const sim_range *x = a, *y = b;
    if (x->end <= y->start)
        return -1;
    if (x->start >= y->end)
        return 1;
    return 0;
}

/* Same for reservations. */
static int cmp_res(const void *a, const void *b)
{
    const sim_res *x = a, *y = b;
    if (x->end <= y->start)
        return -1;
    if (x->start >= y->end)
        return 1;
    return 0;
}

/* See sim.h.  Returns 0, or -1 when out of memory. */
int sim_obj_add(void *obj)
{
    return tsearch(obj, &obj_root, cmp_ptr) ? 0 : -1;
}

/* See sim.h. */
void sim_obj_del(void *obj) { tdelete(obj, &obj_root, cmp_ptr); }

/* See sim.h. */
void *sim_obj_get(const void *obj, int type)
{
    if (!obj)
        return NULL;
    void **n = tfind(obj, &obj_root, cmp_ptr);
    if (!n)
        return NULL;
    sim_obj *o = *n;
    return o->type == type ? o : NULL;
}

/* See sim.h. */
int sim_range_add(sim_range *r)
{
    if (tfind(r, &range_root, cmp_range))
        return -1;
    void **n = tsearch(r, &range_root, cmp_range);
    return (n && *n == r) ? 0 : -1;
}

/* See sim.h. */
void sim_range_del(sim_range *r) { tdelete(r, &range_root, cmp_range); }

/* See sim.h. */
sim_range *sim_range_overlap(uint64_t start, uint64_t end)
{
    sim_range key = {.start = start, .end = end};
    void **n = tfind(&key, &range_root, cmp_range);
    return n ? *n : NULL;
}

/* See sim.h. */
sim_range *sim_range_find(uint64_t addr) { return sim_range_overlap(addr, addr + 1); }

/* See sim.h. */
int sim_res_add(sim_res *r)
{
    if (tfind(r, &res_root, cmp_res))
        return -1;
    void **n = tsearch(r, &res_root, cmp_res);
    return (n && *n == r) ? 0 : -1;
}

/* See sim.h. */
void sim_res_del(sim_res *r) { tdelete(r, &res_root, cmp_res); }

/* See sim.h. */
sim_res *sim_res_overlap(uint64_t start, uint64_t end)
{
    sim_res key = {.start = start, .end = end};
    void **n = tfind(&key, &res_root, cmp_res);
    return n ? *n : NULL;
}

/* See sim.h. */
sim_res *sim_res_find(uint64_t addr) { return sim_res_overlap(addr, addr + 1); }

/* ---- devices -------------------------------------------------------- */

/* See sim.h. */
uint64_t sim_round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* See sim.h. */
int sim_dev_valid(CUdevice dev) { return dev >= 0 && dev < sim_ndev; }

/* See sim.h. */
CUresult sim_charge(int dev, uint64_t n)
{
    sim_device *d = &sim_dev[dev];
    if (n > d->capacity || d->used > d->capacity - n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    d->used += n;
    return CUDA_SUCCESS;
}

/* See sim.h. */
void sim_uncharge(int dev, uint64_t n) { sim_dev[dev].used -= n; }

/* ---- settings ------------------------------------------------------- */

/* Arm one fault from "FUNC:N" or "FUNC:N+" (absolute call number since the
 * process started).  Returns 0 or -1. */
static int parse_fault(const char *item)
{
    const char *colon = strrchr(item, ':');
    if (!colon || colon == item || colon - item >= 128)
        return -1;
    char name[128];
    memcpy(name, item, (size_t)(colon - item));
    name[colon - item] = '\0';
    const char *p = colon + 1;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    char *end;
    long n = strtol(p, &end, 10);
    if (errno || n <= 0)
        return -1;
    int persistent = 0;
    if (*end == '+') {
        persistent = 1;
        end++;
    }
    if (*end != '\0')
        return -1;
    sim_fn *fn = sim_fn_find(name);
    if (!fn)
        return -1;
    fn->fail_at = n;
    fn->persistent = persistent;
    return 0;
}

/* Report one bad setting on stderr. */
static void bad_setting(const char *var, const char *val, const char *want)
{
    fprintf(stderr,
            "memsnap simdev: bad %s='%s' (%s); cuInit fails with CUDA_ERROR_INVALID_VALUE\n",
            var, val, want);
}

/* Read MEMSNAP_SIM_* once; on a bad value report it and return -1. */
static int read_settings(uint64_t *mem, int *ndev)
{
    const char *v;
    *mem = SIM_DEFAULT_MEM;
    *ndev = 1;
    if ((v = getenv("MEMSNAP_SIM_DEVICE_MEM")) && *v) {
        if (sim_size_parse(v, mem) < 0) {
            bad_setting("MEMSNAP_SIM_DEVICE_MEM", v,
                        "expected a size " SIM_SIZE_RANGE " such as 80G, 512M or 1073741824");
            return -1;
        }
    }
    if ((v = getenv("MEMSNAP_SIM_DEVICES")) && *v) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (errno || *end || n < 1 || n > SIM_MAX_DEVICES) {
            bad_setting("MEMSNAP_SIM_DEVICES", v, "expected a number from 1 to 8");
            return -1;
        }
        *ndev = (int)n;
    }
    if ((v = getenv("MEMSNAP_SIM_FAIL")) && *v) {
        char *copy = strdup(v);
        if (!copy)
            return -1;
        int bad = 0;
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (isspace((unsigned char)*tok))
                tok++;
            if (parse_fault(tok) < 0) {
                bad = 1;
                break;
            }
        }
        free(copy);
        if (bad) {
            /* Disarm whatever was armed before the bad item. */
            for (sim_fn *const *p = __start_memsnap_simfn; p < __stop_memsnap_simfn; p++)
                (*p)->fail_at = 0;
            bad_setting("MEMSNAP_SIM_FAIL", v,
                        "expected FUNC:N or FUNC:N+ items, comma-separated, naming driver functions");
            return -1;
        }
    }
    return 0;
}

/* Initialise the driver state; the lock is held and the call counted. */
static CUresult init_locked(unsigned flags, sim_fn *self)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (env_state == 0) {
        uint64_t mem;
        int ndev;
        env_state = read_settings(&mem, &ndev) == 0 ? 1 : -1;
        if (env_state == 1) {
            sim_ndev = ndev;
            for (int d = 0; d < SIM_MAX_DEVICES; d++)
                sim_dev[d].capacity = d < ndev ? mem : 0;
            /* A fault armed on cuInit itself applies to this call. */
            if (fault_hits(self))
                return fault_code(self);
        }
    }
    if (env_state < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_initialized)
        return CUDA_SUCCESS;
    for (int d = 0; d < sim_ndev; d++) {
        sim_device *dv = &sim_dev[d];
        dv->used = 0;
        dv->primary.hdr.type = OBJ_CTX;
        dv->primary.dev = d;
        dv->primary.primary = 1;
        dv->primary.id = sim_next_id++;
        if (sim_obj_add(&dv->primary) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        sim_pool_init_default(d);
    }
    sim_initialized = 1;
    return CUDA_SUCCESS;
}

/* cuInit: read the settings (first call) and create the devices. */
CUresult CUDAAPI cuInit(unsigned int Flags)
{
    SIM_API(cuInit, SIM_NOINIT);
    return sim_return(init_locked(Flags, &sim_fn_));
}

/* cuDriverGetVersion: CUDA 13.0; works before cuInit. */
CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    SIM_API(cuDriverGetVersion, SIM_NOINIT);
    if (!driverVersion)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    *driverVersion = 13000;
    return sim_return(CUDA_SUCCESS);
}

/* ---- error strings -------------------------------------------------- */

static const struct {
    CUresult code;
    const char *name, *str;
} err_tab[] = {
#include "errtab.inc"
};

/* Row of err_tab for code, or -1. */
static int err_find(CUresult code)
{
    for (size_t i = 0; i < sizeof err_tab / sizeof err_tab[0]; i++)
        if (err_tab[i].code == code)
            return (int)i;
    return -1;
}

/* cuGetErrorString: the description; INVALID_VALUE (and NULL) for unknown
 * codes.  Works before cuInit. */
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    SIM_API(cuGetErrorString, SIM_NOINIT);
    if (!pStr)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    int i = err_find(error);
    *pStr = i < 0 ? NULL : err_tab[i].str;
    return sim_return(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

/* cuGetErrorName: the enum name; INVALID_VALUE (and NULL) for unknown
 * codes.  Works before cuInit. */
CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    SIM_API(cuGetErrorName, SIM_NOINIT);
    if (!pStr)
        return sim_return(CUDA_ERROR_INVALID_VALUE);
    int i = err_find(error);
    *pStr = i < 0 ? NULL : err_tab[i].name;
    return sim_return(i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

/* ---- control functions (include/memsnap/simdev.h) -------------------- */

/* See simdev.h. */
int memsnap_sim_fail(const char *fn, long nth, int persistent)
{
    int rc = 0;
    sim_lock();
    if (!fn) {
        for (sim_fn *const *p = __start_memsnap_simfn; p < __stop_memsnap_simfn; p++)
            (*p)->fail_at = 0;
    } else {
        sim_fn *f = sim_fn_find(fn);
        if (!f || nth < 1) {
            rc = -1;
        } else {
            f->fail_at = f->calls + nth;
            f->persistent = persistent != 0;
        }
    }
    sim_unlock();
    return rc;
}

/* See simdev.h.  0 for names the simulation does not implement. */
long memsnap_sim_calls(const char *fn)
{
    sim_lock();
    sim_fn *f = sim_fn_find(fn);
    long n = f ? f->calls : 0;
    sim_unlock();
    return n;
}

/* See simdev.h.  0 before cuInit or for a device that does not exist. */
uint64_t memsnap_sim_used(int dev)
{
    sim_lock();
    uint64_t v = (sim_initialized && sim_dev_valid(dev)) ? sim_dev[dev].used : 0;
    sim_unlock();
    return v;
}

/* See simdev.h.  0 before cuInit or for a device that does not exist. */
uint64_t memsnap_sim_capacity(int dev)
{
    sim_lock();
    uint64_t v = (sim_initialized && sim_dev_valid(dev)) ? sim_dev[dev].capacity : 0;
    sim_unlock();
    return v;
}

/* See simdev.h: walks the ranges covering [addr, addr+size). */
int memsnap_sim_is_mapped(uint64_t addr, uint64_t size)
{
    if (size == 0 || addr + size < addr)
        return 0;
    int ok = 1;
    sim_lock();
    uint64_t p = addr, end = addr + size;
    while (p < end) {
        sim_range *r = sim_range_find(p);
        if (!r || r->kind == R_HOST || r->kind == R_HOSTREG ||
            (r->kind == R_MAP && !(r->access & CU_MEM_ACCESS_FLAGS_PROT_READ))) {
            ok = 0;
            break;
        }
        p = r->end;
    }
    sim_unlock();
    return ok;
}

/* See simdev.h. */
void memsnap_sim_live_get(memsnap_sim_live *out)
{
    if (!out)
        return;
    sim_lock();
    *out = sim_live;
    sim_unlock();
}

/* Internal interface of the simulated device (libcuda.so.1 stand-in).
 *
 * The simulation is one process-wide state guarded by one mutex.  Every
 * exported driver function starts with SIM_API(name, kind), which takes the
 * lock, counts the call, refuses it when cuInit has not run, and applies
 * fault injection; it ends with sim_return(rc), which drops the lock.  The
 * bookkeeping helpers declared here all expect the lock to be held.
 *
 * We compile with __CUDA_API_VERSION_INTERNAL (as NVIDIA builds its driver):
 * cuda.h then stops renaming functions by macro and declares every exported
 * name literally -- cuMemAlloc (v1, 32-bit), cuMemAlloc_v2, cuMemcpyHtoD_v2,
 * cuMemcpyHtoD_v2_ptds, cuMemAllocAsync_ptsz ... -- so each definition here
 * is written under its real exported name and its prototype is checked
 * against cuda.h.  cuda.h is included with default visibility; the rest of
 * the library is built with -fvisibility=hidden.
 *
 * Device memory is host address space: every allocation is an anonymous
 * MAP_NORESERVE mapping, so capacity is bookkeeping, not RAM.  Address
 * ranges (allocations, pinned host memory, VMM mappings) live in one
 * balanced tree (glibc tsearch) ordered by address, which gives O(log n)
 * exact and containing-range lookups; VMM reservations live in a second tree.
 * Opaque objects (contexts, streams, events, pools, modules, physical
 * handles) are validated through a third tree keyed by pointer.
 */
#ifndef MEMSNAP_SIM_H
#define MEMSNAP_SIM_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#pragma GCC visibility push(default)
#include <cuda.h>
#include "memsnap/simdev.h"
#pragma GCC visibility pop

#define SIM_MAX_DEVICES 8
#define SIM_GRANULARITY (2ull << 20) /* VMM granularity: 2 MiB */
#define SIM_ALLOC_ALIGN 512ull       /* cuMemAlloc accounting/alignment */
#define SIM_DEFAULT_MEM (80ull << 30)

#define SIM_ALIAS(target) __attribute__((alias(#target)))

/* ---- calls, faults, locking ---------------------------------------- */

enum { SIM_PLAIN = 0, SIM_ALLOCATING = 1, SIM_NOINIT = 2 };

/* One per implemented driver function; collected in the memsnap_simfn
 * linker section so they can be found by name before any call. */
typedef struct sim_fn {
    const char *name;
    int kind;        /* SIM_PLAIN / SIM_ALLOCATING, | SIM_NOINIT */
    long calls;      /* every call, failed ones too */
    long fail_at;    /* call number that fails (0: none) */
    int persistent;  /* fail_at and every later call */
} sim_fn;

/* Lock, count the call, check init and injected faults.  Returns
 * CUDA_SUCCESS with the lock held, or an error with the lock dropped. */
CUresult sim_enter(sim_fn *fn);
/* Drop the lock and return rc. */
CUresult sim_return(CUresult rc);
void sim_lock(void);
void sim_unlock(void);
/* The descriptor of the function named name (exact), or NULL. */
sim_fn *sim_fn_find(const char *name);

#define SIM_API(fname, fkind)                                                  \
    static sim_fn sim_fn_ = {#fname, (fkind), 0, 0, 0};                        \
    static sim_fn *const sim_fnp_                                              \
        __attribute__((section("memsnap_simfn"), used)) = &sim_fn_;            \
    do {                                                                       \
        CUresult sim_rc_ = sim_enter(&sim_fn_);                                \
        if (sim_rc_ != CUDA_SUCCESS)                                           \
            return sim_rc_;                                                    \
    } while (0)

/* ---- objects -------------------------------------------------------- */

enum sim_obj_type {
    OBJ_CTX = 0x51C7,
    OBJ_STREAM,
    OBJ_EVENT,
    OBJ_POOL,
    OBJ_MODULE,
    OBJ_LIBRARY,
    OBJ_HANDLE,
};

/* Every opaque object starts with this header. */
typedef struct sim_obj {
    int type;
} sim_obj;

typedef struct sim_ctx {
    sim_obj hdr;
    int dev;
    int primary;
    unsigned flags;
    int dead;       /* destroyed non-primary context (kept, never reused) */
    unsigned long long id;
} sim_ctx;

typedef struct sim_stream {
    sim_obj hdr;
    sim_ctx *ctx;
    unsigned flags;
    int priority;
    unsigned long long id;
} sim_stream;

typedef struct sim_event {
    sim_obj hdr;
    sim_ctx *ctx;
    unsigned flags;
    int recorded;
    struct timespec when;
} sim_event;

typedef struct sim_pool {
    sim_obj hdr;
    int dev;
    int is_default;
    int destroyed;     /* destroyed by the user, freed when allocs drain */
    long live_allocs;
    CUmemPoolProps props;
    uint64_t release_threshold;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    uint64_t used_cur, used_high;
} sim_pool;

typedef struct sim_handle {
    sim_obj hdr;
    int dev;
    uint64_t size;
    CUmemAllocationProp prop;
    long refs;     /* cuMemCreate 1, +1 per cuMemRetainAllocationHandle */
    long maps;     /* live mappings of this handle */
    uint64_t id;
} sim_handle;

/* Register / unregister / validate an object pointer. */
int sim_obj_add(void *obj);
void sim_obj_del(void *obj);
/* obj if it is a live object of that type, else NULL. */
void *sim_obj_get(const void *obj, int type);

/* ---- address ranges ------------------------------------------------- */

enum sim_range_kind {
    R_DEVICE = 1,  /* cuMemAlloc/Pitch/Async/Managed */
    R_HOST,        /* cuMemHostAlloc / cuMemAllocHost */
    R_HOSTREG,     /* cuMemHostRegister (not ours to free) */
    R_MAP,         /* VMM mapping inside a reservation */
};

typedef struct sim_res {
    uint64_t start, end;
    long maps;
} sim_res;

typedef struct sim_range {
    uint64_t start, end;      /* [start, end) */
    int kind;
    int dev;
    int managed;
    sim_ctx *ctx;
    uint64_t charged;         /* bytes counted against the device */
    size_t maplen;            /* bytes of host mapping to munmap */
    unsigned flags;           /* host-alloc flags / managed attach flags */
    sim_pool *pool;           /* stream-ordered allocations */
    sim_handle *handle;       /* R_MAP */
    uint64_t handle_off;      /* R_MAP */
    int access;               /* R_MAP: CUmemAccess_flags set by SetAccess */
    sim_res *res;             /* R_MAP */
    uint64_t id;
} sim_range;

int sim_range_add(sim_range *r);          /* 0, or -1 if it overlaps */
void sim_range_del(sim_range *r);
sim_range *sim_range_find(uint64_t addr); /* range containing addr */
sim_range *sim_range_overlap(uint64_t start, uint64_t end);
int sim_res_add(sim_res *r);
void sim_res_del(sim_res *r);
sim_res *sim_res_find(uint64_t addr);
sim_res *sim_res_overlap(uint64_t start, uint64_t end);

/* ---- devices, contexts ---------------------------------------------- */

typedef struct sim_device {
    uint64_t capacity, used;
    sim_ctx primary;
    long primary_refs;
    sim_pool default_pool;
    sim_pool *cur_pool;
} sim_device;

extern sim_device sim_dev[SIM_MAX_DEVICES];
extern int sim_ndev;
extern int sim_initialized;
extern memsnap_sim_live sim_live;
extern uint64_t sim_next_id;

/* Charge n bytes to device dev: CUDA_ERROR_OUT_OF_MEMORY if it would
 * exceed the capacity (nothing changes then). */
CUresult sim_charge(int dev, uint64_t n);
void sim_uncharge(int dev, uint64_t n);
int sim_dev_valid(CUdevice dev);

/* The calling thread's current context, or NULL. */
sim_ctx *sim_ctx_current(void);
/* Current context usable for work: CUDA_SUCCESS and *out, or
 * CUDA_ERROR_INVALID_CONTEXT. */
CUresult sim_ctx_require(sim_ctx **out);
/* The context a stream handle belongs to (NULL/legacy/per-thread streams
 * mean the current context). */
CUresult sim_stream_ctx(CUstream s, sim_ctx **out);

/* Initialise pools of a device (called from cuInit). */
void sim_pool_init_default(int dev);

uint64_t sim_round_up(uint64_t v, uint64_t a);

#endif

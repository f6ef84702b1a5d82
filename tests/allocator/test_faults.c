/* Fault injection, SQLite style: for k = 1, 2, ... make the k-th driver call
 * fail, run a fixed scenario, and check that every call returned an error or
 * succeeded (no crash), the invariant walker passes after every step, and after
 * destroy the simulated device is back to its baseline (no allocation, handle,
 * reservation, mapping or event left); stop when the scenario runs with no
 * fault hit.  Then again with the failure persistent (every call from the
 * k-th on fails).  Twice: through a fault-injecting driver table (every
 * function of the table), and through the simulation's own injection
 * (memsnap_sim_fail) for the memory functions.  Fixed, expandable and block
 * pool. */
#include "alloctest.h"

#define MiB (1ull << 20)

static memsnap_alloc_driver real;
static long fi_calls, fi_fail_at, fi_hits;
static int fi_on, fi_persistent;

static int fi_fail(void)
{
    if (!fi_on)
        return 0;
    fi_calls++;
    if (fi_calls == fi_fail_at || (fi_persistent && fi_calls > fi_fail_at)) {
        fi_hits++;
        return 1;
    }
    return 0;
}

#define UNK CUDA_ERROR_UNKNOWN
#define OOM CUDA_ERROR_OUT_OF_MEMORY
#define W(name, err, params, args)                                                           \
    static CUresult w_##name params                                                          \
    {                                                                                        \
        return fi_fail() ? err : real.name args;                                             \
    }
W(cuInit, UNK, (unsigned f), (f))
W(cuCtxGetCurrent, UNK, (CUcontext * c), (c))
W(cuCtxPushCurrent_v2, UNK, (CUcontext c), (c))
W(cuCtxPopCurrent_v2, UNK, (CUcontext * c), (c))
W(cuCtxGetDevice, UNK, (CUdevice * d), (d))
W(cuCtxSynchronize, UNK, (void), ())
W(cuDevicePrimaryCtxRetain, UNK, (CUcontext * c, CUdevice d), (c, d))
W(cuDevicePrimaryCtxRelease_v2, UNK, (CUdevice d), (d))
W(cuDeviceTotalMem_v2, UNK, (size_t * b, CUdevice d), (b, d))
W(cuMemGetInfo_v2, UNK, (size_t * f, size_t *t), (f, t))
W(cuMemAlloc_v2, OOM, (CUdeviceptr * p, size_t s), (p, s))
W(cuMemFree_v2, UNK, (CUdeviceptr p), (p))
W(cuMemAddressReserve, OOM,
  (CUdeviceptr * p, size_t s, size_t al, CUdeviceptr ad, unsigned long long f),
  (p, s, al, ad, f))
W(cuMemAddressFree, UNK, (CUdeviceptr p, size_t s), (p, s))
W(cuMemCreate, OOM,
  (CUmemGenericAllocationHandle * h, size_t s, const CUmemAllocationProp *pr,
   unsigned long long f),
  (h, s, pr, f))
W(cuMemRelease, UNK, (CUmemGenericAllocationHandle h), (h))
W(cuMemMap, UNK,
  (CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f),
  (p, s, o, h, f))
W(cuMemUnmap, UNK, (CUdeviceptr p, size_t s), (p, s))
W(cuMemSetAccess, UNK, (CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t c),
  (p, s, d, c))
W(cuMemGetAllocationGranularity, UNK,
  (size_t * g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o), (g, p, o))
W(cuEventCreate, UNK, (CUevent * e, unsigned f), (e, f))
W(cuEventRecord, UNK, (CUevent e, CUstream s), (e, s))
W(cuEventQuery, UNK, (CUevent e), (e))
W(cuEventSynchronize, UNK, (CUevent e), (e))
W(cuEventDestroy_v2, UNK, (CUevent e), (e))
W(cuStreamSynchronize, UNK, (CUstream s), (s))

static memsnap_alloc_driver faulty = {
#define F(name) .name = w_##name
    F(cuInit), F(cuCtxGetCurrent), F(cuCtxPushCurrent_v2), F(cuCtxPopCurrent_v2),
    F(cuCtxGetDevice), F(cuCtxSynchronize), F(cuDevicePrimaryCtxRetain),
    F(cuDevicePrimaryCtxRelease_v2), F(cuDeviceTotalMem_v2), F(cuMemGetInfo_v2),
    F(cuMemAlloc_v2), F(cuMemFree_v2), F(cuMemAddressReserve), F(cuMemAddressFree),
    F(cuMemCreate), F(cuMemRelease), F(cuMemMap), F(cuMemUnmap), F(cuMemSetAccess),
    F(cuMemGetAllocationGranularity), F(cuEventCreate), F(cuEventRecord), F(cuEventQuery),
    F(cuEventSynchronize), F(cuEventDestroy_v2), F(cuStreamSynchronize),
#undef F
};

static CUstream s1;
static long errors_seen;

/* An allocator call: success or a clean error with a message. */
#define STEP(call)                                                                           \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        CHECK(rc_ == MEMSNAP_ALLOC_OK || rc_ == MEMSNAP_ALLOC_ERR_OOM ||                     \
              rc_ == MEMSNAP_ALLOC_ERR_DRIVER || rc_ == MEMSNAP_ALLOC_ERR_INVALID);           \
        if (rc_ != MEMSNAP_ALLOC_OK) {                                                       \
            errors_seen++;                                                                   \
            CHECK(memsnap_alloc_error()[0] != 0);                                            \
        }                                                                                    \
        CHECK_INV(a);                                                                        \
    } while (0)

/* The scenario: returns the allocator (NULL when creation failed). */
static memsnap_alloc *scenario(const char *conf, const memsnap_alloc_driver *drv)
{
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    memsnap_alloc_config_parse(&cfg, conf, NULL, 0);
    memsnap_alloc *a = NULL;
    if (memsnap_alloc_create(&cfg, 0, drv, &a) != MEMSNAP_ALLOC_OK) {
        CHECK(a == NULL);
        CHECK(memsnap_alloc_error()[0] != 0);
        return NULL;
    }
    CUdeviceptr p[8] = {0};
    STEP(memsnap_alloc_malloc(a, 1000, NULL, &p[0]));
    STEP(memsnap_alloc_malloc(a, 300 << 10, s1, &p[1]));
    STEP(memsnap_alloc_malloc(a, 5 * MiB, NULL, &p[2]));
    STEP(memsnap_alloc_malloc(a, 30 * MiB, s1, &p[3]));
    if (p[1]) {
        STEP(memsnap_alloc_record_stream(a, p[1], NULL));
        STEP(memsnap_alloc_free(a, p[1]));
    }
    if (p[0])
        STEP(memsnap_alloc_free(a, p[0]));
    STEP(memsnap_alloc_malloc(a, 1000, s1, &p[4]));        /* cross-stream reuse */
    STEP(memsnap_alloc_malloc(a, 200 * MiB, NULL, &p[5])); /* OOM retry on 256M */
    if (p[2])
        STEP(memsnap_alloc_free(a, p[2]));
    STEP(memsnap_alloc_empty_cache(a));
    STEP(memsnap_alloc_malloc(a, 7 * MiB, s1, &p[6]));
    for (int i = 3; i < 8; i++)
        if (p[i])
            STEP(memsnap_alloc_free(a, p[i]));
    STEP(memsnap_alloc_empty_cache(a));
    return a;
}

static void pool_scenario(const memsnap_alloc_driver *drv)
{
    memsnap_blockpool *p = NULL;
    if (memsnap_blockpool_create(0, 3 * MiB, 10, drv, &p) != MEMSNAP_ALLOC_OK) {
        CHECK(p == NULL);
        return;
    }
    CUdeviceptr b[3];
    for (int i = 0; i < 3; i++)
        CHECK(memsnap_blockpool_alloc(p, &b[i]) == MEMSNAP_ALLOC_OK);
    CHECK(memsnap_blockpool_free(p, b[1]) == MEMSNAP_ALLOC_OK);
    char m[256];
    CHECK(memsnap_blockpool_check(p, m, sizeof m) == 0);
    fi_on = 0; /* destroy with faults off: it must give back everything */
    memsnap_blockpool_destroy(p);
}

static memsnap_sim_live live0;
static uint64_t used0;

static void check_clean(const char *what, long k)
{
    memsnap_sim_live l = sim_live_now();
    if (!live_eq(l, live0) || sim.used(0) != used0)
        fprintf(stderr, "%s k=%ld: leak: allocs %ld handles %ld reservations %ld mappings %ld "
                        "events %ld used %llu (baseline %llu)\n",
                what, k, l.allocs - live0.allocs, l.handles - live0.handles,
                l.reservations - live0.reservations, l.mappings - live0.mappings,
                l.events - live0.events, (unsigned long long)sim.used(0),
                (unsigned long long)used0);
    CHECK(live_eq(l, live0));
    CHECK_EQ_U64(sim.used(0), used0);
}

static void table_loop(const char *conf, int pool, int persistent)
{
    long k;
    for (k = 1;; k++) {
        fi_calls = fi_hits = 0;
        fi_fail_at = k;
        fi_persistent = persistent;
        fi_on = 1;
        if (pool) {
            pool_scenario(&faulty);
            /* A creation that failed under a persistent fault could not give
             * its memory back; the next pool (faults off) does. */
            fi_on = 0;
            pool_scenario(&faulty);
        } else {
            memsnap_alloc *a = scenario(conf, &faulty);
            fi_on = 0;
            memsnap_alloc_destroy(a);
        }
        fi_on = 0;
        check_clean(conf, k);
        if (fi_hits == 0)
            break;
        if (k > 100000) {
            CHECK(!"fault loop does not end");
            break;
        }
    }
    printf("%s %s%s: %ld driver calls failed in turn\n", pool ? "blockpool" : "allocator",
           conf, persistent ? " (persistent)" : "", k - 1);
}

static void sim_loop(const char *conf)
{
    static const char *fns[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemCreate", "cuMemMap",
                                "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                "cuMemAddressReserve", "cuEventRecord", "cuEventCreate",
                                "cuCtxSynchronize"};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++)
        for (long n = 1; n <= 4; n++)
            for (int pers = 0; pers < 2; pers++) {
                CHECK(sim.fail(fns[f], n, pers) == 0);
                memsnap_alloc *a = scenario(conf, NULL);
                sim.fail(NULL, 0, 0);
                memsnap_alloc_destroy(a);
                check_clean(fns[f], n);
            }
}

int main(void)
{
    sim_start();
    real = *memsnap_alloc_driver_default();
    CK(cuStreamCreate(&s1, 0));
    live0 = sim_live_now();
    used0 = sim.used(0);
    const char *confs[] = {"", "expandable_segments:true,expandable_va:1G"};
    for (int c = 0; c < 2; c++)
        for (int pers = 0; pers < 2; pers++)
            table_loop(confs[c], 0, pers);
    for (int pers = 0; pers < 2; pers++)
        table_loop("", 1, pers);
    for (int c = 0; c < 2; c++)
        sim_loop(confs[c]);
    printf("%ld clean errors returned\n", errors_seen);
    CK(cuStreamDestroy(s1));
    return check_summary();
}

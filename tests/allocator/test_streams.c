/* Stream safety.  The simulated device completes events at once, so this test
 * gives the allocator a driver table whose events stay pending until the test
 * completes them (memory calls still go to the simulation): it proves the
 * allocator waits.
 *
 *  - a block freed on S1 is reused at once by S1, and by S2 only after the
 *    event recorded on S1 completes;
 *  - record_stream(ptr, S2): after the free nobody (not even S1) gets the block
 *    until the event recorded on S2 completes;
 *  - empty_cache synchronizes the context, which completes everything;
 *  - on the plain simulated driver the same cross-stream reuse happens on the
 *    first miss (events complete at once).
 */
#include "alloctest.h"

#define MiB (1ull << 20)
#define MAXEV 256

static struct fake_event {
    int used, recorded, complete;
    CUstream stream;
} events[MAXEV];
static int records, queries;

static CUresult f_event_create(CUevent *ev, unsigned flags)
{
    (void)flags;
    for (int i = 0; i < MAXEV; i++)
        if (!events[i].used) {
            memset(&events[i], 0, sizeof events[i]);
            events[i].used = 1;
            *ev = (CUevent)&events[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_event_record(CUevent ev, CUstream s)
{
    struct fake_event *e = (struct fake_event *)ev;
    e->recorded = 1;
    e->complete = 0;
    e->stream = s;
    records++;
    return CUDA_SUCCESS;
}
static CUresult f_event_query(CUevent ev)
{
    queries++;
    return ((struct fake_event *)ev)->complete ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult f_event_sync(CUevent ev)
{
    ((struct fake_event *)ev)->complete = 1;
    return CUDA_SUCCESS;
}
static CUresult f_event_destroy(CUevent ev)
{
    ((struct fake_event *)ev)->used = 0;
    return CUDA_SUCCESS;
}
static void complete_stream(CUstream s)
{
    for (int i = 0; i < MAXEV; i++)
        if (events[i].used && events[i].recorded && events[i].stream == s)
            events[i].complete = 1;
}
static CUresult f_ctx_sync(void)
{
    for (int i = 0; i < MAXEV; i++)
        events[i].complete = 1;
    return CUDA_SUCCESS;
}
static CUresult f_stream_sync(CUstream s)
{
    complete_stream(s);
    return CUDA_SUCCESS;
}
static int live_events(void)
{
    int n = 0;
    for (int i = 0; i < MAXEV; i++)
        n += events[i].used;
    return n;
}

#define S1 ((CUstream)(uintptr_t)0x1001)
#define S2 ((CUstream)(uintptr_t)0x1002)
#define S3 ((CUstream)(uintptr_t)0x1003)
#define S4 ((CUstream)(uintptr_t)0x1004)

static void held_events(const char *conf)
{
    memsnap_alloc_driver drv = *memsnap_alloc_driver_default();
    drv.cuEventCreate = f_event_create;
    drv.cuEventRecord = f_event_record;
    drv.cuEventQuery = f_event_query;
    drv.cuEventSynchronize = f_event_sync;
    drv.cuEventDestroy_v2 = f_event_destroy;
    drv.cuCtxSynchronize = f_ctx_sync;
    drv.cuStreamSynchronize = f_stream_sync;
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    CHECK(memsnap_alloc_config_parse(&cfg, conf, NULL, 0) == 0);
    memsnap_alloc *a;
    ACK(memsnap_alloc_create(&cfg, 0, &drv, &a));
    records = 0;

    /* Same stream: reused at once, no event. */
    CUdeviceptr p, q, r, x, y;
    ACK(memsnap_alloc_malloc(a, MiB, S1, &p));
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_malloc(a, MiB, S1, &q));
    CHECK(q == p);
    CHECK_EQ_U64(records, 0);

    /* Another stream: must not get it while S1's event is pending. */
    ACK(memsnap_alloc_free(a, q));
    ACK(memsnap_alloc_malloc(a, MiB, S2, &r));
    CHECK(r != p);
    CHECK(records >= 1); /* an event was recorded on S1 */
    CHECK_INV(a);
    ACK(memsnap_alloc_free(a, r)); /* r goes to S2's cache */
    /* S3 misses again, event still pending: still not p (nor r). */
    ACK(memsnap_alloc_malloc(a, MiB, S3, &x));
    CHECK(x != p && x != r);
    ACK(memsnap_alloc_free(a, x));
    /* S1's work completes: on the next miss p is given to another stream. */
    complete_stream(S1);
    ACK(memsnap_alloc_malloc(a, MiB, S3, &y)); /* S3 has x cached: takes x */
    CHECK(y == x);
    CUdeviceptr z; /* a new stream misses: p, freed on S1, is now safe for it */
    ACK(memsnap_alloc_malloc(a, MiB, S4, &z));
    if (z != p)
        fprintf(stderr, "z=%llx p=%llx r=%llx x=%llx records=%d\n", (unsigned long long)z, (unsigned long long)p, (unsigned long long)r, (unsigned long long)x, records);
    CHECK(z == p);
    CHECK_INV(a);
    ACK(memsnap_alloc_free(a, y));
    ACK(memsnap_alloc_free(a, z));

    /* record_stream: nobody gets the block until S2's event completes. */
    CUdeviceptr b, c, d;
    ACK(memsnap_alloc_malloc(a, 3 * MiB, S1, &b));
    ACK(memsnap_alloc_record_stream(a, b, S2));
    ACK(memsnap_alloc_record_stream(a, b, S2)); /* twice: one use */
    ACK(memsnap_alloc_record_stream(a, b, S1)); /* own stream: no-op */
    int before = records;
    ACK(memsnap_alloc_free(a, b));
    CHECK_EQ_U64(records, before + 1);
    memsnap_alloc_stats st = stats_of(a);
    CHECK_EQ_U64(st.active, 3 * MiB); /* PENDING counts as active */
    CHECK_EQ_U64(st.allocated, 0);
    CHECK_INV(a);
    ACK(memsnap_alloc_malloc(a, 3 * MiB, S1, &c));
    CHECK(c != b);
    complete_stream(S2);
    ACK(memsnap_alloc_malloc(a, 3 * MiB, S1, &d));
    CHECK(d == b);
    CHECK_INV(a);
    ACK(memsnap_alloc_free(a, c));
    ACK(memsnap_alloc_free(a, d));

    /* Pending at empty_cache: the context synchronize completes it. */
    ACK(memsnap_alloc_malloc(a, 3 * MiB, S1, &b));
    ACK(memsnap_alloc_record_stream(a, b, S3));
    ACK(memsnap_alloc_free(a, b));
    ACK(memsnap_alloc_empty_cache(a));
    st = stats_of(a);
    CHECK_EQ_U64(st.active, 0);
    CHECK_EQ_U64(st.reserved, 0);
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
    CHECK_EQ_U64(live_events(), 0); /* every event destroyed */
}

static void sim_events(const char *conf)
{
    memsnap_alloc *a = make_alloc(conf);
    CUstream s1, s2;
    CK(cuStreamCreate(&s1, 0));
    CK(cuStreamCreate(&s2, 0));
    CUdeviceptr p, q;
    ACK(memsnap_alloc_malloc(a, MiB, s1, &p));
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_malloc(a, MiB, s2, &q));
    CHECK(q == p); /* the event completed at once: reused across streams */
    CHECK(stats_of(a).event_records >= 1);
    ACK(memsnap_alloc_free(a, q));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
    CK(cuStreamDestroy(s1));
    CK(cuStreamDestroy(s2));
}

int main(void)
{
    sim_start();
    memsnap_sim_live live0 = sim_live_now();
    held_events("");
    held_events("expandable_segments:true,expandable_va:2G");
    sim_events("");
    sim_events("expandable_segments:true,expandable_va:2G");
    CHECK(live_eq(live0, sim_live_now()));
    return check_summary();
}

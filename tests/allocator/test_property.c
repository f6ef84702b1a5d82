/* Property test on the simulated device (16 GiB): 1M random operations —
 * malloc (1 B to 64 MiB, skewed to small), free of a random live block,
 * record_stream, and now and then empty_cache — on 4 streams, in the mode
 * given on the command line (fixed | expandable | tuned-fixed |
 * tuned-expandable: every config knob, and a device_limit that the live set
 * sometimes passes, so the OOM retry and GC paths run thousands of times).
 *
 * After every step for the first 100k steps, then after every 1000th step
 * (checking all 1M steps would take minutes on a 2-core CI machine; the
 * first 100k already cover growth, reuse, OOM-free steady state and many
 * empty_cache rounds):
 *   - memsnap_alloc_check: blocks tile their segments exactly, nothing
 *     overlaps, free neighbours are merged, trees/map/counters agree;
 *   - the test's own recount: allocated = sum of rounded sizes of the live
 *     blocks, requested = sum of requested sizes, reserved = what the
 *     simulated device says is in use.
 * After every malloc: the pointer is 512-byte aligned, lies in mapped device
 * memory (memsnap_sim_is_mapped) and overlaps no other live block (checked
 * through the snapshot at the check points).  Every 10000 steps every live
 * pointer is checked to be mapped.
 */
#include "alloctest.h"

#define MiB (1ull << 20)
#define NSTEPS 1000000
#define FULL_CHECK_STEPS 100000
#define MAXLIVE 2000

typedef struct {
    CUdeviceptr p;
    size_t size, rounded;
} live_block;

static live_block live[MAXLIVE];
static int nlive;
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* 1 B to 64 MiB, log-uniform within classes skewed to small. */
static size_t random_size(void)
{
    uint64_t r = next() % 100;
    int lo, hi; /* log2 bounds */
    if (r < 60) {
        lo = 0;
        hi = 12;
    } else if (r < 85) {
        lo = 12;
        hi = 20;
    } else if (r < 97) {
        lo = 20;
        hi = 24;
    } else {
        lo = 24;
        hi = 26;
    }
    int e = lo + (int)(next() % (uint64_t)(hi - lo));
    uint64_t base = 1ull << e;
    return (size_t)(base + next() % base);
}

static int cmp_addr(const void *x, const void *y)
{
    const memsnap_alloc_block_info *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* No two ALLOCATED blocks overlap (across segments too). */
static void check_no_overlap(memsnap_alloc *a)
{
    memsnap_alloc_snapshot s;
    ACK(memsnap_alloc_snapshot_get(a, &s));
    size_t n = 0;
    for (size_t i = 0; i < s.nblocks; i++)
        if (s.blocks[i].state == MEMSNAP_BLOCK_ALLOCATED)
            s.blocks[n++] = s.blocks[i];
    qsort(s.blocks, n, sizeof *s.blocks, cmp_addr);
    int ok = 1;
    for (size_t i = 1; i < n; i++)
        if (s.blocks[i - 1].addr + s.blocks[i - 1].size > s.blocks[i].addr)
            ok = 0;
    CHECK(ok);
    CHECK_EQ_U64(n, (uint64_t)nlive);
    memsnap_alloc_snapshot_free(&s);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "fixed";
    /* fixed | expandable: defaults; tuned-*: every knob, and a device_limit
     * the live set sometimes exceeds (OOMs allowed, they must be clean). */
    const char *conf = "";
    int tuned = !strncmp(mode, "tuned", 5);
    if (!strcmp(mode, "expandable"))
        conf = "expandable_segments:true,expandable_va:16G";
    else if (!strcmp(mode, "tuned-fixed"))
        conf = "roundup_power2_divisions:4,max_split_size_mb:128,"
               "garbage_collection_threshold:0.6,device_limit:4800M";
    else if (!strcmp(mode, "tuned-expandable"))
        conf = "expandable_segments:true,expandable_va:8G,roundup_power2_divisions:8,"
               "max_split_size_mb:128,garbage_collection_threshold:0.6,device_limit:4800M";
    sim_start();
    memsnap_sim_live live0 = sim_live_now();
    uint64_t used0 = sim.used(0);
    memsnap_alloc *a = make_alloc(conf);
    CUstream streams[4];
    streams[0] = NULL;
    for (int i = 1; i < 4; i++)
        CK(cuStreamCreate(&streams[i], 0));

    uint64_t allocated = 0, requested = 0;
    long ooms = 0, failures = 0;
    for (long step = 0; step < NSTEPS && failures < 20; step++) {
        uint64_t r = next() % 1000;
        int before = check_failed_;
        if ((r < 520 || nlive < 16) && nlive < MAXLIVE) {
            size_t sz = random_size();
            CUstream s = streams[next() % 4];
            CUdeviceptr p;
            int rc = memsnap_alloc_malloc(a, sz, s, &p);
            if (rc == MEMSNAP_ALLOC_ERR_OOM) {
                CHECK(strstr(memsnap_alloc_error(), "out of memory") != NULL);
                ooms++;
            } else {
                ACK(rc);
                if (rc == MEMSNAP_ALLOC_OK) {
                    memsnap_alloc_stats st = stats_of(a);
                    uint64_t rounded = st.allocated - allocated;
                    CHECK(p % 512 == 0);
                    CHECK(rounded >= sz && rounded % 512 == 0);
                    CHECK(sim.is_mapped(p, rounded));
                    live[nlive++] = (live_block){p, sz, rounded};
                    allocated += rounded;
                    requested += sz;
                    if (next() % 50 == 0)
                        ACK(memsnap_alloc_record_stream(a, p, streams[next() % 4]));
                }
            }
        } else if (nlive) {
            int k = (int)(next() % (uint64_t)nlive);
            ACK(memsnap_alloc_free(a, live[k].p));
            allocated -= live[k].rounded;
            requested -= live[k].size;
            live[k] = live[--nlive];
        }
        if (step % 50000 == 49999)
            ACK(memsnap_alloc_empty_cache(a));
        if (step < FULL_CHECK_STEPS || step % 1000 == 0) {
            CHECK_INV(a);
            memsnap_alloc_stats st = stats_of(a);
            CHECK_EQ_U64(st.allocated, allocated);
            CHECK_EQ_U64(st.requested, requested);
            CHECK_EQ_U64(st.reserved, sim.used(0) - used0);
            CHECK(st.reserved >= st.active && st.active >= st.allocated);
        }
        if (step % 10000 == 0) {
            check_no_overlap(a);
            for (int i = 0; i < nlive; i++)
                CHECK(sim.is_mapped(live[i].p, live[i].rounded));
        }
        if (check_failed_ != before) {
            fprintf(stderr, "(step %ld, mode %s)\n", step, mode);
            failures++;
        }
    }
    memsnap_alloc_stats st = stats_of(a);
    printf("%s: %ld steps, %d live at end, %ld OOM, peak reserved %.1f MiB, peak allocated "
           "%.1f MiB, %llu driver allocs, %llu cache hits, frag_peak %.3f\n",
           mode, (long)NSTEPS, nlive, ooms, st.peak_reserved / (double)MiB,
           st.peak_allocated / (double)MiB, (unsigned long long)st.driver_allocs,
           (unsigned long long)st.cache_hits, st.frag_peak);
    if (!tuned)
        CHECK_EQ_U64(ooms, 0); /* 16 GiB is far more than the live set needs */
    while (nlive)
        ACK(memsnap_alloc_free(a, live[--nlive].p));
    ACK(memsnap_alloc_empty_cache(a));
    CHECK_INV(a);
    CHECK_EQ_U64(stats_of(a).reserved, 0);
    memsnap_alloc_destroy(a);
    for (int i = 1; i < 4; i++)
        CK(cuStreamDestroy(streams[i]));
    CHECK(live_eq(live0, sim_live_now()));
    CHECK_EQ_U64(sim.used(0), used0);
    return check_summary();
}

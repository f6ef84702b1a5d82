/* Allocator basics on the simulated device (1 GiB): rounding, size classes,
 * reuse, split and merge, empty_cache, the OOM retry and the OOM message,
 * device_limit, max_split_size, roundup_power2_divisions, the GC threshold,
 * expandable growth and shrink, data really stored, determinism, bad frees,
 * and nothing left on the device after destroy. */
#include "alloctest.h"

#define MiB (1ull << 20)

static uint64_t used0;

static void fixed_basics(void)
{
    memsnap_alloc *a = make_alloc("");
    CUdeviceptr p, q, r, s;
    ACK(memsnap_alloc_malloc(a, 100, NULL, &p));
    CHECK(p % 512 == 0);
    memsnap_alloc_stats st = stats_of(a);
    CHECK_EQ_U64(st.allocated, 512);
    CHECK_EQ_U64(st.requested, 100);
    CHECK_EQ_U64(st.reserved, 2 * MiB);
    CHECK_EQ_U64(st.segments, 1);
    CHECK_EQ_U64(sim.used(0) - used0, 2 * MiB);
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_malloc(a, 200, NULL, &q));
    CHECK(q == p); /* cache hit, same block */
    st = stats_of(a);
    CHECK_EQ_U64(st.driver_allocs, 1);
    CHECK_EQ_U64(st.cache_hits, 1);
    ACK(memsnap_alloc_free(a, q));

    /* Split and merge inside one 2 MiB segment. */
    ACK(memsnap_alloc_malloc(a, 256 << 10, NULL, &p));
    ACK(memsnap_alloc_malloc(a, 256 << 10, NULL, &q));
    ACK(memsnap_alloc_malloc(a, 256 << 10, NULL, &r));
    CHECK(q == p + (256 << 10) && r == q + (256 << 10));
    ACK(memsnap_alloc_free(a, q));
    CHECK_INV(a);
    st = stats_of(a);
    CHECK_EQ_U64(st.free_blocks, 2); /* q's hole and the tail */
    CHECK_EQ_U64(st.inactive_split, 2 * MiB - 2 * (256 << 10));
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_free(a, r));
    st = stats_of(a);
    CHECK_EQ_U64(st.free_blocks, 1); /* all merged back */
    CHECK_EQ_U64(st.largest_free, 2 * MiB);
    CHECK_EQ_U64(st.inactive_split, 0);
    CHECK_INV(a);

    /* Size classes: 5 MiB -> 20 MiB segment; 30 MiB -> own 30 MiB segment. */
    ACK(memsnap_alloc_malloc(a, 5 * MiB, NULL, &p));
    CHECK_EQ_U64(stats_of(a).reserved, 22 * MiB);
    ACK(memsnap_alloc_malloc(a, 30 * MiB - 5, NULL, &q));
    CHECK_EQ_U64(stats_of(a).reserved, 52 * MiB);
    ACK(memsnap_alloc_malloc(a, 5 * MiB, NULL, &s)); /* split from the 20 MiB one */
    CHECK(s == p + 5 * MiB);
    CHECK_EQ_U64(stats_of(a).segments, 3);
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_free(a, q));
    ACK(memsnap_alloc_free(a, s));

    /* Data is really stored. */
    char in[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        in[i] = (char)(i * 7);
    ACK(memsnap_alloc_malloc(a, 4096, NULL, &p));
    CK(cuMemcpyHtoD(p, in, sizeof in));
    CK(cuMemcpyDtoH(out, p, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0);
    ACK(memsnap_alloc_free(a, p));

    /* Bad frees change nothing. */
    CHECK(memsnap_alloc_free(a, 0x1234) == MEMSNAP_ALLOC_ERR_INVALID);
    CHECK(strstr(memsnap_alloc_error(), "not allocated by this allocator") != NULL);
    ACK(memsnap_alloc_malloc(a, 1000, NULL, &p));
    ACK(memsnap_alloc_free(a, p));
    CHECK(memsnap_alloc_free(a, p) == MEMSNAP_ALLOC_ERR_INVALID); /* double free */
    CHECK_INV(a);

    ACK(memsnap_alloc_empty_cache(a));
    st = stats_of(a);
    CHECK_EQ_U64(st.reserved, 0);
    CHECK_EQ_U64(st.segments, 0);
    CHECK_EQ_U64(sim.used(0), used0);
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
}

static void oom_retry(const char *conf, int expandable)
{
    memsnap_alloc *a = make_alloc(conf);
    CUdeviceptr p[10], big, big2, small[200];
    for (int i = 0; i < 10; i++)
        ACK(memsnap_alloc_malloc(a, 90 * MiB, NULL, &p[i]));
    for (int i = 0; i < 10; i++)
        ACK(memsnap_alloc_free(a, p[i]));
    uint64_t want;
    if (!expandable) {
        /* 900 MiB cached in 90 MiB segments; 500 MiB fits none of them nor the
         * 124 MiB the device has left: the cache is released and the malloc retried. */
        ACK(memsnap_alloc_malloc(a, 500 * MiB, NULL, &big));
        want = 500 * MiB;
    } else {
        /* 900 MiB of large-pool pages cached; the small pool grows past what the
         * device has left, so the large pool's pages are unmapped and it retries. */
        for (int i = 0; i < 200; i++)
            ACK(memsnap_alloc_malloc(a, MiB, NULL, &small[i]));
        want = 200 * MiB;
    }
    memsnap_alloc_stats st = stats_of(a);
    CHECK_EQ_U64(st.oom_retries, 1);
    CHECK_EQ_U64(st.oom_count, 0);
    CHECK_EQ_U64(st.reserved, want);
    CHECK_INV(a);
    /* Now a request that cannot fit at all. */
    CHECK(memsnap_alloc_malloc(a, 900 * MiB, NULL, &big2) == MEMSNAP_ALLOC_ERR_OOM);
    const char *msg = memsnap_alloc_error();
    printf("OOM message: %s\n", msg);
    CHECK(strstr(msg, "out of memory on device 0") != NULL);
    CHECK(strstr(msg, "tried to allocate 900.00 MiB") != NULL);
    CHECK(strstr(msg, expandable ? "reserved 200.00 MiB" : "reserved 500.00 MiB") != NULL);
    CHECK(strstr(msg, "device free") != NULL);
    st = stats_of(a);
    CHECK_EQ_U64(st.oom_count, 1);
    CHECK_INV(a);
    if (!expandable)
        ACK(memsnap_alloc_free(a, big));
    else
        for (int i = 0; i < 200; i++)
            ACK(memsnap_alloc_free(a, small[i]));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
    CHECK_EQ_U64(sim.used(0), used0);
}

static void limits(void)
{
    /* device_limit */
    memsnap_alloc *a = make_alloc("device_limit:64M");
    CUdeviceptr p, q;
    ACK(memsnap_alloc_malloc(a, 40 * MiB, NULL, &p));
    CHECK(memsnap_alloc_malloc(a, 40 * MiB, NULL, &q) == MEMSNAP_ALLOC_ERR_OOM);
    CHECK(strstr(memsnap_alloc_error(), "device_limit") != NULL);
    memsnap_alloc_destroy(a);

    /* max_split_size: a 100 MiB block is not split for 10 MiB, but reused for 90 MiB. */
    a = make_alloc("max_split_size_mb:64");
    ACK(memsnap_alloc_malloc(a, 100 * MiB, NULL, &p));
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_malloc(a, 10 * MiB, NULL, &q));
    CHECK(q != p);
    CHECK_EQ_U64(stats_of(a).reserved, 110 * MiB);
    ACK(memsnap_alloc_free(a, q));
    ACK(memsnap_alloc_malloc(a, 90 * MiB, NULL, &q));
    CHECK(q == p);
    CHECK_EQ_U64(stats_of(a).allocated, 100 * MiB); /* whole block, not split */
    ACK(memsnap_alloc_free(a, q));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);

    /* roundup_power2_divisions:4 — 1100 KiB rounds to 1.25 MiB. */
    a = make_alloc("roundup_power2_divisions:4");
    ACK(memsnap_alloc_malloc(a, 1100 << 10, NULL, &p));
    CHECK_EQ_U64(stats_of(a).allocated, 1280 << 10);
    ACK(memsnap_alloc_free(a, p));
    memsnap_alloc_destroy(a);

    /* garbage_collection_threshold: 40 MiB cached, 60 MiB more would pass 50% of 100M. */
    a = make_alloc("garbage_collection_threshold:0.5,device_limit:100M");
    ACK(memsnap_alloc_malloc(a, 40 * MiB, NULL, &p));
    ACK(memsnap_alloc_free(a, p));
    ACK(memsnap_alloc_malloc(a, 60 * MiB, NULL, &q));
    memsnap_alloc_stats st = stats_of(a);
    CHECK(st.gc_releases >= 1);
    CHECK_EQ_U64(st.reserved, 60 * MiB);
    CHECK_EQ_U64(st.oom_count, 0);
    ACK(memsnap_alloc_free(a, q));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
    CHECK_EQ_U64(sim.used(0), used0);
}

static void expandable(void)
{
    memsnap_alloc *a = make_alloc("expandable_segments:true,expandable_va:1G");
    CUdeviceptr p[10], s1, first;
    ACK(memsnap_alloc_malloc(a, 1 * MiB, NULL, &s1));
    memsnap_alloc_stats st = stats_of(a);
    CHECK_EQ_U64(st.reserved, 2 * MiB); /* one page */
    CHECK_EQ_U64(st.mapped_pages, 1);
    /* Growth: large blocks are consecutive, pages mapped as needed. */
    for (int i = 0; i < 10; i++) {
        ACK(memsnap_alloc_malloc(a, 10 * MiB, NULL, &p[i]));
        if (i)
            CHECK(p[i] == p[i - 1] + 10 * MiB);
        CHECK(sim.is_mapped(p[i], 10 * MiB));
    }
    first = p[0];
    st = stats_of(a);
    CHECK_EQ_U64(st.reserved, 2 * MiB + 100 * MiB);
    CHECK_EQ_U64(st.segments, 2); /* one reservation per pool */
    CHECK_EQ_U64(sim.used(0) - used0, st.reserved);
    CHECK_EQ_U64(st.driver_set_access, 11); /* one per mapped range, not per page */
    CHECK_INV(a);
    /* Free a middle one and the neighbours merge with it. */
    ACK(memsnap_alloc_free(a, p[4]));
    ACK(memsnap_alloc_free(a, p[5]));
    st = stats_of(a);
    CHECK_EQ_U64(st.largest_free, 20 * MiB);
    ACK(memsnap_alloc_malloc(a, 20 * MiB, NULL, &p[4]));
    CHECK_EQ_U64(stats_of(a).cache_hits, 1);
    p[5] = 0;
    /* A 3 MiB request straddles pages: 3 MiB mapped as 2 pages past the end. */
    CUdeviceptr odd;
    ACK(memsnap_alloc_malloc(a, 3 * MiB, NULL, &odd));
    CHECK(odd == p[9] + 10 * MiB);
    CHECK_EQ_U64(stats_of(a).reserved, 2 * MiB + 104 * MiB);
    ACK(memsnap_alloc_free(a, odd));
    for (int i = 0; i < 10; i++)
        if (p[i])
            ACK(memsnap_alloc_free(a, p[i]));
    ACK(memsnap_alloc_free(a, s1));
    /* Shrink: every page goes back; the reservations stay. */
    ACK(memsnap_alloc_empty_cache(a));
    st = stats_of(a);
    CHECK_EQ_U64(st.reserved, 0);
    CHECK_EQ_U64(st.mapped_pages, 0);
    CHECK_EQ_U64(sim.used(0), used0);
    CHECK_INV(a);
    /* Growing again maps at the lowest address. */
    ACK(memsnap_alloc_malloc(a, 10 * MiB, NULL, &p[0]));
    CHECK(p[0] == first);
    char in[1000], out[1000];
    memset(in, 0x5a, sizeof in);
    CK(cuMemcpyHtoD(p[0] + 10 * MiB - 1000, in, sizeof in));
    CK(cuMemcpyDtoH(out, p[0] + 10 * MiB - 1000, sizeof out));
    CHECK(memcmp(in, out, sizeof in) == 0);
    ACK(memsnap_alloc_free(a, p[0]));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
    CHECK_EQ_U64(sim.used(0), used0);

    /* Regression: max_split_size does not apply to expandable segments (it made
     * the grow path map the whole reservation once). */
    a = make_alloc("expandable_segments:true,expandable_va:1G,max_split_size_mb:64");
    ACK(memsnap_alloc_malloc(a, 100 * MiB, NULL, &p[0]));
    ACK(memsnap_alloc_free(a, p[0]));
    uint64_t maps = stats_of(a).driver_maps;
    ACK(memsnap_alloc_malloc(a, 10 * MiB, NULL, &p[1]));
    CHECK(p[1] == p[0]);
    CHECK_EQ_U64(stats_of(a).driver_maps, maps);
    ACK(memsnap_alloc_free(a, p[1]));
    CHECK_INV(a);
    memsnap_alloc_destroy(a);
}

static void blockpool(void)
{
    memsnap_blockpool *p = NULL;
    ACK(memsnap_blockpool_create(0, MiB + 100, 64, NULL, &p));
    memsnap_blockpool_stats st;
    memsnap_blockpool_stats_get(p, &st);
    CHECK_EQ_U64(st.block_size, MiB + 512);
    CHECK_EQ_U64(st.nfree, 64);
    CHECK_EQ_U64(st.reserved % (2 * MiB), 0);
    CHECK_EQ_U64(sim.used(0) - used0, st.reserved);
    CUdeviceptr b[65];
    for (int i = 0; i < 64; i++) {
        ACK(memsnap_blockpool_alloc(p, &b[i]));
        CHECK(b[i] == st.base + (uint64_t)i * st.block_size); /* LIFO from block 0 */
        CHECK(memsnap_blockpool_index(p, b[i]) == i);
        CHECK(sim.is_mapped(b[i], st.block_size));
    }
    CHECK(memsnap_blockpool_alloc(p, &b[64]) == MEMSNAP_ALLOC_ERR_OOM);
    CHECK(strstr(memsnap_alloc_error(), "all 64 blocks") != NULL);
    ACK(memsnap_blockpool_free(p, b[17]));
    CHECK(memsnap_blockpool_free(p, b[17]) == MEMSNAP_ALLOC_ERR_INVALID);
    CHECK(memsnap_blockpool_free(p, b[3] + 512) == MEMSNAP_ALLOC_ERR_INVALID);
    ACK(memsnap_blockpool_alloc(p, &b[64]));
    CHECK(b[64] == b[17]);
    CHECK(memsnap_blockpool_ptr(p, 5) == b[5]);
    CHECK(memsnap_blockpool_ptr(p, 64) == 0);
    char m[256];
    CHECK(memsnap_blockpool_check(p, m, sizeof m) == 0);
    memsnap_blockpool_destroy(p);
    CHECK_EQ_U64(sim.used(0), used0);
}

/* Same op sequence + config -> same offsets and stats (replay relies on it). */
static void run_sequence(const char *conf, memsnap_alloc_snapshot *snap, memsnap_alloc_stats *st)
{
    memsnap_alloc *a = make_alloc(conf);
    CUdeviceptr live[256] = {0};
    uint32_t x = 12345;
    for (int i = 0; i < 3000; i++) {
        x = x * 1103515245 + 12345;
        int k = (x >> 8) % 256;
        if (live[k]) {
            ACK(memsnap_alloc_free(a, live[k]));
            live[k] = 0;
        } else {
            size_t sz = 1 + ((x >> 4) % 7 == 0 ? (x % (24 * MiB)) : (x % 300000));
            ACK(memsnap_alloc_malloc(a, sz, NULL, &live[k]));
        }
    }
    ACK(memsnap_alloc_snapshot_get(a, snap));
    memsnap_alloc_stats_get(a, st);
    memsnap_alloc_destroy(a);
}

static void determinism(const char *conf)
{
    memsnap_alloc_snapshot s1, s2;
    memsnap_alloc_stats t1, t2;
    run_sequence(conf, &s1, &t1);
    CUdeviceptr pad; /* move the driver's next addresses */
    CK(cuMemAlloc(&pad, 6 * MiB));
    run_sequence(conf, &s2, &t2);
    CK(cuMemFree(pad));
    CHECK_EQ_U64(s1.nsegments, s2.nsegments);
    CHECK_EQ_U64(s1.nblocks, s2.nblocks);
    int same = s1.nsegments == s2.nsegments && s1.nblocks == s2.nblocks;
    for (size_t i = 0; same && i < s1.nsegments; i++)
        same = s1.segments[i].size == s2.segments[i].size &&
               s1.segments[i].mapped == s2.segments[i].mapped &&
               s1.segments[i].nblocks == s2.segments[i].nblocks;
    for (size_t s = 0; same && s < s1.nsegments; s++)
        for (size_t j = s1.segments[s].first_block;
             same && j < s1.segments[s].first_block + s1.segments[s].nblocks; j++)
            same = s1.blocks[j].addr - s1.segments[s].base ==
                       s2.blocks[j].addr - s2.segments[s].base &&
                   s1.blocks[j].size == s2.blocks[j].size &&
                   s1.blocks[j].state == s2.blocks[j].state;
    CHECK(same);
    t1.frag_free = t2.frag_free = t1.frag_peak = t2.frag_peak = 0;
    CHECK(memcmp(&t1, &t2, sizeof t1) == 0);
    memsnap_alloc_snapshot_free(&s1);
    memsnap_alloc_snapshot_free(&s2);
}

int main(void)
{
    sim_start();
    memsnap_sim_live live0 = sim_live_now();
    used0 = sim.used(0);
    fixed_basics();
    oom_retry("", 0);
    oom_retry("expandable_segments:true", 1);
    limits();
    expandable();
    blockpool();
    determinism("");
    determinism("expandable_segments:true,expandable_va:4G");
    memsnap_sim_live live1 = sim_live_now();
    CHECK(live_eq(live0, live1));
    CHECK_EQ_U64(sim.used(0), used0);
    return check_summary();
}

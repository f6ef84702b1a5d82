/* test_torchalloc: the PyTorch caching allocator emulation (interop/
 * torchalloc.c) on hand-made request sequences whose answers follow from
 * PyTorch's rules: rounding, pool choice and segment sizes, split or not,
 * the oversize rules of max_split_size, release and retry on OOM, garbage
 * collection under a memory fraction, expandable segments, empty_cache,
 * private pools (CUDA graphs, MemPool). */
#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "whatif/torchalloc.h"

#define MiB (1ull << 20)

static ta_alloc *mk(const char *conf, uint64_t total)
{
    ta_config c;
    char err[256];
    ta_config_default(&c);
    if (ta_config_parse(&c, conf, err, sizeof err)) {
        fprintf(stderr, "config %s: %s\n", conf, err);
        exit(1);
    }
    return ta_create(&c, total, total, 1ull << 40, NULL, NULL);
}

static ta_stats st(ta_alloc *a)
{
    ta_stats s;
    ta_stats_get(a, &s);
    return s;
}

static uint64_t m(ta_alloc *a, uint64_t size)
{
    uint64_t p = 0;
    CHECK(ta_malloc(a, size, 0, &p) == TA_OK);
    return p;
}

static void rounding(void)
{
    ta_config c;
    char err[128];
    ta_config_default(&c);
    CHECK_EQ_U64(ta_round_size(&c, 1), 512);
    CHECK_EQ_U64(ta_round_size(&c, 512), 512);
    CHECK_EQ_U64(ta_round_size(&c, 513), 1024);
    CHECK_EQ_U64(ta_round_size(&c, 5 * MiB + 1), 5 * MiB + 512);
    CHECK(!ta_config_parse(&c, "roundup_power2_divisions:4", err, sizeof err));
    CHECK_EQ_U64(ta_round_size(&c, 1200), 1536);           /* not above 512 * 4 */
    CHECK_EQ_U64(ta_round_size(&c, 5 * MiB + 1), 6 * MiB); /* 4 MiB + 1 MiB steps */
    CHECK_EQ_U64(ta_round_size(&c, 5 * MiB), 5 * MiB);
    CHECK_EQ_U64(ta_round_size(&c, 4 * MiB), 4 * MiB);     /* a power of two stays */
    CHECK_EQ_U64(ta_round_size(&c, 3000), 3072);
    /* the string to paste round-trips */
    char s[256];
    ta_config_string(&c, s, sizeof s);
    CHECK(!strcmp(s, "roundup_power2_divisions:4"));
}

static void pools_and_splits(void)
{
    ta_alloc *a = mk("", 1ull << 30);
    m(a, 1000);                       /* small: a 2 MiB segment */
    CHECK_EQ_U64(st(a).reserved, 2 * MiB);
    m(a, MiB);                        /* small too (<= 1 MiB), fits the rest */
    CHECK_EQ_U64(st(a).reserved, 2 * MiB);
    m(a, MiB + 1);                    /* large, 1..10 MiB: a 20 MiB segment, split */
    CHECK_EQ_U64(st(a).reserved, 22 * MiB);
    m(a, 11 * MiB);                   /* fits the 20 MiB segment's rest */
    CHECK_EQ_U64(st(a).reserved, 22 * MiB);
    uint64_t big = m(a, 25 * MiB + 1);/* > 10 MiB: its size rounded to 2 MiB */
    CHECK_EQ_U64(st(a).reserved, 48 * MiB);
    /* 26 MiB - (25 MiB + 512) is not more than 1 MiB: not split */
    CHECK_EQ_U64(st(a).allocated, 1024 + MiB + (MiB + 512) + 11 * MiB + 26 * MiB);
    CHECK(!ta_free(a, big));
    CHECK(ta_free(a, big) == -1);     /* not allocated any more */
    m(a, 24 * MiB);                   /* best fit: the cached 26 MiB, split */
    CHECK_EQ_U64(st(a).reserved, 48 * MiB);
    CHECK_EQ_U64(st(a).allocated, 1024 + MiB + (MiB + 512) + 11 * MiB + 24 * MiB);
    CHECK_EQ_U64(st(a).segment_allocs, 3);
    /* a request on another stream never takes this stream's cache */
    uint64_t p;
    CHECK(ta_malloc(a, MiB + 1, 7, &p) == TA_OK);
    CHECK_EQ_U64(st(a).reserved, 68 * MiB);
    ta_destroy(a);
}

static void oversize(void)
{
    ta_alloc *a = mk("max_split_size_mb:64", 1ull << 30);
    uint64_t p = m(a, 100 * MiB);
    CHECK(!ta_free(a, p));
    uint64_t q = m(a, 30 * MiB);      /* never an oversize block for a small request */
    CHECK_EQ_U64(st(a).reserved, 130 * MiB);
    uint64_t r = m(a, 90 * MiB);      /* 100 MiB wastes less than 20 MiB: taken whole */
    CHECK_EQ_U64(st(a).reserved, 130 * MiB);
    CHECK_EQ_U64(st(a).allocated, 130 * MiB);
    CHECK(!ta_free(a, q));
    CHECK(!ta_free(a, r));
    m(a, 79 * MiB);                   /* 100 >= 79 + 20: a new 80 MiB segment */
    CHECK_EQ_U64(st(a).reserved, 210 * MiB);
    ta_destroy(a);
}

static void oom_and_retry(void)
{
    /* release oversize blocks, then everything cached, then give up */
    ta_alloc *a = mk("max_split_size_mb:64", 256 * MiB);
    uint64_t p = m(a, 100 * MiB);
    CHECK(!ta_free(a, p));
    m(a, 200 * MiB);                  /* 300 > 256: the cached 100 MiB goes first */
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    CHECK_EQ_U64(st(a).segment_frees, 1);
    uint64_t x;
    CHECK(ta_malloc(a, 100 * MiB, 0, &x) == TA_OOM);
    CHECK_EQ_U64(st(a).ooms, 1);
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    ta_destroy(a);

    a = mk("", 64 * MiB);
    m(a, 40 * MiB);
    CHECK(ta_malloc(a, 40 * MiB, 0, &x) == TA_OOM);
    CHECK_EQ_U64(st(a).device_free, 24 * MiB);
    ta_destroy(a);
}

static void gc(void)
{
    /* allowed: 100 MiB of 200; collect above 50 MiB */
    ta_alloc *a = mk("garbage_collection_threshold:0.5,memory_fraction:0.5", 200 * MiB);
    uint64_t p = m(a, 40 * MiB), q = m(a, 30 * MiB);
    CHECK(!ta_free(a, p));
    CHECK(!ta_free(a, q));
    m(a, 60 * MiB);                   /* 70 > 50: both cached segments are old enough */
    CHECK_EQ_U64(st(a).gc_releases, 2);
    CHECK_EQ_U64(st(a).retries, 0);
    CHECK_EQ_U64(st(a).reserved, 60 * MiB);
    ta_destroy(a);
    /* the same without gc: the fraction fails the malloc, the retry frees */
    a = mk("memory_fraction:0.5", 200 * MiB);
    p = m(a, 40 * MiB);
    q = m(a, 30 * MiB);
    CHECK(!ta_free(a, p));
    CHECK(!ta_free(a, q));
    m(a, 60 * MiB);
    CHECK_EQ_U64(st(a).gc_releases, 0);
    CHECK_EQ_U64(st(a).retries, 1);
    CHECK_EQ_U64(st(a).reserved, 60 * MiB);
    ta_destroy(a);
}

static void expandable(void)
{
    ta_alloc *a = mk("expandable_segments:True", 1ull << 30);
    uint64_t p = m(a, 30 * MiB);      /* two 20 MiB pages; the 10 MiB rest split off */
    CHECK_EQ_U64(st(a).reserved, 40 * MiB);
    uint64_t q = m(a, 30 * MiB);      /* the free 10 MiB grows by one page */
    CHECK_EQ_U64(st(a).reserved, 60 * MiB);
    CHECK_EQ_U64(q, p + 30 * MiB);    /* one segment, packed */
    m(a, 1000);                       /* small pool: its own segment, 2 MiB pages */
    CHECK_EQ_U64(st(a).reserved, 62 * MiB);
    CHECK(!ta_free(a, p));
    ta_empty_cache(a);                /* p's whole page goes; the page shared with q stays */
    CHECK_EQ_U64(st(a).reserved, 42 * MiB);
    CHECK(!ta_free(a, q));
    ta_empty_cache(a);
    CHECK_EQ_U64(st(a).reserved, 2 * MiB);
    ta_destroy(a);
}

static void empty_cache_fixed(void)
{
    ta_alloc *a = mk("", 1ull << 30);
    uint64_t p = m(a, 30 * MiB), q = m(a, 1000);
    m(a, 2000);                       /* q's segment stays: split and in use */
    CHECK(!ta_free(a, p));
    CHECK(!ta_free(a, q));
    ta_empty_cache(a);
    CHECK_EQ_U64(st(a).reserved, 2 * MiB);
    CHECK_EQ_U64(st(a).peak_reserved, 32 * MiB);
    ta_destroy(a);
}

/* PyTorch's private pools (a CUDA graph's, a MemPool's): each answer by
 * hand from CUDACachingAllocator.cpp's rules (get_pool, release_cached_blocks,
 * the captures_underway check before the last retry). */
static uint64_t mp(ta_alloc *a, uint64_t size, uint64_t pool)
{
    uint64_t p = 0;
    CHECK(ta_malloc_pool(a, size, 0, pool, &p) == TA_OK);
    return p;
}

static void private_pools(void)
{
    /* no cached block is shared across pools */
    ta_alloc *a = mk("", 1024 * MiB);
    uint64_t d = m(a, 100 * MiB);
    CHECK(!ta_free(a, d));                 /* the default pool caches 100 MiB */
    uint64_t g = mp(a, 100 * MiB, 7);      /* pool 7 cannot take it: a segment of its own */
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    uint64_t d2 = m(a, 100 * MiB);         /* the default pool's cache serves the default */
    CHECK_EQ_U64(d2, d);
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    CHECK(!ta_free(a, g));                 /* back to pool 7, not to the default pool */
    CHECK(!ta_free(a, d2));
    uint64_t d3 = m(a, 100 * MiB);
    CHECK_EQ_U64(d3, d);
    CHECK(!ta_free(a, d3));
    /* empty_cache: a live pool keeps its cache; a freeable one gives it back */
    ta_empty_cache(a);
    CHECK_EQ_U64(st(a).reserved, 100 * MiB);
    CHECK(!ta_pool_release(a, 7));
    ta_empty_cache(a);
    CHECK_EQ_U64(st(a).reserved, 0);
    ta_destroy(a);

    /* a request into a private pool is made during a capture: no release of
     * the caches and no retry; the default pool's cache stays */
    a = mk("", 300 * MiB);
    d = m(a, 200 * MiB);
    CHECK(!ta_free(a, d));
    uint64_t x;
    CHECK(ta_malloc_pool(a, 200 * MiB, 0, 9, &x) == TA_OOM);
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    CHECK_EQ_U64(m(a, 200 * MiB), d);
    ta_destroy(a);

    /* a default-pool miss retries after releasing the default pool's cache,
     * but not a live pool's: 100 (pool) + 150 fits, + 100 more does not,
     * until the pool is freeable */
    a = mk("", 300 * MiB);
    g = mp(a, 100 * MiB, 9);
    CHECK(!ta_free(a, g));
    d = m(a, 100 * MiB);
    CHECK(!ta_free(a, d));
    CHECK_EQ_U64(st(a).reserved, 200 * MiB);
    uint64_t big = m(a, 150 * MiB);        /* releases the default's 100 MiB */
    CHECK_EQ_U64(st(a).reserved, 250 * MiB);
    CHECK(ta_malloc(a, 100 * MiB, 0, &x) == TA_OOM);
    CHECK_EQ_U64(st(a).reserved, 250 * MiB);
    CHECK(!ta_pool_release(a, 9));
    m(a, 100 * MiB);                       /* now the pool's cache goes */
    CHECK_EQ_U64(st(a).reserved, 250 * MiB);
    CHECK(!ta_free(a, big));
    ta_destroy(a);

    /* expandable segments: a pool grows a segment of its own, in 20 MiB pages */
    a = mk("expandable_segments:True", 1024 * MiB);
    g = mp(a, 30 * MiB, 5);
    CHECK_EQ_U64(st(a).reserved, 40 * MiB);
    d = m(a, 30 * MiB);
    CHECK_EQ_U64(st(a).reserved, 80 * MiB);
    CHECK(!ta_free(a, g));
    /* pool 5's free 40 MiB would hold it; the default's 10 MiB tail grows
     * by a page instead */
    uint64_t d4 = m(a, 10 * MiB + 512);
    CHECK_EQ_U64(d4, d + 30 * MiB);
    CHECK_EQ_U64(st(a).reserved, 100 * MiB);
    ta_destroy(a);
}

static void bad_configs(void)
{
    const char *bad[] = {"max_split_size_mb:20", "expandable_segments:yes", "roundup_power2_divisions:6",
                         "garbage_collection_threshold:0", "memory_fraction:2", "foo:1", "nocolon",
                         "roundup_power2_divisions:[256:1,>:4]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ta_config c;
        char err[256] = "";
        ta_config_default(&c);
        CHECK(ta_config_parse(&c, bad[i], err, sizeof err) == -1);
        CHECK(err[0] && !strchr(err, '\n'));
    }
}

int main(void)
{
    rounding();
    pools_and_splits();
    oversize();
    oom_and_retry();
    gc();
    expandable();
    empty_cache_fixed();
    private_pools();
    bad_configs();
    return check_summary();
}

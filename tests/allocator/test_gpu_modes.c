/* GPU test (label gpu; run through run_gpu.sh, which skips without a GPU):
 * the three modes on a real device.
 *
 *  - fixed and expandable: 400 random malloc/free steps (512 B to 256 MiB, on
 *    the default stream and two created streams); every block is filled on
 *    its stream with cuMemsetD32Async and windows at its start, middle and end
 *    are read back with cuMemcpyDtoH before it is freed; record_stream with a
 *    real second stream; the invariant walker after every step; an 8 GiB
 *    block; empty_cache gives the memory back to the device (cuMemGetInfo);
 *    a request twice the device's size fails with a clean OOM message.
 *  - block pool: 128 blocks written with their index and read back.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "memsnap/alloc.h"

#define MiB (1ull << 20)
#define CK(call) CHECK_EQ_U64((call), CUDA_SUCCESS)
#define ACK(call)                                                                            \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_)                                                                             \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, rc_,         \
                    memsnap_alloc_error());                                                  \
        CHECK(rc_ == 0);                                                                     \
    } while (0)
#define CHECK_INV(a)                                                                         \
    do {                                                                                     \
        char m_[512];                                                                        \
        int r_ = memsnap_alloc_check((a), m_, sizeof m_);                                    \
        if (r_)                                                                              \
            fprintf(stderr, "%s:%d: invariant: %s\n", __FILE__, __LINE__, m_);              \
        CHECK(r_ == 0);                                                                      \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
    CUdeviceptr p;
    size_t size;
    unsigned tag;
    CUstream s;
} blk;

/* Reads 4 KiB windows at the start, middle and end of b; all words == tag. */
static int verify(const blk *b)
{
    static unsigned buf[1024];
    size_t words = b->size / 4, win = words < 1024 ? words : 1024;
    size_t offs[3] = {0, (words - win) / 2, words - win};
    if (cuStreamSynchronize(b->s) != CUDA_SUCCESS)
        return 0;
    for (int k = 0; k < 3; k++) {
        if (cuMemcpyDtoH(buf, b->p + offs[k] * 4, win * 4) != CUDA_SUCCESS)
            return 0;
        for (size_t i = 0; i < win; i++)
            if (buf[i] != b->tag)
                return 0;
    }
    return 1;
}

static void modes(const char *conf, CUstream s1, CUstream s2)
{
    double t0 = now_ms();
    size_t free0, total;
    CK(cuMemGetInfo(&free0, &total));
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    CHECK(memsnap_alloc_config_parse(&cfg, conf, NULL, 0) == 0);
    memsnap_alloc *a;
    ACK(memsnap_alloc_create(&cfg, 0, NULL, &a));
    if (!a)
        return;
    blk live[32];
    int nlive = 0, bad = 0;
    CUstream streams[3] = {NULL, s1, s2};
    uint64_t x = 0x243F6A8885A308D3ull;
    for (int step = 0; step < 400; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (nlive < 32 && (x % 100 < 55 || nlive == 0)) {
            int e = 9 + (int)(x >> 8) % 20; /* 512 B .. 256 MiB */
            size_t sz = ((1ull << e) + (x >> 32) % (1ull << e)) & ~3ull;
            if (sz > 256 * MiB)
                sz = 256 * MiB;
            blk b = {0, sz, (unsigned)(x >> 16) | 1u, streams[(x >> 40) % 3]};
            ACK(memsnap_alloc_malloc(a, sz, b.s, &b.p));
            if (!b.p)
                continue;
            CHECK(b.p % 512 == 0);
            CK(cuMemsetD32Async(b.p, b.tag, sz / 4, b.s));
            if ((x >> 50) % 10 == 0) { /* used on another stream too */
                CUstream other = b.s == s2 ? s1 : s2;
                CK(cuStreamSynchronize(b.s));
                CK(cuMemsetD32Async(b.p, b.tag, sz / 4, other));
                ACK(memsnap_alloc_record_stream(a, b.p, other));
                CK(cuStreamSynchronize(other));
            }
            live[nlive++] = b;
        } else {
            int k = (int)((x >> 24) % (uint64_t)nlive);
            if (!verify(&live[k]))
                bad++;
            ACK(memsnap_alloc_free(a, live[k].p));
            live[k] = live[--nlive];
        }
        CHECK_INV(a);
    }
    CHECK_EQ_U64(bad, 0);
    while (nlive) {
        if (!verify(&live[nlive - 1]))
            bad++;
        ACK(memsnap_alloc_free(a, live[--nlive].p));
    }
    CHECK_EQ_U64(bad, 0);

    /* A big block, written and read back. */
    blk big = {0, 8192 * MiB, 0xabcdef01u, s1};
    ACK(memsnap_alloc_malloc(a, big.size, s1, &big.p));
    if (big.p) {
        CK(cuMemsetD32Async(big.p, big.tag, big.size / 4, s1));
        CHECK(verify(&big));
        ACK(memsnap_alloc_free(a, big.p));
    }
    /* Too big for the device: a clean OOM. */
    CUdeviceptr nope;
    CHECK(memsnap_alloc_malloc(a, 2 * total, NULL, &nope) == MEMSNAP_ALLOC_ERR_OOM);
    CHECK(strstr(memsnap_alloc_error(), "out of memory on device 0") != NULL);
    printf("  OOM message: %s\n", memsnap_alloc_error());

    memsnap_alloc_stats st;
    memsnap_alloc_stats_get(a, &st);
    printf("  %s: peak reserved %.1f MiB, peak allocated %.1f MiB, driver allocs %llu, "
           "maps %llu, set_access %llu, cache hits %llu, event records %llu\n",
           conf[0] ? conf : "fixed", st.peak_reserved / (double)MiB,
           st.peak_allocated / (double)MiB, (unsigned long long)st.driver_allocs,
           (unsigned long long)st.driver_maps, (unsigned long long)st.driver_set_access,
           (unsigned long long)st.cache_hits, (unsigned long long)st.event_records);
    ACK(memsnap_alloc_empty_cache(a));
    memsnap_alloc_stats_get(a, &st);
    CHECK_EQ_U64(st.reserved, 0);
    CHECK_INV(a);
    size_t free1;
    CK(cuMemGetInfo(&free1, &total));
    if (free1 + 64 * MiB < free0)
        fprintf(stderr, "device free %zu after empty_cache, %zu before\n", free1, free0);
    CHECK(free1 + 64 * MiB >= free0);
    memsnap_alloc_destroy(a);
    printf("  %s: %.0f ms\n", conf[0] ? conf : "fixed", now_ms() - t0);
}

static void blockpool(void)
{
    memsnap_blockpool *p;
    ACK(memsnap_blockpool_create(0, 2 * MiB + 512, 128, NULL, &p));
    if (!p)
        return;
    CUdeviceptr b[128];
    for (unsigned i = 0; i < 128; i++) {
        ACK(memsnap_blockpool_alloc(p, &b[i]));
        CK(cuMemsetD32(b[i], i + 1, (2 * MiB + 512) / 4));
    }
    int bad = 0;
    for (unsigned i = 0; i < 128; i++) {
        unsigned first = 0, last = 0;
        CK(cuMemcpyDtoH(&first, b[i], 4));
        CK(cuMemcpyDtoH(&last, b[i] + 2 * MiB + 512 - 4, 4));
        bad += first != i + 1 || last != i + 1;
    }
    CHECK_EQ_U64(bad, 0);
    CUdeviceptr extra;
    CHECK(memsnap_blockpool_alloc(p, &extra) == MEMSNAP_ALLOC_ERR_OOM);
    for (unsigned i = 0; i < 128; i++)
        ACK(memsnap_blockpool_free(p, b[i]));
    char m[256];
    CHECK(memsnap_blockpool_check(p, m, sizeof m) == 0);
    memsnap_blockpool_destroy(p);
    printf("  block pool: 128 x 2 MiB+512 written and read back\n");
}

int main(void)
{
    if (dlsym(RTLD_DEFAULT, "memsnap_sim_fail")) {
        printf("SKIP: running on the memsnap simulated device, not a GPU\n");
        return 77;
    }
    if (cuInit(0) != CUDA_SUCCESS) {
        printf("SKIP: cuInit failed\n");
        return 77;
    }
    char name[256] = "";
    cuDeviceGetName(name, sizeof name, 0);
    if (strstr(name, "memsnap simulated device")) {
        printf("SKIP: simulated device\n");
        return 77;
    }
    printf("device 0: %s\n", name);
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CUstream s1, s2;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    modes("", s1, s2);
    modes("expandable_segments:true", s1, s2);
    modes("expandable_segments:true,roundup_power2_divisions:4,max_split_size_mb:512", s1, s2);
    blockpool();
    CK(cuStreamDestroy(s1));
    CK(cuStreamDestroy(s2));
    CK(cuDevicePrimaryCtxRelease(0));
    return check_summary();
}

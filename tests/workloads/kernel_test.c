/* kernel_test: the decode workload's kernels (workloads/decode/kernels.cu,
 * launched through gpu.c exactly as memsnap-decode does) against a CPU
 * reference in double precision, on small shapes with fresh random inputs
 * (no zeros; the seed is printed so a failure can be repeated with
 * KERNEL_TEST_SEED=N).  Needs a real GPU: exits 77 (skipped) without one or
 * when the binary carries no kernels.
 *
 * Tolerances follow BF16: an output rounded to BF16 may be off by 2^-8
 * relative; fp32 accumulation adds about n * 2^-24 of the sum of |terms|.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workloads/decode/decode.h"

static int failures, checks;
static uint64_t rs;

static double urand(void) /* [0, 1) */
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (rs >> 11) * (1.0 / 9007199254740992.0);
}

static float nz(void) /* random, never zero: +-[0.05, 1) */
{
    float v = (float)(0.05 + 0.95 * urand());
    return urand() < 0.5 ? -v : v;
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#define CK(call) CUDRV_CHECK("kernel_test", call)

static void expect(int ok, const char *what, double got, double want, double tol)
{
    checks++;
    if (!ok) {
        if (failures < 20)
            printf("FAIL %s: got %.6g want %.6g (tolerance %.3g)\n", what, got, want, tol);
        failures++;
    }
}

static CUdeviceptr upload(const void *h, size_t n)
{
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n));
    CK(cuMemcpyHtoD(d, h, n));
    return d;
}

/* The GEMV configurations every shape is checked with: the CUDA-core kernel,
 * the tensor-core kernels in each (MT, U, stages) variant with a few warp
 * counts (the split of k across warps), and the defaults as the workload runs
 * them. */
typedef struct gemv_config {
    const char *name;
    int simt_max, variant, warps; /* variant -1: the defaults */
} gemv_config;
static const gemv_config gemv_configs[] = {
    {"default", -1, -1, 0},   {"simt", 64, 0, 0},       {"mma m1u4 auto", 0, 0, 0},
    {"mma m2u2 w1", 0, 1, 1}, {"mma m2u2 w8", 0, 1, 8}, {"mma m2u4 w2", 0, 2, 2},
    {"mma m2u4 auto", 0, 2, 0}, {"mma m1u4 w3", 0, 0, 3},   {"mma m2u2 w5", 0, 1, 5},
    {"mmp m1s4 auto", 0, 3, 0}, {"mmp m1s8 w8", 0, 4, 8},   {"mmp m1s8 w1", 0, 4, 1},
    {"mmp m2s4 w3", 0, 5, 3},   {"mmp m2s6 auto", 0, 6, 0}, {"mmp m2s6 w8", 0, 6, 8},
    {"mmp m4s3 w8", 0, 7, 8},   {"mmp m4s3 w2", 0, 7, 2},
};

static void set_config(gpu_t *g, const gemv_tune_t *defaults, const gemv_config *c)
{
    g->tune = *defaults;
    if (c->simt_max < 0)
        return;
    g->tune.simt_max = c->simt_max;
    gpu_tune_all(&g->tune, c->variant, c->warps);
}

/* y = W x against a double-precision reference, for every configuration.
 * The output is poisoned (all bits set: NaN in bf16 and fp32) before each
 * run, so an element left unwritten fails, and a guard of 64 elements past
 * the end must stay poisoned. */
static void test_gemv(gpu_t *g, int in, int out, int B, int mode)
{
    size_t nw = (size_t)in * out, nx = (size_t)in * B;
    uint16_t *w = malloc(nw * 2), *x = malloc(nx * 2);
    for (size_t i = 0; i < nw; i++)
        w[i] = f2bf(nz());
    for (size_t i = 0; i < nx; i++)
        x[i] = f2bf(nz());
    int yrow = mode == GEMV_SWIGLU ? out / 2 : out;
    size_t ysz = mode == GEMV_F32 ? 4 : 2, ny = (size_t)B * yrow, guard = 64;
    double *ref = malloc(ny * sizeof *ref), *tol = malloc(ny * sizeof *tol);
    for (int b = 0; b < B; b++) {
        for (int r = 0; r < yrow; r++) {
            double *rf = &ref[(size_t)b * yrow + r], *tl = &tol[(size_t)b * yrow + r];
            if (mode == GEMV_SWIGLU) {
                double gs = 0, us = 0, ga = 0, ua = 0;
                for (int i = 0; i < in; i++) {
                    double xv = bf2f(x[(size_t)b * in + i]);
                    gs += bf2f(w[(size_t)(2 * r) * in + i]) * xv;
                    us += bf2f(w[(size_t)(2 * r + 1) * in + i]) * xv;
                    ga += fabs(bf2f(w[(size_t)(2 * r) * in + i]) * xv);
                    ua += fabs(bf2f(w[(size_t)(2 * r + 1) * in + i]) * xv);
                }
                double sg = gs / (1 + exp(-gs));
                *rf = sg * us;
                *tl = ldexp(fabs(*rf), -7) + 4e-6 * in * (ga * fabs(us) + ua * (fabs(sg) + 1));
            } else {
                double sum = 0, a = 0;
                for (int i = 0; i < in; i++) {
                    double t = (double)bf2f(w[(size_t)r * in + i]) * bf2f(x[(size_t)b * in + i]);
                    sum += t;
                    a += fabs(t);
                }
                *rf = sum;
                *tl = 4e-7 * in * a + (mode == GEMV_F32 ? 0 : ldexp(fabs(sum), -8));
            }
        }
    }
    CUdeviceptr dw = upload(w, nw * 2), dx = upload(x, nx * 2), dy;
    CK(cuMemAlloc(&dy, (ny + guard) * ysz));
    void *y = malloc((ny + guard) * ysz);
    gemv_tune_t defaults = g->tune;
    char what[128];
    for (size_t c = 0; c < sizeof gemv_configs / sizeof *gemv_configs; c++) {
        set_config(g, &defaults, &gemv_configs[c]);
        CK(cuMemsetD8(dy, 0xff, (ny + guard) * ysz));
        CK(gpu_gemv(g, dw, dx, dy, in, out, B, mode));
        CK(cuStreamSynchronize(g->stream));
        CK(cuMemcpyDtoH(y, dy, (ny + guard) * ysz));
        int bad = 0;
        for (size_t e = 0; e < ny; e++) {
            double got = mode == GEMV_F32 ? ((float *)y)[e] : bf2f(((uint16_t *)y)[e]);
            checks++;
            if (!(fabs(got - ref[e]) <= tol[e])) {
                if (failures < 20)
                    printf("FAIL gemv %s in=%d out=%d B=%d mode=%d [%zu][%zu]: got %.6g want "
                           "%.6g (tolerance %.3g)\n",
                           gemv_configs[c].name, in, out, B, mode, e / yrow, e % yrow, got,
                           ref[e], tol[e]);
                failures++;
                bad++;
            }
        }
        int poisoned = 1;
        for (size_t e = ny * ysz; e < (ny + guard) * ysz; e++)
            poisoned &= ((unsigned char *)y)[e] == 0xff;
        snprintf(what, sizeof what, "gemv %s in=%d out=%d B=%d mode=%d: nothing written past the end",
                 gemv_configs[c].name, in, out, B, mode);
        expect(poisoned, what, 0, 0, 0);
        (void)bad;
    }
    g->tune = defaults;
    cuMemFree(dw);
    cuMemFree(dx);
    cuMemFree(dy);
    free(w);
    free(x);
    free(y);
    free(ref);
    free(tol);
}

/* Attention (with this step's K/V append) over paged (page_tokens 16) or
 * contiguous caches: `heads` query heads over 2 K/V heads of head_dim hdim,
 * requests of 1, 257 and 700 tokens, the scratch and the split sized for
 * max_len >= 700 as the server sizes them for the longest request after the
 * step (chunks empty for all but the longest when max_len is larger).  The
 * output and the scratch are poisoned first (NaN). */
static void test_attention(gpu_t *g, int paged, int heads, int hdim, int max_len)
{
    shape_t s = {2, 64, heads, 2, hdim, 64, 16}; /* layers, hidden, heads, kv_heads, head_dim */
    const int B = 3, layer = 1;
    int lens[3] = {1, 257, 700};
    int hd = s.head_dim, qkv_row = (s.heads + 2 * s.kv_heads) * hd;
    size_t tok_elems = (size_t)s.layers * 2 * s.kv_heads * hd;
    int page_tokens = paged ? 16 : 1 << 30;
    int max_pages = paged ? (700 + 15) / 16 : 1;
    /* host caches: per request, lens[b] tokens, token-major */
    uint16_t *cache[3];
    unsigned long long *pages = calloc((size_t)B * max_pages, 8);
    CUdeviceptr dcache[3][64] = {{0}};
    uint16_t *qkv = malloc((size_t)B * qkv_row * 2);
    for (size_t i = 0; i < (size_t)B * qkv_row; i++)
        qkv[i] = f2bf(nz());
    int pos[3], len1[3];
    for (int b = 0; b < B; b++) {
        int L = lens[b];
        pos[b] = L - 1; /* the new token goes last: attention sees L tokens */
        len1[b] = L;
        cache[b] = malloc((size_t)L * tok_elems * 2);
        for (size_t i = 0; i < (size_t)L * tok_elems; i++)
            cache[b][i] = f2bf(nz());
        if (paged) {
            for (int p = 0; p * 16 < L; p++) {
                size_t n = (size_t)16 * tok_elems * 2;
                CK(cuMemAlloc(&dcache[b][p], n));
                int ntok = L - p * 16 < 16 ? L - p * 16 : 16;
                CK(cuMemcpyHtoD(dcache[b][p], cache[b] + (size_t)p * 16 * tok_elems,
                                (size_t)ntok * tok_elems * 2));
                pages[(size_t)b * max_pages + p] = dcache[b][p];
            }
        } else {
            dcache[b][0] = upload(cache[b], (size_t)L * tok_elems * 2);
            pages[(size_t)b * max_pages] = dcache[b][0];
        }
        /* the reference cache holds the appended token's K and V */
        memcpy(cache[b] + (size_t)pos[b] * tok_elems + (size_t)layer * 2 * s.kv_heads * hd,
               qkv + (size_t)b * qkv_row + s.heads * hd, (size_t)2 * s.kv_heads * hd * 2);
    }
    CUdeviceptr dpages = upload(pages, (size_t)B * max_pages * 8), dqkv = upload(qkv, (size_t)B * qkv_row * 2);
    CUdeviceptr dlen = upload(len1, sizeof len1), dscores, dout;
    size_t nscores = (size_t)B * s.heads * gpu_attention_scratch_floats(max_len) * 4;
    CK(cuMemAlloc(&dscores, nscores));
    CK(cuMemAlloc(&dout, (size_t)B * s.heads * hd * 2));
    CK(cuMemsetD8(dscores, 0xff, nscores));
    CK(cuMemsetD8(dout, 0xff, (size_t)B * s.heads * hd * 2));
    CK(gpu_attention(g, &s, dqkv, dpages, max_pages, page_tokens, dlen, layer, B, dscores,
                     max_len, dout));
    CK(cuStreamSynchronize(g->stream));
    uint16_t *out = malloc((size_t)B * s.heads * hd * 2);
    CK(cuMemcpyDtoH(out, dout, (size_t)B * s.heads * hd * 2));
    char what[128];
    for (int b = 0; b < B; b++) {
        /* the appended K/V landed where the cache layout says */
        uint16_t back[2 * 2 * 128];
        size_t nback = (size_t)2 * s.kv_heads * hd * 2;
        size_t tok = (size_t)pos[b];
        CUdeviceptr base = paged ? dcache[b][tok / 16] + (tok % 16) * tok_elems * 2
                                 : dcache[b][0] + tok * tok_elems * 2;
        CK(cuMemcpyDtoH(back, base + (size_t)layer * 2 * s.kv_heads * hd * 2, nback));
        snprintf(what, sizeof what, "K/V append %s heads=%d hd=%d request %d",
                 paged ? "paged" : "contiguous", heads, hd, b);
        expect(!memcmp(back, qkv + (size_t)b * qkv_row + s.heads * hd, nback), what, 0, 0, 0);
        for (int h = 0; h < s.heads; h++) {
            int kvh = h / (s.heads / s.kv_heads);
            double sc[700], m = -1e300, sum = 0;
            for (int t = 0; t < lens[b]; t++) {
                const uint16_t *k = cache[b] + (size_t)t * tok_elems +
                                    (size_t)layer * 2 * s.kv_heads * hd + (size_t)kvh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)bf2f(qkv[(size_t)b * qkv_row + h * hd + i]) * bf2f(k[i]);
                sc[t] = d / sqrt(hd);
                if (sc[t] > m)
                    m = sc[t];
            }
            for (int t = 0; t < lens[b]; t++)
                sum += (sc[t] = exp(sc[t] - m));
            for (int i = 0; i < hd; i++) {
                double o = 0, vmax = 0;
                for (int t = 0; t < lens[b]; t++) {
                    const uint16_t *v = cache[b] + (size_t)t * tok_elems +
                                        (size_t)layer * 2 * s.kv_heads * hd +
                                        (size_t)(s.kv_heads + kvh) * hd;
                    o += sc[t] / sum * bf2f(v[i]);
                    if (fabs(bf2f(v[i])) > vmax)
                        vmax = fabs(bf2f(v[i]));
                }
                double got = bf2f(out[((size_t)b * s.heads + h) * hd + i]);
                double tol = ldexp(fabs(o), -7) + 2e-3 * vmax;
                snprintf(what, sizeof what, "attention %s heads=%d hd=%d max_len=%d b=%d h=%d d=%d",
                         paged ? "paged" : "contiguous", heads, hd, max_len, b, h, i);
                expect(fabs(got - o) <= tol, what, got, o, tol);
            }
        }
    }
    for (int b = 0; b < B; b++) {
        for (int p = 0; p < 64; p++)
            if (dcache[b][p])
                cuMemFree(dcache[b][p]);
        free(cache[b]);
    }
    cuMemFree(dpages);
    cuMemFree(dqkv);
    cuMemFree(dlen);
    cuMemFree(dscores);
    cuMemFree(dout);
    free(pages);
    free(qkv);
    free(out);
}

static void test_copy_fill_argmax_embed(gpu_t *g)
{
    /* copy: an odd length, exact */
    size_t n = (1 << 20) + 7;
    unsigned char *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        a[i] = (unsigned char)(urand() * 256);
    CUdeviceptr da = upload(a, n), db;
    CK(cuMemAlloc(&db, n));
    CK(cuMemsetD8(db, 0, n));
    CK(gpu_copy(g, db, da, n));
    CK(cuStreamSynchronize(g->stream));
    CK(cuMemcpyDtoH(b, db, n));
    expect(!memcmp(a, b, n), "copy of 1 MiB + 7 bytes", 0, 0, 0);

    /* fill: same seed, same values; in +-scale; never zero */
    size_t m = n / 2; /* bf16 elements that fit the buffers of n bytes */
    uint16_t *f1 = malloc(m * 2), *f2 = malloc(m * 2);
    CK(gpu_fill(g, da, m, 1234, 0.5f));
    CK(gpu_fill(g, db, m, 1234, 0.5f));
    CK(cuStreamSynchronize(g->stream));
    CK(cuMemcpyDtoH(f1, da, m * 2));
    CK(cuMemcpyDtoH(f2, db, m * 2));
    expect(!memcmp(f1, f2, m * 2), "fill is deterministic", 0, 0, 0);
    double mean = 0;
    int bad = 0;
    for (size_t i = 0; i < m; i++) {
        float v = bf2f(f1[i]);
        if (!(fabsf(v) <= 0.5f) || v == 0)
            bad++;
        mean += v;
    }
    mean /= m;
    expect(bad == 0, "fill values in (-0.5, 0.5), none zero (count of bad)", bad, 0, 0);
    expect(fabs(mean) < 0.01, "fill mean near 0", mean, 0, 0.01);

    /* argmax: one clear maximum per row */
    int B = 5, V = 10007;
    float *lg = malloc((size_t)B * V * 4);
    int want[5], got[5];
    for (int r = 0; r < B; r++) {
        for (int i = 0; i < V; i++)
            lg[(size_t)r * V + i] = nz();
        want[r] = (int)(urand() * V);
        lg[(size_t)r * V + want[r]] = 2.0f;
    }
    CUdeviceptr dl = upload(lg, (size_t)B * V * 4), dt;
    CK(cuMemAlloc(&dt, sizeof got));
    CK(gpu_argmax(g, dl, dt, B, V));
    CK(cuStreamSynchronize(g->stream));
    CK(cuMemcpyDtoH(got, dt, sizeof got));
    for (int r = 0; r < B; r++)
        expect(got[r] == want[r], "argmax", got[r], want[r], 0);

    /* embed: rows copied exactly */
    int H = 72;
    uint16_t *emb = malloc((size_t)V * H * 2), *x = malloc((size_t)B * H * 2);
    for (size_t i = 0; i < (size_t)V * H; i++)
        emb[i] = f2bf(nz());
    CUdeviceptr de = upload(emb, (size_t)V * H * 2), dx;
    CK(cuMemAlloc(&dx, (size_t)B * H * 2));
    CK(cuMemcpyHtoD(dt, want, sizeof want));
    CK(gpu_embed(g, dx, de, dt, B, H, V));
    CK(cuStreamSynchronize(g->stream));
    CK(cuMemcpyDtoH(x, dx, (size_t)B * H * 2));
    for (int r = 0; r < B; r++)
        expect(!memcmp(x + (size_t)r * H, emb + (size_t)want[r] * H, H * 2), "embed row", r, 0, 0);
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dl);
    cuMemFree(dt);
    cuMemFree(de);
    cuMemFree(dx);
    free(a), free(b), free(f1), free(f2), free(lg), free(emb), free(x);
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    char name[128] = "";
    if (cudrv_load(NULL, 0) != 0 || cuInit(0) != CUDA_SUCCESS ||
        cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDeviceGetName(name, sizeof name, dev) != CUDA_SUCCESS || strstr(name, "simulated")) {
        printf("SKIP: no real CUDA GPU\n");
        return 77;
    }
    if (!gpu_kernels_embedded()) {
        printf("SKIP: built without nvcc: no kernels\n");
        return 77;
    }
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    const char *env = getenv("KERNEL_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    rs = seed * 0x9e3779b97f4a7c15ull | 1;
    printf("kernel_test on %s, seed %llu (KERNEL_TEST_SEED=%llu repeats it)\n", name,
           (unsigned long long)seed, (unsigned long long)seed);
    gpu_t g;
    char err[256];
    if (gpu_init(&g, 1, err, sizeof err)) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    int batches[] = {1, 2, 3, 5, 8, 9, 13, 16, 17, 24, 25, 32, 33, 40};
    for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
        test_gemv(&g, 1000, 70, batches[i], GEMV_BF16); /* a partial last k step, */
        test_gemv(&g, 1000, 70, batches[i], GEMV_F32);  /* a partial last row tile */
        test_gemv(&g, 1000, 70, batches[i], GEMV_SWIGLU);
    }
    test_gemv(&g, 4096, 258, 1, GEMV_BF16);   /* full unrolled rounds, an odd row pair count */
    test_gemv(&g, 4096, 96, 32, GEMV_BF16);   /* the 8B hidden size, whole tiles */
    test_gemv(&g, 4096, 64, 8, GEMV_SWIGLU);
    test_gemv(&g, 8, 6, 3, GEMV_BF16);        /* one 16-byte chunk per row */
    test_gemv(&g, 40, 16, 12, GEMV_BF16);     /* two k steps, the second partial */
    test_gemv(&g, 14336, 16, 4, GEMV_SWIGLU); /* the 8B down/gate row length */
    test_gemv(&g, 14336, 34, 20, GEMV_BF16);
    test_gemv(&g, 4096, 71, 2, GEMV_F32);     /* an odd number of rows */
    /* attention with the default chunk and kernel, then other chunk sizes
     * (the fewest tokens per split) and the kernel held to 64 registers */
    gemv_tune_t defaults = g.tune;
    static const int att_configs[][2] = {{0, -1}, {64, 0}, {256, 1}, {128, 0},
                                         {16, 1},  {0, 2},  {256, 2}, {16, 2}};
    static const char *const att_kernels[] = {"auto", "plain", "o4", "cp"};
    for (size_t c = 0; c < sizeof att_configs / sizeof *att_configs; c++) {
        g.tune = defaults;
        if (att_configs[c][1] >= 0) {
            g.tune.att_chunk = att_configs[c][0];
            g.tune.att_kernel = att_configs[c][1];
        }
        printf("attention: chunks of at least %d tokens (0: auto), kernel %s\n",
               g.tune.att_chunk, att_kernels[g.tune.att_kernel + 1]);
        for (int paged = 0; paged <= 1; paged++) {
            test_attention(&g, paged, 8, 64, 700);   /* 4 query heads per K/V head */
            test_attention(&g, paged, 8, 128, 760);  /* the 8B head; empty chunks */
            test_attention(&g, paged, 2, 128, 700);  /* one query head per K/V head */
            test_attention(&g, paged, 16, 32, 700);  /* 8 per K/V head; half the lanes idle */
            test_attention(&g, paged, 6, 72, 1000);  /* 3 per K/V head (in a 4 kernel) */
        }
    }
    g.tune = defaults;
    test_copy_fill_argmax_embed(&g);
    gpu_destroy(&g);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}

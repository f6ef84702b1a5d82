/* bench_gemm: the matrix products and the attention of one memsnap-decode
 * step on a GPU, timed kernel by kernel (docs/benchmarks.md, "Decode
 * workload"), side by side with cuBLAS on the same shapes.
 *
 *   bench_gemm [--batches 1,2,4,8,16,24,32] [--reps N] [--ctx TOKENS] [--sweep]
 *              [--csv FILE]
 *
 * Shapes: Llama 3 8B in BF16 (hidden 4096, 32 query / 8 K/V heads of 128,
 * FFN 14336, vocabulary 128256), 32 layers of distinct weights (qkv 6144 x
 * 4096, o 4096 x 4096, gate/up 28672 x 4096, down 4096 x 14336) and lm_head
 * 128256 x 4096: 15.0 GB read per step (the embedding table is not a GEMM).
 * Weights, x and the KV cache are random (never zeros).  For each batch and
 * engine:
 *
 *   step   the 129 products in decode order (qkv, o, gate/up, down per layer,
 *          then lm_head), CUDA events around the whole sequence, median of
 *          --reps after a warm-up: ms and weight bytes / time;
 *   shape  the 32 products of one shape back to back (lm_head: one), events
 *          around them, median: us per product and GB/s.
 *
 * Engines: "ours" (gpu_gemv with the defaults memsnap-decode uses), "simt"
 * (the CUDA-core GEMV for every batch), with --sweep every tensor-core
 * variant and warp count ("mma_vV_mMuU_wW" for the register kernels,
 * "mma_vV_mMsS_wW" for the ring kernels: variant V of gpu_mma_variants, W
 * warps, w0 = chosen from the grid), and
 * "cublas": cublasGemmEx, bf16 A and B, fp32 compute, bf16 out (fp32 for
 * lm_head), CUBLAS_GEMM_DEFAULT, from libcublas.so.13 opened with dlopen
 * (MEMSNAP_CUBLAS names another file) as the workload opens the driver; its
 * gate/up writes both halves (cuBLAS has no SwiGLU epilogue), ours writes
 * silu(gate) * up.  Then attention: 32 layers of gpu_attention (K/V append,
 * split-K attention, combine) at --ctx tokens per request (default 660,
 * bench_decode.sh's average), KV bytes / time; with --sweep also at the
 * other chunk sizes (the fewest tokens per split: 64, 128, 256) with each
 * kernel (plain, o4: held to 64 registers, cp: the chunk copied to shared
 * memory first).
 *
 * Prints one line per measurement ("gemm ...", "attention ...") and writes
 * them to --csv.  No assertion on any figure.  Exit 77 without a real GPU.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "workloads/decode/decode.h"

#define CK(call) CUDRV_CHECK("bench_gemm", call)

enum { QKV, O, GU, DOWN, LM, NSHAPE };
static const char *shape_names[NSHAPE] = {"qkv", "o", "gate_up", "down", "lm_head"};
static const int LAYERS = 32, HID = 4096, FFN = 14336, VOCAB = 128256, HEADS = 32,
                 KVH = 8, HD = 128;
static int shape_out[NSHAPE], shape_in[NSHAPE], shape_mode[NSHAPE];

/* cuBLAS through dlopen */
static struct {
    cublasHandle_t h;
    __typeof__(&cublasCreate_v2) create;
    __typeof__(&cublasSetStream_v2) set_stream;
    __typeof__(&cublasGemmEx) gemm;
} cb;

static int cublas_open(CUstream stream)
{
    const char *path = getenv("MEMSNAP_CUBLAS");
    void *lib = dlopen(path ? path : "libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "bench_gemm: no cuBLAS: %s\n", dlerror());
        return -1;
    }
    cb.create = (__typeof__(cb.create))dlsym(lib, "cublasCreate_v2");
    cb.set_stream = (__typeof__(cb.set_stream))dlsym(lib, "cublasSetStream_v2");
    cb.gemm = (__typeof__(cb.gemm))dlsym(lib, "cublasGemmEx");
    if (!cb.create || !cb.set_stream || !cb.gemm || cb.create(&cb.h) != CUBLAS_STATUS_SUCCESS ||
        cb.set_stream(cb.h, (cudaStream_t)stream) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_gemm: cuBLAS would not start\n");
        return -1;
    }
    return 0;
}

/* y[b][o] = W[o] . x[b]: column-major, y^T (out x B) = W^T^T (out x in) x^T (in x B). */
static void cublas_gemm(CUdeviceptr w, CUdeviceptr x, CUdeviceptr y, int in, int out, int B,
                        int f32_out)
{
    const float one = 1.f, zero = 0.f;
    cublasStatus_t st = cb.gemm(cb.h, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, &one, (void *)w,
                                CUDA_R_16BF, in, (void *)x, CUDA_R_16BF, in, &zero, (void *)y,
                                f32_out ? CUDA_R_32F : CUDA_R_16BF, out, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_gemm: cublasGemmEx: status %d\n", (int)st);
        exit(1);
    }
}

typedef struct engine {
    char name[32];
    int cublas;
    gemv_tune_t tune;
} engine_t;

static gpu_t g;
static CUdeviceptr W[32][4], Wlm, X, Y;
static CUevent evs[2];

static void product(const engine_t *e, int shape, CUdeviceptr w, int B)
{
    if (e->cublas)
        cublas_gemm(w, X, Y, shape_in[shape], shape_out[shape], B, shape == LM);
    else {
        g.tune = e->tune;
        CK(gpu_gemv(&g, w, X, Y, shape_in[shape], shape_out[shape], B, shape_mode[shape]));
    }
}

static CUdeviceptr weight(int layer, int shape)
{
    return shape == LM ? Wlm : W[layer][shape];
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* median ms of reps runs of: the whole step (shape < 0), or one shape's products */
static float time_it(const engine_t *e, int shape, int B, int reps)
{
    float t[64];
    for (int r = -1; r < reps; r++) {
        CK(cuEventRecord(evs[0], g.stream));
        if (shape < 0) {
            for (int l = 0; l < LAYERS; l++)
                for (int s = QKV; s <= DOWN; s++)
                    product(e, s, W[l][s], B);
            product(e, LM, Wlm, B);
        } else {
            for (int l = 0; l < (shape == LM ? 1 : LAYERS); l++)
                product(e, shape, weight(l, shape), B);
        }
        CK(cuEventRecord(evs[1], g.stream));
        CK(cuEventSynchronize(evs[1]));
        if (r >= 0)
            CK(cuEventElapsedTime(&t[r], evs[0], evs[1]));
    }
    qsort(t, reps, sizeof *t, cmp_float);
    return t[reps / 2];
}

static double shape_bytes(int s)
{
    return 2.0 * shape_in[s] * shape_out[s];
}

int main(int argc, char **argv)
{
    int batches[16] = {1, 2, 4, 8, 16, 24, 32}, nb = 7, reps = 9, ctx = 660, sweep = 0;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
            nb = 0;
            for (char *p = strtok(argv[++i], ","); p && nb < 16; p = strtok(NULL, ","))
                batches[nb++] = atoi(p);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            ctx = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
        } else if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv_path = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_gemm [--batches 1,2,...] [--reps N] [--ctx TOKENS] "
                            "[--sweep] [--csv FILE]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > 64 || ctx < 2) {
        fprintf(stderr, "bench_gemm: --reps 1..64, --ctx >= 2\n");
        return 2;
    }
    for (int i = 0; i < nb; i++)
        if (batches[i] < 1 || batches[i] > 32) {
            fprintf(stderr, "bench_gemm: batches 1..32\n");
            return 2;
        }
    CUdevice dev;
    CUcontext ctxh;
    char name[128] = "", why[300];
    if (cudrv_load(why, sizeof why) != 0 || cuInit(0) != CUDA_SUCCESS ||
        cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDeviceGetName(name, sizeof name, dev) != CUDA_SUCCESS || strstr(name, "simulated")) {
        printf("bench_gemm: no real CUDA GPU: nothing to measure\n");
        return 77;
    }
    CK(cuDevicePrimaryCtxRetain(&ctxh, dev));
    CK(cuCtxSetCurrent(ctxh));
    char err[256];
    if (gpu_init(&g, 1, err, sizeof err)) {
        fprintf(stderr, "bench_gemm: %s\n", err);
        return 1;
    }
    g.real = 1;
    gemv_tune_t defaults = g.tune;
    CK(cuEventCreate(&evs[0], CU_EVENT_DEFAULT));
    CK(cuEventCreate(&evs[1], CU_EVENT_DEFAULT));
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    double copy_gbs = gpu_copy_bandwidth(&g, 2 * GiB);
    printf("bench_gemm on %s: copy bandwidth %.0f GB/s (read + write, copy kernel 2 x 2 GiB, best of 10)\n",
           name, copy_gbs);
    if (csv)
        fprintf(csv, "copy,%.1f\n", copy_gbs);

    int qkv_out = (HEADS + 2 * KVH) * HD;
    int outs[NSHAPE] = {qkv_out, HID, 2 * FFN, HID, VOCAB};
    int ins[NSHAPE] = {HID, HEADS * HD, HID, FFN, HID};
    int modes[NSHAPE] = {GEMV_BF16, GEMV_BF16, GEMV_SWIGLU, GEMV_BF16, GEMV_F32};
    memcpy(shape_out, outs, sizeof outs);
    memcpy(shape_in, ins, sizeof ins);
    memcpy(shape_mode, modes, sizeof modes);
    double step_bytes = shape_bytes(LM);
    for (int l = 0; l < LAYERS; l++)
        for (int s = QKV; s <= DOWN; s++) {
            CK(cuMemAlloc(&W[l][s], (size_t)shape_bytes(s)));
            CK(gpu_fill(&g, W[l][s], (uint64_t)shape_bytes(s) / 2, 100 * l + s,
                        1.7f / (float)shape_in[s]));
            step_bytes += shape_bytes(s);
        }
    CK(cuMemAlloc(&Wlm, (size_t)shape_bytes(LM)));
    CK(gpu_fill(&g, Wlm, (uint64_t)shape_bytes(LM) / 2, 7, 0.02f));
    CK(cuMemAlloc(&X, (size_t)32 * FFN * 2));
    CK(gpu_fill(&g, X, (uint64_t)32 * FFN, 11, 1.0f));
    CK(cuMemAlloc(&Y, (size_t)32 * VOCAB * 4));
    CK(cuStreamSynchronize(g.stream));
    int have_cublas = cublas_open(g.stream) == 0;

    engine_t eng[64];
    int ne = 0;
    eng[ne] = (engine_t){"ours", 0, defaults};
    ne++;
    eng[ne] = (engine_t){"simt", 0, defaults};
    eng[ne++].tune.simt_max = 64;
    if (sweep)
        for (int v = 0; v < GPU_MMA_VARIANTS; v++)
            for (int w = 0; w <= 8; w += 4) {
                const gpu_mma_variant_t *m = &gpu_mma_variants[v];
                engine_t *e = &eng[ne++];
                memset(e, 0, sizeof *e);
                if (m->stages)
                    snprintf(e->name, sizeof e->name, "mma_v%d_m%ds%d_w%d", v, m->mt, m->stages,
                             w);
                else
                    snprintf(e->name, sizeof e->name, "mma_v%d_m%du%d_w%d", v, m->mt, m->u, w);
                e->tune = defaults;
                e->tune.simt_max = 0;
                gpu_tune_all(&e->tune, v, w);
            }
    if (have_cublas) {
        eng[ne] = (engine_t){"cublas", 1, defaults};
        ne++;
    }

    printf("weights per step %.2f GB (32 layers + lm_head)\n", step_bytes / 1e9);
    printf("%-14s %5s %9s %7s %6s  %s\n", "engine", "batch", "step_ms", "GB/s", "%copy",
           "us per product: qkv o gate_up down lm_head (GB/s)");
    for (int bi = 0; bi < nb; bi++) {
        int B = batches[bi];
        for (int ei = 0; ei < ne; ei++) {
            const engine_t *e = &eng[ei];
            float step = time_it(e, -1, B, reps);
            double gbs = step_bytes / (step / 1e3) / 1e9;
            printf("%-14s %5d %9.3f %7.0f %5.1f%% ", e->name, B, step, gbs,
                   copy_gbs > 0 ? 100 * gbs / copy_gbs : 0);
            if (csv)
                fprintf(csv, "gemm,%s,%d,step,%.4f,%.1f\n", e->name, B, step, gbs);
            for (int s = 0; s < NSHAPE; s++) {
                float ms = time_it(e, s, B, reps);
                double us = ms * 1e3 / (s == LM ? 1 : LAYERS);
                double sg = shape_bytes(s) / (us / 1e6) / 1e9;
                printf(" %s %.1f (%.0f)", shape_names[s], us, sg);
                if (csv)
                    fprintf(csv, "gemm,%s,%d,%s,%.3f,%.1f\n", e->name, B, shape_names[s], us, sg);
            }
            printf("\n");
            fflush(stdout);
        }
    }
    g.tune = defaults;

    /* attention: B requests of ctx tokens (the last one this step's), contiguous KV */
    shape_t sh = {LAYERS, HID, HEADS, KVH, HD, FFN, VOCAB};
    uint64_t kvtok = (uint64_t)LAYERS * 2 * KVH * HD * 2; /* K and V of every layer, one token */
    for (int bi = 0; bi < nb; bi++) {
        int B = batches[bi];
        CUdeviceptr kv[32], pages, len, qkv, scores, out;
        unsigned long long hp[32];
        int hl[32];
        for (int b = 0; b < B; b++) {
            CK(cuMemAlloc(&kv[b], (size_t)(ctx + 1) * kvtok));
            CK(gpu_fill(&g, kv[b], (uint64_t)(ctx + 1) * kvtok / 2, 1000 + b, 1.0f));
            hp[b] = kv[b];
            hl[b] = ctx - b % 3; /* slightly different lengths */
        }
        CK(cuMemAlloc(&pages, 8 * (size_t)B));
        CK(cuMemAlloc(&len, 4 * (size_t)B));
        CK(cuMemcpyHtoD(pages, hp, 8 * (size_t)B));
        CK(cuMemcpyHtoD(len, hl, 4 * (size_t)B));
        CK(cuMemAlloc(&qkv, (size_t)B * qkv_out * 2));
        CK(gpu_fill(&g, qkv, (uint64_t)B * qkv_out, 5, 1.0f));
        CK(cuMemAlloc(&scores, (size_t)B * HEADS * gpu_attention_scratch_floats(ctx) * 4));
        CK(cuMemAlloc(&out, (size_t)B * HEADS * HD * 2));
        /* the default chunk, and with --sweep the others */
        static const int chunks[] = {0, 64, 128, 256};
        static const char *const knames[] = {" auto", "", " o4", " cp"};
        for (int ci = 0; ci < (sweep ? 12 : 1); ci++) {
            const int chunk = ci & 3 ? chunks[ci & 3] : defaults.att_chunk;
            const int kern = ci & 3 ? ci >> 2 : defaults.att_kernel;
            if (ci > 0 && (ci & 3) == 0)
                continue;
            if (ci > 0 && chunk == defaults.att_chunk && kern == defaults.att_kernel)
                continue;
            g.tune.att_chunk = chunk;
            g.tune.att_kernel = kern;
            float t[64];
            for (int r = -1; r < reps; r++) {
                CK(cuEventRecord(evs[0], g.stream));
                for (int l = 0; l < LAYERS; l++)
                    CK(gpu_attention(&g, &sh, qkv, pages, 1, 1 << 30, len, l, B, scores, ctx,
                                     out));
                CK(cuEventRecord(evs[1], g.stream));
                CK(cuEventSynchronize(evs[1]));
                if (r >= 0)
                    CK(cuEventElapsedTime(&t[r], evs[0], evs[1]));
            }
            qsort(t, reps, sizeof *t, cmp_float);
            double bytes = 0;
            for (int b = 0; b < B; b++)
                bytes += (double)hl[b] * kvtok;
            double gbs = bytes / (t[reps / 2] / 1e3) / 1e9;
            printf("attention batch %d ctx %d chunk %d%s%s: %.3f ms per step (32 layers, %.1f us "
                   "each), KV %.2f GB, %.0f GB/s\n",
                   B, ctx, chunk, chunk ? "" : " (auto)", knames[kern + 1], t[reps / 2], t[reps / 2] * 1e3 / LAYERS,
                   bytes / 1e9, gbs);
            if (csv)
                fprintf(csv, "attention,%d,%d,%.4f,%.1f,%d,%d\n", B, ctx, t[reps / 2], gbs,
                        chunk, kern);
        }
        g.tune = defaults;
        for (int b = 0; b < B; b++)
            cuMemFree(kv[b]);
        cuMemFree(pages);
        cuMemFree(len);
        cuMemFree(qkv);
        cuMemFree(scores);
        cuMemFree(out);
    }
    if (csv)
        fclose(csv);
    gpu_destroy(&g);
    return 0;
}

/* memsnap-decode: a Llama-shaped decode server loop with known memory
 * behaviour (docs/workload.md is the guide).  This header is shared by its
 * modules:
 *
 *   main.c     command line, defaults per preset and scenario, the summary line
 *   server.c   requests (Poisson arrivals, length mix), the scheduler, the KV
 *              cache policies (grow / paged), the step loop, the simulated clock
 *   mem.c      where memory comes from: cuMemAlloc directly (with our own cap
 *              accounting) or libmemsnap_alloc (fixed / expandable segments),
 *              plus the block pool for paged KV
 *   gpu.c      the kernels (embedded fatbin, cuModuleLoadData + cuLaunchKernel),
 *              which GEMV kernel serves which batch, CUDA-event timing and the
 *              copy-bandwidth measurement
 *   kernels.cu the kernels themselves (compiled by nvcc to a fatbin at build time)
 *
 * Only the CUDA driver API is used, so the same binary runs on a GPU and on
 * the simulated device (where launches do nothing).  Bulk device memory is
 * never touched from the host: weights and KV are initialised and copied by
 * kernels (no-ops on the simulated device, whose memory is host mmap).
 */
#ifndef MEMSNAP_DECODE_H
#define MEMSNAP_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "memsnap/alloc.h"
/* after alloc.h, whose driver table has fields named like the functions: the
 * driver calls go through a table filled with dlopen */
#include "workloads/cudrv.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Exit codes (docs/workload.md). */
#define DECODE_EXIT_OK 0
#define DECODE_EXIT_ERROR 1 /* a driver or allocator failure that is not an OOM */
#define DECODE_EXIT_USAGE 2 /* bad command line */
#define DECODE_EXIT_NODRIVER 2 /* libcuda.so.1 missing or incomplete (bad environment) */
#define DECODE_EXIT_OOM 3   /* an allocation failed for lack of memory */

/* ------------------------------------------------------------------ shape */

/* A Llama-style decoder.  Weights per layer: qkv [(qh+2*kvh)*hd][hidden],
 * o [hidden][qh*hd], gate_up [2*ffn][hidden] (gate and up rows interleaved),
 * down [hidden][ffn]; plus embedding and lm_head [vocab][hidden].  All BF16. */
typedef struct shape {
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
} shape_t;

uint64_t shape_weight_bytes(const shape_t *s);
uint64_t shape_kv_token_bytes(const shape_t *s); /* K and V of every layer, one token */

/* A length distribution: FIXED n, UNIFORM [a, b], LOGNORMAL median a, sigma,
 * clamped to [1, max]. */
typedef struct lendist {
    enum { LEN_FIXED, LEN_UNIFORM, LEN_LOGNORMAL } kind;
    double a, b, sigma;
    int max;
} lendist_t;

/* ---------------------------------------------------------------- options */

enum { ALLOC_CUDAMALLOC, ALLOC_FIXED, ALLOC_EXPANDABLE };
enum { KV_GROW, KV_PAGED };
enum { SCEN_HEALTHY, SCEN_LEAK, SCEN_FRAGMENTATION };
enum { KERNELS_AUTO, KERNELS_ON, KERNELS_OFF };

typedef struct options {
    shape_t shape;
    const char *preset;
    int scenario, alloc, kv, kernels;
    uint64_t device_mem;   /* cap on usable device memory; 0 = the device's */
    double mem_util;       /* fraction of the cap the scheduler plans for */
    double hours;          /* simulated duration */
    long max_steps;        /* 0 = no limit */
    int compress;          /* decode tokens per step (time compression) */
    double rate;           /* mean arrivals per simulated second at the start */
    double rate_end;       /* ... and at the end (linear ramp); <0 = same */
    lendist_t prompt, output;
    int max_batch;
    int kv_chunk;          /* grow: capacity is a multiple of this many tokens */
    double kv_growth;      /* grow: new capacity >= old * this */
    int block_tokens;      /* paged: tokens per KV block */
    uint64_t leak_bytes;   /* leak: bytes kept per request; 0 = vocab*4 */
    uint64_t seed;
    int kernel_every;      /* run the compute kernels every N-th step */
    double peak_bw;        /* GB/s; 0 = measure */
    double sim_bw;         /* GB/s of the step-time model (simulated clock) */
    int quiet;
} options_t;

/* ---------------------------------------------------------------- memory */

typedef struct mem {
    int kind;                 /* ALLOC_* */
    uint64_t cap;             /* usable device memory */
    memsnap_alloc *a;         /* fixed / expandable */
    memsnap_blockpool *pool;  /* paged KV */
    uint64_t pool_block;      /* bytes per pool block */
    /* cudamalloc mode: our own accounting (sizes rounded up to 512) */
    uint64_t cm_live, cm_peak;
    /* every mode: bytes the workload asked for, live and peak */
    uint64_t requested, peak_requested;
    /* every mode, O(1): live bytes rounded as the allocator rounds (512) plus
     * pool blocks in use, and the peak of that sum */
    uint64_t live, pool_used, peak_live;
    char err[320];            /* the last OOM / failure, one line */
} mem_t;

/* 0 ok; 1 out of memory (mem->err says why); -1 another failure (mem->err). */
int mem_init(mem_t *m, const options_t *o, CUdevice dev, uint64_t kv_pool_bytes,
             uint64_t kv_block_bytes);
int mem_alloc(mem_t *m, size_t n, CUdeviceptr *p);
void mem_free(mem_t *m, CUdeviceptr p, size_t n);
int mem_kv_block_alloc(mem_t *m, CUdeviceptr *p);
void mem_kv_block_free(mem_t *m, CUdeviceptr p);
/* allocated (allocator blocks + KV pool blocks in use), reserved (segments,
 * pages, pool), and their peaks. */
void mem_usage(mem_t *m, uint64_t *allocated, uint64_t *reserved, uint64_t *peak_alloc,
               uint64_t *peak_reserved);
void mem_destroy(mem_t *m);

/* ------------------------------------------------------------------- GPU */

/* How gpu_gemv runs a batch chunk (docs/workload.md, "Compute").  Chunks of
 * at most simt_max requests take the CUDA-core GEMV (ms_gemv_nbN), larger
 * ones a tensor-core kernel (NT = ceil(chunk / 8)): `variant` picks it from
 * gpu_mma_variants, per class of product (narrow: up to GPU_MMA_NARROW
 * output rows, o and down of the 8B model, whose grids are one wave or
 * less; wide: qkv, gate/up and lm_head) and per NT, and `warps` the warps
 * per block (0: chosen from the grid, see gpu_gemv).  gpu_init sets the defaults measured
 * on the H200 (docs/benchmarks.md), or what MEMSNAP_DECODE_GEMM says (a
 * benchmarking knob); bench_gemm sweeps the rest.  att_chunk is the fewest
 * tokens per attention chunk (0: chosen from the grid) and att_kernel the
 * attention kernel (MEMSNAP_DECODE_ATT). */
typedef struct gemv_tune {
    int simt_max;          /* 0: the tensor cores for every chunk */
    int variant[2][4];     /* [wide][NT - 1]: an index into gpu_mma_variants */
    int warps[2][4];       /* [wide][NT - 1]: 1..8, or 0 = auto */
    int att_chunk;         /* 16..256, or 0: 64, or 256 from batch x kv_heads >= 128 */
    int att_kernel;        /* -1: auto (gpu_attention); 0: ms_attention_g<G>; 1: _o4
                              (64 registers, 4 blocks an SM, where G <= 4: with 8
                              it spills); 2: _cp (the chunk copied to shared
                              memory first) */
} gemv_tune_t;
#define GPU_MMA_NARROW 4096 /* products of at most this many rows are "narrow" */

/* The tensor-core kernels: ms_mma_n<NT>_m<MT>_u<U> (stages 0: weights
 * straight into registers, U steps of 32 k per round) and
 * ms_mmp_n<NT>_m<MT>_s<S> (weights through a ring of S stages in shared
 * memory, cp.async). */
#define GPU_MMA_VARIANTS 8
typedef struct gpu_mma_variant {
    int mt, u, stages;     /* 16-row tiles per block; steps per round; ring stages */
} gpu_mma_variant_t;
extern const gpu_mma_variant_t gpu_mma_variants[GPU_MMA_VARIANTS];
/* Dynamic shared memory of variant v for chunks of 8 nt with `warps` warps. */
unsigned gpu_mma_smem(int v, int nt, int warps);
/* Sets every NT of both classes to variant v with w warps (0 = auto). */
void gpu_tune_all(gemv_tune_t *t, int v, int w);

typedef struct gpu {
    int have_kernels;   /* module loaded: launches happen (no-ops on the sim) */
    int real;           /* a real GPU (not the simulated device) */
    CUmodule mod;
    CUfunction fill, copy, embed, attention_combine, argmax;
    CUfunction gemv[6]; /* CUDA cores: batch chunk 1, 2, 4, 8, 16, 32 */
    CUfunction mma[4][GPU_MMA_VARIANTS]; /* tensor cores: [NT - 1][variant] */
    CUfunction attention[3][4]; /* [att_kernel][query heads per K/V head <= 1, 2, 4, 8] */
    gemv_tune_t tune;
    CUstream stream;
    CUevent ev0, ev1;
} gpu_t;

/* Whether this binary carries kernels (nvcc was found at build time). */
int gpu_kernels_embedded(void);
/* Loads the module.  Returns 0, or -1 with a message in err. */
int gpu_init(gpu_t *g, int load_kernels, char *err, size_t errlen);
void gpu_destroy(gpu_t *g);

/* GEMV output modes. */
#define GEMV_BF16 0  /* y[b][o] = W[o] . x[b] (bf16) */
#define GEMV_SWIGLU 1 /* rows 2i, 2i+1 are gate_i, up_i: y[b][i] = silu(g) * u */
#define GEMV_F32 2   /* y[b][o] = W[o] . x[b] (fp32) */

/* Every launcher returns the CUresult of cuLaunchKernel (CUDA_SUCCESS with no
 * kernels loaded: nothing is launched). */
CUresult gpu_fill(gpu_t *g, CUdeviceptr p, uint64_t n_bf16, uint32_t seed, float scale);
CUresult gpu_copy(gpu_t *g, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes);
CUresult gpu_embed(gpu_t *g, CUdeviceptr x, CUdeviceptr emb, CUdeviceptr tok, int batch,
                   int hidden, int vocab);
/* W [out][in] bf16, x [batch][in] bf16, y [batch][out or out/2] (out even
 * for SwiGLU); in a multiple of 8.  Batches over 32 run in chunks of 32 (the
 * weights are read once per chunk). */
CUresult gpu_gemv(gpu_t *g, CUdeviceptr w, CUdeviceptr x, CUdeviceptr y, int in, int out,
                  int batch, int mode);
/* Decode attention of `layer` for the batch, with this step's K and V
 * appended: request b has len[b] tokens, the last one new, its K and V taken
 * from qkv [batch][(qh+2kvh)*hd] and written into the cache at len[b] - 1.
 * pages: [batch][max_pages] base pointers of page_tokens-token pages,
 * token-major records of kv_token_bytes.  out [batch][qh*hd] =
 * softmax(q k^T / sqrt(hd)) v over len[b] <= max_len tokens, split into
 * chunks of at most 256 tokens; scores: fp32 scratch of
 * gpu_attention_scratch_floats(max_len) per (request, head).  hd <= 128 and
 * a multiple of 8; heads / kv_heads <= 8. */
#define ATT_CHUNK 256
static inline uint64_t gpu_attention_scratch_floats(int max_len)
{
    return (uint64_t)(max_len + ATT_CHUNK - 1) / ATT_CHUNK * ATT_CHUNK;
}
CUresult gpu_attention(gpu_t *g, const shape_t *s, CUdeviceptr qkv, CUdeviceptr pages,
                       int max_pages, int page_tokens, CUdeviceptr len, int layer, int batch,
                       CUdeviceptr scores, int max_len, CUdeviceptr out);
CUresult gpu_argmax(gpu_t *g, CUdeviceptr logits, CUdeviceptr tok, int batch, int vocab);
/* Dynamic shared memory of the _cp attention kernel for chunks of `chunk`
 * tokens of head_dim. */
unsigned gpu_attention_smem(int chunk, int head_dim);
/* Measures device-to-device copy bandwidth (read + write bytes per second)
 * with the copy kernel over two buffers of `bytes`.  Returns GB/s or 0. */
double gpu_copy_bandwidth(gpu_t *g, uint64_t bytes);

/* ---------------------------------------------------------------- server */

typedef struct results {
    long steps, kernel_steps;
    uint64_t tokens, requests_done, requests_arrived, requests_left;
    uint64_t peak_allocated, peak_reserved, final_allocated, final_reserved;
    uint64_t floor_first, floor_last, floor_max; /* allocated while idle */
    long idle_count;
    uint64_t weights;
    int oom;
    long oom_step;
    double oom_hours;
    uint64_t oom_request, oom_allocated, oom_reserved;
    char oom_what[64];
    double sim_hours;
    double wall_s;
    /* on a GPU with kernels */
    double decode_ms;   /* GPU time of the timed decode steps */
    long timed_steps;
    double bytes_read;  /* bytes those steps had to read */
    double peak_bw;     /* GB/s */
    double max_batch_seen;
} results_t;

/* Runs the server loop.  Returns 0 (results filled, r->oom says whether an
 * allocation failed for lack of memory), or -1 after printing a message. */
int server_run(const options_t *o, mem_t *m, gpu_t *g, results_t *r);

/* Formatting helpers (main.c). */
const char *fmt_bytes(uint64_t b, char *buf, size_t len);

#endif

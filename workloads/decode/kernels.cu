// kernels.cu: the decode workload's kernels.  Compiled by nvcc to a fatbin
// (sm_90 SASS + compute_90 PTX) at build time, embedded in memsnap-decode and
// loaded with cuModuleLoadData; launched by name through cuLaunchKernel
// (gpu.c), so the program itself needs only the driver API.  Every kernel is
// extern "C" so its name is not mangled.
//
//   ms_fill         random BF16 from a hash of (index, seed): weights and KV
//                   are made on the device, never copied from the host
//   ms_copy         byte copy with 16-byte loads (KV regrowth, bandwidth probe)
//   ms_embed        x[b] = embedding[tok[b]]
//   ms_gemv_nbN     y = W x for a batch chunk of up to N (1..32) on CUDA cores:
//                   the batch-1 path.  Each warp owns two consecutive output
//                   rows and streams them with 16-byte loads, 4 in flight per
//                   row per lane, fp32 accumulation, then a warp shuffle
//                   reduction.  Modes: bf16 out, SwiGLU (rows 2i, 2i+1 are
//                   gate_i, up_i: out silu(g)*u), fp32 out (logits).
//   ms_mma_nN_mM_uU the same on the tensor cores for chunks of 2..32 (mma.sync
//                   m16n8k16 bf16, fp32 sums): each weight read once for the
//                   whole chunk; the same three modes
//   ms_mmp_nN_mM_sS the same with W and x streamed through a ring of S
//                   stages in shared memory (cp.async)
//   ms_attention_gG split-K decode attention with the new token's K/V append
//   (_o4: held to   fused in: one block per (K/V head, request, chunk) serves
//   64 registers)   the G query heads of that K/V head; ms_attention_combine
//                   merges the chunks
//   ms_argmax       next token = argmax of the fp32 logits
//
// KV cache layout (both policies): token-major records of kv_token_bytes =
// layers * 2 * kv_heads * head_dim * 2; within a record, layer l's K
// [kv_heads][head_dim] then V.  A request's cache is a list of pages of
// page_tokens tokens (grow: one page holding everything).
#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ uint32_t ms_hash(uint64_t i, uint32_t seed)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)(z ^ (z >> 31));
}

extern "C" __global__ void ms_fill(bf16 *p, unsigned long long n, unsigned int seed, float scale)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        // uniform in [-1, 1), never exactly 0
        float u = ((ms_hash(i, seed) >> 8) + 0.5f) * (1.0f / 8388608.0f) - 1.0f;
        p[i] = __float2bfloat16_rn(u * scale);
    }
}

extern "C" __global__ void ms_copy(unsigned char *dst, const unsigned char *src,
                                   unsigned long long bytes)
{
    uint64_t n16 = bytes / 16;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    uint64_t tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4 *s = (const uint4 *)src;
    uint4 *d = (uint4 *)dst;
    for (uint64_t i = tid; i < n16; i += stride)
        d[i] = s[i];
    for (uint64_t i = n16 * 16 + tid; i < bytes; i += stride)
        dst[i] = src[i];
}

extern "C" __global__ void ms_embed(bf16 *x, const bf16 *emb, const int *tok, int hidden,
                                    int vocab)
{
    int b = blockIdx.x;
    int t = tok[b];
    t = ((t % vocab) + vocab) % vocab;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        x[(size_t)b * hidden + i] = emb[(size_t)t * hidden + i];
}

// ------------------------------------------------------------------ GEMV

#define GEMV_BF16 0
#define GEMV_SWIGLU 1
#define GEMV_F32 2
#define GEMV_UNROLL 4

__device__ __forceinline__ void bf16x8_to_f32(const uint4 &v, float *f)
{
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&v;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

// W [out][in], x [B][in], in % 8 == 0.  One warp per pair of rows.
template <int NB>
__device__ __forceinline__ void gemv_body(const bf16 *__restrict__ W, const bf16 *__restrict__ x,
                                          void *__restrict__ y, int in, int out, int B, int mode)
{
    const int lane = threadIdx.x & 31;
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int r0 = 2 * warp;
    if (r0 >= out)
        return;
    const bool two = r0 + 1 < out;
    const int n8 = in / 8;
    const uint4 *w0 = (const uint4 *)(W + (size_t)r0 * in);
    const uint4 *w1 = (const uint4 *)(W + (size_t)(two ? r0 + 1 : r0) * in);
    const uint4 *xv = (const uint4 *)x;

    float acc0[NB], acc1[NB];
#pragma unroll
    for (int b = 0; b < NB; b++)
        acc0[b] = acc1[b] = 0.f;

    for (int base = 0; base < n8; base += 32 * GEMV_UNROLL) {
        uint4 a[GEMV_UNROLL], c[GEMV_UNROLL];
        // issue every weight load of this round first: 2*UNROLL 16-byte
        // loads in flight per lane, streamed (not kept in L1)
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int i = base + u * 32 + lane;
            if (i < n8) {
                a[u] = __ldcs(w0 + i);
                c[u] = __ldcs(w1 + i);
            } else {
                a[u] = make_uint4(0, 0, 0, 0);
                c[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int i = base + u * 32 + lane;
            if (i >= n8)
                break;
            float fa[8], fc[8];
            bf16x8_to_f32(a[u], fa);
            bf16x8_to_f32(c[u], fc);
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b < B) {
                    float fx[8];
                    bf16x8_to_f32(__ldg(xv + (size_t)b * n8 + i), fx);
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        acc0[b] = fmaf(fa[k], fx[k], acc0[b]);
                        acc1[b] = fmaf(fc[k], fx[k], acc1[b]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            acc0[b] += __shfl_xor_sync(0xffffffffu, acc0[b], off);
            acc1[b] += __shfl_xor_sync(0xffffffffu, acc1[b], off);
        }
    }
    if (lane != 0)
        return;
#pragma unroll
    for (int b = 0; b < NB; b++) {
        if (b >= B)
            break;
        if (mode == GEMV_SWIGLU) {
            float g = acc0[b], u = acc1[b];
            float s = g / (1.f + __expf(-g)) * u;
            ((bf16 *)y)[(size_t)b * (out / 2) + warp] = __float2bfloat16_rn(s);
        } else if (mode == GEMV_F32) {
            float *yf = (float *)y + (size_t)b * out;
            yf[r0] = acc0[b];
            if (two)
                yf[r0 + 1] = acc1[b];
        } else {
            bf16 *yb = (bf16 *)y + (size_t)b * out;
            yb[r0] = __float2bfloat16_rn(acc0[b]);
            if (two)
                yb[r0 + 1] = __float2bfloat16_rn(acc1[b]);
        }
    }
}

#define MS_GEMV(NB)                                                                         \
    extern "C" __global__ void __launch_bounds__(128) ms_gemv_nb##NB(                      \
        const bf16 *W, const bf16 *x, void *y, int in, int out, int B, int mode)            \
    {                                                                                       \
        gemv_body<NB>(W, x, y, in, out, B, mode);                                           \
    }
MS_GEMV(1)
MS_GEMV(2)
MS_GEMV(4)
MS_GEMV(8)
MS_GEMV(16)
MS_GEMV(32)

// ------------------------------------------------- GEMM on the tensor cores
//
// For a batch chunk of 2..32 the CUDA-core GEMV above converts and multiplies
// every weight once per request: at batch 8 and more it is bound by its FMAs,
// not by memory.  Here the multiply goes to the tensor cores (mma.sync
// m16n8k16, bf16 operands, fp32 accumulation) and each weight is read once
// for the whole chunk:
//
//   A (16 x 16) = a tile of W (16 output rows, 16 k), streamed from global
//                 memory with 16-byte loads, straight into registers
//                 (ms_mma_*) or through shared memory (ms_mmp_*, below);
//   B (16 x 8)  = 8 requests' x (16 k each), 16-byte loads through L1/L2
//                 (x is small and read by every block);
//   C (16 x 8)  = fp32 sums, NT tiles of 8 requests (chunk <= 8 NT).
//
// The k order inside a dot product does not matter, so each lane's 16-byte
// load feeds the fragments directly: lane (g = lane/4, t = lane%4) loads
// W[row g][k0 + 8t .. k0 + 8t + 7] and W[row g + 8][same], and x[request g]
// [same]; elements 0-3 serve the first mma (as logical k 2t, 2t+1, 2t+8,
// 2t+9) and 4-7 the second, so one step of 32 k is two mmas and A and B
// agree on which k each slot holds.
//
// A block owns 16 MT rows and its warps split the k steps (U consecutive
// steps of 32 per warp in turn: U * MT * 2 weight loads in flight per lane);
// the warps' sums meet in shared memory, and the epilogue writes bf16, the
// SwiGLU pairs (rows 2i, 2i+1 -> silu(gate) * up) or fp32.  Rows past `out`
// and requests past B read a valid row (clamped) and are not written; k past
// `in` (in % 8 == 0) reads as zero.

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The loads of one round of a warp: U steps of 32 k from chunk c0 (= 4 *
// step) on, all issued before the first mma of the round (ptxas may still
// interleave them with the mmas).  CHECK: chunks at or past n16 read as zero,
// without a memory access (the last, partial round).
template <int NT, int MT, int U, bool CHECK>
__device__ __forceinline__ void mma_load(uint4 (&a)[U][MT][2], uint4 (&b)[U][NT],
                                         const uint4 *const (&wr)[MT][2],
                                         const uint4 *const (&xr)[NT], int c0, int t, int n16)
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int c = c0 + 4 * u;
        const bool ok = !CHECK || c + t < n16;
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                a[u][i][h] = ok ? __ldcs(wr[i][h] + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < NT; j++)
            b[u][j] = ok ? __ldg(xr[j] + c) : make_uint4(0, 0, 0, 0);
    }
}

// The mmas of one round: elements 0-3 of each 16-byte piece are the first
// mma's k slots, 4-7 the second's.
template <int NT, int MT, int U>
__device__ __forceinline__ void mma_compute(float (&acc)[MT][NT][4], const uint4 (&a)[U][MT][2],
                                            const uint4 (&b)[U][NT])
{
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int i = 0; i < MT; i++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                mma_bf16(acc[i][j], a[u][i][0].x, a[u][i][1].x, a[u][i][0].y, a[u][i][1].y,
                         b[u][j].x, b[u][j].y);
                mma_bf16(acc[i][j], a[u][i][0].z, a[u][i][1].z, a[u][i][0].w, a[u][i][1].w,
                         b[u][j].z, b[u][j].w);
            }
}

// The warps' partial sums meet in shared memory (red: [warps][E][32] floats,
// then tile: [16 MT][8 NT + 1]) and the block writes its rows: bf16, the
// SwiGLU pairs or fp32.
template <int NT, int MT>
__device__ __forceinline__ void mma_epilogue(const float (&acc)[MT][NT][4], float *red,
                                             float *tile, void *__restrict__ y, int out, int B,
                                             int mode, int r0)
{
    constexpr int BM = 16 * MT, BN = 8 * NT, E = MT * NT * 4, TW = BN + 1;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                red[(warp * E + (i * NT + j) * 4 + c) * 32 + lane] = acc[i][j][c];
    __syncthreads();
    for (int q = threadIdx.x; q < E * 32; q += blockDim.x) {
        const int e = q >> 5, l = q & 31;
        float s = 0.f;
        for (int w = 0; w < nwarps; w++)
            s += red[(w * E + e) * 32 + l];
        // C fragment: c0, c1 at (row g, cols 2t, 2t+1); c2, c3 at row g + 8
        const int c = e & 3, j = (e >> 2) % NT, i = (e >> 2) / NT;
        tile[(16 * i + (l >> 2) + 8 * (c >> 1)) * TW + 8 * j + 2 * (l & 3) + (c & 1)] = s;
    }
    __syncthreads();

    const int nb = min(B, BN);
    if (mode == GEMV_SWIGLU) {
        const int half = out >> 1;
        for (int q = threadIdx.x; q < (BM / 2) * nb; q += blockDim.x) {
            const int n = q / (BM / 2), p = q % (BM / 2), o = (r0 >> 1) + p;
            if (o < half) {
                float gt = tile[(2 * p) * TW + n], up = tile[(2 * p + 1) * TW + n];
                ((bf16 *)y)[(size_t)n * half + o] =
                    __float2bfloat16_rn(gt / (1.f + __expf(-gt)) * up);
            }
        }
    } else {
        for (int q = threadIdx.x; q < BM * nb; q += blockDim.x) {
            const int n = q / BM, r = q % BM;
            if (r0 + r >= out)
                continue;
            if (mode == GEMV_F32)
                ((float *)y)[(size_t)n * out + r0 + r] = tile[r * TW + n];
            else
                ((bf16 *)y)[(size_t)n * out + r0 + r] = __float2bfloat16_rn(tile[r * TW + n]);
        }
    }
}

// A lane's row pointers (rows r0 + 16 i + 8 h + g of W, requests 8 j + g of
// x, both at chunk t; clamped to the last row and request) and zero sums.
template <int NT, int MT>
__device__ __forceinline__ void mma_setup(const uint4 *(&wr)[MT][2], const uint4 *(&xr)[NT],
                                          float (&acc)[MT][NT][4], const bf16 *W, const bf16 *x,
                                          int in, int out, int B, int r0, int g, int t)
{
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = min(r0 + 16 * i + 8 * h + g, out - 1);
            wr[i][h] = (const uint4 *)(W + (size_t)r * in) + t;
        }
#pragma unroll
    for (int j = 0; j < NT; j++) {
        int n = min(8 * j + g, B - 1);
        xr[j] = (const uint4 *)(x + (size_t)n * in) + t;
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[i][j][c] = 0.f;
}

#define MMA_MAX_WARPS 8

template <int NT, int MT, int U>
__device__ __forceinline__ void mma_gemm_body(const bf16 *__restrict__ W,
                                              const bf16 *__restrict__ x, void *__restrict__ y,
                                              int in, int out, int B, int mode)
{
    constexpr int BM = 16 * MT, BN = 8 * NT, E = MT * NT * 4; // E: accumulators per lane
    __shared__ float red[MMA_MAX_WARPS][E][32];
    __shared__ float tile[BM][BN + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = blockIdx.x * BM;
    const int n16 = in >> 3;            // 16-byte chunks per row
    const int nsteps = (in + 31) >> 5;  // steps of 32 k (4 chunks)
    const uint4 *wr[MT][2];
    const uint4 *xr[NT];
    float acc[MT][NT][4];
    mma_setup<NT, MT>(wr, xr, acc, W, x, in, out, B, r0, g, t);

    // full rounds without bounds checks, then at most one partial round
    const int stride = nwarps * U;
    int s0 = warp * U;
    for (; (s0 + U) * 4 <= n16; s0 += stride) {
        uint4 a[U][MT][2], b[U][NT];
        mma_load<NT, MT, U, false>(a, b, wr, xr, 4 * s0, t, n16);
        mma_compute<NT, MT, U>(acc, a, b);
    }
    if (s0 < nsteps) {
        uint4 a[U][MT][2], b[U][NT];
        mma_load<NT, MT, U, true>(a, b, wr, xr, 4 * s0, t, n16);
        mma_compute<NT, MT, U>(acc, a, b);
    }

    mma_epilogue<NT, MT>(acc, &red[0][0][0], &tile[0][0], y, out, B, mode, r0);
}

// ms_mma_n<NT>_m<MT>_u<U>: chunks of up to 8 NT requests; 16 MT rows per
// block; U steps of 32 k per round of a warp; up to MMA_MAX_WARPS warps.
// gpu.c's gpu_mma_variants lists the (MT, U, stages) built here and below.
#define MS_MMA(NT, MT, U)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * MMA_MAX_WARPS)                        \
        ms_mma_n##NT##_m##MT##_u##U(const bf16 *W, const bf16 *x, void *y, int in, int out, \
                                    int B, int mode)                                        \
    {                                                                                       \
        mma_gemm_body<NT, MT, U>(W, x, y, in, out, B, mode);                                \
    }
#define MS_MMA_NT(NT) MS_MMA(NT, 1, 4) MS_MMA(NT, 2, 2) MS_MMA(NT, 2, 4)
MS_MMA_NT(1)
MS_MMA_NT(2)
MS_MMA_NT(3)
MS_MMA_NT(4)

// ---- the same product with the weights streamed through shared memory
//
// ms_mmp_n<NT>_m<MT>_s<S>: the fragments of the kernel above, but each lane
// copies its 16-byte pieces of one step (MT * 2 of W, NT of x) into a ring of
// S stages of its own in shared memory with cp.async, S - 1 steps ahead of
// the step it multiplies.  The copies in flight hold no registers and ptxas
// cannot fold them into the mmas' round, so a lane keeps (S - 1) * (2 MT +
// NT) * 16 bytes on the way whatever the schedule: what a one-wave grid (the
// 4096-row products: 128 or 256 blocks) needs to reach the memory's
// bandwidth.  A lane reads only the slots it wrote, so the only wait is its
// own cp.async.wait_group.  Ring: [S][2 MT + NT][threads] uint4 (a warp's 32
// lanes read 512 contiguous bytes: no bank conflicts), then reused for the
// epilogue.  Dynamic shared memory: gpu_mma_smem() in gpu.c gives the size.
extern __shared__ uint4 mma_dyn[];

__device__ __forceinline__ void cp_async16(uint4 *dst, const uint4 *src, int bytes)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The copies of a warp's i-th step (global step warp + i * nwarps) into its
// stage.  Chunks at or past n16 are zero-filled (src-size 0) from the row's
// first chunk, which always exists.
template <int NT, int MT, int S>
__device__ __forceinline__ void mmp_issue(uint4 *ring, int nthr, const uint4 *const (&wr)[MT][2],
                                          const uint4 *const (&xr)[NT], int step, int t, int n16,
                                          int i)
{
    constexpr int Q = 2 * MT + NT;
    const int c = 4 * step;
    const bool ok = c + t < n16;
    const int bytes = ok ? 16 : 0, off = ok ? c : -t;
    uint4 *st = ring + (i % S) * Q * nthr;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            cp_async16(st + (2 * m + h) * nthr, wr[m][h] + off, bytes);
#pragma unroll
    for (int j = 0; j < NT; j++)
        cp_async16(st + (2 * MT + j) * nthr, xr[j] + off, bytes);
}

template <int NT, int MT, int S>
__device__ __forceinline__ void mmp_gemm_body(const bf16 *__restrict__ W,
                                              const bf16 *__restrict__ x, void *__restrict__ y,
                                              int in, int out, int B, int mode)
{
    constexpr int BM = 16 * MT, Q = 2 * MT + NT, E = MT * NT * 4;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int nthr = blockDim.x;
    const int g = lane >> 2, t = lane & 3;
    const int r0 = blockIdx.x * BM;
    const int n16 = in >> 3;
    const int nsteps = (in + 31) >> 5;
    const int my = warp < nsteps ? (nsteps - 1 - warp) / nwarps + 1 : 0; // this warp's steps
    const uint4 *wr[MT][2];
    const uint4 *xr[NT];
    float acc[MT][NT][4];
    mma_setup<NT, MT>(wr, xr, acc, W, x, in, out, B, r0, g, t);

    uint4 *ring = mma_dyn + threadIdx.x;
#pragma unroll
    for (int p = 0; p < S - 1; p++) {
        if (p < my)
            mmp_issue<NT, MT, S>(ring, nthr, wr, xr, warp + p * nwarps, t, n16, p);
        cp_async_commit();
    }
    for (int i = 0; i < my; i++) {
        cp_async_wait<S - 2>(); // step i's group (and all before it) has landed
        const uint4 *st = ring + (i % S) * Q * nthr;
        uint4 a[1][MT][2], b[1][NT];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                a[0][m][h] = st[(2 * m + h) * nthr];
#pragma unroll
        for (int j = 0; j < NT; j++)
            b[0][j] = st[(2 * MT + j) * nthr];
        // the stage refilled now is the one step i - 1 read (its values are
        // in registers already: the mmas that used them came first)
        if (i + S - 1 < my)
            mmp_issue<NT, MT, S>(ring, nthr, wr, xr, warp + (i + S - 1) * nwarps, t, n16,
                                 i + S - 1);
        cp_async_commit();
        mma_compute<NT, MT, 1>(acc, a, b);
    }
    cp_async_wait<0>();
    __syncthreads(); // every warp is done with its ring: the epilogue reuses it
    float *red = (float *)mma_dyn;
    mma_epilogue<NT, MT>(acc, red, red + nwarps * E * 32, y, out, B, mode, r0);
}

#define MS_MMP(NT, MT, S)                                                                   \
    extern "C" __global__ void __launch_bounds__(32 * MMA_MAX_WARPS)                        \
        ms_mmp_n##NT##_m##MT##_s##S(const bf16 *W, const bf16 *x, void *y, int in, int out, \
                                    int B, int mode)                                        \
    {                                                                                       \
        mmp_gemm_body<NT, MT, S>(W, x, y, in, out, B, mode);                                \
    }
#define MS_MMP_NT(NT) MS_MMP(NT, 1, 4) MS_MMP(NT, 1, 8) MS_MMP(NT, 2, 4) MS_MMP(NT, 2, 6) MS_MMP(NT, 4, 3)
MS_MMP_NT(1)
MS_MMP_NT(2)
MS_MMP_NT(3)
MS_MMP_NT(4)

// ------------------------------------------------------------- attention

__device__ __forceinline__ const bf16 *kv_at(const unsigned long long *pages, int max_pages,
                                             int page_tokens, int b, int t, size_t tok_bytes,
                                             size_t off_bytes)
{
    const unsigned char *page = (const unsigned char *)pages[(size_t)b * max_pages + t / page_tokens];
    return (const bf16 *)(page + (size_t)(t % page_tokens) * tok_bytes + off_bytes);
}

// Pieces both attention kernels share.
#define ATT_MAXCHUNK 256

// A chunk past the request's end: the empty partial (m = -inf, s = 0, acc 0).
__device__ __forceinline__ void att_empty(float *dst0, int G, int head_dim, int scratch_len)
{
    for (int q = threadIdx.x; q < G * (head_dim + 2); q += blockDim.x) {
        int hh = q / (head_dim + 2), d = q % (head_dim + 2);
        dst0[(size_t)hh * scratch_len + d] = d == 0 ? -INFINITY : 0.f;
    }
}

// This step's K and V (from qkv) into the cache at token t.
__device__ __forceinline__ void att_append(const unsigned long long *pages, int max_pages,
                                           int page_tokens, int b, int t, size_t tok_bytes,
                                           size_t koff, size_t voff, const bf16 *knew,
                                           const bf16 *vnew, int head_dim)
{
    bf16 *kd = (bf16 *)kv_at(pages, max_pages, page_tokens, b, t, tok_bytes, koff);
    bf16 *vd = (bf16 *)kv_at(pages, max_pages, page_tokens, b, t, tok_bytes, voff);
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        kd[d] = knew[d];
        vd[d] = vnew[d];
    }
}

// q of the G heads, 8 dims per lane, scaled by 1/sqrt(head_dim)
template <int GM>
__device__ __forceinline__ void att_load_q(float (&q)[GM][8], const bf16 *row, int kvh, int G,
                                           int head_dim, int hl, bool dim_ok)
{
    const float scale = rsqrtf((float)head_dim);
#pragma unroll
    for (int hh = 0; hh < GM; hh++) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (hh < G && dim_ok)
            v = *(const uint4 *)(row + (size_t)(kvh * G + hh) * head_dim + 8 * hl);
        bf16x8_to_f32(v, q[hh]);
#pragma unroll
        for (int e = 0; e < 8; e++)
            q[hh][e] *= scale;
    }
}

// Token i's scores for the G heads from the lane's 8 dims of its K row: a
// half-warp's sum, stored by its lane 0 (every lane takes part in the
// shuffles, also where i >= n).
template <int GM>
__device__ __forceinline__ void att_score(const float (&q)[GM][8], const uint4 &k,
                                          float (*sc)[ATT_MAXCHUNK], int i, int n, int G, int hl)
{
    float kf[8];
    bf16x8_to_f32(k, kf);
#pragma unroll
    for (int hh = 0; hh < GM; hh++) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++)
            s = fmaf(q[hh][e], kf[e], s);
#pragma unroll
        for (int o = 8; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (hl == 0 && i < n && hh < G)
            sc[hh][i] = s;
    }
}

// A lane's loads of one round: its 16 bytes of the K (or V: off, cur) rows
// of tokens i0 + 16 u of the chunk (zeros past n; this step's token from
// qkv, cur).
#define ATT_UT 4
__device__ __forceinline__ void att_round(uint4 (&r)[ATT_UT], const unsigned long long *pages,
                                          int max_pages, int page_tokens, int b, int t0, int i0,
                                          int n, int L, size_t tok_bytes, size_t off,
                                          const bf16 *cur, int hl, bool dim_ok)
{
#pragma unroll
    for (int u = 0; u < ATT_UT; u++) {
        const int i = i0 + 16 * u, tk = t0 + i;
        r[u] = make_uint4(0, 0, 0, 0);
        if (i < n && dim_ok) {
            const bf16 *p = tk == L - 1 ? cur
                                        : kv_at(pages, max_pages, page_tokens, b, tk, tok_bytes, off);
            r[u] = *(const uint4 *)(p + 8 * hl);
        }
    }
}

// acc[h] += p_h(i) v_i for the lane's 8 dims of token i's V row.
template <int GM>
__device__ __forceinline__ void att_pv(float (&acc)[GM][8], const float (&vf)[8],
                                       const float (*sc)[ATT_MAXCHUNK], int i, int G)
{
#pragma unroll
    for (int hh = 0; hh < GM; hh++) {
        const float p = hh < G ? sc[hh][i] : 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[hh][e] = fmaf(p, vf[e], acc[hh][e]);
    }
}

// One head's scores sc[0, n) -> exp(score - max), their max and sum (a warp).
__device__ __forceinline__ void att_softmax(float *sc, float *mh, float *sh, int n, int lane)
{
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32)
        m = fmaxf(m, sc[i]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    for (int i = lane; i < n; i += 32) {
        float e = __expf(sc[i] - m);
        sc[i] = e;
        s += e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        *mh = m;
        *sh = s;
    }
}

// The lanes' p v sums: the two half-warps, then the warps, then the partial
// (m, s, acc[d]) of each query head to the scratch.
template <int GM>
__device__ __forceinline__ void att_finish(float (&acc)[GM][8], float (*part)[GM][128],
                                           const float *mh, const float *sh, float *dst0, int G,
                                           int head_dim, int scratch_len, int lane, int warp,
                                           int hl, bool dim_ok)
{
#pragma unroll
    for (int hh = 0; hh < GM; hh++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[hh][e] += __shfl_xor_sync(0xffffffffu, acc[hh][e], 16);
    if (lane < 16 && dim_ok)
#pragma unroll
        for (int hh = 0; hh < GM; hh++)
#pragma unroll
            for (int e = 0; e < 8; e++)
                part[warp][hh][8 * hl + e] = acc[hh][e];
    __syncthreads();
    const int nwarps = blockDim.x >> 5;
    for (int qd = threadIdx.x; qd < G * head_dim; qd += blockDim.x) {
        const int hh = qd / head_dim, d = qd % head_dim;
        float a = 0.f;
        for (int w = 0; w < nwarps; w++)
            a += part[w][hh][d];
        dst0[(size_t)hh * scratch_len + 2 + d] = a;
    }
    if (threadIdx.x < G) {
        dst0[(size_t)threadIdx.x * scratch_len] = mh[threadIdx.x];
        dst0[(size_t)threadIdx.x * scratch_len + 1] = sh[threadIdx.x];
    }
}

// Split-K decode attention ("flash decoding") with the new token's append
// fused in.  Grid (kv_heads, B, nsplit), 256 threads: a block owns one K/V
// head, the G = heads / kv_heads query heads that share it (G <= GM), and
// tokens [z chunk, z chunk + chunk) of request b (chunk <= ATT_MAXCHUNK).
// Token L - 1 (L = lens[b]) is this step's: its K and V are read from qkv,
// and the block whose chunk holds it writes them into the cache (once per
// head and request; no other block reads that slot in this launch).
//
// A half-warp reads one token's K (or V) row of head_dim <= 128 bf16 with one
// 16-byte load per lane (8 dims per lane), 16 token slots per block, ATT_UT
// tokens per slot in flight.  Scores for the G heads go to shared memory;
// warp h < G turns head h's into exp(score - max) and their sum; the V pass
// accumulates p v per head in registers, then across slots.  The partial
// (max m, sum s, acc[d] = sum exp(score - m) v[d]) of each query head goes to
// scratch [B][heads][scratch_len] at z * (head_dim + 2), as
// ms_attention_combine reads it; nsplit * (head_dim + 2) <= scratch_len.
//
// CP (ms_attention_g<GM>_cp): the block first copies its whole chunk's K and
// V rows (and this step's, from qkv) into shared memory with cp.async, all
// at once: one trip to memory per block however long the chunk, and no
// registers held by the copies (loading V with K into registers cost
// occupancy).  Dynamic shared memory: 2 * chunk * head_dim bf16 (K then V,
// token-major), gpu_attention_smem() in gpu.c; the passes then read it, a
// half-warp per token.

template <int GM, bool CP>
__device__ __forceinline__ void attention_body(const bf16 *qkv, const unsigned long long *pages,
                                               int max_pages, int page_tokens, const int *lens,
                                               int layer, int heads, int kv_heads, int head_dim,
                                               int layers, float *scratch, int scratch_len,
                                               int chunk)
{
    __shared__ float sc[GM][ATT_MAXCHUNK];
    __shared__ float part[8][GM][128];
    __shared__ float mh[GM], sh[GM];
    const int kvh = blockIdx.x, b = blockIdx.y, z = blockIdx.z;
    const int G = heads / kv_heads;
    const int L = lens[b];
    const int t0 = z * chunk, t1 = min(L, t0 + chunk), n = t1 - t0;
    const int qkv_row = (heads + 2 * kv_heads) * head_dim;
    const size_t tok_bytes = (size_t)layers * 2 * kv_heads * head_dim * 2;
    const size_t koff = ((size_t)layer * 2 * kv_heads * head_dim + (size_t)kvh * head_dim) * 2;
    const size_t voff = koff + (size_t)kv_heads * head_dim * 2;
    const bf16 *row = qkv + (size_t)b * qkv_row;
    const bf16 *knew = row + (size_t)(heads + kvh) * head_dim;
    const bf16 *vnew = row + (size_t)(heads + kv_heads + kvh) * head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hl = lane & 15, slot = 2 * warp + (lane >> 4);
    const bool dim_ok = 8 * hl < head_dim;
    const int d8 = head_dim >> 3; // 16-byte pieces per row (CP)
    uint4 *kvs = mma_dyn;         // CP: [2][chunk][d8]
    float *dst0 = scratch + ((size_t)b * heads + (size_t)kvh * G) * scratch_len +
                  (size_t)z * (head_dim + 2);

    if (n <= 0) { // nothing here: empty partials
        att_empty(dst0, G, head_dim, scratch_len);
        return;
    }
    if constexpr (CP) {
        // K rows, then V rows: two groups, so the scores start once K is in
        for (int kv = 0; kv < 2; kv++) {
            for (int q = threadIdx.x; q < n * d8; q += blockDim.x) {
                const int i = q / d8, d = q % d8, tk = t0 + i;
                const bf16 *src = tk == L - 1 ? (kv ? vnew : knew)
                                              : kv_at(pages, max_pages, page_tokens, b, tk,
                                                      tok_bytes, kv ? voff : koff);
                cp_async16(kvs + ((size_t)kv * chunk + i) * d8 + d, (const uint4 *)src + d, 16);
            }
            cp_async_commit();
        }
    }
    if (L - 1 < t1) // the block that holds the new token appends it
        att_append(pages, max_pages, page_tokens, b, L - 1, tok_bytes, koff, voff, knew, vnew,
                   head_dim);

    float q[GM][8];
    att_load_q<GM>(q, row, kvh, G, head_dim, hl, dim_ok);

    if constexpr (CP) {
        cp_async_wait<1>(); // this thread's K copies
        __syncthreads();    // everyone's
        // scores: token i by half-warp slot i % 16 (the trip count is the
        // block's: every lane takes part in the shuffles)
        for (int base = 0; base < n; base += 16) {
            const int i = base + slot;
            uint4 k = make_uint4(0, 0, 0, 0);
            if (i < n && dim_ok)
                k = kvs[(size_t)i * d8 + hl];
            att_score<GM>(q, k, sc, i, n, G, hl);
        }
    } else {
        // scores: rounds of 16 slots x ATT_UT tokens (the trip count is the
        // block's, so every lane takes part in the shuffles)
        for (int base = 0; base < n; base += 16 * ATT_UT) {
            uint4 kv[ATT_UT];
            att_round(kv, pages, max_pages, page_tokens, b, t0, base + slot, n, L, tok_bytes,
                      koff, knew, hl, dim_ok);
#pragma unroll
            for (int u = 0; u < ATT_UT; u++) {
                const int i = base + slot + 16 * u;
                att_score<GM>(q, kv[u], sc, i, n, G, hl);
            }
        }
    }
    __syncthreads();

    if (warp < G) // softmax pieces: warp h for head h
        att_softmax(sc[warp], mh + warp, sh + warp, n, lane);
    if constexpr (CP)
        cp_async_wait<0>(); // this thread's V copies
    __syncthreads();

    // acc[h][d] = sum_t p_h(t) v_t[d]
    float acc[GM][8];
#pragma unroll
    for (int hh = 0; hh < GM; hh++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[hh][e] = 0.f;
    if constexpr (CP) {
        const uint4 *vs = kvs + (size_t)chunk * d8;
        for (int i = slot; i < n; i += 16) {
            float vf[8];
            bf16x8_to_f32(dim_ok ? vs[(size_t)i * d8 + hl] : make_uint4(0, 0, 0, 0), vf);
            att_pv<GM>(acc, vf, sc, i, G);
        }
    } else {
        for (int base = 0; base < n; base += 16 * ATT_UT) {
            uint4 vv[ATT_UT];
            att_round(vv, pages, max_pages, page_tokens, b, t0, base + slot, n, L, tok_bytes,
                      voff, vnew, hl, dim_ok);
#pragma unroll
            for (int u = 0; u < ATT_UT; u++) {
                const int i = base + slot + 16 * u;
                if (i >= n)
                    break;
                float vf[8];
                bf16x8_to_f32(vv[u], vf);
                att_pv<GM>(acc, vf, sc, i, G);
            }
        }
    }
    att_finish<GM>(acc, part, mh, sh, dst0, G, head_dim, scratch_len, lane, warp, hl, dim_ok);
}

// ms_attention_g<GM>: up to GM query heads per K/V head; ms_attention_g<GM>_o4
// the same held to 64 registers a thread, so that 4 blocks fit on an SM (more
// loads in flight when the grid is many waves: large batches);
// ms_attention_g<GM>_cp the chunk copied to shared memory first (CP above)
#define MS_ATTENTION_K(NAME, GM, CP, ...)                                                   \
    extern "C" __global__ void __launch_bounds__(__VA_ARGS__) NAME(                        \
        const bf16 *qkv, const unsigned long long *pages, int max_pages, int page_tokens,   \
        const int *lens, int layer, int heads, int kv_heads, int head_dim, int layers,      \
        float *scratch, int scratch_len, int chunk)                                         \
    {                                                                                       \
        attention_body<GM, CP>(qkv, pages, max_pages, page_tokens, lens, layer, heads,      \
                               kv_heads, head_dim, layers, scratch, scratch_len, chunk);    \
    }
#define MS_ATTENTION(GM)                                                                    \
    MS_ATTENTION_K(ms_attention_g##GM, GM, false, 256)                                      \
    MS_ATTENTION_K(ms_attention_g##GM##_o4, GM, false, 256, 4)                              \
    MS_ATTENTION_K(ms_attention_g##GM##_cp, GM, true, 256)
MS_ATTENTION(1)
MS_ATTENTION(2)
MS_ATTENTION(4)
MS_ATTENTION(8)

// grid (heads, B), 128 threads: out = sum_z acc_z e^(m_z - M) / sum_z s_z e^(m_z - M)
extern "C" __global__ void ms_attention_combine(const float *scratch, int scratch_len, int nsplit,
                                                int heads, int head_dim, bf16 *out)
{
    int h = blockIdx.x, b = blockIdx.y;
    const float *p = scratch + ((size_t)b * heads + h) * scratch_len;
    int stride = head_dim + 2;
    float M = -INFINITY;
    for (int z = 0; z < nsplit; z++)
        M = fmaxf(M, p[(size_t)z * stride]);
    float S = 0.f;
    for (int z = 0; z < nsplit; z++)
        S += p[(size_t)z * stride + 1] * __expf(p[(size_t)z * stride] - M);
    float inv = 1.f / S;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.f;
        for (int z = 0; z < nsplit; z++)
            a += p[(size_t)z * stride + 2 + d] * __expf(p[(size_t)z * stride] - M);
        out[(size_t)b * heads * head_dim + (size_t)h * head_dim + d] = __float2bfloat16_rn(a * inv);
    }
}

// grid B, 256 threads
extern "C" __global__ void ms_argmax(const float *logits, int *tok, int vocab)
{
    __shared__ float bv[256];
    __shared__ int bi[256];
    int b = blockIdx.x;
    const float *l = logits + (size_t)b * vocab;
    float best = -INFINITY;
    int idx = 0;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        if (l[i] > best) {
            best = l[i];
            idx = i;
        }
    bv[threadIdx.x] = best;
    bi[threadIdx.x] = idx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = bv[threadIdx.x + s];
            int oi = bi[threadIdx.x + s];
            if (o > bv[threadIdx.x] || (o == bv[threadIdx.x] && oi < bi[threadIdx.x])) {
                bv[threadIdx.x] = o;
                bi[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        tok[b] = bi[0];
}

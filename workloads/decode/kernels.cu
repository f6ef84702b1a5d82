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
//   ms_gemv_nbN     y = W x for a batch chunk of up to N (1..32): the memory-
//                   bound heart of decode.  Each warp owns two consecutive
//                   output rows and streams them with 16-byte loads, 4 in
//                   flight per row per lane, fp32 accumulation, then a warp
//                   shuffle reduction.  Modes: bf16 out, SwiGLU (rows 2i, 2i+1
//                   are gate_i, up_i: out silu(g)*u), fp32 out (logits).
//   ms_kv_append    writes the new token's K and V of one layer into the cache
//   ms_attention    split-K decode attention: one block per (query head,
//                   request, 256-token chunk) writes a partial softmax-weighted
//                   sum of V; ms_attention_combine merges the chunks
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

// ------------------------------------------------------------- attention

struct kv_geom {
    int heads, kv_heads, head_dim, layers;
};

__device__ __forceinline__ const bf16 *kv_at(const unsigned long long *pages, int max_pages,
                                             int page_tokens, int b, int t, size_t tok_bytes,
                                             size_t off_bytes)
{
    const unsigned char *page = (const unsigned char *)pages[(size_t)b * max_pages + t / page_tokens];
    return (const bf16 *)(page + (size_t)(t % page_tokens) * tok_bytes + off_bytes);
}

extern "C" __global__ void ms_kv_append(const bf16 *qkv, const unsigned long long *pages,
                                        int max_pages, int page_tokens, const int *pos,
                                        int layer, int heads, int kv_heads, int head_dim,
                                        int layers)
{
    int b = blockIdx.x;
    int qkv_row = (heads + 2 * kv_heads) * head_dim;
    int n = 2 * kv_heads * head_dim;
    size_t tok_bytes = (size_t)layers * n * 2;
    size_t off = (size_t)layer * n * 2;
    bf16 *dst = (bf16 *)kv_at(pages, max_pages, page_tokens, b, pos[b], tok_bytes, off);
    const bf16 *src = qkv + (size_t)b * qkv_row + heads * head_dim;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        dst[i] = src[i];
}

// Split-K decode attention ("flash decoding"): grid (heads, B, nsplit), 256
// threads; split z covers tokens [256 z, 256 z + 256).  It writes a partial
// (max m, sum s of exp(score - m), acc[d] = sum exp(score - m) v[d]) into
// scratch [B][heads][nsplit * 256] fp32 at z * (head_dim + 2); head_dim <= 128.
#define ATT_CHUNK 256
extern "C" __global__ void __launch_bounds__(256)
    ms_attention(const bf16 *qkv, const unsigned long long *pages, int max_pages, int page_tokens,
                 const int *lens, int layer, int heads, int kv_heads, int head_dim, int layers,
                 float *scratch, int scratch_len, bf16 *out)
{
    __shared__ float sc[ATT_CHUNK];
    __shared__ float red[8];
    __shared__ float part[8][128];
    int h = blockIdx.x, b = blockIdx.y, z = blockIdx.z;
    int kvh = h / (heads / kv_heads);
    int L = lens[b];
    int t0 = z * ATT_CHUNK, t1 = min(L, t0 + ATT_CHUNK);
    int qkv_row = (heads + 2 * kv_heads) * head_dim;
    size_t tok_bytes = (size_t)layers * 2 * kv_heads * head_dim * 2;
    size_t koff = ((size_t)layer * 2 * kv_heads * head_dim + (size_t)kvh * head_dim) * 2;
    size_t voff = koff + (size_t)kv_heads * head_dim * 2;
    const bf16 *q = qkv + (size_t)b * qkv_row + (size_t)h * head_dim;
    float *dst = scratch + ((size_t)b * heads + h) * scratch_len + (size_t)z * (head_dim + 2);
    float scale = rsqrtf((float)head_dim);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    (void)out;
    if (t0 >= t1) { // nothing here: an empty partial
        for (int d = threadIdx.x; d < head_dim + 2; d += blockDim.x)
            dst[d] = d == 0 ? -INFINITY : 0.f;
        return;
    }
    float qv[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int d = lane + 32 * j;
        qv[j] = d < head_dim ? __bfloat162float(q[d]) : 0.f;
    }
    // scores: a warp per token
    for (int t = t0 + warp; t < t1; t += nwarps) {
        const bf16 *k = kv_at(pages, max_pages, page_tokens, b, t, tok_bytes, koff);
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int d = lane + 32 * j;
            if (d < head_dim)
                s = fmaf(qv[j], __bfloat162float(k[d]), s);
        }
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0)
            sc[t - t0] = s * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int t = threadIdx.x; t < t1 - t0; t += blockDim.x)
        m = fmaxf(m, sc[t]);
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0)
        red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int i = 1; i < nwarps; i++)
        m = fmaxf(m, red[i]);
    __syncthreads();
    float sum = 0.f;
    for (int t = threadIdx.x; t < t1 - t0; t += blockDim.x) {
        float e = __expf(sc[t] - m);
        sc[t] = e;
        sum += e;
    }
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0)
        red[warp] = sum;
    __syncthreads();
    sum = 0.f;
    for (int i = 0; i < nwarps; i++)
        sum += red[i];
    // acc[d] = sum_t p_t v_t[d]: warps split the tokens, lanes the dims
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
    for (int t = t0 + warp; t < t1; t += nwarps) {
        const bf16 *v = kv_at(pages, max_pages, page_tokens, b, t, tok_bytes, voff);
        float p = sc[t - t0];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int d = lane + 32 * j;
            if (d < head_dim)
                acc[j] = fmaf(p, __bfloat162float(v[d]), acc[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
        part[warp][lane + 32 * j] = acc[j];
    __syncthreads();
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        float a = 0.f;
        for (int w = 0; w < nwarps; w++)
            a += part[w][d];
        dst[2 + d] = a;
    }
    if (threadIdx.x == 0) {
        dst[0] = m;
        dst[1] = sum;
    }
}

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

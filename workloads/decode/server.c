/* server.c: the decode server loop.
 *
 * Requests arrive as a Poisson process in *simulated* time (seeded; the rate
 * may ramp linearly from --rate to --rate-end over the run), each with a
 * prompt and an output length drawn from the length distributions.  They wait
 * in a FIFO; the scheduler admits the head while the batch has room
 * (--max-batch) and the KV memory the request will need at its final length
 * fits the KV budget (cap * mem_util - weights - step temporaries).  The
 * scheduler knows each request's final length, as if max_tokens were exact.
 *
 * One step = schedule, prefill the admitted requests, one decode step for the
 * batch, retire the finished requests.  With --compress C a step decodes C
 * tokens per request (the memory pattern is the same: KV grows at the same
 * token counts; temporaries are made once per step), so hours of traffic run
 * in a minute.  The simulated clock advances by a step-time model
 * (bytes a step reads / --sim-bw, prefill at weights*prompt/sim flops), never
 * by measured time, so the same seed gives the same allocation sequence on a
 * GPU and on the simulated device.
 *
 * Memory per request:
 *   grow   one KV buffer of `cap` tokens (token-major: a token's K and V for
 *          every layer are one kv_token_bytes record).  When it is full a
 *          bigger one is allocated (cap = max(cap * growth, len + C) rounded
 *          up to --kv-chunk tokens), the KV is copied by a kernel and the old
 *          buffer freed: sizes vary continuously from request to request.
 *   paged  --block-tokens tokens per block from the block pool, taken as the
 *          request grows, given back when it finishes.
 *   leak   (scenario leak) a per-request "logprobs" buffer never freed.
 * Per step temporaries, in the same allocator as the KV: activations (small
 * pool), attention scores [batch][heads][longest context] and fp32 logits
 * [batch][vocab] (large pool, sizes follow the batch), and in prefill an
 * activation buffer of prompt * (hidden + ffn) per admitted request.
 */
#define _GNU_SOURCE        /* RTLD_DEFAULT: glibc before 2.34 declares it only so */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

#include "decode.h"

/* ------------------------------------------------------------------ rng */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void) /* (0, 1) */
{
    return ((rng_next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static int draw_len(const lendist_t *d)
{
    double v;
    switch (d->kind) {
    case LEN_FIXED:
        v = d->a;
        break;
    case LEN_UNIFORM:
        v = d->a + floor(rng_unit() * (d->b - d->a + 1));
        break;
    default: {
        double u1 = rng_unit(), u2 = rng_unit();
        double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        v = floor(d->a * exp(d->sigma * z));
    }
    }
    if (v < 1)
        v = 1;
    if (v > d->max)
        v = d->max;
    return (int)v;
}

/* --------------------------------------------------------------- requests */

typedef struct request {
    long id;
    double arrival;
    int prompt, output;
    int len;       /* tokens in the KV cache */
    int generated;
    int cap;       /* grow: capacity in tokens */
    CUdeviceptr kv;
    uint64_t kv_bytes;
    CUdeviceptr *blocks; /* paged */
    int nblocks, blocks_cap;
    uint64_t commit; /* KV bytes the scheduler set aside for it */
    int new_this_step;
} request_t;

typedef struct server {
    const options_t *o;
    const shape_t *s;
    mem_t *m;
    gpu_t *g;
    results_t *r;
    uint64_t kvtok;       /* bytes per token of KV */
    uint64_t kv_budget, kv_committed;
    request_t **wait;     /* FIFO ring */
    size_t wait_head, wait_n, wait_cap;
    request_t **active;
    int nactive;
    double t;             /* simulated seconds */
    double t_end;
    double next_arrival;
    long next_id;
    /* weights */
    CUdeviceptr *w;
    uint64_t *w_bytes;
    int nw;
    /* persistent small buffers for the kernels */
    CUdeviceptr io;       /* tokens | (positions, unused) | len | page table */
    uint64_t io_bytes;
    int max_pages;
    int32_t *h_tok, *h_len;
    CUdeviceptr *h_pages;
    /* the fatal out-of-memory, if any */
    int oom;
    int next_hour_mark;   /* the next whole simulated hour to mark (hour_marks) */
} server_t;

static int ladder_next(const options_t *o, int cap, int need)
{
    double grown = ceil(cap * o->kv_growth);
    int n = grown > need ? (int)grown : need;
    return (n + o->kv_chunk - 1) / o->kv_chunk * o->kv_chunk;
}

/* KV bytes request q will hold at its final length under the policy. */
static uint64_t final_kv_bytes(const server_t *sv, const request_t *q)
{
    const options_t *o = sv->o;
    int total = q->prompt + q->output;
    if (o->kv == KV_PAGED) {
        uint64_t blocks = (uint64_t)(total + o->block_tokens - 1) / o->block_tokens;
        return blocks * o->block_tokens * sv->kvtok;
    }
    int cap = ladder_next(o, 0, q->prompt + 1);
    int len = q->prompt;
    while (len < total) {
        len += o->compress;
        if (len > total)
            len = total;
        if (len > cap)
            cap = ladder_next(o, cap, len);
    }
    return (uint64_t)cap * sv->kvtok;
}

/* ----------------------------------------------------------- allocations */

/* Peaks come from the allocator's own counters and mem.c's O(1) tracking;
 * only cudamalloc mode (no allocator) needs a look after each allocation. */
static void note_peaks(server_t *sv)
{
    if (sv->m->kind != ALLOC_CUDAMALLOC)
        return;
    uint64_t al, re, pal, pre;
    mem_usage(sv->m, &al, &re, &pal, &pre);
    if (al > sv->r->peak_allocated)
        sv->r->peak_allocated = al;
    if (re > sv->r->peak_reserved)
        sv->r->peak_reserved = re;
    if (pre > sv->r->peak_reserved && sv->m->kind != ALLOC_CUDAMALLOC)
        sv->r->peak_reserved = pre;
}

/* Under the memsnap recorder, adds `text` to the snapshot as a mark
 * (memsnap_annotate, found with dlsym so the workload runs without the
 * recorder too: then it does nothing). */
static void annotate(const char *text)
{
    static int looked;
    static int (*fn)(const char *);
    if (!looked) {
        fn = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_annotate");
        looked = 1;
    }
    if (fn)
        fn(text);
}

/* Writes "memsnap-decode: simulated hour K" for every whole hour K the
 * simulated clock has reached since the last call (0 at the start), so the
 * snapshot carries the workload's own clock: `memsnap render --x marks:hour`
 * reads its axis from these marks.  The events before a mark happened before
 * that hour (a step's allocations come before its time is added). */
static void hour_marks(server_t *sv)
{
    while (sv->next_hour_mark * 3600.0 <= sv->t) {
        char msg[64];
        snprintf(msg, sizeof msg, "memsnap-decode: simulated hour %d", sv->next_hour_mark);
        annotate(msg);
        sv->next_hour_mark++;
    }
}

/* Records the out-of-memory that ends the run; returns -1. */
static int record_oom(server_t *sv, uint64_t n, const char *what)
{
    results_t *r = sv->r;
    uint64_t al, re, pal, pre;
    mem_usage(sv->m, &al, &re, &pal, &pre);
    sv->oom = 1;
    r->oom = 1;
    r->oom_step = r->steps;
    r->oom_hours = sv->t / 3600.0;
    r->oom_request = n;
    r->oom_allocated = al;
    r->oom_reserved = re;
    snprintf(r->oom_what, sizeof r->oom_what, "%s", what);
    /* under the memsnap recorder: a note in the snapshot and a dump (ring
     * mode writes the state at this moment); no-ops without it */
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "memsnap_dump");
    char msg[256];
    snprintf(msg, sizeof msg,
             "memsnap-decode: out of memory at step %ld, simulated hour %.2f: %s of %llu "
             "bytes, allocated %llu, reserved %llu",
             r->steps, r->oom_hours, what, (unsigned long long)n,
             (unsigned long long)al, (unsigned long long)re);
    annotate(msg);
    if (dump)
        dump("oom");
    if (!sv->o->quiet)
        fprintf(stderr, "memsnap-decode: out of memory at step %ld (hour %.2f): %s of %llu bytes: %s\n",
                r->steps, r->oom_hours, what, (unsigned long long)n, sv->m->err);
    return -1;
}

/* An allocation of the workload; `what` names it in the OOM report.  0, or
 * -1 after recording the OOM (sv->oom) or printing a fatal error. */
static int dalloc(server_t *sv, size_t n, CUdeviceptr *p, const char *what)
{
    int rc = mem_alloc(sv->m, n, p);
    if (rc == 0) {
        note_peaks(sv);
        return 0;
    }
    *p = 0;
    if (rc == 1)
        return record_oom(sv, n, what);
    fprintf(stderr, "memsnap-decode: %s of %zu bytes failed: %s\n", what, n, sv->m->err);
    return -2;
}

static int launch_ok(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return 0;
    const char *s = NULL;
    cuGetErrorName(r, &s);
    fprintf(stderr, "memsnap-decode: kernel %s: %s\n", what, s ? s : "?");
    return -2;
}

/* --------------------------------------------------------------- weights */

enum { W_QKV, W_O, W_GATE_UP, W_DOWN, W_PER_LAYER };

__attribute__((noinline)) static int load_weights(server_t *sv)
{
    const shape_t *s = sv->s;
    uint64_t h = s->hidden, qd = (uint64_t)s->heads * s->head_dim,
             kvd = (uint64_t)s->kv_heads * s->head_dim;
    sv->nw = s->layers * W_PER_LAYER + 2;
    sv->w = calloc(sv->nw, sizeof *sv->w);
    sv->w_bytes = calloc(sv->nw, sizeof *sv->w_bytes);
    if (!sv->w || !sv->w_bytes)
        return -2;
    for (int l = 0; l < s->layers; l++) {
        uint64_t *b = &sv->w_bytes[l * W_PER_LAYER];
        b[W_QKV] = (qd + 2 * kvd) * h * 2;
        b[W_O] = h * qd * 2;
        b[W_GATE_UP] = 2 * (uint64_t)s->ffn * h * 2;
        b[W_DOWN] = h * (uint64_t)s->ffn * 2;
    }
    sv->w_bytes[sv->nw - 2] = (uint64_t)s->vocab * h * 2; /* embedding */
    sv->w_bytes[sv->nw - 1] = (uint64_t)s->vocab * h * 2; /* lm_head */
    for (int i = 0; i < sv->nw; i++) {
        int rc = dalloc(sv, sv->w_bytes[i], &sv->w[i], "weights");
        if (rc)
            return rc;
        /* uniform in +-sqrt(3/in): outputs keep the inputs' scale */
        uint64_t in = i == sv->nw - 2 ? 1
                      : i == sv->nw - 1 ? h
                      : (i % W_PER_LAYER) == W_DOWN ? (uint64_t)s->ffn
                      : (i % W_PER_LAYER) == W_O ? qd : h;
        float scale = i == sv->nw - 2 ? 1.0f : sqrtf(3.0f / (float)in);
        if ((rc = launch_ok(gpu_fill(sv->g, sv->w[i], sv->w_bytes[i] / 2,
                                     (uint32_t)(sv->o->seed * 7919 + i), scale),
                            "fill weights")))
            return rc;
    }
    sv->r->weights = shape_weight_bytes(s);
    return 0;
}

/* ------------------------------------------------------------ KV policies */

/* The leak: a per-request buffer kept "for later" and never freed. */
__attribute__((noinline)) static int remember_logprobs(server_t *sv, request_t *q)
{
    (void)q;
    CUdeviceptr p;
    uint64_t n = sv->o->leak_bytes ? sv->o->leak_bytes : (uint64_t)sv->s->vocab * 4;
    return dalloc(sv, n, &p, "leaked logprobs");
}

/* Makes room for `need` tokens in q's KV. */
__attribute__((noinline)) static int kv_reserve(server_t *sv, request_t *q, int need)
{
    const options_t *o = sv->o;
    if (o->kv == KV_PAGED) {
        while ((int64_t)q->nblocks * o->block_tokens < need) {
            if (q->nblocks == q->blocks_cap) {
                int nc = q->blocks_cap ? 2 * q->blocks_cap : 16;
                CUdeviceptr *nb = realloc(q->blocks, nc * sizeof *nb);
                if (!nb)
                    return -2;
                q->blocks = nb;
                q->blocks_cap = nc;
            }
            int rc = mem_kv_block_alloc(sv->m, &q->blocks[q->nblocks]);
            if (rc == 1) /* the scheduler set the blocks aside: not expected */
                return record_oom(sv, sv->m->pool_block, "KV block");
            if (rc) {
                fprintf(stderr, "memsnap-decode: %s\n", sv->m->err);
                return -2;
            }
            q->nblocks++;
        }
        note_peaks(sv);
        return 0;
    }
    if (need <= q->cap)
        return 0;
    int ncap = ladder_next(o, q->cap, need);
    uint64_t nbytes = (uint64_t)ncap * sv->kvtok;
    CUdeviceptr nkv;
    int rc = dalloc(sv, nbytes, &nkv, q->kv ? "KV regrowth" : "KV");
    if (rc)
        return rc;
    if (q->kv) {
        rc = launch_ok(gpu_copy(sv->g, nkv, q->kv, (uint64_t)q->len * sv->kvtok), "copy KV");
        if (rc)
            return rc;
        mem_free(sv->m, q->kv, q->kv_bytes);
    }
    q->kv = nkv;
    q->kv_bytes = nbytes;
    q->cap = ncap;
    return 0;
}

static void kv_release(server_t *sv, request_t *q)
{
    if (sv->o->kv == KV_PAGED) {
        for (int i = q->nblocks - 1; i >= 0; i--)
            mem_kv_block_free(sv->m, q->blocks[i]);
        free(q->blocks);
        q->blocks = NULL;
        q->nblocks = 0;
    } else {
        mem_free(sv->m, q->kv, q->kv_bytes);
        q->kv = 0;
    }
}

/* ------------------------------------------------------------- scheduling */

static double rate_at(const server_t *sv, double t)
{
    const options_t *o = sv->o;
    double end = o->rate_end >= 0 ? o->rate_end : o->rate;
    double f = sv->t_end > 0 ? t / sv->t_end : 0;
    if (f > 1)
        f = 1;
    return o->rate + (end - o->rate) * f;
}

static int push_wait(server_t *sv, request_t *q)
{
    if (sv->wait_n == sv->wait_cap) {
        size_t nc = sv->wait_cap ? 2 * sv->wait_cap : 256;
        request_t **nw = malloc(nc * sizeof *nw);
        if (!nw)
            return -2;
        for (size_t i = 0; i < sv->wait_n; i++)
            nw[i] = sv->wait[(sv->wait_head + i) % sv->wait_cap];
        free(sv->wait);
        sv->wait = nw;
        sv->wait_head = 0;
        sv->wait_cap = nc;
    }
    sv->wait[(sv->wait_head + sv->wait_n) % sv->wait_cap] = q;
    sv->wait_n++;
    return 0;
}

static void arrivals(server_t *sv)
{
    while (sv->next_arrival <= sv->t && sv->next_arrival < sv->t_end) {
        request_t *q = calloc(1, sizeof *q);
        if (!q)
            return;
        q->id = sv->next_id++;
        q->arrival = sv->next_arrival;
        q->prompt = draw_len(&sv->o->prompt);
        q->output = draw_len(&sv->o->output);
        if (push_wait(sv, q)) {
            free(q);
            return;
        }
        sv->r->requests_arrived++;
        double rate = rate_at(sv, sv->next_arrival);
        sv->next_arrival += rate > 0 ? -log(rng_unit()) / rate : 1e30;
    }
}

/* Admits waiting requests (FIFO, no overtaking).  Returns how many. */
static int admit(server_t *sv)
{
    int n = 0;
    while (sv->wait_n && sv->nactive < sv->o->max_batch) {
        request_t *q = sv->wait[sv->wait_head];
        uint64_t need = final_kv_bytes(sv, q);
        if (sv->kv_committed + need > sv->kv_budget && sv->nactive > 0)
            break;
        sv->wait_head = (sv->wait_head + 1) % sv->wait_cap;
        sv->wait_n--;
        q->commit = need;
        q->new_this_step = 1;
        sv->kv_committed += need;
        sv->active[sv->nactive++] = q;
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ steps */

static double step_seconds(const server_t *sv, uint64_t kv_tokens)
{
    return ((double)sv->r->weights + (double)kv_tokens * sv->kvtok) / (sv->o->sim_bw * 1e9);
}

static int prefill(server_t *sv)
{
    const shape_t *s = sv->s;
    int rc = 0;
    nvtxRangePushA("prefill");
    for (int i = 0; i < sv->nactive && !rc; i++) {
        request_t *q = sv->active[i];
        if (!q->new_this_step)
            continue;
        q->new_this_step = 0;
        if ((rc = kv_reserve(sv, q, q->prompt + 1)))
            break;
        if (sv->o->scenario == SCEN_LEAK && (rc = remember_logprobs(sv, q)))
            break;
        /* prompt activations: a temporary the size of the prompt */
        uint64_t act = (uint64_t)q->prompt * (s->hidden + s->ffn) * 2;
        CUdeviceptr a;
        if ((rc = dalloc(sv, act, &a, "prefill activations")))
            break;
        /* the prompt's K and V (prefill compute is not modelled beyond this) */
        if (sv->o->kv == KV_GROW)
            rc = launch_ok(gpu_fill(sv->g, q->kv, (uint64_t)q->prompt * sv->kvtok / 2,
                                    (uint32_t)q->id, 1.0f), "fill KV");
        else
            for (int b = 0; b < q->nblocks && !rc; b++)
                rc = launch_ok(gpu_fill(sv->g, q->blocks[b], sv->m->pool_block / 2,
                                        (uint32_t)(q->id * 131 + b), 1.0f), "fill KV");
        mem_free(sv->m, a, act);
        q->len = q->prompt;
        sv->t += (double)q->prompt * sv->r->weights / 400e12; /* prefill at 400 TFLOP/s */
    }
    nvtxRangePop();
    return rc;
}

/* The kernels of one decode step for the batch (one token per request). */
static int decode_kernels(server_t *sv, CUdeviceptr x, CUdeviceptr qkv, CUdeviceptr attn,
                          CUdeviceptr h, CUdeviceptr scores, int max_len, CUdeviceptr logits,
                          int timed)
{
    const shape_t *s = sv->s;
    gpu_t *g = sv->g;
    int B = sv->nactive, paged = sv->o->kv == KV_PAGED;
    int page_tokens = paged ? sv->o->block_tokens : 1 << 30;
    int mp = sv->max_pages;
    for (int b = 0; b < B; b++) {
        request_t *q = sv->active[b];
        sv->h_tok[b] = (int32_t)((q->id * 2654435761u + q->len) % (uint32_t)s->vocab);
        sv->h_len[b] = q->len + 1;
        if (paged)
            for (int i = 0; i < q->nblocks && i < mp; i++)
                sv->h_pages[(size_t)b * mp + i] = q->blocks[i];
        else
            sv->h_pages[(size_t)b * mp] = q->kv;
    }
    /* The page table holds 8-byte pointers: it starts on a 16-byte boundary
     * after the three int arrays (at 12 * max_batch it was misaligned for odd
     * max_batch: a misaligned 8-byte read in the old ms_kv_append, found on
     * the H200 with compute-sanitizer at --max-batch 1).  The positions array
     * is no longer read (attention appends at len - 1) but keeps its place, so
     * the buffer and the allocation sequence stay as they were. */
    CUdeviceptr d_tok = sv->io, d_pos = d_tok + 4 * (uint64_t)sv->o->max_batch,
                d_len = d_pos + 4 * (uint64_t)sv->o->max_batch,
                d_pages = (d_len + 4 * (uint64_t)sv->o->max_batch + 15) & ~(CUdeviceptr)15;
    CUresult e = CUDA_SUCCESS;
#define K(call, what)                                                                      \
    do {                                                                                   \
        if ((e = (call)) != CUDA_SUCCESS)                                                  \
            return launch_ok(e, what);                                                     \
    } while (0)
    K(cuMemcpyHtoDAsync(d_tok, sv->h_tok, 4 * (size_t)B, g->stream), "copy tokens");
    K(cuMemcpyHtoDAsync(d_len, sv->h_len, 4 * (size_t)B, g->stream), "copy lengths");
    K(cuMemcpyHtoDAsync(d_pages, sv->h_pages, 8 * (size_t)B * mp, g->stream), "copy pages");
    if (timed)
        K(cuEventRecord(g->ev0, g->stream), "event");
    int qkv_out = (s->heads + 2 * s->kv_heads) * s->head_dim, qd = s->heads * s->head_dim;
    K(gpu_embed(g, x, sv->w[sv->nw - 2], d_tok, B, s->hidden, s->vocab), "embed");
    for (int l = 0; l < s->layers; l++) {
        CUdeviceptr *w = &sv->w[l * W_PER_LAYER];
        K(gpu_gemv(g, w[W_QKV], x, qkv, s->hidden, qkv_out, B, GEMV_BF16), "qkv");
        /* appends this step's K and V (at len - 1) too */
        K(gpu_attention(g, s, qkv, d_pages, mp, page_tokens, d_len, l, B, scores, max_len, attn),
          "attention");
        K(gpu_gemv(g, w[W_O], attn, x, qd, s->hidden, B, GEMV_BF16), "o_proj");
        K(gpu_gemv(g, w[W_GATE_UP], x, h, s->hidden, 2 * s->ffn, B, GEMV_SWIGLU), "gate_up");
        K(gpu_gemv(g, w[W_DOWN], h, x, s->ffn, s->hidden, B, GEMV_BF16), "down");
    }
    K(gpu_gemv(g, sv->w[sv->nw - 1], x, logits, s->hidden, s->vocab, B, GEMV_F32), "lm_head");
    K(gpu_argmax(g, logits, d_tok, B, s->vocab), "argmax");
    if (timed)
        K(cuEventRecord(g->ev1, g->stream), "event");
    K(cuMemcpyDtoHAsync(sv->h_tok, d_tok, 4 * (size_t)B, g->stream), "copy tokens back");
    K(cuStreamSynchronize(g->stream), "synchronize");
    if (timed) {
        float ms = 0;
        K(cuEventElapsedTime(&ms, g->ev0, g->ev1), "elapsed time");
        double bytes = (double)sv->r->weights;
        for (int b = 0; b < B; b++)
            bytes += (double)(sv->active[b]->len + 1) * sv->kvtok;
        sv->r->decode_ms += ms;
        sv->r->bytes_read += bytes;
        sv->r->timed_steps++;
    }
#undef K
    return 0;
}

static int decode(server_t *sv)
{
    const shape_t *s = sv->s;
    const options_t *o = sv->o;
    int B = sv->nactive, rc = 0, max_len = 1;
    uint64_t kv_tokens = 0;
    nvtxRangePushA("decode");
    for (int b = 0; b < B; b++) {
        request_t *q = sv->active[b];
        int n = q->len + o->compress;
        if (n > q->prompt + q->output)
            n = q->prompt + q->output;
        if (n > max_len)
            max_len = n;
    }
    /* step temporaries, then KV growth while they are live */
    uint64_t hd = s->head_dim, qd = s->heads * hd, kvd = s->kv_heads * hd;
    uint64_t sz[6] = {
        (uint64_t)B * s->hidden * 2,                 /* x */
        (uint64_t)B * (qd + 2 * kvd) * 2,            /* qkv */
        (uint64_t)B * qd * 2,                        /* attention out */
        (uint64_t)B * s->ffn * 2,                    /* mlp */
        (uint64_t)B * s->heads * gpu_attention_scratch_floats(max_len) * 4, /* attention scratch */
        (uint64_t)B * s->vocab * 4,                  /* logits (fp32) */
    };
    static const char *names[6] = {"activations", "activations", "activations",
                                   "activations", "attention scores", "logits"};
    CUdeviceptr t[6] = {0};
    int nt = 0;
    for (; nt < 6; nt++)
        if ((rc = dalloc(sv, sz[nt], &t[nt], names[nt])))
            goto out;
    for (int b = 0; b < B && !rc; b++) {
        request_t *q = sv->active[b];
        int n = q->len + o->compress;
        if (n > q->prompt + q->output)
            n = q->prompt + q->output;
        rc = kv_reserve(sv, q, n);
    }
    if (rc)
        goto out;
    results_t *r = sv->r;
    if (sv->g->have_kernels && r->steps % o->kernel_every == 0) {
        /* the first few kernel steps warm up and are not timed */
        int timed = sv->g->real && r->kernel_steps >= 3;
        if ((rc = decode_kernels(sv, t[0], t[1], t[2], t[3], t[4], max_len, t[5], timed)))
            goto out;
        r->kernel_steps++;
    }
    for (int b = 0; b < B; b++) {
        request_t *q = sv->active[b];
        int n = q->len + o->compress;
        if (n > q->prompt + q->output)
            n = q->prompt + q->output;
        r->tokens += n - q->len;
        q->generated += n - q->len;
        q->len = n;
        kv_tokens += q->len;
    }
    sv->t += o->compress * step_seconds(sv, kv_tokens);
out:
    while (nt > 0) {
        nt--;
        mem_free(sv->m, t[nt], sz[nt]);
    }
    nvtxRangePop();
    return rc;
}

static void retire(server_t *sv)
{
    int j = 0;
    for (int i = 0; i < sv->nactive; i++) {
        request_t *q = sv->active[i];
        if (q->len >= q->prompt + q->output) {
            kv_release(sv, q);
            sv->kv_committed -= q->commit;
            sv->r->requests_done++;
            free(q);
        } else {
            sv->active[j++] = q;
        }
    }
    sv->nactive = j;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(server_t *sv, double wall0)
{
    char a[32], re[32];
    uint64_t al, res, pal, pre;
    mem_usage(sv->m, &al, &res, &pal, &pre);
    fprintf(stderr,
            "memsnap-decode: hour %.2f/%.2f  step %ld  batch %d  waiting %zu  done %llu  "
            "allocated %s  reserved %s  (%.1f s)\n",
            sv->t / 3600, sv->t_end / 3600, sv->r->steps, sv->nactive, sv->wait_n,
            (unsigned long long)sv->r->requests_done, fmt_bytes(al, a, sizeof a),
            fmt_bytes(res, re, sizeof re), now_s() - wall0);
}

int server_run(const options_t *o, mem_t *m, gpu_t *g, results_t *r)
{
    server_t sv = {0};
    sv.o = o;
    sv.s = &o->shape;
    sv.m = m;
    sv.g = g;
    sv.r = r;
    sv.kvtok = shape_kv_token_bytes(sv.s);
    sv.t_end = o->hours * 3600;
    rng_state = o->seed * 0x2545f4914f6cdd1dull + 1;
    double wall0 = now_s(), last_progress = wall0;
    int rc = 0;
    double next_tenth = sv.t_end / 10;

    sv.active = calloc(o->max_batch, sizeof *sv.active);
    int max_total = o->prompt.max + o->output.max + o->compress;
    sv.max_pages = o->kv == KV_PAGED ? (max_total + o->block_tokens - 1) / o->block_tokens : 1;
    sv.h_tok = calloc(o->max_batch, 4);
    sv.h_len = calloc(o->max_batch, 4);
    sv.h_pages = calloc((size_t)o->max_batch * sv.max_pages, 8);
    if (!sv.active || !sv.h_tok || !sv.h_len || !sv.h_pages) {
        fprintf(stderr, "memsnap-decode: out of host memory\n");
        return -1;
    }
    nvtxRangePushA("load weights");
    rc = load_weights(&sv);
    nvtxRangePop();
    if (rc)
        goto done;
    sv.io_bytes = ((12 * (uint64_t)o->max_batch + 15) & ~15ull) +
                  8 * (uint64_t)o->max_batch * sv.max_pages;   /* see decode_kernels */
    if ((rc = dalloc(&sv, sv.io_bytes, &sv.io, "batch inputs")))
        goto done;
    /* KV budget: what the scheduler may promise to requests */
    {
        uint64_t plan = (uint64_t)(o->device_mem * o->mem_util);
        uint64_t hd = sv.s->head_dim;
        uint64_t temps = (uint64_t)o->max_batch *
                         ((sv.s->hidden + (sv.s->heads + 2 * sv.s->kv_heads) * hd +
                           sv.s->heads * hd + sv.s->ffn) * 2 +
                          (uint64_t)sv.s->heads * gpu_attention_scratch_floats(max_total) * 4 + (uint64_t)sv.s->vocab * 4) +
                         (uint64_t)o->prompt.max * (sv.s->hidden + sv.s->ffn) * 2;
        uint64_t fixed = r->weights + sv.io_bytes + temps;
        sv.kv_budget = plan > fixed ? plan - fixed : 0;
        if (o->kv == KV_PAGED) {
            memsnap_blockpool_stats ps;
            memsnap_blockpool_stats_get(m->pool, &ps);
            sv.kv_budget = ps.nblocks * ps.block_size;
        }
    }
    r->floor_first = UINT64_MAX;
    sv.next_arrival = o->rate > 0 ? -log(rng_unit()) / o->rate : 1e30;

    while (!rc && sv.t < sv.t_end && (!o->max_steps || r->steps < o->max_steps)) {
        hour_marks(&sv);
        nvtxRangePushA("schedule");
        arrivals(&sv);
        admit(&sv);
        nvtxRangePop();
        if (sv.nactive == 0) {
            /* idle: memory is at its floor */
            uint64_t al, re, pal, pre;
            mem_usage(m, &al, &re, &pal, &pre);
            if (r->floor_first == UINT64_MAX)
                r->floor_first = al;
            r->floor_last = al;
            if (al > r->floor_max)
                r->floor_max = al;
            r->idle_count++;
            if (sv.next_arrival >= sv.t_end)
                break;
            sv.t = sv.next_arrival;
            continue;
        }
        if ((rc = prefill(&sv)) || (rc = decode(&sv)))
            break;
        if (sv.nactive > r->max_batch_seen)
            r->max_batch_seen = sv.nactive;
        retire(&sv);
        r->steps++;
        if (!o->quiet) {
            double w = now_s();
            if (sv.t >= next_tenth || w - last_progress >= 5) {
                progress(&sv, wall0);
                last_progress = w;
                while (next_tenth <= sv.t)
                    next_tenth += sv.t_end / 10;
            }
        }
    }
    if (!rc)   /* the hour the run ended on, when it ended on one */
        hour_marks(&sv);
done:
    r->sim_hours = sv.t / 3600;
    if (r->floor_first == UINT64_MAX)
        r->floor_first = 0;
    r->requests_left = sv.nactive + sv.wait_n;
    {
        uint64_t pal, pre;
        mem_usage(m, &r->final_allocated, &r->final_reserved, &pal, &pre);
        if (pal > r->peak_allocated)
            r->peak_allocated = pal;
        if (pre > r->peak_reserved)
            r->peak_reserved = pre;
    }
    r->wall_s = now_s() - wall0;
    if (rc == -1 && sv.oom)
        rc = 0; /* an OOM is a result, not an error */
    if (rc)
        return -1;
    if (!r->oom) {
        /* a clean shutdown: requests, inputs and weights go back; in the leak
         * scenario the leaked buffers stay live (the snapshot shows them) */
        for (int i = 0; i < sv.nactive; i++) {
            kv_release(&sv, sv.active[i]);
            free(sv.active[i]);
        }
        sv.nactive = 0;
        mem_free(m, sv.io, sv.io_bytes);
        for (int i = sv.nw - 1; i >= 0; i--)
            mem_free(m, sv.w[i], sv.w_bytes[i]);
    }
    for (size_t i = 0; i < sv.wait_n; i++)
        free(sv.wait[(sv.wait_head + i) % sv.wait_cap]);
    free(sv.wait);
    free(sv.w);
    free(sv.w_bytes);
    free(sv.h_tok);
    free(sv.h_len);
    free(sv.h_pages);
    free(sv.active);
    return 0;
}

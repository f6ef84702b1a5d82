/* memsnap-decode: the command line, the defaults of each preset and scenario,
 * and the summary line.  The loop itself is server.c; docs/workload.md is the
 * guide.
 *
 * Exit codes: 0 the run finished; 3 an allocation failed for lack of memory
 * (the summary line says when); 2 bad command line; 1 any other failure.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "util/size.h"

static const char usage_text[] =
    "usage: memsnap-decode [options]\n"
    "A Llama-shaped decode server loop (CUDA driver API; real kernels on a GPU, the\n"
    "same allocation sequence on the simulated device).  docs/workload.md.\n"
    "\n"
    "scenario and memory\n"
    "  --scenario S        healthy | leak | fragmentation (default healthy)\n"
    "  --alloc A           cudamalloc | fixed | expandable (default fixed)\n"
    "                      fixed/expandable: libmemsnap_alloc (MEMSNAP_ALLOC_CONF is read\n"
    "                      first; mode and device_limit come from these flags)\n"
    "  --kv K              grow | paged (default grow)\n"
    "  --device-mem SIZE   usable device memory, e.g. 80G (default: the device's)\n"
    "  --mem-util F        fraction of it the scheduler plans for (default 0.92; fragmentation 0.75)\n"
    "shape\n"
    "  --preset P          8b (Llama 3 8B, BF16; default) | small\n"
    "  --layers N --hidden N --heads N --kv-heads N --head-dim N --ffn N --vocab N\n"
    "load\n"
    "  --hours H           simulated duration (default: per scenario)\n"
    "  --steps N           stop after N steps (default: no limit)\n"
    "  --compress[=N]      time compression: each step decodes N tokens per request\n"
    "                      (default 1; --compress alone = 32)\n"
    "  --rate R            arrivals per simulated second (default: per scenario)\n"
    "  --rate-end R        ramp the rate linearly to R by the end of the run\n"
    "  --prompt-len D      prompt length distribution: N | uniform:MIN:MAX |\n"
    "                      lognormal:MEDIAN:SIGMA:MAX (default: per scenario)\n"
    "  --output-len D      output length distribution (same forms)\n"
    "  --max-batch N       most requests in a step (default: per scenario)\n"
    "  --kv-chunk N        grow: KV capacity is a multiple of N tokens (default 256)\n"
    "  --kv-growth F       grow: a full buffer is replaced by one F times larger (1.5)\n"
    "  --block-tokens N    paged: tokens per KV block (default 64)\n"
    "  --leak-bytes SIZE   leak: bytes kept per request (default vocab*4)\n"
    "  --seed N            random seed (default 1)\n"
    "  --sim-bw GB/s       bandwidth of the step-time model that drives the simulated\n"
    "                      clock (default 3300; never measured, so runs repeat exactly)\n"
    "compute\n"
    "  --kernels M         auto | on | off (default auto: on with a real GPU)\n"
    "  --kernel-every N    run the decode kernels every N-th step (default 1)\n"
    "  --gemv G            auto | simt | mma: the GEMV on CUDA cores (simt) or tensor\n"
    "                      cores (mma) for every batch; auto (default): CUDA cores at\n"
    "                      batch 1, tensor cores above\n"
    "  --peak-bw GB/s      peak bandwidth for MBU (default: measured with a copy kernel)\n"
    "output\n"
    "  --bytes             sizes in the summary line in bytes\n"
    "  -q, --quiet         no progress lines\n"
    "  -h, --help          this text\n"
    "\n"
    "Prints one summary line.  Exit status: 0 finished, 3 out of memory, 2 usage\n"
    "or no CUDA driver (libcuda.so.1), 1 other failure.\n";

static int bytes_mode;

const char *fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (bytes_mode)
        snprintf(buf, len, "%llu", (unsigned long long)b);
    else if (b >= GiB)
        snprintf(buf, len, "%.2fGiB", (double)b / GiB);
    else if (b >= MiB)
        snprintf(buf, len, "%.2fMiB", (double)b / MiB);
    else
        snprintf(buf, len, "%.1fKiB", (double)b / KiB);
    return buf;
}

uint64_t shape_weight_bytes(const shape_t *s)
{
    uint64_t h = s->hidden, qd = (uint64_t)s->heads * s->head_dim,
             kvd = (uint64_t)s->kv_heads * s->head_dim, f = s->ffn;
    uint64_t layer = (qd + 2 * kvd) * h + h * qd + 2 * f * h + h * f;
    return 2 * (s->layers * layer + 2 * (uint64_t)s->vocab * h);
}

uint64_t shape_kv_token_bytes(const shape_t *s)
{
    return (uint64_t)s->layers * 2 * s->kv_heads * s->head_dim * 2;
}

static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memsnap-decode: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    exit(DECODE_EXIT_USAGE);
}

static uint64_t parse_size(const char *flag, const char *s)
{
    uint64_t v;
    if (msnap_size_parse(s, &v))
        usage_error("%s: \"%s\" is not a size (e.g. 80G, 512M, 1048576)", flag, s);
    return v;
}

static double parse_num(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        usage_error("%s: \"%s\" is not a number in [%g, %g]", flag, s, lo, hi);
    return v;
}

static int parse_int(const char *flag, const char *s, long lo, long hi)
{
    double v = parse_num(flag, s, (double)lo, (double)hi);
    if (v != floor(v))
        usage_error("%s: \"%s\" is not a whole number", flag, s);
    return (int)v;
}

static int parse_choice(const char *flag, const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        strcat(list, i ? " | " : "");
        strcat(list, names[i]);
    }
    usage_error("%s: \"%s\" is not one of %s", flag, s, list);
    return -1;
}

static lendist_t parse_dist(const char *flag, const char *s)
{
    lendist_t d = {0};
    char *end;
    if (!strncmp(s, "uniform:", 8)) {
        long a = strtol(s + 8, &end, 10), b = 0;
        if (*end == ':')
            b = strtol(end + 1, &end, 10);
        if (*end || a < 1 || b < a || b > 10000000)
            usage_error("%s: \"%s\": want uniform:MIN:MAX with 1 <= MIN <= MAX", flag, s);
        d.kind = LEN_UNIFORM, d.a = a, d.b = b, d.max = (int)b;
    } else if (!strncmp(s, "lognormal:", 10)) {
        double med = strtod(s + 10, &end), sig = -1;
        long mx = 0;
        if (*end == ':')
            sig = strtod(end + 1, &end);
        if (*end == ':')
            mx = strtol(end + 1, &end, 10);
        if (*end || !(med >= 1) || !(sig >= 0 && sig <= 5) || mx < 1 || mx > 10000000)
            usage_error("%s: \"%s\": want lognormal:MEDIAN:SIGMA:MAX (MEDIAN >= 1, 0 <= SIGMA <= 5)",
                        flag, s);
        d.kind = LEN_LOGNORMAL, d.a = med, d.sigma = sig, d.max = (int)mx;
    } else {
        long n = strtol(s, &end, 10);
        if (end == s || *end || n < 1 || n > 10000000)
            usage_error("%s: \"%s\": want N, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA:MAX",
                        flag, s);
        d.kind = LEN_FIXED, d.a = n, d.max = (int)n;
    }
    return d;
}

enum {
    O_SCENARIO = 256, O_ALLOC, O_KV, O_DEVMEM, O_MEMUTIL, O_PRESET, O_LAYERS, O_HIDDEN,
    O_HEADS, O_KVHEADS, O_HEADDIM, O_FFN, O_VOCAB, O_HOURS, O_STEPS, O_COMPRESS, O_RATE,
    O_RATE_END, O_PROMPT, O_OUTPUT, O_MAXBATCH, O_CHUNK, O_GROWTH, O_BLOCK, O_LEAK, O_SEED,
    O_SIMBW, O_KERNELS, O_KEVERY, O_PEAKBW, O_BYTES, O_GEMV
};

static const struct option longopts[] = {
    {"scenario", 1, 0, O_SCENARIO}, {"alloc", 1, 0, O_ALLOC}, {"kv", 1, 0, O_KV},
    {"device-mem", 1, 0, O_DEVMEM}, {"mem-util", 1, 0, O_MEMUTIL},
    {"preset", 1, 0, O_PRESET}, {"layers", 1, 0, O_LAYERS}, {"hidden", 1, 0, O_HIDDEN},
    {"heads", 1, 0, O_HEADS}, {"kv-heads", 1, 0, O_KVHEADS}, {"head-dim", 1, 0, O_HEADDIM},
    {"ffn", 1, 0, O_FFN}, {"vocab", 1, 0, O_VOCAB}, {"hours", 1, 0, O_HOURS},
    {"steps", 1, 0, O_STEPS}, {"compress", 2, 0, O_COMPRESS}, {"rate", 1, 0, O_RATE},
    {"rate-end", 1, 0, O_RATE_END}, {"prompt-len", 1, 0, O_PROMPT},
    {"output-len", 1, 0, O_OUTPUT}, {"max-batch", 1, 0, O_MAXBATCH},
    {"kv-chunk", 1, 0, O_CHUNK}, {"kv-growth", 1, 0, O_GROWTH},
    {"block-tokens", 1, 0, O_BLOCK}, {"leak-bytes", 1, 0, O_LEAK}, {"seed", 1, 0, O_SEED},
    {"sim-bw", 1, 0, O_SIMBW}, {"kernels", 1, 0, O_KERNELS},
    {"kernel-every", 1, 0, O_KEVERY}, {"peak-bw", 1, 0, O_PEAKBW}, {"bytes", 0, 0, O_BYTES},
    {"gemv", 1, 0, O_GEMV},
    {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};

static const char *const scen_names[] = {"healthy", "leak", "fragmentation"};
static const char *const alloc_names[] = {"cudamalloc", "fixed", "expandable"};
static const char *const kv_names[] = {"grow", "paged"};
static const char *const kern_names[] = {"auto", "on", "off"};
static const char *const gemv_names[] = {"auto", "simt", "mma"};

/* The defaults of each scenario (docs/workload.md explains the choices). */
static void scenario_defaults(options_t *o, int small)
{
    o->mem_util = 0.92;
    o->hours = 0.25;
    o->compress = 1;
    o->max_batch = 32;
    o->rate = small ? 2.0 : 0.8;
    o->rate_end = -1;
    o->prompt = (lendist_t){LEN_LOGNORMAL, small ? 200 : 1000, 0, 0.8, small ? 2048 : 8192};
    o->output = (lendist_t){LEN_LOGNORMAL, small ? 100 : 250, 0, 0.7, small ? 1024 : 2048};
    if (o->scenario == SCEN_FRAGMENTATION) {
        /* long-context traffic that ramps up through the day; the scheduler
         * plans for 75% of the cap (docs/workload.md: why this fragments) */
        o->hours = 8;
        o->max_batch = 64;
        o->mem_util = 0.75;
        o->rate = 0.5;
        o->rate_end = 2.5;
        o->prompt = (lendist_t){LEN_LOGNORMAL, 4000, 0, 0.9, 32768};
        o->output = (lendist_t){LEN_LOGNORMAL, 400, 0, 0.8, 4096};
    }
}

int main(int argc, char **argv)
{
    options_t o;
    memset(&o, 0, sizeof o);
    o.preset = "8b";
    o.alloc = ALLOC_FIXED;
    o.kv = KV_GROW;
    o.kernels = KERNELS_AUTO;
    o.kv_chunk = 256;
    o.kv_growth = 1.5;
    o.block_tokens = 64;
    o.seed = 1;
    o.kernel_every = 1;
    o.sim_bw = 3300;

    /* pass 1: preset and scenario pick the defaults; pass 2: the rest */
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        if (c == O_PRESET)
            o.preset = optarg;
        else if (c == O_SCENARIO)
            o.scenario = parse_choice("--scenario", optarg, scen_names, 3);
        else if (c == 'h') {
            fputs(usage_text, stdout);
            return 0;
        } else if (c == '?') {
            if (optopt)
                usage_error("unknown option -%c", optopt);
            usage_error("unknown option or missing value: %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument \"%s\"", argv[optind]);
    int small;
    if (!strcmp(o.preset, "8b")) {
        o.shape = (shape_t){32, 4096, 32, 8, 128, 14336, 128256};
        small = 0;
    } else if (!strcmp(o.preset, "small")) {
        o.shape = (shape_t){4, 512, 8, 2, 64, 1536, 8192};
        small = 1;
    } else {
        usage_error("--preset: \"%s\" is not one of 8b | small", o.preset);
        return DECODE_EXIT_USAGE;
    }
    scenario_defaults(&o, small);
    int compress_set = 0, gemv = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_ALLOC: o.alloc = parse_choice("--alloc", optarg, alloc_names, 3); break;
        case O_KV: o.kv = parse_choice("--kv", optarg, kv_names, 2); break;
        case O_DEVMEM: o.device_mem = parse_size("--device-mem", optarg); break;
        case O_MEMUTIL: o.mem_util = parse_num("--mem-util", optarg, 0.05, 1); break;
        case O_LAYERS: o.shape.layers = parse_int("--layers", optarg, 1, 1024); break;
        case O_HIDDEN: o.shape.hidden = parse_int("--hidden", optarg, 8, 65536); break;
        case O_HEADS: o.shape.heads = parse_int("--heads", optarg, 1, 1024); break;
        case O_KVHEADS: o.shape.kv_heads = parse_int("--kv-heads", optarg, 1, 1024); break;
        case O_HEADDIM: o.shape.head_dim = parse_int("--head-dim", optarg, 8, 1024); break;
        case O_FFN: o.shape.ffn = parse_int("--ffn", optarg, 8, 1 << 20); break;
        case O_VOCAB: o.shape.vocab = parse_int("--vocab", optarg, 2, 1 << 24); break;
        case O_HOURS: o.hours = parse_num("--hours", optarg, 0, 1e6); break;
        case O_STEPS: o.max_steps = parse_int("--steps", optarg, 1, 2000000000); break;
        case O_COMPRESS:
            o.compress = optarg ? parse_int("--compress", optarg, 1, 65536) : 32;
            compress_set = 1;
            break;
        case O_RATE: o.rate = parse_num("--rate", optarg, 0, 1e6); break;
        case O_RATE_END: o.rate_end = parse_num("--rate-end", optarg, 0, 1e6); break;
        case O_PROMPT: o.prompt = parse_dist("--prompt-len", optarg); break;
        case O_OUTPUT: o.output = parse_dist("--output-len", optarg); break;
        case O_MAXBATCH: o.max_batch = parse_int("--max-batch", optarg, 1, 4096); break;
        case O_CHUNK: o.kv_chunk = parse_int("--kv-chunk", optarg, 1, 1 << 20); break;
        case O_GROWTH: o.kv_growth = parse_num("--kv-growth", optarg, 1, 16); break;
        case O_BLOCK: o.block_tokens = parse_int("--block-tokens", optarg, 1, 1 << 16); break;
        case O_LEAK: o.leak_bytes = parse_size("--leak-bytes", optarg); break;
        case O_SEED: o.seed = (uint64_t)parse_num("--seed", optarg, 0, 1e15); break;
        case O_SIMBW: o.sim_bw = parse_num("--sim-bw", optarg, 1, 1e6); break;
        case O_KERNELS: o.kernels = parse_choice("--kernels", optarg, kern_names, 3); break;
        case O_KEVERY: o.kernel_every = parse_int("--kernel-every", optarg, 1, 1 << 30); break;
        case O_PEAKBW: o.peak_bw = parse_num("--peak-bw", optarg, 1, 1e6); break;
        case O_GEMV: gemv = parse_choice("--gemv", optarg, gemv_names, 3); break;
        case O_BYTES: bytes_mode = 1; break;
        case 'q': o.quiet = 1; break;
        default: break; /* preset, scenario: pass 1 */
        }
    }
    (void)compress_set;
    if (o.shape.heads % o.shape.kv_heads)
        usage_error("--heads (%d) must be a multiple of --kv-heads (%d)", o.shape.heads,
                    o.shape.kv_heads);
    if (o.shape.heads / o.shape.kv_heads > 8)
        usage_error("--heads / --kv-heads is %d: at most 8 query heads per K/V head (the "
                    "attention kernel serves them together)", o.shape.heads / o.shape.kv_heads);
    if (o.shape.head_dim > 128)
        usage_error("--head-dim %d: at most 128 (the attention kernel keeps 8 dims per lane)",
                    o.shape.head_dim);
    if (o.shape.head_dim % 8 || o.shape.hidden % 8 || o.shape.ffn % 8)
        usage_error("--hidden, --ffn and --head-dim must be multiples of 8 (16-byte loads)");

    if (o.kernels == KERNELS_ON && !gpu_kernels_embedded()) {
        fprintf(stderr, "memsnap-decode: --kernels on: this binary was built without nvcc, so "
                        "it has no kernels; rebuild with the CUDA toolkit's nvcc on PATH\n");
        return DECODE_EXIT_USAGE;
    }

    /* the device: the driver is opened only now, so that --help and usage
     * errors work on a machine without one */
    char why[300];
    if (cudrv_load(why, sizeof why) != 0) {
        fprintf(stderr, "memsnap-decode: %s\n", why);
        return DECODE_EXIT_NODRIVER;
    }
    CUresult e = cuInit(0);
    CUdevice dev;
    CUcontext ctx;
    char name[128] = "";
    size_t total = 0;
    if (e == CUDA_SUCCESS)
        e = cuDeviceGet(&dev, 0);
    if (e == CUDA_SUCCESS)
        e = cuDeviceGetName(name, sizeof name, dev);
    if (e == CUDA_SUCCESS)
        e = cuDeviceTotalMem(&total, dev);
    if (e == CUDA_SUCCESS)
        e = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (e == CUDA_SUCCESS)
        e = cuCtxSetCurrent(ctx);
    if (e != CUDA_SUCCESS) {
        const char *s = NULL;
        cuGetErrorString(e, &s);
        fprintf(stderr, "memsnap-decode: no usable CUDA device: %s\n", s ? s : "unknown error");
        return DECODE_EXIT_ERROR;
    }
    int real = strstr(name, "simulated") == NULL;
    if (!o.device_mem || o.device_mem > total)
        o.device_mem = total;
    int load = o.kernels == KERNELS_ON || (o.kernels == KERNELS_AUTO && real);
    if (load && real && !gpu_kernels_embedded()) {
        fprintf(stderr, "memsnap-decode: this binary was built without nvcc, so it has no "
                        "kernels: running on the GPU without compute (--kernels off)\n");
        load = 0;
    }

    gpu_t g;
    char err[256];
    if (gpu_init(&g, load, err, sizeof err)) {
        fprintf(stderr, "memsnap-decode: %s\n", err);
        return DECODE_EXIT_ERROR;
    }
    g.real = real;
    if (gemv == 1)
        g.tune.simt_max = 32; /* --gemv simt: CUDA cores for every chunk */
    else if (gemv == 2)
        g.tune.simt_max = 0; /* --gemv mma: tensor cores for every chunk */
    results_t r;
    memset(&r, 0, sizeof r);
    if (g.have_kernels && real) {
        r.peak_bw = o.peak_bw ? o.peak_bw : gpu_copy_bandwidth(&g, 2 * GiB);
        if (!o.quiet)
            fprintf(stderr, "memsnap-decode: peak copy bandwidth %.0f GB/s (%s)\n", r.peak_bw,
                    o.peak_bw ? "--peak-bw" : "measured");
    }

    /* memory: paged KV gets its pool first, out of the cap */
    uint64_t kvtok = shape_kv_token_bytes(&o.shape);
    uint64_t pool_bytes = 0, block_bytes = (uint64_t)o.block_tokens * kvtok;
    if (o.kv == KV_PAGED) {
        uint64_t hd = o.shape.head_dim;
        int max_total = o.prompt.max + o.output.max + o.compress;
        uint64_t temps =
            (uint64_t)o.max_batch *
                ((o.shape.hidden + (o.shape.heads + 2 * o.shape.kv_heads) * hd +
                  o.shape.heads * hd + o.shape.ffn) * 2 +
                 (uint64_t)o.shape.heads * gpu_attention_scratch_floats(max_total) * 4 + (uint64_t)o.shape.vocab * 4) +
            (uint64_t)o.prompt.max * (o.shape.hidden + o.shape.ffn) * 2;
        uint64_t plan = (uint64_t)(o.device_mem * o.mem_util);
        uint64_t fixed = shape_weight_bytes(&o.shape) + temps + 64 * MiB;
        if (plan <= fixed + block_bytes) {
            fprintf(stderr, "memsnap-decode: --device-mem %llu bytes leave no room for a KV "
                            "pool after %llu bytes of weights and temporaries\n",
                    (unsigned long long)o.device_mem, (unsigned long long)fixed);
            return DECODE_EXIT_OOM;
        }
        pool_bytes = (plan - fixed) / block_bytes * block_bytes;
    }
    mem_t m;
    int rc = mem_init(&m, &o, dev, pool_bytes, block_bytes);
    if (rc) {
        fprintf(stderr, "memsnap-decode: %s\n", m.err);
        return rc == 1 ? DECODE_EXIT_OOM : DECODE_EXIT_ERROR;
    }
    if (!o.quiet)
        fprintf(stderr,
                "memsnap-decode: %s on %s (%s), %s, alloc %s, kv %s, device memory %.1f GiB, "
                "%.2f simulated hours, compress %d\n",
                scen_names[o.scenario], name, real ? "GPU" : "simulated device", o.preset,
                alloc_names[o.alloc], kv_names[o.kv], (double)o.device_mem / GiB, o.hours,
                o.compress);
    if (server_run(&o, &m, &g, &r))
        return DECODE_EXIT_ERROR;

    if (!o.quiet && m.a) {
        memsnap_alloc_stats st;
        memsnap_alloc_stats_get(m.a, &st);
        fprintf(stderr,
                "memsnap-decode: allocator: %llu mallocs, %llu cache hits, %llu driver allocs, "
                "%llu driver frees, %llu maps, %llu unmaps, %llu OOM retries, %llu segments\n",
                (unsigned long long)st.malloc_calls, (unsigned long long)st.cache_hits,
                (unsigned long long)st.driver_allocs, (unsigned long long)st.driver_frees,
                (unsigned long long)st.driver_maps, (unsigned long long)st.driver_unmaps,
                (unsigned long long)st.oom_retries, (unsigned long long)st.segments);
    }
    char a[32], b[32], cbuf[32], d[32], f1[32], f2[32], f3[32], f4[32];
    printf("memsnap-decode: scenario=%s alloc=%s kv=%s device=%s steps=%ld tokens=%llu "
           "requests=%llu peak_allocated=%s peak_reserved=%s floor_first=%s floor_last=%s "
           "floor_max=%s idle=%ld weights=%s",
           scen_names[o.scenario], alloc_names[o.alloc], kv_names[o.kv], real ? "gpu" : "sim",
           r.steps, (unsigned long long)r.tokens, (unsigned long long)r.requests_done,
           fmt_bytes(r.peak_allocated, a, sizeof a), fmt_bytes(r.peak_reserved, b, sizeof b),
           fmt_bytes(r.floor_first, f1, sizeof f1), fmt_bytes(r.floor_last, f2, sizeof f2),
           fmt_bytes(r.floor_max, f3, sizeof f3), r.idle_count, fmt_bytes(r.weights, f4, sizeof f4));
    if (r.oom)
        printf(" oom=yes oom_step=%ld oom_hour=%.2f oom_request=%s oom_allocated=%s "
               "oom_reserved=%s oom_what=\"%s\"",
               r.oom_step, r.oom_hours, fmt_bytes(r.oom_request, a, sizeof a),
               fmt_bytes(r.oom_allocated, cbuf, sizeof cbuf),
               fmt_bytes(r.oom_reserved, d, sizeof d), r.oom_what);
    else
        printf(" oom=no");
    printf(" sim_hours=%.2f", r.sim_hours);
    if (r.timed_steps > 0) {
        double step_ms = r.decode_ms / r.timed_steps;
        double toks = r.max_batch_seen > 0 ? (double)r.tokens / r.steps : 0;
        /* tokens per executed step / time per step */
        double tok_s = toks / o.compress / (step_ms / 1000);
        double gbs = r.bytes_read / (r.decode_ms / 1000) / 1e9;
        printf(" step_ms=%.3f tpot_ms=%.3f tok_s=%.1f read_GBs=%.0f", step_ms, step_ms, tok_s,
               gbs);
        if (r.peak_bw > 0)
            printf(" peak_GBs=%.0f mbu=%.1f%%", r.peak_bw, 100 * gbs / r.peak_bw);
    }
    printf(" wall_s=%.1f\n", r.wall_s);
    fflush(stdout);
    if (o.scenario != SCEN_LEAK && !r.oom)
        mem_destroy(&m);
    gpu_destroy(&g);
    return r.oom ? DECODE_EXIT_OOM : DECODE_EXIT_OK;
}

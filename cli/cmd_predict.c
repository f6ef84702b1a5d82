/* memsnap predict: will it fit at another batch size or sequence length?
 * Parses the arguments, asks whatif/predict.c (predict.h says how the
 * prediction is made) and prints: the alignment of the recordings, a row
 * per value and config, the sites that grow.  docs/interop.md, "Predict".
 * Exit status: 0 every value fits, 1 one does not (--find-max: none fits),
 * 2 bad usage or input.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "device_mem_text.h"
#include "util/human.h"
#include "options.h"
#include "parts.h"
#include "whatif/predict.h"
#include "progress_term.h"
#include "util/size.h"
#include "whatif/grow.h"
#include "grow_print.h"

#define MAX_CONFS 16
#define MAX_AT 64
#define MAX_GROWTH 8

static const char usage_text[] =
    "usage: memsnap predict SNAP@VALUE SNAP@VALUE [SNAP@VALUE] --at V[,V...]\n"
    "                       [--alloc-conf CONF ...] [--device-mem SIZE] [--json]\n"
    "       memsnap predict SNAP@VALUE SNAP@VALUE [SNAP@VALUE] --find-max\n"
    "                       [--alloc-conf CONF] [--device-mem SIZE] [--json]\n"
    "       memsnap predict SNAP@VALUE SNAP@VALUE [SNAP@VALUE] --at V[,V...]\n"
    "                       --grow SITE[=SIZE] [--grow ...] [--find-max]\n"
    "                       [--alloc-conf CONF ...] [--device-mem SIZE] [--json]\n"
    "                       [--param NAME] [--degree 1|2] [--engine auto|memsnap|torch]\n"
    "                       [-j JOBS] [-b]\n"
    "\n"
    "Will it fit?  From two or three recordings of one program that differ in\n"
    "one size parameter (a batch size, a sequence length: its value after @),\n"
    "predicts the peak allocated and reserved memory, and whether the program\n"
    "runs out of memory, at other values of that parameter.  The recordings'\n"
    "requests are aligned one by one (same order, same stacks, compared frame\n"
    "by frame), each aligned request's size is fitted as constant, linear or\n"
    "(with three recordings) quadratic in the parameter, and the recording\n"
    "with the largest value is replayed with the fitted sizes, as `memsnap\n"
    "replay` does: through the PyTorch allocator emulation for PyTorch traces\n"
    "(CONF is a PYTORCH_CUDA_ALLOC_CONF, plus \"memory_fraction:0.5\" for\n"
    "set_per_process_memory_fraction), through libmemsnap_alloc on the\n"
    "simulated device for others (MEMSNAP_ALLOC_CONF syntax).\n"
    "\n"
    "  -a, --at LIST          values to predict at, comma-separated (16,32,64)\n"
    "  -f, --find-max         the largest whole value that fits, instead; with\n"
    "                         --grow, the largest size of the grown sites at each\n"
    "                         --at value\n"
    "  -g, --grow SITE[=SIZE] at each --at value, the requests made at SITE (a\n"
    "                         label, its function, or FILE:LINE) at SIZE (as\n"
    "                         memsnap replay --grow): \"the largest KV cache that\n"
    "                         fits at batch 64\"\n"
    "  -c, --alloc-conf CONF  an allocator config (up to 16; with --find-max\n"
    "                         one; default: the allocator's defaults)\n"
    "  -m, --device-mem SIZE  the allocator's device memory, e.g. 80G (default:\n"
    "                         the recording's device, else 80G, less what the\n"
    "                         recording measured outside the allocator);\n"
    "                         memory_fraction:F in a PyTorch CONF is a fraction\n"
    "                         of it\n"
    "  -p, --param NAME       the parameter's name in the output (default\n"
    "                         \"unit\": \"+835 KiB per NAME\")\n"
    "  -e, --engine NAME      auto (default), memsnap or torch\n"
    "  -d, --degree N         the highest power of the parameter a size may have:\n"
    "                         2 (default: attention scores grow with the square\n"
    "                         of the sequence) or 1 (a batch size)\n"
    "      --json             a JSON list: per value and config, at,\n"
    "                         peak_allocated, peak_reserved, oom, headroom,\n"
    "                         device_mem, outside, available, ...\n"
    "                         (bytes as integers)\n"
    "  -j, --jobs N           replays at once (default: the number of cores)\n"
    "  -b, --bytes            sizes as exact byte counts\n"
    "  -h, --help             this help\n"
    "\n"
    "Prints how much of the run aligned and where the recordings differ; per\n"
    "value and config the predicted peak allocated and peak reserved, whether\n"
    "it fits the device memory (or the fraction of it the config allows), the\n"
    "headroom left or the first request that fails (its site, the mark or NVTX\n"
    "range it came in, how far into the run), and how much of the predicted\n"
    "peak rests on aligned requests (the rest keeps the largest recording's\n"
    "sizes); then the sites that grow with the parameter, fastest first.\n"
    "Limits: requests that exist at one size only (other kernels, data-dependent\n"
    "shapes), counts that change with the parameter and sizes that are not\n"
    "polynomial in it are not predicted.  The device memory left to the\n"
    "allocator is the recording's device less what the recording measured\n"
    "outside the allocator (the CUDA context and other processes, from its\n"
    "device-used samples, and other libraries' driver memory such as\n"
    "cuBLAS's workspaces: summary's driver table); --device-mem gives the\n"
    "allocator all of SIZE.\n"
    "Exit status: 0 every value fits, 1 one does not (--find-max: none fits),\n"
    "2 bad usage or input (recordings that do not align included).\n";

static int exact_bytes;

/* --grow: at each value, the predicted stream with the sites grown
 * (grow_print.h).  Returns the exit status. */
static int predict_grow(pr_model *m, const double *at, int nat, gr_sites *grow,
                        const char *const *confs, int nconf, uint64_t mem, int find_max, int json,
                        int jobs, const char *param)
{
    char err[1280];
    int rc = 0;
    cJSON *out = json ? cJSON_CreateArray() : NULL;
    for (int v = 0; v < nat && rc < 2; v++) {
        rq_stream q;
        char name[96], what[160];
        snprintf(name, sizeof name, "the prediction at %g", at[v]);
        snprintf(what, sizeof what, "the prediction at %s %g", param, at[v]);
        if (pr_stream_at(m, at[v], &q, name, err, sizeof err) ||
            gr_match(grow, &q, pr_template(m), pr_engine(m) == MSNAP_ENGINE_TORCH, err,
                     sizeof err)) {
            fprintf(stderr, "memsnap predict: %s\n", err);
            rq_free(&q);
            rc = 2;
            break;
        }
        int before = out ? cJSON_GetArraySize(out) : 0;
        if (v && !json)
            printf("\n");
        grow_run g = {.cmd = "predict", .what = what, .q = &q, .tab = pr_template(m),
                      .sites = grow, .confs = confs, .nconf = nconf, .device_mem = mem,
                      .engine = pr_engine(m), .find_max = find_max, .json = json, .jobs = jobs,
                      .quiet = 0, .bytes = exact_bytes, .out = out};
        int r = grow_run_all(&g);
        if (r > rc)
            rc = r;
        /* each entry says at which value */
        for (int i = before; out && i < cJSON_GetArraySize(out); i++)
            cJSON_AddNumberToObject(cJSON_GetArrayItem(out, i), "at", at[v]);
        gr_free(grow);
        memset(&grow->stacks, 0, sizeof grow->stacks);
        rq_free(&q);
    }
    if (out && rc < 2) {
        char *t = cJSON_PrintUnformatted(out);
        if (t)
            printf("%s\n", t);
        else
            rc = 2;
        free(t);
    }
    cJSON_Delete(out);
    if (rc < 2 && fflush(stdout))
        rc = 2;
    return rc;
}

static const char *sz(uint64_t b, char *buf, size_t n)
{
    if (exact_bytes)
        snprintf(buf, n, "%" PRIu64, b);
    else
        msnap_size_text(b, buf, n);
    return buf;
}

/* A signed rate of bytes, "+835.00 KiB". */
static const char *rate(double b, char *buf, size_t n)  /* n >= 50 */
{
    char t[48];
    double a = fabs(b);
    if (exact_bytes)
        snprintf(t, sizeof t, "%.0f", a);
    else if (a >= 1 << 30)
        snprintf(t, sizeof t, "%.2f GiB", a / (1 << 30));
    else if (a >= 1 << 20)
        snprintf(t, sizeof t, "%.2f MiB", a / (1 << 20));
    else if (a >= 1024)
        snprintf(t, sizeof t, "%.2f KiB", a / 1024);
    else
        snprintf(t, sizeof t, "%.0f B", a);
    snprintf(buf, n, "%s%s", b < 0 ? "-" : "+", t);
    return buf;
}

static const char *base_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static const char *with_commas(uint64_t v, char *buf, size_t n)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    size_t len = strlen(t), j = 0;
    for (size_t i = 0; i < len && j + 2 < n; i++) {
        buf[j++] = t[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len)
            buf[j++] = ',';
    }
    buf[j] = 0;
    return buf;
}

/* A value: a finite number > 0.  0 ok. */
static int parse_value(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !*s || *end || errno || !isfinite(*v) || *v <= 0 || *v > 1e15 ? -1 : 0;
}

static void print_alignment(const pr_model *m, const char *param)
{
    const pr_alignment *al = pr_alignment_of(m);
    int t = al->tmpl;
    char a[32], b[32], c[32];
    printf("predict from %d recordings, %s at", al->ninputs, param);
    for (int i = 0; i < al->ninputs; i++)
        printf("%s %g (%s)", i ? (i + 1 == al->ninputs ? " and" : ",") : "", pr_value(m, i),
               base_of(pr_path(m, i)));
    printf("; template %s, %s requests; %s engine\n", base_of(pr_path(m, t)),
           with_commas(al->requests[t], a, sizeof a),
           pr_engine(m) == MSNAP_ENGINE_TORCH ? "torch (PyTorch's allocator emulated)"
                                              : "memsnap (libmemsnap_alloc, simulated device)");
    uint64_t n = al->requests[t];
    char f0[32], f1[32], f2[32], f3[32];
    printf("aligned: %s of %s requests (%.1f%%) in every recording: %s constant, %s linear, %s "
           "quadratic", with_commas(al->aligned, a, sizeof a), with_commas(n, b, sizeof b),
           n ? 100.0 * (double)al->aligned / (double)n : 0.0,
           with_commas(al->fits[PR_FIT_CONST], f0, sizeof f0),
           with_commas(al->fits[PR_FIT_LINEAR], f1, sizeof f1),
           with_commas(al->fits[PR_FIT_QUAD], f2, sizeof f2));
    if (al->bent)
        printf(" (%s of them linear through the two largest values: the smallest differs)",
               with_commas(al->bent, f3, sizeof f3));
    if (al->fits[PR_FIT_NONE])
        printf(", %s unaligned (they keep the template's size)",
               with_commas(al->fits[PR_FIT_NONE], f3, sizeof f3));
    printf("\n");
    if (al->regions) {
        char s0[32], s1[32];
        printf("  the recordings differ from request %s (%.1f%% into the run, %.3f s into %s): %s "
               "for %s there, ", with_commas(al->div_index, a, sizeof a),
               100.0 * (double)(al->div_index - 1) / (double)n, (double)al->div_t_ns / 1e9,
               base_of(pr_path(m, t)), sz(al->div_size[0], s0, sizeof s0), al->div_site[0]);
        if (al->div_other)
            printf("%s for %s in %s", sz(al->div_size[1], s1, sizeof s1), al->div_site[1],
                   base_of(pr_path(m, al->div_input)));
        else
            printf("nothing more in %s", base_of(pr_path(m, al->div_input)));
        printf("; %s stretch%s differ%s%s\n", with_commas(al->regions, c, sizeof c),
               al->regions == 1 ? "" : "es", al->regions == 1 ? "s" : "",
               al->gave_up ? ", and after the last no request matched again: the rest keeps the "
                             "template's sizes" : "");
        for (int i = 0; i < al->ninputs; i++)
            if (pr_value(m, i) == 1)
                printf("  note: a run at 1 often takes other paths than larger ones (a view for a "
                       "copy, a broadcast without its reduction); recordings at 2 and 3 align "
                       "better\n");
    }
    if (al->fits[PR_FIT_NONE])
        printf("  limit: the unaligned requests keep their size and their number; where their "
               "number grows with the %s (one per sequence of a batch, say), larger values make "
               "more of them than predicted\n", param);
}

static void print_rows_header(void)
{
    printf("\n%-10s %-34s %13s %13s %-5s %13s %8s\n", "at", "config", "peak alloc",
           "peak reserv", "fits", "headroom", "aligned");
}

static void print_row(const pr_model *m, const pr_result *r)
{
    char a[32], b[32], h[32], at[32];
    snprintf(at, sizeof at, "%g", r->at);
    printf("%-10s %-34s %13s %13s %-5s %13s %7.1f%%\n", at, r->conf[0] ? r->conf : "(defaults)",
           sz(r->rp.peak_allocated, a, sizeof a), sz(r->rp.peak_reserved, b, sizeof b),
           r->rp.oom ? "OOM" : "yes", r->rp.oom ? "-" : sz(r->headroom, h, sizeof h),
           100.0 * r->aligned_share);
    if (r->rp.oom) {
        const pr_alignment *al = pr_alignment_of(m);
        uint64_t n = al->requests[al->tmpl];
        char i1[32], i2[32], s[32];
        printf("%-10s first failure: request %s of %s (%.0f%% into the run, %.3f s in %s): %s for "
               "%s%s%s%s\n", "", with_commas(r->oom_request, i1, sizeof i1),
               with_commas(n, i2, sizeof i2),
               n ? 100.0 * (double)(r->oom_request - 1) / (double)n : 0.0,
               (double)r->rp.oom_t_ns / 1e9, base_of(pr_path(m, al->tmpl)),
               sz(r->rp.oom_size, s, sizeof s), r->oom_site[0] ? r->oom_site : "?",
               r->oom_where[0] ? ", after \"" : "", r->oom_where, r->oom_where[0] ? "\"" : "");
    }
}

static void print_limit_line(const pr_result *res, int n)
{
    char d[640], l[32];
    const msnap_replay_result *rp = &res[0].rp;
    cli_device_mem_text(rp, exact_bytes, d, sizeof d);
    printf("\n%s", d);
    int fraction = 0;
    for (int i = 0; i < n; i++)
        fraction |= res[i].limit != rp->available;
    if (fraction)
        printf("; a config with memory_fraction (or device_limit) allows less: %s for the first "
               "such", sz(res[0].limit != rp->available ? res[0].limit : res[n - 1].limit, l,
                          sizeof l));
    printf("\n");
}

static void print_growth(pr_model *m, double x, const char *param)
{
    pr_growth g[MAX_GROWTH];
    int n = pr_growth_at(m, x, g, MAX_GROWTH);
    if (n <= 0)
        return;
    printf("\nsites that grow with %s (live at the predicted peak at %g):\n", param, x);
    for (int i = 0; i < n; i++) {
        char r1[64], r2[64], b[32];
        int lin = fabs(g[i].per_unit) >= 0.5, quad = fabs(g[i].per_unit2) >= 0.5;
        printf(" ");
        if (lin || !quad)
            printf(" %s per %s", rate(g[i].per_unit, r1, sizeof r1), param);
        if (quad)
            printf(" %s per %s^2", rate(g[i].per_unit2, r2, sizeof r2), param);
        printf(": %s (%s live there)\n", g[i].label, sz(g[i].bytes, b, sizeof b));
    }
}

/* ---- JSON ---------------------------------------------------------------- */

static cJSON *json_result(const pr_model *m, const pr_result *r)
{
    const pr_alignment *al = pr_alignment_of(m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "at", r->at);
    cJSON_AddStringToObject(o, "config", r->conf);
    cJSON_AddStringToObject(o, "engine", r->rp.engine);
    cJSON_AddNumberToObject(o, "device_mem", (double)r->rp.device_mem);
    cJSON_AddNumberToObject(o, "outside", (double)r->rp.outside);
    cJSON_AddNumberToObject(o, "available", (double)r->rp.available);
    cJSON_AddNumberToObject(o, "limit", (double)r->limit);
    cJSON_AddNumberToObject(o, "peak_allocated", (double)r->rp.peak_allocated);
    cJSON_AddNumberToObject(o, "peak_reserved", (double)r->rp.peak_reserved);
    cJSON_AddBoolToObject(o, "oom", r->rp.oom);
    cJSON_AddNumberToObject(o, "headroom", (double)r->headroom);
    cJSON_AddNumberToObject(o, "aligned_share", r->aligned_share);
    cJSON_AddNumberToObject(o, "requests", (double)al->requests[al->tmpl]);
    cJSON_AddNumberToObject(o, "aligned_requests", (double)al->aligned);
    if (r->rp.oom) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddNumberToObject(f, "request", (double)r->oom_request);
        cJSON_AddNumberToObject(f, "size", (double)r->rp.oom_size);
        cJSON_AddNumberToObject(f, "t_ns", (double)r->rp.oom_t_ns);
        cJSON_AddStringToObject(f, "site", r->oom_site);
        cJSON_AddStringToObject(f, "where", r->oom_where);
        cJSON_AddItemToObject(o, "first_failure", f);
    } else {
        cJSON_AddNullToObject(o, "first_failure");
    }
    return o;
}

static int print_json(cJSON *list)
{
    char *s = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    if (!s) {
        fprintf(stderr, "memsnap predict: out of memory\n");
        return 2;
    }
    puts(s);
    free(s);
    return 0;
}

/* ---- the command --------------------------------------------------------- */

int cmd_predict(int argc, char **argv)
{
    static const struct option opts[] = {
        {"at", required_argument, NULL, 'a'},
        {"find-max", no_argument, NULL, 'f'},
        {"alloc-conf", required_argument, NULL, 'c'},
        {"device-mem", required_argument, NULL, 'm'},
        {"param", required_argument, NULL, 'p'},
        {"engine", required_argument, NULL, 'e'},
        {"degree", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'J'},
        {"jobs", required_argument, NULL, 'j'},
        {"bytes", no_argument, NULL, 'b'},
        {"grow", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *shortopts = "a:fc:m:p:e:d:j:bg:h";
    gr_sites grow;
    char gerr[512];
    memset(&grow, 0, sizeof grow);
    const char *confs[MAX_CONFS], *param = "unit";
    double at[MAX_AT];
    int nconf = 0, nat = 0, find_max = 0, json = 0, engine = MSNAP_ENGINE_AUTO, degree = 2, c;
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t mem = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        switch (c) {
        case 'a': {
            char *list = strdup(optarg), *save = NULL;
            if (!list) {
                fprintf(stderr, "memsnap predict: out of memory\n");
                return 2;
            }
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (nat == MAX_AT) {
                    free(list);
                    return cli_usage_error("predict", "at most %d values to predict at", MAX_AT);
                }
                if (parse_value(tok, &at[nat])) {
                    int rc = cli_usage_error("predict", "--at \"%s\": \"%s\" is not a number "
                                             "above 0", optarg, tok);
                    free(list);
                    return rc;
                }
                nat++;
            }
            free(list);
            if (!nat)
                return cli_usage_error("predict", "--at \"%s\" names no value", optarg);
            break;
        }
        case 'f': find_max = 1; break;
        case 'c':
            if (nconf == MAX_CONFS)
                return cli_usage_error("predict", "at most %d --alloc-conf", MAX_CONFS);
            confs[nconf++] = optarg;
            break;
        case 'm':
            if (msnap_size_parse(optarg, &mem) || mem < (2u << 20))
                return cli_usage_error("predict", "--device-mem \"%s\" is not a size such as 80G "
                                                  "(at least 2M)", optarg);
            break;
        case 'p':
            if (!*optarg || strlen(optarg) > 40)
                return cli_usage_error("predict", "--param \"%s\": a name of 1 to 40 characters",
                                       optarg);
            param = optarg;
            break;
        case 'e':
            if (!strcmp(optarg, "auto"))
                engine = MSNAP_ENGINE_AUTO;
            else if (!strcmp(optarg, "memsnap"))
                engine = MSNAP_ENGINE_MEMSNAP;
            else if (!strcmp(optarg, "torch"))
                engine = MSNAP_ENGINE_TORCH;
            else
                return cli_usage_error("predict", "--engine \"%s\": expected auto, memsnap or torch",
                                       optarg);
            break;
        case 'd':
            if (strcmp(optarg, "1") && strcmp(optarg, "2"))
                return cli_usage_error("predict", "--degree \"%s\": expected 1 or 2", optarg);
            degree = optarg[0] - '0';
            break;
        case 'J': json = 1; break;
        case 'j': {
            char *end;
            jobs = strtol(optarg, &end, 10);
            if (*end || end == optarg || jobs < 1 || jobs > 256)
                return cli_usage_error("predict", "--jobs \"%s\" is not a number from 1 to 256",
                                       optarg);
            break;
        }
        case 'b': exact_bytes = 1; break;
        case 'g':
            if (gr_add(&grow, optarg, gerr, sizeof gerr))
                return cli_usage_error("predict", "%s", gerr);
            break;
        case 'h': fputs(usage_text, stdout); return fflush(stdout) ? 2 : 0;
        default:
            return cli_option_error("predict", argv, shortopts, opts);
        }
    }
    int nin = argc - optind;
    if (nin < 2)
        return cli_usage_error("predict", "expected two or three recordings, each as SNAP@VALUE");
    if (nin > PR_MAX_INPUTS)
        return cli_usage_error("predict", "at most %d recordings (three give a quadratic fit)",
                               PR_MAX_INPUTS);
    if (grow.n) {
        if (!nat)
            return cli_usage_error("predict", "--grow needs --at VALUES (the sizes it is grown at)");
        if (!find_max)
            for (int i = 0; i < grow.n; i++)
                if (!grow.size[i])
                    return cli_usage_error("predict", "--grow %s: give its size (SITE=SIZE), or "
                                                      "--find-max to search it", grow.spec[i]);
    } else {
        if (!nat && !find_max)
            return cli_usage_error("predict", "--at VALUES or --find-max is needed");
        if (nat && find_max)
            return cli_usage_error("predict", "--at and --find-max go apart");
        if (find_max && nconf > 1)
            return cli_usage_error("predict", "--find-max takes one --alloc-conf");
    }
    if (!nconf)
        confs[nconf++] = "";
    char why[256];
    if (msnap_replay_available(why, sizeof why)) {
        fprintf(stderr, "memsnap predict: %s\n", why);
        return 2;
    }
    const char *paths[PR_MAX_INPUTS];
    double values[PR_MAX_INPUTS];
    char *copies[PR_MAX_INPUTS] = {0};
    int rc = 2, nstdin = 0;
    for (int i = 0; i < nin; i++) {
        const char *arg = argv[optind + i];
        const char *at_sign = strrchr(arg, '@');
        if (!at_sign || at_sign == arg) {
            rc = cli_usage_error("predict", "\"%s\": give the recording's value after @, e.g. "
                                 "%s@4", arg, arg);
            goto out;
        }
        if (parse_value(at_sign + 1, &values[i])) {
            rc = cli_usage_error("predict", "\"%s\": \"%s\" after @ is not a number above 0",
                                 arg, at_sign + 1);
            goto out;
        }
        if (!(copies[i] = strndup(arg, (size_t)(at_sign - arg)))) {
            fprintf(stderr, "memsnap predict: out of memory\n");
            goto out;
        }
        paths[i] = copies[i];
        if (!strcmp(paths[i], "-") && ++nstdin > 1) {
            rc = cli_usage_error("predict", "reads stdin once: give \"-\" at most once");
            goto out;
        }
        for (int k = 0; k < i; k++)
            if (values[k] == values[i]) {
                rc = cli_usage_error("predict", "two recordings at %g: the values must differ",
                                     values[i]);
                goto out;
            }
    }
    /* replay.c dlopens the simulated device and the allocator from these
     * variables: point them at this memsnap's own parts (parts.h). */
    char part[4096 + 64];
    if (!getenv("MEMSNAP_SIMDEV_LIB") &&
        memsnap_part_find(MEMSNAP_PART_SIMDEV_DIR, part, sizeof part - 16) == 0) {
        strcat(part, "/libcuda.so.1");
        setenv("MEMSNAP_SIMDEV_LIB", part, 1);
    }
    if (!getenv("MEMSNAP_ALLOC_LIB") && memsnap_part_find(MEMSNAP_PART_ALLOC, part, sizeof part) == 0)
        setenv("MEMSNAP_ALLOC_LIB", part, 1);

    char err[2048];
    pr_model *m = NULL;
    if (pr_build(&m, paths, values, nin, engine, degree, err, sizeof err)) {
        fprintf(stderr, "memsnap predict: %s\n", err);
        rc = 2;
        goto out;
    }
    /* inputs that say little of the parameter: a line on stderr each */
    if (!pr_grows(m) && pr_shrinks(m))
        fprintf(stderr, "memsnap predict: warning: every request that changes between the "
                "recordings (%" PRIu64 ") gets smaller as %s grows: are the values after @ "
                "the right way round?\n", pr_shrinks(m), param);
    else if (!pr_grows(m))
        fprintf(stderr, "memsnap predict: warning: no request changes size between the "
                "recordings: do they differ in %s?\n", param);
    const char *show = progress_enabled() ? "predicting" : NULL;
    if (grow.n) {
        rc = predict_grow(m, at, nat, &grow, confs, nconf, mem, find_max, json, (int)jobs, param);
        goto done;
    }
    if (find_max) {
        pr_result fit, next;
        if (pr_find_max(m, confs[0], mem, (int)jobs, show, &fit, &next, err, sizeof err)) {
            fprintf(stderr, "memsnap predict: %s\n", err);
            rc = 2;
            goto done;
        }
        if (json) {
            cJSON *list = cJSON_CreateArray(), *o;
            if (fit.at > 0) {
                o = json_result(m, &fit);
            } else {
                o = cJSON_CreateObject();
                cJSON_AddNullToObject(o, "at");
                cJSON_AddStringToObject(o, "config", confs[0]);
            }
            if (fit.at > 0)
                cJSON_AddNumberToObject(o, "max", fit.at);
            else
                cJSON_AddNullToObject(o, "max");
            if (next.at > 0)
                cJSON_AddItemToObject(o, "next", json_result(m, &next));
            else
                cJSON_AddNullToObject(o, "next");
            /* no value tried failed: max is the largest tried, not a limit */
            cJSON_AddBoolToObject(o, "unbounded", fit.at > 0 && next.at <= 0);
            cJSON_AddItemToArray(list, o);
            rc = print_json(list);
        } else {
            print_alignment(m, param);
            pr_result both[2] = {fit, next};
            int k = 0;
            if (fit.at > 0)
                both[k++] = fit;
            if (next.at > 0)
                both[k++] = next;
            if (k)
                print_limit_line(both, k);
            char v[32];
            if (fit.at > 0 && next.at > 0)
                printf("\nthe largest %s that fits: %g (at %g it does not)\n", param, fit.at, next.at);
            else if (fit.at > 0 && !pr_grows(m))
                printf("\nnothing grows with %s in these recordings: it fits at any value as at %g\n",
                       param, fit.at);
            else if (fit.at > 0)
                printf("\nit fits at every %s tried, up to %g\n", param, fit.at);
            else
                printf("\nnothing fits: at %s %s it does not\n", param,
                       (snprintf(v, sizeof v, "%g", next.at), v));
            if (k) {
                print_rows_header();
                for (int i = 0; i < k; i++)
                    print_row(m, &both[i]);
            }
            if (fit.at > 0)
                print_growth(m, fit.at, param);
            rc = 0;
        }
        if (!rc)
            rc = fit.at > 0 ? 0 : 1;
    } else {
        int total = nat * nconf;
        pr_result *res = calloc((size_t)total, sizeof *res);
        if (!res) {
            fprintf(stderr, "memsnap predict: out of memory\n");
            goto done;
        }
        if (pr_predict(m, at, nat, confs, nconf, mem, (int)jobs, show, res, err, sizeof err)) {
            fprintf(stderr, "memsnap predict: %s\n", err);
            free(res);
            goto done;
        }
        int any_oom = 0;
        double xmax = at[0];
        for (int i = 0; i < total; i++)
            any_oom |= res[i].rp.oom;
        for (int v = 0; v < nat; v++)
            if (at[v] > xmax)
                xmax = at[v];
        if (json) {
            cJSON *list = cJSON_CreateArray();
            for (int i = 0; i < total; i++)
                cJSON_AddItemToArray(list, json_result(m, &res[i]));
            rc = print_json(list);
        } else {
            print_alignment(m, param);
            print_limit_line(res, total);
            print_rows_header();
            for (int i = 0; i < total; i++)
                print_row(m, &res[i]);
            print_growth(m, xmax, param);
            rc = 0;
        }
        free(res);
        if (!rc)
            rc = any_oom;
    }
done:
    pr_free(m);
    if (rc != 2 && fflush(stdout))
        rc = 2;
out:
    for (int i = 0; i < nin && i < PR_MAX_INPUTS; i++)
        free(copies[i]);
    return rc;
}

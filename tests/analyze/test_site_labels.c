/* Site labels (analyze/label.c, analyze/siterules.c) on the hand-made fixture
 * tests/analyze/data/sites-a.msnap (written by sites.py there): a PyTorch
 * program's stacks with Python frames (bit 63) through site-packages, the
 * standard library and the interpreter, and a C++ server with memsnap's
 * allocator linked statically (ms_*, its static helper slow_path) and
 * compiler suffixes.
 *
 *   test_site_labels MEMSNAP DATA_DIR SCRATCH_DIR
 *
 * 1. the default rules: each stack's expected label; one key for the
 *    stacks of one site; Python frames with their full path in listings;
 * 2. a user rules file (skip and keep) changes them, clearing restores;
 * 3. bad rules files: -1 and a one-line reason, the previous rules kept;
 * 4. golden: `memsnap summary`, render's legend (the labels timeline.c
 *    draws: sm_site_labels of the device's top sites) and `memsnap compare`
 *    print the same label for every site.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "analyze/model.h"
#include "analyze/siterules.h"

static const char *memsnap, *data, *scratch;

/* The label every stack of sites-a.msnap gets under the default rules. */
static const struct {
    uint32_t stack;
    const char *label;
} golden[] = {
    {1, "Attention.forward (model.py:42)"},               /* site-packages + interpreter skipped */
    {2, "Cache.grow (cache.py:7)"},                       /* the standard library, <frozen ...> */
    {3, "LlamaAttention.forward (modeling_llama.py:175)"}, /* nothing but libraries: site-packages */
    {4, "cublasLtMatmul"},                                /* nothing but native libraries */
    {5, "kv_reserve (server.c:88) from serve"},           /* ms_fixed_grow, slow_path, memsnap_* skipped */
    {6, "kv_reserve (server.c:88) from serve"},           /* its blocks: the same site */
    {7, "kv_reserve (server.c:88) from warmup"},
    {8, "load_weights (server.c:300)"},                   /* .cold */
    {9, "LlamaForCausalLM.forward (modeling_llama.py:400) <- generate.py:20"}, /* model code, the user's line */
    {10, "scratch (server.c:320)"},                       /* .lto_priv.0 */
    {11, "LlamaAttention.forward (modeling_llama.py:175) <- generate.py:20"},
};
#define NGOLD (sizeof golden / sizeof golden[0])

/* Reads a fixture through pass 1 and 2, all sites ranked. */
static sm_model *load(const char *name)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", data, name);
    sm_opts o = {.top = SM_MAX_TOP, .columns = 100};
    sm_model *m = sm_new(&o);
    if (!m || sm_read_file(m, path, 1, err, sizeof err)) {
        fprintf(stderr, "cannot read %s: %s\n", path, err);
        exit(1);
    }
    return m;
}

/* Writes text to SCRATCH/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
    return path;
}

/* Whether stack's label is want; prints both when not. */
static int label_is(const sm_model *m, uint32_t stack, const char *want)
{
    char buf[SM_LABEL_MAX];
    sm_site_label(sm_labels_of(m), stack, buf, sizeof buf);
    if (strcmp(buf, want))
        fprintf(stderr, "stack %u: \"%s\", expected \"%s\"\n", stack, buf, want);
    return !strcmp(buf, want);
}

static void test_defaults(void)
{
    sm_model *m = load("sites-a.msnap");
    for (size_t i = 0; i < NGOLD; i++)
        CHECK(label_is(m, golden[i].stack, golden[i].label));
    /* a segment and its blocks are one site; another caller is another */
    CHECK(sm_site_key(sm_labels_of(m), 5) == sm_site_key(sm_labels_of(m), 6));
    CHECK(sm_site_key(sm_labels_of(m), 5) != sm_site_key(sm_labels_of(m), 7));
    CHECK(sm_site_key(sm_labels_of(m), 9) != sm_site_key(sm_labels_of(m), 11));
    /* stack listings keep a Python frame's full path, natives a base name */
    char buf[512];
    sm_frame(m, 1, 8, buf, sizeof buf);
    CHECK(!strcmp(buf, "Attention.forward (/home/u/proj/model.py:42)"));
    sm_frame(m, 5, 3, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv_reserve.constprop.0 (server.c:88)"));
    /* compiler suffixes */
    const char *names[][2] = {{"f.constprop.0", "f"}, {"f.isra.0", "f"}, {"f.part.3", "f"},
                              {"f.cold", "f"}, {"f.lto_priv.0", "f"},
                              {"f.part.0.isra.0", "f"}, {"f.constprop.0.cold", "f"},
                              {"__libc_start_main@@GLIBC_2.34", "__libc_start_main"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sm_short_name(names[i][0], buf, sizeof buf);
        CHECK(!strcmp(buf, names[i][1]));
    }
    sm_free(m);
}

static void test_user_rules(void)
{
    char err[512];
    const char *path = write_file("rules.txt",
                                  "# the server's memory wrapper is not the site\n"
                                  "skip fn kv_reserve\n"
                                  "\n"
                                  "keep file */site-packages/transformers/*   # a package we work on\n");
    CHECK(sr_load_file(path, err, sizeof err) == 0);
    sm_model *m = load("sites-a.msnap");
    CHECK(label_is(m, 5, "serve (server.c:500)"));
    CHECK(label_is(m, 6, "serve (server.c:500)"));
    CHECK(label_is(m, 7, "warmup (server.c:450)"));
    CHECK(label_is(m, 9, "LlamaForCausalLM.forward (modeling_llama.py:400)"));
    /* transformers kept as the user's: its frame is the site, whoever calls it */
    CHECK(label_is(m, 11, "LlamaAttention.forward (modeling_llama.py:175)"));
    CHECK(sm_site_key(sm_labels_of(m), 11) == sm_site_key(sm_labels_of(m), 3));
    CHECK(label_is(m, 1, "Attention.forward (model.py:42)"));
    /* the same model after the rules go: the defaults again */
    sr_clear();
    CHECK(label_is(m, 5, "kv_reserve (server.c:88) from serve"));
    CHECK(label_is(m, 9, "LlamaForCausalLM.forward (modeling_llama.py:400) <- generate.py:20"));
    sm_free(m);
}

/* A skipped Python frame is not model code: the next model-code frame
 * outwards names the site, and the skipped frame is only a fallback name
 * (for a stack with no other). */
static void test_python_skip(void)
{
    char err[512];
    const char *path = write_file("pyskip.txt", "skip file */proj/model.py\n"
                                                "skip file */modeling_llama.py\n");
    CHECK(sr_load_file(path, err, sizeof err) == 0);
    sm_model *m = load("sites-a.msnap");
    CHECK(label_is(m, 1, "<module> (generate.py:10)"));
    /* told apart by the skipped frames' lines */
    CHECK(label_is(m, 9, "generate (generate.py:20) at modeling_llama.py:400"));
    CHECK(label_is(m, 11, "generate (generate.py:20) at modeling_llama.py:175"));
    /* nothing but libraries and the skipped frame: it names the site */
    CHECK(label_is(m, 3, "LlamaAttention.forward (modeling_llama.py:175)"));
    sr_clear();
    sm_free(m);
}

static void test_bad_rules(void)
{
    char err[512];
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"skip fn a\nskp fn x\n", "line 2: unknown rule \"skp\" (skip or keep)"},
        {"keep function x\n", "line 1: \"keep\" wants fn, file or module, got \"function\""},
        {"skip fn\n", "line 1: expected \"skip fn PATTERN\" (one pattern, no spaces)"},
        {"skip module a b\n", "line 1: expected \"skip module PATTERN\" (one pattern, no spaces)"},
    };
    CHECK(sr_load_file(write_file("good.txt", "skip fn kv_reserve\n"), err, sizeof err) == 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(sr_load_file(write_file("bad.txt", bad[i].text), err, sizeof err) == -1);
        CHECK(!strcmp(err, bad[i].why));
        CHECK(!strchr(err, '\n'));
    }
    CHECK(sr_load_file("/nonexistent/rules.txt", err, sizeof err) == -1);
    CHECK(!strncmp(err, "cannot read: ", 13));
    /* the good rules are still in force */
    sm_model *m = load("sites-a.msnap");
    CHECK(label_is(m, 7, "warmup (server.c:450)"));
    sm_free(m);
    sr_clear();
}

/* The output of a memsnap command line (malloc'd), or exits. */
static char *run(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s", memsnap, args);
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror(cmd);
        exit(1);
    }
    size_t n = 0, cap = 1 << 16;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - 1 - n, p)) > 0) {
        n += r;
        if (n + 1 == cap && !(s = realloc(s, cap *= 2)))
            break;
    }
    pclose(p);
    if (!s)
        exit(1);
    s[n] = '\0';
    return s;
}

/* Whether text has a line ending in "  label" (compare's change list). */
static int has_line_ending(const char *text, const char *label)
{
    size_t ll = strlen(label);
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len >= ll + 2 && !memcmp(l + len - ll - 2, "  ", 2) &&
            !memcmp(l + len - ll, label, ll))
            return 1;
        l += len + (e ? 1 : 0);
    }
    return 0;
}

static void test_golden_commands(void)
{
    char args[8192];
    /* summary: "      site: LABEL", each label once (stacks whose labels
     * read the same are one site) */
    snprintf(args, sizeof args, "summary --top 24 %s/sites-a.msnap", data);
    char *sum = run(args);
    for (size_t i = 0; i < NGOLD; i++) {
        char want[512];
        snprintf(want, sizeof want, "      site: %s\n", golden[i].label);
        const char *at = strstr(sum, want);
        CHECK(at != NULL && !strstr(at + 1, want));
        if (!at)
            fprintf(stderr, "summary lacks \"%s\"\n", want);
    }
    free(sum);
    /* render's legend: the labels of each device's top sites */
    sm_model *m = load("sites-a.msnap");
    int seen = 0;
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev *v = sm_device(m, d);
        size_t ns;
        const sm_site *sites = sm_sites(m, &ns);
        uint32_t stacks[SM_MAX_TOP];
        char labs[SM_MAX_TOP][SM_LABEL_MAX];
        for (int r = 0; r < v->ntop; r++)
            stacks[r] = sites[v->top[r]].stack;
        sm_site_labels(sm_labels_of(m), stacks, v->ntop, labs);
        for (int r = 0; r < v->ntop; r++) {
            for (int q = 0; q < r; q++)
                CHECK(strcmp(labs[q], labs[r]) != 0);   /* no label twice */
            for (size_t i = 0; i < NGOLD; i++)
                if (golden[i].stack == stacks[r]) {
                    CHECK(!strcmp(labs[r], golden[i].label));
                    seen++;
                }
        }
    }
    /* one stack per site: 5 and 6 are one (a segment and its blocks) */
    CHECK(seen == (int)NGOLD - 1);
    sm_free(m);
    /* compare: every site changed (B has three times A's bytes) */
    snprintf(args, sizeof args, "compare --changes 20 %s/sites-a.msnap %s/sites-b.msnap -o %s/golden-cmp.png",
             data, data, scratch);
    char *cmp = run(args);
    for (size_t i = 0; i < NGOLD; i++) {
        CHECK(has_line_ending(cmp, golden[i].label));
        if (!has_line_ending(cmp, golden[i].label))
            fprintf(stderr, "compare lacks \"%s\"\n", golden[i].label);
    }
    free(cmp);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_site_labels MEMSNAP DATA_DIR SCRATCH_DIR\n");
        return 2;
    }
    memsnap = argv[1];
    data = argv[2];
    scratch = argv[3];
    unsetenv("MEMSNAP_SITE_RULES");
    sm_demangle_allow_loading(1);
    test_defaults();
    test_user_rules();
    test_python_skip();
    test_bad_rules();
    test_golden_commands();
    return check_summary();
}

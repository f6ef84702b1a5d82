/* Site rules (siterules.h): the default table of frames that are not the
 * user's code, the user's rules file, and the first-match classifier.
 *
 * The default table is data, one line per library family, so that adding a
 * library is one line.  Order matters only where two rules could both
 * match one frame with different classes: the memory runtime comes first
 * (libc10_cuda before libc10 and libtorch, CUDACachingAllocator before
 * c10::), installed Python packages before the standard library (a
 * site-packages path is also under lib/python3.X/).
 */
#include "siterules.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sr_what { SR_FN, SR_FILE, SR_MODULE };
enum sr_scope { SR_NATIVE, SR_PY, SR_ANY };

typedef struct sr_rule {
    unsigned char cls;       /* enum sr_class given to a matching frame */
    unsigned char what;      /* enum sr_what */
    unsigned char scope;     /* enum sr_scope: which frames it applies to */
    unsigned char own;       /* memsnap's own frames (sr_own) */
    const char *glob;
} sr_rule;

#define RT(w, g) {SR_RUNTIME, w, SR_NATIVE, 0, g}
#define OWN(w, g) {SR_RUNTIME, w, SR_NATIVE, 1, g}
#define LIB(w, g) {SR_LIB, w, SR_NATIVE, 0, g}

static const sr_rule defaults[] = {
    /* The memory runtime: the driver, cudart, PyTorch's caching allocator,
     * memsnap's recorder and allocator (shared or linked statically). */
    RT(SR_MODULE, "libcuda.so*"),
    RT(SR_MODULE, "libcudart*"),
    RT(SR_MODULE, "libc10_cuda*"),
    RT(SR_MODULE, "libc10.*"),
    OWN(SR_MODULE, "libmemsnap*"),
    OWN(SR_MODULE, "libmsnap*"),
    RT(SR_FN, "c10::cuda::CUDACachingAllocator::*"),
    RT(SR_FN, "_ZN3c104cuda20CUDACachingAllocator*"),
    RT(SR_FN, "cudaMalloc*"),
    RT(SR_FN, "cuMem*"),
    OWN(SR_FN, "memsnap_*"),
    OWN(SR_FN, "msnap_*"),
    OWN(SR_FN, "ms_*"),
    /* the recorder's PyTorch plugin (loaded late: its module line may be
     * missing, so by its source file too) */
    OWN(SR_FILE, "*memsnap_torch.cpp"),
    /* CUDA's other libraries. */
    LIB(SR_MODULE, "libcublas*"),
    LIB(SR_MODULE, "libcudnn*"),
    LIB(SR_MODULE, "libnccl*"),
    LIB(SR_MODULE, "libnvrtc*"),
    LIB(SR_MODULE, "libnvJitLink*"),
    LIB(SR_MODULE, "libnvToolsExt*"),
    LIB(SR_MODULE, "libcufft*"),
    LIB(SR_MODULE, "libcurand*"),
    LIB(SR_MODULE, "libcusparse*"),
    LIB(SR_MODULE, "libcusolver*"),
    LIB(SR_MODULE, "libcupti*"),
    LIB(SR_MODULE, "libnvidia-*"),
    /* PyTorch's native libraries, and anything installed as a Python
     * package (torch/lib, triton, ...). */
    LIB(SR_MODULE, "libtorch*"),
    LIB(SR_MODULE, "libc10*"),
    LIB(SR_MODULE, "*/site-packages/*"),
    LIB(SR_MODULE, "*/dist-packages/*"),
    LIB(SR_FN, "at::*"),
    LIB(SR_FN, "c10::*"),
    LIB(SR_FN, "torch::*"),
    LIB(SR_FN, "caffe2::*"),
    LIB(SR_FN, "pybind11::*"),
    /* The C and C++ runtimes. */
    LIB(SR_MODULE, "libstdc++*"),
    LIB(SR_MODULE, "libgcc_s*"),
    LIB(SR_MODULE, "libc.so*"),
    LIB(SR_MODULE, "libm.so*"),
    LIB(SR_MODULE, "libpthread*"),
    LIB(SR_MODULE, "libgomp*"),
    LIB(SR_MODULE, "ld-linux*"),
    LIB(SR_FN, "std::*"),
    LIB(SR_FN, "__gnu_cxx::*"),
    LIB(SR_FN, "__cxa*"),
    LIB(SR_FN, "operator new*"),
    LIB(SR_FN, "__libc_*"),
    LIB(SR_FN, "_start"),
    /* The Python interpreter: libpython, the python executable, and its
     * evaluation loop by name (a statically linked interpreter). */
    LIB(SR_MODULE, "libpython*"),
    LIB(SR_MODULE, "python"),
    LIB(SR_MODULE, "python[0-9]*"),
    LIB(SR_FN, "_Py*"),
    LIB(SR_FN, "Py*"),
    /* Python frames: PyTorch's own, installed packages, then the standard
     * library. */
    {SR_TORCH, SR_FILE, SR_PY, 0, "*/site-packages/torch/*"},
    {SR_TORCH, SR_FILE, SR_PY, 0, "*/dist-packages/torch/*"},
    {SR_TORCH, SR_FILE, SR_PY, 0, "*/site-packages/functorch/*"},
    {SR_TORCH, SR_FILE, SR_PY, 0, "*/site-packages/triton/*"},
    {SR_TORCH, SR_FILE, SR_PY, 0, "*/dist-packages/triton/*"},
    {SR_PYLIB, SR_FILE, SR_PY, 0, "*/site-packages/*"},
    {SR_PYLIB, SR_FILE, SR_PY, 0, "*/dist-packages/*"},
    {SR_LIB, SR_FILE, SR_PY, 0, "<frozen *"},
    {SR_LIB, SR_FILE, SR_PY, 0, "*/lib/python[0-9]*"},
    {SR_LIB, SR_FILE, SR_PY, 0, "*/lib64/python[0-9]*"},
    {SR_LIB, SR_FILE, SR_PY, 0, "lib/python[0-9]*"},
    {SR_LIB, SR_FILE, SR_PY, 0, "lib64/python[0-9]*"},
};

/* The user's rules: globs owned here. */
typedef struct user_rule {
    sr_rule r;
    char *glob;
} user_rule;

static user_rule *urules;
static size_t nurules;
static unsigned generation;

/* Last component of a path. */
static const char *base_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

/* Whether a file/module glob matches a path: the whole path when the glob
 * has a '/', else the base name. */
static int path_match(const char *glob, const char *path)
{
    if (!path[0])
        return 0;
    return !fnmatch(glob, strchr(glob, '/') ? path : base_of(path), 0);
}

/* Whether rule r matches frame f. */
static int rule_match(const sr_rule *r, const sr_frame *f)
{
    if ((r->scope == SR_NATIVE && f->python) || (r->scope == SR_PY && !f->python))
        return 0;
    switch (r->what) {
    case SR_FN:
        return (f->fn[0] && !fnmatch(r->glob, f->fn, 0)) ||
               (f->short_fn[0] && !fnmatch(r->glob, f->short_fn, 0));
    case SR_FILE:
        return path_match(r->glob, f->file);
    default:
        return path_match(r->glob, f->module);
    }
}

/* f with "" for each NULL string. */
static sr_frame with_defaults(const sr_frame *f)
{
    sr_frame g = *f;
    g.fn = g.fn ? g.fn : "";
    g.short_fn = g.short_fn ? g.short_fn : "";
    g.file = g.file ? g.file : "";
    g.module = g.module ? g.module : "";
    return g;
}

int sr_classify(const sr_frame *f, int *matched)
{
    sr_frame g = with_defaults(f);
    if (matched)
        *matched = 1;
    for (size_t i = 0; i < nurules; i++)
        if (rule_match(&urules[i].r, &g)) {
            /* A skipped Python frame is not model code: it names a site
             * only when nothing else of the stack could (label.c). */
            if (urules[i].r.cls != SR_USER && g.python)
                return SR_PYSKIP;
            return urules[i].r.cls;
        }
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (rule_match(&defaults[i], &g))
            return defaults[i].cls;
    if (matched)
        *matched = 0;
    return SR_USER;
}

int sr_own(const sr_frame *f)
{
    sr_frame g = with_defaults(f);
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (defaults[i].own && rule_match(&defaults[i], &g))
            return 1;
    return 0;
}

int sr_plumbing(const sr_frame *f)
{
    static const char *const files[] = {
        "*/torch/nn/modules/module.py", "*/torch/utils/_contextlib.py", "*/torch/_dynamo/*",
        "*/torch/amp/*", "*/torch/autograd/grad_mode.py", "*/torch/_compile.py",
        "*/torch/utils/hooks.py", "*/torch/_jit_internal.py", "*/torch/overrides.py",
        "*/torch/_tensor.py", "*/torch/utils/_device.py",
    };
    if (!f->python || !f->file)
        return 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!fnmatch(files[i], f->file, 0))
            return 1;
    /* a decorator's or hook's wrapper (optimizer.py's, ...) */
    return f->fn && (strstr(f->fn, "<locals>.wrapper") || strstr(f->fn, "<locals>._use_grad") ||
                     strstr(f->fn, "<locals>.decorate"));
}

/* Frees a rule list. */
static void free_rules(user_rule *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(r[i].glob);
    free(r);
}

void sr_clear(void)
{
    free_rules(urules, nurules);
    urules = NULL;
    nurules = 0;
    generation++;
}

unsigned sr_generation(void)
{
    return generation;
}

/* Parses one line into *out (glob malloc'd).  1 a rule, 0 nothing (blank
 * or comment), -1 bad with a reason in err. */
static int parse_line(char *line, user_rule *out, char *err, size_t errlen)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *save = NULL;
    char *verb = strtok_r(line, " \t\r\n", &save);
    if (!verb)
        return 0;
    char *what = strtok_r(NULL, " \t\r\n", &save);
    char *glob = what ? strtok_r(NULL, " \t\r\n", &save) : NULL;
    char *extra = glob ? strtok_r(NULL, " \t\r\n", &save) : NULL;
    int cls;
    if (!strcmp(verb, "skip"))
        cls = SR_LIB;
    else if (!strcmp(verb, "keep"))
        cls = SR_USER;
    else {
        snprintf(err, errlen, "unknown rule \"%.60s\" (skip or keep)", verb);
        return -1;
    }
    int w;
    if (what && !strcmp(what, "fn"))
        w = SR_FN;
    else if (what && !strcmp(what, "file"))
        w = SR_FILE;
    else if (what && !strcmp(what, "module"))
        w = SR_MODULE;
    else {
        snprintf(err, errlen, "\"%s\" wants fn, file or module, got \"%.60s\"",
                 verb, what ? what : "");
        return -1;
    }
    if (!glob || extra) {
        snprintf(err, errlen, "expected \"%s %s PATTERN\" (one pattern, no spaces)",
                 verb, what);
        return -1;
    }
    out->glob = strdup(glob);
    if (!out->glob) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    out->r = (sr_rule){.cls = (unsigned char)cls, .what = (unsigned char)w,
                       .scope = SR_ANY, .glob = out->glob};
    return 1;
}

int sr_load_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        return -1;
    }
    user_rule *list = NULL;
    size_t n = 0, cap = 0;
    char line[4096];
    int lineno = 0;
    char why[256];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "line %d: longer than %zu characters", lineno,
                     sizeof line - 2);
            goto err;
        }
        user_rule r;
        int rc = parse_line(line, &r, why, sizeof why);
        if (rc < 0) {
            snprintf(err, errlen, "line %d: %s", lineno, why);
            goto err;
        }
        if (!rc)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            user_rule *nl = realloc(list, ncap * sizeof *nl);
            if (!nl) {
                free(r.glob);
                snprintf(err, errlen, "out of memory");
                goto err;
            }
            list = nl;
            cap = ncap;
        }
        list[n++] = r;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        goto err;
    }
    fclose(f);
    free_rules(urules, nurules);
    urules = list;
    nurules = n;
    generation++;
    return 0;
err:
    fclose(f);
    free_rules(list, n);
    return -1;
}

int sr_load_env(char *err, size_t errlen)
{
    const char *path = getenv("MEMSNAP_SITE_RULES");
    if (!path || !path[0])
        return 0;
    char why[512];
    if (sr_load_file(path, why, sizeof why)) {
        snprintf(err, errlen, "MEMSNAP_SITE_RULES=%.1000s: %s", path, why);
        return -1;
    }
    return 0;
}

/* Categories and libraries of allocations, from the frames of their stacks
 * (category.h has the rules and their order).
 *
 * The rule table is one array: user rules first (cat_rules_load inserts
 * them at the front), then the defaults below.  A rule holds its category
 * index, its kind and up to two globs; classifying a stack tries the rules
 * in order against every frame and stops at the first match, so the cost
 * is rules x frames fnmatch calls per distinct stack (callers cache per
 * stack id).
 *
 * Why the default order is what it is: libraries first (a cuBLAS workspace
 * or an NCCL buffer made during backward must not become a gradient just
 * because AccumulateGrad is further out on the stack), then FSDP's and
 * DDP's collectives' buffers (made inside a hook of the backward or a
 * module's forward, before what those frames would say); then gradients
 * (AccumulateGrad: the .grad buffers, not the temporaries of backward),
 * optimizer state, torch.distributed, KV caches (allocated from inside
 * forward, so before activations), parameters (module moves and inits,
 * model loading), and last activations and temporaries (any forward, the
 * autograd engine's other work).
 */
#define _GNU_SOURCE
#include "category.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_PYTHON, K_NATIVE, K_MODULE };

typedef struct cat_rule {
    int cat;
    int kind;
    char *a, *b;           /* globs; b NULL = any */
} cat_rule;

struct cat_rules {
    char names[CAT_MAX][CAT_NAME_MAX];
    int ncat;
    cat_rule *rules;
    size_t n;
    size_t nuser;          /* rules[0..nuser) are the user's */
};

static const char *const builtin_names[] = {
    "other", "parameters", "gradients", "optimizer_state", "activations",
    "temporaries", "inputs", "kv_cache", "workspaces", "communication",
    "all_gather", "reduce_scatter",
    "graph_pool",
};

/* The default rules: category, kind, glob a, glob b (NULL = any). */
static const struct { const char *cat; int kind; const char *a, *b; } defaults[] = {
    /* libraries that allocate for themselves */
    {"workspaces", K_MODULE, "libcublas*", NULL},
    {"workspaces", K_MODULE, "libcudnn*", NULL},
    {"workspaces", K_MODULE, "libcufft*", NULL},
    {"workspaces", K_MODULE, "libcusolver*", NULL},
    {"workspaces", K_MODULE, "libcusparse*", NULL},
    {"workspaces", K_NATIVE, "*BlasLtWorkspace*", NULL},
    {"workspaces", K_NATIVE, "*CublasWorkspace*", NULL},
    {"workspaces", K_NATIVE, "*cublasWorkspace*", NULL},
    {"workspaces", K_NATIVE, "*getNewWorkspace*", NULL},
    /* getNewWorkspace inlined into the handle getters (a release build
     * of libtorch_cuda): any allocation under them is their workspace,
     * the matmul's own output is made before or after */
    {"workspaces", K_NATIVE, "*getCurrentCUDABlasHandle*", NULL},
    {"workspaces", K_NATIVE, "*getCurrentCUDABlasLtHandle*", NULL},
    {"workspaces", K_NATIVE, "*cudnn*Workspace*", NULL},
    {"communication", K_MODULE, "libnccl*", NULL},
    {"communication", K_MODULE, "libnvshmem*", NULL},
    {"communication", K_NATIVE, "*ProcessGroupNCCL*", NULL},
    {"communication", K_NATIVE, "*c10d*Reducer*", NULL},
    {"communication", K_NATIVE, "*SymmetricMemory*", NULL},
    /* sharded data parallel: FSDP2 (fully_shard) and FSDP1.  The
     * all-gathers' buffers: the flat output and its copy-in, and the
     * unsharded parameters copied out of it (foreach_all_gather_copy_out,
     * FSDPParam.alloc_all_gather_outputs), forward's and backward's (its
     * hooks keep their Python frames, docs/recorder.md).  The
     * reduce-scatters': the unsharded gradients copied in and the reduced
     * shard, which becomes .grad (breakdown.c names a block of theirs that
     * outlives the backward a gradient).  The sharded parameters that
     * fully_shard makes are parameters, not communication. */
    {"all_gather", K_PYTHON, "*/torch/distributed/fsdp/*", "*foreach_all_gather*"},
    {"all_gather", K_PYTHON, "*/torch/distributed/fsdp/*", "*all_gather_copy_in*"},
    {"all_gather", K_PYTHON, "*/torch/distributed/fsdp/*", "*alloc_all_gather_outputs"},
    {"all_gather", K_PYTHON, "*/torch/distributed/fsdp/_flat_param.py", "*_all_gather_flat_param"},
    {"all_gather", K_PYTHON, "*/torch/distributed/fsdp/_flat_param.py",
     "*_alloc_padded_unsharded_flat_param"},
    {"reduce_scatter", K_PYTHON, "*/torch/distributed/fsdp/*", "*foreach_reduce*"},
    {"reduce_scatter", K_PYTHON, "*/torch/distributed/fsdp/_runtime_utils.py", "*_reduce_grad*"},
    {"parameters", K_PYTHON, "*/torch/distributed/fsdp/*", "*_init_sharded_param"},
    {"parameters", K_PYTHON, "*/torch/distributed/fsdp/*", "fully_shard"},
    {"parameters", K_PYTHON, "*/torch/distributed/fsdp/*", "FullyShardedDataParallel.__init__"},
    /* DDP's buckets (its constructor, their rebuild before a forward):
     * only those two, a forward through DDP is the model's */
    {"communication", K_PYTHON, "*/torch/nn/parallel/distributed.py",
     "DistributedDataParallel.__init__"},
    {"communication", K_PYTHON, "*/torch/nn/parallel/distributed.py",
     "DistributedDataParallel._pre_forward"},
    /* PyTorch training */
    {"gradients", K_NATIVE, "*AccumulateGrad*", NULL},
    {"optimizer_state", K_PYTHON, "*/torch/optim/*", NULL},
    {"optimizer_state", K_PYTHON, "*/torch/distributed/optim/*", NULL},
    {"optimizer_state", K_PYTHON, "*/deepspeed/*optim*", NULL},
    {"communication", K_PYTHON, "*/torch/distributed/*", NULL},
    /* KV caches: transformers, vLLM, SGLang */
    /* (transformers' cache_utils.py: only as the innermost model-code
     * frame, cat_torch_kind; any frame would take a training loop's
     * attention for a cache) */
    {"kv_cache", K_PYTHON, "*/vllm/*", "*kv_cache*"},
    {"kv_cache", K_PYTHON, "*/vllm/*cache_engine.py", NULL},
    {"kv_cache", K_PYTHON, "*/vllm/*kv_cache*", NULL},
    {"kv_cache", K_PYTHON, "*/sglang/*memory_pool*", NULL},
    {"kv_cache", K_PYTHON, "*", "*KVCache*"},
    /* parameters: moved, initialised, loaded */
    {"parameters", K_PYTHON, "*/torch/nn/modules/module.py", "*_apply"},
    {"parameters", K_PYTHON, "*/torch/nn/modules/module.py", "*.to"},
    {"parameters", K_PYTHON, "*/torch/nn/modules/module.py", "*.cuda"},
    {"parameters", K_PYTHON, "*/torch/nn/modules/module.py", "*load_state_dict*"},
    {"parameters", K_PYTHON, "*/torch/nn/modules/module.py", "*_load_from_state_dict"},
    {"parameters", K_PYTHON, "*/torch/nn/init.py", NULL},
    {"parameters", K_PYTHON, "*/torch/nn/parameter.py", NULL},
    {"parameters", K_PYTHON, "*/torch/nn/modules/*", "*.__init__"},
    {"parameters", K_PYTHON, "*", "*reset_parameters"},
    {"parameters", K_PYTHON, "*/transformers/modeling_utils.py", NULL},
    {"parameters", K_PYTHON, "*/accelerate/*", NULL},
    {"parameters", K_PYTHON, "*/safetensors/*", NULL},
    {"parameters", K_PYTHON, "*/vllm/model_executor/model_loader/*", NULL},
    /* activations and temporaries: forward, backward's other work */
    {"activations", K_PYTHON, "*", "*forward"},
    {"activations", K_PYTHON, "*/torch/nn/modules/module.py", "*_call_impl"},
    {"activations", K_PYTHON, "*/torch/autograd/*", NULL},
    {"activations", K_PYTHON, "*/torch/_tensor.py", "*backward"},
    {"activations", K_NATIVE, "*autograd*Engine*", NULL},
    {"activations", K_PYTHON, "*/transformers/generation/*", NULL},
    {"activations", K_PYTHON, "*/vllm/*", "*execute_model"},
};

/* Index of category name, added when new; -1 when the table is full. */
static int cat_index(cat_rules *r, const char *name)
{
    for (int i = 0; i < r->ncat; i++)
        if (strcmp(r->names[i], name) == 0)
            return i;
    if (r->ncat >= CAT_MAX)
        return -1;
    snprintf(r->names[r->ncat], CAT_NAME_MAX, "%s", name);
    return r->ncat++;
}

/* Frees a rule's globs (the rule itself belongs to its array). */
static void rule_free(cat_rule *x)
{
    free(x->a);
    free(x->b);
}

cat_rules *cat_rules_new(void)
{
    cat_rules *r = calloc(1, sizeof *r);
    size_t n = sizeof defaults / sizeof defaults[0];
    if (!r || !(r->rules = calloc(n, sizeof *r->rules))) {
        free(r);
        return NULL;
    }
    for (size_t i = 0; i < sizeof builtin_names / sizeof builtin_names[0]; i++)
        cat_index(r, builtin_names[i]);
    for (size_t i = 0; i < n; i++) {
        cat_rule *x = &r->rules[r->n++];
        x->cat = cat_index(r, defaults[i].cat);
        x->kind = defaults[i].kind;
        x->a = strdup(defaults[i].a);
        x->b = defaults[i].b ? strdup(defaults[i].b) : NULL;
        if (!x->a || (defaults[i].b && !x->b)) {
            cat_rules_free(r);
            return NULL;
        }
    }
    return r;
}

void cat_rules_free(cat_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        rule_free(&r->rules[i]);
    free(r->rules);
    free(r);
}

int cat_count(const cat_rules *r)
{
    return r->ncat;
}

const char *cat_name(const cat_rules *r, int cat)
{
    return cat >= 0 && cat < r->ncat ? r->names[cat] : "?";
}

/* 1 if a category name is made of [a-z0-9_] and is not too long. */
static int valid_name(const char *s)
{
    if (!*s || strlen(s) >= CAT_NAME_MAX)
        return 0;
    for (; *s; s++)
        if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

int cat_rules_load(cat_rules *r, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read the category rules: %s", path,
                 strerror(errno));
        return -1;
    }
    cat_rule *add = NULL;
    size_t nadd = 0, capadd = 0;
    char names[CAT_MAX][CAT_NAME_MAX];
    int ncat = r->ncat;
    memcpy(names, r->names, sizeof names);
    char line[4096];
    int lineno = 0, rc = -1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%s:%d: line longer than %zu bytes", path,
                     lineno, sizeof line - 2);
            goto out;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *tok[5];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t;
             t = strtok_r(NULL, " \t\r\n", &save))
            if (nt < 5)
                tok[nt++] = t;
            else
                nt = 6;
        if (nt == 0)
            continue;
        int kind = nt >= 2 ? (strcmp(tok[1], "python") == 0   ? K_PYTHON
                              : strcmp(tok[1], "native") == 0 ? K_NATIVE
                              : strcmp(tok[1], "module") == 0 ? K_MODULE
                                                              : -1)
                           : -1;
        if (nt < 3 || nt > 4 || kind < 0 || (kind == K_MODULE && nt != 3)) {
            snprintf(err, errlen, "%s:%d: expected \"CATEGORY python FILE-GLOB "
                     "[FUNCTION-GLOB]\", \"CATEGORY native FUNCTION-GLOB "
                     "[MODULE-GLOB]\" or \"CATEGORY module MODULE-GLOB\"",
                     path, lineno);
            goto out;
        }
        if (!valid_name(tok[0])) {
            snprintf(err, errlen, "%s:%d: category \"%.40s\": use a-z, 0-9 and _ "
                     "(at most %d characters)", path, lineno, tok[0],
                     CAT_NAME_MAX - 1);
            goto out;
        }
        int cat = -1;
        for (int i = 0; i < ncat; i++)
            if (strcmp(names[i], tok[0]) == 0)
                cat = i;
        if (cat < 0) {
            if (ncat >= CAT_MAX) {
                snprintf(err, errlen, "%s:%d: more than %d categories", path,
                         lineno, CAT_MAX);
                goto out;
            }
            snprintf(names[ncat], CAT_NAME_MAX, "%s", tok[0]);
            cat = ncat++;
        }
        if (nadd == capadd) {
            size_t nc = capadd ? capadd * 2 : 16;
            cat_rule *na = realloc(add, nc * sizeof *na);
            if (!na)
                goto oom;
            add = na;
            capadd = nc;
        }
        cat_rule *x = &add[nadd];
        x->cat = cat;
        x->kind = kind;
        x->a = strdup(tok[2]);
        x->b = nt == 4 ? strdup(tok[3]) : NULL;
        if (!x->a || (nt == 4 && !x->b)) {
            rule_free(x);
            goto oom;
        }
        nadd++;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read the category rules", path);
        goto out;
    }
    cat_rule *all = malloc((nadd + r->n) * sizeof *all);
    if (!all && nadd + r->n)
        goto oom;
    if (nadd)
        memcpy(all, add, nadd * sizeof *all);
    if (r->n)
        memcpy(all + nadd, r->rules, r->n * sizeof *all);
    free(r->rules);
    r->rules = all;
    r->n += nadd;
    r->nuser += nadd;
    memcpy(r->names, names, sizeof names);
    r->ncat = ncat;
    nadd = 0;       /* now owned by r */
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "%s: out of memory", path);
out:
    for (size_t i = 0; i < nadd; i++)
        rule_free(&add[i]);
    free(add);
    fclose(f);
    return rc;
}

/* 1 if glob g matches s (NULL glob: anything). */
static int gmatch(const char *g, const char *s)
{
    return !g || fnmatch(g, s ? s : "", 0) == 0;
}

/* 1 if rule x matches frame f. */
static int rule_matches(const cat_rule *x, const cat_frame *f)
{
    switch (x->kind) {
    case K_PYTHON:
        return f->python && gmatch(x->a, f->file) && gmatch(x->b, f->fn);
    case K_NATIVE:
        return !f->python && f->fn[0] && gmatch(x->a, f->fn) &&
               (!x->b || gmatch(x->b, sm_base_name(f->module)));
    default:
        return !f->python && f->module[0] && gmatch(x->a, sm_base_name(f->module));
    }
}

static int py_library(const cat_frame *f);
static int innermost_kv(const cat_frame *frames, int n);

int cat_classify(const cat_rules *r, const cat_frame *frames, int n)
{
    for (size_t i = 0; i < r->n; i++) {
        /* after the user's rules: a KV cache's code as the innermost
         * model-code frame */
        if (i == r->nuser && innermost_kv(frames, n))
            return cat_index_of(r, "kv_cache");
        for (int j = 0; j < n; j++)
            if (rule_matches(&r->rules[i], &frames[j]))
                return r->rules[i].cat;
    }
    return CAT_OTHER;
}

int cat_classify_user(const cat_rules *r, const cat_frame *frames, int n)
{
    for (size_t i = 0; i < r->nuser; i++)
        for (int j = 0; j < n; j++)
            if (rule_matches(&r->rules[i], &frames[j]))
                return r->rules[i].cat;
    return -1;
}

int cat_index_of(const cat_rules *r, const char *name)
{
    for (int i = 0; i < r->ncat; i++)
        if (!strcmp(r->names[i], name))
            return i;
    return CAT_OTHER;
}

/* Whether a Python frame is PyTorch's own, the interpreter's or the
 * standard library's (not model code). */
static int py_library(const cat_frame *f)
{
    static const char *const torch_globs[] = {"*/site-packages/torch/*", "*/dist-packages/torch/*"};
    for (size_t i = 0; i < sizeof torch_globs / sizeof torch_globs[0]; i++)
        if (!fnmatch(torch_globs[i], f->file, 0))
            return 1;
    if (f->file[0] == '<')
        return 1;      /* <frozen ...>, <string> */
    /* the standard library: lib/pythonX.Y/, outside installed packages */
    return strstr(f->file, "/lib/python") && !strstr(f->file, "-packages/");
}

/* Whether the innermost model-code frame (Python outside PyTorch and the
 * standard library) is a KV cache's code: a serving library's cache file,
 * or a function whose name says it (allocate_kv_cache, init_kv_caches,
 * KVCache.__init__: an engine written in plain PyTorch). */
static int innermost_kv(const cat_frame *frames, int n)
{
    static const char *const kv[] = {"*/transformers/cache_utils.py", "*/vllm/*kv_cache*",
                                     "*/vllm/*cache_engine.py", "*/sglang/*memory_pool*"};
    static const char *const kv_fn[] = {"*kv_cache*", "*KVCache*", "*kvcache*", "*KvCache*",
                                        "*kv_pool*", "*KVPool*"};
    for (int i = 0; i < n; i++) {
        if (!frames[i].python || py_library(&frames[i]))
            continue;
        for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++)
            if (!fnmatch(kv[k], frames[i].file, 0))
                return 1;
        for (size_t k = 0; k < sizeof kv_fn / sizeof kv_fn[0]; k++)
            if (!fnmatch(kv_fn[k], frames[i].fn, 0))
                return 1;
        return 0;
    }
    return 0;
}

int cat_torch_kind(const cat_frame *frames, int n, const char **node)
{
    static const char *const optim[] = {"*/torch/optim/*", "*/torch/distributed/optim/*",
                                        "*/deepspeed/*optim*", "*/apex/optimizers/*"};
    *node = NULL;
    if (n && frames[0].autograd) {
        *node = frames[0].fn;
        return CT_BACKWARD;
    }
    int any_py = 0;
    for (int i = 0; i < n; i++)
        any_py |= frames[i].python;
    if (!any_py)
        return CT_NONE;
    if (innermost_kv(frames, n))
        return CT_KV;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; frames[i].python && k < sizeof optim / sizeof optim[0]; k++)
            if (!fnmatch(optim[k], frames[i].file, 0))
                return CT_OPTIM;
    /* the default rules' parameter creation and loading */
    for (size_t k = 0; k < sizeof defaults / sizeof defaults[0]; k++) {
        if (strcmp(defaults[k].cat, "parameters") || defaults[k].kind != K_PYTHON)
            continue;
        for (int i = 0; i < n; i++)
            if (frames[i].python && gmatch(defaults[k].a, frames[i].file) &&
                gmatch(defaults[k].b, frames[i].fn))
                return CT_INIT;
    }
    for (int i = 0; i < n; i++) {
        const char *fn = frames[i].fn;
        size_t l = strlen(fn);
        if (frames[i].python && ((l >= 7 && !strcmp(fn + l - 7, "forward")) ||
                                 strstr(fn, "_call_impl")))
            return CT_FORWARD;
    }
    return CT_OTHER;
}

/* Fills up to max frames of a stack from the tables; returns how many. */
static int stack_frames(const sm_symtab *t, uint32_t stack, cat_frame *out,
                        int max)
{
    sm_frame_info fi;
    int depth = sm_symtab_frame_get(t, stack, 0, &fi);
    int n = 0;
    for (int i = 0; i < depth && n < max; i++) {
        sm_symtab_frame_get(t, stack, i, &fi);
        out[n].python = msnap_ip_is_python(fi.ip) && !msnap_ip_is_autograd(fi.ip);
        out[n].autograd = msnap_ip_is_autograd(fi.ip);
        out[n].fn = fi.fn ? fi.fn : "";
        out[n].file = fi.file ? fi.file : "";
        out[n].module = fi.module ? fi.module : "";
        n++;
    }
    return n;
}

int cat_classify_stack(const cat_rules *r, const sm_symtab *t, uint32_t stack)
{
    cat_frame f[MSNAP_MAX_FRAMES];
    int n = stack ? stack_frames(t, stack, f, MSNAP_MAX_FRAMES) : 0;
    return cat_classify(r, f, n);
}

int cat_frames_of(const sm_symtab *t, uint32_t stack, cat_frame *out, int max)
{
    return stack ? stack_frames(t, stack, out, max) : 0;
}

/* Module base-name prefixes that are the CUDA driver and runtime or the
 * recorder: never the library that asked for the memory. */
static const char *const runtime_mods[] = {
    "libcuda.", "libcudart", "libmemsnap.so", "libmsnap",
};

/* Known libraries: base-name prefix -> name shown. */
static const struct { const char *prefix, *name; } known_libs[] = {
    {"libc10_cuda", CAT_LIB_TORCH},
    {"libcublasLt", "cuBLAS"},
    {"libcublas", "cuBLAS"},
    {"libcudnn", "cuDNN"},
    {"libnccl", "NCCL"},
    {"libmemsnap_alloc", CAT_LIB_MEMSNAP},
};

/* Allocator entry points by function name, for allocators linked into the
 * program (no module of their own): name prefix or substring -> library. */
static const struct { const char *pat, *name; } allocator_fns[] = {
    {"memsnap_alloc_*", CAT_LIB_MEMSNAP},
    {"*CUDACachingAllocator*", CAT_LIB_TORCH},
};

const char *cat_library(const cat_frame *frames, int n, char *buf, size_t cap)
{
    /* A known library's module or an allocator's entry point, innermost
     * first: an allocator linked into the program is named by its
     * functions, before the program's module would name it. */
    for (int i = 0; i < n; i++) {
        const cat_frame *f = &frames[i];
        if (f->python)
            continue;
        const char *b = sm_base_name(f->module);
        for (size_t k = 0; b[0] && k < sizeof known_libs / sizeof known_libs[0]; k++)
            if (strncmp(b, known_libs[k].prefix, strlen(known_libs[k].prefix)) == 0) {
                snprintf(buf, cap, "%s", known_libs[k].name);
                return buf;
            }
        for (size_t k = 0; f->fn[0] && k < sizeof allocator_fns / sizeof allocator_fns[0]; k++)
            if (fnmatch(allocator_fns[k].pat, f->fn, 0) == 0) {
                snprintf(buf, cap, "%s", allocator_fns[k].name);
                return buf;
            }
    }
    /* Else the first module outside the driver, cudart and the recorder. */
    for (int i = 0; i < n; i++) {
        const cat_frame *f = &frames[i];
        if (f->python || !f->module[0])
            continue;
        const char *b = sm_base_name(f->module);
        int skip = 0;
        for (size_t k = 0; k < sizeof runtime_mods / sizeof runtime_mods[0]; k++)
            if (strncmp(b, runtime_mods[k], strlen(runtime_mods[k])) == 0)
                skip = 1;
        if (!skip) {
            snprintf(buf, cap, "%s", b);
            return buf;
        }
    }
    snprintf(buf, cap, "%s", CAT_LIB_UNKNOWN);
    return buf;
}

const char *cat_library_stack(const sm_symtab *t, uint32_t stack, char *buf,
                              size_t cap)
{
    cat_frame f[MSNAP_MAX_FRAMES];
    int n = stack ? stack_frames(t, stack, f, MSNAP_MAX_FRAMES) : 0;
    return cat_library(f, n, buf, cap);
}

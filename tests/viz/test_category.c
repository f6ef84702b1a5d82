/* Category rules and library attribution (analyze/category.h) on hand-made
 * stacks of Python and native frames: the defaults give the expected
 * category, the first matching rule wins over inner frames, a user rules
 * file goes before the defaults, bad rules files are refused with the file
 * and line named and leave the rules as they were. */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "category.h"

#define PY(file, fn) {1, fn, file, ""}
#define NAT(mod, fn) {0, fn, "", mod}
#define SITE "/venv/lib/python3.12/site-packages"

/* Name of the category of a hand-made stack. */
static const char *cat_of(const cat_rules *r, const cat_frame *f, int n)
{
    return cat_name(r, cat_classify(r, f, n));
}

/* Writes text to path (replacing it). */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    cat_rules *r = cat_rules_new();
    CHECK(r != NULL);
    CHECK(strcmp(cat_name(r, CAT_OTHER), "other") == 0);

    /* model.cuda(): Module._apply in torch/nn/modules/module.py */
    cat_frame params[] = {NAT("/usr/lib/libcuda.so.1", "cuMemAlloc_v2"),
                          NAT(SITE "/torch/lib/libc10_cuda.so", "c10::cuda::CUDACachingAllocator::malloc"),
                          PY(SITE "/torch/nn/modules/module.py", "Module._apply"),
                          PY(SITE "/torch/nn/modules/module.py", "Module.cuda"),
                          PY("/work/train.py", "<module>")};
    CHECK(strcmp(cat_of(r, params, 5), "parameters") == 0);

    /* backward on the autograd engine's thread: AccumulateGrad is a
     * gradient, the engine's other work a temporary */
    cat_frame grad[] = {NAT(SITE "/torch/lib/libtorch_cpu.so", "torch::autograd::AccumulateGrad::apply"),
                        NAT(SITE "/torch/lib/libtorch_cpu.so", "torch::autograd::Engine::evaluate_function"),
                        NAT(SITE "/torch/lib/libtorch_cpu.so", "torch::autograd::Engine::thread_main")};
    CHECK(strcmp(cat_of(r, grad, 3), "gradients") == 0);
    CHECK(strcmp(cat_of(r, grad + 1, 2), "activations") == 0);
    /* mangled names match as well */
    cat_frame grad_m[] = {NAT(SITE "/torch/lib/libtorch_cpu.so", "_ZN5torch8autograd14AccumulateGrad5applyEv")};
    CHECK(strcmp(cat_of(r, grad_m, 1), "gradients") == 0);

    cat_frame optim[] = {PY(SITE "/torch/optim/adam.py", "Adam._init_group"),
                         PY(SITE "/torch/optim/optimizer.py", "Optimizer.step"),
                         PY("/work/train.py", "train_step")};
    CHECK(strcmp(cat_of(r, optim, 3), "optimizer_state") == 0);

    /* KV cache is allocated inside forward: the cache rule comes first */
    cat_frame kv[] = {PY(SITE "/transformers/cache_utils.py", "DynamicLayer.update"),
                      PY(SITE "/transformers/models/llama/modeling_llama.py", "LlamaAttention.forward"),
                      PY(SITE "/torch/nn/modules/module.py", "Module._call_impl")};
    CHECK(strcmp(cat_of(r, kv, 3), "kv_cache") == 0);
    CHECK(strcmp(cat_of(r, kv + 1, 2), "activations") == 0);

    /* a cuBLAS workspace made during backward is a workspace, not a gradient */
    cat_frame ws[] = {NAT("/usr/lib/libcuda.so.1", "cuMemAlloc_v2"),
                      NAT(SITE "/nvidia/cublas/lib/libcublasLt.so.13", "cublasLtMatmul"),
                      NAT(SITE "/torch/lib/libtorch_cpu.so", "torch::autograd::AccumulateGrad::apply")};
    CHECK(strcmp(cat_of(r, ws, 3), "workspaces") == 0);

    /* NCCL's own buffers, and torch.distributed */
    cat_frame nccl[] = {NAT("/usr/lib/libcuda.so.1", "cuMemCreate"),
                        NAT(SITE "/nvidia/nccl/lib/libnccl.so.2", "ncclMemAlloc"),
                        PY(SITE "/torch/distributed/distributed_c10d.py", "all_reduce")};
    CHECK(strcmp(cat_of(r, nccl, 3), "communication") == 0);
    CHECK(strcmp(cat_of(r, nccl + 2, 1), "communication") == 0);

    /* nothing known */
    cat_frame plain[] = {NAT("/opt/app/bin/app", "main")};
    CHECK(strcmp(cat_of(r, plain, 1), "other") == 0);
    CHECK(cat_classify(r, NULL, 0) == CAT_OTHER);

    /* libraries: the innermost module outside the driver, cudart, memsnap */
    char lib[64];
    CHECK(strcmp(cat_library(params, 5, lib, sizeof lib), CAT_LIB_TORCH) == 0);
    CHECK(strcmp(cat_library(ws, 3, lib, sizeof lib), "cuBLAS") == 0);
    CHECK(strcmp(cat_library(nccl, 3, lib, sizeof lib), "NCCL") == 0);
    cat_frame other_lib[] = {NAT("/usr/lib/libcuda.so.1", "cuMemAlloc_v2"),
                             NAT("/usr/local/cuda/lib64/libcudart.so.13", "cudaMalloc"),
                             NAT("/opt/lib/libfoo.so.2", "foo_init"),
                             NAT("/opt/app/bin/app", "main")};
    CHECK(strcmp(cat_library(other_lib, 4, lib, sizeof lib), "libfoo.so.2") == 0);
    CHECK(strcmp(cat_library(kv, 3, lib, sizeof lib), "unknown") == 0);
    /* memsnap's allocator linked into the program: named by its functions */
    cat_frame static_alloc[] = {NAT("/usr/lib/libcuda.so.1", "cuMemAlloc_v2"),
                                NAT("/opt/app/bin/decode", "ms_fixed_grow"),
                                NAT("/opt/app/bin/decode", "memsnap_alloc_malloc"),
                                NAT("/opt/app/bin/decode", "main")};
    CHECK(strcmp(cat_library(static_alloc, 4, lib, sizeof lib), CAT_LIB_MEMSNAP) == 0);
    CHECK(strcmp(cat_library(static_alloc + 3, 1, lib, sizeof lib), "decode") == 0);

    /* a user rules file: before the defaults, may add a category */
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/user.rules", dir);
    write_file(path, "# ours\n"
                     "\n"
                     "activations  python  */transformers/cache_utils.py   # not a cache for us\n"
                     "my_buffers   native  foo_*  libfoo*\n");
    CHECK(cat_rules_load(r, path, err, sizeof err) == 0);
    CHECK(strcmp(cat_of(r, kv, 3), "activations") == 0);
    CHECK(strcmp(cat_of(r, other_lib, 4), "my_buffers") == 0);
    CHECK(strcmp(cat_of(r, params, 5), "parameters") == 0);   /* defaults still there */
    CHECK(cat_count(r) == 11);

    /* bad files: refused with file:line, the rules unchanged */
    const char *bad[] = {"parameters python\n",
                         "ok python *.py\nparameters anywhere *.py\n",
                         "Weights python *.py\n",
                         "parameters module a b\n",
                         "parameters python a b c\n"};
    const char *where[] = {":1: expected", ":2: expected", ":1: category", ":1: expected",
                           ":1: expected"};
    for (int i = 0; i < 5; i++) {
        write_file(path, bad[i]);
        err[0] = '\0';
        CHECK(cat_rules_load(r, path, err, sizeof err) == -1);
        CHECK(strstr(err, where[i]) != NULL);
        CHECK(strchr(err, '\n') == NULL);
    }
    CHECK(cat_count(r) == 11);
    CHECK(strcmp(cat_of(r, kv, 3), "activations") == 0);
    snprintf(path, sizeof path, "%s/does-not-exist.rules", dir);
    CHECK(cat_rules_load(r, path, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot read") != NULL);

    cat_rules_free(r);
    return check_summary();
}

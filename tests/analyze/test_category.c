/* Category rules and library attribution (analyze/category.h) on hand-made
 * stacks of Python and native frames: the defaults give the expected
 * category, the first matching rule wins over inner frames, a user rules
 * file goes before the defaults, bad rules files are refused with the file
 * and line named and leave the rules as they were. */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "analyze/category.h"

#define PY(file, fn) {1, fn, file, ""}
#define NAT(mod, fn) {0, fn, "", mod}
#define NODE(name) {0, name, "<autograd>", "", 1}
#define FSDP SITE "/torch/distributed/fsdp/_fully_shard"
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

    /* an engine in plain PyTorch: the cache by its function's name, as the
     * innermost model-code frame only (a serving loop that calls the model
     * under a "*kv_cache*" function further out is not a cache) */
    cat_frame plain_kv[] = {PY(SITE "/torch/utils/_device.py", "__torch_function__"),
                            PY("/srv/engine.py", "allocate_kv_cache"),
                            PY("/srv/engine.py", "<module>")};
    CHECK(strcmp(cat_of(r, plain_kv, 3), "kv_cache") == 0);
    const char *node;
    CHECK(cat_torch_kind(plain_kv, 3, &node) == CT_KV);
    cat_frame step[] = {PY("/srv/engine.py", "model_step"),
                        PY("/srv/engine.py", "run_with_kv_cache")};
    CHECK(strcmp(cat_of(r, step, 2), "other") == 0);
    CHECK(cat_torch_kind(step, 2, &node) == CT_OTHER);

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

    /* FSDP2 (fully_shard), as the recorder keeps PyTorch's stacks: Python
     * frames innermost first, no native frame; in backward, the node the
     * engine ran when FSDP's hook or its Python autograd function made the
     * buffer, then the hook's Python frames.  The forward's all-gather: */
    cat_frame ag[] = {PY(FSDP "/_fsdp_collectives.py", "DefaultAllocMixin.allocate"),
                      PY(FSDP "/_fsdp_collectives.py", "foreach_all_gather"),
                      PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.unshard"),
                      PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.pre_forward"),
                      PY(FSDP "/_fsdp_state.py", "FSDPState._pre_forward"),
                      PY(SITE "/torch/nn/modules/module.py", "Module._call_impl"),
                      PY(SITE "/transformers/models/llama/modeling_llama.py", "LlamaModel.forward"),
                      PY("/work/train.py", "step")};
    CHECK(strcmp(cat_of(r, ag, 8), "all_gather") == 0);
    /* its copy-out into the unsharded parameters (storage resized) */
    cat_frame ag_out[] = {PY(FSDP "/_fsdp_common.py", "alloc_storage"),
                          PY(FSDP "/_fsdp_param.py", "FSDPParam.alloc_all_gather_outputs"),
                          PY(FSDP "/_fsdp_collectives.py", "foreach_all_gather_copy_out"),
                          PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.wait_for_unshard"),
                          PY(SITE "/torch/nn/modules/module.py", "Module._call_impl")};
    CHECK(strcmp(cat_of(r, ag_out, 5), "all_gather") == 0);
    CHECK(strcmp(cat_of(r, ag_out, 2), "all_gather") == 0);
    /* the backward's: the pre-backward hook on a layer's output node */
    cat_frame ag_bwd[] = {NODE("AddBackward0"),
                          PY(FSDP "/_fsdp_collectives.py", "DefaultAllocMixin.allocate"),
                          PY(FSDP "/_fsdp_collectives.py", "foreach_all_gather"),
                          PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.unshard"),
                          PY(FSDP "/_fsdp_state.py", "FSDPState._pre_backward")};
    CHECK(strcmp(cat_of(r, ag_bwd, 5), "all_gather") == 0);
    /* the post-backward (a Python autograd function: PyNode) */
    cat_frame rs[] = {NODE("PyNode"),
                      PY(FSDP "/_fsdp_collectives.py", "DefaultAllocMixin.allocate"),
                      PY(FSDP "/_fsdp_collectives.py", "foreach_reduce"),
                      PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.post_backward"),
                      PY(FSDP "/_fsdp_state.py", "RegisterPostBackwardFunction.backward"),
                      PY(SITE "/torch/autograd/function.py", "BackwardCFunction.apply")};
    CHECK(strcmp(cat_of(r, rs, 6), "reduce_scatter") == 0);
    /* ... and without a node (the root's final callback) */
    CHECK(strcmp(cat_of(r, rs + 1, 5), "reduce_scatter") == 0);
    /* the node alone (libtorch's, on the engine's thread): not FSDP's */
    CHECK(strcmp(cat_of(r, rs, 1), "other") == 0);
    /* the sharded parameters fully_shard makes */
    cat_frame shard[] = {PY(FSDP "/_fsdp_param.py", "FSDPParam._init_sharded_param"),
                         PY(FSDP "/_fsdp_param.py", "FSDPParam.__init__"),
                         PY(FSDP "/_fsdp_param_group.py", "FSDPParamGroup.__init__"),
                         PY(FSDP "/_fully_shard.py", "fully_shard"),
                         PY("/work/train.py", "main")};
    CHECK(strcmp(cat_of(r, shard, 5), "parameters") == 0);
    CHECK(strcmp(cat_of(r, shard + 1, 4), "parameters") == 0);
    /* FSDP1's flat parameter */
    cat_frame fsdp1[] = {PY(SITE "/torch/distributed/fsdp/_flat_param.py",
                            "FlatParamHandle._alloc_padded_unsharded_flat_param"),
                         PY(SITE "/torch/distributed/fsdp/_flat_param.py", "FlatParamHandle.unshard"),
                         PY(SITE "/torch/distributed/fsdp/_runtime_utils.py", "_unshard")};
    CHECK(strcmp(cat_of(r, fsdp1, 3), "all_gather") == 0);
    cat_frame fsdp1_rs[] = {PY(SITE "/torch/distributed/fsdp/_runtime_utils.py", "_reduce_grad"),
                            PY(SITE "/torch/distributed/fsdp/_runtime_utils.py", "_post_backward_hook")};
    CHECK(strcmp(cat_of(r, fsdp1_rs, 2), "reduce_scatter") == 0);
    /* other torch.distributed work stays communication */
    cat_frame dt[] = {PY(SITE "/torch/distributed/tensor/_redistribute.py", "redistribute_local_tensor"),
                      PY(SITE "/torch/distributed/tensor/_api.py", "DTensor.full_tensor")};
    CHECK(strcmp(cat_of(r, dt, 2), "communication") == 0);
    /* DDP: its buckets are communication, a forward through it is the
     * model's, the optimizer's state of a sharded model the optimizer's */
    cat_frame ddp[] = {PY(SITE "/torch/nn/parallel/distributed.py",
                          "DistributedDataParallel._ddp_init_helper"),
                       PY(SITE "/torch/nn/parallel/distributed.py", "DistributedDataParallel.__init__"),
                       PY("/work/train.py", "main")};
    CHECK(strcmp(cat_of(r, ddp, 3), "communication") == 0);
    cat_frame ddp_fwd[] = {PY(SITE "/transformers/models/llama/modeling_llama.py", "LlamaMLP.forward"),
                           PY(SITE "/torch/nn/modules/module.py", "Module._call_impl"),
                           PY(SITE "/torch/nn/parallel/distributed.py", "DistributedDataParallel._run_ddp_forward"),
                           PY(SITE "/torch/nn/parallel/distributed.py", "DistributedDataParallel.forward"),
                           PY("/work/train.py", "step")};
    CHECK(strcmp(cat_of(r, ddp_fwd, 5), "activations") == 0);
    cat_frame fsdp_optim[] = {PY(SITE "/torch/distributed/tensor/_dispatch.py", "OpDispatcher.dispatch"),
                              PY(SITE "/torch/optim/adamw.py", "AdamW._init_group"),
                              PY(SITE "/torch/optim/optimizer.py", "Optimizer.step")};
    CHECK(strcmp(cat_of(r, fsdp_optim, 3), "optimizer_state") == 0);
    /* the kinds breakdown.c reads: backward when the node is first */
    CHECK(cat_torch_kind(rs, 6, &node) == CT_BACKWARD && strcmp(node, "PyNode") == 0);
    CHECK(cat_torch_kind(ag, 8, &node) == CT_FORWARD);

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
    CHECK(cat_count(r) == 14);

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
    CHECK(cat_count(r) == 14);
    CHECK(strcmp(cat_of(r, kv, 3), "activations") == 0);
    snprintf(path, sizeof path, "%s/does-not-exist.rules", dir);
    CHECK(cat_rules_load(r, path, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot read") != NULL);

    cat_rules_free(r);
    return check_summary();
}

"""The training step the recorder's cost is measured on (issue 28), shared by
bench_overhead.py and bench_lockstep.py: a transformers LlamaForCausalLM
from a config (8 layers, hidden 1024, random weights, no download), bf16
autocast, AdamW, batch 8 x 512 tokens, built on the GPU; 'compile' wraps
the model in torch.compile.  'sim' is no PyTorch at all, for trying the
benchmarks' machinery on a machine without a GPU: the driver API of the
simulated device (libcuda.so.1 on LD_LIBRARY_PATH, as `memsnap run
--sim-device` sets it) allocates and frees 64 blocks a step between bits of
pure-Python work.

make_step(workload) -> (step, sync): one training step, not waited for,
and what waits for it.  pin_threads(cpus): the launching thread alone on
the first CPU, the others on the rest.
"""
import ctypes
import os
import threading


def _torch_step(workload):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                      num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16,
                      max_position_embeddings=1024)
    with dev:
        model = LlamaForCausalLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device=dev)
    fwd = torch.compile(model) if workload == "compile" else model

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, torch.cuda.synchronize


def _sim_step():
    cu = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    dev = ctypes.c_int()
    if cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or \
            cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev):
        raise SystemExit("train_workload: the simulated device did not start")
    ptrs = [ctypes.c_uint64() for _ in range(64)]

    def work(n):
        v = 0
        for i in range(n):
            v += i * i
        return v

    def step():
        for p in ptrs:
            work(200)
            cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
        for p in ptrs:
            work(100)
            cu.cuMemFree_v2(p)

    return step, lambda: None


def pin_threads(cpus):
    """After the warm-up (PyTorch's autograd thread exists then): the calling
    (launching) thread alone on the first of cpus, every other thread of the
    process on the rest, so that the two busy threads of a step sit on the
    same cores in every process (the scheduler placed them anew each time:
    the launching thread's CPU time per step differed by up to 50% between
    processes of one configuration).  The recorder's writer stays where
    MEMSNAP_WRITER_CPUS put it."""
    if len(cpus) < 2:
        return
    me = threading.get_native_id()
    os.sched_setaffinity(me, {cpus[0]})
    keep_writer = bool(os.environ.get("MEMSNAP_WRITER_CPUS"))   # pinned by the recorder
    for t in os.listdir("/proc/self/task"):
        if int(t) == me:
            continue
        try:
            if keep_writer:
                with open("/proc/self/task/%s/comm" % t) as f:
                    if f.read().strip() == "memsnap-writer":
                        continue
            os.sched_setaffinity(int(t), set(cpus[1:]))
        except OSError:
            pass   # a thread that ended meanwhile


def make_step(workload):
    """(step, sync) for workload 'train', 'compile' or 'sim'."""
    if workload == "sim":
        return _sim_step()
    return _torch_step(workload)

"""One rank of a two-GPU training job for issue 34 (tests/gpu/h200x2_issue34.sh
runs it under torchrun, recorded by `memsnap run -o run-%q{RANK}.msnap` or
plainly): a transformers LlamaForCausalLM from a LlamaConfig with random
weights (no download; 4 layers, hidden 1024, 16 heads, intermediate 2816,
vocab 32000, as issue 20's "small"), trained with AdamW on random tokens,
data parallel over the ranks:

  --mode ddp    DistributedDataParallel, bf16 autocast;
  --mode fsdp   FSDP2: fully_shard on every decoder layer and on the model,
                MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32).

    torchrun --standalone --nproc-per-node 2 dist_llama.py --mode fsdp
        --oracle OUT/oracle-{rank}.json [--batch B] [--rank1-batch B1] [--seq S]
        [--steps N] [--warmup W] [--ab PAIRS] [--mem-limit-gib G --mem-limit-rank R]

Each step is an NVTX range "step N" (memsnap job's steps).  Rank 1 trains
on --rank1-batch rows (default --batch): the collectives do not depend on
it, its activations do.  Writes --oracle ({rank} replaced) with PyTorch's
own figures of this process, measured without memsnap: max_memory_allocated
and max_memory_reserved; the device's used memory through NVML (total -
free, as the recorder reads it) before CUDA was initialised (nvml_base),
after the CUDA context and a first kernel (ctx_bytes: that minus the base
and PyTorch's reserved) and at the end before the process group goes
(nontorch_end: used - base - memory_reserved(): the context, module images,
NCCL's and other libraries' own memory); per timed step the wall time
(synchronized); the versions; NCCL's version.  --ab PAIRS: after the timed
steps, 2 x PAIRS steps with the recorder's PyTorch events on and off in
turn (ABBA, memsnap_torch_bench_mute of the plugin; the same steps muted on
every rank), their times apart (when the recorder and its plugin are
loaded).  --mem-limit-gib: torch.cuda.set_per_process_memory_fraction on
rank R so that PyTorch may hold G GiB; an out-of-memory is a result: the
oracle says where (step, phase, message) and the rank exits 3 after
aborting its process group (torchrun then stops the other ranks).
NVLink multicast stays off (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1: the machines'
rule), set here before torch is imported whatever the environment says.
Exit 0 done, 3 out of memory (as asked), 1 failure.
"""
import os

# The shared machines' rule: no NVLink SHARP / multicast objects.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse
import ctypes
import faulthandler
import glob
import json
import statistics
import sys
import time

CFG = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
           num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024)


def nvml_used(index):
    """The device's used memory as NVML says (total - free), or None."""
    try:
        import pynvml
        pynvml.nvmlInit()
        m = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
        return int(m.total - m.free)
    except Exception:
        return None


def nvml_bus(index):
    """The PCI bus number of NVML's device index (to hold against CUDA's
    ordinal: CUDA_DEVICE_ORDER=PCI_BUS_ID makes them one), or None."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).bus)
    except Exception:
        return None


def mute_fn():
    """The plugin's memsnap_torch_bench_mute when the recorder and a plugin
    that has it are loaded, else None."""
    if not hasattr(ctypes.CDLL(None), "memsnap_annotate"):
        return None
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    for p in sorted(glob.glob(os.path.join(cache, "memsnap", "torch", "libmemsnap_torch-*.so"))):
        try:
            return ctypes.CDLL(p).memsnap_torch_bench_mute
        except (OSError, AttributeError):
            continue
    return None


def abort_group(dist):
    """Ends the process group without waiting for the other ranks (after an
    out-of-memory they may be inside a collective of their own)."""
    for name in ("_abort_process_group", "abort_process_group"):
        fn = getattr(dist.distributed_c10d, name, None) or getattr(dist, name, None)
        if fn:
            try:
                fn()
                return name
            except Exception:         # noqa: BLE001 - try the next way
                pass
    try:
        dist.destroy_process_group()
        return "destroy_process_group"
    except Exception as e:            # noqa: BLE001
        return "none (%r)" % (e,)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "fsdp"], required=True)
    ap.add_argument("--oracle", required=True, help="output JSON; {rank} is replaced")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rank1-batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--ab", type=int, default=0)
    ap.add_argument("--mem-limit-gib", type=float, default=0.0)
    ap.add_argument("--mem-limit-rank", type=int, default=1)
    a = ap.parse_args()
    rank, local, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    res = dict(rank=rank, local_rank=local, world=world, mode=a.mode, pid=os.getpid(),
               batch=a.rank1_batch if rank == 1 and a.rank1_batch else a.batch, seq=a.seq,
               steps=a.steps, warmup=a.warmup, recorded=hasattr(ctypes.CDLL(None), "memsnap_annotate"),
               oom=None, ok=False, env={k: os.environ.get(k) for k in (
                   "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
                   "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF")})
    out = a.oracle.replace("{rank}", str(rank))

    def save():
        with open(out + ".tmp", "w") as f:
            json.dump(res, f, indent=1)
        os.replace(out + ".tmp", out)

    res["nvml_base"] = nvml_used(local)          # before this process touches CUDA
    import torch
    import torch.distributed as dist
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    res.update(torch=torch.__version__, transformers=transformers.__version__,
               python=sys.version.split()[0])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    used = nvml_used(local)
    props = torch.cuda.get_device_properties(local)
    res.update(device_name=props.name, total_memory=props.total_memory,
               pci_bus_nvml=nvml_bus(local), pci_bus_torch=getattr(props, "pci_bus_id", None))
    if used is not None and res["nvml_base"] is not None:
        res["ctx_bytes"] = used - res["nvml_base"] - torch.cuda.memory_reserved(dev)
    if a.mem_limit_gib and rank == a.mem_limit_rank:
        frac = min(1.0, a.mem_limit_gib * (1 << 30) / props.total_memory)
        torch.cuda.set_per_process_memory_fraction(frac, local)
        res["memory_fraction"] = frac
    dist.init_process_group("nccl", device_id=dev)
    try:
        v = torch.cuda.nccl.version()
        res["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:                 # noqa: BLE001
        res["nccl"] = None

    oom_error = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    where = {"step": 0, "phase": "build"}
    step_ms, ab_on, ab_off = [], [], []
    try:
        torch.manual_seed(0)
        cfg = LlamaConfig(**CFG)
        with dev:
            model = LlamaForCausalLM(cfg)
        model.train()
        if a.mode == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP
            net = DDP(model, device_ids=[local])
        else:
            try:
                from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
            except ImportError:
                from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for layer in model.model.layers:
                fully_shard(layer, mp_policy=mp)
            fully_shard(model, mp_policy=mp)
            net = model
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        batch = res["batch"]

        def step(i):
            where.update(step=i, phase="forward")
            torch.cuda.nvtx.range_push("step %d" % i)
            ids = torch.randint(0, cfg.vocab_size, (batch, a.seq), device=dev)
            if a.mode == "ddp":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = net(input_ids=ids, labels=ids).loss
            else:
                loss = net(input_ids=ids, labels=ids).loss
            where["phase"] = "backward"
            loss.backward()
            where["phase"] = "optimizer"
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()

        n = 0
        for _ in range(a.warmup):
            n += 1
            step(n)
        for _ in range(a.steps):
            n += 1
            t0 = time.perf_counter()
            step(n)
            step_ms.append((time.perf_counter() - t0) * 1e3)
        mute = mute_fn() if a.ab else None
        res["ab_muted"] = mute is not None
        for i in range(2 * a.ab if mute else 0):
            muted = (i // 2 + i) % 2          # on off off on on off ...: ABBA pairs
            mute(muted)
            n += 1
            t0 = time.perf_counter()
            step(n)
            (ab_off if muted else ab_on).append((time.perf_counter() - t0) * 1e3)
        if mute:
            mute(0)
        where.update(step=n, phase="end")
        torch.cuda.synchronize()
        dist.barrier()
        res["nontorch_end"] = ((nvml_used(local) or 0) - (res["nvml_base"] or 0) -
                               torch.cuda.memory_reserved(dev))
        res["nvml_end"] = nvml_used(local)
        res["ok"] = True
    except oom_error as e:
        res["oom"] = dict(where, message=str(e).splitlines()[0][:400])
    finally:
        res.update(max_memory_allocated=torch.cuda.max_memory_allocated(dev),
                   max_memory_reserved=torch.cuda.max_memory_reserved(dev),
                   memory_allocated_end=torch.cuda.memory_allocated(dev),
                   memory_reserved_end=torch.cuda.memory_reserved(dev),
                   step_ms=step_ms, step_ms_median=statistics.median(step_ms) if step_ms else None,
                   ab_on_ms=ab_on, ab_off_ms=ab_off,
                   ab_pair_ratios=[x / y - 1 for x, y in zip(ab_on, ab_off)])
        save()
    if res["oom"]:
        # let the recorder's writer put the OOM's dump down, then go without
        # waiting on the other ranks (torchrun stops them)
        print("rank %d: out of memory in step %d (%s)" % (rank, where["step"], where["phase"]),
              flush=True)
        time.sleep(1.0)
        res["abort"] = abort_group(dist)
        save()
        faulthandler.dump_traceback_later(20, exit=True)
        sys.exit(3)
    dist.destroy_process_group()
    print("rank %d: %s done, %d steps, max allocated %d, max reserved %d" %
          (rank, a.mode, n, res["max_memory_allocated"], res["max_memory_reserved"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

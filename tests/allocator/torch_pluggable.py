#!/usr/bin/env python3
"""GPU test (label gpu): libmemsnap_alloc as PyTorch's CUDA allocator.

    torch_pluggable.py --lib build/lib/libmemsnap_alloc.so
    torch_pluggable.py --lib ... --memsnap build/bin/memsnap --blockcheck .../alloc_blockcheck

A small fixed-seed model (Linear+GELU layers, forward, backward, a few SGD
steps) runs on cuda in two subprocesses, one with PyTorch's own caching
allocator and one with ours (torch.cuda.memory.CUDAPluggableAllocator with
memsnap_torch_alloc / memsnap_torch_free; change_current_allocator must come
before any CUDA allocation, hence fresh processes).  The outputs, losses and
gradients must be bit-identical (torch.equal), and our allocator must have
served the mallocs (memsnap_torch_stat).

With --memsnap, the memsnap-allocator run happens under the recorder
(`memsnap run -o SNAP -- python3 ...`) and the snapshot must hold block_alloc
events, each with a stack, and the reserved layer (blockcheck).

Exit 77 (skipped) when torch, CUDA or a GPU is missing.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

SKIP = 77


def child(mode, lib, out):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if mode == "memsnap":
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            lib, "memsnap_torch_alloc", "memsnap_torch_free")
        torch.cuda.memory.change_current_allocator(alloc)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1234)
    layers = []
    dims = [256, 1024, 1024, 512, 10]
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.GELU())
    model = torch.nn.Sequential(*layers)
    x_cpu = torch.randn(128, dims[0])
    y_cpu = torch.randn(128, dims[-1])
    model = model.cuda()
    x, y = x_cpu.cuda(), y_cpu.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        pred = model(x)   # not "out": that is the result file's path
        loss = ((pred - y) ** 2).mean()  # deterministic reductions only
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        # churn: temporaries of many sizes go through the allocator
        junk = [torch.empty(1 << k, device="cuda") for k in range(8, 24, 3)]
        del junk
    torch.cuda.synchronize()
    result = {"out": model(x).detach().cpu(), "losses": torch.stack(losses).cpu()}
    for name, p in model.named_parameters():
        result["param." + name] = p.detach().cpu()
        result["grad." + name] = p.grad.detach().cpu()
    torch.save(result, out)
    if mode == "memsnap":
        so = ctypes.CDLL(lib)
        so.memsnap_torch_stat.restype = ctypes.c_uint64
        so.memsnap_torch_stat.argtypes = [ctypes.c_int, ctypes.c_char_p]
        mallocs = so.memsnap_torch_stat(torch.cuda.current_device(), b"malloc_calls")
        peak = so.memsnap_torch_stat(torch.cuda.current_device(), b"peak_reserved")
        print(f"memsnap allocator: {mallocs} mallocs, peak reserved {peak} bytes")
        if mallocs == 0:
            print("FAIL: the memsnap allocator served no malloc")
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("MEMSNAP_ALLOC_LIB", ""))
    ap.add_argument("--memsnap", default="")
    ap.add_argument("--blockcheck", default="")
    ap.add_argument("--child", choices=["default", "memsnap"])
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.lib, a.out)

    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: torch is not importable ({e})")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return SKIP
    name = torch.cuda.get_device_name(0)
    if "memsnap simulated device" in name:
        print("SKIP: device 0 is the memsnap simulated device")
        return SKIP
    if not a.lib or not os.path.exists(a.lib):
        print(f"FAIL: allocator library not found: {a.lib!r}")
        return 1
    print(f"torch {torch.__version__}, device 0: {name}")

    with tempfile.TemporaryDirectory() as tmp:
        outs = {}
        for mode in ("default", "memsnap"):
            out = os.path.join(tmp, mode + ".pt")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", mode,
                   "--lib", a.lib, "--out", out]
            snap = os.path.join(tmp, "torch.msnap")
            if mode == "memsnap" and a.memsnap:
                cmd = [a.memsnap, "run", "-o", snap, "--"] + cmd
            r = subprocess.run(cmd, text=True, capture_output=True, timeout=600)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            if r.returncode != 0:
                print(f"FAIL: {mode} run exited {r.returncode}")
                return 1
            outs[mode] = torch.load(out)
        ref, ours = outs["default"], outs["memsnap"]
        bad = [k for k in ref if k not in ours or not torch.equal(ref[k], ours[k])]
        if bad or set(ref) != set(ours):
            print(f"FAIL: results differ between allocators: {bad}")
            return 1
        print(f"ok: {len(ref)} tensors bit-identical with PyTorch's allocator and memsnap's")
        if a.memsnap:
            cmd = [a.blockcheck, snap, "--min-blocks", "10", "--reserved", "--allow-live"]
            r = subprocess.run(cmd, text=True, capture_output=True)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            if r.returncode != 0:
                print("FAIL: the snapshot lacks block events with stacks")
                return 1
            s = subprocess.run([a.memsnap, "summary", snap], text=True, capture_output=True)
            print("\n".join(s.stdout.splitlines()[:30]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

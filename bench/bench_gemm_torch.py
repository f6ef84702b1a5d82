"""bench_gemm_torch.py: PyTorch eager matmuls of the decode step's shapes, the
anchor beside bench_gemm (docs/benchmarks.md, "Decode workload").

    python3 bench/bench_gemm_torch.py [--batches 1,2,4,8,16,32] [--reps N] [--csv FILE]

The same products as bench_gemm: Llama 3 8B in BF16, 32 layers of distinct
weights (qkv 6144 x 4096, o 4096 x 4096, gate/up 28672 x 4096, down 4096 x
14336) and lm_head 128256 x 4096, random (never zeros), x [batch][in] bf16;
torch.nn.functional.linear(x, W) in eager mode (bf16 out, lm_head too; the
SwiGLU after gate/up is not included).  Timing as bench_gemm: CUDA events
around the whole step (129 products in decode order) and around each shape's
32 products (lm_head: one), median of --reps after a warm-up.  The copy
bandwidth is measured as bench_gemm does (2 x 2 GiB device copy, read + write,
best of 10).  No assertion on any figure.
"""
import argparse
import sys

import torch
import torch.nn.functional as F

LAYERS, HID, FFN, VOCAB, HEADS, KVH, HD = 32, 4096, 14336, 128256, 32, 8, 128
SHAPES = [("qkv", (HEADS + 2 * KVH) * HD, HID), ("o", HID, HEADS * HD),
          ("gate_up", 2 * FFN, HID), ("down", HID, FFN)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--csv")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_gemm_torch: no CUDA GPU: nothing to measure")
        return 77
    dev = torch.device("cuda")
    torch.manual_seed(0)
    # copy bandwidth: 2 GiB each way
    src = torch.empty(2 << 30, dtype=torch.uint8, device=dev).random_()
    dst = torch.empty_like(src)
    best = None
    for _ in range(11):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        dst.copy_(src)
        e1.record()
        e1.synchronize()
        ms = e0.elapsed_time(e1)
        best = ms if best is None or ms < best else best
    copy_gbs = 2 * (2 << 30) / (best / 1e3) / 1e9
    del src, dst
    w = [[(torch.rand(o, i, device=dev, dtype=torch.bfloat16) - 0.5) * (3.4 / i)
          for (_, o, i) in SHAPES] for _ in range(LAYERS)]
    lm = (torch.rand(VOCAB, HID, device=dev, dtype=torch.bfloat16) - 0.5) * 0.04
    step_bytes = 2.0 * VOCAB * HID + LAYERS * sum(2.0 * o * i for (_, o, i) in SHAPES)
    print(f"bench_gemm_torch: torch {torch.__version__} on {torch.cuda.get_device_name()}: "
          f"copy bandwidth {copy_gbs:.0f} GB/s (torch copy_, 2 x 2 GiB, best of 10); "
          f"weights per step {step_bytes / 1e9:.2f} GB")
    csv = open(a.csv, "w") if a.csv else None
    if csv:
        csv.write(f"copy_torch,{copy_gbs:.1f}\n")

    def timed(fn, reps):
        t = []
        for r in range(reps + 1):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            if r:
                t.append(e0.elapsed_time(e1))
        return sorted(t)[len(t) // 2]

    with torch.inference_mode():
        for B in [int(b) for b in a.batches.split(",")]:
            xs = {i: torch.rand(B, i, device=dev, dtype=torch.bfloat16) * 2 - 1
                  for i in (HID, HEADS * HD, FFN)}

            def step():
                for l in range(LAYERS):
                    for s, (_, o, i) in enumerate(SHAPES):
                        F.linear(xs[i], w[l][s])
                F.linear(xs[HID], lm)

            ms = timed(step, a.reps)
            gbs = step_bytes / (ms / 1e3) / 1e9
            line = (f"{'torch':14s} {B:5d} {ms:9.3f} {gbs:7.0f} {100 * gbs / copy_gbs:5.1f}% ")
            if csv:
                csv.write(f"gemm,torch,{B},step,{ms:.4f},{gbs:.1f}\n")
            for s, (name, o, i) in enumerate(SHAPES + [("lm_head", VOCAB, HID)]):
                if name == "lm_head":
                    ms_s = timed(lambda: F.linear(xs[HID], lm), a.reps)
                    us = ms_s * 1e3
                else:
                    ms_s = timed(lambda: [F.linear(xs[i], w[l][s]) for l in range(LAYERS)], a.reps)
                    us = ms_s * 1e3 / LAYERS
                sg = 2.0 * o * i / (us / 1e6) / 1e9
                line += f" {name} {us:.1f} ({sg:.0f})"
                if csv:
                    csv.write(f"gemm,torch,{B},{name},{us:.3f},{sg:.1f}\n")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What recording PyTorch's allocated layer costs a training loop.

A small Llama (transformers LlamaForCausalLM from a LlamaConfig: 8 layers,
hidden 1024, random weights, no download), bf16 autocast, AdamW, batch 8 x 512
tokens.  Each configuration runs in a process of its own (the recorder is
preloaded at process start); per process: 5 warm-up steps, then 20 timed
steps (torch.cuda.synchronize() around each), and the median step time.
The configurations run in ABAB order, ROUNDS rounds, in one invocation:

  plain           no recording
  memsnap         memsnap run with its defaults: driver level + PyTorch's
                  allocated layer through the plugin; PyTorch's block
                  allocations with the Python frames (no native frames on
                  a thread with Python frames, 4 on autograd's threads),
                  its frees without a stack
  memsnap-full    the same with MEMSNAP_TORCH_FREE_STACKS=1 and
                  MEMSNAP_TORCH_NATIVE_DEPTH=32: every PyTorch event with
                  a stack, allocations unwound 32 native frames deep (what
                  the defaults save: memsnap-full - memsnap)
  memsnap-nostack the same with --stack-depth 0
  memsnap-driver  memsnap run with MEMSNAP_TORCH=off: driver level only
  hist-python     torch.cuda.memory._record_memory_history(stacks='python')
  hist-all        torch.cuda.memory._record_memory_history(stacks='all')

Run on the GPU machine (memsnap built, the plugin built or `memsnap
torch-setup` run first):

  python3 bench/bench_torch_train.py --memsnap build/bin/memsnap [--rounds 2]

Prints one line per process and a markdown table: median of the per-process
medians, and the difference to plain.  With memsnap it also prints events
recorded per step (memsnap_totals_get around the timed steps).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ["plain", "memsnap", "memsnap-full", "memsnap-nostack", "memsnap-driver", "hist-python", "hist-all"]


def worker(mode, steps, warmup):
    """One process: train, print 'RESULT mode median_ms events_per_step'."""
    import torch

    if mode.startswith("hist-"):
        torch.cuda.memory._record_memory_history(stacks=mode[5:], max_entries=1_000_000)
    from recorder_events import events

    from train_workload import make_step
    step, _ = make_step("train")

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    e0 = events()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    e1 = events()
    print("RESULT %s %.3f %.0f" % (mode, statistics.median(times), (e1 - e0) / steps), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memsnap", default="memsnap", help="the memsnap CLI")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.steps, a.warmup)
        return 0

    modes = a.modes.split(",")
    tmp = tempfile.mkdtemp(prefix="bench_torch_train-")
    me = [sys.executable, os.path.abspath(__file__), "--steps", str(a.steps),
          "--warmup", str(a.warmup), "--worker"]
    results = {m: [] for m in modes}
    evs = {}
    for r in range(a.rounds):
        order = modes if r % 2 == 0 else list(reversed(modes))   # ABAB ... BABA
        for m in order:
            env = dict(os.environ)
            cmd = me + [m]
            if m.startswith("memsnap"):
                out = os.path.join(tmp, "%s-%d.msnap" % (m, r))
                pre = [a.memsnap, "run", "-q", "-o", out]
                if m == "memsnap-nostack":
                    pre += ["--stack-depth", "0"]
                if m == "memsnap-full":
                    env["MEMSNAP_TORCH_FREE_STACKS"] = "1"
                    env["MEMSNAP_TORCH_NATIVE_DEPTH"] = "32"
                if m == "memsnap-driver":
                    env["MEMSNAP_TORCH"] = "off"
                cmd = pre + ["--"] + cmd
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT")), None)
            if p.returncode != 0 or not line:
                print("%s failed (exit %d): %s" % (m, p.returncode, p.stderr.strip()[-500:]))
                return 1
            for l in p.stderr.splitlines():
                if l.startswith("memsnap:"):
                    print("  " + l)
            _, _, ms, ev = line.split()
            results[m].append(float(ms))
            evs[m] = float(ev)
            size = ""
            if m.startswith("memsnap"):
                size = "  file %.1f MB" % (os.path.getsize(out) / 1e6)
            print("round %d %-16s median step %8.3f ms  events/step %6.0f%s" %
                  (r + 1, m, float(ms), float(ev), size), flush=True)

    base = statistics.median(results["plain"]) if "plain" in results else None
    print("\n| configuration | median step (ms), per round | vs plain | events/step |")
    print("|---|---|---|---|")
    for m in modes:
        med = statistics.median(results[m])
        rel = "%+.1f%%" % ((med / base - 1) * 100) if base else ""
        per = ", ".join("%.2f" % x for x in results[m])
        print("| %s | %s | %s | %s |" % (m, per, rel, "%.0f" % evs[m] if m.startswith("memsnap") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

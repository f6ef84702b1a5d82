#!/usr/bin/env python3
"""What the recorder's Python walks of a training step were, on the thread
that runs the step: how many, how many the memo of the last stack answered,
how many walk_proven answered (every frame's code object in this thread's
ways, proven), how many went the long way, how many code objects the ways
did not hold (the code table asked), and the frames kept a walk.  Run under
`memsnap run` (the recorder exports memsnap_bench_walk_stats):

  memsnap run -q -o /tmp/w.msnap -- python3 bench/walk_stats.py [--workload train|compile|sim]
              [--warmup 5] [--steps 20]

Prints one line of figures a step (means over --steps), for
docs/benchmarks.md: whether a capture's cost is its frames or its misses.
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_workload import make_step  # noqa: E402


def stats(fn):
    out = (ctypes.c_uint64 * 5)()
    n = fn(out, 5)
    return list(out[:n])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=["train", "compile", "sim"], default="train")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    try:
        fn = ctypes.CDLL(None).memsnap_bench_walk_stats
    except AttributeError:
        print("walk_stats.py: run it under `memsnap run` (no memsnap_bench_walk_stats here)",
              file=sys.stderr)
        return 2
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
    fn.restype = ctypes.c_int
    if len(stats(fn)) < 5:
        print("walk_stats.py: this recorder gives fewer than 5 figures", file=sys.stderr)
        return 2
    step, sync = make_step(a.workload)
    for _ in range(a.warmup):
        step()
    sync()
    s0 = stats(fn)
    for _ in range(a.steps):
        step()
    sync()
    s1 = stats(fn)
    d = [(b - c) / a.steps for b, c in zip(s1, s0)]
    walks, memo, proven, asks, kept = d
    long_way = walks - memo - proven
    print("%s workload, %d steps, the launching thread, a step: walks %.0f, memo %.0f, "
          "proven %.0f, long way %.0f, code-table asks %.1f, frames kept a walk %.1f"
          % (a.workload, a.steps, walks, memo, proven, long_way, asks,
             kept / walks if walks else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

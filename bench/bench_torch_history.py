"""PyTorch's own memory recording, measured the way bench_recorder measures
memsnap's: what torch.cuda.memory._record_memory_history adds per recorded
event, and what a snapshot of ~1M trace entries costs to take and to write.
Run on the GPU machine:  python3 bench/bench_torch_history.py [OUT_DIR]
Prints a markdown table."""
import os
import pickle
import statistics
import sys
import tempfile
import time

import torch

out_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
dev = torch.device("cuda")
torch.empty(1, device=dev)
torch.cuda.synchronize()


def pairs_ns(n, reps=7):
    """Median ns per torch.empty+del pair (cache hits after the first)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            x = torch.empty(4096, device=dev)
            del x
        times.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(times)


def entries():
    snap = torch.cuda.memory._snapshot()
    return sum(len(t) for t in snap["device_traces"])


rows = []
n = 20000
base = pairs_ns(n)
rows.append(("torch.empty+del pair, no recording", f"{base:.0f} ns"))
for stacks in ("python", "all"):
    torch.cuda.memory._record_memory_history(enabled="all", stacks=stacks, max_entries=10_000_000)
    pairs_ns(1000, reps=1)
    before = entries()
    t = pairs_ns(n)
    per_pair_entries = (entries() - before) / (n * 7)
    torch.cuda.memory._record_memory_history(enabled=None)
    rows.append((f"pair with _record_memory_history(stacks='{stacks}')",
                 f"{t:.0f} ns: +{t - base:.0f} ns per pair, {per_pair_entries:.1f} trace entries per pair, "
                 f"+{(t - base) / per_pair_entries:.0f} ns per entry"))

# A snapshot of about 1M trace entries: take it, pickle it.
torch.cuda.memory._record_memory_history(enabled="all", stacks="all", max_entries=1_000_000)
for _ in range(350_000):
    x = torch.empty(4096, device=dev)
    del x
t0 = time.perf_counter()
snap = torch.cuda.memory._snapshot()
t1 = time.perf_counter()
path = os.path.join(out_dir, "torch_snapshot.pickle")
with open(path, "wb") as f:
    pickle.dump(snap, f)
t2 = time.perf_counter()
nent = sum(len(t) for t in snap["device_traces"])
size = os.path.getsize(path)
torch.cuda.memory._record_memory_history(enabled=None)
rows.append((f"_snapshot() with {nent} trace entries (stacks='all')", f"{(t1 - t0) * 1000:.0f} ms"))
rows.append(("pickle.dump of it", f"{(t2 - t1) * 1000:.0f} ms, {size} bytes = {size / nent:.1f} bytes per entry"))

print(f"### PyTorch {torch.__version__} memory history on {torch.cuda.get_device_name(0)}\n")
print("| what | result |")
print("|---|---|")
for a, b in rows:
    print(f"| {a} | {b} |")

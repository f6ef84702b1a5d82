"""A DataLoader that forks its workers just after model.cuda(), under
`memsnap run`, many times (the CI failure recorder.python-fork on real
CUDA): the recorder's writer opens NVML at its first counters sample, right
after the first allocation; a worker forked during that dlopen stopped at
its own first dlopen with ld.so's RT_CONSISTENT assertion (exit 127) until
fork waited for the recorder's dlopen (recorder/core.c).

    python3 fork_loader.py MEMSNAP OUT_DIR [RUNS]   (exit 0: every run clean)

    python3 fork_loader.py --child                  (one run's program)
"""
import os
import subprocess
import sys


def child():
    import torch
    from torch.utils.data import DataLoader, Dataset

    class D(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            import json          # a dlopen-free import in the worker
            return torch.full((4,), float(i)) + len(json.dumps(i))

    m = torch.nn.Linear(256, 256).cuda()
    total = 0.0
    for b in DataLoader(D(), batch_size=8, num_workers=4):
        total += float(m(torch.zeros(8, 256, device="cuda")).sum()) + float(b.sum())
    torch.cuda.synchronize()
    print("ok", total)
    return 0


def main():
    if sys.argv[1:2] == ["--child"]:
        return child()
    m, out = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    os.makedirs(out, exist_ok=True)
    bad = 0
    for i in range(runs):
        snap = os.path.join(out, "fork-%d.msnap" % i)
        p = subprocess.run([m, "run", "-q", "-o", snap, "--", sys.executable,
                            os.path.abspath(__file__), "--child"],
                           capture_output=True, text=True, timeout=120)
        text = p.stdout + p.stderr
        broke = p.returncode != 0 or "Inconsistency detected" in text or "ok " not in p.stdout
        bad += broke
        print("%s run %d: exit %d%s" % ("FAIL" if broke else "PASS", i, p.returncode,
                                       (": " + text.strip()[-400:]) if broke else ""),
              flush=True)
        if not broke:
            os.unlink(snap) if os.path.exists(snap) else None
    print("%d of %d runs clean" % (runs - bad, runs))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

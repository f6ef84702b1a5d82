#!/usr/bin/env python3
"""Writes the job fixtures (tests/cli golden job_*, memsnap job): four rank
files of one training job, as `memsnap run -o run-%q{RANK}.msnap` names
them, each three NVTX ranges "step 1".."step 3" of driver allocations:

  weights (model.c:42)   1 GiB on every rank, allocated before step 1
  activations (model.c:88)  256 MiB + 128 MiB x rank (twice that in step 3)
  comm_buffer (comm.c:7) 64 MiB, 256 MiB on rank 2

rank 3 runs out in step 3 (4 GiB asked, 1 GiB free); rank 1 is a ring dump
whose window starts in step 2 (its weights come from the state section,
4 earlier events dropped).  Ranks 0-1 on host node-a, 2-3 on node-b.

Run from this folder: python3 make.py (the files are checked in).
`python3 make.py DIR N` writes N ranks into DIR the same way (rank 3 the
OOM, rank 1 the ring dump; the Python API's Dask tests use it).
"""
import json
import os
import sys

MiB = 1 << 20
TOTAL = 150754820096


def line(f, o):
    f.write(json.dumps(o, separators=(",", ":")) + "\n")


def write(rank, folder="."):
    ring = rank == 1
    with open(os.path.join(folder, "run-%d.msnap" % rank), "w") as f:
        line(f, {"type": "header", "format": "memsnap", "version": "1.2", "pid": 4000 + rank,
                 "host": "node-a" if rank < 2 else "node-b", "argv": ["python3", "train.py"],
                 "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 1700000000000000000 + rank * 1000,
                 "mode": "ring" if ring else "stream", "settings": {},
                 "devices": [{"index": rank % 2, "name": "NVIDIA H200", "total": TOTAL}]})
        line(f, {"type": "module", "base": "0x400000", "size": 65536,
                 "path": "/opt/job/bin/train", "build_id": ""})
        for sid, ip in ((1, "0x401000"), (2, "0x402000"), (3, "0x403000")):
            line(f, {"type": "stack", "id": sid, "ips": [ip, "0x404000"]})
        for ip, fn, file, ln in (("0x401000", "weights", "/src/job/model.c", 42),
                                 ("0x402000", "activations", "/src/job/model.c", 88),
                                 ("0x403000", "comm_buffer", "/src/job/comm.c", 7),
                                 ("0x404000", "main", "/src/job/main.c", 3)):
            line(f, {"type": "sym", "ip": ip, "fn": fn, "file": file, "line": ln, "off": 16})
        d = rank % 2
        t = 1000
        events = 0
        wa = 0x7f0000000000
        if not ring:
            line(f, {"a": "alloc", "t": t, "d": d, "p": wa, "n": 1024 * MiB, "k": 1,
                     "f": "cuMemAlloc_v2"})
            events += 1
        for s in (1, 2, 3):
            line(f, {"type": "str", "id": s, "s": "step %d" % s})
            skip = ring and s == 1          # the ring's window starts in step 2
            t += 1000000
            if not skip:
                line(f, {"a": "nvtx_push", "t": t, "th": 7, "x": s, "f": "nvtx"})
                events += 1
            act = (256 + 128 * rank * (2 if s == 3 else 1)) * MiB
            comm = (256 if rank == 2 else 64) * MiB
            pa, pc = 0x7f1000000000, 0x7f2000000000
            evs = [{"a": "alloc", "t": t + 1000, "d": d, "p": pa, "n": act, "k": 2,
                    "f": "cuMemAlloc_v2"},
                   {"a": "alloc", "t": t + 2000, "d": d, "p": pc, "n": comm, "k": 3,
                    "f": "cuMemAlloc_v2"}]
            if rank == 3 and s == 3:
                evs.append({"a": "oom", "t": t + 3000, "d": d, "n": 4096 * MiB, "x": 1024 * MiB,
                            "y": TOTAL, "k": 2, "f": "cuMemAlloc_v2", "r": 2})
            evs += [{"a": "free", "t": t + 4000, "d": d, "p": pa, "f": "cuMemFree_v2"},
                    {"a": "free", "t": t + 5000, "d": d, "p": pc, "f": "cuMemFree_v2"},
                    {"a": "nvtx_pop", "t": t + 6000, "th": 7, "f": "nvtx"}]
            for e in evs:
                if not skip:
                    line(f, e)
                    events += 1
        t += 1000000
        if ring:
            line(f, {"type": "state", "t": t, "nlive": 1})
            line(f, {"type": "live", "kind": "alloc", "t": 1000, "d": d, "p": wa,
                     "n": 1024 * MiB, "k": 1})
        line(f, {"type": "trailer", "t": t, "events": events, "dropped": 4 if ring else 0,
                 "stacks_dropped": 0, "reason": "signal" if ring else "exit"})


if __name__ == "__main__":
    folder, n = (sys.argv[1], int(sys.argv[2])) if len(sys.argv) > 2 else (".", 4)
    for r in range(n):
        write(r, folder)

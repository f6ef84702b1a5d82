"""Compares memsnap's allocated layer with PyTorch's own history.

    torch_oracle_check.py SNAP ORACLE_JSON [--ring]

SNAP is a plain-text snapshot (memsnap run --compress none) of
torch_oracle.py; ORACLE_JSON what that script wrote.  Asserts:
  1. the sequence of memsnap's api-torch events up to the "oracle snapshot"
     mark equals PyTorch's trace entries of device 0, one for one and in
     order: alloc -> block_alloc, free_requested -> block_free_requested,
     free_completed -> block_free, segment_* -> segment_*, oom -> oom, each
     with the same address, size and stream (oom: x = device free bytes,
     n = size; PyTorch's trace has requested sizes: a block_alloc's y, a
     free's block's y).  So every alloc and free_completed appears exactly
     once, and nothing else is in the allocated layer; and each block_alloc's
     n is a block size (a multiple of 512, at least y) that its frees repeat;
  2. no block_alloc/block_free in the file comes from another api;
  3. the state block written at the torch oom event holds exactly PyTorch's
     live blocks at the OOM (address and block size, format 1.2).
With --ring (a ring-mode OOM dump, which ends at the dump) only 3 and the
oom event are checked.  Prints "N passed, 0 failed"; exit 1 at the first
failure with what differs.
"""
import json
import sys

ACTIONS = {"alloc": "block_alloc", "free_requested": "block_free_requested",
           "free_completed": "block_free", "segment_alloc": "segment_alloc",
           "segment_free": "segment_free", "segment_map": "segment_map",
           "segment_unmap": "segment_unmap", "oom": "oom"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    snap_path, oracle_path = sys.argv[1], sys.argv[2]
    ring = "--ring" in sys.argv[3:]
    oracle = json.load(open(oracle_path))
    events, states, strs = [], [], {}
    for line in open(snap_path):
        if not line.endswith("\n"):
            break
        o = json.loads(line)
        if "a" in o:
            events.append(o)
        elif o.get("type") == "state":
            states.append((len(events), []))
        elif o.get("type") == "live":
            states[-1][1].append(o)
        elif o.get("type") == "str":
            strs[o["id"]] = o["s"]
    passed = 0

    torch_ev = [(i, e) for i, e in enumerate(events) if e.get("f") == "torch"]
    if not torch_ev:
        fail("no api-torch events: the PyTorch plugin was not loaded (see stderr)")
    oom_i = next((i for i, e in torch_ev if e["a"] == "oom"), None)
    if oom_i is None:
        fail("no torch oom event")

    if not ring:
        mark = next((i for i, e in enumerate(events) if e["a"] == "nvtx_mark"
                     and strs.get(e.get("x")) == "oracle snapshot"), None)
        if mark is None:
            fail("no 'oracle snapshot' mark in the file")
        got, block, bad = [], {}, []
        for i, e in torch_ev:
            if i > mark or e.get("d", 0) != 0:
                continue
            if e["a"] == "oom":
                got.append(("oom", e.get("x", 0), e.get("n", 0), e.get("s", 0)))
            elif e["a"] == "block_alloc":
                n, y = e.get("n", 0), e.get("y", 0)
                if n < y or n % 512:
                    bad.append(e)
                block[e["p"]] = (n, y)
                got.append((e["a"], e["p"], y, e.get("s", 0)))
            elif e["a"] in ("block_free_requested", "block_free"):
                n, y = block.get(e["p"], (None, None))
                if e.get("n", 0) != n:
                    bad.append(e)
                got.append((e["a"], e["p"], y, e.get("s", 0)))
            else:
                got.append((e["a"], e.get("p", 0), e.get("n", 0), e.get("s", 0)))
        if bad:
            fail("%d block events whose n is not their block's size, e.g. %r" % (len(bad), bad[0]))
        want = [(ACTIONS[t["action"]], t["addr"], t["size"], t["stream"])
                for t in oracle["traces"] if t["action"] in ACTIONS]
        if got != want:
            n = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                     min(len(got), len(want)))
            fail("torch events differ from PyTorch's trace at entry %d of %d/%d: memsnap %r, "
                 "PyTorch %r" % (n, len(got), len(want), got[n:n + 3], want[n:n + 3]))
        passed += 1
        allocs = sum(1 for w in want if w[0] == "block_alloc")
        frees = sum(1 for w in want if w[0] == "block_free")
        print("ok   %d trace entries (%d alloc, %d free_completed) equal, in order" %
              (len(want), allocs, frees))
        other = [e for e in events if e["a"] in ("block_alloc", "block_free")
                 and e.get("f") != "torch"]
        if other:
            fail("%d block events from another api, e.g. %r" % (len(other), other[0]))
        passed += 1

    oom = events[oom_i]
    t_oom = next(t for t in oracle["traces"] if t["action"] == "oom") if not ring else None
    if t_oom and (oom.get("x", 0), oom.get("n", 0)) != (t_oom["addr"], t_oom["size"]):
        fail("oom event %r, PyTorch's %r" % (oom, t_oom))
    passed += 1
    st = next((lives for at, lives in states if at > oom_i), None)
    if st is None:
        fail("no state block after the torch oom event (no OOM dump)")
    got = sorted((l["p"], l["n"]) for l in st if l["kind"] == "block_alloc")
    want = sorted((b["addr"], b["size"]) for b in oracle["live"])
    if got != want:
        fail("live blocks at the OOM: memsnap %d, PyTorch %d; only memsnap %r; only PyTorch %r" %
             (len(got), len(want), sorted(set(got) - set(want))[:5],
              sorted(set(want) - set(got))[:5]))
    passed += 1
    print("ok   the OOM dump holds PyTorch's %d live blocks, with their block sizes" % len(want))
    print("%d passed, 0 failed" % passed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

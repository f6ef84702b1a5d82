"""Synthetic recordings of a serving engine with CUDA graphs in a shared pool,
and the answers they should give, from a small model of PyTorch's caching
allocator written here (not memsnap's code), for the tests of issue 30
(pools in every view, replay and predict with private pools, --grow).

    synth_serving.py OUT [--scenario NAME] [--kv MIB] [--total MIB]
                     [--expect JSON] [--find-max JSON]

What the engine does (scenario "serving"; sizes in MiB, every request a
multiple of 2 MiB above 10 MiB, so PyTorch's rounding is the size itself):

  1. weights: 8 tensors of 256 MiB at module level (no nn.Module);
  2. a profiling pass at the longest prefill: 2 x 512 MiB activations, one
     freed and taken again, then all freed; empty_cache();
  3. the KV cache: one tensor of --kv MiB (allocate_kv_cache);
  4. CUDA graphs for batch 8, 4, 2, 1 (largest first) captured into one
     shared pool (graph_pool_handle(): MempoolId_t (0, 1), format 1.3 x =
     MSNAP_POOL_HANDLE | 1, the capture bit on its allocations): per batch
     an eager warm-up of 64 MiB in the default pool, then in the pool an
     activation of 32 MiB x batch (freed inside the capture) and a static
     output of 16 MiB x batch that stays; then empty_cache() (the warm-up's
     segment goes, the live pool keeps its cache: a free 96 MiB block);
  5. serving: graph replays (no allocation) and 3 eager prefills of
     96 MiB x --batch: at batch 1 one would fit the pool's free block, which
     only the default pool's own segments may serve.

The model (class Torch below): PyTorch's large pool with its default
config: best fit by (size, address) in the request's own pool and stream;
a block is split when more than 1 MiB would remain; a new segment is the
request rounded to 2 MiB (20 MiB below 10 MiB); freed blocks merge with
free neighbours; empty_cache() gives back every unsplit free segment of
the default pool and of pools whose graphs are gone, never a live
pool's; a miss that cannot get a segment retries after that release, and
only when no capture is under way (a request into a private pool is made
during one).  Events are what PyTorch's trace entries become in a memsnap
recording (docs/recorder.md, PyTorch): cuMemAlloc_v2/cuMemFree_v2 for the
segments, segment_alloc/segment_free and block_alloc/block_free of api
torch, x = the pool.

--expect writes what the recording holds (per pool: peak and final
reserved and allocated; the process's peaks; bytes by category at the
end).  --find-max writes, per --total, the largest KV cache that the
model runs to the end with, found by bisection in 2 MiB steps: what
`memsnap replay --grow KV --find-max` must bracket.
"""
import argparse
import json
import sys

MiB = 1 << 20
HANDLE = 1 << 32
CAPTURING = 1 << 33
POOL = HANDLE | 1                  # graph_pool_handle() -> (0, 1)


class OOM(Exception):
    pass


class Torch:
    """PyTorch's caching allocator, large pool, default config (see above)."""

    def __init__(self, total, shared=False):
        self.total = total
        self.shared = shared       # no private pools (what an emulation without them says)
        self.reserved = 0
        self.top = 0x7f0000000000
        self.segs = []             # [addr, size, pool, blocks]; blocks [addr, size, free]
        self.freeable = set()
        self.ev = []               # ("seg+"|"seg-"|"blk+"|"blk-", addr, size, pool, req)
        self.capturing = False

    def _fits(self, pool, req):
        best = None
        for s in self.segs:
            if s[2] != pool and not self.shared:
                continue
            for b in s[3]:
                if b[2] and b[1] >= req and (best is None or (b[1], b[0]) < (best[1][1], best[1][0])):
                    best = (s, b)
        return best

    def _release(self):
        for s in list(self.segs):
            if ((s[2] == 0 or s[2] in self.freeable or self.shared) and len(s[3]) == 1 and
                    s[3][0][2]):
                self.segs.remove(s)
                self.reserved -= s[1]
                self.ev.append(("seg-", s[0], s[1], s[2], 0))

    def malloc(self, req, pool=0):
        assert req > MiB and req % 512 == 0
        got = self._fits(pool, req)
        if not got:
            size = 20 * MiB if req < 10 * MiB else (req + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
            if self.reserved + size > self.total:
                if pool and not self.shared:
                    raise OOM()
                self._release()
                if self.reserved + size > self.total:
                    raise OOM()
            self.top -= size + 2 * MiB
            seg = [self.top, size, pool, [[self.top, size, True]]]
            self.segs.append(seg)
            self.reserved += size
            self.ev.append(("seg+", seg[0], size, pool, 0))
            got = (seg, seg[3][0])
        s, b = got
        if b[1] - req > MiB:                        # split: the rest stays free after it
            i = s[3].index(b)
            s[3].insert(i + 1, [b[0] + req, b[1] - req, True])
            b[1] = req
        b[2] = False
        self.ev.append(("blk+", b[0], b[1], pool, req))
        return b[0]

    def free(self, addr):
        for s in self.segs:
            for i, b in enumerate(s[3]):
                if b[0] == addr and not b[2]:
                    self.ev.append(("blk-", addr, b[1], s[2], 0))
                    b[2] = True
                    if i + 1 < len(s[3]) and s[3][i + 1][2]:
                        b[1] += s[3].pop(i + 1)[1]
                    if i > 0 and s[3][i - 1][2]:
                        s[3][i - 1][1] += s[3].pop(i)[1]
                    return
        raise KeyError(addr)

    def empty_cache(self):
        self._release()


# ---- the engine ------------------------------------------------------------------

W = [("<module>", "engine.py", 12)]
STEP = [("model_step", "engine.py", 40), ("profile_run", "engine.py", 60), ("<module>", "engine.py", 101)]
KV = [("allocate_kv_cache", "engine.py", 30), ("<module>", "engine.py", 103)]
WARM = [("model_step", "engine.py", 41), ("capture_graphs", "engine.py", 70), ("<module>", "engine.py", 105)]
ACT = [("model_step", "engine.py", 42), ("capture_graphs", "engine.py", 72), ("<module>", "engine.py", 105)]
OUTP = [("model_step", "engine.py", 44), ("capture_graphs", "engine.py", 72), ("<module>", "engine.py", 105)]
PREFILL = [("model_step", "engine.py", 46), ("serve", "engine.py", 90), ("<module>", "engine.py", 107)]


def serving(t, kv, batch=1):
    """The engine's requests on allocator t (Torch): (site, op) per request."""
    sites = []

    def alloc(site, n, pool=0):
        a = t.malloc(n * MiB, pool)
        sites.append(site)
        return a

    weights = [alloc(W, 256) for _ in range(8)]
    a1 = alloc(STEP, 512)
    a2 = alloc(STEP, 512)
    t.free(a1)
    a3 = alloc(STEP, 512)
    t.free(a2)
    t.free(a3)
    t.empty_cache()
    kvc = alloc(KV, kv)
    outs = []
    for b in (8, 4, 2, 1):
        w = alloc(WARM, 64)
        t.free(w)
        t.capturing = True
        act = alloc(ACT, 32 * b, POOL)
        outs.append(alloc(OUTP, 16 * b, POOL))
        t.free(act)
        t.capturing = False
    t.empty_cache()
    for _ in range(3):
        p = alloc(PREFILL, 96 * batch)
        t.free(p)
    if TEARDOWN:
        # the interpreter's teardown: every tensor freed after the last step
        # (the weights are still parameters: made before the first step,
        # alive past the last)
        for a in outs + [kvc] + weights:
            t.free(a)
    return sites, weights, kvc, outs


TEARDOWN = False


SCENARIOS = {"serving": serving}


def run(scenario, kv, total, batch=1, shared=False):
    t = Torch(total, shared)
    sites = SCENARIOS[scenario](t, kv, batch)[0]
    return t, sites


def fits(scenario, kv, total, batch=1, shared=False):
    try:
        run(scenario, kv, total, batch, shared)
        return True
    except OOM:
        return False


def find_max(scenario, total, batch=1, shared=False):
    """The largest KV (MiB, even) the model runs to the end with."""
    lo, hi = 0, total // MiB
    if not fits(scenario, 2, total, batch, shared):
        return None
    lo = 2
    while hi - lo > 2:
        mid = (lo + hi) // 4 * 2
        if mid <= lo:
            mid = lo + 2
        if fits(scenario, mid, total, batch, shared):
            lo = mid
        else:
            hi = mid
    return lo


# ---- the recording ------------------------------------------------------------------

def write(path, t, sites, total, requests, pid=4242):
    """The memsnap recording of t's events (format 1.3)."""
    out = []

    def w(o):
        out.append(json.dumps(o, separators=(",", ":")))

    w({"type": "header", "format": "memsnap", "version": "1.3", "pid": pid, "host": "synth",
       "argv": ["python3", "engine.py"], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 0,
       "mode": "stream", "settings": {}, "devices": [{"index": 0, "name": "synthetic H200",
                                                    "total": total}]})
    frames, stacks = {}, {}

    def stack(site):
        site = tuple(site)
        if site not in stacks:
            ips = []
            for fr in site:
                if fr not in frames:
                    ip = (1 << 63) | (len(frames) + 1) << 16
                    frames[fr] = ip
                    w({"type": "sym", "ip": hex(ip), "fn": fr[0], "file": "/srv/" + fr[1],
                       "line": fr[2]})
                ips.append(hex(frames[fr]))
            stacks[site] = len(stacks) + 1
            w({"type": "stack", "id": stacks[site], "ips": ips})
        return stacks[site]

    tt = 1000
    req_i = 0
    pending = None
    for kind, addr, size, pool, req in t.ev:
        tt += 1000
        if kind == "blk+":
            k = stack(sites[req_i])
            req_i += 1
            x = pool | (CAPTURING if pool else 0)
            if pending is not None:
                # the segment this block made: the driver call and PyTorch's
                # record carry the block's stack
                pa, ps, pp = pending
                w({"a": "alloc", "t": tt - 500, "p": pa, "n": ps, "k": k, "th": 1,
                   "f": "cuMemAlloc_v2"})
                e = {"a": "segment_alloc", "t": tt - 400, "p": pa, "n": ps, "k": k, "th": 1,
                     "f": "torch"}
                if pp:
                    e["x"] = pp | CAPTURING
                w(e)
                pending = None
            e = {"a": "block_alloc", "t": tt, "p": addr, "n": size, "y": req, "k": k, "th": 1,
                 "f": "torch"}
            if x:
                e["x"] = x
            w(e)
        elif kind == "blk-":
            e = {"a": "block_free", "t": tt, "p": addr, "n": size, "th": 1, "f": "torch"}
            if pool:
                e["x"] = pool
            w(e)
        elif kind == "seg+":
            pending = (addr, size, pool)
        else:
            e = {"a": "segment_free", "t": tt, "p": addr, "n": size, "th": 1, "f": "torch"}
            if pool:
                e["x"] = pool
            w(e)
            w({"a": "free", "t": tt + 1, "p": addr, "n": size, "th": 1, "f": "cuMemFree_v2"})
    assert req_i == requests
    w({"type": "trailer", "t": tt + 1000, "events": sum(1 for l in out if l.startswith('{"a"')),
       "dropped": 0, "stacks_dropped": 0, "reason": "exit"})
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def ledger(t):
    """Per pool and for the process: peaks and finals, from the events."""
    pools, res, alc, peak_res, peak_alc = {}, 0, 0, 0, 0
    for kind, addr, size, pool, req in t.ev:
        p = pools.setdefault(pool, {"reserved": 0, "allocated": 0, "peak_reserved": 0,
                                    "peak_allocated": 0, "blocks": 0, "segments": 0})
        if kind == "seg+":
            p["reserved"] += size
            p["segments"] += 1
            res += size
        elif kind == "seg-":
            p["reserved"] -= size
            res -= size
        elif kind == "blk+":
            p["allocated"] += size
            p["blocks"] += 1
            alc += size
        else:
            p["allocated"] -= size
            alc -= size
        p["peak_reserved"] = max(p["peak_reserved"], p["reserved"])
        p["peak_allocated"] = max(p["peak_allocated"], p["allocated"])
        p["peak_cache"] = max(p.get("peak_cache", 0), p["reserved"] - p["allocated"])
        peak_res, peak_alc = max(peak_res, res), max(peak_alc, alc)
    return pools, peak_res, peak_alc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--scenario", default="serving", choices=sorted(SCENARIOS))
    ap.add_argument("--kv", type=int, default=4096, help="KV cache, MiB")
    ap.add_argument("--total", type=int, default=8192, help="device memory, MiB")
    ap.add_argument("--batch", type=int, default=1, help="the eager prefills' batch")
    ap.add_argument("--find-max-batches", default="",
                    help="--find-max also at these batches (key TOTAL@BATCH)")
    ap.add_argument("--expect", help="write the recording's figures here")
    ap.add_argument("--find-max", help="write the largest KV per device size here")
    ap.add_argument("--find-max-totals", default="8192,7000,6000")
    ap.add_argument("--teardown", action="store_true",
                    help="free every block after the last step, as an interpreter's teardown does")
    a = ap.parse_args()
    global TEARDOWN
    TEARDOWN = a.teardown
    total = a.total * MiB
    t, sites = run(a.scenario, a.kv, total, a.batch)
    write(a.out, t, sites, total, len(sites), 4200 + a.batch)
    if a.expect:
        pools, pr, pa = ledger(t)
        ex = {"total": total, "kv": a.kv * MiB, "peak_reserved": pr, "peak_allocated": pa,
              "pools": {("default" if k == 0 else str(k)): v for k, v in pools.items()},
              # by category, each one's peak: the weights (parameters: made
              # before the first step, alive at the end), the KV cache, the
              # graphs' pool (a capture's activation and the static outputs)
              "categories_peak": {"parameters": 8 * 256 * MiB, "kv_cache": a.kv * MiB,
                                  "graph_pool": pools[POOL]["peak_allocated"]}}
        # the same requests without private pools: what replay must not say
        ts, _ = run(a.scenario, a.kv, total, a.batch, shared=True)
        ex["peak_reserved_without_pools"] = ledger(ts)[1]
        json.dump(ex, open(a.expect, "w"), indent=1, sort_keys=True)
    if a.find_max:
        res = {}
        for tot in (int(x) for x in a.find_max_totals.split(",")):
            m = find_max(a.scenario, tot * MiB, a.batch)
            res[str(tot)] = None if m is None else m * MiB
            m = find_max(a.scenario, tot * MiB, a.batch, shared=True)
            res[str(tot) + "/without_pools"] = None if m is None else m * MiB
            for b in (int(x) for x in a.find_max_batches.split(",") if x):
                m = find_max(a.scenario, tot * MiB, b)
                res["%d@%d" % (tot, b)] = None if m is None else m * MiB
        json.dump(res, open(a.find_max, "w"), indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

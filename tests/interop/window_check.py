"""A window of a recording, exported for PyTorch and imported back (issue 19).

    window_check.py MEMSNAP SCRATCH [DECODE SIMDEV_DIR]

`memsnap export --format torch[-json] --from/--to/--max-entries` writes the
events of a window and, as "segments", the state at its end; what was live
when the window starts is only implied (memory_viz takes as "initially
allocated" each free of something the trace never allocated and each block
or segment of the final state the trace did not allocate).  `memsnap
import` must make it explicit, so the imported window's levels are the
original's: before the fix a window re-imported showed allocated 46.82 GiB
above reserved 33.50 GiB.

Recordings: a synthetic one (two devices; cuMemAlloc segments with blocks,
one made before the window and freed in it; an expandable region of
cuMemCreate + cuMemMap whose first handle is unmapped and released in the
window; managed memory made before the window and freed in it, which torch
does not see), and with DECODE the decode workload recorded on the simulated
device (SIMDEV_DIR).  For each window and each encoding (JSON with the
memsnap extension, the pickle = the pure torch mapping) asserts, per device:
  - memory_viz's reading of the export (process_alloc_data.js, done here in
    Python: blocks and, without expandable segments, segments) starts,
    peaks and ends where the recording does in that window;
  - the imported file's `summary --json`: allocated peak <= reserved peak,
    and reserved and allocated peak and final equal the recording's in the
    window (peak: the highest level from the window's start to its end;
    final: the level at its end), replayed here from the recording's events
    (for the pickle and memory_viz, reserved without managed memory).
Exit 0 pass, 1 a failed check.
"""
import json
import os
import pickle
import random
import re
import subprocess
import sys

M, S = sys.argv[1:3]
DECODE = sys.argv[3] if len(sys.argv) > 4 else None
SIMDEV = sys.argv[4] if len(sys.argv) > 4 else None
os.makedirs(S, exist_ok=True)
failed = []
MiB = 1 << 20


def fail(msg):
    failed.append(msg)
    print("FAIL: " + msg)


def run(args, ok=(0,)):
    p = subprocess.run([M] + args, capture_output=True, text=True)
    if p.returncode not in ok:
        print(p.stdout + p.stderr)
        sys.exit("FAIL: memsnap %s: exit %d" % (" ".join(args), p.returncode))
    return p


# ---- the synthetic recording --------------------------------------------------

def synthetic(path):
    """Writes the synthetic recording; returns the event indexes where the
    middle phase (the window) starts and ends."""
    rnd = random.Random(19)
    ev = []

    def e(a, **k):
        k["a"] = a
        k["t"] = 1000 * (len(ev) + 1)
        ev.append(k)

    seg = lambda d, i: (0x7f0000000000 if d == 0 else 0x7e0000000000) + i * 64 * MiB
    va = 0x7d0000000000
    slots = {}          # (device, region) -> block addresses it holds
    live = {}           # (device, addr) -> size of a live block

    def region(d, name, base, n):
        slots[(d, name)] = [base + k * 8 * MiB for k in range(n)]

    def churn(n):
        for _ in range(n):
            free = [(d, a) for (d, r), l in slots.items() for a in l if (d, a) not in live]
            if free and (not live or rnd.random() < 0.5):
                d, a = rnd.choice(free)
                live[(d, a)] = rnd.choice((4, 8)) * MiB
                e("block_alloc", d=d, p=a, n=live[(d, a)], f="allocator")
            else:
                d, a = rnd.choice(sorted(live))
                e("block_free", d=d, p=a, n=live.pop((d, a)), f="allocator")

    def drop_region(d, name):
        for a in slots.pop((d, name)):
            if (d, a) in live:
                e("block_free", d=d, p=a, n=live.pop((d, a)), f="allocator")

    # before the window
    e("vmm_reserve", p=va, n=1024 * MiB, f="cuMemAddressReserve")
    for i in range(4):
        e("alloc", p=seg(0, i), n=64 * MiB, f="cuMemAlloc_v2")
        region(0, "s%d" % i, seg(0, i), 8)
    for h in (1, 2):
        e("vmm_create", n=32 * MiB, x=h, f="cuMemCreate")
        e("vmm_map", p=va + (h - 1) * 32 * MiB, n=32 * MiB, x=h, f="cuMemMap")
        region(0, "h%d" % h, va + (h - 1) * 32 * MiB, 4)
    e("alloc", d=1, p=seg(1, 0), n=64 * MiB, f="cuMemAlloc_v2")
    region(1, "s0", seg(1, 0), 8)
    e("managed_alloc", d=1, p=seg(1, 8), n=MiB, f="cuMemAllocManaged")
    churn(600)
    start = len(ev)
    # the window: a segment and a handle made before it go, others come;
    # managed memory (no torch entries) made before it goes too
    churn(300)
    e("free", d=1, p=seg(1, 8), n=MiB, f="cuMemFree_v2")
    drop_region(0, "s3")
    e("free", p=seg(0, 3), n=64 * MiB, f="cuMemFree_v2")
    for i in (4, 5):
        e("alloc", p=seg(0, i), n=64 * MiB, f="cuMemAlloc_v2")
        region(0, "s%d" % i, seg(0, i), 8)
    churn(300)
    drop_region(0, "h1")
    e("vmm_unmap", p=va, n=32 * MiB, f="cuMemUnmap")
    e("vmm_release", n=32 * MiB, x=1, f="cuMemRelease")
    e("vmm_create", n=32 * MiB, x=3, f="cuMemCreate")
    e("vmm_map", p=va + 64 * MiB, n=32 * MiB, x=3, f="cuMemMap")
    region(0, "h3", va + 64 * MiB, 4)
    churn(600)
    end = len(ev) - 1
    churn(300)
    h = {"type": "header", "format": "memsnap", "version": "1.2", "pid": 19, "host": "h",
         "argv": ["window"], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": "0x179c2a0a5e8a1f00",
         "mode": "stream", "settings": {}, "devices": []}
    with open(path, "w") as f:
        f.write(json.dumps(h) + "\n")
        for d in (0, 1):
            f.write(json.dumps({"type": "device", "index": d, "name": "Simulated H200",
                                "total": 150000000000}) + "\n")
        for x in ev:
            f.write(json.dumps(x) + "\n")
    return start, end


# ---- the recording's levels, replayed here --------------------------------------

def levels(path):
    """[(t, {device: (reserved, allocated, reserved without managed memory)})]
    after each event of path (plain or zstd), and the devices that had
    expandable (cuMemMap) segments."""
    out = subprocess.run(["zstdcat", "-f", path], capture_output=True, check=True).stdout
    mem, blk, phys = {}, {}, {}
    res, alc, man, vmm = {}, {}, {}, set()
    rows = []
    for line in out.split(b"\n"):
        if b'"a":' not in line:
            continue
        o = json.loads(line)
        a, d = o["a"], o.get("d", 0)
        p, n, x = o.get("p", 0), o.get("n", 0), o.get("x", 0)
        if isinstance(p, str):
            p = int(p, 16)
        if isinstance(x, str):
            x = int(x, 16)
        if a in ("alloc", "async_alloc", "managed_alloc"):
            mem[p] = (d, n, a == "managed_alloc")
            res[d] = res.get(d, 0) + n
            man[d] = man.get(d, 0) + (n if a == "managed_alloc" else 0)
        elif a in ("free", "async_free") and p in mem:
            d0, n0, m0 = mem.pop(p)
            res[d0] -= n0
            man[d0] -= n0 if m0 else 0
        elif a == "vmm_create":
            phys[x] = (d, n)
            res[d] = res.get(d, 0) + n
        elif a == "vmm_release" and x in phys:
            d0, n0 = phys.pop(x)
            res[d0] -= n0
        elif a == "vmm_map":
            vmm.add(d)
        elif a == "block_alloc":
            blk[p] = (d, n)
            alc[d] = alc.get(d, 0) + n
        elif a == "block_free" and p in blk:
            d0, n0 = blk.pop(p)
            alc[d0] -= n0
        rows.append((o["t"], {k: (res.get(k, 0), alc.get(k, 0), res.get(k, 0) - man.get(k, 0))
                              for k in set(res) | set(alc)}))
    return rows, vmm


def window(rows, first, last):
    """Per device: (start, peak, end) of the levels (levels()) over events
    first..last (indexes into rows)."""
    before = rows[first - 1][1] if first else {}
    devs = set(before)
    for i in range(first, last + 1):
        devs |= set(rows[i][1])
    r = {}
    for d in devs:
        s = before.get(d, (0, 0, 0))
        pk = s
        for i in range(first, last + 1):
            pk = tuple(map(max, pk, rows[i][1].get(d, (0, 0, 0))))
        r[d] = (s, pk, rows[last][1].get(d, (0, 0, 0)))
    return r


# ---- memory_viz's reading of an export ----------------------------------------------

def viz(d, dev, segs):
    """(start, peak, end) of memory_viz's timeline of one device: blocks
    ("Active Memory Timeline") or segments ("Active Cached Segment
    Timeline"), as process_alloc_data.js builds it."""
    alloc = "segment_alloc" if segs else "alloc"
    frees = ("segment_free",) if segs else ("free", "free_completed")
    live, init, steps = {}, 0, []
    trace = d["device_traces"][dev] if dev < len(d["device_traces"]) else []
    for e in trace:
        if e["action"] == alloc:
            live[e["addr"]] = e["size"]
            steps.append(e["size"])
        elif e["action"] in frees:
            if e["addr"] in live:
                steps.append(-live.pop(e["addr"]))
            else:                       # allocated before the trace
                init += e["size"]
                steps.append(-e["size"])
    for s in d["segments"]:
        if s["device"] != dev:
            continue
        if segs:
            init += s["total_size"] if s["address"] not in live else 0
        else:
            init += sum(b["requested_size"] for b in s["blocks"]
                        if b["state"] == "active_allocated" and b["address"] not in live)
    cur = peak = init
    for x in steps:
        cur += x
        peak = max(peak, cur)
    return init, peak, cur


def gib(v):
    return "%.2f GiB" % (v / float(1 << 30))


def check(name, snap, rows, vmm, args, first, last):
    """Exports snap with args (a window of events first..last; first None:
    where --max-entries cut, as the export says), checks the export as
    memory_viz reads it and the import's summary."""
    for fmt, ext in (("torch-json", "json"), ("torch", "pickle")):
        tag = "%s %s %s" % (name, fmt, " ".join(args))
        out = "%s/%s.%s" % (S, name, ext)
        p = run(["export", snap, "--format", fmt, "-o", out] + args)
        cut = re.search(r"from event #(\d+)", p.stderr)
        if "--max-entries" in args:
            if not cut:
                sys.exit("FAIL: %s: no cut: %s" % (tag, p.stderr))
            first = int(cut.group(1))
        want = window(rows, first, last)
        d = json.load(open(out)) if ext == "json" else pickle.load(open(out, "rb"))
        for dev, (s, pk, e) in sorted(want.items()):
            got = viz(d, dev, False)
            if got != (s[1], pk[1], e[1]):
                fail("%s: device %d: memory_viz's blocks start/peak/end %s, the recording's %s"
                     % (tag, dev, got, (s[1], pk[1], e[1])))
            if dev not in vmm:     # torch has no managed memory
                got = viz(d, dev, True)
                if got != (s[2], pk[2], e[2]):
                    fail("%s: device %d: memory_viz's segments start/peak/end %s, the "
                         "recording's %s" % (tag, dev, got, (s[2], pk[2], e[2])))
        imp = "%s/%s-%s.msnap" % (S, name, ext)
        run(["import", out, "-o", imp])
        j = json.loads(run(["summary", "--json", imp], ok=(0, 1)).stdout)
        devs = {x["device"]: x for x in j["devices"]}
        # the pickle has no managed memory (torch has none); the JSON has it
        # in its extension
        res = 0 if ext == "json" else 2
        for dev, (s, pk, e) in sorted(want.items()):
            pk, e = (pk[res], pk[1]), (e[res], e[1])
            x = devs.get(dev)
            if not x:
                if pk != (0, 0):
                    fail("%s: device %d missing from the import" % (tag, dev))
                continue
            r, a = x["reserved"], x["allocated"]
            print("%s: device %d: imported reserved peak %s final %s, allocated peak %s "
                  "final %s; recorded %s %s, %s %s" % (tag, dev, gib(r["peak"]), gib(r["final"]),
                                                      gib(a["peak"]), gib(a["final"]), gib(pk[0]),
                                                      gib(e[0]), gib(pk[1]), gib(e[1])))
            if a["peak"] > r["peak"]:
                fail("%s: device %d: allocated peak %s above reserved peak %s"
                     % (tag, dev, gib(a["peak"]), gib(r["peak"])))
            if (r["final"], a["final"]) != e:
                fail("%s: device %d: at the window's end reserved/allocated %d/%d, recorded %d/%d"
                     % (tag, dev, r["final"], a["final"], e[0], e[1]))
            if (r["peak"], a["peak"]) != pk:
                fail("%s: device %d: window peaks reserved/allocated %d/%d, recorded %d/%d"
                     % (tag, dev, r["peak"], a["peak"], pk[0], pk[1]))


def index_at(rows, t, after):
    """The first event at or after t (after=1), the last at or before t (0)."""
    idx = [i for i, (u, _) in enumerate(rows) if (u >= t if after else u <= t)]
    return idx[0] if after else idx[-1]


syn = S + "/synthetic.msnap"
start, end = synthetic(syn)
rows, vmm = levels(syn)
t_start, t_end = rows[start][0], rows[end][0]
check("synthetic", syn, rows, vmm, ["--from", "%dns" % t_start], start, len(rows) - 1)
check("synthetic", syn, rows, vmm, ["--from", "%dns" % t_start, "--to", "%dns" % t_end],
      start, end)
check("synthetic", syn, rows, vmm, ["--from", "#300", "--to", "#%d" % end], 300, end)
check("synthetic", syn, rows, vmm, ["--to", "%dns" % t_end, "--max-entries", "1000"], None, end)

if DECODE:
    env = dict(os.environ, LD_LIBRARY_PATH=SIMDEV + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    rec = S + "/decode.msnap"
    subprocess.run([M, "run", "--sim-device", "80G", "-q", "-o", rec, "--", DECODE, "-q",
                    "--preset", "small", "--scenario", "healthy", "--hours", "0.02"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    rows, vmm = levels(rec)
    t0, t1 = rows[0][0], rows[-1][0]
    a, b = t0 + (t1 - t0) * 3 // 10, t0 + (t1 - t0) * 4 // 10
    check("decode", rec, rows, vmm, ["--from", "%dns" % a, "--to", "%dns" % b],
          index_at(rows, a, 1), index_at(rows, b, 0))

if failed:
    sys.exit("%d failed checks" % len(failed))
print("ok")

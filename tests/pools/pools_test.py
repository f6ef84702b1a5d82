"""Pools in every view, replay and predict with private pools, --grow
(issue 30), on synthetic recordings of a serving engine whose answers
synth_serving.py computes from its own model of PyTorch's allocator.

    pools_test.py MEMSNAP SCRATCH CASE

Cases:
  summary     summary --json "pools" and "pool_kinds" equal the recording's
              ledger per pool (reserved from PyTorch's segment records,
              allocated from its blocks), and the text's pools line
  replay      replay under the defaults reproduces the recording's peaks,
              which the same requests without private pools would not
  grow        replay --grow KV --find-max, on three device sizes and under a
              memory fraction: the model's largest KV lies between the
              size found and the size that failed, the step is small, and
              the answer without private pools lies outside; --json's keys
  grow_sizes  --grow KV=SIZE at the largest size runs to the end (exit 0),
              one page more does not (exit 1) and names the request that
              fails; FILE:LINE and the label name the same site
  predict     predict's template grown: --at 16,32 --grow KV --find-max
              against the model at batch 16 and 32
  categories  summary's categories: the weights are parameters (made
              before the first step, live to the end, no nn.Module), the KV
              cache kv_cache (by its function's name), the graph pool's
              blocks graph_pool; the profiling pass stays inputs
  lora        LoRA fine-tuning (synth_lora.py): the gradients are the adapters'
              gradients, and the frozen weights parameters
  render      render --by pool: a band per pool and per private pool's cache,
              their peaks the ledger's (as MemoryViz's "incl. Private Pools")
  flame       flame --pool graph|0,1|ID|default|private|mempool: the root is the
              pool's blocks at the moment
  sqlite      export --format sqlite: the pools table and allocations.pool
  usage       --grow's usage errors: one line, exit 2
"""
import json
import os
import subprocess
import sys

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH = os.path.join(HERE, "synth_serving.py")
FAILS = []


def check(what, ok, detail=""):
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, (" (" + detail + ")") if detail else ""))
    if not ok:
        FAILS.append(what)


def run(cmd, want=None):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if want is not None and p.returncode not in (want if isinstance(want, tuple) else (want,)):
        print("command: %s\nexit %d\nstdout: %s\nstderr: %s" % (" ".join(cmd), p.returncode,
                                                               p.stdout[-2000:], p.stderr[-2000:]))
        sys.exit(1)
    return p


def synth(scratch, name, *args):
    out = os.path.join(scratch, name + ".msnap")
    ex = os.path.join(scratch, name + ".expect.json")
    fm = os.path.join(scratch, name + ".findmax.json")
    run([sys.executable, SYNTH, out, "--expect", ex, "--find-max", fm] + list(args), 0)
    return out, json.load(open(ex)), json.load(open(fm))


def case_summary(m, scratch):
    snap, ex, _ = synth(scratch, "serving")
    s = json.loads(run([m, "summary", "--json", snap], 0).stdout)
    pools = {("default" if p["pool"] == 0 else str(p["pool"])): p for p in s["pools"]}
    check("one pool per ledger entry", sorted(pools) == sorted(ex["pools"]), str(sorted(pools)))
    for k, want in ex["pools"].items():
        got = pools.get(k, {})
        for key in ("peak_reserved", "peak_allocated", "blocks", "segments"):
            check("pool %s %s" % (k, key), got.get(key) == want[key],
                  "%s, the ledger %s" % (got.get(key), want[key]))
        check("pool %s final_reserved" % k, got.get("final_reserved") == want["reserved"])
        check("pool %s final_allocated" % k, got.get("final_allocated") == want["allocated"])
    g = pools.get(str((1 << 32) | 1), {})
    check("the shared pool is a graph pool, MempoolId_t (0, 1)",
          g.get("kind") == "graph" and g.get("torch_id") == [0, 1], str(g.get("torch_id")))
    check("its top sites are the capture's", [t["label"] for t in g.get("top_sites", [])] ==
          ["model_step (engine.py:42)", "model_step (engine.py:44)"])
    k = s["pool_kinds"]["graph"]
    gp = ex["pools"][str((1 << 32) | 1)]
    check("pool_kinds graph", (k["pools"], k["peak_reserved"], k["peak_allocated"]) ==
          (1, gp["peak_reserved"], gp["peak_allocated"]))
    text = run([m, "summary", snap], 0).stdout
    line = "CUDA graphs: 1 pool, peak %.2f MiB reserved, %.2f MiB allocated" % (
        gp["peak_reserved"] / MiB, gp["peak_allocated"] / MiB)
    check("the text says what the graphs hold", line in text, line)


def case_replay(m, scratch):
    snap, ex, _ = synth(scratch, "serving")
    out = run([m, "replay", snap, "-q", "--bytes", "-c", ""], 0).stdout
    row = [l.split() for l in out.splitlines() if l.startswith("1 ")][0]
    alloc, res = int(row[2]), int(row[3])
    check("peak allocated as recorded", alloc == ex["peak_allocated"], "%d" % alloc)
    check("peak reserved as recorded", res == ex["peak_reserved"],
          "%d, the recording %d" % (res, ex["peak_reserved"]))
    check("which the requests without private pools would not give",
          ex["peak_reserved_without_pools"] != ex["peak_reserved"])
    check("the empty_cache calls after profiling and capture",
          "2 empty_cache calls read from the trace" in out)


def grow_json(m, snap, *args):
    p = run([m, "replay", snap, "-q", "--grow", "allocate_kv_cache", "--find-max", "--json"] +
            list(args), 0)
    return json.loads(p.stdout)


def case_grow(m, scratch):
    snap, ex, fm = synth(scratch, "serving", "--find-max-totals", "8192,7000,6000,6144")
    for total in ("8192", "7000", "6000"):
        args = [] if total == "8192" else ["-m", total + "M"]
        d = grow_json(m, snap, *args)
        check("one answer for one config and site at %s MiB" % total, len(d) == 1)
        d = d[0]
        want = fm[total]
        check("at %s MiB: the largest KV that runs (%d) <= the model's %d < the first that "
              "fails (%d)" % (total, d["max_bytes"], want, d["fails_at_bytes"]),
              d["max_bytes"] <= want < d["fails_at_bytes"])
        check("at %s MiB: a step of at most 4 MiB" % total,
              d["fails_at_bytes"] - d["max_bytes"] <= 4 * MiB,
              "%d" % (d["fails_at_bytes"] - d["max_bytes"]))
        shared = fm[total + "/without_pools"]
        check("at %s MiB: without private pools the answer (%d) would lie outside" %
              (total, shared), not (d["max_bytes"] <= shared < d["fails_at_bytes"]))
    # a memory fraction: 0.75 of 8 GiB = 6 GiB allowed
    d = grow_json(m, snap, "-c", "memory_fraction:0.75")[0]
    want = fm["6144"]
    check("memory_fraction:0.75: %d <= %d < %d" % (d["max_bytes"], want, d["fails_at_bytes"]),
          d["max_bytes"] <= want < d["fails_at_bytes"])
    check("the limit is the fraction", d["limit"] == int(0.75 * 8192 * MiB), str(d["limit"]))
    keys = {"config", "site", "max_bytes", "fails_at_bytes", "first_failure"}
    check("--json has config, site, max_bytes, fails_at_bytes, first_failure",
          keys <= set(d), str(sorted(set(d))))
    f = d["first_failure"]
    check("the first failure names a request, its size and site",
          f and f["site"] and f["request"] > 0 and f["size"] > 0, str(f))
    check("the site is the label", d["site"] == "allocate_kv_cache (engine.py:30)", d["site"])
    # two configs: two answers, and the text
    d = grow_json(m, snap, "-c", "", "-c", "memory_fraction:0.75")
    check("two configs, two answers", [x["config"] for x in d] == ["", "memory_fraction:0.75"])
    text = run([m, "replay", snap, "-q", "--grow", "allocate_kv_cache", "--find-max"], 0).stdout
    check("the text says up to what size it runs", "runs to the end up to" in text and
          "just past it" in text, text[-300:])


def case_grow_sizes(m, scratch):
    snap, ex, fm = synth(scratch, "serving")
    best = fm["8192"]
    p = run([m, "replay", snap, "-q", "--bytes", "--grow", "engine.py:30=%d" % best], (0,))
    check("at the model's largest KV: runs to the end, exit 0", "runs to the end" in p.stdout,
          p.stdout[-300:])
    p = run([m, "replay", snap, "-q", "--grow", "allocate_kv_cache (engine.py:30)=%d" %
             (best + 2 * MiB), "--json"], (1,))
    d = json.loads(p.stdout)[0]
    check("2 MiB more: an OOM, exit 1", d["oom"] and d["bytes"] == best + 2 * MiB, str(d))
    check("and the request that fails is named", d["first_failure"]["site"] != "", str(d))
    # FILE:LINE, a path's tail, the function and the label name one site
    for spec in ("engine.py:30", "/srv/engine.py:30", "srv/engine.py:30", "allocate_kv_cache"):
        p = run([m, "replay", snap, "-q", "--grow", spec + "=1G", "--json"], (0, 1))
        d = json.loads(p.stdout)[0]
        check("%s names the KV cache" % spec, d["site"] == "allocate_kv_cache (engine.py:30)")
    # two sites: one common scale (the weights and the KV, each as recorded x S)
    p = run([m, "replay", snap, "-q", "--grow", "allocate_kv_cache", "--grow", "engine.py:12",
             "--find-max", "--json"], 0)
    d = json.loads(p.stdout)
    check("two sites, one entry each", [x["site"] for x in d] ==
          ["allocate_kv_cache (engine.py:30)", "<module> (engine.py:12)"])
    if len(d) == 2:
        kv, w = d
        check("one scale: weights / KV as recorded (256 MiB / 4 GiB)",
              abs(w["max_bytes"] * 16 - kv["max_bytes"]) <= 16, "%d %d" % (w["max_bytes"], kv["max_bytes"]))


def case_predict(m, scratch):
    b4, _, _ = synth(scratch, "b4", "--batch", "4")
    b6, _, fm = synth(scratch, "b6", "--batch", "6", "--find-max-totals", "8192",
                      "--find-max-batches", "16,32")
    p = run([m, "predict", b4 + "@4", b6 + "@6", "--at", "16,32", "--grow", "allocate_kv_cache",
             "--find-max", "--json", "-p", "batch"], 0)
    d = json.loads(p.stdout)
    check("one answer per value", [x["at"] for x in d] == [16, 32], str([x.get("at") for x in d]))
    for x in d:
        want = fm["8192@%d" % x["at"]]
        check("at batch %d: %d <= the model's %d < %d" % (x["at"], x["max_bytes"], want,
                                                          x["fails_at_bytes"]),
              x["max_bytes"] <= want < x["fails_at_bytes"])
    p = run([m, "predict", b4 + "@4", b6 + "@6", "--at", "32", "--grow",
             "allocate_kv_cache=%d" % (fm["8192@32"] + 4 * MiB)], (1,))
    check("predict --grow KV=SIZE past the largest: out of memory, exit 1",
          "out of memory" in p.stdout, p.stdout[-300:])


def case_categories(m, scratch):
    # the second recording frees everything after the last step, as a
    # Python program's teardown does before the file ends (on the H200 the
    # engine's plain-tensor weights were counted as inputs then)
    for name, args in (("serving", []), ("serving-teardown", ["--teardown",
                                                             "--find-max-totals", "8192"])):
        snap, ex, _ = synth(scratch, name, *args)
        s = json.loads(run([m, "summary", "--json", snap], 0).stdout)
        cats = {i["category"]: i for c in s["categories"] for i in c["items"]}
        want = ex["categories_peak"]
        for k, v in want.items():
            got = cats.get(k, {}).get("peak")
            check("%s: %s: its peak is the engine's (%d)" % (name, k, v), got == v, str(got))
        check("%s: no weights or KV counted as inputs" % name,
              cats.get("inputs", {}).get("peak", 0) < want["kv_cache"], str(cats.get("inputs")))


def case_lora(m, scratch):
    snap = os.path.join(scratch, "lora.msnap")
    ex = os.path.join(scratch, "lora.json")
    run([sys.executable, os.path.join(HERE, "synth_lora.py"), snap, ex], 0)
    want = json.load(open(ex))
    s = json.loads(run([m, "summary", "--json", snap], 0).stdout)
    cats = {i["category"]: i["peak"] for c in s["categories"] for i in c["items"]}
    for k, v in want.items():
        check("LoRA %s: %d" % (k, v), cats.get(k) == v, str(cats.get(k)))


def short(b):
    """msnap_size_text's figure for MiB and GiB (the legends write sizes as
    the text does: 384.00 MiB)."""
    return "%.2f MiB" % (b / MiB) if b < 1 << 30 else "%.2f GiB" % (b / (1 << 30))


def case_render(m, scratch):
    snap, ex, _ = synth(scratch, "serving")
    prefix = os.path.join(scratch, "pools")
    run([m, "render", snap, "--by", "pool", "--format", "svg", "-o", prefix], 0)
    svg = open(prefix + "-timeline.svg").read()
    gp = ex["pools"][str((1 << 32) | 1)]
    for band, peak in (("graph pool (0, 1)", gp["peak_allocated"]),
                       ("graph pool (0, 1) cache", gp["peak_cache"])):
        want = "%s  peak %s" % (band, short(peak))
        check("the legend: %s" % want, want in svg)
        check("a band drawn for %s" % band, 'data-label="%s"' % band in svg)
    check("the default pool's band", 'data-label="default pool"' in svg)
    check("the title says by pool", "GPU memory by pool over time" in svg)


def case_flame(m, scratch):
    snap, ex, _ = synth(scratch, "serving")
    gp = ex["pools"][str((1 << 32) | 1)]
    for pool, want in (("graph", gp["allocated"]), ("0,1", gp["allocated"]),
                       (str((1 << 32) | 1), gp["allocated"]),
                       ("default", ex["pools"]["default"]["allocated"]),
                       ("private", gp["allocated"]), ("mempool", 0)):
        out = os.path.join(scratch, "flame-%s.svg" % pool.replace(",", "_"))
        p = run([m, "flame", snap, "--at", "end", "--pool", pool, "-o", out], 0)
        svg = open(out).read()
        ok = ("all: " in svg and "(%d bytes)" % want in svg) if want else \
            ("live at the end" in svg and "): 0 B" in svg and "all: " not in svg)
        check("flame --pool %s: the root holds the pool's blocks at the end (%d)" % (pool, want),
              ok)
    p = run([m, "flame", snap, "--pool", "nope"])
    check("flame --pool nope: one line, exit 2", p.returncode == 2 and
          p.stderr.count("\n") == 1 and "--pool wants" in p.stderr, p.stderr)


def case_sqlite(m, scratch):
    import sqlite3
    snap, ex, _ = synth(scratch, "serving")
    db = os.path.join(scratch, "serving.db")
    if os.path.exists(db):
        os.unlink(db)
    p = run([m, "export", "--format", "sqlite", "-o", db, snap])
    if p.returncode and "sqlite" in p.stderr.lower() and "not" in p.stderr:
        print("skip: this build has no SQLite export")
        return
    c = sqlite3.connect(db)
    rows = {("default" if r[0] == 0 else str(r[0])): r for r in
            c.execute("SELECT pool, kind, peak_reserved, peak_allocated, final_reserved,"
                      " final_allocated, torch_first, torch_second FROM pools")}
    for k, want in ex["pools"].items():
        r = rows.get(k)
        check("pools row %s" % k, r is not None and r[2:6] == (want["peak_reserved"],
              want["peak_allocated"], want["reserved"], want["allocated"]), str(r))
    g = rows.get(str((1 << 32) | 1))
    check("the graph pool's kind and MempoolId_t", g and g[1] == "graph" and g[6:] == (0, 1),
          str(g))
    live = dict(c.execute("SELECT pool, SUM(size) FROM allocations WHERE layer = 'block'"
                          " AND t_free IS NULL GROUP BY pool").fetchall())
    check("allocations.pool: the blocks live at the end per pool",
          live == {0: ex["pools"]["default"]["allocated"],
                   (1 << 32) | 1: ex["pools"][str((1 << 32) | 1)]["allocated"]}, str(live))


def case_usage(m, scratch):
    snap, _, _ = synth(scratch, "serving")
    for args, says in (
            (["--grow", "nosuchsite", "--find-max"], "no allocation site matches"),
            (["--grow", "allocate_kv_cache"], "give its size"),
            (["--grow", "allocate_kv_cache=lots"], "is not a size"),
            (["--find-max"], "go with --grow"),
            (["--grow", "allocate_kv_cache=1G", "--suggest"], "--grow takes one snapshot"),
            (["--grow", "=1G"], "give a site")):
        p = run([m, "replay", snap] + args)
        err = p.stderr.strip()
        check("replay %s: exit 2, one line: %s" % (" ".join(args), says),
              p.returncode == 2 and says in err and "\n" not in err, "%d %s" % (p.returncode, err))


def main():
    m, scratch, case = sys.argv[1:4]
    os.makedirs(scratch, exist_ok=True)
    globals()["case_" + case](m, scratch)
    if FAILS:
        print("%d failed" % len(FAILS))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

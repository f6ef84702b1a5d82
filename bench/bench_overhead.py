"""What leaving the recorder on costs a PyTorch training step, against plain
runs, with intervals (issue 28).  One invocation runs every configuration
asked for in ABAB order, ROUNDS rounds, each run a process of its own pinned
to the same CPUs (taskset), and prints a table: per configuration the median
step (wall and the launching thread's CPU time), and against plain the
median of the per-round ratios with a 95% bootstrap interval.

The workload is the README's kind of loop: a transformers LlamaForCausalLM
(8 layers, hidden 1024, random weights, no download), bf16 autocast, AdamW,
batch 8 x 512 tokens; per process 5 warm-up steps, then 20 timed steps
(torch.cuda.synchronize() after each).  --workload compile wraps the model
in torch.compile (more warm-up steps: they compile).

Configurations (--configs, comma-separated; NAME@BUILD takes memsnap from
--build BUILD=MEMSNAP, default the --memsnap one):

  plain           no recorder
  stub-empty      LD_PRELOAD of a library that does nothing and needs libc
                  only (bench/libstub_empty.so)
  stub-deps       the same, needing the libraries libmemsnap.so used to
                  need (libunwind, elfutils, zstd, cJSON: bench/libstub_deps.so)
  census          stub-empty, with bench/libcensus_preload.so preloaded and
                  named as the NVTX injection: counts the NVTX calls, C++
                  throws and backtrace() calls per step (printed), and times
                  what a do-nothing NVTX injection costs
  loaded-off      LD_PRELOAD=libmemsnap.so MEMSNAP_DISABLE=1
  driver          memsnap run with MEMSNAP_TORCH=off (driver level only)
  driver-nonvtx   the same with MEMSNAP_NVTX=off
  default         memsnap run with its defaults
  default-nonvtx  the same with MEMSNAP_NVTX=off
  default-mono    the same with MEMSNAP_CLOCK=monotonic (clock_gettime stamps)
  nostack         memsnap run --stack-depth 0
  ring            memsnap run --mode ring (the writer keeps the events in
                  memory: no file written as the program runs)
  nocompress      memsnap run with MEMSNAP_COMPRESS=none (no zstd)
  nonodes         memsnap run with MEMSNAP_TORCH_NODES=0 (the plugin looks up
                  no autograd state)
  writerfar       memsnap run with the writer thread on CPU 15 alone
                  (MEMSNAP_WRITER_CPUS; bench_lockstep.py --writer-cpus)
  nowatch         memsnap run with MEMSNAP_PYTHON_WATCH=0 (no code watcher:
                  every frame's co_version read, the head lock on every
                  thread; the Python walk before 2026-12-07)
  plain+record    plain, then in the same process memsnap.record() (the
                  Python package of --pythonpath) around blocks of steps,
                  recorded and not, alternately: the plain figure is the
                  first block, before memsnap is imported
  default-ab      memsnap run with its defaults, steps alternately with and
                  without the recorder's PyTorch events (the plugin muted:
                  memsnap_torch_bench_mute), side by side in one process
  record-ab       the same inside memsnap.record()
  default-levels  memsnap run with its defaults, steps at four levels in
                  turn, side by side in one process (each cycle of four
                  steps in a rotated order): full, stacks off
                  (memsnap_bench_stacks(0)), the plugin's work alone (mute
                  2: sizes and autograd state, no recorder call) and muted
                  (mute 1: the tracker returns at once); each level against
                  muted, per cycle: what each part of an event costs in the
                  step itself, where its caches are as cold as they are
  hist-python     torch.cuda.memory._record_memory_history(stacks='python')
  pydepthN        memsnap run with MEMSNAP_PYTHON_DEPTH=N (the Python walk
                  stops at N frames: its cost a frame, against the defaults'
                  64 and nostack's none)

Usage (GPU machine; memsnap built, `memsnap torch-setup` done first):
  python3 bench/bench_overhead.py --memsnap build/bin/memsnap --rounds 10 \\
      --configs plain,default,driver,loaded-off --cpus 2-9 [--out results.json]

Prints one line per process as it goes, then the markdown table.
"""
import argparse
import json
import os
import re
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(a):
    """One process: train; print 'RESULT {json}'."""
    import ctypes
    import torch

    mode = a.worker
    if mode == "hist-python":
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000)
    from recorder_events import events
    lib = ctypes.CDLL(None)
    census = getattr(lib, "census_read", None)

    def census_now():
        buf = (ctypes.c_uint64 * 256)()
        n = census(buf, 256)
        return list(buf[:n])

    def steal():
        """The machine's steal time so far, ms (/proc/stat, all CPUs): time
        the host gave this VM's CPUs to someone else."""
        with open("/proc/stat") as f:
            v = f.readline().split()
        return int(v[8]) * 1000 / os.sysconf("SC_CLK_TCK") if len(v) > 8 else 0

    def main_cpu():
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])

    def switches():
        v = {}
        with open("/proc/thread-self/status") as f:
            for line in f:
                k, _, val = line.partition(":")
                if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                    v[k] = int(val)
        return v

    from train_workload import make_step, pin_threads
    step, _ = make_step(a.workload)
    dev = torch.device("cuda")

    def calib():
        """A fixed piece of pure-Python work (~1-2 ms) that nothing of the
        recorder touches: how fast this process runs right now.  The step
        divided by it cancels what makes one process (or one moment) of the
        GPU machine slower than another, which the recorder does not cause."""
        t0 = time.perf_counter()
        v = 0
        for i in range(20000):
            v += i * i
        return (time.perf_counter() - t0) * 1e3

    def block(n):
        wall, cpu, norm = [], [], []
        for _ in range(n):
            t0, c = time.perf_counter(), time.thread_time()
            step()
            cpu.append((time.thread_time() - c) * 1e3)   # launching: before the final wait
            torch.cuda.synchronize()
            wall.append((time.perf_counter() - t0) * 1e3)
            norm.append(wall[-1] / calib())
        return wall, cpu, norm

    def pin():
        if not a.no_pin:
            pin_threads(sorted(os.sched_getaffinity(0)))

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    pin()
    calib()
    e0, s0 = events(), switches()
    c0 = census_now() if census else None
    st0 = steal()
    wall, cpu, norm = block(a.steps)
    e1, s1 = events(), switches()
    st1 = steal()
    rec_blocks = []
    if mode in ("default-ab", "record-ab"):
        # Steps with and without the recorder's PyTorch events, alternately,
        # in this one process (the plugin muted: its tracker returns at once,
        # PyTorch still builds its trace entry): pairs of adjacent steps
        # share the machine's state of the moment, which cross-process
        # comparisons do not (docs/benchmarks.md).
        import glob
        rec = None
        if mode == "record-ab":
            import memsnap
            rec = memsnap.record(os.path.join(a.tmp, "record-ab-%d.msnap" % os.getpid()))
            rec.__enter__()
            for _ in range(2):
                step()
            torch.cuda.synchronize()
        plug = glob.glob(os.path.expanduser("~/.cache/memsnap/torch/libmemsnap_torch-*.so"))
        mute = ctypes.CDLL(plug[0]).memsnap_torch_bench_mute
        on, off = [], []
        for i in range(2 * a.steps):
            muted = (i // 2 + i) % 2   # on off off on on off off on ...: ABBA pairs
            mute(muted)
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            (off if muted else on).append((time.perf_counter() - t0) * 1e3)
        mute(0)
        if rec is not None:
            rec.__exit__(None, None, None)
        out_ab = {"on_ms": on, "off_ms": off,
                  "pair_ratios": [x / y - 1 for x, y in zip(on, off)]}
    else:
        out_ab = None
    out_lv = None
    if mode == "default-levels":
        import glob
        plug = glob.glob(os.path.expanduser("~/.cache/memsnap/torch/libmemsnap_torch-*.so"))
        mute = ctypes.CDLL(plug[0]).memsnap_torch_bench_mute
        stacks = lib.memsnap_bench_stacks
        names = ["full", "nostack", "plugin", "muted"]
        sets = {"full": (0, 1), "nostack": (0, 0), "plugin": (2, 1), "muted": (1, 1)}
        times = {n: [] for n in names}
        cycles = []
        for c in range(a.steps):
            k = c % 4
            order = names[k:] + names[:k]
            if c % 8 >= 4:
                order = order[::-1]
            cyc = {}
            for n in order:
                m, st = sets[n]
                mute(m)
                stacks(st)
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                cyc[n] = (time.perf_counter() - t0) * 1e3
                times[n].append(cyc[n])
            cycles.append(cyc)
        mute(0)
        stacks(1)
        out_lv = {"level_ms": times,
                  "level_ratios": {n: [cy[n] / cy["muted"] - 1 for cy in cycles]
                                   for n in names if n != "muted"}}
    if mode == "plain+record":
        # memsnap.record() in this process, after the plain block: blocks of
        # steps recorded and not, alternately (R P R), against the plain
        # block before it and the unrecorded one between (the plugin stays
        # attached once attached: PyTorch cannot detach a tracker)
        import memsnap
        for k in range(3):
            if k % 2 == 0:
                with memsnap.record(os.path.join(a.tmp, "record-%d-%d.msnap" % (os.getpid(), k))):
                    for _ in range(2):
                        step()
                    torch.cuda.synchronize()
                    rec_blocks.append(("record",) + block(a.steps))
            else:
                rec_blocks.append(("between",) + block(a.steps))
    # Two probes of one kind of call each, after the steps: an in-place add
    # on a small tensor (a kernel launch and nothing else: what a
    # process-wide cost per launch would show in) and an empty + del through
    # the caching allocator (one block: alloc, free requested, free
    # completed; what the recorder pays per PyTorch trace entry, times 3).
    x = torch.zeros(16, device=dev)
    probe = {}
    for name, fn in (("launch_us", lambda: x.add_(1)),
                     ("block_us", lambda: torch.empty(4096, device=dev))):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        best = None
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(2000):
                fn()
            dt = (time.perf_counter() - t0) / 2000 * 1e6
            torch.cuda.synchronize()
            best = dt if best is None else min(best, dt)
        probe[name] = best
    med = statistics.median
    out = {"mode": mode, "wall_ms": med(wall), "cpu_ms": med(cpu), "norm": med(norm),
           "steps_wall_ms": wall, "steps_norm": norm, "steal_ms_per_step": (st1 - st0) / a.steps,
           "main_cpu": main_cpu(),
           "launch_us": probe["launch_us"], "block_us": probe["block_us"],
           "events_per_step": (e1 - e0) / a.steps,
           "vcsw_per_step": (s1["voluntary_ctxt_switches"] - s0["voluntary_ctxt_switches"]) / a.steps,
           "ivcsw_per_step": (s1["nonvoluntary_ctxt_switches"] -
                              s0["nonvoluntary_ctxt_switches"]) / a.steps}
    if census:
        c1 = census_now()
        out["census_per_step"] = {census_name(i): (c1[i] - c0[i]) / a.steps
                                  for i in range(len(c1)) if c1[i] != c0[i]}
        out["census_total"] = {census_name(i): c1[i] for i in range(len(c1)) if c1[i]}
    if out_lv:
        out.update(out_lv)
        out["level_medians"] = {n: statistics.median(v) for n, v in out_lv["level_ratios"].items()}
    if out_ab:
        out.update(out_ab)
        out["ab_median"] = statistics.median(out_ab["pair_ratios"])
    for name, w, c, n in rec_blocks:
        out.setdefault(name + "_wall_ms", []).append(med(w))
        out.setdefault(name + "_norm", []).append(med(n))
    if rec_blocks:
        out["rec_wall_ms"] = med(out["record_wall_ms"])
        out["rec_norm"] = med(out["record_norm"])
    print("RESULT " + json.dumps(out), flush=True)


# NVTX callback ids (nvtxDetail/nvtxTypes.h) for census_read()'s slots.
NVTX_NAMES = {
    1: ["", "MarkEx", "MarkA", "MarkW", "RangeStartEx", "RangeStartA", "RangeStartW",
        "RangeEnd", "RangePushEx", "RangePushA", "RangePushW", "RangePop", "NameCategoryA",
        "NameCategoryW", "NameOsThreadA", "NameOsThreadW"],
    5: ["", "DomainMarkEx", "DomainRangeStartEx", "DomainRangeEnd", "DomainRangePushEx",
        "DomainRangePop", "DomainResourceCreate", "DomainResourceDestroy",
        "DomainNameCategoryA", "DomainNameCategoryW", "DomainRegisterStringA",
        "DomainRegisterStringW", "DomainCreateA", "DomainCreateW", "DomainDestroy",
        "NameCategory", "NameOsThread"],
}
NVTX_MODULES = {1: "core", 2: "cuda", 3: "opencl", 4: "cudart", 5: "core2", 6: "sync"}


def census_name(i):
    if i == 7 * 32:
        return "c++ throw"
    if i == 7 * 32 + 1:
        return "backtrace()"
    m, k = divmod(i, 32)
    names = NVTX_NAMES.get(m, [])
    return "nvtx %s.%s" % (NVTX_MODULES.get(m, m), names[k] if k < len(names) else k)


def command(name, a, builds):
    """(argv prefix, extra env) for configuration name."""
    base, _, build = name.partition("@")
    if build and build not in builds:
        raise SystemExit("bench_overhead.py: %s: no --build %s=MEMSNAP" % (name, build))
    memsnap = builds.get(build or "", a.memsnap)
    bindir = os.path.dirname(os.path.abspath(memsnap))
    lib = os.path.join(bindir, "..", "lib", "libmemsnap.so")
    if not os.path.exists(lib):                          # an installed tree
        lib = os.path.join(bindir, "..", "lib", "memsnap", "libmemsnap.so")
    lib = os.path.realpath(lib)
    stubs = os.path.realpath(a.stubs or os.path.join(bindir, "..", "bench"))
    run = [memsnap, "run", "-q", "--no-torch-build", "-o",
           os.path.join(a.tmp, "%s-%%p.msnap" % base)]
    env = {}
    if base == "plain" or base == "hist-python":
        return [], env
    if base == "stub-empty":
        return [], {"LD_PRELOAD": os.path.join(stubs, "libstub_empty.so")}
    if base == "stub-deps":
        return [], {"LD_PRELOAD": os.path.join(stubs, "libstub_deps.so")}
    if base == "census":
        c = os.path.join(stubs, "libcensus_preload.so")
        return [], {"LD_PRELOAD": c, "NVTX_INJECTION64_PATH": c}
    if base == "loaded-off":
        return [], {"LD_PRELOAD": lib, "MEMSNAP_DISABLE": "1"}
    if base in ("plain+record", "record-ab"):
        return [], {"PYTHONPATH": a.pythonpath} if a.pythonpath else {}
    if base in ("default-ab", "default-levels"):
        return run + ["--"], env
    if base.startswith("driver"):
        env["MEMSNAP_TORCH"] = "off"
    if base.endswith("-nonvtx"):
        env["MEMSNAP_NVTX"] = "off"
    if base.endswith("-mono"):
        env["MEMSNAP_CLOCK"] = "monotonic"
    if base == "nostack":
        run += ["--stack-depth", "0"]
    if re.fullmatch(r"pydepth[0-9]+", base):
        # the Python stack cut at N frames (the walk stops there): whether a
        # capture's cost grows with the frames walked or is its own
        env["MEMSNAP_PYTHON_DEPTH"] = base[7:]
        return run + ["--"], env
    if base == "ring":
        run += ["--mode", "ring"]
    if base == "nocompress":
        env["MEMSNAP_COMPRESS"] = "none"
    if base == "nonodes":
        env["MEMSNAP_TORCH_NODES"] = "0"
    if base == "writerfar":
        env["MEMSNAP_WRITER_CPUS"] = getattr(a, "writer_cpus", None) or "15"
    if base == "nowatch":
        env["MEMSNAP_PYTHON_WATCH"] = "0"
    if base == "tlsie":
        # the defaults with a plugin built with MEMSNAP_TORCH_TLS_IE (the
        # thread's state in initial-exec TLS), from the folder that
        # MEMSNAP_BENCH_PLUGIN_IE_DIR names (tests/gpu/lease_all.sh builds it)
        d = os.environ.get("MEMSNAP_BENCH_PLUGIN_IE_DIR")
        if not d:
            raise SystemExit("bench_overhead.py: tlsie needs MEMSNAP_BENCH_PLUGIN_IE_DIR")
        env["MEMSNAP_TORCH_PLUGIN_DIR"] = d
        return run + ["--"], env
    if re.fullmatch(r"q[0-9]+k", base):
        # the queue's capacity, in 1024 events (65536 by default, 128 bytes
        # each): whether a queue whose slots stay in the caches costs an
        # event less than one written over every 8 MiB
        env["MEMSNAP_QUEUE_EVENTS"] = str(int(base[1:-1]) * 1024)
        return run + ["--"], env
    if base in ("driver", "driver-nonvtx", "default", "default-nonvtx", "default-mono",
                "nostack", "ring", "nocompress", "nonodes", "writerfar", "nowatch"):
        return run + ["--"], env
    raise SystemExit("bench_overhead.py: unknown configuration %r" % name)


def one_per_core(spec):
    """The CPUs of a taskset list, one logical CPU per physical core (the
    first of its siblings), so that two busy threads of one process never
    share a core's pipelines."""
    cpus = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    taken, seen = [], set()
    for c in cpus:
        try:
            with open("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list" % c) as f:
                sib = f.read().strip()
        except OSError:
            sib = str(c)
        if sib not in seen:
            seen.add(sib)
            taken.append(c)
    return ",".join(str(c) for c in taken)


def bootstrap(ratios, n=10000, seed=1):
    """Median of ratios and its 95% bootstrap interval (resampling rounds)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(ratios, k=len(ratios))) for _ in range(n))
    return statistics.median(ratios), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def table(results, configs, key):
    """Markdown rows for figure key: per config median, and vs plain per round."""
    rows = []
    base = results.get("plain") or results.get("plain+record")
    for c in configs:
        vals = [r[key] for r in results[c]]
        med = statistics.median(vals)
        rel = ""
        if base and not c.startswith("plain"):
            n = min(len(vals), len(base))
            ratios = [vals[i] / base[i][key] - 1 for i in range(n)]
            m, lo, hi = bootstrap(ratios)
            rel = "%+.2f%% (%+.2f .. %+.2f)" % (100 * m, 100 * lo, 100 * hi)
        per = " ".join("%.2f" % v for v in vals)
        ev = statistics.median(r["events_per_step"] for r in results[c])
        rows.append("| %s | %.3f | %s | %s | %.0f |" % (c, med, rel, per, ev))
    return rows


def report(results, configs, rounds, steps):
    """Prints the tables of a run's results (also for a saved --out file:
    --report FILE)."""
    rec = results.get("plain+record")
    if rec:
        print("\nmemsnap.record() in the same process as plain (%d rounds): blocks of %d steps, "
              "plain first, then recorded / not recorded / recorded; the recorded blocks' "
              "median against the plain block (95%% bootstrap interval over rounds):" %
              (len(rec), steps))
        for key in ("wall_ms", "norm"):
            if "rec_" + key not in rec[0]:
                continue
            ratios = [r["rec_" + key] / r[key] - 1 for r in rec]
            m, lo, hi = bootstrap(ratios)
            betw = [statistics.median(r["between_" + key]) / r[key] - 1 for r in rec]
            mb, lb, hb = bootstrap(betw)
            print("  %-8s record %+.2f%% (%+.2f .. %+.2f); unrecorded block between, plugin "
                  "attached: %+.2f%% (%+.2f .. %+.2f)" %
                  (key, 100 * m, 100 * lo, 100 * hi, 100 * mb, 100 * lb, 100 * hb))
    for c in configs:
        ab = [r for r in results[c] if "pair_ratios" in r]
        if not ab:
            continue
        pairs = [x for r in ab for x in r["pair_ratios"]]
        per = [r["ab_median"] for r in ab]
        m, lo, hi = bootstrap(per)
        on = statistics.median(x for r in ab for x in r["on_ms"])
        off = statistics.median(x for r in ab for x in r["off_ms"])
        print("\n%s: steps with the recorder's PyTorch events against steps without, side by "
              "side in %d processes (%d pairs): median step %.3f ms on, %.3f ms off; per "
              "process the median of its pairs, then over processes: %+.2f%% (95%% bootstrap "
              "interval %+.2f .. %+.2f); all pairs pooled: %+.2f%%" %
              (c, len(ab), len(pairs), on, off, 100 * m, 100 * lo, 100 * hi,
               100 * statistics.median(pairs)))
    for c in configs:
        lv = [r for r in results[c] if "level_ratios" in r]
        if not lv:
            continue
        ev = statistics.median(r["events_per_step"] for r in lv)
        print("\n%s: steps at each level against muted steps (the tracker returns at once), "
              "side by side in %d processes, %.0f recorder events a step; per process the "
              "median of its cycles, then over processes (95%% bootstrap interval):" %
              (c, len(lv), ev))
        print("| level | median step, ms | vs muted | pooled cycles | per event, ns |")
        print("|---|---|---|---|---|")
        mut = statistics.median(x for r in lv for x in r["level_ms"]["muted"])
        for n in ("full", "nostack", "plugin"):
            per = [r["level_medians"][n] for r in lv]
            m, lo, hi = bootstrap(per)
            pooled = statistics.median(x for r in lv for x in r["level_ratios"][n])
            ms = statistics.median(x for r in lv for x in r["level_ms"][n])
            print("| %s | %.3f | %+.2f%% (%+.2f .. %+.2f) | %+.2f%% | %.0f |" %
                  (n, ms, 100 * m, 100 * lo, 100 * hi, 100 * pooled,
                   m * mut * 1e6 / ev if ev else 0))
        print("| muted | %.3f | | | |" % mut)
    for key, what in (("norm", "step wall time / the same process's pure-Python "
                               "calibration (dimensionless)"),
                      ("wall_ms", "step wall time, ms"),
                      ("cpu_ms", "the launching thread's CPU time per step, ms"),
                      ("launch_us", "an in-place add (one launch), us"),
                      ("block_us", "torch.empty + del (one block: 3 trace entries), us")):
        if any(key not in r for c in configs for r in results[c]):
            continue
        print("\n%s, %d rounds (against plain: the median of the per-round ratios, 95%% "
              "bootstrap interval):" % (what, rounds))
        print("| configuration | median | vs plain | per round | events/step |")
        print("|---|---|---|---|---|")
        print("\n".join(table(results, configs, key)))


def save(a, configs, results, rounds):
    """Every process's result so far into --out (after each round: a run cut
    off at its time limit keeps what it measured)."""
    if not a.out:
        return
    with open(a.out, "w") as f:
        json.dump({"configs": configs, "rounds": rounds, "cpus": a.cpus,
                   "workload": a.workload, "results": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memsnap", default="memsnap", help="the memsnap CLI")
    ap.add_argument("--build", action="append", default=[],
                    help="NAME=MEMSNAP: another memsnap, for configurations NAME@... (repeatable)")
    ap.add_argument("--stubs", help="folder of libstub_*.so and libcensus_preload.so "
                                    "(default: the build's bench/)")
    ap.add_argument("--pythonpath", help="PYTHONPATH for the record configuration")
    ap.add_argument("--configs", default="plain,default,driver,loaded-off")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cpus", default="2-9", help="taskset CPU list for every process (one "
                    "logical CPU per physical core of it is taken)")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave the threads where the scheduler puts them inside the CPU list "
                         "(default: after the warm-up the launching thread alone on the first "
                         "CPU, the others on the rest)")
    ap.add_argument("--workload", choices=["train", "compile"], default="train")
    ap.add_argument("--out", help="write every process's result here (JSON)")
    ap.add_argument("--budget", type=int, default=0,
                    help="seconds: start no round that would end past this")
    ap.add_argument("--report", metavar="FILE", help="print the tables of a saved --out file")
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a)
        return 0
    if a.report:
        with open(a.report) as f:
            d = json.load(f)
        report(d["results"], d["configs"], d["rounds"], a.steps)
        return 0
    builds = dict(b.split("=", 1) for b in a.build)
    a.cpus = one_per_core(a.cpus)
    print("cpus (one per physical core): %s" % a.cpus, flush=True)
    configs = a.configs.split(",")
    a.tmp = tempfile.mkdtemp(prefix="bench_overhead-")
    if a.workload == "compile" and a.warmup < 8:
        a.warmup = 8
    results = {c: [] for c in configs}
    started = time.time()
    rounds_done = 0
    for r in range(a.rounds):
        order = configs if r % 2 == 0 else list(reversed(configs))   # ABAB ... BABA
        for c in order:
            pre, extra = command(c, a, builds)
            env = dict(os.environ)
            env.update(extra)
            base = c.partition("@")[0]
            worker_mode = (base if base in ("hist-python", "plain+record", "default-ab",
                                            "record-ab", "default-levels") else "train")
            cmd = (["taskset", "-c", a.cpus] + pre +
                   [sys.executable, os.path.abspath(__file__), "--steps", str(a.steps),
                    "--warmup", str(a.warmup), "--workload", a.workload, "--tmp", a.tmp,
                    "--worker", worker_mode] + (["--no-pin"] if a.no_pin else []))
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
            if p.returncode != 0 or not line:
                print("%s failed (exit %d): %s" % (c, p.returncode, p.stderr.strip()[-1500:]),
                      flush=True)
                return 1
            res = json.loads(line[7:])
            res["round"] = r
            results[c].append(res)
            extra_txt = ""
            if "census_per_step" in res:
                extra_txt = "  census/step " + json.dumps(res["census_per_step"])
            if "ab_median" in res:
                extra_txt += "  on/off pairs: median %+.2f%%" % (100 * res["ab_median"])
            if "rec_wall_ms" in res:
                extra_txt += "  record %.3f ms (norm %.3f)" % (res["rec_wall_ms"], res["rec_norm"])
            print("round %2d %-16s wall %7.3f ms  norm %6.3f  cpu %7.3f ms  launch %.2f us  "
                  "block %.2f us  events/step %5.0f  csw/step %.1f+%.1f  steal/step %.2f ms  "
                  "cpu#%d  (%.0f s)%s" %
                  (r + 1, c, res["wall_ms"], res["norm"], res["cpu_ms"], res["launch_us"],
                   res["block_us"], res["events_per_step"], res["vcsw_per_step"],
                   res["ivcsw_per_step"], res["steal_ms_per_step"], res["main_cpu"],
                   time.time() - started, extra_txt), flush=True)
        rounds_done = r + 1
        save(a, configs, results, rounds_done)
        if a.budget and (time.time() - started) * (r + 2) / (r + 1) > a.budget:
            print("stopping after %d rounds: the next would pass --budget %d s" %
                  (rounds_done, a.budget), flush=True)
            break
    report(results, configs, rounds_done, a.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())

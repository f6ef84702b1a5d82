"""What leaving the recorder on costs a training step against plain
processes, measured in lockstep (issue 28).

Why lockstep.  On the GPU machine a process's steps run at two speeds that
alternate every few hundred milliseconds, and processes started one after
the other differ by +-12% (docs/benchmarks.md): timing each configuration
in a process of its own, one after the other (bench_overhead.py), gives
intervals of +-10-30% against plain, which cannot settle 1%.  Here every
configuration of a round runs at the same time, each in a process of its
own (plain has no recorder at all), and they take turns: one step of each
in a cycle, one process stepping while the others wait on a pipe, so the
steps of a cycle are a few tens of milliseconds apart and share the
machine's speed of the moment.  The order rotates from cycle to cycle.  Per
round the median over cycles of each configuration's step against plain's
step of the same cycle; over rounds (fresh processes each: what differs
between processes is in the interval) the median and a 95% bootstrap
interval.

All measured processes are pinned to the same CPUs (the launching thread
alone on the first, the rest on the others, as bench_overhead.py does),
so each step runs on the same cores whoever takes it.  The next round's
processes import Python and PyTorch meanwhile on other CPUs (--stage-cpus)
and touch the GPU only when the round before has ended.

Configurations are bench_overhead.py's (plain, default, driver,
loaded-off, ...) and:
  record     plain, inside memsnap.record() (the Python package of
             --pythonpath) from the warm-up on
  muted      memsnap run with its defaults, the plugin's tracker muted
             (returns at once) from the timed steps on: the recorder loaded
             and attached, PyTorch building its trace entries, no events
  plugin     the same, the plugin doing its own work (block sizes,
             autograd state) but calling no recorder
  selftime   memsnap run with its defaults, the plugin timing each of its
             calls (the TSC) from the timed steps on: what the plugin and
             the recorder spend in situ, by thread (its steps are a little
             slower than default's: the timing's own cost)

usage (GPU machine, memsnap's plugin built):
  python3 bench/bench_lockstep.py --memsnap DIR/bin/memsnap --pythonpath DIR \\
      --configs plain,default,driver,loaded-off,record,muted --rounds 10 \\
      --cpus 2-9 --stage-cpus 10-15 [--workload train|compile|sim] [--out F.json]
  python3 bench/bench_lockstep.py --report F.json
"""
import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_overhead as bo   # noqa: E402  (command(), bootstrap(), one_per_core())


def cpu_list(spec):
    out = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def threads_cpu():
    """{tid: (name, ns on a CPU so far)} of this process's threads, from
    /proc (schedstat's first field), names with blanks as '_'."""
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % t) as f:
                name = f.read().strip().replace(" ", "_") or "?"
            with open("/proc/self/task/%s/schedstat" % t) as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[int(t)] = (name, ns)
    return out


# ---- the worker: one configuration's process ---------------------------------------

def worker(a):
    import ctypes
    cmd_in = sys.stdin
    mode = a.worker
    stage = sorted(os.sched_getaffinity(0))
    if a.workload != "sim":
        # the imports are the long part of a start: all of them before the
        # round's turn (transformers loads the model's module lazily)
        import torch  # noqa: F401
        from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401
    say("IMPORTED")
    line = cmd_in.readline().split()
    if not line or line[0] != "init":
        return 1
    cpus = cpu_list(line[1])
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), set(cpus))
        except OSError:
            pass
    from recorder_events import events
    from train_workload import make_step, pin_threads
    step, sync = make_step(a.workload)
    rec = None
    if mode == "hist-python" and a.workload != "sim":
        # PyTorch's own history, the anchor (bench_overhead.py's worker does
        # the same); without this the configuration was a second plain
        sys.modules["torch"].cuda.memory._record_memory_history(stacks="python",
                                                                max_entries=1_000_000)
    if mode == "record":
        import memsnap
        rec = memsnap.record(os.path.join(a.tmp, "record-%d.msnap" % os.getpid()))
        rec.__enter__()
    for _ in range(a.warmup):
        step()
    sync()
    mute = None
    if mode in ("muted", "plugin", "selftime"):
        # the plugin this process loaded (a build's own, NAME@BUILD, may
        # lie beside its recorder rather than in the cache)
        with open("/proc/self/maps") as f:
            plug = sorted({ln.split()[-1] for ln in f
                           if os.path.basename(ln.split()[-1]).startswith("libmemsnap_torch-")})
        if not plug:
            say("ERROR no plugin to mute")
            return 1
        lib = ctypes.CDLL(plug[0])
        mute = lib.memsnap_torch_bench_mute
        mute({"muted": 1, "plugin": 2, "selftime": 3}[mode])
        step()
        sync()
    pin_threads(cpus)
    rec_self = None
    if mode == "selftime":
        mute(3)              # the counts from the timed steps on
        try:                 # the recorder's own split: stacks, queue
            rec_self = ctypes.CDLL(None)
            rec_self.memsnap_bench_selftime(1)
        except AttributeError:
            rec_self = None
    e0 = events()
    th0 = threads_cpu()
    n = 0
    say("READY")
    for line in cmd_in:
        if line.strip() != "step":
            break
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        c1 = time.thread_time()
        sync()
        t1 = time.perf_counter()
        n += 1
        say("T %.6f %.6f" % ((t1 - t0) * 1e3, (c1 - c0) * 1e3))
    ev = (events() - e0) / n if n else 0
    th1 = threads_cpu()
    per = {}
    for tid, (name, ns) in th1.items():
        d = ns - th0.get(tid, (name, 0))[1]
        if d > 0 and n:
            per[name] = per.get(name, 0) + d / n / 1e6
    selft = ""
    if mode == "selftime":
        # what the plugin and the recorder spent in situ, by thread
        buf = ctypes.create_string_buffer(1 << 16)
        lib.memsnap_torch_bench_selftime.restype = ctypes.c_size_t
        if lib.memsnap_torch_bench_selftime(buf, len(buf)):
            st = json.loads(buf.value.decode())
            st["steps"] = n
            if rec_self is not None:
                rec_self.memsnap_bench_selftime_read.restype = ctypes.c_size_t
                if rec_self.memsnap_bench_selftime_read(buf, len(buf)):
                    st["recorder"] = json.loads(buf.value.decode())
            selft = " " + json.dumps(st, separators=(",", ":"))
    say("END %.1f %s%s" % (ev, json.dumps({k: round(v, 4) for k, v in per.items()},
                                           separators=(",", ":")), selft))
    # the exit (the recording's symbols and trailer: seconds) on the
    # staging CPUs, out of the next round's way; nobody waits for it
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), set(stage))
        except OSError:
            pass
    if mute:
        mute(0)
    if rec is not None:
        rec.__exit__(None, None, None)
    return 0


# ---- the coordinator -----------------------------------------------------------------

class Proc:
    """One configuration's worker process and its line protocol."""

    def __init__(self, name, argv, env):
        self.name = name
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.buf = b""
        self.err = []
        threading.Thread(target=self._drain_err, daemon=True).start()

    def _drain_err(self):
        for line in self.p.stderr:
            self.err.append(line.decode(errors="replace"))
            del self.err[:-40]

    def send(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def _line(self, end):
        """The next line of the worker's stdout (unbuffered reads: select
        sees what the pipe holds, not what a reader has buffered), None at
        its end; raises past end."""
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0:
                raise TimeoutError
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def expect(self, word, timeout):
        """The next line starting with word (its other fields), or raise."""
        end = time.time() + timeout
        while True:
            try:
                line = self._line(end)
            except TimeoutError:
                raise RuntimeError("%s: no %s in %.0f s" % (self.name, word, timeout))
            if line is None:
                self.p.wait()
                raise RuntimeError("%s exited %s before %s: %s" % (
                    self.name, self.p.returncode, word, "".join(self.err)[-1500:]))
            f = line.split()
            if f and f[0] == word:
                return f[1:]
            if f and f[0] == "ERROR":
                raise RuntimeError("%s: %s" % (self.name, line.strip()))

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def start_round(a, configs, builds):
    procs = []
    for c in configs:
        base, at, build = c.partition("@")
        if base == "record" and at:
            raise SystemExit("bench_lockstep.py: %s: record takes the Python package of "
                             "--pythonpath, not another build's" % c)
        if base in ("record", "muted", "plugin", "selftime"):
            pre, extra = bo.command({"record": "plain+record", "muted": "default",
                                     "plugin": "default", "selftime": "default"}[base]
                                    + at + build, a, builds)
        else:
            pre, extra = bo.command(c, a, builds)
        env = dict(os.environ)
        env.update(extra)
        if base == "record" and a.pythonpath:
            env["PYTHONPATH"] = a.pythonpath
        argv = (["taskset", "-c", a.stage_cpus] + pre +
                [sys.executable, os.path.abspath(__file__), "--worker", base,
                 "--workload", a.workload, "--warmup", str(a.warmup), "--tmp", a.tmp])
        procs.append(Proc(c, argv, env))
    return procs


def run_round(a, configs, procs, r):
    """Inits the round's processes (imported), runs the cycles; returns its record."""
    t_init = time.time()
    for p in procs:
        p.send("init " + a.cpus)
    for p in procs:
        p.expect("READY", 600)
    t_ready = time.time()
    n = len(configs)
    cycles = []
    for c in range(a.cycles):
        k = c % n
        order = list(range(n))[k:] + list(range(n))[:k]
        if (c // n) % 2:
            order.reverse()
        cyc = {}
        for i in order:
            procs[i].send("step")
            wall, cpu = procs[i].expect("T", 120)
            cyc[configs[i]] = (float(wall), float(cpu))
        cycles.append(cyc)
    events, threads, selft = {}, {}, {}
    for i, p in enumerate(procs):
        p.send("end")
        end = p.expect("END", 120)
        events[configs[i]] = float(end[0])
        if len(end) > 1:
            try:
                threads[configs[i]] = json.loads(end[1])
            except ValueError:
                pass
        if len(end) > 2:
            try:
                selft[configs[i]] = json.loads(end[2])
            except ValueError:
                pass
    return {"round": r, "cycles": cycles, "events_per_step": events, "threads_ms": threads,
            "selftime": selft,
            "init_s": t_ready - t_init, "steps_s": time.time() - t_ready}


def round_medians(rnd, configs, key):
    """Per configuration the median over the round's cycles of its step
    against plain's step of the same cycle (key 0 wall, 1 cpu)."""
    out = {}
    for c in configs:
        if c == "plain":
            continue
        out[c] = statistics.median(cy[c][key] / cy["plain"][key] - 1 for cy in rnd["cycles"])
    return out


def report(d):
    configs, rounds = d["configs"], d["rounds_data"]
    if not rounds:
        say("no round finished")
        return
    ncyc = sum(len(r["cycles"]) for r in rounds)
    say("\n%s workload, %d rounds in lockstep (%d cycles, one step of each configuration a "
        "cycle); against plain's step of the same cycle: per round the median over its cycles, "
        "then over rounds the median and a 95%% bootstrap interval:" %
        (d["workload"], len(rounds), ncyc))
    say("| configuration | step wall, ms | vs plain, wall | launching thread's CPU vs plain | "
        "events/step | per round (wall) | all cycles pooled: median, quartiles |")
    say("|---|---|---|---|---|---|---|")
    for c in configs:
        wall = statistics.median(cy[c][0] for r in rounds for cy in r["cycles"])
        ev = statistics.median(r["events_per_step"].get(c, 0) for r in rounds)
        if c == "plain":
            say("| plain | %.3f | | | %.0f | | |" % (wall, ev))
            continue
        pooled = sorted(cy[c][0] / cy["plain"][0] - 1 for r in rounds for cy in r["cycles"])
        q = statistics.quantiles(pooled, n=4) if len(pooled) > 1 else pooled * 3
        per = [round_medians(r, configs, 0)[c] for r in rounds]
        m, lo, hi = bo.bootstrap(per)
        percpu = [round_medians(r, configs, 1)[c] for r in rounds]
        mc, loc, hic = bo.bootstrap(percpu)
        say("| %s | %.3f | %+.2f%% (%+.2f .. %+.2f) | %+.2f%% (%+.2f .. %+.2f) | %.0f | %s | "
            "%+.2f%% (%+.2f .. %+.2f) |" %
            (c, wall, 100 * m, 100 * lo, 100 * hi, 100 * mc, 100 * loc, 100 * hic, ev,
             " ".join("%+.2f" % (100 * x) for x in per), 100 * statistics.median(pooled),
             100 * q[0], 100 * q[2]))
    plain = [statistics.median(cy["plain"][0] for cy in r["cycles"]) for r in rounds]
    say("plain's median step per round, ms: %s" % " ".join("%.2f" % x for x in plain))
    report_threads(configs, rounds)
    report_selftime(rounds)


def report_selftime(rounds):
    """What the plugin and the recorder spent in situ (configuration
    selftime: the plugin times each of its calls with the TSC), by thread:
    us a step and ns a call, the median over rounds."""
    have = [st for r in rounds for st in r.get("selftime", {}).values()]
    if not have:
        return
    names = sorted({t for st in have for t in st["threads"]})
    say("\nIn situ (configuration selftime), by thread: us a step and ns a call, the median "
        "over %d rounds; the recorder's part is inside the tracker's and the gauge's:" % len(have))
    kinds = max(len(v) for st in have for v in st["threads"].values()) // 2
    say("| thread | tracker, us/step | calls/step | ns/call | gauge, us/step | calls/step | "
        "ns/call | recorder, us/step | calls/step | ns/call |" +
        (" autograd state, us/step | calls/step | ns/call |" if kinds > 3 else ""))
    say("|---|" + "---|" * 3 * kinds)
    for t in names:
        cells = []
        for k in range(kinds):
            us, calls, per = [], [], []
            for st in have:
                v = st["threads"].get(t)
                if not v or len(v) <= 2 * k or not st.get("steps") or not st.get("tsc_per_ns"):
                    continue
                ns = v[2 * k] / st["tsc_per_ns"]
                us.append(ns / st["steps"] / 1e3)
                calls.append(v[2 * k + 1] / st["steps"])
                if v[2 * k + 1]:
                    per.append(ns / v[2 * k + 1])
            cells += ["%.1f" % statistics.median(us) if us else "",
                      "%.0f" % statistics.median(calls) if calls else "",
                      "%.0f" % statistics.median(per) if per else ""]
        say("| %s | %s |" % (t, " | ".join(cells)))
    cal = [(st["empty_ticks"] / st["tsc_per_ns"], st["add_ticks"] / st["tsc_per_ns"])
           for st in have if st.get("tsc_per_ns") and "empty_ticks" in st]
    if cal:
        say("The timing's own cost (median over rounds): an empty interval reads %.1f ns; "
            "each count adds %.1f ns to the interval around it (a tracker or gauge call "
            "that reaches the recorder holds 2 + 3 timed intervals of the recorder's and "
            "ours, and an allocation's a third of ours)." %
            (statistics.median(c[0] for c in cal), statistics.median(c[1] for c in cal)))
    have = [st for st in have if st.get("recorder")]
    if not have:
        return
    names = sorted({t for st in have for t in st["recorder"]})
    say("\nOf the recorder's part, by thread (ns an event, the median over rounds): the "
        "stack (Python walk, node, table) and the queue (core_emit):")
    say("| thread | events/step | stack, ns/event | queue, ns/event |")
    say("|---|---|---|---|")
    for t in names:
        ev, stk, q = [], [], []
        for st in have:
            v = st["recorder"].get(t)
            if not v or not v[2] or not st.get("tsc_per_ns"):
                continue
            ev.append(v[2] / st["steps"])
            stk.append(v[0] / st["tsc_per_ns"] / v[2])
            q.append(v[1] / st["tsc_per_ns"] / v[2])
        if ev:
            say("| %s | %.0f | %.0f | %.0f |" % (t, statistics.median(ev), statistics.median(stk),
                                                 statistics.median(q)))


def report_threads(configs, rounds):
    """Each thread's CPU a step (all its threads of one name summed; the
    timed steps, sync included), the median over rounds: where the
    recorder's CPU goes besides the launching thread (the autograd
    thread's allocations, the writer)."""
    have = [r.get("threads_ms", {}) for r in rounds]
    names = sorted({t for h in have for c in h for t in h[c]})
    if not names:
        return
    def med(c, t):
        v = [h[c].get(t, 0.0) for h in have if c in h]
        return statistics.median(v) if v else None
    totals = {c: sum(med(c, t) or 0 for t in names) for c in configs}
    names = [t for t in names if max(med(c, t) or 0 for c in configs) >= 0.05]
    say("\nCPU a step by thread, ms (median over rounds; threads of one name summed, those "
        "under 0.05 ms left out of the rows, not the total):")
    say("| thread | " + " | ".join(configs) + " |")
    say("|---|" + "---|" * len(configs))
    for t in names:
        say("| %s | %s |" % (t, " | ".join("%.3f" % (med(c, t) or 0) for c in configs)))
    say("| all | %s |" % " | ".join("%.3f" % totals[c] for c in configs))
    # what each configuration adds to each thread: per round its thread's
    # ms against plain's in the same round, the median over rounds and a
    # 95% bootstrap interval (the rounds' processes differ by more than a
    # round's steps do)
    rows = []
    for t in names:
        cells = []
        for c in configs[1:]:
            d = [h[c].get(t, 0.0) - h["plain"].get(t, 0.0) for h in have
                 if c in h and "plain" in h]
            if not d:
                cells.append("")
                continue
            m, lo, hi = bo.bootstrap(d)
            cells.append("%+.3f (%+.3f .. %+.3f)" % (m, lo, hi))
        rows.append("| %s | %s |" % (t, " | ".join(cells)))
    say("\nWhat each configuration adds to each thread's CPU a step, ms: per round against "
        "plain's in the same round, the median over rounds (95% bootstrap interval):")
    say("| thread | " + " | ".join(configs[1:]) + " |")
    say("|---|" + "---|" * (len(configs) - 1))
    for r in rows:
        say(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memsnap", default="memsnap")
    ap.add_argument("--build", action="append", default=[])
    ap.add_argument("--stubs")
    ap.add_argument("--pythonpath")
    ap.add_argument("--configs", default="plain,default,driver,loaded-off,record,muted")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cpus", default="2-9")
    ap.add_argument("--stage-cpus", default="10-15")
    ap.add_argument("--writer-cpus", default="15",
                    help="the recorder's writer thread's CPUs in configuration writerfar")
    ap.add_argument("--workload", choices=["train", "compile", "sim"], default="train")
    ap.add_argument("--run-args", default="", help="more `memsnap run` arguments "
                    "(--sim-device 8G for the sim workload)")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds: start no round that would end past this")
    ap.add_argument("--out")
    ap.add_argument("--report")
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.report:
        with open(a.report) as f:
            report(json.load(f))
        return 0
    configs = a.configs.split(",")
    if configs[0] != "plain":
        raise SystemExit("bench_lockstep.py: the first configuration must be plain")
    if a.workload == "compile" and a.warmup < 8:
        a.warmup = 8
    a.no_pin = False
    a.tmp = tempfile.mkdtemp(prefix="bench_lockstep-")
    builds = dict(b.split("=", 1) for b in a.build)
    if a.run_args:
        # bench_overhead.command() builds `memsnap run ... --`; ours go before its --
        orig = bo.command

        def command(name, aa, bb):
            pre, env = orig(name, aa, bb)
            if pre and pre[-1] == "--":
                pre = pre[:-1] + a.run_args.split() + ["--"]
            return pre, env
        bo.command = command
    say("lockstep: configs %s, cycles %d a round, cpus %s (staging on %s), workload %s" %
        (",".join(configs), a.cycles, a.cpus, a.stage_cpus, a.workload))
    d = {"configs": configs, "workload": a.workload, "cpus": a.cpus, "rounds_data": []}
    started = time.time()
    nxt = start_round(a, configs, builds)
    took, done = [], []
    for r in range(a.rounds):
        cur, nxt = nxt, None
        try:
            for p in cur:
                p.expect("IMPORTED", 300)
            # the next round imports while this one runs
            est = statistics.median(took) if took else 0
            if r + 1 < a.rounds and not (a.budget and time.time() - started + 2 * est > a.budget):
                nxt = start_round(a, configs, builds)
            for p in done:   # the last round's, exiting on the staging CPUs
                p.p.wait(timeout=300)
            done = []
            t0 = time.time()
            rnd = run_round(a, configs, cur, r)
            done = cur
        except Exception as e:   # a process failed: say so, keep what was measured
            say("round %d failed: %s" % (r + 1, e))
            for p in cur + (nxt or []):
                p.kill()
            break
        took.append(time.time() - t0)
        d["rounds_data"].append(rnd)
        med = round_medians(rnd, configs, 0)
        pl = statistics.median(cy["plain"][0] for cy in rnd["cycles"])
        say("round %2d  plain %.3f ms  %s  events/step %s  (init %.0f s, steps %.0f s, at %.0f s)" %
            (r + 1, pl, "  ".join("%s %+.2f%%" % (c, 100 * v) for c, v in med.items()),
             " ".join("%s=%.0f" % kv for kv in rnd["events_per_step"].items()),
             rnd["init_s"], rnd["steps_s"], time.time() - started))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(d, f)
        if nxt is None:
            break
    for p in done:
        p.p.wait(timeout=300)
    report(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The checks and figures of tests/gpu/h200x2_issue34.sh (issue 34), one
subcommand per step; each prints PASS / FAIL / INFO lines, appends them to
--summary and merges its figures into --figures (JSON, by step name).

  run NAME --memsnap M --kind ddp|fsdp --snaps S0 S1 --oracles O0 O1
      [--nccl-logs GLOB] --out DIR
        per rank r (file Sr, dist_llama.py's oracle Or): the file and its
        header's rank; the allocated peak on device r == max_memory_allocated();
        NCCL in the driver table of device r, communication among its
        categories; "not explained" >= the CUDA context - 64 MiB and <= what
        NVML counted that was not PyTorch's at the end (both measured without
        memsnap), and, where NCCL's own log (NCCL_DEBUG_SUBSYS=ALLOC) gave its
        allocations, <= that less NCCL's bytes + 64 MiB; fsdp: all_gather
        and reduce_scatter among the categories; NVML's device is CUDA's
  job NAME --memsnap M --snaps S0 S1 [--highest R] [--oom-rank R --oracles O0 O1]
      --text FILE --out DIR
        memsnap job (text into FILE, --json into DIR): ranks 0 and 1 from the
        headers; --highest: that rank the imbalance's highest and the most
        divergent site's max; --oom-rank: exit 1, that rank the one failure,
        its step, site and verdict, and its oracle's OOM
  predict --memsnap M --rec P1@V1 P2@V2 --truth T@V... [--oom-oracle O]
      --text FILE --out DIR
        per rank, memsnap predict --json of the two recordings ({rank} in the
        patterns) at every truth's value against its oracle's
        max_memory_allocated / max_memory_reserved: within 5% / 10% (issue
        21's target); with --oom-oracle, the prediction at its batch under
        memory_fraction:F (INFO)
  overhead --work DIR --rounds N --bench DIR --json FILE
        the ov-R-plain / ov-R-rec oracles: per round rank 0's median step,
        recorded against plain (bench_overhead.py's bootstrap), and the ABBA
        pairs inside the recorded processes

Standard library only (Python 3.9+).  Exit 0, or 1 when a check failed.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

MiB = 1 << 20
SLACK = 64 * MiB
failed = 0
LOG = None


def line(kind, text):
    global failed
    if kind == "FAIL":
        failed += 1
    s = "[check] %s %s" % (kind, text)
    print(s, flush=True)
    if LOG:
        with open(LOG, "a") as f:
            f.write(s + "\n")


def check(ok, text):
    line("PASS" if ok else "FAIL", text)
    return ok


def gib(n):
    return "n/a" if n is None else "%.3f GiB" % (n / (1 << 30))


def mib(n):
    return "n/a" if n is None else "%.1f MiB" % (n / MiB)


def figures(path, key, value):
    d = {}
    if os.path.exists(path):
        with open(path) as f:
            d = json.load(f)
    d[key] = value
    with open(path + ".tmp", "w") as f:
        json.dump(d, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def memsnap_json(m, args, out=None, ok=(0,)):
    """memsnap ARGS --json, parsed (None when it failed); its stdout is kept
    in out when given."""
    p = subprocess.run([m] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out:
        with open(out, "w") as f:
            f.write(p.stdout)
    if p.returncode not in ok:
        line("INFO", "memsnap %s: exit %d: %s" % (" ".join(args[:2]), p.returncode,
                                                  p.stderr.strip()[-300:]))
        return None, p.returncode
    try:
        return json.loads(p.stdout), p.returncode
    except ValueError:
        line("INFO", "memsnap %s: not JSON" % " ".join(args[:2]))
        return None, p.returncode


def nccl_logged(pattern, pid):
    """NCCL's own count of its device memory in a log of process pid
    (NCCL_DEBUG_SUBSYS=ALLOC): the sum of its "Alloc Size N" lines (not
    host ones), or its last "Memory used = N" where it keeps one; None when
    the log has neither."""
    total, used, n = 0, None, 0
    for path in glob.glob(pattern):
        if not path.endswith(".%d.log" % pid):
            continue
        with open(path, errors="replace") as f:
            for ln in f:
                if "Host" in ln:
                    continue
                m = re.search(r"Memory used = (\d+)", ln)
                if m:
                    used = int(m.group(1))
                m = re.search(r"Alloc Size (\d+)", ln)
                if m:
                    total += int(m.group(1))
                    n += 1
    if used is not None:
        return used, n
    return (total, n) if n else (None, 0)


def cmd_run(a):
    fig = {}
    for r, (snap, orc) in enumerate(zip(a.snaps, a.oracles)):
        who = "%s rank %d" % (a.name, r)
        o = load(orc)
        if not check(os.path.exists(snap), "%s: its recording %s" % (who, os.path.basename(snap))):
            continue
        if not check(o is not None, "%s: its oracle (dist_llama.py's own figures)" % who):
            continue
        s, rc = memsnap_json(a.memsnap, ["summary", "--json", "--top", "24", snap],
                             os.path.join(a.out, "%s-summary-%d.json" % (a.name, r)), ok=(0, 1))
        if not s:
            check(False, "%s: memsnap summary --json" % who)
            continue
        check(s["header"].get("rank") == r, "%s: the header says rank %s" % (who, s["header"].get("rank")))
        d = o.get("local_rank", r)
        dev = [x for x in s["devices"] if x["device"] == d]
        other = [x["device"] for x in s["devices"] if x["device"] != d and x["reserved"]["peak"]]
        check(not other, "%s: memory on its own device %d only (others: %s)" % (who, d, other))
        peak = dev[0]["allocated"]["peak"] if dev else None
        want = o.get("max_memory_allocated")
        check(peak == want, "%s: allocated peak %s == max_memory_allocated() %s" % (who, peak, want))
        rec = [x for x in s.get("reconcile", []) if x["device"] == d]
        rec = rec[0] if rec else {}
        libs = {x["library"]: x["bytes"] for x in rec.get("libraries", [])}
        check(libs.get("NCCL", 0) > 0, "%s: NCCL in the driver table: %s (libraries: %s)" %
              (who, mib(libs.get("NCCL")), ", ".join("%s %s" % (k, mib(v)) for k, v in libs.items())))
        cats = {x["category"]: x["peak"] for c in s.get("categories", []) if c["device"] == d
                for x in c["items"]}
        check(cats.get("communication", 0) > 0, "%s: communication %s among the categories" %
              (who, mib(cats.get("communication"))))
        if a.kind == "fsdp":
            check(cats.get("all_gather", 0) > 0 and cats.get("reduce_scatter", 0) > 0,
                  "%s: all_gather %s, reduce_scatter %s named (other: %s)" %
                  (who, mib(cats.get("all_gather")), mib(cats.get("reduce_scatter")),
                   mib(cats.get("other"))))
        line("INFO", "%s: categories %s" % (who, ", ".join("%s %s" % (k, mib(v)) for k, v in cats.items())))
        un = rec.get("unexplained")
        un = int(un) if un is not None else None
        ctx, nontorch = o.get("ctx_bytes"), o.get("nontorch_end")
        nccl, nlines = nccl_logged(a.nccl_logs, o["pid"]) if a.nccl_logs else (None, 0)
        ok = un is not None and ctx is not None and nontorch is not None and \
            ctx - SLACK <= un <= nontorch
        check(ok, "%s: not explained %s within [CUDA context %s - 64 MiB, not PyTorch's at the end %s]"
              % (who, mib(un), mib(ctx), mib(nontorch)))
        if nccl is not None and nontorch is not None and un is not None:
            check(un <= nontorch - nccl + SLACK,
                  "%s: not explained %s <= not PyTorch's %s - NCCL's own %s (%d log lines) + 64 MiB"
                  % (who, mib(un), mib(nontorch), mib(nccl), nlines))
        else:
            line("INFO", "%s: NCCL's log gave no allocation count: the tighter bound is not checked" % who)
        if o.get("pci_bus_nvml") is not None and o.get("pci_bus_torch") is not None:
            check(o["pci_bus_nvml"] == o["pci_bus_torch"], "%s: NVML's device %d is CUDA's (bus %s)" %
                  (who, d, o["pci_bus_nvml"]))
        fig["rank%d" % r] = dict(
            allocated_peak=peak, max_memory_allocated=want,
            reserved_peak=dev[0]["reserved"]["peak"] if dev else None,
            max_memory_reserved=o.get("max_memory_reserved"), nccl_bytes=libs.get("NCCL"),
            nccl_logged=nccl, libraries=libs, categories=cats, unexplained=un, ctx_bytes=ctx,
            nontorch_end=nontorch, device_used=rec.get("device_used"),
            events=(s.get("events") or {}).get("total"),
            batch=o.get("batch"), step_ms_median=o.get("step_ms_median"),
            versions=dict(torch=o.get("torch"), transformers=o.get("transformers"),
                          nccl=o.get("nccl"), python=o.get("python")),
            file_bytes=os.path.getsize(snap))
        line("INFO", "%s: batch %s, max allocated %s, reserved peak %s, NCCL %s (its log: %s), "
             "context %s, not explained %s, %s events, file %s" %
             (who, o.get("batch"), gib(want), gib(fig["rank%d" % r]["reserved_peak"]),
              mib(libs.get("NCCL")), mib(nccl), mib(ctx), mib(un), (s.get("events") or {}).get("total"),
              mib(os.path.getsize(snap))))
    figures(a.figures, a.name, fig)


def cmd_job(a):
    present = [s for s in a.snaps if os.path.exists(s)]
    if not check(len(present) == len(a.snaps), "%s job: both ranks' files" % a.name):
        return
    subprocess.run([a.memsnap, "job"] + a.snaps, stdout=open(a.text, "w"), stderr=subprocess.STDOUT)
    j, rc = memsnap_json(a.memsnap, ["job", "--json"] + a.snaps,
                         os.path.join(a.out, "job-%s.json" % a.name), ok=(0, 1))
    if not j:
        check(False, "%s job: memsnap job --json" % a.name)
        return
    check(j["ranks_from"] == "header" and [x["rank"] for x in j["ranks"]] == [0, 1],
          "%s job: ranks %s from %s" % (a.name, [x["rank"] for x in j["ranks"]], j["ranks_from"]))
    imb = j.get("imbalance") or {}
    div = (j.get("divergent_sites") or {}).get("sites") or []
    fig = dict(imbalance=imb, divergent=div[:3], peak_reserved=j.get("peak_reserved"),
               alignment=j.get("alignment"), failures=j.get("failures"), exit=rc,
               ranks=j.get("ranks"))
    if a.highest is not None:
        hi = (imb.get("highest") or {}).get("rank")
        check(hi == a.highest, "%s job: rank %s the highest (%s layer, +%s over the median, %s%%)" %
              (a.name, hi, imb.get("layer"), mib(imb.get("above_median")), imb.get("above_median_pct")))
        check(bool(div) and div[0].get("max_rank") == a.highest,
              "%s job: the most divergent site is rank %s's: %s (spread %s)" %
              (a.name, div[0].get("max_rank") if div else None, div[0].get("label") if div else None,
               mib(div[0].get("spread")) if div else None))
    if a.oom_rank is not None:
        f = j.get("failures") or []
        check(rc == 1 and j.get("failed") == 1 and [x["rank"] for x in f] == [a.oom_rank],
              "%s job: exit %d, %s rank(s) ran out: %s" % (a.name, rc, j.get("failed"),
                                                          [x["rank"] for x in f]))
        if f:
            oom = f[0].get("oom") or {}
            step = (oom.get("step") or {}).get("text")
            check(bool(step) and bool(oom.get("site")) and bool(oom.get("verdict")),
                  "%s job: rank %d ran out (step: %s) at %s, asking %s with %s reserved, %s allocated: %s"
                  % (a.name, a.oom_rank, step, oom.get("site"), mib(oom.get("requested")),
                     mib(oom.get("reserved")), mib(oom.get("allocated")), oom.get("verdict")))
        o = load(a.oracles[a.oom_rank]) if a.oracles else None
        if o:
            check(bool(o.get("oom")), "%s: rank %d's own account: %s" % (a.name, a.oom_rank, o.get("oom")))
            line("INFO", "%s: rank %d's memory fraction %s, its max reserved %s, abort by %s" %
                 (a.name, a.oom_rank, o.get("memory_fraction"), gib(o.get("max_memory_reserved")),
                  o.get("abort")))
            fig["oracle"] = {k: o.get(k) for k in ("oom", "memory_fraction", "max_memory_reserved",
                                                    "max_memory_allocated", "abort", "batch")}
    figures(a.figures, "job-" + a.name, fig)


def split_at(spec):
    path, _, v = spec.rpartition("@")
    return path, int(v)


def cmd_predict(a):
    rows, fig, txt = [], {}, []
    recs = [split_at(x) for x in a.rec]
    truths = [split_at(x) for x in a.truth]
    at = ",".join(str(v) for _, v in truths)
    oom = load(a.oom_oracle) if a.oom_oracle else None
    for r in (0, 1):
        snaps = ["%s@%d" % (p.replace("{rank}", str(r)), v) for p, v in recs]
        if not check(all(os.path.exists(s.rpartition("@")[0]) for s in snaps),
                     "predict rank %d: its recordings at %s" % (r, [v for _, v in recs])):
            continue
        p = subprocess.run([a.memsnap, "predict"] + snaps + ["--at", at, "--param", "batch"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        txt.append("== rank %d: memsnap predict %s --at %s --param batch (exit %d)\n%s" %
                   (r, " ".join(os.path.basename(s) for s in snaps), at, p.returncode, p.stdout))
        pj, rc = memsnap_json(a.memsnap, ["predict"] + snaps + ["--at", at, "--json"],
                              os.path.join(a.out, "predict-%d.json" % r), ok=(0, 1))
        if not pj:
            check(False, "predict rank %d: memsnap predict --json" % r)
            continue
        for path, v in truths:
            t = load(path.replace("{rank}", str(r)))
            pr = [x for x in pj if x.get("at") == v]
            if not t or not pr:
                check(False, "predict rank %d at batch %d: a real run (%s) and a prediction (%s)" %
                      (r, v, bool(t), bool(pr)))
                continue
            pr = pr[0]
            ea = pr["peak_allocated"] / t["max_memory_allocated"] - 1
            er = pr["peak_reserved"] / t["max_memory_reserved"] - 1
            scale = v / max(x for _, x in recs)
            check(abs(ea) <= 0.05, "predict rank %d at batch %d (%.0fx): allocated %s against the "
                  "real %s (%+.2f%%; within 5%%), aligned %s" %
                  (r, v, scale, pr["peak_allocated"], t["max_memory_allocated"], 100 * ea,
                   pr.get("aligned_share")))
            check(abs(er) <= 0.10, "predict rank %d at batch %d (%.0fx): reserved %s against the "
                  "real %s (%+.2f%%; within 10%%)" %
                  (r, v, scale, pr["peak_reserved"], t["max_memory_reserved"], 100 * er))
            rows.append(dict(rank=r, at=v, scale=scale, pred_allocated=pr["peak_allocated"],
                             real_allocated=t["max_memory_allocated"], err_allocated=ea,
                             pred_reserved=pr["peak_reserved"], real_reserved=t["max_memory_reserved"],
                             err_reserved=er, aligned=pr.get("aligned_share")))
        if oom and r == 1 and oom.get("memory_fraction"):
            conf = "memory_fraction:%.6f" % oom["memory_fraction"]
            pj2, rc2 = memsnap_json(a.memsnap, ["predict"] + snaps + ["--at", str(oom["batch"]),
                                                                     "--alloc-conf", conf, "--json"],
                                    os.path.join(a.out, "predict-oom.json"), ok=(0, 1))
            if pj2:
                x = pj2[0]
                line("INFO", "predict rank 1 at batch %d under %s: %s (the real run: %s)" %
                     (oom["batch"], conf, "OOM at %s" % (x.get("first_failure") or {}).get("site")
                      if x.get("oom") else "fits", "OOM in step %s (%s)" % (
                          oom["oom"]["step"], oom["oom"]["phase"]) if oom.get("oom") else "no OOM"))
                fig["oom_prediction"] = dict(conf=conf, predicted=x, real=oom.get("oom"))
    fig["rows"] = rows
    with open(a.text, "w") as f:
        f.write("\n".join(txt))
        f.write("\nrank at scale pred_alloc real_alloc err pred_reserved real_reserved err aligned\n")
        for x in rows:
            f.write("%d %d %.1fx %d %d %+.2f%% %d %d %+.2f%% %s\n" %
                    (x["rank"], x["at"], x["scale"], x["pred_allocated"], x["real_allocated"],
                     100 * x["err_allocated"], x["pred_reserved"], x["real_reserved"],
                     100 * x["err_reserved"], x["aligned"]))
    figures(a.figures, "predict", fig)


def cmd_overhead(a):
    sys.path.insert(0, a.bench)
    from bench_overhead import bootstrap      # the one-GPU bench's statistics
    rounds, pairs = [], []
    for r in range(a.rounds):
        p = load(os.path.join(a.work, "ov-%d-plain-oracle-0.json" % r))
        q = load(os.path.join(a.work, "ov-%d-rec-oracle-0.json" % r))
        if not p or not q or not p.get("step_ms_median") or not q.get("step_ms_median"):
            line("INFO", "overhead round %d: incomplete (plain %s, recorded %s)" % (r + 1, bool(p), bool(q)))
            continue
        rounds.append(dict(round=r + 1, plain_ms=p["step_ms_median"], rec_ms=q["step_ms_median"],
                           ratio=q["step_ms_median"] / p["step_ms_median"] - 1,
                           plain_steps=p["step_ms"], rec_steps=q["step_ms"]))
        for rk in (0, 1):
            o = load(os.path.join(a.work, "ov-%d-rec-oracle-%d.json" % (r, rk)))
            if o and o.get("ab_pair_ratios"):
                pairs.append(dict(round=r + 1, rank=rk, median=statistics.median(o["ab_pair_ratios"]),
                                  on=o["ab_on_ms"], off=o["ab_off_ms"]))
    res = dict(rounds=rounds, pairs=pairs)
    if check(bool(rounds), "overhead: %d of %d rounds measured" % (len(rounds), a.rounds)):
        m, lo, hi = bootstrap([x["ratio"] for x in rounds])
        res["vs_plain"] = dict(median=m, lo=lo, hi=hi)
        line("INFO", "overhead: FSDP step, both ranks recorded against plain: median step %.2f ms "
             "recorded, %.2f ms plain; per round %s; median of the ratios %+.2f%% (95%% bootstrap "
             "interval %+.2f .. %+.2f)" %
             (statistics.median(x["rec_ms"] for x in rounds),
              statistics.median(x["plain_ms"] for x in rounds),
              " ".join("%+.1f%%" % (100 * x["ratio"]) for x in rounds), 100 * m, 100 * lo, 100 * hi))
    r0 = [x["median"] for x in pairs if x["rank"] == 0]
    if r0:
        m, lo, hi = bootstrap(r0)
        on = statistics.median(v for x in pairs if x["rank"] == 0 for v in x["on"])
        off = statistics.median(v for x in pairs if x["rank"] == 0 for v in x["off"])
        res["events_ab"] = dict(median=m, lo=lo, hi=hi, on_ms=on, off_ms=off)
        line("INFO", "overhead: the recorder's PyTorch events on against off in the same processes "
             "(ABBA pairs, rank 0, %d processes): %.2f / %.2f ms, per process the median of its "
             "pairs, then over processes %+.2f%% (95%% %+.2f .. %+.2f)" %
             (len(r0), on, off, 100 * m, 100 * lo, 100 * hi))
    else:
        line("INFO", "overhead: no ABBA pairs (the plugin's memsnap_torch_bench_mute not found)")
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    figures(a.figures, "overhead", {k: v for k, v in res.items() if k != "pairs"})


def main():
    global LOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--summary", required=True)
    ap.add_argument("--figures", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("name")
    p.add_argument("--memsnap", required=True)
    p.add_argument("--kind", choices=["ddp", "fsdp"], required=True)
    p.add_argument("--snaps", nargs=2, required=True)
    p.add_argument("--oracles", nargs=2, required=True)
    p.add_argument("--nccl-logs")
    p.add_argument("--out", required=True)
    p = sub.add_parser("job")
    p.add_argument("name")
    p.add_argument("--memsnap", required=True)
    p.add_argument("--snaps", nargs=2, required=True)
    p.add_argument("--highest", type=int)
    p.add_argument("--oom-rank", type=int)
    p.add_argument("--oracles", nargs=2)
    p.add_argument("--text", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--memsnap", required=True)
    p.add_argument("--rec", nargs=2, required=True)
    p.add_argument("--truth", nargs="+", required=True)
    p.add_argument("--oom-oracle")
    p.add_argument("--text", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--work", required=True)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--bench", required=True)
    p.add_argument("--json", required=True)
    a = ap.parse_args()
    LOG = a.summary
    {"run": cmd_run, "job": cmd_job, "predict": cmd_predict, "overhead": cmd_overhead}[a.cmd](a)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

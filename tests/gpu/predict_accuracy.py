"""`memsnap predict` against the truths of predict_collect.py (issue 21).

    predict_accuracy.py DATA [--memsnap BIN] [--markdown]

DATA holds predict_collect.py's runs (the tars unpacked): NAME.msnap.zst
recordings and NAME.json results.  For every case below, runs `memsnap
predict --json` from the small recordings at the truths' values, under the
truths' allocator config, and prints predicted against real
max_memory_allocated / max_memory_reserved (error in %), then the memory
fraction cases: OOM or not, predicted against real.  Exit 0 when every
prediction at 4-16x the largest recorded value is within 5% (allocated)
and 10% (reserved) and every OOM outcome is right, else 1.  Shown but not
counted (marked "miss", not "MISS"): cases with extra options (--degree 1)
and batch cases recorded at batch 1, which takes other code paths than
larger batches (docs/interop.md, Predict, limits).
"""
import argparse
import json
import os
import subprocess
import sys

EXP = "expandable_segments:True"

# (label, recordings as (name, value), truth name pattern, truth values, config,
#  the parameter's name)
CASES = [
    ("train, batch, sdpa", [("batch-sdpa-b1-s512-def", 1), ("batch-sdpa-b2-s512-def", 2)],
     "batch-sdpa-b{}-s512-def", [4, 8, 16, 32], "", "batch"),
    ("train, batch, sdpa", [("batch-sdpa-b2-s512-def", 2), ("batch-sdpa-b3-s512-def", 3)],
     "batch-sdpa-b{}-s512-def", [4, 8, 16, 32], "", "batch"),
    ("train, batch, sdpa", [("batch-sdpa-b1-s512-def", 1), ("batch-sdpa-b2-s512-def", 2),
                            ("batch-sdpa-b3-s512-def", 3)],
     "batch-sdpa-b{}-s512-def", [4, 8, 16, 32], "", "batch"),
    ("train, batch, sdpa", [("batch-sdpa-b1-s512-def", 1), ("batch-sdpa-b2-s512-def", 2)],
     "batch-sdpa-b{}-s512-exp", [4, 8, 16, 32], EXP, "batch"),
    ("train, batch, sdpa", [("batch-sdpa-b2-s512-def", 2), ("batch-sdpa-b3-s512-def", 3)],
     "batch-sdpa-b{}-s512-exp", [4, 8, 16, 32], EXP, "batch"),
    ("train, batch, sdpa (exp. recordings)", [("batch-sdpa-b1-s512-exp", 1), ("batch-sdpa-b2-s512-exp", 2)],
     "batch-sdpa-b{}-s512-exp", [4, 8, 16, 32], EXP, "batch"),
    ("train, batch, eager", [("batch-eager-b1-s512-def", 1), ("batch-eager-b2-s512-def", 2)],
     "batch-eager-b{}-s512-def", [4, 8, 16, 32], "", "batch"),
    ("train, batch, eager", [("batch-eager-b2-s512-def", 2), ("batch-eager-b3-s512-def", 3)],
     "batch-eager-b{}-s512-def", [4, 8, 16, 32], "", "batch"),
    ("train, batch, eager, --degree 1", [("batch-eager-b1-s512-def", 1), ("batch-eager-b2-s512-def", 2)],
     "batch-eager-b{}-s512-def", [4, 8, 16, 32], "", "batch", ["--degree", "1"]),
    ("train, seq, eager", [("seq-eager-b2-s256-def", 256), ("seq-eager-b2-s512-def", 512)],
     "seq-eager-b2-s{}-def", [1024, 2048, 4096], "", "token"),
    ("train, seq, eager", [("seq-eager-b2-s256-def", 256), ("seq-eager-b2-s384-def", 384),
                           ("seq-eager-b2-s512-def", 512)],
     "seq-eager-b2-s{}-def", [1024, 2048, 4096], "", "token"),
    ("train, seq, eager", [("seq-eager-b2-s256-def", 256), ("seq-eager-b2-s384-def", 384),
                           ("seq-eager-b2-s512-def", 512)],
     "seq-eager-b2-s{}-exp", [1024, 2048, 4096], EXP, "token"),
    ("train, seq, sdpa", [("seq-sdpa-b2-s256-def", 256), ("seq-sdpa-b2-s512-def", 512)],
     "seq-sdpa-b2-s{}-def", [1024, 2048, 4096], "", "token"),
    ("generate, prompt, sdpa", [("gen-sdpa-p128-def", 128), ("gen-sdpa-p256-def", 256)],
     "gen-sdpa-p{}-def", [512, 1024, 2048], "", "token"),
    ("generate, prompt, sdpa", [("gen-sdpa-p128-def", 128), ("gen-sdpa-p256-def", 256),
                                ("gen-sdpa-p384-def", 384)],
     "gen-sdpa-p{}-def", [512, 1024, 2048], "", "token"),
    ("generate, prompt, sdpa", [("gen-sdpa-p128-def", 128), ("gen-sdpa-p256-def", 256),
                                ("gen-sdpa-p384-def", 384)],
     "gen-sdpa-p{}-exp", [512, 1024, 2048], EXP, "token"),
    ("generate, prompt, eager", [("gen-eager-p128-def", 128), ("gen-eager-p256-def", 256)],
     "gen-eager-p{}-def", [512, 1024, 2048], "", "token"),
]

# memory fraction cases: base truth -> the recordings to predict it from and its value
OOM_FROM = {
    "batch-sdpa-b16-s512-def": ([("batch-sdpa-b2-s512-def", 2), ("batch-sdpa-b3-s512-def", 3)], 16, ""),
    "batch-sdpa-b16-s512-exp": ([("batch-sdpa-b2-s512-def", 2), ("batch-sdpa-b3-s512-def", 3)], 16, EXP),
    "seq-eager-b2-s2048-def": ([("seq-eager-b2-s256-def", 256), ("seq-eager-b2-s384-def", 384),
                                ("seq-eager-b2-s512-def", 512)], 2048, ""),
    "gen-sdpa-p1024-def": ([("gen-sdpa-p128-def", 128), ("gen-sdpa-p256-def", 256),
                            ("gen-sdpa-p384-def", 384)], 1024, ""),
}


def predict(a, recs, at, conf, extra=()):
    cmd = [a.memsnap, "predict", "-q", "--json"] + list(extra) + \
          ["%s@%g" % (os.path.join(a.data, n + ".msnap.zst"), v) for n, v in recs] + \
          ["--at", ",".join("%g" % x for x in at), "-c", conf]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))
    return {o["at"]: o for o in json.loads(p.stdout)}


def pct(got, real):
    return 100.0 * (got - real) / real


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--memsnap", default="memsnap")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    ok = True
    rows = []
    for case in CASES:
        label, recs, pattern, values, conf, param = case[:6]
        extra = case[6] if len(case) > 6 else []
        if not all(os.path.exists(os.path.join(a.data, n + ".msnap.zst")) for n, _ in recs):
            continue
        truths = {}
        for v in values:
            f = os.path.join(a.data, pattern.format(v) + ".json")
            if os.path.exists(f):
                truths[v] = json.load(open(f))
        if not truths:
            continue
        got = predict(a, recs, sorted(truths), conf, extra)
        top = max(v for _, v in recs)
        for v, t in sorted(truths.items()):
            g = got[float(v)] if float(v) in got else got[v]
            ea = pct(g["peak_allocated"], t["max_memory_allocated"])
            er = pct(g["peak_reserved"], t["max_memory_reserved"])
            scale = v / top
            # counted: 4-16x, no extra options, not recorded at batch 1 (which
            # takes other paths: docs/interop.md, Predict, limits)
            target = 4 <= scale <= 16 and not extra and \
                not (param == "batch" and min(x for _, x in recs) == 1)
            good = abs(ea) <= 5 and abs(er) <= 10
            if target and not good:
                ok = False
            rows.append((label, "+".join("%g" % x for _, x in recs), conf or "default", v,
                         "%.3gx" % scale, g["peak_allocated"], t["max_memory_allocated"], ea,
                         g["peak_reserved"], t["max_memory_reserved"], er,
                         100 * g["aligned_share"], "" if good else ("MISS" if target else "miss")))
    hdr = ("case", "recorded at", "config", "at", "scale", "pred alloc", "real alloc", "err",
           "pred reserved", "real reserved", "err", "aligned", "")
    if a.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for r in rows:
            print("| %s | %s | %s | %s | %s | %s | %s | %+.2f%% | %s | %s | %+.2f%% | %.1f%% | %s |" % (
                r[0], r[1], r[2], r[3], r[4], "{:,}".format(r[5]), "{:,}".format(r[6]), r[7],
                "{:,}".format(r[8]), "{:,}".format(r[9]), r[10], r[11], r[12]))
    else:
        for r in rows:
            print("%-36s %-12s %-8s %5s %6s  alloc %14d / %14d %+7.2f%%  reserved %14d / %14d "
                  "%+7.2f%%  aligned %5.1f%% %s" % r)
    # memory fraction cases
    print()
    oomrows = []
    for name in sorted(os.listdir(a.data)):
        if not (name.startswith("oom-") and name.endswith(".json")):
            continue
        t = json.load(open(os.path.join(a.data, name)))
        base = t.get("base") or name[4:].rsplit("-", 1)[0]
        if base not in OOM_FROM:
            continue
        recs, at, conf = OOM_FROM[base]
        frac = t["frac"]
        c = ("%s,memory_fraction:%.12g" % (conf, frac)).lstrip(",")
        g = predict(a, recs, [at], c)[float(at)]
        right = bool(g["oom"]) == bool(t["oom"])
        ok &= right
        w = t.get("oom_where") or {}
        oomrows.append((name[:-5], at, c, t["oom"], g["oom"], right,
                        ("step %d %s" % (w["step"], w["phase"]) if w.get("step", -1) >= 0 else
                         w.get("phase", "")),
                        (g.get("first_failure") or {}).get("where", "")))
    if a.markdown:
        print("| run | at | config | real OOM | predicted OOM | right | real: where | predicted: where |")
        print("|---|---|---|---|---|---|---|---|")
        for r in oomrows:
            print("| %s | %s | `%s` | %s | %s | %s | %s | %s |" % r)
    else:
        for r in oomrows:
            print("%-44s at %5s  %-60s real %-5s predicted %-5s %s  (%s / %s)" % (
                r[0], r[1], r[2], r[3], r[4], "right" if r[5] else "WRONG", r[6], r[7]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

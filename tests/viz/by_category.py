#!/usr/bin/env python3
"""by_category.py MEMSNAP DUMP_MODEL DECODE VIZ_DATA CLI_DATA SCRATCH:
`memsnap render --by category` against `memsnap summary`'s category table.

Files: the real H200 recordings (tests/viz/data/h200: a transformers Llama
training loop with its oracle, a generate() run with a KV cache), hand-made
ones (tests/cli/data: reconcile.msnap with allocator blocks, cuBLAS, NCCL
and an unknown library's driver memory and an OOM; basic.msnap, driver
allocations on two devices) and two recorded here on the simulated device
by the decode workload (memsnap's allocator: blocks; --alloc cudamalloc:
driver allocations only), with a user's rules file that names two
categories, one of them new.

For each file and device:
  - the bands (dump_model by:category, the model render paints) are the
    categories summary --json lists, each band's peak is the category's
    "peak", its bytes at the total's peak are "at_total_peak", and so are
    the values of the timeline column where the total peaks;
  - the SVG (render --by category --format svg): a band per category named
    by it, a legend item per category starting with its name, the subtitle
    names summary's layer; no text cut or overlapping (svg_structure.py);
  - the PNG of the same command is written;
  - the same category has the same colour in every picture.
And: --by bogus and a bad --category-rules file give one line and exit 2;
MEMSNAP_CATEGORY_RULES is read; several files by category in one picture.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svg_structure as S  # noqa: E402  (load, groups, texts, text_boxes_ok)

memsnap, dump_model, decode, vdata, cdata, scratch = sys.argv[1:7]
check = S.check  # counts in S.fails, with the structure checks' own


def run(args, env=None, want=(0, 1)):
    r = subprocess.run(args, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode not in want:
        print("FAIL:", " ".join(args), "->", r.returncode, r.stderr)
        sys.exit(1)
    return r


def summary_cats(path, env):
    import json
    s = json.loads(run([memsnap, "summary", "--json", path], env).stdout)
    return {c["device"]: c for c in s["categories"]}


def model_bands(path, env):
    """{device: (total_peak, {category: (peak, at_total_peak, column)})}"""
    out = run([dump_model, path, "by:category"], env, want=(0,)).stdout
    bands = {}
    for line in out.splitlines():
        m = re.match(r"bands (-?\d+) total_peak (\d+) column (-?\d+)$", line)
        if m:
            bands[int(m.group(1))] = (int(m.group(2)), {})
            check(int(m.group(3)) >= 0, f"{path}: no column at the total's peak")
        m = re.match(r"band (-?\d+) (\S+) peak (\d+) at_total_peak (\d+) column (\d+)$", line)
        if m:
            bands[int(m.group(1))][1][m.group(2)] = tuple(int(m.group(i)) for i in (3, 4, 5))
    return bands


colours = {}   # category -> fill colour seen in any picture


def c_total(cats, dev):
    return cats.get(dev, {"total_peak": 0})["total_peak"]


def check_file(path, name, env=None):
    env = env or {}
    cats = summary_cats(path, env)
    bands = model_bands(path, env)
    check(cats, f"{name}: summary lists no categories")
    check(sorted(cats) == sorted(bands), f"{name}: devices {sorted(cats)} vs bands {sorted(bands)}")
    for dev, c in cats.items():
        total, b = bands.get(dev, (0, {}))
        items = {x["category"]: x for x in c["items"]}
        check(total == c["total_peak"], f"{name} device {dev}: total {total} vs {c['total_peak']}")
        check(sorted(b) == sorted(items), f"{name} device {dev}: bands {sorted(b)} vs {sorted(items)}")
        for cat, x in items.items():
            peak, at, col = b.get(cat, (None, None, None))
            check(peak == x["peak"], f"{name} {cat}: peak {peak} vs summary {x['peak']}")
            check(at == x["at_total_peak"] and col == at,
                  f"{name} {cat}: at total peak {at} (column {col}) vs summary {x['at_total_peak']}")
    # the pictures
    pre = os.path.join(scratch, "bycat-" + name)
    out = run([memsnap, "render", "--by", "category", "--format", "svg", path, "-o", pre], env,
              want=(0,)).stdout
    check(out.split() == [pre + "-timeline.svg", pre + "-segments.svg"], f"{name}: printed {out!r}")
    run([memsnap, "render", "--by", "category", path, "-o", pre], env, want=(0,))
    check(S.is_png(pre + "-timeline.png") and S.is_png(pre + "-segments.png"), f"{name}: the PNGs")
    tl = S.load(pre + "-timeline.svg")
    S.text_boxes_ok(tl, pre + "-timeline.svg")
    panels = S.groups(tl, "panel")
    check(len(panels) == len(cats), f"{name}: {len(panels)} panels for {len(cats)} devices")
    for panel in panels:
        m = re.search(r"device (-?\d+|\?)", panel.get("data-label", ""))
        dev = -1 if not m or m.group(1) == "?" else int(m.group(1))
        check(panel.get("data-label", "").startswith("GPU memory by category over time"),
              f"{name}: title {panel.get('data-label')!r}")
        items = cats.get(dev, {"items": []})["items"]
        want = sorted(x["category"] for x in items)
        # a band less than a pixel high in every column draws nothing
        got = sorted(g.get("data-label") for g in S.groups(panel, "band"))
        small = [x["category"] for x in items if x["peak"] < 0.001 * c_total(cats, dev)]
        check(set(got) <= set(want) and set(want) - set(got) <= set(small),
              f"{name} device {dev}: bands {got} vs {want}")
        legend = [g.get("data-label") for g in S.groups(panel, "legend-item")]
        named = sorted(l.split("  ")[0] for l in legend if "  peak " in l)
        check(named == want, f"{name} device {dev}: legend {legend}")
        sub = " ".join(S.texts(S.groups(panel, "subtitle")[0]))
        layer = cats.get(dev, {}).get("layer")
        check(("other libraries' driver memory" in sub) == (layer == "blocks"),
              f"{name} device {dev}: the subtitle does not say summary's layer ({layer}): {sub!r}")
        for band in S.groups(panel, "band"):
            fills = {e.get("fill") for e in band if e.get("fill")}
            cat = band.get("data-label")
            for f in fills:
                check(colours.setdefault(cat, f) == f,
                      f"{name}: {cat} is {f} here, {colours[cat]} elsewhere")


# the real H200 recordings and the hand-made ones
train = os.path.join(vdata, "h200", "train-llama.msnap.zst")
check_file(train, "train-llama")
check_file(os.path.join(vdata, "h200", "generate-llama.msnap.zst"), "generate-llama")
check_file(os.path.join(cdata, "reconcile.msnap"), "reconcile")
check_file(os.path.join(cdata, "basic.msnap"), "basic")

# recorded here on the simulated device, with a user's rules
rules = os.path.join(scratch, "bycat-rules")
with open(rules, "w") as f:
    f.write("parameters native load_weights\nbatch_state native server_run\n")
# (not in a reader-only build, which has no recorder or workload: decode "-")
for alloc in ("fixed", "cudamalloc") if decode != "-" else ():
    snap = os.path.join(scratch, f"bycat-decode-{alloc}.msnap")
    run([memsnap, "run", "--sim-device", "8G", "-q", "-o", snap, "--", decode, "-q",
         "--preset", "small", "--scenario", "healthy", "--hours", "0.02", "--device-mem", "8G",
         "--alloc", alloc], want=(0,))
    check_file(snap, "decode-" + alloc, {"MEMSNAP_CATEGORY_RULES": rules})
    c = summary_cats(snap, {"MEMSNAP_CATEGORY_RULES": rules})[0]
    check({x["category"] for x in c["items"]} >= {"parameters", "batch_state"},
          f"decode-{alloc}: the rules' categories: {c['items']}")
    check(c["layer"] == ("blocks" if alloc == "fixed" else "driver"), f"decode-{alloc}: layer {c['layer']}")
    # --category-rules FILE is the same as the variable
    pre = os.path.join(scratch, f"bycat-opt-{alloc}")
    run([memsnap, "render", "--by", "category", "--category-rules", rules, "--format", "svg",
         snap, "-o", pre], want=(0,))
    legend = [g.get("data-label") for g in S.groups(S.load(pre + "-timeline.svg"), "legend-item")]
    check(any(l.startswith("batch_state  peak ") for l in legend), f"--category-rules: {legend}")

# the colours are fixed: parameters is the same blue wherever it is drawn
check(colours.get("parameters") == "#3b75af", f"parameters drawn in {colours.get('parameters')}")
check(colours.get("other") == "#b4b4b4", f"other drawn in {colours.get('other')}")

# by site (the default) is unchanged: the bands are sites
pre = os.path.join(scratch, "bycat-site")
run([memsnap, "render", "--format", "svg", train, "-o", pre], want=(0,))
tl = S.load(pre + "-timeline.svg")
check(not any(g.get("data-label") == "parameters" for g in S.groups(tl, "band")),
      "by site: a band named by a category")
check(S.groups(tl, "panel")[0].get("data-label").startswith("GPU memory over time"), "by site: the title")

# several files by category: a panel per file, the same categories
pre = os.path.join(scratch, "bycat-ranks")
run([memsnap, "render", "--by", "category", "--format", "svg", train,
     os.path.join(cdata, "reconcile.msnap"), "-o", pre], want=(0,))
tl = S.load(pre + "-timeline.svg")
S.text_boxes_ok(tl, pre + "-timeline.svg")
check(len(S.groups(tl, "panel")) == 2, "several files: a panel each")
check("parameters" in [g.get("data-label") for g in S.groups(tl, "band")], "several files: no parameters band")

# usage errors: one line, exit 2
for args, pat in (((["--by", "bogus"]), r'--by wants site, category or pool, got "bogus"'),
                  ((["--by", "category", "--category-rules", os.path.join(scratch, "none")]),
                   r"none: cannot read")):
    r = run([memsnap, "render", *args, train, "-o", os.path.join(scratch, "x")], want=(2,))
    check(r.stderr.count("\n") == 1 and re.search(pat, r.stderr) and not r.stdout,
          f"render {' '.join(args)}: {r.stderr!r}")
bad = os.path.join(scratch, "bycat-bad-rules")
with open(bad, "w") as f:
    f.write("parameters python */x.py\nweights  elsewhere  *\n")
r = run([memsnap, "render", "--by", "category", train, "-o", os.path.join(scratch, "x")],
        {"MEMSNAP_CATEGORY_RULES": bad}, want=(2,))
check(r.stderr.count("\n") == 1 and "bycat-bad-rules:2: " in r.stderr, f"bad rules: {r.stderr!r}")

fails = S.fails
print(f"by_category: {'ok' if not fails else str(fails) + ' failed'}")
sys.exit(1 if fails else 0)

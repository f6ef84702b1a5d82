#!/usr/bin/env python3
"""pyterms.py MEMSNAP DATA SCRATCH: answers in PyTorch's terms (issue 20) on
real H200 recordings (tests/viz/data/h200: a transformers Llama training
loop and a trimmed generate() run, recorded by tests/gpu/torch_llama.py,
with the training run's own numbers from PyTorch in train-llama.oracle.json).

  - allocated equals PyTorch's max_memory_allocated() to the byte;
  - no label holds memsnap's own frames or the caching allocator's;
  - labels are model code (modeling_llama.py, loss_utils.py), backward
    allocations carry their autograd node and the forward they came from;
  - no label twice in summary's lists, in render's legend or in compare;
  - what tells a site apart reads before the user's line ("... from
    LlamaDecoderLayer.forward (...) <- torch_llama.py:104"), and the plain
    name of a group is left only to a site with nothing of its own;
  - a rules file that skips modeling_llama.py: none of its frames names a
    site (the next model code outwards does);
  - categories: parameters and optimizer state within 5% of PyTorch's
    profiler at its peak, "other" under 5% of the total, no KV cache in the
    training loop's categories but one in generate's;
  - the flame graph: valid SVG, each frame's box as wide as its children
    together, model code and backward nodes named.
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

memsnap, data, scratch = sys.argv[1:4]
train = f"{data}/h200/train-llama.msnap.zst"
gen = f"{data}/h200/generate-llama.msnap.zst"
oracle = json.load(open(f"{data}/h200/train-llama.oracle.json"))
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def run(*args, env=None):
    r = subprocess.run([memsnap, *args], capture_output=True, text=True,
                       env=None if env is None else {**os.environ, **env})
    if r.returncode not in (0, 1):
        print("FAIL: memsnap", *args, "->", r.returncode, r.stderr)
        sys.exit(1)
    return r.stdout


OURS = re.compile(r"memsnap|on_trace|emit_pending|GaugeBackend|CUDACachingAllocator|c10::cuda|"
                  r"libc10_cuda|cudaMalloc|cuMem")

s = json.loads(run("summary", "--json", "--top", "40", train))
dev = s["devices"][0]
check(dev["allocated"]["peak"] == oracle["max_memory_allocated"],
      f"allocated peak {dev['allocated']['peak']} != max_memory_allocated "
      f"{oracle['max_memory_allocated']}")
# the program marked torch.cuda.memory_allocated() after each step
marks = json.loads(run("summary", "--json", "--marks", train))["marks"]
said = [(m, int(m["message"].split()[-1])) for m in marks if " allocated " in m["message"]]
check(len(said) >= 7, f"{len(said)} memory_allocated() marks")
for m, n in said:
    check(m["devices"][0]["allocated"] == n,
          f"at \"{m['message']}\" allocated is {m['devices'][0]['allocated']}")
check(s["pytorch"] is True, "not seen as a PyTorch run")
# the driver table without NVML counters is taken at the peak of recorded
# memory, right after a driver allocation: PyTorch reserved there is the
# allocator's driver memory, the same figure as the table's own line for it
nc = f"{scratch}/pyterms-no-counters.msnap"
with open(nc, "w") as out:
    text = subprocess.run(["zstd", "-dc", train], capture_output=True, text=True, check=True).stdout
    out.writelines(l for l in text.splitlines(True) if '"type":"counters"' not in l)
rec = json.loads(run("summary", "--json", nc))["reconcile"][0]
lib = {x["library"]: x["bytes"] for x in rec["libraries"]}
check(rec["moment"] == "peak_recorded", f"no-counters moment {rec['moment']}")
check(rec["torch_reserved"] == lib.get("PyTorch allocator"),
      f"without counters: PyTorch reserved {rec['torch_reserved']} != the table's PyTorch "
      f"allocator {lib.get('PyTorch allocator')}")
# fragmentation at the peak of reserved: PyTorch's segments are its blocks and
# its cache (free inside reserved), cuBLAS's and cuDNN's driver memory neither
fr = s["findings"]["fragmentation"]["devices"][0]
check(fr["block_bytes"] + fr["total_free"] == oracle["max_memory_reserved"],
      f"blocks {fr['block_bytes']} + free {fr['total_free']} != max_memory_reserved "
      f"{oracle['max_memory_reserved']}")
check(fr["memory_bytes"] - fr["other_library_bytes"] == oracle["max_memory_reserved"],
      f"memory {fr['memory_bytes']} - other libraries {fr['other_library_bytes']} != "
      f"max_memory_reserved {oracle['max_memory_reserved']}")

sites = s["top_sites"]["allocated"]
labels = [x["label"] for x in sites]
check(len(labels) == len(set(labels)), f"a label twice in summary: {labels}")
for layer in ("allocated", "reserved", "pinned"):
    for x in s["top_sites"][layer] or []:
        check(not OURS.search(x["label"]), f"our own frame in a label: {x['label']}")
check(any("modeling_llama.py" in l for l in labels[:10]), f"no model code among the top sites: {labels[:10]}")
check(any("loss_utils.py" in l for l in labels), "the loss is not named")
bw = [l for l in labels if re.match(r"\w+Backward\d* of ", l)]
check(len(bw) >= 3, f"backward sites with their forward: {bw}")
check(not any("stack" in l for l in labels), "a stack number in a label")
check(all(" <- " in l or "train_step" in l or "cmd_train" in l or "build" in l for l in labels
          if "modeling_llama.py" in l), "a model-code label without the user's line")
# the reserved layer of a PyTorch run lists only other libraries' memory
check(all(x.get("library") != "PyTorch allocator" for x in s["top_sites"]["reserved"]),
      "PyTorch's segments listed as reserved sites")

cats = {c["category"]: c for c in s["categories"][0]["items"]}
prof = oracle["profiler"]["categories"]
for ours, theirs in (("parameters", "PARAMETER"), ("optimizer_state", "OPTIMIZER_STATE")):
    got, want = cats[ours]["at_total_peak"], prof[theirs]
    check(abs(got - want) <= 0.05 * want, f"{ours} {got} vs the profiler's {theirs} {want}")
total = s["categories"][0]["total_peak"]
other = cats.get("other", {"at_total_peak": 0})["at_total_peak"]
check(other < 0.05 * total, f"other {other} of {total}")
check("kv_cache" not in cats or cats["kv_cache"]["peak"] < 0.1 * total,
      "a large KV cache in a training loop")
check(cats["gradients"]["peak"] > 0.8 * cats["parameters"]["peak"],
      f"gradients {cats['gradients']['peak']} against parameters {cats['parameters']['peak']}")

g = json.loads(run("summary", "--json", gen))
gcats = {c["category"]: c for c in g["categories"][0]["items"]}
check("kv_cache" in gcats, "no KV cache in generate()")
glabels = [x["label"] for x in g["top_sites"]["allocated"]]
check(any("cache_utils.py" in l for l in glabels), f"the cache's code not named: {glabels}")
check(len(glabels) == len(set(glabels)), "a label twice in generate's summary")



def label_checks(summary, name):
    """What tells a site apart reads before the user's line, and a site
    keeps the plain name of its group only when it has nothing of its own
    (each of its frames up to the user's code is another site's too)."""
    TELL = re.compile(r" from [^ ]+ \([^)]*\)| at [^ ]+:\d+")
    for layer in ("allocated", "reserved"):
        xs = summary["top_sites"][layer] or []
        for x in xs:
            user = x["label"].split(" <- ", 1)
            check(len(user) == 1 or not TELL.search(user[1]),
                  f"{name}: the tie-breaker after the user's line: {x['label']}")
        groups = {}
        for x in xs:
            groups.setdefault(TELL.sub("", x["label"]), []).append(x)
        for plain, members in groups.items():
            if len(members) < 2:
                continue

            def model_frames(x):
                fr = x["frames"][x.get("runtime_frames", 0):]
                out = []
                for f in fr:
                    if "-packages/" not in f and ".py:" in f:
                        break   # the user's code
                    out.append(f)
                return out
            for x in members:
                if x["label"] != plain:
                    continue
                others = {f for y in members if y is not x for f in model_frames(y)}
                own = [f for f in model_frames(x) if f not in others]
                check(not own, f"{name}: \"{plain}\" reads as its whole group, "
                      f"but has {own[0] if own else ''} of its own")


label_checks(s, "train")
label_checks(json.loads(run("summary", "--json", "--top", "200", gen)), "generate")

# a rules file: a skipped Python frame is not model code, so the next model
# code outwards names the site; it stays a name only where nothing else is
rules = f"{scratch}/pyterms-rules.txt"
with open(rules, "w") as fh:
    fh.write("skip file */transformers/models/llama/modeling_llama.py\n")
sk = json.loads(run("summary", "--json", "--top", "200", train, env={"MEMSNAP_SITE_RULES": rules}))
sk_labels = [x["label"] for x in sk["top_sites"]["allocated"]]
check(len(sk_labels) == len(set(sk_labels)), "a label twice under the rules file")
for l in sk_labels:
    m = re.match(r"(?:\w+ of )?.*? \(([^():]+):\d+\)", l)
    check(not m or m.group(1) != "modeling_llama.py", f"a skipped frame names a site: {l}")
check(sum("modeling_llama.py" in l for l in labels) > 10, "modeling_llama.py names no site "
      "without the rules file")

# render's legend and compare: each label once
run("render", "--format", "svg", train, "-o", f"{scratch}/pyterms")
tl = ET.parse(f"{scratch}/pyterms-timeline.svg").getroot()
legend = [e.get("data-label") for e in tl.iter() if e.get("class", "") == "legend-item"]
legend = [l for l in legend if l]
check(legend and len(legend) == len(set(legend)), f"the legend: {legend}")
for l in legend:
    check(not OURS.search(l), f"our own frame in the legend: {l}")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size_of(text):
    num, unit = text.split()
    return float(num) * UNITS[unit]


def near(a, b):
    return abs(a - b) <= 0.005 * max(a, b) + 1024


# the same peak for the same site in summary, the legend and compare
peak_of = {x["label"]: x["peak"] for x in s["top_sites"]["allocated"]}
for e in tl.iter():
    text = e.get("data-label") if e.get("class", "") == "legend-item" else None
    m = re.match(r"(.*?)  peak (\S+ \S+)$", text or "")
    if m and m.group(1) in peak_of:
        check(near(size_of(m.group(2)), peak_of[m.group(1)]),
              f"legend: {m.group(1)} peak {m.group(2)}, summary {peak_of[m.group(1)]}")
cmp = run("compare", train, gen, "-o", f"{scratch}/pyterms-cmp.svg")
check(not re.search(r"\(stack \d+\)", cmp), "a stack number in compare's text")
compared = 0
for line in cmp.splitlines():
    m = re.match(r"\s+[-+]\S+ \S+\s+(\S+ \S+) -> \S+ \S+\s+(.*)$", line)
    if m and m.group(2) in peak_of:
        compared += 1
        check(near(size_of(m.group(1)), peak_of[m.group(2)]),
              f"compare: {m.group(2)} {m.group(1)}, summary {peak_of[m.group(2)]}")
check(compared >= 3, f"compare's changes name summary's sites ({compared})")

# the flame graph
run("flame", train, "-o", f"{scratch}/pyterms-flame.svg")
root = ET.parse(f"{scratch}/pyterms-flame.svg").getroot()
ns = "{http://www.w3.org/2000/svg}"
frames = []
for grp in root.iter(f"{ns}g"):
    if grp.get("class") != "frame":
        continue
    rect = grp.find(f"{ns}rect")
    m = re.match(r"(.*): .* \((\d+) bytes\)$", grp.get("data-label", ""))
    if rect is None or not m:
        continue
    frames.append((m.group(1), int(m.group(2)), float(rect.get("x")), float(rect.get("width")),
                   float(rect.get("y"))))
check(frames and frames[0][0] == "all", "no root box")
check(frames[0][1] == dev["allocated"]["peak"],
      f"the flame's total {frames[0][1]} is not the allocated peak {dev['allocated']['peak']}")
names = [f[0] for f in frames]
check(any("LlamaForCausalLM.forward" in n for n in names), "model code missing from the flame")
check(any(re.match(r"\w+Backward\d*$", n) for n in names), "no autograd node in the flame")
check(not any(OURS.search(n) for n in names), "our own frame in the flame")
# bytes: each box's children together hold no more than it does
by_row = {}
for name, nbytes, x, w, y in frames:
    by_row.setdefault(y, []).append((x, w, nbytes))
rows = sorted(by_row)
for lower, upper in zip(rows[::-1], rows[::-1][1:]):
    for x, w, nbytes in by_row[lower]:
        inside = [b for (cx, cw, b) in by_row[upper] if cx >= x - 0.5 and cx + cw <= x + w + 1.5]
        check(sum(inside) <= nbytes, f"children hold {sum(inside)} > {nbytes} at x={x}")
# several files: the sites that explain the highest peak are PyTorch's
# blocks (model and optimizer code), not only other libraries' memory
r = json.loads(run("summary", "--each", "--json", train, gen))
hp = r["highest_peak"]
check(hp["file"] == train, f"highest peak: {hp['file']}")
check(any("Adam.step" in x["label"] for x in hp["sites"]),
      f"the sites above the next file: {[x['label'] for x in hp['sites']]}")
check(all(x["peak"] == peak_of.get(x["label"], x["peak"]) for x in hp["sites"]),
      "a site's peak above the next file differs from the file's own summary")
print(f"{'ok' if not fails else str(fails) + ' failed'}: {len(labels)} sites, {len(frames)} boxes")
sys.exit(1 if fails else 0)

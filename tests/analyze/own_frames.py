#!/usr/bin/env python3
"""own_frames.py MEMSNAP DATA SCRATCH: our own frames never name a site,
whatever the file's format version (label.h).

A recording made before format 1.2 has no autograd node in its stacks, so
an allocation PyTorch's backward thread makes has a stack of nothing but
the memory runtime: memsnap's plugin (memsnap_torch.cpp), PyTorch's
gauge, the caching allocator.  Such a stack once read as
"on_trace (memsnap_torch.cpp:78)" at the top of an H200 recording's
summary.  Here the H200 training recording (tests/viz/data/h200, format
1.2) is made into one of format 1.1 as an older recorder would have
written it (version "1.1", no autograd frames in stacks, no "q" keys),
and every label of every site in summary, in render's legend and in
compare must be free of our frames, in both files.
"""
import json
import re
import subprocess
import sys

memsnap, data, scratch = sys.argv[1:4]
train = f"{data}/h200/train-llama.msnap.zst"
OURS = re.compile(r"memsnap|msnap_|on_trace|on_entry|emit_pending|emit \(|GaugeBackend")
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def run(*args):
    r = subprocess.run([memsnap, *args], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        print("FAIL: memsnap", *args, "->", r.returncode, r.stderr)
        sys.exit(1)
    return r.stdout


def autograd(ip):
    return isinstance(ip, str) and int(ip, 16) >> 62 == 3


old = f"{scratch}/own-frames-1.1.msnap"
text = subprocess.run(["zstd", "-dc", train], capture_output=True, text=True,
                      check=True).stdout
dropped = 0
with open(old, "w") as out:
    for line in text.splitlines():
        r = json.loads(line)
        t = r.get("type")
        if t == "header":
            check(r["version"] == "1.2", f"the kept recording is {r['version']}")
            r["version"] = "1.1"
        elif t == "stack":
            ips = [ip for ip in r["ips"] if not autograd(ip)]
            dropped += len(r["ips"]) - len(ips)
            r["ips"] = ips
        elif t == "sym" and autograd(r.get("ip")):
            continue
        r.pop("q", None)
        out.write(json.dumps(r, separators=(",", ":")) + "\n")
check(dropped > 10, f"only {dropped} autograd frames in the recording")

for path in (train, old):
    s = json.loads(run("summary", "--json", "--top", "1000", path))
    check(s["version"] == ("1.1" if path == old else "1.2"), f"{path}: version {s['version']}")
    labels = [x["label"] for layer in s["top_sites"].values() for x in layer]
    check(len(labels) > 50, f"{path}: {len(labels)} sites")
    for lab in labels:
        check(not OURS.search(lab), f"{path}: our own frame names a site: {lab}")
    # the text summary, render's legend (SVG text) and compare say the same
    txt = run("summary", "--top", "40", path)
    for line in txt.splitlines():
        if line.strip().startswith("site:"):
            check(not OURS.search(line), f"{path}: summary: {line.strip()}")
    run("render", "--format", "svg", "-o", f"{scratch}/own-frames", path)
    for pic in ("timeline", "segments"):
        legend = re.findall(r"<text[^>]*>([^<]*)</text>",
                            open(f"{scratch}/own-frames-{pic}.svg").read())
        check(len(legend) > 5, f"{path}: {len(legend)} texts in the {pic} picture")
        for t in legend:
            check(not OURS.search(t), f"{path}: render's {pic} legend: {t}")
cmp_svg = f"{scratch}/own-frames-compare.svg"
run("compare", "--format", "svg", "-o", cmp_svg, train, old)
for t in re.findall(r"<text[^>]*>([^<]*)</text>", open(cmp_svg).read()):
    check(not OURS.search(t), f"compare's legend: {t}")

print(f"{'0' if not fails else fails} failed")
sys.exit(1 if fails else 0)

#!/usr/bin/env python3
"""first_hour.py MEMSNAP DUMP_MODEL DATA SCRATCH CASE: what a new user found
wrong in the first hour (issue 35), one case per item, on the kept H200
recordings (tests/viz/data/h200: a transformers Llama training loop with
PyTorch's own figures in train-llama.oracle.json, and a trimmed generate()
run) and on small files made here for the routes a trace can take.

Cases:
  peak_moment   the segment map at the peak of reserved is taken after the
                block the new segment was made for, on every route (driver
                alloc, PyTorch's segment_alloc, block_alloc; alloc, block;
                an expandable segment's create, map, segment_map, block;
                another thread's block in between), and not after memory
                no block lands in; on train-llama the map then holds
                PyTorch's max_memory_allocated in blocks and its reserved
                less that as free, in summary, render's title and compare.
  legend        the segment map's legend gives each site the bytes all its
                stacks hold at that moment (the Python API's state_at,
                summed by label), not those of the stack that names it.
  libraries     summary's list of other libraries' driver memory: one
                library per site, none of PyTorch's segments in it, and per
                library its live bytes add up to the driver table's line.
  export_segments  export --format torch: PyTorch's segments are the ones
                PyTorch made (its segment_alloc records; on train-llama they
                add up to its max_memory_reserved), cuBLAS's and cuDNN's
                cudaMallocs are neither segments nor trace entries, stderr
                says so, and the JSON's extension gives them back to import.
  first_screen  summary's first screen (to its "---- details") is about 30
                lines: the peaks, each naming the view that draws it, then
                what was live at the peak by site (5, with categories), then
                the findings; no stack id, no mixed object count, no frame
                without --stacks (which adds them); and the numbers agree:
                the sites add up to the allocated peak, to flame --at peak's
                root and to the Python API's state_at("peak"), site by
                site, and its categories to the category table.
  timeline_axis the timeline's default axis: on the training recording
                (82% of the events in 4% of the time) the event index, its
                title says why; --x time keeps time; a file whose events
                spread over its time (or a short one) stays on time;
                compare of both takes the event index for both; the
                program's marks are ticks (one <g class="mark"> a column)
                on every axis; --x marks says what falls before the first.
  flame_tips    the flame graph's SVG: every box has a hover title (its full
                name and bytes), the framework's pass-through frames
                (Module._call_impl, _wrapped_call_impl, wrappers) are folded
                and the subtitle says how many, --all-frames keeps them, and
                each frame of the program holds the same bytes either way.
  replay_ooms   the summary of a replay that ran out of memory again and
                again (train-llama under memory_fraction:0.02): the first
                screen lists three OOMs by site with no frames, counts them
                one way, and gives the device free "of" the cap the
                allocator had (2.80 GiB), not the whole device (139.80 GiB).
  folded_note   a folded row's note ("5 x 1.00 GiB segments, full: ...") is
                drawn after its bar, on a white ground where it overlaps it.
  same_sizes    pictures give a figure as the text does ("460.04 MiB",
                "250.00 MiB", not "250 MiB"): the legends, the notes.
  same_colours  a site has the same colour in render and in compare of the
                same file (ties of peaks kept in rank order).
  perfetto_time export --format perfetto: a status line, and times on the
                time base of PyTorch's profiler: the profiler's window of
                the training recording (the oracle's first and last
                time_us) holds memsnap's samples, and its peak time is one
                of memsnap's samples where allocated is the window's peak.
"""
import json
import os
import re
import subprocess
import sys

memsnap, dump_model, data, scratch, case = sys.argv[1:6]
train = f"{data}/h200/train-llama.msnap.zst"
gen = f"{data}/h200/generate-llama.msnap.zst"
oracle = json.load(open(f"{data}/h200/train-llama.oracle.json"))
os.makedirs(scratch, exist_ok=True)
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def run(*args, prog=None, rc=(0, 1), env=None, stdin=None):
    r = subprocess.run([prog or memsnap, *args], capture_output=True, text=True,
                       env=None if env is None else {**os.environ, **env}, input=stdin)
    if r.returncode not in rc:
        print("FAIL:", prog or memsnap, *args, "->", r.returncode, r.stderr)
        sys.exit(1)
    return r


def events(path):
    """The event lines of a snapshot, parsed (JSON Lines, maybe zstd)."""
    text = subprocess.run(["zstd", "-dcf", path], capture_output=True, text=True,
                          check=True).stdout
    out = []
    for line in text.splitlines():
        if line.startswith('{"a":'):
            e = json.loads(line)
            for k in ("p", "n", "t"):
                if isinstance(e.get(k), str):
                    e[k] = int(e[k], 16)
            out.append(e)
    return out


def write_snap(name, lines):
    path = f"{scratch}/{name}.msnap"
    hdr = {"type": "header", "format": "memsnap", "version": "1.2", "pid": 1, "host": "h",
           "argv": [name], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 0, "mode": "stream",
           "settings": {}, "devices": [{"index": 0, "name": "Sim", "total": 1 << 34}]}
    with open(path, "w") as f:
        f.write(json.dumps(hdr) + "\n")
        for l in lines:
            f.write(json.dumps(l) + "\n")
    return path


def layout(path, at="peak"):
    """dump_model's layout line: (event after which it was taken, blocks, free,
    largest free) and the segment -> its spans."""
    out = run(path, at, prog=dump_model).stdout
    m = re.search(r"layout valid 1 at \d+, t (\d+), after event (\d+)", out)
    d = re.search(r"blocks (\d+), free (\d+), largest free (\d+)", out)
    segs, cur = {}, None
    for line in out.splitlines():
        s = re.match(r"segment 0x([0-9a-f]+) ", line)
        if s:
            cur = int(s.group(1), 16)
            segs[cur] = []
        elif cur is not None and line.startswith("  "):
            segs[cur].append(line.split()[0])
    return (int(m.group(2)), int(d.group(1)), int(d.group(2)), int(d.group(3))), segs


def reserved_peak_event(evs):
    """The 1-based index of the event where driver memory first reached its
    peak, with the event (a plain replay of alloc/free: these recordings
    have no other kind of device memory)."""
    live, cur, best, at = {}, 0, -1, 0
    for i, e in enumerate(evs, 1):
        if e["a"] == "alloc":
            live[e["p"]] = e["n"]
            cur += e["n"]
        elif e["a"] == "free":
            cur -= live.pop(e["p"], 0)
        if cur > best:
            best, at = cur, i
    return at, evs[at - 1]


def case_peak_moment():
    # PyTorch's own figures: right after the block the last new segment was
    # made for, its allocator's allocated and reserved both peaked
    s = json.loads(run("summary", "--json", train).stdout)
    fr = s["findings"]["fragmentation"]
    d = fr["devices"][0]
    check(d["block_bytes"] == oracle["max_memory_allocated"],
          f"blocks at the peak {d['block_bytes']} != max_memory_allocated "
          f"{oracle['max_memory_allocated']}")
    torch_free = oracle["max_memory_reserved"] - oracle["max_memory_allocated"]
    check(d["total_free"] == torch_free,
          f"free inside reserved {d['total_free']} != PyTorch's reserved - allocated {torch_free}")
    for path in (train, gen):
        evs = events(path)
        at, pe = reserved_peak_event(evs)
        # the block the new segment was made for: the first block inside it
        blk = next(i for i, e in enumerate(evs[at:], at + 1)
                   if e["a"] == "block_alloc" and pe["p"] <= e["p"] < pe["p"] + pe["n"])
        (after, blocks, free, largest), segs = layout(path)
        name = os.path.basename(path)
        check(after == blk, f"{name}: map taken after event {after}, not {blk} (the "
              f"new segment's block; the peak's alloc is event {at})")
        check("block" in segs.get(pe["p"], []),
              f"{name}: the new segment at {pe['p']:#x} is drawn without its block")
        sj = json.loads(run("summary", "--json", path).stdout)["findings"]["fragmentation"]
        check(sj["t_ns"] == evs[blk - 1]["t"], f"{name}: summary's moment {sj['t_ns']}")
        check(sj["devices"][0]["largest_free"] == largest and sj["devices"][0]["total_free"] == free,
              f"{name}: summary's free {sj['devices'][0]} against the map's {free}, {largest}")
        cmp = run("compare", path, path, "-o", f"{scratch}/pm.png").stdout
        ff = 1 - largest / free if free else 0
        check(f"{ff:.3f}" in cmp.splitlines()[1], f"{name}: compare's frag free is not {ff:.3f}:\n{cmp}")
        r = run("render", path, "--format", "svg", "-o", f"{scratch}/pm")
        svg = open(f"{scratch}/pm-segments.svg").read()
        check(f"after event {blk})" in svg, f"{name}: render's title does not say event {blk}")

    # the routes, by hand: the block 0x5000 in the new segment 0x4000..
    def ev(a, t, **k):
        return {"a": a, "t": t, **k}
    base = [ev("alloc", 1, p=0x1000, n=0x1000, k=1, f="cuMemAlloc_v2"),
            ev("block_alloc", 2, p=0x1000, n=0x800, k=1, f="torch")]
    routes = {
        # PyTorch's: the driver, its own segment record, the block
        "torch": ([ev("alloc", 10, p=0x4000, n=0x2000, k=2, f="cuMemAlloc_v2"),
                   ev("segment_alloc", 11, p=0x4000, n=0x2000, k=2, f="torch"),
                   ev("block_alloc", 12, p=0x5000, n=0x800, k=2, f="torch")], 5),
        # memsnap's allocator: the driver, the block
        "plain": ([ev("alloc", 10, p=0x4000, n=0x2000, k=2, f="cuMemAlloc_v2"),
                   ev("block_alloc", 12, p=0x5000, n=0x800, k=2, f="allocator")], 4),
        # another thread's block in an old segment, a mark, then ours
        "threads": ([ev("alloc", 10, p=0x4000, n=0x2000, k=2, f="cuMemAlloc_v2"),
                     ev("segment_alloc", 11, p=0x4000, n=0x2000, k=2, f="torch"),
                     ev("block_alloc", 11, p=0x1800, n=0x100, k=3, th=7, f="torch"),
                     ev("nvtx_mark", 11, x=0, f="memsnap_api"),
                     ev("block_alloc", 12, p=0x5000, n=0x800, k=2, f="torch")], 7),
        # an expandable segment: a handle, its mapping, the segment record, the block
        "expandable": ([ev("vmm_reserve", 9, p=0x4000, n=0x4000, f="cuMemAddressReserve"),
                        ev("vmm_create", 10, n=0x2000, x=5, d=0, f="cuMemCreate"),
                        ev("vmm_map", 10, p=0x4000, n=0x2000, x=5, f="cuMemMap"),
                        ev("segment_map", 11, p=0x4000, n=0x2000, f="torch"),
                        ev("block_alloc", 12, p=0x5000, n=0x800, k=2, f="torch")], 7),
        # memory no block lands in (cuBLAS's workspace): the moment stays at it
        "library": ([ev("alloc", 10, p=0x4000, n=0x2000, k=2, f="cuMemAlloc_v2"),
                     ev("block_alloc", 12, p=0x1800, n=0x100, k=3, f="torch")], 3),
        # reserved fell before the block came: the peak was the alloc
        "fell": ([ev("alloc", 10, p=0x4000, n=0x2000, k=2, f="cuMemAlloc_v2"),
                  ev("free", 11, p=0x1000, n=0x1000, f="cuMemFree_v2"),
                  ev("block_alloc", 12, p=0x5000, n=0x800, k=2, f="torch")], 3),
    }
    for name, (lines, want) in routes.items():
        p = write_snap(f"route-{name}", base + lines)
        (after, *_), _ = layout(p)
        check(after == want, f"route {name}: the map after event {after}, not {want}")


def api(code):
    """Runs code with the build tree's Python package (Debian's python3, which
    has pandas) and returns its stdout as JSON."""
    r = subprocess.run([os.environ.get("FIRST_HOUR_PYTHON", "/usr/bin/python3"), "-c", code],
                       capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.environ["FIRST_HOUR_PYTHONPATH"]})
    if r.returncode:
        print("FAIL: the Python API:", r.stderr)
        sys.exit(1)
    return json.loads(r.stdout)


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def size_of(text):
    n, u = text.split()
    return float(n) * UNITS[u]


def case_legend():
    for path in (train, gen):
        name = os.path.basename(path)
        run("render", path, "--format", "svg", "-o", f"{scratch}/lg")
        svg = open(f"{scratch}/lg-segments.svg").read()
        after = int(re.search(r"after event (\d+)\)", svg).group(1))
        items = re.findall(r'legend-item" data-label="([^"]*?)  ([0-9.]+ [KMGT]?i?B) here"', svg)
        check(len(items) >= 3, f"{name}: {len(items)} sites in the legend")
        evs = events(path)
        by = api(f"""
import json, memsnap
df = memsnap.load({path!r}).state_at({evs[after - 1]["t"]})
assert df.attrs["event_index"] == {after}, df.attrs
b = df[df.layer == "allocated"].groupby("label")["size"].sum()
print(json.dumps({{k: int(v) for k, v in b.items() if v}}))""")
        for lab, size in items:
            lab = lab.replace("&lt;", "<").replace("&gt;", ">").replace("&apos;", "'")
            full = [k for k in by if k == lab or (lab.endswith("..") and k.startswith(lab[:-2]))]
            check(len(full) == 1, f"{name}: legend {lab!r} names {len(full)} sites")
            if full:
                got, want = size_of(size), by[full[0]]
                check(abs(got - want) <= 0.006 * (1 << 20) + want * 0.0005,
                      f"{name}: legend {lab!r} says {size} here, the site holds {want} B")


def case_libraries():
    for path in (train, gen):
        name = os.path.basename(path)
        s = json.loads(run("summary", "--json", "--top", "1000", path).stdout)
        rec = s["reconcile"][0]
        table = {x["library"]: x["bytes"] for x in rec["libraries"]}
        listed = {}
        for x in s["top_sites"]["reserved"]:
            check(x["library"] != "PyTorch allocator",
                  f"{name}: a PyTorch segment in the other libraries' list: {x['label']}")
            listed[x["library"]] = listed.get(x["library"], 0) + x["live_at_end"]
        for lib, n in table.items():
            if lib == "PyTorch allocator":
                continue
            check(listed.get(lib) == n, f"{name}: the list gives {lib} {listed.get(lib)} B, "
                  f"the driver table {n} B")
        check(set(listed) <= set(table), f"{name}: libraries {set(listed) - set(table)} "
              "listed but not in the table")


def case_export_segments():
    import pickle
    for path in (train, gen):
        name = os.path.basename(path)
        evs = events(path)
        # the recording's own PyTorch segments live at the end, and the
        # driver allocations PyTorch made no segment of (cuBLAS, cuDNN)
        live, seg_at, allocs = {}, set(), {}
        for e in evs:
            if e["a"] == "segment_alloc":
                live[e["p"]] = e["n"]
                seg_at.add(e["p"])
            elif e["a"] == "segment_free":
                live.pop(e["p"], None)
            elif e["a"] == "alloc":
                allocs[e["p"]] = e["n"]
            elif e["a"] == "free":
                allocs.pop(e["p"], None)
        others = {p for p in allocs if p not in seg_at}
        check(others, f"{name}: no other library's memory to leave out")
        pk = f"{scratch}/{name}.pickle"
        r = run("export", path, "--format", "torch", "-o", pk)
        d = pickle.load(open(pk, "rb"))
        segs = {s["address"]: s["total_size"] for s in d["segments"]}
        check(all(segs.get(p) == n for p, n in live.items()),
              f"{name}: PyTorch's segments {sorted(set(live) - set(segs))[:5]} missing")
        check(not others & set(segs), f"{name}: other libraries' allocations as PyTorch "
              f"segments: {sorted(others & set(segs))}")
        if path == train:
            check(sum(segs.values()) == oracle["max_memory_reserved"],
                  f"{name}: segments hold {sum(segs.values())}, max_memory_reserved "
                  f"{oracle['max_memory_reserved']}")
        nseg = sum(1 for e in d["device_traces"][0] if e["action"] == "segment_alloc")
        made = sum(1 for e in evs if e["a"] == "segment_alloc")
        check(nseg == made, f"{name}: {nseg} segment_alloc trace entries, PyTorch made {made}")
        check(re.search(r"driver allocations? of other libraries .* left out of PyTorch's "
                        r"segments and trace", r.stderr), f"{name}: stderr says nothing:\n{r.stderr}")
        # the JSON keeps them for import
        js = f"{scratch}/{name}.json"
        run("export", path, "--format", "torch", "--json", "-o", js)
        back = f"{scratch}/{name}.back.msnap"
        run("import", js, "-o", back)
        a = json.loads(run("summary", "--json", path).stdout)
        b = json.loads(run("summary", "--json", back).stdout)
        # (a trimmed file's state section comes back as allocations of its own)
        check(b["events"]["by_action"]["alloc"] >= a["events"]["by_action"]["alloc"] and
              (path != train or a["events"]["by_action"] == b["events"]["by_action"]),
              f"{name}: import gives back {b['events']['by_action']}, not {a['events']['by_action']}")


def case_first_screen():
    for path in (train, gen):
        name = os.path.basename(path)
        text = run("summary", path).stdout
        lines = text.splitlines()
        check("---- details" in lines, f"{name}: no details line")
        first = lines[:lines.index("---- details")] if "---- details" in lines else lines
        check(len(first) <= 34, f"{name}: the first screen is {len(first)} lines")
        heads = [l for l in first if l and not l.startswith(" ")]
        order = [next((i for i, l in enumerate(heads) if l.startswith(w)), -1)
                 for w in ("peaks", "live at the peak", "findings")]
        check(-1 not in order and order == sorted(order),
              f"{name}: the first screen's parts {order}:\n" + "\n".join(first))
        check(any("what flame --at peak draws" in l for l in first) and
              any("render's segment map at --at peak" in l for l in first),
              f"{name}: the peaks do not say which view draws them")
        at = next((i for i, l in enumerate(first) if l.startswith("live at the peak")), 0)
        block = first[at + 1:first.index("", at)] if "" in first[at:] else first[at + 1:]
        sites = [l for l in block if re.match(r"  #\d ", l)]
        nsites = int(re.search(r"in (\d+) sites?$", first[at]).group(1))
        check(len(sites) == min(5, nsites), f"{name}: {len(sites)} of {nsites} sites live at the peak")
        check(all(re.match(r"  #\d +[0-9.]+ [KMGT]?i?B +\d+%  [a-z_+]+ +\S", l) for l in sites),
              f"{name}: a site line without its share or category: {sites}")
        for bad in (r"stack \d{3,}", r"live objects", r"\.py:\d+\)$"):
            hit = [l for l in lines if re.search(bad, l) and "site:" not in l and
                   not re.match(r"  #\d ", l)]
            check(not hit, f"{name}: {bad!r} in the text: {hit[:3]}")
        check(not any("/site-packages/" in l for l in lines),
              f"{name}: frames in the text without --stacks")
        st = run("summary", "--stacks", path).stdout
        check(any("/site-packages/torch/" in l for l in st.splitlines()),
              f"{name}: --stacks shows no frames")
        # one answer everywhere
        j = json.loads(run("summary", "--json", "--top", "1000", path).stdout)
        ap = j["at_peak"]
        check(ap["layer"] == "allocated" and ap["bytes"] == j["process"]["allocated"]["peak"],
              f"{name}: live at the peak {ap['bytes']} != the allocated peak")
        check(sum(x["bytes"] for x in ap["sites"]) == ap["bytes"] and
              all(sum(c["bytes"] for c in x["categories"]) == x["bytes"] for x in ap["sites"]),
              f"{name}: the sites or their categories do not add up")
        run("flame", path, "-o", f"{scratch}/fs.svg")
        svg = open(f"{scratch}/fs.svg").read()
        root = int(re.search(r'data-label="all: [^"]*\((\d+) bytes\)"', svg).group(1))
        check(root == ap["bytes"], f"{name}: flame's root {root}, summary {ap['bytes']}")
        by = api(f"""
import json, memsnap
df = memsnap.load({path!r}).state_at("peak")
b = df[df.layer == "allocated"].groupby("label")["size"].sum()
print(json.dumps({{"event": int(df.attrs["event_index"]), "sites": {{k: int(v) for k, v in b.items() if v}}}}))""")
        check(by["event"] == ap["event_index"], f"{name}: state_at('peak') at {by['event']}")
        mine = {x["label"]: x["bytes"] for x in ap["sites"]}
        check(mine == by["sites"], f"{name}: summary's sites at the peak differ from state_at: "
              f"{ {k: (mine.get(k), by['sites'].get(k)) for k in set(mine) | set(by['sites']) if mine.get(k) != by['sites'].get(k)} }")
        cat = j["categories"][0]
        if cat["total_peak_t_ns"] == ap["t_ns"]:
            table = {c["category"]: c["at_total_peak"] for c in cat["items"]
                     if c["category"] not in ("workspaces", "communication")}
            got = {c["category"]: c["bytes"] for c in ap["categories"]}
            check(all(got.get(k, 0) == v for k, v in table.items()),
                  f"{name}: categories at the peak {got}, the table {table}")


def axis_title(svg):
    g = re.search(r'<g class="axis-x"[^>]*>(.*?)</g>', svg, re.S).group(1)
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", g)
    return texts[-1] if texts else ""


def case_timeline_axis():
    def draw(*args):
        run("render", *args, "--format", "svg", "-o", f"{scratch}/ax")
        return open(f"{scratch}/ax-timeline.svg").read()
    svg = draw(train)
    t = axis_title(svg)
    check(t.startswith("event index (chosen: ") and "of the events fall in" in t,
          f"train: the default axis is {t!r}")
    share = re.search(r"chosen: (\d+)% of the events fall in (\d+)% of the time", t)
    check(share and int(share.group(1)) >= 80 and int(share.group(2)) <= 20, f"train: {t!r}")
    marks = re.findall(r'<g class="mark" data-label="mark at [^"]*"', svg)
    check(20 <= len(marks) <= 38, f"train: {len(marks)} mark ticks for 38 marks (one a column)")
    check("blue ticks: 38 marks" in t, f"train: the title does not name the ticks: {t!r}")
    t = axis_title(draw(train, "--x", "time"))
    check(t.startswith("time since the recorder started"), f"train --x time: {t!r}")
    svg = draw(train, "--x", "marks")
    t = axis_title(svg)
    check("the 78 events before the first, event 79, are drawn at its place" in t,
          f"train --x marks: {t!r}")
    check(len(re.findall(r'<g class="mark"', svg)) >= 10, "train --x marks: no ticks")
    # events spread over the time: time stays
    even = write_snap("even", [{"a": "alloc" if i % 2 == 0 else "free", "t": 1000 * (i + 1),
                                "p": 0x1000 * (1 + i // 2), "n": 4096, "k": 1, "f": "cuMemAlloc_v2"}
                               for i in range(400)])
    t = axis_title(draw(even))
    check(t.startswith("time since the recorder started"), f"an even file: {t!r}")
    t = axis_title(draw(f"{data}/../../cli/data/basic.msnap"))
    check(t.startswith("time since the recorder started"), f"basic.msnap: {t!r}")
    # compare: one axis, the event index when any file asks for it
    run("compare", even, train, "-o", f"{scratch}/ax-cmp.svg")
    cmp = open(f"{scratch}/ax-cmp.svg").read()
    titles = [axis_title(m.group(0)) for m in re.finditer(r'<g class="axis-x".*?</g>', cmp, re.S)]
    check(titles and all(x.startswith("event index") for x in titles), f"compare: {titles}")


def flame_boxes(svg):
    """[(name, bytes, depth)] of every box, from the groups' data-labels and
    their rectangles' heights (ROW 18)."""
    out = []
    for m in re.finditer(r'<g class="frame" data-label="([^"]*): [^"(]*\((\d+) bytes\)">\s*'
                         r'(?:<title>([^<]*)</title>\s*)?<rect x="[0-9.]+" y="([0-9.]+)"', svg):
        out.append((m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&apos;", "'"),
                    int(m.group(2)), m.group(3), float(m.group(4))))
    return out


def outermost_sums(boxes):
    """bytes per name over its boxes with no ancestor of the same name: the
    y of a box says its depth, the drawing order its parent (a box's
    children follow it)."""
    sums, stack = {}, []
    for name, b, _, y in boxes:
        while stack and stack[-1][1] <= y:
            stack.pop()
        if name not in [n for n, _ in stack]:
            sums[name] = sums.get(name, 0) + b
        stack.append((name, y))
    return sums


def case_flame_tips():
    for path in (train, gen):
        name = os.path.basename(path)
        run("flame", path, "-o", f"{scratch}/ft.svg")
        svg = open(f"{scratch}/ft.svg").read()
        boxes = flame_boxes(svg)
        nframes = svg.count('<g class="frame"')
        check(len(boxes) == nframes and len(boxes) > 5,
              f"{name}: {len(boxes)} boxes read of {nframes}")
        check(all(t and t.replace("&lt;", "<").replace("&gt;", ">").replace("&apos;", "'")
                  .startswith(n + ": ") for n, _, t, _ in boxes),
              f"{name}: a box without its hover title")
        check(not any(".." in (t or "") for _, _, t, _ in boxes), f"{name}: a cut title")
        passes = [n for n, _, _, _ in boxes if "_call_impl" in n or "_wrapped_call_impl" in n]
        check(not passes, f"{name}: pass-through frames drawn: {passes[:3]}")
        sub = re.search(r'(\d+) pass-through frames? folded \(Module._call_impl, wrappers: '
                        r'--all-frames keeps them\)', svg)
        check(sub is not None, f"{name}: the subtitle does not say what was folded")
        run("flame", path, "--all-frames", "-o", f"{scratch}/fa.svg")
        alls = flame_boxes(open(f"{scratch}/fa.svg").read())
        check(len(alls) > len(boxes) and (path != train or
                                          any("Module._call_impl" in n for n, _, _, _ in alls)),
              f"{name}: --all-frames folds ({len(alls)} boxes, {len(boxes)} folded)")
        a, b = outermost_sums(boxes), outermost_sums(alls)
        plumbing = re.compile(r"module\.py|<locals>\.(wrapper|_use_grad|decorate)")
        diff = {k: (v, b.get(k)) for k, v in a.items() if b.get(k) != v and not plumbing.search(k)}
        check(not diff, f"{name}: frames hold other bytes folded than not: {list(diff.items())[:3]}")
        check(a.get("all") == b.get("all"), f"{name}: the root differs")


def case_replay_ooms():
    out = f"{scratch}/rpl"
    r = run("replay", train, "-q", "-c", "memory_fraction:0.02", "-o", out)
    snap = out + "-1.msnap"
    txt = run("summary", snap).stdout
    first = txt.split("---- details")[0]
    j = json.loads(run("summary", "--json", snap).stdout)
    n = j["oom_count"]
    check(n >= 4, f"the replay has {n} OOMs")
    ooms = [l for l in first.splitlines() if l.startswith("  OOM at ")]
    check(len(ooms) == 3, f"{len(ooms)} OOM lines in the first screen")
    check(f"  ... {n - 3} more (--json lists them all)" in first, "no 'more' line:\n" + first)
    check(f"OOM events: {n}\n" in first and f"OOM story (1 of {n} failed allocations)" in first,
          "the OOMs counted two ways:\n" + first)
    check(not re.search(r"\.py:\d+\)$", "\n".join(l for l in first.splitlines()
                                                  if "site:" not in l and " #" not in l), re.M),
          "frames in the first screen")
    cap = int(0.02 * 150109880320)
    check(all(abs(o["device_total"] - cap) < 4096 for o in j["ooms"]),
          f"OOMs of {[o['device_total'] for o in j['ooms'][:3]]}, the cap {cap}")
    check(all(" of 2.80 GiB, " in l for l in ooms), f"the OOM lines: {ooms}")


def case_folded_note():
    lines = [{"type": "stack", "id": 1, "ips": ["0x401000"]},
             {"type": "stack", "id": 2, "ips": ["0x402000"]}]
    t = 1
    for i in range(5):
        p = (1 << 32) + i * (1 << 31)
        lines += [{"a": "alloc", "t": t, "p": p, "n": 1 << 30, "k": 1, "f": "cuMemAlloc_v2"},
                  {"a": "block_alloc", "t": t + 1, "p": p, "n": 1 << 30, "k": 2, "f": "allocator"}]
        t += 2
    lines += [{"a": "alloc", "t": t, "p": 1 << 40, "n": 1 << 20, "k": 1, "f": "cuMemAlloc_v2"},
              {"a": "block_alloc", "t": t + 1, "p": 1 << 40, "n": 1 << 19, "k": 1, "f": "allocator"}]
    path = write_snap("fold", lines)
    run("render", path, "--format", "svg", "-o", f"{scratch}/fold")
    svg = open(f"{scratch}/fold-segments.svg").read()
    g = re.search(r'<g class="segment folded"[^>]*>(.*?)</g>', svg, re.S)
    check(g is not None, "no folded row")
    if g:
        body = g.group(1)
        note = body.rfind("5 x 1.00 GiB segments, full: ")
        last_bar = max(body.rfind('fill="#3b75af"'), 0)
        check(note > last_bar, "the note is drawn before (behind) the bar")
        ground = body.rfind('fill="#ffffff"', 0, note)
        check(ground > last_bar, "the note over the bar has no white ground")


def case_same_sizes():
    run("render", train, "--format", "svg", "-o", f"{scratch}/sz")
    for pic in ("sz-segments.svg", "sz-timeline.svg"):
        svg = open(f"{scratch}/{pic}").read()
        items = re.findall(r'legend-item" data-label="[^"]*?  (?:peak )?([0-9.]+ [KMGT]?i?B)(?: here)?"', svg)
        check(items, f"{pic}: no sizes in the legend")
        bad = [x for x in items if not re.match(r"\d+\.\d\d [KMGT]iB$|\d+ B$", x)]
        check(not bad, f"{pic}: sizes not as the text writes them: {bad}")
    # "250 MiB" in a picture is "250.00 MiB" in the summary's text
    text = run("summary", train).stdout
    check("250.00 MiB" in text and "250.00 MiB" in open(f"{scratch}/sz-segments.svg").read(),
          "250.00 MiB is not written one way")


def case_same_colours():
    run("render", train, "--format", "svg", "-o", f"{scratch}/col")
    run("compare", train, train, "-o", f"{scratch}/col-cmp.svg")

    def colours(svg):
        return {lab: fill for lab, fill in re.findall(
            r'<g class="legend-item" data-label="([^"]*)">\s*<rect [^>]*fill="(#[0-9a-f]{6})"', svg)}
    a = colours(open(f"{scratch}/col-timeline.svg").read())
    b = colours(open(f"{scratch}/col-cmp.svg").read())
    check(len(a) >= 5, f"{len(a)} legend items in render")
    diff = {k: (v, b.get(k)) for k, v in a.items() if k in b and b[k] != v}
    check(not diff and set(a) & set(b), f"render and compare colour sites apart: {diff}")


def case_perfetto_time():
    out = f"{scratch}/tl.json"
    r = run("export", train, "--format", "perfetto", "-o", out)
    check(re.search(r"^memsnap export: 14263 events -> \d+ trace events \(1 device\), Perfetto "
                    r"JSON; times are Unix-epoch microseconds, as PyTorch's profiler writes them",
                    r.stderr, re.M), f"the status line: {r.stderr!r}")
    d = json.load(open(out))
    prof = oracle["profiler"]
    al = [(e["ts"], e["args"]["bytes"]) for e in d["traceEvents"] if e.get("name") == "allocated"]
    win = [(t, b) for t, b in al if prof["first_time_us"] <= t <= prof["last_time_us"]]
    check(len(win) > 1000, f"{len(win)} of memsnap's samples in the profiler's window")
    if win:
        near = min(win, key=lambda x: abs(x[0] - prof["peak_time_us"]))
        check(abs(near[0] - prof["peak_time_us"]) <= 10 and near[1] == max(b for _, b in win),
              f"the profiler's peak at {prof['peak_time_us']} us: memsnap's nearest sample "
              f"{near}, the window's peak {max(b for _, b in win)}")


globals()["case_" + case]()
print("ok" if not fails else f"{fails} failed")
sys.exit(1 if fails else 0)

"""Issue 24's Python API on a GPU, in PyTorch's own environment, from the
installed wheel (python_api_gpu.sh runs it; docs/python.md).

    python3 python_api_gpu.py OUT_DIR          (exit 0 all passed, 1 a check
                                                failed, 77 no torch / no GPU)

Checks, each a line "PASS name: detail" or "FAIL name: detail", and
OUT_DIR/python_api_gpu.json with the figures:
  record   memsnap.record() around a small PyTorch program, started before
           PyTorch's CUDA init (the plugin attaches there; built first when
           the cache has none): the allocated peak equals
           torch.cuda.max_memory_allocated(), the final level
           memory_allocated(), to the byte; the top site is named by this
           file's line; a second recording in the same process holds only
           its own blocks; the API's figures (events, sites, state_at)
           agree with `memsnap summary --json`;
  magic    the %%memsnap cell magic through IPython when it is importable,
           else the function it runs (memsnap._notebook.record_cell), on a
           cell that allocates through PyTorch: an SVG timeline and the
           highlights naming the cell's line;
  the pytest plugin is checked by python_api_gpu.sh (pytest on
  python_api_gpu_limits.py, a file of its own).
"""
import json
import os
import subprocess
import sys
import traceback

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(OUT, exist_ok=True)
results = {"checks": [], "figures": {}}


def say(ok, name, detail=""):
    results["checks"].append({"name": name, "ok": bool(ok), "detail": str(detail)})
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)
    return ok


def save():
    with open(os.path.join(OUT, "python_api_gpu.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)


try:
    import torch
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no GPU")
    sys.exit(77)

import memsnap                                          # noqa: E402
from memsnap import _record                             # noqa: E402

results["figures"].update(python=sys.version.split()[0], torch=torch.__version__,
                          memsnap=memsnap.__version__, package=os.path.dirname(memsnap.__file__))
try:
    import pandas
    import numpy
    results["figures"].update(pandas=pandas.__version__, numpy=numpy.__version__)
except ImportError as e:
    say(False, "pandas", e)


# ---- the program recorded (its lines name the sites) ----------------------

def make_weights():
    return [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]  # WEIGHTS


def forward(x, w):
    h = x @ w                                                                             # MATMUL
    return torch.relu(h).sum()


def program():
    weights = make_weights()
    w = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        x = torch.randn(2048, 4096, device="cuda")
        forward(x, w)
    torch.cuda.synchronize()
    del weights[:2]
    return weights, w


def line_of(tag):
    with open(__file__) as f:
        for i, l in enumerate(f, 1):
            if l.rstrip().endswith("# " + tag):
                return i
    return -1


def cli_json(path):
    r = subprocess.run([memsnap.paths()["memsnap"], "summary", "--json", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return json.loads(r.stdout)


def check_record():
    path = os.path.join(OUT, "record-1.msnap")
    assert not torch.cuda.is_initialized(), "CUDA was initialized before the recording"
    with memsnap.record(path) as rec:
        kept = program()
    torch.cuda.synchronize()
    peak, now = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    s = memsnap.load(path)
    summ = s.summary()
    alloc = summ["process"]["allocated"]
    results["figures"]["record"] = {"events": rec.events, "peak": alloc["peak"],
                                    "final": alloc["final"], "max_memory_allocated": peak,
                                    "memory_allocated": now,
                                    "attached": _record.torch_attached()}
    say(_record.torch_attached() is True, "record.attached", _record.torch_attached())
    say(rec.events > 10 and summ["events"]["by_api"].get("torch", 0) == rec.events,
        "record.events", "%d events, all PyTorch's: %s" % (rec.events, summ["events"]["by_api"]))
    say(alloc["peak"] == peak, "record.peak",
        "allocated peak %d, torch.cuda.max_memory_allocated() %d" % (alloc["peak"], peak))
    say(alloc["final"] == now, "record.final",
        "allocated at the end %d, torch.cuda.memory_allocated() %d" % (alloc["final"], now))
    sites = s.sites("allocated")
    # a site is named by this file's allocating line, however its label
    # reads ("make_weights (python_api_gpu.py:N)", or "... <- python_api_gpu.py:N")
    want = "python_api_gpu.py:%d" % line_of("WEIGHTS")
    top = sites["label"].iloc[0] if len(sites) else ""
    say(want in top, "record.top-site", "%r (%d sites; want %s)" % (top, len(sites), want))
    mm = "python_api_gpu.py:%d" % line_of("MATMUL")
    say(any(mm in l for l in sites["label"]), "record.matmul-site",
        "%s among %s" % (mm, list(sites["label"])[:8]))
    say(summ["header"]["devices"] and summ["header"]["devices"][0]["total"] > 0,
        "record.device", summ["header"]["devices"])
    # the API against the CLI on this file
    say(summ == cli_json(path), "record.summary-is-cli", "summary() == memsnap summary --json")
    ev = s.events()
    say(len(ev) == summ["events"]["total"] and int(ev["allocated"].max()) == alloc["peak"],
        "record.events-frame", "%d rows, allocated max %d" % (len(ev), int(ev["allocated"].max())))
    at = s.state_at("peak")
    live = at[(at["layer"] == "allocated") & ~at["pre_window"]]
    say(int(live["size"].sum()) == alloc["peak"], "record.state-at-peak",
        "%d bytes live at the peak in %d blocks" % (int(live["size"].sum()), len(live)))
    # a second recording: only its own blocks (the kept weights are not in it)
    path2 = os.path.join(OUT, "record-2.msnap")
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with memsnap.record(path2):
        t = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")
        del t
        u = torch.ones(32 << 20, dtype=torch.uint8, device="cuda")
    s2 = memsnap.load(path2).summary()
    a2 = s2["process"]["allocated"]
    peak2 = torch.cuda.max_memory_allocated() - base
    say(a2["peak"] == peak2 and a2["final"] == torch.cuda.memory_allocated() - base,
        "record.second", "peak %d (torch %d), final %d (torch %d)" % (
            a2["peak"], peak2, a2["final"], torch.cuda.memory_allocated() - base))
    del kept, u


CELL = """
import torch
def build_cache():
    return torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
cache = build_cache()
print("cell ran")
"""


def check_magic():
    try:
        from IPython.testing.globalipapp import start_ipython
        from IPython.utils.capture import capture_output
    except ImportError:
        start_ipython = None
    if start_ipython is None:
        # no IPython here: the function the magic runs, the same way
        from memsnap import _notebook
        out = os.path.join(OUT, "cell.msnap")
        svg, html, _ = _notebook.record_cell(CELL, path=out)
        say("<svg" in svg and "&lt;cell&gt;:4" in html, "magic.function",
            "record_cell: SVG %d bytes; highlights name the cell's line 4: %s"
            % (len(svg), "&lt;cell&gt;:4" in html))
        peak = memsnap.load(out).summary()["process"]["allocated"]["peak"]
        say(peak == 128 << 20, "magic.peak", "%d bytes" % peak)
        return
    ip = start_ipython()
    ip.display_formatter.active_types = ["text/plain", "text/html", "image/svg+xml"]
    ip.run_line_magic("load_ext", "memsnap")
    out = os.path.join(OUT, "cell.msnap")
    with capture_output() as cap:
        ip.run_cell_magic("memsnap", "-o %s" % out, CELL)
    svgs = [o.data["image/svg+xml"] for o in cap.outputs if "image/svg+xml" in o.data]
    htmls = [o.data["text/html"] for o in cap.outputs if "text/html" in o.data]
    named = bool(htmls) and ("build_cache (" in htmls[0] or ":4)" in htmls[0])
    say("cell ran" in cap.stdout and svgs and htmls and named,
        "magic.ipython", "SVG %d, HTML %d, names the cell's line: %s" % (len(svgs), len(htmls), named))


for name, fn in (("record", check_record), ("magic", check_magic)):
    try:
        fn()
    except Exception:
        say(False, name, traceback.format_exc().strip().splitlines()[-1])
        traceback.print_exc()
    save()
failed = [c["name"] for c in results["checks"] if not c["ok"]]
print("%d passed, %d failed%s" % (len(results["checks"]) - len(failed), len(failed),
                                  (": " + ", ".join(failed)) if failed else ""))
sys.exit(1 if failed else 0)

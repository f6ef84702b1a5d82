#!/usr/bin/env python3
"""hostile.py MEMSNAP SCRATCH CASE: the hostile files of issue 35 (items
14-19; data/hostile/README.md) read without a crash, a hang or memory out of
proportion, and with answers that agree.  Memory is measured (the child's
maximum RSS), never time: a hang is caught by a generous timeout only.
Environment: PYAPI_PYTHON, PYAPI_PATH (the Python API's interpreter and
package, for the cases that use it; skipped without)."""
import json
import os
import re
import resource
import subprocess
import sys

memsnap, scratch, case = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
H = os.path.join(here, "data", "hostile")
os.makedirs(scratch, exist_ok=True)
fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL:", what)


def run(*args, rc=(0, 1), timeout=300, prog=None):
    """(completed process, max RSS in MiB of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run([prog or memsnap, *args], capture_output=True, text=True, timeout=timeout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if r.returncode not in rc:
        print("FAIL:", prog or memsnap, *args, "->", r.returncode, r.stderr[-500:])
        sys.exit(1)
    return r, rss if resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss > before else rss


def gen(kind, *args):
    out = os.path.join(scratch, "%s.msnap" % kind)
    with open(out, "w") as f:
        subprocess.run([sys.executable, os.path.join(H, "gen_slow.py"), kind, *args], stdout=f,
                       check=True)
    return out


def api(code, *args):
    py, path = os.environ.get("PYAPI_PYTHON"), os.environ.get("PYAPI_PATH")
    if not py or not os.path.exists(py):
        print("skip: no Python API here")
        return None
    r = subprocess.run([py, "-c", code, *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=path))
    check(r.returncode == 0, "the Python API: %s" % r.stderr[-800:])
    return json.loads(r.stdout) if r.returncode == 0 else None


def case_divzero():
    f = os.path.join(H, "render-divzero-tmax.msnap")
    run("render", f, "-o", os.path.join(scratch, "dz"))
    for p in ("dz-timeline.png", "dz-segments.png"):
        check(os.path.getsize(os.path.join(scratch, p)) > 1000, p)
    run("render", f, "--x", "events", "--format", "svg", "-o", os.path.join(scratch, "dze"))
    run("compare", f, f, "-o", os.path.join(scratch, "dz-cmp.png"))
    run("flame", f, "--layer", "reserved", "-o", os.path.join(scratch, "dz.svg"))
    s = json.loads(run("summary", "--json", f)[0].stdout)
    check(s["process"]["reserved"]["peak"] == 12288, "summary of the file")


def case_bwd_stacks():
    big = gen("bwd")                      # 100,000-frame forward stack, 1,500 nodes
    for path, most in ((os.path.join(H, "bwd-stacks-small.msnap"), 100), (big, 200)):
        r, rss = run("summary", "--json", path)
        s = json.loads(r.stdout)
        check(s["events"]["total"] > 0, "summary")
        check(rss < most, "summary of %s: %.0f MiB at most (it took 1.2 GB)" % (
            os.path.basename(path), rss))
        r, rss = run("flame", path, "-o", os.path.join(scratch, "bwd.svg"))
        check(rss < most, "flame of %s: %.0f MiB" % (os.path.basename(path), rss))
    # the backward stacks keep the node, the innermost and the outermost frames
    st = api("""
import json, sys, resource, memsnap
s = memsnap.load(sys.argv[1])
sites = s.sites()
print(json.dumps({"peak": int(sites["peak"].sum()), "n": len(sites),
                  "alloc": s.summary()["process"]["allocated"]["peak"],
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))""", big)
    if st:
        # 1,501 blocks of 512 bytes, all live at the end: the sites hold them all
        check(st["alloc"] == 1501 * 512 and st["peak"] == 1501 * 512,
              "the API's sites %d, allocated peak %d, not %d" % (st["peak"], st["alloc"],
                                                               1501 * 512))
        check(st["rss"] < 600, "the Python API: %.0f MiB" % st["rss"])


def case_flame_deep():
    for path in (os.path.join(H, "flame-1000-frames.msnap"), gen("deep", "100000", "1000")):
        name = os.path.basename(path)
        r, rss = run("flame", path, "-o", os.path.join(scratch, "deep.svg"))
        svg = open(os.path.join(scratch, "deep.svg")).read()
        h = int(re.search(r'<svg[^>]* height="(\d+)"', svg).group(1))
        rows = set(re.findall(r'<g class="frame"[^>]*>\s*(?:<title>[^<]*</title>\s*)?<rect x="[0-9.]+" '
                              r'y="([0-9.]+)"', svg))
        check(h < 16384 and len(rows) <= 201, "%s: %d px, %d rows" % (name, h, len(rows)))
        check(re.search(r'data-label="\((\d+) frames\): ', svg), "%s: no box for the folded frames"
              % name)
        check("drawn with the middle folded into one box" in svg, "%s: the subtitle" % name)
        check(rss < 300, "%s: %.0f MiB" % (name, rss))
        check("out of memory" not in r.stderr, r.stderr)


def case_pyapi_overflow():
    f = os.path.join(H, "pyapi-ev_end-overflow.msnap")
    s = json.loads(run("summary", "--json", f)[0].stdout)
    res = s["process"]["reserved"]
    # the frees name 2 x (2^63 - 1) bytes live before the first event: past
    # 2^64, a level reads 2^64 - 1 (16 EiB), not a wrapped small number
    check(res["peak"] == 2 ** 64 - 1, "summary's peak %d" % res["peak"])
    check(res["final"] == 2097152 + 16, "summary's final %d" % res["final"])
    ev = api("""
import json, sys, memsnap
e = memsnap.load(sys.argv[1]).events()
print(json.dumps([int(x) for x in e["reserved"]]))""", f)
    if ev is not None:
        # exactly, with Python's integers: the pre-window objects until
        # their frees (events 2, 3), then what the events allocated
        big = 2 ** 63 - 1
        want = [min(2 ** 64 - 1, 2 * big + 2097152), big + 2097152, 2097152, 2097168]
        check(ev == want, "events()' reserved %s, not %s" % (ev, want))
        check(max(ev) == res["peak"] and ev[-1] == res["final"], "the API and summary disagree")


def case_fifo_module():
    fifo = "/tmp/memsnap-fifo"            # the path the file names
    made = False
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
        made = True
    try:
        if not os.path.exists(fifo) or not __import__("stat").S_ISFIFO(os.stat(fifo).st_mode):
            print("skip: /tmp/memsnap-fifo is something else here")
            return
        r, _ = run("symbolize", os.path.join(H, "symbolize-fifo-module.msnap"), "-o",
                   os.path.join(scratch, "fifo-out.msnap"), timeout=120)
        check("1 unusable (/tmp/memsnap-fifo: not a regular file)" in r.stderr, r.stderr)
    finally:
        if made:
            os.unlink(fifo)


def case_replay_huge():
    f = os.path.join(H, "replay-16eib-request.msnap")
    for engine in ("torch", "memsnap"):
        for conf in ("", "expandable_segments:true"):
            r, _ = run("replay", f, "-q", "--bytes", "-e", engine, "-c", conf)
            row = [l for l in r.stdout.splitlines() if l.startswith("1 ")]
            check(row and " 18446744073709551615 (x1)" in row[0],
                  "%s %r: the 16 EiB request is not an OOM: %s" % (engine, conf, row))


globals()["case_" + case]()
print("ok" if not fails else "%d failed" % fails)
sys.exit(1 if fails else 0)

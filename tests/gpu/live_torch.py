#!/usr/bin/env python3
"""Issue 32 on the GPU machine: `memsnap top --once` and the Prometheus
metrics of a PyTorch training run agree with torch.cuda.memory_allocated()
at a mark, under `memsnap run --metrics` and in-process with
memsnap.record(..., metrics=PORT).  Self-checking; stdlib only here (the
program, live_torch_train.py, runs in PyTorch's Python).

    python3 tests/gpu/live_torch.py BUILD_DIR [OUT_DIR]

BUILD_DIR: the memsnap build (bin/memsnap, python/ for memsnap.record);
MEMSNAP_PYTHON: the Python with torch (default python3).  At the mark the
program waits; this script then reads the metrics until
memsnap_allocated_bytes equals memory_allocated() (to the byte, 30 s at
most: the writer flushes every 100 ms, the metrics refresh every second),
and `memsnap top --once` must print that figure as msnap_size_text writes
it ("2.76 GiB").  Prints one PASS/FAIL line per check and a closing line;
keeps the snapshots, the frames and the metrics text in OUT_DIR (default
/tmp/memsnap-live-gpu).  Exit 0 all passed, 1 a check failed, 77 no torch
with a GPU.
"""
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/memsnap-live-gpu")
py = os.environ.get("MEMSNAP_PYTHON") or "python3"
memsnap = os.path.join(build, "bin", "memsnap")
train = os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_torch_train.py")
os.makedirs(out, exist_ok=True)
fails = 0


def check(name, ok, detail=""):
    global fails
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""),
          flush=True)
    fails += 0 if ok else 1


def size_text(b):
    """format/human.c msnap_size_text."""
    if b < 1024:
        return "%d B" % b
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    v, u = b / 1024.0, 1
    while v >= 1024.0 and u < 6:
        v /= 1024.0
        u += 1
    return "%.2f %s" % (v, units[u])


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def metric(text, name):
    vals = [int(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + "{")]
    return vals[0] if len(vals) == 1 else None


def phase(name, cmd, env, snap, port):
    """Runs cmd (the program), and at its mark the checks."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for f in ("at-mark", "go"):
        if os.path.exists(os.path.join(d, f)):
            os.unlink(os.path.join(d, f))
    log = open(os.path.join(out, name + ".log"), "w")
    p = subprocess.Popen(cmd + ["--dir", d], stdout=subprocess.PIPE, stderr=log, env=env,
                         text=True)
    mark = None
    for line in p.stdout:
        log.write(line)
        m = re.match(r"MARK allocated=(\d+) reserved=(\d+)", line)
        if m:
            mark = int(m.group(1)), int(m.group(2))
            break
    if mark is None:
        p.wait()
        check(name + ": the program reached its mark", False, "exit %s, see %s.log" % (p.returncode, name))
        return
    allocated, reserved = mark
    print("%s: torch.cuda.memory_allocated() = %d, memory_reserved() = %d at the mark"
          % (name, allocated, reserved), flush=True)
    text, got, end = "", None, time.time() + 30
    while time.time() < end:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                text = r.read().decode()
        except OSError:
            text = ""
        got = metric(text, "memsnap_allocated_bytes")
        if got == allocated:
            break
        time.sleep(0.25)
    with open(os.path.join(out, name + "-metrics.txt"), "w") as f:
        f.write(text)
    check(name + ": memsnap_allocated_bytes == memory_allocated()", got == allocated,
          "%s vs %d" % (got, allocated))
    res = metric(text, "memsnap_reserved_bytes")
    print("%s: memsnap_reserved_bytes %s (memory_reserved() %d; memsnap's reserved is all the "
          "process's driver memory)" % (name, res, reserved))
    if name == "memsnap.record":
        # in-process there is no driver level: no reserved series (it read
        # 0 here while PyTorch held 2.1 GB)
        check(name + ": no memsnap_reserved_bytes (not known in-process)",
              res is None and metric(text, "memsnap_peak_reserved_bytes") is None,
              "memsnap_reserved_bytes %s" % res)
    else:
        check(name + ": memsnap_reserved_bytes >= memory_reserved()",
              res is not None and res >= reserved, "%s vs %d" % (res, reserved))
    frame = subprocess.run([memsnap, "top", "--once", snap], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, LC_ALL="C.UTF-8")).stdout
    with open(os.path.join(out, name + "-top.txt"), "w") as f:
        f.write(frame)
    m = re.search(r"^  allocated  (\S+ \S+)", frame, re.M)
    check(name + ": top --once's allocated == memory_allocated()",
          m is not None and m.group(1) == size_text(allocated),
          "%r vs %r" % (m.group(1) if m else None, size_text(allocated)))
    if name == "memsnap.record":
        check(name + ": top --once says reserved is not recorded",
              re.search(r"^  reserved   not recorded", frame, re.M) is not None,
              (re.search(r"^  reserved .*$", frame, re.M) or [None])[0])
    if name == "memsnap-run":
        promtool = subprocess.run(["sh", "-c", "command -v promtool"], stdout=subprocess.PIPE)
        if promtool.returncode == 0:
            r = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            check(name + ": promtool check metrics", r.returncode == 0, r.stdout.strip())
    open(os.path.join(d, "go"), "w").close()
    rest, _ = p.communicate(timeout=300)
    log.write(rest)
    check(name + ": the program finished", p.returncode == 0 and "DONE" in rest,
          "exit %s" % p.returncode)


probe = subprocess.run([py, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)"])
if probe.returncode != 0:
    print("SKIP: no torch with a GPU in %s" % py)
    sys.exit(77)
env = dict(os.environ)
port = free_port()
snap = os.path.join(out, "train.msnap")
phase("memsnap-run", [memsnap, "run", "-q", "--metrics", "127.0.0.1:%d" % port, "-o", snap,
                      "--", py, train], env, snap, port)
port = free_port()
snap = os.path.join(out, "inproc.msnap")
env = dict(os.environ, PYTHONPATH=os.path.join(build, "python") +
           (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
phase("memsnap.record", [py, train, "--record", snap, "--metrics", str(port)], env, snap, port)
print("live_torch: %s (%s)" % ("all passed" if not fails else "%d failed" % fails, out))
sys.exit(1 if fails else 0)

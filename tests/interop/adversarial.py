"""Adversarial inputs for `memsnap import`: time linear in the size (ctest interop_adversarial).

    adversarial.py MEMSNAP SCRATCH

Issue 23: pickles of a few hundred KB held `memsnap import` for 40 s or for
ever, because the pickle reader scanned down its stack for each container
and the importer redid work on shared dicts.  Here each input of a few MB
(the shapes of the issue, nested versions of them, and the others found
then) is imported once and must finish: exit 0, or exit 2 with one line that
says what the input is (the expected words are given per case).

No wall-clock time is asserted (docs/benchmarks.md has the timings).
Instead MEMSNAP_IMPORT_STATS=1 makes the import print the steps of work it
did (interop/value.h: opcodes, values, containers, values moved, keys
compared by lookups, ...), and the steps must be linear in the input's
size: at most STEPS_PER_BYTE a byte, and at most RATIO times what a real
PyTorch-shaped pickle (and JSON) of about the same size takes a byte.  A
reader that went back to scanning its stack per container would take
millions of steps a byte here (every loop over the input counts its steps;
a new one must too), and be refused by the budget (32 a byte) with a
message no case expects.  The shapes that only the budget stops (the same
lookups on one shared dict) expect its message.
"""
import json
import os
import pickle
import re
import struct
import subprocess
import sys

M, S = sys.argv[1:3]
os.makedirs(S, exist_ok=True)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import torch_snapshot  # noqa: E402  (the fixtures' PyTorch schema)

MB = 1 << 20
STEPS_PER_BYTE = 8   # linear work, with room; the refusing budget is 32
RATIO = 4            # against a real snapshot of about the same size
BUDGET = r"byte \d+: \d+ steps of work .* past the budget"  # the refusal's line


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def s(text):
    """SHORT_BINUNICODE (or BINUNICODE past 255 bytes)."""
    b = text.encode()
    return b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b


def get(i):
    return b"j" + struct.pack("<I", i)  # LONG_BINGET


P4 = b"\x80\x04"
TOP = P4 + b"}(" + s("segments") + b"]" + s("device_traces")  # root, MARK, "segments", [], key


def real_snapshot(entries):
    """A PyTorch-shaped snapshot (gen_fixtures' schema, frames shared as
    PyTorch shares them) with about that many trace entries."""
    d = torch_snapshot()
    t0, t1 = d["device_traces"]
    out, addr, t = [], 0x7F4000000000, 100
    while len(out) < entries:
        for e in t0[1:5]:
            e = dict(e, addr=addr + (e["addr"] & 0xFFFFFF), time_us=t)
            out.append(e)
            t += 1
        addr += 1 << 24
    d["device_traces"] = [out, t1]
    return d


def run(path):
    r = subprocess.run([M, "import", path, "-o", os.path.join(S, "out.msnap")],
                       capture_output=True, text=True,
                       env=dict(os.environ, MEMSNAP_IMPORT_STATS="1"))
    m = re.search(r"work: (\d+) steps for (\d+) bytes", r.stderr)
    if not m:
        fail("%s: no work line: %s" % (path, r.stderr))
    other = [line for line in r.stderr.splitlines() if "memsnap import: work:" not in line]
    return r.returncode, other, int(m.group(1)), int(m.group(2))


def write(name, data):
    path = os.path.join(S, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---- the real snapshots: steps a byte to compare with -------------------------------
ref = {}
for name, data in (("real.pickle", pickle.dumps(real_snapshot(80000), protocol=4)),
                   ("real.json", json.dumps(real_snapshot(12000)).encode())):
    rc, err, steps, size = run(write(name, data))
    if rc != 0:
        fail("%s: exit %d: %s" % (name, rc, err))
    ref[name] = steps / size
    print("%-24s %9d bytes %10d steps  %.2f a byte" % (name, size, steps, steps / size))
    if size < 2 * MB:
        fail("%s: only %d bytes" % (name, size))
ref_rate = max(ref.values())
if ref_rate > STEPS_PER_BYTE / 2:
    fail("a real snapshot takes %.2f steps a byte: too near the budget" % ref_rate)

# ---- the adversarial inputs -----------------------------------------------------------
N = 3 * MB
cases = []  # (name, bytes, expected: None = exit 0, else a regex of the one error line)


def case(name, data, expect):
    cases.append((name, data, expect))


# The two inputs as they were, then at a few MB.
case("issue_lists.pickle", P4 + b"}" + s("device_traces") + b"]" * 220000 + b".",
     r"byte \d+: STOP with 220002 values")
case("issue_dicts.pickle", P4 + (b"}" + s("k")) * 250000 + b"s" * 250000 + b".",
     r"byte \d+: SETITEM on a value that is not a dict")
case("lists.pickle", P4 + b"}" + s("device_traces") + b"]" * N + b".",
     r"byte \d+: STOP with \d+ values")
case("dicts.pickle", P4 + (b"}" + s("k")) * (N // 4) + b"s" * (N // 4) + b".",
     r"byte \d+: SETITEM on a value that is not a dict")
# Nested versions.  Device lists stored in device_traces (a valid snapshot of
# empty devices): each new list used to scan down past all the others.
case("lists_stored.pickle", TOP + b"](" + b"]" * N + b"eu.", None)
# Device lists each behind its own MARK, nested: refused at the first APPENDS
# (a device list is not a trace entry), after N pushes that used to scan.
case("lists_marks.pickle", TOP + b"](" + b"(]" * (N // 2) + b"e" * (N // 2) + b"eu.",
     r"device_traces: more than 64 devices")
# {k: {k: {k: ...}}} a million levels deep under a MARK (SETITEM closes each):
# each new dict used to scan down to the MARK; valid, it imports.
case("dicts_nested.pickle", TOP + b"]" + s("x") + b"}" + (s("k") + b"}") * (N // 4) +
     b"s" * (N // 4) + b"u.", None)
# The same with a MARK per level (SETITEMS closes each).
case("dicts_marks.pickle", TOP + b"]" + s("x") + b"}" + (b"(" + s("k") + b"}") * (N // 5) +
     b"u" * (N // 5) + b"u.", None)
# A trace entry streamed again and again (DUP): the importer read it each time.
entry = (b"}(" + (s("zz") + b"K\x00") * 100000 + s("action") + s("alloc") + s("addr") +
         b"K\x01" + s("size") + b"K\x02" + s("stream") + b"K\x00" + s("time_us") + b"K\x05u")
case("entry_dup.pickle", TOP + b"](](" + entry + b"2" * (N // 2) + b"eeu.",
     r"byte \d+: a trace entry or segment added twice")
# One "memsnap" extension dict of 100,000 keys shared by every entry: each
# entry's lookups scan it again; only the budget stops this one.
ext = b"}(" + (s("zz") + b"K\x00") * 100000 + s("a") + s("block_alloc") + b"u\x94"
case("ext_shared.pickle", TOP + b"](](" + b"}(" + s("memsnap") + b"\x94" + ext + b"u" +
     (b"}(" + get(0) + get(1) + b"u") * (N // 14) + b"eeu.", BUDGET)
# Frame dicts that share one 1 MB function name (memo 3), one new frame dict
# an entry: each new frame hashed and compared the name again.
memo = b"".join(s(x) + b"\x94" + b"0"
                for x in ("filename", "name", "line", "n" * MB, "action", "alloc", "addr", "size",
                          "stream", "time_us", "frames"))
frame = b"}(" + get(0) + get(1) + get(1) + get(3) + get(2) + b"K\x01u"
entry = (b"}(" + get(4) + get(5) + get(6) + b"K\x01" + get(7) + b"K\x01" + get(8) + b"K\x00" +
         get(9) + b"K\x01" + get(10) + b"]" + frame + b"au")
case("frames_long_name.pickle", P4 + memo + TOP[2:] + b"](](" + entry * ((N - MB) // len(entry)) +
     b"eeu.", BUDGET)
# One blocks list of 300,000 blocks (memo 0) in every segment.
block = (b"}(" + s("address") + b"K\x00" + s("size") + b"K\x01" + s("state") +
         s("active_allocated") + b"u")
seg = (b"}(" + s("device") + b"K\x00" + s("address") + b"K\x00" + s("total_size") + b"K\x01" +
       s("stream") + b"K\x00" + s("blocks") + get(0) + b"u")
case("blocks_shared.pickle", P4 + b"]\x94(" + block + b"2" * 300000 + b"e0" + b"}(" +
     s("segments") + b"](" + seg * (N // len(seg)) + b"e" + s("device_traces") + b"]u.",
     r"one blocks list in two segments")
# allocator_settings: a list shared 40 levels deep (2^40 leaves), and 30
# levels of dicts used as keys (each escaped again): the settings are
# written as JSON.  Tiny files; they import, the settings replaced by a note.
case("settings_dag.pickle", TOP + b"]" + s("allocator_settings") + b"]" + b"2\x86" * 40 + b"u.",
     None)
keys = b"}" + b"".join(b"\x94" + b"0" + b"}" + b"h" + bytes([i]) + b"K\x01s" for i in range(30))
case("settings_keys.pickle", TOP + b"]" + s("allocator_settings") + keys + b"u.", None)
# JSON: many device lists; an entry of 300,000 keys; nesting past 200 levels.
case("lists.json", b'{"device_traces": [' + b"[]," * (N // 3) + b'[]], "segments": []}', None)
case("wide_entry.json", b'{"segments": [], "device_traces": [[{' +
     b"".join(b'"k%d": 0, ' % i for i in range(300000)) +
     b'"action": "alloc", "addr": 1, "size": 2, "stream": 0, "time_us": 5}]]}', None)
case("deep.json", b'{"x": ' + b"[" * N + b"]" * N + b"}",
     r"byte \d+: nested deeper than 200 levels")

worst = 0.0
for name, data, expect in cases:
    path = write(name, data)
    rc, err, steps, size = run(path)
    rate = steps / size
    print("%-24s %9d bytes %10d steps  %.2f a byte  exit %d  %s" %
          (name, size, steps, rate, rc, err[0] if err else ""))
    if expect is None:
        if rc != 0:
            fail("%s: exit %d: %s" % (name, rc, err))
        if name.startswith("settings_"):
            with open(os.path.join(S, "out.msnap")) as f:
                settings = json.loads(f.readline())["settings"]
            if "not kept" not in settings.get("allocator_settings", ""):
                fail("%s: settings %s" % (name, settings))
    else:
        if rc != 2 or len(err) != 1:
            fail("%s: exit %d, %d lines (expected exit 2, one line): %s"
                 % (name, rc, len(err), err))
        if not re.search(expect, err[0]):
            fail("%s: expected /%s/: %s" % (name, expect, err[0]))
    if expect == BUDGET:
        continue  # refused at the budget: its steps are the budget's
    if rc == 0 and size != len(data):
        fail("%s: read %d of %d bytes" % (name, size, len(data)))
    if rate > STEPS_PER_BYTE or rate > RATIO * ref_rate:
        fail("%s: %d steps for %d bytes (%.2f a byte): not linear (a real snapshot: %.2f a byte)"
             % (name, steps, size, rate, ref_rate))
    worst = max(worst, rate)
print("ok: %d adversarial inputs; at most %.2f steps a byte where not refused by the budget "
      "(a real snapshot: %.2f)" % (len(cases), worst, ref_rate))

"""Checks what `memsnap export --format torch` writes (ctest interop_torch_pickle).

    torch_pickle.py MEMSNAP GEN DATA SCRATCH

MEMSNAP is the CLI, GEN bench_gen_snapshot, DATA tests/interop/data.  Asserts:
  - the pickle loads with Python's pickle and has PyTorch's schema: the keys
    torch.cuda.memory._snapshot() writes for segments, blocks, trace entries,
    frames and allocator_settings;
  - it uses only the opcodes of plain data that PyTorch's MemoryViz.js
    unpickler implements (no GLOBAL/REDUCE/..., no BINUNICODE8), and its
    APPENDS/SETITEMS batches hold at most 1000 items;
  - frames are shared: one frames list per stack, not one per entry;
  - the JSON export (--format torch-json) holds the same data;
  - time_us = (header t0_unix_ns + t) // 1000, Unix-epoch microseconds;
  - a 2-device snapshot keeps both devices;
  - --max-entries keeps the newest entries and says so; --from/--to cut a
    window and --from #i / --to #j by event index;
  - stderr counts the trace entries actually written.
"""
import json
import os
import pickle
import pickletools
import subprocess
import sys

M, GEN, DATA, S = sys.argv[1:5]
os.makedirs(S, exist_ok=True)

# what MemoryViz.js's unpickle() implements
JS_OPCODES = {"PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE",
              "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME",
              "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "SETITEMS",
              "SETITEM", "DICT", "SHORT_BINUNICODE", "BINUNICODE", "STOP", "EMPTY_TUPLE",
              "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT"}
SEG_KEYS = ["device", "address", "total_size", "allocated_size", "active_size", "requested_size",
            "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"]
BLOCK_KEYS = ["address", "size", "requested_size", "state", "frames"]
ENTRY_KEYS = ["action", "addr", "size", "stream", "time_us", "frames"]
SETTINGS_KEYS = ["PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
                 "expandable_segments", "pinned_num_register_threads",
                 "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                 "roundup_power2_divisions"]
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def export(snap, out, *args):
    r = subprocess.run([M, "export", snap, "-o", out] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        fail("export %s %s: exit %d: %s" % (snap, args, r.returncode, r.stderr))
    return r.stderr


def opcodes_ok(path):
    data = open(path, "rb").read()
    marks = []
    for op, arg, pos in pickletools.genops(data):
        if op.name not in JS_OPCODES:
            fail("%s: opcode %s at byte %d is not one MemoryViz.js reads" % (path, op.name, pos))
        if op.name == "MARK":
            marks.append(0)
        elif op.name in ("APPENDS", "SETITEMS"):
            n = marks.pop()
            if n > (2000 if op.name == "SETITEMS" else 1000):
                fail("%s: a batch of %d items at byte %d" % (path, n, pos))
        elif marks and op.stack_after and op.name not in ("PROTO", "FRAME"):
            marks[-1] += 1  # close enough: counts pushes inside the open mark


def check_schema(d, path):
    if list(d.keys())[:3] != ["segments", "device_traces", "allocator_settings"]:
        fail("%s: top keys %s" % (path, list(d.keys())))
    for s in d["segments"]:
        if [k for k in s if k != "memsnap_synthesized"] != SEG_KEYS:
            fail("%s: segment keys %s" % (path, list(s)))
        a = s["address"]
        for b in s["blocks"]:
            if list(b) != BLOCK_KEYS:
                fail("%s: block keys %s" % (path, list(b)))
            if b["address"] != a:
                fail("%s: blocks do not tile their segment" % path)
            a += b["size"]
        if a != s["address"] + s["total_size"]:
            fail("%s: blocks do not tile their segment" % path)
    for tr in d["device_traces"]:
        last = 0
        for e in tr:
            keys = [k for k in e if k != "memsnap"]
            want = ENTRY_KEYS if e["action"] != "oom" else ["action", "device_free"] + ENTRY_KEYS[2:]
            if keys != want:
                fail("%s: trace entry keys %s" % (path, keys))
            if e["action"] not in ACTIONS:
                fail("%s: action %s" % (path, e["action"]))
            if e["time_us"] < last:
                fail("%s: time_us not ascending" % path)
            last = e["time_us"]
            for f in e["frames"]:
                if list(f) != ["name", "filename", "line"]:
                    fail("%s: frame keys %s" % (path, list(f)))
    if list(d["allocator_settings"])[:len(SETTINGS_KEYS)] != SETTINGS_KEYS:
        fail("%s: allocator_settings keys %s" % (path, list(d["allocator_settings"])))


def strip_ext(d):
    d.pop("memsnap", None)
    for tr in d["device_traces"]:
        for e in tr:
            e.pop("memsnap", None)
    return d


# 1. the small 2-device snapshot: schema, JSON = pickle, epoch times
rt = os.path.join(DATA, "roundtrip.msnap")
export(rt, S + "/rt.pickle", "--format", "torch")
export(rt, S + "/rt.json", "--format", "torch-json")
opcodes_ok(S + "/rt.pickle")
p = pickle.load(open(S + "/rt.pickle", "rb"))
j = json.load(open(S + "/rt.json"))
check_schema(p, "rt.pickle")
check_schema(j, "rt.json")
if strip_ext(j) != p:
    fail("the JSON and the pickle export differ")
if len(p["device_traces"]) != 2 or not all(p["device_traces"]):
    fail("a 2-device snapshot lost a device: %d traces" % len(p["device_traces"]))
lines = [json.loads(l) for l in open(rt)]
t0 = int(lines[0]["t0_unix_ns"], 16)
block_allocs = [l for l in lines if l.get("a") == "block_alloc"]
torch_allocs = [e for tr in p["device_traces"] for e in tr if e["action"] == "alloc"]
if [(t0 + l["t"]) // 1000 for l in block_allocs] != [e["time_us"] for e in torch_allocs]:
    fail("time_us is not (t0_unix_ns + t) // 1000: %s vs %s" %
         ([(t0 + l["t"]) // 1000 for l in block_allocs], [e["time_us"] for e in torch_allocs]))
if not 1.5e15 < torch_allocs[0]["time_us"] < 4e15:
    fail("time_us %d is not Unix-epoch microseconds" % torch_allocs[0]["time_us"])

# 2. a generated snapshot with allocator blocks: shared frames, counts, cuts
big = S + "/gen.msnap"
subprocess.run([GEN, "60000", big, "blocks"], check=True, capture_output=True)
err = export(big, S + "/gen.pickle", "--format", "torch", "--max-entries", "0")
opcodes_ok(S + "/gen.pickle")
g = pickle.load(open(S + "/gen.pickle", "rb"))
check_schema(g, "gen.pickle")
n = sum(len(t) for t in g["device_traces"])
if " -> %d trace entries" % n not in err:
    fail("stderr does not count the %d entries written: %s" % (n, err))
frames_ids = {id(e["frames"]) for t in g["device_traces"] for e in t}
if len(frames_ids) > 64 + 1:
    fail("frames are not shared: %d distinct lists for 64 stacks" % len(frames_ids))
if os.path.getsize(S + "/gen.pickle") > 80 * n:
    fail("pickle of %d bytes for %d entries" % (os.path.getsize(S + "/gen.pickle"), n))

err = export(big, S + "/cut.pickle", "--format", "torch", "--max-entries", "1000")
c = pickle.load(open(S + "/cut.pickle", "rb"))
cn = sum(len(t) for t in c["device_traces"])
if not 990 <= cn <= 1000 or "kept the newest %d of %d" % (cn, n) not in err:
    fail("--max-entries 1000 kept %d: %s" % (cn, err))
if c["device_traces"][0][-cn:] != g["device_traces"][0][-cn:]:
    fail("--max-entries did not keep the newest entries")
if c["segments"] != g["segments"]:
    fail("--max-entries changed the final state")
export(big, S + "/def.pickle", "--format", "torch")  # default cap is above 60k events

allt = [json.loads(l)["t"] for l in open(big) if '"a":' in l]
lo, hi = allt[1000], allt[2000]
export(big, S + "/win.pickle", "--format", "torch", "--from", "%dns" % lo, "--to", "%dns" % hi)
w = pickle.load(open(S + "/win.pickle", "rb"))
ts = [e["time_us"] for t in w["device_traces"] for e in t]
if not ts or min(ts) < lo // 1000 or max(ts) > hi // 1000 + 1:
    fail("--from/--to window: %s..%s for %d..%d" % (ts[:1], ts[-1:], lo, hi))
export(big, S + "/ix.pickle", "--format", "torch", "--from", "#1000", "--to", "#2000")
x = pickle.load(open(S + "/ix.pickle", "rb"))
if x != w:
    fail("--from #1000 --to #2000 differs from the same window by time")
print("ok: %d entries, %d bytes pickle" % (n, os.path.getsize(S + "/gen.pickle")))

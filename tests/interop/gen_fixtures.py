#!/usr/bin/env python3
"""Generates the interop test fixtures in data/ (committed; rerun after a change).

python3 here has no torch, so the PyTorch snapshots are built as plain dicts
following the schema of torch.cuda.memory._snapshot() (segments with blocks,
device_traces with alloc / free_requested / free_completed / segment_* / oom
entries, frames shared between entries as PyTorch shares them) and pickled
with protocols 2, 3, 4 and 5, as torch.cuda.memory._dump_snapshot does.

Also written: hostile and broken pickles, a memsnap snapshot with every
event kind for the round trip, and a trace whose alloc/free sequence
fragments fixed segments (replay: OOM with fixed segments, none with
expandable ones under the same cap).
"""
import json
import os
import pickle

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
MiB = 1 << 20


def torch_snapshot():
    f_a = {"filename": "train.py", "line": 12, "name": "forward"}
    f_b = {"filename": "torch/nn/modules/linear.py", "line": 125, "name": "forward"}
    f_c = {"filename": "train.py", "line": 40, "name": "main"}
    fr1 = [f_b, f_a, f_c]          # shared lists, as py_symbolize shares them
    fr2 = [f_a, f_c]
    base0, base1 = 0x7F0000000000, 0x7F2000000000
    trace0 = [
        {"action": "segment_alloc", "addr": base0, "size": 20 * MiB, "stream": 0, "time_us": 10, "frames": fr1},
        {"action": "alloc", "addr": base0, "size": 4 * MiB, "stream": 0, "time_us": 11, "frames": fr1},
        {"action": "alloc", "addr": base0 + 4 * MiB, "size": 2 * MiB, "stream": 0, "time_us": 12, "frames": fr2},
        {"action": "free_requested", "addr": base0, "size": 4 * MiB, "stream": 0, "time_us": 20, "frames": fr1},
        {"action": "free_completed", "addr": base0, "size": 4 * MiB, "stream": 0, "time_us": 21, "frames": fr1},
        {"action": "segment_map", "addr": base0 + 64 * MiB, "size": 4 * MiB, "stream": 0, "time_us": 30, "frames": fr2},
        {"action": "segment_unmap", "addr": base0 + 66 * MiB, "size": 2 * MiB, "stream": 0, "time_us": 31, "frames": []},
        {"action": "oom", "device_free": 5 * MiB, "size": 1 << 30, "stream": 0, "time_us": 40, "frames": fr2},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 41},
    ]
    trace1 = [
        {"action": "segment_alloc", "addr": base1, "size": 2 * MiB, "stream": 140000000000001, "time_us": 15, "frames": fr2},
        {"action": "alloc", "addr": base1, "size": 512, "stream": 140000000000001, "time_us": 16, "frames": fr2},
    ]
    segments = [
        {"device": 0, "address": base0, "total_size": 20 * MiB, "allocated_size": 2 * MiB,
         "active_size": 2 * MiB, "requested_size": 2 * MiB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr1,
         "blocks": [
             {"address": base0, "size": 4 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
             {"address": base0 + 4 * MiB, "size": 2 * MiB, "requested_size": 2 * MiB,
              "state": "active_allocated", "frames": fr2},
             {"address": base0 + 6 * MiB, "size": 14 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
        {"device": 0, "address": base0 + 64 * MiB, "total_size": 2 * MiB, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": True, "frames": [],
         "blocks": [{"address": base0 + 64 * MiB, "size": 2 * MiB, "requested_size": 0,
                     "state": "inactive", "frames": []}]},
        {"device": 1, "address": base1, "total_size": 2 * MiB, "allocated_size": 512,
         "active_size": 512, "requested_size": 500, "stream": 140000000000001, "segment_type": "small",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr2,
         "blocks": [{"address": base1, "size": 512, "requested_size": 500, "state": "active_allocated", "frames": fr2},
                    {"address": base1 + 512, "size": 2 * MiB - 512, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace0, trace1],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False,
                                   "max_split_size": -1, "garbage_collection_threshold": 0.0,
                                   "roundup_power2_divisions": {"1": 0, "2": 0}},
            "external_annotations": []}


def msnap_lines(header_extra, events, stacks=(), strs=(), syms=()):
    h = {"type": "header", "format": "memsnap", "version": "1.0", "pid": 4242, "host": "testhost",
         "argv": ["python3", "train.py"], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": "0x17979cfe3d85cd15",
         "mode": "stream", "settings": {}, "devices": []}
    h.update(header_extra)
    out = [h, {"type": "device", "index": 0, "name": "Simulated H200", "total": 150000000000},
           {"type": "device", "index": 1, "name": "Simulated H200", "total": 150000000000}]
    out += [{"type": "stack", "id": i, "ips": ips} for i, ips in stacks]
    out += [{"type": "str", "id": i, "s": s} for i, s in strs]
    out += events
    out += [{"type": "sym", "ip": ip, "fn": fn, "file": fl, "line": ln, "off": 4} for ip, fn, fl, ln in syms]
    return "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in out)


def roundtrip_snapshot():
    """Every event kind, two devices, two streams, a free_error."""
    B = 0x7F0000000000
    ev = []
    t = [1000]

    def e(**kw):
        t[0] += 1234
        d = {"a": kw.pop("a"), "t": t[0]}
        d.update({k: v for k, v in kw.items() if v})
        ev.append(d)
    e(a="alloc", p=B, n=20 * MiB, k=1, th=7, f="cuMemAlloc_v2")
    e(a="block_alloc", p=B, n=MiB, s=0, k=2, th=7, f="allocator")
    e(a="block_alloc", p=B + MiB, n=3 * MiB, s=5, k=3, th=8, f="allocator")
    e(a="nvtx_push", x=1, th=7, f="nvtx")
    e(a="block_free", p=B, th=7, f="allocator")
    e(a="block_alloc", p=B, n=512 * 1024, s=0, k=2, th=7, f="allocator")
    e(a="nvtx_pop", th=7, f="nvtx")
    e(a="async_alloc", d=1, p=B + (1 << 36), n=4 * MiB, s=99, x=17, k=1, th=9, f="cuMemAllocAsync")
    e(a="async_free", d=1, p=B + (1 << 36), s=99, th=9, f="cuMemFreeAsync")
    e(a="host_alloc", d=-1, p=0x5000000, n=MiB, k=1, th=7, f="cuMemHostAlloc")
    e(a="host_free", d=-1, p=0x5000000, n=MiB, th=7, f="cuMemFreeHost")
    e(a="vmm_reserve", p=B + (1 << 40), n=1 << 30, x=2 * MiB, th=7, f="cuMemAddressReserve")
    e(a="vmm_create", x="0x20000000000001", n=2 * MiB, th=7, f="cuMemCreate")
    e(a="vmm_map", p=B + (1 << 40), n=2 * MiB, x="0x20000000000001", th=7, f="cuMemMap")
    e(a="nvtx_mark", x=2, th=7, f="memsnap_api")
    e(a="vmm_unmap", p=B + (1 << 40), n=2 * MiB, th=7, f="cuMemUnmap")
    e(a="vmm_release", x="0x20000000000001", th=7, f="cuMemRelease")
    e(a="vmm_addr_free", p=B + (1 << 40), n=1 << 30, th=7, f="cuMemAddressFree")
    e(a="free", p=0x1234, th=7, f="cuMemFree_v2")
    e(a="free_error", p=0x1234, th=7, f="cuMemFree_v2", r=1)
    e(a="oom", n=1 << 40, x=5 * MiB, y=150000000000, k=1, th=7, f="cuMemAlloc_v2", r=2)
    e(a="alloc_error", n=7, k=1, th=7, f="cuMemAlloc_v2", r=1)
    e(a="managed_alloc", p=0x6000000, n=MiB, th=7, f="cuMemAllocManaged")
    e(a="free", p=0x6000000, th=7, f="cuMemFree_v2")
    e(a="dump", x=3, th=7, f="memsnap_api")
    e(a="alloc", d=1, p=B + (1 << 37), n=2 * MiB, k=1, th=9, f="cuMemAlloc_v2")
    e(a="block_alloc", d=1, p=B + (1 << 37), n=4096, s=3, k=3, th=9, f="allocator")
    return msnap_lines({}, ev, stacks=[(1, ["0x401000", "0x402000"]), (2, ["0x401100"]), (3, ["0x401200", "0x401000"])],
                       strs=[(1, "step \"1\""), (2, "mark\\2"), (3, "oom")],
                       syms=[("0x401000", "main", "train.c", 10), ("0x401100", "alloc_weights", "w.c", 20)])


def frag_snapshot():
    """30 x 6 MiB, free 20 (keep every third), then 3 x 16 MiB.
    Fixed segments (20 MiB each for 6 MiB requests) fill a 200 MiB device and
    can never be given back (each keeps one live block): the 16 MiB requests
    OOM.  Expandable segments unmap the free pages and fit them."""
    ev, t = [], 0
    for i in range(30):
        t += 1000
        ev.append({"a": "block_alloc", "t": t, "p": 0x100000000 + i * 8 * MiB, "n": 6 * MiB, "f": "allocator"})
    for i in range(30):
        if i % 3:
            t += 1000
            ev.append({"a": "block_free", "t": t, "p": 0x100000000 + i * 8 * MiB, "f": "allocator"})
    for j in range(3):
        t += 1000
        ev.append({"a": "block_alloc", "t": t, "p": 0x900000000 + j * 32 * MiB, "n": 16 * MiB, "f": "allocator"})
    return msnap_lines({}, ev)


def hostile():
    p2 = b"\x80\x02"
    return {
        "GLOBAL": p2 + b"cos\nsystem\nq\x00.",
        "STACK_GLOBAL": b"\x80\x04\x8c\x02os\x8c\x06system\x93.",
        "REDUCE": p2 + b"N)R.",
        "INST": p2 + b"(ios\nsystem\n.",
        "OBJ": p2 + b"(N)o.",
        "NEWOBJ": p2 + b"N)\x81.",
        "NEWOBJ_EX": b"\x80\x04N)}\x92.",
        "BUILD": p2 + b"}}b.",
        "EXT1": p2 + b"\x82\x01.",
        "EXT2": p2 + b"\x83\x01\x00.",
        "EXT4": p2 + b"\x84\x01\x00\x00\x00.",
        "PERSID": p2 + b"Pfoo\n.",
        "BINPERSID": p2 + b"NQ.",
        "NEXT_BUFFER": b"\x80\x05\x97.",
        # a real-looking snapshot dict with a GLOBAL hidden in the middle
        "GLOBAL_nested": pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=2)[:-2]
        + b"cbuiltins\neval\n.",
    }


def main():
    os.makedirs(DATA, exist_ok=True)
    snap = torch_snapshot()
    with open(os.path.join(DATA, "torch_small.json"), "w") as f:
        json.dump(snap, f)
    for proto in (2, 3, 4, 5):
        with open(os.path.join(DATA, "torch_small_p%d.pickle" % proto), "wb") as f:
            pickle.dump(snap, f, protocol=proto)
    raw = pickle.dumps(snap, protocol=4)
    with open(os.path.join(DATA, "truncated.pickle"), "wb") as f:
        f.write(raw[: len(raw) // 2])
    with open(os.path.join(DATA, "garbage.pickle"), "wb") as f:
        f.write(b"\x80\x04" + bytes((i * 97 + 13) % 256 for i in range(300)))
    with open(os.path.join(DATA, "truncated.json"), "w") as f:
        f.write(json.dumps(snap)[:300])
    with open(os.path.join(DATA, "notsnap.json"), "w") as f:
        f.write('{"hello": [1, 2, 3]}\n')
    for name, data in hostile().items():
        with open(os.path.join(DATA, "hostile_%s.pickle" % name), "wb") as f:
            f.write(data)
    with open(os.path.join(DATA, "roundtrip.msnap"), "w") as f:
        f.write(roundtrip_snapshot())
    with open(os.path.join(DATA, "frag.msnap"), "w") as f:
        f.write(frag_snapshot())


if __name__ == "__main__":
    main()

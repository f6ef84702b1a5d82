#!/usr/bin/env python3
"""Checks a plain-text snapshot of tests/torch/cases.sh against what
torch_test printed ("key value" lines).

  check.py api|api-ring|refused|loaded SNAP OUT   exit 0 when the snapshot is right,
                                         else 1 with the reason
  check.py buildid ELF                   prints the GNU build-id (hex)
Prints "N passed, 0 failed" on success, as the other case scripts do.
"""
import json
import struct
import sys


def build_id(path):
    """Hex GNU build-id of a 64-bit little-endian ELF file, '' if none."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        base = shoff + i * shentsize
        if struct.unpack_from("<I", data, base + 4)[0] != 7:
            continue
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        p = off
        while p + 12 <= off + size:
            nsz, dsz, typ = struct.unpack_from("<III", data, p)
            d = p + 12 + ((nsz + 3) & ~3)
            if typ == 3 and data[p + 12:p + 12 + nsz] == b"GNU\0":
                return data[d:d + dsz].hex()
            p = d + ((dsz + 3) & ~3)
    return ""


def load(path):
    """(events, lives per state block, strings) of a plain snapshot."""
    events, states, strs = [], [], {}
    for line in open(path):
        if not line.endswith("\n"):
            break
        o = json.loads(line)
        if "a" in o:
            events.append(o)
        elif o.get("type") == "state":
            states.append([])
        elif o.get("type") == "live":
            states[-1].append(o)
        elif o.get("type") == "str":
            strs[o["id"]] = o["s"]
    return events, states, strs


class Checker:
    def __init__(self):
        self.n = 0

    def eq(self, what, got, want):
        if got != want:
            print("FAIL: %s: %r, expected %r" % (what, got, want))
            sys.exit(1)
        self.n += 1


def main():
    if sys.argv[1] == "buildid":
        print(build_id(sys.argv[2]))
        return 0
    mode, snap, outp = sys.argv[1:4]
    out = dict(l.split() for l in open(outp) if l.strip())
    events, states, strs = load(snap)
    torch = [e for e in events if e.get("f") == "torch"]
    c = Checker()
    if mode == "api":
        seg, live = int(out["seg"]), int(out["live"])
        c.eq("torch actions", [e["a"] for e in torch],
             ["segment_alloc", "block_alloc", "block_alloc", "block_free_requested", "block_free",
              "segment_map", "segment_unmap", "oom", "segment_free"])
        b1, b2 = torch[1], torch[2]
        c.eq("block 1", (b1["p"], b1["n"], b1["s"], b1.get("x"), b1.get("y")),
             (seg, 1000, 0x5000, 7, 1000))
        c.eq("block 2", (b2["p"], b2["n"], b2["s"], b2.get("x"), b2.get("y")),
             (live, 2048, 0x5000, None, 2048))
        c.eq("free", (torch[4]["p"], torch[4]["n"]), (seg, 1000))
        c.eq("segment_map", (torch[5]["p"], torch[5]["n"]), (seg + (2 << 20), 2 << 20))
        oom = torch[7]
        c.eq("oom", (oom["n"], oom.get("x"), oom.get("p"), oom.get("r")), (1 << 40, 12345, None, 2))
        c.eq("every torch event has a stack", all(e.get("k", 0) > 0 for e in torch), True)
        i = events.index(oom)
        dumps = [e for e in events[i:] if e["a"] == "dump"]
        c.eq("a dump after the torch oom", bool(dumps) and strs.get(dumps[0].get("x")), "oom")
        blocks = sorted((l["p"], l["n"]) for l in states[0] if l["kind"] == "block_alloc")
        c.eq("live blocks in the oom dump", blocks, [(live, 2048)])
    elif mode == "api-ring":   # the ring dump written at the torch oom
        live = int(out["live"])
        c.eq("torch actions up to the oom", [e["a"] for e in torch],
             ["segment_alloc", "block_alloc", "block_alloc", "block_free_requested", "block_free",
              "segment_map", "segment_unmap", "oom"])
        c.eq("oom", (torch[-1]["n"], torch[-1].get("x")), (1 << 40, 12345))
        blocks = sorted((l["p"], l["n"]) for l in states[0] if l["kind"] == "block_alloc")
        c.eq("live blocks in the ring oom dump", blocks, [(live, 2048)])
    elif mode == "refused":
        allocs = [e for e in events if e["a"] == "alloc"]
        c.eq("no torch events", torch, [])
        c.eq("driver allocations", len(allocs), int(out["n"]))
        c.eq("first allocation", allocs[0]["p"], int(out["first"]))
    elif mode == "loaded":
        first, last = int(out["first"]), int(out["last"])
        blocks = [e for e in torch if e["a"] == "block_alloc"]
        c.eq("block_alloc events", len(blocks), 3)
        c.eq("the first allocation's block is recorded", blocks[0]["p"], first)
        c.eq("block_free events", len([e for e in torch if e["a"] == "block_free"]), 2)
        c.eq("segment_alloc events", len([e for e in torch if e["a"] == "segment_alloc"]), 3)
        at_exit = sorted(l["p"] for l in states[-1] if l["kind"] == "block_alloc")
        c.eq("live blocks at exit", at_exit, [last])
    else:
        print("FAIL: unknown mode %s" % mode)
        return 1
    print("%d passed, 0 failed" % c.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())

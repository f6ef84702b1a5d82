#!/usr/bin/env python3
"""Checks a plain-text snapshot of tests/torch/cases.sh against what
torch_test printed ("key value" lines).

  check.py api|api-ring|refused|loaded SNAP OUT   exit 0 when the snapshot is right,
                                         else 1 with the reason
  check.py api2|api2-off|api2-native SNAP OUT   the autograd nodes and sequence
                                         numbers (format 1.2), with
                                         MEMSNAP_TORCH_NODES 1 or 0, or 1 with
                                         MEMSNAP_TORCH_NATIVE_DEPTH=4
  check.py pystacks SNAP FREE NATIVE     the stacks of pystacks.py's events, with
                                         MEMSNAP_TORCH_FREE_STACKS=FREE and
                                         MEMSNAP_TORCH_NATIVE_DEPTH=NATIVE
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


def load_stacks(path):
    """{stack id: [ip, ...]} of a plain snapshot."""
    stacks = {}
    for line in open(path):
        if '"type":"stack"' in line and line.endswith("\n"):
            o = json.loads(line)
            stacks[o["id"]] = [int(x, 16) for x in o["ips"]]
    return stacks


def load_syms(path, full=False):
    """{ip: function name} of the sym lines of a plain snapshot
    ({ip: the sym line} when full)."""
    syms = {}
    for line in open(path):
        if '"type":"sym"' in line and line.endswith("\n"):
            o = json.loads(line)
            syms[int(o["ip"], 16)] = o if full else o.get("fn", "")
    return syms


AUTOGRAD = 3 << 62


def api2(c, snap, out, nodes, native=False):
    """torch_test api2's events: q on allocations (forward and backward),
    the node as the innermost stack entry named by its sym line, nothing of
    either on frees; with nodes off, neither anywhere."""
    events, _, _ = load(snap)
    torch = [e for e in events if e.get("f") == "torch"]
    stacks, syms = load_stacks(snap), load_syms(snap, full=True)
    seg = int(out["seg"])
    mm, acc = int(out["mm"]), int(out["acc"])
    c.eq("one id per name", (mm > 0, acc > 0, mm != acc, int(out["mm2"]) == mm, int(out["null"])),
         (True, True, True, True, 0))
    c.eq("torch actions", [e["a"] for e in torch],
         ["segment_alloc", "block_alloc", "block_alloc", "block_alloc", "block_alloc",
          "block_free_requested", "block_free", "block_alloc", "block_free_requested",
          "block_free"])
    want_q = [42, 42, 43, 43, None, None, None, 44, None, None]
    if not nodes:
        want_q = [None] * len(torch)
    c.eq("q", [e.get("q") for e in torch], want_q)
    first = [stacks[e["k"]][0] if e.get("k") else None for e in torch]
    want_first = [None, None, None, AUTOGRAD | mm, AUTOGRAD | acc, None, None, AUTOGRAD | mm,
                  None, None]
    if not nodes:
        want_first = [None] * len(torch)
    c.eq("autograd frames (innermost)",
         [f if f is not None and f >> 62 == 3 else None for f in first], want_first)
    c.eq("no autograd frame below the innermost",
         [any(ip >> 62 == 3 for ip in stacks[e["k"]][1:]) for e in torch if e.get("k")],
         [False] * len([e for e in torch if e.get("k")]))
    if nodes:
        for ip, name in ((AUTOGRAD | mm, "MmBackward0"), (AUTOGRAD | acc, "AccumulateGrad")):
            s = syms.get(ip, {})
            c.eq("sym line of %s" % name, (s.get("fn"), s.get("file"), s.get("line", 0)),
                 (name, "<autograd>", 0))
        c.eq("backward stacks differ by node", torch[3]["k"] != torch[4]["k"], True)
        c.eq("the same node, the same autograd frame", first[3], first[7])
    else:
        c.eq("no autograd sym lines", [ip for ip in syms if ip >> 62 == 3], [])
    # With a node (the default) a backward allocation's stack is the node
    # alone: readers show it on the forward allocation's stack and keep
    # nothing else of its own (recorder/torch.c, torch_stack); without
    # nodes, the native frames of a thread without Python
    # (MEMSNAP_TORCH_NATIVE_DEPTH=4: the node, then native frames)
    c.eq("the backward's allocations: the node alone, or native frames without nodes",
         [len(stacks[torch[i]["k"]]) for i in (3, 4)] if nodes and not native else
         all(len(stacks[torch[i]["k"]]) > (1 if nodes else 0) for i in (3, 4)),
         [1, 1] if nodes and not native else True)
    c.eq("block sizes", [e.get("n") for e in torch if e["a"] == "block_alloc"],
         [1536, 512, 4096, 1024, 512])
    c.eq("frees carry the block's size", [(e["p"], e.get("n")) for e in torch if "free" in e["a"]],
         [(seg + 8192, 4096), (seg + 8192, 4096), (seg, 1536), (seg, 1536)])


def pystacks(c, snap, free_stacks, native):
    """Checks the stacks of pystacks.py's events: the block_alloc has native
    frames (at most `native`; exactly none when 0) and py_level3, py_level2,
    py_level1 in that order (after every native frame when native <= 4); the frees
    have a stack only when free_stacks."""
    events, _, _ = load(snap)
    torch = [e for e in events if e.get("f") == "torch"]
    stacks, syms = load_stacks(snap), load_syms(snap)
    c.eq("actions", [e["a"] for e in torch], ["block_alloc", "block_free_requested", "block_free"])
    ips = stacks.get(torch[0].get("k", 0), [])
    py = [i for i, ip in enumerate(ips) if ip >> 63]
    nat = [i for i, ip in enumerate(ips) if not ip >> 63]
    names = [syms.get(ips[i], "") for i in py]
    c.eq("Python frames of the alloc", names[:3], ["py_level3", "py_level2", "py_level1"])
    # Cut native frames end before the eval loop: the Python frames follow
    # them all.  Deep ones reach it and the Python frames stand in its place.
    if native <= 4:
        c.eq("native frames come first", not nat or max(nat) < min(py), True)
    else:
        c.eq("the innermost frame is native", bool(nat) and nat[0] == 0, True)
    if native == 0:
        c.eq("native frames with MEMSNAP_TORCH_NATIVE_DEPTH=0", len(nat), 0)
    elif native <= 4:
        c.eq("native frames at most %d" % native, 1 <= len(nat) <= native, True)
    else:
        c.eq("more than 4 native frames with MEMSNAP_TORCH_NATIVE_DEPTH=%d" % native,
             4 < len(nat) <= native, True)
    for e in torch[1:]:
        c.eq("%s has a stack" % e["a"], e.get("k", 0) > 0, bool(free_stacks))


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
    if sys.argv[1] in ("api2", "api2-off", "api2-native"):
        c = Checker()
        out = dict(l.split() for l in open(sys.argv[3]) if l.strip())
        api2(c, sys.argv[2], out, sys.argv[1] != "api2-off", sys.argv[1] == "api2-native")
        print("%d passed, 0 failed" % c.n)
        return 0
    if sys.argv[1] == "pystacks":   # pystacks SNAP FREE_STACKS NATIVE_DEPTH
        c = Checker()
        pystacks(c, sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        print("%d passed, 0 failed" % c.n)
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
        c.eq("segments name their pool (format 1.3)",
             (torch[0].get("x"), torch[5].get("x"), torch[6].get("x")),
             (None, 0x300000005, 0x100000005))
        oom = torch[7]
        c.eq("oom", (oom["n"], oom.get("x"), oom.get("p"), oom.get("r")), (1 << 40, 12345, None, 2))
        frees = ("block_free_requested", "block_free", "segment_free", "segment_unmap")
        c.eq("allocations, maps and the oom have a stack",
             all(e.get("k", 0) > 0 for e in torch if e["a"] not in frees), True)
        c.eq("frees have no stack (MEMSNAP_TORCH_FREE_STACKS=0)",
             [e["a"] for e in torch if e["a"] in frees and e.get("k", 0)], [])
        stacks = load_stacks(snap)
        c.eq("1 to 4 native frames on a block_alloc of a thread without Python"
             " (MEMSNAP_TORCH_NATIVE_DEPTH auto)",
             [1 <= len(stacks[e["k"]]) <= 4 for e in torch if e["a"] == "block_alloc"], [True, True])
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

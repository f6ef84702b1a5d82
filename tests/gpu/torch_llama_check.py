"""Checks a recording of tests/gpu/torch_llama.py against the numbers PyTorch
gave in the same process (issue 20: allocated as PyTorch counts it, backward
named).

    torch_llama_check.py SNAP ORACLE_JSON [--json OUT] [--strict] [--nodes-off]

SNAP is a plain snapshot ("-": standard input, e.g. `zstd -dc F | ...`).
What is measured (device 0, PyTorch's events, api torch):
  allocated   the live bytes of block_alloc .. block_free, replayed: their
              peak against max_memory_allocated(), and at each "step N
              allocated A" and "final allocated A" mark against A (PyTorch's
              memory_allocated() read just before); also the same with a
              block counted out at block_free_requested (PyTorch's own
              moment), and every block_alloc's n a multiple of 512 >= y;
  nodes       in the "backward start N" .. "backward end N" windows, the
              block_allocs whose stack starts with an autograd frame (bits 63
              and 62), by node name; and everywhere, autograd frames only on
              threads without Python frames or within backward windows;
  links       each backward block_alloc with q finds a forward one (no
              autograd frame) with the same q earlier in the file: its
              innermost Python frame outside torch's own files names the
              forward code, as "MmBackward0 of LlamaMLP.forward
              (modeling_llama.py:160)";
  forward q   the block_allocs of the "forward start N" .. "forward end N"
              windows that carry q.
With --strict (the ctest) it fails unless: the peak and every mark are
equal to the byte, at least 90% of the backward windows' block_allocs have
a node, the names include MmBackward0, at least 80% of the backward
block_allocs with q link, at least 90% of the forward ones carry q, and the
plugin reports PyTorch's sizes (gauges) with no correction.  With
--nodes-off (a recording with MEMSNAP_TORCH_NODES=0) the allocated checks
are the same and no event may carry a node or q.  Prints what it found;
--json writes it.  Exit 0, or 1 with the first failure (--strict).
"""
import argparse
import collections
import json
import sys

AUTOGRAD = 3


def is_autograd(ip):
    return ip >> 62 == AUTOGRAD


def is_py(ip):
    return ip >> 63 == 1 and not is_autograd(ip)


def model_frame(py_syms):
    """The innermost Python frame outside torch's own files (and the
    standard library): 'fn (file:line)'; else the innermost one."""
    for s in py_syms:
        f = s.get("file", "")
        # torch's own files (site-packages/torch/...; a venv may itself live
        # under a folder named torch, as /opt/torch/.venv on the H200 host)
        if "-packages/torch/" in f or f.startswith("<") or ("/lib/python3" in f and
                                                           "-packages/" not in f):
            continue
        return "%s (%s:%d)" % (s.get("fn", "?"), f.rsplit("/", 1)[-1], s.get("line", 0))
    if py_syms:
        s = py_syms[0]
        return "%s (%s:%d)" % (s.get("fn", "?"), s.get("file", "").rsplit("/", 1)[-1],
                               s.get("line", 0))
    return "(no Python frame)"


def read(path):
    f = sys.stdin if path == "-" else open(path)
    events, stacks, syms, strs = [], {}, {}, {}
    for line in f:
        if not line.endswith("\n"):
            break
        if line.startswith('{"a":'):
            events.append(json.loads(line))
            continue
        o = json.loads(line)
        t = o.get("type")
        if t == "stack":
            stacks[o["id"]] = [int(x, 16) for x in o["ips"]]
        elif t == "sym":
            syms[int(o["ip"], 16)] = o
        elif t == "str":
            strs[o["id"]] = o["s"]
        elif t == "header":
            header = o
    return header, events, stacks, syms, strs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snap")
    ap.add_argument("oracle")
    ap.add_argument("--json")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--nodes-off", action="store_true")
    a = ap.parse_args()
    oracle = json.load(open(a.oracle))
    header, events, stacks, syms, strs = read(a.snap)
    R = dict(kind=oracle.get("kind"), format=header.get("version"), events=len(events))
    fails = []

    def need(cond, what):
        if not cond:
            fails.append(what)

    # ---- allocated ----
    live, live_req = {}, {}
    cur = cur_req = peak = peak_req = 0
    bad_n = 0
    marks = []           # (text, allocated here, allocated_req here)
    in_bwd = in_fwd = None
    bwd, fwd = [], []    # block_alloc events in backward / forward windows
    torch_allocs = 0
    for e in events:
        act = e["a"]
        if act == "nvtx_mark":
            s = strs.get(e.get("x"), "")
            w = s.split()
            if s.startswith("step ") or s.startswith("final allocated"):
                marks.append((s, int(w[-1]), cur, cur_req))
            elif s.startswith("backward start"):
                in_bwd = True
            elif s.startswith("backward end"):
                in_bwd = None
            elif s.startswith("forward start"):
                in_fwd = True
            elif s.startswith("forward end"):
                in_fwd = None
            continue
        if e.get("f") != "torch" or e.get("d", 0) != 0:
            continue
        p, n = e.get("p", 0), e.get("n", 0)
        if act == "block_alloc":
            torch_allocs += 1
            if n < e.get("y", 0) or n % 512:
                bad_n += 1
            live[p] = n
            live_req[p] = n
            cur += n
            cur_req += n
            peak = max(peak, cur)
            peak_req = max(peak_req, cur_req)
            if in_bwd:
                bwd.append(e)
            elif in_fwd:
                fwd.append(e)
        elif act == "block_free_requested":
            cur_req -= live_req.pop(p, 0)
        elif act == "block_free":
            cur -= live.pop(p, 0)
            if p in live_req:
                cur_req -= live_req.pop(p)
    mma = oracle["max_memory_allocated"]
    R["allocated"] = dict(peak=peak, peak_at_free_requested=peak_req,
                          max_memory_allocated=mma, equal=peak == mma,
                          block_allocs=torch_allocs, n_not_block_sizes=bad_n,
                          marks=[dict(mark=m, pytorch=want, memsnap=got, equal=got == want)
                                 for m, want, got, _ in marks])
    need(peak == mma, "allocated peak %d != max_memory_allocated %d (%+d)" % (peak, mma, peak - mma))
    need(bad_n == 0, "%d block_allocs whose n is not a block size" % bad_n)
    bad_marks = [(m, want, got) for m, want, got, _ in marks if want != got]
    need(marks and not bad_marks, "marks where memory_allocated() differs: %r" % bad_marks[:3])
    print("allocated: peak %d, max_memory_allocated %d: %s; %d of %d marks equal; "
          "peak counting a block out at free_requested %d" %
          (peak, mma, "EQUAL" if peak == mma else "DIFFERENT (%+d)" % (peak - mma),
           len(marks) - len(bad_marks), len(marks), peak_req))

    # ---- nodes ----
    def node_of(e):
        ips = stacks.get(e.get("k", 0), [])
        if ips and is_autograd(ips[0]):
            return syms.get(ips[0], {}).get("fn", "?")
        return None

    names = collections.Counter()
    bytes_by = collections.Counter()
    with_node = 0
    for e in bwd:
        nm = node_of(e)
        if nm:
            with_node += 1
            names[nm] += 1
            bytes_by[nm] += e.get("n", 0)
    no_node_sites = collections.Counter()
    for e in bwd:
        if not node_of(e):
            py = [syms.get(ip, {}) for ip in stacks.get(e.get("k", 0), []) if is_py(ip)]
            no_node_sites[model_frame(py)] += 1
    R["nodes"] = dict(backward_block_allocs=len(bwd), with_node=with_node,
                      share=with_node / len(bwd) if bwd else 0.0,
                      names=dict(names.most_common()), bytes=dict(bytes_by.most_common()),
                      without_node_sites=dict(no_node_sites.most_common(10)))
    print("nodes: %d of %d block_allocs in the backward windows name their autograd node (%.1f%%)"
          % (with_node, len(bwd), 100.0 * with_node / len(bwd) if bwd else 0))
    for nm, c in names.most_common(12):
        print("    %6d  %-34s %12d bytes" % (c, nm, bytes_by[nm]))
    if no_node_sites:
        print("  without a node: %s" % dict(no_node_sites.most_common(5)))
    if a.nodes_off:
        anyq = sum(1 for e in events if e.get("q"))
        need(with_node == 0 and anyq == 0 and not any(is_autograd(ip) for ips in stacks.values()
                                                      for ip in ips),
             "nodes off, yet %d backward nodes and %d events with q" % (with_node, anyq))
    elif oracle.get("kind") == "train":
        need(bwd and with_node >= 0.9 * len(bwd),
             "only %d of %d backward block_allocs have a node" % (with_node, len(bwd)))
        # (AccumulateGrad allocates nothing when it can take the incoming
        # gradient as .grad, as with zero_grad(set_to_none=True))
        need("MmBackward0" in names, "no MmBackward0 among %s" % list(names))

    # ---- links: backward q -> the first forward block_alloc with that q ----
    first_fwd = {}
    link_total = linked = 0
    pairs = collections.Counter()
    pair_bytes = collections.Counter()
    for e in events:
        if e["a"] != "block_alloc" or e.get("f") != "torch":
            continue
        q = e.get("q")
        nm = node_of(e)
        if not nm:
            if q and q not in first_fwd:
                first_fwd[q] = e
            continue
        if not q:
            continue
        link_total += 1
        f = first_fwd.get(q)
        if f is None:
            continue
        linked += 1
        py = [syms.get(ip, {}) for ip in stacks.get(f.get("k", 0), []) if is_py(ip)]
        label = "%s of %s" % (nm, model_frame(py))
        pairs[label] += 1
        pair_bytes[label] += e.get("n", 0)
    fwd_q = sum(1 for e in fwd if e.get("q"))
    R["links"] = dict(backward_with_q=link_total, linked=linked,
                      share=linked / link_total if link_total else 0.0,
                      top=[dict(label=k, allocs=pairs[k], bytes=b)
                           for k, b in pair_bytes.most_common(15)],
                      forward_block_allocs=len(fwd), forward_with_q=fwd_q)
    print("links: %d of %d backward block_allocs with q find their forward allocation; "
          "%d of %d forward block_allocs carry q" % (linked, link_total, fwd_q, len(fwd)))
    for k, b in pair_bytes.most_common(10):
        print("    %12d bytes  %s" % (b, k))
    if oracle.get("kind") == "train" and not a.nodes_off:
        need(link_total and linked >= 0.8 * link_total,
             "only %d of %d backward q link to a forward allocation" % (linked, link_total))
        need(fwd and fwd_q >= 0.9 * len(fwd), "only %d of %d forward block_allocs carry q" %
             (fwd_q, len(fwd)))
    pc = oracle.get("plugin_counters") or {}
    R["plugin_counters"] = pc
    print("plugin: %s" % pc)
    need(pc.get("gauge_ok") == 1 and pc.get("corrections") == 0 and pc.get("no_gauge") == 0,
         "the plugin did not give PyTorch's sizes throughout: %s" % pc)
    if oracle.get("profiler"):
        R["profiler"] = oracle["profiler"]
    R["failures"] = fails
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=1)
    if fails:
        for x in fails:
            print(("FAIL: " if a.strict else "note: ") + x)
        return 1 if a.strict else 0
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

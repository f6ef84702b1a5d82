"""Issue 30 on the H200: CUDA graphs, memory pools and "how large a KV cache
fits?", checked against PyTorch itself.

    serving_pools.py check --memsnap MEMSNAP --work DIR [--quick] [--parts grow,compiled,...]
    serving_pools.py engine --kv-bytes N [--fraction F] [--dump JSON]   (one run)
    serving_pools.py compiled --dump JSON                                (one run)
    serving_pools.py mempool --dump JSON                                 (one run)
    serving_pools.py lora --dump JSON                                    (one run)

The engine, in plain PyTorch (no nn.Module, as a serving engine's own code
is): 16 layers of bf16 weights made as plain tensors (about 6.7 GiB); a
profiling pass at the longest prefill (8192 tokens); the KV cache as one
tensor of --kv-bytes (allocate_kv_cache: memsnap names it by its
function); CUDA graphs for batch 64 down to 1, every one captured into one
shared pool (torch.cuda.graph_pool_handle(), as vLLM does), each after an
eager warm-up on a side stream; then 200 decode steps replaying the graphs
at batch sizes from a fixed seed, with an eager prefill every 25 steps.
Attention reads a fixed window of the cache, so only the KV tensor's size
changes with --kv-bytes: the allocation sequence is otherwise the same.

check runs, each engine run in a process of its own:

  1. pools   the engine recorded under `memsnap run` (defaults): summary's
             pools against PyTorch's own figures at the end
             (torch.cuda.memory_snapshot()'s segments summed by
             segment_pool_id: total_size = reserved, allocated_size =
             allocated), summary's allocated peak against
             max_memory_allocated(), and the pools line;
  2. replay  replay of that recording under the defaults and under
             expandable_segments:True against max_memory_reserved() of real
             runs under each (within 1%), and the recording's categories
             (parameters = the weights, kv_cache = the KV tensor, graph_pool
             = the graphs' pool);
  3. grow    `memsnap replay --grow allocate_kv_cache --find-max -c
             memory_fraction:F` against real runs under
             set_per_process_memory_fraction(F) at KV sizes in 0.25 GiB
             steps around memsnap's answer: the answer must lie between the
             largest size that ran and the smallest that failed;
  4. compiled torch.compile(mode="reduce-overhead") of a small MLP (cudagraph
             trees' private pool): its pool against memory_snapshot(), replay
             under the defaults against max_memory_reserved();
  5. mempool a torch.cuda.MemPool program: the pool's kind (mempool) and
             figures against memory_snapshot();
  6. lora    (when peft and transformers are there) one LoRA step (r=16 on q
             and v, 8 layers): summary's gradients against the adapters'
             gradients as PyTorch's blocks hold them (each rounded to 512 B).

Each check prints PASS or FAIL lines with the figures; the last line is
"N passed, M failed".  Exit 0 when nothing failed, 1 otherwise, 77 without
a CUDA torch.
"""
import argparse
import json
import os
import subprocess
import sys
import time

GiB, MiB = 1 << 30, 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
ME = os.path.abspath(__file__)


# ---- the programs (each run in a process of its own) ------------------------------

def mark(text):
    """A memsnap mark (nothing when the recorder is not loaded)."""
    import ctypes
    f = getattr(ctypes.CDLL(None), "memsnap_annotate", None)
    if f:
        f(text.encode())


def torch_truth(torch, oom=False, phase=""):
    """PyTorch's own figures now: per pool from memory_snapshot()'s
    segments, and the device's stats."""
    pools = {}
    for seg in torch.cuda.memory_snapshot():
        pid = seg.get("segment_pool_id", (0, 0))
        key = "%d,%d" % (int(pid[0]), int(pid[1]))
        p = pools.setdefault(key, {"reserved": 0, "allocated": 0, "segments": 0})
        p["reserved"] += int(seg["total_size"])
        p["allocated"] += int(seg["allocated_size"])
        p["segments"] += 1
    st = torch.cuda.memory_stats()
    # the recording's figures at this point come from this mark: the file's
    # end is after the interpreter's teardown, which frees the tensors (and
    # destroys a MemPool's segments)
    mark("memsnap truth")
    return {"oom": oom, "phase": phase, "pools": pools,
            "max_memory_reserved": int(torch.cuda.max_memory_reserved()),
            "max_memory_allocated": int(torch.cuda.max_memory_allocated()),
            "memory_reserved": int(torch.cuda.memory_reserved()),
            "memory_allocated": int(torch.cuda.memory_allocated()),
            "reserved_bytes.all.peak": int(st.get("reserved_bytes.all.peak", 0)),
            "total": int(torch.cuda.get_device_properties(0).total_memory),
            "torch": torch.__version__}


LAYERS, HIDDEN, FFN, VOCAB = 16, 4096, 11008, 32000
WINDOW = 1024            # the cache positions attention reads (fixed)
MAX_BATCH, PREFILL = 64, 8192


def load_weights(torch):
    g = torch.Generator(device="cuda").manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02)

    weights = {"embed": w(VOCAB, HIDDEN), "head": w(HIDDEN, VOCAB)}
    for l in range(LAYERS):
        for name, shape in (("q", (HIDDEN, HIDDEN)), ("k", (HIDDEN, HIDDEN)),
                            ("v", (HIDDEN, HIDDEN)), ("o", (HIDDEN, HIDDEN)),
                            ("gate", (HIDDEN, FFN)), ("up", (HIDDEN, FFN)),
                            ("down", (FFN, HIDDEN))):
            weights["%s%d" % (name, l)] = w(*shape)
    return weights


def allocate_kv_cache(torch, kv_bytes):
    """The KV cache as one tensor (memsnap's rule names it by this function)."""
    elems = kv_bytes // 2
    kv = torch.empty(elems, device="cuda", dtype=torch.bfloat16)
    slots = elems // (LAYERS * 2 * HIDDEN)
    if slots < WINDOW:
        raise SystemExit("--kv-bytes too small: %d slots, the window needs %d" % (slots, WINDOW))
    return kv[: LAYERS * 2 * slots * HIDDEN].view(LAYERS, 2, slots, HIDDEN)


def model_step(torch, W, kv, x):
    """One forward of the engine: x (batch, tokens, hidden) bf16."""
    F = torch.nn.functional
    for l in range(LAYERS):
        h = F.rms_norm(x, (HIDDEN,))
        q = h @ W["q%d" % l]
        k = kv[l, 0, :WINDOW]
        v = kv[l, 1, :WINDOW]
        att = torch.softmax((q @ k.t()) * (HIDDEN ** -0.5), dim=-1) @ v
        x = x + att @ W["o%d" % l]
        h = F.rms_norm(x, (HIDDEN,))
        x = x + (F.silu(h @ W["gate%d" % l]) * (h @ W["up%d" % l])) @ W["down%d" % l]
    return x[:, -1] @ W["head"]


def is_oom(torch, e):
    """Whether e, or an exception in its context, is PyTorch's OOM."""
    while e is not None:
        if isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def run_engine(a):
    import torch
    torch.cuda.set_device(0)
    if a.fraction:
        torch.cuda.set_per_process_memory_fraction(a.fraction)
    phase = "weights"
    try:
        W = load_weights(torch)
        phase = "profiling"
        with torch.no_grad():
            x = torch.randn(1, PREFILL, HIDDEN, device="cuda", dtype=torch.bfloat16)
            kv0 = torch.zeros(LAYERS, 2, WINDOW, HIDDEN, device="cuda", dtype=torch.bfloat16)
            model_step(torch, W, kv0, x)
            del x, kv0
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        phase = "kv_cache"
        kv = allocate_kv_cache(torch, a.kv_bytes)
        kv.zero_()
        phase = "graphs"
        pool = torch.cuda.graph_pool_handle()
        static_x = torch.zeros(MAX_BATCH, 1, HIDDEN, device="cuda", dtype=torch.bfloat16)
        graphs, outs = {}, {}
        side = torch.cuda.Stream()
        with torch.no_grad():
            for b in range(MAX_BATCH, 0, -1):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    model_step(torch, W, kv, static_x[:b])        # warm-up, eager
                torch.cuda.current_stream().wait_stream(side)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    outs[b] = model_step(torch, W, kv, static_x[:b])
                graphs[b] = g
        torch.cuda.synchronize()
        phase = "decode"
        import random
        rnd = random.Random(1234)
        with torch.no_grad():
            for step in range(200):
                b = rnd.randint(1, MAX_BATCH)
                static_x[:b].normal_()
                graphs[b].replay()
                if step % 25 == 0:
                    p = torch.randn(1, rnd.choice((512, 1024, 2048, 4096)), HIDDEN,
                                    device="cuda", dtype=torch.bfloat16)
                    model_step(torch, W, kv, p)
                    del p
        torch.cuda.synchronize()
        truth = torch_truth(torch)
    except Exception as e:
        # an OOM inside a capture can surface as the capture's own error,
        # with the OOM in its context
        if not is_oom(torch, e):
            raise
        try:
            truth = torch_truth(torch, oom=True, phase=phase)
        except Exception:
            truth = {"oom": True, "phase": phase, "pools": {}}
    if a.dump:
        json.dump(truth, open(a.dump, "w"), indent=1)
    return 3 if truth["oom"] else 0


def run_compiled(a):
    import torch
    torch.cuda.set_device(0)
    net = torch.nn.Sequential(torch.nn.Linear(4096, 16384), torch.nn.GELU(),
                              torch.nn.Linear(16384, 4096)).cuda().to(torch.bfloat16)
    f = torch.compile(net, mode="reduce-overhead")
    x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(8):
            y = f(x)
            torch.compiler.cudagraph_mark_step_begin()
    torch.cuda.synchronize()
    del y
    json.dump(torch_truth(torch), open(a.dump, "w"), indent=1)
    return 0


def run_mempool(a):
    import torch
    torch.cuda.set_device(0)
    if not hasattr(torch.cuda, "MemPool"):
        print("SKIP: this torch has no torch.cuda.MemPool")
        return 77
    pool = torch.cuda.MemPool()
    keep = []
    eager = torch.empty(64 * MiB, device="cuda", dtype=torch.uint8)
    with torch.cuda.use_mem_pool(pool):
        for i in range(6):
            t = torch.empty((i + 1) * 16 * MiB, device="cuda", dtype=torch.uint8)
            if i % 2:
                keep.append(t)
            del t
    del eager
    torch.cuda.synchronize()
    truth = torch_truth(torch)
    truth["mempool_id"] = list(pool.id)
    json.dump(truth, open(a.dump, "w"), indent=1)
    return 0


def run_lora(a):
    import torch
    try:
        from peft import LoraConfig, get_peft_model
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("SKIP: no peft or transformers")
        return 77
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5504, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=16, vocab_size=32000)
    model = LlamaForCausalLM(cfg).cuda()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj",
                                                                                  "v_proj"]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, 32000, (4, 512), device="cuda")
    grads = 0
    for step in range(2):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        grads = sum((p.grad.numel() * p.grad.element_size() + 511) // 512 * 512
                    for p in model.parameters() if p.grad is not None)
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    truth = torch_truth(torch)
    truth["adapter_gradients"] = grads
    json.dump(truth, open(a.dump, "w"), indent=1)
    return 0


# ---- the checks ----------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, what, ok, figures=""):
        print("%s %s%s" % ("PASS" if ok else "FAIL", what, ("  [" + figures + "]") if figures else ""),
              flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def sh(cmd, env=None, ok=(0,)):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode not in ok:
        sys.stderr.write("command failed (%d): %s\n%s\n%s\n" % (p.returncode, " ".join(cmd),
                                                              p.stdout[-3000:], p.stderr[-3000:]))
    return p, time.time() - t0


def env_with(conf=None):
    e = dict(os.environ)
    e.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        e["PYTORCH_CUDA_ALLOC_CONF"] = conf
    return e


def real_run(work, name, args, conf=None):
    """One plain run of a program of this file: its truth JSON and exit."""
    dump = os.path.join(work, name + ".truth.json")
    if os.path.exists(dump):
        os.unlink(dump)
    p, dt = sh([sys.executable, ME] + args + ["--dump", dump], env=env_with(conf), ok=(0, 3))
    truth = json.load(open(dump)) if os.path.exists(dump) else None
    print("      ran %s %s%s: exit %d in %.0f s" % (name, " ".join(args),
                                                   (" (" + conf + ")") if conf else "",
                                                   p.returncode, dt), flush=True)
    return truth, p.returncode


def recorded(m, work, name, args, conf=None):
    """A run of a program of this file under `memsnap run`: the snapshot and
    PyTorch's truth at its end."""
    snap = os.path.join(work, name + ".msnap")
    dump = os.path.join(work, name + ".truth.json")
    if os.path.exists(dump):
        os.unlink(dump)
    p, dt = sh([m, "run", "-o", snap, "--", sys.executable, ME] + args + ["--dump", dump],
               env=env_with(conf))
    print("      recorded %s in %.0f s: %s" % (name, dt, snap), flush=True)
    if "no matching plugin" in p.stderr or "recording the driver level only" in p.stderr:
        sys.stderr.write(p.stderr)
        raise RuntimeError("the PyTorch plugin was not loaded: PyTorch's blocks are not recorded")
    if p.returncode or not os.path.exists(dump):
        raise RuntimeError("%s under memsnap run: exit %d: %s" % (name, p.returncode,
                                                                  p.stderr.strip()[-500:]))
    return snap, json.load(open(dump))


def summary(m, snap):
    return json.loads(sh([m, "summary", "--json", "--marks", snap], ok=(0, 1))[0].stdout)


def show_blocks_of(m, snap, size, what):
    """When a category is off by a block: the native and Python frames of
    the recording's allocated blocks of that size (the SQLite export), so
    that the rule a cuBLAS workspace missed can be read off the log."""
    import sqlite3
    db = snap + ".db"
    if os.path.exists(db):
        os.unlink(db)
    p, _ = sh([m, "export", "--format", "sqlite", "-o", db, snap], ok=(0, 1, 2))
    if p.returncode != 0 or not os.path.exists(db):
        print("      (%s: no SQLite export: %s)" % (what, p.stderr.strip()[:200]))
        return
    con = sqlite3.connect(db)
    stacks = [r[0] for r in con.execute(
        "SELECT DISTINCT stack_id FROM allocations WHERE layer = 'block' AND size = ?"
        " LIMIT 6", (size,))]
    print("      %s: %d stacks of %d-byte blocks" % (what, len(stacks), size))
    for st in stacks:
        fr = con.execute("SELECT level, function, file, line, module FROM frames"
                         " WHERE stack_id = ? ORDER BY level LIMIT 40", (st,)).fetchall()
        print("        stack %s:" % st)
        for lv, fn, fi, ln, mo in fr:
            print("          #%s %s %s:%s [%s]" % (lv, fn, os.path.basename(fi or ""), ln,
                                                  os.path.basename(mo or "")))


def torch_key(pool):
    tid = pool.get("torch_id")
    return "%d,%d" % (tid[0], tid[1]) if tid else None


def check_pools(c, name, s, truth):
    """summary's pools against memory_snapshot()'s at the truth point.  The
    file goes on past it (the interpreter's teardown frees the tensors), so
    allocated is compared at the "memsnap truth" mark; a pool's reserved is
    its final figure, or, for a pool whose segments the teardown released
    (a MemPool), its peak, which is the truth point's when nothing was
    released before it."""
    at = [mk for mk in s.get("marks") or [] if mk.get("message") == "memsnap truth"]
    dev0 = [d for d in (at[-1]["devices"] if at else []) if d["device"] == 0]
    got = dev0[0]["allocated"] if dev0 else None
    c.check("%s: allocated at the truth mark = memory_allocated()" % name,
            got == truth["memory_allocated"],
            "memsnap %s, PyTorch %d" % (got, truth["memory_allocated"]))
    ours = {torch_key(p): p for p in s.get("pools") or []}
    for key, t in sorted(truth["pools"].items()):
        p = ours.get(key)
        fr = p and p.get("final_reserved")
        r = fr if p is None or fr == p.get("peak_reserved") or fr == t["reserved"] \
            else p.get("peak_reserved")
        c.check("%s pool (%s): reserved = memory_snapshot()'s total_size" % (name, key),
                p is not None and r == t["reserved"],
                "memsnap %s (final %s, peak %s), PyTorch %d" %
                (r, fr, p and p.get("peak_reserved"), t["reserved"]))
    for key, p in ours.items():
        if key not in truth["pools"] and p.get("final_reserved"):
            c.check("%s pool (%s) holds memory PyTorch's snapshot does not have" % (name, key),
                    False, str(p.get("final_reserved")))


def peak_allocated(s):
    return max((d["allocated"]["peak"] for d in s["devices"] if d.get("allocated")), default=0)


def replay_peak(m, snap, conf):
    p = sh([m, "replay", snap, "-q", "--bytes", "-c", conf])[0]
    row = [l.split() for l in p.stdout.splitlines() if l.startswith("1 ")]
    return int(row[0][3]) if row else None   # #, config, peak alloc, peak reserved


def check_engine(c, m, work, kv):
    print("== 1. the engine's pools against PyTorch's (KV %.2f GiB)" % (kv / GiB), flush=True)
    snap, truth = recorded(m, work, "engine", ["engine", "--kv-bytes", str(kv)])
    s = summary(m, snap)
    check_pools(c, "engine", s, truth)
    kinds = s.get("pool_kinds", {})
    c.check("one CUDA graph pool, shared by the 64 graphs",
            kinds.get("graph", {}).get("pools") == 1, json.dumps(kinds))
    c.check("summary's allocated peak = max_memory_allocated()",
            peak_allocated(s) == truth["max_memory_allocated"],
            "memsnap %d, PyTorch %d" % (peak_allocated(s), truth["max_memory_allocated"]))
    text = sh([m, "summary", snap], ok=(0, 1))[0].stdout
    line = [l.strip() for l in text.splitlines() if l.strip().startswith("CUDA graphs:")]
    c.check("summary's text says what the graphs hold", bool(line), line[0] if line else "")
    cats = {i["category"]: i for d in s.get("categories") or [] for i in d["items"]}
    w = 2 * VOCAB * HIDDEN * 2 + LAYERS * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * FFN) * 2
    got = cats.get("parameters", {}).get("peak", 0)
    c.check("parameters = the weights (plain tensors, no nn.Module)",
            abs(got - w) <= LAYERS * 7 * 512 + 2 * 512, "memsnap %d, the weights %d" % (got, w))
    if abs(got - w) > LAYERS * 7 * 512 + 2 * 512:
        show_blocks_of(m, snap, 32 * MiB, "engine")
    got = cats.get("kv_cache", {}).get("peak", 0)
    c.check("kv_cache = the KV tensor", got == (kv // 2 * 2 + 511) // 512 * 512,
            "memsnap %d, the tensor %d" % (got, kv))
    gp = [p for p in s.get("pools") or [] if p["kind"] == "graph"]
    got = cats.get("graph_pool", {}).get("peak", 0)
    c.check("graph_pool = the graph pool's blocks", gp and got == gp[0]["peak_allocated"],
            "memsnap %d, the pool %s" % (got, gp and gp[0]["peak_allocated"]))
    print("      categories: %s" % ", ".join("%s %.2f GiB" % (k, v["peak"] / GiB)
                                              for k, v in cats.items()), flush=True)

    print("== 2. replay's peak reserved against real runs", flush=True)
    for conf in ("", "expandable_segments:True"):
        real, rc = real_run(work, "engine-real-" + (conf.split(":")[0] or "default"),
                            ["engine", "--kv-bytes", str(kv)], conf or None)
        got = replay_peak(m, snap, conf)
        want = real["max_memory_reserved"] if real else None
        ok = got is not None and want and abs(got - want) <= 0.01 * want
        c.check("replay -c \"%s\": peak reserved within 1%% of max_memory_reserved()" % conf, ok,
                "replay %s, PyTorch %s, %+.3f%%" % (got, want, 100.0 * (got - want) / want
                                                   if ok or (got and want) else 0))
    return snap, truth


def check_grow(c, m, work, snap, truth, fraction):
    print("== 3. --grow allocate_kv_cache --find-max under memory_fraction:%g" % fraction,
          flush=True)
    p = sh([m, "replay", snap, "-q", "--grow", "allocate_kv_cache", "--find-max", "--json",
            "-c", "memory_fraction:%g" % fraction])[0]
    ans = json.loads(p.stdout)[0]
    x = ans["max_bytes"]
    print("      memsnap: the largest KV cache that fits: %d (%.3f GiB), fails at %s; first "
          "failure %s" % (x, x / GiB, ans["fails_at_bytes"], json.dumps(ans["first_failure"])),
          flush=True)
    step = GiB // 4
    k = x // step
    ran, failed = None, None
    tried = {}

    def fits(n):
        if n not in tried:
            t, rc = real_run(work, "engine-kv-%d" % n,
                             ["engine", "--kv-bytes", str(n * step), "--fraction", str(fraction)])
            tried[n] = rc == 0
            if rc not in (0, 3):
                raise RuntimeError("the engine failed otherwise than by OOM at %d" % n)
        return tried[n]

    # the 0.25 GiB bracket around the real largest size: from memsnap's answer
    # down while runs fail, up while they run
    n = max(k, 1)
    if fits(n):
        ran = n
        while fits(n + 1):
            n += 1
            ran = n
        failed = n + 1
    else:
        failed = n
        while n > 1 and not fits(n - 1):
            n -= 1
            failed = n
        ran = n - 1 if n > 1 else None
    lo = ran * step if ran else 0
    hi = failed * step
    # memsnap brackets the largest size too ([max, fails_at), a few MiB
    # wide): the two brackets must meet, i.e. the true largest size can lie
    # in both; the strict form (lo <= max < hi) is printed beside
    y = ans["fails_at_bytes"] or x + 1
    c.check("memsnap's largest KV agrees with the real runs bisected in 0.25 GiB steps "
            "(its bracket meets theirs)", x < hi and y > lo,
            "real: ran %.2f GiB, failed %.2f GiB; memsnap: runs %.4f GiB, fails %.4f GiB; "
            "strictly between: %s; %d real runs" % (lo / GiB, hi / GiB, x / GiB, y / GiB,
                                                     lo <= x < hi, len(tried)))
    return {"fraction": fraction, "memsnap_max": x, "fails_at": ans["fails_at_bytes"],
            "real_ran": lo, "real_failed": hi, "runs": len(tried)}


def check_compiled(c, m, work):
    print("== 4. torch.compile(mode=\"reduce-overhead\")", flush=True)
    snap, truth = recorded(m, work, "compiled", ["compiled"])
    s = summary(m, snap)
    check_pools(c, "compiled", s, truth)
    c.check("cudagraph trees' pool is a graph pool",
            any(p["kind"] == "graph" for p in s.get("pools") or []),
            json.dumps(s.get("pool_kinds")))
    got = replay_peak(m, snap, "")
    want = truth["max_memory_reserved"]
    c.check("replay (defaults): peak reserved within 1% of max_memory_reserved()",
            got is not None and abs(got - want) <= 0.01 * want, "replay %s, PyTorch %d" % (got, want))


def check_mempool(c, m, work):
    print("== 5. torch.cuda.MemPool", flush=True)
    snap = os.path.join(work, "mempool.msnap")
    dump = os.path.join(work, "mempool.truth.json")
    p, _ = sh([m, "run", "-o", snap, "--", sys.executable, ME, "mempool", "--dump", dump],
              ok=(0, 77))
    if p.returncode == 77 or not os.path.exists(dump):
        print("SKIP mempool: %s" % p.stdout.strip())
        return
    truth = json.load(open(dump))
    s = summary(m, snap)
    check_pools(c, "mempool", s, truth)
    key = "%d,%d" % tuple(truth["mempool_id"])
    ours = {torch_key(q): q for q in s.get("pools") or []}
    c.check("the MemPool (%s) is kind mempool" % key,
            ours.get(key, {}).get("kind") == "mempool", json.dumps(ours.get(key)))


def check_lora(c, m, work):
    print("== 6. LoRA gradients", flush=True)
    snap = os.path.join(work, "lora.msnap")
    dump = os.path.join(work, "lora.truth.json")
    p, _ = sh([m, "run", "-o", snap, "--", sys.executable, ME, "lora", "--dump", dump],
              ok=(0, 77))
    if p.returncode == 77 or not os.path.exists(dump):
        print("SKIP lora: %s" % p.stdout.strip())
        return
    truth = json.load(open(dump))
    s = summary(m, snap)
    cats = {i["category"]: i["peak"] for d in s.get("categories") or [] for i in d["items"]}
    c.check("summary's gradients = the adapters' gradients", cats.get("gradients") ==
            truth["adapter_gradients"], "memsnap %s, the adapters %d" %
            (cats.get("gradients"), truth["adapter_gradients"]))
    if cats.get("gradients") != truth["adapter_gradients"]:
        show_blocks_of(m, snap, 32 * MiB, "lora")


def run_check(a):
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        print("SKIP: no torch with CUDA in %s" % sys.executable)
        return 77
    os.makedirs(a.work, exist_ok=True)
    c = Checks()
    figures = {"torch": torch.__version__}
    kv = a.kv_gib * GiB
    try:
        snap, truth = check_engine(c, a.memsnap, a.work, kv)
    except Exception as e:
        c.check("the engine ran under memsnap", False, "%s: %s" % (type(e).__name__, e))
        print("%d passed, %d failed" % (c.passed, c.failed))
        return 1
    figures["engine"] = {"kv": kv, "max_memory_reserved": truth["max_memory_reserved"],
                         "max_memory_allocated": truth["max_memory_allocated"],
                         "pools": truth["pools"]}
    parts = set(a.parts.split(",")) if a.parts else None
    if parts is None or "grow" in parts:
        try:
            figures["grow"] = check_grow(c, a.memsnap, a.work, snap, truth, a.fraction)
        except Exception as e:
            c.check("the --grow check ran", False, "%s: %s" % (type(e).__name__, e))
    if not a.quick:
        for name, fn in (("compiled", check_compiled), ("mempool", check_mempool),
                         ("lora", check_lora)):
            if parts is not None and name not in parts:
                continue
            try:
                fn(c, a.memsnap, a.work)
            except Exception as e:   # one program's failure does not hide the others'
                c.check("%s ran" % name, False, "%s: %s" % (type(e).__name__, e))
    json.dump(figures, open(os.path.join(a.work, "figures.json"), "w"), indent=1)
    print("figures: %s" % os.path.join(a.work, "figures.json"))
    print("%d passed, %d failed" % (c.passed, c.failed))
    return 0 if not c.failed else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    ch = sub.add_parser("check")
    ch.add_argument("--memsnap", required=True)
    ch.add_argument("--work", required=True)
    ch.add_argument("--kv-gib", type=int, default=16, help="the recorded run's KV cache")
    ch.add_argument("--fraction", type=float, default=0.25,
                    help="memory_fraction of the --grow check")
    ch.add_argument("--quick", action="store_true", help="the engine's checks only")
    ch.add_argument("--parts", help="the checks after the engine's to run, of grow, compiled, "
                    "mempool, lora (default: all; a short lease reruns some)")
    en = sub.add_parser("engine")
    en.add_argument("--kv-bytes", type=int, required=True)
    en.add_argument("--fraction", type=float, default=0)
    en.add_argument("--dump")
    for name in ("compiled", "mempool", "lora"):
        sub.add_parser(name).add_argument("--dump", required=True)
    a = ap.parse_args()
    return {"check": run_check, "engine": run_engine, "compiled": run_compiled,
            "mempool": run_mempool, "lora": run_lora}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())

"""A transformers LlamaForCausalLM on the GPU, with PyTorch's own numbers as
the oracle for memsnap's allocated layer and autograd nodes (issue 20).

    torch_llama.py train OUT.json [--size small|tiny] [--steps N] [--profile-steps N]
    torch_llama.py generate OUT.json [--size small|tiny] [--new-tokens N]
    torch_llama.py time OUT.jsonl --variant NAME [--size small|tiny] [--steps N] [--rounds N]
    torch_llama.py times OUT.jsonl

The model is built from a LlamaConfig with random weights (no download):
small = 4 layers, hidden 1024, vocab 32000, batch 4 x 512 tokens; tiny = 2
layers, hidden 256, vocab 1000, batch 2 x 64 (the ctest).  Run it under
`memsnap run` (or plainly, for the step-time baseline); where the recorder
is loaded, memsnap_annotate marks the moments the checker needs:
  "step N allocated A"      after training step N (synchronized): A =
                            torch.cuda.memory_allocated()
  "forward start N" / "forward end N" / "backward start N" /
  "backward end N"          around the forward pass and loss.backward()
  "profiler start" / "profiler stop"
  "final allocated A"       at the end, with the oracle written.

train: `--steps` AdamW steps under bf16 autocast, then `--profile-steps`
more under torch.profiler (profile_memory, record_shapes, with_stack), whose
memory timeline's category bytes at its peak go into the JSON, with
max_memory_allocated/max_memory_reserved at the end, memory_allocated after
each step, and the plugin's counters (memsnap_torch_counters).
generate: LlamaForCausalLM.generate (a KV cache, bf16 weights, batch 4,
`--new-tokens` greedy tokens), with the same end numbers.
time: after 5 warm-up steps, `--rounds` rounds of `--steps` timed training
steps (each synchronized) per mode; under the recorder with a plugin that
has memsnap_torch_bench_mode, the modes v1 (requested sizes, no nodes), off
(block sizes, no nodes) and on (both) take turns in the one process, else
one mode named by --variant; then per-event loops, modes taking turns too:
3000 forward allocations (torch.empty, grad mode on) and a backward pass
through a chain of 1000 multiplications (each backward node allocates its
gradient on PyTorch's autograd thread); appends one JSON line to OUT.
times: prints a summary of those lines.
Exit 0 done, 77 skip (no torch, no GPU, no transformers), 1 failure.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no GPU")
    sys.exit(77)
try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print("SKIP: no transformers")
    sys.exit(77)

SIZES = {
    "small": dict(cfg=dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                           num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=16,
                           max_position_embeddings=1024), batch=4, seq=512),
    "tiny": dict(cfg=dict(vocab_size=1000, hidden_size=256, intermediate_size=688,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                          max_position_embeddings=256), batch=2, seq=64),
}

_lib = ctypes.CDLL(None)
_annotate = getattr(_lib, "memsnap_annotate", None)   # None when not recorded


def mark(text):
    """A memsnap mark (nothing when the recorder is not loaded)."""
    if _annotate:
        _annotate(text.encode())


def plugin_counters():
    """The loaded plugin's memsnap_torch_counters, or None."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if "libmemsnap_torch-" in path:
            try:
                lib = ctypes.CDLL(path)
                out = (ctypes.c_uint64 * 4)()
                lib.memsnap_torch_counters(out)
                return dict(gauge_ok=out[0], checks=out[1], corrections=out[2],
                            no_gauge=out[3], plugin=path)
            except (OSError, AttributeError) as e:
                return dict(error=str(e), plugin=path)
    return None


def build(size, dtype=None):
    torch.manual_seed(0)
    cfg = LlamaConfig(**SIZES[size]["cfg"])
    model = LlamaForCausalLM(cfg).to("cuda")
    if dtype is not None:
        model = model.to(dtype)
    return cfg, model


def train_step(model, opt, ids, i, marks=True):
    if marks:
        mark("forward start %d" % i)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    if marks:
        mark("forward end %d" % i)
        mark("backward start %d" % i)
    loss.backward()
    if marks:
        torch.cuda.synchronize()
        mark("backward end %d" % i)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def profile_categories(prof):
    """Category bytes of the profiler's memory timeline at its peak (cuda:0)."""
    from torch.profiler._memory_profiler import MemoryProfileTimeline, _CATEGORY_TO_INDEX
    mt = MemoryProfileTimeline(prof._memory_profile())
    times, sizes = mt._coalesce_timeline("cuda:0")
    totals = [sum(s) for s in sizes]
    peak = max(range(len(totals)), key=lambda k: totals[k])
    names = {i + 1: (c.name if c is not None else "unknown") for c, i in _CATEGORY_TO_INDEX.items()}
    cats = {names[i]: sizes[peak][i] for i in names}
    return dict(peak_bytes=totals[peak], peak_time_us=times[peak], categories=cats,
                timeline_points=len(times), first_time_us=times[0], last_time_us=times[-1])


def cmd_train(a):
    size = SIZES[a.size]
    cfg, model = build(a.size)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1)
    res = dict(kind="train", size=a.size, config=size["cfg"], batch=size["batch"], seq=size["seq"],
               steps=a.steps, torch=torch.__version__, device=torch.cuda.get_device_name(0),
               step_allocated=[], losses=[])
    t0 = time.time()
    for i in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (size["batch"], size["seq"]), device="cuda",
                            generator=g)
        loss = train_step(model, opt, ids, i)
        res["losses"].append(loss.item())
        torch.cuda.synchronize()
        ma = torch.cuda.memory_allocated()
        res["step_allocated"].append(ma)
        mark("step %d allocated %d" % (i, ma))
    res["train_seconds"] = time.time() - t0
    res["max_memory_allocated_before_profiler"] = torch.cuda.max_memory_allocated()
    res["max_memory_reserved_before_profiler"] = torch.cuda.max_memory_reserved()
    if a.profile_steps:
        finish(res, a.out, final=False)   # kept if the profiler's analysis never ends
        from torch.profiler import ProfilerActivity, profile
        mark("profiler start")
        t_prof = time.time()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     profile_memory=True, record_shapes=True, with_stack=True) as prof:
            for i in range(a.steps, a.steps + a.profile_steps):
                ids = torch.randint(0, cfg.vocab_size, (size["batch"], size["seq"]),
                                    device="cuda", generator=g)
                loss = train_step(model, opt, ids, i)
                res["losses"].append(loss.item())
                torch.cuda.synchronize()
                ma = torch.cuda.memory_allocated()
                res["step_allocated"].append(ma)
                mark("step %d allocated %d" % (i, ma))
        mark("profiler stop")
        res["profiled_steps"] = list(range(a.steps, a.steps + a.profile_steps))
        res["profiler_seconds"] = time.time() - t_prof
        try:
            t_an = time.time()
            res["profiler"] = profile_categories(prof)
            res["profiler"]["analysis_seconds"] = time.time() - t_an
        except Exception as e:   # the profiler's private API moved: say so, keep the rest
            res["profiler"] = dict(error="%s: %s" % (type(e).__name__, e))
    finish(res, a.out)


def cmd_generate(a):
    size = SIZES[a.size]
    cfg, model = build(a.size, torch.bfloat16)
    model.eval()
    g = torch.Generator(device="cuda").manual_seed(2)
    prompt = torch.randint(0, cfg.vocab_size, (4, 64), device="cuda", generator=g)
    mark("generate start")
    t0 = time.time()
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                             max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                             do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    mark("generate end")
    res = dict(kind="generate", size=a.size, config=size["cfg"], batch=4, prompt=64,
               new_tokens=a.new_tokens, generated=list(out.shape), torch=torch.__version__,
               device=torch.cuda.get_device_name(0), generate_seconds=time.time() - t0)
    del out
    finish(res, a.out)


def finish(res, path, final=True):
    """PyTorch's end numbers into res, written to path; final: with the
    "final allocated" mark (the checker compares it)."""
    torch.cuda.synchronize()
    res["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    res["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    res["memory_allocated"] = torch.cuda.memory_allocated()
    res["memory_reserved"] = torch.cuda.memory_reserved()
    res["plugin_counters"] = plugin_counters()
    res["complete"] = final
    if final:
        mark("final allocated %d" % res["memory_allocated"])
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("%s: max_memory_allocated %d, max_memory_reserved %d, plugin %s" %
          (res["kind"], res["max_memory_allocated"], res["max_memory_reserved"],
           res["plugin_counters"]))


def bench_mode_fn():
    """The loaded plugin's memsnap_torch_bench_mode, or None."""
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) >= 6 and "libmemsnap_torch-" in f[-1]:
            fn = getattr(ctypes.CDLL(f[-1]), "memsnap_torch_bench_mode", None)
            if fn:
                fn.argtypes = [ctypes.c_int, ctypes.c_int]
            return fn
    return None


def cmd_time(a):
    """Step times and per-event loops.  Under the recorder with a plugin that
    has memsnap_torch_bench_mode, three modes take turns in the one process,
    a few steps each, round after round (the order rotating): v1 (requested
    sizes, no nodes: the recorder before format 1.2), off (block sizes, no
    nodes: MEMSNAP_TORCH_NODES=0) and on (both), so that what differs between
    processes (clocks, the machine's other load) does not enter their
    differences.  Otherwise one mode, named by --variant."""
    size = SIZES[a.size]
    cfg, model = build(a.size)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = [torch.randint(0, cfg.vocab_size, (size["batch"], size["seq"]), device="cuda",
                         generator=g) for _ in range(4)]
    setmode = bench_mode_fn() if _annotate else None
    modes = [("v1", 0, 0), ("off", 1, 0), ("on", 1, 1)] if setmode else [(a.variant, 0, 0)]
    for i in range(5):
        train_step(model, opt, ids[i % 4], i, marks=False)
    torch.cuda.synchronize()
    steps = {m[0]: [] for m in modes}
    rounds = {m[0]: [] for m in modes}
    k = 0
    for r in range(a.rounds):
        for name, sz, nd in modes[r % len(modes):] + modes[:r % len(modes)]:
            if setmode:
                setmode(sz, nd)
            this = []
            for _ in range(a.steps):
                t = time.perf_counter()
                train_step(model, opt, ids[k % 4], k, marks=False)
                torch.cuda.synchronize()
                this.append(time.perf_counter() - t)
                k += 1
            steps[name] += this
            rounds[name].append(statistics.median(this))
    del model, opt
    torch.cuda.empty_cache()
    # Per event, forward: torch.empty + its free, grad mode on (no node).
    # Backward: a chain of 1000 multiplications; each node's backward
    # allocates its gradient on the autograd thread.
    fwd = {m[0]: [] for m in modes}
    bwd = {m[0]: [] for m in modes}
    x = torch.randn(4096, device="cuda", requires_grad=True)
    for r in range(8):
        for name, sz, nd in modes:
            if setmode:
                setmode(sz, nd)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(3000):
                e = torch.empty(1024, device="cuda")
                del e
            fwd[name].append((time.perf_counter() - t) / 3000)
            y = x
            for _ in range(1000):
                y = y * 1.0001
            s = y.sum()
            torch.cuda.synchronize()
            t = time.perf_counter()
            s.backward()
            torch.cuda.synchronize()
            if r >= 1:
                bwd[name].append(time.perf_counter() - t)
            x.grad = None
            del y, s
    if setmode:
        setmode(1, 1)
    res = dict(variant=a.variant, size=a.size, interleaved=bool(setmode), steps_per_turn=a.steps,
               rounds=a.rounds, plugin_counters=plugin_counters(), time=time.time(), modes={})
    for name, _, _ in modes:
        res["modes"][name] = dict(step_median=statistics.median(steps[name]),
                                  round_medians=rounds[name], steps=steps[name],
                                  fwd_alloc_free_s=statistics.median(fwd[name]),
                                  bwd_chain_s=statistics.median(bwd[name]), bwd_chain_nodes=1000)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    for name in res["modes"]:
        m = res["modes"][name]
        print("%s/%s: step median %.3f ms, fwd alloc+free %.0f ns, bwd chain %.3f ms" %
              (a.variant, name, m["step_median"] * 1e3, m["fwd_alloc_free_s"] * 1e9,
               m["bwd_chain_s"] * 1e3))


def cmd_times(a):
    """Summarizes the lines of `time` runs in a.out."""
    rows = [json.loads(l) for l in open(a.out)]
    proc = {}
    for r in rows:
        for name, m in r["modes"].items():
            proc.setdefault(name, []).append(m)
    med = statistics.median
    print("step time by mode (medians of each process's median; each process's in brackets):")
    for name, ms in proc.items():
        print("  %-5s %.3f ms [%s]; fwd alloc+free %.0f ns; bwd chain %.3f ms" % (
            name, med(m["step_median"] for m in ms) * 1e3,
            ", ".join("%.3f" % (m["step_median"] * 1e3) for m in ms),
            med(m["fwd_alloc_free_s"] for m in ms) * 1e9, med(m["bwd_chain_s"] for m in ms) * 1e3))
    for r in rows:
        if not r.get("interleaved"):
            continue
        m = r["modes"]
        print("interleaved in one process (%d rounds of %d steps per mode):" %
              (r["rounds"], r["steps_per_turn"]))
        for x, y in (("off", "v1"), ("on", "off"), ("on", "v1")):
            paired = [a_ / b_ - 1 for a_, b_ in zip(m[x]["round_medians"], m[y]["round_medians"])]
            print("  %s over %s: %+.2f%% (medians of all steps), %+.2f%% (median of the rounds' "
                  "ratios)" % (x, y, 100 * (m[x]["step_median"] / m[y]["step_median"] - 1),
                               100 * med(paired)))
        d = (m["on"]["bwd_chain_s"] - m["off"]["bwd_chain_s"]) / 1000
        f = m["off"]["fwd_alloc_free_s"] - m["v1"]["fwd_alloc_free_s"]
        fo = m["on"]["fwd_alloc_free_s"] - m["off"]["fwd_alloc_free_s"]
        print("  node lookup: %+.0f ns per backward node; forward alloc+free: sizes %+.0f ns, "
              "nodes %+.0f ns" % (d * 1e9, f * 1e9, fo * 1e9))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=["train", "generate", "time", "times"])
    ap.add_argument("out")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--profile-steps", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=300)
    ap.add_argument("--variant", default="")
    ap.add_argument("--rounds", type=int, default=12)
    a = ap.parse_args()
    if a.steps is None:
        a.steps = 4 if a.cmd == "time" else 5
    {"train": cmd_train, "generate": cmd_generate, "time": cmd_time, "times": cmd_times}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())

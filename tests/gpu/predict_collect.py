"""Issue 21's data: small recordings and larger truths for `memsnap predict`.

    predict_collect.py plan WORK --memsnap BIN [--deadline S] [--jobs N] [--mem-gib G]
    predict_collect.py worker train|generate OUT.json [--batch B] [--seq S]
                       [--prompt P] [--new N] [--attn sdpa|eager] [--steps N] [--frac F]

worker: one program in this process (a fresh one per measurement), a
transformers LlamaForCausalLM built from a LlamaConfig with random weights
(no download): 4 layers, hidden 1024, 16 heads, intermediate 2816, vocab
32000.
  train     --steps AdamW steps (default 3) under bf16 autocast on random
            tokens (batch x seq), labels = inputs (ForCausalLMLoss);
  generate  bf16 weights, model.generate with a KV cache (batch x prompt
            random tokens, --new greedy tokens, min_new_tokens = the same so
            the run never stops early).
PYTORCH_CUDA_ALLOC_CONF comes from the environment; --frac F calls
torch.cuda.set_per_process_memory_fraction(F) first.  An out-of-memory is a
result: the JSON says where (step, phase).  Writes OUT.json with
max_memory_allocated / max_memory_reserved (PyTorch's), the device's total
memory and the settings.  Under the recorder, memsnap_annotate marks "step K
forward", "step K backward", "step K optimizer", "generate".

plan: every run of the plan below (PLAN), each in a fresh process, as many
at once as --jobs and --mem-gib (a generous estimate of each run's device
memory) allow; recorded runs under `memsnap run` (zstd).  The memory
fraction runs (family oom) start when the truth run they are sized from has
finished: fractions around its max_memory_allocated and
max_memory_reserved, so that some OOM and some do not.  No run starts after
--deadline seconds; each has a time limit.  WORK/results.jsonl gets one line
per run (its JSON plus name, family, recorded, exit status, seconds).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

CFG = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
           num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=8192)
EXP = "expandable_segments:True"

# ---------------------------------------------------------------- worker

_lib = ctypes.CDLL(None)
_annotate = getattr(_lib, "memsnap_annotate", None)


def mark(text):
    if _annotate:
        _annotate(text.encode())


def worker(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    import transformers
    t0 = time.time()
    res = dict(kind=a.kind, batch=a.batch, seq=a.seq, prompt=a.prompt, new=a.new, attn=a.attn,
               steps=a.steps, frac=a.frac, conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               recorded=bool(_annotate), torch=torch.__version__,
               transformers=transformers.__version__, oom=False)
    if a.frac:
        torch.cuda.set_per_process_memory_fraction(a.frac, 0)
    res["total_memory"] = torch.cuda.get_device_properties(0).total_memory
    where = {"step": -1, "phase": "build"}
    try:
        torch.manual_seed(0)
        try:
            cfg = LlamaConfig(**CFG, attn_implementation=a.attn)
        except Exception:
            cfg = LlamaConfig(**CFG)
        if getattr(cfg, "_attn_implementation", None) != a.attn:
            try:
                cfg._attn_implementation = a.attn
            except Exception:
                pass
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
        res["attn_impl"] = getattr(model.config, "_attn_implementation", None)
        g = torch.Generator(device="cuda").manual_seed(1)
        if a.kind == "train":
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            for i in range(a.steps):
                where.update(step=i, phase="forward")
                mark("step %d forward" % i)
                ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda", generator=g)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
                where.update(phase="backward")
                mark("step %d backward" % i)
                loss.backward()
                where.update(phase="optimizer")
                mark("step %d optimizer" % i)
                opt.step()
                opt.zero_grad(set_to_none=True)
                del loss, ids
            torch.cuda.synchronize()
        else:
            model = model.to(torch.bfloat16)
            model.eval()
            prompt = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda", generator=g)
            where.update(step=0, phase="generate")
            mark("generate")
            with torch.no_grad():
                out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                     max_new_tokens=a.new, min_new_tokens=a.new, do_sample=False,
                                     pad_token_id=0)
            torch.cuda.synchronize()
            res["generated"] = list(out.shape)
            del out
    except torch.cuda.OutOfMemoryError as e:
        res["oom"] = True
        res["oom_where"] = dict(where, message=str(e).splitlines()[0][:300])
    torch.cuda.synchronize()
    res["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    res["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    st = torch.cuda.memory_stats()
    res["num_alloc_retries"] = st.get("num_alloc_retries", 0)
    res["num_ooms"] = st.get("num_ooms", 0)
    res["seconds"] = time.time() - t0
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("%s: allocated %d reserved %d oom %s (%.1f s)" % (
        os.path.basename(a.out), res["max_memory_allocated"], res["max_memory_reserved"],
        res["oom"], res["seconds"]))
    return 0

# ---------------------------------------------------------------- plan


def train_est(b, s, attn):
    """A generous guess of a training run's device memory, GiB."""
    r = s / 512.0
    return 3.0 + b * r * 0.6 + (b * r * r * 0.25 if attn == "eager" else 0)


def gen_est(b, p, attn):
    r = p / 512.0
    return 2.0 + b * r * 0.1 + (b * r * r * 0.3 if attn == "eager" else 0)


def plan_runs():
    """(name, family, recorded, conf, worker args, est GiB), most needed first."""
    runs = []

    def train(fam, b, s, attn, conf, rec):
        tag = "%s-%s-b%d-s%d-%s" % (fam, attn, b, s, "exp" if conf else "def")
        runs.append(dict(name=tag, family=fam, recorded=rec, conf=conf,
                         args=["train", "--batch", str(b), "--seq", str(s), "--attn", attn],
                         est=train_est(b, s, attn)))

    def gen(fam, p, attn, conf, rec):
        tag = "%s-%s-p%d-%s" % (fam, attn, p, "exp" if conf else "def")
        runs.append(dict(name=tag, family=fam, recorded=rec, conf=conf,
                         args=["generate", "--batch", "4", "--prompt", str(p), "--new", "64",
                               "--attn", attn], est=gen_est(4, p, attn)))

    # A. batch, sdpa (the default attention), seq 512
    for b in (1, 2, 3):
        train("batch", b, 512, "sdpa", "", True)
    for b in (4, 8, 16, 32):
        train("batch", b, 512, "sdpa", "", False)
    # C. sequence length, eager (a quadratic term), batch 2
    for s in (256, 384, 512):
        train("seq", 2, s, "eager", "", True)
    for s in (1024, 2048, 4096):
        train("seq", 2, s, "eager", "", False)
    # E. generate over prompt length, sdpa, batch 4, 64 new tokens
    for p in (128, 256, 384):
        gen("gen", p, "sdpa", "", True)
    for p in (512, 1024, 2048):
        gen("gen", p, "sdpa", "", False)
    # expandable segments: truths, and the batch family's recordings too
    for b in (4, 8, 16, 32):
        train("batch", b, 512, "sdpa", EXP, False)
    for s in (1024, 2048, 4096):
        train("seq", 2, s, "eager", EXP, False)
    for p in (512, 1024, 2048):
        gen("gen", p, "sdpa", EXP, False)
    for b in (1, 2):
        train("batch", b, 512, "sdpa", EXP, True)
    # B. batch, eager; D. sequence length, sdpa; F. generate, eager
    for b in (1, 2, 3):
        train("batch", b, 512, "eager", "", True)
    for b in (4, 8, 16, 32):
        train("batch", b, 512, "eager", "", False)
    for s in (256, 512):
        train("seq", 2, s, "sdpa", "", True)
    for s in (1024, 2048, 4096):
        train("seq", 2, s, "sdpa", "", False)
    for p in (128, 256):
        gen("gen", p, "eager", "", True)
    for p in (512, 1024, 2048):
        gen("gen", p, "eager", "", False)
    return runs


# memory-fraction runs: (base truth run, [(label, how the limit is set)])
# a limit is "alloc*K" or "reserved*K" or "mid" (halfway between them)
OOM_CASES = [
    ("batch-sdpa-b16-s512-def", [("a0.97", "alloc*0.97"), ("a1.03", "alloc*1.03"), ("mid", "mid"),
                                 ("r1.02", "reserved*1.02")]),
    ("batch-sdpa-b16-s512-exp", [("a0.97", "alloc*0.97"), ("a1.03", "alloc*1.03")]),
    ("seq-eager-b2-s2048-def", [("a0.97", "alloc*0.97"), ("r1.02", "reserved*1.02")]),
    ("gen-sdpa-p1024-def", [("a0.97", "alloc*0.97"), ("a1.03", "alloc*1.03")]),
]


def limit_of(how, base):
    al, rs = base["max_memory_allocated"], base["max_memory_reserved"]
    if how == "mid":
        return (al + rs) // 2
    what, k = how.split("*")
    return int((al if what == "alloc" else rs) * float(k))


def plan(a):
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    me = os.path.abspath(__file__)
    pending = plan_runs()
    for r in pending:
        r["deps"] = None
    oom_waiting = list(OOM_CASES)
    running = {}
    done = {}
    t0 = time.time()
    log = open(os.path.join(work, "results.jsonl"), "a")

    def say(msg):
        print("[+%3.0fs] %s" % (time.time() - t0, msg), flush=True)

    def start(r):
        out = os.path.join(work, r["name"] + ".json")
        cmd = [sys.executable, me, "worker"] + r["args"][:1] + [out] + r["args"][1:]
        if r.get("frac"):
            cmd += ["--frac", "%.6f" % r["frac"]]
        if r["recorded"]:
            cmd = [a.memsnap, "run", "-q", "-o", os.path.join(work, r["name"] + ".msnap.zst"),
                   "--"] + cmd
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=r["conf"], PYTHONUNBUFFERED="1",
                   OMP_NUM_THREADS="2", TOKENIZERS_PARALLELISM="false")
        lf = open(os.path.join(work, r["name"] + ".log"), "w")
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env)
        running[r["name"]] = (p, r, time.time(), lf, out)

    total = None
    while pending or running or oom_waiting:
        # fraction runs whose base truth is known
        for base_name, limits in list(oom_waiting):
            if base_name in done:
                oom_waiting.remove((base_name, limits))
                base = done[base_name]
                if not base.get("max_memory_allocated") or base.get("oom"):
                    say("oom cases of %s skipped: its truth failed" % base_name)
                    continue
                total = base["total_memory"]
                src = next(r for r in plan_runs() if r["name"] == base_name)
                for label, how in limits:
                    lim = limit_of(how, base)
                    pending.insert(0, dict(src, name="oom-%s-%s" % (base_name, label), family="oom",
                                           recorded=False, frac=lim / total, limit=lim,
                                           base=base_name, est=lim / 2**30 + 1))
            elif base_name not in [r["name"] for r in pending] and base_name not in running:
                oom_waiting.remove((base_name, limits))
        late = time.time() - t0 > a.deadline
        if late and pending:
            for r in pending:
                say("skipped (deadline): %s" % r["name"])
            pending = []
            oom_waiting = []
        used = sum(r["est"] for _, r, _, _, _ in running.values())
        i = 0
        while i < len(pending) and len(running) < a.jobs:
            r = pending[i]
            if used + r["est"] <= a.mem_gib or not running:
                pending.pop(i)
                start(r)
                used += r["est"]
            else:
                i += 1
        time.sleep(0.2)
        for name, (p, r, ts, lf, out) in list(running.items()):
            rc = p.poll()
            if rc is None and time.time() - ts > a.run_limit:
                p.kill()
                rc = p.wait()
                say("%s: killed after %d s" % (name, a.run_limit))
            if rc is None:
                continue
            lf.close()
            del running[name]
            try:
                res = json.load(open(out))
            except (OSError, ValueError):
                res = {}
            res.update(name=name, family=r["family"], recorded=r["recorded"], exit=rc,
                       wall=time.time() - ts)
            for k in ("limit", "base"):
                if k in r:
                    res[k] = r[k]
            done[name] = res
            log.write(json.dumps(res) + "\n")
            log.flush()
            say("%-40s exit %d  alloc %s  reserved %s  oom %s  %.0f s" % (
                name, rc, res.get("max_memory_allocated"), res.get("max_memory_reserved"),
                res.get("oom"), res["wall"]))
    say("plan done: %d runs" % len(done))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("kind", choices=["train", "generate"])
    w.add_argument("out")
    w.add_argument("--batch", type=int, default=2)
    w.add_argument("--seq", type=int, default=512)
    w.add_argument("--prompt", type=int, default=128)
    w.add_argument("--new", type=int, default=64)
    w.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    w.add_argument("--steps", type=int, default=3)
    w.add_argument("--frac", type=float, default=0.0)
    p = sub.add_parser("plan")
    p.add_argument("work")
    p.add_argument("--memsnap", required=True)
    p.add_argument("--deadline", type=float, default=300)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--mem-gib", type=float, default=110)
    p.add_argument("--run-limit", type=float, default=150)
    a = ap.parse_args()
    return worker(a) if a.cmd == "worker" else plan(a)


if __name__ == "__main__":
    sys.exit(main())

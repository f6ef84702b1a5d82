"""A synthetic recording of LoRA fine-tuning as PyTorch's allocator and
memsnap's recorder would leave it (format 1.3, api torch), for summary's
categories: the adapters' gradients are the only gradients.

    synth_lora.py OUT EXPECT_JSON

The model: 8 layers, each with q and v projections of a frozen 4096 x 4096
fp32 weight (64 MiB, made by Module.cuda: parameters) and a LoRA adapter of
rank 16 (A 16 x 4096, B 4096 x 16: 256 KiB each, trainable).  Two steps of:
forward (per layer an activation kept for the backward and a temporary),
backward (autograd frames MmBackward0 naming their forward allocation by
its sequence number: per adapter the gradients of A and B, kept until the
optimizer's zero_grad, and an input gradient freed at once; the kept
activation freed), AdamW's step (exp_avg and exp_avg_sq per adapter matrix
at the first step, kept; a temporary), zero_grad(set_to_none) freeing the
gradients.  EXPECT_JSON: each category's peak.
"""
import json
import sys

KiB, MiB = 1 << 10, 1 << 20
SITE = "/venv/lib/python3.12/site-packages"


def main():
    out, expect = sys.argv[1:3]
    lines = []

    def w(o):
        lines.append(json.dumps(o, separators=(",", ":")))

    w({"type": "header", "format": "memsnap", "version": "1.3", "pid": 77, "host": "synth",
       "argv": ["python3", "lora.py"], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 0,
       "mode": "stream", "settings": {}, "devices": [{"index": 0, "name": "synthetic",
                                                    "total": 80 << 30}]})
    frames, stacks = {}, {}

    def ip_of(fr):
        if fr not in frames:
            if fr[1] == "<autograd>":
                ip = (3 << 62) | (len(frames) + 1)
            else:
                ip = (1 << 63) | (len(frames) + 1) << 16
            frames[fr] = ip
            w({"type": "sym", "ip": hex(ip), "fn": fr[0], "file": fr[1], "line": fr[2]})
        return frames[fr]

    def stack(site):
        site = tuple(site)
        if site not in stacks:
            stacks[site] = len(stacks) + 1
            w({"type": "stack", "id": stacks[site], "ips": [hex(ip_of(f)) for f in site]})
        return stacks[site]

    INIT = [("Module.cuda", SITE + "/torch/nn/modules/module.py", 1050),
            ("<module>", "/work/lora.py", 20)]
    FWD = [("LlamaAttention.forward", SITE + "/transformers/models/llama/modeling_llama.py", 290),
           ("Module._call_impl", SITE + "/torch/nn/modules/module.py", 1750),
           ("train_step", "/work/lora.py", 40)]
    FWD_TMP = [("LlamaMLP.forward", SITE + "/transformers/models/llama/modeling_llama.py", 180),
               ("Module._call_impl", SITE + "/torch/nn/modules/module.py", 1750),
               ("train_step", "/work/lora.py", 40)]
    LORA_FWD = [("Linear.forward", SITE + "/peft/tuners/lora/layer.py", 700),
                ("Module._call_impl", SITE + "/torch/nn/modules/module.py", 1750),
                ("train_step", "/work/lora.py", 40)]
    MM = [("MmBackward0", "<autograd>", 0)]
    OPT = [("_single_tensor_adamw", SITE + "/torch/optim/adamw.py", 400),
           ("AdamW.step", SITE + "/torch/optim/adamw.py", 230), ("train_step", "/work/lora.py", 44)]
    t = [1000]
    addr = [0x7f0000000000]
    live = {}

    def alloc(site, n, q=0):
        t[0] += 1000
        a = addr[0]
        addr[0] += (n + MiB - 1) // MiB * MiB + MiB
        e = {"a": "block_alloc", "t": t[0], "p": a, "n": n, "y": n, "k": stack(site), "th": 1,
             "f": "torch"}
        if q:
            e["q"] = q
        w(e)
        live[a] = n
        return a

    def free(a):
        t[0] += 1000
        w({"a": "block_free", "t": t[0], "p": a, "n": live.pop(a), "th": 1, "f": "torch"})

    # the model: frozen weights and the adapters
    mods = 8 * 2
    for _ in range(mods):
        alloc(INIT, 64 * MiB)
        alloc(INIT, 256 * KiB)
        alloc(INIT, 256 * KiB)
    seq = [100]
    state = []
    grads_peak = 0
    for step in range(2):
        acts = []
        for i in range(mods):
            seq[0] += 1
            q = seq[0]
            acts.append((alloc(FWD, 4 * MiB, q), q))      # kept for the backward
            tmp = alloc(FWD_TMP, 2 * MiB, q + 1000)
            free(tmp)
            lo = alloc(LORA_FWD, 128 * KiB, q + 2000)       # the adapter's output, kept too
            acts.append((lo, q))
        grads = []
        for a, q in reversed(acts[::2]):
            grads.append(alloc(MM, 256 * KiB, q))           # dA
            grads.append(alloc(MM, 256 * KiB, q))           # dB
            gx = alloc(MM, 4 * MiB, q)                      # the input's gradient
            free(gx)
            free(a)
        for a, q in acts[1::2]:
            free(a)
        grads_peak = max(grads_peak, len(grads) * 256 * KiB)
        if step == 0:
            for _ in range(mods * 2):
                state.append(alloc(OPT, 256 * KiB))         # exp_avg
                state.append(alloc(OPT, 256 * KiB))         # exp_avg_sq
        tmp = alloc(OPT, 1 * MiB)
        free(tmp)
        for g in grads:                                     # zero_grad(set_to_none=True)
            free(g)
    w({"type": "trailer", "t": t[0] + 1000,
       "events": sum(1 for l in lines if l.startswith('{"a"')), "dropped": 0,
       "stacks_dropped": 0, "reason": "exit"})
    open(out, "w").write("\n".join(lines) + "\n")
    json.dump({"parameters": mods * (64 * MiB + 512 * KiB), "gradients": grads_peak,
               "optimizer_state": mods * 4 * 256 * KiB}, open(expect, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Synthetic recordings of one program at a size parameter X, for the tests
of `memsnap predict` (predict_test.sh).

    predict_synth.py OUT X [--program train|other] [--api allocator|torch]
                     [--general-quad]

The program: 4 weights of constant size, then 3 steps, each with
activations of x * (1 MiB + 512 i) + 4096 bytes (linear with an offset),
attention scores of x^2 * 64 KiB (a monomial), with --general-quad also
x^2 * 32 KiB + x * 1000 + 520 (a quadratic three recordings are needed
for), a constant 2 MiB workspace, and temporaries freed in reverse order;
the weights stay.  Every request has its own code line (a stack of named
frames); stack ids and instruction pointers change with X, as they do
between runs, while the frames' names do not.  --program other: another
program (other lines, other order), which must not align with train.
--api torch: PyTorch's allocator events (format 1.2: n = the block's size
rounded to 512, y = the size asked for) replayed by the torch engine;
allocator: memsnap's own (n = the size).
Device memory: 8 GiB.
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("x", type=int)
    ap.add_argument("--program", default="train", choices=["train", "other"])
    ap.add_argument("--api", default="allocator", choices=["allocator", "torch"])
    ap.add_argument("--general-quad", action="store_true")
    a = ap.parse_args()
    x = a.x
    lines = []

    def w(o):
        lines.append(json.dumps(o, separators=(",", ":")))

    w({"type": "header", "format": "memsnap", "version": "1.2", "pid": 1000 + x, "host": "synth",
       "argv": ["synth", str(x)], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 0, "mode": "stream",
       "settings": {}, "devices": [{"index": 0, "name": "synthetic", "total": 8 << 30}]})
    stacks = {}
    shift = 0x1000 * x          # ips and ids move with x, as between two runs

    def stack(name, line):
        key = (name, line)
        if key not in stacks:
            sid = len(stacks) + 1 + 7 * x
            ip_user = 0x400000 + shift + 16 * len(stacks)
            ip_main = 0x500000 + shift
            stacks[key] = sid
            w({"type": "sym", "ip": hex(ip_user), "fn": name, "file": "model.py", "line": line})
            w({"type": "sym", "ip": hex(ip_main), "fn": "main", "file": "train.py", "line": 7})
            w({"type": "stack", "id": sid, "ips": [hex(ip_user), hex(ip_main)]})
        return stacks[key]

    t = [1000]
    addr = [0x7f0000000000]
    live = {}

    def alloc(name, line, size):
        k = stack(name, line)
        t[0] += 1000
        p = addr[0]
        addr[0] += ((size + 4095) // 4096) * 4096 + 4096
        e = {"a": "block_alloc", "t": t[0], "p": p, "k": k, "th": 1, "f": a.api}
        if a.api == "torch":
            e["n"] = 512 if size < 512 else (size + 511) // 512 * 512
            e["y"] = size
        else:
            e["n"] = size
        w(e)
        live[p] = e["n"]
        return p

    def free(p):
        t[0] += 1000
        w({"a": "block_free", "t": t[0], "p": p, "n": live.pop(p), "th": 1, "f": a.api})

    def mark(text, sid=[0]):
        sid[0] += 1
        w({"type": "str", "id": sid[0], "s": text})
        t[0] += 10
        w({"a": "nvtx_mark", "t": t[0], "x": sid[0], "th": 1, "f": "memsnap_api"})

    if a.program == "train":
        weights = [alloc("init_weight", 10 + i, s) for i, s in
                   enumerate((10 << 20, 3 << 20, 777216, 4096))]
        for step in range(3):
            mark("step %d forward" % step)
            acts = [alloc("layer_forward", 20 + i, x * ((1 << 20) + 512 * i) + 4096)
                    for i in range(6)]
            scores = alloc("attention_scores", 40, x * x * (64 << 10))
            extra = alloc("attention_bias", 41, x * x * (32 << 10) + x * 1000 + 520) \
                if a.general_quad else None
            ws = alloc("workspace", 50, 2 << 20)
            free(ws)
            mark("step %d backward" % step)
            grads = [alloc("layer_backward", 60 + i, x * (1 << 20) + 8192) for i in range(3)]
            if extra:
                free(extra)
            free(scores)
            for p in reversed(grads):
                free(p)
            for p in reversed(acts):
                free(p)
        del weights
    else:
        mark("serve")
        for step in range(5):
            kv = alloc("kv_grow", 100 + step, (step + 1) * x * 4096)
            tmp = alloc("logits", 120, x * 131072)
            free(tmp)
            free(kv)
    w({"type": "trailer", "t": t[0] + 1000,
       "events": sum(1 for l in lines if l.startswith('{"a"')), "dropped": 0,
       "stacks_dropped": 0, "reason": "exit"})
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

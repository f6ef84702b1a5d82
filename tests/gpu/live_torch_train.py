"""The program of live_torch.py (issue 32, on the GPU machine): a small
PyTorch training loop (a transformer encoder, AdamW) that stops at a mark:
after step --mark-at it synchronizes, prints
    MARK allocated=N reserved=M
(torch.cuda.memory_allocated() and memory_reserved()), creates DIR/at-mark
and waits, touching nothing, until DIR/go appears (60 s at most); then a
few more steps and it exits.  With --record PATH it records itself with
memsnap.record(PATH, metrics=--metrics) (in-process); without, it expects to
run under `memsnap run --metrics`."""
import argparse
import os
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--mark-at", type=int, default=6)
p.add_argument("--record")
p.add_argument("--metrics")
a = p.parse_args()

rec = None
if a.record:
    import memsnap
    rec = memsnap.record(a.record, metrics=a.metrics)
    rec.start()
    print("METRICS %s" % rec.metrics_address, flush=True)

dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Embedding(8192, 512),
    torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True),
                                num_layers=6),
    torch.nn.Linear(512, 8192)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(a.steps):
    x = torch.randint(0, 8192, (16, 256), device=dev)
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out.view(-1, 8192), x.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step + 1 == a.mark_at:
        torch.cuda.synchronize()
        print("MARK allocated=%d reserved=%d" % (torch.cuda.memory_allocated(),
                                                 torch.cuda.memory_reserved()), flush=True)
        open(os.path.join(a.dir, "at-mark"), "w").close()
        end = time.time() + 60
        while not os.path.exists(os.path.join(a.dir, "go")) and time.time() < end:
            time.sleep(0.05)
torch.cuda.synchronize()
if rec:
    rec.stop()
print("DONE", flush=True)

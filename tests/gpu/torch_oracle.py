"""PyTorch's own memory history as the oracle for memsnap's allocated layer.

Run under `memsnap run --compress none` with the recorder's PyTorch plugin
available (tests/gpu/torch_oracle.sh), or plainly (for the reference loss):

    python3 torch_oracle.py OUTDIR

It switches PyTorch's `_record_memory_history` on before the first CUDA
allocation, builds a small transformers LlamaForCausalLM from a LlamaConfig
(random weights, no download), runs generate() and three AdamW training steps
under bf16 autocast, then induces an out-of-memory error (a tensor too big for
what set_per_process_memory_fraction leaves) and, in the except clause, takes
torch.cuda.memory._snapshot() -- PyTorch's trace entries and its live blocks
at the OOM.  Right after the snapshot it marks the memsnap recording
("oracle snapshot"), so the checker compares memsnap's events up to the mark.
Writes OUTDIR/oracle.json (the trace entries of device 0, the live blocks,
the OOM entry) and OUTDIR/loss.txt (the losses, exact hex floats).
Exit 0 done, 77 skip (no torch, no GPU or no transformers), 1 failure.
"""
import ctypes
import json
import os
import sys

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

outdir = sys.argv[1]
os.makedirs(outdir, exist_ok=True)
lib = ctypes.CDLL(None)
annotate = getattr(lib, "memsnap_annotate", None)   # None when not recorded

# Initialize CUDA and the allocator first (no allocation): history set on an
# allocator without its device allocators would have nothing to apply to.
torch.cuda.init()
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                         max_entries=10_000_000)
torch.manual_seed(0)
# Deterministic kernels where PyTorch has them (a warning where it has not),
# so the two runs' losses can be compared.
torch.use_deterministic_algorithms(True, warn_only=True)
dev = torch.device("cuda")
cfg = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
model = LlamaForCausalLM(cfg).to(dev)

# generate(): the KV cache grows token by token.
model.eval()
prompt = torch.randint(0, cfg.vocab_size, (2, 16), device=dev)
with torch.no_grad():
    out = model.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)
del out

# Three training steps.
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
losses = []
for step in range(3):
    ids = torch.randint(0, cfg.vocab_size, (4, 64), device=dev)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
with open(os.path.join(outdir, "loss.txt"), "w") as f:
    f.write("\n".join(float(x).hex() for x in losses) + "\n")

# The OOM: leave 64 MiB above what is reserved now, then ask for 1 GiB.
torch.cuda.synchronize()
total = torch.cuda.get_device_properties(0).total_memory
frac = (torch.cuda.memory_reserved() + (64 << 20)) / total
torch.cuda.set_per_process_memory_fraction(frac)
keep = torch.empty(16 << 20, dtype=torch.uint8, device=dev)   # a live block at the OOM
snap = None
try:
    big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    print("FAIL: the 1 GiB tensor fit under the memory fraction")
    sys.exit(1)
except torch.OutOfMemoryError:
    snap = torch.cuda.memory._snapshot()
    if annotate:
        annotate(b"oracle snapshot")
torch.cuda.set_per_process_memory_fraction(1.0)

# An oom entry carries the device's free bytes as "device_free" instead of "addr".
traces = [{"action": e["action"], "addr": e.get("addr", e.get("device_free", 0)),
           "size": e["size"], "stream": e["stream"]}
          for e in snap["device_traces"][0] if e["action"] != "snapshot"]
# Live for memsnap until free_completed: allocated, or freed but still waiting
# for other streams' work.
live = [{"addr": b["address"], "size": b["size"], "requested_size": b["requested_size"]}
        for seg in snap["segments"] if seg["device"] == 0
        for b in seg["blocks"] if b["state"] in ("active_allocated", "active_pending_free")]
json.dump({"traces": traces, "live": live,
           "expandable": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")},
          open(os.path.join(outdir, "oracle.json"), "w"))
print(f"oracle: {len(traces)} trace entries, {len(live)} live blocks at the OOM, losses {losses}")
del keep

# Records PyTorch's own allocator history for one allocator config (used by
# tests/interop/gpu_replay_torch.sh): a small Llama (random weights): generate(), then 3 AdamW training steps.
import os, sys, json, gzip, pickle, time
import torch
from transformers import LlamaConfig, LlamaForCausalLM
out = sys.argv[1]
frac = float(os.environ.get("FRAC") or 0)
if frac:
    torch.cuda.set_per_process_memory_fraction(frac)
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                  num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=2048)
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2000000)
model = LlamaForCausalLM(cfg).cuda()
model.eval()
with torch.no_grad():
    ids = torch.randint(0, 32000, (4, 128), device="cuda")
    model.generate(ids, max_new_tokens=64, do_sample=False)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(3):
    x = torch.randint(0, 32000, (8, 512), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x, labels=x).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
snap = torch.cuda.memory._snapshot()
with gzip.open(out + ".pickle.gz", "wb") as f:
    pickle.dump(snap, f)
st = torch.cuda.memory_stats()
json.dump({"conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "frac": frac,
           "max_reserved": torch.cuda.max_memory_reserved(), "max_allocated": torch.cuda.max_memory_allocated(),
           "reserved": torch.cuda.memory_reserved(), "loss": float(loss),
           "entries": sum(len(t) for t in snap["device_traces"]),
           "stats": {k: v for k, v in st.items() if "all" in k or "." not in k}}, open(out + ".json", "w"), indent=1)
print(out, torch.cuda.max_memory_reserved())

# A small LlamaForCausalLM (random weights, built from a LlamaConfig: no
# download) running generate() on the GPU, for the Python-frames GPU test:
# under `memsnap run`, the stacks of PyTorch's cudaMalloc segments must hold
# Python frames of this script and of transformers' modeling_llama.py.
# Exits 77 (skipped) without torch+CUDA or transformers.
import sys

try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    print("SKIP: no torch or transformers")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no GPU")
    sys.exit(77)


def build_model():
    cfg = LlamaConfig(vocab_size=2048, hidden_size=512, intermediate_size=1408,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=1024)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to("cuda").eval()


def run_generate(model):
    ids = torch.randint(0, 2048, (8, 256), device="cuda")
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0)


model = build_model()
torch.cuda.empty_cache()      # generate's activations then need new segments
out = run_generate(model)
print("generated", tuple(out.shape))

"""A small PyTorch program for the site-label test (cases_gpu.sh,
torch-sites): its memory is allocated inside torch (site-packages) but
called from this file, the user's code, so every top site must be named by
a frame outside the memory runtime, and once the recorder writes Python
frames, by a line of this file.  Run under `memsnap run`.
Exit 0 done, 77 skip (no torch / no GPU)."""
import sys

try:
    import torch
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no GPU")
    sys.exit(77)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4096, 4096, device="cuda")

    def forward(self, x):
        return self.proj(x)


def make_cache():
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")   # CACHE LINE


def main():
    cache = make_cache()
    model = Block()
    x = torch.randn(2048, 4096, device="cuda")
    for _ in range(3):
        y = model(x)
    torch.cuda.synchronize()
    del cache, y


main()

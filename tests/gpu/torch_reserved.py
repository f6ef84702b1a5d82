"""The recorder under PyTorch, with the default caching allocator and with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.  Run under `memsnap run`.

At each checkpoint it marks the recording with torch.cuda.memory_reserved()
("LABEL: torch reserved N"); the test then checks, from the snapshot file,
that the reserved bytes made from PyTorch's allocator (stacks through
libc10_cuda.so) equal N (snapcheck --owner-marks).  In-process it checks that
the recorder's total (memsnap_totals_get) is never below torch's: the
difference is memory PyTorch does not count -- cuBLAS allocates its own
workspace with cudaMalloc (64 MiB on an H200 with CUDA 13), which the
recorder sees with libcublas on the stack.
Exit 0 pass, 1 fail, 77 skip (no torch / no GPU)."""
import ctypes
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

lib = ctypes.CDLL(None)
try:
    totals_get = lib.memsnap_totals_get
    annotate = lib.memsnap_annotate
except AttributeError:
    print("FAIL: the memsnap recorder is not loaded (run under memsnap run)")
    sys.exit(1)


class Totals(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("reserved", "allocated", "async_", "managed", "vmm_mapped", "events")]


failures = 0


def checkpoint(label):
    global failures
    torch.cuda.synchronize()
    t = Totals()
    rc = totals_get(0, ctypes.byref(t))
    want = torch.cuda.memory_reserved()
    ok = rc == 0 and t.reserved >= want
    annotate(f"{label}: torch reserved {want}".encode())
    print(f"{'ok  ' if ok else 'FAIL'} {label:28s} recorder {t.reserved:>12d}  torch {want:>12d}"
          f"  (others {t.reserved - want}, vmm mapped {t.vmm_mapped}, events {t.events})")
    if not ok:
        failures += 1


conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
print(f"allocator config: {conf}")
torch.manual_seed(0)
dev = torch.device("cuda")
checkpoint("start")
small = [torch.empty(1000 + 37 * i, device=dev) for i in range(200)]   # small pool
checkpoint("small tensors")
large = [torch.empty((i + 1) * (5 << 20) // 4, device=dev) for i in range(12)]  # large
checkpoint("large tensors")
x = torch.randn(2048, 2048, device=dev)
y = x @ x.T                                   # cuBLAS (workspace through the allocator)
z = torch.nn.functional.gelu(y).sum()
checkpoint("matmul")
del large[::2]
checkpoint("freed half of large")
del small
checkpoint("freed small")
torch.cuda.empty_cache()
checkpoint("empty_cache")
big = torch.empty(3 << 30, dtype=torch.uint8, device=dev)
checkpoint("3 GiB tensor")
del big, large, x, y, z
torch.cuda.empty_cache()
checkpoint("all freed + empty_cache")
print(f"{failures} checkpoint(s) where the recorder saw less than torch reserved")
sys.exit(1 if failures else 0)

"""A stand-in for PyTorch, for the dry run of tests/gpu/h200x2_issue34.sh on
the simulated device (ctest gpu.h200x2-dry): just what dist_llama.py and
the runner use, with the memory of _fake_alloc.py.  Not PyTorch: never on
a path where the real one is wanted."""
import contextlib
import random

from . import _fake_alloc
from ._fake_alloc import OutOfMemoryError

__version__ = "2.11.0+fake"


class _Version:
    cuda = "13.0 (fake)"


version = _Version()
bfloat16, float32 = "bfloat16", "float32"
_SIZES = {"bfloat16": 2, "float32": 4, "int64": 8}
int64 = "int64"


class device:
    def __init__(self, kind, index=None):
        self.type, self.index = kind, index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Tensor:
    """n elements of dtype on the device: a block while it lives."""

    def __init__(self, shape, dtype="float32", node=None, grad_fn=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        n = 1
        for s in self.shape:
            n *= s
        self.numel = n
        self.nbytes = n * _SIZES.get(dtype, 4)
        self.block = _fake_alloc.alloc(self.nbytes, node)
        self.grad = None
        self.grad_fn = grad_fn

    def free(self):
        if self.block:
            _fake_alloc.free(self.block)
            self.block = None

    def backward(self):
        if self.grad_fn:
            self.grad_fn()

    def item(self):
        return 0.0


def empty(*shape, dtype="float32", device=None, node=None):
    return Tensor(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape, dtype, node)


def zeros(*shape, dtype="float32", device=None):
    return empty(*shape, dtype=dtype, device=device)


def randint(lo, hi, shape, device=None):
    return Tensor(shape, "int64")


def manual_seed(s):
    random.seed(s)


@contextlib.contextmanager
def autocast(kind, dtype=None):
    yield


from . import cuda, distributed, nn, optim   # noqa: E402

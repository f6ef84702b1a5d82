"""torch.cuda of the fake (tests/gpu/fake/torch/__init__.py)."""
import os

from .. import _fake_alloc
from .._fake_alloc import OutOfMemoryError   # noqa: F401
from . import nccl, nvtx                     # noqa: F401

_S = _fake_alloc.state


def is_available():
    return True


def device_count():
    return int(os.environ.get("MEMSNAP_SIM_DEVICES", "2"))


def set_device(d):
    _fake_alloc.init()


def synchronize(device=None):
    pass


def init():
    _fake_alloc.init()


class _Props:
    def __init__(self):
        _fake_alloc.init()
        self.name = "Simulated device (fake torch)"
        self.total_memory = _S["total"]


def get_device_properties(d=None):
    return _Props()


def max_memory_allocated(device=None):
    return _S["max_allocated"]


def max_memory_reserved(device=None):
    return _S["max_reserved"]


def memory_allocated(device=None):
    return _S["allocated"]


def memory_reserved(device=None):
    return _S["reserved"]


def set_per_process_memory_fraction(frac, device=None):
    _fake_alloc.init()
    _S["limit"] = int(frac * _S["total"])

"""pynvml of the fake (tests/gpu/fake/torch/__init__.py): the simulated
device's NVML (its used figure counts a fixed 500 MiB context); until the
fake torch has made its context, that context is left out, as a real
device's used memory has no context of the process before it makes one."""
import ctypes

from torch import _fake_alloc

_nvml = None
CONTEXT = 500 << 20


class _Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Pci:
    def __init__(self, bus):
        self.bus = bus


def nvmlInit():
    global _nvml
    if _nvml is None:
        _nvml = ctypes.CDLL("libnvidia-ml.so.1")
        _nvml.nvmlInit_v2()


def nvmlDeviceGetHandleByIndex(i):
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    d = ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(d), i)
    bus = ctypes.create_string_buffer(64)
    cuda.cuDeviceGetPCIBusId(bus, 64, d)
    h = ctypes.c_void_p()
    _nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.value, ctypes.byref(h))
    return (h, bus.value.decode())


def nvmlDeviceGetMemoryInfo(handle):
    m = _Mem()
    _nvml.nvmlDeviceGetMemoryInfo(handle[0], ctypes.byref(m))
    if _fake_alloc._cuda is None:
        m.free += CONTEXT
        m.used -= CONTEXT
    return m


def nvmlDeviceGetPciInfo(handle):
    return _Pci(int(handle[1].split(":")[1], 16))

# Second module of pyalloc.py: the innermost named functions, so that a
# recorded stack crosses two .py files.  Each allocation goes through ctypes
# on the simulated libcuda.so.1; PyDLL keeps the GIL during the call (the
# recorder then sees Python frames), CDLL releases it (native frames only).
import ctypes

class Device:
    """The driver, loaded twice: one handle keeps the GIL, one releases it."""

    def __init__(self):
        self.keep = ctypes.PyDLL("libcuda.so.1")
        self.drop = ctypes.CDLL("libcuda.so.1")
        self.keep.cuInit(0)
        dev = ctypes.c_int()
        assert self.keep.cuDeviceGet(ctypes.byref(dev), 0) == 0
        self.ctx = ctypes.c_void_p()
        assert self.keep.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev) == 0

    def bind(self):
        """Makes the primary context current on the calling thread."""
        assert self.keep.cuCtxSetCurrent(self.ctx) == 0


def level3_alloc(device, nbytes, keep_gil):
    lib = device.keep if keep_gil else device.drop
    ptr = ctypes.c_uint64()
    rc = lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes))
    assert rc == 0, rc
    return ptr.value


def level3_free(device, ptr):
    assert device.keep.cuMemFree_v2(ctypes.c_uint64(ptr)) == 0

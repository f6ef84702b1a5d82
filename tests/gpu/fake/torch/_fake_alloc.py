"""The fake torch's device memory (tests/gpu/fake: a stand-in for PyTorch
that lets tests/gpu/h200x2_issue34.sh run end to end on the simulated
device, so that a typo in its scripts does not cost a GPU lease; it is no
model of PyTorch's allocator).

A CUDA context on LOCAL_RANK's device of the simulated driver (ctypes,
libcuda.so.1 from LD_LIBRARY_PATH); every tensor a segment of its own
(cuMemAlloc_v2 of its size rounded up to 2 MiB, freed with it), its block
the size rounded up to 512 bytes, both told to the recorder as PyTorch's
plugin would (memsnap_trace_torch2, when the recorder is loaded) from the
Python frames of whoever made the tensor.  max_memory_allocated and
max_memory_reserved are this file's own counts; a memory fraction makes an
allocation past it an OutOfMemoryError, told to the recorder first."""
import ctypes
import os

ALLOC, FREE, SEG_ALLOC, SEG_FREE, OOM = 0, 2, 3, 4, 8
_cuda = None
_trace = None
_node_ids = {}
state = dict(device=0, allocated=0, reserved=0, max_allocated=0, max_reserved=0, limit=None,
             total=0)


class OutOfMemoryError(RuntimeError):
    pass


def init():
    global _cuda, _trace
    if _cuda:
        return
    _cuda = ctypes.CDLL("libcuda.so.1")
    d, c = ctypes.c_int(), ctypes.c_void_p()
    dev = int(os.environ.get("LOCAL_RANK", "0"))
    if _cuda.cuInit(0) or _cuda.cuDeviceGet(ctypes.byref(d), dev) or \
            _cuda.cuDevicePrimaryCtxRetain(ctypes.byref(c), d) or _cuda.cuCtxSetCurrent(c):
        raise RuntimeError("fake torch: no simulated device %d" % dev)
    total = ctypes.c_size_t()
    _cuda.cuDeviceTotalMem_v2(ctypes.byref(total), d)
    state.update(device=dev, total=total.value)
    lib = ctypes.PyDLL(None)
    if hasattr(lib, "memsnap_trace_torch2"):
        _trace = lib.memsnap_trace_torch2
        _trace.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                           ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                           ctypes.c_uint32]
        _trace.restype = None


def node(name):
    """The recorder's id of an autograd node's name (0 unrecorded)."""
    if name not in _node_ids:
        lib = ctypes.PyDLL(None)
        f = getattr(lib, "memsnap_torch_node_id", None)
        if f:
            f.argtypes = [ctypes.c_char_p]
            f.restype = ctypes.c_uint32
        _node_ids[name] = f(name.encode()) if f else 0
    return _node_ids[name]


def annotate(text):
    f = getattr(ctypes.CDLL(None), "memsnap_annotate", None)
    if f:
        f(text.encode())


def alloc(nbytes, node_name=None):
    """A block of nbytes on this rank's device: (address, block size)."""
    init()
    n = (max(nbytes, 1) + 511) // 512 * 512
    seg = (n + (2 << 20) - 1) // (2 << 20) * (2 << 20)
    nid = node(node_name) if node_name else 0
    if state["limit"] is not None and state["reserved"] + seg > state["limit"]:
        if _trace:
            _trace(OOM, state["device"], state["limit"] - state["reserved"], seg, 0, 0, 0, 0, nid)
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate %d bytes (fake)" % seg)
    p = ctypes.c_uint64()
    if _cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(seg)):
        raise OutOfMemoryError("CUDA out of memory (simulated device)")
    if _trace:
        _trace(SEG_ALLOC, state["device"], p.value, seg, 0, 0, 0, 0, nid)
        _trace(ALLOC, state["device"], p.value, n, 0, 0, nbytes, 0, nid)
    state["allocated"] += n
    state["reserved"] += seg
    state["max_allocated"] = max(state["max_allocated"], state["allocated"])
    state["max_reserved"] = max(state["max_reserved"], state["reserved"])
    return p.value, n, seg


def free(block):
    addr, n, seg = block
    if _trace:
        _trace(FREE, state["device"], addr, n, 0, 0, 0, 0, 0)
        _trace(SEG_FREE, state["device"], addr, seg, 0, 0, 0, 0, 0)
    _cuda.cuMemFree_v2(ctypes.c_uint64(addr))
    state["allocated"] -= n
    state["reserved"] -= seg

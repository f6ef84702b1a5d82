"""The recorder's event count in this process (memsnap_totals_get of a
preloaded libmemsnap.so; 0 when none is loaded), for the training
benchmarks (bench_overhead.py, bench_torch_train.py)."""
import ctypes

_lib = ctypes.CDLL(None)
_totals_get = getattr(_lib, "memsnap_totals_get", None)


class _Totals(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("reserved", "allocated", "async_", "managed", "vmm_mapped", "events")]


def events():
    """Events the recorder has recorded so far (0 without a recorder)."""
    if not _totals_get:
        return 0
    t = _Totals()
    _totals_get(0, ctypes.byref(t))
    return t.events

"""ctypes bindings of libmemsnap_py.so (analyze/pyapi.h): the analysis library.

Loaded once, on first use.  ctypes, not a CPython extension: the package stays
one py3-none wheel for every Python 3 (docs/python.md, *Why ctypes*).
"""
import ctypes
import json
import threading
import weakref

from . import paths

_lock = threading.Lock()
_lib = None

MPY_EVENTS = 1
MPY_STATE = 4


def lib():
    """The loaded libmemsnap_py.so (prototypes set)."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = paths()["py"]
        if path is None:
            raise ImportError("memsnap: this package has no libmemsnap_py.so "
                              "(a build from before the Python API?)")
        L = ctypes.CDLL(path)
        c_p, c_u64, c_int = ctypes.c_char_p, ctypes.c_uint64, ctypes.c_int
        vp = ctypes.c_void_p
        L.mpy_read.restype = vp
        L.mpy_read.argtypes = [c_p, ctypes.c_uint, c_p, ctypes.c_char_p, ctypes.c_size_t]
        L.mpy_free.restype = None
        L.mpy_free.argtypes = [vp]
        L.mpy_table.restype = c_int
        L.mpy_table.argtypes = [vp, c_p]
        L.mpy_rows.restype = c_u64
        L.mpy_rows.argtypes = [vp, c_int]
        L.mpy_columns.restype = c_int
        L.mpy_columns.argtypes = [vp, c_int]
        L.mpy_column_name.restype = c_p
        L.mpy_column_name.argtypes = [vp, c_int, c_int]
        L.mpy_column_type.restype = c_p
        L.mpy_column_type.argtypes = [vp, c_int, c_int]
        L.mpy_column_release.restype = vp
        L.mpy_column_release.argtypes = [vp, c_int, c_int, ctypes.POINTER(c_u64)]
        L.mpy_free_buffer.restype = None
        L.mpy_free_buffer.argtypes = [vp]
        L.mpy_column_text.restype = vp
        L.mpy_column_text.argtypes = [vp, c_int, c_int, ctypes.POINTER(c_u64),
                                      ctypes.POINTER(c_u64)]
        L.mpy_info.restype = c_p
        L.mpy_info.argtypes = [vp]
        L.mpy_summary.restype = vp
        L.mpy_summary.argtypes = [c_p, c_int, c_int, c_p, ctypes.POINTER(c_int),
                                  ctypes.c_char_p, ctypes.c_size_t]
        L.mpy_free_text.restype = None
        L.mpy_free_text.argtypes = [vp]
        L.mpy_version.restype = c_p
        L.mpy_version.argtypes = []
        _lib = L
        return L


def _fs(path):
    """A path as the C library takes it (bytes, as the file system has it)."""
    import os
    return os.fsencode(path)


class Result:
    """One read of a snapshot (mpy_read): its tables, taken column by column."""

    def __init__(self, path, want, at=None):
        L = lib()
        err = ctypes.create_string_buffer(1280)
        h = L.mpy_read(_fs(path), want, at.encode() if at is not None else None, err,
                       len(err))
        if not h:
            raise ValueError(err.value.decode(errors="replace"))
        self._L, self._h = L, h

    def close(self):
        if self._h:
            self._L.mpy_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def info(self):
        return json.loads(self._L.mpy_info(self._h).decode())

    def _texts(self, t, c):
        n, nb = ctypes.c_uint64(), ctypes.c_uint64()
        p = self._L.mpy_column_text(self._h, t, c, ctypes.byref(n), ctypes.byref(nb))
        if not p or not n.value:
            return []
        blob = ctypes.string_at(p, nb.value)
        return [s.decode(errors="replace") for s in blob.split(b"\0")[:n.value]]

    def _release(self, t, c, dtype, rows):
        """Column c of table t as a numpy array over the C library's own
        buffer (no copy), freed with the last array that uses it."""
        import numpy as np
        nb = ctypes.c_uint64()
        p = self._L.mpy_column_release(self._h, t, c, ctypes.byref(nb))
        if not p:
            if rows:
                raise MemoryError("memsnap: column %d of table %d was not handed over" % (c, t))
            return np.empty(0, dtype=dtype)
        if nb.value != rows * dtype.itemsize:
            self._L.mpy_free_buffer(p)
            raise RuntimeError("memsnap: column %d of table %d has %d bytes, not %d"
                               % (c, t, nb.value, rows * dtype.itemsize))
        buf = (ctypes.c_char * nb.value).from_address(p)
        weakref.finalize(buf, self._L.mpy_free_buffer, p)
        return np.frombuffer(buf, dtype=dtype)

    def table(self, name):
        """{column name: numpy array or pandas Categorical}, in
        the table's column order.  The arrays use the C library's buffers
        (no copy), each freed when nothing uses it any more."""
        import numpy as np
        L, h = self._L, self._h
        t = L.mpy_table(h, name.encode())
        if t < 0:
            raise KeyError(name)
        rows = L.mpy_rows(h, t)
        out = {}
        for c in range(L.mpy_columns(h, t)):
            cname = L.mpy_column_name(h, t, c).decode()
            ctype = L.mpy_column_type(h, t, c).decode()
            dtype = np.dtype(ctype[4:] if ctype.startswith("cat:") else ctype)
            a = self._release(t, c, dtype, rows)
            if ctype.startswith("cat:"):
                import pandas as pd
                cats = self._texts(t, c)
                out[cname] = pd.Categorical.from_codes(a, categories=cats)
            else:
                out[cname] = a
        return out


def summary_json(path, top, marks, rules):
    """(dict, rc) from mpy_summary; ValueError with the C library's line."""
    L = lib()
    err = ctypes.create_string_buffer(1280)
    rc = ctypes.c_int(2)
    p = L.mpy_summary(_fs(path), top, 1 if marks else 0,
                      _fs(rules) if rules else None, ctypes.byref(rc), err, len(err))
    if not p:
        raise ValueError(err.value.decode(errors="replace"))
    try:
        text = ctypes.string_at(p)
    finally:
        L.mpy_free_text(p)
    return json.loads(text), rc.value

"""ctypes bindings of libmemsnap_py.so (analyze/pyapi.h): the analysis library.

Loaded once, on first use.  ctypes, not a CPython extension: the package stays
one py3-none wheel for every Python 3 (docs/python.md, *Why ctypes*).
"""
import ctypes
import json
import re
import threading
import weakref

from . import paths

_lock = threading.Lock()
_lib = None

MPY_EVENTS = 1
MPY_STATE = 4
# The oldest numpy and pandas the tables are tried with: Debian 11's
# (tests/install/manylinux_test.sh); today's are tried too (docs/python.md).
NUMPY_MIN = "1.19"
PANDAS_MIN = "1.1.5"


def _version(text):
    """The leading numbers of a version string: "1.19.5" -> (1, 19, 5), "2.0.0rc1" -> (2, 0, 0)."""
    m = re.match(r"[0-9]+(?:\.[0-9]+)*", text)
    return tuple(int(n) for n in m.group(0).split(".")) if m else ()


def numpy_pandas():
    """(numpy, pandas), for the tables; ImportError, one line naming the
    versions needed, when either is missing or older than NUMPY_MIN and
    PANDAS_MIN."""
    try:
        import numpy
        import pandas
    except ImportError as e:
        raise ImportError("memsnap: the tables (events, sites, state_at, categories) need "
                          "numpy %s and pandas %s or later (%s): pip install 'pandas>=%s'"
                          % (NUMPY_MIN, PANDAS_MIN, e, PANDAS_MIN)) from None
    for mod, need in ((numpy, NUMPY_MIN), (pandas, PANDAS_MIN)):
        if _version(mod.__version__) < _version(need):
            raise ImportError("memsnap: the tables (events, sites, state_at, categories) need "
                              "%s %s or later (this Python has %s %s): pip install -U '%s>=%s'"
                              % (mod.__name__, need, mod.__name__, mod.__version__,
                                 mod.__name__, need))
    return numpy, pandas


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
        L.mpy_job_file.restype = vp
        L.mpy_job_file.argtypes = [c_p, ctypes.POINTER(c_int), ctypes.c_char_p, ctypes.c_size_t]
        L.mpy_job_reduce.restype = vp
        L.mpy_job_reduce.argtypes = [c_p, ctypes.c_char_p, ctypes.c_size_t]
        L.mpy_version.restype = c_p
        L.mpy_version.argtypes = []
        L.mpy_read_all.restype = vp
        L.mpy_read_all.argtypes = [c_p, ctypes.c_uint, c_p, c_int, c_int, c_p, ctypes.c_char_p,
                                   ctypes.c_size_t]
        L.mpy_result_summary.restype = c_p
        L.mpy_result_summary.argtypes = [vp, ctypes.POINTER(c_int)]
        L.mpy_set_progress.restype = None
        L.mpy_set_progress.argtypes = [PROGRESS_FN]
        L.mpy_metrics_start.restype = vp
        L.mpy_metrics_start.argtypes = [c_p, c_p, c_p, ctypes.c_char_p, ctypes.c_size_t]
        L.mpy_metrics_address.restype = c_p
        L.mpy_metrics_address.argtypes = [vp]
        L.mpy_metrics_stop.restype = None
        L.mpy_metrics_stop.argtypes = [vp]
        _lib = L
        _progress_on(L)
        return L


# ---- a progress line on a terminal (format.h "Progress") ------------------

PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64)
_progress = {"t0": None, "last": 0.0, "shown": False, "cb": None, "after": 1.0}
PROGRESS_END = (1 << 64) - 1


def _progress_report(what, done, total):
    """One report of a read: after a second of work (MEMSNAP_PROGRESS_AFTER
    seconds), a line on stderr, at most five a second, cleared at the end
    (only when stderr is a terminal: the hook is set only then)."""
    import sys
    import time
    p = _progress
    try:
        now = time.monotonic()
        if done == PROGRESS_END:
            if p["shown"]:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            p.update(t0=None, shown=False)
            return
        if p["t0"] is None:
            p["t0"], p["last"] = now, 0.0
        if now - p["t0"] < p["after"] or now - p["last"] < 0.2:
            return
        p["last"] = now
        name = (what or b"").decode(errors="replace")
        pct = " %3.0f%%" % (100.0 * done / total) if total else ""
        sys.stderr.write("\r\033[Kmemsnap: %s%s (%.0f MB)" % (name, pct, done / 1e6))
        sys.stderr.flush()
        p["shown"] = True
    except Exception:
        pass                          # a progress line never breaks a read


def _progress_on(L):
    import os
    import sys
    try:
        tty = sys.stderr.isatty() and not os.environ.get("MEMSNAP_NO_PROGRESS")
    except Exception:
        tty = False
    try:   # seconds of work before the line shows (tests: 0)
        _progress["after"] = float(os.environ.get("MEMSNAP_PROGRESS_AFTER", "1"))
    except ValueError:
        pass
    if tty:
        _progress["cb"] = PROGRESS_FN(_progress_report)   # kept: the C side holds it
        L.mpy_set_progress(_progress["cb"])


def _fs(path):
    """A path as the C library takes it (bytes, as the file system has it)."""
    import os
    return os.fsencode(path)


class Result:
    """One read of a snapshot (mpy_read): its tables, taken column by column.
    With summary_top (mpy_read_all), the same read also gives the summary's
    dict (self.summary, its exit status self.summary_rc)."""

    def __init__(self, path, want, at=None, summary_top=None, marks=False, rules=None):
        L = lib()
        err = ctypes.create_string_buffer(1280)
        a = at.encode() if at is not None else None
        self.summary, self.summary_rc = None, None
        if summary_top is None:
            h = L.mpy_read(_fs(path), want, a, err, len(err))
        else:
            h = L.mpy_read_all(_fs(path), want, a, summary_top, 1 if marks else 0,
                               _fs(rules) if rules else None, err, len(err))
        if not h:
            raise ValueError(err.value.decode(errors="replace"))
        self._L, self._h = L, h
        if summary_top is not None:
            rc = ctypes.c_int(2)
            text = L.mpy_result_summary(h, ctypes.byref(rc))
            self.summary, self.summary_rc = json.loads(text), rc.value

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
        np, _ = numpy_pandas()
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
        np, pd = numpy_pandas()
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


def _take_text(L, p):
    try:
        return ctypes.string_at(p).decode()
    finally:
        L.mpy_free_text(p)


def job_record(path):
    """The rank record of one snapshot (analyze/job.h) as JSON text;
    ValueError with the C library's line."""
    L = lib()
    err = ctypes.create_string_buffer(1280)
    rc = ctypes.c_int(2)
    p = L.mpy_job_file(_fs(path), ctypes.byref(rc), err, len(err))
    if not p:
        raise ValueError(err.value.decode(errors="replace"))
    return _take_text(L, p)


def job_reduce(records):
    """The job object (a dict) from rank records' JSON texts, in file order."""
    L = lib()
    err = ctypes.create_string_buffer(256)
    p = L.mpy_job_reduce(("[" + ",".join(records) + "]").encode(), err, len(err))
    if not p:
        raise MemoryError("memsnap: " + err.value.decode(errors="replace"))
    return json.loads(_take_text(L, p))

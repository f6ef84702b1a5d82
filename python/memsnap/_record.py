"""memsnap.record(path): records PyTorch's allocated layer in this process.

    with memsnap.record("train.msnap"):
        train_step()
    memsnap.load("train.msnap").summary()

No LD_PRELOAD: the recorder (the package's libmemsnap.so) is loaded with
ctypes, RTLD_LOCAL, so its driver hooks interpose nothing, and PyTorch's
caching allocator reports every block through the recorder's plugin,
attached to its trace tracker (recorder/inproc.c, docs/python.md).  Each
event carries the allocating thread's Python frames and the autograd node,
as under `memsnap run`.  What `memsnap run` adds and this cannot: the
driver level (reserved memory, other libraries' allocations, the driver's
OOMs), and blocks allocated before the plugin attached.

The plugin is PyTorch-build specific: when the cache has none for this
PyTorch, it is built once (`memsnap torch-setup`, about 10 s), as `memsnap
run` does.  It is attached at PyTorch's CUDA initialization when that has
not happened yet (so PyTorch's block sizes are exact), else at once.
"""
import ctypes
import os
import subprocess
import sys
import threading
import warnings

from . import paths

_lock = threading.RLock()
_rec = None                   # the recorder (ctypes.CDLL), loaded once
_torch = {"state": None, "error": None, "built": False}
_active = None                # the Recording running now

MEMSNAP_ERR_OFF, MEMSNAP_ERR_IO, MEMSNAP_ERR_BUSY = -1, -2, -3
TORCH_NOT_YET, TORCH_NOT_FOUND, TORCH_NO_PLUGIN = 1, -1, -2


class RecordError(RuntimeError):
    """memsnap.record() could not record (the reason is the message)."""


def recorder():
    """The recorder library loaded in this process for in-process recording
    (prototypes set).  RecordError when this process is recorded by
    `memsnap run` already (its recorder is preloaded) or the package has no
    recorder."""
    global _rec
    with _lock:
        if _rec is not None:
            return _rec
        try:
            ctypes.CDLL(None).memsnap_dump
        except AttributeError:
            pass
        else:
            raise RecordError("this process is recorded by memsnap run already (its recorder "
                              "is preloaded): memsnap.record() records a process that runs "
                              "without it")
        path = paths()["recorder"]
        if path is None:
            raise RecordError("this memsnap package has no recorder (built without the CUDA "
                              "toolkit)")
        L = ctypes.CDLL(path)                      # RTLD_LOCAL: nothing is interposed
        L.memsnap_record_start.restype = ctypes.c_int
        L.memsnap_record_start.argtypes = [ctypes.c_char_p]
        L.memsnap_record_stop.restype = ctypes.c_int
        L.memsnap_record_stop.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        L.memsnap_record_torch.restype = ctypes.c_int
        L.memsnap_record_torch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        L.memsnap_annotate.restype = ctypes.c_int
        L.memsnap_annotate.argtypes = [ctypes.c_char_p]
        L.memsnap_trace_block.restype = None
        L.memsnap_trace_block.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64,
                                          ctypes.c_uint64, ctypes.c_uint64]
        _rec = L
        return L


def _torch_call(L, attach):
    msg = ctypes.create_string_buffer(512)
    rc = L.memsnap_record_torch(1 if attach else 0, msg, len(msg))
    return rc, msg.value.decode(errors="replace")


def _cache_dir():
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "memsnap", "torch")
    home = os.environ.get("HOME")
    return os.path.join(home, ".cache", "memsnap", "torch") if home else None


def _build_plugin(msg):
    """Builds the plugin for this Python's PyTorch with the package's
    `memsnap torch-setup`, once per process; RecordError when it fails."""
    if _torch["built"]:
        raise RecordError(msg)
    _torch["built"] = True
    binary = paths()["memsnap"]
    cache = _cache_dir()
    # memsnap run leaves a .failed file for a build that failed: not again
    name = msg.split("(", 1)[1].split(";", 1)[0] if "(libmemsnap_torch-" in msg else ""
    if cache and name.endswith(".so"):
        failed = os.path.join(cache, name[:-3] + ".failed")
        if os.path.exists(failed):
            raise RecordError("%s; an earlier build failed: %s (delete it to try again)"
                              % (msg, failed))
    sys.stderr.write("memsnap: building the PyTorch plugin for this PyTorch (once, about "
                     "10 s) into %s\n" % (cache or "the cache"))
    sys.stderr.flush()
    r = subprocess.run([binary, "torch-setup", "--python", sys.executable],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = r.stdout.decode(errors="replace").strip().splitlines()[-3:]
        raise RecordError("%s; building it failed: %s" % (msg, " / ".join(tail)))


def _attach_now(L):
    """Attaches the plugin (PyTorch's CUDA initialized); never raises."""
    try:
        rc, msg = _torch_call(L, True)
        if rc == 0:
            _torch["state"] = "attached"
        elif rc == TORCH_NOT_YET:
            _torch["state"], _torch["error"] = None, "PyTorch's CUDA allocator is not initialized"
        else:
            _torch["state"], _torch["error"] = "failed", msg
    except Exception as e:                           # inside PyTorch's lazy init: never raise
        _torch["state"], _torch["error"] = "failed", str(e)


def _prepare_torch(L):
    """Loads the plugin (built if needed) and attaches it now, or at
    PyTorch's CUDA initialization when that has not happened yet."""
    if _torch["state"] in ("attached", "deferred"):
        return
    if _torch["state"] == "failed":
        raise RecordError(_torch["error"])
    tm = sys.modules.get("torch")
    if tm is None:
        try:
            import torch as tm
        except ImportError:
            tm = None
    rc, msg = _torch_call(L, False)
    if rc == TORCH_NO_PLUGIN:
        _build_plugin(msg)
        rc, msg = _torch_call(L, False)
    if rc == TORCH_NOT_FOUND and tm is None:
        raise RecordError("PyTorch is not importable here: memsnap.record() records PyTorch's "
                          "CUDA caching allocator (memsnap run records any CUDA program)")
    if rc < 0:
        raise RecordError(msg)
    cuda = getattr(tm, "cuda", None) if tm is not None else None
    if cuda is not None and not cuda.is_initialized():
        # at PyTorch's lazy CUDA init, right after its allocator exists and
        # before its first block: every block is seen, with its exact size
        _torch["state"] = "deferred"
        cuda._lazy_call(lambda: _attach_now(L))
        return
    _attach_now(L)
    if _torch["state"] != "attached":
        raise RecordError(_torch["error"])


def _escape(path):
    return os.fsencode(path).replace(b"%", b"%%")


class Recording:
    """One in-process recording (memsnap.record): a context manager, or
    start() and stop().  After stop(): .events, the events written, and
    .snapshot() the Snapshot of the file."""

    def __init__(self, path, torch=True, metrics=None):
        self.path = os.path.abspath(os.fspath(path))
        self.torch = torch
        self.metrics = metrics
        self.metrics_address = None   # "ADDR:PORT" while metrics are served
        self._metrics = None
        self.events = None
        self.running = False

    def __repr__(self):
        return "memsnap.Recording(%r%s)" % (self.path, ", running" if self.running else "")

    def start(self):
        global _active
        with _lock:
            L = recorder()
            if self.torch:
                _prepare_torch(L)
            if self.metrics is not None:
                self._metrics_start()
            rc = L.memsnap_record_start(_escape(self.path))
            if rc != 0:
                self._metrics_stop()
            if rc == MEMSNAP_ERR_BUSY:
                raise RecordError("a recording is running already (%s)"
                                  % (_active.path if _active else "memsnap run's"))
            if rc == MEMSNAP_ERR_OFF:
                raise RecordError("recording is off (MEMSNAP_DISABLE, or a bad MEMSNAP_* "
                                  "setting: see the line on stderr)")
            if rc != 0:
                raise RecordError("cannot create %s (see the line on stderr)" % self.path)
            self.running = True
            _active = self
        return self

    def stop(self):
        """Stops: the file is complete and closed.  Returns the events written."""
        global _active
        with _lock:
            if not self.running:
                return self.events
            n = ctypes.c_uint64()
            rc = recorder().memsnap_record_stop(ctypes.byref(n))
            self._metrics_stop()
            self.running = False
            _active = None
            self.events = n.value
            if rc != 0:
                raise RecordError("writing %s failed (see the line on stderr)" % self.path)
            if self.torch and _torch["state"] == "failed":
                warnings.warn("memsnap: PyTorch's allocator could not be recorded: %s"
                              % _torch["error"], RuntimeWarning, stacklevel=3)
        return self.events

    def _metrics_start(self):
        """Binds the metrics' port and starts their thread (a C thread of
        libmemsnap_py.so: it follows the file and serves /metrics without
        the GIL).  RecordError for a bad address or a port that is taken."""
        from ._lib import lib
        spec = str(self.metrics)
        if isinstance(self.metrics, bool) or not spec:
            raise RecordError("metrics wants a port or ADDR:PORT, not %r" % (self.metrics,))
        err = ctypes.create_string_buffer(512)
        L = lib()
        h = L.mpy_metrics_start(spec.encode(), os.fsencode(self.path),
                                os.environ.get("RANK", "").encode(), err, len(err))
        if not h:
            raise RecordError("metrics %s: %s" % (spec, err.value.decode(errors="replace")))
        self._metrics = h
        self.metrics_address = L.mpy_metrics_address(h).decode()

    def _metrics_stop(self):
        if self._metrics:
            from ._lib import lib
            lib().mpy_metrics_stop(self._metrics)
            self._metrics = None
            self.metrics_address = None

    def annotate(self, message):
        """A mark on the timeline (an nvtx_mark event with this message)."""
        recorder().memsnap_annotate(str(message).encode())

    def snapshot(self):
        from ._snapshot import Snapshot
        return Snapshot(self.path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def record(path, torch=True, metrics=None):
    """Records into path (a new .msnap file) while the with-block runs:
    PyTorch's allocated layer (every block of its CUDA caching allocator,
    with the Python frames that allocated it), without LD_PRELOAD.  The
    driver level needs `memsnap run`.  torch=False records only what calls
    the recorder's API itself (memsnap_annotate, memsnap_trace_block).
    metrics=PORT (or "ADDR:PORT"; 127.0.0.1 unless given) serves the
    recording's Prometheus metrics at http://ADDR:PORT/metrics while it runs,
    from a thread of this process of its own (the ones `memsnap run
    --metrics` serves, docs/recorder.md); .metrics_address says where.
    RecordError when it cannot record (no PyTorch with CUDA, no plugin and
    no way to build it, a recording running already, a metrics port that
    is taken)."""
    return Recording(path, torch=torch, metrics=metrics)


def torch_attached():
    """Whether PyTorch's allocator reports to the recorder in this process
    (the plugin attached), "deferred" (at PyTorch's CUDA initialization),
    or False."""
    s = _torch["state"]
    return True if s == "attached" else "deferred" if s == "deferred" else False

"""memsnap's pytest plugin (the `pytest11` entry point `memsnap`): GPU memory
limits for tests that use PyTorch, measured by recording the test's own
allocations in-process (memsnap.record, docs/python.md).

    @pytest.mark.limit_gpu_memory("2 GiB")
    def test_forward(): ...      # fails when the peak of its own PyTorch
                                 # allocations passes 2 GiB

    @pytest.mark.limit_gpu_leaks("1 MiB", warmup=1)
    def test_step(): ...         # run once unrecorded (warmup=1), then once
                                 # recorded: fails when more than 1 MiB that
                                 # the recorded run allocated is still
                                 # allocated after it

    pytest --memsnap-dir DIR     # keeps the snapshot of each failing test
                                 # that was recorded (DIR/<test>.msnap)

What counts: PyTorch's allocated layer (its caching allocator's blocks, the
figure torch.cuda.memory_allocated() counts), allocated during the recorded
run of the test; what was allocated before it is not the test's.  A
failure names the sites that held the most at the moment that matters (the
peak, or the end for leaks) with their Python lines.

Leaks and the warm-up: PyTorch allocates once per process and keeps (cuBLAS
workspaces, lazily built kernels' buffers, a first call's caches), and a
test that runs first pays for them.  So limit_gpu_leaks runs the test body
`warmup` times (default 1) unrecorded, with the same fixture values, and
then once recorded; what that last run allocated and did not free (after
gc.collect()) is its leak.  A test whose warm-up fails is reported by its
recorded run.

Without PyTorch, without a CUDA device, or under `memsnap run` (which
records the process itself), the marked tests are skipped with the reason.
A marker with a bad argument ("lots" for a size, a negative warm-up) fails
its own test, named by file:line, wherever it runs; the others run.
"""
import gc
import os
import re
import sys
import tempfile

import pytest

from ._sizes import format_size, parse_size

MARKERS = ("limit_gpu_memory", "limit_gpu_leaks")
TOP = 5
# Record PyTorch's allocator (the plugin).  Off only in memsnap's own tests
# of this plugin (tests/python/test_pytest_plugin.py), whose stand-in
# allocator reports its blocks through the recorder's API itself.
_TORCH = True


def pytest_addoption(parser):
    g = parser.getgroup("memsnap", "GPU memory limits (memsnap)")
    g.addoption("--memsnap-dir", metavar="DIR", default=None,
                help="keep the memsnap snapshot of each failing test that was recorded "
                     "(tests marked limit_gpu_memory or limit_gpu_leaks) in DIR")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_gpu_memory(limit): fail when the peak of the test's own PyTorch "
                   "GPU allocations passes limit (\"2 GiB\", \"512MB\" or bytes) (memsnap)")
    config.addinivalue_line(
        "markers", "limit_gpu_leaks(limit, warmup=1): run the test warmup times, then once "
                   "recorded; fail when more than limit of what that run allocated on the "
                   "GPU through PyTorch is still allocated after it (memsnap)")


def _marks(item):
    mem = item.get_closest_marker("limit_gpu_memory")
    leak = item.get_closest_marker("limit_gpu_leaks")
    return mem, leak


def _limit(mark, name):
    args = list(mark.args)
    limit = mark.kwargs.get("limit", args[0] if args else None)
    if limit is None:
        raise pytest.UsageError("%s needs a limit, e.g. @pytest.mark.%s(\"1 GiB\")" % (name, name))
    try:
        return parse_size(limit)
    except ValueError as e:
        raise pytest.UsageError("%s: %s" % (name, e))


def _warmup(mark):
    w = mark.kwargs.get("warmup", 1)
    if isinstance(w, bool) or not isinstance(w, int) or w < 0:
        raise pytest.UsageError("limit_gpu_leaks: warmup is a count of runs (0 or more), "
                                "got %r" % (w,))
    return w


def _check_marks(item):
    """The markers' arguments, checked wherever the tests run (a bad limit
    fails its test even on a machine where the limits are skipped): None
    when they are good, else what is wrong, naming the test by file:line
    (one bad marker fails its own test, not the session)."""
    mem, leak = _marks(item)
    try:
        if mem:
            _limit(mem, "limit_gpu_memory")
        if leak:
            _limit(leak, "limit_gpu_leaks")
            _warmup(leak)
    except pytest.UsageError as e:
        path, line, _ = item.location
        return "memsnap: %s:%s: %s: %s" % (path, line + 1 if line is not None else "?",
                                          item.name, e)
    return None


_why_not = {}                 # cached reason the markers cannot be honoured here


def _unavailable():
    """None when the markers can be measured here, else the reason."""
    if "reason" in _why_not:
        return _why_not["reason"]
    reason = None
    try:
        import ctypes
        ctypes.CDLL(None).memsnap_dump
        reason = ("this process is recorded by memsnap run (its recorder is preloaded); "
                  "the limits need a process of their own")
    except AttributeError:
        pass
    if reason is None:
        from . import paths
        if paths()["recorder"] is None:
            reason = "this memsnap package has no recorder (built without the CUDA toolkit)"
    if reason is None:
        try:
            import torch
        except ImportError:
            torch = None
            reason = "PyTorch is not installed (the limits measure PyTorch's GPU allocations)"
        if torch is not None:
            try:
                ok = torch.cuda.is_available()
            except Exception as e:                 # a broken driver: say so
                ok, reason = False, "PyTorch cannot use CUDA here (%s)" % e
            if not ok and reason is None:
                reason = "no CUDA device for PyTorch here (torch.cuda.is_available() is False)"
    _why_not["reason"] = reason
    return reason


def pytest_collection_modifyitems(session, config, items):
    marked = []
    for i in items:
        if not any(_marks(i)):
            continue
        bad = _check_marks(i)
        if bad:
            # the test fails in its call, unrun; the session goes on
            i._memsnap_bad = bad
            i.runtest = lambda bad=bad: pytest.fail(bad, pytrace=False)
        else:
            marked.append(i)
    if not marked:
        return
    reason = _unavailable()
    if reason:                       # skipped where the test is, with the reason
        for i in marked:
            i.add_marker(pytest.mark.skip(reason="memsnap: %s" % reason))
        return
    if not _TORCH:
        return
    # Attach PyTorch's tracker before the first test, so that it is there
    # at PyTorch's CUDA initialization: every block's size is then exact.
    from . import _record
    try:
        _record._prepare_torch(_record.recorder())
    except _record.RecordError as e:
        _why_not["error"] = str(e)


def pytest_runtest_setup(item):
    mem, leak = _marks(item)
    if not (mem or leak):
        return
    if getattr(item, "_memsnap_bad", None):
        return                       # it fails in its call (collection)
    reason = _unavailable()
    if reason:
        pytest.skip("memsnap: %s" % reason)
    if "error" in _why_not:
        pytest.fail("memsnap cannot record PyTorch's allocator here: %s" % _why_not["error"],
                    pytrace=False)


def _snapshot_path(item):
    d = item.config.getoption("memsnap_dir")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[:180] + ".msnap"
    if d:
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, name), True
    fd, p = tempfile.mkstemp(prefix="memsnap-", suffix=".msnap")
    os.close(fd)
    return p, False


def _sync():
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:
        pass


def _top_sites(snap, at, what):
    """Lines naming the sites that held the most of the allocated layer at
    moment at ("peak" or "end"), with the innermost frames of the first."""
    df = snap.state_at(at)
    df = df[(df["layer"] == "allocated") & ~df["pre_window"]]
    if not len(df):
        return []
    g = df.groupby("label", observed=True)["size"].agg(["sum", "count"])
    g = g.sort_values("sum", ascending=False).head(TOP)
    lines = ["top sites %s:" % what]
    for label, size, count in zip(g.index, g["sum"], g["count"]):
        lines.append("  %10s in %4d block%s  %s" % (format_size(int(size)), int(count),
                                                    "" if count == 1 else "s", label))
    s = snap.sites("allocated")
    hit = s[s["label"] == g.index[0]]
    frames = list(hit["frames"].iloc[0]) if len(hit) else []
    py = [f for f in frames if ".py:" in f] or frames
    if py:
        lines.append("  the first, as allocated:")
        lines.extend("    " + f for f in py[:6])
    return lines


def _judge(item, path, mem_limit, leak_limit, warmup):
    """The failure message of a recorded test, or None."""
    from ._snapshot import Snapshot
    snap = Snapshot(path)
    summ = snap.summary(top=0)
    alloc = summ["process"]["allocated"] or {"peak": 0, "final": 0}
    msgs = []
    if mem_limit is not None and alloc["peak"] > mem_limit:
        msgs.append("memsnap: the test's PyTorch GPU allocations peaked at %s, over the %s "
                    "limit (limit_gpu_memory)" % (format_size(alloc["peak"]),
                                                  format_size(mem_limit)))
        msgs.extend(_top_sites(snap, "peak", "at the peak"))
    if leak_limit is not None and alloc["final"] > leak_limit:
        msgs.append("memsnap: %s that the test allocated through PyTorch is still allocated "
                    "after it, over the %s limit (limit_gpu_leaks, after %d warm-up run%s)"
                    % (format_size(alloc["final"]), format_size(leak_limit), warmup,
                       "" if warmup == 1 else "s"))
        msgs.extend(_top_sites(snap, "end", "still allocated at the end"))
    return "\n".join(msgs) if msgs else None


def _call_before(item):
    """Before the test's call: the warm-up runs, then the recording started.
    The state for _call_after, or None when the test is not measured."""
    mem, leak = _marks(item)
    if not (mem or leak) or _unavailable() or "error" in _why_not or \
            getattr(item, "_memsnap_bad", None):
        return None
    from . import _record
    st = {"mem": _limit(mem, "limit_gpu_memory") if mem else None,
          "leak": _limit(leak, "limit_gpu_leaks") if leak else None,
          "warmup": _warmup(leak) if leak else 0, "warm_ok": True}
    for _ in range(st["warmup"]):
        try:
            item.runtest()
        except BaseException:
            st["warm_ok"] = False    # the recorded run reports the test's own failure
            break
    gc.collect()
    _sync()
    st["path"], st["keep"] = _snapshot_path(item)
    st["rec"] = _record.Recording(st["path"], torch=_TORCH)
    st["rec"].start()
    return st


def _call_after(item, st, failed):
    """After the call (failed: it raised): the recording stopped and judged."""
    if st["leak"] is not None:
        gc.collect()                 # what only a reference cycle still holds
    _sync()
    st["rec"].stop()
    msg = None
    if not failed and st["warm_ok"]:
        msg = _judge(item, st["path"], st["mem"], st["leak"], st["warmup"])
    item._memsnap = {"message": msg, "path": st["path"],
                     "keep": st["keep"] and (failed or msg is not None)}
    if not item._memsnap["keep"]:
        try:
            os.unlink(st["path"])
        except OSError:
            pass


def _adjust_report(item, call, rep):
    info = getattr(item, "_memsnap", None)
    if info is None or call.when != "call":
        return
    if info["message"] and rep.passed:
        rep.outcome = "failed"
        rep.longrepr = info["message"] + (
            "\nsnapshot: %s" % info["path"] if info["keep"] else
            "\n(pytest --memsnap-dir DIR keeps the snapshot)")
    elif info["keep"]:
        rep.sections.append(("memsnap", "snapshot: %s" % info["path"]))


def _new_style_wrappers():
    """pluggy 1.2 and later (pytest 8, 9) take wrapper=True; Debian 12's
    pluggy 1.0 (pytest 7.2) only the older hookwrapper=True."""
    try:
        import inspect
        return "wrapper" in inspect.signature(pytest.hookimpl.__call__).parameters
    except (TypeError, ValueError):
        return False


if _new_style_wrappers():
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(item):
        st = _call_before(item)
        if st is None:
            return (yield)
        failed = True
        try:
            res = yield
            failed = False
            return res
        finally:
            _call_after(item, st, failed)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item, call):
        rep = yield
        _adjust_report(item, call, rep)
        return rep
else:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        st = _call_before(item)
        if st is None:
            yield
            return
        outcome = None
        try:
            outcome = yield
        finally:
            _call_after(item, st, outcome is None or outcome.excinfo is not None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        _adjust_report(item, call, outcome.get_result())

"""memsnap's pytest plugin: the markers' skips without PyTorch, and their
verdicts and messages with a stand-in allocator.

The stand-in reports its blocks through the recorder's own API
(memsnap_trace_block: the allocated layer, as PyTorch's plugin does
through memsnap_trace_torch2), in-process, with the plugin's PyTorch part
switched off (pytest_plugin._TORCH): everything else is the plugin as it
runs with PyTorch - the recording around the test, the warm-up runs, the
verdict from the snapshot, the failure message naming the sites with their
Python lines, --memsnap-dir.  With PyTorch on the GPU machine:
tests/gpu/python_api_gpu.py."""
import os

import pytest

import memsnap


def plugin_args():
    """-p memsnap.pytest_plugin unless the installed package's pytest11
    entry point loads it already."""
    try:
        from importlib.metadata import entry_points
        eps = entry_points()
        group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
        if any(e.name == "memsnap" for e in group):
            return []
    except Exception:
        pass
    return ["-p", "memsnap.pytest_plugin"]


def torch_with_cuda():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


MARKED = '''
import pytest

@pytest.mark.limit_gpu_memory("2 GiB")
def test_memory():
    pass

@pytest.mark.limit_gpu_leaks("1 MiB", warmup=2)
def test_leaks():
    pass

def test_plain():
    pass
'''


def test_markers_skip_without_pytorch(pytester):
    if torch_with_cuda():
        pytest.skip("PyTorch with CUDA is here: the markers measure (tests/gpu)")
    pytester.makepyfile(test_marked=MARKED)
    r = pytester.runpytest_subprocess(*plugin_args(), "-rs")
    r.assert_outcomes(passed=1, skipped=2)
    why = ("this memsnap package has no recorder (built without the CUDA toolkit)"
           if not memsnap.paths()["recorder"] else
           "PyTorch is not installed (the limits measure PyTorch's GPU allocations)"
           if not _torch_importable() else
           "no CUDA device for PyTorch here (torch.cuda.is_available() is False)")
    r.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_marked.py:*: memsnap: " + why,
                            "SKIPPED [[]1[]] test_marked.py:*: memsnap: " + why])


def _torch_importable():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def test_markers_are_registered(pytester):
    pytester.makepyfile(test_marked=MARKED)
    r = pytester.runpytest_subprocess(*plugin_args(), "--strict-markers", "--markers")
    r.stdout.fnmatch_lines(["*limit_gpu_memory(limit)*", "*limit_gpu_leaks(limit, warmup=1)*"])
    r = pytester.runpytest_subprocess(*plugin_args(), "--help")
    r.stdout.fnmatch_lines(["*--memsnap-dir=DIR*"])


STAND_IN = '''
import os, sys
import memsnap.pytest_plugin as plugin
plugin._TORCH = False              # the stand-in below reports its own blocks
plugin._why_not["reason"] = None   # so the markers measure here
# the stand-in allocator is an installed package, as torch is
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "site-packages"))
'''

ALLOCATOR = '''
"""The stand-in allocator: reports each block as PyTorch's plugin would."""
from memsnap import _record

L = _record.recorder()
_next = [1 << 40]


def alloc(n):
    a = _next[0]
    _next[0] += n + (1 << 20)
    L.memsnap_trace_block(1, 0, a, n, 0)
    return a


def free(a):
    L.memsnap_trace_block(2, 0, a, 0, 0)
'''

TESTS = '''
import pytest
from standin_alloc import alloc, free

kept = []
cache = []


def make_activations():
    return alloc(3 << 30)


def make_cache_once():
    if not cache:                  # the first call only, like a lazy workspace
        cache.append(alloc(64 << 20))


def remember(n):
    kept.append(alloc(n))


@pytest.mark.limit_gpu_memory("2 GiB")
def test_over_the_limit():
    small = alloc(100 << 20)
    a = make_activations()
    free(a)
    free(small)


@pytest.mark.limit_gpu_memory("2 GiB")
def test_under_the_limit():
    a = alloc(1 << 30)
    free(a)


@pytest.mark.limit_gpu_leaks("1 MiB", warmup=1)
def test_leaks():
    remember(4 << 20)


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_warmup_is_not_a_leak():
    make_cache_once()


@pytest.mark.limit_gpu_leaks(limit="10 MiB", warmup=0)
def test_small_leak_under_limit():
    remember(1 << 20)


@pytest.mark.limit_gpu_memory("2 GiB")
def test_fails_by_itself():
    a = alloc(1 << 20)
    assert a == 0
'''


def test_limits_with_a_stand_in_allocator(pytester, tmp_path, monkeypatch):
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder in this package")
    pytester.makeconftest(STAND_IN)
    pytester.mkdir("site-packages")
    pytester.path.joinpath("site-packages", "standin_alloc.py").write_text(ALLOCATOR)
    pytester.makepyfile(test_limits=TESTS)
    keep = tmp_path / "snaps"
    # PyTorch's blocks carry no native frames on a thread with Python frames
    # (MEMSNAP_TORCH_NATIVE_DEPTH=auto); the stand-in's, through ctypes, do
    # but for this
    monkeypatch.setenv("MEMSNAP_PYTHON_NATIVE_DEPTH", "0")
    r = pytester.runpytest_subprocess(*plugin_args(), "--memsnap-dir", str(keep), "-rf")
    r.assert_outcomes(passed=3, failed=3)
    out = r.stdout.str()

    def line(text):                        # the line of test_limits.py holding text
        return TESTS.lstrip("\n").splitlines().index(text) + 1

    big = line("    return alloc(3 << 30)")
    small = line("    small = alloc(100 << 20)")
    kept = line("    kept.append(alloc(n))")
    # the peak, over the limit, names the sites that held it by the test's
    # lines (a label reads "make_activations (test_limits.py:N)", or with
    # the installed package's frame first, "alloc (...) <- test_limits.py:N")
    r.stdout.fnmatch_lines([
        "*memsnap: the test's PyTorch GPU allocations peaked at 3.10 GiB, over the "
        "2.00 GiB limit (limit_gpu_memory)*",
        "*top sites at the peak:*",
        "*3.00 GiB in    1 block  *test_limits.py:%d*" % big,
        "*100.00 MiB in    1 block  *test_limits.py:%d*" % small,
    ])
    r.stdout.fnmatch_lines([
        "*memsnap: 4.00 MiB that the test allocated through PyTorch is still allocated after "
        "it, over the 1.00 MiB limit (limit_gpu_leaks, after 1 warm-up run)*",
        "*top sites still allocated at the end:*",
        "*4.00 MiB in    1 block  *test_limits.py:%d*" % kept,
        "*the first, as allocated:*",
        "*alloc (*site-packages/standin_alloc.py:*)",
        "*remember (*test_limits.py:%d)" % kept,
        "*test_leaks (*test_limits.py:*)",
    ])
    assert "test_warmup_is_not_a_leak" not in "".join(
        l for l in out.splitlines() if l.startswith("FAILED"))
    # --memsnap-dir keeps the failing tests' snapshots, and only theirs
    names = sorted(os.listdir(keep))
    want = ["test_limits.py_test_fails_by_itself.msnap", "test_limits.py_test_leaks.msnap",
            "test_limits.py_test_over_the_limit.msnap"]
    # named by the test's id (relative to pytest's rootdir)
    assert len(names) == 3 and all(n.endswith(w) for n, w in zip(names, want)), names
    s = memsnap.load(keep / names[2])
    assert s.summary()["process"]["allocated"]["peak"] == (3 << 30) + (100 << 20)
    assert s.sites()["label"].iloc[0].endswith("test_limits.py:%d)" % big) or \
        "test_limits.py:%d" % big in s.sites()["label"].iloc[0]
    r.stdout.fnmatch_lines(["*snapshot: *test_limits.py_test_over_the_limit.msnap*"])


def test_bad_limit_fails_its_test(pytester):
    """One bad marker fails its own test, named by file:line, and the
    session goes on (issue 35 item 12: it stopped the whole session)."""
    pytester.makeconftest(STAND_IN)
    pytester.makepyfile(test_bad='''
import pytest

def test_before():
    pass

@pytest.mark.limit_gpu_memory("lots")
def test_x():
    pass

def test_after():
    pass
''')
    r = pytester.runpytest_subprocess(*plugin_args(), "-rf")
    r.assert_outcomes(passed=2, failed=1)
    # (the path from pytest's rootdir: a basetemp inside a checkout is
    # named from the checkout's root)
    r.stdout.fnmatch_lines(["*memsnap: *test_bad.py:6: test_x: limit_gpu_memory: not a size: "
                            "'lots'*", "FAILED test_bad.py::test_x*"])


@pytest.mark.parametrize("mark, says", [
    ('limit_gpu_memory("two gigs")', "*test_bad.py:3: test_x: limit_gpu_memory: not a size: 'two gigs'*"),
    ("limit_gpu_memory()", "*test_bad.py:3: test_x: limit_gpu_memory needs a limit*"),
    ('limit_gpu_leaks("1 MiB", warmup=-1)', "*test_bad.py:3: test_x: limit_gpu_leaks: warmup is a count of runs (0 or more), got -1*"),
])
def test_bad_marker_fails_where_the_limits_are_skipped(pytester, mark, says):
    """Without the stand-in: where the limits themselves would be skipped (no
    PyTorch, no GPU), a bad marker still fails its test, and the next test
    runs."""
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.%s
def test_x():
    pass

def test_y():
    pass
''' % mark)
    r = pytester.runpytest_subprocess(*plugin_args(), "-rf")
    r.assert_outcomes(passed=1, failed=1)
    r.stdout.fnmatch_lines([says])

"""memsnap.record(): in-process recording, without PyTorch.

PyTorch is stood in for by the recorder tests' fake libc10_cuda.so and fake
plugin (tests/torch: a caching allocator on the simulated device that
reports its blocks through the plugin's tracker, the same entry points as
torch/memsnap_torch.cpp), found through MEMSNAP_FAKE_C10 and
MEMSNAP_TORCH_PLUGIN_DIR (ctest python.record sets them); without them
only the checks that need no allocator run.  The real thing runs on the
GPU machine: tests/gpu/python_api_gpu.sh."""
import ctypes
import os
import subprocess
import sys

import pytest

import memsnap
from memsnap import _record

FAKE_C10 = os.environ.get("MEMSNAP_FAKE_C10")
needs_fake = pytest.mark.skipif(not FAKE_C10 or not memsnap.paths()["recorder"],
                                reason="no fake libc10_cuda.so (MEMSNAP_FAKE_C10) or no recorder")


def python(code, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=e, **kw)


_c10 = None


def fake_torch():
    """The simulated device with a context, and the fake allocator."""
    global _c10
    if _c10 is None:
        cuda = ctypes.CDLL(os.path.join(memsnap.paths()["simdev_dir"], "libcuda.so.1"),
                           ctypes.RTLD_GLOBAL)
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        assert cuda.cuInit(0) == 0
        assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cuda.cuCtxSetCurrent(ctx) == 0
        _c10 = ctypes.CDLL(FAKE_C10)
        _c10.fake_c10_malloc.restype = ctypes.c_uint64
        _c10.fake_c10_malloc.argtypes = [ctypes.c_size_t]
        _c10.fake_c10_free.argtypes = [ctypes.c_uint64, ctypes.c_size_t]
        _c10.fake_c10_getNewWorkspace.restype = ctypes.c_uint64
        _c10.fake_c10_getNewWorkspace.argtypes = [ctypes.c_size_t]
        _c10.fake_c10_getCurrentCUDABlasHandle.restype = ctypes.c_uint64
        _c10.fake_c10_getCurrentCUDABlasHandle.argtypes = [ctypes.c_size_t]
    return _c10


def line_of(text):
    with open(__file__) as f:
        return [i for i, l in enumerate(f, 1) if text in l and "line_of" not in l][0]


def make_weights(c10, n):
    return [c10.fake_c10_malloc(1 << 20) for _ in range(n)]


def make_activations(c10):
    return c10.fake_c10_malloc(8 << 20)


@needs_fake
def test_records_blocks_with_python_lines(tmp_path):
    c10 = fake_torch()
    seen = []
    for i in range(3):                      # one after another in one process
        path = tmp_path / ("step%%%d.msnap" % i)    # a % in the name stays a %
        with memsnap.record(path) as r:
            w = make_weights(c10, 2 + i)
            a = make_activations(c10)
            c10.fake_c10_free(a, 8 << 20)
            r.annotate("step %d" % i)
        assert os.path.exists(str(path)), os.listdir(tmp_path)
        s = memsnap.load(path)
        summ = s.summary()
        assert summ["trailer"]["reason"] == "exit" and summ["trailer"]["events"] == r.events
        # only this recording's blocks: what earlier ones left live is not there
        assert summ["process"]["allocated"]["final"] == (2 + i) << 20
        assert summ["process"]["allocated"]["peak"] == (10 + i) << 20
        assert summ["events"]["by_api"]["torch"] == r.events - 1
        assert summ["nvtx_marks"] == 1
        assert summ["header"]["devices"][0]["name"] == "memsnap simulated device"
        sites = s.sites("allocated")
        labels = list(sites["label"])
        # named by the allocating line of this file (however the label reads)
        assert "test_record.py:%d" % line_of("fake_c10_malloc(8 << 20)") in labels[0], labels
        assert any("test_record.py:%d" % line_of("fake_c10_malloc(1 << 20)") in l
                   for l in labels), labels
        frames = sites["frames"].iloc[0]
        assert any("test_records_blocks_with_python_lines" in f for f in frames), frames
        ev = s.events()
        assert int(ev["t_ns"].iloc[0]) < 10**9     # times count from this recording's start
        seen.append(summ["header"]["t0_unix_ns"])
        for p in w:
            c10.fake_c10_free(p, 1 << 20)          # outside any recording
    assert seen == sorted(seen) and len(set(seen)) == 3
    assert _record.torch_attached() is True


@needs_fake
def test_a_cublas_workspace_is_a_workspace(tmp_path):
    """A block of cuBLAS's workspace size (32 MiB on Hopper) made from
    Python keeps its native frames, so the rules see getNewWorkspace: a
    workspace, not the parameters or gradients it was counted as on the
    H200; a model's own block of that size and one of another size stay the
    model's (named by this file's line)."""
    c10 = fake_torch()
    path = tmp_path / "ws.msnap"
    with memsnap.record(path):
        ws = c10.fake_c10_getNewWorkspace(32 << 20)
        mine = c10.fake_c10_malloc(32 << 20)
        other = c10.fake_c10_malloc(3 << 20)
    s = memsnap.load(path)
    cats = s.summary()["categories"]
    by = {i["category"]: i["peak"] for d in cats for i in d["items"]}
    assert by.get("workspaces") == 32 << 20, cats
    sites = s.sites("allocated")
    labels = list(sites["label"])
    assert any("test_record.py:%d" % line_of("mine = c10.fake_c10_malloc(32 << 20)") in l
               for l in labels), labels
    assert any("test_record.py:%d" % line_of("other = c10.fake_c10_malloc(3 << 20)") in l
               for l in labels), labels
    for p, n in ((ws, 32 << 20), (mine, 32 << 20), (other, 3 << 20)):
        c10.fake_c10_free(p, n)


@needs_fake
def test_a_workspace_made_inside_the_handle_getter_is_a_workspace(tmp_path):
    """Where getNewWorkspace is inlined into getCurrentCUDABlasHandle (a
    release libtorch_cuda), the handle getter is the frame the rules see:
    the 32 MiB that the H200's serving engine counted as parameters and
    its LoRA run as gradients is a workspace; a model's block beside it is
    not."""
    c10 = fake_torch()
    path = tmp_path / "ws2.msnap"
    with memsnap.record(path):
        ws = c10.fake_c10_getCurrentCUDABlasHandle(32 << 20)
        mine = c10.fake_c10_malloc(32 << 20)
    s = memsnap.load(path)
    cats = s.summary()["categories"]
    by = {i["category"]: i["peak"] for d in cats for i in d["items"]}
    assert by.get("workspaces") == 32 << 20, cats
    assert sum(by.values()) == 64 << 20, cats
    for p in (ws, mine):
        c10.fake_c10_free(p, 32 << 20)


@needs_fake
def test_one_recording_at_a_time(tmp_path):
    fake_torch()
    with memsnap.record(tmp_path / "a.msnap"):
        with pytest.raises(_record.RecordError, match="running already"):
            memsnap.record(tmp_path / "b.msnap").start()
    assert memsnap.record(tmp_path / "c.msnap").stop() is None     # never started
    with pytest.raises(_record.RecordError, match="cannot create"):
        memsnap.record(tmp_path / "no" / "such" / "dir.msnap").start()
    with memsnap.record(tmp_path / "d.msnap") as r:            # and recording goes on
        pass
    assert r.events == 0 and memsnap.load(r.path).summary()["trailer"]["events"] == 0


def test_without_pytorch_it_says_so(tmp_path):
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder in this package")
    r = python("import memsnap\nwith memsnap.record(%r): pass" % str(tmp_path / "x.msnap"),
               env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                    "MEMSNAP_TORCH_PLUGIN_DIR": ""})
    assert r.returncode == 1
    assert b"RecordError: PyTorch is not importable here" in r.stderr, r.stderr
    # torch=False: only what calls the recorder's API
    code = ("import memsnap\nfrom memsnap import _record\n"
            "with memsnap.record(%r, torch=False) as r:\n"
            "    _record.recorder().memsnap_trace_block(1, 0, 0x1000, 512, 0)\n"
            "print(r.events)") % str(tmp_path / "y.msnap")
    r = python(code)
    assert r.returncode == 0 and r.stdout.strip() == b"1", r.stderr
    assert memsnap.load(tmp_path / "y.msnap").summary()["events"]["by_action"] == \
        {"block_alloc": 1}


def test_under_memsnap_run_it_refuses(tmp_path):
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder in this package")
    code = ("import memsnap\ntry:\n    memsnap.record(%r, torch=False).start()\n"
            "except memsnap._record.RecordError as e:\n    print(e)\n") % str(tmp_path / "x.msnap")
    r = subprocess.run([memsnap.paths()["memsnap"], "run", "--sim-device", "1G", "-q", "-o",
                        str(tmp_path / "run.msnap"), "--", sys.executable, "-c", code],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    assert b"recorded by memsnap run already" in r.stdout, r.stdout
    assert not os.path.exists(tmp_path / "x.msnap")


def test_disabled_and_exit(tmp_path):
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder in this package")
    code = ("import memsnap\ntry:\n    memsnap.record(%r, torch=False).start()\n"
            "except memsnap._record.RecordError as e:\n    print(e)\n") % str(tmp_path / "x.msnap")
    r = python(code, env={"MEMSNAP_DISABLE": "1"})
    assert b"recording is off" in r.stdout, (r.stdout, r.stderr)
    # a recording still running at exit is closed by the exit handler
    code = ("import memsnap\nfrom memsnap import _record\n"
            "memsnap.record(%r, torch=False).start()\n"
            "_record.recorder().memsnap_trace_block(1, 0, 0x1000, 512, 0)\n") % str(
                tmp_path / "z.msnap")
    r = python(code)
    assert r.returncode == 0, r.stderr
    s = memsnap.load(tmp_path / "z.msnap").summary()
    assert s["trailer"]["reason"] == "exit" and s["events"]["total"] == 1
    assert s["process"]["allocated"]["final"] == 512


def test_a_forked_child_records_nothing(tmp_path):
    """An in-process recording belongs to the process that started it: a
    child forked meanwhile (a DataLoader worker) writes nothing, and the
    parent's file stays whole."""
    if not memsnap.paths()["recorder"]:
        pytest.skip("no recorder in this package")
    if b"libasan" in subprocess.run(["ldd", memsnap.paths()["recorder"]],
                                    stdout=subprocess.PIPE).stdout:
        # as recorder.fork in scripts/test.sh --sanitize: GCC 12's ASan does
        # not take its allocator lock around fork, and a child can hang
        pytest.skip("an AddressSanitizer build: the fork case runs in the normal pass")
    code = ("import memsnap, os\nfrom memsnap import _record\n"
            "with memsnap.record(%r, torch=False):\n"
            "    L = _record.recorder()\n"
            "    L.memsnap_trace_block(1, 0, 0x1000, 512, 0)\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        L.memsnap_trace_block(1, 0, 0x2000, 512, 0)\n"
            "        os._exit(0)\n"
            "    os.waitpid(pid, 0)\n"
            "    L.memsnap_trace_block(1, 0, 0x3000, 512, 0)\n") % str(tmp_path / "f.msnap")
    r = python(code, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["f.msnap"]
    s = memsnap.load(tmp_path / "f.msnap").summary()
    assert s["events"]["total"] == 2 and s["trailer"]["reason"] == "exit"

"""memsnap.load(): the Python API over the C analysis library agrees with
the memsnap command on every checked-in snapshot (issue 24's check: the
API's figures equal the CLI's)."""
import json
import os

import numpy as np
import pandas as pd
import pytest

import memsnap
from conftest import cli, fixture

GOOD = ["tests/cli/data/basic.msnap", "tests/cli/data/blocks.msnap",
        "tests/cli/data/oom.msnap", "tests/cli/data/rank0.msnap",
        "tests/cli/data/reconcile-ring.msnap", "tests/cli/data/reconcile.msnap",
        "tests/cli/data/truncated.msnap", "tests/cli/golden/actions.msnap",
        "tests/cli/golden/expandable.msnap", "tests/cli/golden/three.msnap",
        "tests/interop/data/frag.msnap", "tests/interop/data/roundtrip.msnap",
        "tests/interop/data/torch_alloc/tr_default.msnap",
        "tests/interop/data/torch_alloc/tr_expandable_segments_True.msnap",
        "tests/format/corpus/all-types.msnap.zst", "tests/format/corpus/cut-last-line.msnap",
        "tests/format/corpus/unknowns.msnap",
        # kept H200 recordings of PyTorch programs (tests/viz/data/h200/trim.py)
        "tests/viz/data/h200/train-llama.msnap.zst", "tests/viz/data/h200/generate-llama.msnap.zst"]
BAD = ["tests/cli/data/badline.msnap", "tests/cli/data/blank.msnap",
       "tests/cli/data/empty.msnap", "tests/cli/data/future.msnap",
       "tests/cli/data/garbage.msnap", "tests/format/corpus/cut-mid-frame.msnap.zst"]
LAYERS = ("reserved", "allocated", "pinned")


def cli_json(path, *more):
    rc, out, err = cli("summary", "--json", path, *more)
    return json.loads(out), rc


@pytest.mark.parametrize("rel", GOOD)
def test_summary_is_the_cli_json(rel):
    path = fixture(rel)
    s = memsnap.load(path)
    assert s.summary() == cli_json(path)[0]
    assert s.summary(top=3, marks=True) == cli_json(path, "--top", "3", "--marks")[0]


@pytest.mark.parametrize("rel", GOOD)
def test_events_count_and_kinds(rel):
    path = fixture(rel)
    s = memsnap.load(path)
    summ = s.summary()
    ev = s.events()
    assert len(ev) == summ["events"]["total"]
    assert list(ev.columns[:13]) == ["action", "t_ns", "device", "addr", "size", "stream",
                                     "stack", "api", "tid", "aux", "aux2", "result", "seq"]
    assert str(ev["action"].dtype) == "category" and str(ev["api"].dtype) == "category"
    assert ev["t_ns"].dtype == np.uint64 and ev["device"].dtype == np.int16
    by_action = {k: int(v) for k, v in ev["action"].value_counts().items() if v}
    assert by_action == summ["events"]["by_action"]
    by_api = {k: int(v) for k, v in ev["api"].value_counts().items() if v}
    assert by_api == summ["events"]["by_api"]
    if len(ev):
        # the levels after each event: their highest are the summary's peaks
        # (unless counters lines, which ring files fold in, say more)
        assert int(ev["reserved"].max()) <= summ["process"]["reserved"]["peak"]
        assert int(ev["reserved"].iloc[-1]) == summ["process"]["reserved"]["final"]
        if summ["allocated_seen"]:
            assert int(ev["allocated"].max()) <= summ["process"]["allocated"]["peak"]
            assert int(ev["allocated"].iloc[-1]) == summ["process"]["allocated"]["final"]


@pytest.mark.parametrize("rel", GOOD)
def test_sites_are_the_top_sites(rel):
    path = fixture(rel)
    s = memsnap.load(path)
    n = 1000
    top = s.summary(top=n)["top_sites"]
    for layer in LAYERS:
        df = s.sites(layer)
        want = top[layer]
        if want is None:                       # no blocks: the allocated layer
            assert layer == "allocated" and len(df) == 0
            continue
        assert len(df) == len(want)
        rows = df.to_dict("records")
        for got, w in zip(rows, want):
            assert got["label"] == w["label"]
            assert got["stack"] == w["stack"] and got["kind"] == w["kind"]
            assert got["device"] == w["device"]
            for k, kw in (("peak", "peak"), ("peak_t_ns", "peak_t_ns"), ("count", "count"),
                          ("bytes", "bytes_total"), ("live_at_end", "live_at_end"),
                          ("live_count_at_end", "live_count_at_end")):
                assert got[k] == w[kw], (layer, k)
            assert list(got["frames"]) == w["frames"]
    # and the summary's default top 10 is the head of the table
    default = s.summary()["top_sites"]
    want_layer = "allocated" if s.summary()["allocated_seen"] else "reserved"
    assert list(s.sites()["label"][:10]) == [x["label"] for x in default[want_layer]]


@pytest.mark.parametrize("rel", GOOD)
def test_state_at_agrees_with_levels(rel):
    path = fixture(rel)
    s = memsnap.load(path)
    summ = s.summary()
    ev = s.events()
    end = s.state_at("end")
    # the levels count what was live before the first event too (pre_window:
    # a ring dump's state section, frees of memory allocated before the
    # recording), as summary's peaks and finals do
    res = end[(end["layer"] == "reserved") & (end["device"] >= 0)]
    if summ["header"]["mode"] == "ring":
        assert len(end) == summ["state"]["live"]
    assert len(res) == summ["live_at_end"]["count"]
    assert int(res["size"].sum()) == summ["live_at_end"]["bytes"]
    if summ["allocated_seen"]:
        alloc = end[end["layer"] == "allocated"]
        assert int(alloc["size"].sum()) == summ["process"]["allocated"]["final"]
    # at every event's time: the live set is the levels' (the last event at
    # or before that time, the rule of render --at)
    for i in range(0, len(ev), max(1, len(ev) // 7)):
        t = int(ev["t_ns"].iloc[i])
        last = ev[ev["t_ns"] <= t].index.max()
        at = s.state_at(t)
        assert at.attrs["event_index"] == last + 1
        for layer in ("reserved", "allocated"):
            live = at[at["layer"] == layer]
            assert int(live["size"].sum()) == int(ev[layer].iloc[last]), (t, layer)
    peak = s.state_at("peak")
    layer = "allocated" if summ["allocated_seen"] else "reserved"
    live = peak[peak["layer"] == layer]
    if len(ev):
        assert int(live["size"].sum()) == int(ev[layer].max())


def test_state_at_moments_and_labels():
    s = memsnap.load(fixture("tests/cli/data/blocks.msnap"))
    st = s.state_at(0.00000025)              # seconds: 250 ns, after event 2
    assert st.attrs["event_index"] == 2 and st.attrs["t_ns"] == 200
    assert sorted(st["kind"].astype(str)) == ["alloc", "block_alloc"]
    assert set(st["label"].astype(str)) <= set(s.sites("allocated")["label"]) | set(
        s.sites("reserved")["label"])
    assert len(s.state_at(0)) == 0 and s.state_at(0).attrs["event_index"] == 0
    with pytest.raises(ValueError, match="no OOM"):
        s.state_at("oom")
    with pytest.raises(ValueError, match="bad moment"):
        s.state_at("sometime")
    for top in (-1, 2**31, 2**32 + 3, 2.5, "3", True):
        with pytest.raises(ValueError, match="top: a count"):
            s.summary(top=top)
    assert len(s.summary(top=1)["top_sites"]["reserved"]) <= 1
    oom = memsnap.load(fixture("tests/cli/data/oom.msnap")).state_at("oom")
    assert oom.attrs["event_index"] > 0


def test_categories_are_the_breakdowns():
    for rel in GOOD:
        s = memsnap.load(fixture(rel))
        df = s.categories()
        cats = s.summary()["categories"]
        assert len(df) == sum(len(d["items"]) for d in cats)
        if len(df):
            assert {"device", "category", "peak"} <= set(df.columns)
            first = cats[0]["items"][0]
            assert df.iloc[0]["category"] == first["category"]
            assert int(df.iloc[0]["peak"]) == first["peak"]


def test_pools_are_the_summarys(tmp_path):
    """A synthetic serving engine with CUDA graphs in a shared pool
    (tests/pools/synth_serving.py): pools() is summary's "pools", and its
    figures the recording's ledger."""
    import subprocess
    import sys
    snap, ex = tmp_path / "serving.msnap", tmp_path / "expect.json"
    subprocess.run([sys.executable, fixture("tests/pools/synth_serving.py"), str(snap),
                    "--expect", str(ex)], check=True)
    want = json.load(open(ex))
    s = memsnap.load(snap)
    df = s.pools()
    assert list(df["kind"]) == ["default", "graph"]
    assert df.iloc[1]["torch_id"] == (0, 1)
    for i, key in ((0, "default"), (1, str((1 << 32) | 1))):
        for col in ("peak_reserved", "peak_allocated", "blocks", "segments"):
            assert int(df.iloc[i][col]) == want["pools"][key][col]
        assert int(df.iloc[i]["final_allocated"]) == want["pools"][key]["allocated"]
    assert df.iloc[1]["top_sites"][0][0] == "model_step (engine.py:42)"
    for rel in GOOD:
        assert len(memsnap.load(fixture(rel)).pools()) == \
            len(memsnap.load(fixture(rel)).summary().get("pools") or [])


@pytest.mark.parametrize("rel", BAD)
def test_errors_are_the_clis(rel):
    path = fixture(rel)
    rc, out, err = cli("summary", path, check=False)
    assert rc == 2
    s = memsnap.load(path)
    for call in (s.summary, s.events, s.sites, lambda: s.state_at("end")):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == err.strip()


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        memsnap.load("/nonexistent/x.msnap")


def test_no_python_object_per_event():
    """The numeric columns are numpy arrays of machine integers, the
    strings categorical: nothing holds an object per row."""
    ev = memsnap.load(fixture("tests/cli/golden/three.msnap")).events()
    for c in ev.columns:
        assert ev[c].dtype != object, c


def test_pandas_too_old_is_one_line(tmp_path):
    """A pandas older than the oldest tried (Debian 11's 1.1.5): the tables
    raise ImportError naming the version needed; summary() needs none."""
    fake = tmp_path / "pandas"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "0.25.3"\n')
    path = fixture("tests/cli/golden/three.msnap")
    code = """
import memsnap, sys
s = memsnap.load(sys.argv[1])
assert s.summary()["events"]["total"] > 0
try:
    s.events()
except ImportError as e:
    print(e)
else:
    print("no error")
"""
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.path.dirname(os.path.dirname(memsnap.__file__))]))
    r = subprocess.run([sys.executable, "-c", code, path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, universal_newlines=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("memsnap: the tables (events, sites, state_at, categories) need pandas "
                        "1.1.5 or later (this Python has pandas 0.25.3): "
                        "pip install -U 'pandas>=1.1.5'\n")


TRAIN = "tests/viz/data/h200/train-llama.msnap.zst"


def _count_reads(monkeypatch):
    """Counts the C library's reads of a file (mpy_read, mpy_read_all,
    mpy_summary)."""
    from memsnap import _lib
    n = {"reads": 0}
    L = _lib.lib()

    class Counting:
        def __getattr__(self, name):
            f = getattr(L, name)
            if name in ("mpy_read", "mpy_read_all", "mpy_summary"):
                def counted(*a):
                    n["reads"] += 1
                    return f(*a)
                return counted
            return f
    monkeypatch.setattr(_lib, "_lib", Counting())
    return n


def test_one_read_per_snapshot(monkeypatch):
    """events(), sites(), state_at("peak"), summary(), categories() read the
    file once between them, and nothing is read twice (issue 35 item 12:
    every method read the file again)."""
    n = _count_reads(monkeypatch)
    s = memsnap.load(fixture(TRAIN))
    ev = s.events()
    sites = s.sites()
    peak = s.state_at("peak")
    summ = s.summary()
    cats = s.categories()
    assert n["reads"] == 1, n
    assert len(ev) == summ["events"]["total"] and len(sites) and len(peak) and len(cats)
    for _ in range(2):                      # kept: no read again
        assert s.events() is ev
        s.sites(), s.state_at("peak"), s.summary(top=3), s.summary(top=0)
    assert n["reads"] == 1, n
    s.state_at("end")                       # another moment: one more read, kept
    s.state_at("end")
    assert n["reads"] == 2, n
    s2 = memsnap.load(fixture(TRAIN))
    s2.summary(), s2.sites(), s2.state_at("peak")
    assert n["reads"] == 3, n                # the summary's read has the peak's state


@pytest.mark.parametrize("top", [0, 1, 3, 10, 40])
def test_kept_summary_cut_to_top_is_the_cli_json(top):
    """summary(top=N) from the kept summary of every site is what `memsnap
    summary --json --top N` prints."""
    path = fixture(TRAIN)
    s = memsnap.load(path)
    s.sites()                                # the summary of every site, kept
    assert s.summary(top=top) == cli_json(path, "--top", str(top))[0]


def test_state_at_before_the_first_event_warns():
    """state_at(15) is 15 ns, before the first event at 16.7 s: no objects,
    and a warning that says so and that an int is nanoseconds (issue 35
    item 12: it was silent)."""
    s = memsnap.load(fixture(TRAIN))
    with pytest.warns(UserWarning, match=r"state_at\(15\) is 15 ns, before the first event "
                      r"\(at 16\.70\d s\): nothing was recorded yet; an int is nanoseconds, "
                      r"a float seconds \(state_at\(15\.0\) is 15 s\)"):
        df = s.state_at(15)
    assert len(df) == 0 and df.attrs["event_index"] == 0
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(s.state_at(20.0)) > 0     # seconds, after the first event: no warning
        s.state_at("peak")


def test_progress_on_a_terminal(tmp_path):
    """A read of more than a second draws a progress line on a terminal's
    stderr, and clears it; none when stderr is not a terminal."""
    import pty
    import subprocess
    import sys
    gen = os.path.join(os.environ.get("BUILD_DIR", ""), "bench", "bench_gen_snapshot")
    if not os.path.exists(gen):
        pytest.skip("no bench_gen_snapshot in this build")
    big = str(tmp_path / "big.msnap")
    subprocess.run([gen, "3000000", big, "blocks"], check=True, stdout=subprocess.DEVNULL)
    code = "import memsnap, sys; memsnap.load(sys.argv[1]).events(); print('done')"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(memsnap.__file__)),
               MEMSNAP_PROGRESS_AFTER="0")  # the line at once: no timing in a test
    env.pop("MEMSNAP_NO_PROGRESS", None)
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", code, big], stdout=subprocess.PIPE,
                         stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    out = p.communicate()[0]
    os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert p.returncode == 0 and out.strip() == b"done"
    assert "memsnap: reading" in err and "%" in err, repr(err[:300])
    assert err.rstrip().endswith("\x1b[K"), repr(err[-80:])     # cleared at the end
    r = subprocess.run([sys.executable, "-c", code, big], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env)
    assert r.returncode == 0 and not r.stderr, r.stderr[:300]

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
        "tests/format/corpus/unknowns.msnap"]
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

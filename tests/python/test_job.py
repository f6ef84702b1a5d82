"""memsnap.job(): the job view from Python, on local processes and on a real
dask.distributed cluster (a LocalCluster of two worker processes), against
`memsnap job --json` of the same files: the same dict, the same ranks and
sites.  Files: 24 generated ranks (tests/cli/data/job/make.py: an OOM, a
ring dump, a rank that grows), the kept H200 recordings (tests/viz/data/h200).
"""
import importlib.util
import json
import os
import subprocess

import pytest

import memsnap
from conftest import fixture

NRANKS = 24


def cli_job(paths):
    r = subprocess.run([memsnap.paths()["memsnap"], "job", "--json"] + list(paths),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode in (0, 1), r.stderr.decode()
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranks")
    spec = importlib.util.spec_from_file_location("make_job",
                                                  fixture("tests/cli/data/job/make.py"))
    mk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mk)
    for r in range(NRANKS):
        mk.write(r, str(d))
    return str(d)


@pytest.fixture(scope="module")
def h200():
    d = fixture("tests/viz/data/h200")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".msnap.zst"))


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    c.wait_for_workers(2, timeout=60)   # both up before any task: else one may take them all
    yield c
    c.close()
    cluster.close()


def test_local_processes_equal_the_cli(ranks_dir):
    j = memsnap.job(ranks_dir)
    paths = j.paths
    assert len(paths) == NRANKS and paths[2].endswith("run-2.msnap") and \
        paths[10].endswith("run-10.msnap")          # natural order, as the CLI lists a folder
    assert j.summary() == cli_job([ranks_dir])
    assert memsnap.job(os.path.join(ranks_dir, "run-*.msnap"), workers=1).summary() == \
        cli_job([ranks_dir])


def test_dask_cluster_equals_the_cli(client, ranks_dir):
    from distributed import get_task_stream
    with get_task_stream(client) as ts:
        j = memsnap.job(ranks_dir, client=client)
        s = j.summary()
    assert s == cli_job([ranks_dir])
    # the per-file work ran on the cluster's two worker processes (the task
    # stream may miss a few of the last tasks: no count is asserted)
    workers = set(client.scheduler_info()["workers"])
    ran = [t for t in ts.data if str(t.get("key", "")).startswith("_record")]
    assert ran and {t["worker"] for t in ran} <= workers, ts.data[:3]
    assert len({t["worker"] for t in ran}) == 2
    # the figures the job says
    assert s["imbalance"]["highest"]["rank"] == NRANKS - 1
    assert [f["rank"] for f in s["failures"]] == [3]
    assert s["windows"]["ring"] == 1 and s["windows"]["files"][0]["rank"] == 1
    # what traveled: a few KiB per file
    assert max(len(t) for t in j._texts()) < 16384


def test_ranks_and_sites(client, ranks_dir):
    j = memsnap.job(ranks_dir, client=client)
    cli = cli_job([ranks_dir])
    df = j.ranks()
    assert list(df.columns[:9]) == ["file", "rank", "host", "pid", "device", "peak_reserved",
                                    "peak_allocated", "ooms", "top_site"]
    assert len(df) == NRANKS and list(df["rank"]) == list(range(NRANKS))
    assert list(df["peak_reserved"]) == [r["peak_reserved"] for r in cli["ranks"]]
    assert list(df["ooms"]) == [r["ooms"] for r in cli["ranks"]]
    assert df["peak_allocated"].isna().all()             # driver allocations only
    sites = j.sites()
    MiB = 1 << 20
    act = sites.loc["activations (model.c:88)"]
    assert [int(act[r]) for r in range(4)] == [256 * MiB, 512 * MiB, 768 * MiB, 1024 * MiB]
    w = sites.loc["weights (model.c:42)"]
    assert w.isna()[1] and int(w[0]) == 1024 * MiB     # the ring dump's: unknown, not 0
    # the divergent table's rows are the sites' rows
    for row in cli["divergent_sites"]["sites"]:
        got = [None if v is None or (v != v) else int(v) for v in
               sites.loc[row["label"]].astype("object").where(sites.loc[row["label"]].notna(),
                                                              None)]
        assert got == row["peaks"], row["label"]


def test_h200_recordings_on_dask(client, h200):
    j = memsnap.job(h200, client=client)
    assert j.summary() == cli_job(h200)
    df = j.ranks()
    for path in h200:
        s = memsnap.load(path).summary()
        row = df[df.file == path].iloc[0]
        assert row.peak_reserved == s["process"]["reserved"]["peak"]
        assert row.peak_allocated == s["process"]["allocated"]["peak"]
        assert row.top_site == s["top_sites"]["allocated"][0]["label"]


def test_bad_file_says_why(tmp_path, ranks_dir):
    bad = tmp_path / "run-99.msnap"
    bad.write_text("not a snapshot\n")
    with pytest.raises(ValueError, match="run-99.msnap: .*not a memsnap snapshot"):
        memsnap.job([os.path.join(ranks_dir, "run-0.msnap"), str(bad)], workers=1).summary()
    with pytest.raises(FileNotFoundError):
        memsnap.job(str(tmp_path / "none-*.msnap"))

"""memsnap.job(paths_or_glob, client=None) -> Job: a job of many ranks.

The view `memsnap job` prints (analyze/job.h), built the same way: a map
step per file (one read by memsnap's C library, libmemsnap_py.so, into the
file's rank record: a few KiB of JSON whatever the file's size) and one
reduce of the records (the same C function).  Only the records travel.

With a dask.distributed Client, the map runs on the cluster's workers,
one task per file (each worker needs this package and the files at the
same paths: a shared file system); without one, on local processes.  The
answers are the CLI's, byte for byte: `Job.summary()` is the dict that
`memsnap job --json` prints for the same files in the same order.
docs/python.md, "A job of many ranks".

Dask APIs used: Client.map(pure=False) and Client.gather, the same from
2022.12 (Debian 12) to today's.
"""
import glob as _glob
import json
import os
import re

from . import _lib

RANK_COLUMNS = ["file", "rank", "host", "pid", "device", "peak_reserved", "peak_allocated",
                "ooms", "top_site"]
_GLOB = re.compile(r"[*?\[]")


def _natural(s):
    """A sort key that puts run-2 before run-10 (strverscmp, as the CLI's
    folder listing)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _paths(paths_or_glob):
    """The files: a glob pattern, a folder (its .msnap and .msnap.zst
    files), a path, or a list of any of those; folders and patterns in
    natural order, lists in the order given."""
    if isinstance(paths_or_glob, (str, bytes, os.PathLike)):
        items = [os.fspath(paths_or_glob)]
    else:
        items = [os.fspath(p) for p in paths_or_glob]
    out = []
    for p in items:
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        if os.path.isdir(p):
            names = [n for n in os.listdir(p) if not n.startswith(".") and
                     (n.endswith(".msnap") or n.endswith(".msnap.zst"))]
            if not names:
                raise FileNotFoundError(2, "no .msnap or .msnap.zst file in the folder", p)
            here = p in (".", "./")
            out += [n if here else os.path.join(p, n) for n in sorted(names, key=_natural)]
        elif _GLOB.search(p) and not os.path.exists(p):
            found = sorted(_glob.glob(p), key=_natural)
            if not found:
                raise FileNotFoundError(2, "no file matches the pattern", p)
            out += found
        else:
            if not os.path.exists(p):
                raise FileNotFoundError(2, "No such file or directory", p)
            out.append(p)
    if not out:
        raise ValueError("memsnap.job: no files given")
    return out


def _record(path):
    """The map step, where it runs (a Dask worker, a local process): the
    rank record's JSON text."""
    return _lib.job_record(path)


def _local_records(paths, workers):
    """The records on local processes (fork: the workers need no import of
    the caller's script), in file order."""
    import concurrent.futures
    import multiprocessing
    n = min(workers or os.cpu_count() or 1, len(paths))
    if n <= 1:
        return [_record(p) for p in paths]
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=n, mp_context=ctx) as ex:
        return list(ex.map(_record, paths, chunksize=max(1, len(paths) // (4 * n))))


class Job:
    """Many snapshots of one job, one per rank.  Nothing is read until a
    method asks; the files are read once, and the answers kept."""

    def __init__(self, paths_or_glob, client=None, workers=None):
        self.paths = _paths(paths_or_glob)
        self.client = client
        self.workers = workers
        self._records = None
        self._summary = None

    def __repr__(self):
        return "memsnap.Job(%d files)" % len(self.paths)

    def records(self):
        """The rank record of every file, in file order (dicts; job.h says
        what each holds): what traveled from the workers."""
        return [json.loads(t) for t in self._texts()]

    def _texts(self):
        if self._records is None:
            if self.client is not None:
                futures = self.client.map(_record, self.paths, pure=False)
                self._records = self.client.gather(futures)
            else:
                self._records = _local_records(self.paths, self.workers)
        return self._records

    def summary(self):
        """The dict `memsnap job --json` prints for these files: ranks,
        imbalance, divergent_sites, failures, alignment, windows."""
        if self._summary is None:
            self._summary = _lib.job_reduce(self._texts())
        return self._summary

    def ranks(self):
        """A DataFrame, one row per file in rank order: file, rank, host,
        pid, device, peak_reserved, peak_allocated, ooms, top_site, then
        device_name, mode, events, top_site_peak.  rank and peak_allocated
        are nullable (no rank found; no allocator blocks)."""
        import pandas as pd
        rows = self.summary()["ranks"]
        df = pd.DataFrame(rows)
        if not len(df):
            return pd.DataFrame(columns=RANK_COLUMNS)
        for c in ("rank", "peak_allocated"):
            df[c] = df[c].astype("Int64")
        return df[RANK_COLUMNS + [c for c in df.columns if c not in RANK_COLUMNS]]

    def sites(self):
        """Peak bytes of every site (rows, by label) on every rank (columns,
        by rank, or by file where a file has no rank), as the rank records
        list them (up to 32 sites per rank): 0 where a rank's list is
        complete and lacks the site, missing (<NA>) where it is not (a ring
        dump, or a site beyond the rank's 32 largest)."""
        import pandas as pd
        rows = self.summary()["ranks"]
        by_file = {r["file"]: r for r in self.records()}
        cols, data = [], {}
        for r in rows:
            rec = by_file[r["file"]]
            key = r["rank"] if r["rank"] is not None else r["file"]
            cols.append(key)
            for s in rec["sites"]:
                data.setdefault(s["label"], {})[key] = s["peak"]
        complete = {(r["rank"] if r["rank"] is not None else r["file"]):
                    by_file[r["file"]]["sites_complete"] for r in rows}
        table = {}
        for label, peaks in data.items():
            table[label] = [peaks.get(c, 0 if complete[c] else None) for c in cols]
        df = pd.DataFrame.from_dict(table, orient="index", columns=cols, dtype="Int64")
        df.index.name = "site"
        df.columns.name = "rank"
        if len(df):
            df = df.loc[df.max(axis=1, skipna=True).sort_values(ascending=False,
                                                               kind="stable").index]
        return df


def job(paths_or_glob, client=None, workers=None):
    """A memsnap.Job over the snapshots named: a glob ("runs/run-*.msnap"),
    a folder, a path or a list of them.  client: a dask.distributed Client
    (the per-file work runs on its workers); None: local processes (up to
    workers of them, default the number of cores)."""
    return Job(paths_or_glob, client=client, workers=workers)

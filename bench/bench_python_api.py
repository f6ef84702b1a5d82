"""The Python API's speed (docs/benchmarks.md, *Python API*): a snapshot's
events into a DataFrame through memsnap.load(path).events(), against pandas
reading the same events from memsnap's SQLite export (pandas.read_sql).

    python3 bench_python_api.py memsnap SNAP            # one events() in this process
    python3 bench_python_api.py sqlite DB [CHUNK]       # read_sql of the events table
                                                         # (CHUNK rows at a time, concatenated)
    python3 bench_python_api.py others SNAP             # summary(), sites(), state_at("peak")

Each prints one line: wall seconds, rows, peak RSS.  Run a process per
measurement (bench_python_api.sh), so each starts cold in memory."""
import resource
import sys
import time


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    what, path = sys.argv[1], sys.argv[2]
    import pandas as pd
    import memsnap
    if what == "memsnap":
        t = time.perf_counter()
        df = memsnap.load(path).events()
        dt = time.perf_counter() - t
        print("memsnap events(): %.2f s, %d rows x %d columns, %.0f MiB frame, peak RSS %.0f MiB"
              % (dt, len(df), len(df.columns), df.memory_usage().sum() / 2**20, rss()))
    elif what == "sqlite":
        import sqlite3
        chunk = int(sys.argv[3]) if len(sys.argv) > 3 else 0
        t = time.perf_counter()
        con = sqlite3.connect(path)
        q = "SELECT * FROM events"
        if chunk:
            df = pd.concat(pd.read_sql(q, con, chunksize=chunk), ignore_index=True)
        else:
            df = pd.read_sql(q, con)
        dt = time.perf_counter() - t
        print("pandas.read_sql%s: %.2f s, %d rows x %d columns, %.0f MiB frame, peak RSS %.0f MiB"
              % (" (chunks of %d)" % chunk if chunk else "", dt, len(df), len(df.columns),
                 df.memory_usage(deep=True).sum() / 2**20, rss()))
    else:
        s = memsnap.load(path)
        for name, fn in (("summary()", s.summary), ("sites()", s.sites),
                         ("state_at('peak')", lambda: s.state_at("peak"))):
            t = time.perf_counter()
            r = fn()
            print("memsnap %s: %.2f s%s" % (name, time.perf_counter() - t,
                                          ", %d rows" % len(r) if hasattr(r, "columns") else ""))
        print("peak RSS %.0f MiB" % rss())


if __name__ == "__main__":
    main()

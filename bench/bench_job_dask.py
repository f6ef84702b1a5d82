"""bench_job.sh's Python half: memsnap.job() over a folder of rank files on
a dask.distributed LocalCluster of W worker processes (one thread each) and
on W local processes; prints one line per run: what, wall s, and whether
the summary equals `memsnap job --json` of the same files (given as a file).

    python3 bench_job_dask.py DIR CLI_JSON WORKERS
"""
import json
import sys
import time

import memsnap

def main():
    # a LocalCluster's worker processes are spawned: the work goes under
    # the __main__ guard
    d, cli_json, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cli = json.load(open(cli_json))

    from dask.distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    t1 = time.perf_counter()
    j = memsnap.job(d, client=client)
    s = j.summary()
    t2 = time.perf_counter()
    texts = j._texts()
    print("dask %d workers: %.2f s (cluster start %.2f s more), equal to the CLI: %s, "
          "records %d bytes on average, %d at most"
          % (workers, t2 - t1, t1 - t0, s == cli, sum(map(len, texts)) // len(texts),
             max(map(len, texts))))
    client.close()
    cluster.close()

    t0 = time.perf_counter()
    s = memsnap.job(d, workers=workers).summary()
    print("local processes %d: %.2f s, equal to the CLI: %s" % (workers, time.perf_counter() - t0,
                                                                 s == cli))


if __name__ == "__main__":
    main()

"""bench_job.sh: the reduce of N rank records (memsnap.job's, the CLI's
job_reduce) made from the records of a folder's files, renamed run-0 ..
run-N-1 and repeated: its time and the memory it takes (the process's peak
RSS before and after), and the size of the job object it returns.

    python3 bench_job_reduce.py DIR N
"""
import json
import resource
import sys
import time

import memsnap
from memsnap import _lib

d, n = sys.argv[1], int(sys.argv[2])
base = [json.loads(t) for t in memsnap.job(d, workers=1)._texts()]
texts = []
for i in range(n):
    r = dict(base[i % len(base)])
    r["file"] = "run-%d.msnap" % i
    texts.append(json.dumps(r, separators=(",", ":")))
inp = sum(map(len, texts))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
job = _lib.job_reduce(texts)
t = time.perf_counter() - t0
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = len(json.dumps(job, separators=(",", ":")))
print("reduce of %d records (%.1f MB of records): %.2f s, peak RSS +%.0f MB "
      "(the records parsed, the reduce, the job object of %.1f MB as text)"
      % (n, inp / 1e6, t, (rss1 - rss0) / 1024.0, out / 1e6))

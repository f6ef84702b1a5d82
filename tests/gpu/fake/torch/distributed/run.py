"""torchrun of the fake: python3 -m torch.distributed.run --standalone
--nproc-per-node N SCRIPT ARGS...: N copies of SCRIPT at once with RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; when one fails the others get
SIGTERM (as torchrun stops a job); exit 1 when any failed."""
import argparse
import os
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--standalone", action="store_true")
ap.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1)
ap.add_argument("script")
ap.add_argument("args", nargs=argparse.REMAINDER)
a = ap.parse_args()
procs = []
for r in range(a.nproc_per_node):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc_per_node),
               LOCAL_WORLD_SIZE=str(a.nproc_per_node))
    procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
failed = False
while any(p.poll() is None for p in procs):
    if any(p.poll() not in (None, 0) for p in procs) and not failed:
        failed = True
        for p in procs:
            if p.poll() is None:
                p.terminate()
    time.sleep(0.05)
sys.exit(1 if failed or any(p.returncode for p in procs) else 0)

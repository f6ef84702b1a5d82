#!/usr/bin/env python3
"""signal_tmp.py MEMSNAP GEN SCRATCH: a command stopped by SIGINT or SIGTERM
while it writes its output (export torch and torch --json, export sqlite,
symbolize -o and in place) leaves no temporary file and no output, and
dies of the signal (issue 35 item 9; util/outfile.h, cli/memsnap.c).  GEN
is bench_gen_snapshot: a 2M-event file takes a command a second or two,
long enough to stop it while its temporary file is there.  (Python, not
sh: a shell's background job starts with SIGINT ignored, and memsnap
leaves an ignored signal ignored, as nohup wants.)"""
import filecmp
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

memsnap, gen, scratch = sys.argv[1:4]
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(scratch)
big = f"{scratch}/big.msnap"
subprocess.run([gen, "2000000", big, "blocks"], check=True, capture_output=True)
fails = 0


def stop(sig, pattern, out, *args):
    global fails
    what = " ".join(args[:3]) + f", {signal.Signals(sig).name}"
    p = subprocess.Popen([memsnap, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(3000):
        if glob.glob(pattern) or p.poll() is not None:
            break
        time.sleep(0.01)
    if not glob.glob(pattern):
        p.wait()
        print(f"FAIL: {what}: no temporary file {pattern} appeared (exit {p.returncode})")
        fails += 1
        return
    p.send_signal(sig)
    p.wait()
    bad = []
    if p.returncode != -sig:
        bad.append(f"exit {p.returncode}, not death by the signal")
    if glob.glob(pattern):
        bad.append(f"temporaries left: {glob.glob(pattern)}")
    if out and os.path.exists(out):
        bad.append(f"{out} written though stopped")
    if bad:
        fails += 1
        print(f"FAIL: {what}: " + "; ".join(bad))
    else:
        print(f"ok: {what}")


stop(signal.SIGINT, f"{scratch}/t.pickle.tmp.*", f"{scratch}/t.pickle",
     "export", big, "--format", "torch", "--max-entries", "0", "-o", f"{scratch}/t.pickle")
stop(signal.SIGTERM, f"{scratch}/t.json.tmp.*", f"{scratch}/t.json",
     "export", big, "--format", "torch", "--json", "--max-entries", "0", "-o", f"{scratch}/t.json")
stop(signal.SIGINT, f"{scratch}/o.msnap.tmp.*", f"{scratch}/o.msnap",
     "symbolize", big, "-o", f"{scratch}/o.msnap")
inplace = f"{scratch}/inplace.msnap"
shutil.copy(big, inplace)
stop(signal.SIGTERM, f"{inplace}.symtmp.*", None, "symbolize", inplace)
if not filecmp.cmp(big, inplace, shallow=False):
    fails += 1
    print("FAIL: symbolize in place: the input changed")
r = subprocess.run([memsnap, "export", "--format", "sqlite", big, "-o", f"{scratch}/probe.db",
                    "--from", "#0", "--to", "#1"], capture_output=True, text=True)
if "built without SQLite" in r.stderr:
    print("skip: export sqlite (built without SQLite)")
else:
    stop(signal.SIGINT, f"{scratch}/t.db.tmp", f"{scratch}/t.db",
         "export", "--format", "sqlite", big, "-o", f"{scratch}/t.db")
print("ok" if not fails else f"{fails} failed")
sys.exit(1 if fails else 0)

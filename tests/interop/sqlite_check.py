"""The SQLite export and the example queries of docs/interop.md (ctest
interop_sqlite).

    sqlite_check.py MEMSNAP GEN DOCS_INTEROP_MD SCRATCH CLI_DATA INTEROP_DATA

Exports several snapshots (an OOM with allocator blocks on two devices, an OOM
without blocks, and two generated rank files named *.rankN.msnap) into one
database, runs the three ```sql blocks of docs/interop.md and checks them
against `memsnap summary --json` of each file:
  - peak per rank = each device's reserved.peak and allocated.peak;
  - top sites at the OOM add up to the allocated bytes (blocks) or reserved
    bytes (no blocks) that summary's oom_story reports at the first OOM;
  - leak suspects of the driver layers add up to summary's live_at_end bytes;
  - ranks come from the file names, else the argument position.
"""
import json
import os
import re
import sqlite3
import subprocess
import sys

M, GEN, DOC, S, CLI_DATA, IO_DATA = sys.argv[1:7]
os.makedirs(S, exist_ok=True)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


queries = re.findall(r"```sql\n(.*?)```", open(DOC).read(), re.S)
if len(queries) != 3:
    fail("docs/interop.md should have 3 sql blocks, has %d" % len(queries))
q_peak, q_oom, q_leak = queries

g1, g2 = S + "/job.rank1.msnap", S + "/job.rank2.msnap"
subprocess.run([GEN, "20000", g1, "blocks"], check=True, capture_output=True)
subprocess.run([GEN, "15000", g2], check=True, capture_output=True)
files = [os.path.join(IO_DATA, "roundtrip.msnap"), os.path.join(CLI_DATA, "oom.msnap"), g1, g2]
ranks = [0, 1, 1, 2]  # roundtrip: position 0; oom.msnap: position 1; then from the names
db = S + "/job.db"
r = subprocess.run([M, "export", "--format", "sqlite", "-o", db] + files, capture_output=True,
                   text=True)
if r.returncode != 0:
    fail("export: %s" % r.stderr)
con = sqlite3.connect(db)

got = {}
for rank, device, peak_res, peak_alloc in con.execute(q_peak):
    got.setdefault(rank, {})[device] = (peak_res, peak_alloc)
oom_rows = list(con.execute(q_oom))
leak_rows = list(con.execute(q_leak))
file_ranks = [row[0] for row in con.execute("SELECT rank FROM files ORDER BY file_id")]
if file_ranks != ranks:
    fail("ranks %s, want %s" % (file_ranks, ranks))
# each file's header: host, pid and command line as summary reads them
for (host, pid, argv), path in zip(con.execute("SELECT host, pid, argv FROM files ORDER BY file_id"),
                                   files):
    h = json.loads(subprocess.run([M, "summary", "--json", path], capture_output=True,
                                  text=True).stdout)["header"]
    if (host, pid, argv) != (h["host"], h["pid"], " ".join(h["argv"])):
        fail("files row %r, the header says %r" % ((host, pid, argv),
                                                   (h["host"], h["pid"], " ".join(h["argv"]))))

for fid, (path, rank) in enumerate(zip(files, ranks)):
    sj = subprocess.run([M, "summary", "--json", path], capture_output=True, text=True)
    s = json.loads(sj.stdout)
    for dev in s["devices"]:
        d = dev["device"]
        want = (dev["reserved"]["peak"], (dev["allocated"] or {"peak": 0})["peak"])
        have = got.get(rank, {}).get(d, (0, 0))
        # ranks 1 hold two files: the query's max is over both
        if rank == 1:
            continue
        if have != want:
            fail("%s: device %d peaks %s, summary says %s" % (path, d, have, want))
    story = s["findings"].get("oom_story") or []
    ooms = [o for o in story if o["action"] == "oom"]
    if ooms:
        first = ooms[0]
        total = sum(row[3] for row in oom_rows if row[0] == rank and row[1] == first["device"])
        want = first["allocated"] if s["allocated_seen"] else first["reserved"]
        if total != want:
            fail("%s: live at the OOM by site adds up to %d, summary says %d" % (path, total, want))
        if not any(row[0] == rank for row in oom_rows):
            fail("%s: no top sites at the OOM" % path)
    live = sum(row[4] for row in leak_rows if row[0] == rank and row[1] in ("alloc", "async", "managed"))
    if rank != 1 and live != s["live_at_end"]["bytes"]:
        fail("%s: leak query live bytes %d, summary live_at_end %d" %
             (path, live, s["live_at_end"]["bytes"]))

# rank 1 holds two files: its peaks are the larger of both summaries
want1 = {}
for path in files[1:3]:
    s = json.loads(subprocess.run([M, "summary", "--json", path], capture_output=True,
                                  text=True).stdout)
    for dev in s["devices"]:
        a = want1.get(dev["device"], (0, 0))
        want1[dev["device"]] = (max(a[0], dev["reserved"]["peak"]), max(a[1], (dev["allocated"] or {"peak": 0})["peak"]))
for d, want in want1.items():
    if got.get(1, {}).get(d, (0, 0)) != want:
        fail("rank 1 device %d peaks %s, summaries say %s" % (d, got.get(1, {}).get(d), want))

labels = [row[0] for row in con.execute("SELECT label FROM sites WHERE file_id = 0")]
if "main (train.c:10)" not in labels:
    fail("site labels: %s" % labels)
if con.execute("SELECT COUNT(*) FROM frames").fetchone()[0] == 0:
    fail("no frames")
if con.execute("SELECT COUNT(*) FROM counters").fetchone()[0] == 0:
    fail("no counters (the generated files have them)")

# bad input: one line, exit 2, nothing left behind
r = subprocess.run([M, "export", "--format", "sqlite", "-o", S + "/bad.db", files[0],
                    S + "/missing.msnap"], capture_output=True, text=True)
if r.returncode != 2 or len(r.stderr.splitlines()) != 1 or os.path.exists(S + "/bad.db"):
    fail("a missing input: exit %d, %r" % (r.returncode, r.stderr))
print("ok: %d oom rows, %d leak rows" % (len(oom_rows), len(leak_rows)))

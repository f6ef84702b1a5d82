"""What PyTorch's memory_viz page must read from an export (memory_viz_browser.sh).

    memory_viz_expect.py SNAP.msnap EXPORT.pickle OUT.json

Reads the pickle with Python's pickle module (it is plain data: docs/interop.md)
and writes, for memory_viz_check.mjs to compare with what the page parsed:
  devices      the devices the page's selector must list: those with trace
               entries or segments, in order;
  traces       per device: entries once each free_requested directly followed
               by the free_completed of the same address counts as one (the
               page shows the pair as one "free" line), and alloc entries;
  segments     the number of segments;
  first_time_us, last_time_us   the smallest and largest time_us;
  year         the UTC year of the snapshot header's t0_unix_ns: the year the
               recording was made, read from the .msnap itself and not from the
               export, so a writer that dated entries from 0 (1970) fails.
Exit 0, or 2 with a one-line message.
"""
import datetime
import json
import pickle
import subprocess
import sys


def header_t0_ns(snap):
    """t0_unix_ns of SNAP's header line (zstd or plain); 0 when absent."""
    out = subprocess.run(["zstdcat", "-f", snap], capture_output=True, check=True).stdout
    first = json.loads(out.split(b"\n", 1)[0])
    t0 = first.get("t0_unix_ns", 0)
    return int(t0, 0) if isinstance(t0, str) else int(t0)


def main():
    """Writes OUT.json from the command line's files; 0, or 2 on a usage error."""
    if len(sys.argv) != 4:
        sys.stderr.write("usage: memory_viz_expect.py SNAP.msnap EXPORT.pickle OUT.json\n")
        return 2
    snap, pkl, out = sys.argv[1:]
    with open(pkl, "rb") as f:
        d = pickle.load(f)
    seg_devices = {s["device"] for s in d["segments"]}
    devices, traces = [], {}
    first = last = None
    for i, tr in enumerate(d["device_traces"]):
        if tr or i in seg_devices:
            devices.append(i)
        merged = sum(1 for a, b in zip(tr, tr[1:])
                     if a["action"] == "free_requested" and b["action"] == "free_completed"
                     and a["addr"] == b["addr"])
        traces[str(i)] = {"entries": len(tr) - merged,
                          "allocs": sum(1 for e in tr if e["action"] == "alloc")}
        for e in tr:
            t = e["time_us"]
            first = t if first is None or t < first else first
            last = t if last is None or t > last else last
    t0 = header_t0_ns(snap)
    if not t0:
        sys.stderr.write("memory_viz_expect.py: %s has no t0_unix_ns\n" % snap)
        return 2
    year = datetime.datetime.fromtimestamp(t0 / 1e9, datetime.timezone.utc).year
    with open(out, "w") as f:
        json.dump({"devices": devices, "traces": traces, "segments": len(d["segments"]),
                   "first_time_us": first, "last_time_us": last, "year": year}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""trim.py IN.msnap[.zst] OUT.msnap EVENTS: a recording cut to its first
EVENTS events, every other line kept (header, stacks, syms, modules, strs,
counters), for small test fixtures of real H200 runs.  The file it makes is
a snapshot whose recording stopped early: frees after the cut are missing,
so what is live at its end is what was live at the cut."""
import subprocess
import sys

src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = subprocess.run(["zstdcat", "-f", src], check=True, capture_output=True).stdout.decode()
out, n = [], 0
for line in text.splitlines():
    if line.startswith('{"a":'):
        n += 1
        if n > keep:
            continue
    elif '"type":"trailer"' in line:
        continue
    out.append(line)
open(dst, "w").write("\n".join(out) + "\n")

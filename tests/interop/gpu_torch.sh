#!/bin/sh
# gpu_torch.sh MEMSNAP SCRATCH: a real PyTorch snapshot recorded on the GPU
# (torch.cuda.memory._record_memory_history), dumped as the pickle
# (_dump_snapshot) and as JSON (_snapshot()), then memsnap import of both,
# summary, replay (and render when it exists).  Exit 77 (skip) without a GPU
# or without torch.
M=$1 S=$2
mkdir -p "$S"
python3 - "$S" <<'PY' || exit $?
import json, sys
try:
    import torch
except Exception:
    print("SKIP: no torch"); sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no GPU"); sys.exit(77)
S = sys.argv[1]
torch.cuda.memory._record_memory_history(max_entries=100000)
keep = []
for i in range(200):
    t = torch.empty((i % 17 + 1) * 1024 * 1024, dtype=torch.uint8, device="cuda")
    if i % 3 == 0:
        keep.append(t)
    x = torch.randn(256, 256, device="cuda") @ torch.randn(256, 256, device="cuda")
del keep
torch.cuda.empty_cache()
torch.cuda.memory._dump_snapshot(S + "/torch.pickle")
with open(S + "/torch.json", "w") as f:
    json.dump(torch.cuda.memory._snapshot(), f)
torch.cuda.memory._record_memory_history(enabled=None)
PY
for f in torch.pickle torch.json; do
  "$M" import "$S/$f" -o "$S/$f.msnap" || { echo "FAIL: import $f"; exit 1; }
  "$M" summary "$S/$f.msnap" >"$S/$f.summary"; rc=$?
  [ $rc -le 1 ] || { echo "FAIL: summary $f"; exit 1; }
  grep -q "allocated  peak" "$S/$f.summary" || { echo "FAIL: no allocated layer in $f"; exit 1; }
  "$M" replay "$S/$f.msnap" --alloc-conf "" --alloc-conf "expandable_segments:true" \
    --device-mem 80G -o "$S/$f.replay" || { echo "FAIL: replay $f"; exit 1; }
  if "$M" help render >/dev/null 2>&1; then
    "$M" render "$S/$f.msnap" -o "$S/$f.png" >/dev/null 2>&1 || echo "note: render failed on $f"
  fi
done
# imported times count from the first event: the duration is the seconds the
# loop ran, not the time since 1970
"$M" summary --json "$S/torch.pickle.msnap" >"$S/sum.json"
python3 - "$S/sum.json" <<'PY' || { echo "FAIL: imported duration"; exit 1; }
import json, sys
h = json.load(open(sys.argv[1]))["header"]
assert 0 < h["duration_ns"] < 600e9, h["duration_ns"]
assert h["t0_unix_ns"] > 1.5e18, h["t0_unix_ns"]
PY
# our pickle export of it is a snapshot PyTorch's own tools read: the
# memory_viz helpers of torch.cuda._memory_viz (the same data the page gets)
"$M" export "$S/torch.pickle.msnap" --format torch -o "$S/back.pickle" || { echo "FAIL: export"; exit 1; }
python3 - "$S/back.pickle" "$S/back.html" <<'PY' || { echo "FAIL: torch cannot read our pickle"; exit 1; }
import pickle, sys, time
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
assert snap["device_traces"] and any(snap["device_traces"]), "no trace entries"
t = snap["device_traces"][0][0]["time_us"]
assert abs(t / 1e6 - time.time()) < 86400, t  # Unix-epoch microseconds of today
open(sys.argv[2], "w").write(mv.trace_plot(snap))
mv.segment_plot(snap)
print(mv.segsum(snap)[:200])
PY
echo ok

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
echo ok

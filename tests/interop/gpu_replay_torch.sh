#!/bin/sh
# gpu_replay_torch.sh MEMSNAP SCRATCH: replay fidelity against the real
# PyTorch allocator.  Runs torch_alloc_trace.py (a small Llama: generate(),
# then 3 AdamW steps) once per allocator config on the GPU, imports each
# recorded history, and replays (a) each trace under its own config and
# (b) the default-config trace under every config.  Each replayed peak
# reserved must be within 1% of PyTorch's max_memory_reserved for that
# config.  Exit 77 (skip) without a GPU, torch or transformers.
M=$1 S=$2
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$S"
python3 -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  2>/dev/null || { echo "SKIP: no GPU, torch or transformers"; exit 77; }
total=$(python3 -c 'import torch; print(torch.cuda.get_device_properties(0).total_memory)')
fail() { echo "FAIL: $*"; exit 1; }
# name | PYTORCH_CUDA_ALLOC_CONF | memory fraction (0 = none)
cat >"$S/configs" <<'LIST'
default - 0
expandable expandable_segments:True 0
max_split_64 max_split_size_mb:64 0
roundup_4 roundup_power2_divisions:4 0
gc_0_6 garbage_collection_threshold:0.6 0.08
LIST
while read -r name conf frac; do
  [ "$conf" = - ] && conf=""
  PYTORCH_CUDA_ALLOC_CONF="$conf" FRAC="$frac" python3 "$HERE/torch_alloc_trace.py" "$S/$name" \
    >"$S/$name.log" 2>&1 || { cat "$S/$name.log"; fail "torch_alloc_trace.py under \"$conf\""; }
  gunzip -f "$S/$name.pickle.gz" && "$M" import "$S/$name.pickle" -o "$S/$name.msnap" >/dev/null ||
    fail "import $name"
done <"$S/configs"
bad=0
while read -r name conf frac; do
  [ "$conf" = - ] && conf=""
  rconf=$conf
  [ "$frac" != 0 ] && rconf="$conf,memory_fraction:$frac"
  real=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_reserved"])' "$S/$name.json")
  for trace in "$name" default; do
    got=$("$M" replay "$S/$trace.msnap" -q --bytes -m "$total" -c "$rconf" | awk '$1 == "1" {print $4}')
    python3 -c 'import sys
real, got = int(sys.argv[1]), int(sys.argv[2])
err = 100.0 * (got - real) / real
print("trace %-12s config %-50s real %d replayed %d (%+.3f%%)" % (sys.argv[3], sys.argv[4] or "(defaults)", real, got, err))
sys.exit(0 if abs(err) <= 1.0 else 1)' "$real" "${got:-0}" "$trace" "$rconf" || bad=1
  done
done <"$S/configs"
[ $bad = 0 ] || fail "a replayed peak is more than 1% from PyTorch's"
echo ok

#!/bin/bash
# Issue 21's measurements on a GPU machine, in one command (docs/benchmarks.md,
# *Predict*):
#   predict_collect.sh BUNDLE OUT [WORK]
# BUNDLE  a folder with bin/memsnap, lib/libmemsnap.so and gpu-libs/ (from
#         tools/gpu-bundle, when the machine lacks their libraries);
#         predict_collect.py is found beside this script.
# OUT     where the results go (at most 8 files): predict-batch.tar,
#         predict-seq.tar, predict-gen.tar (each family's recordings
#         *.msnap.zst and every run's JSON), predict-oom.tar (the memory
#         fraction runs' JSON), predict-logs.tar.gz, checks.txt.
# WORK    scratch (default /tmp/memsnap-i21).
# Steps: 1. the PyTorch plugin (memsnap torch-setup, into the default cache
# where memsnap run finds it); 2. predict_collect.py plan: every run of its
# plan in a fresh process, several at once (see its PLAN); 3. a summary of
# one recording (the allocated layer must be there); 4. the tars.
# DEADLINE (seconds, default 240): no run starts after it; BUDGET (default
# 450): the whole command ends within it, tars written.
set -u
B=$(realpath "${1:?BUNDLE}"); OUT=${2:?OUT}; W=${3:-/tmp/memsnap-i21}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W/runs" "$OUT"
export LD_LIBRARY_PATH=$B/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
M=$B/bin/memsnap
R=$OUT/checks.txt
say() { echo "[+${SECONDS}s] $*" | tee -a "$R"; }

say "machine: $(nvidia-smi -L 2>&1 | head -1); $(nproc) cores; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'total', torch.cuda.get_device_properties(0).total_memory)" 2>&1 | tee -a "$R"

# ---- 1. the plugin -------------------------------------------------------------
timeout 150 "$M" torch-setup > "$W/setup.log" 2>&1
say "torch-setup: exit $? ($(tail -1 "$W/setup.log"))"

# ---- 2. the runs -----------------------------------------------------------------
# the whole command must end within ${BUDGET:-450} s with the tars written
left=$(( ${BUDGET:-450} - 30 - SECONDS )); dl=$(( left - 130 ))
[ $dl -gt "${DEADLINE:-240}" ] && dl=${DEADLINE:-240}
timeout $left python3 "$HERE/predict_collect.py" plan "$W/runs" --memsnap "$M" \
    --deadline $dl --jobs 8 --mem-gib 110 --run-limit 120 2>&1 | tee "$W/plan.log"
say "plan: $(tail -1 "$W/plan.log")"

# ---- 3. a look at one recording ----------------------------------------------------
f=$W/runs/batch-sdpa-b2-s512-def.msnap.zst
[ -f "$f" ] && timeout 60 "$M" summary "$f" > "$W/summary-b2.txt" 2>&1
say "summary of $(basename "$f"): $(grep -iE 'peak|allocated' "$W/summary-b2.txt" 2>/dev/null | head -3 | tr '\n' ' ')"
grep -h "memsnap:" "$W"/runs/*.log 2>/dev/null | sort | uniq -c | head -10 >> "$R"

# ---- 4. the tars ---------------------------------------------------------------------
cd "$W/runs" || exit 1
for fam in batch seq gen; do
    tar cf "$OUT/predict-$fam.tar" $(ls $fam-*.msnap.zst $fam-*.json 2>/dev/null)
done
tar cf "$OUT/predict-oom.tar" $(ls oom-*.json 2>/dev/null) results.jsonl
cd "$W" && tar czf "$OUT/predict-logs.tar.gz" setup.log plan.log summary-b2.txt runs/*.log 2>/dev/null
say "done"
ls -la "$OUT" | tee -a "$R"

#!/bin/bash
# The dry run of tests/gpu/h200x2_issue34.sh on the simulated device's two
# devices, without a GPU or PyTorch (ctest gpuscripts.h200x2_dry): the
# runner, dist_llama.py and h200x2_check.py run end to end on
# tests/gpu/fake (a stand-in for torch, transformers and pynvml whose
# memory goes through the recorder as PyTorch's plugin would send it, and
# tests/recorder/fake_nccl.c as NCCL), so that a typo or a wrong key costs
# no GPU lease.  Passes when the runner's every check passes but the
# reserved predictions (the fake's memory is no caching allocator), the
# checks are all there, and OUT holds what the device tool brings back (at
# most 8 files, none over 16 MiB, no folder).
#   h200x2_dry.sh MEMSNAP SIMDEV_DIR FAKE_NCCL SCRATCH
set -u
M=${1:?MEMSNAP}; SIMDEV=${2:?SIMDEV_DIR}; NCCL=${3:?FAKE_NCCL}; T=${4:?SCRATCH}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$T"; mkdir -p "$T"
PYTHONPATH=$here/fake LD_LIBRARY_PATH=$SIMDEV MEMSNAP_SIM_DEVICES=2 MEMSNAP_SIM_DEVICE_MEM=16G \
    H34_RUN_ARGS="--sim-device 16G --sim-devices 2 --no-torch-build" H34_NO_TORCH_SETUP=1 \
    H34_FAKE_NCCL=$NCCL H34_WORK=$T/work H34_ROUNDS=2 MEMSNAP_PYTHON=python3 \
    bash "$here/h200x2_issue34.sh" "$T/out" "$M" > "$T/log" 2>&1
rc=$?
S=$T/out/summary.txt
[ -f "$S" ] || fail "no summary.txt (exit $rc): $(tail -20 "$T/log")"
bad=$(grep '^\[check\] FAIL ' "$S" | grep -v 'FAIL predict rank [01] at batch [0-9]* ([0-9]*x): reserved ')
[ -z "$bad" ] || fail "the runner failed: $bad"
grep -q '^\[+[0-9]*s\] FAIL' "$S" && fail "the runner failed: $(grep '^\[+[0-9]*s\] FAIL' "$S")"
n=$(grep -c '^\[check\] PASS ' "$S")
all=$(grep -c '^\[check\] \(PASS\|FAIL\) ' "$S")
[ "$all" = 62 ] || fail "expected 62 checks, got $all: $(grep '^\[check\] \(PASS\|FAIL\) ' "$S" | cut -c1-60)"
for want in "allocated peak [0-9]* == max_memory_allocated" "NCCL in the driver table: 32.0 MiB" \
            "all_gather [0-9.]* MiB, reduce_scatter" "not explained 500.0 MiB within" \
            "fsdp job: rank 1 the highest" "oom job: exit 1, 1 rank(s) ran out: \[1\]" \
            "at batch 16 (8x): allocated" "overhead: 2 of 2 rounds"; do
    grep -q "PASS .*$want" "$S" || fail "no passing check '$want'"
done
files=$(cd "$T/out" && find . -mindepth 1 | sort | tr '\n' ' ')
[ "$files" = "./figures.json ./job-fsdp.txt ./job-oom.txt ./logs.tar.gz ./overhead.json ./predict.txt ./recordings.tar ./summary.txt " ] ||
    fail "OUT holds: $files"
find "$T/out" -type f -size +16M | grep -q . && fail "a file over 16 MiB: $(find "$T/out" -size +16M)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not {"ddp","fsdp","job-fsdp","job-oom","predict","overhead"} <= set(d))' \
    "$T/out/figures.json" || fail "figures.json lacks a step"
echo "h200x2 dry run: $n checks passed ($(grep -c 'FAIL predict' "$S") reserved predictions of the fake off), exit $rc"

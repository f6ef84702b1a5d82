#!/bin/bash
# Issue 20's measurements on a GPU machine, in one command (docs/benchmarks.md,
# *PyTorch: block sizes and autograd nodes*):
#   h200_issue20.sh BUILD SRC OUT [WORK]
# BUILD  a memsnap build (bin/memsnap, lib/libmemsnap.so, tests/recorder/
#        snapcheck, tests/gpu/gpu_probe; gpu-libs/ from tools/gpu-bundle when
#        the machine lacks its libraries; bin/zstd and bin/jq when it lacks
#        those);
# SRC    memsnap's source tree (tests/gpu, torch/);
# OUT    where the results go, as they are made (at most 8 files):
#          train-llama.msnap.zst, train-llama.oracle.json,
#          train-llama.check.json, generate-llama.msnap.zst,
#          generate-llama.oracle.json, steptime.jsonl, checks.txt, logs.tar.gz
# WORK   scratch (default /tmp/memsnap-i20).
# Steps: 1. the plugin (memsnap torch-setup; with MEMSNAP_TORCH_NO_AUTOGRAD,
# then also _NO_GAUGE, if the full one does not compile); 2. at once: the
# recorded training loop (torch_llama.py train: 5 steps + 2 under the
# profiler, zstd) and generate() run ("record"), and the GPU torch tests
# (torch_oracle.sh default/expandable/ring, cases_gpu.sh torch-*,
# torch_nodes.sh: "tests", H200_TESTS names them); 3. the checks of both
# recordings (torch_llama_check.py); 4. step times, alone on the machine
# ("time"): processes without and with the recorder in turn, and inside the
# recorded ones the recorder as before format 1.2 (v1), with block sizes
# (off) and with node names too (on) step by step (torch_llama.py time).
# H200_STEPS picks among record, tests and time (default all); no step-time
# process starts after H200_DEADLINE seconds (360).  Each step
# has a time limit; the run goes on after a failure and says so in
# checks.txt.
set -u
# The checks compare PyTorch's trace entry for entry, free requests
# included: they are not recorded by default (docs/recorder.md).
export MEMSNAP_TORCH_FREE_REQUESTED=1
B=$(realpath "${1:?BUILD}"); S=$(realpath "${2:?SRC}"); OUT=${3:?OUT}; W=${4:-/tmp/memsnap-i20}
STEPS=" ${H200_STEPS:-record tests time} "     # which of 2 (record, tests), 3 and 4 to run
TESTS=${H200_TESTS:-oracle-default oracle-expandable oracle-ring torch-default torch-expandable torch-sites torch-llama-pyframes nodes}
want() { [[ $STEPS == *" $1 "* ]]; }
rm -rf "$W"; mkdir -p "$W" "$OUT"
export LD_LIBRARY_PATH=$B/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$B/bin:$PATH PYTHONUNBUFFERED=1
M=$B/bin/memsnap
G=$S/tests/gpu
R=$OUT/checks.txt
say() { echo "[+${SECONDS}s] $*" | tee -a "$R"; }

say "machine: $(nvidia-smi -L 2>&1 | head -1); $(nproc) cores"
python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" 2>&1 | tee -a "$R"
g++ --version | head -1 >> "$R"

# ---- 1. the plugins --------------------------------------------------------
(
    for flags in "" "-DMEMSNAP_TORCH_NO_AUTOGRAD" "-DMEMSNAP_TORCH_NO_AUTOGRAD -DMEMSNAP_TORCH_NO_GAUGE"; do
        echo "== torch-setup ${flags:-(full)}"
        if MEMSNAP_TORCH_CXXFLAGS=$flags timeout 240 "$M" torch-setup --out-dir "$W/plugin"; then
            echo "built with: ${flags:-(full)}" > "$W/plugin.flags"; break
        fi
    done
) > "$W/setup.log" 2>&1 &
wait
say "plugin: $(cat "$W/plugin.flags" 2>/dev/null || echo 'NOT BUILT')"
grep -iE "error|warning" "$W/setup.log" | head -20 >> "$R"
cp "$W"/plugin/libmemsnap_torch-*.so "$B/lib/" 2>/dev/null     # found beside libmemsnap.so
mkdir -p "$W/cases/plugin" && cp "$W"/plugin/libmemsnap_torch-*.so "$W/cases/plugin/" 2>/dev/null

# ---- 2. recordings and the GPU torch tests, at once ------------------------
export MEMSNAP="$M" SNAPCHECK="$B/tests/recorder/snapcheck" GPU_PROBE="$B/tests/gpu/gpu_probe" \
       TESTS_DIR="$G" CASE_DIR="$W/cases" MEMSNAP_PYTHON=python3
if want record; then
    timeout 180 "$M" run -o "$W/train-llama.msnap.zst" -- python3 "$G/torch_llama.py" train \
        "$W/train-llama.oracle.json" > "$W/train.log" 2>&1 &
    p_train=$!
    timeout 180 "$M" run -o "$W/generate-llama.msnap.zst" -- python3 "$G/torch_llama.py" generate \
        "$W/generate-llama.oracle.json" > "$W/generate.log" 2>&1 &
    p_gen=$!
fi
tests=()
want tests && read -r -a tests <<< "$TESTS"
for t in "${tests[@]}"; do
    case $t in
    oracle-*) cmd=(bash "$G/torch_oracle.sh" "${t#oracle-}") ;;
    nodes) cmd=(bash "$G/torch_nodes.sh") ;;
    *) cmd=(bash "$G/cases_gpu.sh" "$t") ;;
    esac
    (timeout 150 "${cmd[@]}" > "$W/test-$t.log" 2>&1; echo $? > "$W/test-$t.rc") &
done
if want record; then
    wait $p_train; say "train recording: exit $? ($(tail -1 "$W/train.log"))"
    wait $p_gen; say "generate recording: exit $? ($(tail -1 "$W/generate.log"))"
    for f in train-llama.msnap.zst train-llama.oracle.json generate-llama.msnap.zst \
             generate-llama.oracle.json; do
        cp "$W/$f" "$OUT/" 2>/dev/null
    done
fi
wait
for t in "${tests[@]}"; do
    rc=$(cat "$W/test-$t.rc" 2>/dev/null || echo "?")
    say "test $t: exit $rc ($(grep -E 'passed|FAIL|SKIP' "$W/test-$t.log" | tail -1))"
done

# ---- 3. checks ----------------------------------------------------------------
want record && for k in train generate; do
    say "== check $k-llama"
    zstd -dc "$W/$k-llama.msnap.zst" 2>/dev/null | timeout 120 python3 "$G/torch_llama_check.py" - \
        "$W/$k-llama.oracle.json" --json "$W/$k-llama.check.json" 2>&1 | tee -a "$R"
done
if want record; then
    cp "$W/train-llama.check.json" "$OUT/" 2>/dev/null
    "$M" summary "$W/train-llama.msnap.zst" > "$W/train-summary.txt" 2>&1
    "$M" summary "$W/generate-llama.msnap.zst" > "$W/generate-summary.txt" 2>&1
fi

# ---- 4. step times, alone -------------------------------------------------------
# Processes without and with the recorder take turns (none, rec, none, rec);
# inside each recorded one, the modes v1, off and on take turns step by step
# (torch_llama.py time), so their differences are not those of two processes.
if want time; then
    for v in ${H200_TIME_ORDER:-none rec none rec}; do
        [ $SECONDS -lt "${H200_DEADLINE:-360}" ] || { say "time $v: skipped (no time left)"; continue; }
        if [ $v = none ]; then
            cmd=(python3 "$G/torch_llama.py" time "$W/steptime.jsonl" --variant none --rounds "${H200_ROUNDS:-12}")
        else
            cmd=("$M" run -q --no-symbolize -o "$W/time-$v.msnap.zst" --
                 python3 "$G/torch_llama.py" time "$W/steptime.jsonl" --variant rec --rounds "${H200_ROUNDS:-12}")
        fi
        timeout 90 "${cmd[@]}" > "$W/time-$v.log" 2>&1
        say "time $v: exit $? $(tail -3 "$W/time-$v.log" | tr '\n' ' ')"
        cp "$W/steptime.jsonl" "$OUT/" 2>/dev/null
    done
    python3 "$G/torch_llama.py" times "$W/steptime.jsonl" 2>&1 | tee -a "$R"
fi

# ---- 5. logs ---------------------------------------------------------------------
say "done"
tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.msnap' --exclude='*.msnap.zst' --exclude='*.so' \
    --exclude='plugin*' . 2>/dev/null
ls -la "$OUT" | tee -a "$R"

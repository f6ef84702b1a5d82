#!/bin/bash
# Everything still to be run on one H200, in one device call of at most
# SECONDS (the session's device time less the machine's start), in the
# order it matters, each part inside a share of the time so that a part
# that runs long cannot take the later ones' (issues 28, 32, 30):
#
#   28ls  the recorder's cost against plain processes, in lockstep
#         (bench/bench_lockstep.py: plain, default, driver, loaded-off,
#         memsnap.record() and the plugin muted, one step of each in turn,
#         fresh processes every round), the training loop
#   32    memsnap top --once and the Prometheus metrics against
#         torch.cuda.memory_allocated() at a mark (tests/gpu/live_torch.py);
#         keeps the frame and the metrics for the README
#   30    the serving engine's categories (parameters = the weights) and
#         the LoRA run's gradients (serving_pools.py --parts lora)
#   28lc  the lockstep again on the torch.compile loop, in what time is
#         left
#
#   tests/gpu/lease_all.sh WHEEL OUT SECONDS
#
# OUT receives at most 8 files (the device tool's limit): lease.log (all
# output, as it goes) and one PART.tar.gz per part, written when the part
# ends, so a call cut off at its limit still brings back every part done.
set -u
wheel=${1:?usage: lease_all.sh WHEEL OUT SECONDS}
out=${2:?usage: lease_all.sh WHEEL OUT SECONDS}
total=${3:?usage: lease_all.sh WHEEL OUT SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${MEMSNAP_PYTHON:-python3}
start=$(date +%s)
mkdir -p "$out"
log=$out/lease.log
work=/tmp/lease-work
rm -rf "$work"; mkdir -p "$work"
left() { echo $((total - ($(date +%s) - start))); }
say() { echo "[+$(($(date +%s) - start))s] $*" | tee -a "$log"; }
pack() {  # pack PART FILES...: OUT/PART.tar.gz of what exists
    local part=$1; shift
    local have=()
    for f in "$@"; do [ -e "$f" ] && have+=("$f"); done
    [ ${#have[@]} -gt 0 ] && tar -czf "$out/$part.tar.gz" "${have[@]}" 2>/dev/null
    say "$part: packed ($(du -k "$out/$part.tar.gz" 2>/dev/null | cut -f1) KiB)"
}

# ---- the wheel, laid out as a build (bin/memsnap, python/), and the plugin
d=/tmp/msnap-lease
rm -rf "$d" "$d-build"
"$py" -m pip install -q --no-deps --no-index --no-compile --target "$d" "$wheel" 2>&1 | tee -a "$log"
mkdir -p "$d-build"
ln -s "$d/memsnap/_native/bin" "$d-build/bin"
ln -s "$d" "$d-build/python"
M=$d/memsnap/_native/bin/memsnap
[ -x "$M" ] || { say "FAIL: the wheel did not install"; exit 1; }
{
    echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
    echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    "$py" -c 'import torch, transformers, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'
    "$M" --version
} 2>&1 | tee -a "$log"
"$M" torch-setup --python "$(command -v "$py")" 2>&1 | tail -2 | tee -a "$log"
plug=$(ls -t ~/.cache/memsnap/torch/libmemsnap_torch-*.so 2>/dev/null | head -1)
[ -n "$plug" ] || { say "FAIL: no plugin built"; exit 1; }
say "setup done"

# ---- 28ls: lockstep, the training loop
b28=$(( $(left) - 170 ))   # 32 and 30 take about 45 s each after it
[ "$b28" -gt 150 ] && b28=150
say "28ls: budget ${b28} s"
PYTHONUNBUFFERED=1 timeout $((b28 + 30)) "$py" "$root/bench/bench_lockstep.py" --memsnap "$M" \
    --pythonpath "$d" --configs plain,default,driver,loaded-off,record,muted --rounds 10 \
    --cycles 30 --cpus 2-9 --stage-cpus 10-15 --budget "$b28" --out "$work/lockstep-train.json" \
    2>&1 | tee -a "$log"
pack 28ls "$work/lockstep-train.json"

# ---- 32: top and the metrics against memory_allocated()
if [ "$(left)" -gt 100 ]; then
    say "32: live_torch"
    MEMSNAP_PYTHON=$(command -v "$py") timeout 100 "$py" "$here/live_torch.py" "$d-build" \
        "$work/32" 2>&1 | tee -a "$log"
    pack 32 "$work/32/memsnap-run-top.txt" "$work/32/memsnap-run-metrics.txt" \
        "$work/32/memsnap.record-top.txt" "$work/32/memsnap.record-metrics.txt"
fi

# ---- 30: the engine's categories and the LoRA run's gradients
if [ "$(left)" -gt 70 ]; then
    say "30: serving_pools --parts lora"
    mkdir -p "$work/30/plugin"
    cp "$plug" "$work/30/plugin/"
    MEMSNAP=$M CASE_DIR=$work/30 MEMSNAP_PYTHON=$(command -v "$py") \
        PYTHONPATH=$d${PYTHONPATH:+:$PYTHONPATH} timeout $(( $(left) - 10 )) bash "$here/serving_pools.sh" \
        --parts lora 2>&1 | tee -a "$log"
    pack 30 "$work/30/serving-pools/figures.json"
fi

# ---- 28lc: lockstep, the torch.compile loop, in what is left
bc=$(( $(left) - 25 ))
if [ "$bc" -gt 60 ]; then
    say "28lc: budget ${bc} s"
    PYTHONUNBUFFERED=1 timeout $((bc + 15)) "$py" "$root/bench/bench_lockstep.py" --memsnap "$M" \
        --pythonpath "$d" --configs plain,default,record --workload compile --rounds 10 \
        --cycles 30 --cpus 2-9 --stage-cpus 10-15 --budget "$bc" \
        --out "$work/lockstep-compile.json" 2>&1 | tee -a "$log"
    pack 28lc "$work/lockstep-compile.json"
fi
say "done"

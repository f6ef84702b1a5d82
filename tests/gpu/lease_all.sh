#!/bin/bash
# What is still to be run on one GPU, in one device call of at most SECONDS
# (the session's device time less the machine's start), the parts in the
# order given, each in its share of the time so that a part that runs long
# cannot take the later ones':
#
#   28ls  the recorder's cost against plain processes in lockstep
#         (bench/bench_lockstep.py: plain, default, driver, loaded-off,
#         memsnap.record() and the plugin muted, one step of each in turn,
#         fresh processes every round), the training loop: issue 28's table
#   28lb  the bisection of the defaults' cost, the same way: the tracker
#         muted, the plugin's own work alone, no stacks, no zstd, ring mode,
#         no autograd nodes, the writer thread on a CPU of its own (15)
#   28lc  the lockstep on the torch.compile loop: plain, default, driver,
#         memsnap.record()
#   28ws  the launching thread's Python walks a step (bench/walk_stats.py:
#         memo, proven, the long way, code-table asks, frames), the
#         training and the compile loop, about 40 s
#   32    memsnap top --once and the Prometheus metrics against
#         torch.cuda.memory_allocated() at a mark (tests/gpu/live_torch.py),
#         keeping the frame and the metrics
#   30    the serving engine's pools and categories, replay against real
#         runs and the LoRA run's gradients (serving_pools.py --parts lora)
#   oracle  the allocated layer against PyTorch's own history, entry for
#         entry (torch_oracle.sh default and expandable, or the cases of
#         LEASE_ORACLE_CASES), about 60 s
#
#   tests/gpu/lease_all.sh WHEEL OUT SECONDS [PARTS]    (default 28ls,28lb,28lc)
#
# LEASE_28LS_CONFIGS replaces 28ls's configurations (bench_overhead.py's
# names; plain first; NAME@old with LEASE_OLD_WHEEL, below) and
# LEASE_28LS_SHARE its share in percent and LEASE_28LS_ROUNDS its rounds
# at most (10; the budget may end it sooner), so that one call can hold the
# table and the bisection's points.
#
# Shares: 28ls 45%, 28lb 30%, 28lc the rest; 32 and 30 about 45 s each.
# OUT receives at most 8 files (the device tool's limit): lease.log (all
# output, as it goes) and one PART.tar.gz per part, written when the part
# ends, so a call cut off at its limit still brings back every part done.
set -u
wheel=${1:?usage: lease_all.sh WHEEL OUT SECONDS [PARTS]}
out=${2:?usage: lease_all.sh WHEEL OUT SECONDS [PARTS]}
total=${3:?usage: lease_all.sh WHEEL OUT SECONDS [PARTS]}
parts=${4:-28ls,28lb,28lc}
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
    echo "siblings: $(for c in 2 3 9 15; do printf 'cpu%s=%s ' $c "$(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null)"; done)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
    "$py" -c 'import torch, transformers, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'
    "$M" --version
    echo "wheel: $(sha256sum "$wheel" | cut -c1-16)"
} 2>&1 | tee -a "$log"
"$M" torch-setup --python "$(command -v "$py")" 2>&1 | tail -2 | tee -a "$log"
plug=$(ls -t ~/.cache/memsnap/torch/libmemsnap_torch-*.so 2>/dev/null | head -1)
[ -n "$plug" ] || { say "FAIL: no plugin built"; exit 1; }
# LEASE_OLD_WHEEL: a second wheel for configurations NAME@old (the A/B of a
# change), installed beside, with its own plugin in its library's folder
# (where its recorder looks first), so that neither build loads the other's.
builds=()
if [ -n "${LEASE_OLD_WHEEL:-}" ]; then
    o=/tmp/msnap-old
    rm -rf "$o"
    "$py" -m pip install -q --no-deps --no-index --no-compile --target "$o" "$LEASE_OLD_WHEEL" 2>&1 | tee -a "$log"
    OM=$o/memsnap/_native/bin/memsnap
    olib=$(find "$o" -name libmemsnap.so | head -1)
    [ -n "$olib" ] && olib=$(dirname "$olib")
    if [ -x "$OM" ] && [ -n "$olib" ] && [ -d "$olib" ] &&
       "$OM" torch-setup --python "$(command -v "$py")" --out-dir "$olib" 2>&1 | tail -1 | tee -a "$log" &&
       ls "$olib"/libmemsnap_torch-*.so >/dev/null 2>&1; then
        builds=(--build "old=$OM")
        say "old build: $OM (wheel $(sha256sum "$LEASE_OLD_WHEEL" | cut -c1-16)), its plugin in $olib"
    else
        say "FAIL: the old wheel did not install or its plugin did not build"
        exit 1                  # NAME@old rows would be the new build's
    fi
fi
# configuration tlsie: the plugin built again with its thread's state in
# initial-exec TLS (MEMSNAP_TORCH_TLS_IE), in a folder of its own
case ",${LEASE_28LS_CONFIGS:-}," in *,tlsie,*)
    export MEMSNAP_BENCH_PLUGIN_IE_DIR=/tmp/msnap-plugin-ie
    rm -rf "$MEMSNAP_BENCH_PLUGIN_IE_DIR"
    MEMSNAP_TORCH_CXXFLAGS=-DMEMSNAP_TORCH_TLS_IE "$M" torch-setup --python "$(command -v "$py")" \
        --out-dir "$MEMSNAP_BENCH_PLUGIN_IE_DIR" 2>&1 | tail -1 | tee -a "$log"
    ls "$MEMSNAP_BENCH_PLUGIN_IE_DIR"/libmemsnap_torch-*.so >/dev/null 2>&1 ||
        { say "FAIL: the initial-exec plugin did not build"; exit 1; }
    ;;
esac
say "setup done; parts $parts"

# lockstep PART BUDGET WORKLOAD CONFIGS ROUNDS
lockstep() {
    say "$1: budget $2 s"
    PYTHONUNBUFFERED=1 timeout $(($2 + 30)) "$py" "$root/bench/bench_lockstep.py" --memsnap "$M" \
        --pythonpath "$d" --configs "$4" --workload "$3" --rounds "$5" \
        --cpus 2-9 --stage-cpus 10-15 --budget "$2" --cycles "${LEASE_CYCLES:-30}" "${builds[@]}" \
        --out "$work/$1.json" 2>&1 | tee -a "$log"
    pack "$1" "$work/$1.json"
}

n=$(echo "$parts" | tr ',' '\n' | grep -c .)
i=0
for part in $(echo "$parts" | tr ',' ' '); do
    i=$((i + 1))
    rest=$(( $(left) - 20 ))
    [ "$rest" -gt 40 ] || { say "$part: no time left"; break; }
    case $part in
    28ls) share=$(( rest * ${LEASE_28LS_SHARE:-45} / 100 )); [ "$i" = "$n" ] && share=$rest
          lockstep 28ls "$share" train "${LEASE_28LS_CONFIGS:-plain,default,driver,loaded-off,record,muted}" "${LEASE_28LS_ROUNDS:-10}" ;;
    28lb) share=$(( rest * 55 / 100 )); [ "$i" = "$n" ] && share=$rest
          lockstep 28lb "$share" train plain,default,muted,plugin,nostack,nocompress,ring,nonodes,writerfar 10 ;;
    28lc) lockstep 28lc "$rest" compile plain,default,driver,record 10 ;;
    32)
        say "32: live_torch"
        MEMSNAP_PYTHON=$(command -v "$py") timeout 100 "$py" "$here/live_torch.py" "$d-build" \
            "$work/32" 2>&1 | tee -a "$log"
        pack 32 "$work/32/memsnap-run-top.txt" "$work/32/memsnap-run-metrics.txt" \
            "$work/32/memsnap.record-top.txt" "$work/32/memsnap.record-metrics.txt"
        ;;
    30)
        say "30: serving_pools --parts lora"
        mkdir -p "$work/30/plugin"
        cp "$plug" "$work/30/plugin/"
        MEMSNAP=$M CASE_DIR=$work/30 MEMSNAP_PYTHON=$(command -v "$py") \
            PYTHONPATH=$d${PYTHONPATH:+:$PYTHONPATH} timeout "$rest" bash "$here/serving_pools.sh" \
            --parts lora 2>&1 | tee -a "$log"
        pack 30 "$work/30/serving-pools/figures.json"
        ;;
    oracle)
        say "oracle: torch_oracle.sh default, expandable (PyTorch's own history, entry for entry)"
        mkdir -p "$work/oracle/plugin"
        cp "$plug" "$work/oracle/plugin/"
        for c in ${LEASE_ORACLE_CASES:-default expandable}; do
            MEMSNAP=$M CASE_DIR=$work/oracle MEMSNAP_PYTHON=$(command -v "$py") \
                PYTHONPATH=$d${PYTHONPATH:+:$PYTHONPATH} timeout 150 bash "$here/torch_oracle.sh" \
                "$c" 2>&1 | tail -12 | tee -a "$log"
        done
        ;;
    28ws)
        say "28ws: the launching thread's Python walks a step (bench/walk_stats.py)"
        mkdir -p "$work/28ws"
        for w in train compile; do
            PYTHONPATH="$d" timeout 120 "$M" run -q -o "$work/28ws/$w.msnap" -- \
                "$py" "$root/bench/walk_stats.py" --workload "$w" 2>&1 | tee -a "$log" \
                | tee -a "$work/28ws/walks.txt"
        done
        rm -f "$work/28ws"/*.msnap
        pack 28ws "$work/28ws/walks.txt"
        ;;
    *) say "unknown part $part (28ls, 28lb, 28lc, 28ws, 32, 30, oracle)" ;;
    esac
done
say "done"

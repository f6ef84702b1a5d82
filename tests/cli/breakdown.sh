#!/bin/bash
# memsnap summary's reconciliation (device used against recorded memory, by
# library), categories and several-rank comparison, on hand-written
# snapshots (data/reconcile.msnap, data/peak-between.msnap, data/rank0.msnap,
# data/rank1.msnap) and,
# for the recorder side, on the simulated device with its simulated NVML.
# One case per ctest; run as: breakdown.sh CASE
# Environment (set by CMake): MEMSNAP, DATA, SCRATCH; for the recorder
# cases also ROUTE_TEST and MEMSNAP_SIMDEV_DIR.
set -u
case_name=${1:?case}
T=${SCRATCH:?}/breakdown-$case_name
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }
command -v jq > /dev/null || fail "jq is missing (scripts/setup.sh installs it)"
# check JQ-EXPR FILE: the jq expression must be true on the JSON in FILE
check() { jq -e "$1" "$2" > /dev/null || fail "not true: $1 (got: $(jq -c "${3:-.}" "$2"))"; }
MiB=1048576

case $case_name in
arithmetic)  # device used = recorded + unexplained; libraries add up to recorded
    "$MEMSNAP" summary --json "$DATA/reconcile.msnap" > "$T/s.json"; rc=$?
    [ $rc = 1 ] || fail "exit $rc, expected 1 (the file has an OOM)"
    R='.reconcile[0]'
    check "$R.device_used == $R.recorded + $R.unexplained" "$T/s.json" "$R"
    check "([$R.libraries[].bytes] | add) == $R.recorded" "$T/s.json" "$R"
    check "$R.device_used == 1719796736 and $R.unexplained == 536870912" "$T/s.json" "$R"
    check "$R.moment == \"highest_device_used\" and $R.t_ns == 1900" "$T/s.json" "$R"
    check "[$R.libraries[] | select(.library == \"cuBLAS\") | .bytes] == [67240960]" "$T/s.json" "$R"
    check "[$R.libraries[] | select(.library == \"NCCL\") | .bytes] == [33554432]" "$T/s.json" "$R"
    check "[$R.libraries[] | select(.library == \"PyTorch allocator\") | .bytes] == [1073741824]" "$T/s.json" "$R"
    check "[$R.libraries[] | select(.library == \"libfoo.so\") | .bytes] == [8388608]" "$T/s.json" "$R"
    check "$R.torch_reserved == 1073741824 and $R.torch_reserved_from == \"segments\"" "$T/s.json" "$R"
    check "$R.torch_allocated == 838860800" "$T/s.json" "$R"
    check "$R.recorded_peak == null" "$T/s.json" "$R"
    ;;
peak-between)  # recorded memory peaked between two counters samples (data/peak-between.msnap:
               # 300 MiB at 2 us, 100 MiB at the sample of 3 us): the text's line and its JSON
    "$MEMSNAP" summary "$DATA/peak-between.msnap" > "$T/out" || fail "exit $?"
    grep -qx "  (recorded memory peaked between samples: 300.00 MiB at 2.000 us)" "$T/out" ||
        fail "no peak-between line: $(grep -A2 'against the driver' "$T/out")"
    "$MEMSNAP" summary --json "$DATA/peak-between.msnap" > "$T/s.json" || fail "exit $?"
    R='.reconcile[0]'
    check "$R.t_ns == 3000 and $R.recorded == $((100 * MiB))" "$T/s.json" "$R"
    check "$R.recorded_peak == {\"bytes\": $((300 * MiB)), \"t_ns\": 2000}" "$T/s.json" "$R"
    ;;
text)  # the same in text: every row, the remainder named
    "$MEMSNAP" summary "$DATA/reconcile.msnap" > "$T/out"
    for p in "device used \(NVML, nvidia-smi\) 1.60 GiB" "recorded, all libraries +1.10 GiB" \
             "cuBLAS +64.13 MiB" "NCCL +32.00 MiB" "PyTorch reserved +1.00 GiB" \
             "PyTorch allocated +800.00 MiB" "not explained by allocations +512.00 MiB"; do
        grep -Eq "$p" "$T/out" || fail "no line matching '$p'"
    done
    ;;
not-recorded)  # a file without device_used: said so, the rest still shown
    "$MEMSNAP" summary "$DATA/basic.msnap" > "$T/out" 2> "$T/err" || fail "exit $?"
    [ ! -s "$T/err" ] || fail "stderr: $(cat "$T/err")"
    grep -q "device used: not recorded" "$T/out" || fail "no 'device used: not recorded'"
    grep -Eq "recorded, all libraries +5.06 MiB" "$T/out" || fail "no recorded total"
    "$MEMSNAP" summary --json "$DATA/basic.msnap" > "$T/s.json"
    check '.reconcile[0].device_used == null and .reconcile[0].unexplained == null' "$T/s.json" '.reconcile'
    check '.reconcile[0].moment == "peak_recorded"' "$T/s.json" '.reconcile'
    ;;
categories)  # default rules on Python + native frames; the split at the peak and at the OOM
    "$MEMSNAP" summary --json "$DATA/reconcile.msnap" > "$T/s.json"
    C='.categories[0]'
    cat_is() { check "[$C.items[] | select(.category == \"$1\") | .$2] == [$3]" "$T/s.json" "$C"; }
    check "$C.layer == \"blocks\"" "$T/s.json" "$C"
    cat_is parameters peak $((400 * MiB))
    cat_is optimizer_state peak $((100 * MiB))
    cat_is gradients peak $((100 * MiB))
    # the forward's memory freed before the forward ended: temporaries
    cat_is temporaries peak $((200 * MiB))
    cat_is temporaries at_oom 0
    cat_is kv_cache at_oom $((50 * MiB))
    cat_is kv_cache at_total_peak 0
    cat_is workspaces peak 67240960
    cat_is communication peak $((32 * MiB))
    cat_is other peak $((8 * MiB))
    check "([$C.items[].at_total_peak] | add) == $C.total_peak" "$T/s.json" "$C"
    check "$C.oom_t_ns == 2200" "$T/s.json" "$C"
    ;;
blocks-once)  # with allocator blocks, segments without frames are not counted
              # beside their blocks: the categories add up to allocated
    "$MEMSNAP" summary --json "$DATA/blocks.msnap" > "$T/s.json" || fail "exit $?"
    check '.categories[0].layer == "blocks"' "$T/s.json" '.categories'
    check '.categories[0].total_peak == .devices[0].allocated.peak' "$T/s.json" '.categories'
    ;;
user-rules)  # a user rule goes before the defaults; a new category; also from the environment
    printf '# forward of our model is its own category\nmy_forward  python  */work/model.py  Net.forward\n' > "$T/rules"
    "$MEMSNAP" summary --json --category-rules "$T/rules" "$DATA/reconcile.msnap" > "$T/s.json"
    C='.categories[0]'
    check "[$C.items[] | select(.category == \"my_forward\") | .peak] == [$((200 * MiB + 67240960))]" "$T/s.json" "$C"
    check "[$C.items[] | select(.category == \"activations\")] == []" "$T/s.json" "$C"
    check "[$C.items[] | select(.category == \"parameters\") | .peak] == [$((400 * MiB))]" "$T/s.json" "$C"
    MEMSNAP_CATEGORY_RULES="$T/rules" "$MEMSNAP" summary "$DATA/reconcile.msnap" > "$T/out"
    grep -q "^  my_forward " "$T/out" || fail "MEMSNAP_CATEGORY_RULES not read"
    ;;
bad-rules)  # one line on stderr naming file and line, exit 2
    printf 'parameters python */x.py\nweights  elsewhere  *\n' > "$T/rules"
    "$MEMSNAP" summary --category-rules "$T/rules" "$DATA/reconcile.msnap" > "$T/out" 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "exit $rc, expected 2"
    [ "$(wc -l < "$T/err")" = 1 ] || fail "stderr: $(cat "$T/err")"
    grep -q "rules:2: expected" "$T/err" || fail "stderr: $(cat "$T/err")"
    printf 'Bad-Name module libx*\n' > "$T/rules2"
    "$MEMSNAP" summary --category-rules "$T/rules2" "$DATA/reconcile.msnap" 2> "$T/err" > /dev/null; rc=$?
    [ $rc = 2 ] && grep -q "rules2:1: category" "$T/err" || fail "bad name: exit $rc, $(cat "$T/err")"
    "$MEMSNAP" summary --category-rules "$T/none" "$DATA/reconcile.msnap" 2> "$T/err" > /dev/null; rc=$?
    [ $rc = 2 ] && grep -q "none: cannot read" "$T/err" || fail "missing file: exit $rc, $(cat "$T/err")"
    ;;
ranks)  # summary --each: which rank peaked highest, by how much, on which sites
    "$MEMSNAP" summary --each "$DATA/rank0.msnap" "$DATA/rank1.msnap" > "$T/out" || fail "exit $?"
    grep -q "highest peak reserved: .*rank1.msnap (1.75 GiB)" "$T/out" || fail "no highest rank"
    grep -q "by 512.00 MiB (40.0%) above the next highest, .*rank0.msnap (1.25 GiB)" "$T/out" || fail "no difference"
    grep -Eq "^  \+512.00 MiB +grow_buffer \(comm.c:7\) \(peak 768.00 MiB vs 256.00 MiB\)" "$T/out" || fail "no site"
    grep -q "alloc_weights" <(sed -n '/^sites higher/,$p' "$T/out") && fail "a site with the same peak listed"
    "$MEMSNAP" summary --each --json "$DATA/rank0.msnap" "$DATA/rank1.msnap" > "$T/s.json"
    H='.highest_peak'
    check "$H.file | endswith(\"rank1.msnap\")" "$T/s.json" "$H"
    check "$H.above_next == 536870912 and $H.next_peak == 1342177280" "$T/s.json" "$H"
    check "$H.sites == [{\"label\":\"grow_buffer (comm.c:7)\",\"peak\":805306368,\"peak_next\":268435456,\"difference\":536870912}]" "$T/s.json" "$H"
    ;;
sim-nvml)  # the recorder writes device_used from NVML (simulated: used + 500 MiB)
    MEMSNAP_COUNTERS_MS=50 "$MEMSNAP" run --sim-device 8G -o "$T/s.msnap" -- "$ROUTE_TEST" hold 5 > "$T/out" &
    pid=$!
    for _ in $(seq 1 200); do grep -q ready "$T/out" 2>/dev/null && break; sleep 0.05; done
    grep -q ready "$T/out" || { kill $pid; fail "program did not start"; }
    sleep 0.3
    kill -TERM $pid; wait $pid; rc=$?
    [ $rc = 0 ] || fail "memsnap run exit $rc"
    "$MEMSNAP" summary --json "$T/s.msnap" > "$T/s.json"
    R='.reconcile[0]'
    check "$R.moment == \"highest_device_used\"" "$T/s.json" "$R"
    check "$R.recorded == $((5 * MiB)) and $R.device_used == $((505 * MiB))" "$T/s.json" "$R"
    check "$R.unexplained == $((500 * MiB))" "$T/s.json" "$R"
    check "$R.libraries == [{\"library\":\"route_test\",\"bytes\":$((5 * MiB))}]" "$T/s.json" "$R"
    ;;
sample-missed-peak)  # device used is known only at the counters samples: the moment is
    # named as the sample it is, and recorded memory that peaked between two samples is
    # shown beside it (issue 19: "at the highest device used" said 77.95 GiB while
    # reserved peaked at 79.88 GiB between samples)
    "$MEMSNAP" summary "$DATA/sample-missed-peak.msnap" > "$T/out" || fail "exit $?"
    grep -qx "device 0 against the driver (at the counters sample with the highest device used, t = 5.000 us)" \
        "$T/out" || fail "the moment is not named as a sample: $(grep 'against the driver' "$T/out")"
    grep -qx "  (recorded memory peaked between samples: 576.00 MiB at 3.000 us)" "$T/out" ||
        fail "the peak between samples is not shown"
    grep -Eq "device used \(NVML, nvidia-smi\) 700.00 MiB" "$T/out" || fail "no device used"
    ;;
ring)  # a ring dump: the series before the events is not the moment (its
       # 9 GB line is ignored); the allocations older than the ring window
       # (state lines after the last counters line) count at the moment
    "$MEMSNAP" summary --json "$DATA/reconcile-ring.msnap" > "$T/s.json" || fail "exit $?"
    R='.reconcile[0]'
    check "$R.moment == \"highest_device_used\" and $R.t_ns == 6000" "$T/s.json" "$R"
    check "$R.device_used == 3758096384 and $R.recorded == 3221225472" "$T/s.json" "$R"
    check "$R.unexplained == $((512 * MiB))" "$T/s.json" "$R"
    check "$R.libraries == [{\"library\":\"server\",\"bytes\":3221225472}]" "$T/s.json" "$R"
    ;;
sim-no-nvml)  # no libnvidia-ml.so.1: no device_used, the program's output and exit unchanged
    mkdir -p "$T/sim"; ln -s "$MEMSNAP_SIMDEV_DIR/libcuda.so.1" "$T/sim/libcuda.so.1"
    MEMSNAP_SIMDEV_DIR="$T/sim" MEMSNAP_COUNTERS_MS=50 "$MEMSNAP" run --sim-device 8G --compress none \
        -o "$T/s.msnap" -- "$ROUTE_TEST" direct > "$T/out"; rc=$?
    [ $rc = 0 ] || fail "exit $rc"
    LD_LIBRARY_PATH="$T/sim" "$ROUTE_TEST" direct > "$T/out-bare"
    cmp -s "$T/out" "$T/out-bare" || fail "the program's output changed"
    grep -q '"type":"counters"' "$T/s.msnap" || fail "no counters line"
    grep -q device_used "$T/s.msnap" && fail "device_used written without NVML"
    "$MEMSNAP" summary "$T/s.msnap" | grep -q "device used: not recorded" || fail "not said"
    ;;
*) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"

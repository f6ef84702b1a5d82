#!/bin/bash
# Two GPUs (ctest -L gpu2): `memsnap run -o snap-%q{RANK}.msnap -- torchrun
# --nproc_per_node 2 ddp_two_ranks.py` writes one snapshot per rank; NCCL's
# own driver allocations are there and attributed to libnccl; the driver's
# used figure was recorded (NVML); `memsnap summary snap-0 snap-1` says rank
# 1 peaked highest, by at least the 1 GiB it holds more, and on which site.
# Skips (exit 77) without 2 GPUs, torch with CUDA or NCCL.
# Environment (set by CMake): MEMSNAP, GPU_PROBE, TESTS_DIR, CASE_DIR.
set -u
"$GPU_PROBE" || exit 77
python3 - <<'PY' 2>/dev/null || { echo "SKIP: needs 2 GPUs, torch with CUDA and NCCL"; exit 77; }
import sys, torch, torch.distributed as dist
sys.exit(0 if torch.cuda.is_available() and torch.cuda.device_count() >= 2
         and dist.is_nccl_available() else 1)
PY
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
T=${CASE_DIR:?}/ddp2
rm -rf "$T"; mkdir -p "$T"; cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
command -v jq > /dev/null || fail "jq is missing (scripts/setup.sh installs it)"
check() { jq -e "$1" "$2" > /dev/null || fail "$2: not true: $1 (got: $(jq -c "${3:-.}" "$2"))"; }

"$MEMSNAP" run -o 'snap-%q{RANK}.msnap' -- \
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
    "$TESTS_DIR/ddp_two_ranks.py" > out 2>&1 || { cat out; fail "torchrun failed"; }
grep -q "ddp ok rank 0" out && grep -q "ddp ok rank 1" out || { cat out; fail "a rank did not finish"; }
[ -f snap-0.msnap ] && [ -f snap-1.msnap ] || fail "expected snap-0.msnap and snap-1.msnap, got: $(ls)"

for r in 0 1; do
    "$MEMSNAP" summary --json snap-$r.msnap > s$r.json || fail "summary snap-$r.msnap: exit $?"
    R=".reconcile[] | select(.device == $r)"
    check "[$R | .device_used > 0] == [true]" s$r.json ".reconcile"
    check "[$R | .unexplained > 0] == [true]" s$r.json ".reconcile"
    check "[$R | .libraries[] | select(.library == \"NCCL\") | .bytes > 0] == [true]" s$r.json ".reconcile"
    check "[$R | .libraries[] | select(.library == \"PyTorch allocator\") | .bytes >= 2147483648] == [true]" s$r.json ".reconcile"
    check "[.categories[] | select(.device == $r) | .items[] | select(.category == \"communication\") | .peak > 0] == [true]" s$r.json ".categories"
done

"$MEMSNAP" summary --each snap-0.msnap snap-1.msnap > ranks.txt || fail "summary of both: exit $?"
cat ranks.txt | tail -8
grep -q "highest peak reserved: snap-1.msnap" ranks.txt || fail "rank 1 should peak highest"
"$MEMSNAP" summary --each --json snap-0.msnap snap-1.msnap > ranks.json
check '.highest_peak.above_next >= 1073741824' ranks.json '.highest_peak'
check '.highest_peak.sites[0].difference >= 1073741824' ranks.json '.highest_peak'
# the job view of the same two ranks (memsnap job; summary of several files
# prints the same): ranks 0 and 1 from the names, rank 1 the highest
"$MEMSNAP" job snap-0.msnap snap-1.msnap | tee job.txt | head -12
"$MEMSNAP" job --json snap-0.msnap snap-1.msnap > job.json
check '[.ranks[].rank] == [0, 1] and .ranks_from == "name"' job.json '.ranks'
check '.peak_reserved.max.rank == 1' job.json '.peak_reserved'
check '.imbalance.highest.rank == 1' job.json '.imbalance'
"$MEMSNAP" summary snap-0.msnap snap-1.msnap | cmp -s - job.txt || fail "summary of both is not the job view"
echo "ok: ddp2"

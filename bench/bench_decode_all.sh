#!/bin/bash
# bench_decode_all.sh BUILD_DIR OUT_DIR: every decode figure of
# docs/benchmarks.md ("Decode workload") in one pass on a GPU, for a leased
# machine where each start counts:
#   1. the kernels against the CPU reference (decode_kernel_test; stops here
#      if it fails)
#   2. bench_gemm: our GEMV/GEMM kernels and cuBLAS on the step's shapes
#      (with --sweep, every tensor-core variant), and attention
#   3. bench_gemm_torch.py: PyTorch eager matmuls of the same shapes
#   4. bench_decode.sh: the workload itself (BATCHES, MMA_BATCHES,
#      SIMT_BATCHES, ALLOCS pass through) with the workload's defaults, or
#      with PICK=1 the tensor-core configuration and the attention chunk that
#      were fastest in 2 (MEMSNAP_DECODE_GEMM, MEMSNAP_DECODE_ATT set them)
#   5. the SASS of the tensor-core kernels (cuobjdump), when it is there
# Logs and tables go to OUT_DIR; the summary is printed last.  BUILD_DIR
# needs bin/memsnap-decode, tests/workloads/decode_kernel_test,
# tests/gpu/gpu_probe, bench/bench_gemm (and workloads/decode_kernels.fatbin
# for 5).  SWEEP=0 leaves the variant sweep out.  Exit 77 without a GPU.
set -uo pipefail
build=${1:?usage: bench_decode_all.sh BUILD_DIR OUT_DIR}
out=${2:?usage: bench_decode_all.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
"$build/tests/gpu/gpu_probe" > /dev/null || { echo "bench_decode_all: no GPU"; exit 77; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv;
  nvcc --version | tail -2; } > "$out/conditions.txt" 2>&1
t0=$(date +%s)
KERNEL_TEST_SEED=${KERNEL_TEST_SEED:-$t0} "$build/tests/workloads/decode_kernel_test" > "$out/kernel_test.log" 2>&1
rc=$?
tail -3 "$out/kernel_test.log"
grep FAIL "$out/kernel_test.log" | head -20
[ $rc = 0 ] || { echo "bench_decode_all: decode_kernel_test failed (exit $rc)"; exit 1; }
echo "kernel test: $(($(date +%s) - t0)) s"

if [ -z "${MEMSNAP_CUBLAS:-}" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -e "$d/libcublas.so.13" ] && export MEMSNAP_CUBLAS=$d/libcublas.so.13 && break
    done
    [ -n "${MEMSNAP_CUBLAS:-}" ] || MEMSNAP_CUBLAS=$(python3 -c 'import nvidia.cu13, os; print(os.path.join(nvidia.cu13.__path__[0], "lib", "libcublas.so.13"))' 2>/dev/null) || true
    export MEMSNAP_CUBLAS
fi
sweep=--sweep; [ "${SWEEP:-1}" = 0 ] && sweep=
"$build/bench/bench_gemm" $sweep --csv "$out/gemm.csv" > "$out/gemm.txt" 2>&1
echo "bench_gemm: exit $?, $(($(date +%s) - t0)) s"
PYTHONUNBUFFERED=1 python3 "$here/bench_gemm_torch.py" > "$out/gemm_torch.txt" 2>&1
echo "bench_gemm_torch: exit $?, $(($(date +%s) - t0)) s"
# with PICK=1: the tensor-core configuration with the least time summed over
# batches 2-32 in the sweep, per class of product (narrow: o, down, 32 each; wide: qkv,
# gate_up x 32, lm_head x 1), and the attention chunk with the least time
# summed over the batches, go to the workload's runs (MEMSNAP_DECODE_GEMM,
# MEMSNAP_DECODE_ATT), unless set
if [ "${PICK:-0}" = 1 ] && [ -z "${MEMSNAP_DECODE_GEMM:-}" ] && [ -s "$out/gemm.csv" ]; then
    pick() { # $1: shapes regex
        awk -F, -v re="$1" '$1 == "gemm" && $2 ~ /^mma_v/ && $3 >= 2 && $4 ~ re {
                t[$2] += $5 * ($4 == "lm_head" ? 1 : 32) }
            END { for (e in t) print t[e], e }' "$out/gemm.csv" | sort -g | head -1
    }
    narrow=$(pick '^(o|down)$'); wide=$(pick '^(qkv|gate_up|lm_head)$')
    if [[ $narrow =~ mma_v([0-9]+)_.*_w([0-9]+) ]]; then
        cfg="${BASH_REMATCH[1]},${BASH_REMATCH[2]}"
        if [[ $wide =~ mma_v([0-9]+)_.*_w([0-9]+) ]]; then
            export MEMSNAP_DECODE_GEMM="$cfg,${BASH_REMATCH[1]},${BASH_REMATCH[2]}"
            echo "fastest tensor-core configurations: narrow $narrow, wide $wide -> MEMSNAP_DECODE_GEMM=$MEMSNAP_DECODE_GEMM"
        fi
    fi
fi
if [ "${PICK:-0}" = 1 ] && [ -z "${MEMSNAP_DECODE_ATT:-}" ] && [ -s "$out/gemm.csv" ]; then
    att=$(awk -F, '$1 == "attention" && NF >= 7 { t[$6 "," $7] += $4; n[$6 "," $7]++ }
                   END { for (c in t) print t[c], n[c], c }' "$out/gemm.csv" |
          awk -v most=0 '{ if ($2 > most) most = $2; l[NR] = $0 } END { for (i in l) { split(l[i], f, " "); if (f[2] == most) print l[i] } }' |
          sort -g | head -1)
    if [ -n "$att" ]; then
        export MEMSNAP_DECODE_ATT=${att##* }
        echo "fastest attention chunk: $att -> MEMSNAP_DECODE_ATT=$MEMSNAP_DECODE_ATT"
    fi
fi
bash "$here/bench_decode.sh" "$build" "$out/decode.md" > /dev/null 2> "$out/decode.err"
echo "bench_decode: exit $?, $(($(date +%s) - t0)) s"
if command -v cuobjdump > /dev/null && [ -e "$build/workloads/decode_kernels.fatbin" ]; then
    cuobjdump -sass "$build/workloads/decode_kernels.fatbin" 2>&1 |
        awk '/Function : (ms_mma_n1_m1_u4|ms_mmp_n1_m2_s4|ms_mmp_n4_m2_s4|ms_attention_g4_o4)$/ {p=1; print; next} /Function : / {p=0} p' \
        > "$out/sass.txt"
fi
echo "== gemm"; cat "$out/gemm.txt"; echo "== torch"; cat "$out/gemm_torch.txt"
echo "== decode"; cat "$out/decode.md"; tail -3 "$out/decode.err"

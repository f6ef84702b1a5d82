#!/bin/bash
# bench_decode.sh BUILD_DIR [OUT.md]: decode workload figures on a real GPU
# (docs/benchmarks.md, "Decode workload").  Writes a markdown table to OUT.md
# (default bench_decode.md) and prints it.
#   1. MBU at batch 1, Llama 3 8B shape: bytes a step must read (all weights +
#      the KV) / measured step time (CUDA events) / measured copy bandwidth
#   2. tokens/s at batch 1 to 32 (every request decodes 2048 tokens after a
#      512-token prompt; the batch stays full), with the roofline floor of a
#      step: (weights + KV) bytes / the copy bandwidth
#   3. --gemv mma at batch 1, and the CUDA-core GEMV at every batch
#      (--gemv simt: before issue 22; 100 steps, it is slow)
#   4. time per output token at batch 8 with each allocator mode
# Each run: --device-mem 80G, kernels on every step, the summary line parsed.
# No assertion on any figure: numbers only.
set -euo pipefail
build=${1:?usage: bench_decode.sh BUILD_DIR [OUT.md]}
out=${2:-bench_decode.md}
decode="$build/bin/memsnap-decode"
if ! "$build/tests/gpu/gpu_probe" >/dev/null; then
    echo "bench_decode: no real GPU (gpu_probe): nothing to measure" >&2
    exit 77
fi
val() { grep -o " $1=[^ ]*" <<<"$2" | head -1 | cut -d= -f2; }

# run BATCH ALLOC KV STEPS: the summary line.  Requests arrive far faster than
# they finish, so the batch is full from the first steps; STEPS bounds the run.
run() {
    "$decode" -q --device-mem 80G --scenario healthy --max-batch "$1" --alloc "$2" --kv "$3" \
        --rate 1000 --prompt-len 512 --output-len 2048 --steps "$4" --hours 1 --gemv "$5"
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "?")
cuda=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo "?")
{
echo "### $gpu (CUDA ${cuda#release }), $(date +%F)"
echo
echo "Llama 3 8B shape, BF16 (16.06 GB of weights, 128 KiB KV per token), prompts 512 tokens,"
echo "outputs 2048, the batch full; kernels every step; --device-mem 80G."
echo
echo "| batch | GEMV | alloc | kv | TPOT (ms) | floor (ms) | tokens/s | read GB/s | copy GB/s | MBU |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$out"

row() {  # row BATCH ALLOC KV STEPS GEMV
    local line tpot read peak floor
    line=$(run "$@") || { echo "bench_decode: run $* failed" >&2; return; }
    tpot=$(val tpot_ms "$line"); read=$(val read_GBs "$line"); peak=$(val peak_GBs "$line")
    floor=$(awk -v t="$tpot" -v r="$read" -v p="$peak" 'BEGIN { printf "%.3f", t * r / p }')
    echo "| $1 | $5 | $2 | $3 | $tpot | $floor | $(val tok_s "$line") | $read | $peak | $(val mbu "$line") |" >> "$out"
}

# Which rows (set a variable to "" to leave its rows out):
for b in ${BATCHES-1 2 4 8 16 32}; do      # MBU and tokens/s by batch (--gemv auto)
    row "$b" fixed grow 300 auto
done
for b in ${MMA_BATCHES-1}; do               # the tensor cores at batch 1 too
    row "$b" fixed grow 300 mma
done
for b in ${SIMT_BATCHES-1 8 32}; do        # the CUDA-core GEMV at every batch (before issue 22)
    row "$b" fixed grow 100 simt
done
for a in ${ALLOCS-cudamalloc fixed expandable}; do
    row 8 "$a" grow 300 auto
    row 8 "$a" paged 300 auto
done
cat "$out"

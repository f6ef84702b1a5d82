#!/bin/bash
# bench_decode.sh BUILD_DIR [OUT.md]: decode workload figures on a real GPU
# (docs/benchmarks.md, "Decode workload").  Writes a markdown table to OUT.md
# (default bench_decode.md) and prints it.
#   1. MBU at batch 1, Llama 3 8B shape: bytes a step must read (all weights +
#      the KV) / measured step time (CUDA events) / measured copy bandwidth
#   2. tokens/s at batch 1, 8 and 32 (every request decodes 2048 tokens after
#      a 512-token prompt; the batch stays full)
#   3. time per output token at batch 8 with each allocator mode
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
        --rate 1000 --prompt-len 512 --output-len 2048 --steps "$4" --hours 1
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo "?")
cuda=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo "?")
{
echo "### $gpu (CUDA ${cuda#release }), $(date +%F)"
echo
echo "Llama 3 8B shape, BF16 (16.06 GB of weights, 128 KiB KV per token), prompts 512 tokens,"
echo "outputs 2048, the batch full; kernels every step; --device-mem 80G."
echo
echo "| batch | alloc | kv | TPOT (ms) | tokens/s | read GB/s | copy GB/s | MBU |"
echo "|---|---|---|---|---|---|---|---|"
} > "$out"

row() {  # row BATCH ALLOC KV STEPS
    local line
    line=$(run "$@") || { echo "bench_decode: run $* failed" >&2; return; }
    echo "| $1 | $2 | $3 | $(val tpot_ms "$line") | $(val tok_s "$line") | $(val read_GBs "$line") | $(val peak_GBs "$line") | $(val mbu "$line") |" >> "$out"
}

row 1 fixed grow 300          # MBU at batch 1
row 8 fixed grow 300
row 32 fixed grow 300
for a in cudamalloc fixed expandable; do
    row 8 "$a" grow 300
    row 8 "$a" paged 300
done
cat "$out"

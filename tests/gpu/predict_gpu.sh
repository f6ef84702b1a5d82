#!/bin/bash
# Issue 21's GPU check, end to end: predict_collect.sh records the small runs
# and measures the truths (a few minutes), predict_accuracy.py predicts every
# truth from the recordings and compares (docs/benchmarks.md, *Predict*).
#   predict_gpu.sh BUILD SCRATCH
# BUILD: a memsnap build (bin/memsnap, lib/libmemsnap.so).  Exit 0 every
# counted prediction within 5% (allocated) and 10% (reserved) at 4-16x and
# every OOM outcome right, 1 otherwise, 77 (skip) without a GPU, torch or
# transformers.
set -u
B=${1:?BUILD} S=${2:?SCRATCH}
HERE=$(cd "$(dirname "$0")" && pwd)
python3 -c 'import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2>/dev/null || { echo "SKIP: no GPU, torch or transformers"; exit 77; }
rm -rf "$S"; mkdir -p "$S/out" "$S/data"
bash "$HERE/predict_collect.sh" "$B" "$S/out" "$S/work" || { echo "FAIL: predict_collect.sh"; exit 1; }
for t in "$S"/out/predict-*.tar; do tar xf "$t" -C "$S/data" || exit 1; done
# predict_accuracy.py runs BUILD/bin/memsnap: with the libraries that
# predict_collect.sh puts on the path (gpu-libs/ from tools/gpu-bundle)
[ -d "$B/gpu-libs" ] && export LD_LIBRARY_PATH=$(realpath "$B")/gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 "$HERE/predict_accuracy.py" "$S/data" --memsnap "$B/bin/memsnap"

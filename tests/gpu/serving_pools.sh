#!/bin/bash
# Issue 30 on the GPU: CUDA graphs in a shared pool, torch.compile's and a
# MemPool's pools, replay with private pools and --grow KV --find-max
# against PyTorch's own figures and real runs (serving_pools.py says what
# each check is).
#   serving_pools.sh [--quick]          (ctest -R gpu.torch.serving-pools)
# Builds the recorder's PyTorch plugin for $MEMSNAP_PYTHON's torch with
# `memsnap torch-setup` (once, into CASE_DIR/plugin).  Prints PASS/FAIL
# lines with the figures and "N passed, M failed"; the figures also go to
# CASE_DIR/serving-pools/figures.json.  Exit 0 pass, 1 fail, 77 skip (no
# torch with CUDA).
set -u
T=${CASE_DIR:?}/serving-pools
mkdir -p "$T"
PY=${MEMSNAP_PYTHON:-python3}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
rc=$?; [ $rc = 0 ] || { echo "SKIP: no torch with CUDA ($PY)"; exit 77; }
plugin_dir=$CASE_DIR/plugin
if ! ls "$plugin_dir"/libmemsnap_torch-*.so >/dev/null 2>&1; then
    "$MEMSNAP" torch-setup --python "$PY" --out-dir "$plugin_dir" ||
        { echo "FAIL: memsnap torch-setup"; exit 1; }
fi
export MEMSNAP_TORCH_PLUGIN_DIR=$plugin_dir
unset PYTORCH_CUDA_ALLOC_CONF
exec "$PY" "$(dirname "$0")/serving_pools.py" check --memsnap "$MEMSNAP" --work "$T" "$@"

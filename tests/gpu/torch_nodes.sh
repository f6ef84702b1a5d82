#!/bin/bash
# Issue 20 on the GPU: PyTorch's allocated bytes and autograd nodes in a
# recording of a transformers Llama training loop (tests/gpu/torch_llama.py,
# the tiny size), against PyTorch's own numbers in the same process:
#   torch_nodes.sh
# 1. with node names on (the default): the allocated peak equals
#    torch.cuda.max_memory_allocated() and every step's memory_allocated()
#    to the byte; the backward's block allocations name their autograd node
#    and link by q to the forward allocation; the plugin gives PyTorch's
#    block sizes throughout (torch_llama_check.py --strict);
# 2. with MEMSNAP_TORCH_NODES=0: the same sizes, no node, no q.
# Builds the plugin with `memsnap torch-setup` into CASE_DIR/plugin unless one
# is there.  Exit 0 pass, 1 fail, 77 skip (no torch with CUDA, no transformers).
set -u
# The checks compare PyTorch's trace entry for entry, free requests
# included: they are not recorded by default (docs/recorder.md).
export MEMSNAP_TORCH_FREE_REQUESTED=1
T=${CASE_DIR:?}/torch-nodes
rm -rf "$T"; mkdir -p "$T"
PY=${MEMSNAP_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

"$PY" -c "import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
rc=$?; [ $rc = 0 ] || { echo "SKIP: no torch with CUDA, or no transformers ($PY)"; exit 77; }

plugin_dir=$CASE_DIR/plugin
if ! ls "$plugin_dir"/libmemsnap_torch-*.so >/dev/null 2>&1; then
    "$MEMSNAP" torch-setup --python "$PY" --out-dir "$plugin_dir" || fail "memsnap torch-setup"
fi
export MEMSNAP_TORCH_PLUGIN_DIR=$plugin_dir

"$MEMSNAP" run --compress none -o "$T/on.msnap" -- "$PY" "$here/torch_llama.py" train "$T/on.json" \
    --size tiny --steps 3 --profile-steps 0 > "$T/on.out" 2>&1 || fail "torch_llama.py: $(tail -3 "$T/on.out")"
grep "^memsnap: " "$T/on.out" | grep -v "events written" && fail "a line from the recorder: $(grep '^memsnap: ' "$T/on.out")"
"$PY" "$here/torch_llama_check.py" "$T/on.msnap" "$T/on.json" --strict || fail "node names on"
MEMSNAP_TORCH_NODES=0 "$MEMSNAP" run --compress none -o "$T/off.msnap" -- "$PY" "$here/torch_llama.py" \
    train "$T/off.json" --size tiny --steps 3 --profile-steps 0 > "$T/off.out" 2>&1 \
    || fail "torch_llama.py, nodes off: $(tail -3 "$T/off.out")"
"$PY" "$here/torch_llama_check.py" "$T/off.msnap" "$T/off.json" --strict --nodes-off || fail "node names off"
echo "2 passed, 0 failed"

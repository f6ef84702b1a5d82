#!/bin/bash
# memsnap's allocated layer against PyTorch's own history, on the GPU:
#   torch_oracle.sh default|expandable|ring
# Builds the recorder's PyTorch plugin for $MEMSNAP_PYTHON's torch with
# `memsnap torch-setup` (once, into CASE_DIR/plugin), runs torch_oracle.py
# under `memsnap run` and plainly, and checks the snapshot with
# torch_oracle_check.py; the losses of the two runs must be equal.
# Exit 0 pass, 1 fail, 77 skip (no torch with CUDA, no transformers).
set -u
# The checks compare PyTorch's trace entry for entry, free requests
# included: they are not recorded by default (docs/recorder.md).
export MEMSNAP_TORCH_FREE_REQUESTED=1
case_name=${1:?case}
T=${CASE_DIR:?}/torch-oracle-$case_name
rm -rf "$T"; mkdir -p "$T"
PY=${MEMSNAP_PYTHON:-python3}
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

"$PY" -c "import torch, transformers, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
rc=$?; [ $rc = 0 ] || { echo "SKIP: no torch with CUDA, or no transformers ($PY)"; exit 77; }

plugin_dir=$CASE_DIR/plugin
if ! ls "$plugin_dir"/libmemsnap_torch-*.so >/dev/null 2>&1; then
    "$MEMSNAP" torch-setup --python "$PY" --out-dir "$plugin_dir" || fail "memsnap torch-setup"
fi
export MEMSNAP_TORCH_PLUGIN_DIR=$plugin_dir

conf=""; [ "$case_name" = expandable ] && conf="expandable_segments:True"
export PYTORCH_CUDA_ALLOC_CONF=$conf CUBLAS_WORKSPACE_CONFIG=:4096:8
if [ "$case_name" = ring ]; then
    "$MEMSNAP" run --compress none --mode ring -o "$T/s-%n.msnap" -- "$PY" "$(dirname "$0")/torch_oracle.py" "$T/rec" \
        2> "$T/err" || fail "torch_oracle.py under memsnap: $(tail -3 "$T/err")"
    snap=$T/s-0.msnap; ring=--ring
else
    "$MEMSNAP" run --compress none -o "$T/s.msnap" -- "$PY" "$(dirname "$0")/torch_oracle.py" "$T/rec" \
        2> "$T/err" || fail "torch_oracle.py under memsnap: $(tail -3 "$T/err")"
    snap=$T/s.msnap; ring=
fi
cat "$T/err"
grep -q "^memsnap: PyTorch" "$T/err" && fail "the plugin was refused: $(grep '^memsnap: PyTorch' "$T/err")"
"$PY" "$(dirname "$0")/torch_oracle_check.py" "$snap" "$T/rec/oracle.json" $ring || fail "check"
"$PY" "$(dirname "$0")/torch_oracle.py" "$T/plain" > /dev/null 2>&1 || fail "torch_oracle.py without memsnap"
# The first step's loss (a forward pass from the same weights) must be equal
# to the bit; the later ones within 1e-3 relative, since a few backward
# kernels (atomic adds) have no deterministic form and may sum in another order.
"$PY" - "$T/rec/loss.txt" "$T/plain/loss.txt" <<'PYEOF' || fail "losses differ with the recorder"
import sys
a = [float.fromhex(x) for x in open(sys.argv[1]).read().split()]
b = [float.fromhex(x) for x in open(sys.argv[2]).read().split()]
ok = len(a) == len(b) == 3 and a[0] == b[0] and all(abs(x - y) <= 1e-3 * abs(y) for x, y in zip(a, b))
print("%s losses with the recorder %s, without %s" % ("ok  " if ok else "FAIL", a, b))
sys.exit(0 if ok else 1)
PYEOF

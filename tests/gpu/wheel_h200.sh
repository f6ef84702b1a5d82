#!/bin/bash
# Issue 33's check on the GPU machine: the manylinux wheel that
# scripts/build-wheel.sh made, in PyTorch's own environment (docs/install.md,
# *The manylinux wheel*):
#   wheel_h200.sh WHEEL [OUT]       (OUT default ./wheel-h200; scratch in OUT/work)
# MEMSNAP_PYTHON: PyTorch's python (default /opt/torch/.venv/bin/python, else python3).
#   1. the wheel is tagged manylinux_2_31_x86_64 and check_wheel.py passes it;
#      `pip install --no-deps --target` puts it beside PyTorch's environment
#      (on PYTHONPATH; nothing in that environment changes); on this machine
#      every library its files load resolves inside it but glibc's and the
#      driver's (bundle_libs.py --check, ldd);
#   2. `memsnap run` of a small PyTorch program, with an empty cache: the
#      PyTorch plugin is built at this first run (the line on stderr, the
#      library in the cache), the recording has PyTorch's allocated layer,
#      its peak equal to torch.cuda.max_memory_allocated() to the byte; a
#      second run builds nothing;
#   3. record() and the pytest limits: tests/gpu/python_api_gpu.sh on the
#      same wheel (its own fresh cache: the plugin is built again at the
#      first record(); then record(), the API, the magic, and the markers'
#      limits that pass and fail, naming the lines).
# Prints PASS/FAIL lines (also in OUT/checks.txt); exit 0 all passed, 1 not,
# 77 no PyTorch with a GPU.
set -u
WHL=$(realpath "${1:?usage: wheel_h200.sh WHEEL [OUT]}")
OUT=$(realpath -m "${2:-wheel-h200}")
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
PY=${MEMSNAP_PYTHON:-}
[ -n "$PY" ] || { [ -x /opt/torch/.venv/bin/python ] && PY=/opt/torch/.venv/bin/python || PY=python3; }
W=$OUT/work
rm -rf "$OUT"; mkdir -p "$W"
R=$OUT/checks.txt; : > "$R"
say() { echo "[+${SECONDS}s] $*" | tee -a "$R"; }
fails=0
check() { if eval "$2"; then say "PASS $1"; else say "FAIL $1"; fails=$((fails + 1)); fi; }

"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)' 2> /dev/null
rc=$?; [ $rc = 0 ] || { say "SKIP: no PyTorch with a GPU in $PY ($rc)"; exit 77; }
say "machine: $(nvidia-smi -L 2>&1 | head -1); $(getconf GNU_LIBC_VERSION); $(. /etc/os-release && echo "$PRETTY_NAME")"
say "$("$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "at", sys.prefix)')"
say "wheel: $(basename "$WHL"), $(du -k "$WHL" | cut -f1) KiB"

# ---- 1. the wheel, beside PyTorch's environment ----
check "the wheel is tagged manylinux_2_31_x86_64" '[[ $(basename "$WHL") == *-py3-none-manylinux_2_31_x86_64.whl ]]'
if command -v readelf > /dev/null; then
    check "check_wheel.py: GLIBC 2.31 at most, nothing unbundled but manylinux's and the driver's" \
        '"$PY" "$SRC/packaging/check_wheel.py" "$WHL" 2>&1 | tee -a "$R" | grep -q "keeps to manylinux_2_31"'
else
    say "(no readelf here: check_wheel.py left out; CI runs it)"
fi
"$PY" -m pip install --no-deps --no-index --target "$W/site" "$WHL" > "$W/pip.log" 2>&1
check "pip install --no-deps --target" '[ -x "$W/site/memsnap/_native/bin/memsnap" ] || { tail -3 "$W/pip.log"; false; }'
export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
N=$W/site/memsnap/_native
check "every library from the wheel but glibc's and the driver's (ldd, bundle_libs.py --check)" \
    '"$PY" "$SRC/packaging/bundle_libs.py" --check "$N" > "$OUT/ldd.txt" 2>&1 || { tail -5 "$OUT/ldd.txt"; false; }'
check "memsnap --version (from the wheel)" '"$PY" -m memsnap --version | tee -a "$R" | grep -q "^memsnap "'

# ---- 2. memsnap run: the plugin built at the first run ----
cat > "$W/small.py" <<'EOF'
import json, sys
import torch
x = torch.randn(4096, 4096, device="cuda")            # 64 MiB
ys = [x @ x for _ in range(3)]                         # 3 x 64 MiB more
del ys[1]
z = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
json.dump({"max_memory_allocated": torch.cuda.max_memory_allocated(),
           "memory_allocated": torch.cuda.memory_allocated()}, open(sys.argv[1], "w"))
EOF
export XDG_CACHE_HOME=$W/cache-run
"$PY" -m memsnap run -o "$W/run1.msnap" -- "$PY" "$W/small.py" "$W/run1.json" > "$W/run1.out" 2> "$W/run1.err"
rc=$?
grep "memsnap" "$W/run1.err" | head -5 | tee -a "$R"
check "memsnap run of a PyTorch program (exit $rc)" '[ $rc = 0 ]'
check "the plugin was built at the first run" 'grep -q "memsnap run: building the PyTorch plugin" "$W/run1.err" && ls "$XDG_CACHE_HOME"/memsnap/torch/libmemsnap_torch-*.so > /dev/null 2>&1'
check "the plugin was not refused" '! grep -q "^memsnap: PyTorch" "$W/run1.err"'
"$PY" -m memsnap summary --json "$W/run1.msnap" > "$W/run1.summary.json" 2> "$W/run1.summary.err"
cat > "$W/peak.py" <<'EOF'
import json, sys
s, t = (json.load(open(p)) for p in sys.argv[1:3])
peak = s["process"]["allocated"]["peak"]
print("equal" if s["pytorch"] and peak == t["max_memory_allocated"] else "differ",
      "recorded peak", peak, "torch.cuda.max_memory_allocated()", t["max_memory_allocated"],
      "pytorch layer", s["pytorch"])
EOF
check "the recording's allocated peak is PyTorch's max_memory_allocated(), to the byte" \
    '"$PY" "$W/peak.py" "$W/run1.summary.json" "$W/run1.json" 2>&1 | tee -a "$R" | grep -q "^equal"'
"$PY" -m memsnap run -o "$W/run2.msnap" -- "$PY" "$W/small.py" "$W/run2.json" > "$W/run2.out" 2> "$W/run2.err"
rc=$?
check "a second run (exit $rc) builds nothing" '[ $rc = 0 ] && ! grep -q "building the PyTorch plugin" "$W/run2.err"'
unset XDG_CACHE_HOME

# ---- 3. record() and the pytest limits, from the same wheel ----
MEMSNAP_PYTHON=$PY bash "$HERE/python_api_gpu.sh" "$WHL" "$OUT/api" "$W/api" > "$OUT/api.log" 2>&1
rc=$?
grep -E "PASS|FAIL" "$OUT/api.log" | sed 's/^\[[^]]*\] /  python_api_gpu.sh: /' | tee -a "$R"
check "python_api_gpu.sh: record() with the plugin built at the first record(), the pytest limits (exit $rc)" '[ $rc = 0 ]'

say "$fails failed"
[ $fails = 0 ]

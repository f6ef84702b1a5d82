#!/bin/bash
# Issue 24's Python API on the GPU machine, in PyTorch's own environment,
# from the built wheel (docs/python.md, *Tested where*):
#   python_api_gpu.sh WHEEL OUT [WORK]
# WHEEL  the wheel built here (pip wheel: memsnap-*-py3-none-linux_x86_64.whl)
# OUT    where the results go: checks.txt, python_api_gpu.json, limits.txt
#        (pytest's output), the snapshots of the failing limit tests and of
#        the recordings (record-1.msnap, record-2.msnap, cell.msnap), logs
# WORK   scratch (default /tmp/memsnap-i24)
# Steps: the wheel is installed with `pip install --no-deps --target` and
# put on PYTHONPATH beside PyTorch's environment (nothing of it changes;
# MEMSNAP_WHEEL_INTO_ENV=1: into it); the plugin is built into a fresh cache by the first
# memsnap.record() (XDG_CACHE_HOME=WORK/cache: the build at first use is
# part of the check); then python_api_gpu.py (record, the magic) and pytest
# on python_api_gpu_limits.py (the markers).  Exit 0 all passed, 1 not,
# 77 no torch or no GPU.
set -u
WHL=$(realpath "${1:?WHEEL}"); OUT=$(realpath -m "${2:?OUT}"); W=${3:-/tmp/memsnap-i24}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${MEMSNAP_PYTHON:-python3}
rm -rf "$W"; mkdir -p "$W" "$OUT"
R=$OUT/checks.txt; : > "$R"
say() { echo "[+${SECONDS}s] $*" | tee -a "$R"; }
fails=0
check() { if eval "$2"; then say "PASS $1"; else say "FAIL $1"; fails=$((fails + 1)); fi; }

"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)' 2> /dev/null
rc=$?; [ $rc = 0 ] || { say "SKIP: no torch with a GPU in $PY ($rc)"; exit 77; }
say "machine: $(nvidia-smi -L 2>&1 | head -1); $("$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)')"
"$PY" -c 'import pandas, numpy, pytest; print("pandas", pandas.__version__, "numpy", numpy.__version__, "pytest", pytest.__version__)' 2>&1 | tee -a "$R"
"$PY" -c 'import IPython; print("IPython", IPython.__version__)' >> "$R" 2>&1 || say "no IPython: the magic is checked through its function"

# ---- the wheel, beside PyTorch's environment -----------------------------------
# pip install --no-deps --target: the package sees PyTorch's environment
# (its torch, pandas, pytest) through PYTHONPATH, whatever that environment
# is (a venv, or a system Python that refuses pip), and nothing in it
# changes.  MEMSNAP_WHEEL_INTO_ENV=1 installs into the environment itself
# instead (pip install --no-deps, --break-system-packages where needed).
VPY=$PY
if [ "${MEMSNAP_WHEEL_INTO_ENV:-0}" = 1 ]; then
    "$PY" -m pip install --no-deps --no-index --force-reinstall "$WHL" > "$W/pip.log" 2>&1 ||
        "$PY" -m pip install --no-deps --no-index --force-reinstall --break-system-packages "$WHL" >> "$W/pip.log" 2>&1 ||
        { say "FAIL pip install: $(tail -3 "$W/pip.log")"; exit 1; }
    say "installed into PyTorch's environment: $("$PY" -c 'import sys; print(sys.prefix)')"
    INTO=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
else
    "$PY" -m pip install --no-deps --no-index --target "$W/site" "$WHL" > "$W/pip.log" 2>&1 ||
        { say "FAIL pip install --target: $(tail -3 "$W/pip.log")"; exit 1; }
    export PYTHONPATH=$W/site${PYTHONPATH:+:$PYTHONPATH}
    say "installed with pip install --no-deps --target $W/site, on PYTHONPATH beside PyTorch's environment"
    INTO=$W/site
fi
export XDG_CACHE_HOME=$W/cache PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
check "version" '"$VPY" -m memsnap --version | tee -a "$R" | grep -q "^memsnap "'
check "import from the wheel" '"$VPY" -c "import memsnap, sys; p = memsnap.paths(); assert all(p.values()), p; print(memsnap.__file__)" | tee -a "$R" | grep -q "^$INTO/memsnap/"'

# ---- record, the API, the magic (the plugin built at the first record) ---------
cd "$W" || exit 1
timeout 600 "$VPY" "$HERE/python_api_gpu.py" "$OUT" > "$OUT/python_api_gpu.log" 2>&1; rc=$?
grep -E "^(PASS|FAIL)|passed|memsnap: building" "$OUT/python_api_gpu.log" | tee -a "$R"
check "python_api_gpu.py (exit $rc)" '[ $rc = 0 ]'
check "the plugin was built at the first record()" 'ls "$W"/cache/memsnap/torch/libmemsnap_torch-*.so > /dev/null 2>&1 && grep -q "memsnap: building the PyTorch plugin" "$OUT/python_api_gpu.log"'
check "no fallback to requested sizes" '! grep -q "sizes the program asked for" "$OUT/python_api_gpu.log"'

# ---- the pytest plugin (entry point of the installed wheel) ----------------------
cp "$HERE/python_api_gpu_limits.py" "$W/test_gpu_limits.py"
timeout 600 "$VPY" -m pytest -p no:cacheprovider -rA --memsnap-dir "$OUT/failed" \
    "$W/test_gpu_limits.py" > "$OUT/limits.txt" 2>&1
L=$OUT/limits.txt
tail -5 "$L" | tee -a "$R"
big=$(grep -n "# BIG" "$HERE/python_api_gpu_limits.py" | cut -d: -f1)
leak=$(grep -n "# LEAK" "$HERE/python_api_gpu_limits.py" | cut -d: -f1)
check "limits: 2 passed, 2 failed" 'grep -qE "2 failed, 2 passed" "$L"'
check "a limit that passes" 'grep -q "^PASSED test_gpu_limits.py::test_under_limit" "$L"'
check "a limit that fails, naming the site" 'grep -q "^FAILED test_gpu_limits.py::test_over_limit" "$L" && grep -q "peaked at 1.50 GiB, over the 1.00 GiB limit" "$L" && grep -qE "1.50 GiB in +1 block +.*test_gpu_limits.py:$big\)?$" "$L"'
check "a leak found, naming the site" 'grep -q "^FAILED test_gpu_limits.py::test_leak" "$L" && grep -q "64.00 MiB that the test allocated through PyTorch is still allocated after it" "$L" && grep -qE "64.00 MiB in +1 block +.*test_gpu_limits.py:$leak\)?$" "$L"'
check "the warm-up is not a leak" 'grep -q "^PASSED test_gpu_limits.py::test_warm_cache" "$L"'
check "--memsnap-dir kept the failing tests" '[ -f "$OUT/failed/test_gpu_limits.py_test_over_limit.msnap" ] && [ -f "$OUT/failed/test_gpu_limits.py_test_leak.msnap" ] && [ ! -f "$OUT/failed/test_gpu_limits.py_test_under_limit.msnap" ]'

tar -czf "$OUT/logs.tar.gz" -C "$W" --exclude=site --exclude=cache . 2> /dev/null
say "$fails failed"
[ $fails = 0 ]

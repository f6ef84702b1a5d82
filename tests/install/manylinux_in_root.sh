#!/bin/bash
# The manylinux wheel on an old machine: run by manylinux_test.sh inside the
# Debian 11 root (scripts/debian11-root.sh run: bullseye's python3.9, pip
# 20.3, numpy 1.19, pandas 1.1.5, pytest 6.0; no compiler, none of
# memsnap's libraries), as a user, not root:
#   manylinux_in_root.sh WHEEL     (the source tree at /src, read-only;
#                                   everything it makes goes into /w)
# One line per step, "ok STEP" or "FAIL STEP: why"; exit 1 at the first
# failure.  manylinux_test.sh compares what it wrote with the host build's
# answers on the same files.
set -u
WHL=$1
W=/w
H200=/src/tests/viz/data/h200
P=/src/tests/interop/data/predict_h200
fail() { echo "FAIL $*"; exit 1; }
ok() { echo "ok $*"; }
cd "$W" || fail "cd $W"
echo "python $(python3 -c 'import sys, numpy, pandas, pytest; print(sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__, "pytest", pytest.__version__)'); glibc $(getconf GNU_LIBC_VERSION); $(cat /etc/debian_version)"

# ---- pip takes the wheel (its tag against glibc 2.31), and not a newer one ----
python3 -m venv --system-site-packages "$W/v" || fail "venv"
export PATH=$W/v/bin:$PATH
pip install --no-index --no-deps "$WHL" > "$W/pip.log" 2>&1 || fail "pip install: $(tail -3 "$W/pip.log")"
newer=$W/$(basename "$WHL" | sed 's/manylinux_2_31/manylinux_2_34/')
cp "$WHL" "$newer"
if pip install --no-index --no-deps --target "$W/refused" "$newer" > "$W/pip-newer.log" 2>&1; then
    fail "pip installed a manylinux_2_34 wheel on glibc 2.31: its tag check is not what this test assumes"
fi
grep -q "is not a supported wheel on this platform" "$W/pip-newer.log" || fail "pip's refusal: $(tail -2 "$W/pip-newer.log")"
rm -f "$newer"
N=$(python3 -c 'import memsnap, os; print(os.path.dirname(memsnap.__file__))')/_native
[ -x "$N/bin/memsnap" ] || fail "no $N/bin/memsnap"
ok "pip install (pip 20.3 takes manylinux_2_31 on glibc 2.31, refuses manylinux_2_34)"

# ---- the command line ----
memsnap --version > version.txt || fail "memsnap --version"
grep -q "^memsnap [0-9.]* (snapshot format" version.txt || fail "--version: $(cat version.txt)"
ok "memsnap --version: $(cat version.txt)"
mkdir -p rec && cd rec || fail "cd rec"
memsnap run --sim-device 8G -- memsnap-smoke > ../smoke.out 2> ../smoke.err || fail "memsnap run: $(cat ../smoke.err)"
cd "$W" || fail "cd"
grep -q "memsnap-smoke: 24 steps on memsnap simulated device" smoke.out || fail "smoke: $(cat smoke.out smoke.err)"
mv rec/memsnap-*.msnap s.msnap || fail "no memsnap-PID.msnap from memsnap run: $(ls rec)"
ok "memsnap run --sim-device 8G -- memsnap-smoke"
memsnap summary s.msnap > summary.txt || fail "summary"
grep -q "^command    memsnap-smoke" summary.txt || fail "summary: $(head -5 summary.txt)"
memsnap summary --json s.msnap > s.json || fail "summary --json"
for f in "$H200"/*.msnap.zst; do
    memsnap summary --json "$f" > "h200-$(basename "$f" .msnap.zst).json" || fail "summary --json $f"
done
ok "summary"
memsnap render s.msnap -o "$W/s" > /dev/null || fail "render s.msnap"
memsnap render "$H200/train-llama.msnap.zst" -o "$W/tl" > /dev/null || fail "render train-llama"
ok "render"
memsnap replay s.msnap --suggest > replay-s.txt || fail "replay --suggest: $(tail -3 replay-s.txt)"
memsnap replay "$H200/train-llama.msnap.zst" -c "" -c expandable_segments:True > replay-tl.txt ||
    fail "replay (torch engine): $(tail -3 replay-tl.txt)"
ok "replay"
memsnap predict -q --json --at 16,32 "$P/batch-sdpa-b2-s512-def.msnap.zst@2" \
    "$P/batch-sdpa-b3-s512-def.msnap.zst@3" > predict.json || fail "predict: $(cat predict.json)"
ok "predict"

# ---- the Python API on the kept recordings, its figures the command's ----
python3 - "$H200" > api.txt 2>&1 <<'EOF' || fail "the API against the CLI: $(tail -5 api.txt)"
import glob, json, subprocess, sys
import memsnap
for f in sorted(glob.glob(sys.argv[1] + "/*.msnap.zst")):
    cli = json.loads(subprocess.run([memsnap.paths()["memsnap"], "summary", "--json", "--top", "1000", f],
                                    stdout=subprocess.PIPE, check=True).stdout)
    s = memsnap.load(f)
    assert s.summary(top=1000) == cli, f
    ev = s.events()
    assert len(ev) == cli["events"]["total"], (f, len(ev))
    by = {k: int(v) for k, v in ev["action"].value_counts().items() if v}
    assert by == cli["events"]["by_action"], (f, by)
    layer = "allocated" if cli["allocated_seen"] else "reserved"
    sites = s.sites(layer)
    want = cli["top_sites"][layer]
    assert list(sites["label"]) == [w["label"] for w in want], f
    assert [int(x) for x in sites["peak"]] == [w["peak"] for w in want], f
    peak = s.state_at("peak")
    print("%s: %d events, %d %s sites, top %s peak %d, state at peak %d objects"
          % (f.split("/")[-1], len(ev), len(sites), layer, sites["label"].iloc[0],
             int(sites["peak"].iloc[0]), len(peak)))
EOF
ok "the Python API on the kept H200 recordings equals the CLI ($(wc -l < api.txt) files)"
(cd /src/tests/python && MEMSNAP_SRC_DIR=/src python3 -m pytest -q -p no:cacheprovider \
    --basetemp="$W/pytest" test_api.py test_record.py test_pytest_plugin.py) > pytest.log 2>&1 ||
    fail "tests/python on the wheel: $(tail -15 pytest.log)"
grep -qE "^[0-9]+ passed" pytest.log || fail "tests/python: $(tail -3 pytest.log)"
ok "tests/python (API, record, pytest plugin) on pytest 6.0 and pandas 1.1.5: $(tail -1 pytest.log)"

# ---- the pytest plugin's collection, in a user's folder ----
mkdir -p "$W/plugin" && cd "$W/plugin" || fail "cd plugin"
cat > test_marked.py <<'EOF'
import pytest


@pytest.mark.limit_gpu_memory("2 GiB")
def test_fits():
    pass


@pytest.mark.limit_gpu_leaks("1 MiB", warmup=1)
def test_no_leak():
    pass


def test_plain():
    pass
EOF
python3 -m pytest -p no:cacheprovider --strict-markers --collect-only -q > collect.txt 2>&1 ||
    fail "collection: $(tail -5 collect.txt)"
grep -q "^3 tests collected" collect.txt || grep -q "^test_marked.py::test_no_leak" collect.txt ||
    fail "collection: $(cat collect.txt)"
python3 -m pytest -p no:cacheprovider --strict-markers -rs > run.txt 2>&1 || fail "the marked tests: $(tail -5 run.txt)"
grep -q "1 passed, 2 skipped" run.txt || fail "the marked tests: $(tail -3 run.txt)"
grep -q "SKIPPED .*memsnap: " run.txt || fail "no memsnap skip reason: $(cat run.txt)"
sed -i 's/limit_gpu_memory("2 GiB")/limit_gpu_memory("two gigs")/' test_marked.py
# a bad marker fails its own test, named by file:line; the others still run
if python3 -m pytest -p no:cacheprovider -rfs > bad.txt 2>&1; then
    fail "a bad limit passed: $(tail -3 bad.txt)"
fi
grep -q "1 failed, 1 passed, 1 skipped" bad.txt || fail "bad limit: $(tail -3 bad.txt)"
grep -q "test_marked.py:[0-9]*: test_fits: limit_gpu_memory: not a size: 'two gigs'" bad.txt ||
    fail "bad limit: $(grep -m2 memsnap bad.txt)"
cd "$W" || fail "cd"
ok "pytest plugin: markers collected with --strict-markers, skipped without PyTorch, a bad limit fails its own test"
grep -m1 "SKIPPED .*memsnap: " plugin/run.txt

# ---- nothing from outside the wheel but glibc ----
python3 /src/packaging/bundle_libs.py --check "$N" > ldd.txt 2>&1 || fail "bundle_libs.py --check: $(tail -5 ldd.txt)"
ldd "$N/bin/memsnap" > ldd-memsnap.txt 2>&1 || fail "ldd memsnap"
ldd "$N/lib/memsnap/libmemsnap.so" > ldd-recorder.txt 2>&1 || fail "ldd libmemsnap.so"
if grep "=>" ldd-memsnap.txt ldd-recorder.txt | grep -v "=> $N/" |
        grep -vE "=> /lib/x86_64-linux-gnu/(libc|libm|libdl|libpthread|librt)\.so\.[0-9]+ "; then
    fail "ldd: a library from outside the wheel (above)"
fi
# Every object the loader mapped (LD_DEBUG=libs,files): the file a search
# ended with ("trying file=" before "generating link map"), one given by
# path, and those it initialized (bullseye's libunwind has no initializer).
inits() {
    awk '/find library=/ {t = ""}
         /trying file=/ {t = $0; sub(/.*trying file=/, "", t)}
         /generating link map/ {f = $0; sub(/.*file=/, "", f); sub(/ \[.*/, "", f)
                                print (f ~ /\// ? f : t); t = ""}
         /calling init: / {c = $0; sub(/.*calling init: /, "", c); print c}' "$1" |
        sed -E 's#/[^/]+/\.\./#/#g' | grep . | sort -u
}
outside() {
    inits "$1" | grep -v "^$N/" |
        grep -vE '^/(usr/)?lib(64|/x86_64-linux-gnu)/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so'
}
# (the C program itself: the console script is Python, whose own libraries
# libexpat, libz and libutil are Debian's)
LD_DEBUG=libs,files "$N/bin/memsnap" --version > /dev/null 2> ld-version.txt || fail "LD_DEBUG memsnap --version"
LD_DEBUG=libs,files "$N/bin/memsnap" render s.msnap -o "$W/ld" > /dev/null 2> ld-render.txt || fail "LD_DEBUG render"
LD_DEBUG=libs,files "$N/bin/memsnap" run --sim-device 1G -q -o "$W/ld.msnap" -- "$N/bin/memsnap-smoke" \
    > /dev/null 2> ld-run.txt || fail "LD_DEBUG run: $(tail -3 ld-run.txt)"
for f in ld-version.txt ld-render.txt ld-run.txt; do
    [ -z "$(outside $f)" ] || fail "$f: loaded from outside the wheel: $(outside $f)"
done
inits ld-run.txt | grep -q "^$N/lib/memsnap/libmemsnap.so$" || fail "no recorder in LD_DEBUG of memsnap run"
inits ld-run.txt | grep -q "^$N/lib/deps/libunwind-" || fail "no bundled libunwind in LD_DEBUG of memsnap run"
inits ld-render.txt | grep -q "^$N/lib/deps/libcairo-" || fail "no bundled cairo in LD_DEBUG of render"
# the API's library in Python: what it adds to what numpy and pandas load
LD_DEBUG=libs,files python3 -c 'import ctypes, json, numpy, pandas' 2> ld-py0.txt || fail "LD_DEBUG python"
LD_DEBUG=libs,files python3 -c "import memsnap; s = memsnap.load('s.msnap'); s.events(); s.sites(); s.state_at('peak')" \
    2> ld-py.txt || fail "LD_DEBUG python memsnap: $(grep -v '^ *[0-9]*:' ld-py.txt | tail -3)"
added=$(comm -13 <(inits ld-py0.txt) <(inits ld-py.txt) | grep -v "^$N/" |
        grep -vE '^/usr/lib/python3[^ ]*\.so$|/lib-dynload/')
[ -z "$added" ] || fail "memsnap.load() loads from outside the wheel: $added"
inits ld-py.txt | grep -q "^$N/lib/memsnap/libmemsnap_py.so$" || fail "no libmemsnap_py.so in LD_DEBUG of the API"
ok "ldd and LD_DEBUG=libs: every library from the wheel but glibc's ($(inits ld-run.txt | grep -c "^$N/") of the wheel's in memsnap run)"
echo "done"

#!/bin/bash
# The pip package as a user gets it (ctest install.wheel; docs/install.md):
#   1. the source as a clone has it (git's files) is copied to a folder of
#      its own; there, offline, with Debian's Python packages: a venv with
#      --system-site-packages, `pip install --no-build-isolation .` (the
#      memsnap command works from that venv) and `pip wheel` (the wheel:
#      py3-none-linux_x86_64, not pure);
#   2. the copy, with its build folders, is removed; a fresh venv (no system
#      site packages) installs the wheel; with a bare environment:
#      --version, a recording of memsnap-smoke on the simulated device
#      (recorder and simulated device from inside the package), summary,
#      render (the PNGs equal the build tree's, byte for byte), import
#      memsnap, python -m memsnap; the console script keeps the exit code,
#      a signal's exit code, the environment (no LC_CTYPE of Python's) and
#      the ignored signals (none of Python's) of what it runs;
#   2b. the Python API (issue 24) from the wheel: in the bare venv,
#      memsnap.load().summary() equals `memsnap summary --json` (no
#      Python package needed); in a venv that sees Debian's pandas, pytest
#      and IPython (--system-site-packages), tests/python's suites: the API
#      against the CLI on the checked-in snapshots, memsnap.record() without
#      PyTorch, the pytest plugin through the wheel's pytest11 entry point
#      and the %%memsnap magic;
#   3. every library the package's files load, but glibc's and the CUDA
#      driver's, resolves inside the package: bundle_libs.py --check (ldd),
#      and LD_DEBUG=libs of memsnap and of a recorded program;
#   4. as root (CI is): the package's native tree in a chroot holding only
#      glibc (no other library, no font, no fontconfig configuration, no
#      /etc): --version, a recording on the simulated device, summary, and
#      render, whose PNG equals the one above.
# Environment (set by CMake): BUILD_DIR, SRC_DIR, CASE_DIR.
set -u
T=${CASE_DIR:?}/wheel
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
PY=/usr/bin/python3      # Debian's, with python3-setuptools and python3-wheel
[ -x $PY ] && $PY -c 'import setuptools, wheel, venv' 2>/dev/null ||
    fail "Debian's python3-setuptools, python3-wheel and python3-venv are needed (scripts/setup.sh)"
command -v patchelf > /dev/null || fail "patchelf is needed (scripts/setup.sh)"
passed=0
ok() { passed=$((passed + 1)); }

# ---- 1. build offline from a copy of the source ----
mkdir -p "$T/src"
if git -C "$SRC_DIR" rev-parse --git-dir > /dev/null 2>&1; then
    (cd "$SRC_DIR" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 cp --parents -t "$T/src" 2>/dev/null) || fail "copying the source"
else
    (cd "$SRC_DIR" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$T/src" || fail "copying the source"
fi
[ -f "$T/src/setup.py" ] || fail "no setup.py in the copy"
cp "$SRC_DIR/packaging/bundle_libs.py" "$T/"
ver=$(sed -n 's/^project(memsnap VERSION \([0-9.]*\).*/\1/p' "$SRC_DIR/CMakeLists.txt")
$PY -m venv --system-site-packages "$T/bv" || fail "venv"
cd "$T/src" || fail "cd"
export MEMSNAP_BUILD_JOBS=$(nproc)
"$T/bv/bin/pip" install --no-build-isolation --no-index . > "$T/install.log" 2>&1 ||
    fail "pip install --no-build-isolation .: $(tail -30 "$T/install.log")"
"$T/bv/bin/memsnap" --version | grep -q "^memsnap $ver " || fail "memsnap from pip install ."
ok
"$T/bv/bin/pip" wheel --no-build-isolation --no-index --no-deps -w "$T/dist" . > "$T/wheel.log" 2>&1 ||
    fail "pip wheel: $(tail -30 "$T/wheel.log")"
whl=$T/dist/memsnap-$ver-py3-none-linux_x86_64.whl
[ -f "$whl" ] || fail "no $whl: $(ls "$T/dist")"
$PY - "$whl" <<'EOF' || fail "the wheel's contents"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
meta = [n for n in names if n.endswith(".dist-info/WHEEL")][0]
wheel = z.read(meta).decode()
assert "Root-Is-Purelib: false" in wheel and "Tag: py3-none-linux_x86_64" in wheel, wheel
for need in ("memsnap/_native/bin/memsnap", "memsnap/_native/lib/memsnap/libmemsnap.so",
             "memsnap/_native/lib/memsnap/libmemsnap_py.so", "memsnap/pytest_plugin.py",
             "memsnap/_native/lib/memsnap/simdev/libcuda.so.1", "memsnap/_native/lib/libmemsnap_alloc.so.0",
             "memsnap/_native/lib/memsnap/fonts/DejaVuSans.ttf", "memsnap/__init__.py",
             # the man pages and the completion, inside the package (issue 35)
             "memsnap/_native/share/man/man1/memsnap.1",
             "memsnap/_native/share/man/man1/memsnap-run.1",
             "memsnap/_native/share/man/man1/memsnap-summary.1",
             "memsnap/_native/share/bash-completion/completions/memsnap"):
    assert need in names, need
assert any(n.startswith("memsnap/_native/lib/deps/libcairo-") for n in names)
assert not [n for n in names if ".data/" in n], "files outside the package"
EOF
ok
cd "$T" || fail "cd"
rm -rf "$T/src" "$T/bv"            # the source and its build folders are gone

# ---- 2. a fresh venv, a bare environment ----
$PY -m venv "$T/v" || fail "venv"
"$T/v/bin/pip" install --no-index --no-deps "$whl" > "$T/pipi.log" 2>&1 || fail "install: $(cat "$T/pipi.log")"
site=$("$T/v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
N=$site/memsnap/_native
[ -x "$N/bin/memsnap" ] || fail "no $N/bin/memsnap"
run_clean() { env -i PATH="$T/v/bin:/usr/bin:/bin" HOME="$T" "$@"; }
mkdir -p "$T/w" && cd "$T/w" || fail "cd"
run_clean memsnap --version | grep -q "^memsnap $ver (snapshot format" || fail "--version"
run_clean memsnap run --sim-device 8G -q -o "$T/w/s.msnap" -- \
    sh -c 'echo "preload=$LD_PRELOAD"; echo "libpath=$LD_LIBRARY_PATH"; exec memsnap-smoke' > out 2> err ||
    fail "memsnap run: $(cat err)"
grep -qx "preload=$N/lib/memsnap/libmemsnap.so" out || fail "recorder not from the package: $(head -2 out)"
grep -q "^libpath=$N/lib/memsnap/simdev" out || fail "simulated device not from the package: $(head -2 out)"
grep -q "memsnap-smoke: 24 steps on memsnap simulated device" out || fail "smoke: $(cat out err)"
ok
run_clean memsnap summary s.msnap > summary || fail "summary"
grep -q "^command    memsnap-smoke" summary || fail "summary: $(head -5 summary)"
run_clean memsnap render s.msnap -o "$T/w/s" > /dev/null || fail "render"
"$BUILD_DIR/bin/memsnap" render s.msnap -o "$T/w/b" > /dev/null || fail "render (build tree)"
for p in timeline segments; do
    cmp -s "s-$p.png" "b-$p.png" || fail "s-$p.png differs from the build tree's (the bundled font?)"
done
ok
run_clean python -c "
import memsnap, os
assert memsnap.__version__ == '$ver', memsnap.__version__
p = memsnap.paths()
assert all(p.values()) and p['memsnap'] == '$N/bin/memsnap', p
assert os.path.isfile(os.path.join(p['simdev_dir'], 'libcuda.so.1'))
" || fail "import memsnap"
run_clean python -m memsnap --version | grep -q "^memsnap $ver " || fail "python -m memsnap"
# man pages and completion from the wheel: MANPATH from memsnap.paths(), the
# script from the binary (it is built in) and from the package
manp=$(run_clean python -c 'import memsnap; print(memsnap.paths()["man"])')
[ "$manp" = "$N/share/man" ] && [ -f "$manp/man1/memsnap-run.1" ] || fail "man pages: $manp"
if command -v man > /dev/null; then
    [ "$(MANPATH="$manp" man -w memsnap-run 2>/dev/null)" = "$manp/man1/memsnap-run.1" ] ||
        fail "MANPATH=$manp man -w memsnap-run"
fi
run_clean memsnap help --bash-completion | cmp -s - "$N/share/bash-completion/completions/memsnap" ||
    fail "memsnap help --bash-completion differs from the package's script"
run_clean memsnap help --bash-completion | bash -n || fail "the completion script does not parse"
ok
# the console script hands over exit codes, signals, environment, dispositions
run_clean memsnap run -q -- sh -c 'exit 7'; rc=$?
[ $rc = 7 ] || fail "exit code $rc, expected 7"
run_clean memsnap run -q -- sh -c 'kill -TERM $$'; rc=$?
[ $rc = 143 ] || fail "killed by SIGTERM: exit code $rc, expected 143"
run_clean memsnap summary "$T/no-such.msnap" 2> /dev/null; rc=$?
[ $rc = 2 ] || fail "summary of a missing file: $rc, expected 2"
probe='echo "lc=${LC_CTYPE-unset}"; grep "^SigIgn" /proc/$$/status'
run_clean memsnap run -q -- sh -c "$probe" > via-script || fail "probe"
run_clean "$N/bin/memsnap" run -q -- sh -c "$probe" > direct || fail "probe (direct)"
grep -qx "lc=unset" via-script || fail "the program got Python's LC_CTYPE: $(cat via-script)"
cmp -s via-script direct || fail "the console script changed what the program gets: $(cat via-script direct)"
ok

# ---- 2b. the Python API from the wheel ----
run_clean python -c "
import json, subprocess, memsnap
p = '$SRC_DIR/tests/cli/golden/three.msnap'
cli = json.loads(subprocess.run([memsnap.paths()['memsnap'], 'summary', '--json', p],
                                stdout=subprocess.PIPE).stdout)
assert memsnap.load(p).summary() == cli
assert memsnap.paths()['py'].endswith('/lib/memsnap/libmemsnap_py.so')
" || fail "memsnap.load().summary() in the bare venv"
ok
if $PY -c 'import pandas, pytest, IPython' 2> /dev/null; then
    $PY -m venv --system-site-packages "$T/vp" || fail "venv (system site packages)"
    "$T/vp/bin/pip" install --no-index --no-deps "$whl" > "$T/pipp.log" 2>&1 || fail "install: $(cat "$T/pipp.log")"
    "$T/vp/bin/python" -c "
from importlib.metadata import entry_points
eps = entry_points()
g = eps.select(group='pytest11') if hasattr(eps, 'select') else eps.get('pytest11', [])
assert [e.value for e in g if e.name == 'memsnap'] == ['memsnap.pytest_plugin'], list(g)
" || fail "no pytest11 entry point memsnap = memsnap.pytest_plugin in the wheel"
    (cd "$SRC_DIR/tests/python" && env -i PATH="$T/vp/bin:/usr/bin:/bin" HOME="$T" \
        MEMSNAP_SRC_DIR="$SRC_DIR" PYTHONDONTWRITEBYTECODE=1 "$T/vp/bin/python" -m pytest -q \
        -p no:cacheprovider --basetemp="$T/pytest" test_api.py test_record.py test_job.py \
        test_pytest_plugin.py test_notebook.py) > "$T/pytest.log" 2>&1 ||
        fail "tests/python on the wheel: $(tail -30 "$T/pytest.log")"
    grep -qE "^[0-9]+ passed" "$T/pytest.log" || fail "tests/python: $(tail -3 "$T/pytest.log")"
    echo "tests/python on the wheel: $(tail -1 "$T/pytest.log")"
    ok
else
    echo "(no python3-pandas, python3-pytest or python3-ipython: tests/python on the wheel left out; scripts/setup.sh)"
fi

# ---- 3. every library resolves inside the package ----
$PY "$T/bundle_libs.py" --check "$N" > "$T/ldd.txt" || fail "bundle_libs.py --check: $(tail "$T/ldd.txt")"
grep -q "^bin/memsnap: libcairo.so.2 -> \|^bin/memsnap: libcairo-" "$T/ldd.txt" ||
    grep -q "libcairo-[0-9a-f]*.so.2 -> $N/lib/deps/" "$T/ldd.txt" || fail "cairo not bundled: $(head "$T/ldd.txt")"
# LD_DEBUG=libs: every library initialized is the package's or glibc's
inits() { grep -o 'calling init: .*' "$1" | sed -E 's/calling init: //; s#/[^/]+/\.\./#/#g' | sort -u; }
outside() { inits "$1" | grep -v "^$N/" | grep -vE '^/(usr/)?lib(64|/x86_64-linux-gnu)/(libc|libm|ld-linux-x86-64)\.so'; }
env -i LD_DEBUG=libs "$N/bin/memsnap" --version > /dev/null 2> "$T/ld-cli.txt" || fail "LD_DEBUG memsnap"
[ -z "$(outside "$T/ld-cli.txt")" ] || fail "memsnap loads from outside the package: $(outside "$T/ld-cli.txt")"
[ "$(inits "$T/ld-cli.txt" | grep -c "^$N/lib/deps/")" -ge 20 ] || fail "few bundled libraries: $(inits "$T/ld-cli.txt")"
env -i LD_DEBUG=libs "$N/bin/memsnap" run --sim-device 1G -q -o "$T/w/d.msnap" -- "$N/bin/memsnap-smoke" \
    > /dev/null 2> "$T/ld-run.txt" || fail "LD_DEBUG run: $(tail "$T/ld-run.txt")"
[ -z "$(outside "$T/ld-run.txt")" ] || fail "the recorded program loads from outside: $(outside "$T/ld-run.txt")"
inits "$T/ld-run.txt" | grep -q "^$N/lib/memsnap/libmemsnap.so$" || fail "no recorder in LD_DEBUG"
inits "$T/ld-run.txt" | grep -q "^$N/lib/deps/libunwind-" || fail "no bundled libunwind in LD_DEBUG"
ok

# ---- 4. a chroot with glibc alone ----
if [ "$(id -u)" = 0 ] && command -v unshare > /dev/null && command -v chroot > /dev/null; then
    R=$T/root
    mkdir -p "$R/lib64" "$R/lib/x86_64-linux-gnu" "$R/proc" "$R/dev" "$R/tmp" "$R/w"
    cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
    for l in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
        cp -L "/lib/x86_64-linux-gnu/$l" "$R/lib/x86_64-linux-gnu/"
    done
    cp -a "$N" "$R/opt"
    cp "$T/w/s.msnap" "$R/w/"
    unshare --mount --fork sh -c "mount -t proc proc '$R/proc' && mount --bind /dev '$R/dev' &&
        chroot '$R' /opt/bin/memsnap --version &&
        chroot '$R' /opt/bin/memsnap run --sim-device 8G -q -o /w/c.msnap -- /opt/bin/memsnap-smoke &&
        chroot '$R' /opt/bin/memsnap summary /w/c.msnap &&
        chroot '$R' /opt/bin/memsnap render /w/s.msnap -o /w/s" > "$T/chroot.log" 2>&1 ||
        fail "in the chroot: $(tail -20 "$T/chroot.log")"
    grep -q "memsnap-smoke: 24 steps on memsnap simulated device" "$T/chroot.log" || fail "chroot smoke: $(cat "$T/chroot.log")"
    grep -q "^command    /opt/bin/memsnap-smoke" "$T/chroot.log" || fail "chroot summary: $(cat "$T/chroot.log")"
    cmp -s "$R/w/s-timeline.png" "$T/w/s-timeline.png" || fail "the chroot's PNG differs"
    ok
else
    echo "(not root, or no unshare/chroot: the chroot check is left out)"
fi
echo "wheel $(basename "$whl"), $(du -k "$whl" | cut -f1) KiB; installed $(du -sk "$site/memsnap" | cut -f1) KiB"
echo "$passed passed, 0 failed"

#!/bin/bash
# The manylinux wheel (ctest install.manylinux; docs/install.md, *The
# manylinux wheel*; issue 33):
#   1. scripts/build-wheel.sh builds it in the cached Debian 11 root (from
#      scratch, with debootstrap, when the root is not cached);
#   2. packaging/check_wheel.py passes it: every ELF file needs GLIBC 2.31
#      at most and no library outside the wheel but the manylinux ones and
#      the driver's; and the check can fail: the Debian 12 build's memsnap
#      (GLIBC_2.34, cairo not bundled), the wheel with a bundled library
#      taken out, an absolute run path, a linux_x86_64 name;
#   3. in a second Debian 11 root, a user's machine (python3.9, numpy 1.19,
#      pandas 1.1.5, pytest 6.0, no compiler, none of memsnap's libraries),
#      as a user, not root, manylinux_in_root.sh: pip installs it (and
#      refuses a manylinux_2_34 one), --version, memsnap run --sim-device 8G
#      -- memsnap-smoke, summary, render, replay, predict, the Python API on
#      the kept H200 recordings against the CLI, tests/python's API, record
#      and plugin suites, the plugin's collection in a user's folder, ldd
#      and LD_DEBUG=libs (nothing from outside the wheel but glibc);
#   4. what it wrote equals the host build's answers on the same files: the
#      summaries, the PNGs byte for byte, replay's and predict's figures.
# Needs root (debootstrap, chroot; CI is root: otherwise skipped, 77),
# debootstrap and, when the roots are not cached (/var/cache/memsnap),
# Debian's mirror.  Environment (set by CMake): BUILD_DIR, SRC_DIR, CASE_DIR.
set -u
T=${CASE_DIR:?}/manylinux
rm -rf "$T"; mkdir -p "$T"
passed=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; echo "$passed passed, 1 failed"; exit 1; }
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root (debootstrap and chroot make and enter the Debian 11 roots); CI runs as root"
    exit 77
fi
for t in debootstrap unshare chroot readelf patchelf; do
    command -v $t > /dev/null || fail "$t is needed (scripts/setup.sh)"
done
M=$BUILD_DIR/bin/memsnap                 # the host build: the oracle's answers
PY=/usr/bin/python3
ROOTSH=$SRC_DIR/scripts/debian11-root.sh
CHECK="$PY $SRC_DIR/packaging/check_wheel.py"
ver=$(sed -n 's/^project(memsnap VERSION \([0-9.]*\).*/\1/p' "$SRC_DIR/CMakeLists.txt")

# ---- 1. the build ----
t0=$SECONDS
"$SRC_DIR/scripts/build-wheel.sh" "$T/dist" > "$T/build.out" 2> "$T/build.err" ||
    fail "build-wheel.sh: $(tail -5 "$T/build.err")"
whl=$(tail -1 "$T/build.out")
[ "$whl" = "$T/dist/memsnap-$ver-py3-none-manylinux_2_31_x86_64.whl" ] && [ -f "$whl" ] ||
    fail "build-wheel.sh printed '$whl'"
echo "build-wheel.sh: $((SECONDS - t0)) s, $(du -k "$whl" | cut -f1) KiB ($(grep -c 'making the' "$T/build.err") roots made)"
ok

# ---- 2. the symbol versions and the libraries ----
$CHECK "$whl" > "$T/check.txt" || fail "check_wheel.py: $(cat "$T/check.txt")"
grep -q "keeps to manylinux_2_31" "$T/check.txt" || fail "check_wheel.py: $(cat "$T/check.txt")"
cat "$T/check.txt"
mkdir -p "$T/bad/d12/bin"
cp "$M" "$T/bad/d12/bin/"
$CHECK "$T/bad/d12" > "$T/bad/d12.txt" && fail "check_wheel.py passed the Debian 12 build's memsnap"
grep -qE "bin/memsnap: needs GLIBC_2\.3[2-9] \(from libc\.so\.6\), above the 2\.31" "$T/bad/d12.txt" ||
    fail "no GLIBC finding for the Debian 12 build: $(cat "$T/bad/d12.txt")"
grep -q "bin/memsnap: needs libcairo.so.2, which is neither bundled" "$T/bad/d12.txt" ||
    fail "no unbundled-library finding for the Debian 12 build: $(cat "$T/bad/d12.txt")"
$PY -m zipfile -e "$whl" "$T/bad/unz" || fail "unzip"
N=$T/bad/unz/memsnap/_native
zstd=$(basename "$(ls "$N"/lib/deps/libzstd-*.so.1)")
mv "$N/lib/deps/$zstd" "$T/bad/"
$CHECK "$T/bad/unz" > "$T/bad/nozstd.txt" && fail "check_wheel.py passed a wheel without its $zstd"
grep -q "bin/memsnap: needs $zstd, which is neither bundled" "$T/bad/nozstd.txt" ||
    fail "no finding for the missing $zstd: $(cat "$T/bad/nozstd.txt")"
mv "$T/bad/$zstd" "$N/lib/deps/"
$CHECK "$T/bad/unz" > /dev/null || fail "the unpacked wheel, restored: $($CHECK "$T/bad/unz")"
patchelf --set-rpath /usr/lib/x86_64-linux-gnu "$N/bin/memsnap"
$CHECK "$T/bad/unz" > "$T/bad/rpath.txt" && fail "check_wheel.py passed an absolute run path"
grep -q "bin/memsnap: run path /usr/lib/x86_64-linux-gnu is outside the wheel" "$T/bad/rpath.txt" ||
    fail "no run-path finding: $(cat "$T/bad/rpath.txt")"
cp "$whl" "$T/bad/memsnap-$ver-py3-none-linux_x86_64.whl"
$CHECK "$T/bad/memsnap-$ver-py3-none-linux_x86_64.whl" > "$T/bad/tag.txt" && fail "check_wheel.py passed a linux_x86_64 name"
grep -q "the file name's tag is not manylinux_2_31_x86_64" "$T/bad/tag.txt" || fail "no tag finding: $(cat "$T/bad/tag.txt")"
rm -rf "$T/bad/unz"
ok

# ---- 3. on a user's Debian 11 machine ----
mkdir -p "$T/in" "$T/w"
chmod 777 "$T/w"
cp "$whl" "$T/in/"
t1=$SECONDS
"$ROOTSH" exec run -b "$SRC_DIR:/src" -b "$T/in:/in" -b "$T/w:/w:rw" -u memsnap \
    -e PYTHONDONTWRITEBYTECODE=1 -- bash /src/tests/install/manylinux_in_root.sh "/in/$(basename "$whl")" \
    > "$T/in-root.txt" 2>&1
rc=$?
cat "$T/in-root.txt"
[ $rc = 0 ] && grep -qx done "$T/in-root.txt" || fail "in the Debian 11 root (exit $rc): $(grep FAIL "$T/in-root.txt")"
echo "in the Debian 11 root: $((SECONDS - t1)) s"
ok

# ---- 4. the same answers as the host build ----
W=$T/w
same_json() {   # same_json A B: equal but for "file" (the path as each was given)
    $PY - "$1" "$2" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for d in (a, b):
    d.pop("file", None)
sys.exit(0 if a == b else 1)
EOF
}
"$M" summary --json "$W/s.msnap" > "$T/host-s.json" || fail "host summary"
same_json "$W/s.json" "$T/host-s.json" || fail "summary --json of the Debian 11 recording differs from the host build's"
for f in "$SRC_DIR"/tests/viz/data/h200/*.msnap.zst; do
    b=$(basename "$f" .msnap.zst)
    "$M" summary --json "$f" > "$T/host-$b.json" || fail "host summary $b"
    same_json "$W/h200-$b.json" "$T/host-$b.json" || fail "summary --json of $b differs from the host build's"
done
"$M" render "$W/s.msnap" -o "$T/host-s" > /dev/null || fail "host render"
"$M" render "$SRC_DIR/tests/viz/data/h200/train-llama.msnap.zst" -o "$T/host-tl" > /dev/null || fail "host render"
for p in timeline segments; do
    cmp -s "$W/s-$p.png" "$T/host-s-$p.png" || fail "s-$p.png from Debian 11 differs from the host build's"
    cmp -s "$W/tl-$p.png" "$T/host-tl-$p.png" || fail "tl-$p.png from Debian 11 differs from the host build's"
done
"$M" replay "$W/s.msnap" --suggest > "$T/host-replay-s.txt" || fail "host replay"
"$M" replay "$SRC_DIR/tests/viz/data/h200/train-llama.msnap.zst" -c "" -c expandable_segments:True \
    > "$T/host-replay-tl.txt" || fail "host replay (torch)"
for r in replay-s replay-tl; do
    diff <(sed "s#/src/#$SRC_DIR/#g; s#$W/#DIR/#g" "$W/$r.txt") \
         <(sed "s#$W/#DIR/#g" "$T/host-$r.txt") > "$T/$r.diff" ||
        fail "$r differs from the host build's: $(head -5 "$T/$r.diff")"
done
P=$SRC_DIR/tests/interop/data/predict_h200
"$M" predict -q --json --at 16,32 "$P/batch-sdpa-b2-s512-def.msnap.zst@2" \
    "$P/batch-sdpa-b3-s512-def.msnap.zst@3" > "$T/host-predict.json" || fail "host predict"
$PY - "$W/predict.json" "$T/host-predict.json" "$P/truths.json" <<'EOF' || fail "predict (above)"
import json, sys
a, b, truths = (json.load(open(p)) for p in sys.argv[1:4])
key = lambda o: [(x["at"], x["peak_allocated"], x["peak_reserved"], x["oom"]) for x in o]
assert key(a) == key(b), (key(a), key(b))
real = {r["name"]: r for r in truths["runs"]}
r = [v for k, v in real.items() if "-b16-s512" in k and not v["conf"] and not v["frac"]][0]
got = [x for x in a if x["at"] == 16][0]
err = 100.0 * (got["peak_allocated"] - r["max_memory_allocated"]) / r["max_memory_allocated"]
print("predict at batch 16 on Debian 11: peak allocated %d, PyTorch's own %d (%+.1f%%)"
      % (got["peak_allocated"], r["max_memory_allocated"], err))
assert abs(err) < 5, err
EOF
ok
echo "wheel $(basename "$whl"), $(du -k "$whl" | cut -f1) KiB; the whole check $SECONDS s"
echo "$passed passed, 0 failed"

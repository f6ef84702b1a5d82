#!/bin/bash
# Builds memsnap's wheel for every Linux with glibc 2.31 or later (Debian 11,
# Ubuntu 20.04, RHEL 9, PyTorch's and NVIDIA's images):
#   scripts/build-wheel.sh OUTDIR    -> OUTDIR/memsnap-VERSION-py3-none-manylinux_2_31_x86_64.whl
# Inside a Debian 11 (bullseye) root made with debootstrap from Debian's own
# packages (scripts/debian11-root.sh, cached in /var/cache/memsnap): the
# source as git has it (tracked and untracked-but-not-ignored files) is
# copied into the root, and bullseye's pip, setuptools 52, wheel 0.34,
# CMake 3.18 and GCC 10 build it there with setup.py as usual, against
# bullseye's libraries, which bundle_libs.py bundles ($ORIGIN run paths);
# the CUDA toolkit is the host's, bound read-only at /usr/local/cuda.  Then
# packaging/check_wheel.py checks that every ELF file needs GLIBC 2.31 at
# most and nothing outside the wheel but the manylinux libraries and the
# driver's; a wheel that does not is not written.  docs/install.md, *The
# manylinux wheel*, says why a chroot rather than --sysroot.
# Needs root (debootstrap, chroot), debootstrap, the CUDA toolkit
# (CUDA_HOME, default /usr/local/cuda) and, the first time, Debian's mirror
# (scripts/debian11-root.sh lists the settings).  Idempotent: each run
# builds from a fresh copy of the source; the root is kept.
# MEMSNAP_BUILD_JOBS: parallel jobs (default: all CPUs).
set -euo pipefail
die() { echo "build-wheel.sh: $*" >&2; exit 2; }
[ $# = 1 ] || die "usage: scripts/build-wheel.sh OUTDIR"
src=$(cd "$(dirname "$0")/.." && pwd)
out=$1
[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot): sudo scripts/build-wheel.sh $out"
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -f "$cuda/include/cuda.h" ] ||
    die "the CUDA toolkit was not found at $cuda (set CUDA_HOME): the wheel carries the recorder"
t0=$SECONDS
ROOTSH=$src/scripts/debian11-root.sh
R=$("$ROOTSH" make build)
ver=$(sed -n 's/^project(memsnap VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
plat=manylinux_2_31_x86_64
whl=memsnap-$ver-py3-none-$plat.whl

# ---- the source, as a clone has it, in the root ----
W=/tmp/memsnap-wheel.$$                  # inside the root; one per run
rm -rf "$R$W"
trap 'rm -rf "$R$W"' EXIT
mkdir -p "$R$W/src" "$R$W/dist"
if git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 cp --parents -t "$R$W/src" 2> /dev/null) || die "copying the source"
else
    (cd "$src" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$R$W/src" || die "copying the source"
fi

# ---- the build, in the root ----
jobs=${MEMSNAP_BUILD_JOBS:-$(nproc)}
log=$out/build-wheel.log
mkdir -p "$out"
rm -f "$out/$whl"
echo "build-wheel.sh: building in $R (log: $log)" >&2
"$ROOTSH" exec build -b "$cuda:/usr/local/cuda" \
    -e MEMSNAP_WHEEL_PLATFORM=$plat -e MEMSNAP_BUILD_JOBS="$jobs" -e CUDA_HOME=/usr/local/cuda \
    -- sh -c "cd $W/src && python3 -m pip wheel --no-build-isolation --no-index --no-deps \
              -w $W/dist ." > "$log" 2>&1 ||
    die "pip wheel in the root failed: $(grep -E 'error|Error|setup.py:' "$log" | tail -5)"
[ -f "$R$W/dist/$whl" ] || die "no $whl: $(ls "$R$W/dist")"

# ---- the check, in the root (its readelf and python3) ----
cp "$src/packaging/check_wheel.py" "$R$W/"
"$ROOTSH" exec build -- python3 "$W/check_wheel.py" --glibc 2.31 "$W/dist/$whl" >> "$log" 2>&1 ||
    die "the wheel does not keep to manylinux_2_31; not written: $(grep '^check_wheel.py' "$log" | head -5)"
grep '^check_wheel.py' "$log" | tail -1 >&2
cp "$R$W/dist/$whl" "$out/$whl"
echo "build-wheel.sh: $out/$whl, $(du -k "$out/$whl" | cut -f1) KiB, in $((SECONDS - t0)) s" >&2
echo "$out/$whl"

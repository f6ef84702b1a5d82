#!/bin/bash
# Installs what memsnap needs on Debian 12 / Ubuntu, if it is missing:
# a C toolchain, CMake, pkg-config and the Debian packages of libunwind, cJSON,
# libpng, cairo (the pictures) with FreeType and the DejaVu fonts, elfutils libdw and zstd,
# jq (tests read JSON output with it) and xmllint (tests read the SVGs);
# Prometheus, tmux and curl for the live views' tests.
# The CUDA toolkit must already be at /usr/local/cuda (or CUDA_HOME); it is
# not a Debian package.
# Idempotent and quiet when everything is there.
set -euo pipefail
pkgs="build-essential cmake pkg-config libunwind-dev libcjson-dev libpng-dev libcairo2-dev libfreetype-dev fonts-dejavu-core libxml2-utils libdw-dev libelf-dev libzstd-dev zstd procps libsqlite3-dev jq"
# packaging and its tests (cpack -G DEB, dpkg-shlibdeps, man), the fuzz build (clang, libFuzzer)
pkgs="$pkgs dpkg-dev man-db groff-base clang libclang-rt-14-dev"
# the pip package, built offline from Debian's Python packages (docs/install.md):
# setuptools and wheel drive CMake, patchelf bundles the libraries, venv and pip
# install and test the wheel
pkgs="$pkgs python3-venv python3-pip python3-setuptools python3-wheel patchelf"
# the manylinux wheel: built and tried in Debian 11 roots made with debootstrap
# (scripts/build-wheel.sh, tests/install/manylinux_test.sh)
pkgs="$pkgs debootstrap"
# the Python API, its pytest plugin and the notebook magic, tested in CI with
# Debian's pandas (1.5, numpy 1.24), pytest and IPython (docs/python.md)
pkgs="$pkgs python3-pandas python3-pytest python3-ipython"
# the live views' tests (tests/live): a real Prometheus server and promtool
# scrape memsnap run --metrics, memsnap top runs in tmux, curl asks
pkgs="$pkgs prometheus tmux curl"
# memsnap.job() on a dask.distributed cluster, tested with a LocalCluster of
# worker processes (Debian 12's Dask 2022.12; docs/python.md)
pkgs="$pkgs python3-dask python3-distributed"
missing=""
for p in $pkgs; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "memsnap setup: installing$missing" >&2
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda.h" ]; then
    # Without the toolkit only the reading side builds (README, Install).
    [ "${MEMSNAP_READER_ONLY:-0}" = 1 ] && exit 0
    echo "memsnap setup: the CUDA toolkit was not found at $cuda (set CUDA_HOME," \
         "or MEMSNAP_READER_ONLY=1 for the reading side only)" >&2
    exit 1
fi

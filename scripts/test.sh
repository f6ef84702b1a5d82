#!/bin/bash
# The README's test command: installs what is missing, builds, runs every test.
# GPU tests (ctest label gpu) skip themselves on a machine without a GPU.
#   scripts/test.sh               build/ and all tests
#   scripts/test.sh --sanitize    build-asan/ with AddressSanitizer + UBSan
#   scripts/test.sh --release     build-release/, CMAKE_BUILD_TYPE=Release (-O3,
#                                 no debug information) and warnings as
#                                 errors (MEMSNAP_WERROR), all tests but
#                                 install.wheel and install.manylinux (which
#                                 build their own copy of the source, the
#                                 same in every pass)
# Other arguments go to ctest (e.g. -L recorder, -R format).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
if [ "${1:-}" = --sanitize ]; then
    shift
    build=${BUILD_DIR:-$root/build-asan}
    BUILD_DIR=$build "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Debug -DMEMSNAP_SANITIZE=ON
    # The recorder is preloaded into programs that are not linked with the
    # ASan runtime; leak checking is off because the recorded programs and the
    # recorder keep their state until exit on purpose.
    export ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # A program that forks while another of its threads (the recorder's
    # writer) is inside ASan's allocator gives the child a locked allocator:
    # GCC 12's ASan runtime does not take its allocator lock around fork the
    # way glibc's malloc does, so the child hangs about once in ten runs.
    # The fork cases run in the normal pass; here they are left out.
    set -- -E '^recorder\.(fork|fork-stop|python-fork)$' "$@"
elif [ "${1:-}" = --release ]; then
    shift
    build=${BUILD_DIR:-$root/build-release}
    # What users get from -DCMAKE_BUILD_TYPE=Release: the libraries have no
    # debug information, so stacks name their frames by symbol alone
    # (issue 19), and -O3 inlines more (and warns about more): this pass
    # treats every warning as an error, so a warning fails CI once.
    BUILD_DIR=$build "$root/scripts/build.sh" -DCMAKE_BUILD_TYPE=Release -DMEMSNAP_WERROR=ON
    set -- -E '^install\.(wheel|manylinux)$' "$@"
else
    build=${BUILD_DIR:-$root/build}
    BUILD_DIR=$build "$root/scripts/build.sh"
fi
cd "$build"
ctest --output-on-failure -j"$(nproc)" "$@"

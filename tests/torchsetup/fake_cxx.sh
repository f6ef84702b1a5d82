#!/bin/bash
# A stand-in for g++ in build_plugin.py's command line: checks that it was
# asked for the build-id of the fake libc10_cuda.so, logs the call to
# $FAKE_CXX_LOG, then "compiles" by copying $FAKE_PLUGIN to the -o path.
# FAKE_CXX_FAIL=1: prints a compiler-like error and fails.
# FAKE_CXX_SLEEP=S: takes S seconds (for the concurrent case).
out=
bid=
while [ $# -gt 0 ]; do
    case $1 in
    -o) out=$2; shift ;;
    -DMEMSNAP_C10_BUILD_ID=*) bid=${1#-DMEMSNAP_C10_BUILD_ID=}; bid=${bid//\"/} ;;
    esac
    shift
done
echo "fake_cxx $bid" >> "${FAKE_CXX_LOG:?}"
sleep "${FAKE_CXX_SLEEP:-0}"
if [ "${FAKE_CXX_FAIL:-0}" = 1 ]; then
    echo "memsnap_torch.cpp:1:10: fatal error: c10/cuda/CUDACachingAllocator.h: no such file" >&2
    exit 1
fi
[ "$bid" = "${BUILD_ID:?}" ] || { echo "fake_cxx: build-id $bid, expected $BUILD_ID" >&2; exit 1; }
cp "${FAKE_PLUGIN:?}" "${out:?}"

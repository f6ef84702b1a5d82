#!/bin/bash
# run_gpu.sh PROBE CMD...: runs CMD only when PROBE finds a real GPU; exit 77
# (ctest: skipped) otherwise.
probe=$1; shift
"$probe" || exit 77
exec "$@"

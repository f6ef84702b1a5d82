#!/bin/sh
# live.once: `memsnap top --once` of the kept recording data/climb.msnap
# (climb 16 24 100 1500 blocks oom on a 4 GiB simulated device, plain JSON
# Lines, symbolized at exit) against golden/*.txt: at its end, at 1.5 s
# (live blocks, free inside reserved, a trend), one device.  Run from this
# folder so the frames name data/climb.msnap.  MEMSNAP_UPDATE_GOLDEN=1
# rewrites the golden files.
#   once.sh MEMSNAP
memsnap=$1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 1
export LC_ALL=C.UTF-8
fail=0
check() {
    name=$1
    shift
    out=$("$memsnap" top --once "$@" data/climb.msnap 2>&1)
    rc=$?
    if [ "$rc" != 0 ]; then
        echo "memsnap top --once $* exited $rc: $out"
        fail=1
        return
    fi
    if [ "${MEMSNAP_UPDATE_GOLDEN:-0}" = 1 ]; then
        printf '%s\n' "$out" > "golden/$name.txt"
        return
    fi
    if ! printf '%s\n' "$out" | diff -u "golden/$name.txt" -; then
        echo "memsnap top --once $* differs from golden/$name.txt"
        fail=1
    fi
}
check end
check at-1.5s --at 1.5s
check at-1.5s-device0-top1 --at 1500ms --device 0 --top 1
exit $fail

#!/bin/sh
# The workloads start without a CUDA driver: libcuda.so.1 is not a needed
# library of memsnap-decode or memsnap-smoke (they open it with dlopen when
# there is work to do), so --help prints its usage and exits 0 where no
# libcuda.so.1 can be found, and real work there fails with one line on
# stderr and exit 2.
# usage: nodriver.sh DECODE SMOKE SCRATCH
DECODE=$1 SMOKE=$2 T=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$T"; mkdir -p "$T/empty"
# Only an empty folder on the library path: the simulated device is not found.
# A driver installed in the system folders still is; then the "no driver"
# half cannot be shown and is skipped.
have_system_driver=0
if /sbin/ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 '; then
    have_system_driver=1
fi
n=0
for prog in "$DECODE" "$SMOKE"; do
    name=$(basename "$prog")
    readelf -d "$prog" > "$T/dyn" || fail "$name: readelf"
    grep -q 'NEEDED.*libc\.so' "$T/dyn" || fail "$name: readelf shows no NEEDED at all"
    grep -q 'NEEDED.*libcuda' "$T/dyn" && fail "$name needs libcuda: $(grep libcuda "$T/dyn")"
    LD_LIBRARY_PATH=$T/empty ldd "$prog" > "$T/ldd" 2>&1 || fail "$name: ldd: $(cat "$T/ldd")"
    grep -q 'not found' "$T/ldd" && fail "$name: ldd: $(grep 'not found' "$T/ldd")"
    grep -q libcuda "$T/ldd" && fail "$name: ldd lists libcuda"
    for h in --help -h; do
        LD_LIBRARY_PATH=$T/empty "$prog" $h > "$T/out" 2> "$T/err" || fail "$name $h: exit $?: $(cat "$T/err")"
        grep -q "^usage: $name" "$T/out" || fail "$name $h: no usage text on stdout"
        [ -s "$T/err" ] && fail "$name $h wrote to stderr: $(cat "$T/err")"
        n=$((n + 1))
    done
    if [ $have_system_driver = 1 ]; then
        echo "note: a system libcuda.so.1 is installed; the no-driver run of $name is skipped"
        continue
    fi
    # real work (decode: a few steps; smoke: 2 steps) without a driver
    case $name in
        memsnap-decode) set -- -q --steps 2 ;;
        *) set -- 2 ;;
    esac
    LD_LIBRARY_PATH=$T/empty "$prog" "$@" > "$T/out" 2> "$T/err"
    rc=$?
    [ $rc = 2 ] || fail "$name without a driver: exit $rc, want 2"
    [ -s "$T/out" ] && fail "$name without a driver wrote to stdout: $(cat "$T/out")"
    [ "$(wc -l < "$T/err")" = 1 ] || fail "$name without a driver: not one line: $(cat "$T/err")"
    grep -q "^$name: no CUDA driver: .*libcuda\.so\.1" "$T/err" || fail "$name: unclear message: $(cat "$T/err")"
    n=$((n + 1))
done
echo "$n passed, 0 failed"

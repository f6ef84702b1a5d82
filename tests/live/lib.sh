# Helpers of the live tests (sourced).  Environment (set by CMake):
# MEMSNAP, CLIMB, MEMSNAP_LIB, MEMSNAP_SIMDEV_DIR, CASE_DIR.
set -u
memsnap=$MEMSNAP
climb=$CLIMB
mkdir -p "$CASE_DIR"
work=$(mktemp -d "$CASE_DIR/live.XXXXXX")
fail=0
cleanup_cmds=""
on_exit() {
    eval "$cleanup_cmds"
    if [ "$fail" = 0 ]; then rm -rf "$work"; else echo "kept: $work"; fi
}
trap on_exit EXIT
# at_exit CMD: run CMD when the test ends (the processes it started, by pid)
at_exit() { cleanup_cmds="$1; $cleanup_cmds"; }
bad() { echo "FAIL: $*"; fail=1; }
skip() { echo "SKIP: $*"; exit 77; }
# a TCP port nothing listens on now
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# wait_for SECONDS CMD...: until CMD succeeds; 1 when it never did
wait_for() {
    t=$1
    shift
    i=0
    while [ "$i" -lt $((t * 10)) ]; do
        "$@" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
# "1.25 GiB" -> bytes (awk, rounded)
to_bytes() {
    echo "$1 $2" | awk '{u=$2; m=1; if(u=="KiB")m=1024; if(u=="MiB")m=1048576; if(u=="GiB")m=1073741824; if(u=="TiB")m=1099511627776; printf "%.0f\n", $1*m}'
}

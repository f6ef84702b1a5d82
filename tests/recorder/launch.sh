#!/bin/bash
# launch.sh N CMD [ARG...]: N copies of CMD at once, as torchrun starts the
# ranks of one host: RANK = LOCAL_RANK = 0..N-1, WORLD_SIZE =
# LOCAL_WORLD_SIZE = N.  Waits for all; exits with the highest status (0
# when every rank succeeded).  For the recorder's case ranks-sim.
n=${1:?usage: launch.sh N CMD [ARG...]}
shift
pids=()
for ((r = 0; r < n; r++)); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n "$@" &
    pids+=($!)
done
worst=0
for p in "${pids[@]}"; do
    wait "$p"; rc=$?
    [ $rc -gt $worst ] && worst=$rc
done
exit $worst

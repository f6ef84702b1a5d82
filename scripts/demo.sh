#!/bin/bash
# The README's main command: installs what is missing, builds, then records
# the decode workload (docs/workload.md) with memsnap -- on the GPU when there
# is one, otherwise on the simulated device (80 GB), and says which:
#
#   1. fragmentation scenario, fixed segments       -> snapshots/frag-fixed.msnap
#      (eight compressed hours of ramping long-context traffic; the pools
#       fragment until a KV regrowth fails near hour 6 with ~53 GiB of 80
#       allocated: exit 3, an OOM in the snapshot)
#   2. the same seed, expandable segments           -> snapshots/frag-expandable.msnap
#   3. the same seed, paged KV (block pool)         -> snapshots/frag-paged.msnap
#   4. the small training-loop program (memsnap-smoke) -> snapshots/demo.msnap
#
# It prints each run's summary line and the highlights of `memsnap summary`,
# and renders PNGs next to the snapshots when `memsnap render` is built.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
# MEMSNAP_NO_BUILD=1: use BUILD_DIR as it is (a build carried to a machine
# that cannot install packages)
if [ "${MEMSNAP_NO_BUILD:-0}" != 1 ]; then
    "$root/scripts/setup.sh"
    BUILD_DIR=$build "$root/scripts/build.sh"
fi
mkdir -p "$root/snapshots"
memsnap="$build/bin/memsnap"
decode="$build/bin/memsnap-decode"

sim=()
extra=()
if command -v nvidia-smi >/dev/null 2>&1 && gpu=$(nvidia-smi -L 2>/dev/null | head -1) && [ -n "$gpu" ]; then
    echo "memsnap demo: running on the GPU ($gpu), capped at 80 GB (--device-mem 80G)"
    # real kernels, but only every 200th step, so that eight simulated hours
    # stay within a minute per run (every step allocates exactly as without)
    extra=(--kernel-every 200)
else
    echo "memsnap demo: no GPU found: running on the simulated device (--sim-device 80G)"
    sim=(--sim-device 80G)
fi

can_render=0
if "$memsnap" render --help >/dev/null 2>&1; then
    can_render=1
fi

highlights() {  # summary's first screen: the peaks, what was live at the peak, the findings
    "$memsnap" summary --top 1 "$1" 2>/dev/null |
        sed -n '/^peaks$/,/^(below/p' | sed '/^(below/d; /^$/d; s/^/    /' || true
}

run_case() {  # run_case NAME DESCRIPTION ARGS...
    local name=$1 what=$2
    shift 2
    local snap="$root/snapshots/$name.msnap"
    echo
    echo "== $what"
    echo "   memsnap run ${sim[*]} -o snapshots/$name.msnap -- memsnap-decode $* ${extra[*]}"
    local rc=0
    "$memsnap" run "${sim[@]}" -q -o "$snap" -- "$decode" -q --device-mem 80G "$@" "${extra[@]}" || rc=$?
    case $rc in
        0) echo "   finished (exit 0)" ;;
        3) echo "   out of memory (exit 3)" ;;
        *) echo "   memsnap demo: memsnap-decode failed (exit $rc)"; exit 1 ;;
    esac
    echo "   memsnap summary snapshots/$name.msnap:"
    highlights "$snap"
    if [ $can_render = 1 ]; then
        "$memsnap" render "$snap" -o "$root/snapshots/$name" >/dev/null 2>&1 &&
            echo "   pictures: snapshots/$name-timeline.png snapshots/$name-segments.png" ||
            echo "   (memsnap render failed on snapshots/$name.msnap)"
    fi
}

start=$(date +%s)
run_case frag-fixed "fragmentation, fixed segments (the classic caching allocator)" \
    --scenario fragmentation --compress --alloc fixed
run_case frag-expandable "fragmentation, the same seed, expandable segments" \
    --scenario fragmentation --compress --alloc expandable
run_case frag-paged "fragmentation, the same seed, paged KV (block pool)" \
    --scenario fragmentation --compress --alloc fixed --kv paged

echo
echo "== the small training-loop program (memsnap-smoke)"
snap="$root/snapshots/demo.msnap"
"$memsnap" run "${sim[@]}" -q -o "$snap" -- "$build/bin/memsnap-smoke" >/dev/null
highlights "$snap"
if [ $can_render = 1 ]; then
    "$memsnap" render "$snap" -o "$root/snapshots/demo" >/dev/null 2>&1 || true
fi

echo
echo "memsnap demo: snapshots under snapshots/ (frag-fixed, frag-expandable, frag-paged, demo)$([ $can_render = 1 ] && echo ', with PNGs') in $(( $(date +%s) - start )) s"
echo "memsnap demo: look closer with: $build/bin/memsnap summary snapshots/frag-fixed.msnap"

#!/bin/bash
# memory_viz_browser.sh MEMSNAP DATA SCRATCH [SMOKE DECODE SIMDEV_DIR | GEN]
#
# Opens what `memsnap export --format torch` writes in PyTorch's own
# memory_viz page (torch/utils/viz/MemoryViz.js) in headless Chromium, through
# the page's own file loading (a dropped file), and checks what it shows:
# memory_viz_check.mjs says what is asserted.  Snapshots:
#   roundtrip     tests/interop/data/roundtrip.msnap: two devices, a few entries
#   smoke         the demo's small program (memsnap-smoke) recorded on the
#                 simulated device (with SMOKE and SIMDEV_DIR)
#   frag-fixed    the demo's fragmentation run (memsnap-decode, fixed segments,
#                 1.4M events, 1.45M trace entries) recorded on the simulated
#                 device; without DECODE, bench_gen_snapshot's 1.4M events (GEN)
# Each prints its load time (docs/interop.md has the figures with conditions;
# nothing here asserts a time) and leaves screenshots in SCRATCH.
#
# Needs, else it skips (exit 77, ctest SKIP_RETURN_CODE) and says why:
#   MEMSNAP_MEMORY_VIZ_JS  the path of MemoryViz.js: from an installed torch
#                          (python3 -c 'import torch.utils.viz, os;
#                          print(os.path.dirname(torch.utils.viz.__file__))'),
#                          or torch/utils/viz/ of PyTorch's repository.  It is
#                          PyTorch's file: it is never copied into this one.
#   chromium               Debian's package (MEMSNAP_CHROMIUM: another binary)
#   node and node_modules  npm ci --prefix tests/interop/browser (d3 for the
#                          page, playwright-core to drive chromium), or
#                          MEMSNAP_NODE_MODULES=DIR
# MEMSNAP_MEMORY_VIZ_HISTORY_MAX: the Allocator State History view (one DOM
# element per entry) is checked up to this many entries (default 200000).
set -u
memsnap=${1:?memsnap} data=${2:?data} S=${3:?scratch}
smoke=${4:-} decode=${5:-} simdev=${6:-}
gen=
if [ $# = 4 ]; then gen=$4; smoke=; fi
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

viz=${MEMSNAP_MEMORY_VIZ_JS:-}
[ -n "$viz" ] || skip "MEMSNAP_MEMORY_VIZ_JS is not set (the path of PyTorch's torch/utils/viz/MemoryViz.js: docs/interop.md)"
if [ ! -f "$viz" ]; then
    echo "memory_viz_browser: MEMSNAP_MEMORY_VIZ_JS=$viz: no such file"
    exit 2
fi
chrome=${MEMSNAP_CHROMIUM:-$(command -v chromium || true)}
[ -n "$chrome" ] && [ -x "$chrome" ] || skip "no chromium (apt-get install chromium, or MEMSNAP_CHROMIUM=PATH)"
command -v node >/dev/null || skip "no node (apt-get install nodejs npm)"
mods=${MEMSNAP_NODE_MODULES:-$here/browser/node_modules}
for p in playwright-core d3 d3-v5; do
    [ -f "$mods/$p/package.json" ] || skip "no $p in $mods (npm ci --prefix tests/interop/browser)"
done

rm -rf "$S"; mkdir -p "$S"
fail=0
# check NAME SNAP: export SNAP, work out what the page must read, open it there
check() {
    local name=$1 snap=$2
    echo "== $name ($snap)"
    "$memsnap" export "$snap" --format torch -o "$S/$name.pickle" 2> "$S/$name.export" ||
        { cat "$S/$name.export"; echo "FAIL: export $name"; fail=1; return; }
    cat "$S/$name.export"
    echo "pickle: $(stat -c %s "$S/$name.pickle") bytes"
    python3 "$here/memory_viz_expect.py" "$snap" "$S/$name.pickle" "$S/$name.expect.json" ||
        { echo "FAIL: expectations of $name"; fail=1; return; }
    node "$here/memory_viz_check.mjs" --viz "$viz" --modules "$mods" --chromium "$chrome" \
        --pickle "$S/$name.pickle" --expect "$S/$name.expect.json" --shots "$S/$name" \
        --history-max "${MEMSNAP_MEMORY_VIZ_HISTORY_MAX:-200000}" 2>&1 |
        grep -v 'unexpected operator'   # Debian's chromium wrapper script, not the page
    [ "${PIPESTATUS[0]}" = 0 ] || fail=1
}

check roundtrip "$data/roundtrip.msnap"
if [ -n "$simdev" ] && [ -n "$smoke" ]; then
    export LD_LIBRARY_PATH=$simdev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    "$memsnap" run --sim-device 80G -q -o "$S/smoke.msnap" -- "$smoke" > /dev/null &&
        check smoke "$S/smoke.msnap" || { echo "FAIL: recording memsnap-smoke"; fail=1; }
    "$memsnap" run --sim-device 80G -q -o "$S/frag-fixed.msnap" -- "$decode" -q --device-mem 80G \
        --scenario fragmentation --compress --alloc fixed > /dev/null
    # the workload's exit 3 is its OOM, the run's purpose
    [ -s "$S/frag-fixed.msnap" ] && check frag-fixed "$S/frag-fixed.msnap" ||
        { echo "FAIL: recording memsnap-decode"; fail=1; }
elif [ -n "$gen" ]; then
    "$gen" 1400000 "$S/gen.msnap" blocks > /dev/null && check gen-1.4M "$S/gen.msnap" ||
        { echo "FAIL: bench_gen_snapshot"; fail=1; }
fi
exit $fail

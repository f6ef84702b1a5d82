#!/bin/bash
# Decode workload tests on the simulated device.  One case per ctest:
#   cases.sh CASE
# Environment (set by CMake): DECODE (memsnap-decode), MEMSNAP (the CLI),
# MEMSNAP_SIMDEV_DIR, CASE_DIR.  The workload prints one summary line of
# key=value pairs; --bytes makes the sizes exact byte counts.
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
export LD_LIBRARY_PATH=$MEMSNAP_SIMDEV_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MEMSNAP_SIM_DEVICE_MEM=80G
fail() { echo "FAIL: $*"; exit 1; }
# decode EXPECTED_EXIT ARGS...: runs the workload, keeps its summary line in $T/out
decode() {
    local want=$1; shift
    "$DECODE" -q --bytes "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    cat "$T/out"
    [ $rc = "$want" ] || { cat "$T/err"; fail "exit $rc, expected $want: $*"; }
}
val() { grep -o " $1=[^ ]*" "$T/out" | head -1 | cut -d= -f2 | tr -d '"'; }
F=(--scenario fragmentation --compress --device-mem 80G)
cap=$((80 * 1024 * 1024 * 1024))

declare -A frag
case $case_name in
usage)
    "$DECODE" --help > "$T/help" || fail "--help exit $?"
    for f in scenario alloc kv device-mem mem-util preset layers hidden heads kv-heads head-dim ffn \
             vocab hours steps compress rate rate-end prompt-len output-len max-batch kv-chunk \
             kv-growth block-tokens leak-bytes seed sim-bw kernels kernel-every gemv peak-bw bytes quiet help; do
        grep -q -- "--$f" "$T/help" || fail "--help does not mention --$f"
    done
    for bad in "--bogus" "--alloc foo" "--kv x" "--scenario y" "--device-mem 12Q" "--hours -1" \
               "--prompt-len lognormal:1" "--compress=0" "--preset huge" "extra"; do
        "$DECODE" $bad > "$T/o" 2> "$T/e"; rc=$?
        [ $rc = 2 ] || fail "$bad: exit $rc, expected 2"
        [ "$(wc -l < "$T/e")" = 1 ] || fail "$bad: not one line: $(cat "$T/e")"
        grep -q "^memsnap-decode: " "$T/e" || fail "$bad: $(cat "$T/e")"
    done
    ;;
healthy)   # the sawtooth's valleys return to the floor: weights + the batch inputs
    decode 0 --preset small --scenario healthy --hours 0.1
    [ "$(val idle)" -gt 10 ] || fail "the server was never idle"
    [ "$(val floor_first)" = "$(val floor_last)" ] && [ "$(val floor_first)" = "$(val floor_max)" ] ||
        fail "the floor moved: first $(val floor_first) last $(val floor_last) max $(val floor_max)"
    w=$(val weights); f=$(val floor_first)
    [ "$f" -ge "$w" ] && [ "$f" -lt $((w + 1048576)) ] || fail "floor $f is not the weights ($w) plus inputs"
    [ "$(val peak_allocated)" -gt "$f" ] || fail "no sawtooth above the floor"
    ;;
leak)      # the floor climbs: about vocab*4 bytes per finished request
    decode 0 --preset small --scenario leak --hours 0.1
    first=$(val floor_first); last=$(val floor_last); n=$(val requests)
    [ "$last" -gt "$first" ] || fail "floor did not climb: $first -> $last"
    want=$(( n * 8192 * 4 * 9 / 10 ))
    [ $((last - first)) -ge $want ] || fail "floor climbed $((last - first)), expected about $((n * 32768))"
    ;;
cudamalloc-cap)  # cudamalloc mode: our own accounting enforces --device-mem
    decode 0 --preset small --alloc cudamalloc --hours 0.02 --device-mem 1G
    decode 3 --preset small --alloc cudamalloc --device-mem 30M
    [ "$(val oom_what)" = weights ] || fail "expected the weights to fail"
    ;;
paged-small)
    decode 0 --preset small --scenario healthy --kv paged --hours 0.05 --device-mem 1G
    decode 0 --preset small --scenario healthy --kv paged --alloc expandable --hours 0.05 --device-mem 1G
    [ "$(val floor_first)" = "$(val floor_last)" ] || fail "paged floor moved"
    ;;
alloc-sequence)   # the allocation sequence of each run, kernels on, as alloc_sequence.txt has it
    # (recorded; "kind bytes" per event, hashed): kernel changes leave it as it was
    sig() { zstdcat -f "$1" | grep -E '^\{"a":"(alloc|free|block_alloc|block_free|oom)"' |
            sed -E 's/^\{"a":"([a-z_]+)".*"n":([0-9]+).*/\1 \2/' | tee "$1.seq" | sha256sum | cut -c1-64; }
    seqrun() {
        local name=$1; shift
        "$MEMSNAP" run --sim-device 80G -q -o "$T/$name.msnap" -- "$DECODE" -q --kernels on "$@" \
            > "$T/$name.out" || [ $? = 3 ] || fail "$name: exit $?"
        echo "$name $(sig "$T/$name.msnap") $(grep -c . "$T/$name.msnap.seq")"
    }
    {
        seqrun small-healthy --preset small --hours 0.05
        seqrun small-paged --preset small --kv paged --device-mem 1G --hours 0.05
        seqrun small-leak --preset small --scenario leak --hours 0.05
        seqrun frag-fixed --scenario fragmentation --compress --device-mem 80G --alloc fixed --kernel-every 50
        seqrun healthy-8b --max-batch 32 --hours 0.05 --rate 5
    } > "$T/got"
    cat "$T/got"
    grep -v '^#' "$(dirname "$0")/alloc_sequence.txt" | diff - "$T/got" || fail "the allocation sequence changed"
    ;;
kernels-sim)   # the launch path runs (launches are no-ops on the simulated device)
    decode 0 --preset small --kernels on --hours 0.01
    decode 0 --preset small --kernels on --kv paged --device-mem 1G --hours 0.01
    ;;
frag-fixed)    # fixed segments fragment until a KV regrowth fails well below the cap
    decode 3 "${F[@]}" --alloc fixed
    a=$(val oom_allocated)
    [ "$a" -lt $((cap * 8 / 10)) ] || fail "OOM with $a allocated: not below 80% of the cap"
    [ "$(val oom_what)" = "KV regrowth" ] || [ "$(val oom_what)" = "KV" ] || fail "OOM in $(val oom_what)"
    echo "OOM at hour $(val oom_hour) with $((a >> 30)) GiB allocated of 80"
    ;;
frag-expandable)  # the same seed finishes with expandable segments
    decode 0 "${F[@]}" --alloc expandable
    [ "$(val sim_hours)" = 8.00 ] || fail "did not run the 8 hours"
    ;;
frag-paged)       # ... and with paged KV
    decode 0 "${F[@]}" --alloc fixed --kv paged
    decode 0 "${F[@]}" --alloc expandable --kv paged
    ;;
frag-cudamalloc)  # and cuMemAlloc/cuMemFree directly (no caching, no fragmentation of ours)
    decode 0 "${F[@]}" --alloc cudamalloc --hours 2
    ;;
frag-recorded)    # under the recorder: the OOM annotation and both layers are in the snapshot
    "$MEMSNAP" run --sim-device 80G -q -o "$T/s.msnap" -- "$DECODE" -q "${F[@]}" --alloc fixed > "$T/out"
    rc=$?
    [ $rc = 3 ] || fail "memsnap run: exit $rc, expected the workload's 3"
    "$MEMSNAP" summary --json --marks "$T/s.msnap" > "$T/sum.json" || true
    grep -q '"allocated_seen":true' "$T/sum.json" || fail "no allocated layer in the snapshot"
    grep -q 'memsnap-decode: out of memory' "$T/sum.json" || fail "no OOM annotation in the snapshot"
    # a mark at every simulated hour up to the OOM, in order, then the OOM's
    # own mark with the hour the summary line gives; render --x marks:hour
    # puts the OOM there (dump_model prints the renderer's marks axis)
    oom_hour=$(val oom_hour)
    grep -o '"message":"memsnap-decode: [^"]*"' "$T/sum.json" > "$T/marks"
    cat "$T/marks"
    last=${oom_hour%.*}
    { for h in $(seq 0 "$last"); do echo "\"message\":\"memsnap-decode: simulated hour $h\""; done
      grep 'out of memory' "$T/marks"; } > "$T/marks.want"
    cmp -s "$T/marks" "$T/marks.want" || { diff "$T/marks.want" "$T/marks"; fail "the marks are not hours 0..$last then the OOM"; }
    grep -q "out of memory at step $(val oom_step), simulated hour $oom_hour: " "$T/marks" ||
        fail "the OOM mark does not say hour $oom_hour"
    "$DUMP_MODEL" "$T/s.msnap" oom marks:hour > "$T/axis" || fail "dump_model marks:hour"
    head -2 "$T/axis"
    grep -qx "marks $((last + 2)) of \"hour\", x 0.000 to $oom_hour[0-9]" "$T/axis" ||
        fail "the marks axis is not $((last + 2)) marks from hour 0 to $oom_hour"
    grep -q "^oom at event [0-9]*: x $oom_hour[0-9]\$" "$T/axis" || fail "the OOM is not at hour $oom_hour"
    "$MEMSNAP" render --x marks:hour "$T/s.msnap" -o "$T/hour" > /dev/null || fail "render --x marks:hour"
    "$MEMSNAP" summary "$T/s.msnap" > "$T/sum.txt" || true
    grep -q "^fragmentation" "$T/sum.txt" || fail "summary found no fragmentation"
    # sites are named by the workload's code, not by memsnap's allocator
    # linked into it (ms_fixed_grow, its static helper ms_slow_path,
    # memsnap_*), also in a Release build, where the allocator's frames have
    # no source file (issue 19: "slow_path from server_run")
    site1=$(grep -m1 '^      site: ' "$T/sum.txt")
    echo "#1$site1"
    case "$site1" in
    *"site: mem_alloc (mem.c:"*) ;;
    *) fail "the #1 site is not named by the workload's code: $site1" ;;
    esac
    if grep '^      site: ' "$T/sum.txt" | grep -Eq 'site: (ms_|memsnap_|slow_path)'; then
        fail "a site is named by memsnap's allocator"
    fi
    ;;
hour-marks)  # a run that finishes (the demo's expandable one): a mark per simulated hour, 0 to 8
    "$MEMSNAP" run --sim-device 80G -q -o "$T/s.msnap" -- "$DECODE" -q --bytes "${F[@]}" \
        --alloc expandable > "$T/out" || fail "memsnap run: exit $?"
    [ "$(val sim_hours)" = 8.00 ] || fail "ran $(val sim_hours) hours, not 8"
    "$MEMSNAP" summary --json --marks "$T/s.msnap" | grep -o '"message":"memsnap-decode: [^"]*"' > "$T/marks"
    printf '"message":"memsnap-decode: simulated hour %d"\n' $(seq 0 8) > "$T/marks.want"
    cmp -s "$T/marks" "$T/marks.want" || { diff "$T/marks.want" "$T/marks"; fail "the marks are not hours 0 to 8"; }
    "$DUMP_MODEL" "$T/s.msnap" end marks:hour > "$T/axis" || fail "dump_model marks:hour"
    head -1 "$T/axis"
    # past the last mark the axis follows the slope of the last two: the
    # shutdown's frees come after the hour 8 mark
    grep -qx 'marks 9 of "hour", x 0.000 to 8\.[0-9]*' "$T/axis" || fail "axis: $(head -1 "$T/axis")"
    # without the recorder the workload writes no mark and runs the same
    "$DECODE" -q --bytes "${F[@]}" --alloc expandable > "$T/out2" || fail "exit $?"
    [ "$(sed 's/ wall_s=.*//' "$T/out")" = "$(sed 's/ wall_s=.*//' "$T/out2")" ] ||
        fail "the summary line differs without the recorder"
    ;;
frag-views)  # the demo's runs, recorded: fragmentation and the views agree
    # At each run's peak of reserved, 1 - largest_free/total_free inside
    # reserved (the segment map's number) is lower with expandable segments
    # and with paged KV than with fixed segments; and the process's peak
    # reserved/allocated read the same in summary (the process and device 0
    # of each file's result, the rank table; the text is printed from that
    # same result), the renderer's model (render) and compare.  Paged KV
    # peaks within minutes: two compressed hours are enough there.
    for a in fixed expandable paged; do
        args=(--alloc fixed); [ $a = expandable ] && args=(--alloc expandable)
        [ $a = paged ] && args=(--alloc fixed --kv paged --hours 2)
        "$MEMSNAP" run --sim-device 80G -q -o "$T/$a.msnap" -- "$DECODE" -q "${F[@]}" "${args[@]}" > /dev/null
        "$DUMP_MODEL" "$T/$a.msnap" peak > "$T/$a.model" || fail "dump_model $a"
        # 1e6 * (1 - largest free / free), from the model's layout line
        frag[$a]=$(awk '/^device 0: [0-9]+ segments/ { f=$(NF-3); l=$NF; sub(",","",f); print int(1e6 * (1 - l / f)) }' "$T/$a.model")
        [ -n "${frag[$a]}" ] || fail "no layout for $a"
        echo "$a: fragmentation at the peak $(awk "BEGIN{print ${frag[$a]}/1e6}")"
    done
    [ "${frag[expandable]}" -lt "${frag[fixed]}" ] || fail "expandable fragments more than fixed at the peak"
    [ "${frag[paged]}" -lt "${frag[fixed]}" ] || fail "paged fragments more than fixed at the peak"
    # paged KV: the pool is driver memory of the workload's holding the
    # allocator's blocks; the categories count its blocks, not the pool again
    "$MEMSNAP" summary --json "$T/paged.msnap" > "$T/paged.json" || fail "summary paged"
    python3 - "$T/paged.json" <<'PY' || fail "paged: categories count memory twice"
import json, sys
d = json.load(open(sys.argv[1]))
res = d["devices"][0]["reserved"]["peak"]
for c in d["categories"]:
    tot = sum(i["at_total_peak"] for i in c["items"])
    print(f"paged: categories {c['total_peak']} (items at that peak {tot}), reserved peak {res}")
    assert tot == c["total_peak"] <= res, (tot, c["total_peak"], res)
PY
    "$MEMSNAP" summary --each --json "$T/fixed.msnap" "$T/expandable.msnap" > "$T/ranks.json"
    "$MEMSNAP" compare "$T/fixed.msnap" "$T/expandable.msnap" -o "$T/cmp.png" > "$T/cmp.txt" || fail "compare"
    i=0
    for a in fixed expandable; do
        res_model=$(sed -n 's/^process peak reserved \([0-9]*\), peak stacked \([0-9]*\)$/\1/p' "$T/$a.model")
        alloc_model=$(sed -n 's/^process peak reserved \([0-9]*\), peak stacked \([0-9]*\)$/\2/p' "$T/$a.model")
        # each file's result has "process" then device 0 (one device here)
        res_sum=$(grep -o '"reserved":{"peak":[0-9]*' "$T/ranks.json" | sed -n "$((2 * i + 1))p" | grep -o '[0-9]*$')
        res_dev=$(grep -o '"reserved":{"peak":[0-9]*' "$T/ranks.json" | sed -n "$((2 * i + 2))p" | grep -o '[0-9]*$')
        alloc_sum=$(grep -o '"allocated":{"peak":[0-9]*' "$T/ranks.json" | sed -n "$((2 * i + 1))p" | grep -o '[0-9]*$')
        alloc_dev=$(grep -o '"allocated":{"peak":[0-9]*' "$T/ranks.json" | sed -n "$((2 * i + 2))p" | grep -o '[0-9]*$')
        [ "$res_dev" = "$res_sum" ] && [ "$alloc_dev" = "$alloc_sum" ] ||
            fail "$a: device 0 $res_dev / $alloc_dev, process $res_sum / $alloc_sum"
        rank=$(grep -o "\"file\":\"[^\"]*$a.msnap\",\"peak_reserved\":[0-9]*,\"peak_allocated\":[0-9]*" "$T/ranks.json")
        [ "$res_model" = "$res_sum" ] || fail "$a: peak reserved: model $res_model, summary $res_sum"
        [ "$alloc_model" = "$alloc_sum" ] || fail "$a: peak allocated: model $alloc_model, summary $alloc_sum"
        [ "$rank" = "\"file\":\"$T/$a.msnap\",\"peak_reserved\":$res_sum,\"peak_allocated\":$alloc_sum" ] ||
            fail "$a: rank entry $rank, per-file $res_sum / $alloc_sum"
        res_h=$(awk "BEGIN{printf \"%.2f GiB\", $res_sum / 1073741824}")
        alloc_h=$(awk "BEGIN{printf \"%.2f GiB\", $alloc_sum / 1073741824}")
        row=$([ $i = 0 ] && echo A || echo B)
        grep -q "^$row: .*$alloc_h  *$res_h " "$T/cmp.txt" || { cat "$T/cmp.txt"; fail "compare's $row row is not $alloc_h / $res_h"; }
        i=$((i + 1))
    done
    ;;
frag-replay)      # replay answers "would another config have avoided this OOM?"
    "$MEMSNAP" run --sim-device 80G -q -o "$T/s.msnap" -- "$DECODE" -q "${F[@]}" --alloc fixed > "$T/out"
    [ $? = 3 ] || fail "the recording did not end in the workload's OOM"
    want=$(zstdcat -f "$T/s.msnap" | grep '"a":"oom"' | grep '"f":"allocator"' | head -1 |
           sed 's/.*"n":\([0-9]*\).*/\1/')
    [ -n "$want" ] || fail "no allocator oom event in the recording"
    # -m 80G: the simulated NVML counts a 500 MiB context beside the 80G the
    # simulated device lets the program allocate (docs/simdev.md), which a
    # replay leaves out of the device by default (whatif.h); on the
    # simulation the recorded allocator had all of the 80G
    for i in 1 2; do
        "$MEMSNAP" replay "$T/s.msnap" -q --bytes -m 80G -c "" -c expandable_segments:true \
            -c max_split_size_mb:128 -o "$T/r$i" > "$T/t$i.txt" || fail "replay $i"
    done
    cat "$T/t1.txt"
    sed "s/r[12]-/rN-/g" "$T/t1.txt" > "$T/n1"; sed "s/r[12]-/rN-/g" "$T/t2.txt" > "$T/n2"
    cmp "$T/n1" "$T/n2" || fail "the tables differ between two runs"
    for k in 1 2 3; do cmp "$T/r1-$k.msnap" "$T/r2-$k.msnap" || fail "replay $k not byte-identical"; done
    # the recorded config fails the same request; the other two get past it
    grep -q "^the recording's first failed request: $want on stream 0" "$T/t1.txt" ||
        fail "the failed request of $want bytes is not the one replayed"
    grep -E "^1 +\(defaults\) .* $want \(x1\)" "$T/t1.txt" >/dev/null ||
        fail "the recorded config does not OOM at the recorded request ($want bytes)"
    grep -E "^1 +\(defaults\) +OOM again" "$T/t1.txt" >/dev/null || fail "defaults: not OOM again"
    # the recorded config's fragmentation at its peak of reserved is the
    # segment map's at the recording's (the moment after the block that the
    # new segment was made for, as the allocator's own counters see it)
    "$DUMP_MODEL" "$T/s.msnap" peak > "$T/peak.model" || fail "dump_model"
    frag_map=$(awk '/^device 0: [0-9]+ segments/ { f=$(NF-3); l=$NF; sub(",","",f); printf "%.4f", 1 - l / f }' "$T/peak.model")
    frag_rp=$(awk '$1 == 1 && $2 == "(defaults)" { print $5; exit }' "$T/t1.txt")
    echo "fragmentation at the peak of reserved: segment map $frag_map, replay $frag_rp"
    [ -n "$frag_map" ] && [ "$frag_map" = "$frag_rp" ] || fail "segment map $frag_map, replay $frag_rp"
    grep -E "^2 +expandable_segments:true +served: avoided" "$T/t1.txt" >/dev/null ||
        fail "expandable segments should get past the OOM"
    grep -E "^3 +max_split_size_mb:128 +served: avoided" "$T/t1.txt" >/dev/null ||
        fail "max_split_size_mb:128 should get past the OOM"
    zstdcat -f "$T/r1-1.msnap" | grep -q '"a":"oom"' || fail "no oom event in the replay of the recorded config"
    # --suggest: a config that avoids the OOM comes first
    "$MEMSNAP" replay "$T/s.msnap" -q --suggest > "$T/sug.txt" || fail "--suggest"
    cat "$T/sug.txt"
    grep -E "^ 1\. no OOM .*MEMSNAP_ALLOC_CONF=" "$T/sug.txt" >/dev/null || fail "--suggest: first is not OOM-free"
    grep -E "OOM in 1 of 1 .*MEMSNAP_ALLOC_CONF=\(the defaults\)" "$T/sug.txt" >/dev/null ||
        fail "--suggest: the defaults should be listed with their OOM"
    ;;
predict-hidden)  # memsnap predict: two model widths predict a third, against a run of it
    # The size parameter is the hidden size: every buffer's size is linear
    # in it (weights, activations) or constant (KV: kv-heads x head-dim),
    # and the allocation sequence does not change with it when the
    # simulated clock is fast (--sim-bw: requests never overlap) and every
    # request has the same lengths.  cudamalloc: one driver allocation per
    # buffer, of the size asked for (libmemsnap_alloc's own trace records
    # its blocks' sizes, which can be larger than what was asked for).
    P=(-q --bytes --preset small --scenario healthy --hours 0.02 --device-mem 8G --prompt-len 500
       --output-len 100 --sim-bw 1e6 --alloc cudamalloc)
    for h in 256 512 2048; do
        "$MEMSNAP" run --sim-device 80G -q -o "$T/h$h.msnap" -- "$DECODE" "${P[@]}" --hidden $h \
            > "$T/out" || fail "memsnap run at hidden $h: exit $?"
    done
    "$MEMSNAP" predict "$T/h256.msnap@256" "$T/h512.msnap@512" --at 2048 -p hidden -b > "$T/p.txt" ||
        fail "predict: exit $?"
    cat "$T/p.txt"
    grep -Eq "^aligned: ([0-9,]+) of \1 requests \(100.0%\)" "$T/p.txt" || fail "not every request aligned"
    want=$("$MEMSNAP" replay "$T/h2048.msnap" -q -b -c "" | awk '$1 == "1" {print $3, $4}')
    got=$(awk '$1 == "2048" {print $3, $4}' "$T/p.txt")
    echo "hidden 2048: predicted $got, a run of it replayed $want"
    [ -n "$want" ] && [ "$got" = "$want" ] || fail "predicted '$got', the run '$want'"
    grep -q "+79872 per hidden: mem_alloc (mem.c:[0-9]*) from load_weights" "$T/p.txt" ||
        fail "the weights should grow by 79872 bytes per unit of hidden"
    ;;
predict-batch)  # the batch size: more requests in flight make more KV buffers, one each
    # The step temporaries grow with the batch, but the number of KV
    # buffers grows too, and a prediction replays the template's number:
    # the output must say that requests did not align, and the prediction
    # is below the run of that batch (docs/interop.md, "Predict", limits).
    P=(-q --bytes --preset small --scenario healthy --hours 0.001 --rate 100000 --device-mem 8G
       --prompt-len 500 --output-len 100 --alloc cudamalloc --steps 300)
    for b in 4 8 16; do
        "$MEMSNAP" run --sim-device 80G -q -o "$T/b$b.msnap" -- "$DECODE" "${P[@]}" --max-batch $b \
            > "$T/out" || fail "memsnap run at batch $b: exit $?"
    done
    "$MEMSNAP" predict "$T/b4.msnap@4" "$T/b8.msnap@8" --at 16 -p batch -b > "$T/p.txt" ||
        fail "predict: exit $?"
    cat "$T/p.txt"
    grep -q "^  the recordings differ from request " "$T/p.txt" || fail "no word of where they differ"
    grep -q "^  limit: the unaligned requests keep their size and their number" "$T/p.txt" ||
        fail "no limit line"
    got=$(awk '$1 == "16" {print $3}' "$T/p.txt")
    share=$(awk '$1 == "16" {print $NF}' "$T/p.txt")
    want=$("$MEMSNAP" replay "$T/b16.msnap" -q -b -c "" | awk '$1 == "1" {print $3}')
    echo "batch 16: predicted $got (aligned $share), a run of it $want"
    [ "$got" -lt "$want" ] || fail "the prediction should miss the extra KV buffers"
    [ "$share" != "100.0%" ] || fail "the aligned share should be below 100%"
    ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS $case_name"

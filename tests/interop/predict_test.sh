#!/bin/sh
# predict_test.sh MEMSNAP SCRATCH CASE: `memsnap predict` on synthetic
# recordings (predict_synth.py) whose sizes are known functions of the
# parameter, so a prediction can be checked against the replay of a
# recording made at that value directly: the same engine, the same bytes.
#   exact     constant, linear (with an offset) and x^2 sizes from two
#             recordings; a general quadratic from three; memsnap's engine
#             and the torch engine (PyTorch's block and requested sizes)
#   misaligned  two programs: one line on stderr, exit 2
#   json      --json: one object per value and config, bytes as integers
#   find_max  --find-max: the value found fits and the next does not, in
#             direct replays; and with --json
#   oom       a value that does not fit: exit 1, the row says OOM and names
#             the request's site and mark
#   usage     usage errors: one line, exit 2
#   h200      real H200 recordings of a transformers Llama training loop
#             (data/predict_h200, README there): each of PyTorch's own peaks
#             of larger runs within 5% (allocated) and 10% (reserved), and
#             every memory-fraction run's OOM or not, predicted right
#   outside   what the recording measured outside the allocator (the CUDA
#             context, other libraries' driver memory: summary's driver
#             table) is left out of the device by default, in predict
#             --find-max, --at and replay, said in the output; --device-mem
#             gives the allocator all of it (issue 35 item 4, on the H200
#             recordings of data/predict_h200 and tests/viz/data/h200)
set -u
M=$1 S=$2 C=$3
HERE=$(cd "$(dirname "$0")" && pwd)
G=$HERE/predict_synth.py
T=$S/predict_$C
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }
synth() { python3 "$G" "$@" || fail "predict_synth.py $*"; }
# peak allocated and reserved of a direct replay: "ALLOC RESERVED"
replayed() {
    "$M" replay "$1" -q --bytes -c "${2:-}" ${3:+-m "$3"} | awk '$1 == "1" {print $3, $4}'
}
# the same from predict --json for value $1 (first object at that value)
predicted() {
    python3 -c 'import json,sys
for o in json.load(open(sys.argv[1])):
    if o["at"] == float(sys.argv[2]):
        print(o["peak_allocated"], o["peak_reserved"]); break' "$T/p.json" "$1"
}
case $C in
exact)
    for api in allocator torch; do
        for x in 2 3 4 16 64; do
            synth "$T/$api-$x.msnap" $x --api $api --general-quad
            synth "$T/$api-lin-$x.msnap" $x --api $api
        done
        # two recordings: constant, linear and c*x^2 are exact
        "$M" predict "$T/$api-lin-2.msnap@2" "$T/$api-lin-3.msnap@3" --at 16,64 --json >"$T/p.json" ||
            fail "predict ($api, two recordings)"
        for x in 16 64; do
            want=$(replayed "$T/$api-lin-$x.msnap"); got=$(predicted $x)
            echo "$api, two recordings, at $x: predicted $got, replayed $want"
            [ -n "$want" ] && [ "$got" = "$want" ] || fail "$api at $x: predicted '$got', replayed '$want'"
        done
        # three recordings: a + b*x + c*x^2
        "$M" predict "$T/$api-2.msnap@2" "$T/$api-3.msnap@3" "$T/$api-4.msnap@4" --at 16,64 --json \
            >"$T/p.json" || fail "predict ($api, three recordings)"
        for x in 16 64; do
            want=$(replayed "$T/$api-$x.msnap"); got=$(predicted $x)
            echo "$api, three recordings, at $x: predicted $got, replayed $want"
            [ -n "$want" ] && [ "$got" = "$want" ] || fail "$api at $x: predicted '$got', replayed '$want'"
        done
        # the general quadratic from two recordings is not exact, and the
        # text says how the sizes were fitted
        "$M" predict "$T/$api-2.msnap@2" "$T/$api-3.msnap@3" --at 64 --json >"$T/p.json" ||
            fail "predict ($api, two recordings of the quadratic)"
        [ "$(predicted 64)" != "$(replayed "$T/$api-64.msnap")" ] ||
            fail "a general quadratic from two points should not be exact"
        "$M" predict "$T/$api-2.msnap@2" "$T/$api-3.msnap@3" "$T/$api-4.msnap@4" --at 64 -p batch \
            >"$T/t.txt" || fail "predict text"
        cat "$T/t.txt"
        grep -q "^aligned: 40 of 40 requests (100.0%) in every recording: 7 constant, 27 linear, 6 quadratic$" \
            "$T/t.txt" || fail "the alignment line"
        grep -q "^ *+64.00 KiB per batch^2: attention_scores (model.py:40)" "$T/t.txt" ||
            fail "the growing sites should name attention_scores at +64 KiB per batch^2"
        grep -q "template $api-4.msnap, 40 requests" "$T/t.txt" || fail "the template is the largest value"
    done
    grep -q "torch (PyTorch's allocator emulated) engine" "$T/t.txt" || fail "torch traces take the torch engine"
    ;;
misaligned)
    synth "$T/a.msnap" 2; synth "$T/b.msnap" 3 --program other
    "$M" predict "$T/a.msnap@2" "$T/b.msnap@3" --at 8 >"$T/out" 2>"$T/err"; rc=$?
    cat "$T/err"
    [ $rc = 2 ] || fail "exit $rc, expected 2"
    [ "$(wc -l <"$T/err")" = 1 ] || fail "not one line"
    grep -q "^memsnap predict: b.msnap and a.msnap do not align: 0 of 10 requests (0.0%) match in order and stack; they first differ at request 1 (12.00 KiB for kv_grow (model.py:100) in b.msnap; 10.00 MiB for init_weight (model.py:10) in a.msnap)" "$T/err" ||
        fail "the message"
    [ ! -s "$T/out" ] || fail "something on stdout"
    # a recording whose second half differs: it aligns, and says where it stops
    synth "$T/c.msnap" 3
    head -n -1 "$T/c.msnap" | awk '/"a":"block_alloc"/ && ++n > 30 {sub(/"k":[0-9]+/, "\"k\":99999")} {print}' \
        >"$T/d.msnap"
    "$M" predict "$T/a.msnap@2" "$T/d.msnap@3" --at 8 >"$T/t.txt" || fail "a partly aligned pair"
    cat "$T/t.txt"
    grep -q "^  the recordings differ from request 31 " "$T/t.txt" || fail "where they differ"
    grep -q "^  limit: the unaligned requests keep their size" "$T/t.txt" || fail "the limit line"
    ;;
json)
    for x in 2 3; do synth "$T/s$x.msnap" $x; done
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4,40 -c "" -c expandable_segments:true --json \
        >"$T/p.json" || fail "predict --json"
    python3 -c 'import json,sys
l = json.load(open(sys.argv[1]))
assert isinstance(l, list) and len(l) == 4, l
for o in l:
    for k in ("at", "config", "peak_allocated", "peak_reserved", "oom", "headroom", "limit",
              "device_mem", "aligned_share", "first_failure"):
        assert k in o, k
    for k in ("peak_allocated", "peak_reserved", "headroom", "limit", "device_mem"):
        assert isinstance(o[k], int) and o[k] >= 0, (k, o[k])
    assert o["oom"] is False and o["first_failure"] is None
    assert o["device_mem"] == 8 << 30
assert [o["at"] for o in l] == [4, 4, 40, 40]
assert [o["config"] for o in l] == ["", "expandable_segments:true"] * 2
assert l[2]["peak_allocated"] > l[0]["peak_allocated"]
print("ok:", [(o["at"], o["config"], o["peak_allocated"], o["peak_reserved"]) for o in l])' "$T/p.json" ||
        fail "the JSON"
    ;;
find_max)
    for x in 2 3; do synth "$T/s$x.msnap" $x; done
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --find-max -m 1G -p batch >"$T/t.txt" || fail "find-max"
    cat "$T/t.txt"
    max=$(sed -n 's/^the largest batch that fits: \([0-9]*\) (at \([0-9]*\) it does not)$/\1 \2/p' "$T/t.txt")
    set -- $max
    [ $# = 2 ] && [ "$2" = $(($1 + 1)) ] || fail "no answer: $max"
    synth "$T/fit.msnap" "$1"; synth "$T/over.msnap" "$2"
    "$M" replay "$T/fit.msnap" -q -m 1G -c "" | awk '$1 == "1"' | grep -q " none " ||
        fail "a direct replay at $1 should fit"
    "$M" replay "$T/over.msnap" -q -m 1G -c "" | awk '$1 == "1"' | grep -q " none " &&
        fail "a direct replay at $2 should not fit"
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --find-max -m 1G --json >"$T/p.json" ||
        fail "find-max --json"
    python3 -c 'import json,sys
l = json.load(open(sys.argv[1])); o = l[0]
assert o["max"] == int(sys.argv[2]) and o["at"] == o["max"] and o["oom"] is False, o
assert o["next"]["at"] == o["max"] + 1 and o["next"]["oom"] is True, o["next"]
assert o["next"]["first_failure"]["site"], o["next"]' "$T/p.json" "$1" || fail "find-max JSON"
    # nothing fits: exit 1
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --find-max -m 12M >"$T/t2.txt"; rc=$?
    cat "$T/t2.txt"
    [ $rc = 1 ] || fail "nothing fits: exit $rc, expected 1"
    grep -q "^nothing fits: at unit 1 it does not$" "$T/t2.txt" || fail "nothing fits: the line"
    ;;
oom)
    for x in 2 3; do synth "$T/s$x.msnap" $x; done
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4,200 -m 1G >"$T/t.txt"; rc=$?
    cat "$T/t.txt"
    [ $rc = 1 ] || fail "exit $rc, expected 1 (a value does not fit)"
    grep -Eq "^4 +\(defaults\) .* yes " "$T/t.txt" || fail "4 should fit"
    grep -Eq "^200 +\(defaults\) .* OOM " "$T/t.txt" || fail "200 should not fit"
    grep -Eq "first failure: request [0-9]+ of 37 .*: [0-9.]+ MiB for [a-z_]+ \(model.py:[0-9]+\), after \"step 0 (forward|backward)\"" \
        "$T/t.txt" || fail "the first failure: its site and mark"
    ;;
usage)
    synth "$T/s2.msnap" 2; synth "$T/s3.msnap" 3
    expect() {
        want=$1; shift
        "$M" predict "$@" >/dev/null 2>"$T/err"; rc=$?
        [ $rc = 2 ] || fail "predict $*: exit $rc, expected 2"
        [ "$(wc -l <"$T/err")" = 1 ] || fail "predict $*: not one line: $(cat "$T/err")"
        [ "$(cat "$T/err")" = "memsnap predict: $want" ] ||
            fail "predict $*: $(cat "$T/err") (wanted: memsnap predict: $want)"
    }
    h="; try memsnap predict --help"
    expect "expected two or three recordings, each as SNAP@VALUE$h" "$T/s2.msnap@2" --at 4
    expect "\"$T/s2.msnap\": give the recording's value after @, e.g. $T/s2.msnap@4$h" \
        "$T/s2.msnap" "$T/s3.msnap@3" --at 4
    expect "\"$T/s2.msnap@x\": \"x\" after @ is not a number above 0$h" "$T/s2.msnap@x" "$T/s3.msnap@3" --at 4
    expect "two recordings at 2: the values must differ$h" "$T/s2.msnap@2" "$T/s3.msnap@2" --at 4
    expect "--at VALUES or --find-max is needed$h" "$T/s2.msnap@2" "$T/s3.msnap@3" 2>/dev/null
    expect "--at \"4,0\": \"0\" is not a number above 0$h" "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4,0
    expect "--at and --find-max go apart$h" "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4 --find-max
    expect "--find-max takes one --alloc-conf$h" "$T/s2.msnap@2" "$T/s3.msnap@3" --find-max -c "" -c ""
    expect "at most 3 recordings (three give a quadratic fit)$h" a@1 b@2 c@3 d@4 --at 4
    expect "--degree \"3\": expected 1 or 2$h" "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4 -d 3
    expect "--device-mem \"12Q\" is not a size such as 80G (at least 2M)$h" "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4 -m 12Q
    expect "$T/nope.msnap: cannot open: No such file or directory" "$T/nope.msnap@2" "$T/s3.msnap@3" --at 4
    "$M" predict "$T/s2.msnap@2" "$T/s3.msnap@3" --at 4 -c bogus_key:1 >/dev/null 2>"$T/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "^memsnap predict: bad config \"bogus_key:1\"" "$T/err" ||
        fail "a bad config: exit $rc: $(cat "$T/err")"
    "$M" predict --help | grep -q "^usage: memsnap predict SNAP@VALUE" || fail "--help"
    # one recording given twice (or a copy): an error; no size changing, or
    # every one shrinking as the value grows: a warning, the prediction made
    cp "$T/s2.msnap" "$T/copy.msnap"
    expect "$T/s2.msnap and $T/copy.msnap are the same recording (one process, one start): predict needs recordings of runs at different values" \
        "$T/s2.msnap@2" "$T/copy.msnap@3" --at 4
    "$M" predict "$T/s2.msnap@3" "$T/s3.msnap@2" --at 4 -p batch >/dev/null 2>"$T/err" || fail "swapped values: exit $?"
    grep -q "^memsnap predict: warning: every request that changes between the recordings ([0-9]*) gets smaller as batch grows: are the values after @ the right way round?$" "$T/err" ||
        fail "swapped values: no warning: $(cat "$T/err")"
    sed 's/"pid":1002/"pid":1003/' "$T/s2.msnap" > "$T/twin.msnap"
    "$M" predict "$T/s2.msnap@2" "$T/twin.msnap@3" --find-max -p batch --json >"$T/p.json" 2>"$T/err" ||
        fail "nothing changes: exit $?"
    grep -q "^memsnap predict: warning: no request changes size between the recordings: do they differ in batch?$" "$T/err" ||
        fail "nothing changes: no warning: $(cat "$T/err")"
    python3 -c 'import json,sys
o = json.load(open(sys.argv[1]))[0]
assert o["unbounded"] is True and o["next"] is None, o' "$T/p.json" || fail "nothing changes: the JSON"
    ;;
h200)
    D=$HERE/data/predict_h200
    python3 - "$M" "$D" "$T" <<'PY' || fail "a prediction is off (above)"
import json, re, subprocess, sys
m, d, t = sys.argv[1:4]
fams = {"batch": (["batch-sdpa-b2-s512-def@2", "batch-sdpa-b3-s512-def@3"], "-b"),
        "seq": (["seq-eager-b2-s256-def@256", "seq-eager-b2-s512-def@512"], "-s")}
bad = 0
for r in json.load(open(d + "/truths.json"))["runs"]:
    fam = "batch" if "batch-" in r["name"] else "seq"
    recs, tag = fams[fam]
    at = int(re.search(r"-b(\d+)-s512" if fam == "batch" else r"-b2-s(\d+)-", r["name"]).group(1))
    conf = r["conf"] + ("," if r["conf"] and r["frac"] else "") + \
        ("memory_fraction:%.12g" % r["frac"] if r["frac"] else "")
    cmd = [m, "predict", "-q", "--json", "--at", str(at), "-c", conf] + \
          ["%s/%s.msnap.zst@%s" % (d, n.split("@")[0], n.split("@")[1]) for n in recs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print("FAIL:", " ".join(cmd), p.stderr); bad = 1; continue
    o = json.loads(p.stdout)[0]
    if r["frac"]:
        ok = o["oom"] == r["oom"]
        print("%-40s %-48s real %-9s predicted %-9s %s" % (r["name"], conf, "OOM" if r["oom"] else "fits",
              "OOM" if o["oom"] else "fits", "ok" if ok else "WRONG"))
    else:
        ea = 100.0 * (o["peak_allocated"] - r["max_memory_allocated"]) / r["max_memory_allocated"]
        er = 100.0 * (o["peak_reserved"] - r["max_memory_reserved"]) / r["max_memory_reserved"]
        ok = abs(ea) <= 5 and abs(er) <= 10 and not o["oom"]
        print("%-40s %-26s allocated %12d / %12d %+6.2f%%  reserved %12d / %12d %+6.2f%%  %s" % (
            r["name"], conf or "(defaults)", o["peak_allocated"], r["max_memory_allocated"], ea,
            o["peak_reserved"], r["max_memory_reserved"], er, "ok" if ok else "OFF"))
    bad |= not ok
sys.exit(bad)
PY
    ;;
outside)
    D=$HERE/data/predict_h200
    TL=$HERE/../viz/data/h200/train-llama.msnap.zst
    B2=$D/batch-sdpa-b2-s512-def.msnap.zst B3=$D/batch-sdpa-b3-s512-def.msnap.zst
    python3 - "$M" "$B2" "$B3" "$TL" "$T" <<'PY' || fail "outside the allocator (above)"
import json, subprocess, sys
m, b2, b3, tl, t = sys.argv[1:6]
bad = 0
def check(ok, what):
    global bad
    if not ok:
        print("FAIL:", what); bad = 1
def run(*a):
    p = subprocess.run([m, *a], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print("FAIL:", m, *a, p.returncode, p.stderr); sys.exit(1)
    return p.stdout
def outside(path):
    """summary's driver table: device used less recorded, other libraries'"""
    r = json.loads(run("summary", "--json", path))["reconcile"][0]
    libs = sum(x["bytes"] for x in r["libraries"] if x["library"] != "PyTorch allocator")
    return max(r["unexplained"] or 0, 0), libs
total = 150109880320                      # the H200 of both recordings
ctx, libs = outside(b3)
check(ctx > 1 << 30 and libs > 100 << 20, f"the template measured {ctx}, {libs} outside")
fm = json.loads(run("predict", "-q", "--json", "--find-max", f"{b2}@2", f"{b3}@3"))[0]
check(fm["device_mem"] == total and fm.get("outside") == ctx + libs and
      fm.get("available") == total - ctx - libs,
      f"find-max: device {fm['device_mem']}, outside {fm.get('outside')}, available "
      f"{fm.get('available')}; summary's table says {ctx} + {libs}")
# the largest value fits in what is left, the next does not
check(fm["peak_reserved"] + fm["headroom"] <= total - ctx - libs and fm["next"]["oom"],
      f"find-max {fm['max']}: reserved {fm['peak_reserved']} + headroom {fm['headroom']} "
      f"against {total - ctx - libs}")
# --device-mem gives the allocator all of it: a larger batch fits there
whole = json.loads(run("predict", "-q", "--json", "--find-max", "--device-mem", str(total),
                       f"{b2}@2", f"{b3}@3"))[0]
check(whole.get("outside") == 0 and whole.get("available") == total and whole["max"] > fm["max"],
      f"--device-mem {total}: outside {whole.get('outside')}, max {whole['max']} vs {fm['max']}")
# said in the text, with summary's figures
txt = run("predict", "-q", "--bytes", "--find-max", f"{b2}@2", f"{b3}@3")
check(f"less {ctx + libs} the recording measured outside the allocator ({ctx} CUDA context "
      f"and other processes, {libs} other libraries')" in txt, "predict's text:\n" + txt)
at = json.loads(run("predict", "-q", "--json", "--at", str(fm["max"] + 1), f"{b2}@2", f"{b3}@3"))[0]
check(at["oom"] and at.get("outside") == ctx + libs, f"--at {fm['max'] + 1}: {at}")
# replay: the same line on the training recording (cuBLAS's 128 MiB, its context)
ctx, libs = outside(tl)
txt = run("replay", "-q", "--bytes", "-c", "", tl)
check(f"less {ctx + libs} the recording measured outside the allocator ({ctx} CUDA context "
      f"and other processes, {libs} other libraries'): {total - ctx - libs} for the allocator"
      in txt, "replay's text:\n" + txt)
txt = run("replay", "-q", "--bytes", "-c", "", "-m", "80G", tl)
check("device memory 85899345920 (from --device-mem), all of it the allocator's" in txt,
      "replay -m 80G:\n" + txt)
sys.exit(bad)
PY
    ;;
*) fail "unknown case $C" ;;
esac
echo ok

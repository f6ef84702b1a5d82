#!/bin/sh
# interop_test.sh MEMSNAP DATA SCRATCH CASE
# The interop tests (ctest names interop_CASE); see tests/interop/CMakeLists.txt.
set -u
M=$1 D=$2 S=$3 C=$4
mkdir -p "$S"
fail() { echo "FAIL: $*"; exit 1; }
# event lines of a snapshot, normalized (hex -> int, zero keys dropped)
events() {
  python3 -c '
import json,sys
for l in open(sys.argv[1]):
    o=json.loads(l)
    if "a" not in o: continue
    n={k:(int(v,16) if isinstance(v,str) and v.startswith("0x") else v) for k,v in o.items()}
    print(json.dumps({k:v for k,v in n.items() if v not in (0,"")},sort_keys=True))' "$1"
}
case $C in
roundtrip) # ours -> torch JSON -> ours keeps every event
  "$M" export "$D/roundtrip.msnap" --format torch-json -o "$S/rt.json" || fail export
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for s in d["segments"]:
    a=s["address"]
    for b in s["blocks"]:
        assert b["address"]==a, "blocks do not tile"; a+=b["size"]
    assert a==s["address"]+s["total_size"], "blocks do not tile"
for tr in d["device_traces"]:
    ts=[e["time_us"] for e in tr]; assert ts==sorted(ts), "time_us not ascending"' "$S/rt.json" || fail "torch JSON shape"
  "$M" import "$S/rt.json" -o "$S/rt.msnap" || fail import
  events "$D/roundtrip.msnap" >"$S/a.txt"; events "$S/rt.msnap" >"$S/b.txt"
  [ "$(wc -l <"$S/a.txt")" -gt 20 ] || fail "too few events"
  diff "$S/a.txt" "$S/b.txt" || fail "events differ after the round trip"
  "$M" summary "$S/rt.msnap" >/dev/null; [ $? -le 1 ] || fail summary ;;
stripped) # the pure torch mapping, without the memsnap extension
  "$M" export "$D/roundtrip.msnap" --format torch-json -o "$S/st.json" || fail export
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("memsnap")
for tr in d["device_traces"]:
    for e in tr: e.pop("memsnap")
json.dump(d,open(sys.argv[2],"w"))' "$S/st.json" "$S/st2.json"
  "$M" import "$S/st2.json" -o "$S/st.msnap" || fail import
  python3 -c '
import json,sys
def ev(p, keep):
    r=[]
    for l in open(p):
        o=json.loads(l)
        if o.get("a") in keep:
            a={"async_alloc":"alloc"}.get(o["a"],o["a"])
            r.append((a,o.get("d",0),o.get("p",0),o.get("s",0),o.get("t",0)//1000))
    return r
keep={"block_alloc","alloc","async_alloc"}
a=ev(sys.argv[1],keep); b=ev(sys.argv[2],keep)
a=[x for x in a if x[1]>=0]
# imported times count from the first event (its wall clock is the header t0)
a0=min(x[4] for x in a); b0=min(x[4] for x in b)
assert b0==0, "imported times do not start at 0"
a=sorted(x[:4]+((x[4]-a0),) for x in a); b=sorted(b)
assert [x[:4] for x in a]==[x[:4] for x in b], (a,b)
assert all(abs(x[4]-y[4])<=2 for x,y in zip(a,b)), (a,b)  # two us roundings
h=json.loads(open(sys.argv[2]).readline())
assert abs(int(h["t0_unix_ns"],16)//1000-1700000000123459)<=2, h["t0_unix_ns"]' "$D/roundtrip.msnap" "$S/st.msnap" || fail "torch mapping lost allocations" ;;
pickles) # JSON and pickles of protocols 2-5 import to the same snapshot
  "$M" import "$D/torch_small.json" -o "$S/j.msnap" || fail json
  for p in 2 3 4 5; do
    "$M" import "$D/torch_small_p$p.pickle" -o "$S/p$p.msnap" || fail "protocol $p"
    tail -n +2 "$S/j.msnap" >"$S/j.body"; tail -n +2 "$S/p$p.msnap" >"$S/p.body"
    cmp -s "$S/j.body" "$S/p.body" || fail "protocol $p differs from JSON"
  done
  "$M" summary "$S/p4.msnap" >"$S/sum.txt"; [ $? = 1 ] || fail "summary should see the OOM"
  grep -q "forward (train.py:12)" "$S/sum.txt" || fail "frames lost"
  # a reader-only build (no CUDA toolkit) has no replay: NO_REPLAY=1
  [ "${NO_REPLAY:-0}" = 1 ] || "$M" replay "$S/p4.msnap" --alloc-conf "" --device-mem 1G >/dev/null || fail replay ;;
import_times) # torch's epoch time_us become times from the first event, wall clock in the header
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for t in d["device_traces"]:
    for e in t: e["time_us"] += 1796040111911000
json.dump(d, open(sys.argv[2], "w"))' "$D/torch_small.json" "$S/epoch.json"
  "$M" import "$S/epoch.json" -o "$S/epoch.msnap" || fail import
  "$M" summary --json "$S/epoch.msnap" >"$S/sum.json"; [ $? -le 1 ] || fail summary
  python3 -c 'import json,sys; h=json.load(open(sys.argv[1]))["header"]
assert h["duration_ns"] == 31000, h["duration_ns"]
assert h["t0_unix_ns"] == (1796040111911000 + 10) * 1000, h["t0_unix_ns"]
ts=[json.loads(l).get("t") for l in open(sys.argv[2]) if "\"a\":" in l]
assert min(ts) == 0 and max(ts) == 31000, (min(ts), max(ts))' "$S/sum.json" "$S/epoch.msnap" || fail "imported times not relative"
  "$M" summary "$S/epoch.msnap" | grep -q "duration 1796040111" && fail "summary prints an epoch duration"
  "$M" render "$S/epoch.msnap" -o "$S/epoch" >/dev/null 2>&1 || fail render
  [ -s "$S/epoch-timeline.png" ] || fail "no timeline"
  # a torch pickle we exported imports with the same relative times
  "$M" export "$S/epoch.msnap" --format torch -o "$S/back.pickle" 2>/dev/null || fail export
  python3 -c 'import json,pickle,sys
a=json.load(open(sys.argv[1]))["allocator_settings"]; b=pickle.load(open(sys.argv[2],"rb"))["allocator_settings"]
assert a and a==b, (a,b)' "$D/torch_small.json" "$S/back.pickle" || fail "allocator_settings not carried through import and export"
  "$M" import "$S/back.pickle" -o "$S/back.msnap" || fail "import of our pickle"
  "$M" summary --json "$S/back.msnap" | python3 -c 'import json,sys; h=json.load(sys.stdin)["header"]
assert 0 < h["duration_ns"] <= 31000 and h["t0_unix_ns"] == (1796040111911000 + 10) * 1000, h  # the snapshot marker has no torch action' || fail "pickle round trip times" ;;
hostile) # pickles that import or call code are refused, one line, exit 2
  for f in "$D"/hostile_*.pickle; do
    op=$(basename "$f" .pickle); op=${op#hostile_}; op=${op%_nested}
    "$M" import "$f" -o "$S/h.msnap" 2>"$S/err"; rc=$?
    [ $rc = 2 ] || fail "$f: exit $rc"
    [ "$(wc -l <"$S/err")" = 1 ] || fail "$f: not one line"
    grep -q "opcode $op .*refused" "$S/err" || fail "$f: $(cat "$S/err")"
    [ ! -e "$S/h.msnap" ] || fail "$f: output left behind"
  done ;;
broken) # truncated / garbage input: one clear line, exit 2
  for f in truncated.pickle garbage.pickle truncated.json notsnap.json; do
    "$M" import "$D/$f" -o "$S/x.msnap" 2>"$S/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$S/err")" = 1 ] || fail "$f: exit $rc: $(cat "$S/err")"
  done
  grep -q "byte" "$S/err" || true ;;
fuzzed) # inputs found by fuzz_torch_import (data/fuzz_*): one clean line, exit 2
  for f in "$D"/fuzz_*; do
    "$M" import "$f" -o "$S/x.msnap" 2>"$S/err"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$S/err")" = 1 ] || fail "$f: exit $rc: $(cat "$S/err")"
    [ ! -e "$S/x.msnap" ] || fail "$f: output left behind"
  done ;;
replay_determinism)
  for i in 1 2; do
    "$M" replay "$D/roundtrip.msnap" --alloc-conf "" --alloc-conf "expandable_segments:true" \
      --device-mem 1G -o "$S/det$i" >"$S/table$i.txt" || fail "replay $i"
  done
  cmp "$S/det1-1.msnap" "$S/det2-1.msnap" && cmp "$S/det1-2.msnap" "$S/det2-2.msnap" || fail "not deterministic"
  sed 's/det[12]/detN/g' "$S/table1.txt" >"$S/t1"; sed 's/det[12]/detN/g' "$S/table2.txt" >"$S/t2"
  cmp "$S/t1" "$S/t2" || fail "tables differ"
  "$M" summary "$S/det1-2.msnap" >/dev/null; [ $? -le 1 ] || fail "summary of a replay" ;;
replay_segments) # 2667 live segments, then one 40 GiB block: the OOM retry frees them all, and
  # each free carries its segment's size (replay.c finds a segment by binary search; it
  # used to scan them all per call)
  python3 -c 'import json,sys
h={"type":"header","format":"memsnap","version":"1.0","pid":1,"host":"h","argv":["x"],"clock":"CLOCK_MONOTONIC","t0_unix_ns":"0x0","mode":"stream","settings":{},"devices":[]}
out=[json.dumps(h), json.dumps({"type":"device","index":0,"name":"Simulated H200","total":150000000000})]
ev=[("block_alloc",i) for i in range(24000)]+[("block_free",i) for i in range(0,24000,2)]+[("block_free",i) for i in range(1,24000,2)]
for t,(a,i) in enumerate(ev):
    out.append(json.dumps({"a":a,"t":1000*(t+1),"p":(1<<40)+(i<<23),"n":(2<<20)+(i%64)*4096,"f":"allocator"}))
out.append(json.dumps({"a":"block_alloc","t":1000*(len(ev)+1),"p":1<<45,"n":40<<30,"f":"allocator"}))
open(sys.argv[1],"w").write("\n".join(out)+"\n")' "$S/segs.msnap"
  "$M" replay "$S/segs.msnap" -c "" -m 64G -q -o "$S/segs" >/dev/null || fail replay
  zstdcat -f "$S/segs-1.msnap" > "$S/segs-1.txt" || fail zstdcat
  python3 -c 'import json,sys
live={}; frees=0; peak=0
for l in open(sys.argv[1]):
    o=json.loads(l)
    if o.get("a")=="alloc": live[o["p"]]=o["n"]; peak=max(peak,len(live))
    elif o.get("a")=="free":
        assert live.pop(o["p"])==o["n"], o; frees+=1
assert frees>=2000 and peak>=2000 and len(live)==1, (frees, peak, len(live))' "$S/segs-1.txt" || fail "segment sizes at free" ;;
replay_oom) # fixed segments OOM under a 200 MiB cap; expandable ones do not
  "$M" replay "$D/frag.msnap" --alloc-conf "expandable_segments:false" \
    --alloc-conf "expandable_segments:true,expandable_va:1G" --device-mem 200M -o "$S/frag" >"$S/t.txt" || fail replay
  cat "$S/t.txt"
  grep -E '^1 .* [0-9.]+ s, 16.00 MiB' "$S/t.txt" >/dev/null || fail "fixed segments should OOM"
  grep -E '^2 .* none ' "$S/t.txt" >/dev/null || fail "expandable segments should not OOM"
  zstdcat -f "$S/frag-1.msnap" | grep -q '"a":"oom"' || fail "no oom event in the replay snapshot"
  # written zstd-compressed, as memsnap run writes, and named in one line
  [ "$(head -c 4 "$S/frag-1.msnap" | od -An -tx1 | tr -d ' ')" = 28b52ffd ] || fail "frag-1.msnap is not zstd"
  grep -qx "wrote $S/frag-1.msnap to $S/frag-2.msnap (one replay per config, in the order above, zstd-compressed)" "$S/t.txt" ||
    fail "no line naming the files: $(tail -1 "$S/t.txt")"
  "$M" replay "$D/frag.msnap" -q --alloc-conf "" --device-mem 200M -o "$S/one" >"$S/t1.txt" || fail "replay, one config"
  grep -qx "wrote $S/one-1.msnap (the replay, zstd-compressed)" "$S/t1.txt" || fail "one config: $(tail -1 "$S/t1.txt")" ;;
replay_skipped) # frees the replay skips, per config: frag.msnap then frees of its three 16 MiB
  # blocks (fixed segments fail all three under 200 MiB, expandable ones serve them) and one
  # of an address never allocated
  { cat "$D/frag.msnap"
    t=60000
    for a in 38654705664 38688260096 38721814528 123456789; do
      t=$((t + 1000))
      echo "{\"a\":\"block_free\",\"t\":$t,\"p\":$a,\"f\":\"allocator\"}"
    done; } > "$S/fragfree.msnap"
  "$M" replay "$S/fragfree.msnap" -q -c "expandable_segments:false" \
    -c "expandable_segments:true,expandable_va:1G" -m 200M >"$S/t.txt" || fail replay
  cat "$S/t.txt"
  grep -q "memsnap engine: 33 requests, 24 frees)" "$S/t.txt" || fail "the recording's frees: $(head -1 "$S/t.txt")"
  grep -qx "frees of addresses the replay never allocated were skipped (allocated before the recording started, or their request failed): 4 in config 1, 1 in config 2" "$S/t.txt" ||
    fail "skipped frees per config"
  "$M" replay "$S/fragfree.msnap" -q -c "expandable_segments:true,expandable_va:1G" -m 200M >"$S/t1.txt" || fail "replay, one config"
  grep -qx "1 free of an address the replay never allocated was skipped (allocated before the recording started, or their request failed)" "$S/t1.txt" ||
    fail "one config: $(tail -1 "$S/t1.txt")" ;;
replay_device_mem) # the device's memory comes from the recording (issue 19: an H200 run was
  # replayed on "a simulated device of 80.00 GiB", so memory_fraction:F was F of 80 GiB
  # and every fraction tried OOMed); --device-mem overrides; the table says which
  # frag.msnap's devices are 150e9 bytes (139.70 GiB): 0.25% of it holds the 248 MiB
  # reserved peak, 0.25% of 80 GiB (200 MiB) does not
  "$M" replay "$D/frag.msnap" -q --engine torch -c memory_fraction:0.0025 >"$S/dm1.txt" || fail "replay"
  head -1 "$S/dm1.txt" | grep -q "on a simulated device of 139.70 GiB (from the recording;" ||
    fail "not the recording's device memory: $(head -1 "$S/dm1.txt")"
  grep -Eq '^1 +memory_fraction:0.0025 .* none +[0-9]+$' "$S/dm1.txt" || fail "OOM at 0.25% of the recording's device: $(cat "$S/dm1.txt")"
  "$M" replay "$D/frag.msnap" -q --engine torch -c memory_fraction:0.0025 -m 80G >"$S/dm2.txt" || fail "replay -m 80G"
  head -1 "$S/dm2.txt" | grep -q "on a simulated device of 80.00 GiB (from --device-mem;" ||
    fail "--device-mem not used or not said: $(head -1 "$S/dm2.txt")"
  grep -Eq '^1 +memory_fraction:0.0025 .* none +[0-9]+$' "$S/dm2.txt" && fail "no OOM at 0.25% of 80 GiB"
  # a recording that does not give its device's memory: the default, said so
  "$M" replay "$D/torch_alloc/tr_default.msnap" -q -c "" >"$S/dm3.txt" || fail "replay tr_default"
  head -1 "$S/dm3.txt" | grep -q "on a simulated device of 80.00 GiB (from the default;" ||
    fail "the default not said: $(head -1 "$S/dm3.txt")" ;;
replay_free_error) # a free the driver refused (free_error) leaves the memory allocated in
  # the replay as in every view (issue 19: replay classified allocs and frees itself and
  # ignored free_error): data/badfree.msnap frees A, the free is refused, B is allocated,
  # so A and B are live together, 200 MiB, as summary says
  "$M" summary "$D/badfree.msnap" | grep -q "reserved   peak 200.00 MiB" || fail "summary's peak"
  "$M" replay "$D/badfree.msnap" -q -c "" >"$S/bf.txt" || fail replay
  grep -Eq '^1 +\(defaults\) +200.00 MiB +200.00 MiB ' "$S/bf.txt" ||
    fail "the refused free was replayed as a free: $(cat "$S/bf.txt")" ;;
replay_torch_fidelity) # real PyTorch traces (data/torch_alloc): replayed peaks vs PyTorch's
  T="$D/torch_alloc"
  grep -v '^#' "$T/peaks.txt" | while read -r name conf real own_tol def_tol; do
    [ "$conf" = - ] && conf=""
    for pair in "$name $own_tol" "tr_default $def_tol"; do
      set -- $pair
      got=$("$M" replay "$T/$1.msnap" -q --bytes -m 150754820096 -c "$conf" | awk '$1 == "1" {print $4}')
      [ -n "$got" ] || fail "$1 under \"$conf\": no result"
      python3 -c 'import sys
real, got, tol = map(int, sys.argv[1:4])
err = abs(got - real) * 1000000 // real
print("%-40s %-36s real %d replayed %d (%+.3f%%)" % (sys.argv[4], sys.argv[5] or "(defaults)", real, got, 100.0 * (got - real) / real))
sys.exit(0 if err <= tol else 1)' "$real" "$got" "$2" "$1" "$conf" || fail "$1 under \"$conf\": beyond $2 ppm"
    done
  done || exit 1
  # the engine is the emulation, and it says so; its output is the same bytes every time
  for i in 1 2; do
    "$M" replay "$T/tr_default.msnap" -q -m 150754820096 -c "" -c expandable_segments:True \
      -o "$S/td$i" >"$S/tt$i.txt" || fail "replay $i"
  done
  grep -q "torch engine" "$S/tt1.txt" || fail "not the torch engine"
  cmp "$S/td1-1.msnap" "$S/td2-1.msnap" && cmp "$S/td1-2.msnap" "$S/td2-2.msnap" || fail "not deterministic"
  zstdcat -f "$S/td1-2.msnap" | grep -q '"a":"vmm_map"' || fail "no page mappings in the expandable replay"
  "$M" summary "$S/td1-2.msnap" >/dev/null; [ $? -le 1 ] || fail "summary of a torch replay" ;;
replay_torch_errors) # bad PyTorch configs: one line, exit 2
  for bad in "max_split_size_mb:10" "expandable_segments:maybe" "roundup_power2_divisions:3" \
             "garbage_collection_threshold:1.5" "bogus_key:1" "memory_fraction:0" "nocolon"; do
    "$M" replay "$D/torch_alloc/tr_default.msnap" -q -c "$bad" >"$S/o" 2>"$S/e"; rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$S/e")" = 1 ] || fail "$bad: exit $rc: $(cat "$S/e")"
    grep -q "bad config" "$S/e" || fail "$bad: $(cat "$S/e")"
  done
  "$M" replay "$D/torch_alloc/tr_default.msnap" -q --engine nope -c "" 2>"$S/e"; [ $? = 2 ] || fail "--engine nope"
  "$M" replay "$D/torch_alloc/tr_default.msnap" -q --jobs 0 -c "" 2>"$S/e"; [ $? = 2 ] || fail "--jobs 0" ;;
replay_progress) # --suggest on a terminal: one progress line for the whole run, the workers draw none
  command -v script >/dev/null || { echo "no script(1)"; exit 0; }
  T="$D/torch_alloc"
  MEMSNAP_PROGRESS_AFTER_MS=0 TERM=xterm script -qec "$M replay $T/tr_default.msnap --suggest -j 4 >$S/sug.txt" \
    "$S/pty.out" >/dev/null 2>&1 || fail "replay --suggest under a terminal"
  tr '\r' '\n' <"$S/pty.out" >"$S/lines"
  grep -q "memsnap: replaying tr_default.msnap through [0-9]* configs" "$S/lines" || fail "no progress line: $(head -c 600 "$S/lines")"
  # (the parent reads the input once before, to pick the engine: that line is its own)
  sed -n '/memsnap: replaying/,$p' "$S/lines" >"$S/during"
  grep -q "memsnap: reading\|^replay: " "$S/during" && fail "a worker drew its own line: $(grep "memsnap: reading\|^replay: " "$S/during" | head -3)"
  grep -q "^ 1\. " "$S/sug.txt" || fail "no suggestions: $(cat "$S/sug.txt")" ;;
replay_torch_suggest) # several rank files at once, best first
  "$M" replay "$D/torch_alloc/tr_default.msnap" "$D/torch_alloc/tr_roundup_power2_divisions_4.msnap" \
    -q --suggest -m 150754820096 >"$S/s.txt" || fail suggest
  cat "$S/s.txt"
  grep -q "for 2 snapshots (torch engine)" "$S/s.txt" || fail "not both snapshots"
  # best first: no OOM before OOM, then peak reserved (largest of the two files) ascending,
  # each with the string to paste; the defaults are on the list
  "$M" replay "$D/torch_alloc/tr_default.msnap" "$D/torch_alloc/tr_roundup_power2_divisions_4.msnap" \
    -q --suggest --bytes -m 150754820096 >"$S/b.txt" || fail "suggest --bytes"
  python3 -c 'import sys
rows = [l.split() for l in open(sys.argv[1]) if l[:4].strip().rstrip(".").isdigit()]
keys = [(0 if r[1:3] == ["no", "OOM"] else 1, int(r[r.index("reserved") + 1])) for r in rows]
assert len(rows) == 10, rows
assert keys == sorted(keys), keys
assert all(any(t.startswith("PYTORCH_CUDA_ALLOC_CONF=") for t in r) for r in rows), rows
assert any(" ".join(r).endswith("PYTORCH_CUDA_ALLOC_CONF=(the defaults)") for r in rows), rows' "$S/b.txt" || fail "suggest order" ;;
perfetto)
  "$M" export "$D/roundtrip.msnap" --format perfetto -o "$S/p.json" || fail export
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"]
ph=[e["ph"] for e in ev]
assert "C" in ph and "B" in ph and "E" in ph and "i" in ph, ph
assert any(e.get("name")=="OOM" for e in ev)
assert any(e.get("name")=="allocated" for e in ev) and any(e.get("name")=="reserved" for e in ev)' "$S/p.json" || fail "perfetto content" ;;
import_device_unknown) # PyTorch gives no device memory: the import says unknown (0, docs/format.md)
  "$M" import "$D/torch_small_p4.pickle" -o "$S/u.msnap" 2>/dev/null || fail import
  zstdcat -f "$S/u.msnap" >"$S/u.jsonl"
  [ "$(grep -c '"type":"device"' "$S/u.jsonl")" = 2 ] || fail "device lines: $(grep '"type":"device"' "$S/u.jsonl")"
  grep '"type":"device"' "$S/u.jsonl" | grep -v '"total":0}' && fail "an imported device has a size"
  grep '"a":"oom"' "$S/u.jsonl" | grep -q '"x":5242880' || fail "the OOM lost its device free"
  grep '"a":"oom"' "$S/u.jsonl" | grep -q '"y":' && fail "the OOM has a device total"
  # and summary says "unknown" where it printed "0 B" and "device free ? of ?"
  PENDING=0
  "$M" summary "$S/u.msnap" >"$S/sum.txt" 2>&1
  if grep -q "^device 0 .*PyTorch device 0 (imported), memory unknown$" "$S/sum.txt" &&
     grep -q "device free 5.00 MiB of unknown" "$S/sum.txt"; then
    [ $PENDING = 0 ] || fail "summary now says unknown: set PENDING=0 in $0"
  else
    [ $PENDING = 1 ] || fail "summary: $(grep -E '^device 0|device free' "$S/sum.txt")"
    echo "pending: summary prints $(grep -E '^device 0' "$S/sum.txt")"
  fi ;;
*) fail "unknown case $C" ;;
esac
echo ok

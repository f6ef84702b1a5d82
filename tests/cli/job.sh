#!/bin/sh
# job.sh MEMSNAP DATA H200 SCRATCH: memsnap job and -j.
#  - -j N prints what -j 1 prints: job (text, JSON), summary of several
#    files (the job view, --each), render's pictures and compare's table;
#  - the job view's figures on data/job (make.py says what each rank did):
#    the imbalance, the site x rank table, the failure, the ring window, the
#    steps, the rank table's peaks against each file's own summary;
#  - ranks from the differing part of the names (job-10 .. job-13), a
#    folder gives its files, the exit status (1: an OOM), the kept H200
#    recordings' figures equal to their summaries'.
M=$1 DATA=$2 H200=$3 T=$4
J=$DATA/job
rm -rf "$T" && mkdir -p "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
py() { python3 -c "$1" "$T/job.json" || fail "$2"; }

"$M" job -j 1 "$J" > "$T/j1.txt"; rc=$?
[ $rc = 1 ] || fail "job of a job with an OOM: exit $rc, not 1"
for n in 2 3 8; do
    "$M" job -j $n "$J" | cmp -s - "$T/j1.txt" || fail "job -j $n differs from -j 1"
    "$M" job -j $n --json "$J"/run-*.msnap > "$T/jn.json"
    "$M" job -j 1 --json "$J"/run-*.msnap | cmp -s - "$T/jn.json" || fail "job --json -j $n differs"
    "$M" summary -j $n "$J"/run-*.msnap | cmp -s - "$T/j1.txt" || fail "summary -j $n of several is not the job view"
    "$M" summary --each -j 1 "$J"/run-*.msnap > "$T/e1.txt"
    "$M" summary --each -j $n "$J"/run-*.msnap | cmp -s - "$T/e1.txt" || fail "summary --each -j $n differs"
done
# a folder is its files (natural order), the files the same in any order
"$M" job "$J"/run-3.msnap "$J"/run-1.msnap "$J"/run-0.msnap "$J"/run-2.msnap > "$T/any.txt"
sed -n '/^  rank  file/,$p' "$T/any.txt" | grep -q "^  0 .*run-0.msnap" || fail "rows not in rank order"

# pictures: the same bytes for -j 1 and -j 2
"$M" render -j 1 -o "$T/r1" "$J"/run-*.msnap > /dev/null || fail "render -j 1"
"$M" render -j 2 -o "$T/r2" "$J"/run-*.msnap > /dev/null || fail "render -j 2"
cmp -s "$T/r1-timeline.png" "$T/r2-timeline.png" || fail "render -j 2: another timeline"
cmp -s "$T/r1-run-3-segments.png" "$T/r2-run-3-segments.png" || fail "render -j 2: another segment map"
"$M" compare -j 1 -o "$T/c1.png" "$J"/run-*.msnap | grep -v 'c1.png' > "$T/c1.txt" || fail "compare -j 1"
"$M" compare -j 2 -o "$T/c2.png" "$J"/run-*.msnap | grep -v 'c2.png' > "$T/c2.txt" || fail "compare -j 2"
cmp -s "$T/c1.txt" "$T/c2.txt" || fail "compare -j 2: another table"
cmp -s "$T/c1.png" "$T/c2.png" || fail "compare -j 2: another picture"

# the figures
MiB=1048576
"$M" job --json "$J" > "$T/job.json"
py "
import json, sys
j = json.load(open(sys.argv[1]))
M = $MiB
assert j['files'] == 4 and j['ranks_from'] == 'name' and j['hosts'] == 2 and j['failed'] == 1, j
im = j['imbalance']
assert im['highest']['rank'] == 3 and im['median']['rank'] == 1, im
assert im['above_median'] == 512 * M, im
assert im['sites'][0] == {'label': 'activations (model.c:88)', 'peak': 1024 * M,
                          'median': 512 * M, 'difference': 512 * M}, im['sites']
d = j['divergent_sites']
assert d['ranks'] == [0, 1, 2, 3], d['ranks']
rows = {s['label']: s['peaks'] for s in d['sites']}
assert rows['activations (model.c:88)'] == [256 * M, 512 * M, 768 * M, 1024 * M], rows
assert rows['comm_buffer (comm.c:7)'] == [64 * M, 64 * M, 256 * M, 64 * M], rows
assert 'weights (model.c:42)' not in rows, 'the ring dump made weights differ: ' + repr(rows)
f = j['failures']
assert len(f) == 1 and f[0]['rank'] == 3 and f[0]['oom']['requested'] == 4096 * M, f
assert f[0]['oom']['step']['number'] == 3 and f[0]['oom']['site'] == 'activations (model.c:88)', f
w = j['windows']
assert w['ring'] == 1 and w['files'][0]['rank'] == 1 and w['files'][0]['dropped'] == 4, w
assert w['files'][0]['step']['text'] == 'step 2', w
a = j['alignment']
assert a['by'] == 'steps' and a['word'] == 'step' and not a['same_step'], a
assert a['peak_steps'][0] == {'step': 3, 'ranks': 3, 'first_ranks': [1, 2, 3]}, a
assert [r['rank'] for r in j['ranks']] == [0, 1, 2, 3]
assert [r['device'] for r in j['ranks']] == [0, 1, 0, 1]
" "figures"
# the rank table's peaks are each file's own summary's
for r in 0 1 2 3; do
    "$M" summary --json "$J/run-$r.msnap" > "$T/s$r.json"
    python3 -c "
import json, sys
j = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2])); r = int(sys.argv[3])
row = [x for x in j['ranks'] if x['rank'] == r][0]
assert row['peak_reserved'] == s['process']['reserved']['peak'], (row, s['process'])
assert row['ooms'] == s['oom_count']
" "$T/job.json" "$T/s$r.json" $r || fail "rank $r's row is not its summary's"
done

# ranks from the names: job-10 .. job-13 share "job-1" (the rank is 10, not 0)
for r in 0 1 2 3; do cp "$J/run-$r.msnap" "$T/job-1$r.msnap"; done
"$M" job --json "$T"/job-1*.msnap | python3 -c "
import json, sys
j = json.load(sys.stdin)
assert [r['rank'] for r in j['ranks']] == [10, 11, 12, 13], [r['rank'] for r in j['ranks']]
" || fail "ranks from job-1N names"
# no rank in the names: none, in the order given
"$M" job --json "$DATA/oom.msnap" "$DATA/basic.msnap" | python3 -c "
import json, sys
j = json.load(sys.stdin)
assert j['ranks_from'] == 'none' and [r['rank'] for r in j['ranks']] == [None, None], j['ranks']
assert j['ranks'][0]['file'].endswith('oom.msnap')
" || fail "files without ranks"
"$M" job "$DATA/rank0.msnap" "$DATA/rank1.msnap" > /dev/null; rc=$?
[ $rc = 0 ] || fail "a job without an OOM: exit $rc"

# one screen whatever the number of ranks: 200 ranks (make.py), at most
# 50 lines besides the rank table's
mkdir -p "$T/many"
python3 "$J/make.py" "$T/many" 200 || fail "make.py"
"$M" job "$T/many" > "$T/many.txt"
lines=$(wc -l < "$T/many.txt")
[ "$lines" -le $((200 + 2 + 50)) ] || fail "200 ranks: $lines lines"
grep -q "^  199 " "$T/many.txt" || fail "200 ranks: no row for rank 199"

# the kept H200 recordings: the job's figures are each summary's
"$M" job --json "$H200"/*.msnap.zst > "$T/h200.json" || fail "job of the H200 recordings"
for f in "$H200"/*.msnap.zst; do
    "$M" summary --json "$f" > "$T/one.json"
    python3 -c "
import json, sys
j = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
row = [x for x in j['ranks'] if x['file'] == s['file']][0]
assert row['peak_reserved'] == s['process']['reserved']['peak']
assert row['peak_allocated'] == s['process']['allocated']['peak']
assert row['top_site'] == s['top_sites']['allocated'][0]['label'], (row['top_site'], s['top_sites']['allocated'][0]['label'])
assert row['host'] == s['header']['host'] and row['pid'] == s['header']['pid']
" "$T/h200.json" "$T/one.json" || fail "H200 $f"
done
echo ok

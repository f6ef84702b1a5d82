#!/bin/sh
# symbolize with nothing to resolve leaves the file untouched (same inode,
# same mtime) and says so in one line: a file whose IPs all have named sym
# records, and one whose IPs all have sym records already, nameless ones
# that no module can improve (basic.msnap names binaries that are not here).
# usage: symbolize_untouched.sh MEMSNAP DATA SCRATCH
M=$1 D=$2 T=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$T"; mkdir -p "$T"
{ head -1 "$D/basic.msnap"
  echo '{"type":"stack","id":1,"ips":["0x401000","0x401100"]}'
  grep '"type":"sym"' "$D/basic.msnap"; } > "$T/named.msnap"
cp "$D/basic.msnap" "$T/nameless.msnap"
"$M" symbolize "$T/nameless.msnap" 2>/dev/null || fail "first symbolize of nameless.msnap"
grep -q '"ip":"0x401300","fn":""' "$T/nameless.msnap" || fail "no nameless sym line written"
for f in named nameless; do
    touch -d '2001-02-03 04:05:06' "$T/$f.msnap"
    before=$(stat -c '%i %Y %s' "$T/$f.msnap")
    "$M" symbolize "$T/$f.msnap" 2>"$T/err"; rc=$?
    [ $rc = 0 ] || fail "$f: exit $rc: $(cat "$T/err")"
    after=$(stat -c '%i %Y %s' "$T/$f.msnap")
    [ "$before" = "$after" ] || fail "$f: rewritten (inode mtime size $before -> $after)"
    tail -1 "$T/err" | grep -q "nothing.* resolve.* in $T/$f.msnap.*left as it was" ||
        fail "$f: no message saying so: $(cat "$T/err")"
    ls "$T" | grep -q 'symtmp' && fail "$f: temporary file left: $(ls "$T")"
done
[ "$(wc -l < "$T/err")" -ge 1 ] || fail "no message"
# all named: nothing is even looked up, so the one line is all
"$M" symbolize "$T/named.msnap" 2>"$T/err"
[ "$(wc -l < "$T/err")" = 1 ] || fail "named: more than one line: $(cat "$T/err")"
echo ok

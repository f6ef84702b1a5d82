#!/bin/bash
# Every function of libmemsnap_alloc, static helpers included, is named ms_*
# or memsnap_* (allocator/internal.h).  Site labels skip memsnap's allocator
# linked into a program by these names (analyze/siterules.c); a build without
# debug information (Release) gives a frame its function name and nothing
# else, so a helper named otherwise (slow_path, issue 19) would name the
# program's allocation sites.
#   symbols.sh NM libmemsnap_alloc.a
# Names the compiler makes (_sub_I_..., asan.module_ctor) are not ours and are
# left out; a suffix the compiler adds (.constprop.0, .isra.0, .cold) is cut.
set -u
nm=${1:?nm}
lib=${2:?libmemsnap_alloc.a}
fail() { echo "FAIL: $*"; exit 1; }
syms=$("$nm" --defined-only "$lib") || fail "$nm $lib"
fns=$(awk 'NF == 3 && $2 ~ /^[tTwWi]$/ { print $3 }' <<< "$syms" | sed 's/\..*//' |
      grep -v '^_' | grep -v '^$' | sort -u)
[ -n "$fns" ] || fail "no functions in $lib"
bad=$(grep -Ev '^(ms_|memsnap_)' <<< "$fns")
[ -z "$bad" ] || fail "functions of $lib not named ms_* or memsnap_*:" $bad
echo "symbols: ok ($(wc -l <<< "$fns") functions, all ms_* or memsnap_*)"

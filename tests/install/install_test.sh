#!/bin/bash
# memsnap installed as a user installs it.  One case per ctest (label install):
#   prefix      cmake --install to a prefix, the prefix moved elsewhere: run
#               (--sim-device), summary, render, replay, --version from there,
#               and the parts come from the moved prefix, not the build tree
#   pkgconfig   a consumer program built with pkg-config against the prefix
#   cmake       the same consumer built with find_package(memsnap)
#   manpages    a page per subcommand; every option its --help lists is in it
#   completion  bash completion offers the subcommands and their options
#   deb         cpack -G DEB: the file list and Depends, apt-get install -s
#               (simulated) accepts it; the binaries run from an unpacked
#               copy (dpkg-deb -x), nothing installed in the system
#   bundle      bundle_libs.py --dlopen: a library opened with dlopen() by
#               name is bundled, and dlopen() finds the bundled copy
# Environment (set by CMake): BUILD_DIR, SRC_DIR, CASE_DIR, CUDA_ROOT.
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; exit 1; }

# install_to DIR: the build's install into DIR, then moved to DIR-moved, so
# nothing can point at the place it was installed to either.
install_moved() {
    cmake --install "$BUILD_DIR" --prefix "$T/p" > "$T/install.log" 2>&1 || fail "install: $(tail -3 "$T/install.log")"
    mv "$T/p" "$T/moved"
    P=$T/moved
}

# run_clean CMD...: CMD with a bare environment (no MEMSNAP_*, no build paths)
run_clean() { env -i PATH="$P/bin:/usr/bin:/bin" HOME="$T" "$@"; }

case $case_name in
prefix)
    install_moved
    cd "$T" || fail "cd"
    run_clean memsnap --version > ver || fail "--version"
    grep -qE '^memsnap [0-9]+\.[0-9]+\.[0-9]+ \(snapshot format [0-9]+\.[0-9]+' ver || fail "version: $(cat ver)"
    run_clean memsnap run --sim-device 8G -q -o "$T/s.msnap" -- \
        sh -c 'echo "preload=$LD_PRELOAD"; echo "libpath=$LD_LIBRARY_PATH"; exec memsnap-smoke' > out 2> err ||
        fail "memsnap run: $(cat err)"
    grep -q "^preload=$P/lib[^ ]*/memsnap/libmemsnap.so$" out || fail "recorder not from the prefix: $(head -2 out)"
    grep -q "^libpath=$P/lib[^:]*/memsnap/simdev" out || fail "simulated device not from the prefix: $(head -2 out)"
    grep -q "memsnap-smoke: 24 steps on memsnap simulated device" out || fail "smoke: $(cat out)"
    run_clean memsnap summary s.msnap > summary || fail "summary"
    grep -q "command    memsnap-smoke" summary || fail "summary: $(head -5 summary)"
    run_clean memsnap render s.msnap -o "$T/s" > /dev/null || fail "render"
    [ -s s-timeline.png ] && [ -s s-segments.png ] || fail "render: no PNGs"
    run_clean memsnap replay s.msnap -c "expandable_segments:true" > replay 2>&1 || fail "replay: $(cat replay)"
    grep -q "expandable_segments:true" replay || fail "replay: $(cat replay)"
    run_clean memsnap export s.msnap -f perfetto -o s.json || fail "export"
    echo "6 passed, 0 failed"
    ;;
pkgconfig)
    install_moved
    export PKG_CONFIG_PATH=$(dirname "$(find "$P" -name memsnap-alloc.pc)")
    pkg-config --exists memsnap-alloc || fail "pkg-config does not find memsnap-alloc"
    [ "$(pkg-config --modversion memsnap-alloc)" = "$(run_clean memsnap --version | awk '{print $2}')" ] ||
        fail "version $(pkg-config --modversion memsnap-alloc)"
    # shellcheck disable=SC2046
    cc -o "$T/consumer" "$SRC_DIR/tests/install/consumer/consumer.c" \
        $(pkg-config --cflags --libs memsnap-alloc) -Wl,-rpath,"$(pkg-config --variable=libdir memsnap-alloc)" \
        > "$T/cc.log" 2>&1 || fail "build: $(cat "$T/cc.log")"
    LD_LIBRARY_PATH=$(find "$P" -type d -name simdev) MEMSNAP_SIM_DEVICE_MEM=1G "$T/consumer" > "$T/out" 2>&1 ||
        fail "consumer: $(cat "$T/out")"
    grep -q "^consumer ok 3145728 " "$T/out" || fail "$(cat "$T/out")"
    echo "2 passed, 0 failed"
    ;;
cmake)
    install_moved
    cmake -S "$SRC_DIR/tests/install/consumer" -B "$T/b" -DCMAKE_PREFIX_PATH="$P" \
        -DCUDAToolkit_ROOT="$CUDA_ROOT" > "$T/cfg.log" 2>&1 || fail "configure: $(tail -20 "$T/cfg.log")"
    cmake --build "$T/b" > "$T/build.log" 2>&1 || fail "build: $(tail -20 "$T/build.log")"
    for prog in consumer consumer_static; do
        LD_LIBRARY_PATH=$(find "$P" -type d -name simdev) MEMSNAP_SIM_DEVICE_MEM=1G "$T/b/$prog" > "$T/out" 2>&1 ||
            fail "$prog: $(cat "$T/out")"
        grep -q "^consumer ok 3145728 " "$T/out" || fail "$prog: $(cat "$T/out")"
    done
    readelf -d "$T/b/consumer" | grep -q "libmemsnap_alloc.so.0" || fail "not linked to the versioned soname"
    echo "3 passed, 0 failed"
    ;;
manpages)
    install_moved
    M=$P/share/man/man1
    [ -s "$M/memsnap.1" ] || fail "no memsnap.1"
    n=0
    for sub in $(run_clean memsnap help --commands); do
        page=$M/memsnap-$sub.1
        [ -s "$page" ] || fail "no man page for $sub"
        grep -q "memsnap\\\\-$sub" "$M/memsnap.1" || fail "memsnap.1 does not list $sub"
        text=$(MANWIDTH=200 man -l "$page" 2>"$T/warn") || fail "man $sub"
        [ ! -s "$T/warn" ] || fail "man $sub: $(cat "$T/warn")"
        for opt in $(run_clean memsnap "$sub" --help | grep -oE -- '(^|[ ,[])--?[a-zA-Z][a-zA-Z0-9-]*' |
                     sed 's/^[ ,[]*//' | sort -u); do
            grep -qe "$opt" <<< "$text" || fail "memsnap-$sub.1 lacks $opt"
        done
        n=$((n + 1))
    done
    [ $n -ge 8 ] || fail "only $n subcommands"
    echo "$n passed, 0 failed"
    ;;
completion)
    install_moved
    # shellcheck disable=SC1091
    source "$P/share/bash-completion/completions/memsnap"
    complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _memsnap; echo "${COMPREPLY[*]}"; }
    export PATH="$P/bin:$PATH"
    [ "$(complete_words memsnap su)" = summary ] || fail "subcommand: $(complete_words memsnap su)"
    complete_words memsnap "" | grep -q "replay" || fail "all: $(complete_words memsnap "")"
    [ "$(complete_words memsnap run --sim-d)" = "--sim-device --sim-devices" ] ||
        fail "options: $(complete_words memsnap run --sim-d)"
    [ "$(complete_words memsnap render --wi)" = "--width" ] || fail "render: $(complete_words memsnap render --wi)"
    # an option's values where its --help line lists them as words
    [ "$(complete_words memsnap render --by "")" = "site category pool" ] ||
        fail "render --by: $(complete_words memsnap render --by "")"
    [ "$(complete_words memsnap render --by c)" = "category" ] || fail "render --by c: $(complete_words memsnap render --by c)"
    [ "$(complete_words memsnap render --format s)" = "svg" ] || fail "render --format: $(complete_words memsnap render --format s)"
    complete_words memsnap render --by category "" | grep -q . || fail "no file after --by category"
    [ "$(complete_words memsnap jo)" = job ] || fail "job: $(complete_words memsnap jo)"
    [ "$(complete_words memsnap job --j)" = "--jobs --json" ] || fail "job --j: $(complete_words memsnap job --j)"
    [ "$(complete_words memsnap summary --ea)" = "--each" ] || fail "summary --ea: $(complete_words memsnap summary --ea)"
    echo "11 passed, 0 failed"
    ;;
deb)
    cd "$BUILD_DIR" || fail "cd"
    cpack -G DEB -B "$T/pkg" > "$T/cpack.log" 2>&1 || fail "cpack: $(tail -20 "$T/cpack.log")"
    deb=$(ls "$T"/pkg/memsnap_*.deb) || fail "no .deb: $(ls "$T/pkg")"
    dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' > "$T/files"
    for f in /usr/bin/memsnap /usr/bin/memsnap-decode /usr/bin/memsnap-smoke \
             /usr/lib/memsnap/libmemsnap.so /usr/lib/memsnap/simdev/libcuda.so.1 \
             /usr/lib/libmemsnap_alloc.so.0.1.0 /usr/lib/libmemsnap_alloc.a \
             /usr/include/memsnap/alloc.h /usr/lib/pkgconfig/memsnap-alloc.pc \
             /usr/lib/cmake/memsnap/memsnapConfig.cmake /usr/share/man/man1/memsnap-run.1 \
             /usr/share/man/man1/memsnap.1 /usr/share/man/man1/memsnap-job.1 \
             /usr/share/bash-completion/completions/memsnap; do
        grep -qx "$f" "$T/files" || fail "the package lacks $f"
    done
    grep -q "/usr/lib/libcuda" "$T/files" && fail "the simulated libcuda is on the loader's path"
    deps=$(dpkg-deb -f "$deb" Depends)
    for lib in libc6 libunwind8 libcjson1 libpng16-16 libcairo2 fonts-dejavu-core libdw1 libzstd1; do
        grep -q "\\b$lib\\b" <<< "$deps" || fail "Depends lacks $lib: $deps"
    done
    grep -qi "cuda\|nvidia" <<< "$deps" && fail "Depends names a CUDA package: $deps"
    # installable here (Debian 12): apt resolves its Depends, changing nothing
    if [ "$(id -u)" = 0 ]; then
        apt-get install -s "$deb" > "$T/apt.log" 2>&1 && grep -q "^Inst memsnap" "$T/apt.log" ||
            fail "apt-get install -s: $(tail -5 "$T/apt.log")"
    fi
    dpkg-deb -x "$deb" "$T/root"
    P=$T/root/usr
    cd "$T" || fail "cd"
    run_clean memsnap run --sim-device 8G -q -o "$T/s.msnap" -- memsnap-smoke > out 2>&1 || fail "run: $(cat out)"
    run_clean memsnap summary s.msnap > summary 2>&1 || fail "summary: $(cat summary)"
    grep -q "command    memsnap-smoke" summary || fail "summary: $(head -5 summary)"
    echo "Depends: $deps"
    echo "4 passed, 0 failed"
    ;;
bundle)
    # bundle_libs.py's DLOPENED (here --dlopen): a library a file opens with
    # dlopen() by name is bundled under that name, its own dependencies
    # renamed as usual, and the file's run path leads dlopen() to it, ahead
    # of the system's copy of the same library.
    command -v cc > /dev/null && command -v patchelf > /dev/null || fail "cc and patchelf are needed"
    mkdir -p "$T/n/bin"
    printf '%s\n' '#define _GNU_SOURCE' '#include <dlfcn.h>' '#include <link.h>' '#include <stdio.h>' \
        'int main(int c, char **v) { struct link_map *m; void *h = dlopen(v[1], RTLD_NOW);' \
        '  if (!h || dlinfo(h, RTLD_DI_LINKMAP, &m)) { printf("%s\n", dlerror()); return 1; }' \
        '  printf("%s\n", m->l_name); return 0; }' > "$T/opener.c"
    cc -o "$T/n/bin/opener" "$T/opener.c" -ldl || fail "cc opener.c"
    "$T/n/bin/opener" libpng16.so.16 > "$T/before" || fail "no libpng16.so.16 on this system: $(cat "$T/before")"
    python3 "$SRC_DIR/packaging/bundle_libs.py" --dlopen bin/opener:libpng16.so.16 "$T/n" > "$T/bundle.log" 2>&1 ||
        fail "bundle_libs.py --dlopen: $(cat "$T/bundle.log")"
    D=$T/n/lib/deps
    [ -f "$D/libpng16.so.16" ] || fail "libpng16.so.16 not bundled under its name: $(ls "$D")"
    z=$(cd "$D" && ls libz-*.so.1 2> /dev/null)
    [ -n "$z" ] || fail "libpng's libz not bundled: $(ls "$D")"
    patchelf --print-needed "$D/libpng16.so.16" | grep -qx "$z" || fail "libpng16.so.16 does not need $z"
    [ "$(patchelf --print-rpath "$T/n/bin/opener")" = '$ORIGIN/../lib/deps' ] ||
        fail "the opener's run path: $(patchelf --print-rpath "$T/n/bin/opener")"
    "$T/n/bin/opener" libpng16.so.16 > "$T/after" || fail "dlopen after bundling: $(cat "$T/after")"
    [ "$(cat "$T/after")" = "$D/libpng16.so.16" ] || [ "$(realpath "$(cat "$T/after")")" = "$D/libpng16.so.16" ] ||
        fail "dlopen found $(cat "$T/after"), not the bundled copy (before bundling: $(cat "$T/before"))"
    python3 "$SRC_DIR/packaging/bundle_libs.py" --check "$T/n" > /dev/null || fail "bundle_libs.py --check"
    echo "dlopen(libpng16.so.16): $(cat "$T/before") before bundling, $(cat "$T/after") after"
    echo "1 passed, 0 failed"
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac

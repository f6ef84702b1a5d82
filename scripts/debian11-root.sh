#!/bin/bash
# A Debian 11 (bullseye, glibc 2.31) root made with debootstrap from Debian's
# own packages, kept in a cache: where the manylinux wheel is built
# (scripts/build-wheel.sh) and the old machine it is tried on
# (tests/install/manylinux_test.sh).  docs/install.md, *The manylinux wheel*.
#
#   debian11-root.sh make KIND
#       makes the root of KIND if it is not in the cache, or if its package
#       list, suite or mirror changed (then from scratch), and prints its
#       path.  KIND: build (compilers, CMake, the -dev packages, Python's
#       setuptools and wheel) or run (python3 with numpy, pandas, pytest,
#       venv and pip: what a user's machine has; no compiler, no memsnap
#       dependency).  Cold: debootstrap and apt-get, about two minutes
#       each (docs/install.md); cached: nothing is fetched.
#   debian11-root.sh exec KIND [-b SRC:DST[:rw]]... [-u USER] [-e VAR=VALUE]... -- CMD...
#       runs CMD in the root (made first if needed) in a mount namespace of
#       its own: /proc, /dev, and each SRC bound at DST (read-only unless
#       :rw); with a clean environment (PATH, HOME, LANG=C.UTF-8 and the
#       -e ones); as USER (an account made on first use) or root.
#
# Needs root (debootstrap, chroot, mount), debootstrap (scripts/setup.sh)
# and, when the root is not cached, Debian's mirror.  Settings:
#   MEMSNAP_ROOT_CACHE     where the roots are kept (default /var/cache/memsnap)
#   MEMSNAP_DEBIAN_MIRROR  the mirror (default http://deb.debian.org/debian)
#   MEMSNAP_DEBIAN_SECURITY=1  also bullseye-security (LTS updates); off by
#       default: bullseye's last point release (11.11) is the same on every
#       machine and every day, the security suite is not
# Idempotent; concurrent calls wait for each other (flock).
set -euo pipefail
die() { echo "debian11-root.sh: $*" >&2; exit 2; }

packages() {
    case $1 in
        build) echo "build-essential cmake pkg-config patchelf libunwind-dev libcjson-dev" \
                    "libpng-dev libcairo2-dev libfreetype-dev fonts-dejavu-core libdw-dev" \
                    "libelf-dev libzstd-dev libsqlite3-dev python3 python3-setuptools" \
                    "python3-wheel python3-pip" ;;
        run) echo "python3 python3-venv python3-pip python3-numpy python3-pandas python3-pytest" ;;
        *) die "no root kind '$1' (build or run)" ;;
    esac
}

cache=${MEMSNAP_ROOT_CACHE:-/var/cache/memsnap}
mirror=${MEMSNAP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${MEMSNAP_DEBIAN_SECURITY:-0}

# in_root ROOT [-b ...] [-u USER] [-e ...] -- CMD...: the exec subcommand's work.
in_root() {
    local R=$1; shift
    local binds=() envs=() user=""
    while [ $# -gt 0 ]; do
        case $1 in
            -b) binds+=("$2"); shift 2 ;;
            -e) envs+=("$2"); shift 2 ;;
            -u) user=$2; shift 2 ;;
            --) shift; break ;;
            *) die "exec: unknown option '$1'" ;;
        esac
    done
    [ $# -gt 0 ] || die "exec: no command"
    local home=/root spec=()
    if [ -n "$user" ]; then
        if ! chroot "$R" getent passwd "$user" > /dev/null; then
            chroot "$R" useradd -m -s /bin/sh "$user" ||
                die "useradd $user in $R failed"
        fi
        home=$(chroot "$R" getent passwd "$user" | cut -d: -f6)
        spec=(--userspec="$user:$user")
    fi
    local mounts="mount -t proc proc '$R/proc' && mount --rbind /dev '$R/dev'"
    local b src dst mode
    for b in ${binds[@]+"${binds[@]}"}; do
        IFS=: read -r src dst mode <<< "$b"
        [ -e "$src" ] || die "exec: no $src to bind"
        src=$(realpath "$src")
        mkdir -p "$R$dst"
        mounts="$mounts && mount --bind '$src' '$R$dst'"
        [ "$mode" = rw ] || mounts="$mounts && mount -o remount,bind,ro '$R$dst'"
    done
    # A mount namespace of its own: the mounts end with the command.
    unshare --mount --propagation private --fork -- sh -c "$mounts"' && exec "$@"' sh \
        chroot ${spec[@]+"${spec[@]}"} "$R" /usr/bin/env -i \
        PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME="$home" LANG=C.UTF-8 \
        ${envs[@]+"${envs[@]}"} "$@"
}

# make_root KIND: prints the root's path, made or updated first.
make_root() {
    local kind=$1 pkgs R want
    pkgs=$(packages "$kind" | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
    R=$cache/bullseye-$kind
    want="bullseye $mirror security=$security: $pkgs"
    mkdir -p "$cache"
    exec 9> "$cache/.lock-$kind"
    flock 9
    if [ -f "$R/etc/memsnap-root" ] && [ "$(cat "$R/etc/memsnap-root")" = "$want" ]; then
        echo "$R"
        return
    fi
    command -v debootstrap > /dev/null ||
        die "debootstrap is needed (apt-get install debootstrap; scripts/setup.sh)"
    local new=$R.new log=$cache/bullseye-$kind.log t0=$SECONDS
    rm -rf "$new"
    echo "debian11-root.sh: making the $kind root in $R (debootstrap bullseye from $mirror; log: $log)" >&2
    debootstrap --variant=minbase bullseye "$new" "$mirror" > "$log" 2>&1 ||
        die "debootstrap failed: $(tail -3 "$log")"
    {
        echo "deb $mirror bullseye main"
        [ "$security" = 1 ] && echo "deb ${mirror%/debian}/debian-security bullseye-security main"
    } > "$new/etc/apt/sources.list"
    # No daemons in a root (policy-rc.d); no documentation beyond the
    # copyright files (bundle_libs.py copies those).
    printf '#!/bin/sh\nexit 101\n' > "$new/usr/sbin/policy-rc.d"
    chmod 755 "$new/usr/sbin/policy-rc.d"
    in_root "$new" -e DEBIAN_FRONTEND=noninteractive -- sh -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs && apt-get clean" \
        >> "$log" 2>&1 || die "apt-get install in the $kind root failed: $(grep -E '^E:' "$log" | tail -3)"
    echo "$want" > "$new/etc/memsnap-root"
    rm -rf "$R"
    mv "$new" "$R"
    echo "debian11-root.sh: the $kind root is made ($((SECONDS - t0)) s, $(du -sm "$R" | cut -f1) MiB)" >&2
    echo "$R"
}

[ $# -ge 2 ] || die "usage: debian11-root.sh make KIND | exec KIND [-b SRC:DST[:rw]]... [-u USER] [-e VAR=VALUE]... -- CMD..."
cmd=$1 kind=$2
shift 2
packages "$kind" > /dev/null
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount): sudo $0 $cmd $kind"
case $cmd in
    make) [ $# = 0 ] || die "make: no more arguments"; make_root "$kind" ;;
    exec) R=$(make_root "$kind"); in_root "$R" "$@" ;;
    *) die "no subcommand '$cmd' (make or exec)" ;;
esac

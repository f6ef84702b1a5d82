#!/usr/bin/env python3
"""Bundles the shared libraries that memsnap's binaries need into its pip package.

What `auditwheel repair` does for a manylinux wheel, with Debian's patchelf
(auditwheel is not a Debian package).  Given the package's native tree
(memsnap/_native/: bin/, lib/, laid out as an install), it

  1. asks the system's loader (ldd) which libraries each ELF file there
     loads, all the way down;
  2. copies every one of them that is not part of glibc, nor the CUDA driver
     (libcuda.so.1 and libnvidia-ml.so.1 come from the driver, or from
     memsnap's simulated device), into lib/deps/, renamed with a hash of its
     contents (libcairo.so.2 -> libcairo-1a2b3c4d.so.2, its SONAME too), so a
     copy never stands in for a library of the same name that a recorded
     program loads itself;
  3. rewrites each ELF file's DT_NEEDED to the new names and sets its run
     path to $ORIGIN/<the way to lib/deps> (bundled libraries: $ORIGIN);
     files that need nothing bundled lose the run path of the build tree;
  4. copies the Debian copyright file of each bundled library's package to
     share/licenses/PACKAGE.copyright (their licences ask for it).

Libraries a file opens with dlopen() rather than through DT_NEEDED are not
seen by ldd: DLOPENED below names them, per file, and they are bundled
too, under their own names (dlopen asks by that name and finds the file
through the run path of the object that calls it), their own
dependencies renamed as above.

Debian 12's static archives (libzstd.a, libdw.a, libcairo.a, ...) are not
position-independent, so they can go neither into libmemsnap.so nor into a
PIE: shared libraries beside the binaries are the way (docs/install.md).

Usage: bundle_libs.py [--dlopen FILE:SONAME]... NATIVE_DIR
           (exit 0, or 1 with one line saying why); --dlopen adds to DLOPENED
       bundle_libs.py --check NATIVE_DIR   verify only: every library that
           the files load, other than glibc's and the driver's, resolves
           inside NATIVE_DIR (ldd), and every DLOPENED one is there; prints
           the map
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys

# Left to the system: glibc's libraries (every Linux has them; a wheel that
# bundled them would break), and the CUDA driver's, which the GPU machine
# provides (or memsnap's simulated device, through LD_LIBRARY_PATH).
GLIBC = {"ld-linux-x86-64.so.2", "linux-vdso.so.1", "libc.so.6", "libm.so.6", "libdl.so.2",
         "librt.so.1", "libpthread.so.0", "libresolv.so.2", "libutil.so.1", "libanl.so.1",
         "libmvec.so.1"}
DRIVER = {"libcuda.so.1", "libnvidia-ml.so.1"}
DEPS = "lib/deps"
# Libraries opened with dlopen() by SONAME, which ldd cannot see: {file, as
# NATIVE_DIR/FILE: [sonames]}.  One line per file; a file this build does
# not have is left out.  The CUDA driver's are never bundled (DRIVER).
# Empty today: libmemsnap.so opens libmemsnap_stacks.so, a file of ours, by
# its path, and that one names libunwind and libdw as DT_NEEDED.  A file
# that opened a library by SONAME itself would get a line such as
#   "lib/memsnap/libmemsnap_stacks.so": ["libunwind.so.8", "libdw.so.1"],
DLOPENED = {
}


def die(msg):
    sys.stderr.write("bundle_libs.py: %s\n" % msg)
    sys.exit(1)


def is_elf(path):
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_files(root):
    out = []
    for d, _, files in os.walk(root):
        for name in sorted(files):
            p = os.path.join(d, name)
            if is_elf(p):
                out.append(p)
    return sorted(out)


def ldd(path):
    """{soname: resolved path or None} for everything path loads, transitively."""
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run(["ldd", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    deps = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(not found|\S+)", line)
        if m:
            deps[m.group(1)] = None if m.group(2) == "not found" else m.group(2)
        else:
            m = re.match(r"\s*(\S+)\s+\(0x", line)   # the loader, the vDSO
            if m:
                deps[os.path.basename(m.group(1))] = m.group(1)
    if r.returncode != 0 and not deps:
        die("ldd %s: %s" % (path, r.stdout.strip()))
    return deps


def patchelf(*args):
    r = subprocess.run(["patchelf"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        die("patchelf %s: %s" % (" ".join(args), r.stdout.strip()))
    return r.stdout


def needed(path):
    return patchelf("--print-needed", path).split()


def new_name(soname, path):
    """libfoo.so.1.2 -> libfoo-<8 hex of the contents>.so.1.2"""
    with open(path, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:8]
    stem, sep, rest = soname.partition(".so")
    return "%s-%s%s%s" % (stem, h, sep, rest)


def debian_copyright(path):
    """(package, path of its copyright file), or None off Debian."""
    if not shutil.which("dpkg"):
        return None
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if r.returncode == 0:
            pkg = r.stdout.split(":")[0].strip()
            c = "/usr/share/doc/%s/copyright" % pkg
            if os.path.isfile(c):
                return pkg, c
    return None


def system_library(soname):
    """The path the loader's cache (ldconfig -p) gives soname, or None."""
    r = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       universal_newlines=True)
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+\((.*)\)\s+=>\s+(\S+)", line)
        if m and m.group(1) == soname and "x86-64" in m.group(2):
            return m.group(3)
    return None


def dlopened(root):
    """{soname: system path} of DLOPENED's libraries for the files root has."""
    out = {}
    for rel, sonames in sorted(DLOPENED.items()):
        if not os.path.isfile(os.path.join(root, rel)):
            continue
        for so in sonames:
            if so in GLIBC or so in DRIVER:
                die("DLOPENED: %s is glibc's or the driver's, never bundled" % so)
            where = system_library(so)
            if where is None:
                die("%s opens %s (DLOPENED), which the loader's cache does not have here"
                    % (rel, so))
            out[so] = where
    return out


def bundle(root):
    ours = elf_files(root)
    if not ours:
        die("no ELF files under %s" % root)
    opened = dlopened(root)                       # soname -> system path, kept as named
    wanted = {}                                   # soname -> system path, renamed
    for f in ours + sorted(opened.values()):
        for so, where in ldd(f).items():
            if so in GLIBC or so in DRIVER:
                continue
            if where is None:
                die("%s needs %s, which the loader does not find here" % (f, so))
            if os.path.realpath(where).startswith(os.path.realpath(root) + os.sep):
                continue                          # one of ours
            wanted[so] = where
    deps = os.path.join(root, DEPS)
    os.makedirs(deps, exist_ok=True)
    renamed = {}
    for so, where in sorted(wanted.items()):
        name = new_name(so, os.path.realpath(where))
        shutil.copyfile(os.path.realpath(where), os.path.join(deps, name))
        os.chmod(os.path.join(deps, name), 0o755)
        renamed[so] = name
    for so, name in renamed.items():
        patchelf("--set-soname", name, os.path.join(deps, name))
    for so, where in sorted(opened.items()):
        shutil.copyfile(os.path.realpath(where), os.path.join(deps, so))
        os.chmod(os.path.join(deps, so), 0o755)
    copies = sorted(set(renamed.values()) | set(opened))
    callers = {os.path.join(root, r) for r, sonames in DLOPENED.items()
               if sonames and os.path.isfile(os.path.join(root, r))}
    for f in ours + [os.path.join(deps, n) for n in copies]:
        before = needed(f)
        todo = [n for n in before if n in renamed]
        # One --replace-needed a call, and --set-rpath in a call of its own:
        # patchelf 0.12 (Debian 11) garbles the string table when one call
        # replaces several names, and 0.14 (Debian 12) when --set-rpath
        # comes with --replace-needed.
        for n in todo:
            patchelf("--replace-needed", n, renamed[n], f)
        if todo or f in callers:              # a caller of dlopen finds them by its run path
            rel = os.path.relpath(deps, os.path.dirname(f))
            patchelf("--set-rpath", "$ORIGIN" if rel == "." else "$ORIGIN/" + rel, f)
        else:
            patchelf("--remove-rpath", f)
        after = needed(f)
        if after != [renamed.get(n, n) for n in before]:
            die("patchelf garbled %s's DT_NEEDED: %s, not %s"
                % (f, after, [renamed.get(n, n) for n in before]))
    lic = os.path.join(root, "share", "licenses")
    for so, where in sorted(list(wanted.items()) + list(opened.items())):
        c = debian_copyright(where)
        if c:
            os.makedirs(lic, exist_ok=True)
            shutil.copyfile(c[1], os.path.join(lic, c[0] + ".copyright"))
    check(root, verbose=False)
    print("bundle_libs.py: %d libraries bundled into %s" % (len(renamed), DEPS))


def check(root, verbose=True):
    """Every library an ELF file under root loads resolves inside root, or
    is glibc's or the driver's; exits 1 naming those that do not.  verbose:
    prints FILE: LIB -> PATH lines."""
    bad = []
    real_root = os.path.realpath(root) + os.sep
    for f in elf_files(root):
        for so, where in sorted(ldd(f).items()):
            if so in GLIBC:
                continue
            if so in DRIVER:
                if verbose:
                    print("%s: %s -> (the driver, or the simulated device)"
                          % (os.path.relpath(f, root), so))
                continue
            inside = where and os.path.realpath(where).startswith(real_root)
            if verbose:
                print("%s: %s -> %s" % (os.path.relpath(f, root), so, where))
            if not inside:
                bad.append("%s: %s -> %s" % (f, so, where))
    for rel, sonames in sorted(DLOPENED.items()):
        if not os.path.isfile(os.path.join(root, rel)):
            continue
        for so in sonames:
            where = os.path.join(root, DEPS, so)
            if verbose:
                print("%s: %s -> %s (dlopen)" % (rel, so, where))
            if not os.path.isfile(where):
                bad.append("%s: %s (dlopen) is not in %s" % (rel, so, DEPS))
    if bad:
        die("resolved outside the package:\n  " + "\n  ".join(bad))


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        check(argv[2])
        return 0
    argv = list(argv)
    while len(argv) > 3 and argv[1] == "--dlopen":
        rel, sep, so = argv[2].partition(":")
        if not sep or not rel or not so:
            die("--dlopen FILE:SONAME, not %s" % argv[2])
        DLOPENED.setdefault(rel, []).append(so)
        del argv[1:3]
    if len(argv) != 2:
        die("usage: bundle_libs.py [--dlopen FILE:SONAME]... NATIVE_DIR | --check NATIVE_DIR")
    if not shutil.which("patchelf"):
        die("patchelf not found (Debian: apt-get install patchelf)")
    bundle(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Checks that a memsnap wheel keeps to a manylinux policy: what auditwheel
checks, read from the ELF files with binutils' readelf (auditwheel is not
a Debian package).

For every ELF file in the wheel (or in an unpacked tree):

  1. no symbol version it needs is newer than the policy's: GLIBC_2.x above
     the glibc of the tag (2.31 for manylinux_2_31), and, from libstdc++ and
     libgcc_s where those are left to the system, GLIBCXX, CXXABI and GCC
     above what that glibc's distributions ship (auditwheel's
     manylinux_2_31 policy: GCC 10's);
  2. every library it needs (DT_NEEDED) is one of the manylinux libraries
     (PEP 600: glibc's, libgcc_s, libstdc++, libz, libexpat, the X11 and
     GL client libraries and GLib, auditwheel's lib_whitelist), one of the
     CUDA driver's (libcuda.so.1, libnvidia-ml.so.1: the driver's, or
     memsnap's simulated device), or is bundled: a file of that name in a
     folder of the file's run path inside the wheel ($ORIGIN/...);
  3. no run path leaves the wheel (an absolute one, or $ORIGIN/.. past its
     root).

Usage: check_wheel.py [--glibc 2.31] WHEEL|DIR
  exit 0 and one line (files, the highest GLIBC needed); 1 and one line per
  finding (FILE: what); 2 bad usage.  The platform tag the wheel's name
  and WHEEL file carry must be manylinux_<glibc>_x86_64 when it is a .whl.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# auditwheel's lib_whitelist for manylinux_2_17 and later (PEP 600 defers to
# it), with the loader and the vDSO, which every program has.
MANYLINUX_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libresolv.so.2",
    "libutil.so.1", "libnsl.so.1", "libanl.so.1", "ld-linux-x86-64.so.2", "linux-vdso.so.1",
    "libgcc_s.so.1", "libstdc++.so.6", "libatomic.so.1", "libz.so.1", "libexpat.so.1",
    "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1",
    "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
}
# The CUDA driver's: the GPU machine has them (memsnap run puts the simulated
# device's first where there is none), as for every CUDA wheel.
DRIVER_LIBS = {"libcuda.so.1", "libnvidia-ml.so.1"}
# Version ceilings of the libraries besides glibc, by glibc (auditwheel's
# manylinux_2_31 policy: the GCC 10 runtime of the distributions with 2.31).
OTHER_CEILINGS = {(2, 31): {"GLIBCXX": (3, 4, 28), "CXXABI": (1, 3, 12), "GCC": (7, 0, 0)}}


def vtuple(text):
    return tuple(int(n) for n in text.split("."))


def is_elf(path):
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def readelf(args, path):
    r = subprocess.run(["readelf", "-W"] + args + [path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        raise SystemExit("check_wheel.py: readelf %s %s: %s" % (" ".join(args), path,
                                                                r.stderr.strip()))
    return r.stdout


def dynamic(path):
    """(needed, runpaths, soname) from the dynamic section."""
    needed, runpath, soname = [], [], None
    for line in readelf(["-d"], path).splitlines():
        m = re.search(r"\((NEEDED|RUNPATH|RPATH|SONAME)\)\s+.*?\[(.*)\]", line)
        if not m:
            continue
        if m.group(1) == "NEEDED":
            needed.append(m.group(2))
        elif m.group(1) == "SONAME":
            soname = m.group(2)
        else:
            runpath += [p for p in m.group(2).split(":") if p]
    return needed, runpath, soname


def version_needs(path):
    """{library: set of version names} from .gnu.version_r."""
    out, lib, inside = {}, None, False
    for line in readelf(["-V"], path).splitlines():
        if line.startswith("Version needs section"):
            inside = True
            continue
        if line.startswith("Version ") and inside:   # the next section
            inside = False
        if not inside:
            continue
        m = re.search(r"File:\s+(\S+)", line)
        if m:
            lib = m.group(1)
            out.setdefault(lib, set())
            continue
        m = re.search(r"Name:\s+(\S+)", line)
        if m and lib:
            out[lib].add(m.group(1))
    return out


def check_tree(root, glibc):
    """Findings (list of lines) for the ELF files under root; and the highest
    GLIBC version any of them needs."""
    findings, top = [], (0,)
    root = os.path.realpath(root)
    files = []
    for d, _, names in os.walk(root):
        files += [os.path.join(d, n) for n in sorted(names) if is_elf(os.path.join(d, n))]
    if not files:
        return ["no ELF file in %s" % root], top, 0
    ceilings = OTHER_CEILINGS.get(glibc, {})
    for f in sorted(files):
        rel = os.path.relpath(f, root)
        needed, runpath, _ = dynamic(f)
        dirs = []
        for p in runpath:
            if not p.startswith("$ORIGIN"):
                findings.append("%s: run path %s is outside the wheel" % (rel, p))
                continue
            d = os.path.normpath(os.path.dirname(f) + p[len("$ORIGIN"):])
            if d != root and not d.startswith(root + os.sep):
                findings.append("%s: run path %s leaves the wheel" % (rel, p))
                continue
            dirs.append(d)
        for lib in needed:
            if lib in MANYLINUX_LIBS or lib in DRIVER_LIBS:
                continue
            if not any(os.path.isfile(os.path.join(d, lib)) for d in dirs):
                findings.append("%s: needs %s, which is neither bundled (in its run path %s) "
                                "nor one of the manylinux libraries"
                                % (rel, lib, ":".join(runpath) or "(none)"))
        bundled = {lib for lib in needed if lib not in MANYLINUX_LIBS and lib not in DRIVER_LIBS}
        for lib, versions in sorted(version_needs(f).items()):
            for v in sorted(versions):
                m = re.match(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)$", v)
                if not m or lib in bundled:
                    continue        # a bundled library's versions are its own
                kind, num = m.group(1), vtuple(m.group(2))
                if kind == "GLIBC":
                    top = max(top, num)
                    if num > glibc:
                        findings.append("%s: needs %s (from %s), above the %s of manylinux_%d_%d"
                                        % (rel, v, lib, ".".join(map(str, glibc)), *glibc))
                elif kind in ceilings and num > ceilings[kind]:
                    findings.append("%s: needs %s (from %s), above manylinux_%d_%d's %s_%s"
                                    % (rel, v, lib, glibc[0], glibc[1], kind,
                                       ".".join(map(str, ceilings[kind]))))
    return findings, top, len(files)


def check_tag(whl, glibc):
    """Findings about the wheel's platform tag (its file name and WHEEL file)."""
    want = "manylinux_%d_%d_x86_64" % glibc
    out = []
    if not os.path.basename(whl).endswith("-%s.whl" % want):
        out.append("%s: the file name's tag is not %s" % (os.path.basename(whl), want))
    with zipfile.ZipFile(whl) as z:
        meta = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
        text = z.read(meta[0]).decode() if meta else ""
    tags = re.findall(r"^Tag:\s*(\S+)$", text, re.M)
    if not tags or any(not t.endswith("-" + want) for t in tags):
        out.append("%s: WHEEL says Tag: %s, not py3-none-%s" % (os.path.basename(whl),
                                                                 ", ".join(tags), want))
    return out


def main(argv):
    glibc = (2, 31)
    args = argv[1:]
    if len(args) == 3 and args[0] == "--glibc" and re.match(r"^2\.\d+$", args[1]):
        glibc = vtuple(args[1])
        args = args[2:]
    if len(args) != 1 or not os.path.exists(args[0]):
        sys.stderr.write("usage: check_wheel.py [--glibc 2.31] WHEEL|DIR\n")
        return 2
    if not shutil.which("readelf"):
        sys.stderr.write("check_wheel.py: readelf is needed (binutils)\n")
        return 2
    target = args[0]
    tmp = None
    try:
        findings = []
        if os.path.isdir(target):
            root = target
        else:
            tmp = tempfile.mkdtemp(prefix="check_wheel.")
            with zipfile.ZipFile(target) as z:
                z.extractall(tmp)
            root = tmp
            findings += check_tag(target, glibc)
        more, top, n = check_tree(root, glibc)
        findings += more
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    if findings:
        for line in findings:
            print("check_wheel.py: " + line)
        return 1
    print("check_wheel.py: %s keeps to manylinux_%d_%d: %d ELF files, the highest GLIBC "
          "needed %s, every other library manylinux's, the driver's or bundled"
          % (os.path.basename(target.rstrip("/")), glibc[0], glibc[1], n,
             ".".join(map(str, top))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

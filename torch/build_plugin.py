#!/usr/bin/env python3
"""Builds libmemsnap_torch-<build-id>.so against the PyTorch this Python imports.

The recorder's PyTorch plugin (memsnap_torch.cpp) must be compiled against
the exact libc10_cuda.so that a process loads, so it is built per PyTorch
build and named by that library's GNU build-id.  This script finds torch's
headers and libraries from `import torch` (it does not initialize CUDA), reads
the build-id from libc10_cuda.so's ELF notes, finds the CUDA runtime headers
(torch's headers include cuda_runtime_api.h), and runs the C++ compiler.
The plugin uses the caching allocator (libc10_cuda, libc10) and the autograd
engine (torch/csrc/autograd headers, libtorch_cpu).  MEMSNAP_TORCH_CXXFLAGS,
when set, is added to the compiler's flags (split on spaces; for debugging).

Used by torch/CMakeLists.txt (into the build's lib/ folder, beside
libmemsnap.so) and by `memsnap torch-setup` (into the per-user cache).

Exit status: 0 built (the plugin's path on stdout), 2 with one line on
stderr when something needed is missing.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def fail(msg):
    """One line on stderr, exit 2."""
    sys.stderr.write("memsnap torch-setup: %s\n" % msg)
    sys.exit(2)


def elf_build_id(path):
    """Hex GNU build-id of the ELF file at path (64-bit little-endian), or ''."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return ""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        base = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, base + 4)
        if sh_type != 7:                       # SHT_NOTE
            continue
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        p, end = off, off + size
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz]
            desc_at = p + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name == b"GNU\x00":
                return data[desc_at:desc_at + descsz].hex()
            p = desc_at + ((descsz + 3) & ~3)
    return ""


def cuda_include(torch_dir):
    """A folder holding cuda_runtime_api.h, or None."""
    cands = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(os.path.join(os.environ[var], "include"))
    cands.append("/usr/local/cuda/include")
    site = os.path.dirname(torch_dir)
    nv = os.path.join(site, "nvidia")
    if os.path.isdir(nv):
        for sub in sorted(os.listdir(nv)):
            cands.append(os.path.join(nv, sub, "include"))
    cands.append("/usr/include")
    for c in cands:
        if os.path.isfile(os.path.join(c, "cuda_runtime_api.h")):
            return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="memsnap_torch.cpp")
    ap.add_argument("--out-dir", required=True, help="folder for the plugin")
    ap.add_argument("--include", default="", help="memsnap's include/ folder (optional)")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    a = ap.parse_args()

    try:
        import torch  # noqa: F401  (only its location and version are used)
    except Exception as e:  # ImportError, or a broken install
        fail("python %s cannot import torch (%s)" % (sys.executable, str(e).splitlines()[0] if str(e) else type(e).__name__))
    torch_dir = os.path.dirname(torch.__file__)
    lib = os.path.join(torch_dir, "lib")
    inc = os.path.join(torch_dir, "include")
    c10 = os.path.join(lib, "libc10_cuda.so")
    if not os.path.isfile(c10):
        fail("torch %s at %s has no lib/libc10_cuda.so (a CPU-only build?)" % (torch.__version__, torch_dir))
    if not os.path.isfile(os.path.join(inc, "c10", "cuda", "CUDACachingAllocator.h")):
        fail("torch %s at %s has no C++ headers (include/c10/cuda)" % (torch.__version__, torch_dir))
    if not os.path.isfile(os.path.join(inc, "torch", "csrc", "autograd", "function.h")):
        fail("torch %s at %s has no autograd headers (include/torch/csrc/autograd)"
             % (torch.__version__, torch_dir))
    if not os.path.isfile(os.path.join(lib, "libtorch_cpu.so")):
        fail("torch %s at %s has no lib/libtorch_cpu.so" % (torch.__version__, torch_dir))
    bid = elf_build_id(c10)
    if not bid:
        fail("%s has no GNU build-id; the plugin could not be matched to it" % c10)
    cuda = cuda_include(torch_dir)
    if not cuda:
        fail("no cuda_runtime_api.h found (set CUDA_HOME, or install the CUDA headers)")
    if not shutil.which(a.cxx):
        fail("no C++ compiler %s (set CXX)" % a.cxx)
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))

    os.makedirs(a.out_dir, exist_ok=True)
    out = os.path.join(a.out_dir, "libmemsnap_torch-%s.so" % bid)
    fd, tmp = tempfile.mkstemp(prefix=".libmemsnap_torch-", suffix=".so", dir=a.out_dir)
    os.close(fd)
    cmd = [a.cxx, "-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden",
           "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, '-DMEMSNAP_C10_BUILD_ID="%s"' % bid,
           "-isystem", inc, "-isystem", os.path.join(inc, "torch", "csrc", "api", "include"),
           "-isystem", cuda]
    if a.include:
        cmd += ["-I", a.include]
    cmd += os.environ.get("MEMSNAP_TORCH_CXXFLAGS", "").split()
    cmd += [a.source, "-o", tmp, "-L" + lib, "-ltorch_cpu", "-lc10_cuda", "-lc10",
            "-Wl,-rpath," + lib, "-Wl,--no-undefined"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        sys.stderr.write(r.stdout)
        fail("compiling the plugin failed: %s" % " ".join(cmd))
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)   # atomic: a recorder never sees a half-written plugin
    print(out)
    sys.stderr.write("memsnap torch-setup: built %s for PyTorch %s (libc10_cuda.so build-id %s)\n"
                     % (out, torch.__version__, bid))
    return 0


if __name__ == "__main__":
    sys.exit(main())

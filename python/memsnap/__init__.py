"""memsnap: where did the GPU memory go, and why did this allocation fail?

This package carries the memsnap command line (the `memsnap` command it
installs runs the C program bundled here: `memsnap run -- python train.py`,
`memsnap summary memsnap-1234.msnap`; README.md) with its recorder, its
simulated CUDA device and the libraries they need.  From Python, for now:

    memsnap.__version__   memsnap's version (the C program's: memsnap --version)
    memsnap.paths()       where the bundled programs and libraries are

A Python API over memsnap's analysis library comes later (issue 24).
"""
import os

try:
    from ._version import __version__     # written by setup.py at build time
except ImportError:                        # a source tree that was never built
    __version__ = "0+unknown"

__all__ = ["__version__", "paths"]

# The bundled tree, laid out as an installed memsnap (setup.py; cli/parts.h).
_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")
_PARTS = {
    "memsnap": "bin/memsnap",                           # the command line
    "smoke": "bin/memsnap-smoke",                       # a small CUDA program
    "decode": "bin/memsnap-decode",                     # the decode workload
    "recorder": "lib/memsnap/libmemsnap.so",            # memsnap run preloads it
    "simdev_dir": "lib/memsnap/simdev",                 # the simulated libcuda.so.1
    "alloc": "lib/libmemsnap_alloc.so.0",               # the caching allocator
    "font": "lib/memsnap/fonts/DejaVuSans.ttf",         # the pictures' font
}


def paths():
    """A dict of absolute paths of the bundled parts, keyed memsnap, smoke,
    decode, recorder, simdev_dir, alloc and font; None for a part this build
    does not have (a build without the CUDA toolkit has no recorder)."""
    out = {}
    for key, rel in _PARTS.items():
        p = os.path.join(_NATIVE, rel)
        out[key] = p if os.path.exists(p) else None
    return out

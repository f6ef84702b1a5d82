"""memsnap: where did the GPU memory go, and why did this allocation fail?

This package carries the memsnap command line (the `memsnap` command it
installs runs the C program bundled here: `memsnap run -- python train.py`,
`memsnap summary memsnap-1234.msnap`; README.md) with its recorder, its
simulated CUDA device and the libraries they need.  From Python
(docs/python.md):

    memsnap.load(path)         a Snapshot: .summary() (the dict `memsnap summary
                               --json` prints), .events(), .sites(layer),
                               .categories(), .state_at(t) as pandas DataFrames,
                               from memsnap's own C analysis library
    memsnap.job(paths, client) a Job of many ranks: .ranks(), .sites() as DataFrames,
                               .summary() (the dict `memsnap job --json` prints), the
                               files read on Dask workers or local processes
    memsnap.record(path)       with memsnap.record("x.msnap"): records PyTorch's
                               allocated layer in this process, with Python frames
    pytest markers             limit_gpu_memory, limit_gpu_leaks (memsnap.pytest_plugin)
    %load_ext memsnap          the %%memsnap cell magic for notebooks
    memsnap.__version__        memsnap's version (the C program's: memsnap --version)
    memsnap.paths()            where the bundled programs and libraries are

numpy and pandas are needed by load() alone, and imported when it is used.
"""
import os

try:
    from ._version import __version__     # written by setup.py at build time
except ImportError:                        # a source tree that was never built
    __version__ = "0+unknown"

__all__ = ["__version__", "paths", "load", "Snapshot", "record", "Recording",
           "parse_size", "job", "Job"]

# The bundled tree, laid out as an installed memsnap (setup.py; cli/parts.h).
_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")
_PARTS = {
    "memsnap": "bin/memsnap",                           # the command line
    "smoke": "bin/memsnap-smoke",                       # a small CUDA program
    "decode": "bin/memsnap-decode",                     # the decode workload
    "recorder": "lib/memsnap/libmemsnap.so",            # memsnap run preloads it
    "simdev_dir": "lib/memsnap/simdev",                 # the simulated libcuda.so.1
    "alloc": "lib/libmemsnap_alloc.so.0",               # the caching allocator
    "py": "lib/memsnap/libmemsnap_py.so",               # the analysis library (load())
    "font": "lib/memsnap/fonts/DejaVuSans.ttf",         # the pictures' font
    "man": "share/man",                                 # a MANPATH entry: man memsnap-run
    "completion": "share/bash-completion/completions/memsnap",  # bash completion
}


def paths():
    """A dict of absolute paths of the bundled parts, keyed memsnap, smoke,
    decode, recorder, simdev_dir, alloc, py, font, man (a MANPATH entry:
    MANPATH=... man memsnap-run) and completion (the bash completion script:
    source it); None for a part this build does not have (a build without
    the CUDA toolkit has no recorder; the build tree's package has no man
    pages)."""
    out = {}
    for key, rel in _PARTS.items():
        p = os.path.join(_NATIVE, rel)
        out[key] = p if os.path.exists(p) else None
    return out


def load(path):
    """Opens a memsnap snapshot (.msnap, plain or zstd): a memsnap.Snapshot."""
    from ._snapshot import Snapshot
    return Snapshot(path)


def __getattr__(name):
    # The API's modules are imported when first used: `import memsnap` stays
    # as cheap as the console scripts need it (they import this package).
    if name == "Snapshot":
        from ._snapshot import Snapshot
        return Snapshot
    if name in ("record", "Recording"):
        from . import _record
        return getattr(_record, name)
    if name in ("job", "Job"):
        from . import _job
        return getattr(_job, name)
    if name == "parse_size":
        from ._sizes import parse_size
        return parse_size
    raise AttributeError("module 'memsnap' has no attribute %r" % name)


def load_ipython_extension(ipython):
    """%load_ext memsnap: registers the %%memsnap cell magic (docs/python.md)."""
    from ._notebook import register
    register(ipython)

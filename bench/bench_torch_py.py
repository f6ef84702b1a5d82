"""What one PyTorch trace entry costs the recorder when it comes from Python,
as in a training step, without PyTorch or a GPU: Python code --pydepth frames
deep calls deep_trace() (bench_torch_deep.c) through ctypes, which recurses
--native-depth C frames and makes trace entries through memsnap_trace_torch
as PyTorch's allocator does (alloc, free_requested, free_completed per block).
ctypes.CDLL releases the GIL around the call, as PyTorch does around every
op (--gil keeps it: ctypes.PyDLL).  Batches of --pairs blocks, a 2 ms pause
after each (the writer drains the queue then, as between a step's bursts);
prints the median and 5th percentile ns per event over the batches.
usage: memsnap run -- python3 bench_torch_py.py LIB [--pydepth 25]
       [--native-depth 30] [--pairs 100] [--batches 300] [--gil] [--distinct]"""
import argparse
import ctypes
import time

ap = argparse.ArgumentParser()
ap.add_argument("lib")
ap.add_argument("--pydepth", type=int, default=25)
ap.add_argument("--native-depth", type=int, default=30)
ap.add_argument("--pairs", type=int, default=100)
ap.add_argument("--batches", type=int, default=300)
ap.add_argument("--gil", action="store_true")
ap.add_argument("--pollute", type=int, default=0, metavar="KB",
                help="KiB of memory written between two blocks (the caches as a real step leaves"
                     " them: PyTorch's work between allocations)")
ap.add_argument("--pollute-pages", type=int, default=0, metavar="N",
                help="pages written between two blocks, one byte each, 4 KiB apart (the TLB as a"
                     " step leaves it, apart from the caches)")
ap.add_argument("--native-thread", action="store_true",
                help="the entries come from a thread without Python (as the backward pass's do)")
ap.add_argument("--frameless-thread", action="store_true",
                help="the entries come from a thread with a Python thread state but no Python frame"
                     " and not the GIL (as PyTorch's autograd device threads between Python hooks)")
ap.add_argument("--node", action="store_true",
                help="every allocation names an autograd node, as the backward pass's do")
ap.add_argument("--entries-only", action="store_true",
                help="time the trace entries alone (TSC around each block's three), not the"
                     " loop and --pollute's writes between them")
ap.add_argument("--alternate", action="store_true",
                help="one block a call, from two lines of Python in turn, so that no two"
                     " consecutive allocations have the same Python stack (the recorder's memo of"
                     " the last stack never serves); with --entries-only")
ap.add_argument("--distinct", action="store_true",
                help="each of the --pydepth frames its own function (code object), as in a model's"
                     " stack, rather than one function recursing")
ap.add_argument("--lines", type=int, default=0, metavar="N",
                help="one block a call, from N lines of Python in turn (N distinct stacks, as a"
                     " step's hundreds of allocation sites, each stack's slot in the recorder's"
                     " table on a page of its own); with --entries-only")
a = ap.parse_args()
lib = (ctypes.PyDLL if a.gil else ctypes.CDLL)(a.lib)
fn = lib.deep_trace
fn.argtypes = [ctypes.c_int, ctypes.c_int]
lib.deep_configure.argtypes = [ctypes.c_int, ctypes.c_int]
lib.deep_configure(a.pollute, int(a.node))
lib.deep_configure_pages(a.pollute_pages)


lib.deep_traced_ticks.restype = ctypes.c_uint64
lib.deep_tsc.restype = ctypes.c_uint64
lib.deep_time_entries.argtypes = [ctypes.c_int]
lib.deep_time_entries(int(a.entries_only))


def tsc_ghz():
    """TSC ticks per ns, over a 50 ms sleep."""
    t0, k0 = time.perf_counter_ns(), lib.deep_tsc()
    time.sleep(0.05)
    return (lib.deep_tsc() - k0) / (time.perf_counter_ns() - t0)


a.tsc_ghz = tsc_ghz() if a.entries_only else 0


def batches():
    times = []
    for _ in range(a.batches):
        lib.deep_traced_ticks()
        t0 = time.perf_counter_ns()
        if a.lines:
            for k in range(a.pairs):
                at_line(a.native_depth, k % a.lines)
        elif a.alternate:
            for _ in range(a.pairs // 2):
                fn(a.native_depth, 1)
                fn(a.native_depth, 1)
        else:
            fn(a.native_depth, a.pairs)
        dt = time.perf_counter_ns() - t0
        tk = lib.deep_traced_ticks()
        # --entries-only: the entries' own time (TSC ticks over the TSC's
        # rate), not the pollution between them
        times.append((tk / a.tsc_ghz if a.entries_only else dt) / (3 * a.pairs))
        time.sleep(0.002)
    return times


def lines_caller(n):
    """at_line(nd, k): fn(nd, 1) from the k-th of n call lines."""
    body = "".join(f"    {'if' if k == 0 else 'elif'} k == {k}:\n        fn(nd, 1)\n"
                   for k in range(n))
    ns = {"fn": fn}
    exec("def at_line(nd, k):\n" + body, ns)
    return ns["at_line"]


at_line = lines_caller(a.lines) if a.lines else None


def deep(d):
    return batches() if d <= 1 else deep(d - 1)


def distinct(n):
    """n functions f0 .. f{n-1}, each calling the next, the last batches()."""
    ns = {"batches": batches}
    for i in reversed(range(n)):
        callee = f"f{i + 1}" if i + 1 < n else "batches"
        exec(f"def f{i}():\n    return {callee}()\n", ns)
    return ns["f0"]


if a.frameless_thread:
    import _thread
    out = (ctypes.c_double * a.batches)()
    here = lib.deep_batches_here
    here.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
    # the thread runs the ctypes function itself: no Python frame on it
    _thread.start_new_thread(here, (a.native_depth, a.pairs, a.batches, out))
    while True:   # the C function's thread ends when its batches do
        time.sleep(0.01)
        if out[a.batches - 1] > 0:
            break
    t = sorted(x / a.tsc_ghz if a.entries_only else x for x in out)
elif a.native_thread:
    out = (ctypes.c_double * a.batches)()
    lib.deep_batches_thread.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_double)]
    lib.deep_batches_thread(a.native_depth, a.pairs, a.batches, out)
    t = sorted(x / a.tsc_ghz if a.entries_only else x for x in out)
else:
    t = sorted(distinct(a.pydepth)() if a.distinct else deep(a.pydepth))
print(f"ns/event median {t[len(t) // 2]:.1f} p5 {t[len(t) // 20]:.1f}"
      f" (python depth {a.pydepth}, native depth {a.native_depth}, {'GIL held' if a.gil else 'GIL released'}"
      f"{', %d KiB written between blocks' % a.pollute if a.pollute else ''}"
      f"{', %d pages written between blocks' % a.pollute_pages if a.pollute_pages else ''}{', autograd node' if a.node else ''}"
      f"{', native thread' if a.native_thread else ''}"
      f"{', frameless Python thread' if a.frameless_thread else ''}"
      f"{', two lines in turn' if a.alternate else ''})")

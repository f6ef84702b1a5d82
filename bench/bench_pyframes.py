"""The recorder's cost per event when the stack holds Python frames: a Python
program that calls the driver through ctypes.PyDLL (so the GIL is held and
the recorder merges Python frames), in batches of alloc+free pairs made from
--pydepth Python frames deep.  Prints the median and p99 ns per driver call
over the batches, in bench_recorder's format, so bench_pyframes.sh can set
it beside the native-only figures.
usage: bench_pyframes.py [--api async|sync|trace] [--pairs N] [--batches B] [--pydepth D]
Runs on the real driver or on the simulated libcuda.so.1 (LD_LIBRARY_PATH).
--api trace records through memsnap's own memsnap_trace_block() (the
allocator trace hook, include/memsnap/memsnap.h) instead of the driver: no
driver cost at all, so the recorder's share is all that varies; it needs
the recorder preloaded (memsnap run)."""
import argparse
import ctypes
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--api", choices=("async", "sync", "trace"), default="async")
ap.add_argument("--pairs", type=int, default=1000)
ap.add_argument("--batches", type=int, default=200)
ap.add_argument("--pydepth", type=int, default=12)
args = ap.parse_args()

cu = ctypes.PyDLL("libcuda.so.1")
dev, ctx, stream = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
for rc in (cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(dev), 0),
           cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), cu.cuCtxSetCurrent(ctx),
           cu.cuStreamCreate(ctypes.byref(stream), 1)):
    if rc:
        sys.exit(f"bench_pyframes: driver call failed ({rc})")
name = ctypes.create_string_buffer(128)
cu.cuDeviceGetName(name, 128, dev)
ptr = ctypes.c_uint64()
pref, size = ctypes.byref(ptr), ctypes.c_size_t(4096)
if args.api == "trace":
    trace = ctypes.PyDLL(None).memsnap_trace_block
    trace.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
elif args.api == "async":
    alloc, free = cu.cuMemAllocAsync, cu.cuMemFreeAsync
    alloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    free.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
else:
    alloc, free = cu.cuMemAlloc_v2, cu.cuMemFree_v2
    alloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    free.argtypes = [ctypes.c_uint64]


def call_batch():
    """One batch of alloc+free pairs; ns per driver call."""
    n = args.pairs
    t0 = time.perf_counter_ns()
    if args.api == "trace":
        for a in range(4096, 4096 * (n + 1), 4096):
            trace(1, 0, a, 4096, 0)
            trace(2, 0, a, 4096, 0)
    elif args.api == "async":
        s = stream
        for _ in range(n):
            alloc(pref, size, s)
            free(ptr.value, s)
    else:
        for _ in range(n):
            alloc(pref, size)
            free(ptr.value)
    return (time.perf_counter_ns() - t0) / (2 * n)


def baseline_batch():
    """The same loop with the driver calls replaced by a cheap ctypes call of
    the same kind (the recorder records nothing): what the Python loop and
    ctypes cost by themselves."""
    n = args.pairs
    get = cu.cuCtxGetCurrent
    c = ctypes.byref(ctypes.c_void_p())
    t0 = time.perf_counter_ns()
    for _ in range(n):
        get(c)
        get(c)
    return (time.perf_counter_ns() - t0) / (2 * n)


def deep(d, fn):
    if d <= 1:
        return [fn() for _ in range(args.batches)]
    return deep(d - 1, fn)


times = sorted(deep(args.pydepth, call_batch))
med, p99 = times[len(times) // 2], times[len(times) * 99 // 100]
low = times[len(times) // 20]      # 5th percentile: little preemption in it
print(f"device {name.value.decode()} | api {args.api} | {args.batches} batches x {args.pairs} pairs"
      f" | python depth {args.pydepth} | ns/call median {med:.1f} p99 {p99:.1f} p5 {low:.1f}")

# PyTorch's trace entries made from Python, without PyTorch: Python
# functions three deep (py_level1 -> py_level2 -> py_level3) call
# deep_trace() of bench/bench_torch_deep.c through ctypes.PyDLL (the GIL
# kept, so every CPython 3.11+ gives Python frames), which recurses
# NATIVE_DEPTH C frames and makes one block's entries through
# memsnap_trace_torch: alloc, free_requested, free_completed.
# usage: pystacks.py LIB [NATIVE_DEPTH]
import ctypes
import sys

lib = ctypes.PyDLL(sys.argv[1])
lib.deep_trace.argtypes = [ctypes.c_int, ctypes.c_int]
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 12


def py_level3():
    lib.deep_trace(depth, 1)


def py_level2():
    py_level3()


def py_level1():
    py_level2()


py_level1()
print("pystacks done")

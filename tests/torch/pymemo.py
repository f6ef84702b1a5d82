# The recorder's memo of a thread's last Python stack (pyframes.c, "The last
# stack again"), against what it must not merge: allocations (one block
# each through deep_trace, GIL released as PyTorch's ops release it) made
#   same      three times from one line in a loop: one stack
#   q, k      from one function (linear) called from two lines of attn: the
#             innermost frame's code and instruction are the same, the
#             caller's instruction is not
#   rec2, rec3  from the same innermost line at two depths of recursion
#   a, b      from two lines of one function, in turn, twice
#   gen       from a generator's frame
# after warm-up work, so the main thread's call has run (the watcher on
# 3.12+).  Prints, for each allocation in order, its label and its
# callers as Python sees them (qualified name:line, innermost first), then
# "pymemo done": the oracle the recorded stacks are checked against.
# usage: pymemo.py LIB
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.deep_trace.argtypes = [ctypes.c_int, ctypes.c_int]
labels = []


def alloc(label):
    f, callers = sys._getframe(1), []
    while f:
        callers.append("%s:%d" % (f.f_code.co_qualname, f.f_lineno))
        f = f.f_back
    labels.append(label + " " + "|".join(callers))
    lib.deep_trace(3, 1)


def linear(label):
    alloc(label)


def attn():
    linear("q")
    linear("k")


def rec(n, label):
    if n == 0:
        alloc(label)
    else:
        rec(n - 1, label)


def two_lines():
    alloc("a")
    alloc("b")


def gen():
    alloc("gen")
    yield 1


for i in range(2000):      # warm-up: the interpreter runs its pending calls
    sum(range(50))
for _ in range(3):
    alloc("same")
attn()
attn()
rec(2, "rec2")
rec(3, "rec3")
rec(2, "rec2")
two_lines()
two_lines()
for _ in gen():
    pass
attn()
for label in labels:
    print(label)
print("pymemo done")

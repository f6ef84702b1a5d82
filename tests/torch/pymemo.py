# The recorder's memo of a thread's last Python stack (pyframes.c, "The last
# stack again"), against what it must not merge: allocations (one block
# each through deep_trace, GIL released as PyTorch's ops release it) made
#   same      twelve times from one line in a loop: one stack, the memo's
#   q, k      from one function (linear) called from two lines of attn: the
#             innermost frame's code and instruction are the same, the
#             caller's instruction is not
#   rec2, rec3  from the same innermost line at two depths of recursion
#   a, b      from two lines of one function, in turn, twice
#   gen       from a generator's frame
#   churn     from 300 functions compiled and dropped one after another:
#             their code objects come back at one or two addresses, each
#             with another name (the code table takes over a dead one's
#             slot; before, the 64 slots an address may probe filled up and
#             later functions went unnamed)
# after a warm-up pass over the same paths that lets the main thread's
# pending call run with each function on the stack (the watcher on 3.12+;
# references on 3.11, asked for at most every 50 ms).  Prints, for each
# allocation in order, its label and its callers as Python sees them
# (qualified name:line, innermost first), the oracle the recorded stacks
# are checked against; then "served N" (the captures the memo answered on
# this thread) and "pymemo done".
# usage: pymemo.py LIB
import ctypes
import sys
import time
import types

lib = ctypes.CDLL(sys.argv[1])
lib.deep_trace.argtypes = [ctypes.c_int, ctypes.c_int]
labels = []
warm = True


def alloc(label):
    f, callers = sys._getframe(1), []
    while f:
        callers.append("%s:%d" % (f.f_code.co_qualname, f.f_lineno))
        f = f.f_back
    labels.append(label + " " + "|".join(callers))
    lib.deep_trace(3, 1)
    if warm:                 # the pending call runs here, this stack on the main thread
        time.sleep(0.06)
        sum(range(100))


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


def churn(rounds):
    """Functions compiled and dropped one after another: their code objects
    come back at one or two addresses, each with another name."""
    g = {"alloc": alloc}
    for i in range(rounds):
        co = compile(f"def churn_{i}():\n    alloc('churn')\n", "<churn>", "exec")
        fco = [c for c in co.co_consts if isinstance(c, types.CodeType)][0]
        f = types.FunctionType(fco, g)
        f()
        f()
        del co, fco, f


def paths():
    for _ in range(12):
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


paths()
warm = False
paths()
churn(300)
paths()
for label in labels:
    print(label)
served = ctypes.CDLL(None).memsnap_bench_memo_served
served.restype = ctypes.c_uint64
walk = (ctypes.c_uint64 * 5)()
got = ctypes.CDLL(None).memsnap_bench_walk_stats(walk, 5)
print("served", served(), "walks", *(walk[:got] if got == 5 else [-1] * 5))
print("pymemo done")

# A Python program that allocates device memory through ctypes from named
# functions nested three deep across two files (this one and pyalloc_lib.py),
# on the main thread and on two Python threads.  Modes (argv[1]):
#   basic     the main thread and two threads, GIL kept (PyDLL) and released
#             (CDLL); prints the expected frames for snapcheck
#   atexit    allocates from an atexit function and from a __del__ run at
#             interpreter shutdown
#   fork      forks; the child allocates and exits
#   daemon    a daemon thread still allocating when the interpreter exits
#   churn     300 functions made with exec and dropped, each allocating
#   wide      stacks of 40 and of 300 distinct functions (a model's stack
#             holds dozens of code objects), each allocating three times with
#             the GIL kept and three times without
#   native    a thread with no Python state (started by C code, as a C
#             extension would) allocates while the main thread holds the GIL
import atexit
import ctypes
import os
import sys
import threading

import pyalloc_lib


def level2_outer(device, nbytes, keep_gil):
    return pyalloc_lib.level3_alloc(device, nbytes, keep_gil)


def level1_entry(device, nbytes, keep_gil):
    return level2_outer(device, nbytes, keep_gil)


def worker(device, nbytes, keep_gil):
    device.bind()
    pyalloc_lib.level3_free(device, level1_entry(device, nbytes, keep_gil))


class Holder:
    def __init__(self, device):
        self.device = device

    def __del__(self):
        level1_entry(self.device, 7 << 20, True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "basic"
    device = pyalloc_lib.Device()
    device.bind()
    if mode == "basic":
        level1_entry(device, 1 << 20, True)
        level1_entry(device, 2 << 20, False)
        threads = [threading.Thread(target=worker, args=(device, (3 + i) << 20, True))
                   for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("python allocations done")
    elif mode == "atexit":
        atexit.register(lambda: level1_entry(device, 5 << 20, True))
        global HOLDER
        HOLDER = Holder(device)
        print("registered")
    elif mode == "fork":
        level1_entry(device, 1 << 20, True)
        pid = os.fork()
        if pid == 0:
            device.bind()
            level1_entry(device, 9 << 20, True)
            sys.exit(0)        # a normal exit, so the child's file is complete
        _, status = os.waitpid(pid, 0)
        print("child status", status)
    elif mode == "daemon":
        started = threading.Event()

        def spin():
            device.bind()
            for i in range(1 << 62):
                pyalloc_lib.level3_free(device, level1_entry(device, 1 << 16, True))
                pyalloc_lib.level3_free(device, level1_entry(device, 1 << 16, False))
                if i == 50:
                    started.set()
        for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
            threading.Thread(target=spin, daemon=True).start()
        started.wait()
        level1_entry(device, 1 << 20, True)
        print("leaving with a daemon thread")
    elif mode == "churn":
        # Code objects made and dropped one after another: freed code
        # objects' addresses come back for the next ones.
        for i in range(300):
            ns = {"level1_entry": level1_entry}
            src = f"def churn_{i}(d):\n    return level1_entry(d, {(i + 1) << 12}, {i % 3 == 0})\n"
            exec(compile(src, "<churn>", "exec"), ns)
            pyalloc_lib.level3_free(device, ns[f"churn_{i}"](device))
            del ns
        print("churn done")
    elif mode == "wide":
        # 40 code objects fit the recorder's per-thread cache (256 ways in
        # sets of 4), 300 do not: both must name every frame, every time.
        for n in (40, 300):
            ns = {"level1_entry": level1_entry}
            src = "".join(f"def wide_{i}(d, s, g):\n    return wide_{i + 1}(d, s, g)\n"
                          for i in range(n - 1))
            src += f"def wide_{n - 1}(d, s, g):\n    return level1_entry(d, s, g)\n"
            exec(compile(src, "<wide>", "exec"), ns)
            for rep in range(3):
                for gil in (True, False):
                    size = (n << 16) + (rep << 13) + (int(gil) << 12)
                    pyalloc_lib.level3_free(device, ns["wide_0"](device, size, gil))
        print("wide done")
    elif mode == "native":
        helper = ctypes.PyDLL(sys.argv[2])
        level1_entry(device, 1 << 20, True)
        assert helper.native_thread_alloc(ctypes.c_size_t(11 << 20)) == 0
        print("native thread done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

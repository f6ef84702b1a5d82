# A Python program that allocates device memory through ctypes from named
# functions nested three deep across two files (this one and pyalloc_lib.py),
# on the main thread and on two Python threads.  Modes (argv[1]):
#   basic     the main thread and two threads, GIL kept (PyDLL) and released
#             (CDLL); prints the expected frames for snapcheck
#   atexit    allocates from an atexit function and from a __del__ run at
#             interpreter shutdown
#   fork      forks; the child allocates and exits
#   daemon    a daemon thread still allocating when the interpreter exits
import atexit
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
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child status", status)
    elif mode == "daemon":
        def spin():
            device.bind()
            while True:
                pyalloc_lib.level3_free(device, level1_entry(device, 1 << 16, True))
                pyalloc_lib.level3_free(device, level1_entry(device, 1 << 16, False))
        threading.Thread(target=spin, daemon=True).start()
        level1_entry(device, 1 << 20, True)
        print("leaving with a daemon thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())

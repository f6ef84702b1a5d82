"""The globals an event reads lie on one page of libmemsnap.so (recorder.h,
MSNAP_HOT_DATA; hot.ld): its section msnap_hot starts a page and is smaller
than one, and the hot path's variables are in it.
usage: hot_page.py LIBMEMSNAP"""
import re
import subprocess
import sys

lib = sys.argv[1]
sec = None
for line in subprocess.run(["readelf", "-SW", lib], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    m = re.search(r"\]\s+msnap_hot\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
    if m:
        sec = int(m.group(1), 16), int(m.group(2), 16)
if not sec:
    sys.exit("FAIL: no section msnap_hot in %s" % lib)
addr, size = sec
errors = []
if addr % 4096:
    errors.append("msnap_hot starts at 0x%x, not on a page" % addr)
dyn = subprocess.run(["nm", "-D", lib], capture_output=True, text=True).stdout
sanitized = "__asan_init" in dyn    # redzones around each global: the page is not promised
if size > 4096 and not sanitized:
    errors.append("msnap_hot is %d bytes: more than a page" % size)
syms = {}
for line in subprocess.run(["nm", "--defined-only", lib], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    f = line.split()
    if len(f) == 3:
        syms[f[2]] = int(f[0], 16)
for name in ("g_cfg", "g_state", "g_queue", "g_queue_mask", "g_queue_head", "g_stacks",
             "g_stamp_tsc", "g_inproc", "g_devices_ready_mask", "torch_action", "py_state", "L",
             "py_runtime", "watch", "caches"):
    a = syms.get(name)
    if a is None or not addr <= a < addr + size:
        errors.append("%s is not in msnap_hot" % name)
for e in errors:
    print("FAIL:", e)
if errors:
    sys.exit(1)
print("msnap_hot: %d bytes at 0x%x, the hot path's globals in it" % (size, addr))

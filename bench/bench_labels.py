#!/usr/bin/env python3
"""bench_labels.py OUT.msnap [STACKS] [DEPTH]

Writes a synthetic snapshot for timing the site labels (analyze/label.c): STACKS
stacks (default 20000) of 8 frames in libc10_cuda (the memory runtime) and
DEPTH (default 50) frames alternating between libtorch_cuda functions (4000
distinct) and Python frames (3000 distinct, a third of them in the user's
files, the rest in site-packages), one allocation per stack.  Then compare
`memsnap summary --top 0` (labels nothing) with `--top 10` (labels every
stack of the file once) under /usr/bin/time; docs/benchmarks.md, "Site
labels"."""
import random
import sys

out = sys.argv[1]
nstacks = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
depth = int(sys.argv[3]) if len(sys.argv) > 3 else 50
random.seed(1)
P = 0x8000000000000000
with open(out, "w") as f:
    f.write('{"type":"header","format":"memsnap","version":"1.1","pid":1,"host":"t",'
            '"argv":["python3","x.py"],"clock":"CLOCK_MONOTONIC","t0_unix_ns":0,'
            '"mode":"stream","settings":{},"devices":[]}\n')
    f.write('{"type":"module","base":"0x100000","size":1048576,'
            '"path":"/v/site-packages/torch/lib/libc10_cuda.so","build_id":""}\n')
    f.write('{"type":"module","base":"0x200000","size":16777216,'
            '"path":"/v/site-packages/torch/lib/libtorch_cuda.so","build_id":""}\n')
    for i in range(4000):
        f.write('{"type":"sym","ip":"%#x","fn":"at::native::op%d(c10::ArrayRef<long>)",'
                '"file":"aten/x%d.cpp","line":%d}\n' % (0x200000 + i * 16, i, i % 50, i))
    for i in range(3000):
        fl = "/v/site-packages/transformers/m%d.py" % (i % 40) if i % 3 else "/home/u/train%d.py" % (i % 7)
        f.write('{"type":"sym","ip":"%#x","fn":"F%d.forward","file":"%s","line":%d,"off":2}\n'
                % (P + i * 16, i, fl, i))
    for s in range(1, nstacks + 1):
        ips = [0x100000 + random.randrange(1000) * 16 for _ in range(8)]
        for d in range(depth):
            ips.append(0x200000 + random.randrange(4000) * 16 if d % 2 else P + random.randrange(3000) * 16)
        f.write('{"type":"stack","id":%d,"ips":[%s]}\n' % (s, ",".join('"%#x"' % x for x in ips)))
    for s in range(1, nstacks + 1):
        f.write('{"a":"alloc","t":%d,"p":%d,"n":%d,"k":%d}\n' % (s, s * 4096 * 1024, 4096 + s, s))

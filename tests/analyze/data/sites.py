#!/usr/bin/env python3
"""Writes sites-a.msnap and sites-b.msnap, the site-label fixtures of
tests/analyze/test_site_labels.c: hand-made stacks of a PyTorch program (Python
frames with bit 63 set, named by their sym lines; site-packages, the
standard library, the interpreter, libtorch, cuBLASLt) and of a C++ server
with memsnap's allocator linked statically (ms_* and its static helper),
with compiler suffixes.  B allocates three times A's bytes at every site.
Run it from this folder; the outputs are checked in."""
import json

hdr = {"type": "header", "format": "memsnap", "version": "1.1", "pid": 7, "host": "t",
       "argv": ["python3", "generate.py"], "clock": "CLOCK_MONOTONIC", "t0_unix_ns": 0,
       "mode": "stream", "settings": {}, "devices": []}
mods = [(0x100000, "/usr/local/cuda/lib64/libcudart.so.12"),
        (0x200000, "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so"),
        (0x300000, "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"),
        (0x400000, "/usr/bin/python3.12"),
        (0x500000, "/usr/lib/x86_64-linux-gnu/libcublasLt.so.12"),
        (0x600000, "/opt/app/bin/server"),
        (0x700000, "/lib/x86_64-linux-gnu/libc.so.6")]
syms = {}


def sym(ip, fn, file="", line=0, off=0):
    syms[ip] = (fn, file, line, off)


P = 0x8000000000000000
SP = "/venv/lib/python3.12/site-packages/"
# the memory runtime and the native libraries
sym(0x100010, "cudaMalloc")
sym(0x200010, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)", "c10/cuda/CUDACachingAllocator.cpp", 1200)
sym(0x200020, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)", "c10/cuda/CUDACachingAllocator.cpp", 1250)
sym(0x300010, "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)", "aten/src/ATen/native/cuda/EmptyTensor.cpp", 42)
sym(0x300020, "at::cuda::blas::gemm_internal_cublas<float, float>(char, char, long, long, long)", "aten/src/ATen/cuda/CUDABlas.cpp", 300)
sym(0x500010, "cublasLtMatmul")
sym(0x400010, "_PyEval_EvalFrameDefault", "Python/ceval.c", 4000)
sym(0x400020, "PyObject_Call", "Objects/call.c", 300)
sym(0x400030, "Py_RunMain", "Modules/main.c", 700)
sym(0x400040, "Py_BytesMain", "Modules/main.c", 750)
sym(0x700010, "__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", 58)
sym(0x700020, "__libc_start_main@@GLIBC_2.34", "../csu/libc-start.c", 360)
sym(0x400050, "_start")
# Python frames
sym(P + 0x10, "Linear.forward", SP + "torch/nn/modules/linear.py", 125, 40)
sym(P + 0x20, "Module._call_impl", SP + "torch/nn/modules/module.py", 1750, 60)
sym(P + 0x30, "Attention.forward", "/home/u/proj/model.py", 42, 12)
sym(P + 0x40, "<module>", "/home/u/proj/generate.py", 10, 4)
sym(P + 0x50, "deepcopy", "/usr/lib/python3.12/copy.py", 136, 8)
sym(P + 0x60, "_call_with_frames_removed", "<frozen importlib._bootstrap>", 488, 2)
sym(P + 0x70, "Cache.grow", "/home/u/proj/cache.py", 7, 2)
sym(P + 0x80, "LlamaAttention.forward", SP + "transformers/models/llama/modeling_llama.py", 175, 30)
sym(P + 0x90, "LlamaForCausalLM.forward", SP + "transformers/models/llama/modeling_llama.py", 400, 30)
sym(P + 0xa0, "generate", "/home/u/proj/generate.py", 20, 6)
sym(P + 0xb0, "<module>", "/usr/lib/python3.12/runpy.py", 88, 2)
# the C++ server with memsnap's allocator linked in
sym(0x600010, "ms_fixed_grow", "/src/memsnap/allocator/segments.c", 134)
sym(0x600020, "slow_path", "/src/memsnap/allocator/alloc.c", 204)
sym(0x600030, "memsnap_alloc_malloc", "/src/memsnap/allocator/alloc.c", 299)
sym(0x600031, "memsnap_alloc_malloc", "/src/memsnap/allocator/alloc.c", 305)
sym(0x600040, "kv_reserve.constprop.0", "/opt/app/src/server.c", 88)
sym(0x600050, "serve.isra.0", "/opt/app/src/server.c", 500)
sym(0x600060, "warmup.part.0", "/opt/app/src/server.c", 450)
sym(0x600070, "main", "/opt/app/src/main.c", 10)
sym(0x600080, "load_weights.cold", "/opt/app/src/server.c", 300)
sym(0x600090, "scratch.lto_priv.0", "/opt/app/src/server.c", 320)
sym(0x6000a0, "_start")
pyentry = [0x400030, 0x400040, 0x700010, 0x700020, 0x400050]
cppentry = [0x600070, 0x700010, 0x700020, 0x6000a0]
torch = [0x100010, 0x200010, 0x300010, 0x400020]
stacks = {
    1: torch + [P + 0x10, 0x400010, P + 0x20, 0x400010, P + 0x30, P + 0x40] + pyentry,  # the user's model.py
    2: [0x100010, 0x200020, 0x300010, 0x400020, P + 0x50, P + 0x60, P + 0x70, P + 0x40] + pyentry,  # stdlib skipped
    3: torch + [P + 0x80, 0x400010, P + 0x20, P + 0xb0] + pyentry,  # only libraries: site-packages fallback
    4: [0x100010, 0x200010, 0x500010, 0x300020, 0x400020] + pyentry,  # only native libraries
    5: [0x600010, 0x600020, 0x600030, 0x600040, 0x600050] + cppentry,  # static allocator: a segment
    6: [0x600031, 0x600040, 0x600050] + cppentry,  # its blocks: the same site
    7: [0x600031, 0x600040, 0x600060] + cppentry,  # the same function, another caller
    8: [0x600031, 0x600080] + cppentry,  # .cold
    9: torch + [P + 0x90, P + 0x20, P + 0xa0, P + 0x40] + pyentry,  # generate.py over transformers
    10: [0x600031, 0x600090] + cppentry,  # .lto_priv
    11: torch + [P + 0x80, P + 0x20, P + 0xa0, P + 0x40] + pyentry,  # 9's user frame, another library path
}


def out(path, scale):
    with open(path, "w") as f:
        f.write(json.dumps(hdr, separators=(',', ':')) + "\n")
        for b, p in mods:
            f.write('{"type":"module","base":"%#x","size":65536,"path":"%s","build_id":""}\n' % (b, p))
        for i, ips in stacks.items():
            f.write('{"type":"stack","id":%d,"ips":[%s]}\n' % (i, ",".join('"%#x"' % x for x in ips)))
        for ip, (fn, file, line, off) in syms.items():
            f.write(json.dumps({"type": "sym", "ip": "%#x" % ip, "fn": fn, "file": file,
                                "line": line, "off": off}, separators=(',', ':')) + "\n")
        t = 10
        for i in stacks:
            f.write('{"a":"alloc","t":%d,"p":%d,"n":%d,"k":%d}\n' % (t, 0x10000000 * i, (i * scale) << 20, i))
            t += 1


out("sites-a.msnap", 1)
out("sites-b.msnap", 3)

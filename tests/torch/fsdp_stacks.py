# PyTorch's trace entries as FSDP2 (fully_shard) makes them, without
# PyTorch: Python functions named and filed as FSDP2's own
# (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, ...), written
# into a site-packages tree under DIR, call the recorder's
# memsnap_trace_torch2 through ctypes.PyDLL (the GIL kept), as PyTorch's
# allocator would from under them.  Two training steps of one FSDP unit:
#
#   init      fully_shard -> FSDPParam._init_sharded_param: the shard P, 8 MiB
#   forward   pre-forward unshard: the all-gather's flat output AG (16 MiB),
#             the unsharded parameter U copied out of it (16 MiB), AG freed;
#             LlamaMLP.forward's activation X (4 MiB, sequence number Q);
#             U freed after the forward (reshard)
#   backward  on a thread of its own, as PyTorch's autograd engine runs it:
#             the pre-backward hook (node AddBackward0) unshards again
#             (AG, U); MmBackward0 (node, Q) makes a 4 MiB gradient G from
#             autograd's entry frame and frees it, X freed; the
#             post-backward (PyNode) reduce-scatters: RS_in 16 MiB, RS_out
#             8 MiB (the shard's .grad from now on), U freed; RS_in freed
#             at the end (the root's final callback)
#   optimizer AdamW._init_group: state S 16 MiB once; a temporary T 8 MiB;
#             zero_grad frees RS_out
#
# usage: fsdp_stacks.py DIR     (prints "fsdp_stacks done")
import ctypes
import os
import sys
import threading
import importlib.util

MiB = 1 << 20
ALLOC, FREE_COMPLETED = 0, 2     # memsnap.h MEMSNAP_TORCH_ALLOC, _FREE_COMPLETED

lib = ctypes.PyDLL(None)
trace2 = lib.memsnap_trace_torch2
trace2.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                   ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32]
trace2.restype = None
node_id = lib.memsnap_torch_node_id
node_id.argtypes = [ctypes.c_char_p]
node_id.restype = ctypes.c_uint32

SITE = os.path.join(sys.argv[1], "lib", "python3", "site-packages")
FS = "torch/distributed/fsdp/_fully_shard/"
# Each file's source: every function that allocates calls TRACE itself, as
# FSDP's torch.empty would (a C call: no Python frame of its own).
SOURCES = {
    FS + "_fully_shard.py": '''
def fully_shard(n):
    return M["param"].FSDPParam(n)
''',
    FS + "_fsdp_param.py": '''
class FSDPParam:
    def __init__(self, n):
        self._init_sharded_param(n)

    def _init_sharded_param(self, n):
        TRACE(ALLOC, 0, A["P"], 8 * MiB, 0, 0, 8 * MiB, 0, 0)

    def alloc_all_gather_outputs(self, node):
        TRACE(ALLOC, 0, A["U"], 16 * MiB, 0, 0, 16 * MiB, 0, node)
''',
    FS + "_fsdp_collectives.py": '''
class DefaultAllocMixin:
    def allocate(self, key, size, node):
        TRACE(ALLOC, 0, A[key], size, 0, 0, size, 0, node)


def foreach_all_gather(node):
    DefaultAllocMixin().allocate("AG", 16 * MiB, node)


def foreach_all_gather_copy_out(param, node):
    param.alloc_all_gather_outputs(node)
    TRACE(FREE_COMPLETED, 0, A["AG"], 0, 0, 0, 0, 0, 0)


def foreach_reduce(node):
    DefaultAllocMixin().allocate("RS_in", 16 * MiB, node)
    DefaultAllocMixin().allocate("RS_out", 8 * MiB, node)
''',
    FS + "_fsdp_param_group.py": '''
class FSDPParamGroup:
    def __init__(self, param):
        self.param = param

    def unshard(self, node=0):
        M["collectives"].foreach_all_gather(node)
        M["collectives"].foreach_all_gather_copy_out(self.param, node)

    def pre_forward(self):
        self.unshard()

    def reshard(self):
        TRACE(FREE_COMPLETED, 0, A["U"], 0, 0, 0, 0, 0, 0)

    def post_backward(self, node):
        M["collectives"].foreach_reduce(node)
        self.reshard()
''',
    FS + "_fsdp_state.py": '''
class FSDPState:
    def __init__(self, group):
        self.group = group

    def _pre_forward(self):
        self.group.pre_forward()

    def _pre_backward(self, node):
        self.group.unshard(node)

    def _root_post_backward_final_callback(self):
        TRACE(FREE_COMPLETED, 0, A["RS_in"], 0, 0, 0, 0, 0, 0)


class RegisterPostBackwardFunction:
    @staticmethod
    def backward(state, node):
        state.group.post_backward(node)
''',
    "torch/nn/modules/module.py": '''
class Module:
    def _call_impl(self, state, mlp):
        state._pre_forward()
        mlp.forward()
        state.group.reshard()
''',
    "transformers/models/llama/modeling_llama.py": '''
class LlamaMLP:
    def forward(self):
        TRACE(ALLOC, 0, A["X"], 4 * MiB, 0, 0, 4 * MiB, Q, 0)
''',
    "torch/autograd/graph.py": '''
def _engine_run_backward(node):
    TRACE(ALLOC, 0, A["G"], 4 * MiB, 0, 0, 4 * MiB, Q, node)
    TRACE(FREE_COMPLETED, 0, A["G"], 0, 0, 0, 0, 0, 0)
''',
    "torch/optim/adamw.py": '''
class AdamW:
    def __init__(self):
        self.state = False

    def _init_group(self):
        if not self.state:
            TRACE(ALLOC, 0, A["S"], 16 * MiB, 0, 0, 16 * MiB, 0, 0)
            self.state = True

    def step(self):
        self._init_group()
        TRACE(ALLOC, 0, A["T"], 8 * MiB, 0, 0, 8 * MiB, 0, 0)
        TRACE(FREE_COMPLETED, 0, A["T"], 0, 0, 0, 0, 0, 0)

    def zero_grad(self):
        TRACE(FREE_COMPLETED, 0, A["RS_out"], 0, 0, 0, 0, 0, 0)
''',
}
ADDR = {k: 0x7f0000000000 + i * 64 * MiB
        for i, k in enumerate(("P", "AG", "U", "X", "G", "RS_in", "RS_out", "S", "T"))}
Q = 1001                      # the forward op's node's sequence number + 1
M = {}
shared = {"TRACE": trace2, "ALLOC": ALLOC, "FREE_COMPLETED": FREE_COMPLETED, "MiB": MiB,
          "A": ADDR, "Q": Q, "M": M}
for rel, src in SOURCES.items():
    path = os.path.join(SITE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("fake_" + rel.replace("/", "_")[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    mod.__dict__.update(shared)
    spec.loader.exec_module(mod)
    M[os.path.basename(rel)[:-3].replace("_fsdp_", "").lstrip("_")] = mod

param = M["fully_shard"].fully_shard(1)
state = M["state"].FSDPState(M["param_group"].FSDPParamGroup(param))
module, mlp, opt = M["module"].Module(), M["modeling_llama"].LlamaMLP(), M["adamw"].AdamW()
add_node, mm_node, py_node = node_id(b"AddBackward0"), node_id(b"MmBackward0"), node_id(b"PyNode")


def backward():
    """The autograd engine's thread: the hooks and nodes it runs."""
    state._pre_backward(add_node)
    M["graph"]._engine_run_backward(mm_node)
    trace2(FREE_COMPLETED, 0, ADDR["X"], 0, 0, 0, 0, 0, 0)
    M["state"].RegisterPostBackwardFunction.backward(state, py_node)
    state._root_post_backward_final_callback()


def train_step():
    module._call_impl(state, mlp)
    t = threading.Thread(target=backward)
    t.start()
    t.join()
    opt.step()
    opt.zero_grad()


for _ in range(2):
    train_step()
print("fsdp_stacks done")

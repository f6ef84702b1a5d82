"""torch.distributed of the fake (tests/gpu/fake/torch/__init__.py): no
communication at all; init_process_group maps the communicator's buffers
through H34_FAKE_NCCL (tests/recorder/fake_nccl.c, built as libnccl.so.2)
and, where NCCL_DEBUG_FILE is set, logs them as NCCL's ALLOC subsystem
does ("Cuda Alloc Size N")."""
import ctypes
import os
import socket

from .. import _fake_alloc

NCCL_BYTES = 32 << 20
_group = {}


def is_available():
    return True


def is_nccl_available():
    return True


def init_process_group(backend="nccl", device_id=None, **kw):
    _fake_alloc.init()
    lib = ctypes.CDLL(os.environ["H34_FAKE_NCCL"])
    lib.fake_nccl_comm_init.restype = ctypes.c_uint64
    lib.fake_nccl_comm_init.argtypes = [ctypes.c_size_t]
    p = lib.fake_nccl_comm_init(NCCL_BYTES)
    if not p:
        raise RuntimeError("fake NCCL: no buffers")
    log = os.environ.get("NCCL_DEBUG_FILE")
    if log:
        log = log.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
        with open(log, "a") as f:
            f.write("fake:%d NCCL INFO transport.cc:1 Cuda Alloc Size %d pointer 0x%x\n"
                    % (os.getpid(), NCCL_BYTES, p))
    _group["on"] = True


def get_rank():
    return int(os.environ.get("RANK", "0"))


def get_world_size():
    return int(os.environ.get("WORLD_SIZE", "1"))


def barrier(*a, **kw):
    pass


def all_reduce(t, *a, **kw):
    pass


def destroy_process_group(*a):
    _group.clear()


class _C10d:
    @staticmethod
    def _abort_process_group(group=None):
        _group.clear()


distributed_c10d = _C10d()

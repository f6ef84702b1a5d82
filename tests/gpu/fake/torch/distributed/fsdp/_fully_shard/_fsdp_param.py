import torch

from torch.distributed import get_world_size


class FSDPParam:
    def __init__(self, param):
        self.numel = param.numel
        self._init_sharded_param(param)
        self.unsharded = None
        self.unsharded_grad = None

    def _init_sharded_param(self, param):
        self.sharded = torch.empty((self.numel // get_world_size(),), dtype="float32")
        param.free()

    def alloc_all_gather_outputs(self):
        self.unsharded = torch.empty((self.numel,), dtype="bfloat16")

    def free_unsharded(self):
        if self.unsharded:
            self.unsharded.free()
            self.unsharded = None

import torch


class DefaultAllocMixin:
    def allocate(self, numel, dtype, node=None):
        return torch.empty((numel,), dtype=dtype, node=node)


def foreach_all_gather(params, node=None):
    return DefaultAllocMixin().allocate(sum(p.numel for p in params), "bfloat16", node)


def foreach_all_gather_copy_out(buf, params):
    for p in params:
        p.alloc_all_gather_outputs()
    buf.free()


def foreach_reduce(params, node):
    world = torch.distributed.get_world_size()
    n = sum(p.numel for p in params)
    rs_in = DefaultAllocMixin().allocate(n, "float32", node)
    rs_out = DefaultAllocMixin().allocate(n // world, "float32", node)
    for p in params:
        if p.unsharded_grad:
            p.unsharded_grad.free()
            p.unsharded_grad = None
    return rs_in, rs_out

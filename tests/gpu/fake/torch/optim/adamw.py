import torch


class AdamW:
    """AdamW of the fake: two state tensors per parameter at the first step
    (the parameters' own size: a shard under FSDP), a temporary per step;
    zero_grad frees the gradients the model keeps."""

    def __init__(self, params, lr=1e-3):
        self.params = list(params)
        self.state = None
        self.model = getattr(self.params[0], "owner", None) if self.params else None

    def _init_group(self):
        if self.state is None:
            self.state = [torch.empty((p.numel * 2,), dtype="float32") for p in self.params]

    def step(self):
        self._init_group()
        tmp = torch.empty((max(p.numel for p in self.params),), dtype="float32")
        tmp.free()

    def zero_grad(self, set_to_none=True):
        for owner in {id(p.owner): p.owner for p in self.params if getattr(p, "owner", None)}.values():
            owner.free_grads()

"""LlamaForCausalLM of the fake: one flat parameter per decoder layer (4 H^2
+ 3 H I elements), the embedding and the head (V H each); the forward keeps
8 x batch x seq x H float32 per layer for the backward and the logits
(batch x seq x V float32); FSDP's hooks (fully_shard's _fsdp) around each
layer and the model; the backward in reverse on this thread, as autograd's
nodes would allocate: a temporary per layer (MmBackward0), the unsharded
gradients (AccumulateGrad), FSDP's post-backward (PyNode)."""
import torch
from torch.nn import Parameter


class LlamaConfig:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class _Owned:
    def own_params(self):
        return self.params

    def own_params_replace(self, new):
        for p in new:
            p.owner = self.root
        self.params = new


class LlamaDecoderLayer(_Owned):
    def __init__(self, cfg, root):
        h, i = cfg.hidden_size, cfg.intermediate_size
        self.cfg, self.root, self._fsdp = cfg, root, None
        self.params = [Parameter(4 * h * h + 3 * h * i)]
        self.saved = []

    def forward(self, b, s):
        self.saved.append(torch.empty((8 * b * s * self.cfg.hidden_size,), dtype="float32"))

    def backward(self, b, s):
        if self._fsdp:
            self._fsdp._pre_backward()
        g = torch.empty((b * s * self.cfg.hidden_size,), dtype="float32", node="MmBackward0")
        g.free()
        for p in (self._fsdp.group.params if self._fsdp else self.params):
            grad = torch.empty((p.numel,), dtype="bfloat16" if self._fsdp else "float32",
                               node="AccumulateGrad")
            if self._fsdp:
                p.unsharded_grad = grad
            else:
                self.root.grads.append(grad)
        for t in self.saved:
            t.free()
        self.saved = []
        if self._fsdp:
            from torch.distributed.fsdp._fully_shard._fsdp_state import RegisterPostBackwardFunction
            RegisterPostBackwardFunction.backward(self._fsdp)


class LlamaModel:
    def __init__(self, cfg, root):
        self.layers = [LlamaDecoderLayer(cfg, root) for _ in range(cfg.num_hidden_layers)]


class LlamaForCausalLM(_Owned):
    def __init__(self, cfg):
        self.cfg, self.root, self._fsdp = cfg, self, None
        self.model = LlamaModel(cfg, self)
        self.params = [Parameter(cfg.vocab_size * cfg.hidden_size) for _ in range(2)]
        self.grads = []

    def train(self):
        return self

    def parameters(self):
        ps = []
        for m in [self] + self.model.layers:
            for p in m.params:
                p.owner = self
                ps.append(p)
        return ps

    def free_grads(self):
        for g in self.grads:
            g.free()
        self.grads = []
        for m in [self] + self.model.layers:
            if m._fsdp:
                for g in m._fsdp.group.grads:
                    g.free()
                m._fsdp.group.grads = []

    def __call__(self, **kw):
        return self.forward(**kw)

    def forward(self, input_ids=None, labels=None):
        b, s = input_ids.shape
        if self._fsdp:
            self._fsdp._pre_forward()
        for layer in self.model.layers:
            if layer._fsdp:
                layer._fsdp._pre_forward()
            layer.forward(b, s)
            if layer._fsdp:
                layer._fsdp._post_forward()
        logits = torch.empty((b * s * self.cfg.vocab_size,), dtype="float32")

        def backward():
            for layer in reversed(self.model.layers):
                layer.backward(b, s)
            logits.free()
            if self._fsdp:
                self._fsdp.group.unshard("AddBackward0") if not self._fsdp.group.params[0].unsharded else None
                for p in self._fsdp.group.params:
                    p.unsharded_grad = torch.empty((p.numel,), dtype="bfloat16", node="AccumulateGrad")
                from torch.distributed.fsdp._fully_shard._fsdp_state import RegisterPostBackwardFunction
                RegisterPostBackwardFunction.backward(self._fsdp)
                for layer in [self] + self.model.layers:
                    if layer._fsdp:
                        layer._fsdp._root_post_backward_final_callback()
            else:
                for p in self.params:
                    self.grads.append(torch.empty((p.numel,), dtype="float32", node="AccumulateGrad"))
            input_ids.free()

        class Out:
            loss = torch.Tensor((1,), grad_fn=backward)
        return Out()

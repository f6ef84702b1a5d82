from . import _fsdp_collectives as coll


class FSDPParamGroup:
    def __init__(self, params):
        self.params = params
        self.rs_state = None
        self.grads = []

    def unshard(self, node=None):
        buf = coll.foreach_all_gather(self.params, node)
        self.wait_for_unshard(buf)

    def wait_for_unshard(self, buf):
        coll.foreach_all_gather_copy_out(buf, self.params)

    def reshard(self):
        for p in self.params:
            p.free_unsharded()

    def post_backward(self, node):
        if self.rs_state:
            self.rs_state.free()
        self.rs_state, grad = coll.foreach_reduce(self.params, node)
        self.grads.append(grad)
        self.reshard()

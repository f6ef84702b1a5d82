
class FSDPState:
    def __init__(self, group):
        self.group = group

    def _pre_forward(self):
        self.group.unshard()

    def _post_forward(self, reshard=True):
        if reshard:
            self.group.reshard()

    def _pre_backward(self):
        if not self.group.params[0].unsharded:
            self.group.unshard("AddBackward0")

    def _root_post_backward_final_callback(self):
        if self.group.rs_state:
            self.group.rs_state.free()
            self.group.rs_state = None


class RegisterPostBackwardFunction:
    @staticmethod
    def backward(state):
        state.group.post_backward("PyNode")

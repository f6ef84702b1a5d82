"""fully_shard of the fake: FSDP2's memory, in FSDP2's files and functions
(the names memsnap's category rules go by), on the fake's blocks."""
from ._fsdp_param import FSDPParam
from ._fsdp_param_group import FSDPParamGroup
from ._fsdp_state import FSDPState


class MixedPrecisionPolicy:
    def __init__(self, param_dtype=None, reduce_dtype=None):
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype


def fully_shard(module, mp_policy=None, **kw):
    """module: the fake model or one of its layers; its own parameters
    (not its children's) become one FSDP group."""
    params = [FSDPParam(p) for p in module.own_params()]
    module.own_params_replace([p.sharded for p in params])
    module._fsdp = FSDPState(FSDPParamGroup(params))
    return module

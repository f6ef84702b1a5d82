import torch


def Parameter(numel):
    """A parameter of numel float32 elements (made here, as nn.Parameter's
    memory is: memsnap's rules call it parameters)."""
    return torch.empty((numel,), dtype="float32")

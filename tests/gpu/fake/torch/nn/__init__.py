from . import parallel, parameter   # noqa: F401
from .parameter import Parameter    # noqa: F401

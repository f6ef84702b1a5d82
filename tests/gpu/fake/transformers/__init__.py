"""transformers of the fake (tests/gpu/fake/torch/__init__.py)."""
from .models.llama.modeling_llama import LlamaConfig, LlamaForCausalLM   # noqa: F401

__version__ = "5.17.0+fake"

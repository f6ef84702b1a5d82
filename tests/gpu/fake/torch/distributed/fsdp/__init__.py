from ._fully_shard._fully_shard import MixedPrecisionPolicy, fully_shard   # noqa: F401

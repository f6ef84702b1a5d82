"""The pytest plugin's markers with PyTorch on a GPU (python_api_gpu.sh runs
`python3 -m pytest` on this file with the installed wheel's plugin and
checks each outcome and message; docs/python.md).  Not a test of memsnap's
own suite: several of these fail on purpose.

    test_under_limit       passes: 512 MiB under a 1 GiB limit
    test_over_limit        fails: 1.5 GiB over 1 GiB, naming make_big's line
    test_leak              fails: 64 MiB kept in a global list, naming leak_it
    test_warm_cache        passes: cuBLAS's workspace and a lazily built
                           cache come at the warm-up run, not the recorded one
"""
import pytest
import torch

KEPT = []
CACHE = {}


def make_big():
    return torch.empty(3 << 29, dtype=torch.uint8, device="cuda")                # BIG


def leak_it():
    KEPT.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))         # LEAK


def cached_table():
    if "t" not in CACHE:
        CACHE["t"] = torch.randn(1024, 1024, device="cuda")
    return CACHE["t"]


@pytest.mark.limit_gpu_memory("1 GiB")
def test_under_limit():
    x = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    del x


@pytest.mark.limit_gpu_memory("1 GiB")
def test_over_limit():
    x = make_big()
    del x


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leak():
    leak_it()


@pytest.mark.limit_gpu_leaks("1 MiB", warmup=1)
def test_warm_cache():
    a = torch.randn(512, 512, device="cuda")
    b = a @ cached_table()[:512, :512]
    torch.cuda.synchronize()
    del a, b

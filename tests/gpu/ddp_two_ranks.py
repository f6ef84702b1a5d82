"""Two ranks under torchrun: an NCCL all-reduce of 2 GiB and a few DDP
training steps of a small model, for memsnap's several-GPU checks
(tests/gpu/ddp_two_ranks.sh records it with one snapshot per rank).

Rank 1 holds an extra 1 GiB tensor for the whole run, made before anything
else so the caching allocator cannot serve it from memory it already has:
its peak is 1 GiB above rank 0's, which `memsnap summary` must say.
"""
import os

# Shared machine rule: no NVLink SHARP / multicast objects.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    extra = torch.empty(256 * 1024 * 1024, device=dev) if rank == 1 else None  # 1 GiB
    dist.init_process_group("nccl", device_id=dev)

    x = torch.ones(512 * 1024 * 1024, device=dev)  # 2 GiB of float32
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert x[0].item() == world and x[-1].item() == world, "all-reduce result"
    del x

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096)
    ).to(dev)
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    for _ in range(5):
        inp = torch.randn(256, 4096, device=dev)
        loss = ddp(inp).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    del extra
    print(f"ddp ok rank {rank}", flush=True)


if __name__ == "__main__":
    main()

"""Uneven data: one rank runs one step fewer and leaves while the others wait in the last step.

The last rank's shard has one batch fewer, so it finishes the epoch, saves a checkpoint and
exits; the other ranks' all_reduce of the last step never completes ("Connection closed by
peer" on gloo, or a timeout while the peer lives; under NCCL a watchdog timeout). Fixed: agree
on the step count (``all_reduce(MIN)`` of the local batch counts, i.e. drop the remainder), or
use ``torch.distributed.algorithms.Join`` with a Joinable model.
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "skipped-collective"
TITLE = "one rank runs one step fewer (uneven data)"
TEACHES = "every rank must issue the same number of collectives; agree on the step count"

STEPS = 4


def batches(rank: int, world_size: int) -> int:
    return STEPS - 1 if rank == world_size - 1 else STEPS


def broken(rank, world_size, ctx):
    import time

    n = batches(rank, world_size)
    ctx.log(f"rank {rank}: {n} batches in this epoch")
    ctx.train_steps(1, n, total=n)
    ctx.log(f"rank {rank}: epoch done after {n} steps, saving checkpoint")
    time.sleep(0.3)


def fixed(rank, world_size, ctx):
    import torch
    import torch.distributed as dist

    n = batches(rank, world_size)
    agreed = torch.tensor([n], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    steps = int(agreed.item())
    ctx.log(f"rank {rank}: {n} batches, running {steps} steps (agreed minimum)")
    ctx.train_steps(1, steps, total=steps)
    ctx.log(f"rank {rank}: epoch done after {steps} steps, saving checkpoint")


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    return planted("rank-desync", "all_reduce", [world_size - 1], debug=debug, trace=STEPS, fr=STEPS, detail=STEPS - 1)

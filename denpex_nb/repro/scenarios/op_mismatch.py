"""Rank 0 broadcasts in a rank-0-only branch while the other ranks all_reduce.

A config refresh (``if rank == 0: dist.broadcast(cfg, src=0)``) written as if broadcast were
a rank-0 operation: the other ranks go straight to the next step's all_reduce. Same shape, same
dtype, different collective: on gloo both sides hang until the timeout, and the error names
neither op nor rank. Fixed: every rank calls broadcast (it is a collective, not a send).
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "op-mismatch"
TITLE = "rank-0-only broadcast while the others all_reduce"
TEACHES = "every collective must be called by every rank of the group, in the same order"

WARMUP_STEPS = 2
CULPRIT = 0
NUMEL = 16  # same as the training all_reduce, so only the op differs


def broken(rank, world_size, ctx):
    import torch.distributed as dist

    ctx.train_steps(1, WARMUP_STEPS, total=WARMUP_STEPS + 1, numel=NUMEL)
    if rank == CULPRIT:
        cfg = ctx.tensor(NUMEL, fill=0.5)
        ctx.log(f"rank {rank}: refreshing config, broadcasting {NUMEL} values")
        dist.broadcast(cfg, src=CULPRIT)
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1, numel=NUMEL)


def fixed(rank, world_size, ctx):
    import torch.distributed as dist

    ctx.train_steps(1, WARMUP_STEPS, total=WARMUP_STEPS + 1, numel=NUMEL)
    cfg = ctx.tensor(NUMEL, fill=0.5 if rank == CULPRIT else 0.0)
    ctx.log(f"rank {rank}: refreshing config (broadcast from rank {CULPRIT})")
    dist.broadcast(cfg, src=CULPRIT)
    assert float(cfg.sum()) == 0.5 * NUMEL
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1, numel=NUMEL)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    seq = WARMUP_STEPS + 1
    return planted(
        "op-mismatch", "broadcast", [CULPRIT], debug=debug, trace=seq, fr=seq, detail=seq - 1, peer_op="all_reduce"
    )

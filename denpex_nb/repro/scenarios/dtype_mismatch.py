"""all_reduce where one rank's tensor is float64 and the others' float32 (same shape).

A metric computed through numpy (float64) on one code path is reduced together with float32
metrics. On gloo a float32 rank (the one whose receive buffer is too small) aborts with
"16 vs 8" bytes, which names neither the rank nor the dtype; with the same byte count (f64[4] vs
f32[8]) it would silently return garbage. Fixed: cast to the agreed dtype before the collective
(and :func:`denpex_nb.fixes.check_same_shapes` as a pre-flight check while debugging).
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "dtype-mismatch"
TITLE = "all_reduce with float64 on one rank and float32 on the others"
TEACHES = "collectives compare bytes, not dtypes: cast to one dtype before reducing"

WARMUP_STEPS = 2
CULPRIT = 1


def _metrics(ctx):
    import torch

    dtype = torch.float64 if ctx.rank == CULPRIT else torch.float32
    metrics = ctx.tensor(8, dtype=dtype)
    ctx.log(f"rank {ctx.rank}: eval metrics {str(dtype).replace('torch.', '')}{list(metrics.shape)}")
    return metrics


def broken(rank, world_size, ctx):
    import torch.distributed as dist

    ctx.train_steps(1, WARMUP_STEPS)
    metrics = _metrics(ctx)
    dist.all_reduce(metrics)
    ctx.log(f"rank {rank} metrics sum={float(metrics.sum()):.3f}")
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def fixed(rank, world_size, ctx):
    import torch
    import torch.distributed as dist

    from ...fixes import check_same_shapes

    ctx.train_steps(1, WARMUP_STEPS)
    metrics = _metrics(ctx).to(torch.float32)
    check_same_shapes(metrics)
    dist.all_reduce(metrics)
    ctx.log(f"rank {rank} metrics sum={float(metrics.sum()):.3f}")
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    seq = WARMUP_STEPS + 1
    return planted(
        "dtype-mismatch",
        "all_reduce",
        [CULPRIT],
        debug=debug,
        trace=seq,
        fr=seq,
        detail=seq - 1,
        dtypes={str(r): ["float64" if r == CULPRIT else "float32"] for r in range(world_size)},
    )

"""all_gather of per-rank detections whose counts differ (rank 0 [5, 4], rank 1 [3, 4], ...).

Broken: every rank sizes the output list like its own tensor and calls ``dist.all_gather``.
On gloo the rank with the too-small receive buffer aborts (SIGABRT, "40 vs 24"), the others are
reset, closed, or return corrupt data silently; under NCCL it hangs until the watchdog fires.
Fixed: :func:`denpex_nb.fixes.all_gather_uneven` gathers the lengths, pads to the longest,
gathers, and trims.
"""

from __future__ import annotations

from ..registry import no_failure, odd_ranks, planted

ID = "allgather-shape-mismatch"
TITLE = "all_gather of per-rank detections with different counts"
TEACHES = (
    "all_gather needs the same shape on every rank; data-dependent sizes need a size "
    "exchange, padding and trimming (fixes.all_gather_uneven)"
)

WARMUP_STEPS = 2
_COUNTS = (5, 3, 5, 4)


def count(rank: int) -> int:
    """Detections on ``rank``: 5, 3, 5, 4, 5, 3, ..."""
    return _COUNTS[rank % len(_COUNTS)]


def _detections(ctx):
    boxes = ctx.tensor(count(ctx.rank), 4)
    ctx.log(f"eval rank {ctx.rank}: {boxes.shape[0]} detections, boxes shape {list(boxes.shape)}")
    return boxes


def broken(rank, world_size, ctx):
    import torch
    import torch.distributed as dist

    ctx.train_steps(1, WARMUP_STEPS)
    boxes = _detections(ctx)
    gathered = [torch.empty_like(boxes) for _ in range(world_size)]
    dist.all_gather(gathered, boxes)
    ctx.log(
        f"rank {rank} gathered {sum(g.shape[0] for g in gathered)} boxes, sums="
        f"{[round(float(g.sum()), 2) for g in gathered]}"
    )
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def fixed(rank, world_size, ctx):
    from ...fixes import all_gather_uneven

    ctx.train_steps(1, WARMUP_STEPS)
    boxes = _detections(ctx)
    gathered = all_gather_uneven(boxes)
    shapes = [list(g.shape) for g in gathered]
    assert shapes == [[count(r), 4] for r in range(world_size)], shapes
    ctx.log(f"rank {rank} gathered {sum(g.shape[0] for g in gathered)} boxes, shapes={shapes}")
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    seq = WARMUP_STEPS + 1
    return planted(
        "shape-mismatch",
        "all_gather",
        odd_ranks(count(r) for r in range(world_size)),
        debug=debug,
        trace=seq,
        fr=seq,
        detail=seq - 1,
        shapes={str(r): [[count(r), 4]] for r in range(world_size)},
    )

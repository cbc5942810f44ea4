"""all_reduce of per-rank sequences whose lengths differ (rank 0 [8, 4], rank 1 [6, 4], ...).

Broken: on gloo the short rank silently returns wrong values and moves on; the long rank waits
for bytes that never come and times out (or is closed when the peer exits). Under NCCL the
counts are never checked: garbage or a hang. Fixed: :func:`denpex_nb.fixes.all_reduce_padded`
agrees on the longest length with ``all_reduce(MAX)``, pads, reduces.
"""

from __future__ import annotations

from ..registry import no_failure, odd_ranks, planted

ID = "allreduce-shape-mismatch"
TITLE = "all_reduce of variable-length sequences"
TEACHES = (
    "all_reduce needs the same numel on every rank; gloo may not even notice and return "
    "wrong values; agree on the max length first (fixes.all_reduce_padded)"
)

WARMUP_STEPS = 2
_LENGTHS = (8, 6, 8, 5)


def length(rank: int) -> int:
    return _LENGTHS[rank % len(_LENGTHS)]


def _sequence(ctx):
    seq = ctx.tensor(length(ctx.rank), 4)
    ctx.log(f"rank {ctx.rank}: sequence length {seq.shape[0]}, hidden shape {list(seq.shape)}")
    return seq


def broken(rank, world_size, ctx):
    import torch.distributed as dist

    ctx.train_steps(1, WARMUP_STEPS)
    hidden = _sequence(ctx)
    dist.all_reduce(hidden)
    ctx.log(f"rank {rank} reduced hidden sum={float(hidden.sum()):.3f}")
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def fixed(rank, world_size, ctx):
    from ...fixes import all_reduce_padded

    ctx.train_steps(1, WARMUP_STEPS)
    hidden = _sequence(ctx)
    reduced = all_reduce_padded(hidden)
    longest = max(length(r) for r in range(world_size))
    assert list(reduced.shape) == [longest, 4], list(reduced.shape)
    ctx.log(f"rank {rank} reduced padded hidden shape {list(reduced.shape)} sum={float(reduced.sum()):.3f}")
    ctx.train_steps(WARMUP_STEPS + 1, WARMUP_STEPS + 1)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    seq = WARMUP_STEPS + 1
    return planted(
        "shape-mismatch",
        "all_reduce",
        odd_ranks(length(r) for r in range(world_size)),
        debug=debug,
        trace=seq,
        fr=seq,
        detail=seq - 1,
        shapes={str(r): [[length(r), 4]] for r in range(world_size)},
    )

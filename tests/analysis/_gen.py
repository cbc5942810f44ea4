"""Generators for the property tests (issue #15): frames of events, errors and rank states at 1 to
1,024 ranks, with the hostile shapes the fuzzers found (rank numbers up to 2**31 - 1, rows without a
size, duplicate rows, counters past 2**53).

Rows are built as plain dicts (``row``, ``error``) and turned into an Incident by
``tests.analysis._frames.incident``; every time is given explicitly so a counter of 2**62 never
becomes a timestamp.
"""

from __future__ import annotations

import math
import os

import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ._frames import T0

#: ``DENPEX_PROPERTY_EXAMPLES=N`` multiplies every property's examples for a deeper run (the suite
#: keeps the default 1: seconds per module)
SCALE = max(1, int(os.environ.get("DENPEX_PROPERTY_EXAMPLES", "1") or 1))
#: one profile for every property of the analysis: fixed examples (CI reproducible), no deadline (a
#: shared 2-core machine), and few enough examples that the whole module stays within seconds
SETTINGS = settings(
    max_examples=20 * SCALE,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

TOP_RANK = 2**31 - 1
#: group sizes: mostly small, up to 1,024
worlds = st.one_of(st.integers(1, 8), st.integers(9, 64), st.sampled_from([255, 256, 1000, 1024]))
#: counters: small ones, around 2**53 (where float64 stops being exact), and near 2**63
counters = st.one_of(
    st.integers(1, 10_000),
    st.integers(2**53 - 3, 2**53 + 3),
    st.integers(2**62, 2**63 - 2),
)
#: input shapes ranks may hold (two pairs with equal element counts in another shape)
SHAPES = [(8,), (4, 2), (2, 4), (6,), (16,), (3, 4)]
shapes = st.sampled_from(SHAPES)


def numbering(world: int, mode: str) -> list[int]:
    """The rank numbers of a group of ``world``: 0..world-1, or the top of Int32 (a subgroup of
    global ranks ending at 2**31 - 1)."""
    if mode == "top":
        return list(range(TOP_RANK - world + 1, TOP_RANK + 1))
    return list(range(world))


numberings = st.sampled_from(["dense", "top"])


def row(
    rank,
    seq,
    *,
    op="all_reduce",
    shape=(8,),
    out=None,
    dtype="float32",
    kind="trace",
    state="completed",
    pg="0",
    world_size=None,
    t=0.0,
    line=1,
    sized=True,
):
    """One events row; ``sized=False`` is a record without any size (a watchdog-only view)."""
    n = math.prod(shape) if sized and shape is not None else None
    o = out if out is not None else shape
    return dict(
        rank=rank,
        pg=pg,
        seq=seq,
        seq_kind=kind,
        op=op,
        in_shapes=(tuple(shape),) if sized and shape is not None else None,
        out_shapes=(tuple(o),) if sized and o is not None else None,
        numel_in=n,
        numel_out=math.prod(o) if sized and o is not None else None,
        dtype=dtype,
        state=state,
        world_size=world_size,
        t_wall=pd.Timestamp(T0 + t, unit="s", tz="UTC"),
        source=kind,
        file=f"rank{rank}.{kind}",
        line=line,
    )


def error(rank, kind, message, *, t=None, op=None, seq=None, seq_kind=None, pg=None, related=None, line=1):
    return dict(
        rank=rank,
        kind=kind,
        message=message,
        related_ranks=related,
        signal=None,
        op=op,
        seq=seq,
        seq_kind=seq_kind,
        pg=pg,
        t_wall=None if t is None else pd.Timestamp(T0 + t, unit="s", tz="UTC"),
        source="test",
        file=f"rank{rank}.log",
        line=line,
    )


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
TIMEOUT = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)"

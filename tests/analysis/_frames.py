"""Builders for hand-made events/errors frames (the diagnose tests' main input)."""

from __future__ import annotations

import math

import pandas as pd

from denpex_nb.incident import Incident, coerce

T0 = 1_764_454_060.0


def ev(
    rank,
    seq,
    op="all_reduce",
    shape=(8,),
    dtype="float32",
    kind="trace",
    state="completed",
    t=None,
    out_shape=None,
    world_size=None,
    pg="0",
    file=None,
    numel_in=None,
    numel_out=None,
):
    """One events row. ``shape=None`` leaves shapes unknown (e.g. a watchdog line with only numel)."""
    n = math.prod(shape) if shape is not None else numel_in
    out = out_shape if out_shape is not None else shape
    return dict(
        rank=rank,
        pg=pg,
        pg_desc="default_pg",
        seq=seq,
        seq_kind=kind,
        op=op,
        in_shapes=None if shape is None else (tuple(shape),),
        out_shapes=None if out is None else (tuple(out),),
        numel_in=n,
        numel_out=numel_out if numel_out is not None else (math.prod(out) if out is not None else n),
        dtype=dtype,
        state=state,
        world_size=world_size,
        t_wall=pd.Timestamp(T0 + (t if t is not None else seq), unit="s", tz="UTC"),
        source=kind,
        file=file or f"rank{rank}.{kind}",
        line=seq,
    )


def err(rank, kind, message, t=None, related=None, signal=None, op=None, seq=None, seq_kind=None, file=None, line=1):
    return dict(
        rank=rank,
        kind=kind,
        message=message,
        related_ranks=related,
        signal=signal,
        op=op,
        seq=seq,
        seq_kind=seq_kind,
        t_wall=None if t is None else pd.Timestamp(T0 + t, unit="s", tz="UTC"),
        source="test",
        file=file or f"rank{rank}.log",
        line=line,
    )


def incident(events=(), errors=(), ranks=()):
    return Incident(
        events=coerce("events", list(events)), errors=coerce("errors", list(errors)), ranks=coerce("ranks", list(ranks))
    )


def steps(world, n, **kw):
    """n ordinary all_reduce steps on every rank."""
    return [ev(r, s, **kw) for r in range(world) for s in range(1, n + 1)]

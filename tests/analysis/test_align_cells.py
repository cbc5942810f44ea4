"""align's two ways to its cells (tables over the rows as they are, or one sort) give the same alignment.

A user relies on ``diagnose`` naming the same divergences, ranks, seqs and rows whichever way
``align`` took: the table way is taken for loads of dumps (one row per rank and collective), the
sorted way for everything else. Were they to differ, a Flight Recorder incident would be told a
different culprit (or none) than the same evidence in another shape. Each frame here is aligned
both ways and every field of the result is compared.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import pandas as pd
import pytest

from denpex_nb.analysis.align import align
from denpex_nb.analysis.align_cells import cells_by_table
from denpex_nb.incident import coerce

from ._frames import ev

_ALIGN = sys.modules["denpex_nb.analysis.align"]


def _both(frame: pd.DataFrame, monkeypatch) -> tuple:
    table = align(frame)
    with monkeypatch.context() as m:
        m.setattr(_ALIGN, "cells_by_table", lambda *a: None)
        by_sort = align(frame)
    return _facts(table), _facts(by_sort)


def _facts(al) -> tuple:
    return (
        al.members,
        al.n_events,
        al.n_cells,
        al.missing_dumps,
        [
            (d.kind, d.pg, d.seq_kind, d.seq, d.missing, d.present, d.lag, d.t_wall, repr(d.records))
            for d in al.divergences
        ],
    )


def _dump_like(rng: random.Random, ranks: int, seqs: int, variant: str) -> list[dict]:
    """Rows rank by rank, seqs ascending (as dumps load), with one kind of trouble in them."""
    rows = []
    order = list(range(ranks))
    if variant == "shuffled":
        rng.shuffle(order)
    for r in order:
        last = seqs - (1 + r % 3 if variant == "laggards" and r % 4 == 1 else 0)
        for q in range(1, last + 1):
            op, shape, dtype = "all_reduce", (8,), "float32"
            if variant == "op" and (r, q) == (ranks - 1, seqs // 2):
                op = "broadcast"
            if variant == "shape" and (r, q) == (0, 2):
                shape = (2, 4)
            if variant == "size" and (r, q) == (1, 3):
                shape = (6,)
            if variant == "dtype" and (r, q) in ((2, 1), (3, 1)):
                dtype = None if r == 2 else "bfloat16"
            if variant == "gather" and q == 2:
                op = "all_gather_into_tensor"
            rows.append(
                ev(
                    r + (10 if variant == "sparse ranks" else 0),
                    q * (7 if variant == "sparse seqs" else 1),
                    op=op,
                    shape=shape,
                    dtype=dtype,
                    kind="fr",
                    world_size=ranks + (2 if variant == "absent dumps" else 0),
                    pg="0" if variant != "two groups" or q % 2 else "1",
                    state="completed" if q < last else "scheduled",
                )
            )
    if variant == "duplicates":
        rows += rows[:3]
    if variant == "seq-major":  # rows not rank by rank: one row per (cell, rank) is counted instead
        rows.sort(key=lambda row: (row["seq"], -row["rank"]))
    return rows


VARIANTS = [
    "plain",
    "shuffled",
    "laggards",
    "op",
    "shape",
    "size",
    "dtype",
    "gather",
    "sparse ranks",
    "sparse seqs",
    "absent dumps",
    "two groups",
    "duplicates",
    "seq-major",
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_tables_and_sort_align_the_same(variant, monkeypatch):
    frame = coerce("events", _dump_like(random.Random(variant), 6, 9, variant))
    by_table, by_sort = _both(frame, monkeypatch)
    assert by_table == by_sort


@pytest.mark.parametrize("seed", range(12))
def test_random_rows_align_the_same(seed, monkeypatch):
    rng = random.Random(seed)
    rows = [
        ev(
            rng.randrange(5),
            rng.randrange(1, 6),
            op=rng.choice(["all_reduce", "broadcast", "all_gather_into_tensor", "barrier"]),
            shape=rng.choice([(8,), (4, 2), (6,), None]),
            dtype=rng.choice(["float32", "bfloat16", None]),
            kind=rng.choice(["fr", "trace"]),
            state=rng.choice(["completed", "scheduled", "started"]),
            world_size=rng.choice([None, 5, 8]),
        )
        for _ in range(rng.randrange(1, 40))
    ]
    by_table, by_sort = _both(coerce("events", rows), monkeypatch)
    assert by_table == by_sort


def test_tables_are_taken_for_rows_as_dumps_load_them():
    """The fast way is the one a load of dumps takes (else it would only be tested, never used)."""
    n_ranks, n_seqs = 4, 5
    g = np.zeros(n_ranks * n_seqs, dtype=np.int64)
    s = np.tile(np.arange(1, n_seqs + 1), n_ranks)
    r = np.repeat(np.arange(n_ranks), n_seqs)
    codes = np.zeros(len(g), dtype=np.int64)
    flags = np.zeros(len(g), dtype=bool)
    size = np.full(len(g), 8.0)
    assert cells_by_table(g, s, r, codes, size, codes, codes, flags, flags) is not None
    twice = np.r_[r, r[:1]]
    assert (
        cells_by_table(
            np.r_[g, 0],
            np.r_[s, 1],
            twice,
            np.r_[codes, 0],
            np.r_[size, 8.0],
            np.r_[codes, 0],
            np.r_[codes, 0],
            np.r_[flags, False],
            np.r_[flags, False],
        )
        is None
    )

"""Pins decisions of ``align`` that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned: when a divergence happened, and that cells of different process groups
stay apart however large the counters."""

from __future__ import annotations

import pandas as pd

from denpex_nb.analysis.align import align
from denpex_nb.incident import coerce
from tests.analysis._frames import T0, ev


def test_a_divergence_is_dated_by_the_first_rank_that_reached_it():
    """Rank 1 issued the mismatched collective at t=3, rank 0 at t=10: the divergence is at t=3."""
    evs = [ev(0, 1, t=1), ev(1, 1, t=1), ev(0, 2, op="all_reduce", t=10), ev(1, 2, op="broadcast", t=3)]
    (d,) = align(coerce("events", evs)).divergences
    assert d.kind == "op" and d.seq == 2
    assert d.t_wall == pd.Timestamp(T0 + 3, unit="s", tz="UTC")


def test_forty_groups_with_counters_near_two_to_the_58_stay_forty_groups():
    """40 process groups of 2 ranks, counters 1 and 2**58 (a corrupt or crafted dump): every
    (group, seq) cell is compared on its own, and the op mismatch in the last group is found there.
    The packed (group, seq, rank) key must not be used when the group bits do not fit."""
    big = 1 << 58
    pgs = [f"pg{i:02d}" for i in range(40)]
    evs = []
    for pg in pgs:
        for r in (0, 1):
            evs.append(ev(r, 1, pg=pg, t=1))
            evs.append(ev(r, big, pg=pg, op="broadcast" if (pg == pgs[-1] and r == 1) else "all_reduce", t=2))
    a = align(coerce("events", evs))
    assert a.n_cells == 80
    assert [(d.kind, d.pg, d.seq) for d in a.divergences] == [("op", "pg39", big)]


def test_of_a_ranks_duplicate_records_the_completed_one_speaks_for_it():
    """Rank 1 has two records of seq 2 (scheduled, then completed), rank 0 one scheduled record of a
    different op: the divergence shows rank 1 completed and rank 0 not."""
    evs = [
        ev(0, 2, op="broadcast", state="scheduled"),
        ev(1, 2, state="scheduled"),
        ev(1, 2, state="completed"),
    ]
    (d,) = align(coerce("events", evs)).divergences
    rows = d.rows.set_index("rank")
    assert rows.loc[1, "state"] == "completed" and bool(rows.loc[1, "_done"]) is True
    assert rows.loc[0, "state"] == "scheduled" and bool(rows.loc[0, "_done"]) is False

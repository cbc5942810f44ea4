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


def test_a_rank_numbered_minus_one_shares_the_cell_of_the_others():
    """Ranks -1, 0 and 1 (the schema admits a negative rank) at one collective where rank 1 called
    broadcast: the op mismatch is found with all three present, not three cells of one rank each
    (a packed key would OR the -1 over every bit of the group and seq)."""
    evs = [ev(-1, 5), ev(0, 5), ev(1, 5, op="broadcast")]
    a = align(coerce("events", evs))
    assert a.n_cells == 1
    assert [(d.kind, d.seq, sorted(d.present)) for d in a.divergences] == [("op", 5, [-1, 0, 1])]


def test_no_events_frame_at_all_aligns_nothing():
    """A caller with no events frame (None) is told there is nothing to align, not an
    AttributeError (which diagnose would turn into a 'rule align failed' note)."""
    a = align(None)
    assert (a.divergences, a.members, a.n_events, a.n_cells, a.missing_dumps) == ([], {}, 0, 0, {})


def test_a_group_lists_only_its_own_ranks_and_its_absent_ones_are_named():
    """Ranks 0 and 1 trace pg 0 of a world of 4, ranks 2 and 3 only pg 1: pg 0's members are 0 and
    1, and the user is told pg 0 has no trace evidence from ranks 2 and 3 (ranks of another group
    are not members of this one)."""
    evs = [ev(r, s, world_size=4) for r in (0, 1) for s in (1, 2)]
    evs += [ev(r, s, pg="1") for r in (2, 3) for s in (1, 2)]
    a = align(coerce("events", evs))
    assert a.members == {("0", "trace"): [0, 1], ("1", "trace"): [2, 3]}
    assert a.missing_dumps == {("0", "trace"): [2, 3]}
    assert a.divergences == []


def test_a_shape_mismatch_among_4096_rows_is_found():
    """2,048 ranks, two all_reduces: at the second, rank 7 passed (4, 2) where the others passed
    (2, 4). Past 4,096 rows the input shapes are coded by object identity first: the mismatch is
    still a shape divergence naming all 2,048 ranks."""
    world = 2048
    evs = [ev(r, 1, shape=(2, 4)) for r in range(world)]
    evs += [ev(r, 2, shape=(4, 2) if r == 7 else (2, 4)) for r in range(world)]
    a = align(coerce("events", evs))
    assert [(d.kind, d.seq, len(d.present)) for d in a.divergences] == [("shape", 2, world)]


def test_a_stated_world_size_of_zero_is_no_size_to_check_an_all_gather_against():
    """Four ranks' all_gather with out = 4 x in and world_size 0 (a record that states no real
    size): nothing is wrong; reading 0 as the group size would call every rank's output wrong."""
    evs = [ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(32,), world_size=0) for r in range(4)]
    assert align(coerce("events", evs)).divergences == []


def test_a_rank_numbered_minus_one_is_not_missing_from_a_later_cell():
    """Ranks -1, 0 and 1 agree at seqs 1 and 2: no divergence. The fallback key (cell x width +
    rank offset) must span every rank from the lowest: with a width of max + 1 rank -1's seq 2
    took rank 1's seq 1 key and was de-duplicated away ("rank -1 missing at seq 2")."""
    evs = [ev(r, s) for s in (1, 2) for r in (-1, 0, 1)]
    a = align(coerce("events", evs))
    assert a.n_cells == 2 and a.divergences == []
    assert a.members == {("0", "trace"): [-1, 0, 1]}
    # rank 1 called broadcast at seq 1: the mismatch names all three ranks present
    evs[2] = ev(1, 1, op="broadcast")
    (d,) = align(coerce("events", evs)).divergences
    assert (d.kind, d.seq, sorted(d.present)) == ("op", 1, [-1, 0, 1])


def test_a_sized_record_speaks_for_a_rank_before_a_completed_one_without_a_size():
    """Rank 1 has two records of seq 3: first a completed one that states no size, then a scheduled
    one of 6 elements (the others: 8). The size mismatch is found: a record with a size beats one
    that only says it completed (else rank 1's 6 would be hidden and no mismatch reported)."""
    rows = [ev(r, s) for r in range(3) for s in (1, 2)] + [ev(r, 3) for r in (0, 2)]
    rows += [ev(1, 3, shape=None, numel_in=None, state="completed"), ev(1, 3, shape=(6,), state="scheduled")]
    (d,) = align(coerce("events", rows)).divergences
    assert (d.kind, d.seq) == ("size", 3)
    rows1 = d.rows.set_index("rank")
    assert int(rows1.loc[1, "numel_in"]) == 6 and bool(rows1.loc[1, "_done"]) is True


def test_a_divergence_is_dated_by_its_earliest_time_when_times_are_python_objects():
    """An events frame whose t_wall is an object column (times as Timestamps, one unknown): the op
    mismatch at seq 2 is dated by the earliest known time (t=3), not the latest, and the unknown
    time is skipped rather than failing the alignment."""
    evs = [ev(0, 1, t=1), ev(1, 1, t=1), ev(2, 1, t=1)]
    evs += [ev(0, 2, op="all_reduce", t=10), ev(1, 2, op="broadcast", t=3), ev(2, 2, t=7)]
    frame = coerce("events", evs)
    times = frame["t_wall"].astype(object)
    times.iloc[5] = None
    (d,) = align(frame.assign(t_wall=times)).divergences
    assert (d.kind, d.seq) == ("op", 2)
    assert d.t_wall == pd.Timestamp(T0 + 3, unit="s", tz="UTC")


def test_past_the_packed_key_divergences_come_in_group_then_seq_order():
    """Counters 1 and 2**58 in 40 groups (past the 60 bits of the packed key) with the later seq's
    records read first: the divergences are listed by group, then seq, as the packed key lists them,
    not in the order the records were read."""
    big = 1 << 58
    evs = []
    for pg in ("pg1", "pg0"):
        for s, ops in ((big, ("all_reduce", "broadcast")), (1, ("all_gather", "reduce"))):
            evs += [ev(r, s, pg=pg, op=ops[r], t=1) for r in (0, 1)]
    evs += [ev(r, 5, pg=f"x{i:02d}", t=1) for i in range(38) for r in (0, 1)]
    a = align(coerce("events", evs))
    assert [(d.pg, d.seq) for d in a.divergences] == [("pg0", 1), ("pg0", big), ("pg1", 1), ("pg1", big)]


def test_at_the_edge_of_the_packed_key_divergences_come_in_seq_order():
    """Ranks 0 and 1 (1 bit), counters 1 and 2**58 (58 bits), one group (1 bit): the key fills its 60
    bits exactly and is still the packed one; the later seq's records read first, the op mismatches
    are listed seq 1 first (the order does not depend on which key was used)."""
    big = 1 << 58
    evs = [ev(0, big, op="all_reduce", t=2), ev(1, big, op="broadcast", t=2)]
    evs += [ev(0, 1, op="all_gather"), ev(1, 1, op="reduce")]
    a = align(coerce("events", evs))
    assert [(d.kind, d.seq) for d in a.divergences] == [("op", 1), ("op", big)]

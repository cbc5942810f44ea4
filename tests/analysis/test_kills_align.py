"""Pins decisions of ``align`` that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned: when a divergence happened, and that cells of different process groups
stay apart however large the counters."""

from __future__ import annotations

import numpy as np
import pandas as pd

from denpex_nb.analysis import diagnose
from denpex_nb.analysis.align import _nan_codes, _pack_fields, _unpack_fields, align
from denpex_nb.incident import coerce
from tests.analysis._frames import T0, ev, incident, steps


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


def test_a_world_whose_every_rank_was_read_has_no_absent_ranks():
    """World size 2 stated, ranks 0 and 1 both read: no (pg, counter) is listed as missing dumps,
    so the user gets no 'no trace evidence from ... (world size says they exist)' note."""
    a = align(coerce("events", [ev(r, 1, world_size=2) for r in range(2)]))
    assert a.missing_dumps == {}
    dg = diagnose(incident([ev(r, s, world_size=2) for r in range(2) for s in (1, 2)]))
    assert not any("world size says they exist" in n for n in dg.notes)


def test_a_pg_column_with_4097_categories_one_in_use_keeps_the_packed_order():
    """A categorical pg column carrying 4,097 categories of which one is used (rows filtered out of
    a bigger frame), counters 1 and 2**58, the later seq's records first: the op mismatches are
    listed seq 1 first, as when the column holds only its used category."""
    big = 1 << 58
    evs = [ev(0, big, op="all_reduce", t=2), ev(1, big, op="broadcast", t=2)]
    evs += [ev(0, 1, op="all_gather"), ev(1, 1, op="reduce")]
    frame = coerce("events", evs)
    unused = [f"x{i}" for i in range(4096)]  # before the used one: its code would be 4096 (13 bits)
    frame["pg"] = pd.Categorical(frame["pg"].astype(str), categories=[*unused, "0"])
    a = align(frame)
    assert [(d.kind, d.pg, d.seq) for d in a.divergences] == [("op", "0", 1), ("op", "0", big)]


def test_an_all_gather_of_empty_tensors_is_not_a_size_violation():
    """Three ranks' all_gather of 0 elements into 0 (no world size stated): nothing is wrong (0 is 0
    times any group size); a 0 / 0 ratio must not read as 'not a whole number'."""
    evs = [ev(r, 1, op="all_gather_into_tensor", shape=(0,), out_shape=(0,)) for r in range(3)]
    assert align(coerce("events", evs)).divergences == []


def test_a_divergence_without_a_time_column_has_no_time():
    """An events frame without a t_wall column: the op mismatch is found, with no time (None), not
    an error."""
    evs = [ev(0, 1), ev(1, 1, op="broadcast")]
    (d,) = align(coerce("events", evs).drop(columns=["t_wall"])).divergences
    assert (d.kind, d.seq, d.t_wall) == ("op", 1, None)


def test_a_ranks_unsized_duplicate_does_not_cost_the_majority_its_size():
    """Seq 3: rank 0 has its 8-element record and a scheduled duplicate without a size, rank 1 passed
    6 elements, rank 2 8. The mismatch names rank 1 (8 on two of three ranks): each rank is one row
    of the cell, so rank 0 speaks with its sized record, never with the duplicate."""
    rows = [ev(r, s) for r in range(3) for s in (1, 2)]
    rows += [ev(0, 3), ev(0, 3, shape=None, numel_in=None, state="scheduled"), ev(1, 3, shape=(6,)), ev(2, 3)]
    (d,) = align(coerce("events", rows)).divergences
    assert (d.kind, d.seq, sorted(d.rows["rank"].astype(int))) == ("size", 3, [0, 1, 2])
    dg = diagnose(incident(rows))
    assert (dg.verdict, dg.culprit_ranks) == ("shape-mismatch", [1])


def test_a_group_whose_records_state_two_sizes_is_as_large_as_the_larger():
    """Ranks 0 and 1 read, one record of the group says world size 2, another 4: the group has 4
    ranks (none has fewer than a record says), and ranks 2 and 3 are named as giving no evidence."""
    a = align(coerce("events", [ev(0, 1, world_size=4), ev(1, 1, world_size=2)]))
    assert a.missing_dumps == {("0", "trace"): [2, 3]}


def test_watchdog_lines_of_a_group_nobody_named_are_no_record_of_who_passed_a_seq():
    """Watchdog timeout lines only, the process group not printed (old PyTorch): ranks 0-2 time out
    at SeqNums 96117 and 96125, rank 3 at 64088 (the counters of different groups, mixed in one
    unnamed group). No rank's lines span seq 64089, so nobody is counted as having passed it: no
    'missing' divergence, and the user is told the timeout is undetermined, not that rank 3 fell
    behind (the wild case pytorch-118369 is labelled timeout-undetermined)."""

    def line(r, s):
        return ev(r, s, kind="work", pg=None, shape=None, numel_in=16, state="timed_out", t=100)

    rows = [line(r, s) for r in range(3) for s in (96117, 96125)] + [line(3, 64088)]
    assert align(coerce("events", rows)).divergences == []
    dg = diagnose(incident(rows))
    assert (dg.verdict, dg.culprit_ranks) == ("timeout-undetermined", [])


def test_a_barriers_element_counts_are_never_compared():
    """Rank 0's barrier record states 1 element, rank 1's 0 (the tensor a backend synchronises with
    is its own, not the caller's): no divergence, and the user is not told of a size mismatch."""
    evs = [ev(0, 1, op="barrier", shape=(1,)), ev(1, 1, op="barrier", shape=(0,))]
    assert align(coerce("events", evs)).divergences == []
    rows = steps(2, 2) + [ev(r, 3, op="barrier", shape=(r,)) for r in (0, 1)]
    assert diagnose(incident(rows)).verdict == "no-failure"


def test_a_coalesced_batchs_totals_are_never_compared():
    """A coalesced batch (a Flight Recorder 'coalesced' entry: several collectives or sends/receives
    at once) of 24 elements on rank 0 and 8 on rank 1: batches legitimately differ per rank, so the
    user is not told of a size mismatch."""
    evs = [ev(0, 1, op="coalesced", shape=(24,)), ev(1, 1, op="coalesced", shape=(8,))]
    assert align(coerce("events", evs)).divergences == []


def test_an_op_no_line_named_has_no_size_to_compare():
    """Two ranks' records whose op field was cut ('unknown') state 16 and 64 elements: which size
    rule applies (in, out, or none) is unknown, so the user is not told of a size mismatch."""
    evs = [ev(0, 1, op="unknown", shape=(16,)), ev(1, 1, op="unknown", shape=(64,))]
    assert align(coerce("events", evs)).divergences == []


def test_a_rank_whose_record_states_no_dtype_has_no_other_dtype():
    """Ranks 0 and 1 state float32 for their all_reduce, rank 2's record states no dtype (a line
    that does not print it): no dtype divergence, and the user is not told of a dtype mismatch."""
    evs = [ev(0, 1), ev(1, 1), ev(2, 1, dtype=None)]
    assert align(coerce("events", evs)).divergences == []
    rows = steps(3, 2) + [ev(r, 3, dtype=None if r == 2 else "float32") for r in range(3)]
    assert diagnose(incident(rows)).verdict == "no-failure"


def test_a_lone_ranks_divergences_past_the_packed_key_come_in_seq_order():
    """Rank 0 alone, two process groups (2 bits), counters 1 and 2**58 (58 bits): one bit past the
    packed key's 60. Its all_gathers' output is not the input times the stated group of 4 at both
    seqs, the later seq's record read first: the divergences are listed seq 1 first, as below 60
    bits, not in the order the records were read."""
    big = 1 << 58

    def gather(seq, pg):
        return ev(0, seq, op="all_gather_into_tensor", shape=(8,), out_shape=(8,), world_size=4, pg=pg, t=1)

    evs = [gather(big, "0"), gather(1, "0"), gather(5, "1")]
    a = align(coerce("events", evs))
    assert [(d.kind, d.pg, d.seq) for d in a.divergences] == [
        ("local-size", "0", 1),
        ("local-size", "0", big),
        ("local-size", "1", 5),
    ]


def test_a_rank_whose_records_begin_at_the_seq_compared_is_present_there():
    """Watchdog-style lines: ranks 0-2 logged seqs 1-3, then ranks 0, 1 and 3 timed out at seq 10
    (rank 3's log holds only that line). Rank 2 never reached seq 10, which ranks 0, 1 and 3 issued:
    three of four is a majority, so rank 2 is named; rank 3 (whose first record is seq 10) counts
    as present, and rank 2 (last at seq 3) is never listed among the ranks that issued it."""

    def work(r, s, **kw):
        return ev(r, s, kind="work", shape=None, numel_in=16, **kw)

    rows = [work(r, s) for r in (0, 1, 2) for s in (1, 2, 3)]
    rows += [work(r, 10, state="timed_out", t=100) for r in (0, 1, 3)]
    (d,) = align(coerce("events", rows)).divergences
    assert (d.kind, d.seq, sorted(d.present), d.missing) == ("missing", 10, [0, 1, 3], [2])
    dg = diagnose(incident(rows))
    assert (dg.verdict, dg.culprit_ranks) == ("rank-desync", [2])
    assert "issued by ranks 0, 1, 3)" in dg.first.summary


def test_two_groups_read_alternately_past_the_packed_key_are_two_groups():
    """Ranks 0 and 1 agree at every seq of two process groups whose records alternate (pg a seq 1,
    pg b seq 1, pg a seq 2, ...), counters up to 2**58 (past the packed key): no divergence and each
    group's members are ranks 0 and 1; the groups' seqs are never split into runs that make a rank
    look behind in its own group."""
    big = 1 << 58
    evs = [ev(r, s, pg=pg, t=1) for s in (1, 2, 3, big) for pg in ("a", "b") for r in (0, 1)]
    a = align(coerce("events", evs))
    assert a.divergences == []
    assert a.members == {("a", "trace"): [0, 1], ("b", "trace"): [0, 1]}


def _compare_alike(a: np.ndarray, b: np.ndarray) -> bool:
    """Missing (NaN) at the same rows, and the rest equal where equal and in the same order: all
    align asks of op, dtype and shape codes (min != max, min < max within a cell)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    known = ~np.isnan(a)
    return np.array_equal(np.unique(a[known], return_inverse=True)[1], np.unique(b[known], return_inverse=True)[1])


def test_op_dtype_and_shape_codes_too_wide_to_pack_are_not_packed():
    """2**20 distinct ops, dtypes and shapes (a fuzzer's rows): with the local-size flag their codes
    need 64 bits, more than an int64 holds, so align must take them unpacked. Packed anyway, the
    last op's code wraps: rows of one op could read as two (an op mismatch where there is none)."""
    codes = np.arange((1 << 20) + 1, dtype=np.int64) - 1  # -1: a row without an op, dtype or shape
    assert _pack_fields(codes, codes, codes % 3 == 0, codes) is None


def test_packed_and_unpacked_codes_compare_alike():
    """align reads each row's op, dtype and shape codes from one packed int64, or unpacked where
    they do not fit: both must compare alike, or a dtype mismatch found on one path is missed on
    the other (the first dtype seen, code 0, read as no dtype: float32 against bfloat16 is then no
    mismatch)."""
    rng = np.random.default_rng(0)
    opc, dt, shape = (rng.integers(-1, k, 500) for k in (3, 5, 40))
    bad = rng.random(500) < 0.2
    assert np.isnan(_nan_codes(dt)[dt < 0]).all() and not np.isnan(_nan_codes(dt)[dt >= 0]).any()
    packed = _pack_fields(opc, dt, bad, shape)
    if packed is None:  # not packed: align takes the unpacked codes themselves
        return
    op1, dt1, bad1, shape1 = _unpack_fields(packed[0], *packed[1:])
    assert np.array_equal(bad1, bad) and _compare_alike(op1, opc)
    assert _compare_alike(dt1, _nan_codes(dt)) and _compare_alike(shape1, _nan_codes(shape))


def test_events_without_a_dtype_or_shapes_column_still_show_op_and_size_mismatches():
    """A reader that records no dtype column (or no in_shapes column) at all: ranks that agree give no
    divergence; rank 1's broadcast among all_reduces is an op mismatch, and rank 2's 6 elements among
    8 a size mismatch. A missing column must give every row 'no code' (-1), never a code that breaks
    the packed fields: the user would be told 'no failure' for an op mismatch, or that every
    collective of every rank violated its local size rule."""
    agree = [ev(r, s) for r in range(3) for s in (1, 2)]
    op = agree + [ev(r, 3, op="broadcast" if r == 1 else "all_reduce") for r in range(3)]
    size = agree + [ev(r, 3, shape=(6,) if r == 2 else (8,)) for r in range(3)]
    for column in ("dtype", "in_shapes"):
        assert align(coerce("events", agree).drop(columns=[column])).divergences == []
        got = [(d.kind, d.seq) for d in align(coerce("events", op).drop(columns=[column])).divergences]
        assert got == [("op", 3)]
        got = [(d.kind, d.seq) for d in align(coerce("events", size).drop(columns=[column])).divergences]
        assert got == [("size", 3)]


def test_only_a_timeout_that_names_no_group_is_put_in_the_one_group_named():
    """A watchdog's timeout is followed by the status line that names its group, which a paste may have
    lost: such a row is read in the counter's one named group. A row of any other state that names no
    group (a completed or scheduled record) is not assumed to be there (mutation campaign at 77a9529,
    align.py with_sole_groups: & -> |)."""
    from denpex_nb.analysis.align import with_sole_groups

    evs = [
        ev(0, 5, kind="work", state="timed_out"),
        ev(1, 5, kind="work", state="timed_out"),
        ev(2, 5, kind="work", state="completed", pg=None, op="broadcast"),
        ev(3, 5, kind="work", state="timed_out", pg=None),
    ]
    frame = coerce("events", evs)
    got = with_sole_groups(frame)["pg"].astype(object)
    assert [None if pd.isna(p) else p for p in got] == ["0", "0", None, "0"]
    assert not [d for d in align(frame).divergences if d.kind == "op"]

"""The decisions :func:`denpex_nb.analysis.align.align` makes, each pinned on a small input.

Decisions of ``align`` (each test fails if its decision is inverted):

- same-shape ops: all_reduce, reduce, broadcast, all_gather and reduce_scatter compare the input
  shape across ranks, so the same element count in another shape is a ``shape`` divergence
  (test_same_count_other_shape_is_a_shape_divergence_for_every_same_shape_op); all_to_all is
  not compared by size or shape (test_all_to_all_is_compared_by_op_and_dtype_only).
- the size a rank must agree on: the input count for all_reduce/broadcast/reduce/all_gather,
  the output count for reduce_scatter (test_reduce_scatter_agrees_on_its_output_not_its_input).
- one observation per (cell, rank): of duplicate rows the best is kept (a size before none,
  completed before not), so a duplicate row without a size never hides a size mismatch
  (test_a_duplicate_row_without_size_never_hides_the_sized_one).
- within one rank, all_gather's output is its input times the stated group size (and
  reduce_scatter's input its output times it), checked even when that rank is the only one
  in the cell (test_one_ranks_all_gather_with_the_wrong_output_size_is_a_local_size_divergence);
  without a stated size the ranks seen are a lower bound: out = 4 x in on 3 ranks seen is fine
  (test_without_a_stated_size_the_ranks_seen_are_only_a_lower_bound).
- precedence: op before dtype before size before local size before shape: one cell gives one
  divergence, of the first kind that differs (test_one_cell_gives_one_divergence_op_first).
- counters are never compared across seq kinds or process groups
  (test_cells_of_other_groups_and_counters_are_never_compared).
- a rank whose last seq is below its group's furthest is missing from the next cell; ranks the
  world size names but no record shows are listed only up to MAX_LISTED_RANKS
  (test_a_rank_that_stopped_is_missing_from_the_next_cell); MAX_LISTED_RANKS is 65,536: a world
  of that size still has its absent ranks listed, one rank more does not
  (test_absent_ranks_are_listed_up_to_a_world_of_65536); and only when the ranks seen are
  numbered below the world size (0..w-1): a rank numbered w or more means these are not the
  world's numbers, and nobody is listed
  (test_absent_ranks_are_listed_only_when_the_ranks_are_numbered_below_the_world_size).
"""

from __future__ import annotations

import pytest

from denpex_nb.analysis.align import MAX_LISTED_RANKS, align
from denpex_nb.incident import coerce

from ._frames import ev, steps


def _divs(rows):
    return [(d.kind, d.seq) for d in align(coerce("events", rows)).divergences]


@pytest.mark.parametrize(
    "op, factor",
    [
        ("all_reduce", None),
        ("reduce", None),
        ("broadcast", None),
        ("all_gather", "out"),
        ("all_gather_into_tensor", "out"),
        ("reduce_scatter", "in"),
        ("reduce_scatter_tensor", "in"),
    ],
)
def test_same_count_other_shape_is_a_shape_divergence_for_every_same_shape_op(op, factor):
    """A broadcast of (2, 4) on one rank and (4, 2) on two completes and combines by flat position:
    a shape divergence, never nothing (dropping an op from the same-shape set would say no-failure)."""
    world = 3

    def row(r, shape):
        n = shape[0] * shape[1]
        if factor == "out":  # all_gather: out = in x world (so only the shape differs)
            return ev(r, 1, op=op, shape=shape, out_shape=(world * n,))
        if factor == "in":  # reduce_scatter: the output is what ranks agree on, the input is world x
            return ev(r, 1, op=op, shape=(world * shape[0], shape[1]), out_shape=(n,))
        return ev(r, 1, op=op, shape=shape)

    rows = [row(r, (2, 4) if r == 0 else (4, 2)) for r in range(world)]
    assert _divs(rows) == [("shape", 1)]
    same = [row(r, (4, 2)) for r in range(world)]
    assert _divs(same) == []


def test_all_to_all_is_compared_by_op_and_dtype_only():
    """Uneven all_to_all splits are legitimate: different totals or shapes are no divergence, a
    different dtype still is."""
    rows = [ev(r, 1, op="all_to_all_single", shape=(8 + r, 2)) for r in range(3)]
    assert _divs(rows) == []
    rows = [ev(r, 1, op="all_to_all", shape=(8,), dtype="float16" if r == 1 else "float32") for r in range(3)]
    assert _divs(rows) == [("dtype", 1)]


def test_reduce_scatter_agrees_on_its_output_not_its_input():
    # the same output on every rank with inputs of other sizes is caught by the local rule, the
    # cross-rank size is the output: a different output is a size divergence
    rows = [ev(r, 1, op="reduce_scatter_tensor", shape=(12,), out_shape=(6,) if r == 2 else (4,)) for r in range(3)]
    assert _divs(rows)[0] == ("size", 1)
    ok = [ev(r, 1, op="reduce_scatter_tensor", shape=(12,), out_shape=(4,)) for r in range(3)]
    assert _divs(ok) == []


@pytest.mark.parametrize("late", [False, True], ids=["sizeless-first", "sizeless-last"])
def test_a_duplicate_row_without_size_never_hides_the_sized_one(late):
    """Rank 1 is seen twice at seq 3: once with its (odd) size, once by a line that has no size.
    The sized row is the observation; keeping the worse row would hide the size mismatch."""
    rows = steps(3, 2) + [ev(r, 3) for r in (0, 2)]
    sized = ev(1, 3, shape=(6,))
    sizeless = ev(1, 3, shape=None, numel_in=None, state="scheduled")
    rows += [sized, sizeless] if late else [sizeless, sized]
    assert _divs(rows) == [("size", 3)]


def test_one_ranks_all_gather_with_the_wrong_output_size_is_a_local_size_divergence():
    """A lone rank's record (the others' logs are missing) still shows its own all_gather is wrong:
    out = 2 x in in a group stated to be 4. Requiring two ranks in the cell would miss it."""
    rows = [ev(0, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(16,), world_size=4)]
    assert _divs(rows) == [("local-size", 1)]
    ok = [ev(0, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(32,), world_size=4)]
    assert _divs(ok) == []
    scatter = [ev(0, 1, op="reduce_scatter_tensor", shape=(16,), out_shape=(8,), world_size=4)]
    assert _divs(scatter) == [("local-size", 1)]
    # a group stated to be one rank: its all_gather's output is its input
    alone = [ev(0, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(16,), world_size=1)]
    assert _divs(alone) == [("local-size", 1)]


def test_without_a_stated_size_the_ranks_seen_are_only_a_lower_bound():
    fine = [ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(32,)) for r in range(3)]
    assert _divs(fine) == []  # 3 of 4 ranks seen, out = 4 x in
    short = [ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(16,)) for r in range(3)]
    assert _divs(short) == [("local-size", 1)]  # out = 2 x in, but 3 ranks are seen
    odd = [ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(28,)) for r in range(3)]
    assert _divs(odd) == [("local-size", 1)]  # not a whole multiple
    one = [ev(r, 1, op="all_gather_into_tensor", shape=(1,), out_shape=(2,)) for r in range(3)]
    assert _divs(one) == [("local-size", 1)]  # a one-element input too: out = 2 x in on 3 ranks


def test_one_cell_gives_one_divergence_op_first():
    rows = [
        ev(0, 1, op="broadcast", dtype="float16", shape=(6,)),
        ev(1, 1, op="all_reduce"),
        ev(2, 1, op="all_reduce"),
    ]
    assert _divs(rows) == [("op", 1)]
    rows = [ev(0, 1, dtype="float16", shape=(6,)), ev(1, 1), ev(2, 1)]
    assert _divs(rows) == [("dtype", 1)]
    rows = [ev(0, 1, shape=(6,)), ev(1, 1, shape=(4, 2)), ev(2, 1)]
    assert _divs(rows) == [("size", 1)]


def test_cells_of_other_groups_and_counters_are_never_compared():
    rows = [ev(0, 5, shape=(8,), pg="0"), ev(1, 5, shape=(6,), pg="1")]
    assert _divs(rows) == []
    rows = [ev(0, 5, shape=(8,), kind="trace"), ev(1, 5, shape=(6,), kind="work")]
    assert _divs(rows) == []


def test_a_rank_that_stopped_is_missing_from_the_next_cell():
    al = align(coerce("events", steps(4, 3) + [ev(r, 4) for r in range(3)]))
    (d,) = al.divergences
    assert (d.kind, d.seq, d.missing, sorted(d.present)) == ("missing", 4, [3], [0, 1, 2])
    huge = align(coerce("events", [ev(r, 1, world_size=2**31 - 1) for r in range(2)]))
    assert huge.missing_dumps == {}
    small = align(coerce("events", [ev(r, 1, world_size=3) for r in range(2)]))
    assert small.missing_dumps == {("0", "trace"): [2]}
    # the bound itself is listed, one past it is not
    at = align(coerce("events", [ev(r, 1, world_size=MAX_LISTED_RANKS) for r in range(2)]))
    assert at.missing_dumps[("0", "trace")] == list(range(2, MAX_LISTED_RANKS))
    past = align(coerce("events", [ev(r, 1, world_size=MAX_LISTED_RANKS + 1) for r in range(2)]))
    assert past.missing_dumps == {}


def test_absent_ranks_are_listed_only_when_the_ranks_are_numbered_below_the_world_size():
    """World size 3 stated by ranks 0 and 3: rank 3 cannot be one of 0..2, so the numbers are not
    the world's and no rank is reported without evidence (not 'no trace evidence from ranks 1, 2');
    with ranks 0 and 2, rank 1 is."""
    odd = align(coerce("events", [ev(r, 1, world_size=3) for r in (0, 3)]))
    assert odd.missing_dumps == {}
    fine = align(coerce("events", [ev(r, 1, world_size=3) for r in (0, 2)]))
    assert fine.missing_dumps == {("0", "trace"): [1]}


def test_absent_ranks_are_listed_up_to_a_world_of_65536():
    """A 65,536-rank job (the size of today's largest) with two dumps read: the 65,534 others are
    named as giving no evidence; a world of 65,537 is beyond the listing (said without a list)."""
    at = align(coerce("events", [ev(r, 1, world_size=1 << 16) for r in range(2)]))
    assert len(at.missing_dumps[("0", "trace")]) == (1 << 16) - 2
    past = align(coerce("events", [ev(r, 1, world_size=(1 << 16) + 1) for r in range(2)]))
    assert past.missing_dumps == {}

"""Shape agreement as properties (issue #15): every op whose ranks must agree on shape yields a size
finding for any disagreement, on any number of ranks (1 to 1,024, numbered from 0 or up to 2**31 - 1),
at any counter (past 2**53 too), with duplicate and size-less rows around it."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from denpex_nb import diagnose  # noqa: E402
from denpex_nb.analysis.align import align  # noqa: E402
from denpex_nb.incident import coerce  # noqa: E402

from . import _gen as g  # noqa: E402
from ._frames import incident  # noqa: E402

SIZE_KINDS = {"size", "local-size", "shape"}
PLAIN = ["all_reduce", "reduce", "broadcast"]
GATHER = ["all_gather", "all_gather_into_tensor"]
SCATTER = ["reduce_scatter", "reduce_scatter_tensor"]


@st.composite
def cells(draw, ops):
    """One cell (seq) of one op on a group, after a cell on which every rank agrees.

    Returns (rows, seq, expected divergence kind or None)."""
    op = draw(st.sampled_from(ops))
    world = draw(g.worlds)
    ranks = g.numbering(world, draw(g.numberings))
    seq = draw(g.counters)
    stated = draw(st.one_of(st.none(), st.integers(world, world + 3)))
    base = draw(g.shapes)
    odd = draw(st.dictionaries(st.integers(0, world - 1), g.shapes, max_size=4))
    sizeless = draw(st.sets(st.integers(0, world - 1), max_size=3)) - set(odd)
    dup = draw(st.sets(st.integers(0, world - 1), max_size=3))
    # all_gather / reduce_scatter: the factor each rank's output (input) differs by; the group size
    # when stated, else the ranks seen (a lower bound the local rule accepts)
    factor = stated if stated is not None else world
    bad_local = draw(st.sets(st.integers(0, world - 1), max_size=2)) - sizeless if op in GATHER + SCATTER else set()
    # a wrong factor the evidence can show: any other one against a stated size; without one, a
    # factor below the ranks seen (a larger one may be the true group size)
    top = factor + 2 if stated is not None else factor - 1
    bad_local = bad_local if top >= 0 else set()
    wrong = draw(st.integers(0, top).filter(lambda f: f != factor)) if bad_local else factor

    def cell_row(i, s, shape, sized=True, f=factor, state="completed"):
        kw = dict(op=op, world_size=stated, t=float(i % 97), line=i + 1, sized=sized, state=state)
        if op in GATHER:
            return g.row(ranks[i], s, shape=shape, out=(f * shape[0],) + shape[1:], **kw)
        if op in SCATTER:
            return g.row(ranks[i], s, shape=(f * shape[0],) + shape[1:], out=shape, **kw)
        return g.row(ranks[i], s, shape=shape, **kw)

    rows = [cell_row(i, seq - 1, base) for i in range(world)]
    for i in range(world):
        shape = odd.get(i, base)
        rows.append(cell_row(i, seq, shape, sized=i not in sizeless, f=wrong if i in bad_local else factor))
        if i in dup:  # the same rank seen again at this cell by a line without a size
            rows.append(cell_row(i, seq, shape, sized=False, state="scheduled"))
    compared = {i: odd.get(i, base) for i in range(world) if i not in sizeless}
    if len({sh[0] * (sh[1] if len(sh) > 1 else 1) for sh in compared.values()}) > 1:
        expected = "size"
    elif bad_local:
        expected = "local-size"
    elif len(set(compared.values())) > 1:
        expected = "shape"
    else:
        expected = None
    return rows, seq, expected


def _kinds(rows, seq):
    al = align(coerce("events", rows))
    assert all(d.seq == seq for d in al.divergences), [(d.kind, d.seq) for d in al.divergences]
    return {d.kind for d in al.divergences}


@g.SETTINGS
@given(cells(PLAIN))
def test_all_reduce_reduce_broadcast_disagreement_is_a_size_finding(cell):
    """all_reduce, reduce and broadcast: ranks holding different input sizes or shapes give a size or
    shape divergence at that cell, and agreeing ranks none, whatever rows without a size or duplicates
    surround them."""
    rows, seq, expected = cell
    assert _kinds(rows, seq) == ({expected} if expected else set())


@g.SETTINGS
@given(cells(GATHER))
def test_all_gather_disagreement_or_a_wrong_output_is_a_size_finding(cell):
    """all_gather: different inputs across ranks, or one rank's output that is not its input times the
    group size (stated, else at least the ranks seen), give a size divergence; none otherwise."""
    rows, seq, expected = cell
    assert _kinds(rows, seq) == ({expected} if expected else set())


@g.SETTINGS
@given(cells(SCATTER))
def test_reduce_scatter_disagreement_or_a_wrong_input_is_a_size_finding(cell):
    """reduce_scatter: different outputs across ranks, or one rank's input that is not its output times
    the group size, give a size divergence; none otherwise."""
    rows, seq, expected = cell
    assert _kinds(rows, seq) == ({expected} if expected else set())


@g.SETTINGS
@given(cells(["all_to_all", "all_to_all_single"]))
def test_all_to_all_splits_may_differ(cell):
    """all_to_all: uneven splits are legitimate, so sizes and shapes never give a divergence (op and
    dtype still do)."""
    rows, seq, _ = cell
    assert _kinds(rows, seq) == set()


@g.SETTINGS
@given(cells(PLAIN + GATHER + SCATTER))
def test_a_size_divergence_is_a_shape_mismatch_verdict(cell):
    """End to end: a disagreement in size or shape on a same-shape op is a shape-mismatch finding at
    its seq (never no-failure); agreement leaves the run clean."""
    rows, seq, expected = cell
    d = diagnose(incident(rows))
    if expected:
        assert any(f.class_id == "shape-mismatch" and f.seq == seq for f in d.findings), d.findings
        assert d.verdict != "no-failure"
    else:
        assert d.verdict == "no-failure", d.findings

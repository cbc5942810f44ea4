"""Culprits as properties (issue #15): a culprit is named only for a strict minority of a known (or
lower-bound) group, never on a tie, never when any process's rank is unknown, never across groups;
subgroups never borrow the world's size. Groups of 1 to 1,024 ranks, numbered from 0 or up to
2**31 - 1, at counters past 2**53."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from denpex_nb import diagnose  # noqa: E402
from denpex_nb.analysis.rules import from_progress, strict_minority  # noqa: E402
from denpex_nb.incident import coerce  # noqa: E402

from . import _gen as g  # noqa: E402
from ._frames import incident  # noqa: E402

OPS = ["all_reduce", "broadcast", "all_gather", "reduce", "barrier"]


@g.SETTINGS
@given(
    sig=st.dictionaries(
        st.integers(0, g.TOP_RANK), st.one_of(st.none(), st.sampled_from("abc")), min_size=0, max_size=40
    ),
    group=st.one_of(st.none(), st.integers(0, 80)),
)
def test_strict_minority_names_only_a_strict_minority_of_the_group(sig, group):
    """Culprits are the ranks off a value held by more than half of the group (its size, or the ranks
    with a value when larger) and by more ranks than any other value; otherwise none."""
    culprits, basis = strict_minority(sig, group)
    known = {r: v for r, v in sig.items() if v is not None}
    counts = Counter(known.values()).most_common()
    n = max(group or 0, len(known))
    if culprits:
        top, count = counts[0]
        assert len(counts) < 2 or counts[1][1] < count  # never on a tie
        assert count * 2 > n and len(culprits) * 2 < n
        assert culprits == sorted(r for r, v in known.items() if v != top) and basis == "majority"
    else:
        assert len(counts) < 2 or counts[0][1] == counts[1][1] or counts[0][1] * 2 <= n
        assert basis.startswith("undetermined")


@st.composite
def op_splits(draw):
    """A cell where some ranks call other collectives than the rest, the group size stated on the
    cell's rows, on other rows of the default group, or not at all."""
    world = draw(st.one_of(st.integers(2, 8), st.integers(9, 64), st.sampled_from([256, 1024])))
    ranks = g.numbering(world, draw(g.numberings))
    odd = draw(st.dictionaries(st.integers(0, world - 1), st.sampled_from(OPS[1:]), min_size=1, max_size=world - 1))
    where = draw(st.sampled_from(["cell", "elsewhere", "none"]))
    stated = draw(st.integers(world, world + 6)) if where != "none" else None
    seq = draw(g.counters)
    rows = []
    for i, r in enumerate(ranks):
        ws = stated if where == "cell" else None
        rows.append(g.row(r, seq, op=odd.get(i, "all_reduce"), world_size=ws, t=1.0, line=1))
    if where == "elsewhere":  # a watchdog counter of the default group states the size
        rows += [g.row(r, 7, kind="work", world_size=stated, sized=False, t=0.0) for r in ranks]
    ops = {ranks[i]: odd.get(i, "all_reduce") for i in range(world)}
    return rows, seq, ops, stated


@g.SETTINGS
@given(op_splits())
def test_an_op_split_names_a_culprit_only_for_a_strict_minority_of_the_group(split):
    """At an op mismatch the ranks off the majority's collective are named only when that majority
    holds more than half of the group (at least the stated size, the ranks seen, and, in the default
    group, the highest rank number seen plus one: ranks 0..N-1 all exist there, seen or not) and no
    other collective ties it."""
    rows, seq, ops, stated = split
    d = diagnose(incident(rows))
    f = next(f for f in d.findings if f.class_id == "op-mismatch" and f.seq == seq)
    counts = Counter(ops.values()).most_common()
    assert all(str(r.get("pg")) in ("0", "None") for r in rows)  # the default group
    n = max(stated or 0, len(ops), max(ops) + 1)
    tie = len(counts) > 1 and counts[0][1] == counts[1][1]
    if tie or counts[0][1] * 2 <= n:
        assert list(f.culprit_ranks) == [] and f.culprit_basis.startswith("undetermined")
    else:
        assert list(f.culprit_ranks) == sorted(r for r, op in ops.items() if op != counts[0][0])
        assert len(f.culprit_ranks) * 2 < n


def _coll(rank, op, nranks, host=None, pid=None):
    row = g.row(rank, 5, op=op, kind="nccl_opcount", sized=False, world_size=nranks, pg="0xc0", line=1)
    row.update(state=None, host=host, pid=pid, numel_in=1024, numel_out=1024, file=f"{host}-{rank}-{pid}.log")
    return row


@g.SETTINGS
@given(
    known=st.lists(st.sampled_from(OPS[:2]), min_size=1, max_size=12),
    unknown=st.lists(st.sampled_from(OPS[:2]), min_size=0, max_size=3),
    extra=st.integers(0, 4),
)
def test_no_culprit_while_any_process_is_known_only_by_host_and_pid(known, unknown, extra):
    """NCCL COLL lines: while any process of the communicator is known only by host:pid, no culprit is
    named (that process may be any rank); with every rank known, only a strict minority of it is."""
    nranks = len(known) + len(unknown) + extra
    rows = [_coll(r, op, nranks) for r, op in enumerate(known)]
    rows += [_coll(None, op, nranks, host="node9", pid=4000 + i) for i, op in enumerate(unknown)]
    found = [f for f in diagnose(incident(rows)).findings if f.rule == "nccl-opcounts"]
    if len(set(known + unknown)) < 2:
        assert found == []
        return
    (f,) = found
    if unknown:
        assert list(f.culprit_ranks) == [] and "host:pid" in f.culprit_basis
    else:
        counts = Counter(known).most_common()
        assert not f.culprit_ranks or counts[0][1] * 2 > nranks
        assert len(f.culprit_ranks) * 2 < nranks


@st.composite
def two_groups(draw):
    """Two process groups at the same counter value, each agreeing within itself, disagreeing with
    the other in op, size or dtype; their ranks may overlap."""
    a = draw(st.integers(1, 64))
    b = draw(st.integers(1, 64))
    ra = g.numbering(a, draw(g.numberings))
    rb = g.numbering(b, draw(g.numberings))
    seq = draw(g.counters)
    how = draw(st.sampled_from(["op", "size", "dtype"]))
    rows = [g.row(r, seq, pg="0", t=1.0) for r in ra]
    other = dict(op="broadcast") if how == "op" else dict(shape=(6,)) if how == "size" else dict(dtype="float16")
    rows += [g.row(r, seq, pg="1", t=1.0, **other) for r in rb]
    return rows


@g.SETTINGS
@given(two_groups())
def test_groups_are_never_compared_with_each_other(rows):
    """Ranks of two process groups at the same counter value are never compared: each group agrees
    with itself, so nothing is found and nobody is named."""
    d = diagnose(incident(rows))
    assert d.verdict == "no-failure" and d.culprit_ranks == []


@st.composite
def subgroup_splits(draw):
    """A subgroup (pg "5", its size unknown) with a size split, beside a default group whose size is
    stated (the world)."""
    k = draw(st.integers(2, 64))
    ranks = g.numbering(k, draw(g.numberings))
    odd = draw(st.sets(st.integers(0, k - 1), min_size=1, max_size=k - 1))
    world = draw(st.integers(k, 1024))
    seq = draw(g.counters)
    sub = [g.row(r, seq, pg="5", kind="fr", shape=(6,) if i in odd else (8,), t=1.0) for i, r in enumerate(ranks)]
    world_rows = [g.row(r, 1, world_size=world, t=0.0) for r in range(min(world, 4))]
    return sub, world_rows, seq


@g.SETTINGS
@given(subgroup_splits())
def test_a_subgroup_never_borrows_the_worlds_size(split):
    """The culprit of a split inside a subgroup whose size is unknown is decided on the subgroup's
    ranks seen: stating the world's size elsewhere changes nothing."""
    sub, world_rows, seq = split

    def culprits(rows):
        d = diagnose(incident(rows))
        return [list(f.culprit_ranks) for f in d.findings if f.pg == "5" and f.seq == seq]

    alone = culprits(sub)
    assert len(alone) == 1 and culprits(sub + world_rows) == alone


@g.SETTINGS
@given(
    last=st.dictionaries(st.integers(0, 1023), st.sampled_from([9, 10, 11, 2**53 + 1]), min_size=2, max_size=40),
    group=st.one_of(st.none(), st.integers(2, 1024)),
)
def test_progress_counters_name_only_a_strict_minority(last, group):
    """Watchdog progress: the ranks named are all behind or all ahead, fewer than half of the group,
    and a split with equal sides names nobody."""
    rows = [
        dict(rank=r, pg="0", seq_kind="work", last_enqueued=n, last_completed=n - 1, file=f"rank{r}.log", line=1)
        for r, n in last.items()
    ]
    found = from_progress(coerce("progress", rows), set(), group)
    if len(set(last.values())) < 2:
        assert found == []
        return
    (f,) = found
    lo = min(last.values())
    behind = {r for r, n in last.items() if n == lo}
    ahead = set(last) - behind
    n = max(group or 0, len(last))
    named = set(f.culprit_ranks)
    assert named in (set(), behind, ahead)
    if named:
        assert len(named) * 2 < n and len(named) < len(set(last) - named)
    if len(behind) == len(ahead):
        assert named == set()

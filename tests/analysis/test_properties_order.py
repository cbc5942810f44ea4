"""Who came first and who is behind, as properties (issue #15): the initiating rank is the unique
earliest own failure and a tie gives none; a crash explains only the ranks it stopped; "behind"
names the ranks with the lowest position. Ranks up to 2**31 - 1, counters past 2**53."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from denpex_nb import diagnose  # noqa: E402
from denpex_nb.analysis.initiator import initiating_rank  # noqa: E402
from denpex_nb.analysis.rules import fmt_ranks  # noqa: E402
from denpex_nb.incident import coerce  # noqa: E402

from . import _gen as g  # noqa: E402
from ._frames import incident  # noqa: E402

ranks = st.one_of(st.integers(0, 1023), st.just(g.TOP_RANK))
#: an own failure of a rank (tier 0) and what its collective failure looks like elsewhere (tier 1)
OWN = [("oom", g.OOM), ("exception", "ValueError: bad batch at step 3"), ("abort", "terminate called after x")]
VICTIM = [("watchdog_timeout", g.TIMEOUT), ("gloo_peer_gone", "RuntimeError: Connection closed by peer")]


@g.SETTINGS
@given(
    own=st.lists(st.tuples(ranks, st.sampled_from(OWN), st.integers(0, 5)), min_size=1, max_size=8),
    victims=st.lists(st.tuples(ranks, st.sampled_from(VICTIM), st.integers(-50, 50)), max_size=8),
)
def test_the_initiator_is_the_unique_earliest_own_failure(own, victims):
    """With timed own failures, the initiating rank is the one rank at the earliest of their times
    (victims' earlier timeouts do not count); two ranks at that instant give none."""
    rows = [g.error(r, k, m, t=float(t), line=i + 1) for i, (r, (k, m), t) in enumerate(own)]
    rows += [g.error(r, k, m, t=float(t), line=100 + i) for i, (r, (k, m), t) in enumerate(victims)]
    t0 = min(t for _, _, t in own)
    first = {r for r, _, t in own if t == t0}
    expected = first.pop() if len(first) == 1 else None
    assert initiating_rank(coerce("errors", rows)) == expected


@g.SETTINGS
@given(
    victims=st.lists(st.tuples(ranks, st.sampled_from(VICTIM), st.one_of(st.none(), st.integers(0, 9))), min_size=1),
)
def test_without_own_failures_the_initiator_is_the_unique_earliest_victim(victims):
    """Only timeouts and peers gone: the earliest timed one's rank when alone at that instant; without
    times, the one rank that reported, or none."""
    rows = [g.error(r, k, m, t=None if t is None else float(t), line=i + 1) for i, (r, (k, m), t) in enumerate(victims)]
    timed = [(t, r) for r, _, t in victims if t is not None]
    if timed:
        t0 = min(t for t, _ in timed)
        first = {r for t, r in timed if t == t0}
        expected = first.pop() if len(first) == 1 else None
        if expected is None and len({r for r, _, _ in victims}) == 1:
            expected = victims[0][0]
    else:
        everyone = {r for r, _, _ in victims}
        expected = everyone.pop() if len(everyone) == 1 else None
    assert initiating_rank(coerce("errors", rows)) == expected


@st.composite
def laggards_and_crashes(draw):
    world = draw(st.integers(2, 64))
    rs = g.numbering(world, draw(g.numberings))
    lag = draw(st.sets(st.integers(0, world - 1), min_size=1, max_size=world - 1))
    crashed = draw(st.sets(st.integers(0, world - 1), min_size=1, max_size=world))
    seq = draw(g.counters)
    rows = [g.row(r, seq - 1, t=0.0) for r in rs]
    rows += [g.row(rs[i], seq, t=1.0) for i in range(world) if i not in lag]
    errs = [g.error(rs[i], "oom", g.OOM, t=0.5, line=1) for i in sorted(crashed)]
    return rows, errs, {rs[i] for i in lag}, {rs[i] for i in crashed}, seq


@g.SETTINGS
@given(laggards_and_crashes())
def test_a_crash_explains_only_the_ranks_it_stopped(case):
    """A rank-crash finding names only ranks that failed on their own; a desync becomes a crash only
    when every rank behind crashed, and then names exactly those ranks."""
    rows, errs, lag, crashed, seq = case
    d = diagnose(incident(rows, errs))
    for f in d.findings:
        if f.class_id == "rank-crash":
            assert set(f.culprit_ranks) <= crashed, (f.rule, f.culprit_ranks, crashed)
    behind = [f for f in d.findings if f.rule == "crash-behind-desync"]
    if lag <= crashed:
        assert [sorted(f.culprit_ranks) for f in behind] == [sorted(lag)]
    else:
        assert behind == []
        assert any(f.class_id == "rank-desync" and f.seq == seq for f in d.findings)


@g.SETTINGS
@given(
    pos=st.dictionaries(ranks, st.sampled_from([5, 9, 2**53 + 1, 2**62]), min_size=2, max_size=30),
    extra=st.dictionaries(ranks, st.sampled_from([2**53 + 7, 2**62 + 1]), max_size=5),
)
def test_behind_names_the_ranks_at_the_lowest_position(pos, extra):
    """Watchdog timeouts at different places of one counter: the ranks said to be behind are the ranks
    whose lowest stuck position is the lowest of all (a rank stuck later as well is at its lowest)."""
    rows = [
        g.error(r, "watchdog_timeout", g.TIMEOUT, t=600.0, op="all_reduce", seq=s, seq_kind="work", pg="0", line=1)
        for r, s in pos.items()
    ]
    rows += [
        g.error(r, "watchdog_timeout", g.TIMEOUT, t=601.0, op="all_reduce", seq=s, seq_kind="work", pg="0", line=2)
        for r, s in extra.items()
    ]
    at = {r: min([s] + ([extra[r]] if r in extra else [])) for r, s in pos.items()}
    at.update({r: s for r, s in extra.items() if r not in pos})
    found = [f for f in diagnose(incident(errors=rows)).findings if f.rule == "stuck-points"]
    if len(set(at.values())) < 2:
        assert found == []
        return
    (f,) = found
    lo = min(at.values())
    behind = sorted(r for r, s in at.items() if s == lo)
    verb = "is" if len(behind) == 1 else "are"
    assert f"{fmt_ranks(behind).capitalize()} {verb} behind the others." in f.summary
    assert {r: v.seq for r, v in f.ranks.items()} == at

"""The decisions of rule ``divergences`` (rules.from_divergences, rules.strict_minority), pinned.

Decisions of rule ``divergences`` (each test fails if its decision is inverted):

- a culprit is named only for a strict minority: the majority holds more than half of the group
  (test_a_culprit_needs_more_than_half_of_the_group); a tie names none and no op
  (test_a_tie_names_no_culprit_and_no_op). Without a majority, the basis says how many ranks the
  largest side holds (test_the_basis_says_how_many_ranks_the_largest_side_holds).
- an op divergence where the ranks' known ops agree and the rest are unknown (a line that did not
  say its op) is no op mismatch (test_an_op_a_line_did_not_say_is_no_op_mismatch), a record with no
  op at all included (test_a_record_without_an_op_is_no_other_op).
- the group a majority is counted against is the stated size of the cell's group, else the
  default group's size for the default group only, never the world's size for a subgroup, and
  never less than the ranks in the cell (test_a_subgroup_never_borrows_the_worlds_size); a cell
  whose records name no group (empty or missing pg) is the default group's
  (test_a_cell_that_names_no_group_counts_against_the_world_size).
- a missing divergence: when fewer ranks reached the cell than did not, the few made an extra
  call; otherwise (an even split included) the missing ranks never reached it
  (test_an_even_split_says_never_reached_not_extra_collective,
  test_the_few_ahead_made_an_extra_call).
- a local size violation names the ranks whose own output is wrong, only when they are fewer
  than half of the group (test_local_size_names_the_wrong_ranks_only_when_few): two of five are
  (test_local_size_names_two_wrong_ranks_of_five).
- evidence: of more than MAX_EVIDENCE (8) rows, the odd ranks' lines come first, so the one rank that
  differs is cited even without a culprit (test_the_odd_ranks_line_is_cited_first_among_many).
  Each side of a size split is described by its first rank's shapes or count
  (test_a_size_split_describes_each_side_by_its_first_rank).
- evidence: a line whose text was not kept is cited by what the record says (rank, op, counter and
  seq, shapes, dtype) (test_evidence_without_its_text_describes_the_record).
- confidence: high with a culprit, medium without; a shape divergence (same element count) is at
  most medium, low without a culprit (test_confidence_follows_the_culprit_and_the_kind).
- a rank whose *log lines* end early is a desync only when something failed, and not when its
  complete records (tracer, Flight Recorder) show it as far as everyone
  (test_log_lines_ending_early_are_no_desync_when_nothing_failed).
"""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.analysis.rules import strict_minority

from ._frames import err, ev, incident, steps


def test_a_culprit_needs_more_than_half_of_the_group():
    assert strict_minority({0: "a", 1: "a", 2: "b"}) == ([2], "majority")
    assert strict_minority({0: "a", 1: "a", 2: "b"}, 4)[0] == []  # 2 of 4 is not more than half
    assert strict_minority({0: "a", 1: "a", 2: "a", 3: "b"}, 5)[0] == [3]  # 3 of 5 is
    # a group of six stated: three agreeing ranks of four seen are exactly half, no majority
    rows = steps(4, 2) + [ev(r, 3, shape=(6,) if r == 3 else (8,), world_size=6) for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [])
    assert "not a majority" in d.first.culprit_basis
    # four agreeing ranks of five seen are more than half of six
    rows = steps(5, 2) + [ev(r, 3, shape=(6,) if r == 3 else (8,), world_size=6) for r in range(5)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.culprit_basis) == ("shape-mismatch", [3], "majority")


def test_a_tie_names_no_culprit_and_no_op():
    assert strict_minority({0: "a", 1: "b"}) == ([], "undetermined: a tie, no majority")
    assert strict_minority({0: "a", 1: "a", 2: "b", 3: "b", 4: "c"})[0] == []
    rows = steps(4, 2) + [ev(r, 3, op="broadcast" if r < 2 else "all_reduce") for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.op, d.first.confidence) == ("op-mismatch", [], None, "medium")


def test_a_subgroup_never_borrows_the_worlds_size():
    """World size 8 is stated on the default group; pg "5" (a subgroup, size unknown) shows a 2-vs-1
    split: two of three is a majority of the ranks seen there, not of eight."""
    sized = [ev(r, s, world_size=8) for r in range(3) for s in (1, 2)]
    sub = [ev(r, 1, pg="5", kind="fr", shape=(6,) if r == 2 else (8,)) for r in range(3)]
    d = diagnose(incident(sized + sub))
    assert d.group_size == 8
    f = next(f for f in d.findings if f.pg == "5")
    assert (f.class_id, list(f.culprit_ranks)) == ("shape-mismatch", [2])
    # the same split on the default group counts against eight: no culprit
    default = [ev(r, 3, shape=(6,) if r == 2 else (8,)) for r in range(3)]
    f = next(f for f in diagnose(incident(sized + default)).findings if f.seq == 3)
    assert f.class_id == "shape-mismatch" and not f.culprit_ranks


def test_a_cell_that_names_no_group_counts_against_the_world_size():
    """World size 8 stated; a 2-vs-1 size split at seq 3 whose records name no process group (pg
    empty, or missing): two of three is no majority of eight, so nobody is named."""
    sized = [ev(r, s, world_size=8) for r in range(3) for s in (1, 2)]
    for pg in ("", None):
        split = [ev(r, 3, pg=pg, shape=(6,) if r == 2 else (8,)) for r in range(3)]
        f = next(f for f in diagnose(incident(sized + split)).findings if f.seq == 3)
        assert (f.class_id, list(f.culprit_ranks)) == ("shape-mismatch", [])
        assert "group of 8" in f.culprit_basis


def test_an_even_split_says_never_reached_not_extra_collective():
    rows = steps(4, 3) + [ev(r, 4) for r in (0, 1)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-desync", [], 4)
    assert "never reached" in d.first.summary and "extra collective" not in d.first.summary
    assert {r: v.state for r, v in d.first.ranks.items() if v.state == "absent"} == {2: "absent", 3: "absent"}


def test_the_few_ahead_made_an_extra_call():
    rows = steps(5, 3) + [ev(r, 4) for r in (0, 1)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [0, 1])
    assert "extra collective" in d.first.summary
    rows = steps(5, 3) + [ev(r, 4) for r in (0, 1, 2)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [3, 4])
    assert "never reached" in d.first.summary


def test_local_size_names_the_wrong_ranks_only_when_few():
    def gather(bad, world=4):
        return [
            ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(16,) if r in bad else (32,), world_size=world)
            for r in range(world)
        ]

    d = diagnose(incident(gather({1})))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [1])
    d = diagnose(incident(gather({0, 1})))  # half of the group: no culprit
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [])


def test_confidence_follows_the_culprit_and_the_kind():
    d = diagnose(incident(steps(3, 1) + [ev(r, 2, shape=(6,) if r == 0 else (8,)) for r in range(3)]))
    assert (d.culprit_ranks, d.first.confidence) == ([0], "high")
    d = diagnose(incident(steps(3, 1) + [ev(r, 2, shape=(2, 4) if r == 0 else (8,)) for r in range(3)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("shape-mismatch", [0], "medium")
    d = diagnose(incident(steps(2, 1) + [ev(r, 2, shape=(2, 4) if r == 0 else (8,)) for r in range(2)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("shape-mismatch", [], "low")


def test_log_lines_ending_early_are_no_desync_when_nothing_failed():
    """Watchdog-counter lines (``work``) of rank 3 end at seq 3: a cut copy when nothing failed; a
    desync once something failed; and a Flight Recorder record of any length always counts (the
    others wait at seq 4, which rank 3 never issued)."""
    work = [ev(r, s, kind="work", shape=None, numel_in=8) for r in range(4) for s in range(1, 4 if r == 3 else 6)]
    assert diagnose(incident(work)).verdict == "no-failure"
    failed = [err(0, "watchdog_timeout", "Watchdog caught collective operation timeout", t=9)]
    d = diagnose(incident(work, failed))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [3])
    fr = [
        ev(r, s, kind="fr", state="started" if s == 4 else "completed")
        for r in range(4)
        for s in range(1, 4 if r == 3 else 5)
    ]
    assert diagnose(incident(fr)).verdict == "rank-desync"


def test_the_basis_says_how_many_ranks_the_largest_side_holds():
    assert strict_minority({0: "a", 1: "a", 2: "b"}, 4) == (
        [],
        "undetermined: the largest side (2 ranks) is not a majority of the group of 4",
    )


def test_an_op_a_line_did_not_say_is_no_op_mismatch():
    rows = steps(4, 2) + [ev(r, 3, op="unknown" if r == 3 else "all_reduce") for r in range(4)]
    assert not [f for f in diagnose(incident(rows)).findings if f.class_id == "op-mismatch"]


def test_evidence_without_its_text_describes_the_record():
    """No line text is known (no texts kept): rank 2's evidence line reads as its record, op
    included: 'rank 2 all_reduce trace seq 3 in=[[6]] float32'."""
    d = diagnose(incident(steps(4, 2) + [ev(r, 3, shape=(6,) if r == 2 else (8,)) for r in range(4)]))
    e = d.first.evidence[0]
    assert (e.file, e.line, e.text) == ("rank2.trace", 3, "rank 2 all_reduce trace seq 3 in=[[6]] float32")


def test_the_odd_ranks_line_is_cited_first_among_many():
    """Twelve ranks of a stated 24 at seq 2, rank 9 with 6 elements, the rest 8: eleven of 24 is no
    majority (no culprit), and with eight lines cited at most, rank 9's comes first."""
    rows = [ev(r, 1, world_size=24) for r in range(12)]
    rows += [ev(r, 2, world_size=24, shape=(6,) if r == 9 else (8,)) for r in range(12)]
    d = diagnose(incident(rows))
    assert (d.first.class_id, list(d.first.culprit_ranks)) == ("shape-mismatch", [])
    assert [e.rank for e in d.first.evidence][:2] == [9, 0] and len(d.first.evidence) == 8


def test_a_size_split_describes_each_side_by_its_first_rank():
    """Watchdog lines (counts only) of a reduce_scatter: ranks 0 and 1 give 4 elements out (from 16
    and 12 in), rank 2 gives 2: the 4-element side reads as rank 0's 'numel 16', not rank 1's 12."""
    rows = [ev(r, s, kind="work", shape=None, numel_in=8) for r in range(3) for s in (1, 2)]
    rows += [
        ev(r, 3, kind="work", shape=None, op="reduce_scatter", numel_in=n_in, numel_out=n_out)
        for r, n_in, n_out in ((0, 16, 4), (1, 12, 4), (2, 8, 2))
    ]
    d = diagnose(incident(rows))
    assert d.first.summary.endswith("got different sizes: ranks 0, 1: numel 16, rank 2: numel 8.")


def test_a_record_without_an_op_is_no_other_op():
    """Ranks 0 and 1 all_reduce at seq 3, rank 2's line did not say its op, rank 3's record has none:
    no op mismatch (None is not an op)."""
    rows = steps(4, 2) + [ev(r, 3, op={2: "unknown", 3: None}.get(r, "all_reduce")) for r in range(4)]
    assert not [f for f in diagnose(incident(rows)).findings if f.class_id == "op-mismatch"]


def test_local_size_names_two_wrong_ranks_of_five():
    """all_gather on 5 ranks, ranks 0 and 1 with an output of 2x their input instead of 5x: two of
    five is fewer than half, so both are named."""
    rows = [
        ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(16,) if r < 2 else (40,), world_size=5)
        for r in range(5)
    ]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [0, 1])

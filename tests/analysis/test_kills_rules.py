"""Pins decisions of ``rules`` that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned, each on a small input a user would see:

- an exception whose wrapped tail, up to three lines below, another reader recognised as a
  collective error is that error, not the rank's own failure; four lines below it is its own;
- stuck points: ranks without a group named are still compared when each is stuck at one place;
  the summary lists the positions from the lowest; the finding's op is the culprits' op;
- error evidence keeps each row's line number and at most 500 characters of its message;
- DETAIL's fingerprint pair that differs only in dtype is a dtype mismatch, dated in the DETAIL
  counter when both fingerprints carry the same sequence number.
"""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.analysis.rules import own_failures
from tests.analysis._frames import err, ev, incident


def _cut_exception_and_detail(gap: int) -> list[bool]:
    errs = [
        err(0, "exception", "RuntimeError: Detected mism", file="rank0.log", line=10),
        err(0, "detail_mismatch", "Detected mismatch between collectives on ranks", file="rank0.log", line=10 + gap),
    ]
    return own_failures(incident(errors=errs).errors)


def test_an_exception_cut_three_lines_above_a_collective_error_is_that_error():
    """A terminal wrapped the message: its tail three lines below is DETAIL's mismatch. Not own."""
    assert _cut_exception_and_detail(3)[0] is False


def test_an_exception_four_lines_above_a_collective_error_is_the_ranks_own():
    assert _cut_exception_and_detail(4)[0] is True


def _timeout(rank, seq, op="all_reduce", pg=None, line=1, message="Watchdog caught collective operation timeout"):
    e = err(rank, "watchdog_timeout", message, t=5, op=op, seq=seq, seq_kind="work", line=line)
    e["pg"] = pg
    return e


def _stuck(errs):
    return [f for f in diagnose(incident(errors=errs)).findings if f.rule == "stuck-points"]


def test_ranks_stuck_at_one_place_each_are_compared_even_without_a_group_named():
    """Two watchdog lines without a process group: rank 0 at seq 9, rank 1 at seq 12."""
    (f,) = _stuck([_timeout(0, 9), _timeout(1, 12)])
    assert {r: v.seq for r, v in f.ranks.items()} == {0: 9, 1: 12}
    assert "Rank 0 is behind" in f.summary


def test_stuck_points_list_the_lowest_position_first_and_name_the_culprits_op():
    """Rank 2 (of 3) is stuck in broadcast at seq 9, ranks 0 and 1 in all_reduce at seq 12."""
    (f,) = _stuck([_timeout(0, 12, pg="0"), _timeout(1, 12, pg="0"), _timeout(2, 9, op="broadcast", pg="0")])
    assert list(f.culprit_ranks) == [2]
    assert f.op == "broadcast"
    assert f.summary.index("seq 9") < f.summary.index("seq 12")


def test_error_evidence_keeps_the_line_and_cuts_the_message_at_500_characters():
    long = "Watchdog caught collective operation timeout " + "x" * 600
    (f,) = _stuck([_timeout(0, 9, pg="0", line=7, message=long), _timeout(1, 12, pg="0", line=8)])
    by_rank = {e.rank: e for e in f.evidence}
    assert by_rank[0].line == 7 and by_rank[1].line == 8
    assert by_rank[0].text == long[:500]


def test_a_detail_fingerprint_pair_differing_only_in_dtype_is_a_dtype_mismatch():
    """DETAIL's one mismatch message names rank 0 (float32) and rank 1 (bfloat16), both at seq 3."""
    evs = [
        ev(0, 3, dtype="float32", kind="detail", state="failed", file="rank0.log"),
        ev(1, 3, dtype="bfloat16", kind="detail", state="failed", file="rank0.log"),
    ]
    found = [f for f in diagnose(incident(events=evs)).findings if f.rule == "fingerprint-pairs"]
    assert [f.class_id for f in found] == ["dtype-mismatch"]
    assert found[0].seq_kind == "detail" and found[0].seq == 3


def test_a_divergence_in_an_unnamed_group_says_no_pg():
    """The process group is the empty string (a reader that found no name): no 'of pg' in the text."""
    evs = [ev(0, 2, pg=""), ev(1, 2, op="broadcast", pg=""), ev(0, 1, pg=""), ev(1, 1, pg="")]
    (f,) = [f for f in diagnose(incident(events=evs)).findings if f.class_id == "op-mismatch"]
    assert "of pg" not in f.summary


def test_a_size_mismatch_shows_each_size_groups_first_ranks_shape():
    """Ranks 0 and 1 send 8 elements (as (2, 4) and (8,)), rank 2 sends 16: the group of 8 is shown
    with rank 0's shape."""
    evs = [ev(r, 1) for r in range(3)] + [ev(0, 2, shape=(2, 4)), ev(1, 2, shape=(8,)), ev(2, 2, shape=(4, 4))]
    (f,) = [f for f in diagnose(incident(events=evs)).findings if f.class_id == "shape-mismatch"]
    assert "[[2, 4]]" in f.summary and "[[8]]" not in f.summary


def test_a_named_crash_is_high_only_when_a_quiet_majority_of_the_group_is_seen():
    """A group of 4 (stated), rank 2 ran out of memory and only rank 0 is otherwise seen: one quiet
    rank of four is no majority, so the crash is named at medium confidence."""
    evs = [ev(0, 1, world_size=4), ev(2, 1, world_size=4)]
    errs = [err(2, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", t=5)]
    (f,) = [f for f in diagnose(incident(events=evs, errors=errs)).findings if f.rule == "own-failure"]
    assert list(f.culprit_ranks) == [2]
    assert f.confidence == "medium"


def _size_tie_evidence(sizes: list[int]) -> list[int]:
    """The ranks of the evidence lines of an all_reduce at seq 3 where rank r passed sizes[r] elements."""
    rows = [ev(r, s) for r in range(len(sizes)) for s in (1, 2)] + [ev(r, 3, shape=(n,)) for r, n in enumerate(sizes)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("shape-mismatch", [], 3)  # a tie names no culprit
    return [e.rank for e in d.first.evidence]


def test_a_size_tie_puts_neither_side_first_by_its_value():
    """Ranks 0-4 passed 8 elements, ranks 5-9 passed 6: a tie, no side is the odd one, so the
    evidence begins at the lowest rank and shows both sides; the user is not shown the 6-element
    side first as if it were the odd one out."""
    ranks = _size_tie_evidence([8] * 5 + [6] * 5)
    assert ranks[0] == 0 and any(r >= 5 for r in ranks)


def test_a_size_tie_shows_each_sides_first_line_first():
    """Eight ranks on each side (8 evidence slots): the first line of each side comes before any
    second one, from the lowest rank on, whichever size is smaller, so the first lines a summary
    shows hold both sizes; the user is not shown eight lines of one side only."""
    for low, high in ((6, 8), (8, 6)):
        assert _size_tie_evidence([low] * 8 + [high] * 8) == [0, 8, 1, 2, 3, 4, 5, 6]


def test_a_size_mismatch_shows_the_common_size_even_behind_ranks_of_unknown_size():
    """Seven ranks of unknown size come first, ranks 7 and 8 passed 8 elements, rank 9 passed 6: the
    eight evidence lines hold rank 9 and a rank of the common size (the first, rank 7), not rank 9
    and seven ranks whose size is unknown; the user is not shown the odd size with nothing to set it
    against."""
    rows = [ev(r, s) for r in range(10) for s in (1, 2)]
    rows += [ev(r, 3, shape=None) for r in range(7)] + [ev(r, 3) for r in (7, 8)] + [ev(9, 3, shape=(6,))]
    d = diagnose(incident(rows))
    assert (d.first.class_id, d.first.seq) == ("shape-mismatch", 3)
    assert [e.rank for e in d.first.evidence] == [9, 0, 7, 1, 2, 3, 4, 5]

"""Positions as evidence (analysis/positions.py): Horovod's stall report and the ranks' last positions
when the evidence ends, pinned on small inputs.

Decisions of rule ``stall-report`` (Horovod's stall inspector):

- the ranks the report lists as missing are named by statement (the coordinator sees every rank's
  submissions) when they are a strict minority of the group, its lower bound counting the highest
  rank named and one submitter more than the missing (test_stall_report_names_the_missing_ranks).
- a report listing half the group (one of two) or most of it names no one: the ranks that
  submitted may have made an extra or different call; a report whose list was cut off names no
  one; all at low confidence (test_stall_report_names_no_one_on_a_tie_most_of_the_group_or_no_list).
- read behind launchers and collectors, and from one rank's file of several
  (test_stall_report_behind_wrappers_and_in_a_subset_of_files).

Decisions of rule ``end-positions`` (the last position of each rank on each counter):

- the positions it compares (state.positions): per rank, group and counter, the furthest seq any
  source reached (collective records, watchdog timeouts, progress counters), whether that very
  collective completed, and at how many places the rank says it is stuck
  (test_positions_records_each_ranks_last_place_per_counter).

- ranks that stopped at different positions of one counter, nothing completing after, are a
  ``rank-desync`` candidate naming the strict minority behind, at ``low``; with no failure printed
  the verdict is "could not tell" (``no-evidence``: a log cut while the job ran looks the same, and
  what to collect), the candidate its alternative; never ``no-failure``
  (test_end_positions_names_the_rank_behind_at_low_confidence).
- a tie names no one (test_end_positions_tie_names_no_one).
- a collective completed past the lowest position means every rank got there: the laggard's log
  was cut, no finding (test_end_positions_a_completion_after_is_a_cut_log).
- positions are compared within one group and counter only, and not for a counter of no named
  group where a rank is stuck at several places (several groups' counters)
  (test_end_positions_never_across_groups_or_unnamed_groups).
- the candidate is given only when no other rule explained the evidence; with a failure printed
  that no rule explains it replaces "cause undetermined" (``medium`` with a named culprit), and
  beside a failure signal whose family says more (a kill) it is an alternative
  (test_end_positions_only_when_nothing_else_explains).
- read from DETAIL fingerprint lines behind every wrapper, cut mid-line, and from a subset of the
  ranks' files (test_end_positions_from_detail_lines_behind_wrappers).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb import diagnose
from tests.signal_variants import WRAPPERS

from ._frames import err, ev, incident

WARN = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
    "waiting for remainder of ranks for more than 60 seconds."
)


def _stall(missing, reporter=0, group=None):
    rows = [err(reporter, "stall_report", WARN + " Missing ranks: ...", related=tuple(missing), op="all_reduce", t=5)]
    rows += [err(r, "warning", "a benign warning", t=1) for r in range(group or 0)]
    return rows


def _f(d, rule):
    return [f for f in d.findings if f.rule == rule]


def test_stall_report_names_the_missing_ranks():
    d = diagnose(incident(errors=_stall([3], group=8)), strict=True)
    (f,) = _f(d, "stall-report")
    assert (d.verdict, list(f.culprit_ranks), f.confidence, f.op) == ("rank-desync", [3], "medium", "all_reduce")
    assert f.culprit_basis.startswith("statement")
    # rank 6 named, nothing else seen: ranks 0-6 exist, and 1 of 7 is a strict minority
    assert diagnose(incident(errors=_stall([6])), strict=True).culprit_ranks == [6]


def test_stall_report_names_no_one_on_a_tie_most_of_the_group_or_no_list():
    for missing, group, why in (([1], 2, "a tie"), ([0], None, "a tie"), ([1, 2, 3], 4, "most of the group")):
        d = diagnose(incident(errors=_stall(missing, group=group)), strict=True)
        (f,) = _f(d, "stall-report")
        assert (d.verdict, list(f.culprit_ranks), f.confidence) == ("rank-desync", [], "low")
        assert why in f.culprit_basis
    d = diagnose(incident(errors=[err(0, "stall_report", WARN, t=5)]), strict=True)
    (f,) = _f(d, "stall-report")
    assert (d.verdict, list(f.culprit_ranks), f.confidence) == ("rank-desync", [], "low")


REPORT = [
    "[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] " + WARN,
    "Stalled ranks:",
    "2: [horovod_allreduce.0, horovod_allreduce.1 ...]",
]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_stall_report_behind_wrappers_and_in_a_subset_of_files(tmp_path, wrapper):
    wrap = WRAPPERS[wrapper]
    for r in range(3):  # rank 0's file holds the report; the others only train
        lines = [f"step {i} loss 2.0" for i in range(3)] + (REPORT if r == 0 else [])
        (tmp_path / f"rank{r}.log").write_text("\n".join(wrap(r, t) for t in lines) + "\n")
    d = dx.diagnose(dx.load(str(tmp_path), progress=False), strict=True)
    assert (d.verdict, d.culprit_ranks, d.first.rule) == ("rank-desync", [2], "stall-report")
    (tmp_path / "rank0.log").unlink()  # a subset of files without the report: nothing to say
    assert dx.diagnose(dx.load(str(tmp_path), progress=False)).verdict != "rank-desync"


def _detail(rank, last, state="scheduled", pg="0"):
    return [ev(rank, s, kind="detail", state=state, pg=pg, shape=(8,)) for s in range(1, last + 1)]


def test_positions_records_each_ranks_last_place_per_counter():
    from denpex_nb.analysis.state import positions
    from denpex_nb.incident import Incident, coerce

    rows = _detail(0, 4) + _detail(1, 3, "completed") + [ev(0, 2, kind="fr", pg="1")]
    timeouts = []
    for seq in (7, 9):  # rank 2 timed out at two places of the work counter
        t = err(2, "watchdog_timeout", f"WorkNCCL(SeqNum={seq})", t=9, op="all_reduce", seq=seq, seq_kind="work")
        t["pg"] = None
        timeouts.append(t)
    prog = [dict(rank=3, pg="0", seq_kind="work", last_enqueued=12, last_completed=12, source="c10d", file="p", line=1)]
    inc = Incident(
        events=coerce("events", rows),
        errors=coerce("errors", timeouts),
        ranks=coerce("ranks", []),
        progress=coerce("progress", prog),
    )
    got = {
        (r, pg, c): (p, done, stuck)
        for r, pg, c, p, done, stuck in positions(inc)[
            ["rank", "pg", "counter", "position", "completed", "stuck_places"]
        ].itertuples(index=False)
    }
    assert got == {
        (0, "0", "detail"): (4, False, 0),
        (0, "1", "fr"): (2, True, 0),
        (1, "0", "detail"): (3, True, 0),
        (2, None, "work"): (9, False, 2),
        (3, "0", "work"): (12, True, 0),
    }


def test_end_positions_names_the_rank_behind_at_low_confidence():
    rows = _detail(0, 8) + _detail(1, 8) + _detail(2, 8) + _detail(3, 5)
    d = diagnose(incident(rows), strict=True)
    assert (d.verdict, d.culprit_ranks, d.first.confidence, d.first.rule) == ("no-evidence", [], "low", "end-positions")
    assert "Could not tell" in d.first.summary and "rank 3 at 5" in d.first.summary
    (cand,) = _alt(d)
    assert (list(cand.culprit_ranks), cand.confidence, cand.seq_kind, cand.seq) == ([3], "low", "detail", 6)
    assert "No failure was printed" in cand.summary


def _alt(d):
    return [a for a in d.alternatives if a.class_id == "rank-desync" and a.rule == "end-positions"]


def test_end_positions_tie_names_no_one():
    d = diagnose(incident(_detail(0, 8) + _detail(1, 5)), strict=True)
    assert (d.verdict, d.culprit_ranks, d.first.rule) == ("no-evidence", [], "end-positions")
    (cand,) = _alt(d)
    assert not cand.culprit_ranks and cand.culprit_basis.startswith("undetermined")


def test_end_positions_a_completion_after_is_a_cut_log():
    rows = _detail(0, 8, "completed") + _detail(1, 8, "completed") + _detail(2, 5, "completed")
    assert diagnose(incident(rows), strict=True).verdict == "no-failure"


def test_end_positions_never_across_groups_or_unnamed_groups():
    d = diagnose(incident(_detail(0, 8, pg="0") + _detail(1, 5, pg="1")), strict=True)
    assert d.verdict == "no-failure"

    def timeout(rank, seq):
        row = err(rank, "watchdog_timeout", f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE)", t=9, op="all_reduce", seq=seq)
        row.update(seq_kind="work", pg=None)
        return row

    # rank 0 stuck at three places with no group named: three groups; rank 1's 33 is of another
    d = diagnose(incident(errors=[timeout(0, 257), timeout(0, 1032), timeout(0, 1796), timeout(1, 33)]), strict=True)
    assert d.verdict == "timeout-undetermined"
    # one place each, one group named: rank 1 is behind (stuck-points says so before end-positions)
    d = diagnose(incident(errors=[timeout(0, 12), timeout(1, 9), timeout(2, 12)]), strict=True)
    assert (d.verdict, d.first.rule) == ("rank-desync", "stuck-points")


def test_end_positions_only_when_nothing_else_explains(tmp_path):
    rows = _detail(0, 8) + _detail(1, 8) + _detail(2, 5)
    crash = [err(2, "exception", "ValueError: bad batch", t=3)]
    d = diagnose(incident(rows, crash), strict=True)
    assert d.verdict == "rank-crash" and not _f(d, "end-positions")
    # a failure printed on a line no reader parses: the candidate replaces "cause undetermined" (medium,
    # a culprit named), and is only an alternative beside a failure whose family says more (a kill)
    for extra, verdict, conf in (
        ("ERROR: connection to node2 failed", "rank-desync", "medium"),
        ("Killed", "rank-crash", None),
    ):
        for r, last in {0: 9, 1: 9, 2: 9, 3: 6}.items():
            lines = [f"[rank{r}]:" + _fingerprint(r, s) for s in range(1, last + 1)]
            lines += [f"[rank{r}]:{extra}"] if r == 3 else []
            (tmp_path / f"rank{r}.log").write_text("\n".join(lines) + "\n")
        d = dx.diagnose(dx.load(str(tmp_path), progress=False), strict=True)
        assert (d.verdict, d.culprit_ranks) == (verdict, [3])
        if conf:
            assert (d.first.rule, d.first.confidence) == ("end-positions", conf)
        else:
            assert [a.rule for a in d.alternatives if a.class_id == "rank-desync"] == ["end-positions"]


def _fingerprint(rank, seq):
    return (
        f"[I1201 10:00:0{seq % 10}.000 ProcessGroupWrapper.cpp:710] [Rank {rank}] Running collective: "
        f"CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape=[1024], TensorDtypes=Float, "
        "TensorDeviceTypes=cuda)"
    )


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("cut", [False, True])
def test_end_positions_from_detail_lines_behind_wrappers(tmp_path, wrapper, cut):
    wrap = WRAPPERS[wrapper]
    ends = {0: 9, 1: 9, 2: 9, 3: 6}
    for r, last in ends.items():
        lines = [_fingerprint(r, s) for s in range(1, last + 1)]
        if cut:  # the paste cut the last line mid-word: its sequence number is not there
            lines.append(_fingerprint(r, last + 1)[:60])
        (tmp_path / f"rank{r}.log").write_text("\n".join(wrap(r, t) for t in lines) + "\n")
    d = dx.diagnose(dx.load(str(tmp_path), progress=False), strict=True)
    assert d.verdict == "no-evidence" and d.first.rule == "end-positions"
    (cand,) = _alt(d)
    assert list(cand.culprit_ranks) == [3] and cand.confidence == "low"
    # a subset of the ranks' files: rank 3's alone says nothing against anyone
    for r in (0, 1, 2):
        (tmp_path / f"rank{r}.log").unlink()
    assert dx.diagnose(dx.load(str(tmp_path), progress=False)).verdict != "rank-desync"

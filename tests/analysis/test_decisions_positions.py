"""The decisions of the rules that compare where ranks stopped: ``stuck-points``, ``progress`` and
``traceback-calls``, pinned on small inputs.

Decisions of rule ``stuck-points`` (watchdog timeouts with SeqNum/OpType):

- a rank's position is its lowest (seq, op) where it timed out; "behind" names the ranks at the
  lowest position (test_stuck_points_names_the_lowest_positions_behind).
- positions are compared only within one (pg, counter); a rank stuck at several places with no
  group named is skipped (test_stuck_points_never_compares_across_groups).
- ranks at one place are no finding; the culprit is a strict minority of the group
  (test_stuck_points_culprit_by_strict_minority_only); in the default group ("0" or
  "default_pg") the group is the world size (test_stuck_points_count_the_default_group_against_the_world_size).
- the summary lists the places by seq, then op (test_stuck_points_list_the_places_by_seq_then_op).
- a timeout without a rank or a SeqNum places no rank (test_stuck_points_skip_timeouts_without_a_rank_or_a_seq).

Decisions of rule ``progress`` (watchdog progress counters no event shows):

- "behind" are the ranks with the lowest last-enqueued seq; the culprit side is the smaller one,
  named only when the other is a strict majority of the group: a 1-vs-1 split names no one
  (test_progress_one_against_one_names_no_culprit); one rank ahead of three made extra calls
  (test_progress_names_the_smaller_side).
- counters that aligned events already show are skipped (test_progress_skips_counters_events_show).

Decisions of rule ``traceback-calls`` (the last collective call in each rank's traceback):

- different calls are an op mismatch; the culprit is a strict minority of the group
  (test_traceback_calls_differ_by_strict_minority).
- a rank whose traceback names no collective call is not a rank that called something else
  (test_a_traceback_without_a_collective_call_is_not_another_call).

Both ``traceback-calls`` and ``stuck-points`` name the culprits' op only when the culprits share
one call / position (test_an_op_is_named_only_when_the_culprits_agree_on_it).
"""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.incident import Incident, coerce

from ._frames import err, ev, incident


def _timeout(rank, seq, op="all_reduce", pg="0", t=600):
    row = err(
        rank,
        "watchdog_timeout",
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op.upper()})",
        t=t,
        op=op,
        seq=seq,
        seq_kind="work",
    )
    row["pg"] = pg
    return row


def _stuck(errs):
    return [f for f in diagnose(incident(errors=errs)).findings if f.rule == "stuck-points"]


def test_stuck_points_names_the_lowest_positions_behind():
    """Ranks 0 and 1 timed out at seq 10, rank 2 at seq 9 (and, later, at 12): rank 2 is behind."""
    (f,) = _stuck([_timeout(0, 10), _timeout(1, 10), _timeout(2, 9), _timeout(2, 12)])
    assert f.class_id == "rank-desync"
    assert "Rank 2 is behind the others" in f.summary
    assert {r: v.seq for r, v in f.ranks.items()} == {0: 10, 1: 10, 2: 9}
    assert list(f.culprit_ranks) == [2]


def test_stuck_points_never_compares_across_groups():
    assert _stuck([_timeout(0, 10, pg="0"), _timeout(1, 3, pg="1")]) == []
    # no group named and one rank stuck at two places: its timeouts may be of different groups
    errs = [_timeout(0, 10, pg=None), _timeout(0, 3, pg=None), _timeout(1, 10, pg=None)]
    assert _stuck(errs) == []


def test_stuck_points_culprit_by_strict_minority_only():
    assert _stuck([_timeout(r, 10) for r in range(4)]) == []
    (f,) = _stuck([_timeout(0, 10), _timeout(1, 9)])
    assert not f.culprit_ranks and f.confidence == "medium" and f.culprit_basis.startswith("undetermined")
    (f,) = _stuck([_timeout(0, 10), _timeout(1, 10), _timeout(2, 10), _timeout(3, 9)])
    assert (list(f.culprit_ranks), f.confidence) == ([3], "high")


def _progress(last: dict, pg="0", kind="work", events=()):
    rows = [
        dict(
            rank=r,
            pg=pg,
            seq_kind=kind,
            last_enqueued=n,
            last_started=n,
            last_completed=n - 1,
            source="c10d",
            file=f"rank{r}.log",
            line=1,
        )
        for r, n in last.items()
    ]
    return Incident(
        events=coerce("events", list(events)),
        errors=coerce("errors", []),
        ranks=coerce("ranks", []),
        progress=coerce("progress", rows),
    )


def _prog(inc):
    return [f for f in diagnose(inc).findings if f.rule == "progress"]


def test_progress_one_against_one_names_no_culprit():
    (f,) = _prog(_progress({0: 10, 1: 11}))
    assert (f.class_id, list(f.culprit_ranks)) == ("rank-desync", [])
    assert f.culprit_basis.startswith("undetermined") and "rank 0 last enqueued seq 10" in f.summary


def test_progress_names_the_smaller_side():
    (f,) = _prog(_progress({0: 10, 1: 10, 2: 10, 3: 11}))
    assert list(f.culprit_ranks) == [3]  # one ahead of three: the extra calls
    (f,) = _prog(_progress({0: 10, 1: 11, 2: 11, 3: 11}))
    assert list(f.culprit_ranks) == [0]  # one behind three
    (f,) = _prog(_progress({0: 10, 1: 10, 2: 11, 3: 11}))
    assert list(f.culprit_ranks) == []  # two and two


def test_progress_skips_counters_events_show():
    events = [ev(r, s, kind="work", shape=None, numel_in=8) for r in range(3) for s in (1, 2)]
    assert _prog(_progress({0: 10, 1: 10, 2: 9}, events=events)) == []
    assert len(_prog(_progress({0: 10, 1: 10, 2: 9}))) == 1


def test_traceback_calls_differ_by_strict_minority():
    def calls(ops):
        return [
            err(r, "exception", "RuntimeError: Connection closed by peer", t=5, op=op, line=r + 1)
            for r, op in enumerate(ops)
        ]

    d = diagnose(incident(errors=calls(["all_reduce", "all_reduce", "broadcast"])))
    f = next(f for f in d.findings if f.rule == "traceback-calls")
    assert (f.class_id, list(f.culprit_ranks), f.op) == ("op-mismatch", [2], "broadcast")
    d = diagnose(incident(errors=calls(["all_reduce", "broadcast"])))
    f = next(f for f in d.findings if f.rule == "traceback-calls")
    assert (list(f.culprit_ranks), f.op) == ([], None)
    d = diagnose(incident(errors=calls(["all_reduce", "all_reduce"])))
    assert not any(f.rule == "traceback-calls" for f in d.findings)


def test_a_traceback_without_a_collective_call_is_not_another_call():
    """Three ranks' tracebacks end in all_reduce, rank 3's names no collective call (it died in the
    data loader): no op mismatch, and rank 3 is not named for calling 'None'."""
    errs = [
        err(r, "exception", "RuntimeError: Connection closed by peer", t=5, op=op, line=r + 1)
        for r, op in enumerate(["all_reduce", "all_reduce", "all_reduce", None])
    ]
    assert not any(f.rule == "traceback-calls" for f in diagnose(incident(errors=errs)).findings)


def test_an_op_is_named_only_when_the_culprits_agree_on_it():
    """traceback-calls and stuck-points name the culprits' op only when they share one position."""
    ops = ["all_reduce"] * 4 + ["broadcast", "barrier"]
    errs = [
        err(r, "exception", "RuntimeError: Connection closed by peer", t=5, op=op, line=r + 1)
        for r, op in enumerate(ops)
    ]
    f = next(f for f in diagnose(incident(errors=errs)).findings if f.rule == "traceback-calls")
    assert (list(f.culprit_ranks), f.op) == ([4, 5], None)
    errs = [_timeout(r, 10) for r in range(4)] + [_timeout(4, 8, op="broadcast"), _timeout(5, 9, op="barrier")]
    (f,) = _stuck(errs)
    assert (list(f.culprit_ranks), f.op) == ([4, 5], None)


def test_stuck_points_skip_timeouts_without_a_rank_or_a_seq():
    errs = [_timeout(0, 10), _timeout(1, 10), _timeout(2, 9), dict(_timeout(3, 5), seq=None)]
    (f,) = _stuck(errs)
    assert sorted(f.ranks) == [0, 1, 2]  # rank 3's timeout without SeqNum places it nowhere


def test_stuck_points_count_the_default_group_against_the_world_size():
    """pg "0" or "default_pg": three ranks agreeing of a world of eight are no majority."""
    for pg in ("0", "default_pg"):
        errs = [_timeout(r, 10, pg=pg) for r in range(3)] + [_timeout(3, 9, pg=pg)]
        d = diagnose(
            Incident(
                events=coerce("events", []),
                errors=coerce("errors", errs),
                ranks=coerce("ranks", [dict(rank=0, world_size=8)]),
            )
        )
        (f,) = [f for f in d.findings if f.rule == "stuck-points"]
        assert list(f.culprit_ranks) == [], pg
        assert f.culprit_basis.startswith("undetermined"), pg


def test_stuck_points_list_the_places_by_seq_then_op():
    errs = [_timeout(0, 10, op="broadcast"), _timeout(1, 10, op="broadcast"), _timeout(2, 10), _timeout(3, 9)]
    (f,) = _stuck(errs)
    assert f.summary.index("all_reduce at work seq 10") < f.summary.index("broadcast at work seq 10")

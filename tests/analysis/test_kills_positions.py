"""Pins decisions of :func:`denpex_nb.analysis.state.positions` (the last place each rank reached
on every counter: the end-positions and stall rules compare ranks on it) that the semantic
mutation campaign (benchmarks/bench_mutation.py, issue #15) found unpinned: each test is the
smallest input on which the decision shows.

Frames that do not follow the schema (a frame absent, a column missing, group ids read as
numbers) are inputs ``positions`` explicitly accepts (it checks for them): on them it must still
say what the other sources say, not fail whole."""

from __future__ import annotations

import pandas as pd

from denpex_nb.analysis.state import positions
from denpex_nb.incident import Incident, coerce

from ._frames import T0, err, ev, incident, steps


def _where(pos: pd.DataFrame) -> set:
    return {(int(r), pg, c, int(p)) for r, pg, c, p in zip(pos["rank"], pos["pg"], pos["counter"], pos["position"])}


def _watchdog(rank, seq, kind="work"):
    """A watchdog line: ``rank`` timed out in seq ``seq`` of group 0's ``kind`` counter."""
    return {
        **err(rank, "watchdog_timeout", "Watchdog caught collective operation timeout", t=9, seq=seq, seq_kind=kind),
        "pg": "0",
    }


# --- one row per (rank, group, counter) ---------------------------------------------------------


def test_one_ranks_places_on_two_counters_of_two_groups_stay_apart():
    """Rank 0 reached trace seq 7 of group 1 and work seq 5 of group 0: the two would be taken for
    one place, and rank 0's work position (or its group-1 one) would vanish from the comparison."""
    rows = steps(2, 3) + [ev(r, 5, kind="work") for r in range(2)] + [ev(0, 7, pg="1")]
    assert _where(positions(incident(rows))) == {
        (0, "0", "trace", 3),
        (0, "0", "work", 5),
        (0, "1", "trace", 7),
        (1, "0", "trace", 3),
        (1, "0", "work", 5),
    }


def test_a_position_names_the_collective_and_the_time_of_its_record():
    """Rank 1 stopped at broadcast seq 3 (traced at T0 + 30 s): end-positions' evidence and rank view
    would name no collective for it, and the position would carry no time."""
    rows = [ev(r, s, t=10 * s) for r in range(2) for s in (1, 2)] + [ev(1, 3, op="broadcast", t=30)]
    pos = positions(incident(rows)).set_index("rank")
    assert (pos.loc[1, "op"], pos.loc[0, "op"]) == ("broadcast", "all_reduce")
    assert pos.loc[1, "t_wall"] == pd.Timestamp(T0 + 30, unit="s", tz="UTC")
    assert pos.loc[0, "t_wall"] == pd.Timestamp(T0 + 20, unit="s", tz="UTC")


# --- stuck places -------------------------------------------------------------------------------


def test_a_record_that_failed_says_the_rank_is_stuck_there():
    """Rank 1's records of work seq 3 and 5 say failed (no group named: two groups' counters seen as
    one): its stuck places would be zero, the counter kept in the comparison as if it were one group's,
    and rank 0 told apart from rank 1 on a mixed counter."""
    rows = steps(2, 2, kind="work", pg=None)
    rows += [ev(1, 3, kind="work", pg=None, state="failed"), ev(1, 5, kind="work", pg=None, state="failed")]
    pos = positions(incident(rows)).set_index("rank")
    assert (pos.loc[1, "position"], pos.loc[1, "stuck_places"], pos.loc[0, "stuck_places"]) == (5, 2, 0)
    pos = positions(incident(steps(2, 2, kind="work") + [ev(1, 3, kind="work", state="failed")]))
    assert pos.set_index("rank").loc[1, "stuck_places"] == 1


# --- frames that do not follow the schema ---------------------------------------------------------


def test_progress_counters_read_without_a_group_column_name_no_group():
    """Rank 0's progress counter (work seq 9) was read without a group column, the records name
    group 1: the counter would be placed in group 1 and compared there with the records' ranks."""
    progress = pd.DataFrame({"rank": [0], "seq_kind": ["work"], "last_enqueued": [9], "last_completed": [8]})
    inc = Incident(events=coerce("events", steps(2, 3, pg="1")), progress=progress)
    assert _where(positions(inc)) == {(0, "1", "trace", 3), (1, "1", "trace", 3), (0, None, "work", 9)}


def test_group_ids_read_as_numbers_keep_the_groups_apart():
    """Group ids read as numbers, one missing (so held as floats): ranks 0 and 1 reached seq 3 of
    group 0 and rank 0 seq 7 of group 1; the two groups would be merged and rank 0 be said to
    have reached 7 where rank 1 reached 3."""
    events = pd.DataFrame(
        {
            "rank": [0, 1, 0, 1],
            "seq": [3, 3, 7, 2],
            "seq_kind": ["trace"] * 4,
            "pg": [0, 0, 1, None],
        }
    )
    assert events["pg"].dtype == "float64"
    pos = positions(Incident(events=events))
    by = {(int(r), int(p)): pg for r, p, pg in zip(pos["rank"], pos["position"], pos["pg"])}
    assert set(by) == {(0, 3), (0, 7), (1, 3), (1, 2)}
    assert by[(0, 3)] == by[(1, 3)] is not None
    assert by[(0, 7)] not in (None, by[(0, 3)])
    assert by[(1, 2)] is None


def test_a_source_given_as_no_frame_leaves_the_others_positions():
    """An incident built with no events, errors or progress frame (None: that source found nothing):
    positions would fail whole, and the watchdog's and the records' places would be lost."""
    events = coerce("events", steps(2, 3, kind="work"))
    errors = coerce("errors", [_watchdog(1, 4)])
    progress = coerce("progress", [dict(rank=0, pg="0", seq_kind="fr", last_enqueued=6, last_completed=6)])
    assert _where(positions(Incident(events=None, errors=errors, progress=progress))) == {
        (1, "0", "work", 4),
        (0, "0", "fr", 6),
    }
    assert _where(positions(Incident(events=events, errors=None, progress=progress))) == {
        (0, "0", "work", 3),
        (1, "0", "work", 3),
        (0, "0", "fr", 6),
    }
    assert _where(positions(Incident(events=events, errors=errors, progress=None))) == {
        (0, "0", "work", 3),
        (1, "0", "work", 4),
    }


def test_records_without_a_seq_or_counter_column_leave_the_other_positions():
    """Records read without their seq (or counter, or rank) column: positions would fail whole, and
    the watchdog's place for rank 1 (work seq 4) would be lost."""
    for col in ("seq", "seq_kind", "rank"):
        inc = incident(steps(2, 3, kind="work"), [_watchdog(1, 4)])
        inc.events = inc.events.drop(columns=[col])
        assert _where(positions(inc)) == {(1, "0", "work", 4)}, col


def test_progress_read_without_a_last_enqueued_column_leaves_the_records_positions():
    """Progress counters read with only their completed counts (no last enqueued column): positions
    would fail whole, and the records' places would be lost."""
    progress = pd.DataFrame({"rank": [0, 1], "pg": ["0", "0"], "seq_kind": ["fr", "fr"], "last_completed": [5, 6]})
    inc = Incident(events=coerce("events", steps(2, 3) + [ev(0, 4)]), progress=progress)
    assert _where(positions(inc)) == {(0, "0", "trace", 4), (1, "0", "trace", 3)}


def test_a_position_names_the_source_that_says_so():
    """Rank 1's place (work seq 4) comes from its watchdog line, rank 0's from its record: the
    positions would not say which reader each place was read from."""
    rows = [ev(r, s, kind="work") for r in range(2) for s in (1, 2, 3)]
    errors = [{**_watchdog(1, 4), "source": "c10d"}]
    pos = positions(incident(rows, errors)).set_index("rank")
    assert (pos.loc[0, "source"], pos.loc[1, "source"]) == ("work", "c10d")


# --- progress counters --------------------------------------------------------------------------


def test_progress_counters_of_a_counter_the_records_show_are_not_positions():
    """Both ranks' Flight Recorder records reach seq 5; rank 0's pg_status says last enqueued 8 (it
    repeats the records and may count a helper group's collectives): rank 0 would be placed at 8,
    ahead of rank 1, and the ranks said to have stopped at different places."""
    progress = [
        dict(rank=0, pg="0", seq_kind="fr", last_enqueued=8, last_completed=8),
        dict(rank=1, pg="0", seq_kind="fr", last_enqueued=5, last_completed=5),
        dict(rank=1, pg="0", seq_kind="work", last_enqueued=6, last_completed=5),
    ]
    inc = Incident(events=coerce("events", steps(2, 5, kind="fr")), progress=coerce("progress", progress))
    assert _where(positions(inc)) == {(0, "0", "fr", 5), (1, "0", "fr", 5), (1, "0", "work", 6)}

"""Pins more decisions of :mod:`denpex_nb.analysis.state` (the group size, each rank's state, the
positions each rank reached) that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned: each test is the smallest input on which the decision shows.

Frames that do not follow the schema (a column missing, a group column of plain strings, a size
read through float64) are inputs ``state`` explicitly accepts (it checks for them): on them it must
still say what it can, not fail whole."""

from __future__ import annotations

import pandas as pd

from denpex_nb.analysis.state import group_size, positions, rank_state
from denpex_nb.incident import Incident, coerce

from ._frames import err, ev, incident, steps


def _st(inc) -> pd.DataFrame:
    return rank_state(inc).set_index("rank")


# --- group_size ---------------------------------------------------------------------------------


def test_a_ranks_own_statement_of_an_absurd_world_size_is_not_evidence():
    """A rank stating a world of 2**24 processes would be believed, and a majority counted against
    sixteen million ranks."""
    inc = incident(steps(2, 1), ranks=[dict(rank=0, world_size=2**24), dict(rank=1, world_size=2**24)])
    size = group_size(inc)
    assert size.size is None and size.basis.startswith("unknown")
    inc = incident(steps(2, 1), ranks=[dict(rank=0, world_size=2**24 - 1)])
    assert group_size(inc).size == 2**24 - 1


def test_the_largest_plausible_world_size_is_believed_from_records_or_a_ranks_statement():
    """The collective records, or a rank's own statement, give a group of 2**24 - 1 ranks (the
    largest size believed): it would be dropped as absurd and the group size reported unknown."""
    size = group_size(incident([ev(r, 1, world_size=2**24 - 1) for r in range(2)]))
    assert size.size == 2**24 - 1 and "collective records" in size.basis
    size = group_size(incident(steps(2, 1), ranks=[dict(rank=0, world_size=2**24 - 1)]))
    assert size.size == 2**24 - 1 and "own statement" in size.basis


def test_the_analyzers_largest_expected_group_is_the_world():
    """The Flight Recorder analyzer expects 4 ranks in one mismatch and 2 (a subgroup) in another:
    the world would shrink to 2, and 1 of 4 ranks read as half the group."""
    errors = [
        {**err(0, "fr_finding", "collective mismatch", t=1), "expected_ranks": (0, 1, 2, 3)},
        {**err(0, "fr_finding", "collective mismatch", t=2, line=2), "expected_ranks": (0, 1)},
    ]
    size = group_size(incident(steps(2, 1), errors))
    assert size.size == 4 and "expected ranks" in size.basis


def test_an_all_gather_of_one_element_per_rank_states_the_group_size():
    """Four ranks gather one element each into four: the group size (4) would be unknown, and no
    culprit could ever be counted against it."""
    rows = [ev(r, 1, op="all_gather", shape=(1,), out_shape=(4,)) for r in range(4)]
    size = group_size(incident(rows))
    assert size.size == 4 and "all_gather" in size.basis


def test_one_gather_record_alone_states_the_group_size():
    """A single rank's record of an all_gather of 8 into 16 elements: the group size 2 would be
    lost (the size stage would fail on a single ratio)."""
    size = group_size(incident([ev(0, 1, op="all_gather", shape=(8,), out_shape=(16,))]))
    assert size.size == 2


def test_records_without_size_columns_state_no_size_and_do_not_fail():
    """Events with no numel columns at all: the group size would not be "unknown" but the size
    stage would fail, and the diagnosis would carry a failed-rule note instead of a size."""
    inc = incident(steps(2, 2))
    inc.events = inc.events.drop(columns=["numel_in", "numel_out"])
    size = group_size(inc)
    assert size.size is None and size.basis.startswith("unknown")


# --- rank_state ---------------------------------------------------------------------------------


def test_events_without_a_source_column_still_give_each_ranks_sources():
    """Events read without a source column: the whole rank-state table would be lost, not only
    the events' part of each rank's sources."""
    inc = incident(steps(2, 2), [err(1, "exception", "ValueError: bad batch", t=3)])
    inc.events = inc.events.drop(columns=["source"])
    st = _st(inc)
    assert st.loc[1, "sources"] == ("test",) and st.loc[0, "sources"] == ()
    assert list(st["last_seq"]) == [2, 2]


def test_a_record_with_no_source_names_no_source_for_another_rank():
    """Rank 1's record names no source: rank 0 would be said to have been read from the Flight
    Recorder dump that only rank 2's record comes from."""
    rows = [ev(0, 1, kind="trace"), {**ev(1, 1, kind="fr"), "source": None}, ev(2, 1, kind="fr")]
    st = _st(incident(rows))
    assert (st.loc[0, "sources"], st.loc[1, "sources"], st.loc[2, "sources"]) == (("trace",), (), ("fr",))


def test_a_record_without_a_counter_is_not_a_ranks_last_collective():
    """Rank 0 traced all_reduce seq 1-3 and has one barrier row with no counter and no seq: its last
    collective would be that barrier at seq -1, not all_reduce seq 3."""
    rows = steps(2, 3) + [{**ev(0, None, op="barrier", t=9), "seq_kind": None}]
    st = _st(incident(rows))
    assert (st.loc[0, "last_op"], st.loc[0, "last_seq"], st.loc[0, "last_seq_kind"]) == ("all_reduce", 3, "trace")


def test_a_group_column_of_plain_strings_gives_the_same_rank_state():
    """The process-group column as plain strings instead of a category: the rank-state table would
    fail whole (every rank's last collective lost)."""
    inc = incident(steps(2, 3) + [ev(1, 4)])
    inc.events["pg"] = inc.events["pg"].astype(object)
    st = _st(inc)
    assert dict(st["last_seq"]) == {0: 3, 1: 4}


def test_the_first_error_keeps_its_first_300_characters():
    """The rank-state table (and the JSON) quotes a rank's first error: it would lose the last
    character of the 300 it promises to keep."""
    msg = "ValueError: " + "".join(chr(ord("a") + i % 26) for i in range(400))
    st = _st(incident(steps(1, 1), [err(0, "exception", msg, t=2)]))
    assert st.loc[0, "first_error"] == msg[:300]


def test_a_heartbeat_or_watchdog_status_failure_is_a_timeout():
    """A rank whose first failure is the heartbeat monitor's timeout, or the watchdog's failure
    status line, would be shown as "peer-gone" (a lost connection) instead of "timed-out"."""
    errors = [
        err(0, "heartbeat", "Heartbeat monitor timed out! Process will be terminated after dumping debug info.", t=5),
        err(
            1,
            "watchdog_status",
            "[PG 0 Rank 1] failure detected by watchdog at work sequence id: 3 PG status: last enqueued work: 3, "
            "last completed work: 2",
            t=5,
        ),
    ]
    st = _st(incident(steps(2, 2), errors))
    assert (st.loc[0, "first_error_kind"], st.loc[1, "first_error_kind"]) == ("heartbeat", "watchdog_status")
    assert (st.loc[0, "status"], st.loc[1, "status"]) == ("timed-out", "timed-out")


def test_a_size_past_int64_read_through_float_is_unknown_not_a_failed_table():
    """A record whose element count, read through float64, lies past int64 (+-1e19): the whole
    rank-state table would fail instead of that one size being unknown."""
    inc = incident(steps(2, 1))
    inc.events["numel_in"] = pd.Series([1e19, -1e19], dtype="float64")
    st = _st(inc)
    assert st["last_numel_in"].isna().all() and list(st["last_seq"]) == [1, 1]


# --- positions ----------------------------------------------------------------------------------


def _where(pos: pd.DataFrame) -> set:
    return {(int(r), pg, c, int(p)) for r, pg, c, p in zip(pos["rank"], pos["pg"], pos["counter"], pos["position"])}


def test_a_ranks_place_in_one_group_is_never_another_ranks_place_in_another():
    """Ranks 0 and 1 reached seq 3 of group 0, rank 0 also seq 7 of group 1: rank 1 would be said to
    have reached 7 (in group 1) and its place in group 0 would vanish."""
    pos = positions(incident(steps(2, 3) + [ev(0, 7, pg="1")]))
    assert _where(pos) == {(0, "0", "trace", 3), (0, "1", "trace", 7), (1, "0", "trace", 3)}


def test_one_timeout_seen_twice_is_one_place_where_the_rank_is_stuck():
    """Rank 1's record of work seq 3 says timed out and its watchdog line says so too (no group
    named): it would count as stuck at two places, and be left out of the comparison of where the
    ranks stopped as if its counter mixed several groups."""
    rows = [ev(r, s, kind="work", pg=None, shape=None, numel_in=8) for r in range(2) for s in (1, 2)]
    rows.append(ev(1, 3, kind="work", pg=None, shape=None, numel_in=8, state="timed_out"))
    errors = [err(1, "watchdog_timeout", "Watchdog caught collective operation timeout", t=9, seq=3, seq_kind="work")]
    pos = positions(incident(rows, errors)).set_index("rank")
    assert (pos.loc[1, "position"], pos.loc[1, "stuck_places"], pos.loc[0, "stuck_places"]) == (3, 1, 0)


def test_a_record_that_timed_out_says_the_rank_is_stuck_there():
    """Rank 1's records of work seq 3 and 5 timed out (no group named): it would count as stuck
    nowhere, and a counter that mixes several groups' collectives would be compared as one."""
    rows = steps(2, 2, kind="work", pg=None)
    rows += [ev(1, 3, kind="work", pg=None, state="timed_out"), ev(1, 5, kind="work", pg=None, state="timed_out")]
    pos = positions(incident(rows)).set_index("rank")
    assert (pos.loc[1, "position"], pos.loc[1, "stuck_places"]) == (5, 2)
    pos = positions(incident(steps(2, 2, kind="work") + [ev(1, 3, kind="work", state="timed_out")]))
    assert pos.set_index("rank").loc[1, "stuck_places"] == 1


def test_counters_that_are_not_positions_give_no_position():
    """A desync report's per-rank '#N' and NCCL's opCount are not positions: rank 0 would be said to
    have reached #9 on a counter no other rank is compared on."""
    rows = steps(2, 3) + [ev(0, 9, kind="desync"), ev(1, 4, kind="nccl_opcount")]
    assert _where(positions(incident(rows))) == {(0, "0", "trace", 3), (1, "0", "trace", 3)}


def test_errors_without_a_seq_column_leave_the_records_positions():
    """Errors read without a seq column: positions (and so who is behind) would be lost whole."""
    inc = incident(steps(2, 3) + [ev(0, 4)], [err(1, "exception", "ValueError: x", t=9)])
    inc.errors = inc.errors.drop(columns=["seq"])
    assert _where(positions(inc)) == {(0, "0", "trace", 4), (1, "0", "trace", 3)}


def test_a_progress_row_that_names_no_last_collective_is_no_position():
    """Rank 1's progress row names no last enqueued collective: rank 1 would be placed at seq -1,
    behind everyone."""
    progress = [
        dict(rank=0, pg="0", seq_kind="work", last_enqueued=5, last_completed=5),
        dict(rank=1, pg="0", seq_kind="work", last_enqueued=None, last_completed=None),
        dict(rank=None, pg="0", seq_kind="work", last_enqueued=4, last_completed=4),
    ]
    inc = Incident(progress=coerce("progress", progress))
    assert _where(positions(inc)) == {(0, "0", "work", 5)}


def test_a_record_naming_no_group_is_in_no_group_when_the_group_column_is_plain_strings():
    """With the process-group column as plain strings, rank 1's records name no group: rank 1 would
    be placed in group 0 and compared there with rank 0."""
    inc = incident(steps(1, 3) + steps(2, 2, pg=None)[2:])
    inc.events["pg"] = inc.events["pg"].astype(object)
    assert _where(positions(inc)) == {(0, "0", "trace", 3), (1, None, "trace", 2)}


def test_records_with_only_rank_seq_and_counter_columns_still_give_positions():
    """Records with only the rank, seq and counter columns: no rank would have a position, and who
    is behind could not be said."""
    events = pd.DataFrame({"rank": [0, 1, 1], "seq": [3, 2, 1], "seq_kind": ["trace", "trace", "trace"]})
    pos = positions(Incident(events=events))
    assert dict(zip(pos["rank"], pos["position"])) == {0: 3, 1: 2}


def test_an_error_that_names_no_rank_gives_no_position():
    """A watchdog line whose rank is unknown (work seq 3): a rank -1 would appear behind everyone at
    seq 3."""
    errors = [
        err(None, "watchdog_timeout", "Watchdog caught collective operation timeout", t=9, seq=3, seq_kind="work")
    ]
    pos = positions(incident(steps(2, 5, kind="work"), errors))
    assert _where(pos) == {(0, "0", "work", 5), (1, "0", "work", 5)}


# --- survivors of the campaign's second sitting (bbf9b12) ---------------------------------------


def test_a_world_of_one_is_believed_and_of_zero_less_or_2_24_is_not():
    """A world size of 1 (one process) stated by the records or by a rank would be dropped, and one
    of 0 or 2**24 believed: the group a majority is counted against would be wrong."""
    for world, expected in ((1, 1), (0, None), (2**24, None)):
        assert group_size(incident([ev(0, 1, world_size=world)])).size == expected, world
        assert group_size(incident(steps(1, 1), ranks=[dict(rank=0, world_size=world)])).size == expected, world


def test_records_without_a_world_size_column_leave_a_ranks_statement():
    """Records read without a world-size column: the size a rank states (4) would be lost with the
    whole size stage."""
    inc = incident(steps(2, 1), ranks=[dict(rank=0, world_size=4)])
    inc.events = inc.events.drop(columns=["world_size"])
    size = group_size(inc)
    assert size.size == 4 and "own statement" in size.basis


def test_a_reduce_scatter_into_one_element_per_rank_states_the_group_size():
    """Four ranks reduce-scatter 4 elements into 1 each: the group size (4) would be unknown."""
    rows = [ev(r, 1, op="reduce_scatter", shape=(4,), out_shape=(1,)) for r in range(4)]
    assert group_size(incident(rows)).size == 4


def test_a_reduce_scatter_with_an_empty_output_states_no_group_size():
    """A reduce_scatter whose output is empty (8 elements in, 0 out) states no ratio: the size stage
    would fail on an infinite ratio instead of saying the size is unknown."""
    rows = [ev(r, 1, op="reduce_scatter", shape=(8,), out_shape=(0,)) for r in range(2)]
    size = group_size(incident(rows))
    assert size.size is None and size.basis.startswith("unknown")


def test_an_uneven_all_to_all_states_no_group_size():
    """An all_to_all_single sending 8 elements and receiving 4 (uneven splits, 4 ranks): a group of
    2 would be read from it, and a culprit counted against it."""
    rows = [ev(r, 1, op="all_to_all_single", shape=(8,), out_shape=(4,)) for r in range(4)]
    assert group_size(incident(rows)).size is None


def test_progress_rows_without_a_rank_column_leave_the_rank_state():
    """Progress rows read without a rank column: the whole rank-state table would be lost."""
    inc = incident(steps(2, 2))
    inc.progress = pd.DataFrame({"pg": ["0"], "seq_kind": ["work"], "last_enqueued": [3]})
    assert dict(_st(inc)["last_seq"]) == {0: 2, 1: 2}


def test_a_group_of_exactly_the_listing_limit_lists_every_absent_rank(monkeypatch):
    """A stated group of exactly as many ranks as are listed one by one (2**16; 8 here, the limit
    lowered to keep the test fast) with 2 ranks seen: the silent ranks would not be rows of the
    table, so no rank would be shown absent."""
    from denpex_nb.analysis import state
    from denpex_nb.analysis.state import GroupSize

    monkeypatch.setattr(state, "MAX_LISTED_RANKS", 8)
    st = rank_state(incident(steps(2, 1)), GroupSize(8, "test"))
    assert list(st.loc[~st["present"], "rank"]) == [2, 3, 4, 5, 6, 7]
    assert len(rank_state(incident(steps(2, 1)), GroupSize(9, "test"))) == 2


def test_a_record_on_an_unknown_counter_is_not_a_ranks_last_collective():
    """Rank 0 traced all_reduce seq 1-3 and has a barrier at seq 9 on no known counter: its last
    collective would be that barrier at 9."""
    rows = steps(2, 3) + [{**ev(0, 9, op="barrier"), "seq_kind": None}]
    st = _st(incident(rows))
    assert (st.loc[0, "last_op"], st.loc[0, "last_seq"]) == ("all_reduce", 3)


def test_a_record_without_a_seq_gives_no_last_seq():
    """Rank 1's only traced record has no seq: it would be said to have reached seq -1."""
    st = _st(incident(steps(1, 3) + [ev(1, None, t=5)]))
    assert st.loc[0, "last_seq"] == 3 and pd.isna(st.loc[1, "last_seq"])


def test_negative_rank_numbers_get_their_rows():
    """A record names rank -1 (a hostile or garbled prefix) beside rank 0: the whole rank-state
    table would fail instead of showing both."""
    st = _st(incident([ev(-1, 2), ev(0, 3)]))
    assert dict(st["last_seq"]) == {-1: 2, 0: 3}


def test_records_of_a_named_and_an_unnamed_group_give_each_rank_its_last_collective():
    """Rank 0's records name group 0 and rank 1's name none: the rank-state table would fail whole."""
    st = _st(incident(steps(1, 3) + steps(2, 2, pg=None)[2:]))
    assert (st.loc[0, "last_seq"], st.loc[0, "last_pg"], st.loc[1, "last_seq"]) == (3, "0", 2)
    assert pd.isna(st.loc[1, "last_pg"])


def test_an_error_without_a_time_is_not_the_first_error_over_one_with_a_time():
    """Rank 0 has an exception with no time and an OOM at a known time: the untimed exception would
    be called its first error, and the time of its first error lost."""
    errors = [err(0, "exception", "ValueError: bad batch"), err(0, "oom", "torch.OutOfMemoryError: CUDA", t=5, line=2)]
    st = _st(incident(steps(1, 1), errors))
    assert st.loc[0, "first_error_kind"] == "oom" and pd.notna(st.loc[0, "first_error_t"])


def test_a_process_known_only_by_its_pid_does_not_cost_the_rank_state():
    """The launcher's table has a row for a process whose rank is unknown (pid only): the whole
    rank-state table would fail."""
    st = _st(incident(steps(2, 1), ranks=[dict(rank=None, pid=4242, exit_code=1), dict(rank=1, exit_code=0)]))
    assert (st.loc[1, "exit_code"], st.loc[1, "status"]) == (0, "exited") and pd.isna(st.loc[0, "exit_code"])


def test_a_watchdog_abort_is_a_timeout():
    """A rank whose first failure is the watchdog's abort after a collective timed out would be
    shown as "peer-gone" (a lost connection) instead of "timed-out"."""
    msg = "Some NCCL operations have failed or timed out. To avoid data inconsistency, we are taking the entire process down."
    st = _st(incident(steps(2, 1), [err(1, "watchdog_abort", msg, t=5)]))
    assert (st.loc[1, "first_error_kind"], st.loc[1, "status"]) == ("watchdog_abort", "timed-out")


def test_a_group_named_by_a_number_is_shown_by_that_number():
    """A reader that names the process group by the number 0 (not the text "0"): the rank-state
    table would show no group for each rank's last collective."""
    st = _st(incident(steps(2, 2, pg=0)))
    assert list(st["last_pg"]) == ["0", "0"]


def test_a_negative_exit_code_is_shown():
    """A launcher reports rank 1's exit code as -9 (killed by SIGKILL, Python's convention): the
    rank-state table would show no exit code."""
    st = _st(incident(steps(2, 1), ranks=[dict(rank=1, exit_code=-9)]))
    assert st.loc[1, "exit_code"] == -9 and st.loc[1, "status"] == "error"


def test_counters_anywhere_in_int64_are_shown_as_read():
    """Counters of 2**62, -(2**62) - 1 and -(2**63) (hostile logs; int64 holds them all): a rank's
    last seq would be shown unknown instead of what its record says."""
    values = {0: 2**62, 1: -(2**62) - 1, 2: -(2**63), 3: 2**63 - 1}
    st = _st(incident([ev(r, s, t=r) for r, s in values.items()]))
    assert dict(st["last_seq"]) == values


def test_a_size_of_exactly_2_63_read_through_float_is_unknown_not_a_failed_table():
    """A record whose element count, read through float64, is exactly 2**63 (one past int64): the
    whole rank-state table would fail instead of that one size being unknown."""
    inc = incident(steps(2, 1))
    inc.events["numel_in"] = pd.Series([2.0**63, 8.0], dtype="float64")
    st = _st(inc)
    assert pd.isna(st.loc[0, "last_numel_in"]) and st.loc[1, "last_numel_in"] == 8


def test_a_hand_built_frame_whose_groups_are_plain_strings_still_gives_each_ranks_last_collective():
    """An events frame built by hand (pg as plain strings, not categorical): ranks 0 and 1 in group
    "a" at seqs 1-3, rank 0 also in group "b" at seq 1. Each rank's last collective is read from its
    most populous group; the rank state is made, not lost to a failed step (the user would be shown
    no rank's last collective, and no absent rank)."""
    rows = [ev(r, s, pg="a") for r in (0, 1) for s in (1, 2, 3)] + [ev(0, 1, pg="b")]
    frame = coerce("events", rows)
    frame["pg"] = frame["pg"].astype(object)
    st = rank_state(Incident(events=frame)).set_index("rank")
    assert st.loc[[0, 1], "last_seq"].tolist() == [3, 3]

"""Pins more decisions of ``rules`` that the full semantic mutation campaign at bbf9b12
(benchmarks/bench_mutation.py, issue #15) left unpinned, each on a small input a user would see:

- own failures: a rank's own failure is not blamed on it when it is the only rank the evidence
  knows (the group may be that rank); a script's error about its local rank, or a command it ran
  that exited non-zero, is its own (only a launcher's CalledProcessError about a worker is not); a
  torchelastic agent line with a crash signal is the rank's own failure; another rank stopped by
  an interrupt (its exception type known) does not hide a rank's own failure;
- group sizes: a divergence is counted against the largest group size its records state (floats
  too); stuck points in a world too large to list count against the stated size, whatever the
  default group is called; a checkpoint exception counts the ranks it lists in the group;
- views: a collective with several input tensors keeps every shape (lists too); a rank's view keeps
  the state its record says, completed when another record of it completed;
- evidence lines keep the file and line their row has, and say line 0 (never line 1, a real line)
  when the row has none: divergences, error rows, progress counters;
- quoted texts: DETAIL's verdict (300 characters), a checkpoint exception (200) are cut, not
  dropped; gloo's enforce sizes quoted are those of the first evidence line;
- an NCCL error about the local adapter is still reported when no reader named the host, and blames
  no node unless every reporter is known to be on that one; a RAS line with one count left names
  the ranks it lists; a desync report naming one rank names it; an NCCL COLL row naming no process
  is left out; a DETAIL pair at two sequence numbers is dated at no counter;
- texts: a divergence of no named group says no pg; an undetermined failure names the op of its
  first evidence line; a basis never says a group of 0 ranks;
- progress counters: a rank's latest snapshot is its position; rows without a rank or a count are
  left out; the world's stated size counts for ``default_pg``; the summary says how far the ranks
  ahead went.
"""

from __future__ import annotations

import pandas as pd
import pytest

from denpex_nb import diagnose
from denpex_nb.incident import Incident, coerce
from tests.analysis._frames import T0, err, ev, incident, steps


def _one(d, rule):
    (f,) = [f for f in d.findings if f.rule == rule]
    return f


def test_a_lone_ranks_exception_is_not_blamed_on_it():
    """Only rank 0 is in the evidence and it raised: the group may be rank 0 alone, so naming it the
    culprit (at any confidence) would single out a rank the evidence cannot set apart."""
    d = diagnose(incident(events=[ev(0, 1)], errors=[err(0, "exception", "ValueError: bad batch", t=5)]))
    f = _one(d, "own-failure")
    assert f.class_id == "rank-crash"
    assert list(f.culprit_ranks) == []


def test_a_checkpoint_exception_listing_the_only_known_rank_names_no_culprit():
    """DCP's CheckpointException lists rank 0, the only rank seen: every rank of the group (as far
    as the evidence knows) is listed, so no rank is singled out."""
    d = diagnose(incident(errors=[err(0, "exception", "CheckpointException ranks:dict_keys([0])", t=5)]))
    f = _one(d, "checkpoint-ranks")
    assert list(f.culprit_ranks) == []
    assert "every rank" in f.culprit_basis


def test_a_collective_of_several_tensors_is_compared_and_keeps_every_shape():
    """Each rank passes two tensors ((8,), (4,)); rank 2 calls broadcast where ranks 0 and 1 call
    all_reduce: an op mismatch naming rank 2, each view showing both shapes."""
    evs = [ev(r, 1) for r in range(3)] + [ev(0, 2), ev(1, 2), ev(2, 2, op="broadcast")]
    for e in evs[3:]:
        e["in_shapes"], e["numel_in"] = ((8,), (4,)), 12
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert f.class_id == "op-mismatch" and list(f.culprit_ranks) == [2]
    assert all(v.shapes == [[8], [4]] for v in f.ranks.values())


def test_a_ranks_view_keeps_the_state_its_record_says():
    """Rank 2's broadcast only started (never completed): its view says started, not completed."""
    evs = [ev(r, 1) for r in range(3)] + [ev(0, 2), ev(1, 2), ev(2, 2, op="broadcast", state="started")]
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert f.ranks[2].state == "started"
    assert f.ranks[0].state == "completed"


def test_a_divergence_row_without_a_line_is_cited_at_line_0():
    """Records that carry no line number are cited at line 0 (no line), never line 1, which would
    send the reader to the file's first line."""
    evs = [ev(r, 1) for r in range(3)] + [ev(0, 2), ev(1, 2), ev(2, 2, op="broadcast")]
    for e in evs:
        e["line"] = None
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert f.evidence and {e.line for e in f.evidence} == {0}


def test_an_error_row_without_a_line_is_cited_at_line_0():
    """gloo's enforce line read without a line number: cited at line 0, not line 1."""
    msg = "[enforce fail at gloo/transport/tcp/buffer.cc:72] 8 vs 16"
    f = _one(diagnose(incident(steps(2, 1), [err(1, "gloo_enforce", msg, t=1, line=None)])), "gloo-size")
    assert [(e.file, e.line) for e in f.evidence] == [("rank1.log", 0)]


def test_a_divergence_is_counted_against_the_largest_group_size_its_records_state():
    """Rank 0's record says the group has 8 ranks, ranks 1 and 2 say 3: two of eight is no
    majority, so rank 2's broadcast against two all_reduces names no culprit."""
    evs = [ev(r, 1) for r in range(3)] + [
        ev(0, 2, world_size=8),
        ev(1, 2, world_size=3),
        ev(2, 2, op="broadcast", world_size=3),
    ]
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert list(f.culprit_ranks) == []
    assert "group of 8" in f.culprit_basis


def test_details_verdict_text_is_quoted_up_to_300_characters():
    """DETAIL's message past 'aspects:' is quoted in the summary, cut at 300 characters."""
    tail = "Op type: " + "".join(chr(ord("a") + i % 26) for i in range(400))
    msg = "Detected mismatch between collectives on ranks. Collectives differ in the following aspects: " + tail
    f = _one(diagnose(incident(errors=[err(0, "detail_mismatch", msg, t=1)])), "detail-text")
    assert f.summary == "DETAIL fingerprint check: " + tail[:300]


def test_a_checkpoint_exception_is_quoted_up_to_200_characters():
    msg = "CheckpointException ranks:dict_keys([1]) " + "".join(chr(ord("a") + i % 26) for i in range(300))
    f = _one(diagnose(incident(steps(4, 1), errors=[err(0, "exception", msg, t=5)])), "checkpoint-ranks")
    assert f.summary.endswith("not a collective failure. " + msg[:200])


def test_gloos_enforce_sizes_quoted_are_those_of_the_first_evidence_line():
    """Two ranks abort with different byte counts: the summary quotes rank 0's (8 vs 16), the line
    cited first, not rank 1's (32 vs 64)."""
    errs = [
        err(0, "gloo_enforce", "[enforce fail at gloo/transport/tcp/buffer.cc:72] 8 vs 16", t=1),
        err(1, "gloo_enforce", "[enforce fail at gloo/transport/tcp/buffer.cc:72] 32 vs 64", t=2),
    ]
    f = _one(diagnose(incident(steps(2, 1), errs)), "gloo-size")
    assert "(8 bytes sent, 16 expected)" in f.summary
    assert f.evidence[0].rank == 0


def test_an_nccl_local_adapter_error_without_a_host_is_still_an_nccl_error():
    """Rank 0's NCCL reports a local adapter fault, and no reader named its host: still an
    nccl-error finding (the adapter's host cannot be named, so no culprit by that statement)."""
    msg = "NCCL WARN NET/IB : Got async event : local catastrophic error"
    d = diagnose(incident(errors=[err(0, "nccl_error", msg, t=5)]))
    f = _one(d, "nccl-error")
    assert f.class_id == "nccl-error" and list(f.culprit_ranks) == []
    assert not any("failed on this input" in n for n in d.notes)


def _prog(rank, enq, pg="0", line=1):
    return dict(
        rank=rank,
        pg=pg,
        seq_kind="fr",
        last_enqueued=enq,
        last_started=enq,
        last_completed=enq,
        source="test",
        file=f"rank{rank}.txt",
        line=line,
    )


def test_a_ranks_latest_progress_snapshot_is_its_position():
    """Rank 0's counters were dumped twice (seq 3, then 9), ranks 1 and 2 at 9: every rank reached 9,
    so the counters do not disagree."""
    p = [_prog(0, 3, line=1), _prog(0, 9, line=2), _prog(1, 9), _prog(2, 9)]
    d = diagnose(Incident(progress=coerce("progress", p)))
    assert not [f for f in d.findings if f.rule == "progress"]


def test_the_worlds_stated_size_counts_for_progress_of_the_group_named_default_pg():
    """Events state a world of 8; ranks 0 and 1 of ``default_pg`` last enqueued seq 5, rank 2 seq 9:
    two of eight is no majority, so neither side is named."""
    p = [_prog(0, 5, pg="default_pg"), _prog(1, 5, pg="default_pg"), _prog(2, 9, pg="default_pg")]
    inc = Incident(progress=coerce("progress", p), events=coerce("events", [ev(0, 1, world_size=8, kind="other")]))
    f = _one(diagnose(inc), "progress")
    assert list(f.culprit_ranks) == []
    assert "group of 8" in f.culprit_basis


def test_progress_evidence_keeps_each_rows_file_and_line_and_says_0_for_none():
    """Rank 0's counter row is line 7, rank 1's line 8, rank 2's has no line: cited at 7, 8 and 0,
    each in its own file."""
    p = [_prog(0, 3, line=7), _prog(1, 9, line=8), _prog(2, 9, line=None)]
    f = _one(diagnose(Incident(progress=coerce("progress", p))), "progress")
    assert {e.rank: (e.file, e.line) for e in f.evidence} == {
        0: ("rank0.txt", 7),
        1: ("rank1.txt", 8),
        2: ("rank2.txt", 0),
    }


def test_progress_summary_says_how_far_the_ranks_ahead_went():
    """Rank 0 last enqueued seq 3, rank 1 seq 7, rank 2 seq 9: the ranks ahead went up to 9."""
    p = [_prog(0, 3), _prog(1, 7), _prog(2, 9)]
    f = _one(diagnose(Incident(progress=coerce("progress", p))), "progress")
    assert "rank 0 last enqueued seq 3" in f.summary and "(up to 9)" in f.summary


def test_a_progress_row_of_an_unknown_rank_is_left_out():
    """A counter row no rank could be given to (and one without a count) beside rank 0 at seq 3 and
    ranks 1 and 2 at 9: the three known ranks are still compared and rank 0 named behind."""
    p = [_prog(0, 3), _prog(1, 9), _prog(2, 9), _prog(None, 9), _prog(3, None)]
    d = diagnose(Incident(progress=coerce("progress", p)))
    f = _one(d, "progress")
    assert list(f.culprit_ranks) == [0]
    assert not any("failed on this input" in n for n in d.notes)


def test_world_sizes_read_back_as_floats_count_the_same():
    """The same records as above with the world sizes as floats (a frame saved and read back, its
    missing sizes turned NaN): still counted against the largest, 8, so no culprit."""
    evs = [ev(r, 1) for r in range(3)] + [
        ev(0, 2, world_size=8),
        ev(1, 2, world_size=3),
        ev(2, 2, op="broadcast", world_size=3),
    ]
    inc = incident(events=evs)
    inc.events["world_size"] = inc.events["world_size"].astype("float64")
    f = _one(diagnose(inc), "divergences")
    assert list(f.culprit_ranks) == []
    assert "group of 8" in f.culprit_basis


def test_a_detail_pair_with_shapes_as_lists_is_still_compared():
    """An Incident assembled by hand from JSON carries shapes as lists of lists, not tuples: DETAIL's
    pair (rank 0 sends [[8], [4]], rank 1 [[8], [2]]) is still a shape mismatch."""
    evs = [
        ev(0, 3, kind="detail", state="failed", file="rank0.log"),
        ev(1, 3, kind="detail", state="failed", file="rank0.log"),
    ]
    evs[0]["in_shapes"], evs[1]["in_shapes"] = [[8], [4]], [[8], [2]]
    found = [f for f in diagnose(incident(events=evs)).findings if f.rule == "fingerprint-pairs"]
    assert [f.class_id for f in found] == ["shape-mismatch"]
    assert found[0].ranks[1].shapes == [[8], [2]]


def test_an_exception_about_a_local_rank_or_a_failed_command_is_the_ranks_own():
    """Only a launcher's CalledProcessError about a worker (non-zero exit status *and* local_rank)
    is not the line's own failure: a script's ValueError about its local rank, or a subprocess it ran
    (make) that exited non-zero, is the rank's own."""
    from denpex_nb.analysis.rules import own_failures

    for msg in (
        "ValueError: local_rank 5 is not below the 4 visible GPUs",
        "subprocess.CalledProcessError: Command '['make']' returned non-zero exit status 2.",
    ):
        assert own_failures(incident(errors=[err(0, "exception", msg)]).errors) == [True], msg


def test_a_torchelastic_agent_line_with_a_crash_signal_is_that_ranks_own_failure():
    """torchelastic's agent says local rank 2 failed with exit code -11 (SIGSEGV): rank 2's status is
    failed (its own fault), not a mere error."""
    row = err(2, "agent", "failed (exitcode: -11) local_rank: 2 (pid: 4242) of binary: /usr/bin/python", t=5)
    row["signal"] = "SIGSEGV"
    d = diagnose(incident(steps(4, 2), [row]))
    assert d.rank_state.set_index("rank").loc[2, "status"] == "failed"


def test_a_ras_message_with_one_count_names_the_listed_ranks():
    """RAS lists ranks 5 and 6, and the only count left in the line (the rest cut) is theirs: one count
    cannot show them ahead of anyone, so RAS's statement names them."""
    msg = "RAS MISMATCH: 2 ranks have launched up to operation 641"
    d = diagnose(incident(errors=[err(0, "nccl_ras", msg, related=(5, 6), t=1)]))
    assert list(_one(d, "nccl-ras").culprit_ranks) == [5, 6]


def test_a_checkpoint_exception_counts_the_listed_ranks_in_the_group():
    """Only rank 0's log is read; its CheckpointException lists ranks 1 and 2: ranks 0-2 exist, and
    two listed of three are fewer than the group, so ranks 1 and 2 are named by that statement."""
    d = diagnose(incident(errors=[err(0, "exception", "CheckpointException ranks:dict_keys([1, 2])", t=5)]))
    assert list(_one(d, "checkpoint-ranks").culprit_ranks) == [1, 2]


def test_another_ranks_interrupt_does_not_hide_a_ranks_own_failure():
    """Rank 0 raised ValueError; rank 1 was stopped (KeyboardInterrupt), its exception type known: no
    failure of unknown kind, so rank 0 is named, at high confidence (ranks 2 and 3 are quiet)."""
    e0 = err(0, "exception", "ValueError: bad batch", t=5)
    e1 = err(1, "exception", "KeyboardInterrupt", t=6)
    e0["exc_type"], e1["exc_type"] = "ValueError", "KeyboardInterrupt"
    f = _one(diagnose(incident(steps(4, 2), [e0, e1])), "own-failure")
    assert list(f.culprit_ranks) == [0] and f.confidence == "high"


def _timeout(rank, seq, pg):
    e = err(rank, "watchdog_timeout", "Watchdog caught collective operation timeout", t=5, op="all_reduce", seq=seq)
    e["seq_kind"], e["pg"] = "work", pg
    return e


@pytest.mark.parametrize("pg", ["0", "default_pg", None])
def test_stuck_points_in_a_world_too_large_to_list_count_against_the_stated_size(pg):
    """A world of 100,000 ranks (stated; too many for the rank state to list each), three seen: ranks
    0 and 1 stuck at seq 12, rank 2 at seq 9. Two of 100,000 is no majority: no culprit, whether the
    default group is named '0', 'default_pg' or not at all."""
    errs = [_timeout(0, 12, pg), _timeout(1, 12, pg), _timeout(2, 9, pg)]
    f = _one(diagnose(incident(events=[ev(0, 1, world_size=100_000, kind="other")], errors=errs)), "stuck-points")
    assert list(f.culprit_ranks) == []
    assert "group of 100000" in f.culprit_basis


def test_an_undetermined_failure_names_the_op_of_its_first_evidence_line():
    """Rank 0 timed out in all_reduce, rank 1 in broadcast, no sequence numbers: nothing tells them
    apart, and the finding's op is that of the line it cites first (rank 0's all_reduce)."""
    errs = [
        err(0, "watchdog_timeout", "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)", t=5),
        err(1, "watchdog_timeout", "Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST)", t=6),
    ]
    errs[0]["op"], errs[1]["op"] = "all_reduce", "broadcast"
    f = _one(diagnose(incident(errors=errs)), "undetermined-failure")
    assert f.evidence[0].rank == 0 and f.op == "all_reduce"


def test_a_failure_reported_by_ranks_never_speaks_of_a_group_of_0():
    """Only failure signals were read (ranks 1 and 2 printed a ValueError; no rank state): the ranks
    are not named, and the reason given never says the group holds 0 ranks (two ranks reported)."""

    def sig(rank, line):
        return dict(
            rank=rank,
            t_wall=pd.Timestamp(T0 + line, unit="s", tz="UTC"),
            file=f"rank{rank}.log",
            line=line,
            severity="error",
            family="other",
            failure=True,
            text="ValueError: bad batch in loader",
        )

    d = diagnose(Incident(signals=coerce("signals", [sig(1, 3), sig(2, 4)])))
    f = _one(d, "failure-signals")
    assert f.class_id == "rank-crash" and list(f.culprit_ranks) == []
    assert "group of 0" not in f.culprit_basis


def test_a_divergence_in_a_group_with_no_name_says_no_pg():
    """The events name no process group (None): the summary says where without 'of pg None'."""
    evs = [ev(0, 2, pg=None), ev(1, 2, op="broadcast", pg=None), ev(0, 1, pg=None), ev(1, 1, pg=None)]
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert "at trace seq 2:" in f.summary and "of pg" not in f.summary


def test_a_desync_report_naming_one_rank_names_it():
    """The desync report says rank 0 is the lagging rank, and rank 0 is the only rank in the
    evidence: one rank named is a statement about that rank, not 'every rank of the group'."""
    d = diagnose(incident(errors=[err(0, "desync_report", "[Rank 0]: ranks [0] are the lagging ranks", related=(0,))]))
    f = _one(d, "desync-report")
    assert list(f.culprit_ranks) == [0] and f.confidence == "high"


@pytest.mark.parametrize("host1", [None, "nodeB"])
def test_a_local_adapter_fault_blames_no_node_unless_every_reporter_is_on_that_one(host1):
    """Ranks 0 (on nodeA) and 1 (host unknown, or on nodeB) report their local adapter's fault: the
    reporters are not known to share one node, so no node's ranks are named (and the NCCL error is
    still reported)."""
    msg = "NCCL WARN NET/IB : Got async event : local catastrophic error"
    e0, e1 = err(0, "nccl_error", msg, t=5), err(1, "nccl_error", msg, t=5)
    e0["host"], e1["host"] = "nodeA", host1
    f = _one(diagnose(incident(errors=[e0, e1])), "nccl-error")
    assert list(f.culprit_ranks) == []
    assert "adapter" not in f.culprit_basis


def test_a_fingerprint_pair_at_two_sequence_numbers_is_dated_at_no_counter():
    """DETAIL's pair: rank 0 at seq 3, rank 1 at seq 5 (and another op): the finding has no seq, so
    it names no counter either (a counter without a number would place it nowhere)."""
    from denpex_nb.analysis.rules import Context, fingerprint_pairs

    rows = [
        ev(0, 3, kind="detail", state="failed", file="rank0.log"),
        ev(1, 5, op="broadcast", kind="detail", state="failed", file="rank0.log"),
    ]
    for r in rows:
        r["line"] = 7
    ctx = Context(incident=incident(rows), alignment=None, state=pd.DataFrame(), group_size=None)
    (f,) = fingerprint_pairs(ctx)
    assert f.class_id == "op-mismatch"
    assert (f.seq, f.seq_kind) == (None, None)


def test_an_nccl_coll_row_naming_no_process_is_left_out():
    """Four ranks' NCCL COLL lines at opCount 5 of a 4-rank communicator (rank 3 broadcasts, the
    others all_reduce) and one COLL row that names no process at all (no rank, no host:pid; the
    host column a string column, as load() makes it): that row is left out, rank 3 is still named."""

    def coll(rank, op="all_reduce", host=None, pid=None):
        row = ev(rank, 5, op=op, kind="nccl_opcount", shape=None, numel_in=1024, numel_out=1024, world_size=4)
        row.update(state=None, host=host, pid=pid, pg="0xc0", file=f"n-{rank}.log")
        return row

    rows = [coll(r, op="broadcast" if r == 3 else "all_reduce", host="node1", pid=100 + r) for r in range(4)]
    rows.append(coll(None))
    inc = incident(rows)
    inc.events["host"] = inc.events["host"].astype("string")
    inc.events["pid"] = inc.events["pid"].astype("Int64")
    f = _one(diagnose(inc), "nccl-opcounts")
    assert (f.class_id, list(f.culprit_ranks)) == ("op-mismatch", [3])


def test_a_rank_whose_other_record_completed_the_collective_is_shown_completed():
    """Rank 2's broadcast at seq 2 has a record that only started (with its shape) and another that
    says it completed (without a size): the view shows the sized record, and its state completed."""
    evs = [ev(r, 1) for r in range(3)] + [
        ev(0, 2),
        ev(1, 2),
        ev(2, 2, op="broadcast", state="started"),
        ev(2, 2, op="broadcast", state="completed", shape=None),
    ]
    f = _one(diagnose(incident(events=evs)), "divergences")
    assert (f.ranks[2].state, f.ranks[2].shapes) == ("completed", [[8]])


def test_a_checkpoint_finding_quotes_its_first_evidence_line():
    """Ranks 0 and 1 both print DCP's CheckpointException, worded differently: the summary quotes rank
    0's, the line cited first."""
    errs = [
        err(0, "exception", "CheckpointException ranks:dict_keys([2]) Traceback: FileNotFoundError shard_2", t=5),
        err(1, "exception", "CheckpointException ranks:dict_keys([2]) (printed again by rank 1)", t=6),
    ]
    f = _one(diagnose(incident(steps(4, 1), errors=errs)), "checkpoint-ranks")
    assert f.evidence[0].rank == 0
    assert f.summary.endswith("FileNotFoundError shard_2")

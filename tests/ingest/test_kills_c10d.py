"""Pins decisions of the c10d reader's watchdog and desync lines that the semantic mutation
campaign (benchmarks/bench_mutation.py, issue #15) found unpinned."""

from __future__ import annotations

from denpex_nb.ingest.c10d import C10dReader

from ._text_helpers import one, run

R = C10dReader()


def test_a_watchdog_timeout_keeps_how_long_the_collective_ran():
    out = run(
        R,
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:688] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
    )
    assert one(out.errors, kind="watchdog_timeout")["ran_for_ms"] == 600123


def test_a_dump_signal_from_this_local_rank_names_the_lines_rank():
    """'collective timeout from this local rank': the detector is the rank the line belongs to."""
    err = one(
        run(
            R,
            "[rank2]:[E412 1:1:1.1 x.cpp:1] [PG 0 Rank 2] Received a dump signal due to a collective timeout "
            "from this local rank and we will try our best to dump the debug info.",
        ).errors
    )
    assert err["related_ranks"] == (2,)


def test_a_desync_timeout_line_without_a_rank_prefix_takes_the_rank_it_names():
    out = run(R, "\t - [3] Timeout at collective: ALLREDUCE, #9")
    ev = one(out.events)
    assert (ev["rank"], ev["seq"], ev["op"], ev["state"]) == (3, 9, "all_reduce", "timed_out")


def test_the_lagging_ranks_of_a_desync_report_are_its_related_ranks():
    out = run(R, "\t - To our best knowledge, ranks [5, 16] are the lagging ranks that caused this timeout.")
    assert one(out.errors)["related_ranks"] == (5, 16)


def test_a_snapshot_line_counts_only_under_its_header():
    """'[0, 1] started ALLGATHER' without a '#N started ranks:' header above it makes no event; under
    the header it makes one per rank, and a later report line is read as one, not as a snapshot."""
    assert run(R, "\t     [0, 1] started ALLGATHER").events == []
    out = run(
        R,
        [
            "\t   #2417 started ranks:",
            "\t     [0, 1] started ALLGATHER",
            "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        ],
    )
    assert sorted((e["rank"], e["seq"], e["state"]) for e in out.events) == [(0, 2417, "started"), (1, 2417, "started")]


def test_a_worknccl_whose_last_field_is_the_op_keeps_the_whole_op_name():
    """A cut line (or an older field order) that ends with OpType: the op is read whole."""
    out = run(
        R,
        "[rank3]:[E ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=BROADCAST)",
    )
    assert one(out.errors, kind="watchdog_timeout")["op"] == "broadcast"


def test_a_worknccl_without_a_seqnum_is_read_without_a_seq():
    out = run(
        R,
        "[rank3]:[E ProcessGroupNCCL.cpp:1] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.",
    )
    err = one(out.errors, kind="watchdog_timeout")
    assert err["op"] == "all_reduce" and err.get("seq") is None


def test_a_dump_signal_from_a_rank_number_out_of_range_names_the_lines_rank():
    """'from rank 99999999999' is no rank (past int32): the detector is the line's own rank."""
    err = one(
        run(
            R,
            "[rank2]:[E412 1:1:1.1 x.cpp:1] [PG 0 Rank 2] Received a dump signal due to a collective timeout "
            "from rank 99999999999 and we will try our best to dump the debug info.",
        ).errors
    )
    assert err["related_ranks"] == (2,)


def test_a_group_torch_describes_as_undefined_or_empty_has_no_description():
    """torch prints ``(undefined)`` or ``()`` where a group was given no description: that is no
    description (``pg_desc`` missing), not one named "undefined" or "" (mutation campaign at 77a9529,
    _text.py pg_of)."""
    for desc, want in (("undefined", None), ("", None), ("tp_group", "tp_group")):
        out = run(
            R,
            f"[rank1]:[E218 04:54:22.8 ProcessGroupNCCL.cpp:616] [PG ID 2 PG GUID 5({desc}) Rank 1] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
            "Timeout(ms)=600000) ran for 600045 milliseconds before timing out.",
        )
        ev = one(out.events)
        assert ev["pg"] == "5" and ev["pg_desc"] == want, (desc, ev)

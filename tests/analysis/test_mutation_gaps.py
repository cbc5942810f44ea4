"""Behaviour that mutation testing (benchmarks/results/mutation.md) showed no other test pins down:
which rank started a failure when several failed, a crash known only by its exit code, the NCCL
opCount comparison's later classes and culprits, and what a timeout-undetermined verdict still says."""

from __future__ import annotations

import pandas as pd

from denpex_nb import diagnose
from denpex_nb.incident import Incident, coerce
from tests.analysis._frames import T0, err, ev, incident, steps


def _oom(rank, t=None):
    return err(rank, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", t=t)


def test_of_two_ranks_failing_on_their_own_the_earlier_one_initiated():
    errs = [_oom(3, t=50), _oom(1, t=20)]
    assert diagnose(incident(errors=errs)).initiating_rank == 1
    errs = [_oom(3, t=10), _oom(1, t=20)]
    assert diagnose(incident(errors=errs)).initiating_rank == 3


def test_of_two_ranks_failing_without_times_none_is_named_initiator():
    assert diagnose(incident(errors=[_oom(3), _oom(1)])).initiating_rank is None


def test_an_own_failure_outranks_earlier_timeouts_elsewhere():
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout",
            t=5,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in (0, 1, 3)
    ] + [_oom(2, t=60)]
    assert diagnose(incident(errors=errs)).initiating_rank == 2


def test_a_rank_known_dead_only_by_its_exit_code_initiated():
    """torchrun's exitcode -11 (SIGSEGV) with no signal name: that rank's own failure."""
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout",
            t=5,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in (0, 1, 3)
    ]
    dead = err(2, "exit", "local_rank: 2 (pid: 4242) exitcode: -11", t=60)
    dead["exit_code"] = -11
    assert diagnose(incident(errors=errs + [dead])).initiating_rank == 2


def _coll(rank, opcount, op="all_reduce", dtype="float32", numel=1024, nranks=4):
    row = ev(
        rank,
        opcount,
        op=op,
        kind="nccl_opcount",
        shape=None,
        numel_in=numel,
        numel_out=numel,
        dtype=dtype,
        world_size=nranks,
    )
    row["state"] = None
    return row


def test_nccl_opcount_dtype_mismatch_after_agreeing_ops_names_the_minority():
    """Same op everywhere, one rank's dtype differs: the op check must not stop the dtype check."""
    rows = [_coll(r, 5, dtype="float16" if r == 2 else "float32") for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("dtype-mismatch", [2], "high")
    assert d.first.op == "all_reduce" and d.first.seq == 5 and d.first.seq_kind == "nccl_opcount"
    assert d.first.ranks[2].op == "all_reduce"


def test_nccl_opcount_count_mismatch_is_a_shape_mismatch_with_its_culprit():
    rows = [_coll(r, 7, numel=512 if r == 0 else 1024) for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [0])
    assert all(e.line == 7 for e in d.first.evidence)


def test_timeout_undetermined_still_names_the_collective_that_hung_and_when():
    rows = [ev(r, 9, kind="work", shape=None, numel_in=1024, state="timed_out") for r in range(4)]
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, ...)",
            t=600 + r,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in range(4)
    ]
    d = diagnose(incident(rows, errs))
    f = d.first
    assert d.verdict == "timeout-undetermined" and d.culprit_ranks == []
    assert (f.op, f.seq, f.seq_kind) == ("all_reduce", 9, "work")
    assert f.t_wall == pd.Timestamp(T0 + 600, unit="s", tz="UTC") and len(f.evidence) == 4
    assert f.culprit_basis and f.culprit_basis.startswith("undetermined")


def test_json_form_keeps_its_keys_and_plain_values():
    """``denpex-nb diagnose --json`` / Diagnosis.to_dict(): the keys scripts read, and values json can write."""
    import json

    rows = [ev(r, s, shape=(4, 2) if (r, s) == (1, 3) else (8,)) for r in range(3) for s in range(1, 4)]
    d = diagnose(incident(rows))
    out = json.loads(json.dumps(d.to_dict()))
    assert out["verdict"] == "shape-mismatch" and out["culprit_ranks"] == [1]
    assert out["group_size"] == d.group_size
    assert out["findings"][0]["rule"] == d.first.rule and d.first.rule
    assert [r["rank"] for r in out["rank_state"]] == [0, 1, 2]


# --- second mutation run (random sample, benchmarks/results/mutation.md): the gaps it found -----------


def _clean(world=4, kind="trace", exits=None):
    rows = [ev(r, s, kind=kind) for r in range(world) for s in range(1, 4)]
    exits = range(world) if exits is None else exits
    return incident(rows, ranks=[dict(rank=r, exit_code=0) for r in exits])


def test_a_clean_run_with_complete_records_and_exit_zero_is_a_high_confidence_all_clear():
    """Every rank's tracer or Flight Recorder record and exit code 0: the all-clear is high; one exit code
    unknown makes it medium. The rank table says where each rank ended and what it was seen in."""
    for kind in ("trace", "fr"):
        d = diagnose(_clean(kind=kind))
        assert (d.verdict, d.all_clear_confidence) == ("no-failure", "high"), kind
        st = d.rank_state
        assert list(st["status"]) == ["exited"] * 4
        assert list(st["exit_code"]) == [0] * 4
        assert [tuple(s) for s in st["sources"]] == [(kind,)] * 4
        assert list(st["last_completed_seq"]) == [3] * 4 and list(st["last_dtype"]) == ["float32"] * 4
        assert [tuple(map(tuple, s)) for s in st["last_in_shapes"]] == [((8,),)] * 4
    d = diagnose(_clean(exits=range(3)))
    assert (d.verdict, d.all_clear_confidence) == ("no-failure", "medium")


def test_rank_table_status_and_errors():
    """What the rank table says of a rank that timed out, one whose record failed, and one that raised
    inside a collective (its call_op is the first such call)."""
    rows = steps(3, 2, kind="fr")
    rows[-1]["state"] = "failed"  # rank 2's last Flight Recorder entry: the collective failed
    errs = [
        err(
            0,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout",
            t=5,
            op="all_reduce",
            seq=2,
            seq_kind="work",
        ),
        err(1, "exception", "RuntimeError: NCCL communicator was aborted", t=6, op="broadcast"),
        err(1, "exception", "RuntimeError: NCCL communicator was aborted", t=7, op="all_gather", line=2),
    ]
    st = diagnose(incident(rows, errs)).rank_state.set_index("rank")
    assert st.loc[0, "status"] == "timed-out"
    assert st.loc[0, "first_error"].startswith("Watchdog caught collective operation timeout")
    assert st.loc[1, "call_op"] == "broadcast"
    assert bool(st.loc[2, "failed"]) and st.loc[2, "status"] == "error"


def test_an_exception_without_a_message_is_not_an_own_failure():
    errs = [err(1, "exception", None, t=6)]
    st = diagnose(incident(steps(2, 2), errs)).rank_state.set_index("rank")
    assert not bool(st.loc[1, "own_failure"])


def test_an_oom_is_the_ranks_own_failure_whatever_its_message_says():
    errs = [
        err(2, "oom", "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes", t=9)
    ]
    st = diagnose(incident(steps(4, 2), errs)).rank_state.set_index("rank")
    assert bool(st.loc[2, "own_failure"]) and st.loc[2, "status"] == "failed"


def test_a_launcher_signal_in_the_rank_table_names_the_initiator():
    """torchrun's 'Signal 11 (SIGSEGV)' for rank 2 (ranks frame) while the others timed out earlier."""
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout",
            t=5,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in (0, 1, 3)
    ]
    d = diagnose(incident(errors=errs, ranks=[dict(rank=2, signal="SIGSEGV")]))
    assert d.initiating_rank == 2


def test_a_child_failed_by_sigabrt_is_the_initiator():
    """A child the launcher reports killed by SIGABRT (not a crash signal to is_crash_error, since the NCCL
    watchdog aborts its victims with it) still started the failure when nothing else failed on its own."""
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout",
            t=5,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in (0, 1, 3)
    ]
    errs.append(err(2, "child_failed", "ChildFailedError: rank 2 (local_rank 2) exitcode -6", t=60, signal="SIGABRT"))
    assert diagnose(incident(errors=errs)).initiating_rank == 2


def test_group_size_from_all_gather_output_over_input():
    rows = [ev(r, 1, op="all_gather_into_tensor", shape=(8,), out_shape=(32,)) for r in range(3)]
    d = diagnose(incident(rows))
    assert d.group_size == 4 and "all_gather" in d.group_size_basis
    assert d.absent_ranks == [3]


def test_a_rank_that_stopped_early_is_the_desync_culprit():
    rows = [ev(r, s) for r in range(4) for s in range(1, 6 if r != 3 else 4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-desync", [3], 4)


def test_a_rank_whose_last_watchdog_line_is_older_than_the_others_timeout_is_the_desync_culprit():
    """Watchdog lines only (no record of every seq): ranks 0-2 timed out in work seq 9, rank 3's last line is
    seq 5. The others' records resume past rank 3's last seq, so rank 3 never reached seq 9."""
    rows = [
        ev(r, s, kind="work", shape=None, numel_in=16, state="timed_out" if s == 9 else "completed")
        for r in range(3)
        for s in (5, 9)
    ] + [ev(3, 5, kind="work", shape=None, numel_in=16)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-desync", [3], 9)


def test_a_size_or_shape_mismatch_is_found_when_one_ranks_size_is_unknown():
    """Five ranks at seq 3; rank 4's record has no size (a watchdog-only view): ranks 0-3 still compare."""
    # a different element count is certain (high); the same count in another shape completes on some
    # backends and is medium
    for odd, conf in (((16,), "high"), ((4, 2), "medium")):
        rows = steps(5, 2) + [ev(r, 3, shape=None if r == 4 else (odd if r == 3 else (8,))) for r in range(5)]
        d = diagnose(incident(rows))
        assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.confidence) == ("shape-mismatch", [3], 3, conf), odd


def test_a_known_group_larger_than_the_ranks_seen_leaves_a_two_to_one_split_undetermined():
    """Three ranks seen at an op mismatch on the default group (named 'default_pg'), whose size is known
    to be eight from other records: two agreeing ranks are not a majority of eight, so no culprit."""
    sized = [ev(r, 1, kind="work", shape=None, numel_in=16, world_size=8, pg="1") for r in range(3)]
    rows = [ev(r, 1, op="broadcast" if r == 2 else "all_reduce", pg="default_pg") for r in range(3)]
    d = diagnose(incident(rows + sized))
    assert d.group_size == 8
    f = next(f for f in d.findings if f.class_id == "op-mismatch")
    assert not f.culprit_ranks and f.culprit_basis.startswith("undetermined")
    d = diagnose(incident(rows))  # group size unknown: two of three is a majority
    assert d.verdict == "op-mismatch" and d.culprit_ranks == [2]


def _progress(last: dict, pg="0"):
    return [
        dict(
            rank=r,
            pg=pg,
            seq_kind="work",
            last_enqueued=n,
            last_started=n,
            last_completed=n - 1,
            source="c10d",
            file=f"rank{r}.log",
            line=1,
        )
        for r, n in last.items()
    ]


def _with_progress(last: dict, events=()):
    return Incident(
        events=coerce("events", list(events)),
        errors=coerce("errors", []),
        ranks=coerce("ranks", []),
        progress=coerce("progress", _progress(last)),
    )


def test_progress_counters_name_the_one_rank_ahead_and_respect_the_group_size():
    """Watchdog progress (last enqueued seq per rank): the strict minority is the culprit, the one rank ahead
    included (extra calls); with a group of eight known, two of three ranks are no majority."""
    f = next(f for f in diagnose(_with_progress({0: 10, 1: 10, 2: 10, 3: 11})).findings if f.rule == "progress")
    assert (f.class_id, list(f.culprit_ranks), f.pg, f.seq) == ("rank-desync", [3], "0", 11)
    f = next(f for f in diagnose(_with_progress({0: 10, 1: 10, 2: 9})).findings if f.rule == "progress")
    assert list(f.culprit_ranks) == [2]  # group unknown: two of three is a majority
    sized = [ev(r, s, world_size=8) for r in range(3) for s in (1, 2)]
    d = diagnose(_with_progress({0: 10, 1: 10, 2: 9}, sized))
    assert d.group_size == 8
    assert not next(f for f in d.findings if f.rule == "progress").culprit_ranks


def test_at_the_same_time_the_earlier_seq_is_the_verdict():
    """Two divergences in one counter recorded at the same instant: the earlier seq comes first (the later
    is its possible consequence), whatever the evidence files are called."""
    rows = [
        ev(
            r,
            s,
            t=100,
            op="broadcast" if (r, s) == (2, 3) else "all_reduce",
            dtype="float16" if (r, s) == (1, 7) else "float32",
            file="z.log" if s == 3 else "a.log",
        )
        for r in range(4)
        for s in (3, 7)
    ]
    d = diagnose(incident(rows))
    assert [(f.class_id, f.seq) for f in d.findings] == [("op-mismatch", 3), ("dtype-mismatch", 7)]
    assert d.findings[1].consequence_of == d.findings[0].key


def test_one_divergence_seen_in_two_counters_keeps_what_each_knew():
    """merge(): the finding of the preferred counter takes the culprit and op only the other one had."""
    from denpex_nb.analysis.explain import merge
    from denpex_nb.analysis.model import Finding

    tr = Finding(
        class_id="rank-desync",
        summary="trace view",
        seq=5,
        seq_kind="trace",
        t_wall=pd.Timestamp(T0 + 9, unit="s", tz="UTC"),
    )
    wk = Finding(
        class_id="rank-desync",
        summary="watchdog view",
        seq=9,
        seq_kind="work",
        op="all_reduce",
        culprit_ranks=(2,),
        culprit_basis="statement",
        t_wall=pd.Timestamp(T0 + 3, unit="s", tz="UTC"),
    )
    [m] = merge([wk, tr])
    assert (m.seq_kind, m.seq, m.summary) == ("trace", 5, "trace view")
    assert (list(m.culprit_ranks), m.culprit_basis, m.op) == ([2], "statement", "all_reduce")
    assert m.t_wall == pd.Timestamp(T0 + 3, unit="s", tz="UTC")


def test_a_text_finding_carries_the_time_of_its_line():
    errs = [
        err(1, "nccl_error", "NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error, NCCL version 2.18.1", t=42)
    ]
    d = diagnose(incident(errors=errs))
    assert d.verdict == "nccl-error" and d.first.t_wall == pd.Timestamp(T0 + 42, unit="s", tz="UTC")


def test_an_undetermined_failure_known_only_by_an_exit_code_quotes_no_unrelated_line():
    """Rank 1 exited 1; the only error row is a teardown notice, which is not a failure: not evidence."""
    errs = [err(0, "teardown", "ProcessGroupNCCL destroyed, communicator aborted", t=3)]
    d = diagnose(incident(errors=errs, ranks=[dict(rank=1, exit_code=1)]))
    assert d.verdict == "timeout-undetermined"
    assert d.first.evidence == () and d.first.t_wall is None


def test_nccl_opcount_finding_quotes_every_ranks_line():
    rows = [_coll(r, 7, numel=512 if r == 0 else 1024) for r in range(4)]
    d = diagnose(incident(rows))
    assert sorted(e.file for e in d.first.evidence) == [f"rank{r}.nccl_opcount" for r in range(4)]


def test_json_findings_keep_the_culprit_basis():
    import json

    rows = [ev(r, s, shape=(4, 2) if (r, s) == (1, 3) else (8,)) for r in range(3) for s in range(1, 4)]
    out = json.loads(json.dumps(diagnose(incident(rows)).to_dict()))
    assert out["findings"][0]["culprit_basis"] == "majority"


def test_cli_format_and_year_reach_the_reader(tmp_path, capsys):
    """``--format`` forces a reader (a trace folder read as NCCL logs holds nothing); ``--year`` dates
    year-less c10d timestamps."""
    import json

    from denpex_nb.cli import main
    from tests.analysis.test_cli import write_trace

    d = write_trace(tmp_path / "run", world=4, odd_rank=2)
    assert main(["diagnose", str(d), "--json", "--format", "trace"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "shape-mismatch"
    assert main(["diagnose", str(d), "--json", "--format", "nccl"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "no-evidence"
    log = tmp_path / "w.log"
    log.write_text(
        "[rank0]:[E1129 22:27:23.880000 1 ProcessGroupNCCL.cpp:9] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, "
        "Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
    )
    assert main(["diagnose", str(log), "--json", "--year", "2019"]) == 0
    assert json.loads(capsys.readouterr().out)["rank_state"][0]["first_error_t"].startswith("2019-11-29T22:27:23")

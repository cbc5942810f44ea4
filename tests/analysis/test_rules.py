"""diagnose() on hand-built frames: classes, culprits by majority, ties, ordering, text-only rules."""

from __future__ import annotations

import pandas as pd

from denpex_nb import diagnose

from ._frames import err, ev, incident, steps

PEER_GONE = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:29921. This is typically caused by a remote worker crashing."
)
GLOO_TIMEOUT = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
    "10000ms for recv operation to complete"
)


def test_shape_mismatch_culprit_is_the_minority():
    rows = steps(4, 2) + [
        ev(
            r,
            3,
            op="all_gather_into_tensor",
            shape=(3, 4) if r == 1 else (5, 4),
            out_shape=(12, 4) if r == 1 else (20, 4),
        )
        for r in range(4)
    ]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.op) == ("shape-mismatch", [1], 3, "all_gather_into_tensor")
    assert d.first.ranks[1].shapes == [[3, 4]] and d.first.ranks[0].shapes == [[5, 4]]
    assert d.first.confidence == "high"
    assert d.first.evidence[0].rank == 1  # the odd rank's line comes first
    assert "[5, 4]" in d.first.summary and "[3, 4]" in d.first.summary


def test_same_numel_in_another_shape_is_a_shape_mismatch_at_medium_confidence():
    rows = steps(3, 2) + [ev(r, 3, shape=(64, 64) if r == 2 else (4096,)) for r in range(3)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("shape-mismatch", [2], 3)
    assert d.first.confidence == "medium" and "same number of elements" in d.first.summary
    assert "[[64, 64]]" in d.first.summary and "[[4096]]" in d.first.summary
    two = diagnose(incident(steps(2, 1) + [ev(0, 2, shape=(2, 4)), ev(1, 2, shape=(4, 2))]))
    assert two.verdict == "shape-mismatch" and two.culprit_ranks == [] and two.first.confidence == "low"


def test_two_ranks_disagreeing_is_a_tie_and_the_culprit_is_undetermined():
    rows = steps(2, 2) + [ev(0, 3, shape=(5, 4)), ev(1, 3, shape=(3, 4))]
    d = diagnose(incident(rows))
    assert d.verdict == "shape-mismatch" and d.culprit_ranks == []
    assert d.first.confidence == "medium"
    assert any("undetermined" in n for n in d.notes)


def test_dtype_mismatch():
    rows = steps(4, 2) + [ev(r, 3, dtype="float64" if r == 2 else "float32") for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("dtype-mismatch", [2])
    assert d.first.ranks[2].dtypes == ["float64"]


def test_op_mismatch_names_the_culprits_op_and_a_tie_names_none():
    rows = steps(4, 2) + [ev(r, 3, op="broadcast" if r == 0 else "all_reduce") for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.op) == ("op-mismatch", [0], "broadcast")
    tie = diagnose(incident(steps(2, 2) + [ev(0, 3, op="broadcast"), ev(1, 3)]))
    assert (tie.verdict, tie.culprit_ranks, tie.first.op) == ("op-mismatch", [], None)
    assert {v.op for v in tie.first.ranks.values()} == {"broadcast", "all_reduce"}


def test_laggard_is_the_culprit_of_a_desync_only_on_a_strict_majority():
    rows = steps(3, 3) + [ev(0, 4), ev(2, 4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.op) == ("rank-desync", [1], 4, "all_reduce")
    assert d.first.ranks[1].state == "absent" and d.first.ranks[1].seq == 3
    assert d.first.culprit_basis == "majority"
    # two ranks: one skipped or the other added a call; nothing tells which
    two = diagnose(incident(steps(2, 3) + [ev(0, 4)]))
    assert (two.verdict, two.culprit_ranks, two.first.seq) == ("rank-desync", [], 4)
    assert two.first.ranks[1].state == "absent" and "not a majority" in two.first.culprit_basis


def test_one_rank_ahead_of_many_made_an_extra_call():
    rows = steps(4, 3) + [ev(2, 4, op="barrier")]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [2])
    assert "extra collective" in d.first.summary


def test_every_divergence_is_reported_in_order_and_the_first_is_the_verdict():
    rows = steps(4, 2)
    rows += [ev(r, 3, shape=(6,) if r == 3 else (8,)) for r in range(4)]
    rows += [ev(r, 4, dtype="float64" if r == 1 else "float32") for r in range(4)]
    rows += [ev(r, 5) for r in range(3)]
    d = diagnose(incident(rows))
    assert [(f.class_id, f.seq) for f in d.findings] == [
        ("shape-mismatch", 3),
        ("dtype-mismatch", 4),
        ("rank-desync", 5),
    ]
    assert d.verdict == "shape-mismatch" and d.culprit_ranks == [3]
    assert [f.confidence for f in d.findings[1:]] == ["low", "low"]  # possibly consequences
    assert [f.consequence_of for f in d.findings] == [None, d.first.key, d.first.key]
    assert d.first.key == "shape-mismatch@trace:3/pg 0" and "possibly a consequence of" in str(d)


def test_a_laggard_that_crashed_makes_a_rank_crash():
    rows = steps(4, 2) + [ev(r, 3) for r in (0, 1, 3)]
    errs = [
        err(2, "exception", "ValueError: bad batch at step 3"),
        err(0, "gloo_peer_gone", PEER_GONE, t=10),
        err(1, "gloo_peer_gone", PEER_GONE, t=10),
    ]
    d = diagnose(incident(rows, errs))
    assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.op) == ("rank-crash", [2], 3, "all_reduce")
    assert d.initiating_rank == 2
    assert any("ValueError" in e.text for e in d.first.evidence)
    assert sum(f.class_id == "rank-crash" for f in d.findings) == 1


def test_crash_from_text_alone_and_torchrun_root_cause_is_not_trusted():
    errs = [
        err(1, "exception", "RuntimeError: CUDA error: an illegal memory access", t=None),
        err(0, "gloo_peer_gone", PEER_GONE, t=5),
        # torchrun's table: rank 0 (collateral) reported first
        err(0, "child_failed", "Root Cause (first observed failure): rank 0 exitcode 1", t=4),
        err(1, "child_failed", "rank 1 exitcode -15", t=6, signal="SIGTERM"),
    ]
    d = diagnose(incident([], errs))
    assert (d.verdict, d.culprit_ranks, d.initiating_rank) == ("rank-crash", [1], 1)


def test_oom_is_a_crash():
    d = diagnose(
        incident(
            [],
            [
                err(3, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"),
                err(0, "watchdog_timeout", "Watchdog caught collective operation timeout", t=600),
            ],
        )
    )
    assert (d.verdict, d.culprit_ranks, d.initiating_rank) == ("rank-crash", [3], 3)


def test_watchdog_lines_with_different_numel_are_a_shape_mismatch():
    rows = [
        ev(
            r,
            2417,
            kind="work",
            op="all_gather",
            shape=None,
            numel_in=6144 if r == 5 else 8192,
            numel_out=None,
            state="timed_out",
        )
        for r in range(8)
    ]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.seq_kind) == ("shape-mismatch", [5], 2417, "work")


def test_watchdog_lines_with_different_seqnum_are_a_desync_and_optype_an_op_mismatch():
    rows = [
        ev(
            r,
            11 if r == 3 else 10,
            kind="work",
            op="broadcast" if r == 3 else "all_reduce",
            shape=None,
            numel_in=8,
            state="timed_out",
        )
        for r in range(4)
    ]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-desync", [3], 11)
    assert "extra collective" in d.first.summary and d.first.ranks[0].state == "absent"
    rows = [
        ev(r, 10, kind="work", op="broadcast" if r == 3 else "all_reduce", shape=None, numel_in=8) for r in range(4)
    ]
    assert diagnose(incident(rows)).verdict == "op-mismatch"


def test_identical_timeouts_are_timeout_undetermined_with_what_to_collect():
    rows = [ev(r, 9, kind="work", shape=None, numel_in=1024, state="timed_out") for r in range(4)]
    errs = [
        err(
            r,
            "watchdog_timeout",
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, ...)",
            t=600,
            op="all_reduce",
            seq=9,
            seq_kind="work",
        )
        for r in range(4)
    ]
    d = diagnose(incident(rows, errs))
    assert d.verdict == "timeout-undetermined" and d.culprit_ranks == []
    s = d.first.summary
    assert "no divergence is visible in this evidence" in s
    for what in ("DETAIL", "Flight Recorder", "NCCL_DEBUG", "denpex_nb.trace"):
        assert what in s


def test_gloo_timeouts_alone_are_timeout_undetermined():
    d = diagnose(incident([], [err(r, "gloo_timeout", GLOO_TIMEOUT, t=10) for r in range(2)]))
    assert d.verdict == "timeout-undetermined"


def test_detail_fingerprints_give_the_exact_class_and_shapes():
    rows = steps(4, 2, kind="detail") + [
        ev(r, 2, kind="detail", shape=(10, 64) if r == 3 else (12, 64)) for r in range(4)
    ]
    rows = [r for r in rows if not (r["seq"] == 2 and r["in_shapes"] == ((8,),))]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.seq_kind, d.first.seq) == ("shape-mismatch", [3], "detail", 2)


def test_detail_mismatch_text_without_events_still_names_the_class():
    msg = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, ...).Collectives differ in the following "
        "aspects:   Tensor Tensor dtypes: Doublevs Float"
    )
    d = diagnose(incident([], [err(1, "detail_mismatch", msg, op="all_reduce", seq=3, seq_kind="detail")]))
    assert d.verdict == "dtype-mismatch"


def test_monitored_barrier_names_the_missing_ranks():
    errs = [
        err(0, "monitored_barrier", "[Rank 0]: Ranks 3 failed to pass monitoredBarrier in 10000 ms", related=(3,), t=10)
    ]
    d = diagnose(incident([], errs))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [3], "high")


def test_gloo_enforce_is_a_size_mismatch_without_a_culprit():
    msg = (
        "terminate called after throwing an instance of 'gloo::EnforceNotMet' what(): [enforce fail at "
        "pair.cc:456] op.preamble.length <= op.nbytes. 40 vs 24. Received data size doesn't match"
    )
    errs = [
        err(1, "gloo_enforce", msg),
        err(1, "signal", "exitcode -6", signal="SIGABRT"),
        err(0, "gloo_peer_gone", PEER_GONE.replace("Connection closed", "Read error: Connection reset")),
    ]
    d = diagnose(incident([], errs))
    assert (d.verdict, d.culprit_ranks, d.initiating_rank) == ("shape-mismatch", [], 1)
    assert "40 bytes sent, 24 expected" in d.first.summary
    assert "undetermined" in d.first.summary and "not necessarily the culprit" in d.first.summary


def test_ddp_unused_parameters_explains_the_bucket_divergence():
    msg = (
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
        "This error indicates that your module has parameters that were not used in producing loss."
    )
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", shape=(1,) if r == 1 else (170,)) for r in range(3)]
    d = diagnose(incident(rows, [err(1, "ddp_unused_parameters", msg)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq, d.first.op) == ("unused-parameters", [1], 5, "all_reduce")
    assert len([f for f in d.findings if f.class_id == "unused-parameters"]) == 1
    # rank 0 is seen timing out without the reducer's error, but one of two is no majority:
    # rank 0 may have had the same unused parameters and failed first
    alone = diagnose(incident([], [err(1, "ddp_unused_parameters", msg), err(0, "gloo_timeout", GLOO_TIMEOUT)]))
    assert (alone.verdict, alone.culprit_ranks) == ("unused-parameters", [])
    quiet = [err(r, "gloo_timeout", GLOO_TIMEOUT) for r in (0, 2, 3)]
    many = diagnose(incident([], [err(1, "ddp_unused_parameters", msg)] + quiet))
    assert (many.verdict, many.culprit_ranks, many.first.culprit_basis) == ("unused-parameters", [1], "own-failure")


def test_syncbn_statistics_gather_on_one_rank_is_the_syncbn_hang():
    def rows(shape, world=3):
        return (
            steps(world, 4)
            + [ev(0, 5, op="all_gather", shape=shape, out_shape=(world * shape[0],) + shape[1:])]
            + [ev(r, 5, op="barrier", shape=(1,)) for r in range(1, world)]
        )

    plain = diagnose(incident(rows((8, 4))))  # an ordinary rank-0-only gather
    assert (plain.verdict, plain.culprit_ranks) == ("op-mismatch", [0])
    sig = diagnose(incident(rows((9,))))  # [mean, invstd, count] for 4 channels
    assert (sig.verdict, sig.culprit_ranks, sig.first.op, sig.first.confidence) == (
        "syncbn-eval-hang",
        [0],
        "all_gather",
        "medium",
    )
    errs = [err(0, "exception", "RuntimeError: Timed out in torch/nn/modules/_functions.py sync_batch_norm", t=20)]
    d = diagnose(incident(rows((8, 4)), errs))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("syncbn-eval-hang", [0], "high")
    two = diagnose(incident(rows((8, 4), world=2), errs))  # one rank elsewhere of two: no majority
    assert (two.verdict, two.culprit_ranks, two.first.confidence) == ("syncbn-eval-hang", [], "medium")
    assert "no majority" in two.first.culprit_basis


def test_empty_incident_is_no_evidence_not_no_failure():
    d = diagnose(incident())
    assert d.verdict == "no-evidence" and d.culprit_ranks == []
    assert any("not an all-clear" in n for n in d.notes)


def test_clean_run_is_no_failure():
    d = diagnose(incident(steps(4, 6)))
    assert d.verdict == "no-failure" and d.culprit_ranks == []


def test_contradictory_and_garbage_evidence_never_crashes():
    rows = steps(2, 2) + [
        ev(0, 3, shape=(8,)),
        ev(0, 3, shape=(6,), kind="trace", state="scheduled"),  # one rank, two sizes
        ev(1, 3, shape=None, numel_in=None, op="unknown", dtype=None),
        dict(rank=None, seq=None, op=None),
        dict(rank=1, seq=4, seq_kind="nonsense", op="all_reduce"),
    ]
    errs = [
        err(1, "monitored_barrier", "Ranks 0 failed to pass monitoredBarrier", related=(0,)),
        err(0, "monitored_barrier", "Ranks 1 failed to pass monitoredBarrier", related=(1,)),
        err(None, "exception", None),
        err(0, "fr_finding", "garbage"),
        err(1, "gloo_enforce", "no numbers"),
    ]
    d = diagnose(incident(rows, errs), strict=True)
    assert d.verdict in {"rank-desync", "shape-mismatch", "op-mismatch"}
    assert all(f.confidence in ("high", "medium", "low") for f in d.findings)
    d.to_json()
    str(d)
    d._repr_html_()


def test_findings_without_time_sort_after_timed_ones():
    rows = steps(4, 2) + [ev(r, 3, shape=(6,) if r == 0 else (8,)) for r in range(4)]
    msg = "op.preamble.length <= op.nbytes. 32 vs 24."
    d = diagnose(incident(rows, [err(1, "gloo_enforce", msg)]))
    assert d.findings[0].seq == 3 and d.culprit_ranks == [0]


def test_unordered_input_and_categorical_quirks():
    rows = list(reversed(steps(3, 3) + [ev(r, 4, shape=(2,) if r == 1 else (8,)) for r in range(3)]))
    inc = incident(rows)
    inc.events["pg"] = inc.events["pg"].astype(str).astype("category")
    d = diagnose(inc)
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [1])
    assert isinstance(d.first.t_wall, pd.Timestamp)


def test_status_lines_alone_name_the_laggard():
    from denpex_nb.incident import coerce

    inc = incident(
        [], [err(r, "watchdog_timeout", "Watchdog caught collective operation timeout", t=600) for r in range(4)]
    )
    inc.progress = coerce(
        "progress",
        [
            dict(
                rank=r,
                pg="0",
                seq_kind="work",
                last_enqueued=2416 if r == 5 % 4 else 2419,
                last_completed=2416,
                file=f"rank{r}.log",
                line=9,
            )
            for r in range(4)
        ],
    )
    d = diagnose(inc)
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-desync", [1], 2417)


def test_a_failing_rule_becomes_a_note_not_a_traceback(monkeypatch):
    import dataclasses
    import sys

    rules_module = sys.modules["denpex_nb.analysis.rules"]  # denpex_nb.diagnose is also the function
    RULES = rules_module.RULES

    def boom(*a, **k):
        raise ValueError("unforeseen input")

    i = next(i for i, r in enumerate(RULES) if r.name == "progress")
    monkeypatch.setattr(rules_module, "RULES", RULES[:i] + [dataclasses.replace(RULES[i], fn=boom)] + RULES[i + 1 :])
    d = diagnose(incident(steps(2, 2) + [ev(0, 3)]))
    assert d.verdict == "rank-desync"
    assert any("'progress' failed" in n and "unforeseen input" in n for n in d.notes)
    import pytest

    with pytest.raises(ValueError):
        diagnose(incident(steps(2, 2)), strict=True)


def test_a_cut_log_does_not_outvote_complete_tracer_records():
    """Rank 0's log lines (DETAIL counter) end early because the copy was cut; its tracer record
    shows it as far as rank 1: the log is cut, not the rank. The shape mismatch is the verdict."""
    trace = steps(3, 2) + [
        ev(r, 3, op="all_gather", shape=(3, 4) if r == 1 else (5, 4), state="failed") for r in range(3)
    ]
    detail = [ev(r, s, kind="detail", shape=(16,)) for r in range(3) for s in range(0, 3) if r != 0 or s < 1]
    d = diagnose(incident(trace + detail, [err(1, "gloo_timeout", GLOO_TIMEOUT)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq_kind) == ("shape-mismatch", [1], "trace")
    assert not any(f.class_id == "rank-desync" for f in d.findings)
    # the same log cut, but the tracer shows rank 0 really behind: the desync stands
    behind = [e for e in trace if not (e["rank"] == 0 and e["seq"] == 3)]
    d2 = diagnose(incident(behind + detail, [err(1, "gloo_timeout", GLOO_TIMEOUT)]))
    assert any(f.class_id == "rank-desync" and f.seq_kind == "detail" for f in d2.findings)


def test_ranks_known_only_by_a_prefix_are_no_evidence_not_an_all_clear():
    """Unread lines under `[defaultN]:` prefixes name ranks but say nothing of their state."""
    d = diagnose(incident(ranks=[dict(rank=0, local_rank=0), dict(rank=1, local_rank=1)]))
    assert d.verdict == "no-evidence"
    ended = diagnose(incident(ranks=[dict(rank=0, exit_code=0), dict(rank=1, exit_code=0)]))
    assert ended.verdict == "no-failure"


def test_syncbn_mention_noticed_by_the_loader_is_what_counts():
    """The loader records which files mention SyncBatchNorm (``Incident.mentions``) while reading; the
    rule reads that record, not the unparsed text again. A hand-made Incident (no record) is searched."""
    from dataclasses import replace as dc_replace

    from denpex_nb.incident import coerce

    rows = steps(3, 4) + [ev(0, 5, op="all_gather", shape=(8, 4), out_shape=(24, 4))]
    rows += [ev(r, 5, op="barrier", shape=(1,)) for r in (1, 2)]
    base = incident(rows)
    said = dc_replace(base, mentions={"syncbn": ["rank0.log"]})
    assert (diagnose(said).verdict, diagnose(said).first.confidence) == ("syncbn-eval-hang", "high")
    text = coerce("unparsed", [{"file": "rank0.log", "line": 3, "n_lines": 1, "text": "using SyncBatchNorm"}])
    by_hand = dc_replace(base, unparsed=text)
    assert diagnose(by_hand).verdict == "syncbn-eval-hang"
    loaded_without = dc_replace(by_hand, mentions={"syncbn": []})  # the loader read every line: no mention
    assert diagnose(loaded_without).verdict == "op-mismatch"


def test_a_device_fault_is_found_in_any_case_and_any_script():
    """The device-fault words are matched case-insensitively, ASCII text (a fast path) or not; a
    status of SUCCESS is no fault. Each message is an error of kind EXCEPTION, so only the device
    fault can make it an own failure (in_collective: an exception otherwise is not)."""
    from denpex_nb.analysis.rules import is_crash_error
    from denpex_nb.vocab import ErrorKind

    faults = [
        "CUDA error: an illegal memory access was encountered",
        "ILLEGAL MEMORY ACCESS",
        "RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx",
        "cublas_status_not_initialized",
        "NVRM: Xid 79, GPU has fallen off the bus",
        "xid 48",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "Fehler – CUDA error: device-side assert triggered (Gerät 3)",
        "ÉCHEC: Uncorrectable ECC error encountered",
    ]
    clean = [
        "CUBLAS_STATUS_SUCCESS",
        "cudnn_status_success after retry",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLGATHER)",
        "Gerät – alles in Ordnung",
        "Xid without a number",
    ]
    for m in faults:
        assert is_crash_error(ErrorKind.EXCEPTION, m, None, None, in_collective=True), m
    for m in clean:
        assert not is_crash_error(ErrorKind.EXCEPTION, m, None, None, in_collective=True), m

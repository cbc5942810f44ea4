"""c10d reader: ProcessGroupNCCL, DETAIL, DDP reducer and gloo lines (docs/formats.md#pgnccl, #detail, #ddp, #gloo)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from denpex_nb.ingest.c10d import C10dReader

from ._text_helpers import one, run

R = C10dReader()

DETAIL_MSG = (
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[3, 4], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false "
    "(default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[5, 4], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false "
    "(default), pinned_memory=false (default), memory_format=(nullopt))).Collectives differ in the following aspects: "
    "  Tensor Tensor shapes: 3 4vs 5 4"
)


@pytest.mark.parametrize(
    "line,numel",
    [
        (
            "[rank3]:[E412 09:24:02.550218903 ProcessGroupNCCL.cpp:688] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=2417, OpType=ALLGATHER, NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) ran for 600071 "
            "milliseconds before timing out.",
            (8192, 65536),
        ),
        (
            "[rank3]:[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=2417, OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1800081 milliseconds before timing out.",
            (None, None),
        ),
        (
            "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [PG 0 Rank 3] Work WorkNCCL(SeqNum=2417, OpType=ALLGATHER, "
            "NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) timed out in blocking wait.",
            (8192, 65536),
        ),
    ],
)
def test_watchdog_timeout_all_eras(line, numel):
    out = run(R, line)
    ev = one(out.events)
    assert (ev["rank"], ev["seq"], ev["seq_kind"], ev["op"], ev["state"]) == (
        3,
        2417,
        "work",
        "all_gather",
        "timed_out",
    )
    assert (ev.get("numel_in"), ev.get("numel_out")) == numel
    err = one(out.errors, kind="watchdog_timeout")
    assert (err["op"], err["seq"], err["rank"]) == ("all_gather", 2417, 3)
    assert out.parsed == {1}


def test_watchdog_timeout_rank_tag_is_a_fallback_only():
    text = (
        "[rank7]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for 600001 ms"
    )
    assert one(run(R, text).events)["rank"] == 7
    ev = one(run(R, text.split("]:", 1)[1]).events)
    assert ev["rank"] == 2 and ev["op"] == "all_gather_into_tensor"


@pytest.mark.parametrize(
    "text,pg",
    [
        (
            "[PG 0 Rank 3] Timeout at NCCL work: 2417, last enqueued NCCL work: 2419, last completed NCCL work: 2416.",
            "0",
        ),
        (
            "[PG 1 (tp_group) Rank 3] Exception (either an error or timeout) detected by watchdog at work: 2417, last enqueued "
            "NCCL work: 2419, last completed NCCL work: 2416.",
            "1",
        ),
        (
            # the group is its GUID (its name on every member), not the per-process PG ID
            "[PG ID 2 PG GUID 5(tp_group) Rank 3]  failure detected by watchdog at work sequence id: 2417 PG status: last "
            "enqueued work: 2419, last completed work: 2416",
            "5",
        ),
        (
            "[PG GUID 5(tp_group) Rank 3] Exception (either an error or timeout) detected by watchdog at work: 2417, last "
            "enqueued NCCL work: 2419, last completed NCCL work: 2416.",
            "5",
        ),
    ],
)
def test_status_lines_give_progress(text, pg):
    out = run(R, "[rank3]:[E412 09:24:02.550390114 ProcessGroupNCCL.cpp:2190] " + text)
    pr = one(out.progress)
    assert (pr["rank"], pr["pg"], pr["seq_kind"], pr["last_enqueued"], pr["last_completed"]) == (
        3,
        pg,
        "work",
        2419,
        2416,
    )
    err = one(out.errors, kind="watchdog_status")
    assert (err["seq"], err["pg"]) == (2417, pg)
    assert err["t_wall"] == datetime(2025, 4, 12, 9, 24, 2, 550390, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "status",
    [
        "[PG ID 11 PG GUID 119 Rank 1] Exception (either an error or timeout) detected by watchdog at work: 216, "
        "last enqueued NCCL work: 220, last completed NCCL work: 215.",
        "[PG ID 11 PG GUID 119(ep_group) Rank 1]  failure detected by watchdog at work sequence id: 216 PG status: "
        "last enqueued work: 220, last completed work: 215",
    ],
)
def test_a_timeout_line_without_a_group_takes_the_group_its_status_line_names(status):
    """torch 2.4+: the timeout line says ``[Rank 1]`` only; the status line of the same work names the group."""
    out = run(
        R,
        [
            "[rank13]:[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=216, OpType=ALLTOALL_BASE, NumelIn=1379328, NumelOut=1572864, Timeout(ms)=600000) "
            "ran for 600045 milliseconds before timing out.",
            "[rank13]:[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] " + status,
            # another rank's timeout of another work stays without a group
            "[rank15]:[E218 04:54:22.883327702 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=57, OpType=ALLREDUCE, NumelIn=32, NumelOut=32, Timeout(ms)=600000) ran for 600045 "
            "milliseconds before timing out.",
        ],
    )
    timeouts = [e for e in out.errors if e["kind"] == "watchdog_timeout"]
    assert [(e["rank"], e["seq"], e["pg"]) for e in timeouts] == [(13, 216, "119"), (15, 57, None)]
    assert [(e["rank"], e["seq"], e["pg"]) for e in out.events] == [(13, 216, "119"), (15, 57, None)]


def test_teardown_sequence_is_consumed_and_classified():
    block = [
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [Rank 3] Some NCCL operations have failed or timed out. Due to "
        "the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [Rank 3] To avoid data inconsistency, we are taking the entire "
        "process down.",
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog "
        "thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2417, "
        "OpType=ALLGATHER, NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2417, OpType=ALLGATHER, NumelIn=8192, "
        "NumelOut=65536, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
        "Exception raised from checkTimeout at /opt/src/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:688 (most recent call first):",
        "frame #0: c10::Error::Error() + 0x1",
    ]
    out = run(R, block)
    assert out.parsed == set(range(1, 8))
    aborts = [e for e in out.errors if e["kind"] == "watchdog_abort"]
    assert len(aborts) == 2 and all(e["rank"] == 3 for e in aborts)  # the what() copy folds into the E line
    assert aborts[1]["seq"] == 2417 and aborts[1]["pg"] == "0" and aborts[1]["line"] == 3
    ab = one(out.errors, kind="abort")
    assert ab["signal"] == "SIGABRT" and "DistBackendError" in ab["message"] and "Watchdog caught" in ab["message"]
    assert out.events == []  # the teardown repeats the timeout; it is not a new observation


def test_flight_recorder_stack_hint_lines_are_claimed():
    block = [
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] Stack trace of the failed collective: ",
        "#0 all_reduce from /opt/x/distributed_c10d.py:2950",
        "#1 train_step from train.py:41",
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] Stack trace of the failed collective not found, potentially "
        "because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
    ]
    out = run(R, block)
    assert out.parsed == {1, 2, 3, 4} and out.errors == []


def test_async_nccl_error():
    out = run(
        R,
        "[rank1]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [PG 0 Rank 1] Collective WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) raised the following async exception: "
        "NCCL error: remote process exited or there was a network error, NCCL version 2.21.5",
    )
    assert one(out.events)["state"] == "failed"
    assert one(out.errors, kind="nccl_error")["seq"] == 9


@pytest.mark.parametrize(
    "text",
    [
        "[PG 0 Rank 6] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=3",
        "[PG ID 0 PG GUID 0(default_pg) Rank 6] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress",
        "[PG ID 0 PG GUID 0(default_pg) Rank 6] [PG ID 0 PG GUID 0(default_pg) Rank 6] Terminating the process after "
        "attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
    ],
)
def test_heartbeat(text):
    err = one(run(R, "[rank6]:[F412 09:32:02.911207458 ProcessGroupNCCL.cpp:1561] " + text).errors)
    assert err["kind"] == "heartbeat" and err["rank"] == 6


def test_dump_signal_names_first_detector():
    err = one(
        run(
            R,
            "[rank2]:[E412 1:1:1.1 x.cpp:1] [PG 0 Rank 2] Received a dump signal due to a collective timeout "
            "from rank 5 and we will try our best to dump the debug info.",
        ).errors
    )
    assert err["related_ranks"] == (5,)


def test_desync_report():
    block = [
        "[rank0]:[E1130 00:30:15.551002317 ProcessGroupNCCL.cpp:1380] [PG ID 0 PG GUID 0(default_pg) Rank 0] Rank 0",
        "\t - [0] Timeout at collective: ALLGATHER, #2417",
        "\t - To our best knowledge, ranks [5, 6] are the lagging ranks that caused this timeout. They never joined any collectives",
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "\t   - [1, 2] joined but didn't finish collective #2417 (count from 1)",
        "\t     [5] finished collective #2416, but didn't join collective #2417 (count from 1)",
        "\t - Snapshot of ranks' latest states:",
        "\t   #2417 started ranks:",
        "\t     [0, 1, 2] started ALLGATHER",
    ]
    out = run(R, block, ctx=None)
    assert out.parsed == set(range(1, 10))
    ev = [e for e in out.events if e["state"] == "timed_out"]
    assert len(ev) == 1 and (ev[0]["rank"], ev[0]["seq"], ev[0]["seq_kind"], ev[0]["op"]) == (
        0,
        2417,
        "desync",
        "all_gather",
    )
    assert one(out.errors, related_ranks=(5, 6))["kind"] == "desync_report"
    assert one(out.errors, related_ranks=(1, 2))["seq"] == 2417
    assert one(out.errors, related_ranks=(5,))["seq"] == 2417
    started = sorted(e["rank"] for e in out.events if e["state"] == "started")
    assert started == [0, 1, 2]
    assert all(e["seq_kind"] == "desync" for e in out.events)


def test_detail_mismatch_gives_both_ranks_fingerprints():
    out = run(R, "[rank1]: " + DETAIL_MSG)
    e1, e0 = one(out.events, rank=1), one(out.events, rank=0)
    assert e1["in_shapes"] == ((3, 4),) and e0["in_shapes"] == ((5, 4),)
    assert e1["numel_in"] == 12 and e0["numel_in"] == 20
    for e in (e0, e1):
        assert (e["seq"], e["seq_kind"], e["op"], e["dtype"]) == (0, "detail", "all_gather", "float32")
    err = one(out.errors)
    # related_ranks: every rank the message names (the reporting rank and its peer)
    assert (err["kind"], err["rank"], err["related_ranks"], err["seq"]) == ("detail_mismatch", 1, (0, 1), 0)
    assert "3 4vs 5 4" in err["message"]


def test_detail_mismatch_hard_wrapped_at_120():
    full = "[rank1]: " + DETAIL_MSG
    chunks = [full[i : i + 120] for i in range(0, len(full), 120)]
    out = run(R, chunks)
    assert len(out.events) == 2 and out.parsed == set(range(1, len(chunks) + 1))


def test_detail_dtype_op_and_barrier_variants():
    msg = (
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint("
        "SequenceNumber=3, OpType=ALLREDUCE, TensorShape=[8], TensorDtypes=Double, TensorDeviceTypes=TensorOptions("
        "dtype=double, device=cpu)), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=3OpType="
        "BARRIER).Collectives differ in the following aspects:   Op type: ALLREDUCEvs BARRIER"
    )
    out = run(R, "[rank0]: RuntimeError: " + msg)
    assert one(out.events, rank=0)["dtype"] == "float64"
    b = one(out.events, rank=1)
    assert (b["op"], b["seq"]) == ("barrier", 3) and b.get("in_shapes") is None


def test_old_inconsistent_fingerprint_form():
    out = run(
        R,
        "RuntimeError: Rank 2 is running inconsistent collective: CollectiveFingerPrint(OpType=BROADCAST, "
        "TensorShape=[4], TensorDtypes=Half)",
    )
    ev = one(out.events)
    assert (ev["rank"], ev["op"], ev["dtype"], ev.get("seq")) == (2, "broadcast", "float16", None)


def test_running_collective_info_line():
    out = run(
        R,
        "[rank0]:[I1129 22:37:26.285475132 ProcessGroupWrapper.cpp:710] [Rank 0] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=BFloat16, "
        "TensorDeviceTypes=TensorOptions(dtype=c10::BFloat16, device=cpu))",
    )
    ev = one(out.events)
    assert (ev["state"], ev["op"], ev["in_shapes"], ev["dtype"], ev["seq"]) == (
        "scheduled",
        "all_reduce",
        ((4,),),
        "bfloat16",
        0,
    )
    assert out.errors == []


def test_monitored_barrier_lines():
    block = [
        "[rank0]:[E1129 22:40:01.1 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 1 failed to pass monitoredBarrier in 10000 ms",
        "[rank0]:[E1129 22:40:01.1 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 10000 ms",
        "[rank0]: RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 10000 ms",
    ]
    out = run(R, block)
    mb = [e for e in out.errors if e["kind"] == "monitored_barrier"]
    assert [e["related_ranks"] for e in mb] == [(1,), (1, 3)]  # the RuntimeError repeats the summary line
    assert all(e["rank"] == 0 for e in mb) and 3 in out.parsed


def test_ddp_unused_parameters_collects_names_and_indices():
    block = [
        "[rank2]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
        "one. This error indicates that your module has parameters that were not used in producing loss.",
        "[rank2]: Parameters which did not receive grad for rank 2: decoder.gate_proj.weight, decoder.gate_proj.bias",
        "[rank2]: Parameter indices which did not receive grad for rank 2: 21 22",
    ]
    out = run(R, block)
    err = one(out.errors)
    assert err["kind"] == "ddp_unused_parameters" and err["rank"] == 2
    assert err["param_indices"] == (21, 22) and err["param_names"] == (
        "decoder.gate_proj.weight",
        "decoder.gate_proj.bias",
    )
    assert "21 22" in err["message"] and out.parsed == {1, 2, 3}


def test_ddp_other_errors():
    out = run(
        R,
        "[rank0]: RuntimeError: DDP expects same model across all ranks, but Rank 0 has 10 params, while rank 1 "
        "has inconsistent 12 params.",
    )
    assert one(out.errors)["kind"] == "ddp_error"


def test_gloo_enforce_not_met_after_terminate():
    block = [
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
        "op.preamble.length <= op.nbytes. 40 vs 24. Received data size doesn't match expected size. Is there a "
        "distributed collective mismatch in your code?",
    ]
    out = run(R, block, ctx=None)
    enf = one(out.errors, kind="gloo_enforce")
    assert (enf["bytes_got"], enf["bytes_expected"]) == (40, 24) and "40 vs 24" in enf["message"]
    assert "EnforceNotMet" in one(out.errors, kind="abort")["message"]
    assert out.parsed == {1, 2}


def test_gloo_invalid_tensor_size():
    out = run(
        R,
        "[rank1]: RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (5, 4), got (3, 4))",
    )
    err = one(out.errors)
    assert (err["kind"], err["op"], err["expected_shape"], err["got_shape"], err["rank"]) == (
        "gloo_invalid_size",
        "all_gather",
        (5, 4),
        (3, 4),
        1,
    )


@pytest.mark.parametrize(
    "text,kind",
    [
        (
            "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:7318: "
            "Connection reset by peer. This is typically caused by a remote worker hanging. GLHF! 🏖️",
            "gloo_peer_gone",
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:612] Connection closed by peer [192.0.2.18]:52881. "
            "This is typically caused by a remote worker crashing.",
            "gloo_peer_gone",
        ),
        (
            "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
            "10000ms for recv operation to complete",
            "gloo_timeout",
        ),
    ],
)
def test_gloo_peer_gone_and_timeout(text, kind):
    err = one(run(R, "[rank0]: " + text).errors)
    assert err["kind"] == kind and err["rank"] == 0 and not err["message"].startswith("RuntimeError")


def test_unrelated_lines_are_left_unparsed():
    out = run(R, ["[rank0]: step 4 loss 2.3 gloo backend ready", "ordinary line mentioning Watchdog in passing"])
    assert out.parsed == set() and out.errors == [] and out.events == []


def test_odd_input_never_raises():
    for junk in [
        "WorkNCCL(",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=x, OpType=",
        "Rank 1 is running collective: CollectiveFingerPrint(((",
        "ranks [ are the lagging ranks",
        "\t - [x] Timeout at collective: , #",
        "Ranks  failed to pass monitoredBarrier in  ms",
    ]:
        run(R, junk)


def test_fuzzed_input_never_raises():
    from ._text_helpers import fuzz

    fuzz(R)


# --- real runs recorded on gloo (torch 2.13) --------------------------------------------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

RECORDED = Path(__file__).resolve().parents[2] / "data" / "recorded" / "gloo"


def _recorded(rel: str) -> tuple[list[str], dict]:
    run_dir = RECORDED / rel
    if not (run_dir / "combined.log").exists():
        pytest.skip(f"recorded run {rel} not present")
    text = (run_dir / "combined.log").read_text(encoding="utf-8", errors="replace").splitlines()
    return text, json.loads((run_dir / "manifest.json").read_text())


def test_recorded_detail_shape_mismatch_names_every_ranks_shape():
    lines, manifest = _recorded("allgather-shape-mismatch/broken-detail-w4")
    exp = manifest["expected"]
    out = run(R, lines)
    mism = [e for e in out.errors if e["kind"] == "detail_mismatch"]
    assert sorted(e["rank"] for e in mism) == [0, 1, 2, 3]  # every rank raises, naming itself first
    failed = [e for e in out.events if e["state"] == "failed"]
    assert sorted(e["rank"] for e in failed) == [0, 1, 2, 3]  # one row per rank, however often named
    assert sum(e["n_reports"] for e in failed) == 8 and all(e["reported_by"] == e["rank"] for e in failed)
    for e in failed:
        assert e["seq"] == exp["seq"]["detail"] and e["op"] == exp["op"]
        assert [list(s) for s in e["in_shapes"]] == exp["shapes"][str(e["rank"])]
    running = [e for e in out.events if e["state"] == "scheduled"]  # TORCH_CPP_LOG_LEVEL=INFO lines
    assert {e["rank"] for e in running} == {0, 1, 2, 3}


def test_recorded_plain_allgather_abort_is_gloo_enforce_on_the_small_buffer_rank():
    lines, manifest = _recorded("allgather-shape-mismatch/broken-plain-w2")
    out = run(R, lines)
    enf = one(out.errors, kind="gloo_enforce")
    assert (enf["bytes_got"], enf["bytes_expected"]) == (40, 24)
    assert [enf["rank"]] == manifest["expected"]["culprit_ranks"]
    assert one(out.errors, kind="abort")["rank"] == enf["rank"]


def test_repeats_within_one_file_fold_across_blocks():
    from denpex_nb.ingest.base import FileContext, Output
    from denpex_nb.ingest.prefixes import to_lines

    ctx, out = FileContext(file="f.log"), Output()
    text = "[rank0]:[E1130 00:38:08.285084681 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 5000 ms"
    R.parse(to_lines([(1, text)], ctx), ctx, out)
    R.parse(
        to_lines([(9, "[rank0]: RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 5000 ms")], ctx),
        ctx,
        out,
    )
    assert len(out.errors) == 1 and out.errors[0]["line"] == 1 and out.parsed == {1, 9}


def test_ddp_info_lines_about_parameters_without_gradient():
    lines, _ = _recorded("ddp-unused-parameters/broken-info-w2")
    out = run(R, lines)
    rows = [e for e in out.errors if e["kind"] == "ddp_unused_parameters"]
    assert {e["rank"] for e in rows} == {1}
    info = next(e for e in rows if e["message"].startswith("Parameters that did not get gradient"))
    assert info["param_names"] == ("aux_head.bias", "aux_head.weight")
    err = next(e for e in rows if e["message"].startswith("Expected to have finished reduction"))
    assert err["param_indices"] == (4, 5)


def test_old_communicator_aborted_error_is_a_teardown_not_a_second_timeout():
    block = [
        "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800081 milliseconds before timing out.",
        "RuntimeError: NCCL communicator was aborted on rank 3.  Original reason for failure was: [Rank 3] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
        "1800081 milliseconds before timing out.",
    ]
    out = run(R, block, ctx=None)
    assert len(out.events) == 1 and out.events[0]["seq"] == 9
    ab = one(out.errors, kind="watchdog_abort")
    assert (ab["seq"], ab["op"], ab["rank"]) == (9, "all_reduce", 3)

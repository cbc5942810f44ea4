"""Reader behaviour that mutation testing (benchmarks/results/mutation.md, the random-sample run) showed no
test pinned down: fields of parsed rows that only some paths fill, lines that must not raise, and
records that must stay one."""

from __future__ import annotations

from denpex_nb.ingest.c10d import C10dReader
from denpex_nb.ingest.frtrace_text import FrTraceTextReader
from denpex_nb.ingest.nccl import NcclReader
from denpex_nb.ingest.python import PythonReader

from ._text_helpers import one, run
from .test_pasted_wrappers import load_text, parsed

C10D, NCCL, PY, FRT = C10dReader(), NcclReader(), PythonReader(), FrTraceTextReader()


# --- c10d ---------------------------------------------------------------------------------------


def test_async_nccl_error_row_keeps_its_process_group():
    out = run(
        C10D,
        "[rank1]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [PG ID 2 PG GUID 2(tp) Rank 1] Collective "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) raised the "
        "following async exception: NCCL error: remote process exited or there was a network error, "
        "NCCL version 2.21.5",
    )
    ev, er = one(out.events), one(out.errors, kind="nccl_error")
    assert ev["pg"] == er["pg"] == "2"
    assert (er["op"], er["seq"], er["seq_kind"]) == ("all_reduce", 9, "work")


def test_running_collective_fingerprint_is_a_c10d_event():
    out = run(
        C10D,
        "[rank1]:[E412 09:24:02.5 ProcessGroupGloo.cpp:1] [Rank 1] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[4], "
        "TensorDtypes=Float, TensorDeviceTypes=cpu)",
    )
    ev = one(out.events)
    assert (ev["source"], ev["seq_kind"], ev["seq"], ev["state"]) == ("c10d", "detail", 12, "scheduled")


def test_two_ranks_unused_parameter_reports_are_two_rows():
    out = run(
        C10D,
        [
            "[rank0]:RuntimeError: Expected to have finished reduction in the prior iteration before "
            "starting a new one. This error indicates that your module has parameters that were not used "
            "in producing loss.",
            "[rank0]:Parameter indices which did not receive grad for rank 0: 3 4",
            "[rank2]:Parameter indices which did not receive grad for rank 2: 7",
        ],
    )
    rows = sorted(
        (r["rank"], r["kind"], r.get("param_indices")) for r in out.errors if r["kind"] == "ddp_unused_parameters"
    )
    assert [(r, k) for r, k, _ in rows] == [(0, "ddp_unused_parameters"), (2, "ddp_unused_parameters")]
    assert rows[-1][2] == (7,)


def test_a_detail_message_split_over_lines_keeps_the_time_of_its_first_line(tmp_path):
    lines = [
        "[rank0]:[E1129 22:27:23.880000 1 ProcessGroupGloo.cpp:9] Detected mismatch between collectives on "
        "ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE,",
        "[rank0]: TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes=cpu), but Rank 1 is running "
        "collective: CollectiveFingerPrint(SequenceNumber=3, OpType=BROADCAST, TensorShape=[4],",
        "[rank0]: TensorDtypes=Float, TensorDeviceTypes=cpu).",
    ]
    inc = load_text(tmp_path, lines)
    er = inc.errors[inc.errors["kind"] == "detail_mismatch"]
    assert len(er) == 1 and er["t_wall"].notna().all() and str(er["t_wall"].iloc[0]).endswith("22:27:23.880000+00:00")
    assert parsed(inc) == 3


def test_watchdog_status_line_is_parsed_once():
    out = run(
        C10D,
        "[rank0]:[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
        "Exception (either an error or timeout) detected by watchdog at work: 5, last enqueued NCCL "
        "work: 6, last completed NCCL work: 4.",
    )
    assert len(out.errors) == 1 and len(out.progress) == 1
    assert out.parsed == {1}  # counted as read, not as an unread line


# --- nccl ---------------------------------------------------------------------------------------


def test_destroying_a_communicator_never_seen_initialised_is_read():
    out = run(
        NCCL, "node1:4242:4300 [0] NCCL INFO comm 0x55d0c0 rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE"
    )
    assert out.errors == []


def test_pytorch_nccl_error_row_keeps_host_and_pid(tmp_path):
    inc = load_text(
        tmp_path,
        [
            "May  1 12:00:00 node7 python[4242]: torch.distributed.DistBackendError: NCCL error in: "
            "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error "
            "(run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"
        ],
    )
    er = inc.errors[inc.errors["kind"] == "nccl_error"]
    assert len(er) == 1 and (er["host"].iloc[0], int(er["pid"].iloc[0])) == ("node7", 4242)


def test_pynccl_error_and_its_enum_line_are_one_row():
    out = run(
        NCCL,
        [
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "ncclUnhandledCudaError: Call to CUDA function failed.",
        ],
    )
    er = one(out.errors, kind="nccl_error")
    assert er["nccl_result"] == "ncclUnhandledCudaError" and "Call to CUDA function failed" in er["message"]


# --- python -------------------------------------------------------------------------------------


def test_spawn_child_error_is_a_python_exit_row():
    out = run(
        PY,
        [
            "-- Process 2 terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "w.py", line 3, in run',
            "RuntimeError: child boom",
        ],
    )
    ex = one(out.errors, kind="exit")
    assert (ex["source"], ex["rank"], ex["exit_code"]) == ("python", 2, 1)


def test_a_traceback_right_after_another_is_a_second_exception():
    out = run(
        PY,
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in <module>',
            "ValueError: one",
            "Traceback (most recent call last):",
            '  File "a.py", line 2, in <module>',
            "KeyError: 'two'",
        ],
    )
    assert sorted(e["message"] for e in out.errors) == ["KeyError: 'two'", "ValueError: one"]
    assert out.parsed == set(range(1, 7))


def test_a_traceback_cut_by_the_next_one_is_still_a_row():
    out = run(
        PY,
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in <module>',
            "Traceback (most recent call last):",
            '  File "a.py", line 2, in <module>',
            "KeyError: 'two'",
        ],
    )
    msgs = sorted(e["message"] for e in out.errors)
    assert len(msgs) == 2 and msgs[0] == "KeyError: 'two'" and "without its exception line" in msgs[1]


def test_a_traceback_ending_in_child_failed_error_gives_the_tables_rows():
    tb = [
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
    ]
    table = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=======================================================",
        "train.py FAILED",
        "-------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "-------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-11-29_22:27:47",
        "  host      : node3",
        "  rank      : 5",
        "  exitcode  : -11 (pid: 10053)",
        "  error_file: <N/A>",
        "  traceback : Signal 11 (SIGSEGV) received by PID 10053",
        "=======================================================",
    ]
    out = run(PY, tb + table)
    assert out.parsed == set(range(1, len(tb + table) + 1))  # the table is read, not left over
    row = one(out.errors, kind="child_failed")
    assert (row["rank"], row["exit_code"], row["signal"], row["pid"]) == (5, -11, "SIGSEGV", 10053)


def test_rendezvous_result_without_local_ranks(tmp_path):
    lines = [
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
        "  restart_count=0",
        "  master_addr=127.0.0.1",
        "  group_rank=1",
        "  group_world_size=2",
        "  global_ranks=[2, 3]",
        "  global_world_sizes=[4, 4]",
    ]
    inc = load_text(tmp_path, lines)
    assert inc.ranks["rank"].tolist() == [2, 3] and inc.ranks["world_size"].tolist() == [4, 4]
    assert inc.ranks["local_rank"].isna().all()


# --- torchfrtrace text --------------------------------------------------------------------------

_FR_BLOCK = [
    "Collective sequence number: 3 has errors",
    "internal record id: 2",
    "group info: 0:default_pg",
    "collective: gloo:all_gather",
    "input sizes: [[8]]",
    "output sizes: [[16]]",
    "world size: 2",
    "expected ranks: {0, 1}",
    "collective state: scheduled",
]


def test_culprit_event_of_an_output_size_or_state_mismatch():
    out = run(
        FRT,
        _FR_BLOCK
        + [
            "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected output "
            "sizes: '[[16]]' does not match found output sizes: '[[12]]'"
        ],
    )
    ev = one(out.events)
    assert (ev["source"], ev["rank"], ev["seq"], ev["out_shapes"], ev["numel_out"]) == ("frtrace", 1, 3, ((12,),), 12)
    out = run(
        FRT,
        _FR_BLOCK
        + [
            "error msg: Culprit rank 1; Error type: COLLECTIVE_STATE_MISMATCH, Expected state: "
            "'scheduled' does not match found state: 'completed'"
        ],
    )
    ev = one(out.events)
    assert (ev["rank"], ev["state"]) == (1, "completed")


def test_first_release_header_keeps_the_sizes():
    out = run(
        FRT,
        [
            "Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing "
            "ranks are {1, 2}  [[3, 4]] [[3, 4]] 4 scheduled ",
            "Collective stack traces: ",
            "[]",
        ],
    )
    err = one(out.errors)
    assert (err["input_sizes"], err["output_sizes"], err["world_size"]) == (((3, 4),), ((3, 4),), 4)

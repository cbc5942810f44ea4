"""Python reader: tracebacks per rank, OOM, torchrun agent, ChildFailedError table, spawn (docs/formats.md §8)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import denpex_nb as dx
from denpex_nb.incident import TRUNCATED_TRACEBACK
from denpex_nb.ingest.python import PythonReader

from ._text_helpers import one, run

R = PythonReader()

CFE_TABLE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
=======================================================
repro/a_allgather_mismatch.py FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-29_22:27:48
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 10052)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 10052
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_22:27:47
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 10053)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 10053
======================================================="""


def test_traceback_with_rank_prefix_is_one_exception_row():
    block = [
        "[default0]:[rank0]: Traceback (most recent call last):",
        '[default0]:[rank0]:   File "train_lm.py", line 88, in <module>',
        "[default0]:[rank0]:     dist.all_gather(out, t)",
        "[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:612] Connection closed by peer",
    ]
    out = run(R, block, first_lineno=10)
    err = one(out.errors)
    assert (err["kind"], err["rank"], err["line"], err["exc_type"]) == ("exception", 0, 10, "RuntimeError")
    assert err["message"].startswith("RuntimeError: [../third_party") and err["n_traceback_lines"] == 4
    assert out.parsed == {10, 11, 12, 13}


def test_interleaved_tracebacks_of_two_ranks():
    block = [
        "[rank0]: Traceback (most recent call last):",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "a.py", line 1, in <module>',
        '[rank0]:   File "a.py", line 1, in <module>',
        "[rank1]: ValueError: one",
        "[rank0]: KeyError: 'zero'",
    ]
    out = run(R, block)
    assert sorted((e["rank"], e["message"]) for e in out.errors) == [(0, "KeyError: 'zero'"), (1, "ValueError: one")]
    assert out.parsed == set(range(1, 7))


def test_multi_line_exception_message_is_kept():
    block = [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "a.py", line 1, in f',
        "[rank2]: RuntimeError: Expected to have finished reduction in the prior iteration.",
        "[rank2]: Parameter indices which did not receive grad for rank 2: 21 22",
    ]
    err = one(run(R, block).errors)
    assert err["message"].endswith("rank 2: 21 22") and err["message"].startswith("RuntimeError: Expected")


def test_chained_exceptions_give_one_row_each():
    block = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "KeyError: 'x'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in g',
        "RuntimeError: wrapped",
    ]
    out = run(R, block)
    assert [e["message"] for e in out.errors] == ["KeyError: 'x'", "RuntimeError: wrapped"]
    assert out.parsed >= {1, 2, 3, 5, 7, 8, 9}


def test_truncated_traceback_still_yields_a_row():
    out = run(R, ["[rank3]: Traceback (most recent call last):", '[rank3]:   File "a.py", line 1, in f'])
    err = one(out.errors)
    assert err["rank"] == 3 and "without its exception line" in err["message"]


def test_oom_all_eras():
    for text in [
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 912.00 MiB is free.",
        "[rank2]: RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
        "14.1 GiB already allocated; 3.75 MiB free; 14.5 GiB reserved in total by PyTorch)",
        "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 ...",
    ]:
        err = one(run(R, ["[rank2]: Traceback (most recent call last):", text]).errors)
        assert (err["kind"], err["rank"], err["device"]) == ("oom", 2, "cuda:0")


def test_agent_failed_and_closing_signal_lines():
    block = [
        "W1129 22:27:47.979000 10045 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 10052 "
        "closing signal SIGTERM",
        "E1129 22:27:48.169000 10045 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) "
        "local_rank: 1 (pid: 10053) of binary: venv/bin/python",
    ]
    out = run(R, block)
    closing = one(out.errors, signal="SIGTERM")
    assert closing["kind"] == "agent" and closing["pid"] == 10052 and closing["rank"] is None
    failed = one(out.errors, exit_code=-6)
    assert (failed["kind"], failed["signal"], failed["local_rank"], failed["pid"]) == ("agent", "SIGABRT", 1, 10053)
    assert failed["t_wall"] == datetime(2025, 11, 29, 22, 27, 48, 169000, tzinfo=timezone.utc)
    rk = one(out.ranks)
    assert (rk["local_rank"], rk["pid"], rk["exit_code"]) == (1, 10053, -6)


def test_child_failed_table_in_one_block():
    out = run(R, CFE_TABLE)
    rows = [e for e in out.errors if e["kind"] == "child_failed"]
    assert [(e["rank"], e["exit_code"], e["signal"], e["pid"], e["local_rank"]) for e in rows] == [
        (0, -15, "SIGTERM", 10052, 0),
        (1, -6, "SIGABRT", 10053, 1),
    ]
    assert [e["root_cause"] for e in rows] == [False, True]
    assert rows[1]["message"].startswith("Root Cause") and rows[1]["host"] == "localhost"
    assert rows[1]["t_wall"] == datetime(2026, 11, 29, 22, 27, 47, tzinfo=timezone.utc)
    assert sorted(r["rank"] for r in out.ranks) == [0, 1]
    assert out.parsed == set(range(1, len(CFE_TABLE.splitlines()) + 1))
    assert all(e["kind"] == "child_failed" for e in out.errors)


def test_child_failed_rows_split_over_blocks_still_parse():
    """The loader cuts the table at the bare ``[k]:`` lines; the ``=`` border still marks the root cause."""
    lines = CFE_TABLE.splitlines()
    root = one(run(R, lines[15:22]).errors)  # "  time ... traceback" + the closing "=====" border
    assert (root["rank"], root["exit_code"], root["signal"], root["root_cause"]) == (1, -6, "SIGABRT", True)
    other = one(run(R, lines[6:12]).errors)  # a Failures row, cut before its "-----" rule
    assert (other["rank"], other["root_cause"]) == (0, False)
    assert run(R, ["=" * 55, "-" * 55]).parsed == set()  # rules outside a table are not claimed


def test_child_failed_record_traceback():
    block = [
        "[0]:",
        "  time      : 2026-11-29_22:27:47",
        "  host      : h1",
        "  rank      : 3 (local_rank: 1)",
        "  exitcode  : 1 (pid: 77)",
        "  error_file: /tmp/err.json",
        "  traceback : Traceback (most recent call last):",
        '    File "x.py", line 3, in f',
        "      RuntimeError: boom",
    ]
    e = one(run(R, block).errors)
    assert e["rank"] == 3 and e["exit_code"] == 1 and e["signal"] is None and "RuntimeError: boom" in e["message"]


def test_spawn_exited_and_raised():
    out = run(
        R,
        [
            "Traceback (most recent call last):",
            '  File "r.py", line 9, in <module>',
            "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGABRT",
        ],
    )
    err = one(out.errors)
    assert (err["kind"], err["rank"], err["signal"]) == ("signal", 1, "SIGABRT")
    err = one(
        run(R, "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1").errors
    )
    assert (err["kind"], err["rank"], err["exit_code"]) == ("exit", 0, 1)
    block = [
        "torch.multiprocessing.spawn.ProcessRaisedException: ",
        "",
        "-- Process 0 terminated with the following error:",
        "Traceback (most recent call last):",
        '  File "w.py", line 3, in run',
        "RuntimeError: child boom",
    ]
    out = run(R, block)
    err = one(out.errors, kind="exception")
    assert err["rank"] == 0 and err["message"] == "RuntimeError: child boom"
    ex = one(out.errors, kind="exit")
    assert (ex["rank"], ex["exit_code"], ex["line"]) == (0, 1, 3)


def test_spawn_terminating_line():
    err = one(
        run(
            R,
            "W1129 22:24:40.100000 7846 torch/multiprocessing/spawn.py:165] Terminating process 7857 via signal SIGTERM",
        ).errors
    )
    assert (err["kind"], err["pid"], err["signal"]) == ("agent", 7857, "SIGTERM")


def test_lightning_rank_banner_and_deprecation_warning():
    out = run(R, "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8")
    assert one(out.ranks)["rank"] == 3
    out = run(
        R,
        [
            "[rank0]:/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:83: FutureWarning: "
            "`torch.distributed.all_gather_into_tensor` is deprecated. Please use `torch.distributed.all_gather_single` instead.",
            "[rank0]:   return func(*args, **kwargs)",
        ],
    )
    err = one(out.errors)
    assert (err["kind"], err["op"], err["rank"]) == ("warning", "all_gather_into_tensor", 0)
    assert out.parsed == {1, 2}


def test_standalone_exception_line_and_noise():
    assert one(run(R, "[rank1]: RuntimeError: boom").errors)["rank"] == 1
    out = run(R, ["Error: this is not an exception type", "some line with Exception in it"])
    assert out.errors == [] and out.parsed == set()


def test_fuzzed_input_never_raises():
    from ._text_helpers import fuzz

    fuzz(R)


def test_recorded_per_rank_stderr_traceback():
    """A torchrun --log-dir stderr file: `[rank1]:`-prefixed traceback, one exception row for rank 1."""
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[2]
        / "data"
        / "recorded"
        / "gloo"
        / "allgather-shape-mismatch"
        / "broken-detail-w2"
        / "attempt_0"
        / "1"
        / "stderr.log"
    )
    if not path.exists():
        import pytest

        pytest.skip("recorded run not present")
    from denpex_nb.ingest.base import FileContext

    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    out = run(R, lines, ctx=FileContext(file="stderr.log", local_rank_hint=1, year=2026))
    exc = [e for e in out.errors if e["kind"] == "exception"]
    assert len(exc) == 1 and exc[0]["rank"] == 1
    assert exc[0]["message"].startswith("RuntimeError: Detected mismatch between collectives")
    assert "allgather_shape_mismatch.py:" in exc[0]["call_site"] and exc[0]["call_site"].endswith(" in broken")
    tb = [n for n, t in enumerate(lines, 1) if t.startswith("[rank1]:") and "Running collective" not in t]
    assert set(tb) <= out.parsed  # every traceback line is claimed


def test_log_line_inside_a_traceback_does_not_become_its_exception():
    block = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "a.py", line 1, in f',
        "[rank0]:[W1129 22:27:23.883942729 ProcessGroupGloo.cpp:1] something logged meanwhile",
        "[rank0]: RuntimeError: the real one",
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGABRT",
    ]
    out = run(R, block)
    exc = one(out.errors, kind="exception")
    assert exc["message"] == "RuntimeError: the real one"
    assert 3 not in out.parsed  # the log line is not part of the traceback
    assert one(out.errors, kind="signal")["rank"] == 1  # a new exception line ends the message


# --- frames and truncated tracebacks (item: frames column, TRUNCATED_TRACEBACK) ----------------------


def test_exception_rows_carry_their_frames_innermost_last():
    from denpex_nb.incident import TRUNCATED_TRACEBACK

    tb = [
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
        "    main()",
        '  File "/x/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl',
        "    return forward_call(*args, **kwargs)",
        '  File "/x/site-packages/torch/nn/modules/_functions.py", line 99, in forward',
        "    dist.all_reduce(combined, dist.ReduceOp.SUM, process_group, async_op=False)",
    ]
    row = one(run(R, tb + ["RuntimeError: boom"]).errors)
    assert row["frames"] == (
        "train.py:88 in <module>\n/x/site-packages/torch/nn/modules/module.py:1501 in _call_impl\n"
        "/x/site-packages/torch/nn/modules/_functions.py:99 in forward"
    )
    cut = one(run(R, tb).errors)
    assert cut["message"].startswith(TRUNCATED_TRACEBACK + " (last: ") and cut["message"].endswith("async_op=False))")
    assert cut["frames"] == row["frames"]
    assert one(run(R, "RuntimeError: alone").errors).get("frames") is None


def test_frames_keep_the_innermost_thirty():
    tb = ["Traceback (most recent call last):"]
    for k in range(40):
        tb += [f'  File "f{k}.py", line {k + 1}, in g{k}', f"    g{k + 1}()"]
    row = one(run(R, tb + ["RecursionError: deep"]).errors)
    frames = row["frames"].split("\n")
    assert len(frames) == 30 and frames[0] == "f10.py:11 in g10" and frames[-1] == "f39.py:40 in g39"


def test_traceback_whose_head_was_cut_off():
    # tests/data/wild/torchtitan-1224-duplicate-gpu-nccl2265 (torchtitan#1224), lines 1-4
    block = [
        '[rank2]:   File "/home/less/.conda/envs/pycutlass/lib/python3.12/site-packages/torch/distributed/'
        'distributed_c10d.py", line 3945, in all_gather_into_tensor',
        "[rank2]:     work = group._allgather_base(output_tensor, input_tensor, opts)",
        "[rank2]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "[rank2]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.cpp:77, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.26.5",
    ]
    out = run(R, block)
    row = one(out.errors)
    assert (row["rank"], row["op"], row["exc_type"]) == (
        2,
        "all_gather_into_tensor",
        "torch.distributed.DistBackendError",
    )
    assert out.parsed == {1, 2, 3, 4}


def test_message_announced_before_the_traceback():
    # tests/data/wild/vllm-7800-tp8-pynccl-unhandled-system-error (vllm#7800), lines 1-3
    h = "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] "
    block = [
        h + "Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: unhandled "
        "system error (run with NCCL_DEBUG=INFO for details), Traceback (most recent call last):",
        h + '  File "/usr/local/lib/python3.10/dist-packages/vllm/executor/multiproc_worker_utils.py", line 223, '
        "in _run_worker_process",
        h + "    output = executor(*args, **kwargs)",
    ]
    row = one(run(R, block).errors)
    assert row["message"] == "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert row["pid"] == 232 and row["frames"].endswith("multiproc_worker_utils.py:223 in _run_worker_process")


def test_a_bare_prefix_before_traceback_is_no_announced_message():
    # "[rank1]: " behind an app logger's header is peeled (a prefix chain), never an announced message:
    # the line reads as the plain torchrun line does
    out = run(R, ["[RANK 1] 2025-01-01 12:00:03 [INFO] trainer: [rank1]: Traceback (most recent call last):"])
    plain = run(R, ["[rank1]: Traceback (most recent call last):"])
    strip = lambda rows: [{k: v for k, v in r.items() if k != "t_wall"} for r in rows]  # noqa: E731
    assert strip(out.errors) == strip(plain.errors)
    assert [e["message"] for e in out.errors] == [TRUNCATED_TRACEBACK] and out.errors[0]["rank"] == 1


APP = "[RANK 1] 2025-01-01 12:00:0{s} [ERROR] trainer: "
FRAMES = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 30, in broken',
    '    raise ValueError(f"corrupt sample in batch {BAD_STEP}")',
    "ValueError: corrupt sample in batch 3 on rank 1: expected 16 features, got 15",
]


@pytest.mark.parametrize(
    "chain",
    [
        "{app}[rank1]: ",  # app logger around torchrun's prefix
        "[default1]:{app}[rank1]: ",  # torchrun --tee around both
        "2024-05-01T12:00:00.123456789Z [default1]:{app}[rank1]: ",  # kubectl, then the rest
        "May  1 12:00:03 node1 python[3871]: {app}[rank1]: ",  # syslog, then the rest
        "[rank1]: {app}",  # the app logger inside torchrun's prefix
        "{app}2024-05-01T12:00:00.123456789Z [rank1]: ",  # a collector time inside the app's message
        "rank1.log:{app}[default1]:[rank1]: ",  # grep -H, app, torchrun, rank
    ],
)
def test_prefix_chains_in_any_order_give_one_traceback(chain, tmp_path):
    lines = [chain.format(app=APP.format(s=k % 10)) + t for k, t in enumerate(FRAMES)]
    (tmp_path / "log.txt").write_text("\n".join(lines) + "\n")
    inc = dx.load(str(tmp_path / "log.txt"), progress=False)
    exc = inc.errors[inc.errors["kind"] == "exception"]
    assert list(exc["message"]) == [FRAMES[-1]], lines
    assert list(exc["rank"]) == [1]
    assert exc["frames"].iloc[0] == "/work/train.py:30 in broken"
    s = inc.sources
    assert int(s["lines_parsed"].iloc[0]) == len(lines) and int(s["lines_unparsed"].iloc[0]) == 0


def test_a_glog_header_after_the_rank_prefix_after_an_app_header():
    from denpex_nb.ingest.prefixes import parse_header

    ln = parse_header(
        APP.format(s=0) + "[rank3]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] [Rank 3] Watchdog "
        "caught collective operation timeout"
    )
    assert ln.rank == 3 and ln.severity == "E" and ln.origin == "ProcessGroupNCCL.cpp:688"
    assert ln.text.startswith("[Rank 3] Watchdog") and ln.prefixes == ("app_rank", "applog", "rank", "glog_cpp")

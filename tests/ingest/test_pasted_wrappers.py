"""Wrappers around log lines as they reach us from launchers, inference servers and issue threads
(items: Open MPI prefixes, vLLM / Ray / sglang worker prefixes, markdown quoting, Rich console).

Formats, and where they come from:

* Open MPI ``mpirun --tag-output``: ``[<job>,<rank>]<stdout>:`` / ``<stderr>:`` before every line,
  also before an empty one (``[1,2]<stdout>:`` alone).
* Ray actors: ``(RayWorkerWrapper pid=123, ip=10.0.0.1) ``, coloured with SGR codes that a paste may
  keep without their escape byte (`` [36m(RayWorkerVllm pid=5085) [0m ...``); vLLM's multiprocessing
  workers ``(VllmWorkerProcess pid=760) `` and (v1) ``(VllmWorker rank=3 pid=406) ``, then vLLM's
  logger header ``ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] `` (newer: ``[file.py:NN] ``)
  on every line, traceback lines included. ``rank=N`` names the rank; a pid only a process.
* sglang's logger: ``[2025-01-01 12:00:00 TP14 EP14] `` (TP = tensor-parallel rank: the rank when no
  DP/PP tag says the TP group is a part of the job), ``[2025-01-01 12:00:00] ``.
* Markdown quoting of a paste in a comment: ``> `` (``>> ``, ``> > ``, a quoted blank line ``>``).
* Rich's console (accelerate, typer): the logging handler's columns (level padded to 8, message,
  ``file.py:NN`` right-aligned; a long message wraps onto an indented line) and the traceback box
  (``╭─ Traceback (most recent call last) ─╮``, ``│ frame │``, ``╰──╯``), sometimes after the cut
  tail of a kubectl time (``056444Z ``).

Every physical line is accounted for (``lines_total == parsed + unparsed``) in every test that loads.
"""

from __future__ import annotations

import os

import pytest

import denpex_nb as dx
from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.prefixes import parse_header, to_lines
from denpex_nb.ingest.scan import is_continuation

WILD = os.path.join(os.path.dirname(__file__), "..", "data", "wild")


def load_text(tmp_path, lines: list[str], name: str = "log.txt"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    inc = dx.load(str(p))
    s = inc.sources.iloc[0]
    assert s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"] == len(lines)
    return inc


def lines_of(*texts: str):
    return to_lines(list(enumerate(texts, start=1)), FileContext(file="t.log", year=2025))


def parsed(inc) -> int:
    return int(inc.sources.iloc[0]["lines_parsed"])


# --- Open MPI ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("job, rank", [(1, 3), (2, 0), (17, 123)])
def test_mpi_tag_attributes_the_rank(stream, job, rank):
    ln = parse_header(f"[{job},{rank}]<{stream}>:h:1:2 [0] NCCL WARN Duplicate GPU detected : rank {rank} and rank 0")
    assert ln.rank == rank and ln.host == "h" and "mpi" in ln.prefixes


@pytest.mark.parametrize(
    "stamp", ["2019-06-02T16:13:44.884Z: ", "2019-06-02T16:13:44.884Z ", "2024-05-01T10:00:03+02:00: "]
)
@pytest.mark.parametrize("rank", [0, 12, 255])
def test_mpi_tag_behind_a_collectors_time_attributes_the_rank(stamp, rank):
    """A log collector's ISO time (with or without a colon after it) before Open MPI's tag: the tag
    still names the rank, the host:pid prefix after it still names the process."""
    ln = parse_header(f"{stamp}[1,{rank}]<stdout>:node-57:815:864 [0] misc/ibvwrap.cu:220 NCCL WARN Call to ibv failed")
    assert (ln.rank, ln.host, ln.pid) == (rank, "node-57", 815) and ln.t_wall is not None


def test_mpi_blank_tagged_lines_count_as_parsed_inside_a_block(tmp_path):
    # tests/data/wild/horovod-3929-duplicate-gpu-mpirun-prefix (horovod#3929), lines 2-5
    corpus = [
        "[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:916 -> 5",
        "[1,2]<stdout>:",
        "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
        "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] NCCL INFO init.cc:867 -> 5",
    ]
    inc = load_text(tmp_path, corpus)
    assert parsed(inc) == 4
    assert set(inc.errors["rank"].dropna().astype(int)) == {2, 3}
    # a block of nothing but blank tags proves nothing: stays unparsed
    inc = load_text(tmp_path, ["[1,2]<stdout>:", "[1,2]<stdout>:", "step 3"], "b.log")
    assert parsed(inc) == 0


def test_mpi_tagged_traceback_is_one_traceback(tmp_path):
    lines = [
        "[1,5]<stderr>:Traceback (most recent call last):",
        '[1,5]<stderr>:  File "train.py", line 9, in <module>',
        "[1,5]<stderr>:    dist.all_reduce(t)",
        "[1,5]<stderr>:RuntimeError: boom",
    ]
    assert is_continuation(lines[0].encode(), lines[1].encode())
    inc = load_text(tmp_path, lines)
    (row,) = inc.errors.itertuples()
    assert (row.kind, row.rank, row.message, row.op) == ("exception", 5, "RuntimeError: boom", "all_reduce")
    assert parsed(inc) == 4


# --- vLLM / Ray / sglang workers ---------------------------------------------------------------


@pytest.mark.parametrize(
    "tag, rank, pid, host",
    [
        ("(VllmWorker rank=3 pid=406) ", 3, 406, None),
        ("(VllmWorkerProcess pid=760) ", None, 760, None),
        ("(RayWorkerVllm pid=7046) ", None, 7046, None),
        ("(RayWorkerWrapper pid=123, ip=10.0.0.1) ", None, 123, "10.0.0.1"),
        ("(VllmWorker TP2 pid=9) ", None, 9, None),  # a TP index is no rank
        (" [36m(RayWorkerVllm pid=5085) [0m ", None, 5085, None),  # colours that lost their escape byte
        ("\x1b[36m(RayWorkerVllm pid=5085)\x1b[0m ", None, 5085, None),
    ],
)
@pytest.mark.parametrize(
    "header",
    [
        "",
        "ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] ",
        "WARNING 07-23 19:34:51 [multiproc_executor.py:487] ",
        "INFO 02-03 13:14:04.123 llm_engine.py:706] ",
    ],
)
def test_worker_prefix_and_vllm_header(tag, rank, pid, host, header):
    ln = parse_header(tag + header + "RuntimeError: NCCL error: unhandled cuda error")
    assert ln.text == "RuntimeError: NCCL error: unhandled cuda error"
    assert (ln.rank, ln.pid, ln.host) == (rank, pid, host)
    if header:
        assert ln.severity in "EWI" and ln.origin.split(":")[0].endswith(".py") and ln.t_wall is not None


@pytest.mark.parametrize(
    "tags, rank", [("TP14 EP14", 14), ("TP3", 3), ("DP1 TP3", None), ("PP1 TP0", None), ("", None)]
)
def test_sglang_header(tags, rank):
    ln = parse_header(f"[2025-01-01 12:00:00{' ' + tags if tags else ''}] Scheduler hit an exception")
    assert (ln.text, ln.rank) == ("Scheduler hit an exception", rank)
    assert ln.t_wall is not None and "sglang" in ln.prefixes


def test_sglang_header_does_not_take_an_nccl_timestamp():
    ln = parse_header(
        "[2025-04-12 09:14:02] node7:42:43 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE"
    )
    assert ln.host == "node7" and "nccl" in ln.prefixes


def test_vllm_worker_traceback_with_a_header_on_every_line(tmp_path):
    # tests/data/wild/vllm-17756-v1-workerproc-nccl-unhandled-cuda-error (vllm#17756), lines 5-9,
    # then an exception line to close it (generated)
    h = "(VllmWorker rank=7 pid=410) ERROR 07-23 19:34:51 [multiproc_executor.py:487] "
    lines = [
        h + "WorkerProc failed to start.",
        h + "Traceback (most recent call last):",
        h
        + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 461, in worker_main',
        h + "    worker = WorkerProc(*args, **kwargs)",
        h + "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        h + "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    ]
    inc = load_text(tmp_path, lines)
    ex = inc.errors[inc.errors["kind"] == "exception"]
    assert len(ex) == 1 and ex.iloc[0]["rank"] == 7 and ex.iloc[0]["message"].startswith("RuntimeError: NCCL error")
    assert ex.iloc[0]["n_traceback_lines"] == 5
    ne = inc.errors[inc.errors["kind"] == "nccl_error"]
    assert len(ne) == 1 and ne.iloc[0]["rank"] == 7 and ne.iloc[0]["nccl_result"] == "ncclUnhandledCudaError"
    assert parsed(inc) == 5  # "WorkerProc failed to start." is nobody's


def test_a_different_header_still_cuts_into_a_traceback(tmp_path):
    lines = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "t.py", line 3, in f',
        "[rank0]:[W ProcessGroupNCCL.cpp:1] Warning: something",
        "[rank0]:     dist.barrier()",
        "[rank0]: RuntimeError: boom",
    ]
    inc = load_text(tmp_path, lines)
    ex = inc.errors[inc.errors["kind"] == "exception"]
    assert ex["message"].tolist() == ["RuntimeError: boom"]


def test_worker_pids_keep_their_tracebacks_apart(tmp_path):
    a = "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] "
    b = "(VllmWorkerProcess pid=235) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] "
    lines = [
        a + "Traceback (most recent call last):",
        b + "Traceback (most recent call last):",
        a + '  File "x.py", line 1, in f',
        b + '  File "y.py", line 2, in g',
        a + "RuntimeError: first",
        b + "ValueError: second",
    ]
    inc = load_text(tmp_path, lines)
    ex = inc.errors[inc.errors["kind"] == "exception"].sort_values("line")
    assert ex["message"].tolist() == ["RuntimeError: first", "ValueError: second"]
    assert ex["frames"].tolist() == ["x.py:1 in f", "y.py:2 in g"]


def test_ray_blank_lines_and_fatal_python_error(tmp_path):
    # tests/data/wild/vllm-4108-ray-worker-abort-illegal-memory-access (vllm#4108), lines 2-4
    lines = [
        "(RayWorkerVllm pid=7046) Fatal Python error: Aborted",
        "(RayWorkerVllm pid=7046) ",
        "(RayWorkerVllm pid=7046) ",
    ]
    inc = load_text(tmp_path, lines)
    (row,) = inc.errors.itertuples()
    assert (row.kind, row.signal, row.pid) == ("signal", "SIGABRT", 7046)
    assert parsed(inc) == 3


def test_lost_sgr_codes_and_the_ray_repeat_suffix():
    # tests/data/wild/vllm-2734-ray-worker-allreduce-timeout (vllm#2734), line 4
    (ln,) = lines_of(
        " [36m(RayWorkerVllm pid=5310) [0m [W CUDAGraph.cpp:145] Warning: Waiting for pending NCCL work to "
        "finish before starting graph capture. (function operator()) [32m [repeated 6x across cluster] [0m"
    )
    assert ln.pid == 5310 and ln.severity == "W" and ln.text.startswith("Warning: Waiting")
    assert ln.text.endswith("(function operator())") and "ray_repeated=6" in ln.prefixes
    # "[0m" inside a message word is left alone
    (ln,) = lines_of("[rank0]: loss[0m] = 3")
    assert ln.text == "loss[0m] = 3"


# --- markdown quoting --------------------------------------------------------------------------


@pytest.mark.parametrize("quote", ["> ", ">> ", "> > "])
def test_quoted_lines_read_like_the_plain_ones(tmp_path, quote):
    plain = [
        "[rank1]:[E131 16:15:16.686699493 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800004 "
        "milliseconds before timing out.",
        "Traceback (most recent call last):",
        '  File "t.py", line 3, in f',
        "    dist.broadcast(t, 0)",
        "RuntimeError: boom",
        "  what():  [Rank 3] NCCL watchdog thread terminated with exception: boom",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f5049fafd87 in libc10.so)",
    ]
    a = load_text(tmp_path, plain, "plain.log")
    b = load_text(tmp_path, [quote + t for t in plain], "quoted.log")
    cols = ["rank", "kind", "op", "seq", "message", "line"]
    assert a.errors[cols].equals(b.errors[cols])
    assert parsed(a) == parsed(b)


def test_quote_edge_cases():
    assert parse_header(">  [E ProcessGroupNCCL.cpp:481] [Rank 65] x").text == "[Rank 65] x"  # nccl#1111 line 1
    assert parse_header(">").text == "" and parse_header("> ").text == ""
    assert parse_header(">>> import torch").text == ">>> import torch"  # a REPL, no quote
    assert parse_header('>   File "t.py", line 3, in f').text == '  File "t.py", line 3, in f'


def test_quoted_corpus_cases_read_whole():
    # nccl#1111 and trl#1584: every line of the quoted paste is read
    for case in ("nccl-1111-reducescatter-timeout-quoted", "trl-1584-dpo-zero3-eval-allgather-timeout-quoted"):
        inc = dx.load(os.path.join(WILD, case, "log.txt"))
        s = inc.sources.iloc[0]
        assert s["lines_unparsed"] == 0, case
        assert not inc.errors["message"].str.startswith(">").any()


# --- Rich console ------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
@pytest.mark.parametrize("time_col", ["", " ", "[12/01/23 10:00:00] "])
def test_rich_log_columns(level, time_col):
    ln = parse_header(f"{time_col}{level:<8} Sending process 14 closing signal SIGTERM         api.py:699")
    assert ln.text == "Sending process 14 closing signal SIGTERM" and ln.origin == "api.py:699"
    assert ln.severity == level[0]


def test_rich_wrapped_agent_line_is_joined(tmp_path):
    # tests/data/wild/accelerate-1214-llama30b-sigkill-local-rank5 (accelerate#1214), lines 8-10
    lines = [
        " WARNING  Sending process 29 closing signal SIGTERM         api.py:699",
        " ERROR    failed (exitcode: -9) local_rank: 5 (pid: 22) of  api.py:673",
        " binary: /opt/conda/bin/python ",
    ]
    inc = load_text(tmp_path, lines)
    agent = inc.errors[inc.errors["exit_code"].notna()].iloc[0]
    assert (agent["kind"], agent["exit_code"], agent["signal"], agent["local_rank"], agent["pid"]) == (
        "agent",
        -9,
        "SIGKILL",
        5,
        22,
    )
    assert agent["message"].endswith("of binary: /opt/conda/bin/python") and agent["line"] == 2
    assert parsed(inc) == 3


def test_rich_traceback_box(tmp_path):
    # the box as Rich draws it (accelerate#1214, lines 11-17, then a generated end of the box)
    lines = [
        "056444Z ╭───────────────────── Traceback (most recent call last) ──────────────────────╮",
        "058181Z │                                                                              │",
        "061458Z │ /opt/conda/bin/accelerate:8 in <module>                                      │",
        "065546Z │   5 from accelerate.commands.accelerate_cli import main                      │",
        "069203Z │ /opt/conda/lib/python3.10/site-packages/torch/distributed/run.py:788 in run  │",
        "069204Z ╰──────────────────────────────────────────────────────────────────────────────╯",
        "ChildFailedError: train.py FAILED",
    ]
    inc = load_text(tmp_path, lines)
    assert parsed(inc) == len(lines)
    lines2 = lines[:-1] + ["RuntimeError: boom"]
    inc = load_text(tmp_path, lines2, "b.log")
    ex = inc.errors[inc.errors["kind"] == "exception"].iloc[0]
    assert ex["message"] == "RuntimeError: boom" and ex["line"] == 1
    assert ex["frames"] == (
        "/opt/conda/bin/accelerate:8 in <module>\n"
        "/opt/conda/lib/python3.10/site-packages/torch/distributed/run.py:788 in run"
    )
    assert ex["call_site"] == "/opt/conda/bin/accelerate:8 in <module>"


def test_rich_box_cut_short_is_a_truncated_traceback():
    inc = dx.load(os.path.join(WILD, "accelerate-1214-llama30b-sigkill-local-rank5", "log.txt"))
    from denpex_nb.incident import TRUNCATED_TRACEBACK

    ex = inc.errors[inc.errors["kind"] == "exception"]
    assert len(ex) == 1 and ex.iloc[0]["message"].startswith(TRUNCATED_TRACEBACK)
    assert inc.sources.iloc[0]["lines_unparsed"] == 1  # the progress bar

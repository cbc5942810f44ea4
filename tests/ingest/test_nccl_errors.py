"""NCCL failures as NCCL and Python print them (items: NCCL error traces, NCCL errors raised outside torch).

NCCL's ``NCCLCHECK`` prints, for a call that returned a non-zero ``ncclResult_t``, one INFO line per
stack level, innermost first: ``host:pid:tid [dev] NCCL INFO init.cc:903 -> 5`` (``-> N`` is the
code; ``[Progress Thread]`` / ``[Proxy Thread]`` when a helper thread failed). Codes: 1 unhandled
cuda error, 2 system error, 3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error,
7 in progress. Each burst of one process becomes ONE ``nccl_error`` row.

vLLM's pynccl raises ``RuntimeError(f"NCCL error: {ncclGetErrorString(result)}")``; torch's own
``DistBackendError: NCCL error in: <file:line>, <string>, NCCL version X`` is read as before; an
``ncclSystemError: ...`` line may sit behind an exception name.
"""

from __future__ import annotations

import os

import pytest

import denpex_nb as dx
from denpex_nb.ingest.nccl import NCCL_RESULTS, NcclReader

from ._text_helpers import one, run

R = NcclReader()
WILD = os.path.join(os.path.dirname(__file__), "..", "data", "wild")


@pytest.mark.parametrize("code", sorted(NCCL_RESULTS))
@pytest.mark.parametrize("thread", ["", " [Progress Thread]", " [Proxy Thread]"])
def test_one_row_per_burst_with_the_innermost_location(code, thread):
    out = run(
        R,
        [
            f"h1:11:12 [4] NCCL INFO transport/net.cc:1302 -> {code}",
            f"h1:11:12 [4] NCCL INFO proxy.cc:698 -> {code}",
            f"h1:11:12 [4] NCCL INFO proxy.cc:878 -> {code}{thread}",
        ],
    )
    row = one(out.errors, kind="nccl_error")
    name, meaning = NCCL_RESULTS[code]
    assert (row["nccl_result"], row["nccl_code"], row["origin"]) == (name, code, "transport/net.cc:1302")
    assert meaning in row["message"] and "transport/net.cc:1302" in row["message"]
    assert (row["host"], row["pid"], row["device"], row["rank"]) == ("h1", 11, "4", None)
    assert row["nccl_trace"].split("\n") == ["transport/net.cc:1302", "proxy.cc:698", "proxy.cc:878"]


def test_interleaved_processes_get_a_row_each_and_the_init_map_names_ranks():
    out = run(
        R,
        [
            "h1:11:12 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x9 - Init COMPLETE",
            "h1:22:23 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2 commId 0x9 - Init COMPLETE",
            "h1:11:12 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000",
            "h1:11:12 [0] NCCL INFO init.cc:867 -> 5",
            "h1:22:23 [1] NCCL INFO init.cc:867 -> 5",
            "h1:11:12 [0] NCCL INFO init.cc:903 -> 5",
            "h1:22:23 [1] NCCL INFO init.cc:903 -> 5",
        ],
    )
    rows = [r for r in out.errors if r["kind"] == "nccl_error"]
    assert [(r["rank"], r["pid"], r["origin"]) for r in rows] == [(0, 11, "init.cc:867"), (1, 22, "init.cc:867")]
    assert rows[0]["last_warn"].startswith("Duplicate GPU detected") and rows[1]["last_warn"] is None


def test_another_line_of_the_process_ends_its_burst():
    out = run(
        R,
        [
            "h:1:2 [0] NCCL INFO net.cc:1 -> 2",
            "h:1:2 [0] misc/socket.cc:3 NCCL WARN socket closed",
            "h:1:2 [0] NCCL INFO net.cc:1 -> 2",
        ],
    )
    assert [r["line"] for r in out.errors if r["kind"] == "nccl_error"] == [1, 3]


def test_mpi_rank_prefix_names_the_rank():
    # tests/data/wild/horovod-3929-duplicate-gpu-mpirun-prefix (horovod#3929), lines 1-2
    out = run(
        R,
        [
            "[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:903 -> 5",
            "[1,3]<stdout>:smc-gpu-03:29881:30401 [0] NCCL INFO init.cc:916 -> 5",
        ],
    )
    row = one(out.errors, kind="nccl_error")
    assert (row["rank"], row["nccl_result"], row["origin"]) == (3, "ncclInvalidUsage", "init.cc:903")


def test_other_arrows_are_not_traces():
    out = run(
        R, ["h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "h:1:2 [0] NCCL INFO Ring 00 : 0 -> 1 -> 0"]
    )
    assert out.errors == [] and len(out.parsed) == 2


@pytest.mark.parametrize(
    "case, n_rows, codes",
    [
        ("nccl-1405-ib-completion-error-12", 3, {"ncclRemoteError"}),
        ("nccltests-24-ib-error12-then-illegal-access", 3, {"ncclSystemError", "ncclUnhandledCudaError"}),
        ("horovod-3929-duplicate-gpu-mpirun-prefix", 4, {"ncclInvalidUsage"}),
    ],
)
def test_corpus_traces(case, n_rows, codes):
    inc = dx.load(os.path.join(WILD, case, "log.txt"))
    ne = inc.errors[inc.errors["kind"] == "nccl_error"]
    assert len(ne) == n_rows and set(ne["nccl_result"]) == codes
    assert (inc.errors["kind"] == "nccl_warn").any()  # the WARN lines stay nccl_warn rows


# --- NCCL errors raised by Python code ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, result",
    [
        (
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "ncclUnhandledCudaError",
        ),
        ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "ncclSystemError"),
        (
            "RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers",
            "ncclInternalError",
        ),
        ("RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)", "ncclInvalidUsage"),
        ("RuntimeError: NCCL error: remote process exited or there was a network error", "ncclRemoteError"),
        (
            "Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error "
            "(run with NCCL_DEBUG=INFO for details), Traceback (most recent call last):",
            "ncclSystemError",
        ),
        (
            "RuntimeError: ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
            "ncclSystemError",
        ),
        ("torch.distributed.DistBackendError: ncclInternalError: Internal check failed.", "ncclInternalError"),
        (
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid argument (run with "
            "NCCL_DEBUG=WARN for details), NCCL version 2.14.3",
            "ncclInvalidArgument",
        ),
    ],
)
@pytest.mark.parametrize(
    "prefix, rank, pid",
    [
        ("", None, None),
        ("[rank2]: ", 2, None),
        ("(VllmWorker rank=3 pid=406) ERROR 07-23 19:34:51 [multiproc_executor.py:487] ", 3, 406),
        ("(VllmWorkerProcess pid=760) ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] ", None, 760),
    ],
)
def test_python_side_nccl_errors(text, result, prefix, rank, pid):
    row = one(run(R, prefix + text).errors, kind="nccl_error")
    assert (row["nccl_result"], row["rank"], row["pid"]) == (result, rank, pid)


def test_source_lines_in_tracebacks_are_not_errors():
    out = run(R, ['    raise RuntimeError(f"NCCL error: {error_str}")', "    if result == ncclSystemError:"])
    assert out.errors == []


@pytest.mark.parametrize(
    "case",
    [
        "vllm-17756-v1-workerproc-nccl-unhandled-cuda-error",
        "vllm-6732-pynccl-init-unhandled-cuda-error",
        "vllm-7800-tp8-pynccl-unhandled-system-error",
    ],
)
def test_corpus_pynccl_cases_have_the_error_and_the_exception(case):
    inc = dx.load(os.path.join(WILD, case, "log.txt"))
    kinds = set(inc.errors["kind"].astype(str))
    assert {"nccl_error", "exception"} <= kinds
    ne = inc.errors[inc.errors["kind"] == "nccl_error"].iloc[0]
    assert ne["nccl_result"] in ("ncclUnhandledCudaError", "ncclSystemError") and ne["pid"] > 0

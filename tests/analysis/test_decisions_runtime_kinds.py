"""Kinds of evidence that blind batches i and j misread (benchmarks/results/blind/blind-2026-12-i.json,
-j.json), each fixed in its layer and tested on generated variants: wrapped by launchers, stamped,
hard-wrapped, cut, and on a subset of the ranks.

Decisions of the failure-signal vocabulary (``denpex_nb/signals.py``):

- another framework's distributed runtime (JAX / XLA / TensorFlow's coordination service over gRPC)
  that gave up waiting: ``DEADLINE_EXCEEDED`` in its capitals or ``Deadline Exceeded`` in gRPC's words,
  a barrier that timed out, a task's missed heartbeats, under TensorFlow's / XLA's log header
  (``2024-04-12 23:39:41.656900: E external/.../client.cc:96]``, whose level letter is an error) is a
  timeout of the job: ``timeout-undetermined``, never ``no-evidence``, no culprit
  (test_a_coordination_service_that_gave_up_waiting_is_a_timeout); the same header at ``I`` with
  nothing failing is no failure signal (test_the_runtimes_info_header_is_no_failure).
- the path between two GPUs that a collective library's own kernels use could not be set up (peer
  access not supported, a CUDA IPC handle that would not open, a CUDA call a custom all-reduce checked
  that failed): the collective library's error, ``nccl-error``, not "cause undetermined" (a Python
  exception that says so stays its process's crash, ``rank-crash``)
  (test_a_custom_all_reduce_that_cannot_reach_its_peer_is_the_collective_librarys_error); a device
  fault the custom all-reduce's check found (an illegal memory access) stays the device's, and an
  out-of-memory stays memory (test_a_device_fault_in_a_custom_all_reduce_stays_the_devices).

Decisions of the readers:

- c10d: the ``what():`` of a ``terminate called`` abort that holds a watchdog's collective timeout is
  that timeout (its rank, op and sequence number): the abort, and the launcher's exit -6 (SIGABRT) of
  that process after it, are its consequence, so the verdict is ``timeout-undetermined`` at that op and
  the launcher's crash only an alternative
  (test_a_launchers_sigabrt_after_the_ranks_own_watchdog_timeout_is_its_consequence); a crash signal
  stated by the launcher (SIGSEGV) is still a crash
  (test_a_crash_signal_after_a_watchdog_timeout_is_still_a_crash).
- NCCL: a line prefix with the host but without pid:tid (``gpu-server320 [5] NCCL INFO ...``) is
  NCCL's, so its WARN and its return-code trace (``misc/socket.cc:64 -> 6``: ncclRemoteError) are read:
  a bootstrap socket reset by its peer inside one node is NCCL's error, ``nccl-error``, not
  "cause undetermined" (test_ncclss_socket_error_under_a_host_only_prefix_is_nccls_error).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.signals import classify_text
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import WRAPPERS, diagnose_files, healthy_lines

#: ways a paste mangles a line besides the launchers' wrappers (WRAPPERS): a quote marker, a hard wrap at 80
#: characters (the tail on a line of its own)
_MANGLE = {
    "quoted": lambda r, t: [f"> {t}"],
    "hard-wrapped": lambda r, t: [t[i : i + 80] for i in range(0, len(t), 80)],
}


def _lines(texts: list[str], mangle: str, ranks=(0,)) -> list[str]:
    out = []
    for r in ranks:
        for t in texts:
            out += [WRAPPERS[mangle](r, t)] if mangle in WRAPPERS else _MANGLE[mangle](r, t)
    return out


# --- a. another framework's coordination service -------------------------------------------------

_TF = "2024-04-12 23:39:41.656900: {lvl} external/xla/xla/{src}] {msg}"
_COORD = [
    [
        _TF.format(
            lvl="E",
            src="pjrt/distributed/client.cc:96",
            msg="Coordination service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded",
        )
    ],
    [
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect. "
        "Timed out task names:",
        "/job:jax_worker/replica:0/task:3",
    ],
    [
        _TF.format(
            lvl="E",
            src="tsl/distributed_runtime/coordination/coordination_service.cc:1170",
            msg=(
                "/job:jax_worker/replica:0/task:1 has been set to ERROR in coordination service: UNAVAILABLE: Task "
                "/job:jax_worker/replica:0/task:1 heartbeat timeout. This indicates that the remote task has failed, got "
                "preempted, or crashed unexpectedly."
            ),
        )
    ],
    [
        "Additional GRPC error information from remote target unknown_target_for_coordination_leader while calling "
        "/tensorflow.CoordinationService/RegisterTask:",
        ':{"created":"@1712965181.656280441","description":"Deadline Exceeded","file":"external/com_github_grpc_grpc/'
        'src/core/ext/filters/deadline/deadline_filter.cc","file_line":69,"grpc_status":4}',
    ],
]


@pytest.mark.parametrize("mangle", ["plain", "docker", "kubectl", "slurm", "ray", "quoted", "hard-wrapped"])
@pytest.mark.parametrize("k", range(len(_COORD)))
def test_a_coordination_service_that_gave_up_waiting_is_a_timeout(tmp_path, k, mangle):
    d = diagnose_files(tmp_path, {"job.log": _lines(_COORD[k], mangle, ranks=(0, 1))})
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    assert not d.culprit_ranks


def test_the_runtimes_info_header_is_no_failure():
    for msg in ("Connected to distributed JAX controller", "Coordination agent has successfully connected."):
        sig = classify_text(_TF.format(lvl="I", src="pjrt/distributed/client.cc:130", msg=msg))
        assert sig is None or not sig.failure


# --- b. a custom all-reduce's peer-to-peer path -------------------------------------------------

_P2P = [
    "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these two "
    "devices'",
    "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:336 'invalid argument'",
    "RuntimeError: CUDART error: peer access is not supported between these two devices",
    "RuntimeError: CUDA error: peer access has not been enabled",
    "[TensorRT-LLM][ERROR] Encountered an error: peer access is not supported between these two devices in "
    "tensorrt_llm::runtime::IpcMemory::allocateIpcMemory()",
    "RuntimeError: cudaIpcOpenMemHandle failed: cudaErrorPeerAccessUnsupported",
]


@pytest.mark.parametrize("mangle", ["plain", "torch", "ray", "docker", "hard-wrapped"])
@pytest.mark.parametrize("ranks", [(0,), (0, 1)], ids=["one-rank", "two-ranks"])
@pytest.mark.parametrize("k", range(len(_P2P)))
def test_a_custom_all_reduce_that_cannot_reach_its_peer_is_the_collective_librarys_error(tmp_path, k, ranks, mangle):
    assert classify_text(_P2P[k]).family == SignalFamily.NETWORK
    lines = ["[19:01:01 TP0] Init nccl begin.", "[19:01:01 TP1] Init nccl begin.", "NCCL version 2.20.5+cuda12.4"]
    d = diagnose_files(tmp_path, {"job.log": lines + _lines([_P2P[k]], mangle, ranks)})
    # a Python exception that says so is its process's crash (the own-failure rule): as right
    assert d.verdict == (ClassId.RANK_CRASH if "Error: " in _P2P[k] else ClassId.NCCL_ERROR), d.summary()
    assert not d.culprit_ranks


@pytest.mark.parametrize(
    "text, family",
    [
        (
            "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'an illegal memory access was encountered'",
            SignalFamily.DEVICE,
        ),
        (
            "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'unspecified launch failure'",
            SignalFamily.DEVICE,
        ),
        ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'out of memory'", SignalFamily.MEMORY),
        ("RuntimeError: CUDA error: device-side assert triggered", SignalFamily.DEVICE),
    ],
)
def test_a_device_fault_in_a_custom_all_reduce_stays_the_devices(text, family):
    assert classify_text(text).family == family


# --- c. the launcher's SIGABRT after the rank's own watchdog timeout ------------------------------

_SEQ_OPS = [
    (806, "BROADCAST", "broadcast"),
    (9141, "_ALLGATHER_BASE", "all_gather_into_tensor"),
    (4, "ALLREDUCE", "all_reduce"),
]


def _abort_block(rank: int, seq: int, op: str, code: int = -6, n_local: int = 8) -> list[str]:
    pids = [561635 + i for i in range(n_local)]
    lines = [
        "terminate called after throwing an instance of 'std::runtime_error'",
        f"  what():  [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
        "Timeout(ms)=1800000) ran for 1801027 milliseconds before timing out.",
    ]
    agent = "WARNING:torch.distributed.elastic.multiprocessing.api:"
    local = rank % n_local
    lines += [f"{agent}Sending process {p} closing signal SIGTERM" for i, p in enumerate(pids) if i != local]
    lines.append(
        f"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {code}) local_rank: {local} "
        f"(pid: {pids[local]}) of binary: /usr/bin/python"
    )
    return lines


@pytest.mark.parametrize("stamp", ["none", "docker"])
@pytest.mark.parametrize("rank", [7, 3, 12])
@pytest.mark.parametrize("k", range(len(_SEQ_OPS)))
def test_a_launchers_sigabrt_after_the_ranks_own_watchdog_timeout_is_its_consequence(tmp_path, k, rank, stamp):
    seq, op, name = _SEQ_OPS[k]
    lines = _abort_block(rank, seq, op)
    if stamp == "docker":
        lines = [WRAPPERS["docker"](0, t) for t in lines]
    d = diagnose_files(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    assert not d.culprit_ranks
    assert (d.first.op, d.first.seq) == (name, seq)
    assert ClassId.RANK_CRASH in [a.class_id for a in d.alternatives]
    inc = dx.load(str(tmp_path / "job.log"), progress=False)
    abort = inc.errors[inc.errors["kind"].astype(str) == "abort"]
    assert list(abort["rank"]) == [rank]  # the process that aborted is the one its message names


def test_a_crash_signal_after_a_watchdog_timeout_is_still_a_crash(tmp_path):
    d = diagnose_files(tmp_path, {"job.log": _abort_block(7, 806, "BROADCAST", code=-11)})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


# --- d. NCCL's socket error under a host-only prefix --------------------------------------------

_SOCKET = [
    "{h} [5] misc/socket.cc:46 NCCL WARN socketProgressOpt: Call to send to 10.44.137.149<52905> failed : Connection "
    "reset by peer",
    "{h} [5] NCCL INFO misc/socket.cc:64 -> 6",
    "{h} [5] NCCL INFO misc/socket.cc:80 -> 6",
    "{h} [5] NCCL INFO misc/socket.cc:607 -> 6 socketWait(NCCL_SOCKET_SEND, sock, &sock->type, sizeof(sock->type), "
    "&sent)",
    "{h} [5] NCCL INFO bootstrap.cc:868 -> 6 ncclSocketConnect()",
]


@pytest.mark.parametrize("stamp", ["none", "nccl", "docker", "kubectl"])
@pytest.mark.parametrize("keep", ["all", "warn-only", "traces-only", "cut"])
def test_ncclss_socket_error_under_a_host_only_prefix_is_nccls_error(tmp_path, keep, stamp):
    lines = [t.format(h="gpu-server320") for t in _SOCKET]
    if stamp == "nccl":  # NCCL's own timestamp, on WARN lines only (its default levels)
        lines[0] = "[2025-11-24 11:20:21] " + lines[0]
    lines = {"all": lines, "warn-only": lines[:1], "traces-only": lines[1:], "cut": lines[:3]}[keep]
    if stamp in ("docker", "kubectl"):
        lines = [WRAPPERS["docker"](0, t) for t in lines]
    files = {"node.log": healthy_lines(n_ranks=2, steps=3)[:2] + lines}
    d = diagnose_files(tmp_path, files)
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert not d.culprit_ranks
    inc = dx.load(str(tmp_path / "node.log"), progress=False)
    assert (inc.errors["host"].astype(object) == "gpu-server320").any()

"""Network and collective-library kinds that blind batch m read as something else (issue 16), each tested
on its kind with generated variants (launcher prefixes, timestamps, cuts, subsets of the lines) and
phrasings from several real sources.

- NVSHMEM's own error lines (its ``<source>:<line>: non-zero status: N <what>`` from DeepEP's communication
  library and its RDMA transports IBGDA / IBRC / IBDEVX: a queue pair that would not move to RTR, an endpoint
  that would not connect, ``nvshmem setup connections failed``) are the collective library's errors, as
  NCCL's WARNs are: ``nccl-error``, whatever subset of them a paste kept
  (test_nvshmems_transport_errors_are_the_collective_librarys_errors).
- A communication kernel that reports it gave up waiting on its peers (DeepEP's ``dispatch NVL receiver
  timeout, channel: 3, ...``, ``timeout for combine receivers``, its forks) is a collective's timeout of
  undetermined cause, never "no evidence"; a setting of such a timeout is no failure
  (test_a_communication_kernels_timeout_report_is_a_collective_timeout,
  test_a_kernel_timeout_setting_is_no_failure).
- A process group's check that its library's collective call failed (Habana's HCCL: ``Collective call
  returned error``), logged by Ray's C++ terminate handler behind a worker's prefix (``[2023-11-02
  13:17:59,227 E 19045 21937] logging.cc:97: Unhandled exception: N3c105ErrorE. what(): ...``) or raised as
  a C++ abort, is the collective library's error (test_a_collective_call_that_returned_an_error_is_the_librarys_error);
  Ray's C++ log header carries its level (test_rays_cpp_log_header_gives_the_level).
- gloo's TCP device finding no address for the host name or interface it was given (``Unable to find
  address for: dgx-1.ai``, an ``enforce fail`` in ``device.cc``) is the network's set-up failure, not a size
  check: gloo's enforce failures are sizes only when they check a message's size
  (test_gloo_finding_no_address_is_the_networks_failure_not_a_size).
- A PyTorch whose build lacks the backend asked for (``Distributed package doesn't have NCCL built in``, MPI,
  UCC) or a machine without the GPUs it needs (``ProcessGroupNCCL is only supported with GPUs, no GPUs
  found!``) fails each process at set-up, before any communication: ``rank-crash``, never ``nccl-error``
  (test_a_backend_the_build_lacks_is_each_processs_own_crash,
  test_a_missing_backend_is_the_setup_family_before_the_network).
- A wait at init for ranks that never joined, timed out (the store-based barrier of torch <= 1.13 with its
  ``worker_count``, the TCPStore's ``N/M clients joined``), and the launcher reporting that worker's exit:
  the exit is the timeout's consequence, ``timeout-undetermined`` with the crash as an alternative
  (test_a_launchers_exit_after_an_init_wait_timed_out_is_that_timeout).
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import classify
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose

_PREFIXES = ["plain", "torch", "mpirun", "slurm", "ray", "docker", "kubectl"]


def _wrap(wrapper: str, lines: list[str], rank: int = 1) -> list[str]:
    return [WRAPPERS[wrapper](rank, t) for t in lines]


# --- NVSHMEM's transport errors --------------------------------------------------------------------

_NVSHMEM_SRC = ("/root/nvshmem_src/src", "/sgl-workspace/nvshmem/src", "/opt/nvidia/nvshmem-3.2.5/src")
#: (path under src, status, what): NVSHMEM's error lines as its transports and host code print them
_NVSHMEM_ERRORS = [
    (
        "modules/transport/ibgda/ibgda.cpp:1345",
        121,
        "Error in mlx5dv_devx_obj_modify for INIT2RTR_QP with syndrome 1a2b3c",
    ),
    ("modules/transport/ibgda/ibgda.cpp:3005", 7, "ibgda_rc_init2rtr failed on RC #2."),
    ("modules/transport/ibrc/ibrc.cpp:418", 110, "ibv_modify_qp failed"),
    ("modules/transport/ibdevx/ibdevx.cpp:1021", 7, "ep_connect failed"),
    ("host/transport/transport.cpp:400", 7, "connect EPS failed"),
    ("host/init/init.cu:1001", 7, "nvshmem setup connections failed"),
]


@pytest.mark.parametrize("wrapper", _PREFIXES)
@pytest.mark.parametrize("which", ["all", "first", "last", "host-only", "message-split"])
@pytest.mark.parametrize("src", _NVSHMEM_SRC)
def test_nvshmems_transport_errors_are_the_collective_librarys_errors(tmp_path, wrapper, which, src):
    """The user is sent to the RDMA transport (RoCE GID / traffic class, the HCA, IBGDA's settings), not
    told that the cause is undetermined or that nothing distributed was seen."""
    lines = [f"{src}/{where}: non-zero status: {st} {what}" for where, st, what in _NVSHMEM_ERRORS]
    if which == "first":
        lines = lines[:1]
    elif which == "last":
        lines = lines[-1:]
    elif which == "host-only":  # the host code's lines only (the transport's were elsewhere)
        lines = lines[-2:]
    elif which == "message-split":  # interleaved PEs: the message lands on the line after its status
        lines = [x for where, st, what in _NVSHMEM_ERRORS for x in (f"{src}/{where}: non-zero status: {st}", what)]
    head = ["python3 test_low_latency.py", "Allocating buffer size: 2116.2912 MB ..."]
    d = _diagnose(tmp_path, {"pe.log": _wrap(wrapper, head + lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.confidence != "high" and not d.culprit_ranks


# --- a communication kernel's timeout report -------------------------------------------------------

_KERNEL_TIMEOUTS = [
    "DeepEP dispatch NVL receiver timeout, channel: {c}, RDMA: 1, nvl: 0, src NVL: 2, head: 4{c}, tail: 4{c}",
    "DeepEP combine RDMA receiver timeout, channel: {c}, RDMA: 0, nvl: 3, src RDMA: 1, tail: 17, waiting: 9, expect: 33",
    "DeepEP dispatch forwarder timeout (RDMA check), channel: {c}, RDMA: 1, nvl: 2, dst NVL: 5, src RDMA lane: 3, head: 8, tail: 8, expected: 12",
    "DeepEP timeout for dispatch receivers, rank 3, responsible_channel = {c}, tokens remained: 17",
    "DeepEP timeout for combine senders, rank 5, responsible_channel = {c}",
    "grpcoll dispatch NVL receiver timeout, channel: {c}, RDMA: 1, NVL: 0, src RDMA rank: 2, src NVL rank: 4",
]


@pytest.mark.parametrize("wrapper", _PREFIXES)
@pytest.mark.parametrize("phrase", _KERNEL_TIMEOUTS)
@pytest.mark.parametrize("shape", ["channels", "one", "fused-after-a-print", "cut-abort-after"])
def test_a_communication_kernels_timeout_report_is_a_collective_timeout(tmp_path, wrapper, phrase, shape):
    """The user learns that a dispatch / combine waited for its peers and got nothing (cause undetermined,
    what to collect next), not that the log shows nothing distributed."""
    lines = [phrase.format(c=c) for c in (3, 10, 0, 1, 7)]
    if shape == "one":
        lines = lines[:1]
    elif shape == "fused-after-a-print":  # the test's progress print had no newline
        lines = ["[testing] Running with BF16, without top-k (async=False, previous=False) ..." + lines[0]] + lines[1:]
    elif shape == "cut-abort-after":
        lines = lines + ["terminate called after throwing an instance of 'c10"]
    d = _diagnose(tmp_path, {"test.log": _wrap(wrapper, lines)})
    assert d.verdict in (ClassId.TIMEOUT_UNDETERMINED, ClassId.NCCL_ERROR), d.summary()
    assert not d.culprit_ranks and d.confidence != "high"


@pytest.mark.parametrize(
    "line",
    [
        "dispatch receiver timeout: 30",
        "combine sender timeout = 120 s",
        "INFO: setting the dispatch receiver timeout to 100 s",
    ],
)
def test_a_kernel_timeout_setting_is_no_failure(tmp_path, line):
    """A configuration that names such a timeout says nothing failed: a healthy run stays an all-clear."""
    healthy = healthy_lines()
    d = _diagnose(tmp_path, {"job.log": healthy[:10] + [f"[rank0]:{line}"] + healthy[10:]})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


# --- a collective call that returned an error, logged by Ray's terminate handler -------------------

_RAY_PREFIX = {
    "ray-pid": lambda t: f"(RayTrainWorker pid=19045) {t}",
    "ray-ip": lambda t: f"(RayTrainWorker pid=19045, ip=10.0.0.7) {t}",
    "plain": lambda t: t,
}
_HCCL_FRAME = (
    "Exception raised from operator() at /npu-stack/pytorch-integration/python_packages/habana_frameworks/torch/"
    "distributed/hccl/process_group_hccl_base.cpp:286 (most recent call first):"
)


@pytest.mark.parametrize("prefix", sorted(_RAY_PREFIX))
@pytest.mark.parametrize("form", ["ray-terminate-handler", "cpp-abort", "no-frame"])
@pytest.mark.parametrize("what", ["Collective call returned error", "collective call returned an error"])
def test_a_collective_call_that_returned_an_error_is_the_librarys_error(tmp_path, prefix, form, what):
    """Told "the collective library failed", the user checks HCCL's links between the nodes; "no evidence"
    would send them away with nothing."""
    if form == "cpp-abort":
        lines = ["terminate called after throwing an instance of 'c10::Error'", f"  what():  {what}", _HCCL_FRAME]
    else:
        lines = [
            f"[2023-11-02 13:17:59,227 E 19045 21937] logging.cc:97: Unhandled exception: N3c105ErrorE. what(): {what}"
        ]
        if form == "ray-terminate-handler":
            lines.append(_HCCL_FRAME)
    d = _diagnose(tmp_path, {"worker.log": [_RAY_PREFIX[prefix](t) for t in lines]})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


@pytest.mark.parametrize(("letter", "failure"), [("E", True), ("C", True), ("W", False), ("I", False)])
def test_rays_cpp_log_header_gives_the_level(letter, failure):
    """Ray's core-worker lines say their level only in the header; an error there is a failure signal."""
    sig = classify(f"[2023-11-02 13:17:59,227 {letter} 19045 21937] core_worker.cc:612: The object store is full")
    assert (sig is not None and sig.failure) == failure, sig


# --- gloo finding no address for a host or an interface --------------------------------------------

_GLOO_TB = [
    "Traceback (most recent call last):",
    '  File "main_with_runtime.py", line 579, in <module>',
    "    main()",
    '  File "../communication.py", line 42, in __init__',
    "    dist.init_process_group(backend, rank=rank, world_size=world_size)",
    '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 370, in init_process_group',
    "    timeout=timeout)",
]
_GLOO_NO_ADDRESS = [
    "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] rp != nullptr. "
    "Unable to find address for: node-17.cluster",
    "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
    "Unable to find address for: eth1",
    "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:153] rp != nullptr. Unable to find "
    "address for: gpu-host-3",
]


@pytest.mark.parametrize("wrapper", _PREFIXES)
@pytest.mark.parametrize("exc", _GLOO_NO_ADDRESS)
@pytest.mark.parametrize("with_traceback", [True, False])
def test_gloo_finding_no_address_is_the_networks_failure_not_a_size(tmp_path, wrapper, exc, with_traceback):
    """The user is sent to the interface / host name (GLOO_SOCKET_IFNAME, /etc/hosts), not told that the
    ranks' tensor sizes differ."""
    lines = (_GLOO_TB if with_traceback else []) + [exc]
    d = _diagnose(tmp_path, {"rank.log": _wrap(wrapper, lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert not d.culprit_ranks


# --- a backend the build or the machine lacks -------------------------------------------------------

#: (exception, message, the message's first piece as a source line that builds it from pieces quotes it)
_NO_BACKEND = [
    ("RuntimeError", "Distributed package doesn't have NCCL built in", "Distributed package doesn't have NCCL "),
    (
        "RuntimeError",
        "Distributed package doesn't have MPI built in. MPI is only included if you build PyTorch from source on a "
        "host that has MPI installed.",
        "Distributed package doesn't have MPI built in.",
    ),
    ("RuntimeError", "Distributed package doesn't have UCC built in", "Distributed package doesn't have UCC "),
    (
        "ValueError",
        "ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
        "ProcessGroupNCCL is only supported with GPUs, ",
    ),
]
_INIT_TB = [
    "Traceback (most recent call last):",
    '  File "tools/train.py", line 149, in main',
    "    init_dist(args.launcher, **cfg.dist_params)",
    '  File "C:\\envs\\mmcv\\lib\\site-packages\\torch\\distributed\\distributed_c10d.py", line 625, in _new_process_group_helper',
]
_AGENT = [
    "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group",
    "INFO:torch.distributed.elastic.multiprocessing:Setting worker0 reply file to: /tmp/torchelastic_x/attempt_0/0/error.json",
    "INFO:torch.distributed.elastic.multiprocessing:Setting worker1 reply file to: /tmp/torchelastic_x/attempt_0/1/error.json",
]


@pytest.mark.parametrize("exc_type,message,piece", _NO_BACKEND)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "torchrun", "slurm", "docker"])
@pytest.mark.parametrize("shape", ["two-workers", "one-worker", "raise-line-cut", "exception-only"])
def test_a_backend_the_build_lacks_is_each_processs_own_crash(tmp_path, exc_type, message, piece, wrapper, shape):
    """The user fixes the process's set-up (a build with the backend, gloo on Windows, a GPU visible), not
    the network: nothing was ever communicated."""
    exc = f"{exc_type}: {message}"
    if shape == "exception-only":
        files = {"w0.log": _wrap(wrapper, [exc], 0)}
    elif shape == "raise-line-cut":  # the source line quoted in the traceback, its message cut at the paste's end
        files = {"w0.log": _wrap(wrapper, _INIT_TB + [f'    raise {exc_type}("{piece}"'], 0)}
    else:
        tb = _INIT_TB + [f'    raise {exc_type}("{piece}"', exc]
        files = {"w0.log": _AGENT + _wrap(wrapper, tb, 0)}
        if shape == "two-workers":
            files["w1.log"] = _wrap(wrapper, tb, 1)
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


def test_a_missing_backend_is_the_setup_family_before_the_network():
    """The backend's name in the message says what is missing, not what failed."""
    for _, message, _piece in _NO_BACKEND:
        assert classify(f"RuntimeError: {message}").family == SignalFamily.SETUP


# --- a wait at init that timed out, then the launcher's report of the exit ---------------------------

_WAIT_TIMEOUTS = [
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, for key: "
    "store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:30:00)",
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 2, for key: "
    "store_based_barrier_key:1 (world_size=8, worker_count=5, timeout=0:30:00)",
    "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
]
_AGENT_EXIT = [
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 820989) of binary: "
    "/home/u/envs/det/bin/python",
    "ERROR:torch.distributed.elastic.agent.server.local_elastic_agent:[default] Worker group failed",
    "INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (FAILED). Waiting 300 seconds for "
    "other agents to finish",
]
_CHILD_TABLE = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-05-01_10:00:05",
    "  host      : node1",
    "  rank      : 0 (local_rank: 0)",
    "  exitcode  : 1 (pid: 820989)",
    "  error_file: <N/A>",
    "============================================================",
]


@pytest.mark.parametrize("exc", _WAIT_TIMEOUTS)
@pytest.mark.parametrize("launcher", ["agent-lines", "agent-and-table", "table-only"])
@pytest.mark.parametrize("wrapper", ["plain", "docker"])
def test_a_launchers_exit_after_an_init_wait_timed_out_is_that_timeout(tmp_path, exc, launcher, wrapper):
    """The user looks for the ranks that never joined (a launch that started them elsewhere or not at all),
    not for a crash of the rank that waited for them."""
    after = {"agent-lines": _AGENT_EXIT, "agent-and-table": _AGENT_EXIT + _CHILD_TABLE, "table-only": _CHILD_TABLE}
    d = _diagnose(tmp_path, {"job.log": _wrap(wrapper, [exc] + after[launcher], 0)})
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    assert not d.culprit_ranks

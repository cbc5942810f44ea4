"""Network kinds at process-group set-up that blind batch k read as crashes or as nothing (issue 16),
each tested on its kind with generated variants (launcher prefixes, the order of pasted blocks, cuts,
subsets of the lines) and phrasings from several real threads.

- A host name that does not resolve, raised while torch.distributed sets up the process group (the
  traceback's frames in its rendezvous / store / ``init_process_group``; old c10d's ``host not found:
  Name or service not known``, glibc's ``Temporary failure in name resolution``, macOS's ``nodename nor
  servname provided``), is the network's failure at rendezvous (``nccl-error``), not the process's own
  crash; the same lookup failing in a download (no torch.distributed frame, a URL) stays the
  process's own error (test_an_unresolvable_rendezvous_host_is_the_networks_failure,
  test_an_unresolvable_store_host_said_without_a_traceback_is_the_networks_failure,
  test_a_downloads_name_lookup_stays_the_processs_own_error).
- An exception that only wraps a failure reported elsewhere (vLLM's ``Engine core initialization failed.
  See root cause above``, ``Engine process failed to start. See stack trace for the root cause``) and
  Ray's ``ActorHandleNotFoundError`` (the actor a handle names is gone) are not a process's own crash:
  the failure they wrap decides, wherever the paste put it (a gloo ``connectFullMesh`` refused:
  ``nccl-error``; a ValueError: that process's crash); alone, the wrapper is still a failure
  (test_a_wrapper_exception_defers_to_the_failure_it_wraps, test_a_wrapper_beside_a_processs_own_error_is_that_crash,
  test_a_wrapper_alone_is_still_a_failure).
- c10d's store client retrying (``TCP client failed to connect/validate to host H:P - retrying (try=6,
  ...): Connection reset by peer``, logged at WARNING with the backtrace of what it retries on) is no
  failure by itself; a file that ends at such retries never connected (``nccl-error``, low); training
  output after it says it went on (test_a_store_client_retrying_to_the_end_never_connected,
  test_a_store_retry_the_run_went_on_after_is_no_failure).
- HCCL's own error lines (``[ERROR] HCCL(pid,proc):time [file.cc:N] ...``: a listen that failed, links
  not established in time) are the collective library's errors, as NCCL's WARNs are: ``nccl-error``,
  whatever subset of them a paste kept (test_hccls_own_error_lines_are_the_collective_librarys_errors).
- NCCL's remote-allocator service thread failing on a connection not meant for it (``[Rem Allocator]
  Allocation failed`` / ``Poll failed``, with that thread's closed socket and ``'out of memory'`` WARNs
  and call traces: nccl#555, nccl#472) is set aside when the log goes on after it (training output):
  no failure, at low confidence, with a note; a log that ends at it keeps it as a failure (nccl#847),
  and a failure of any other thread or line still decides
  (test_the_remote_allocator_threads_failures_while_training_goes_on_are_no_failure,
  test_the_remote_allocator_threads_failures_at_the_end_of_the_log_stay_failures,
  test_another_failure_beside_the_allocators_still_decides).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose


def _wrap(wrapper: str, lines: list[str], rank: int = 1) -> list[str]:
    return [WRAPPERS[wrapper](rank, t) for t in lines]


# --- a rendezvous host that does not resolve -------------------------------------------------------

_RDZV_FRAMES = [
    "Traceback (most recent call last):",
    '  File "train.py", line 88, in <module>',
    "    main()",
    '  File "train.py", line 41, in main',
    '    dist.init_process_group(backend="nccl")',
    '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 354, in init_process_group',
    "    store, rank, world_size = next(rendezvous(url))",
    '  File "/usr/lib/python3/site-packages/torch/distributed/rendezvous.py", line 143, in _env_rendezvous_handler',
    "    store = TCPStore(master_addr, master_port, start_daemon)",
]
#: the lookup's failure as several torch versions and platforms raise it
_UNRESOLVED = [
    "ValueError: host not found: Name or service not known",
    "ValueError: host not found: Temporary failure in name resolution",
    "RuntimeError: host not found: nodename nor servname provided, or not known",
    "socket.gaierror: [Errno -2] Name or service not known",
]


@pytest.mark.parametrize("wrapper", ["plain", "torch", "kubectl", "pdsh", "docker"])
@pytest.mark.parametrize("exc", _UNRESOLVED)
def test_an_unresolvable_rendezvous_host_is_the_networks_failure(tmp_path, wrapper, exc):
    lines = [
        " kubectl logs optimizer-worker-0",
        "2019-01-11 05:43:30,310 INFO     init_distribution",
        *_RDZV_FRAMES,
        exc,
    ]
    d = _diagnose(tmp_path, {"worker.log": _wrap(wrapper, lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.findings[0].confidence != "high"


def test_an_unresolvable_store_host_said_without_a_traceback_is_the_networks_failure(tmp_path):
    # torchelastic's coordinator logging the store's exception (no traceback, no frames)
    lines = [
        "INFO 2020-01-17 00:55:01,702 Rank 1 will conenct to TCPStore server at pytorch-elastic-test-z2b7s:47279",
        "[ERROR] 2020-01-17 00:55:01,724 coordinator_p2p: Rank: -1",
        "Error: Rank -1 received an Exception. Detailed message: host not found: Name or service not known",
    ]
    d = _diagnose(tmp_path, {"elastic.log": lines})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


def test_a_downloads_name_lookup_stays_the_processs_own_error(tmp_path):
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "    model = AutoModel.from_pretrained(name)",
        '  File "/usr/lib/python3/site-packages/requests/adapters.py", line 519, in send',
        "    raise ConnectionError(e, request=request)",
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries "
        'exceeded with url: /bert/resolve/main/config.json (Caused by NameResolutionError("Failed to resolve '
        "'huggingface.co' ([Errno -3] Temporary failure in name resolution)\"))",
    ]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


# --- a wrapper exception beside the failure it wraps ------------------------------------------------

_GLOO_REFUSED = [
    "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152]",
    "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:36321",
    "  (rank=8, size=16, local=[127.0.0.1])",
]
_WRAPPERS_OF_FAILURE = [
    "RuntimeError: Engine core initialization failed",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
]
_ACTOR_GONE = "ray.exceptions.ActorHandleNotFoundError: ... created in job 01000000, but the current job is 02000000"


@pytest.mark.parametrize("wrapper_exc", _WRAPPERS_OF_FAILURE)
@pytest.mark.parametrize("order", ["wrapper-file-first", "cause-file-first", "one-file"])
@pytest.mark.parametrize("prefix", ["plain", "ray"])
def test_a_wrapper_exception_defers_to_the_failure_it_wraps(tmp_path, wrapper_exc, order, prefix):
    top = _wrap(prefix, [_ACTOR_GONE, wrapper_exc], 0)
    cause = _wrap(prefix, _GLOO_REFUSED, 1)
    if order == "wrapper-file-first":
        files = {"top.txt": top, "earlier.txt": cause}
    elif order == "cause-file-first":
        files = {"earlier.txt": cause, "top.txt": top}
    else:
        files = {"job.log": cause + top}
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


def test_a_wrapper_beside_a_processs_own_error_is_that_crash(tmp_path):
    lines = [
        "(EngineCore_DP0 pid=3709) ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization`.",
        "(APIServer pid=3653) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}",
    ]
    d = _diagnose(tmp_path, {"serve.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert "No available memory" in d.findings[0].summary


@pytest.mark.parametrize("wrapper_exc", _WRAPPERS_OF_FAILURE)
def test_a_wrapper_alone_is_still_a_failure(tmp_path, wrapper_exc):
    d = _diagnose(tmp_path, {"serve.log": healthy_lines() + ["[rank0]:" + wrapper_exc]})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()


# --- c10d's store client retrying ---------------------------------------------------------------------

_RETRY = (
    "[W{md} 16:56:01.831041000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host "
    "100.64.0.1:59782 - retrying (try={k}, timeout=1800000ms, delay=5241ms): {why}"
)
_WHY = [
    "Connection reset by peer",
    "The client socket has timed out after 600000ms while trying to connect to (127.0.0.1, 48315).",
    "Ping failed, invalid value returned from server. Expected: 3058192, Got: 759714643",
]
_BACKTRACE = [
    "Exception raised from recvBytes at /Users/runner/work/pytorch/torch/csrc/distributed/c10d/Utils.hpp:680 "
    "(most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 52 (0x1068316cc in libc10.dylib)",
    "frame #1: void c10d::tcputil::recvBytes<unsigned int>(int, unsigned int*, unsigned long) + 476 "
    "(0x11b4f7004 in libtorch_cpu.dylib)",
    "frame #3: c10d::TCPStore::ping() + 200 (0x11b4f5738 in libtorch_cpu.dylib)",
]


@pytest.mark.parametrize("why", _WHY)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "ray", "kubectl"])
@pytest.mark.parametrize("shape", ["with-backtrace", "retries-only", "cut-backtrace"])
def test_a_store_client_retrying_to_the_end_never_connected(tmp_path, why, wrapper, shape):
    lines = [_RETRY.format(md="426", k=k, why=why) for k in range(3, 7)]
    if shape == "with-backtrace":
        lines += _BACKTRACE
    elif shape == "cut-backtrace":
        lines = lines[-1:] + _BACKTRACE[:2]
    d = _diagnose(tmp_path, {"log.txt": _wrap(wrapper, lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.findings[0].confidence == "low"


@pytest.mark.parametrize("wrapper", ["torch", "kubectl"])
def test_a_store_retry_the_run_went_on_after_is_no_failure(tmp_path, wrapper):
    lines = healthy_lines()
    lines[2:2] = [WRAPPERS[wrapper](1, _RETRY.format(md="0426", k=0, why=_WHY[0]))]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


# --- HCCL's own error lines ----------------------------------------------------------------------

_HCCL = [
    "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.463 [hccl_socket.cc:100] [2717288][HcclSocket][Listen] "
    "socket type[1], listen on ip[192.168.20.160] and specific port[16666] fail. Please check the port status.",
    "[ERROR] HCCL(2717288,python3):2025-07-23-03:47:57.070.466 [hccl_socket_manager.cc:54] [2717288][ServerInit]"
    "call trace: hcclRet -> 19",
    "[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [hccl_socket_manager.cc:778] [2734049][Wait]"
    "[LinkEstablish]wait socket establish timeout, role[1] rank[12] timeout[120]",
    "[ERROR] HCCL(55694,):2026-06-03-06:04:59.040.451 [hccl_socket_manager.cc:860] [60446][Wait]"
    "[LinksEstablishCompleted] is failed. ret[9].",
    "[ERROR] HCCL(55694,):2026-06-03-06:04:59.040.458 [hccl_socket_manager.cc:399] [60446][Create][Sockets]Wait "
    "links establish completed failed, local role is client. ret[9]",
]


@pytest.mark.parametrize("start", range(len(_HCCL)))
@pytest.mark.parametrize("wrapper", ["plain", "torch", "ray", "docker"])
def test_hccls_own_error_lines_are_the_collective_librarys_errors(tmp_path, start, wrapper):
    d = _diagnose(tmp_path, {"plog.txt": _wrap(wrapper, _HCCL[start:])})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


# --- NCCL's remote-allocator thread while the job goes on ------------------------------------------

_T = "696b7901f904:39:298 [0] "  # the allocator's thread (host:pid:tid [dev])
_ALLOC = [
    _T + "include/socket.h:423 NCCL WARN Net : Connection closed by remote peer 10.0.0.4<52638>",
    _T + "NCCL INFO include/socket.h:445 -> 2",
    _T + "NCCL INFO bootstrap.cc:229 -> 2",
    "",
    _T + "bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)",
    "",
    _T + "include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
    _T + "NCCL INFO bootstrap.cc:231 -> 1",
    "",
    _T + "bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)",
]
_POLL = [_T + "bootstrap.cc:189 NCCL WARN [Rem Allocator] Poll failed with error 1"]
_TRAINING = [
    "Train Epoch: 1 [0/246000 (0%)]\\tLoss: 0.036680415272713",
    "epoch is: 1 and train loss is 0.03668041527271271",
    "...",
    "Train Epoch: 1 [2700/246000 (18%)]\\tLoss: 0.000002425569619",
]


@pytest.mark.parametrize("alloc", [_ALLOC, _POLL], ids=["allocation-failed", "poll-failed"])
@pytest.mark.parametrize("wrapper", ["plain", "torch", "kubectl", "docker"])
def test_the_remote_allocator_threads_failures_while_training_goes_on_are_no_failure(tmp_path, alloc, wrapper):
    lines = ["100%|##########| 548M/548M [00:02<00:00, 259MB/s]", *alloc, *_TRAINING]
    d = _diagnose(tmp_path, {"log.txt": _wrap(wrapper, lines, 0)})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    assert d.all_clear_confidence == "low"
    assert any("remote-allocator" in n for n in d.notes), d.notes


@pytest.mark.parametrize("alloc", [_ALLOC, _POLL], ids=["allocation-failed", "poll-failed"])
def test_the_remote_allocator_threads_failures_at_the_end_of_the_log_stay_failures(tmp_path, alloc):
    # nccl#847: the job was cancelled while they repeated; nothing after them says it went on
    lines = [*_TRAINING, *alloc, "", "..."]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()


@pytest.mark.parametrize(
    "failure",
    [
        "696b7901f904:39:39 [0] NCCL WARN Net : Connection closed by remote peer 10.0.0.4<52638>",  # the main thread
        "[E1201 10:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=66, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ],
    ids=["main-thread", "watchdog", "device"],
)
def test_another_failure_beside_the_allocators_still_decides(tmp_path, failure):
    lines = [*_ALLOC, *_TRAINING[:2], failure, *_TRAINING[2:]]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()

"""Failed connections at set-up and the collective library's own failures that blind batch n read as a
process's crash, as "cause undetermined" or as nothing (issue 16), each tested on its kind with generated
variants (launcher prefixes, timestamps, cuts, subsets of the lines) and phrasings from several real threads.

- A store / rendezvous client that could not reach the master, in the words of the error that ends the
  process (c10d's ``DistNetworkError: ... failed to connect to any network address of (host, port) ... No
  route to host``, its timeout, torchelastic's ``RendezvousConnectionError``), is the network's failure:
  the launcher's line that the process then exited (DeepSpeed's ``exits with return code = 1``, pdsh's
  ``ssh exited with exit code 1``, torchelastic's ``failed (exitcode: 1)``) is its consequence, an
  alternative, never the verdict (test_a_store_the_client_could_not_reach_is_the_networks_failure_not_the_exit);
  torchelastic's error record quoting it (``error_handler: {"message": {"message":
  "RendezvousConnectionError: ..."``) is no worker's crash either
  (test_a_rendezvous_connection_error_in_the_error_record_is_the_networks_failure). A port another process
  holds stays the process's own crash (its tests are in the connections decisions module).
- oneCCL, Intel's collective library (the ``ccl`` / ``xccl`` backend), in its own words: its error log level
  (``|CCL_ERROR| atl_ofi.cpp:243 init: can't find suitable provider``, ``|CCL_ERROR| base_thread.cpp:36
  start: error while creating worker thread #0 pthread_create returns 22``) and the exception it throws
  (``RuntimeError: oneCCL: exec.cpp:134 start_workers: EXCEPTION: failed to start worker # 0``), whatever
  subset a paste kept, is the collective library's error: ``nccl-error``, not a plain crash
  (test_oneccls_own_errors_are_the_collective_librarys_error); its warnings alone are no failure
  (test_oneccls_warnings_alone_are_no_failure).
- PSM (PSM2, PSM3: the transport under libfabric that oneCCL and MPI run on) failing its own check
  (``host:rank1: Assertion failure at psm3/ptl_am/ptl.c:196: nbytes == req->req_data.recv_msglen``) is the
  transport's failure: ``nccl-error``, never "nothing distributed read"
  (test_a_psm_transport_assertion_is_the_collective_librarys_error); an assertion in other code is not the
  network's (test_an_assertion_outside_the_transport_is_not_the_networks).
- c10d's store client saying a try to connect failed (even a probe of an address not usable here, Windows
  ``system error: 10049``, Linux ``errno: 99``), and the file ending right after it in a traceback cut
  before its exception: the process ended at that connection, ``nccl-error`` at low confidence with the
  crash as an alternative where nothing else failed (test_a_cut_traceback_right_after_a_failed_connect_is_the_networks_failure); a
  run that went on after the probe, or a traceback whose exception is shown, is not that
  (test_a_probe_the_run_went_on_from_is_not_the_networks_failure,
  test_a_shown_exception_after_a_probe_decides).
- A traceback that lost its indentation (quoted in markdown, ``> File "..."``, or pasted flat) keeps its
  frames: the source line after an unindented frame header belongs to it, so a host name that does not
  resolve inside the rendezvous is still read as the network's failure at set-up
  (test_a_flattened_traceback_keeps_its_rendezvous_frames).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.signals import classify
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose

_PREFIXES = ["plain", "torch", "pdsh", "slurm", "docker", "kubectl"]


def _wrap(wrapper: str, lines: list[str], rank: int = 1) -> list[str]:
    return [WRAPPERS[wrapper](rank, t) for t in lines]


# --- a store the client could not reach, then the launcher's exit ---------------------------------------

_STORE_FRAMES = [
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 246, in '
    "_env_rendezvous_handler",
    "    store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 174, in _create_c10d_store',
    "    return TCPStore(",
]
_UNREACHED = [
    "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
    "(192.168.121.122, 1040). The client socket has failed to connect to 192.168.121.122:1040 (errno: 113 - No "
    "route to host).",
    "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
    "(node-0, 29500). The client socket has failed to connect to [node-0]:29500 (errno: 111 - Connection refused).",
    "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
    "(10.1.2.3, 29500).",
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
    "failed. See inner exception for details.",
]
_EXITS = {
    "deepspeed": [
        "[2024-05-01 10:00:01,500] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 18507",
        "[2024-05-01 10:00:01,530] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py'] "
        "exits with return code = 1",
    ],
    "torchelastic": [
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4242) of "
        "binary: /usr/bin/python3",
    ],
}


@pytest.mark.parametrize("wrapper", _PREFIXES)
@pytest.mark.parametrize("exc", _UNREACHED)
@pytest.mark.parametrize("launcher", sorted(_EXITS))
@pytest.mark.parametrize("head", ["frames", "cut-head"])
def test_a_store_the_client_could_not_reach_is_the_networks_failure_not_the_exit(
    tmp_path, wrapper, exc, launcher, head
):
    """Told "a process crashed", the user would look for a bug in the training script; the worker could
    not reach the master's store (its address, a route between the nodes, a master not listening)."""
    lines = (["Traceback (most recent call last):"] if head == "frames" else []) + _STORE_FRAMES[2:]
    lines += [exc, *_EXITS[launcher]]
    d = _diagnose(tmp_path, {"worker.log": _wrap(wrapper, lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.confidence != "high"
    assert d.culprit_ranks == []


_RECORD = [
    "[ERROR] 2021-09-13 22:18:26,678 error_handler: {",
    '  "message": {',
    '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner exception '
    'for details.",',
    '    "extraInfo": {',
]


@pytest.mark.parametrize("wrapper", ["plain", "docker", "kubectl", "slurm"])
@pytest.mark.parametrize("cut", [3, 4], ids=["cut-after-message", "with-extra-info"])
def test_a_rendezvous_connection_error_in_the_error_record_is_the_networks_failure(tmp_path, wrapper, cut):
    """Told "a rank failed on its own", the user would look for a worker's traceback; no worker ran."""
    lines = [
        "[INFO] 2021-09-13 22:17:26,653 api: Starting elastic_operator with launch configs:",
        "  rdzv_backend     : c10d",
        "",
        *_RECORD[:cut],
    ]
    d = _diagnose(tmp_path, {"launch.log": _wrap(wrapper, lines, 0)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.culprit_ranks == []


# --- oneCCL's own errors ---------------------------------------------------------------------------

_CCL_WARN = [
    "2023:11:28-16:35:45:(35980) |CCL_WARN| did not find MPI-launcher specific variables, switch to ATL/OFI, to "
    "force enable ATL/MPI set CCL_ATL_TRANSPORT=mpi",
    "2023:11:28-16:35:45:(35980) |CCL_WARN| could not get local_idx/count from environment variables, trying to get "
    "them from ATL",
]
_CCL_ERRORS = {
    "worker-thread": [
        "2023:11:28-16:35:45:(35980) |CCL_ERROR| base_thread.cpp:36 start: error while creating worker thread #0 "
        "pthread_create returns 22",
        "2023:11:28-16:35:45:(35980) |CCL_ERROR| exec.cpp:134 start_workers: condition "
        "workers.back()->start(cpu_affinity, mem_affinity) == ccl::status::success failed",
        "failed to start worker # 0",
    ],
    "no-provider": [
        "2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi_helper.cpp:867 atl_ofi_get_prov_list: fi_getinfo error: "
        "ret -61, providers 0",
        "2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi_helper.cpp:1384 atl_ofi_open_nw_provs: can not open network "
        "providers",
        "2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi.cpp:243 init: can't find suitable provider",
    ],
    "transport-init": [
        "2025:05:23-19:04:20:(168956) |CCL_ERROR| atl_ofi_helper.cpp:1242 atl_ofi_prov_init: can't init provider "
        "psm3:autoselect_one:mlx5_0",
        "2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi_comm.cpp:278 init_transport: condition "
        "transport->init(nullptr, nullptr, &attr, nullptr, pmi) == ATL_STATUS_SUCCESS failed",
        "failed to initialize ATL",
    ],
}
_CCL_RAISED = {
    "worker-thread": "RuntimeError: oneCCL: exec.cpp:134 start_workers: EXCEPTION: failed to start worker # 0",
    "no-provider": "RuntimeError: oneCCL: atl_ofi_comm.cpp:278 init_transport: EXCEPTION: failed to initialize ATL",
    "transport-init": "RuntimeError: oneCCL: atl_ofi_comm.cpp:278 init_transport: EXCEPTION: failed to initialize ATL",
}


@pytest.mark.parametrize("what", sorted(_CCL_ERRORS))
@pytest.mark.parametrize("kept", ["all", "log-only", "exception-only", "first-error-line"])
@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "ray", "docker"])
def test_oneccls_own_errors_are_the_collective_librarys_error(tmp_path, what, kept, wrapper):
    """Told "a process crashed", the user of an Intel GPU or CPU cluster would look at their own code; the
    collective library failed (its transport, its provider, its worker threads)."""
    log, raised = _CCL_WARN + _CCL_ERRORS[what], ["", "Traceback (most recent call last):", _CCL_RAISED[what]]
    lines = {
        "all": log + raised,
        "log-only": log,
        "exception-only": raised,
        "first-error-line": _CCL_WARN + _CCL_ERRORS[what][:1],
    }[kept]
    d = _diagnose(tmp_path, {"job.log": _wrap(wrapper, lines)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.confidence != "high"


def test_oneccls_warnings_alone_are_no_failure(tmp_path):
    """Read as failures, oneCCL's start-up notices would take every such run's all-clear away."""
    for t in _CCL_WARN:
        s = classify(t)
        assert s is None or not s.failure
    d = _diagnose(tmp_path, {"job.log": _CCL_WARN + healthy_lines()})
    assert d.verdict == "no-failure", d.summary()


# --- PSM's own assertion -----------------------------------------------------------------------------

_PSM = [
    "machine:rank1: Assertion failure at psm3/ptl_am/ptl.c:196: nbytes == req->req_data.recv_msglen",
    "node7:rank1.python: Assertion failure at psm3/ptl_ips/ips_proto.c:1402: ipsaddr->msgctl != NULL",
    "node7.1234python: Assertion failure at ptl_am/am_reqrep_shmem.c:2070: req->recv_msglen >= nbytes",
]


@pytest.mark.parametrize("text", _PSM)
@pytest.mark.parametrize("stamp", [False, True], ids=["bare", "stamped"])
@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_a_psm_transport_assertion_is_the_collective_librarys_error(tmp_path, text, stamp, twice):
    """Told "nothing distributed could be read", the user would collect more logs of a run whose transport
    aborted the process; the transport (its shared-memory or network path) failed."""
    pre = "[1705415958.879795729] " if stamp else ""
    lines = [
        "piotrc@machine:~/ws/oneCCL/build$ CCL_WORKER_COUNT=2 mpirun -np 2 examples/cpu/cpu_allreduce_test",
        "[1705415958.879795729] machine:rank1.cpu_allreduce_test: Reading from remote process' memory failed. "
        "Disabling CMA support",
        *[pre + text] * (2 if twice else 1),
        "",
        "===================================================================================",
    ]
    d = _diagnose(tmp_path, {"run.log": lines})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.culprit_ranks in ([], [1])


def test_an_assertion_outside_the_transport_is_not_the_networks():
    """The transport's own check only: an assertion of the model's code is the process's own."""
    for t in [
        "python: model/attention.c:196: Assertion failure at layers/attn.c:12: n > 0",
        "train.py:88: Assertion failure at dataset/loader.c:12: idx < len",
    ]:
        s = classify(t)
        assert s is None or s.family != SignalFamily.NETWORK, (t, s)


# --- a failed connect, then the process's end ------------------------------------------------------

_PROBES = [
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [LAPTOP-985BOILA]:8080 (system error: "
    "10049 - \u5728\u5176\u4e0a\u4e0b\u6587\u4e2d\uff0c\u8be5\u8bf7\u6c42\u7684\u5730\u5740\u65e0\u6548\u3002).",
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-77]:29500 (system error: 10049 - "
    "The requested address is not valid in its context.).",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
    "assign requested address).",
]
_TORCHRUN_CUT = [
    "Traceback (most recent call last):",
    '  File "d:\\ProgramData\\Anaconda3\\envs\\x\\lib\\runpy.py", line 194, in _run_module_as_main',
    "    return _run_code(code, main_globals, None,",
]


@pytest.mark.parametrize("probe", _PROBES)
@pytest.mark.parametrize("wrapper", ["plain", "docker", "slurm"])
@pytest.mark.parametrize("blank", [False, True], ids=["adjacent", "blank-between"])
def test_a_cut_traceback_right_after_a_failed_connect_is_the_networks_failure(tmp_path, probe, wrapper, blank):
    """Told "cause undetermined" (a collective's timeout), the user would look at collectives that never
    ran; torchrun could not connect to its own store's address and ended there."""
    lines = [
        "torchrun --nproc_per_node=1 --master_port 8080 train.py",
        "[2024-01-16 09:39:47,305] torch.distributed.elastic.multiprocessing.redirects: [WARNING] NOTE: Redirects "
        "are currently not supported in Windows or MacOs.",
        probe,
        *([""] if blank else []),
        *_TORCHRUN_CUT,
    ]
    d = _diagnose(tmp_path, {"run.log": _wrap(wrapper, lines, 0)})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert d.confidence == "low"
    assert d.culprit_ranks == []


@pytest.mark.parametrize("probe", _PROBES)
def test_a_probe_the_run_went_on_from_is_not_the_networks_failure(tmp_path, probe):
    """The probe is benign when the run goes on: a later cut traceback is not the connection's."""
    lines = [probe, *[f"step {i} loss={2.5 - i * 0.01:.4f}" for i in range(5)], *_TORCHRUN_CUT]
    d = _diagnose(tmp_path, {"run.log": lines})
    assert d.verdict != ClassId.NCCL_ERROR, d.summary()
    # and the traceback not at the end of the file (more output after it) is not the process's end (the
    # Linux probe is left out here: the signal layer reads it joined with a ``Traceback`` right after it)
    if "10049" in probe:
        lines = [probe, *_TORCHRUN_CUT, *[f"step {i} loss={2.5 - i * 0.01:.4f}" for i in range(5)]]
        d = _diagnose(tmp_path, {"run.log": lines})
        assert d.verdict != ClassId.NCCL_ERROR, d.summary()


@pytest.mark.parametrize("probe", _PROBES)
def test_a_shown_exception_after_a_probe_decides(tmp_path, probe):
    """An exception the process raised after the probe says what ended it."""
    lines = [probe, *_TORCHRUN_CUT[:2], "    main()", "KeyError: 'model_dir'"]
    d = _diagnose(tmp_path, {"run.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


# --- a traceback that lost its indentation ---------------------------------------------------------

_FLAT = [
    "-- Process 0 terminated with the following error:",
    "Traceback (most recent call last):",
    'File "/usr/local/lib/python3.7/dist-packages/torch/multiprocessing/spawn.py", line 20, in _wrap',
    "fn(i, *args)",
    'File "/home/admin/demo.py", line 115, in main_worker',
    "dist.init_process_group(backend=\"nccl\", init_method='tcp://'+args.master_addr+':'+args.master_port)",
    'File "/usr/local/lib/python3.7/dist-packages/torch/distributed/distributed_c10d.py", line 422, in '
    "init_process_group",
    "store, rank, world_size = next(rendezvous_iterator)",
    'File "/usr/local/lib/python3.7/dist-packages/torch/distributed/rendezvous.py", line 126, in '
    "_tcp_rendezvous_handler",
    "store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)",
    "ValueError: host not found: Name or service not known",
]


@pytest.mark.parametrize("quote", ["> ", ">> ", "", "> > "], ids=["quoted", "quoted-twice", "flat", "nested-quote"])
@pytest.mark.parametrize("spawn_head", [True, False], ids=["spawn", "cut-head"])
def test_a_flattened_traceback_keeps_its_rendezvous_frames(tmp_path, quote, spawn_head):
    """Told "a rank crashed", the user would debug the script; the rendezvous host does not resolve."""
    lines = [quote + t for t in (_FLAT if spawn_head else _FLAT[1:])]
    p = tmp_path / "issue.md"
    p.write_text("\n".join(lines) + "\n")
    inc = dx.load(str(p), progress=False)
    exc = inc.errors[inc.errors["message"].astype(str).str.startswith("ValueError")]
    assert len(exc) == 1 and "rendezvous.py" in str(exc["frames"].iloc[0])
    d = dx.diagnose(inc, strict=True)
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()

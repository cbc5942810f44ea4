"""Launchers say who failed first (issue 16, kind 2), and ranks come from whatever names them.

Generated variants of each launcher's real output (torchelastic's agent line, its SIGTERMs, its
ChildFailedError table; DeepSpeed's last-command line; torch.distributed.launch's
CalledProcessError; Ray's dead worker; a closed rendezvous), behind the wrappers logs arrive in
(the logger header of each torch version, Rich columns, kubectl timestamps, pdsh hosts), cut short
and on a subset of the ranks. What must hold: the class is ``rank-crash`` when a launcher says a
worker failed on its own; the culprit is the global rank only when the evidence maps it (the table,
a rendezvous result, a pid another line ranks, a launcher that ran the whole world), else the
finding says "local rank L" and names no one; a launcher that prints the last command it started
names no culprit; a stated exit beside a collective failure is only an alternative.
"""

from __future__ import annotations

import itertools

import pytest

import denpex_nb as dx
from denpex_nb.analysis.resolve import Resolver, Who

_HEADERS = {
    "torch2.1": lambda lvl, t: f"[2024-05-01 10:00:0{t},100] torch.distributed.elastic.multiprocessing.api: [{lvl}] ",
    "logging": lambda lvl, t: f"{lvl}:torch.distributed.elastic.multiprocessing.api:",
    "glog": lambda lvl, t: f"{lvl[0]}0501 10:00:0{t}.100000 140 torch/distributed/elastic/multiprocessing/api.py:851] ",
    "kubectl": lambda lvl, t: f"2024-05-01T10:00:0{t}.123456789Z {lvl}:torch.distributed.elastic.multiprocessing.api:",
    "pdsh": lambda lvl, t: f"node7: {lvl}:torch.distributed.elastic.multiprocessing.api:",
}


def _agent_lines(header: str, local: int, pid: int, code: int, others: list[int]) -> list[str]:
    h = _HEADERS[header]
    out = [h("WARNING", 0) + f"Sending process {p} closing signal SIGTERM" for p in others]
    out.append(
        h("ERROR", 1) + f"failed (exitcode: {code}) local_rank: {local} (pid: {pid}) of binary: /usr/bin/python3"
    )
    return out


def _table(rank: int, local: int, pid: int, code: int, host: str = "node7", root: bool = True) -> list[str]:
    head = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
    ]
    body = [
        "  time      : 2024-05-01_10:00:01",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {code} (pid: {pid})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ]
    if root:
        return (
            head
            + ["Failures:", "  <NO_OTHER_FAILURES>", "-" * 60, "Root Cause (first observed failure):", "[0]:"]
            + body
            + ["=" * 60]
        )
    return head + ["Failures:", "[1]:"] + body + ["-" * 60]


def _rendezvous(local_ranks: list[int], global_ranks: list[int], world: int) -> list[str]:
    return [
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
        "  restart_count=0",
        "  master_addr=10.0.0.1",
        "  group_rank=1",
        "  group_world_size=2",
        f"  local_ranks={local_ranks}",
        f"  role_ranks={global_ranks}",
        f"  global_ranks={global_ranks}",
        f"  role_world_sizes={[world] * len(local_ranks)}",
        f"  global_world_sizes={[world] * len(local_ranks)}",
        "",
    ]


def _diagnose(tmp_path, lines: list[str], name: str = "launcher.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.diagnose(dx.load(str(p), progress=False), strict=True)


_VARIANTS = list(itertools.product(sorted(_HEADERS), [0, 3, 7], [1, -9, -11]))


@pytest.mark.parametrize(("header", "local", "code"), _VARIANTS)
def test_agent_line_alone_names_the_local_rank_not_a_culprit(tmp_path, header, local, code):
    others = [1000 + k for k in range(4) if k != local % 4]
    d = _diagnose(tmp_path, _agent_lines(header, local, 4242, code, others))
    assert d.verdict == "rank-crash"
    assert d.culprit_ranks == []  # a local rank on an unknown node is no global rank
    assert f"local rank {local}" in d.first.summary
    assert d.first.rule == "launcher-first-failure"
    assert d.first.culprit_basis.startswith("undetermined")


@pytest.mark.parametrize(("header", "local", "code"), _VARIANTS[::3])
def test_root_cause_table_states_the_global_rank(tmp_path, header, local, code):
    rank = 8 + local
    lines = _agent_lines(header, local, 4242, code, [1001, 1002]) + _table(rank, local, 4242, code)
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [rank]
    assert d.first.culprit_basis.startswith("statement: ") and "failure table" in d.first.culprit_basis
    assert d.initiating_rank == rank


@pytest.mark.parametrize("cut", range(1, 21))
def test_a_table_cut_anywhere_never_clears_and_never_names_another_rank(tmp_path, cut):
    d = _diagnose(tmp_path, _table(12, 4, 4242, 1)[:cut])
    assert d.verdict != "no-failure"
    assert d.culprit_ranks in ([], [12])


@pytest.mark.parametrize(("local", "offset"), [(0, 4), (3, 4), (1, 16), (7, 56)])
def test_rendezvous_result_in_the_same_log_maps_the_local_rank(tmp_path, local, offset):
    locs = list(range(8))
    lines = _rendezvous(locs, [offset + r for r in locs], offset + 8) + _agent_lines("logging", local, 5151, 1, [9000])
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [offset + local]
    assert "rendezvous result" in d.first.culprit_basis


def test_another_nodes_rendezvous_result_does_not_map_this_nodes_local_rank(tmp_path):
    (tmp_path / "node1.log").write_text("\n".join(_rendezvous([0, 1], [2, 3], 4)) + "\n")
    (tmp_path / "node0.log").write_text("\n".join(_agent_lines("logging", 1, 77, 1, [76])) + "\n")
    d = dx.diagnose(dx.load(str(tmp_path / "node1.log"), str(tmp_path / "node0.log"), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


@pytest.mark.parametrize("nproc", [2, 4, 8])
def test_a_launcher_that_ran_the_whole_world_is_one_node(tmp_path, nproc):
    pids = [300 + k for k in range(nproc)]
    failed = nproc - 1
    lines = [
        f"[rank{r}]:[W socket.cpp] ProcessGroupNCCL initialization options: size: {nproc}, global rank: {r}"
        for r in range(nproc)
    ]
    lines += _agent_lines("logging", failed, pids[failed], -9, pids[:failed])
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash"
    if d.group_size == nproc:
        assert d.culprit_ranks == [failed]
        assert "whole world" in d.first.culprit_basis


def test_a_pid_that_an_nccl_init_line_ranks(tmp_path):
    lines = [
        "node3:5151:5151 [2] NCCL INFO comm 0x55d1c0e0 rank 19 nranks 32 cudaDev 2 busId 1d000 commId 0x1 - Init COMPLETE",
        "node3:5150:5150 [1] NCCL INFO comm 0x55d1c0f0 rank 18 nranks 32 cudaDev 1 busId 1c000 commId 0x1 - Init COMPLETE",
    ] + [ln.replace("node7: ", "node3: ") for ln in _agent_lines("pdsh", 2, 5151, -11, [5150])]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [19]
    assert "NCCL" in d.first.culprit_basis


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_workers_the_launcher_stopped_are_not_a_failure_of_their_own(tmp_path, sig):
    code = {"SIGTERM": -15, "SIGINT": -2}[sig]
    d = _diagnose(tmp_path, _agent_lines("logging", 2, 42, code, [41, 43]))
    assert d.first is None or d.first.rule != "launcher-first-failure"


_TIMEOUT = (
    "[rank{r}]:[E501 10:00:00.000000 1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
    "milliseconds before timing out."
)


@pytest.mark.parametrize(("code", "ranks"), [(-6, [0, 1]), (1, [0, 1, 2, 3]), (-6, [1]), (1, [2])])
def test_an_exit_beside_a_collective_failure_is_only_an_alternative(tmp_path, code, ranks):
    lines = [_TIMEOUT.format(r=r) for r in ranks] + _agent_lines("logging", 1, 99, code, [98])
    d = _diagnose(tmp_path, lines)
    assert d.verdict != "rank-crash"
    assert "rank-crash" in [a.class_id for a in d.alternatives]
    assert "also consistent with: rank-crash" in d.summary()
    assert d.to_dict()["alternatives"][0]["class"] in {a.class_id for a in d.alternatives}


@pytest.mark.parametrize("local", [0, 1, 7])
@pytest.mark.parametrize("code", [1, -9])
def test_deepspeed_prints_the_last_command_it_started(tmp_path, local, code):
    lines = [
        "[2024-05-01 10:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4242",
        f"[2024-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
        f"'--local_rank={local}', '--deepspeed'] exits with return code = {code}",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "last process it started" in d.first.culprit_basis


@pytest.mark.parametrize("local", [0, 3])
def test_torch_distributed_launch_called_process_error(tmp_path, local):
    lines = [
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/launch.py", line 260, in <module>',
        "    main()",
        "subprocess.CalledProcessError: Command '['/opt/conda/bin/python', '-u', 'train.py', "
        f"'--local_rank={local}', '--cfg', 'a.yaml']' returned non-zero exit status 1.",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "last process it started" in d.first.culprit_basis


@pytest.mark.parametrize("prefix", ["", "(raylet) ", "(raylet, ip=10.0.0.3) "])
def test_a_dead_ray_worker(tmp_path, prefix):
    lines = [
        prefix + "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
        "the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 7c3 Node ID: 2a Worker IP "
        "address: 10.0.0.3 Worker port: 10003 Worker PID: 4321 Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2. End of file."
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "pid 4321" in d.first.summary and "10.0.0.3" in d.first.summary


def test_a_closed_rendezvous_is_a_failure_elsewhere(tmp_path):
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


def test_two_nodes_first_failures_ordered_by_time(tmp_path):
    a = _agent_lines("torch2.1", 1, 11, 1, [10]) + _table(5, 1, 11, 1, host="node1")
    b = [ln.replace(":0", ":3", 1) if ln.startswith("[2024") else ln for ln in _agent_lines("torch2.1", 0, 21, 1, [20])]
    b += [ln.replace("10:00:01", "10:00:09") for ln in _table(2, 0, 21, 1, host="node0")]
    (tmp_path / "a.log").write_text("\n".join(a) + "\n")
    (tmp_path / "b.log").write_text("\n".join(b) + "\n")
    d = dx.diagnose(dx.load(str(tmp_path / "a.log"), str(tmp_path / "b.log"), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [5]


# --- the resolver on its own ----------------------------------------------------------------------


def test_who_labels():
    assert Who(rank=3).label == "rank 3"
    assert Who(local_rank=2, node="node-7").label == "local rank 2 on node-7"
    assert Who(local_rank=2, pid=9, node="n").label == "local rank 2 (pid 9) on n"
    assert Who(pid=9).label == "pid 9"


def test_a_pid_two_hosts_rank_differently_resolves_to_nothing(tmp_path):
    lines = [
        "nodeA:500:500 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 commId 0x9 - Init COMPLETE",
        "nodeB:500:500 [0] NCCL INFO comm 0x2 rank 8 nranks 16 cudaDev 0 busId 1000 commId 0x9 - Init COMPLETE",
    ]
    p = tmp_path / "n.log"
    p.write_text("\n".join(lines) + "\n")
    res = Resolver(dx.load(str(p), progress=False))
    assert res.by_pid(500) is None  # pids repeat across nodes
    assert res.by_pid(500, "nodeA")[0] == 0 and res.by_pid(500, "nodeB")[0] == 8
    assert res.who({"pid": 500, "host": "nodeB"}).rank == 8
    assert res.who({"pid": 501}).rank is None


# --- other launchers, generated variants ------------------------------------------------------------

_MPI_WRAP = ["", "[1,0]<stderr>:", "node3: ", "2024-05-01T10:00:00.123456789Z "]


@pytest.mark.parametrize("wrap", _MPI_WRAP)
@pytest.mark.parametrize(("rank", "sig"), [(1, 9), (6, 11), (0, 6)])
def test_mpirun_noticed_names_the_mpi_rank(tmp_path, wrap, rank, sig):
    lines = [
        wrap + "Primary job  terminated normally, but 1 process returned",
        wrap + "a non-zero exit code. Per user-direction, the job has been aborted.",
        wrap + f"mpirun noticed that process rank {rank} with PID 4{rank}21 on node gpu-{rank} exited on signal {sig} "
        "(Killed).",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [rank]
    assert "mpirun" in d.first.culprit_basis


@pytest.mark.parametrize("rank", [0, 3, 12])
@pytest.mark.parametrize("cut", [False, True])
def test_mpirun_detected_the_first_process_to_exit(tmp_path, rank, cut):
    lines = [
        "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks "
        "or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
        "-" * 74,
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "",
        f"  Process name: [[50371,1],{rank}]",
        "  Exit code:    1",
    ]
    d = _diagnose(tmp_path, lines[:-1] if cut else lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [rank]  # not rank 1, whose Horovod shut down


@pytest.mark.parametrize("host", ["reco316", "ip-10-0-0-7"])
def test_an_mpi_peer_that_disconnected_is_named_by_its_host(tmp_path, host):
    lines = [
        "An MPI communication peer process has unexpectedly disconnected.  This",
        "usually indicates a failure in the peer process (e.g., a crash or",
        "  Local host: reco313",
        "  Local PID:  7720",
        f"  Peer host:  {host}",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [] and host in d.first.summary


@pytest.mark.parametrize("rank", [0, 2])
def test_ray_train_names_its_worker_index(tmp_path, rank):
    d = _diagnose(tmp_path, [f"(TorchTrainer pid=89392) Worker {rank} has failed."])
    assert d.verdict == "rank-crash" and d.culprit_ranks == [rank]


def test_a_dead_ray_worker_beside_the_nccl_errors_it_caused(tmp_path):
    lines = [
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker IP "
        "address: 10.0.0.3 Worker port: 10003 Worker PID: 4321 Worker exit type: SYSTEM_ERROR",
        "(RayWorkerWrapper pid=92234, ip=10.0.0.4) [rank1]:[E1224 13:23:05.483840160 ProcessGroupNCCL.cpp:542] "
        "[Rank 1] Collective WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=7, NumelOut=7, Timeout(ms)=1800000) raised "
        "the following async exception: NCCL error: remote process exited or there was a network error, NCCL "
        "version 2.21.5",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


@pytest.mark.parametrize("ranks", [[3], [3, 4], [0, 5, 7]])
def test_torchelastic_json_events_of_failed_workers(tmp_path, ranks):
    lines = [
        '{"name": "torchelastic.worker.status.FAILED", "source": "WORKER", "timestamp": 0, "metadata": {"run_id": '
        f'"none", "global_rank": {r}, "group_rank": 0, "worker_id": "{11370 + 7**r}", "role": "default", "hostname": "h", '
        '"state": "FAILED"}}'
        for r in ranks
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash"
    assert d.culprit_ranks == (ranks if len(ranks) == 1 else [])  # (lines of one width would be read as wrapped)


@pytest.mark.parametrize("header", ["logging", "glog"])
def test_the_agents_worker_group_failed_line(tmp_path, header):
    h = _HEADERS[header]("INFO", 0)
    d = _diagnose(tmp_path, [h + "[default] Worker group FAILED. 3/3 attempts left; will restart worker group"])
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


@pytest.mark.parametrize("n", [1, 3, 7])
def test_sigterms_alone_say_a_worker_failed(tmp_path, n):
    d = _diagnose(tmp_path, _agent_lines("glog", 0, 1, 1, list(range(100, 100 + n)))[:-1])
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


@pytest.mark.parametrize(
    "why",
    [
        "WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting down workers",
        "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down workers",
        "INFO:torch.distributed.elastic.agent.server.api:[default] Detected 1 new nodes from group_rank=0; will "
        "restart worker group",
    ],
)
def test_sigterms_after_the_agent_was_stopped_are_no_worker_failure(tmp_path, why):
    d = _diagnose(tmp_path, [why] + _agent_lines("logging", 0, 1, 1, [100, 101])[:-1])
    assert d.first is None or d.first.rule != "launcher-first-failure"


@pytest.mark.parametrize("exc", ["RendezvousClosedError", "RendezvousTimeoutError"])
def test_the_error_handlers_json(tmp_path, exc):
    lines = [
        "ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{",
        '  "message": {',
        f'    "message": "{exc}: ",',
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict != "no-failure"
    assert d.culprit_ranks == []


def test_the_launchers_own_traceback(tmp_path):
    lines = [
        "[E socket.cpp:500] [c10d] The server socket has failed to listen on any local network address.",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/lib/python3/dist-packages/torch/distributed/run.py", line 879, in main',
        "    run(args)",
        '  File "/usr/lib/python3/dist-packages/torch/distributed/launcher/api.py", line 254, in launch_agent',
        "    result = agent.run()",
        '  File "/usr/lib/python3/dist-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", '
        "line 55, in next_rendezvous",
        "    self._store = TCPStore(",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
        "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "launcher failed itself" in d.first.culprit_basis


@pytest.mark.parametrize("n", [2, 4])
def test_failures_in_the_same_second_name_no_first(tmp_path, n):
    rows = []
    for r in range(1, n):
        rows += [f"[{r}]:"] + _table(r, r, 700 + r, 1)[9:15]
    lines = _table(0, 0, 700, 1)[:5] + rows + ["-" * 60, "Root Cause (first observed failure):", "[0]:"]
    lines += _table(0, 0, 700, 1)[9:15] + ["=" * 60]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "same second" in d.first.culprit_basis


@pytest.mark.parametrize("wrap", ["", "[rank3]:", "2024-05-01T10:00:00.123456789Z "])
@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("srun: error: gpu-07: task 5: Exited with exit code 1", "slurm task 5 on gpu-07"),
        ("srun: error: gpu-07: tasks 4-7: Killed", "slurm task 4-7 on gpu-07"),
        ("srun: error: Node failure on gpu-07", "gpu-07"),
        ("pdsh@login1: gpu-07: ssh exited with exit code 1", "gpu-07"),
    ],
)
def test_slurm_and_pdsh_name_a_task_or_a_node_never_a_rank(tmp_path, wrap, line, named):
    d = _diagnose(tmp_path, [wrap + line])
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert named in d.first.summary


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: *** STEP 1234.0 ON gpu-07 CANCELLED AT 2024-05-01T10:00:00 ***",
        "slurmstepd: error: *** JOB 1234 ON gpu-07 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
    ],
)
def test_a_cancelled_job_is_a_failure_but_no_rank_crash(tmp_path, line):
    d = _diagnose(tmp_path, [line])
    assert d.verdict == "timeout-undetermined"


@pytest.mark.parametrize(
    "line",
    [
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt "
        "to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
    ],
)
@pytest.mark.parametrize("wrap", ["", "[rank2]:", "(RayWorkerWrapper pid=7, ip=10.0.0.2) "])
def test_a_launchers_exception_line_without_its_traceback(tmp_path, line, wrap):
    d = _diagnose(tmp_path, [wrap + line])
    assert d.verdict in ("rank-crash", "timeout-undetermined") and d.culprit_ranks == []


@pytest.mark.parametrize("ip", ["192.168.1.51", "10.141.250.231"])
def test_deepspeeds_pdsh_runner_labels_lines_by_node_ip(tmp_path, ip):
    lines = [
        f"{ip}: Traceback (most recent call last):",
        f'{ip}:   File "pretrain.py", line 183, in <module>',
        f"{ip}:     main()",
        f"{ip}: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        f"{ip}: [2024-05-01 10:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 4242",
    ]
    inc = dx.load(str(_write(tmp_path, lines)), progress=False)
    ex = inc.errors[inc.errors["kind"].astype(str).isin(["exception", "oom"])]
    assert len(ex) == 1 and "CUDA out of memory" in str(ex["message"].iloc[0])
    assert dx.diagnose(inc, strict=True).verdict == "rank-crash"


@pytest.mark.parametrize("cause", ["OutOfMemoryError", "RuntimeError", "torch.OutOfMemoryError"])
@pytest.mark.parametrize("tail", ["", "      | 1.00/36.0 [00:04<02:52, 4.93s/it]"])
def test_rays_wrapped_task_error_is_the_exception_line(tmp_path, cause, tail):
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 937, in get_objects',
        "    raise value.as_instanceof_cause()",
        f"ray.exceptions.RayTaskError({cause}): ray::WorkerDict.update_actor() (pid=118848, ip=10.130.71.7){tail}",
    ]
    inc = dx.load(str(_write(tmp_path, lines)), progress=False)
    msgs = [str(m) for m in inc.errors["message"]]
    assert any(m.startswith(f"ray.exceptions.RayTaskError({cause})") for m in msgs), msgs


def _write(tmp_path, lines):
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("sig", [("9", "SIGKILL"), ("11", "SIGSEGV"), ("6", "SIGABRT")])
@pytest.mark.parametrize("head", ["traceback : ", "traceback: ", ""])
def test_a_flattened_tables_signal_line_names_the_pid(tmp_path, sig, head):
    lines = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "Root Cause (first observed failure) :",
        f"{head}Signal {sig[0]} ({sig[1]}) received by PID 36071",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [] and "pid 36071" in d.first.summary


def test_the_signal_line_inside_a_whole_table_is_the_tables_row(tmp_path):
    lines = _table(2, 2, 36071, -9)
    lines[lines.index("  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")] = (
        "  traceback : Signal 9 (SIGKILL) received by PID 36071"
    )
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [2]


def _coll_line(host, pid, op, prefix=""):
    return (
        f"{prefix}{host}:{pid}:{pid} [0] NCCL INFO {op}: opCount 5 sendbuff 0x7f01 recvbuff 0x7f02 count 1024 "
        f"datatype 7 op 0 root 0 comm 0x55c0 [nranks=5] stream 0x5a"
    )


@pytest.mark.parametrize("mapped", [True, False])
def test_nccl_opcounts_ranks_a_host_pid_through_the_resolver(tmp_path, mapped):
    lines = [_coll_line(f"n{r}", 100 + r, "Broadcast" if r == 3 else "AllReduce", f"[rank{r}]:") for r in range(4)]
    lines.append(_coll_line("node7", 4242, "Broadcast"))
    if mapped:
        lines += _table(4, 0, 4242, 1)  # torchelastic's table: pid 4242 on node7 is rank 4
    d = dx.diagnose(dx.load(str(_write(tmp_path, lines)), progress=False), strict=True)
    nccl = [f for f in d.findings if f.rule == "nccl-opcounts"]
    if mapped:
        assert [(f.class_id, list(f.culprit_ranks)) for f in nccl] == [("op-mismatch", [3, 4])]
        assert "rank" in nccl[0].summary
    else:  # (merged into the position counter's finding, which cannot see the unranked process)
        assert all(not f.culprit_ranks for f in nccl)
        assert all(4 not in f.culprit_ranks for f in d.findings)

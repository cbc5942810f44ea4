"""The decisions of rule ``launcher-first-failure`` (analysis/launchers.py), pinned on small inputs read
through the real readers (torchelastic's ChildFailedError table and agent line).

Decisions of rule ``launcher-first-failure``:

- a process the launcher names as the first to fail, with its global rank stated, is a rank crash
  naming that rank by statement (test_a_root_cause_row_with_its_rank_names_that_rank).
- an exit by the launcher's own signal (SIGTERM) is not a failure of the process: no finding
  (test_the_launchers_own_sigterm_is_no_failure).
- a local rank without its node's global ranks names no culprit
  (test_a_local_rank_alone_names_no_culprit).
- beside a collective failure an exit with an error code may be its consequence: the finding is
  only an alternative, at low confidence; a crash signal is not
  (test_beside_a_collective_failure_an_exit_is_only_an_alternative).
- two processes stated to fail in the same second name no culprit: the table's order is not an
  order of failure (test_two_failures_in_the_same_second_name_no_culprit).
- PaddlePaddle's launcher names the failed container by its index in the pod (``Container rank 0
  status failed ... code 1``): a rank crash of that local rank on its node, stated in the finding, no
  global rank named; a container line that did not fail (status running, code 0) is none
  (test_paddles_failed_container_is_a_crash_of_that_local_rank).
- torchelastic's own traceback after its agent named the failed worker (how it raises
  ChildFailedError, the paste cut before that line) is the same failure, not a second process: the
  finding names the worker's local rank (test_the_launchers_own_traceback_after_its_failed_line_is_no_second_failure).
- beside NCCL's error inside another framework's exception (TensorFlow, Horovod), the tasks srun
  reports exiting are its consequence: only an alternative
  (test_beside_nccls_error_in_another_frameworks_exception_an_exit_is_only_an_alternative).
"""

from __future__ import annotations

import denpex_nb as dx

#: a watchdog timeout without a time (the launcher cannot have seen the exit before it)
WATCHDOG = (
    "[rank2]:[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, Timeout(ms)=600000) ran for 600001 "
    "milliseconds before timing out."
)


def _failure(rank: int, local: int, code: int, pid: int, t: str = "10:00:01") -> list[str]:
    return [
        f"  time      : 2024-05-01_{t}",
        "  host      : node7",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {code} (pid: {pid})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    ]


def _table(rank: int, code: int, others: list[tuple[int, int]] = ()) -> list[str]:
    """A ChildFailedError table whose Root Cause row is ``rank``; ``others``: (rank, code) failures."""
    lines = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "train.py FAILED"]
    lines += ["-" * 60, "Failures:"]
    if others:
        for i, (r, c) in enumerate(others, 1):
            lines += [f"[{i}]:"] + _failure(r, r % 8, c, 5000 + r)
    else:
        lines.append("  <NO_OTHER_FAILURES>")
    lines += ["-" * 60, "Root Cause (first observed failure):", "[0]:"] + _failure(rank, rank % 8, code, 5000 + rank)
    return lines + ["=" * 60]


def _findings(tmp_path, lines):
    p = tmp_path / "launcher.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    # an alternative-only finding is listed apart from the findings, never the verdict
    return d, [f for f in list(d.findings) + list(d.alternatives) if f.rule == "launcher-first-failure"]


def test_a_root_cause_row_with_its_rank_names_that_rank(tmp_path):
    d, (f,) = _findings(tmp_path, _table(5, 1))
    assert (f.class_id, list(f.culprit_ranks), f.alternative_only) == ("rank-crash", [5], False)
    assert f.culprit_basis.startswith("statement") and d.verdict == "rank-crash"


def test_the_launchers_own_sigterm_is_no_failure(tmp_path):
    _, found = _findings(tmp_path, _table(5, -15))
    assert found == []


def test_a_local_rank_alone_names_no_culprit(tmp_path):
    line = (
        "E0501 10:00:01.100000 140 torch/distributed/elastic/multiprocessing/api.py:851] failed (exitcode: 1) "
        "local_rank: 3 (pid: 4242) of binary: /usr/bin/python3"
    )
    _, (f,) = _findings(tmp_path, [line])
    assert list(f.culprit_ranks) == [] and f.culprit_basis.startswith("undetermined")
    assert "local rank 3" in f.summary


def test_beside_a_collective_failure_an_exit_is_only_an_alternative(tmp_path):
    d, (f,) = _findings(tmp_path, [WATCHDOG] + _table(5, 1))
    assert (f.alternative_only, f.confidence) == (True, "low") and d.verdict != "rank-crash"
    _, (f,) = _findings(tmp_path, [WATCHDOG] + _table(5, -11))  # SIGSEGV: a crash whatever else failed
    assert (f.alternative_only, list(f.culprit_ranks)) == (False, [5])


def test_two_failures_in_the_same_second_name_no_culprit(tmp_path):
    _, (f,) = _findings(tmp_path, _table(5, 1, others=[(3, 1)]))
    assert list(f.culprit_ranks) == [] and "same second" in f.culprit_basis


_PADDLE_CMD = "cmd ['/usr/bin/python3', '-u', 'tools/train.py', '-c', 'configs/x.yml', '--eval']"


def test_paddles_failed_container_is_a_crash_of_that_local_rank(tmp_path):
    for local in (0, 3):
        for prefix in ("", "LAUNCH ERROR 2022-11-21 02:35:54,385 ", "[1,0]<stderr>:", "node7: "):
            lines = [
                "LAUNCH INFO 2022-11-21 02:35:54,384 Pod failed",
                "LAUNCH ERROR 2022-11-21 02:35:54,385 Container failed !!!",
                f"{prefix}Container rank {local} status failed {_PADDLE_CMD} code 1 log log/workerlog.{local}",
            ]
            d, (f,) = _findings(tmp_path, lines)
            assert (d.verdict, list(f.culprit_ranks)) == ("rank-crash", []), (prefix, d.summary())
            assert f"local rank {local}" in f.summary and f.culprit_basis.startswith("undetermined")
    for status, code in (("running", -1), ("completed", 0)):
        line = f"Container rank 0 status {status} {_PADDLE_CMD} code {code} log log/workerlog.0"
        _, found = _findings(tmp_path, [line])
        assert found == [], status


_ELASTIC_TB = [
    "Traceback (most recent call last):",
    '  File "/usr/bin/torchrun", line 10, in <module>',
    "    sys.exit(main())",
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/run.py", line 892, in main',
    "    run(args)",
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/run.py", line 883, in run',
    "    elastic_launch(",
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 138, in __call__',
    "    return launch_agent(self._config, self._entrypoint, list(args))",
]


def test_the_launchers_own_traceback_after_its_failed_line_is_no_second_failure(tmp_path):
    for cut in (3, 7, len(_ELASTIC_TB)):
        for sigterms in (1, 3):
            lines = [
                f"W0801 13:23:17.366000 32974 torch/distributed/elastic/multiprocessing/api.py:900] Sending process "
                f"{33050 + i} closing signal SIGTERM"
                for i in range(sigterms)
            ]
            lines.append(
                "E0801 13:23:20.000000 32974 torch/distributed/elastic/multiprocessing/api.py:874] failed "
                "(exitcode: 1) local_rank: 3 (pid: 33054) of binary: /usr/bin/python3"
            )
            d, (f,) = _findings(tmp_path, lines + _ELASTIC_TB[:cut])
            assert "local rank 3" in f.summary and "several" not in f.summary, (cut, f.summary)
            assert f.confidence == "medium" and list(f.culprit_ranks) == []


def test_beside_nccls_error_in_another_frameworks_exception_an_exit_is_only_an_alternative(tmp_path):
    for exc in (
        "tensorflow.python.framework.errors_impl.UnknownError:  ncclCommInitRank failed: unhandled system error",
        "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled cuda error",
    ):
        lines = [
            exc,
            "srun: error: node1: task 1: Exited with exit code 1",
            "srun: error: node0: task 0: Exited with exit code 1",
        ]
        d, (f,) = _findings(tmp_path, lines)
        assert f.alternative_only and d.verdict == "nccl-error", d.summary()

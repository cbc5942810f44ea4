"""Decisions on kinds of real-log text that blind batch h's misses showed (issue #16), each tested on
generated variants (launcher stamps and tags, collector wrappers, subsets of ranks, cuts), never on
one log.

- a launcher that stamps its children's lines with a ``ctime`` time before its tag (``horovodrun
  --prefix-output-with-timestamp``: ``Fri Sep 25 16:52:53 2020[0]<stderr>:``, Open MPI's
  ``--timestamp-output`` before ``[1,3]<stdout>:``): the stamp is peeled and the tag gives the rank.
  Without it the user was told "nothing distributed could be read" about a job whose ranks failed, or
  "one process failed on its own" about several ranks' NCCL errors
  (test_a_launchers_ctime_stamp_before_its_tag_gives_the_rank). The stamp is a line-start prefix for the
  loader's block and hard-wrap tests too: a stamped failure line after lines of one length is never
  joined to them as a wrapped tail and excused (the user was told "no failure")
  (test_a_stamped_line_is_never_a_wrapped_tail).
- an ``NCCL WARN`` reporting a CUDA call NCCL made that failed (``Cuda failure 'invalid argument'``,
  the WARN behind ``ncclUnhandledCudaError``, from its transports and proxy) is NCCL's error,
  ``nccl-error``; the user was told it was the process's own device crash
  (test_an_nccl_warn_of_a_failed_cuda_call_is_nccls_error). A device fault NCCL's call only found (an
  illegal memory access) stays the device's, and out-of-memory stays memory
  (test_a_device_fault_or_oom_found_by_nccl_keeps_its_family).
- a line saying this process's work stopped because another process raised, not naming it (Horovod's
  ``Horovod has been shut down. This was caused by an exception on one of the ranks ...``), behind
  launcher tags and stamps, hard-wrapped by a terminal, printed by one rank or several: a
  ``rank-crash`` whose culprit is undetermined, never the rank that printed it. Without it the user
  was told "nothing distributed could be read", or "cause undetermined"
  (test_a_shutdown_caused_by_another_ranks_exception_is_a_crash_of_an_unnamed_rank).
- a checkpoint whose saved sizes do not fit the model loading it (``load_state_dict``'s ``size mismatch
  for ...: copying a param with shape ... from checkpoint``, torch.distributed.checkpoint's ``Size
  mismatch between saved ... and current``), whatever FSDP / ZeRO / shard words name the parameter and
  whatever launcher tags the lines: the process's own crash, ``rank-crash``; the user was told the
  ranks' collective exchanged mismatched sizes (``shape-mismatch``)
  (test_a_checkpoint_load_size_mismatch_is_the_process_own_crash), while a collective's own size error
  stays the size family (test_a_collectives_size_error_is_still_the_size_family).
- the launcher's own report that its workers finished well (torchelastic's JSON events
  ``torchelastic.worker.status.SUCCEEDED``, its agent's ``worker group successfully finished``) is
  evidence of a distributed run that succeeded: ``no-failure`` (low confidence), not "nothing
  distributed could be read" (test_a_launchers_worker_succeeded_events_are_an_all_clear); one worker's
  ``FAILED`` event beside them is never an all-clear
  (test_a_failed_worker_event_beside_succeeded_ones_is_never_an_all_clear).
- an exception Python reports it ignored (``Exception ignored in: <... __del__ ...>``, an atexit or
  weakref callback, then its traceback: ``sys.unraisablehook``; the program went on) is no failure:
  beside a healthy distributed run, ``no-failure``; the user was told a rank crashed
  (test_an_exception_python_ignored_is_no_failure). Alone it is nothing distributed, ``no-evidence``,
  never a crash nor an all-clear (test_an_ignored_exception_alone_is_nothing_distributed); a real
  crash after it is still a crash (test_a_crash_after_an_ignored_exception_is_still_a_failure), and
  another process's failure line that landed inside its traceback (interleaved streams) is never
  excused with it (test_a_failure_line_interleaved_in_an_ignored_traceback_still_counts).
- the same failure printed by several processes that no prefix names by rank (NCCL's ``host:pid:tid``
  prefix only) is one row per process, not one in all: the evidence shows several processes, so the
  verdict never says that one process failed on its own, no other rank in sight
  (test_the_same_failure_from_several_unranked_processes_is_several_processes).
- a parallel layout that does not fit the job, found by a start-up check and logged without an
  exception class (``[ERROR] - ... World size 2 must be divisible by the product of all parallel
  degrees``), is the process's configuration error, ``rank-crash``; the user was told that a
  collective exchanged mismatched sizes (``shape-mismatch``)
  (test_a_parallel_layout_check_is_the_process_own_error), while a collective's input not divisible by
  the world size stays the size family (test_a_collective_input_not_divisible_is_still_the_size_family).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.signals import family_of
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import PHRASES, WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose

# --- a launcher's ctime stamp before its tag -----------------------------------------------------------

_STAMPS = ["Fri Aug 11 12:31:45 2023", "Mon Feb  3 07:05:09 2025", "Fri Sep 25 16:52:53 UTC 2020"]
_TAGS = {
    "horovod": lambda r, s: f"[{r}]<{s}>:",
    "openmpi": lambda r, s: f"[1,{r}]<{s}>:",
}


def _nccl_cuda_chain(r: int, pid: int) -> list[str]:
    return [
        f"node7:{pid}:{pid + 11} [{r}] transport.cc:154 NCCL WARN Cuda failure 'invalid argument'",
        f"node7:{pid}:{pid + 12} [{r}] proxy.cc:1485 NCCL WARN [Service thread] Error encountered progressing "
        "operation=Connect, res=3, closing connection",
        f"node7:{pid}:{pid + 12} [{r}] proxy.cc:1519 NCCL WARN [Proxy Service {r}] Failed to execute operation "
        f"Connect from rank {r}, retcode 3",
    ]


@pytest.mark.parametrize("stamp", _STAMPS)
@pytest.mark.parametrize("tag", sorted(_TAGS))
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("ranks", [[0], [0, 3], [1, 2, 3]], ids=["one", "two", "subset"])
def test_a_launchers_ctime_stamp_before_its_tag_gives_the_rank(tmp_path, stamp, tag, stream, ranks):
    lines = [f"{stamp}{_TAGS[tag](r, stream)}{t}" for r in ranks for t in _nccl_cuda_chain(r, 1850301 + r)]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert not d.culprit_ranks or set(d.culprit_ranks) <= set(ranks), d.summary()
    inc = dx.load(str(tmp_path / "job.log"), progress=False)
    assert set(int(r) for r in inc.errors["rank"].dropna()) == set(ranks)
    assert inc.errors["t_wall"].notna().all()
    # the last line cut mid-way by a paste: still the same ranks, still NCCL's error
    d = _diagnose(tmp_path, {"job.log": lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


@pytest.mark.parametrize("stamp", _STAMPS)
@pytest.mark.parametrize("width", [97, 167, 213])
@pytest.mark.parametrize("where", [1, 2, 3])
def test_a_stamped_line_is_never_a_wrapped_tail(tmp_path, stamp, width, where):
    head = "[2024-09-11 17:52:1{i},030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
    lines = [
        (head.format(i=i) + "Attempted loss scale: 65536, reducing to 32768 " + "x" * width)[:width] for i in range(4)
    ]
    bad = (
        f"{stamp}[7]<stderr>:NVRM: Xid (PCI:0000:1b:00): 48, pid=3448954, An uncorrectable double bit error (DBE) has "
        "been detected"
    )  # not at a common terminal width itself (a stamped line of 120 would be a wrapped head)
    lines.insert(where, bad)
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()


# --- NCCL's check of a CUDA call it made ------------------------------------------------------------------

_CUDA_FAILURES = [
    "Cuda failure 'invalid argument'",
    "Cuda failure 1 'invalid argument'",
    "Cuda failure 'initialization error'",
    "Cuda failure 999 'unknown error'",
    "Cuda failure 'invalid resource handle'",
]
_WHERE = ["transport.cc:154", "proxy.cc:1128", "enqueue.cc:1123", "init.cc:1461", "transport/p2p.cc:287"]


@pytest.mark.parametrize("what", _CUDA_FAILURES)
@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "pdsh", "slurm", "ray", "kubectl"])
def test_an_nccl_warn_of_a_failed_cuda_call_is_nccls_error(tmp_path, what, wrapper):
    w = WRAPPERS[wrapper]
    for k in range(2):  # two ranks, each from another of NCCL's source files
        where = _WHERE[(k + len(what)) % len(_WHERE)]
        line = w(k, f"host{k}:{4100 + k}:{4200 + k} [{k}] {where} NCCL WARN {what}")
        assert family_of(line) == SignalFamily.NETWORK, line
        d = _diagnose(tmp_path, {"job.log": [line]})
        assert d.verdict == ClassId.NCCL_ERROR, (line, d.summary())


@pytest.mark.parametrize(
    "what,family",
    [
        ("Cuda failure 'an illegal memory access was encountered'", SignalFamily.DEVICE),
        ("Cuda failure 719 'unspecified launch failure'", SignalFamily.DEVICE),
        ("Cuda failure 'device-side assert triggered'", SignalFamily.DEVICE),
        ("Cuda failure 'out of memory'", SignalFamily.MEMORY),
        ("Cuda failure 2 'out of memory'", SignalFamily.MEMORY),
    ],
)
def test_a_device_fault_or_oom_found_by_nccl_keeps_its_family(what, family):
    assert family_of(f"node1:71:72 [0] enqueue.cc:1123 NCCL WARN {what}") == family


# --- a shutdown caused by another rank's exception ------------------------------------------------------

_SHUTDOWN = (
    "{t}: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at mpi_ops.cc:402 : Unknown: Horovod "
    "has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather "
    "or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, "
    "you should see the exception in the log before the first shutdown message."
)
_PREFIXES = {
    "horovod": lambda r: f"[{r}]<stderr>:",
    "stamped-horovod": lambda r: f"Fri Sep 25 16:52:53 2020[{r}]<stderr>:",
    "stamped-openmpi": lambda r: f"Fri Sep 25 16:52:53 2020[1,{r}]<stderr>:",
    "mpirun": lambda r: f"[1,{r}]<stdout>:",
    "torch": lambda r: f"[rank{r}]:",
}


def _hard_wrap(lines: list[str], width: int | None) -> list[str]:
    if width is None:
        return lines
    return [ln[i : i + width] for ln in lines for i in range(0, len(ln), width)]


@pytest.mark.parametrize("prefix", sorted(_PREFIXES))
@pytest.mark.parametrize("width", [None, 80, 120, 170], ids=["whole", "w80", "w120", "w170"])
@pytest.mark.parametrize(
    "reporters,quiet", [([0], [1, 2, 3]), ([0, 1], []), ([2], [])], ids=["one-of-4", "both", "lone"]
)
def test_a_shutdown_caused_by_another_ranks_exception_is_a_crash_of_an_unnamed_rank(
    tmp_path, prefix, width, reporters, quiet
):
    p = _PREFIXES[prefix]
    lines = [
        p(r) + "node1:71:71 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC"
        for r in quiet  # ranks present and quiet: the reporter is still no culprit
    ]
    for r in reporters:
        for k in range(2):
            lines.append(p(r) + _SHUTDOWN.format(t=f"2020-09-25 16:52:53.64099{k}"))
    d = _diagnose(tmp_path, {"job.log": _hard_wrap(lines, width)})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert d.culprit_ranks == [], d.summary()
    assert d.confidence == "low", d.summary()


# --- a checkpoint's sizes against the model's ------------------------------------------------------------

_PARAMS = [
    "fsdp_checkpoint.model.language_model.embed_tokens.weight",
    "_fsdp_wrapped_module.layers.3.mlp.fc1.weight",
    "module.zero_partition.shard_0.bias",
    "model.decoder.layers.4.fc1.weight",
]
_CKPT = [
    "ValueError: Size mismatch between saved torch.Size([257152, 2048]) and current: torch.Size([131661824]) for {p}",
    "RuntimeError: Error(s) in loading state_dict for FullyShardedDataParallel:",
    "\tsize mismatch for {p}: copying a param with shape torch.Size([0]) from checkpoint, the shape in current model "
    "is torch.Size([10240, 2560]).",
]


@pytest.mark.parametrize("param", _PARAMS)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "pdsh", "ray", "kubectl"])
@pytest.mark.parametrize("ranks", [[0], [0, 1, 2, 3]], ids=["one", "four"])
@pytest.mark.parametrize("which", [[0], [1, 2], [2]], ids=["dcp", "state-dict", "size-line-only"])
def test_a_checkpoint_load_size_mismatch_is_the_process_own_crash(tmp_path, param, wrapper, ranks, which):
    w = WRAPPERS[wrapper]
    lines = [w(r, _CKPT[k].format(p=param)) for r in ranks for k in which]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert not d.culprit_ranks or set(d.culprit_ranks) <= set(ranks), d.summary()


@pytest.mark.parametrize(
    "text",
    [
        "ValueError: all_gather got tensors of different sizes across ranks: rank 1 has 10, rank 0 has 12",
        "RuntimeError: size mismatch between ranks in reduce_scatter: expected 4096 elements, got 4095",
        "AssertionError: FSDP flat_param numel mismatch across ranks: 1024 vs 1000",
    ],
)
def test_a_collectives_size_error_is_still_the_size_family(text):
    assert family_of(text) == SignalFamily.SIZE


# --- the launcher's own worker status -------------------------------------------------------------------


def _elastic_event(rank: int, state: str, world: int = 8) -> str:
    raw = "null" if state == "SUCCEEDED" else '"{\\"message\\": \\"<NONE>\\"}"'
    return (
        f'{{"name": "torchelastic.worker.status.{state}", "source": "WORKER", "timestamp": 0, "metadata": '
        f'{{"run_id": "none", "global_rank": {rank}, "group_rank": 0, "worker_id": "{34600 + rank}", "role": '
        f'"default", "hostname": "node1.example.org", "state": "{state}", "total_run_time": 5, "rdzv_backend": '
        f'"static", "raw_error": {raw}, "metadata": "{{\\"group_world_size\\": 1, \\"entry_point\\": '
        f'\\"python\\", \\"local_rank\\": [{rank}], \\"role_rank\\": [{rank}], \\"role_world_size\\": '
        f'[{world}]}}", "agent_restarts": 0}}}}'
    )


_AGENT_DONE = (
    "INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished. Waiting 300 "
    "seconds for other agents to finish."
)


@pytest.mark.parametrize("wrapper", ["plain", "kubectl", "docker", "ray", "pdsh"])
@pytest.mark.parametrize("ranks", [[0], [23, 24], [0, 1, 2, 3, 4, 5, 6, 7]], ids=["one", "two", "all"])
@pytest.mark.parametrize("cut", [None, 60], ids=["whole", "cut"])
def test_a_launchers_worker_succeeded_events_are_an_all_clear(tmp_path, wrapper, ranks, cut):
    w = WRAPPERS[wrapper]
    lines = [w(0, _elastic_event(r, "SUCCEEDED")) for r in ranks]
    if cut:  # the last event cut mid-way by a paste, after its name
        lines[-1] = lines[-1][: len(lines[-1]) - len(_elastic_event(ranks[-1], "SUCCEEDED")) + cut]
    d = _diagnose(tmp_path, {"events.log": lines})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    assert d.all_clear_confidence == "low", d.summary()
    d = _diagnose(tmp_path, {"agent.log": [w(0, _AGENT_DONE)]})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


@pytest.mark.parametrize("bad", [0, 3, 7])
@pytest.mark.parametrize("wrapper", ["plain", "kubectl", "ray"])
def test_a_failed_worker_event_beside_succeeded_ones_is_never_an_all_clear(tmp_path, bad, wrapper):
    w = WRAPPERS[wrapper]
    lines = [w(0, _elastic_event(r, "FAILED" if r == bad else "SUCCEEDED")) for r in range(8)]
    d = _diagnose(tmp_path, {"events.log": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()
    assert not d.culprit_ranks or d.culprit_ranks == [bad], d.summary()


# --- an exception Python ignored --------------------------------------------------------------------------

_IGNORED = {
    "dataloader-del": [
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3a2c1d5e50>",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
        "    self._shutdown_workers()",
        '  File "/opt/conda/lib/python3.10/multiprocessing/connection.py", line 383, in _recv',
        "    raise EOFError",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
    ],
    "process-group-del": [
        "Exception ignored in: <function ProcessGroupWrapper.__del__ at 0x7f00aa0b1b40>",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 912, in __del__',
        "    self.pg.abort()",
        "RuntimeError: NCCL error: process group already destroyed",
    ],
    "atexit": [
        "Exception ignored in atexit callback: <function _exit_function at 0x7f1c9e2a4d30>",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.11/multiprocessing/util.py", line 357, in _exit_function',
        "    p.join()",
        "KeyboardInterrupt: ",
    ],
}


def _with_ignored(kind: str, wrapper: str, rank: int, cut: bool) -> list[str]:
    block = _IGNORED[kind][:-1] if cut else _IGNORED[kind]  # cut: the paste lost its exception line
    return [WRAPPERS[wrapper](rank, t) for t in block]


@pytest.mark.parametrize("kind", sorted(_IGNORED))
@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "kubectl"])
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
def test_an_exception_python_ignored_is_no_failure(tmp_path, kind, wrapper, cut):
    lines = healthy_lines(4, 6)
    lines[10:10] = _with_ignored(kind, wrapper, 2, cut)
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


@pytest.mark.parametrize("kind", sorted(_IGNORED))
@pytest.mark.parametrize("wrapper", ["plain", "docker"])
@pytest.mark.parametrize("cut", [False, True], ids=["whole", "cut"])
def test_an_ignored_exception_alone_is_nothing_distributed(tmp_path, kind, wrapper, cut):
    d = _diagnose(tmp_path, {"train.log": _with_ignored(kind, wrapper, 0, cut)})
    assert d.verdict == ClassId.NO_EVIDENCE, d.summary()


@pytest.mark.parametrize("kind", sorted(_IGNORED))
@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
def test_a_crash_after_an_ignored_exception_is_still_a_failure(tmp_path, kind, wrapper):
    crash = [
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
        "    loss.backward()",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    lines = healthy_lines(2, 3) + _with_ignored(kind, wrapper, 1, False) + [WRAPPERS[wrapper](1, t) for t in crash]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    alone = _with_ignored(kind, wrapper, 0, False) + [WRAPPERS[wrapper](0, t) for t in crash]
    d = _diagnose(tmp_path, {"train.log": alone})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


@pytest.mark.parametrize("kind", sorted(_IGNORED))
@pytest.mark.parametrize("k", range(0, len(PHRASES), 9))
@pytest.mark.parametrize("ours,theirs", [("torch", "torch"), ("mpirun", "mpirun"), ("plain", "torch")])
def test_a_failure_line_interleaved_in_an_ignored_traceback_still_counts(tmp_path, kind, k, ours, theirs):
    # another rank's line, tagged as its launcher tags it (untagged lines of two processes run together
    # cannot be told apart by anyone: an exception line right after the header is the traceback's own)
    block = _with_ignored(kind, ours, 0, False)
    for pos in range(1, len(block) + 1):
        lines = block[:pos] + [WRAPPERS[theirs](3, PHRASES[k][1])] + block[pos:]
        d = _diagnose(tmp_path, {"job.log": lines})
        assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), (pos, PHRASES[k][1], d.summary())


# --- the same failure from several processes that name no rank ------------------------------------------

_DEVICE_WARN = (
    "{host}:{pid}:{tid} [{dev}] enqueue.cc:1123 NCCL WARN Cuda failure 'an illegal memory access was encountered'"
)


@pytest.mark.parametrize("pids", [[4100, 4101], [4100, 4105, 4107]], ids=["two", "three"])
@pytest.mark.parametrize("hosts", [["node1"], ["node1", "node2"]], ids=["one-host", "two-hosts"])
@pytest.mark.parametrize("wrapper", ["plain", "docker", "ray"])
def test_the_same_failure_from_several_unranked_processes_is_several_processes(tmp_path, pids, hosts, wrapper):
    lines = [
        WRAPPERS[wrapper](0, _DEVICE_WARN.format(host=hosts[k % len(hosts)], pid=p, tid=p + 7, dev=k))
        for k, p in enumerate(pids)
    ]
    d = _diagnose(tmp_path, {"job.log": lines})
    inc = dx.load(str(tmp_path / "job.log"), progress=False)
    assert sorted(int(p) for p in inc.errors["pid"].dropna()) == sorted(pids)
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert d.first.rule != "own-process-error", d.summary()


# --- a parallel layout that does not fit the job ---------------------------------------------------------

_LAYOUT = [
    "An error occurred during training: World size {n} must be divisible by the product of all parallel degrees "
    "and data parallel shards.",
    "world_size ({n}) is not divisible by tensor parallel size 3",
    "Invalid configuration: world size {n} should be evenly divisible by pipeline parallel size 3",
    "number of GPUs {n} is not divisible by the product of tensor parallel degree 2 and context parallel degree 3",
]
_APPLOG = "2025-05-22 03:33:36 - [ERROR] - {m}"


@pytest.mark.parametrize("k", range(len(_LAYOUT)))
@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm", "ray"])
@pytest.mark.parametrize("ranks", [[0], [0, 1]], ids=["one", "two"])
def test_a_parallel_layout_check_is_the_process_own_error(tmp_path, k, wrapper, ranks):
    lines = [WRAPPERS[wrapper](r, _APPLOG.format(m=_LAYOUT[k].format(n=len(ranks) + 1))) for r in ranks]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: reduce_scatter input size 10 is not divisible by world size 4",
        "ValueError: tensor numel 1001 must be divisible by the world size 8 for all_gather",
    ],
)
def test_a_collective_input_not_divisible_is_still_the_size_family(text):
    assert family_of(text) == SignalFamily.SIZE

"""Decisions about kinds of evidence read from lines no specific rule explains (issue #16, batch
blind-2026-12-e), each tested on generated variants: every real wording found, behind the wrappers
real logs put around lines (none, ``[rankN]:``, torchrun, mpirun, slurm, pdsh, Ray, kubectl, docker),
with logger headers, on one rank or several, cut.

Decisions of ``init-wait`` (a rank waiting for the others at process-group init, ``unjoined_waits``):

- a rank still waiting in c10d's store-based barrier when its file ends (``worker_count=``,
  ``num_workers_joined=``, ``processgroup`` without its space, the debug ``for S seconds`` form, any
  logger header and wrapper, one rank or several, the last line cut) hung at init: the ranks it
  waits for never joined. ``timeout-undetermined`` at low confidence (a copy cut while ranks were
  still coming up looks the same), no culprit (the store counts who joined, it names nobody), never
  ``no-failure`` and never ``no-evidence``
  (test_a_wait_for_ranks_left_open_at_init_is_a_hang_never_an_all_clear).
- a wait that something later in the same file ends (``Completed store-based barrier``, a
  communicator up, a collective read, the work finished) is no failure
  (test_a_wait_that_ended_is_no_failure).
- more ranks counted than the world size (a reused store key, a wrong world size) is said so, not
  read as "k of n joined" (test_more_ranks_counted_than_the_world_is_said_so).

Decisions of ``no-failure`` on lines no reader parses (``activity``, ``denpex_nb.signals.ACTIVITY``):

- a benign line that only a running distributed job prints (a barrier's guessed device, DDP's
  reducer mid-training, Lightning's distributed epoch-end logging), alone or repeated, behind any
  wrapper (Ray, a CI gutter, pdsh, kubectl), hard-wrapped at 80 columns, is positive evidence of a
  distributed run: with no failure signal anywhere, ``no-failure`` at low confidence, not
  ``no-evidence`` (test_benign_lines_only_a_distributed_run_prints_are_an_all_clear).
- the same lines beside one failure line are never an all-clear
  (test_benign_distributed_lines_beside_a_failure_are_no_all_clear).
- warnings any process prints, distributed or not (accelerate's kernel-version warning, libibverbs'
  missing driver, a deprecation), show nothing distributed ran: alone they stay ``no-evidence``
  (test_warnings_any_process_prints_are_no_distributed_evidence).

Decisions of the ``stop`` family (the job stopped from outside, ``denpex_nb.signals.STOPPED``):

- a user's interrupt or a scheduler's / operator's signal received by the job (torchelastic's
  ``Received N death signal`` in every wording and level, its ``SignalException ... got signal``,
  a forwarded SIGINT / SIGHUP, the workers' ``KeyboardInterrupt``, ``^C``, srun's interrupt), with
  the workers it then stops, is not a crash: ``timeout-undetermined`` (stopped; if because it hung,
  why is not in it), no culprit, never ``no-failure``
  (test_a_job_stopped_from_outside_is_no_crash_and_no_all_clear).
- a failure printed before the stop is what the verdict reads (the stop is its consequence)
  (test_a_failure_before_the_stop_decides).

Decisions of rule ``ddp-reducer`` (framework wordings, whose copy names whom):

- a framework's wording of DDP's unused-parameter error (Lightning's "parameters that were not used
  in producing the loss"), DDP's own (whole or its head cut off) and the reducer's "marked ready
  twice" bookkeeping errors are the ``unused-parameters`` kind, never a crash of the rank that
  printed them (test_framework_wordings_of_ddp_reducer_errors_are_that_kind).
- the reducer runs the same code on every rank, so each rank that reached the iteration raises it:
  one rank's copy names that rank only when a strict majority of the group is seen without it,
  else no culprit (test_a_reducer_error_names_its_reporter_only_against_a_quiet_majority).

Decisions of rule ``checkpoint-ranks`` (torch.distributed.checkpoint's CheckpointException):

- the ranks it lists failed on their own (DCP re-raises every rank's own exception on each rank):
  a ``rank-crash`` naming the listed ranks, never the rank that printed it, while they are fewer
  than the group; each ``(RANK R)`` traceback inside it is rank R's
  (test_a_checkpoint_exception_is_its_listed_ranks_own_error).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS, healthy_lines

#: c10d's store-based barrier wait, in each wording torch has printed it (1.8-1.13, 1.10's warning
#: without the space, 2.x, 2.x's debug form)
_WAITS = [
    "Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, worker_count={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize processgroup for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, worker_count={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, num_workers_joined={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize process group for 30.01 secondsrank: {r}, key: "
    "store_based_barrier_key:1 (world_size={w}, num_workers_joined={j}, timeout=0:30:00 error=Socket Timeout)",
]
#: the logger headers the line comes behind (plain logging, hydra, fairseq/metaseq, none)
_HEADERS = [
    "INFO:torch.distributed.distributed_c10d:",
    "WARNING:torch.distributed.distributed_c10d:",
    "[2025-03-11 05:21:04,421][torch.distributed.distributed_c10d][INFO] - ",
    "2022-05-10 05:38:33 | INFO | torch.distributed.distributed_c10d | ",
    "",
]


def _diagnose(tmp_path, lines, name="job.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.diagnose(dx.load(str(p)), strict=True)


def _waits(wording, header, wrapper, ranks, reports=3, world=8, joined=1):
    return [
        WRAPPERS[wrapper](r, header + _WAITS[wording].format(r=r, w=world, j=joined))
        for _ in range(reports)
        for r in ranks
    ]


#: (ranks that wait, is the last line cut)
_SUBSETS = [((0,), False), ((0, 2), False), ((3,), True), ((1, 5, 6), True)]
#: every wording behind every wrapper; the headers and the subsets taken in turn (a full product is
#: hundreds of diagnoses for the same decision)
_OPEN = [
    (wording, _HEADERS[k % len(_HEADERS)], wrapper, *_SUBSETS[k % len(_SUBSETS)])
    for k, (wording, wrapper) in enumerate((w, x) for w in range(len(_WAITS)) for x in sorted(WRAPPERS))
]


@pytest.mark.parametrize("wording, header, wrapper, ranks, cut", _OPEN)
def test_a_wait_for_ranks_left_open_at_init_is_a_hang_never_an_all_clear(
    tmp_path, wording, header, wrapper, ranks, cut
):
    lines = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in (1, 4, 6)]
    lines += _waits(wording, header, wrapper, ranks)
    if cut:  # the paste ends mid-line, after the words that say what it is
        lines[-1] = lines[-1][: lines[-1].index("barrier") + len("barrier") + 5]
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.confidence, d.culprit_ranks) == (ClassId.TIMEOUT_UNDETERMINED, "low", []), d.summary()
    assert d.first.rule == "init-wait", d.summary()
    # the same waits with nothing else read: still a hang, not "nothing distributed could be read"
    d = _diagnose(tmp_path, lines[3:], "alone.log")
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "ray"])
@pytest.mark.parametrize(
    "end",
    [
        "Rank {r}: Completed store-based barrier for key:store_based_barrier_key:1 with 4 nodes.",
        "INFO:torch.distributed.distributed_c10d:Rank {r}: Completed store-based barrier for key:"
        "store_based_barrier_key:1 with 4 nodes.",
        None,  # the healthy run's NCCL communicators come up after it
        "Training finished, saving final model",
    ],
)
def test_a_wait_that_ended_is_no_failure(tmp_path, wrapper, end):
    waits = _waits(2, _HEADERS[0], wrapper, (0, 1), reports=2, world=4, joined=2)
    if end is None:
        lines = waits + healthy_lines(steps=3)
    else:
        lines = healthy_lines(steps=3) + waits + [WRAPPERS[wrapper](r, end.format(r=r)) for r in (0, 1)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


@pytest.mark.parametrize("joined, said", [(3, "3 of 8 ranks had joined"), (9, "9 joined a group of 8")])
def test_more_ranks_counted_than_the_world_is_said_so(tmp_path, joined, said):
    d = _diagnose(tmp_path, _waits(0, _HEADERS[0], "plain", (0,), world=8, joined=joined))
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED and said in d.first.summary, d.summary()


#: DDP reducer errors in the words of DDP and of frameworks around it (with a key that must survive)
_REDUCER = [
    "RuntimeError: It looks like your LightningModule has parameters that were not used in producing the loss "
    "returned by training_step. If this is intentional, you must enable the detection of unused parameters in DDP, "
    "either by setting the string value `strategy='ddp_find_unused_parameters_true'`",
    "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
    "indicates that your module has parameters that were not used in producing loss.",
    "module has parameters that were not used in producing loss. You can enable unused parameter detection by passing",
    "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: "
    "1) Use of a module parameter outside the `forward` function.",
    "RuntimeError: Expected to mark a variable ready only once. Parameter at index 187 with name "
    "base_model.model.layers.27.mlp.up_proj.lora_B.default.weight has been marked as ready twice.",
]


@pytest.mark.parametrize("text", _REDUCER, ids=range(len(_REDUCER)))
@pytest.mark.parametrize("wrapper, ranks", [("plain", (0,)), ("torch", (3,)), ("mpirun", (0, 1)), ("ray", (2,))])
def test_framework_wordings_of_ddp_reducer_errors_are_that_kind(tmp_path, text, wrapper, ranks):
    lines = [WRAPPERS[wrapper](r, text) for r in ranks]
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.culprit_ranks) == (ClassId.UNUSED_PARAMETERS, []), d.summary()


@pytest.mark.parametrize("text", _REDUCER[::2], ids=range(len(_REDUCER[::2])))
def test_a_reducer_error_names_its_reporter_only_against_a_quiet_majority(tmp_path, text):
    lines = healthy_lines(n_ranks=4, steps=3) + [f"[rank1]:{text}"]
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.culprit_ranks) == (ClassId.UNUSED_PARAMETERS, [1]), d.summary()
    # two of four ranks say it: no majority seen quiet
    d = _diagnose(tmp_path, lines + [f"[rank2]:{text}"], "two.log")
    assert (d.verdict, d.culprit_ranks) == (ClassId.UNUSED_PARAMETERS, []), d.summary()


def _dcp(listed, printer, inner):
    keys = ", ".join(map(str, listed))
    out = [f"torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([{keys}])"]
    for r in listed:
        out.append(f"Traceback (most recent call last): (RANK {r})")
        if inner:
            out += [
                '  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/checkpoint/utils.py", line 165, '
                "in reduce_scatter",
                "    local_data = map_fun()",
                "RuntimeError: Missing key in checkpoint state_dict: model.2.weight.",
            ]
    return [f"[rank{printer}]:{t}" if printer is not None else t for t in out]


@pytest.mark.parametrize("listed, printer", [((0,), 1), ((0, 2), 3), ((2,), None), ((0, 1, 2, 3), 0)])
@pytest.mark.parametrize("inner", [False, True])
def test_a_checkpoint_exception_is_its_listed_ranks_own_error(tmp_path, listed, printer, inner):
    lines = healthy_lines(n_ranks=4, steps=2) + _dcp(listed, printer, inner)
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    want = sorted(listed) if len(listed) < 4 else []
    assert d.culprit_ranks == want, d.summary()


#: the launcher told it was stopped, in torchelastic's wordings and log formats
_DEATH = [
    "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down workers",
    "W0519 07:08:17.209025 139677327284032 torch/distributed/elastic/agent/server/api.py:741] Received "
    "Signals.SIGHUP death signal, shutting down workers",
    "W1130 12:13:49.388000 124326 torch/distributed/elastic/agent/server/api.py:723] Received 15 death signal, "
    "shutting down workers",
    "[2024-02-22 19:20:30,101] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGINT death "
    "signal, shutting down workers",
    None,  # no agent line: only what the stop left (the terminal's ^C, the agent's own SignalException)
]
_AGENT_TB = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/agent/server/api.py", line 877, in '
    "_invoke_run",
    "    time.sleep(monitor_interval)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/api.py", line 62, in '
    "_terminate_process_handler",
    '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1313 got signal: 2",
]
_WORKER_TB = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 120, in main',
    "    loss.backward()",
    "KeyboardInterrupt",
]


_STOP_WORKERS = [("plain", (0,)), ("torchrun", (0, 1)), ("pdsh", (2,)), ("torch", (1, 3))]
#: every wording of the stop with every wrapper of the workers it stops, the forwarded signal in turn
_STOP_CASES = [
    (death, *_STOP_WORKERS[j], ("SIGINT", "SIGTERM")[(i + j) % 2])
    for i, death in enumerate(_DEATH)
    for j in range(len(_STOP_WORKERS))
]


@pytest.mark.parametrize("death, wrapper, ranks, forwarded", _STOP_CASES)
def test_a_job_stopped_from_outside_is_no_crash_and_no_all_clear(tmp_path, death, wrapper, ranks, forwarded):
    lines = healthy_lines(n_ranks=4, steps=3)
    lines.append("[2024-02-22 19:20:22,163][torch.nn.parallel.distributed][INFO] - Reducer buckets have been rebuilt")
    if death is not None:
        lines.append(death)
    pids = [4797 + r for r in ranks]
    lines += [
        ("^C" if death is None and k == 0 else "")
        + f"WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {p} closing signal {forwarded}"
        for k, p in enumerate(pids)
    ]
    for r in ranks:
        lines += [WRAPPERS[wrapper](r, t) for t in _WORKER_TB]
    if death is None:
        lines += _AGENT_TB
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.culprit_ranks) == (ClassId.TIMEOUT_UNDETERMINED, []), d.summary()
    assert "stopped from outside" in d.first.summary, d.summary()


@pytest.mark.parametrize("death", _DEATH[:2], ids=range(2))
def test_a_failure_before_the_stop_decides(tmp_path, death):
    lines = healthy_lines(n_ranks=4, steps=3)
    lines += [
        "[rank1]:Traceback (most recent call last):",
        '[rank1]:  File "/work/train.py", line 120, in main',
        "[rank1]:RuntimeError: CUDA error: an illegal memory access was encountered",
        death,
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4797 closing signal SIGINT",
    ]
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.culprit_ranks) == (ClassId.RANK_CRASH, [1]), d.summary()


#: benign lines only a running distributed job prints (as real logs print them)
_ACTIVE = [
    "/opt/miniforge/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py:4876: UserWarning: barrier(): "
    "using the device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
    "/usr/lib/python3/site-packages/torch/distributed/c10d_logger.py:83: UserWarning: barrier(): using the device "
    "under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
    "[W socket.cpp:663] [c10d] using GPU 3 to perform barrier as devices used by this process are currently unknown. "
    "This can potentially cause a hang if this rank to GPU mapping is incorrect.",
    r"C:\Users\u\anaconda3\envs\e\lib\site-packages\torch\autograd\__init__.py:197: UserWarning: Grad strides do "
    "not match bucket view strides. This may indicate grad was not created according to the gradient layout "
    "contract, or that the param's strides changed since DDP was constructed.  This is not an error, but may impair "
    "performance.",
    "[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any "
    "unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every "
    "iteration, which can adversely affect performance.",
    "[2024-02-22 19:20:22,163][torch.nn.parallel.distributed][INFO] - Reducer buckets have been rebuilt in this "
    "iteration.",
    r"C:\envs\rf\lib\site-packages\pytorch_lightning\trainer\connectors\logger_connector\result.py:433: It is "
    "recommended to use `self.log('train/loss', ..., sync_dist=True)` when logging on epoch level in distributed "
    "setting to accumulate the metric across devices.",
]
_GUTTERS = {
    "plain": lambda t: t,
    "ray": lambda t: f"(_WrappedExecutable pid=50461) {t}",
    "buildkite": lambda t: f"  | [2026-07-16T02:36:20Z] (_WrappedExecutable pid=50461) {t}",
    "pdsh": lambda t: f"node3: {t}",
    "kubectl": lambda t: f"2024-05-01T10:00:01.123456789Z [rank1]:{t}",
}


def _wrap80(lines):
    """A console that hard-wraps every line at 80 columns (the tails carry no prefix), after the output
    a run prints first (the loader decides a file's wrap width from more than a handful of lines)."""
    pre = [
        f"[{k}] Loading shard {k} of the dataset from /data/corpus/part-{k:05d}.arrow with {1000 + k * 37} records, "
        f"cache hit ratio 0.{k}3"
        for k in range(12)
    ]
    return [t[i : i + 80] for t in pre + lines for i in range(0, max(len(t), 1), 80)]


#: every line behind a wrapper, whole and hard-wrapped (the wrappers taken in turn)
_ACTIVE_CASES = [
    (text, sorted(_GUTTERS)[(k + w) % len(_GUTTERS)], bool(w)) for k, text in enumerate(_ACTIVE) for w in (0, 1)
]


@pytest.mark.parametrize("text, gutter, wrapped", _ACTIVE_CASES)
def test_benign_lines_only_a_distributed_run_prints_are_an_all_clear(tmp_path, text, gutter, wrapped):
    lines = [_GUTTERS[gutter](text), "  warnings.warn(  # warn only once", _GUTTERS[gutter](text)]
    if wrapped:
        lines = _wrap80(lines)
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.all_clear_confidence) == (ClassId.NO_FAILURE, "low"), d.summary()


@pytest.mark.parametrize("text", _ACTIVE[::2], ids=range(len(_ACTIVE[::2])))
@pytest.mark.parametrize(
    "failure",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[rank1]:[E1201 10:00:00.000 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    ],
)
def test_benign_distributed_lines_beside_a_failure_are_no_all_clear(tmp_path, text, failure):
    d = _diagnose(tmp_path, [text, text, failure, text])
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()


@pytest.mark.parametrize(
    "text",
    [
        "Detected kernel version 5.4.0, which is below the recommended minimum of 5.5.0; this can cause the process "
        "to hang. It is recommended to upgrade the kernel to the minimum version or higher.",
        "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
        "/usr/lib/python3/site-packages/torch/_utils.py:776: UserWarning: TypedStorage is deprecated.",
    ],
)
def test_warnings_any_process_prints_are_no_distributed_evidence(tmp_path, text):
    d = _diagnose(tmp_path, [f"stderr: {text}", "stdout: Model dtype: torch.float32", f"stderr: {text}"])
    assert d.verdict == ClassId.NO_EVIDENCE, d.summary()

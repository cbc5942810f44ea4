"""Decisions on kinds of real-log evidence that the wild corpus's misses showed (issue #16, second
round), each tested on generated variants (launcher and collector wrappers, subsets of ranks, cuts),
never on one log.

- the per-step reports of training engines that only run distributed (DeepSpeed's dynamic loss
  scaler skipping a step with its rank, its engine's ``step=N, skipped=N, lr=`` line, ZeRO-3's
  partitioned model init, Megatron's iteration line) are positive evidence of a distributed run: with
  nothing failed anywhere, ``no-failure`` at low confidence. Without it the user was told "nothing
  distributed could be read" about a DeepSpeed job warming up its loss scale
  (test_engine_step_reports_are_a_running_distributed_job); one failure line beside them is never an
  all-clear (test_a_failure_beside_engine_step_reports_is_never_an_all_clear).
- Horovod's own launcher tags each line ``[rank]<stdout>:`` (a paste may lose the colon): the rank is
  read from it and the line behind it by the readers. Without it NCCL's INFO lines behind the tag
  were not read at all ("nothing distributed") and a traceback's rank was lost
  (test_horovod_launcher_tags_give_the_rank_and_the_line_behind_them).
- the first nccl-tests printed no ``redop``/``root`` columns and a deviation (``0e+00``) for
  ``#wrong``: its result rows are completed collectives, ``no-failure``; not "nothing distributed"
  (test_first_nccl_tests_rows_are_completed_collectives).
- a transport's work completion that failed (IB's ``Got completion from peer ... with status=12 ...
  vendor err 129``), in prose, behind a launcher or cut after the status: ``nccl-error``. Without it
  the user was told "nothing distributed could be read" about a network failure
  (test_a_failed_transport_completion_is_a_network_error); a completion with status 0 is no failure.
- several ranks whose connections to one rank were reset or closed, their messages naming that rank
  (torch.distributed.rpc's agents: ``RPC agent for 3 encountered error when sending outgoing request
  #0 to 0: ... Connection reset by peer``): that rank went away first, a ``rank-crash`` naming it.
  Without it the user was told "cause undetermined" with no suspect
  (test_connections_reset_by_a_rank_named_in_the_messages_name_it); messages naming different peers
  name nobody (test_resets_naming_different_peers_name_nobody).
- the engine's step reports are no all-clear beside its own fatal exception (the loss scale at its
  minimum: the run exits): never ``no-failure``
  (test_a_loss_scale_at_its_minimum_is_not_an_all_clear); a table of numbers that is not nccl-tests'
  is not read as collectives (test_a_table_of_numbers_that_is_not_nccl_tests_is_not_read_as_one);
  a transport completion with status 0 is no failure signal
  (test_a_completion_that_succeeded_is_no_failure).
- a parsed size failure (DDP's parameter-count check across ranks) keeps its family when quoted in
  prose or behind a wrapper: ``shape-mismatch`` or ``rank-desync``, its culprit only the rank named
  (test_a_size_failure_quoted_in_prose_is_still_a_size_failure).
- NCCL's own error wrapping a CUDA failure inside a collective (a barrier's DistBackendError with
  ``unhandled cuda error``) is ``nccl-error``, never "no other rank failed"
  (test_an_nccl_error_wrapping_a_cuda_failure_is_nccls_error).
- PyTorch's local size errors (elementwise broadcasting, DataParallel's gather), even titled "DDP",
  are the process's own crash, not a collective's ``shape-mismatch``
  (test_a_local_size_error_is_the_process_own_crash); an exception of the PyTorch stack named by its
  module path (Lightning, DeepSpeed) is evidence of a failure, a ``rank-crash``
  (test_an_exception_of_the_pytorch_stack_is_evidence_of_a_failure).
- c10d's watchdog catching a collective's failure ("Exception (either an error or timeout) detected
  by watchdog at work: N") is a failure even where its reader misses the line (a paste wrap): never
  an all-clear (test_the_watchdogs_catch_line_is_a_failure_even_when_a_reader_misses_it).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.vocab import ClassId
from tests.signal_variants import PHRASES, WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose


def _files(lines_of, wrapper: str, ranks: list[int], per_rank: bool) -> dict[str, list[str]]:
    w = WRAPPERS[wrapper]
    per = {r: [w(r, t) for t in lines_of(r)] for r in ranks}
    if per_rank:
        return {f"rank{r}.log": lines for r, lines in per.items()}
    return {"job.log": [ln for r in ranks for ln in per[r]]}


# --- engine step reports ----------------------------------------------------------------------------

_DS = "[2024-07-17 19:44:0{s},829] [INFO] [loss_scaler.py:183:update_scale] "
#: how engines that only run distributed report their steps (one function of (rank, step) per engine)
_STEPS = {
    "deepspeed-overflow": lambda r, i: (
        _DS.format(s=i % 10)
        + f"[deepspeed] OVERFLOW! Rank {r} Skipping step. Attempted loss scale: {65536 >> i}, reducing to {32768 >> i}"
    ),
    "deepspeed-hysteresis": lambda r, i: (
        _DS.format(s=i % 10) + f"[deepspeed] OVERFLOW! Rank {r} Skipping step. Attempted loss scale: 65536, but "
        "hysteresis is 2. Reducing hysteresis to 1"
    ),
    "deepspeed-old-fp16": lambda r, i: (
        f"[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: {4096 >> i}, reducing to "
        f"{2048 >> i}"
    ),
    "deepspeed-engine": lambda r, i: (
        f"[2023-04-28 06:51:3{i % 10},903] [INFO] [logging.py:96:log_dist] [Rank {r}] step={10 * (i + 1)}, "
        f"skipped={i}, lr=[9.65e-06], mom=[(0.9, 0.95)]"
    ),
    "zero3-init": lambda r, i: (
        "[2025-05-02 12:38:31,610] [INFO] [partition_parameters.py:345:__exit__] finished initializing model - "
        f"num_params = {291 + i}, num_elems = 7.24B"
    ),
    "megatron": lambda r, i: (
        f" iteration {i + 1:8d}/  500000 | consumed samples: {(i + 1) * 512:12d} | elapsed time per iteration (ms): "
        f"812.{i} | learning rate: 1.5E-04 | global batch size:   512 | lm loss: 7.1{i}E+00 | loss scale: 4096.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |"
    ),
}
_VIEWS = [
    ("plain", [0], False),
    ("pdsh", [0, 1], False),
    ("mpirun", [0, 2, 3], True),
    ("slurm", [0, 1, 2, 3], False),
    ("kubectl", [1], True),
    ("docker", [0], False),
]


def _engine(kind: str, n: int = 4):
    return lambda r: [_STEPS[kind](r, i) for i in range(n)]


@pytest.mark.parametrize("kind", sorted(_STEPS))
@pytest.mark.parametrize("wrapper,ranks,per_rank", _VIEWS, ids=[f"{w}-{len(r)}" for w, r, _ in _VIEWS])
def test_engine_step_reports_are_a_running_distributed_job(tmp_path, kind, wrapper, ranks, per_rank):
    d = _diagnose(tmp_path, _files(_engine(kind), wrapper, ranks, per_rank))
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    assert d.all_clear_confidence == "low", d.summary()
    # cut after the first report: still a step the engine reported
    d = _diagnose(tmp_path, _files(_engine(kind, 1), wrapper, ranks[:1], per_rank))
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


@pytest.mark.parametrize("kind", sorted(_STEPS))
@pytest.mark.parametrize("k", range(0, len(PHRASES), 7))
def test_a_failure_beside_engine_step_reports_is_never_an_all_clear(tmp_path, kind, k):
    lines = _engine(kind)(0)
    lines.insert(2, PHRASES[k][1])
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), (PHRASES[k][1], d.summary())


def test_a_loss_scale_at_its_minimum_is_not_an_all_clear(tmp_path):
    lines = _engine("deepspeed-overflow")(0) + [
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/fp16/loss_scaler.py", line 175, in update_scale',
        '    raise Exception("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")',
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    ]
    assert _diagnose(tmp_path, {"job.log": lines}).verdict != ClassId.NO_FAILURE


# --- Horovod's launcher tag ---------------------------------------------------------------------------

_NCCL_INFO = [
    "[{r}] NCCL INFO Bootstrap : Using eth0:10.0.0.{h}<0>",
    "[{r}] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "[{r}] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.{h}<0>",
    "[{r}] NCCL INFO Using network Socket",
    "[{r}] NCCL INFO Channel 01 : {r}[7000] -> {p}[a000] via P2P/IPC/read",
]


@pytest.mark.parametrize("colon", [":", "", " "], ids=["tag", "colon-lost", "colon-lost-space"])
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("ranks", [[0], [0, 1], [1, 3]], ids=["rank0", "two", "subset"])
def test_horovod_launcher_tags_give_the_rank_and_the_line_behind_them(tmp_path, colon, stream, ranks):
    def tag(r, t):
        return f"[{r}]<{stream}>{colon}{t}"

    healthy = [tag(r, t.format(r=r, h=r + 1, p=(r + 1) % 4)) for r in ranks for t in _NCCL_INFO]
    d = _diagnose(tmp_path, {"job.log": healthy})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    bad = ranks[-1]
    crash = [
        tag(bad, "Traceback (most recent call last):"),
        tag(bad, '  File "train.py", line 12, in <module>'),
        tag(bad, "    loss.backward()"),
        tag(bad, "RuntimeError: CUDA error: an illegal memory access was encountered"),
    ]
    d = _diagnose(tmp_path, {"job.log": healthy + crash})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert set(d.culprit_ranks or []) <= {bad}, d.summary()
    inc = dx.load(str(tmp_path / "job.log"), progress=False)
    assert set(int(r) for r in inc.errors["rank"].dropna()) == {bad}


# --- the first nccl-tests ---------------------------------------------------------------------------

_OLD_ROWS = [
    (65536, 2048, "float", "52.01", "1.26", "1.10", "0e+00"),
    (131072, 4096, "float", "70.74", "1.85", "1.62", "0e+00"),
    (1048576, 262144, "float", "162.1", "6.47", "5.66", "4e-07"),
    (8388608, 2097152, "double", "1035.7", "8.10", "7.09", "0e+00"),
    (268435456, 67108864, "int32", "32071", "8.37", "7.32", "0e+00"),
]


def _old_row(size, count, typ, t, alg, bus, err):
    return f"{size:12d}  {count:12d}  {typ:>8s}  {t:>7s}  {alg:>6s}  {bus:>6s}  {err:>5s}  {t:>7s}  {alg:>6s}  {bus:>6s}  {err:>5s}"


@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "pdsh", "docker"])
@pytest.mark.parametrize("cut", [None, 2], ids=["whole", "two-rows"])
def test_first_nccl_tests_rows_are_completed_collectives(tmp_path, wrapper, cut):
    rows = [WRAPPERS[wrapper](0, _old_row(*r)) for r in _OLD_ROWS[:cut]]
    d = _diagnose(tmp_path, {"bench.log": rows})
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    # a failure after them is still a failure
    rows.append(
        WRAPPERS[wrapper](
            0, "node1:2231:2290 [1] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory"
        )
    )
    assert _diagnose(tmp_path, {"bench.log": rows}).verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE)


def test_a_table_of_numbers_that_is_not_nccl_tests_is_not_read_as_one(tmp_path):
    rows = [f"{i:8d}  {i * 3:8d}  loss  0.{i}1  0.22  0.10  ok" for i in range(1, 6)]
    assert _diagnose(tmp_path, {"train.log": rows}).verdict == ClassId.NO_EVIDENCE


# --- a transport's failed work completion --------------------------------------------------------------

_COMPLETIONS = [
    "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)",
    "NET/IB : Got completion from peer 10.0.0.3<49024> with status=5 opcode=0 len=0 vendor err 249 (Recv)",
    "transport/net_ib.cc:1295 Got completion from peer 10.1.1.2<2210> with status=12 opcode=1",
    "We ran the official NCCL tests on two machines and got: Got completion from peer 10.0.0.9<4001> with status=12 "
    "opcode=32698 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.9",
]


@pytest.mark.parametrize("text", _COMPLETIONS, ids=["ibp", "ib-recv", "cut-after-status", "prose"])
@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "pdsh", "kubectl"])
def test_a_failed_transport_completion_is_a_network_error(tmp_path, text, wrapper):
    d = _diagnose(tmp_path, {"log.txt": [WRAPPERS[wrapper](1, text)]})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert not d.culprit_ranks, d.summary()


@pytest.mark.parametrize(
    "text",
    [
        "NET/IB : Got completion from peer 10.0.0.3<49024> with status=0 opcode=0 len=128",
        "request completed with status=200 in 12 ms",
    ],
)
def test_a_completion_that_succeeded_is_no_failure(text):
    from denpex_nb.signals import classify_text

    sig = classify_text(text)
    assert sig is None or not sig.failure, sig


# --- a peer named by its rank ---------------------------------------------------------------------------

_RPC = "[W tensorpipe_agent.cpp:916] RPC agent for {me} encountered error when {what} {peer}: async error on socket: Connection reset by peer (this error originated at tensorpipe/transport/shm/connection_impl.cc:187)"
_WHAT = ["sending outgoing request #0 to", "reading incoming response from"]


@pytest.mark.parametrize("peer", [0, 5])
@pytest.mark.parametrize("reporters", [[3], [3, 10, 36], [1, 2, 7, 16]], ids=["one", "three", "four"])
@pytest.mark.parametrize("wrapper", ["plain", "docker", "pdsh"])
def test_connections_reset_by_a_rank_named_in_the_messages_name_it(tmp_path, peer, reporters, wrapper):
    lines = [WRAPPERS[wrapper](0, _RPC.format(me=me, what=_WHAT[k % 2], peer=peer)) for k, me in enumerate(reporters)]
    lines += ["Traceback (most recent call last):", '  File "main.py", line 52, in <module>', "    main()"]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.RANK_CRASH and d.culprit_ranks == [peer], d.summary()
    assert d.findings[0].confidence == "medium", d.summary()


def test_resets_naming_different_peers_name_nobody(tmp_path):
    lines = [_RPC.format(me=3, what=_WHAT[0], peer=0), _RPC.format(me=4, what=_WHAT[1], peer=1)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()
    assert not d.culprit_ranks, d.summary()


# --- a failure a reader recognised, quoted in prose ------------------------------------------------------

_DDP_PARAMS = (
    "DDP expects same model across all ranks, but Rank 0 has {a} params, while rank {r} has inconsistent {b} params."
)
_PROSE = [
    "Why do I get an error after following the steps：{m}",
    "I followed the README and got: {m}",
    "{m} What does this mean?",
]


@pytest.mark.parametrize("prose", _PROSE, ids=["question-before", "colon", "question-after"])
@pytest.mark.parametrize("wrapper", ["plain", "pdsh", "docker"])
@pytest.mark.parametrize("r,a,b", [(1, 161, 0), (3, 2, 4)])
def test_a_size_failure_quoted_in_prose_is_still_a_size_failure(tmp_path, prose, wrapper, r, a, b):
    line = prose.format(m=_DDP_PARAMS.format(a=a, r=r, b=b))
    d = _diagnose(tmp_path, {"log.txt": [WRAPPERS[wrapper](0, line)]})
    assert d.verdict in (ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC), d.summary()
    assert set(d.culprit_ranks or []) <= {r}, d.summary()


# --- NCCL's own error is a collective's, not one process's -------------------------------------------------

_NCCL_CUDA = [
    "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, "
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3",
    "ncclUnhandledCudaError: Call to CUDA function failed.",
    "Last error:",
    "Cuda failure '{what}'",
]


@pytest.mark.parametrize("what", ["initialization error", "invalid argument", "unknown error"])
@pytest.mark.parametrize(
    "wrap",
    [lambda t: t, lambda t: f"gpu-worker-1: {t}", lambda t: f"[rank7]:{t}", lambda t: WRAPPERS["docker"](0, t)],
    ids=["plain", "host-prefix", "rank7", "docker"],
)
def test_an_nccl_error_wrapping_a_cuda_failure_is_nccls_error(tmp_path, what, wrap):
    frames = [
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 3665, in barrier',
        "    work = default_pg.barrier(opts=opts)",
    ]
    lines = [wrap(t) for t in frames] + [wrap(t.format(what=what)) for t in _NCCL_CUDA]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()
    assert "no other rank" not in d.findings[0].summary, d.summary()


# --- size errors of one process's own operations ------------------------------------------------------------

_LOCAL = [
    "DistributedDataParallel (DDP) RuntimeError: The size of tensor a (3) must match the size of tensor b (0) at "
    "non-singleton dimension 1",
    "RuntimeError: The size of tensor a (16) must match the size of tensor b (8) at non-singleton dimension 0 (rank 2)",
    "ValueError: gather got an input of invalid size: got 1x1, but expected 3x1",
    "nn.DataParallel: ValueError: gather got an input of invalid size: got [2, 10], but expected [4, 10]",
]


@pytest.mark.parametrize("text", _LOCAL, ids=["ddp-label", "rank-word", "dataparallel", "dataparallel-label"])
@pytest.mark.parametrize("wrapper", ["plain", "docker", "pdsh"])
def test_a_local_size_error_is_the_process_own_crash(tmp_path, text, wrapper):
    d = _diagnose(tmp_path, {"log.txt": [WRAPPERS[wrapper](0, text)]})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


# --- an exception of the PyTorch stack named by its module path -------------------------------------------------

_QUALIFIED = [
    "Strange error: `pytorch_lightning.utilities.exceptions.MisconfigurationException: No 'test_dataloader()' method "
    "defined to run 'Trainer.test'`.",
    "lightning.fabric.utilities.exceptions.MisconfigurationException: `Trainer(strategy='ddp')` is not compatible",
    "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer",
]


@pytest.mark.parametrize("text", _QUALIFIED, ids=["lightning-prose", "fabric", "deepspeed"])
@pytest.mark.parametrize("wrapper", ["plain", "kubectl"])
def test_an_exception_of_the_pytorch_stack_is_evidence_of_a_failure(tmp_path, text, wrapper):
    d = _diagnose(tmp_path, {"log.txt": [WRAPPERS[wrapper](0, text)]})
    assert d.verdict == ClassId.RANK_CRASH, d.summary()


# --- c10d's watchdog catching a failure, in its own phrasing ----------------------------------------------------

_CAUGHT = (
    "[Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {w}, last enqueued NCCL work: "
    "{w}, last completed NCCL work: {c}."
)
_AFTER = "nccl-tests-worker-0:64:229 [1] NCCL INFO comm 0x55ab26dea5d0 rank 1 nranks 16 cudaDev 1 busId 200000 - Destroy COMPLETE"


@pytest.mark.parametrize("wrapper", ["plain", "docker", "kubectl", "pdsh"])
@pytest.mark.parametrize("label", ["", "trainer-1  | "], ids=["bare", "compose"])
@pytest.mark.parametrize("w,c", [(9969, 31901), (12, 11), (123456, 123455)])
def test_the_watchdogs_catch_line_is_a_failure_even_when_a_reader_misses_it(tmp_path, wrapper, label, w, c):
    """Followed by an unprefixed NCCL INFO line, the catch line may be read as wrapped at its width
    (the paste rule) and its reader miss it: the words alone must still say that a collective failed."""
    caught = label + WRAPPERS[wrapper](5, _CAUGHT.format(r=5, w=w, c=c))
    for lines in ([caught, _AFTER], [_AFTER, caught], [caught]):
        d = _diagnose(tmp_path, {"log.txt": lines})
        assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), (lines, d.summary())

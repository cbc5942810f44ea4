"""Verdicts from the failure-signal layer (denpex_nb/analysis/signals.py), on generated logs.

Properties (issue #16): a healthy log with one failure line inserted, from a grammar of over 100
phrasings across the families, behind any wrapper, cut or not, never gives ``no-failure``; when no
specific rule explains it, the verdict's class follows the family of the first failure signal; a
single process's own error is a ``rank-crash`` of that process, never a distributed class at high
confidence.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import denpex_nb as dx
from denpex_nb.analysis.signals import FAMILY_CLASS
from denpex_nb.signals import family_of
from denpex_nb.vocab import ClassId, SignalFamily
from tests import wild
from tests.signal_variants import FOREIGN_NCCL, PHRASES, RANKED, WRAPPERS, healthy_lines

FAILURE_CLASSES = set(ClassId) - {ClassId.NO_FAILURE, ClassId.NO_EVIDENCE}
_PEER_CLOSED = ("closed by", "reset by")


def _diagnose(tmp_path, lines, name="job.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.diagnose(dx.load(str(p)), strict=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    phrase=st.sampled_from(PHRASES),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
    rank=st.integers(0, 3),
    where=st.integers(0, 120),
    cut=st.one_of(st.none(), st.integers(0, 30)),
)
def test_one_failure_line_in_a_healthy_log_is_never_an_all_clear(tmp_path, phrase, wrapper, rank, where, cut):
    family, text, key = phrase
    if cut is not None:
        text = text[: text.index(key) + len(key) + cut]
    lines = healthy_lines()
    lines.insert(min(where, len(lines)), WRAPPERS[wrapper](rank, text))
    d = _diagnose(tmp_path, lines, f"{wrapper}.log")
    assert d.verdict in FAILURE_CLASSES, (wrapper, text, d.summary())


@pytest.mark.parametrize(
    "family, text, key", PHRASES[::3], ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(PHRASES[::3])]
)
def test_the_verdict_follows_the_first_failure_signals_family(tmp_path, family, text, key):
    """A failure no reader explains, on rank 2 of a healthy 4-rank log: the class its family points
    to (a peer that closed the connection is a victim: someone else failed, cause undetermined)."""
    lines = healthy_lines()
    lines.insert(60, f"[rank2]:{text}")
    d = _diagnose(tmp_path, lines)
    want = {FAMILY_CLASS[family]}
    if family == SignalFamily.SIZE and "dtype" in text:
        want.add(ClassId.DTYPE_MISMATCH)
    if any(w in text for w in _PEER_CLOSED):  # the peer is the suspect, never the reporting rank
        want = {ClassId.TIMEOUT_UNDETERMINED, ClassId.RANK_CRASH, ClassId.NCCL_ERROR}
        assert 2 not in d.findings[0].culprit_ranks, d.summary()
    if family in (SignalFamily.EXIT, SignalFamily.MEMORY, SignalFamily.DEVICE, SignalFamily.LAUNCHER):
        want.add(ClassId.RANK_CRASH)
    assert d.verdict in want, (text, d.summary(), [f.rule for f in d.findings])
    if d.findings[0].rule == "failure-signals":  # a guess from a family, never sure
        assert d.findings[0].confidence != "high"


def test_the_first_signal_in_time_decides(tmp_path):
    """Two failures on two ranks: the earlier one (by its timestamp) is the verdict's family."""
    lines = healthy_lines()
    lines.append(
        "2024-05-01T10:00:09.000000Z [rank1]:RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    lines.append("2024-05-01T10:00:02.000000Z [rank3]:host-3:1:2 [3] NCCL WARN NET/IB : Got completion with error 12")
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.NCCL_ERROR, d.summary()


def test_an_oom_of_a_single_process_is_its_own_error(tmp_path):
    lines = ["epoch 1 step 10 loss 2.1", "Traceback (most recent call last):", '  File "train.py", line 9, in <module>']
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert d.findings[0].confidence != "high"
    assert "not a collective failure" in d.findings[0].summary or "own" in d.findings[0].summary


def test_a_crash_after_training_finished_is_a_teardown_crash(tmp_path):
    lines = [
        "epoch 3 step 900 loss 0.91",
        "Training finished in 3h12m, saving final model",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  NCCL error in: ProcessGroupNCCL.cpp:1234, unhandled system error, ncclSystemError",
        "Aborted (core dumped)",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_CRASH, d.summary()
    assert d.findings[0].confidence != "high"


def test_a_health_report_beside_a_timeout_is_no_all_clear(tmp_path):
    lines = healthy_lines()
    lines.append("[rank0]:host-0:1:2 [0] NCCL INFO RAS: all communicators RUNNING OK")
    lines.append("[rank1]:RuntimeError: Timed out after 1800 seconds while waiting for the collective")
    d = _diagnose(tmp_path, lines)
    assert d.verdict != ClassId.NO_FAILURE, d.summary()


def test_healthy_logs_stay_all_clear(tmp_path):
    """The generated healthy log and the benign lines of the grammar: no failure signal, no failure."""
    from tests.signal_variants import BENIGN

    lines = healthy_lines()
    for k, b in enumerate(BENIGN):
        lines.insert(5 + 7 * k, f"[rank{k % 4}]:{b}")
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.NO_FAILURE, (d.summary(), d.findings[0].evidence if d.findings else None)


_CONTROLS = [c for c in wild.cases() if "batch" not in c and c.get("role") == "negative-control"]


@pytest.mark.parametrize("case", _CONTROLS[:6], ids=[c["id"] for c in _CONTROLS[:6]])
@pytest.mark.parametrize("family", [SignalFamily.NETWORK, SignalFamily.MEMORY, SignalFamily.SIZE, SignalFamily.EXIT])
def test_a_recorded_healthy_log_with_one_failure_line_is_no_all_clear(tmp_path, case, family):
    """Real healthy logs (the corpus' negative controls) with one generated failure line appended."""
    from pathlib import Path

    text = next(t for f, t, _ in PHRASES if f == family)
    files = []
    for k, f in enumerate(case["files"]):
        src = Path(case["dir"]) / f
        dst = tmp_path / f"{k}_{src.name}"
        data = src.read_bytes()
        if k == 0:
            data = data.rstrip(b"\n") + b"\n" + text.encode() + b"\n"
        dst.write_bytes(data)
        files.append(str(dst))
    d = dx.diagnose(dx.load(files), strict=True)
    assert d.verdict in FAILURE_CLASSES, (case["id"], text, d.summary())


@pytest.mark.parametrize("what", ["No route to host", "Connection refused", "Network is unreachable"])
@pytest.mark.parametrize("recovered", [False, True])
def test_a_connection_retried_to_the_end_of_the_log_is_a_failure(tmp_path, what, recovered):
    """NCCL retries a failing connect at INFO level: a log whose last word on it is a retry failed
    (the connection never came up); one where a later line says it connected did not."""
    lines = healthy_lines(steps=3)
    lines += [
        f"[rank1]:node1:1100:1101 [1] NCCL INFO socketPollConnect: connect returned {what}, retrying ({k}/34) "
        f"after sleep for {k}00 msec"
        for k in range(20, 26)
    ]
    if recovered:
        lines.append("[rank1]:node1:1100:1101 [1] NCCL INFO NET/Socket : Connected after 26 retries.")
    d = _diagnose(tmp_path, lines)
    if recovered:
        assert d.verdict == ClassId.NO_FAILURE, d.summary()
    else:
        assert d.verdict == ClassId.NCCL_ERROR and d.findings[0].confidence == "low", d.summary()


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("prefix", ["", "[rank0]:", "node0: "])
def test_a_desync_report_in_which_every_rank_joined_names_no_culprit(tmp_path, n, prefix):
    ranks = ", ".join(map(str, range(n)))
    lines = [
        f"{prefix}[PG 0 Rank 0] Rank 0",
        f"{prefix}[Rank 0] Timeout at collective: ALLREDUCE, #12",
        f"{prefix}To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        f"{prefix}  - [{ranks}] joined but didn't finish collective #12 (count from 1)",
    ]
    lines += [f"{prefix}step {i} loss 1.0" for i in range(3)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict != ClassId.NO_FAILURE
    assert set(d.culprit_ranks) != set(range(n)), d.summary()


@pytest.mark.parametrize("prefix", ["", "node{r}: ", "[rank{r}]:"])
@pytest.mark.parametrize("cut", ["OpTy pe=BROADCAST", "OpType=BROAD", "Op"])
def test_watchdog_lines_whose_op_a_wrap_cut_are_no_op_mismatch(tmp_path, prefix, cut):
    """Every rank times out at the same SeqNum; on some lines a paste broke the OpType field: an op
    the line does not say is unknown, not another op (a timeout, cause undetermined)."""
    lines = []
    for r in range(4):
        op = "OpType=BROADCAST" if r == 1 else cut
        lines.append(
            prefix.format(r=r)
            + f"[E1201 10:00:0{r}.000 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=4, {op}, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for "
            "1800010 milliseconds before timing out."
        )
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()


@pytest.mark.parametrize("prefix", ["", "node{r}: ", "[rank{r}]:"])
def test_watchdog_lines_that_disagree_on_the_op_at_one_seq_are_an_op_mismatch(tmp_path, prefix):
    lines = []
    for r in range(4):
        op = "ALLGATHER" if r == 2 else "ALLREDUCE"
        lines.append(
            prefix.format(r=r)
            + f"[E1201 10:00:0{r}.000 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=9, OpType={op}, NumelIn=64, NumelOut=64, Timeout(ms)=600000) ran for "
            "600010 milliseconds before timing out."
        )
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.OP_MISMATCH, d.summary()


#: a traceback whose exception line a paste cut off (frames only), generated
_CUT_TB = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 183, in <module>',
    "    main(args)",
    '  File "/work/train.py", line 120, in main',
    "    batch = next(loader_iter)",
    '  File "/opt/conda/lib/python3.10/site-packages/datasets/load.py", line 1470, in load_from_disk',
    "    return Dataset.load_from_disk(path, keep_in_memory=keep_in_memory)",
]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("ranks", [(1,), (0, 2)])
def test_tracebacks_cut_before_the_exception_with_nothing_else_failing_are_a_crash(tmp_path, wrapper, header, ranks):
    """Tracebacks of a subset of ranks cut before their exception line (with or without the header),
    behind any wrapper, and nothing else failed: "cause undetermined" (the cut may have taken a
    collective's error), with a ``rank-crash`` at low confidence as an alternative. When another
    known rank then lost its connection to them, they went away: the crash is the verdict (never
    naming the rank that lost the connection); a victim line of no known rank decides nothing."""
    tb = _CUT_TB if header else _CUT_TB[1:]
    lines = healthy_lines(steps=5)
    for r in ranks:
        lines += [WRAPPERS[wrapper](r, t) for t in tb]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == "timeout-undetermined", d.summary()
    alt = [a for a in d.alternatives if a.rule == "cut-traceback"]
    assert [(a.class_id, a.confidence) for a in alt] == [("rank-crash", "low")], d.summary()
    lines.append(
        WRAPPERS[wrapper](
            3,
            "[W729 10:15:17.5 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76): Connection reset by peer",
        )
    )
    d = _diagnose(tmp_path, lines, "victim.log")
    assert d.verdict != "no-failure" and 3 not in d.culprit_ranks, d.summary()
    if wrapper in RANKED:
        assert (d.verdict, d.findings[0].rule) == ("rank-crash", "cut-traceback"), d.summary()
    else:
        assert any(a.rule == "cut-traceback" and 3 not in a.culprit_ranks for a in d.alternatives) or (
            d.findings[0].rule == "cut-traceback" and 3 not in d.culprit_ranks
        ), d.summary()


@pytest.mark.parametrize(
    "other",
    [
        "[rank3]:[E1201 10:00:00.000 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds "
        "before timing out.",
        "[rank3]:host-3:1:2 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4> with "
        "status=12 opcode=0",
        "[rank3]:RuntimeError: Expected all tensors in the collective to have the same size",
    ],
)
def test_a_cut_traceback_beside_another_failure_is_not_called_a_crash_by_it(tmp_path, other):
    """A timeout, an NCCL error or a collective size error anywhere: the cut traceback says nothing
    over it (the other evidence decides)."""
    lines = healthy_lines(steps=5) + [f"[rank1]:{t}" for t in _CUT_TB] + [other]
    d = _diagnose(tmp_path, lines)
    assert d.findings[0].rule != "cut-traceback", d.summary()
    assert not any(a.rule == "cut-traceback" for a in d.alternatives), d.summary()


def test_a_cut_traceback_that_ends_in_a_collective_call_stays_undetermined(tmp_path):
    """Frames that end in a torch.distributed collective: it raised inside the collective, no crash
    of its own can be read from it."""
    lines = healthy_lines(steps=5) + [
        f"[rank1]:{t}"
        for t in _CUT_TB[:5]
        + [
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2050, in all_reduce',
            "    work = default_pg.allreduce([tensor], opts)",
        ]
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict != "no-failure" and d.findings[0].rule != "cut-traceback", d.summary()


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize(
    "crash",
    [
        "[node3:4411:0:4412] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x48)",
        "[node3:4411] *** Process received signal ***",
        "Segmentation fault (core dumped)",
        "Aborted (core dumped)",
        "bash: line 1: 4411 Killed python train.py",
    ],
)
def test_a_process_crash_alone_is_a_crash_not_no_evidence(tmp_path, wrapper, crash):
    """A log holding only a process's crash (a signal, a kill, an abort) and its backtrace, nothing a
    reader parses: it failed, a ``rank-crash``, not "nothing distributed could be read"; its own
    text alone never earns high confidence."""
    lines = [
        WRAPPERS[wrapper](0, t)
        for t in [crash, "==== backtrace (tid: 4412) ====", " 0  /opt/nccl/lib/libnccl.so(+0x120057) [0x7ff1c18c1057]"]
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_CRASH and d.findings[0].confidence != "high", d.summary()


def test_an_alien_log_without_a_failure_stays_no_evidence(tmp_path):
    d = _diagnose(tmp_path, ["hello world", "loading config from /etc/app.yaml", "listening on port 8080"])
    assert d.verdict == ClassId.NO_EVIDENCE


def test_a_traceback_header_alone_is_no_crash_of_its_own(tmp_path):
    """A log that ends on a ``Traceback`` header (a cut view): where it raised is unknown, the cut
    traceback says nothing over "cause undetermined"."""
    lines = healthy_lines(steps=5) + ["[rank1]:Traceback (most recent call last):"]
    d = _diagnose(tmp_path, lines)
    assert d.verdict != "no-failure" and d.findings[0].rule != "cut-traceback", d.summary()


#: failure lines that name a distributed component (in words or in a source path) and say nothing of
#: the cause, as pastes and cuts leave them
_COMPONENT_ONLY = [
    "  what():  [enforce fail at /opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.",
    "[E1201 10:00:01.000 TCPStore.cpp:{n}] [c10d] store operation failed",
    "ERROR: rendezvous handler failed on this node",
    "E1201 10:00:02.000 ProcessGroupGloo.cpp:{n}] [c10d] gloo transport failed",
]


@pytest.mark.parametrize("text", _COMPONENT_ONLY)
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_component_named_without_a_cause_is_undetermined_not_a_network_error(tmp_path, text, wrapper):
    """A failure line that only names gloo, c10d, a store or a transport (a cut enforce message whose
    condition is gone, a path into gloo's tcp transport) says a collective failed, not why: cause
    undetermined, never nccl-error; with a network statement on it (closed by peer, refused) it is
    the network's."""
    wrap = WRAPPERS[wrapper]
    line = text.format(n=123, r=1)
    healthy = healthy_lines()
    d = _diagnose(tmp_path, healthy[:20] + [wrap(1, line)] + healthy[20:])
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, (line, d.summary())
    assert family_of(line) == SignalFamily.COMPONENT
    assert family_of(line + " Connection reset by peer [10.0.0.2]:29500") == SignalFamily.NETWORK


def test_a_log_of_one_component_failure_is_distributed_evidence(tmp_path):
    """A component's failure (c10d's store, gloo) speaks of more than one process: a log holding only
    that line is a failure of undetermined cause, not "nothing distributed could be read"."""
    line = "E1201 10:00:01.000 TCPStore.cpp:123] [c10d] store operation failed"
    assert _diagnose(tmp_path, [line]).verdict == ClassId.TIMEOUT_UNDETERMINED


@pytest.mark.parametrize("phrase", FOREIGN_NCCL, ids=[f"foreign-{i}" for i in range(len(FOREIGN_NCCL))])
@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "slurm", "ray", "docker"])
@pytest.mark.parametrize("launcher", [None, "srun", "mpirun"])
def test_nccls_error_inside_another_frameworks_exception_is_an_nccl_error(tmp_path, phrase, wrapper, launcher):
    """NCCL's own error words (a failed NCCL call, a result code's text), whatever framework's
    exception or logger wraps them, on a subset of the ranks, followed or not by the launcher's
    report that the tasks exited: ``nccl-error`` (the launcher's exits are its consequence), never a
    crash or a stall of a rank. One rank or two report it; the culprit stays undetermined."""
    _, text, _ = phrase
    lines = healthy_lines()[:20]
    ranks = (1,) if len(text) % 2 else (1, 3)
    for r in ranks:
        lines.append(WRAPPERS[wrapper](r, text))
    if launcher == "srun":
        lines += [f"srun: error: node{r}: task {r}: Exited with exit code 1" for r in ranks]
    elif launcher == "mpirun":
        lines.append(f"mpirun noticed that process rank {ranks[0]} with PID 4242 on node node1 exited with status 1")
    d = _diagnose(tmp_path, lines, f"{wrapper}.log")
    assert d.verdict == ClassId.NCCL_ERROR, (text, d.summary(), [f.rule for f in d.findings])
    assert d.findings[0].confidence != "high"


@pytest.mark.parametrize("prefix", ["", "[rank3]:", "[1,3]<stderr>:", "2024-05-01T10:00:03.123456789Z "])
@pytest.mark.parametrize("exc", ["c10::DistBackendError", "c10::Error", "std::runtime_error"])
def test_an_abort_on_a_watchdog_timeout_is_a_timeout_not_a_network_error(tmp_path, prefix, exc):
    """``terminate called after throwing an instance of 'X'`` names only a class (c10d's
    DistBackendError is raised for NCCL errors and for timeouts alike); its ``what()`` on the next
    line says which: a watchdog's timeout with no NCCL error stated is a collective timeout of
    undetermined cause, not a network error."""
    lines = healthy_lines()[:20] + [
        f"{prefix}terminate called after throwing an instance of '{exc}'",
        f"{prefix}  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with "
        "exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
        "NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 90 milliseconds before timing out.",
    ]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()


@pytest.mark.parametrize("word", ["installed", "preinstalled", "uninstalled"])
def test_a_failure_word_inside_a_path_is_no_signal_of_its_family(word):
    """A traceback frame whose path holds ``stall`` inside a word (``/sw/installed/``) says nothing
    stalled: its family is not ``stall``."""
    frame = f'  File "/sw/{word}/Horovod/lib/python3.9/site-packages/horovod/torch/mpi_ops.py", line 247, in allreduce'
    assert family_of(frame) != SignalFamily.STALL
    assert family_of("Stalled ranks: 3") == SignalFamily.STALL


@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "docker", "ray"])
@pytest.mark.parametrize(
    "text",
    [
        "E external/xla/xla/service/gpu/nccl_utils.cc:191] Aborting communicator: 0x5555a108ff90 due to async NCCL "
        "error: remote process exited or there was a network error",
        "RuntimeError: NCCL communicator failed: ncclRemoteError",
        "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: remote process exited or there was "
        "a network error",
    ],
)
@pytest.mark.parametrize("timeout_first", [False, True])
def test_nccls_remote_error_alone_is_an_nccl_error_at_low_confidence(tmp_path, wrapper, text, timeout_first):
    """NCCL's ncclRemoteError says "a remote process exited or the network failed"; with nothing else
    failing anywhere (but the watchdog's "failed or timed out" on the same rank, its consequence) it
    is an ``nccl-error`` (or a crash elsewhere), at low confidence, naming no one, never "cause
    undetermined" nor an all-clear."""
    before = (
        [
            "[Rank 2] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
            "subsequent GPU operations might run on corrupted/incomplete data."
        ]
        if timeout_first
        else []
    )
    lines = healthy_lines()[:20] + [WRAPPERS[wrapper](2, t) for t in before + [text]]
    d = _diagnose(tmp_path, lines, f"{wrapper}.log")
    assert d.verdict in (ClassId.NCCL_ERROR, ClassId.RANK_CRASH), d.summary()
    assert d.findings[0].confidence == "low" and not d.findings[0].culprit_ranks


@pytest.mark.parametrize("pids", [(3063025, 3063028), (100, 101)])
@pytest.mark.parametrize("wrapper", ["plain", "docker"])
def test_nccls_oom_beside_another_process_is_no_single_process_error(tmp_path, pids, wrapper):
    """NCCL's CUDA allocation failing during its connection setup on one process, while another
    process (another pid of NCCL's ``host:pid:tid`` prefix, no rank anywhere) sees its peer close the
    connection: two processes, so not one process's own error; NCCL's failure (``nccl-error``) or a
    crash, never an all-clear."""
    a, b = pids
    lines = [
        f"ng3:{a}:{a + 1} [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer ng3<51159>",
        f"ng3:{a}:{a + 1} [0] NCCL INFO misc/socket.cc:749 -> 6",
        f"ng3:{b}:{b + 1} [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        f"ng3:{b}:{b + 1} [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
        f"ng3:{b}:{b + 1} [3] NCCL INFO transport/p2p.cc:204 -> 1",
    ]
    d = _diagnose(tmp_path, [WRAPPERS[wrapper](0, t) for t in lines], f"{wrapper}.log")
    assert d.first.rule != "own-process-error", d.summary()
    assert d.verdict in (ClassId.NCCL_ERROR, ClassId.RANK_CRASH), d.summary()


def _wait(rank: int, world: int, joined: int) -> str:
    return (
        f"INFO:root:Waiting in store based barrier to initialize process group for rank: {rank}, key: "
        f"store_based_barrier_key:1 (world_size={world}, worker_count={joined}, timeout=0:30:00)"
    )


@pytest.mark.parametrize("wrapper", ["plain", "docker", "mpirun", "kubectl"])
@pytest.mark.parametrize(
    "world, absent", [(8, (4,)), (4, (0,)), (16, (3, 9, 15)), (8, (1, 2, 3)), (8, tuple(range(1, 8)))]
)
def test_ranks_that_never_joined_the_store_barrier_are_named_by_elimination(tmp_path, wrapper, world, absent):
    """Every waiting rank printed its wait, all waits say N of W joined, and exactly N ranks printed
    one: the other ranks never joined, named while they are a strict minority of W (most of the
    group missing names no one: the few that joined may be the odd ones); low confidence, a hang at
    init, never an all-clear."""
    if wrapper == "kubectl" and world > 10:
        pytest.skip("the generated kubectl time holds the rank as one digit of its seconds")
    joined = world - len(absent)
    waiting = [r for r in range(world) if r not in absent]
    lines = [WRAPPERS[wrapper](r, _wait(r, world, joined)) for r in waiting]
    d = _diagnose(tmp_path, lines, f"{wrapper}.log")
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED and d.findings[0].confidence == "low", d.summary()
    if len(absent) * 2 < world:
        assert d.culprit_ranks == list(absent), d.summary()
        assert d.findings[0].culprit_basis.startswith("statement:")
    else:
        assert d.culprit_ranks == [], d.summary()


@pytest.mark.parametrize("case", ["one-wait-missing", "counts-differ", "no-rank"])
def test_waits_that_do_not_account_for_every_joined_rank_name_no_one(tmp_path, case):
    """A wait line missing from the excerpt (fewer ranks printed than joined), waits whose counts
    differ (ranks still coming up), or a wait naming no rank: no elimination is possible."""
    lines = [_wait(r, 8, 7) for r in (0, 1, 2, 3, 5, 6, 7)]
    if case == "one-wait-missing":
        lines = lines[:-1]
    elif case == "counts-differ":
        lines[0] = _wait(0, 8, 3)
    else:
        lines[0] = lines[0].replace("for rank: 0, ", "")
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED and d.culprit_ranks == [], d.summary()

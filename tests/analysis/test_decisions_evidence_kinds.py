"""Decisions on kinds of real-log evidence that the wild corpus's misses showed (issue #16), each
tested on generated variants (wrappers of launchers and collectors, per-rank files or one combined
copy, subsets of ranks, cuts), never on one log.

- a log that ends right after its ranks announced that they ENTER process-group initialisation
  (Lightning's ``initializing ddp: GLOBAL_RANK: r, MEMBER: i/N`` and ``Initializing distributed:
  ...``, Megatron's ``> initializing torch distributed ...``, DeepSpeed's ``Initializing TorchBackend
  in DeepSpeed``, c10d's ``Added key: store_based_barrier_key:1 to store for rank: r``, NCCL's
  ``ncclCommInitRank ... - Init START``, rank 0's ``NCCL version 2.x``), with nothing after it, is
  ``timeout-undetermined`` at low confidence with what to collect: the evidence never shows the job
  past init. Without it the user
  was told "nothing distributed could be read" (the old spelling) or, worse, ``no-failure`` (the
  newer spelling and NCCL's Init START, which readers parse: a false all-clear on a job hung at init)
  (test_a_log_that_ends_as_its_ranks_enter_init_is_not_an_all_clear).
- the same announcements followed by training output, or by a communicator that came up, are no
  failure: the job got past init (test_announcements_followed_by_more_are_no_failure).
- a rank whose only failure is that it could not reach another (``ConnectionRefusedError``, a
  connection reset or closed by the peer, a broken pipe) is that side's victim: a crash with no
  culprit, at low confidence. Without it the user was told, at high confidence, that the rank which
  was refused crashed first and is the culprit, while the side that was not there went unmentioned
  (test_a_rank_that_could_not_reach_another_is_no_named_culprit); any other exception of one rank
  among quiet ones is still named (test_a_ranks_own_exception_among_quiet_ones_is_still_named).
- a collective's list of tensors of the wrong length (c10d's ``Tensor list input to scatter/gather
  must match number of collective participants``, a library's ``all_gather output list has 2
  entries, expected 4``) is a size error of that collective: ``shape-mismatch``. Without it the user
  was told that the rank crashed on its own (a plain exception), not that the ranks' collective
  arguments disagree in size (test_a_collectives_tensor_list_of_the_wrong_length_is_a_size_mismatch).
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import family_of
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

#: how frameworks announce that a rank enters process-group initialisation (before the group is up)
_ANNOUNCE = {
    "lightning-old": lambda r, n: f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{n}",
    "lightning": lambda r, n: f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{n}",
    "megatron": lambda r, n: "> initializing torch distributed ...",
    "c10d-store-key": lambda r, n: (
        f"[I ProcessGroup.py:12] Added key: store_based_barrier_key:1 to store for rank: {r}"
    ),
    "nccl-version": lambda r, n: "NCCL version 2.18.1+cuda12.1",
    "nccl-init-start": lambda r, n: (
        f"node{r}:1{r}00:1{r}01 [{r}] NCCL INFO ncclCommInitRank comm 0x55d{r} rank {r} nranks {n} cudaDev {r} "
        f"nvmlDev {r} busId {r}000 commId 0x7e1 - Init START"
    ),
    "deepspeed": lambda r, n: (
        "[2024-05-01 10:00:00,123] [INFO] [comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl"
    ),
}
#: what a rank prints before it (device and precision chatter)
_PREAMBLE = [
    "GPU available: True, used: True",
    "TPU available: False, using: 0 TPU cores",
    "Using native 16bit precision.",
]


def _stopped_at_init(announce, wrapper, n, ranks, per_rank, trailing_blank):
    """Each of ``ranks`` (of a job of ``n``) prints the preamble then its announcement, and nothing more."""
    w = WRAPPERS[wrapper]
    per = {r: [w(r, t) for t in _PREAMBLE + [f"LOCAL_RANK: {r} - CUDA_VISIBLE_DEVICES: [0,1]"]] for r in ranks}
    for r in ranks:
        per[r].append(w(r, _ANNOUNCE[announce](r, n)))
        if trailing_blank:
            per[r] += ["", ""]
    if per_rank:
        return {f"rank{r}.log": lines for r, lines in per.items()}
    pre = [ln for r in ranks for ln in per[r][: -3 if trailing_blank else -1]]
    ann = [w(r, _ANNOUNCE[announce](r, n)) for r in reversed(ranks)]
    return {"job.log": pre + ann + ([""] if trailing_blank else [])}


@pytest.mark.parametrize("announce", sorted(_ANNOUNCE))
@pytest.mark.parametrize(
    "wrapper,n,ranks,per_rank,blank",
    [
        ("plain", 2, [0, 1], False, False),
        ("torchrun", 4, [0, 1, 2, 3], True, True),
        ("mpirun", 8, [1, 5], False, True),
        ("pdsh", 2, [0], True, False),
        ("slurm", 4, [0, 1, 2, 3], False, False),
        ("kubectl", 2, [0, 1], True, False),
        ("pdsh", 8, [0, 3, 6], False, True),
    ],
    ids=[
        "plain-two",
        "torchrun-four-per-rank",
        "mpirun-subset",
        "pdsh-one-rank",
        "slurm-four",
        "kubectl-per-rank",
        "pdsh-subset",
    ],
)
def test_a_log_that_ends_as_its_ranks_enter_init_is_not_an_all_clear(
    tmp_path, announce, wrapper, n, ranks, per_rank, blank
):
    d = _diagnose(tmp_path, _stopped_at_init(announce, wrapper, n, ranks, per_rank, blank))
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    f = d.findings[0]
    assert f.confidence == "low" and not f.culprit_ranks, d.summary()
    assert "Collect next" in f.summary and "not an all-clear" in f.summary


@pytest.mark.parametrize("announce", sorted(_ANNOUNCE))
@pytest.mark.parametrize("wrapper", ["plain", "torchrun", "pdsh"])
@pytest.mark.parametrize("after", ["steps", "init-complete"])
def test_announcements_followed_by_more_are_no_failure(tmp_path, announce, wrapper, after):
    files = _stopped_at_init(announce, wrapper, 2, [0, 1], False, False)
    w = WRAPPERS[wrapper]
    if after == "steps":
        more = [w(r, f"Epoch 0: {i}/100 loss=2.{i}{r}") for i in range(5) for r in (0, 1)]
    else:
        more = [
            w(
                r,
                f"node{r}:1{r}00:1{r}01 [{r}] NCCL INFO comm 0x55d0 rank {r} nranks 2 cudaDev {r} busId 1{r}000 - Init COMPLETE",
            )
            for r in (0, 1)
        ]
    files["job.log"] += more
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    # a failure after the announcements is still a failure (never an all-clear)
    files["job.log"].append(w(1, "RuntimeError: CUDA error: an illegal memory access was encountered"))
    assert _diagnose(tmp_path, files).verdict != ClassId.NO_FAILURE


#: a group of 4 that states its size (NCCL's Init lines), then steps on every rank
def _quiet_group(wrapper, n=4, steps=5):
    w = WRAPPERS[wrapper]
    out = [
        w(
            r,
            f"node0:1{r}00:1{r}01 [{r}] NCCL INFO comm 0x55d0 rank {r} nranks {n} cudaDev {r} busId 1{r}000 commId 0x7e1 - Init COMPLETE",
        )
        for r in range(n)
    ]
    out += [w(r, f"step {i} loss=2.{i}{r}") for i in range(steps) for r in range(n)]
    return out


_LOST = {
    "refused": "ConnectionRefusedError: [Errno 111] Connection refused",
    "reset": "ConnectionResetError: [Errno 104] Connection reset by peer",
    "pipe": "BrokenPipeError: [Errno 32] Broken pipe",
    "runtime-refused": "RuntimeError: connect() to [master-0]:29500 failed: Connection refused",
}


def _raises(wrapper, rank, exc_line, frames=True):
    w = WRAPPERS[wrapper]
    lines = [w(rank, "Traceback (most recent call last):")] if frames else []
    if frames:
        lines += [
            w(rank, '  File "/usr/lib/python3.10/socket.py", line 845, in create_connection'),
            w(rank, "    sock.connect(sa)"),
        ]
    return lines + [w(rank, exc_line)]


@pytest.mark.parametrize("lost", sorted(_LOST))
@pytest.mark.parametrize("wrapper", ["torch", "torchrun", "mpirun", "kubectl"])
@pytest.mark.parametrize("rank,frames", [(1, True), (3, False)], ids=["rank1-traceback", "rank3-line-only"])
def test_a_rank_that_could_not_reach_another_is_no_named_culprit(tmp_path, lost, wrapper, rank, frames):
    lines = _quiet_group(wrapper) + _raises(wrapper, rank, _LOST[lost], frames)
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict not in (ClassId.NO_FAILURE, ClassId.NO_EVIDENCE), d.summary()
    f = d.findings[0]
    assert f.confidence != "high", d.summary()
    assert rank not in (d.culprit_ranks or []), d.summary()


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "kubectl"])
def test_a_ranks_own_exception_among_quiet_ones_is_still_named(tmp_path, wrapper):
    exc = "ValueError: Expected input batch_size (16) to match target batch_size (8)."
    d = _diagnose(tmp_path, {"job.log": _quiet_group(wrapper) + _raises(wrapper, 2, exc)})
    assert d.verdict == ClassId.RANK_CRASH and d.culprit_ranks == [2], d.summary()
    assert d.findings[0].confidence == "high", d.summary()


_LIST_LENGTH = {
    "c10d-participants": (
        "RuntimeError: Tensor list input to scatter/gather must match number of collective participants but "
        "got 2 inputs with world_size 4."
    ),
    "library-entries": "ValueError: all_gather output list has 2 entries, expected 4",
    "c10d-participants-short": "RuntimeError: Tensor list must match number of collective participants but got 3 tensors.",
}


@pytest.mark.parametrize("phrase", sorted(_LIST_LENGTH))
@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "pdsh", "ray"])
def test_a_collectives_tensor_list_of_the_wrong_length_is_a_size_mismatch(tmp_path, phrase, wrapper):
    assert family_of(_LIST_LENGTH[phrase]) == SignalFamily.SIZE
    lines = _quiet_group(wrapper) + [WRAPPERS[wrapper](1, _LIST_LENGTH[phrase])]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == ClassId.SHAPE_MISMATCH, d.summary()
    # a list of the wrong length with no collective word is the process's own error, not a size mismatch
    assert family_of("ValueError: dict has 3 entries, expected 2") != SignalFamily.SIZE

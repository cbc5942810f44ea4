"""Positions that blind batch m read as a desync although they were not positions of ranks behind
one another (issue 16), each tested on its kind with generated variants (launcher prefixes, torch's
line shapes over its versions, rank lists with and without spaces, cut tails, subsets of the lines).

- torch's desync report (``TORCH_NCCL_DESYNC_DEBUG``) whose ``joined but didn't finish collective #N``
  line names every rank of the group: all of them are inside the one collective and none finished it,
  so no rank is behind another; the collective hung under all of them (the network, a device, a rank
  outside the group). The failure stays ``timeout-undetermined``, no culprit, and says what the report
  showed; a report naming some ranks still names them
  (test_a_desync_report_in_which_every_rank_joined_is_no_desync,
  test_a_desync_report_naming_some_ranks_still_names_them).
- Watchdog timeouts of different process groups are not positions of one counter. torch 2.4+ prints
  the timeout without its group (``[Rank 1] Watchdog caught ... WorkNCCL(SeqNum=216, ...)``) and then a
  companion line that names it (``[PG ID 11 PG GUID 119 Rank 1] ... at work: 216``); the ``PG ID``
  counts the groups each process created, so two groups can share it on two ranks, while the ``PG
  GUID`` is the group's name, the same on every member (the loader takes it as ``pg``, and gives the
  timeout line the group its companion names). Timeouts whose companion lines name different GUIDs are
  not compared (two threads driving two communicators, nccl#1610); timeouts of one GUID at different
  seqs still are, and so is a rank whose companion line a paste cut when the evidence names that one
  group only
  (test_timeouts_of_groups_with_different_guids_are_not_one_counter,
  test_timeouts_of_one_group_at_different_seqs_stay_a_desync,
  test_a_rank_whose_status_line_was_cut_is_compared_within_the_one_group_named).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

# --- a desync report in which every rank joined and none finished ---------------------------------------


def _ranks_text(ranks, spaced: bool) -> str:
    return (", " if spaced else ",").join(map(str, ranks))


def _report(me: int, n: int, seq: int, op: str, joined, *, spaced=True, snapshot=True, era="2.4") -> list[str]:
    """What ProcessGroupNCCL prints for a timeout with the desync report on (torch's TraceUtils.h)."""
    head = (
        f"[E1115 16:42:37.766242859 ProcessGroupNCCL.cpp:629] [Rank {me}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=5449, NumelOut=5449, Timeout(ms)=600000) ran for "
        "600027 milliseconds before timing out."
    )
    if era == "2.1":
        head = (
            f"[E ProcessGroupNCCL.cpp:475] [Rank {me}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)=1800000) ran for 1800512 milliseconds before timing out."
        )
    out = [
        head,
        f"[E1115 16:42:37.768057301 ProcessGroupNCCL.cpp:1936] Rank {me}",
        f"\t - [{me}] Timeout at collective: {op}, #{seq}",
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        f"\t   - [{_ranks_text(joined, spaced)}] joined but didn't finish collective #{seq} (count from 1)",
    ]
    if snapshot:
        out += [
            "\t - Snapshot of ranks' latest states:",
            f"\t   #{seq} started ranks:",
            f"\t     [{_ranks_text(joined, spaced)}] started {op}",
        ]
    if era != "2.1":
        out.append(
            f"[E1115 16:42:37.768084521 ProcessGroupNCCL.cpp:2168] [PG ID 1 PG GUID 1 Rank {me}]  failure detected "
            f"by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}"
        )
    return out


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "slurm", "kubectl", "plain"])
@pytest.mark.parametrize("n", [2, 8, 16])
@pytest.mark.parametrize(
    "shape",
    ["full", "no-snapshot", "unspaced", "cut-after-joined", "two-reporters", "torch-2.1", "training-before"],
)
def test_a_desync_report_in_which_every_rank_joined_is_no_desync(tmp_path, wrapper, n, shape):
    seq, op = 730, "ALLREDUCE"
    me = n // 2
    lines = _report(
        me,
        n,
        seq,
        op,
        range(n),
        spaced=shape != "unspaced",
        snapshot=shape != "no-snapshot",
        era="2.1" if shape == "torch-2.1" else "2.4",
    )
    if shape == "cut-after-joined":  # the paste ends at the report's verdict line
        lines = lines[: 1 + next(i for i, t in enumerate(lines) if "joined but" in t)]
    files = {"log.txt": [WRAPPERS[wrapper](me, t) for t in lines]}
    if shape == "two-reporters":  # another rank printed the same report
        other = (me + 1) % n
        files["log.txt"] += [WRAPPERS[wrapper](other, t) for t in _report(other, n, seq, op, range(n))]
    if shape == "training-before":
        files["log.txt"] = [
            WRAPPERS[wrapper](me, f"  0%|          | 0/4325 [00:00<?, ?it/s] step {i} loss=2.31") for i in range(3)
        ] + files["log.txt"]
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    assert not d.culprit_ranks, d.summary()
    assert ClassId.RANK_DESYNC not in {a.class_id for a in d.alternatives}, d.summary()
    assert "none finished" in d.findings[0].summary, d.findings[0].summary


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "plain"])
@pytest.mark.parametrize("stuck", [[3], [1, 2], [0, 5, 6]])
def test_a_desync_report_naming_some_ranks_still_names_them(tmp_path, wrapper, stuck):
    n, seq = 8, 41
    me = next(r for r in range(n) if r not in stuck)
    # every rank's communicator said the group's size: the report's list is a subset of it
    lines = [
        WRAPPERS[wrapper](
            r, f"node0:10{r}:20{r} [{r}] NCCL INFO comm 0x55d0 rank {r} nranks {n} cudaDev {r} - Init COMPLETE"
        )
        for r in range(n)
    ]
    lines += [WRAPPERS[wrapper](me, t) for t in _report(me, n, seq, "ALLREDUCE", stuck)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.RANK_DESYNC, d.summary()
    assert d.culprit_ranks == stuck, d.summary()


# --- timeouts of different process groups ------------------------------------------------------------------

_COMPANIONS = {
    # torch 2.5/2.6 (nccl#1610's shape)
    "exception": "[PG ID {pg} PG GUID {guid}{desc} Rank {k}] Exception (either an error or timeout) detected by "
    "watchdog at work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {done}.",
    # torch 2.4 (the status line)
    "status": "[PG ID {pg} PG GUID {guid}{desc} Rank {k}]  failure detected by watchdog at work sequence id: {seq} "
    "PG status: last enqueued work: {enq}, last completed work: {done}",
    # the heartbeat-era timeout line
    "timeout-at": "[PG ID {pg} PG GUID {guid}{desc} Rank {k}] Timeout at NCCL work: {seq}, last enqueued NCCL work: "
    "{enq}, last completed NCCL work: {done}.",
}


def _timeout(rank: int, k: int, pg: int, guid: str, seq: int, op: str, companion: str, desc: str = "") -> list[str]:
    return [
        f"[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] [Rank {k}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1379328, NumelOut=1572864, Timeout(ms)=600000) ran for 600045 "
        "milliseconds before timing out.",
        "[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] "
        + _COMPANIONS[companion].format(pg=pg, guid=guid, desc=desc, k=k, seq=seq, enq=seq + 2, done=seq - 1),
    ]


#: (global rank, rank in its group, PG ID, PG GUID, seq, op): two groups that share PG ID 11 on their
#: ranks, each driven by its own thread, and a third group
_TWO_THREADS = [
    (13, 1, 11, "119", 216, "ALLTOALL_BASE"),
    (15, 1, 11, "112", 57, "ALLREDUCE"),
    (14, 0, 12, "120", 151, "ALLTOALL_BASE"),
    (12, 0, 11, "119", 216, "ALLTOALL_BASE"),
]


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "kubectl"])
@pytest.mark.parametrize("companion", sorted(_COMPANIONS))
@pytest.mark.parametrize("desc", ["", "(ep_group)"])
@pytest.mark.parametrize("subset", [2, 3, 4])
@pytest.mark.parametrize("stamped", [False, True])
def test_timeouts_of_groups_with_different_guids_are_not_one_counter(
    tmp_path, wrapper, companion, desc, subset, stamped
):
    # a log collector's time in front of each line (nccl#1610's), or the launcher's own stamp
    stamp = {"torch": " 2025-02-18 12:54 ", "mpirun": "Tue Feb 18 12:54:22 2025", "kubectl": ""}[wrapper]
    lines = []
    for rank, k, pg, guid, seq, op in _TWO_THREADS[:subset]:
        lines += [
            (stamp if stamped else "") + WRAPPERS[wrapper](rank, t)
            for t in _timeout(rank, k, pg, guid, seq, op, companion, desc)
        ]
    d = _diagnose(tmp_path, {"part1.txt": lines})
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()
    assert not d.culprit_ranks, d.summary()
    assert not any(f.rule == "stuck-points" for f in [*d.findings, *d.alternatives]), d.summary()


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "kubectl"])
@pytest.mark.parametrize("companion", sorted(_COMPANIONS))
@pytest.mark.parametrize("desc", ["", "(ep_group)"])
def test_timeouts_of_one_group_at_different_seqs_stay_a_desync(tmp_path, wrapper, companion, desc):
    # one group (GUID 7) of four ranks: three stuck at seq 12, one still at seq 11
    lines = []
    for rank, seq in [(0, 12), (1, 12), (2, 11), (3, 12)]:
        lines += [WRAPPERS[wrapper](rank, t) for t in _timeout(rank, rank, 2, "7", seq, "ALLREDUCE", companion, desc)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.RANK_DESYNC, d.summary()
    assert d.culprit_ranks == [2], d.summary()


@pytest.mark.parametrize("wrapper", ["torch", "mpirun"])
@pytest.mark.parametrize("companion", sorted(_COMPANIONS))
def test_a_rank_whose_status_line_was_cut_is_compared_within_the_one_group_named(tmp_path, wrapper, companion):
    # the paste kept rank 2's timeout line but not its status line: the only group the evidence names is
    # GUID 7, so rank 2 is read as one of its ranks (still behind the others)
    lines = []
    for rank, seq in [(0, 12), (1, 12), (2, 11), (3, 12)]:
        mine = _timeout(rank, rank, 2, "7", seq, "ALLREDUCE", companion)
        lines += [WRAPPERS[wrapper](rank, t) for t in (mine[:1] if rank == 2 else mine)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.RANK_DESYNC, d.summary()
    assert d.culprit_ranks == [2], d.summary()

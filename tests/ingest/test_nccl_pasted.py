"""NCCL lines as people paste them (item: NCCL COLL / Init lines).

Real formats: NCCL ``src/enqueue.cc``::

    INFO(NCCL_COLL,"%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p", ...)

(``opCount`` is printed with ``%lx``: hex, so ``opCount 1a`` is 26); RCCL's copy appends
``task %d globalrank %d``. The prefix is NCCL's ``debug.cc`` ``"%s:%d:%d [%d] NCCL INFO "``
(host:pid:tid, then the *local CUDA device*), optionally with ``NCCL_DEBUG_TIMESTAMP_FORMAT``'s
``[YYYY-mm-dd HH:MM:SS] `` and, for WARN, ``file.cc:line (func)``. ``init.cc`` prints
``comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE``.
A paste (or a launcher) that kept only the ``[dev]`` bracket, or nothing, before ``[src:line] NCCL
LEVEL`` at the start of the line is still NCCL's (test_nccl_lines_without_host_pid_at_the_line_start).
"""

from __future__ import annotations

import pytest

from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.nccl import NcclReader

from ._text_helpers import one, run

R = NcclReader()
INIT = (
    "node7:4242:4300 [3] NCCL INFO comm 0x55d0c8a0 rank 11 nranks 16 cudaDev 3 nvmlDev 3 busId 3b000 "
    "commId 0x9e1f2a - Init COMPLETE"
)
COLL = (
    "node7:4242:4310 [3] NCCL INFO AllReduce: opCount 1a sendbuff 0x7f4c2a000000 recvbuff 0x7f4c2a000000 "
    "count 1048576 datatype 7 op 0 root 0 comm 0x55d0c8a0 [nranks=16] stream 0x55e0b1c0"
)


def _ev(out, kind="nccl_opcount"):
    return one(out.events, seq_kind=kind)


def test_coll_line_alone_names_host_and_pid_but_no_rank():
    out = run(R, COLL)
    ev = _ev(out)
    assert ev["rank"] is None  # [3] is a local device, not rank 3
    assert (ev["host"], ev["pid"], ev["device"]) == ("node7", 4242, "cuda:3")
    assert (ev["seq"], ev["nccl_opcount"], ev["nccl_position"]) == (0x1A, 26, 1)
    assert (ev["pg"], ev["world_size"], ev["op"], ev["numel_in"], ev["dtype"]) == (
        "0x55d0c8a0",
        16,
        "all_reduce",
        1048576,
        "float32",
    )
    pos = _ev(out, "nccl_position")
    assert (pos["seq"], pos["nccl_opcount"]) == (1, 26)


def test_init_line_attributes_later_lines_of_the_same_host_pid():
    warn = "node7:4242:4399 [3] misc/socket.cc:50 NCCL WARN Net : Connection closed by remote peer"
    out = run(R, [INIT, "node7:4242:4300 [3] NCCL INFO Channel 00/02 : 0 1", COLL, warn])
    assert _ev(out)["rank"] == 11 and _ev(out)["pg"] == "0x9e1f2a"
    assert one(out.errors)["rank"] == 11
    assert one(out.ranks)["rank"] == 11


def test_same_pid_on_another_host_is_another_process():
    other = COLL.replace("node7:4242", "node8:4242")
    out = run(R, [INIT, other])
    ev = _ev(out)
    assert ev["host"] == "node8" and ev["rank"] is None and ev["pg"] == "0x55d0c8a0"


@pytest.mark.parametrize(
    "front, rank",
    [
        ("", None),
        ("[2025-04-12 09:14:02] ", None),  # NCCL_DEBUG_TIMESTAMP_FORMAT
        ("run.3.log:", None),  # grep -H: not clearly a rank
        ("run.3.log:88:", None),  # grep -Hn
        ("logs/rank3.log:", 3),  # grep -H with a rank file name
        ("rank3.log-", 3),  # grep context line
        ("2024-05-01T12:00:00.123456789Z ", None),  # kubectl --timestamps
        ("[rank5]:", 5),  # torchrun --tee
        ("\x1b[36m", None),
    ],
)
def test_prefixes_in_front(front, rank):
    ev = _ev(run(R, front + COLL))
    assert (ev["rank"], ev["host"], ev["pid"], ev["seq"], ev["op"]) == (rank, "node7", 4242, 26, "all_reduce")


def test_rank_from_the_file_name_wins_over_the_init_map():
    out = run(R, [INIT, COLL], ctx=FileContext(file="rank4.log", rank_hint=4))
    assert _ev(out)["rank"] == 4


def test_rccl_globalrank():
    ev = _ev(run(R, COLL + " task 0 globalrank 9"))
    assert ev["rank"] == 9


@pytest.mark.parametrize(
    "oc, want",
    [("0", 0), ("a", 10), ("1a", 26), ("ff", 255), ("7fffffffffffffff", 2**63 - 1), ("ffffffffffffffffff", None)],
)
def test_opcount_is_hex(oc, want):
    ev = _ev(run(R, COLL.replace("opCount 1a", f"opCount {oc}")))
    assert ev["seq"] == want and ev["nccl_opcount"] == want


def test_positions_count_per_process_and_communicator():
    lines = [COLL.replace("opCount 1a", f"opCount {i:x}") for i in range(3)]
    lines.insert(1, COLL.replace("node7", "node8"))
    out = run(R, lines)
    pos = [(e["host"], e["seq"]) for e in out.events if e["seq_kind"] == "nccl_position"]
    assert pos == [("node7", 1), ("node8", 1), ("node7", 2), ("node7", 3)]


def test_gather_and_scatter_counts_are_per_rank():
    ag = _ev(run(R, COLL.replace("AllReduce", "AllGather").replace("count 1048576", "count 4")))
    rs = _ev(run(R, COLL.replace("AllReduce", "ReduceScatter").replace("count 1048576", "count 4")))
    assert (ag["numel_in"], ag["numel_out"]) == (4, 64) and (rs["numel_in"], rs["numel_out"]) == (64, 4)


def test_truncated_and_out_of_range_lines_never_raise():
    cut = COLL[: COLL.index(" comm ")]
    out = run(
        R,
        [
            cut,
            COLL.replace("count 1048576", "count 99999999999999999999"),
            COLL.replace("node7:4242", "node7:99999999999999999999"),
        ],
    )
    ev = [e for e in out.events if e["seq_kind"] == "nccl_opcount"]
    assert ev[0]["numel_in"] is None and ev[1]["pid"] is None


def test_nil_buffers_and_send_recv():
    send = (
        "h:1:1 [0] NCCL INFO Send: opCount 5 sendbuff 0x7f00 recvbuff (nil) count 4 datatype 4 op 0 root 2 "
        "comm 0x99 [nranks=2] stream 0x3"
    )
    ev = _ev(run(R, send))
    assert (ev["op"], ev["root"], ev["dtype"]) == ("send", 2, "int64")


@pytest.mark.parametrize("front", ["[0] ", "", "[1,0]<stderr>:[0] "])
def test_nccl_lines_without_host_pid_at_the_line_start(front):
    """A WARN and the NCCLCHECK trace after it, their host:pid:tid lost: one nccl_warn and one
    nccl_error row naming the result; the same words inside another line are not taken."""
    lines = [
        front + "misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>",
        front + "NCCL INFO misc/socket.cc:80 -> 6",
        front + "NCCL INFO bootstrap.cc:701 -> 6",
        front + "NCCL INFO init.cc:1402 -> 6",
        "the README says to grep for NCCL WARN lines",
    ]
    out = run(R, lines)
    kinds = sorted(r["kind"] for r in out.errors)
    assert kinds == ["nccl_error", "nccl_warn"], out.errors
    err = one(out.errors, kind="nccl_error")
    assert "6" in str(err.get("nccl_code")) or "Remote" in err["message"] or "remote" in err["message"]
    assert 5 not in out.parsed

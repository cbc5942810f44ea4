"""NCCL_DEBUG reader: Init map, COLL lines, WARN, RAS and PyTorch's NCCL error trail (docs/formats.md#nccl)."""

from __future__ import annotations

from datetime import datetime, timezone

from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.nccl import NcclReader, pid_rank_map

from ._text_helpers import one, run

R = NcclReader()

INIT_WORLD = (
    "tern-07:61204:61266 [0] NCCL INFO ncclCommInitRankConfig comm 0x5581c0a0 rank 4 nranks 8 cudaDev 0 "
    "nvmlDev 0 busId 1b000 commId 0x7e21c4d90a3f5b16 - Init COMPLETE"
)
INIT_SUB = (
    "tern-07:61204:61266 [0] NCCL INFO ncclCommSplit comm 0x55aa0000 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
    "busId 1b000 parent 0x5581c0a0 splitCount 1 color 7 key 4 - Init COMPLETE"
)
COLL = (
    "tern-07:61204:61204 [0] NCCL INFO AllGather: opCount 3a sendbuff 0x7f0e52000000 recvbuff 0x7f0e52400000 "
    "count 6144 datatype 7 op 0 root 0 comm 0x5581c0a0 [nranks=8] stream 0x5581b7f0"
)


def test_init_line_maps_comm_to_rank_and_fills_ranks_row():
    out = run(R, [INIT_WORLD, COLL])
    rk = one(out.ranks)
    assert (rk["rank"], rk["host"], rk["pid"], rk["device"], rk["comm_id"]) == (
        4,
        "tern-07",
        61204,
        "cuda:0",
        "0x7e21c4d90a3f5b16",
    )
    ev = one(out.events, seq_kind="nccl_opcount")
    assert (ev["rank"], ev["pg"], ev["seq"], ev["seq_kind"], ev["op"]) == (
        4,
        "0x7e21c4d90a3f5b16",
        0x3A,
        "nccl_opcount",
        "all_gather",
    )
    pos = one(out.events, seq_kind="nccl_position")
    assert (pos["rank"], pos["pg"], pos["seq"], pos["op"], pos["numel_in"]) == (
        4,
        "0x7e21c4d90a3f5b16",
        1,
        "all_gather",
        6144,
    )
    assert (ev["numel_in"], ev["numel_out"], ev["dtype"], ev["world_size"], ev["state"]) == (
        6144,
        6144 * 8,
        "float32",
        8,
        "scheduled",
    )
    assert out.parsed == {1, 2}


def test_old_init_line_without_commid_and_coll_without_nranks():
    init = "h:1:2 [1] NCCL INFO comm 0x10 rank 1 nranks 2 cudaDev 1 busId 2000 - Init COMPLETE"
    coll = (
        "h:1:1 [1] NCCL INFO ReduceScatter: opCount 0 sendbuff 0x1 recvbuff 0x2 count 10 datatype 9 op 4 root 0 "
        "comm 0x10 stream 0x3"
    )
    ev = one(run(R, [init, coll]).events, seq_kind="nccl_opcount")
    assert (ev["rank"], ev["pg"], ev["numel_in"], ev["numel_out"], ev["dtype"], ev["redop"]) == (
        1,
        "0x10",
        20,
        10,
        "bfloat16",
        "avg",
    )


def test_sub_communicator_rank_is_not_taken_as_global_rank():
    coll = COLL.replace("comm 0x5581c0a0 [nranks=8]", "comm 0x55aa0000 [nranks=2]")
    out = run(R, [INIT_WORLD, INIT_SUB, coll])
    ev = one(out.events, seq_kind="nccl_opcount")
    assert ev["rank"] == 4 and ev["comm_rank"] == 0 and ev["pg"] == "0x5581c0a0/color7"
    assert len(out.ranks) == 1


def test_send_recv_root_is_the_peer_and_rank_from_prefix_wins():
    coll = (
        "[rank3]:h:1:1 [0] NCCL INFO Send: opCount 5 sendbuff 0x1 recvbuff 0x0 count 4 datatype 4 op 0 root 2 "
        "comm 0x99 [nranks=2] stream 0x3"
    )
    ev = one(run(R, coll).events, seq_kind="nccl_opcount")
    assert (ev["rank"], ev["op"], ev["root"], ev["dtype"], ev["pg"]) == (3, "send", 2, "int64", "0x99")


def test_destroy_forgets_the_pointer():
    init = "h:1:2 [0] NCCL INFO comm 0x10 rank 1 nranks 2 cudaDev 0 busId 2000 commId 0xabc - Init COMPLETE"
    gone = "h:1:2 [0] NCCL INFO comm 0x10 rank 1 nranks 2 cudaDev 0 busId 2000 - Destroy COMPLETE"
    coll = "h:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x10 [nranks=2] stream 0x3"
    assert one(run(R, [init, coll]).events, seq_kind="nccl_opcount")["pg"] == "0xabc"
    assert one(run(R, [init, gone, coll]).events, seq_kind="nccl_opcount")["pg"] == "0x10"


def test_warn_line_with_timestamp_and_func():
    out = run(
        R,
        "[2025-04-12 09:14:02] tern-07:61204:61266 [0] transport/net_socket.cc:540 (ncclSocketRecv) NCCL WARN "
        "NET/Socket : peer 192.0.2.18<52881> message truncated : receiving 1048576 bytes instead of 786432.",
        ctx=FileContext(file="n.log", rank_hint=4),
    )
    err = one(out.errors)
    assert err["kind"] == "nccl_warn" and err["rank"] == 4 and err["message"].startswith("NET/Socket : peer")
    assert err["t_wall"] == datetime(2025, 4, 12, 9, 14, 2, tzinfo=timezone.utc)


def test_warn_rank_from_init_of_same_pid():
    warn = "tern-07:61204:61266 [0] misc/argcheck.cc:30 NCCL WARN AllReduce : invalid root 9 (root should be in the 0..8 range)"
    assert one(run(R, [INIT_WORLD, warn]).errors)["rank"] == 4


def test_dist_backend_error_trail_is_one_row():
    block = [
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: /opt/src/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:2011, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5",
        "[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        "[rank1]: Last error:",
        "[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000",
    ]
    out = run(R, block)
    err = one(out.errors)
    assert err["kind"] == "nccl_error" and err["rank"] == 1 and err["nccl_result"] == "ncclInvalidUsage"
    assert "Duplicate GPU detected" in err["message"] and err["nccl_version"] == "2.21.5"
    assert out.parsed == {1, 2, 3, 4}


def test_ras_block():
    block = [
        "#0-0 (7e21c4d90a3f5b16) MISMATCH",
        "  Communicator ranks have different AllGather operation counts",
        "  7 ranks have launched up to operation 58",
        "  1 ranks have launched up to operation 57",
        "  Rank 5 -- GPU 1 managed by process 61205 on node 192.0.2.18",
    ]
    out = run(R, block)
    err = one(out.errors)
    assert (err["kind"], err["op"], err["related_ranks"], err["pg"]) == (
        "nccl_ras",
        "all_gather",
        (5,),
        "0x7e21c4d90a3f5b16",
    )
    assert out.parsed == set(range(1, 6))


def test_pid_rank_map_uses_the_world_communicator():
    lines = [
        INIT_SUB,
        INIT_WORLD,
        "tern-07:61205:61267 [1] NCCL INFO comm 0x66 rank 5 nranks 8 cudaDev 1 busId 2000 commId 0x7e - Init COMPLETE",
        "noise",
    ]
    assert pid_rank_map(lines) == {61204: 4, 61205: 5}
    assert pid_rank_map(["nothing here"]) == {}


def test_other_nccl_info_lines_count_as_parsed_and_junk_never_raises():
    out = run(
        R,
        [
            "tern-07:61204:61266 [0] NCCL INFO Bootstrap : Using eth0:192.0.2.17<0>",
            "h:1:1 [0] NCCL INFO AllGather: opCount zz sendbuff",
            "#x-y (zz) MISMATCH",
            "Last error:",
        ],
    )
    assert 1 in out.parsed and out.events == []


def test_comm_map_survives_block_boundaries_within_one_file():
    """The loader parses block by block; a COLL line after ordinary output still finds its Init line."""
    from denpex_nb.ingest.base import Output
    from denpex_nb.ingest.prefixes import to_lines

    ctx = FileContext(file="n.log")
    out = Output()
    R.parse(to_lines([(1, INIT_WORLD)], ctx), ctx, out)
    R.parse(to_lines([(9, COLL)], ctx), ctx, out)
    ev = one(out.events, seq_kind="nccl_opcount")
    assert (ev["rank"], ev["pg"]) == (4, "0x7e21c4d90a3f5b16")
    other = Output()  # another file: no leakage
    R.parse(to_lines([(9, COLL)], ctx), ctx, other)
    assert one(other.events, seq_kind="nccl_opcount")["pg"] == "0x5581c0a0"


def test_warn_naming_ranks_fills_related_ranks():
    out = run(
        R,
        [
            "h:1:2 [0] init.cc:900 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000",
            "h:1:2 [0] enqueue.cc:10 NCCL WARN Mismatched collective detected, please check your collective calls "
            "at and around rank 3.",
        ],
    )
    assert [e["related_ranks"] for e in out.errors] == [(0, 1), (3,)]


def test_many_blocks_without_init_on_one_output():
    from denpex_nb.ingest.base import Output
    from denpex_nb.ingest.prefixes import to_lines

    ctx, out = FileContext(file="n.log"), Output()
    for n in range(3):
        R.parse(to_lines([(n + 1, COLL)], ctx), ctx, out)
    assert len(out.events) == 6 and all(e["pg"] == "0x5581c0a0" for e in out.events)
    assert [e["seq"] for e in out.events if e["seq_kind"] == "nccl_position"] == [1, 2, 3]


def test_fuzzed_input_never_raises():
    from ._text_helpers import fuzz

    fuzz(R)


def test_coll_position_counts_per_pid_and_comm_across_blocks():
    from denpex_nb.ingest.base import Output
    from denpex_nb.ingest.prefixes import to_lines

    ctx, out = FileContext(file="n.log"), Output()
    zero = COLL.replace("opCount 3a", "opCount 0")
    other_pid = zero.replace("tern-07:61204:61204", "tern-07:61205:61205")
    R.parse(to_lines([(1, INIT_WORLD), (2, zero)], ctx), ctx, out)
    R.parse(to_lines([(5, zero), (6, other_pid)], ctx), ctx, out)
    ops = [e for e in out.events if e["seq_kind"] == "nccl_opcount"]
    assert [(e["pid"], e["seq"], e["nccl_position"]) for e in ops] == [(61204, 0, 1), (61204, 0, 2), (61205, 0, 1)]

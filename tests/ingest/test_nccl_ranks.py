"""Ranks from whatever names them, on NCCL's side (ingest/nccl.py): the ``nRanks ... localRank`` line
and the bootstrap address of a process.

Provenance of the formats: NCCL ``src/init.cc`` (``Init timings - %s: rank %d nranks %d total ...``,
NCCL 2.23+; ``INFO(NCCL_INIT, "comm %p rank %d nRanks %d nNodes
%d localRanks %d localRank %d MNNVL %d", ...)``, printed after the topology by every NCCL since 2.19;
older ones print ``... nNodes %d localRanks %d localRank %d``) and ``src/bootstrap.cc``
(``INFO(NCCL_INIT, "Bootstrap : Using %s", ...)`` with ``<ifname>:<address><port>``, e.g.
``eth0:10.0.0.1<0>``). The lines below are written after them, not copied.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.ingest.nccl import NcclReader
from tests.signal_variants import WRAPPERS

from ._text_helpers import run

R = NcclReader()


def _proc(r, host=None, pid=None, nranks=8, local=None, addr=True):
    host = host or f"node{r // 4}"
    pid = pid or 4100 + r
    pre = f"{host}:{pid}:{pid + 7} [{r % 4}] NCCL INFO "
    lines = [pre + f"Bootstrap : Using eth0:10.1.0.{r + 1}<0>"] if addr else []
    lines.append(
        pre + f"comm 0x7f3a{r:02d} rank {r} nRanks {nranks} nNodes {max(1, nranks // 4)} localRanks 4 "
        f"localRank {r % 4 if local is None else local} MNNVL 0"
    )
    return lines


def test_the_nranks_line_ranks_its_process_with_its_local_rank_and_address():
    out = run(R, _proc(5))
    (row,) = out.ranks
    assert (row["rank"], row["host"], row["pid"], row["local_rank"], row["world_size"], row["addr"]) == (
        5,
        "node1",
        4105,
        1,
        8,
        "10.1.0.6",
    )
    assert out.parsed == {1, 2}


def test_the_init_timings_line_ranks_its_process():
    """NCCL 2.23+ (init.cc: "Init timings - %s: rank %d nranks %d total %.2f (...)")."""
    line = (
        "node2:4211:4218 [3] NCCL INFO Init timings - ncclCommInitRankConfig: rank 11 nranks 16 total 0.92 "
        "(kernels 0.11, alloc 0.01, bootstrap 0.02, allgathers 0.01, topo 0.60, graphs 0.01, connections 0.14, rest 0.02)"
    )
    (row,) = run(R, [line]).ranks
    assert (row["rank"], row["pid"], row["world_size"], row["local_rank"]) == (11, 4211, 16, None)


def test_a_sub_communicator_line_ranks_no_process():
    """A tensor-parallel pair's line beside the world's: only the world's rank is the process's."""
    lines = _proc(5) + [
        "node1:4105:4112 [1] NCCL INFO comm 0x7f3b05 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0"
    ]
    out = run(R, lines)
    assert [r["rank"] for r in out.ranks] == [5]


def test_an_address_without_a_ranked_process_is_no_rank_row():
    out = run(R, ["node1:4105:4112 [1] NCCL INFO Bootstrap : Using ib0:fe80::1%ib0<0>"])
    assert out.ranks == [] and out.parsed == {1}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_the_ranks_and_addresses_behind_every_wrapper(tmp_path, wrapper):
    wrap = WRAPPERS[wrapper]
    for r in range(4):
        (tmp_path / f"r{r}.log").write_text("\n".join(wrap(r, t) for t in _proc(r, nranks=4)) + "\n")
    inc = dx.load(str(tmp_path), progress=False)
    got = dict(zip(inc.ranks["rank"].astype(int), inc.ranks["addr"].astype(object)))
    assert got == {r: f"10.1.0.{r + 1}" for r in range(4)}

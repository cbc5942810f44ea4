"""Numbers past a column's range are missing values for that row, never an exception (strict load).

Ranks must fit Int32, seqs / numels / pids Int64: ``[rank2147483648]:`` names no rank and
``SeqNum=99999999999999999999`` no sequence number. The lines still load (the suite runs with
``DENPEX_STRICT=1``, so a reader raising on them fails here).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx

BIG = "99999999999999999999"
LINES = {
    "rank_prefix": "[rank2147483648]:RuntimeError: boom",
    "work_seq": f"[rank0]:[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] Watchdog caught collective operation timeout: "
    f"WorkNCCL(SeqNum={BIG}, OpType=ALLREDUCE, NumelIn={BIG}, NumelOut=16, Timeout(ms)=600000) ran for 1 milliseconds",
    "status": f"[rank0]:[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] Timeout at NCCL work: {BIG}, last enqueued NCCL work: {BIG}, "
    f"last completed NCCL work: 3.",
    "desync": f"[rank0]: - [{BIG}] Timeout at collective: ALLREDUCE, #{BIG}",
    "detail": f"Detected mismatch between collectives on ranks. Rank {BIG} is running collective: "
    f"CollectiveFingerPrint(SequenceNumber={BIG}OpType=BARRIER), but Rank 1 is running collective: "
    f"CollectiveFingerPrint(SequenceNumber=1OpType=BARRIER).",
    "nccl": f"h:{BIG}:1 [0] NCCL INFO AllReduce: opCount {'f' * 30} sendbuff 0x1 recvbuff 0x2 count {BIG} datatype 7 "
    f"op 0 root {BIG} comm 0x9 [nranks={BIG}] stream 0x3",
    "nccl_init": f"h:1:2 [0] NCCL INFO comm 0x9 rank {BIG} nranks {BIG} cudaDev 0 busId 1 - Init COMPLETE",
    "agent": f"E0101 00:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:1] failed (exitcode: {BIG}) "
    f"local_rank: {BIG} (pid: {BIG}) of binary: /usr/bin/python",
    "frtrace": f"Collective sequence number: {BIG} has errors",
    "spawn": f"-- Process {BIG} terminated with the following error:",
}


@pytest.mark.parametrize("name", sorted(LINES))
def test_out_of_range_numbers_load_as_missing(name, tmp_path):
    p = tmp_path / "big.log"
    p.write_text(LINES[name] + "\n")
    inc = dx.load(str(p), progress=False, strict=True)
    for frame in (inc.events, inc.errors, inc.ranks, inc.progress):
        for col in ("rank", "seq", "numel_in", "numel_out", "pid", "root", "world_size", "exit_code", "last_enqueued"):
            if col in frame:
                vals = frame[col].dropna()
                assert all(abs(int(v)) < 2**63 for v in vals), (col, list(vals))
    assert not inc.is_empty or name in ("nccl_init",)

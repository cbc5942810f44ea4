"""A large made-up incident on disk (1024 ranks by default), for the report's scale test and benchmark.

Why on disk: the report is read as a user meets it, through ``denpex-nb report PATH``. The folder
holds one Flight Recorder dump per rank (:func:`~.frcompare.write_synthetic_dumps`: the culprit
passes a smaller tensor at the last collective, which hangs) and one interleaved NCCL-style log
in which every other rank's watchdog reports the timeout at that collective and the culprit's does
too, with its own, smaller NumelIn: the "Errors per rank" table must fold 1023 copies of one
message into one row.
"""

from __future__ import annotations

from pathlib import Path

from .frcompare import write_synthetic_dumps


def write_large_incident(out_dir, world_size: int = 1024, culprit: int = 300, entries: int = 40) -> dict:
    """Write the incident under ``out_dir`` (``fr/`` and ``train.log``); returns what was planted."""
    out = Path(out_dir)
    planted = write_synthetic_dumps(out / "fr", world_size, entries, "size", plant_rank=culprit, numel=4096)
    seq = planted.seq
    nccl_op = {"all_reduce": "ALLREDUCE", "all_gather": "_ALLGATHER_BASE", "broadcast": "BROADCAST"}.get(
        planted.op, "ALLREDUCE"
    )
    lines = []
    for rank in range(world_size):
        numel = 4095 if rank == culprit else 4096
        lines.append(
            f"[rank{rank}]:[E1202 00:10:{rank % 60:02d}.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog "
            f"caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={nccl_op}, NumelIn={numel}, "
            f"NumelOut={numel}, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
        )
    (out / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"world_size": world_size, "culprit": culprit, "seq": seq, "op": planted.op}

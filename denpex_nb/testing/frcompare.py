"""Side by side with PyTorch's ``torchfrtrace``: synthetic Flight Recorder dumps and a bounded runner.

* :func:`write_synthetic_dumps` writes realistic pickled dumps (the NCCL-style schema of
  docs/formats.md#fr-fields, protocol 2, frames included) for any number of ranks, with one planted
  problem: a size, dtype or op mismatch, a skipped collective, two mismatches in one group, or none.
* :func:`run_torchfrtrace` runs the stock analyzer in a subprocess with a hard timeout (its process
  group is killed) and :func:`parse_torchfrtrace` reads its findings.

Used by ``tests/analysis/test_vs_torchfrtrace.py`` and ``benchmarks/bench_diagnose_fr.py``.
"""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..processes import stop_group
from ..vocab import ClassId, ErrorKind

PREFIX = "comm_lib_trace_rank_"
PLANTS = ("none", "size", "dtype", "op", "skip", "two")

_OPS = (  # (profiling name, input sizes(n), output sizes(n, ws)) cycled for a training-like mix
    ("all_reduce", lambda n: [[n]], lambda n, ws: [[n]]),
    ("all_gather", lambda n: [[64, 16]], lambda n, ws: [[64 * ws, 16]]),
    ("all_reduce", lambda n: [[n // 2]], lambda n, ws: [[n // 2]]),
    ("broadcast", lambda n: [[32]], lambda n, ws: [[32]]),
)
_FRAMES = [
    {"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2950},
    {"name": "train_step", "filename": "train.py", "line": 88},
]


@dataclass
class Planted:
    """What a synthetic dump set contains: the ground truth for a comparison."""

    kind: str
    seq: int | None = None
    rank: int | None = None
    op: str | None = None
    second_seq: int | None = None
    files: list[str] = field(default_factory=list)

    @property
    def expected_class(self) -> str:
        return {
            "none": ClassId.NO_FAILURE,
            "size": ClassId.SHAPE_MISMATCH,
            "dtype": ClassId.DTYPE_MISMATCH,
            "op": ClassId.OP_MISMATCH,
            "skip": ClassId.RANK_DESYNC,
            "two": ClassId.SHAPE_MISMATCH,
        }[self.kind]


def write_synthetic_dumps(
    out_dir,
    world_size: int,
    entries: int,
    plant: str = "size",
    *,
    plant_rank: int = 1,
    plant_seq: int | None = None,
    gloo_pg_config: bool = False,
    missing_ranks=(),
    numel: int = 4096,
) -> Planted:
    """Write one dump per rank (``<out_dir>/comm_lib_trace_rank_<R>``) with ``entries`` collectives.

    ``plant_seq`` defaults to the last collective (a hang: entries there stay ``scheduled``).
    ``gloo_pg_config`` writes gloo's ``''``-keyed pg_config (the stock analyzer crashes on it);
    ``missing_ranks`` get no dump (as when a rank aborted).
    """
    if plant not in PLANTS:
        raise ValueError(f"plant must be one of {PLANTS}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seq_at = plant_seq or entries
    second = max(2, seq_at // 2) if plant == "two" else None
    if plant == "two":
        seq_at, second = second, seq_at  # first mismatch mid-run, second at the end
    hang = plant in ("size", "dtype", "op", "skip") and seq_at == entries
    ranks_cfg = str(list(range(world_size)))
    pg_config = (
        {"": {"name": "", "desc": "", "ranks": ranks_cfg}}
        if gloo_pg_config
        else {"0": {"name": "0", "desc": "default_pg", "ranks": ranks_cfg}}
    )
    t0 = 1_764_454_060_000_000_000
    base = [_OPS[i % len(_OPS)] for i in range(entries)]
    planted = Planted(
        plant, None if plant == "none" else seq_at, None if plant == "none" else plant_rank, second_seq=second
    )
    files = []
    for rank in range(world_size):
        if rank in missing_ranks:
            continue
        ents = []
        n_here = entries - 1 if (plant == "skip" and rank == plant_rank) else entries
        for i in range(n_here):
            seq = i + 1
            name, fin, fout = base[i]
            in_sizes, out_sizes, dtype = fin(numel), fout(numel, world_size), "Float"
            odd = rank == plant_rank and seq in (seq_at, second)
            if odd and plant in ("size", "two"):
                in_sizes = [[d - 1 if j == 0 else d for j, d in enumerate(s)] for s in in_sizes]
                out_sizes = [
                    [d - (world_size if name == "all_gather" else 1) if j == 0 else d for j, d in enumerate(s)]
                    for s in out_sizes
                ]
            elif odd and plant == "dtype":
                dtype = "Double"
            elif odd and plant == "op":
                name = "broadcast" if name != "broadcast" else "all_reduce"
            if seq == seq_at and plant != "none":
                planted.op = _norm(base[i][0])
            pending = hang and seq == entries
            created = t0 + seq * 1_000_000 + rank * 1_000
            ents.append(
                {
                    "frames": _FRAMES,
                    "record_id": i,
                    "pg_id": 0,
                    "process_group": ("0", "default_pg"),
                    "thread_name": "pt_main_thread",
                    "thread_id": "140000000000000",
                    "collective_seq_id": seq,
                    "p2p_seq_id": 0,
                    "op_id": seq,
                    "profiling_name": f"nccl:{name}",
                    "time_created_ns": created,
                    "input_sizes": in_sizes,
                    "input_dtypes": [dtype] * len(in_sizes),
                    "output_sizes": out_sizes,
                    "output_dtypes": [dtype] * len(out_sizes),
                    "state": "scheduled" if pending else "completed",
                    "time_discovered_started_ns": None if pending else created + 1000,
                    "time_discovered_completed_ns": None if pending else created + 2000,
                    "retired": not pending,
                    "timeout_ms": 600000,
                    "is_p2p": False,
                }
            )
        last = n_here
        dump = {
            "version": "2.10",
            "comm_lib_version": "2.21.5",
            "pg_config": pg_config,
            "pg_status": {
                "0": {
                    "last_enqueued_collective": last,
                    "last_started_collective": last,
                    "last_completed_collective": last - 1 if hang else last,
                }
            },
            "entries": ents,
        }
        path = out / f"{PREFIX}{rank}"
        with open(path, "wb") as f:
            pickle.dump(dump, f, protocol=2)
        files.append(str(path))
    planted.files = files
    return planted


def _norm(name: str) -> str:
    from ..ops import normalize_op

    return normalize_op(name)


@dataclass
class FrtraceResult:
    """What torchfrtrace said: rc, whether it crashed or timed out, its findings, wall time."""

    rc: int | None
    wall_s: float
    timed_out: bool
    stdout: str
    stderr: str
    findings: list[dict]

    @property
    def crashed(self) -> bool:
        return not self.timed_out and (self.rc != 0 or "Traceback (most recent call last)" in self.stderr)

    @property
    def silent(self) -> bool:
        return not self.crashed and not self.timed_out and not self.findings


def torchfrtrace_command() -> list[str] | None:
    """The analyzer as a command line (the installed script, else ``python -m`` of its module)."""
    exe = shutil.which("torchfrtrace")
    if exe:
        return [exe]
    try:
        import importlib.util

        if importlib.util.find_spec("torch.distributed.flight_recorder.fr_trace"):
            return [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
    except (ImportError, ValueError):
        pass
    return None


def run_torchfrtrace(trace_dir, *, timeout: float = 120.0, prefix: str = PREFIX, extra=()) -> FrtraceResult:
    """Run torchfrtrace on a folder of dumps; kill its whole process group after ``timeout`` seconds."""
    cmd = torchfrtrace_command()
    if cmd is None:
        from ..errors import MissingDependencyError

        raise MissingDependencyError("torchfrtrace is not installed", fix="pip install torch==2.13.0")
    cmd = cmd + [str(trace_dir), "--prefix", prefix, *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        stop_group(proc)
        out, err = proc.communicate()
        timed_out = True
    wall = time.perf_counter() - t0
    # the analyzer logs its findings on stderr in some versions, stdout in others
    return FrtraceResult(
        proc.returncode, wall, timed_out, out or "", err or "", parse_torchfrtrace((out or "") + "\n" + (err or ""))
    )


_TYPE_CLASS = {
    "SIZE_OR_SYNTAX_MISMATCH": ClassId.SHAPE_MISMATCH,
    "COLLECTIVE_TYPE_MISMATCH": ClassId.OP_MISMATCH,
    "COLLECTIVE_DTYPE_MISMATCH": ClassId.DTYPE_MISMATCH,
    # one rank completed what another still has scheduled: they are at different places
    "COLLECTIVE_STATE_MISMATCH": ClassId.RANK_DESYNC,
}


def parse_torchfrtrace(text: str) -> list[dict]:
    """One dict per finding block: seq, class (our catalog id; None where the analyzer's error type
    has no counterpart), culprit_ranks, op, raw error type.

    The text is read by the loader's own torchfrtrace reader (:mod:`denpex_nb.ingest.frtrace_text`),
    so there is one parser of that output; this only maps its rows onto the comparison's terms."""
    import tempfile

    from ..ingest import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "torchfrtrace.txt"
        path.write_text(text, encoding="utf-8")
        errors = load(str(path), format="frtrace", progress=False).errors
    out = []
    for row in errors[errors["kind"].astype(object) == ErrorKind.FR_FINDING].itertuples(index=False):
        if pd.isna(row.seq):
            continue  # "missing dump files" and other findings without a collective
        etype = None if pd.isna(row.error_type) else str(row.error_type)
        missing = list(row.missing_ranks or ())
        if etype is None and missing:
            cls, etype, culprits = ClassId.RANK_DESYNC, "NOT_JOINING", sorted(missing)
        else:
            cls, culprits = _TYPE_CLASS.get(etype), sorted(row.culprit_ranks or ())
        out.append(
            {
                "seq": int(row.seq),
                "class": cls,
                "culprit_ranks": culprits,
                "error_type": etype,
                "op": None if pd.isna(row.op) else str(row.op),
            }
        )
    return out

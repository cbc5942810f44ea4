"""Regenerate the recorded runs: ``denpex-nb repro record [--out data/recorded] [--backend gloo]``.

Layout: ``<out>/<backend>/<scenario>/<variant>-<mode>-w<N>/`` (a normal run folder, see
:mod:`denpex_nb.repro.launch`) for every scenario, both variants, modes ``plain`` (no debug
variables) and ``detail`` (TORCH_DISTRIBUTED_DEBUG=DETAIL, TORCH_CPP_LOG_LEVEL=INFO), and 2 and 4
ranks. Every run has the tracer on and Flight Recorder dumps; the 2-rank plain runs also keep the
dumps' call stacks (1.5-3 s of CPU per rank, too slow for every run). Log files are capped per
rank and stream (head and tail kept) and TCPStore ``[c10d - trace]`` lines are left out (both
counted in each manifest), so that the whole tree stays small. DDP segfaults under DETAIL on
torch 2.13 CPU, so ddp-unused-parameters is recorded with ``info`` instead (``*-info-w<N>``). ``<out>/<backend>/
index.json`` lists every run with its outcome.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import registry
from .launch import check_backend, run

MODES = {"plain": "off", "detail": "detail"}
WORLD_SIZES = (2, 4)
#: scenario -> {mode: debug setting used instead}. torch 2.13 (CPU) segfaults in DDP's constructor
#: under DETAIL, before the planted bug is reached; INFO is recorded for it (folder ``*-info-w<N>``).
MODE_SUBSTITUTES = {"ddp-unused-parameters": {"detail": "info"}}
#: TCPStore key traffic that TORCH_CPP_LOG_LEVEL=INFO logs on rank 0 (most of a DETAIL run's bytes,
#: nothing about collectives): left out of the recorded logs, counted in each manifest
DROP = ("[c10d - trace]",)
#: per rank and stream; head and tail halves are kept
MAX_LOG_LINES = 300


def run_dir(out, backend: str, scenario: str, variant: str, mode: str, world_size: int) -> Path:
    return Path(out) / backend / scenario / f"{variant}-{mode}-w{world_size}"


def record_all(
    out="data/recorded",
    *,
    backend: str = "gloo",
    scenarios=None,
    variants=registry.VARIANTS,
    modes=tuple(MODES),
    world_sizes=WORLD_SIZES,
    timeout: float = 5.0,
    progress: bool = False,
) -> list[Path]:
    """Run every combination and write it under ``out``; returns the run folders."""
    if min(world_sizes) < 2:
        from ..errors import UsageError

        raise UsageError(f"world sizes must be at least 2, got {list(world_sizes)}", fix="pass --world-size 2 or more")
    check_backend(backend, max(world_sizes))
    ids = [registry.get(sid).id for sid in (scenarios or registry.scenarios())]
    written: list[Path] = []
    index = []
    total = len(ids) * len(variants) * len(modes) * len(world_sizes)
    for sid in ids:
        for variant in variants:
            for wanted in modes:
                mode = MODE_SUBSTITUTES.get(sid, {}).get(wanted, wanted)
                for ws in world_sizes:
                    folder = run_dir(out, backend, sid, variant, mode, ws)
                    if folder.exists():
                        shutil.rmtree(folder)
                    result = run(
                        sid,
                        fixed=(variant == "fixed"),
                        world_size=ws,
                        backend=backend,
                        debug=MODES.get(mode, mode),
                        flight_recorder=True,
                        trace=True,
                        timeout=timeout,
                        out=folder,
                        fr_stack_traces=(mode == "plain" and ws == 2),
                        max_log_lines=MAX_LOG_LINES,
                        drop_lines_containing=DROP,
                        wall_limit=timeout + 60,
                    )
                    written.append(folder)
                    index.append(
                        {
                            "path": str(folder.relative_to(Path(out) / backend)),
                            "scenario": sid,
                            "variant": variant,
                            "mode": mode,
                            "world_size": ws,
                            "exit_codes": result.exit_codes,
                            "signals": result.signals,
                            "wall_s": round(result.wall_s, 2),
                            "expected": result.manifest["expected"],
                        }
                    )
                    if progress:
                        print(
                            f"[{len(written)}/{total}] {folder}: exit codes {result.exit_codes}, {result.wall_s:.1f} s",
                            flush=True,
                        )
    index_path = Path(out) / backend / "index.json"
    if scenarios is not None and index_path.exists():  # a partial re-record keeps the other entries
        keep = [e for e in json.loads(index_path.read_text()) if e["path"] not in {i["path"] for i in index}]
        index = keep + index
    index_path.write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return written

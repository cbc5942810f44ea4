"""Where does the compiled Flight Recorder decoder pay for its load? (``COMPILED_MIN_BYTES``)

    python benchmarks/bench_fr_decoder_choice.py                       # 1, 2, 8, 16, 32, 128 dumps x 2000 entries
    python benchmarks/bench_fr_decoder_choice.py --counts 1,8 --entries 2000,200 --repeat 1

For each incident (N synthetic dumps of E entries, one planted size mismatch), time
``denpex-nb diagnose --json`` in a fresh process with each ``DENPEX_FR_DECODER`` mode, the modes
interleaved (same minute, same machine state), best of ``--repeat``. ``compiled`` pays ~1-2 s to
import numba and load its cached code, then ~ms per dump; ``python`` (no numba: the restricted
unpickler behind a plain-Python bounds scanner) pays nothing up front and ~60 ms per 2000-entry
dump; ``unpickle`` is the unpickler with the compiled scanner (numba loaded, nothing gained);
``auto`` is what a user gets. The crossover is reported by total pickle bytes and dump count.
Writes benchmarks/results/bench_fr_decoder_choice.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from denpex_nb.testing.frcompare import write_synthetic_dumps  # noqa: E402

MODES = ("compiled", "python", "unpickle", "auto")


def cli(folder: Path, mode: str) -> tuple[float, str | None]:
    env = dict(os.environ, DENPEX_FR_DECODER=mode)
    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from denpex_nb.cli import main; sys.exit(main())",
            "diagnose",
            str(folder),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    wall = time.perf_counter() - t
    try:
        verdict = json.loads(proc.stdout)["verdict"] if proc.returncode == 0 else None
    except (ValueError, KeyError):
        verdict = None
    return wall, verdict


def crossover(rows: list[dict]) -> dict:
    """The smallest measured incident where compiled beats python, and the largest where it does not."""
    wins = sorted((r for r in rows if r["compiled_s"] < r["python_s"]), key=lambda r: r["mb"])
    losses = sorted((r for r in rows if r["compiled_s"] >= r["python_s"]), key=lambda r: r["mb"])
    return {
        "compiled_wins_from_mb": wins[0]["mb"] if wins else None,
        "python_wins_up_to_mb": losses[-1]["mb"] if losses else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1,2,8,16,32,128")
    ap.add_argument("--entries", default="2000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=str(HERE / "_data" / "decoder_choice"))
    args = ap.parse_args(argv)
    data = Path(args.data)
    # numba's cache must be current before timing (a stale one would recompile inside a run)
    subprocess.run([sys.executable, "-c", "from denpex_nb.ingest.fr_columns import warm; assert warm()"], check=True)
    rows = []
    for entries in [int(x) for x in args.entries.split(",")]:
        for count in [int(x) for x in args.counts.split(",")]:
            folder = data / f"{count}x{entries}"
            if folder.exists():
                shutil.rmtree(folder)
            planted = write_synthetic_dumps(folder, count, entries, "size", plant_rank=count - 1)
            mb = sum(os.path.getsize(f) for f in planted.files) / 1e6
            best = {m: float("inf") for m in MODES}
            verdicts = set()
            for _ in range(args.repeat):
                for m in MODES:  # interleaved: the modes see the same machine state
                    wall, verdict = cli(folder, m)
                    best[m] = min(best[m], wall)
                    verdicts.add(verdict)
            row = {
                "dumps": count,
                "entries": entries,
                "mb": round(mb, 2),
                **{f"{m}_s": round(best[m], 2) for m in MODES},
                "verdicts": sorted(map(str, verdicts)),
                "load_avg": round(os.getloadavg()[0], 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    from denpex_nb.ingest.flight_recorder import COMPILED_MIN_BYTES

    out = {
        "benchmark": "bench_fr_decoder_choice",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "COMPILED_MIN_BYTES": COMPILED_MIN_BYTES,
        "crossover": crossover(rows),
        "rows": rows,
    }
    print(json.dumps(out["crossover"]))
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / "bench_fr_decoder_choice.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

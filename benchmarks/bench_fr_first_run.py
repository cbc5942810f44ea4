"""The first Flight Recorder diagnosis after ``pip install`` against the runs after it.

    python benchmarks/bench_fr_first_run.py                         # 1024 dumps x 2000 entries
    python benchmarks/bench_fr_first_run.py --ranks 64 --warm 2     # quick

For each build of the decoder's kernels (``native``: the C extension ``setup.py`` builds;
``numba``: the same functions compiled by numba on first use, ``DENPEX_FR_KERNELS=numba``), the
package is installed afresh with ``pip install --no-deps --no-build-isolation --target DIR .``
(a new folder each time: no bytecode, numba cache or build left from before; pip compiles the
bytecode as it does for users), then ``denpex-nb diagnose DUMPS --json`` runs in fresh processes
with ``PYTHONPATH=DIR``: the first run, then ``--warm`` more. Builds alternate per round. Reported:
the first run, the median warm run, their ratio, and whether every run found the planted
mismatch. Bars (issue 17): first run within 1.5x of a warm one (< 3 s), warm < 2 s.
Writes benchmarks/results/bench_fr_first_run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from denpex_nb.testing.frcompare import write_synthetic_dumps  # noqa: E402


def install(dest: Path) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(dest), "."],
        cwd=ROOT,
        check=True,
        timeout=900,
        capture_output=True,
    )
    return time.perf_counter() - t


def diagnose(site: Path, folder: Path, kernels: str, plant_rank: int) -> tuple[float, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DENPEX_", "NUMBA_CACHE"))}
    env["PYTHONPATH"] = str(site)
    if kernels == "numba":
        env["DENPEX_FR_KERNELS"] = "numba"
    cmd = [sys.executable, "-c", "import sys; from denpex_nb.cli import main; sys.exit(main())"]
    t = time.perf_counter()
    proc = subprocess.run(
        cmd + ["diagnose", str(folder), "--json"], capture_output=True, text=True, env=env, timeout=1800, cwd="/"
    )
    wall = time.perf_counter() - t
    try:
        out = json.loads(proc.stdout)
        ok = proc.returncode == 0 and out["verdict"] == "shape-mismatch" and out["culprit_ranks"] == [plant_rank]
    except (ValueError, KeyError):
        ok = False
    return wall, ok


def backend_of(site: Path, kernels: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(site))
    if kernels == "numba":
        env["DENPEX_FR_KERNELS"] = "numba"
    code = "from denpex_nb.ingest import pickle_nodes as p; print(p.backend(), p.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd="/")
    return out.stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=3, help="warm runs after the first, per build")
    ap.add_argument("--kernels", default="native,numba")
    ap.add_argument("--data", default=str(HERE / "_data"))
    args = ap.parse_args(argv)
    folder = Path(args.data) / f"fr_first_{args.ranks}x{args.entries}"
    plant = min(17, args.ranks - 1)
    if not folder.exists() or len(list(folder.iterdir())) != args.ranks:
        shutil.rmtree(folder, ignore_errors=True)
        write_synthetic_dumps(folder, args.ranks, args.entries, "size", plant_rank=plant)
    for f in folder.iterdir():  # in page cache, as the issue measures
        f.read_bytes()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="frfirst_") as tmp:
        sites = {}
        for k in args.kernels.split(","):
            sites[k] = Path(tmp) / k
            rows[k] = {"install_s": round(install(sites[k]), 1), "backend": backend_of(sites[k], k)}
        runs = {k: [] for k in sites}
        oks = {k: [] for k in sites}
        for _round in range(1 + args.warm):  # alternate the builds: the same machine state
            for k, site in sites.items():
                wall, ok = diagnose(site, folder, k, plant)
                runs[k].append(wall)
                oks[k].append(ok)
        for k in sites:
            first, warm = runs[k][0], statistics.median(runs[k][1:])
            rows[k].update(
                first_s=round(first, 2),
                warm_median_s=round(warm, 2),
                warm_all_s=[round(x, 2) for x in runs[k][1:]],
                first_over_warm=round(first / warm, 2),
                all_correct=all(oks[k]),
            )
            print(k, json.dumps(rows[k]), flush=True)
    out = {
        "benchmark": "bench_fr_first_run",
        "command": "python benchmarks/bench_fr_first_run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_end": os.getloadavg()},
        "ranks": args.ranks,
        "entries": args.entries,
        "bars": {"first_over_warm": 1.5, "first_s": 3.0, "warm_s": 2.0},
        "builds": rows,
    }
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "bench_fr_first_run.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

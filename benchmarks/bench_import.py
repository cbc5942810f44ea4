"""Light doors: what a fresh process pays to import the tracer, and to diagnose a small incident.

* ``import denpex_nb.trace`` (the line every training rank adds), measured with
  ``python -X importtime`` in fresh processes: the cumulative import time of ``denpex_nb.trace``
  (median of ``--runs``), and whether pandas or anything of ``denpex_nb.analysis`` got loaded;
* the same for ``import denpex_nb`` (the lazy facade);
* a 2-dump Flight Recorder incident (synthetic, 2 ranks x 200 entries) diagnosed in a fresh
  process, ``python -c "load + diagnose"`` wall time, median of ``--runs``.

Bars (issue 11): trace import < 50 ms with no pandas; a 2-dump incident < 1.5 s.

    python benchmarks/bench_import.py [--runs 7]

Writes benchmarks/results/bench_import.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

PROBE = (
    "import sys, {module}; print('MODULES', int('pandas' in sys.modules), "
    "int(any(m.startswith('denpex_nb.analysis') for m in sys.modules)))"
)


def import_cost(module: str) -> dict:
    """One fresh process: ``-X importtime`` cumulative microseconds of ``module`` and what got loaded."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE.format(module=module)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    run.check_returncode()
    cumulative = None
    for line in run.stderr.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            cumulative = int(parts[1])
    pandas, analysis = (int(x) for x in run.stdout.split("MODULES", 1)[1].split())
    return {"ms": cumulative / 1000, "pandas": bool(pandas), "analysis": bool(analysis)}


def small_incident_wall(folder: str) -> float:
    code = f"import denpex_nb as dx; d = dx.diagnose(dx.load({folder!r}, progress=False)); print(d.verdict)"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120, cwd=ROOT)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    out: dict = {
        "benchmark": "bench_import",
        "runs": args.runs,
        "python": sys.version.split()[0],
        "load_average": list(os.getloadavg()),
    }
    for module in ("denpex_nb.trace", "denpex_nb"):
        runs = [import_cost(module) for _ in range(args.runs)]
        out[module] = {
            "median_ms": round(statistics.median(r["ms"] for r in runs), 1),
            "min_ms": round(min(r["ms"] for r in runs), 1),
            "loads_pandas": any(r["pandas"] for r in runs),
            "loads_analysis": any(r["analysis"] for r in runs),
        }
    with tempfile.TemporaryDirectory() as tmp:
        write_synthetic_dumps(tmp, world_size=2, entries=200)
        walls = [small_incident_wall(tmp) for _ in range(args.runs)]
    out["two_dump_incident"] = {"median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3)}
    t = out["denpex_nb.trace"]
    out["bars_met"] = bool(
        t["median_ms"] < 50
        and not t["loads_pandas"]
        and not t["loads_analysis"]
        and out["two_dump_incident"]["median_s"] < 1.5
    )
    print(
        f"import denpex_nb.trace: median {t['median_ms']} ms (min {t['min_ms']}), pandas loaded: "
        f"{t['loads_pandas']}, analysis loaded: {t['loads_analysis']}"
    )
    f = out["denpex_nb"]
    print(f"import denpex_nb:       median {f['median_ms']} ms (min {f['min_ms']}), pandas loaded: {f['loads_pandas']}")
    print(f"2-dump FR incident, load + diagnose in a fresh process: median {out['two_dump_incident']['median_s']} s")
    print("bars (trace < 50 ms, no pandas; 2-dump < 1.5 s):", "met" if out["bars_met"] else "MISSED")
    if not args.no_write:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "bench_import.json"), "w") as fh:
            json.dump(out, fh, indent=1)
    return 0 if out["bars_met"] else 1


if __name__ == "__main__":
    sys.exit(main())

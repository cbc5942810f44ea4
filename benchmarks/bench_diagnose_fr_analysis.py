"""Diagnosis side of a large Flight Recorder incident, two checkouts side by side.

Why: ``bench_diagnose_fr.py`` times load + diagnose of one checkout; a change to the analysis
layer is judged against the code before it on the same dumps, in the same minutes (the machine
is shared, so figures taken apart are not comparable). Each round runs, alternating, a fresh
process per checkout that loads the dumps (``jobs=1``), times ``diagnose`` (wall and CPU) and
``to_json``, then the whole CLI ``diagnose DIR --json`` (wall, user+sys CPU, a hash of its
output: the two checkouts must print the same bytes). Median of the rounds; ``uptime``'s load
is recorded with each run. Both run as after ``pip install``, their bytecode cached (_cli_env.py).

    python benchmarks/bench_diagnose_fr_analysis.py --before /path/to/old/checkout \\
        --data /tmp/fr_1024x2000 [--rounds 3] [--key NAME]

``--data`` is a folder of dumps (``denpex_nb.testing.frcompare.write_synthetic_dumps``); both
checkouts need their compiled decoder built (``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _cli_env import cli_env, warm_bytecode  # noqa: E402 - as after pip install: bytecode cached

RESULTS = HERE / "results" / "bench_diagnose_fr_analysis.json"

_INPROC = """
import json, sys, time
import denpex_nb as dx
t = time.perf_counter(); c = time.process_time()
inc = dx.load(sys.argv[1], jobs=1)
load_s, load_cpu = time.perf_counter() - t, time.process_time() - c
t = time.perf_counter(); c = time.process_time()
dg = dx.diagnose(inc)
diag_s, diag_cpu = time.perf_counter() - t, time.process_time() - c
t = time.perf_counter(); dg.to_json(); json_s = time.perf_counter() - t
print(json.dumps(dict(load_s=load_s, load_cpu=load_cpu, diagnose_s=diag_s, diagnose_cpu_s=diag_cpu,
                      to_json_s=json_s, verdict=str(dg.verdict), culprits=list(dg.culprit_ranks))))
"""


def _load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


def _env(checkout: Path) -> dict:
    return cli_env(checkout)


def inproc(checkout: Path, data: Path, timeout: float) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _INPROC, str(data)],
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli(checkout: Path, data: Path, timeout: float) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(data), "--json"],
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        timeout=timeout,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cli_s": wall, "cli_cpu_s": cpu, "rc": out.returncode, "sha": hashlib.sha256(out.stdout).hexdigest()[:16]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="checkout of the code before the change")
    ap.add_argument("--after", default=str(HERE.parent), help="checkout of the changed code (this one)")
    ap.add_argument("--data", required=True, help="folder of Flight Recorder dumps")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--key", default=time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), help="results key")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for checkout in sides.values():
        warm_bytecode(checkout, ["diagnose", str(Path(args.data).resolve()), "--json"])
    for _ in range(args.rounds):
        for side, checkout in sides.items():
            row = {"load_average": _load(), **inproc(checkout, Path(args.data), args.timeout)}
            row.update(cli(checkout, Path(args.data), args.timeout))
            runs[side].append(row)
            print(side, json.dumps(row), flush=True)
    summary = {
        side: {
            k: round(statistics.median(r[k] for r in rows), 3)
            for k in ("load_s", "diagnose_s", "diagnose_cpu_s", "to_json_s", "cli_s", "cli_cpu_s")
        }
        for side, rows in runs.items()
    }
    same = len({r["sha"] for rows in runs.values() for r in rows}) == 1
    verdicts = {(r["verdict"], tuple(r["culprits"])) for rows in runs.values() for r in rows}
    result = {"data": args.data, "rounds": args.rounds, "median": summary, "cli_json_identical": same}
    result["verdicts"] = sorted(f"{v} {list(c)}" for v, c in verdicts)
    result["runs"] = runs
    print(json.dumps({k: result[k] for k in ("median", "cli_json_identical", "verdicts")}, indent=1))
    if not args.no_write:
        old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        if args.key in old:
            raise SystemExit(
                f"key {args.key!r} already in {RESULTS}: choose another --key (figures are never overwritten)"
            )
        old[args.key] = result
        RESULTS.write_text(json.dumps(old, indent=1) + "\n")


if __name__ == "__main__":
    main()

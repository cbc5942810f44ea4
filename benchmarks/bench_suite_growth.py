"""How much the property and decision tests of issue #15 add to the suite's wall time (bar: <= 20 %).

Runs the whole suite once with per-test durations (``pytest --durations=0``) and sums the time of
the tests in the files the issue added (``tests/analysis/test_properties_*``,
``tests/analysis/test_decisions_*``, ``tests/ingest/test_properties_readers.py``, the mutation
campaign's kill tests ``tests/{analysis,ingest}/test_kills_*`` and the fix's new test); the growth is that sum over the rest of the suite. One run, so both sides share the machine's
load. Writes ``benchmarks/results/bench_suite_growth.json``.

    python benchmarks/bench_suite_growth.py            # the whole suite (minutes)
    python benchmarks/bench_suite_growth.py --added    # only the added files: their cost alone

With ``--added`` the rest of the suite is not run: the growth is then the added time over a stated
suite time (``--suite-s``, default 420 s: the whole suite alone on this machine, ~7 min), and the
process CPU time is recorded too (the wall time of a loaded machine overstates the cost).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "bench_suite_growth.json")
ADDED = re.compile(
    r"^tests/analysis/test_(?:properties|decisions|kills)_\w+\.py::|^tests/ingest/test_properties_readers\.py::"
    r"|^tests/ingest/test_kills_\w+\.py::"
    r"|^tests/test_fixes\.py::test_all_reduce_padded_pads_with_the_ops_identity"
)
_DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(\S+)", re.M)


ADDED_FILES = [
    "tests/analysis/test_decisions_*.py",
    "tests/analysis/test_properties_*.py",
    "tests/ingest/test_properties_readers.py",
    "tests/analysis/test_kills_*.py",
    "tests/ingest/test_kills_*.py",
]


def main(argv: list[str]) -> int:
    added_only = "--added" in argv
    suite_s = 420.0
    if "--suite-s" in argv:
        suite_s = float(argv[argv.index("--suite-s") + 1])
    if added_only:
        import glob

        targets = sorted(f for pat in ADDED_FILES for f in glob.glob(os.path.join(ROOT, pat)))
        targets = [os.path.relpath(f, ROOT) for f in targets]
    else:
        targets = [a for a in argv if not a.startswith("--")] or ["tests"]
    env = dict(os.environ, PYTHONPATH=ROOT)
    cpu0 = os.times()
    t0 = time.monotonic()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=0",
            "--durations-min=0",
            *targets,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=4 * 3600,
    )
    wall = time.monotonic() - t0
    cpu1 = os.times()
    cpu = (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)
    added = rest = 0.0
    per_file: dict[str, float] = {}
    for secs, _phase, node in _DURATION.findall(run.stdout):
        s = float(secs)
        if ADDED.match(node):
            added += s
            f = node.split("::")[0]
            per_file[f] = per_file.get(f, 0.0) + s
        else:
            rest += s
    tail = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    doc = {
        "bench": "bench_suite_growth",
        "issue": 15,
        "targets": targets,
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0],
        "pytest_rc": run.returncode,
        "pytest_summary": tail,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "added_tests_s": round(added, 1),
        "rest_of_suite_s": round(rest, 1),
        "growth_pct": round(100 * added / rest, 1) if rest else None,
        "suite_s_stated": suite_s if added_only else None,
        "growth_pct_of_stated_suite_wall": round(100 * added / suite_s, 1) if added_only else None,
        "growth_pct_of_stated_suite_cpu": round(100 * cpu / suite_s, 1) if added_only else None,
        "added_per_file_s": {k: round(v, 1) for k, v in sorted(per_file.items(), key=lambda kv: -kv[1])},
    }
    print(json.dumps(doc, indent=2))
    if not argv or added_only:
        out = OUT if not added_only else OUT.replace(".json", "_added.json")
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

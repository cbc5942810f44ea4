"""Every course notebook under papermill, as a learner's "Run All" would (goals: each lesson < 60 s, all < 8 min).

python benchmarks/bench_course.py [--only NAME ...] [--world-size 2] [--timeout 5.0] [--keep DIR]
-> prints one line per notebook, writes benchmarks/results/bench_course.json

Each notebook is executed by ``denpex_nb.report.execute`` (papermill, a fresh kernel) with the
lessons' default parameters (2 ranks, 5 s collective timeout), one after the other, as a learner
runs them. The wall time counts the kernel's start and every cell; the per-cell split (papermill's
own durations) shows where it goes (the three real runs: broken, broken under debug, fixed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LESSON_GOAL_S = 60.0
COURSE_GOAL_S = 8 * 60.0


def course_notebooks() -> list[str]:
    from denpex_nb import teach

    return ["course", *(i.notebook for i in teach.LESSONS), teach.MYSTERY_NOTEBOOK]


def run_one(name: str, params: dict, keep: Path | None = None) -> dict:
    from denpex_nb import nbfiles, report

    nb = nbfiles.read(name)
    t0 = time.perf_counter()
    executed, error = report.execute(nb, params, cwd=str(ROOT / "notebooks"), timeout=600)
    wall = time.perf_counter() - t0
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if keep is not None:  # the executed notebook and its page, to look at
        import nbformat

        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, str(keep / f"{name}.ipynb"))
        (keep / f"{name}.html").write_text(report.to_html(executed, title=name), encoding="utf-8")
    slow_cells = sorted(
        (
            {"cell": c.source.splitlines()[0][:70], "s": round(c.metadata.get("papermill", {}).get("duration") or 0, 2)}
            for c in executed.cells
            if c.cell_type == "code"
        ),
        key=lambda x: -x["s"],
    )[:4]
    return {
        "notebook": name,
        "wall_s": round(wall, 1),
        "ok": error is None and not errors,
        "error": (str(error) if error else errors[0].get("evalue", "") if errors else "")[:300],
        "slowest_cells": slow_cells,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="notebook names (default: the whole course)")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_course.json"))
    ap.add_argument("--keep", help="folder to keep the executed notebooks and their HTML pages in")
    args = ap.parse_args()
    names = args.only or course_notebooks()
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-course-") as tmp:
        for name in names:
            if name.startswith("teach_"):
                params = {"world_size": args.world_size, "timeout": args.timeout, "out": str(Path(tmp) / name)}
            elif name == "course_mystery":
                params = {"out": str(Path(tmp) / name)}
            else:
                params = {}
            row = run_one(name, params, Path(args.keep) if args.keep else None)
            row["within_goal"] = row["wall_s"] < LESSON_GOAL_S
            rows.append(row)
            print(f"{name:28s} {row['wall_s']:6.1f} s  {'ok' if row['ok'] else 'FAILED ' + row['error']}", flush=True)
    total = time.perf_counter() - t0
    result = {
        "lesson_goal_s": LESSON_GOAL_S,
        "course_goal_s": COURSE_GOAL_S,
        "world_size": args.world_size,
        "collective_timeout_s": args.timeout,
        "total_s": round(total, 1),
        "course_within_goal": total < COURSE_GOAL_S,
        "every_lesson_within_goal": all(r["within_goal"] for r in rows),
        "all_ok": all(r["ok"] for r in rows),
        "notebooks": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "load_1min_at_end": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
        },
    }
    print(
        f"total {total:.1f} s (goal < {COURSE_GOAL_S:.0f} s); every lesson < {LESSON_GOAL_S:.0f} s: "
        f"{result['every_lesson_within_goal']}"
    )
    if not args.only:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["all_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

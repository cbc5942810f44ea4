"""Swimlane render time: 512 ranks x 200 collectives (goal < 3 s), plus 2, 8 and 64 ranks for scale.

python benchmarks/bench_swimlane.py   -> prints the figures, writes benchmarks/results/bench_swimlane.json
The time covers building the figure from the Incident and rendering it to PNG (what a notebook or
report pays). The incident is synthetic (denpex_nb.teach.synthetic_incident): one shape mismatch at
the last collective on rank 300.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from denpex_nb import plot
from denpex_nb.teach import synthetic_incident

CASES = [(2, 200), (8, 200), (64, 200), (512, 200)]


def bench(n_ranks: int, n_coll: int, repeat: int = 3) -> dict:
    inc = synthetic_incident(n_ranks, n_coll, mismatch_at=n_coll, culprit=min(300, n_ranks - 1))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fig = plot.swimlane(inc)
        png = plot.to_png(fig)
        times.append(time.perf_counter() - t0)
    return {
        "ranks": n_ranks,
        "collectives": n_coll,
        "events": int(len(inc.events)),
        "best_s": round(min(times), 3),
        "median_s": round(sorted(times)[len(times) // 2], 3),
        "png_bytes": len(png),
        "mode": "heatmap" if n_ranks > plot.HEATMAP_THRESHOLD else "lanes",
    }


def main() -> None:
    plot.to_png(plot.swimlane(synthetic_incident(2, 4)))  # warm matplotlib's font cache
    rows = [bench(n, c) for n, c in CASES]
    for r in rows:
        print(
            f"swimlane {r['ranks']:>4} ranks x {r['collectives']} collectives ({r['events']} events, {r['mode']}): "
            f"best {r['best_s']:.2f} s, median {r['median_s']:.2f} s"
        )
    goal = next(r for r in rows if r["ranks"] == 512)
    print(f"goal: 512 x 200 under 3 s -> {'met' if goal['median_s'] < 3 else 'NOT met'} ({goal['median_s']:.2f} s)")
    out = Path(__file__).resolve().parent / "results" / "bench_swimlane.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "cases": rows,
                "goal_s": 3.0,
                "cpus": os.cpu_count(),
                "load_avg": os.getloadavg(),
                "python": platform.python_version(),
            },
            indent=1,
        )
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

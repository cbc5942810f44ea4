"""The blind first score of a batch of new wild cases: run once, recorded, never rerun.

"Label before you look": a batch of new real cases (``tests/data/wild/<id>/case.json`` with
``"batch": NAME``) gets its truth written and committed before the tool ever sees it. This script
is that first look. It refuses to run when any case of the batch has uncommitted changes (the
truth must be on record first) or when the batch was already scored (the first score is the only
honest measure of generalisation; later scores are what ``bench_accuracy.py`` reports). It writes
``benchmarks/results/blind/NAME.json``: the code commit it ran on, the commit that last touched the
labels, every case's verdict and the totals, scored by the same function as the benchmark
(``tests/wild.py``).

    python benchmarks/bench_blind.py --batch threads-2026-12-a
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests import wild  # noqa: E402

BLIND = os.path.join(HERE, "results", "blind")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", required=True, help="the cases whose case.json has this batch name")
    args = ap.parse_args(argv)
    out_path = os.path.join(BLIND, f"{args.batch}.json")
    if os.path.exists(out_path):
        print(f"bench_blind: batch {args.batch!r} was already scored blind ({out_path}); its first score stands")
        return 2
    batch = [c for c in wild.cases() if c.get("batch") == args.batch]
    if not batch:
        print(f"bench_blind: no case has batch {args.batch!r}")
        return 2
    dirs = [os.path.relpath(c["dir"], ROOT) for c in batch]
    dirty = _git("status", "--porcelain", "--", *dirs)
    if dirty:
        print("bench_blind: commit the labels first; uncommitted:\n" + dirty)
        return 2
    t0 = time.perf_counter()
    scores = [wild.score_case(c) for c in batch]
    wall = time.perf_counter() - t0
    tot = wild.totals(scores)
    out = {
        "batch": args.batch,
        "code_commit": _git("rev-parse", "HEAD"),
        "labels_commit": _git("log", "-1", "--format=%H", "--", *dirs),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "totals": tot,
        "misses": [
            {"id": s.id, "verdict": s.verdict, "confidence": s.confidence, "truth": s.truth_classes}
            for s in scores
            if not s.right or s.invented_culprit or s.false_all_clear
        ],
        "cases": [wild.as_dict(s) for s in scores],
        "wall_s": round(wall, 2),
        "how": f"python benchmarks/bench_blind.py --batch {args.batch}",
        "python": platform.python_version(),
    }
    os.makedirs(BLIND, exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(
        f"blind {args.batch}: {tot['right']}/{tot['cases']} right ({100 * tot['right_share']:.1f} %), "
        f"false all-clears {tot['false_all_clears']}, invented culprits {tot['invented_culprits']}, "
        f"high-confidence right {tot['high_confidence_right']}/{tot['high_confidence']}; written to {out_path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

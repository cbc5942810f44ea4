"""Accuracy on evidence nobody here produced: the wild corpus (``tests/data/wild/``).

Each case is a log excerpt pasted in a public issue thread, with the thread as provenance and a
truth recorded from the thread (acceptable classes, culprit or "not determinable"). This script
diagnoses every case as a user would and prints one row per case, then the totals: verdicts
right, invented culprits, false all-clears (``no-failure`` where a rank failed), and the share of
``high``-confidence verdicts that are right. Writes ``benchmarks/results/bench_accuracy.json``,
which ``tests/analysis/test_wild.py`` holds the code to (the totals may not regress).

    python benchmarks/bench_accuracy.py            # every case
    python benchmarks/bench_accuracy.py --filter vllm --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)

from tests import wild  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filter", default="", help="only cases whose id contains this")
    ap.add_argument("--no-write", action="store_true", help="do not write the results file")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    scores = [wild.score_case(c) for c in wild.cases() if args.filter in c["id"]]
    wall = time.perf_counter() - t0
    w = max((len(s.id) for s in scores), default=10)
    print(f"{'case':<{w}}  {'ok':<3} {'verdict':<21} {'conf':<6} {'culprits':<10} truth")
    for s in scores:
        mark = "ok" if s.right and not s.invented_culprit and not s.false_all_clear else "XX"
        flags = ("  INVENTED" if s.invented_culprit else "") + ("  FALSE-ALL-CLEAR" if s.false_all_clear else "")
        print(
            f"{s.id:<{w}}  {mark:<3} {s.verdict:<21} {s.confidence:<6} {str(s.culprits):<10} "
            f"{'/'.join(s.truth_classes)} culprit={s.truth_culprits}{flags}"
        )
    tot = wild.totals(scores)
    print()
    print(
        f"cases {tot['cases']}: right {tot['right']} ({100 * tot['right_share']:.1f} %), invented culprits "
        f"{tot['invented_culprits']}, false all-clears {tot['false_all_clears']}, high-confidence right "
        f"{tot['high_confidence_right']}/{tot['high_confidence']}"
        + (f" ({100 * tot['high_confidence_right_share']:.1f} %)" if tot["high_confidence"] else "")
        + f"; {wall:.1f} s"
    )
    if not args.no_write and not args.filter:
        out = {
            "totals": tot,
            "cases": [wild.as_dict(s) for s in scores],
            "wall_s": round(wall, 2),
            "how": "python benchmarks/bench_accuracy.py",
            "python": platform.python_version(),
        }
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "bench_accuracy.json"), "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

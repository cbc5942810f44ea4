"""Accuracy on evidence nobody here produced: the wild corpus (``tests/data/wild/``).

Each case is a log excerpt pasted in a public issue thread, with the thread as provenance and a
truth recorded from the thread (acceptable classes, culprit or "not determinable"). This script
diagnoses every case as a user would and prints one row per case, then:

* the totals: verdicts right, invented culprits, false all-clears (``no-failure`` where a rank
  failed), and the share of ``high``-confidence verdicts that are right;
* a confusion matrix by class (rows: the truth, the verdict itself when it is one of the truth's
  classes, else the truth's best class; columns: the verdict);
* the share of ``timeout-undetermined`` verdicts on cases whose truth is more specific (the
  truth's best class is not ``timeout-undetermined``): the safe default hiding a miss;
* precision per rule and confidence (the rule behind each verdict);
* each blind batch's first score (``benchmarks/results/blind/<batch>.json``, written once by
  ``bench_blind.py`` before anything was fixed for it) next to today's score on the same cases.

Writes ``benchmarks/results/bench_accuracy.json``, which ``tests/analysis/test_wild.py`` holds
the code to (a case recorded right stays right; no invented culprit, no false all-clear).

    python benchmarks/bench_accuracy.py            # every case
    python benchmarks/bench_accuracy.py --filter vllm --no-write
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)

from tests import wild  # noqa: E402

UNDETERMINED = "timeout-undetermined"


def _ok(s) -> bool:
    return s.right and not s.invented_culprit and not s.false_all_clear


def confusion(scores) -> dict[str, dict[str, int]]:
    """truth -> verdict -> count; the truth row of a right verdict is the verdict itself."""
    out: dict[str, Counter] = defaultdict(Counter)
    for s in scores:
        truth = s.verdict if s.right else s.truth_classes[0]
        out[truth][s.verdict] += 1
    return {t: dict(c) for t, c in sorted(out.items())}


def undetermined_more_specific(scores) -> dict:
    """``timeout-undetermined`` verdicts where the truth's best class is something more specific."""
    und = [s for s in scores if s.verdict == UNDETERMINED]
    hidden = [s.id for s in und if s.truth_classes[0] != UNDETERMINED]
    return {
        "undetermined_verdicts": len(und),
        "truth_more_specific": len(hidden),
        "share_of_cases": round(len(hidden) / max(len(scores), 1), 4),
        "share_of_undetermined": round(len(hidden) / len(und), 4) if und else None,
        "cases": hidden,
    }


def by_rule(scores) -> dict[str, dict]:
    """rule -> confidence -> {verdicts, right}: the precision of each rule at each confidence."""
    out: dict[str, dict] = defaultdict(dict)
    for s in scores:
        cell = out[s.rule or "(no-failure)"].setdefault(s.confidence, {"verdicts": 0, "right": 0})
        cell["verdicts"] += 1
        cell["right"] += _ok(s)
    return {r: out[r] for r in sorted(out)}


def blind_batches(scores) -> list[dict]:
    """Each recorded blind first score next to today's score on the same cases."""
    now = {s.id: s for s in scores}
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "results", "blind", "*.json"))):
        rec = json.load(open(path))
        ids = [c["id"] for c in rec.get("cases", [])]
        today = [now[i] for i in ids if i in now]
        out.append(
            {
                "batch": rec.get("batch"),
                "blind": rec.get("totals"),
                "blind_code_commit": rec.get("code_commit"),
                "today": wild.totals(today) if today else None,
                "today_missing": [i for i in ids if i not in now],
            }
        )
    return out


def _print_confusion(conf: dict) -> None:
    cols = sorted({v for row in conf.values() for v in row})
    short = {c: c.replace("-mismatch", "").replace("timeout-", "t-")[:11] for c in cols}
    print(f"{'truth / verdict':<22}" + "".join(f"{short[c]:>12}" for c in cols))
    for t, row in conf.items():
        print(f"{t:<22}" + "".join(f"{row.get(c, 0) or '.':>12}" for c in cols))


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
        mark = "ok" if _ok(s) else "XX"
        flags = ("  INVENTED" if s.invented_culprit else "") + ("  FALSE-ALL-CLEAR" if s.false_all_clear else "")
        print(
            f"{s.id:<{w}}  {mark:<3} {s.verdict:<21} {s.confidence:<6} {str(s.culprits):<10} "
            f"{'/'.join(s.truth_classes)} culprit={s.truth_culprits}{flags}"
        )
    tot = wild.totals(scores)
    conf = confusion(scores)
    und = undetermined_more_specific(scores)
    rules = by_rule(scores)
    blind = blind_batches(scores)
    print("\nconfusion matrix (rows: truth, columns: verdict):")
    _print_confusion(conf)
    print("\nprecision per rule (verdicts right / verdicts, by confidence):")
    for r, cells in rules.items():
        print(f"  {r:<26}" + "  ".join(f"{c} {v['right']}/{v['verdicts']}" for c, v in sorted(cells.items())))
    print(
        f"\ntimeout-undetermined where the truth is more specific: {und['truth_more_specific']} of "
        f"{und['undetermined_verdicts']} undetermined verdicts, {100 * und['share_of_cases']:.1f} % of the cases "
        f"(bar <= 3 %)"
    )
    for b in blind:
        bl, td = b["blind"] or {}, b["today"] or {}
        print(
            f"blind batch {b['batch']}: first score {bl.get('right')}/{bl.get('cases')} "
            f"(false all-clears {bl.get('false_all_clears')}, invented {bl.get('invented_culprits')}); today "
            f"{td.get('right')}/{td.get('cases')} (false all-clears {td.get('false_all_clears')}, invented "
            f"{td.get('invented_culprits')})"
        )
    print(
        f"\ncases {tot['cases']}: right {tot['right']} ({100 * tot['right_share']:.1f} %), invented culprits "
        f"{tot['invented_culprits']}, false all-clears {tot['false_all_clears']}, high-confidence right "
        f"{tot['high_confidence_right']}/{tot['high_confidence']}"
        + (f" ({100 * tot['high_confidence_right_share']:.1f} %)" if tot["high_confidence"] else "")
        + f"; {wall:.1f} s"
    )
    if not args.no_write and not args.filter:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = None
        out = {
            "totals": tot,
            "confusion": conf,
            "undetermined_more_specific": und,
            "by_rule": rules,
            "blind": blind,
            "cases": [wild.as_dict(s) for s in scores],
            "wall_s": round(wall, 2),
            "code_commit": commit,
            "how": "python benchmarks/bench_accuracy.py",
            "python": platform.python_version(),
        }
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "bench_accuracy.json"), "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

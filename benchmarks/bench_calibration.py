"""Does ``high`` mean right? Calibration of the verdict's confidence, per rule, over everything measured.

Reads the per-case rows of ``bench_accuracy.json`` (the wild corpus: real excerpts from public
threads) and ``bench_keyhole.json`` (every keyhole view of every recorded run, the full runs among
them), so run those two first. A high-confidence verdict is right when it is one of the truth's
classes (corpus) or passes the keyhole acceptance rule (views), and names no invented culprit.
Prints, per rule and confidence, how many verdicts and how many were right; the bar is >= 97 %
right at ``high``. A rule whose high verdicts miss the bar should drop to medium.

    python benchmarks/bench_accuracy.py && python benchmarks/bench_keyhole.py && python benchmarks/bench_calibration.py
"""

from __future__ import annotations

import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def rows() -> list[tuple[str, str, str, bool]]:
    """(source, rule, confidence, right) for every verdict measured."""
    out = []
    acc = json.load(open(os.path.join(RESULTS, "bench_accuracy.json")))
    for c in acc["cases"]:
        right = c["right"] and not c["invented_culprit"] and not c["false_all_clear"]
        out.append(("corpus", c.get("rule") or "(none)", c["confidence"], right))
    kh = json.load(open(os.path.join(RESULTS, "bench_keyhole.json")))
    for key, (n, ok) in kh.get("by_rule", {}).items():
        rule, conf = key.rsplit("|", 1)
        out += [("keyhole", rule, conf, True)] * ok + [("keyhole", rule, conf, False)] * (n - ok)
    return out


def main() -> int:
    data = rows()
    table = collections.defaultdict(lambda: [0, 0])
    for src, rule, conf, right in data:
        for key in ((rule, conf), ("ALL", conf), (f"ALL {src}", conf)):
            table[key][0] += 1
            table[key][1] += right
    print(f"{'rule':28} {'confidence':10} {'verdicts':>8} {'right':>6} {'share':>7}")
    for (rule, conf), (n, ok) in sorted(table.items(), key=lambda kv: (kv[0][0].startswith("ALL"), kv[0])):
        flag = "  <- below 97 %" if conf == "high" and ok / n < 0.97 else ""
        print(f"{rule:28} {conf:10} {n:8d} {ok:6d} {100 * ok / n:6.1f}%{flag}")
    n, ok = table[("ALL", "high")]
    print(f"\nhigh-confidence verdicts right: {ok}/{n} = {100 * ok / max(n, 1):.1f} % (bar >= 97 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

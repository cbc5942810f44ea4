"""Does ``high`` mean right? Calibration of the verdict's confidence, per rule, over everything measured.

Reads the per-case rows of ``bench_accuracy.json`` (the wild corpus: real excerpts from public
threads), of every blind first score in ``results/blind/`` (cases the code had never seen when it
was scored: the held-out measure) and ``bench_keyhole.json`` (every keyhole view of every recorded
run), so run ``bench_accuracy.py`` and ``bench_keyhole.py`` first. A verdict is right when it is one
of the truth's classes (corpus) or passes the keyhole acceptance rule (views), and names no invented
culprit. Prints, per rule and confidence, how many verdicts and how many were right, for each source
and all together; the bar is >= 97 % right at ``high``. A rule whose high verdicts miss the bar on
the corpus (today's or held out) is listed with its figures: its confidence must drop by design
(``denpex_nb/analysis/calibration.py`` records the caps and why). Writes
``results/bench_calibration.json``.

    python benchmarks/bench_accuracy.py && python benchmarks/bench_keyhole.py && python benchmarks/bench_calibration.py
"""

from __future__ import annotations

import collections
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
BAR = 0.97


def _case_right(c: dict) -> bool:
    return bool(c["right"]) and not c["invented_culprit"] and not c["false_all_clear"]


def rows() -> list[tuple[str, str, str, bool]]:
    """(source, rule, confidence, right) for every verdict measured."""
    out = []
    acc = json.load(open(os.path.join(RESULTS, "bench_accuracy.json")))
    for c in acc["cases"]:
        out.append(("corpus", c.get("rule") or "(none)", c["confidence"], _case_right(c)))
    for path in sorted(glob.glob(os.path.join(RESULTS, "blind", "*.json"))):
        for c in json.load(open(path)).get("cases", []):
            out.append(("held-out", c.get("rule") or "(none)", c["confidence"], _case_right(c)))
    kh_path = os.path.join(RESULTS, "bench_keyhole.json")
    if os.path.exists(kh_path):
        kh = json.load(open(kh_path))
        for key, (n, ok) in kh.get("by_rule", {}).items():
            rule, conf = key.rsplit("|", 1)
            out += [("keyhole", rule, conf, True)] * ok + [("keyhole", rule, conf, False)] * (n - ok)
    return out


def table(data) -> dict:
    t = collections.defaultdict(lambda: [0, 0])
    for src, rule, conf, right in data:
        for key in ((src, rule, conf), ("all", rule, conf), (src, "ALL", conf), ("all", "ALL", conf)):
            t[key][0] += 1
            t[key][1] += right
    return t


def main() -> int:
    t = table(rows())
    print(f"{'source':<9} {'rule':<26} {'confidence':<10} {'verdicts':>8} {'right':>6} {'share':>7}")
    below = []
    for (src, rule, conf), (n, ok) in sorted(t.items(), key=lambda kv: (kv[0][1] == "ALL", kv[0])):
        flag = ""
        if conf == "high" and ok / n < BAR:
            flag = "  <- below 97 %"
            if src in ("corpus", "held-out") and rule != "ALL":
                below.append({"source": src, "rule": rule, "verdicts": n, "right": ok})
        print(f"{src:<9} {rule:<26} {conf:<10} {n:8d} {ok:6d} {100 * ok / n:6.1f}%{flag}")
    out = {
        "by": [
            {"source": s, "rule": r, "confidence": c, "verdicts": n, "right": ok}
            for (s, r, c), (n, ok) in sorted(t.items())
        ],
        "high_below_bar": below,
        "how": "python benchmarks/bench_calibration.py (after bench_accuracy.py and bench_keyhole.py)",
    }
    for src in ("corpus", "held-out", "keyhole", "all"):
        n, ok = t.get((src, "ALL", "high"), (0, 0))
        if n:
            print(f"high-confidence verdicts right ({src}): {ok}/{n} = {100 * ok / n:.1f} % (bar >= 97 %)")
    print(
        "rules below the bar at high: "
        + (", ".join(f"{b['rule']} ({b['source']} {b['right']}/{b['verdicts']})" for b in below) or "none")
    )
    with open(os.path.join(RESULTS, "bench_calibration.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

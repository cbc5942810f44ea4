"""Keyhole benchmark: every view (tests/keyhole.py) of every recorded run, diagnosed and judged.

A user rarely holds a run's full evidence: one rank's log, a kubectl tail, a terminal copy wrapped
at 80 columns, FR dumps without logs. For each recorded run under ``data/recorded/`` this builds
all of its views (``keyhole.recipes``: source sets, one rank / a subset of ranks, head and tail
cuts at a line and mid-line, hard wraps, wrapper prefixes, merged stdout+stderr, and random
compositions), diagnoses each as a user would (``dx.load(folder)``) and judges it with THE
acceptance rule ``keyhole.judge`` (the planted class or an honest abstention; never a different
class, never an invented culprit; ``no-failure`` on a broken run only when the view no longer
shows any failure).

Prints one row per failing view, the failing views grouped by kind (view family x planted class x
verdict), and totals: views, different-class verdicts, false all-clears, invented culprits,
abstentions, and the share of ``high``-confidence verdicts that are right. Writes
``benchmarks/results/bench_keyhole.json``.

    python benchmarks/bench_keyhole.py                 # all runs, process pool of 2
    python benchmarks/bench_keyhole.py --workers 1 --filter rank-crash
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.append(ROOT)  # after PYTHONPATH: a snapshot of denpex_nb there wins

from tests import keyhole  # noqa: E402


def _simpler(rec: keyhole.Recipe) -> list[keyhole.Recipe]:
    """Recipes one step simpler than ``rec`` (one transform or one source removed)."""
    out = []
    if rec.prefix:
        out.append(replace(rec, prefix=None))
    if rec.cut:
        out.append(replace(rec, cut=None))
    if rec.wrap:
        out.append(replace(rec, wrap=None))
    if rec.merge is not None:
        out.append(replace(rec, merge=None))
    if rec.ranks is not None:
        out.append(replace(rec, ranks=None))
    if len(rec.sources) > 1:
        out += [replace(rec, sources=tuple(s for s in rec.sources if s != drop)) for drop in rec.sources]
    return out


def bench_run(args: tuple[str, int, int, bool]) -> list[dict]:
    """Every view of one run -> one row each (runs in a pool worker).

    A failing view is also shrunk: transforms and sources are removed one at a time while the view
    still fails the same way (same failure, same verdict); the result (``minimal``) names the kind
    of damage that makes the diagnosis fail, and is what the kinds are grouped by.
    """
    run_dir, seed, n_random, shrink = args
    import warnings

    warnings.simplefilter("ignore")
    manifest = keyhole.load_manifest(run_dir)
    exp = manifest["expected"]
    cache: dict[str, tuple | None] = {}

    def outcome(rec):
        if rec.name not in cache:
            files = keyhole.render(run_dir, rec)
            if not files:
                cache[rec.name] = None
            else:
                t0 = time.perf_counter()
                try:
                    d = keyhole.diagnose_view(files)
                except Exception as e:  # a crash of load/diagnose is a failure of its own kind
                    cache[rec.name] = (
                        f"CRASH {type(e).__name__}",
                        [],
                        None,
                        None,
                        time.perf_counter() - t0,
                        str(e)[:200],
                        None,
                    )
                else:
                    cache[rec.name] = (
                        d.verdict,
                        [int(r) for r in d.culprit_ranks],
                        d.confidence,
                        keyhole.judge(d, manifest, files),
                        time.perf_counter() - t0,
                        None,
                        d.first.rule if d.first is not None else "",
                    )
        return cache[rec.name]

    def failure_of(res):
        if res is None:
            return None
        return "crash" if res[3] is None else res[3].failure

    rows = []
    for rec in keyhole.recipes(run_dir, seed, n_random):
        res = outcome(rec)
        if res is None:
            continue
        verdict, culprits, conf, j, secs, crash, rule = res
        fail = failure_of(res)
        minimal = rec
        if fail and shrink:
            budget = 40
            while budget > 0:
                for cand in _simpler(minimal):
                    budget -= 1
                    r2 = outcome(cand)
                    if r2 is not None and failure_of(r2) == fail and r2[0] == verdict:
                        minimal = cand
                        break
                else:
                    break
        rows.append(
            dict(
                run=keyhole.run_id(run_dir),
                view=rec.name,
                family=rec.family,
                minimal=minimal.name if fail else None,
                minimal_family=minimal.family if fail else None,
                scenario=manifest["scenario"],
                expected=exp["class"],
                expected_culprits=exp.get("culprit_ranks") or [],
                verdict=verdict,
                culprits=culprits,
                confidence=conf,
                rule=rule,
                outcome="crash" if j is None else j.outcome,
                invented=[] if j is None else list(j.invented),
                failure=fail,
                evidence=[crash] if crash else list(j.evidence[:1]),
                seconds=round(secs, 4),
            )
        )
    return rows


def _mode(run: str) -> str:
    """'broken-plain' of 'gloo/x/broken-plain-w4' (the run kind without the world size)."""
    return run.rsplit("/", 1)[-1].rsplit("-w", 1)[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random", type=int, default=12, help="random compositions per run")
    ap.add_argument("--no-shrink", action="store_true", help="do not shrink failing views to a minimal recipe")
    ap.add_argument("--label", default="", help="free text saved with the results (e.g. which code was measured)")
    ap.add_argument("--filter", default="", help="only runs whose id contains this")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "bench_keyhole.json"))
    a = ap.parse_args(argv)

    runs = [str(r) for r in keyhole.recorded_runs() if a.filter in keyhole.run_id(r)]
    t0 = time.perf_counter()
    tasks = [(r, a.seed, a.random, not a.no_shrink) for r in runs]
    if a.workers > 1:
        with ProcessPoolExecutor(max_workers=a.workers) as pool:
            rows = [row for rs in pool.map(bench_run, tasks) for row in rs]
    else:
        rows = [row for t in tasks for row in bench_run(t)]
    wall = time.perf_counter() - t0

    failing = [r for r in rows if r["failure"]]
    print(f"{'run':44} {'view':70} {'expected':22} {'verdict':22} culprits  failure  (minimal failing view)")
    for r in failing:
        print(
            f"{r['run']:44} {r['view'][:70]:70} {r['expected']:22} {r['verdict']:22} "
            f"{str(r['culprits']):9} {r['failure']}"
            + (f" {r['invented']}" if r["invented"] else "")
            + (f"  ({r['minimal']})" if r["minimal"] != r["view"] else "")
        )

    # kinds: (view family, planted class, run mode, verdict, failure) -> runs; one reproducer each
    kinds: dict[tuple, dict] = {}
    for r in failing:
        fam = r["minimal_family"] or r["family"]
        key = (r["failure"], fam, r["expected"], _mode(r["run"]), r["verdict"])
        k = kinds.setdefault(
            key,
            {
                "failure": r["failure"],
                "family": fam,
                "expected": r["expected"],
                "mode": _mode(r["run"]),
                "verdict": r["verdict"],
                "runs": [],
                "views": 0,
                "example": None,
            },
        )
        k["views"] += 1
        if r["run"] not in k["runs"]:
            k["runs"].append(r["run"])
        if k["example"] is None or len(r["minimal"] or r["view"]) < len(k["example"]["view"]):
            view = r["minimal"] or r["view"]
            k["example"] = {
                "run": r["run"],
                "view": view,
                "failing_view": r["view"],
                "culprits": r["culprits"],
                "invented": r["invented"],
                "evidence": r["evidence"],
                "reproducer": keyhole.reproducer(os.path.join(keyhole.RECORDED, r["run"]), view),
            }
    kind_list = sorted(kinds.values(), key=lambda k: (-k["views"], k["failure"], k["family"]))

    # coarser: by damage only (the minimal failing recipe, rank subsets by size only), across
    # scenarios and debug modes: "what kind of keyhole breaks which verdict"
    damage: dict[tuple, dict] = {}
    for k in kind_list:
        fam = re.sub(r"ranks=<\d+>", "ranks=<subset>", k["family"])
        key = (k["failure"], fam, k["verdict"] if k["failure"] != "invented-culprit" else "")
        g = damage.setdefault(
            key,
            {
                "failure": k["failure"],
                "damage": fam,
                "verdict": key[2],
                "views": 0,
                "runs": [],
                "planted": [],
                "example": k["example"],
            },
        )
        g["views"] += k["views"]
        g["runs"] += [r for r in k["runs"] if r not in g["runs"]]
        if f"{k['expected']} ({k['mode']})" not in g["planted"]:
            g["planted"].append(f"{k['expected']} ({k['mode']})")
    damage_list = sorted(damage.values(), key=lambda g: (-len(g["runs"]), -g["views"]))
    print(f"\nfailing views by damage ({len(damage_list)}; planted class (run kind) -> verdict):")
    for g in damage_list:
        print(
            f"  {g['views']:4d} views / {len(g['runs']):2d} runs  {g['failure']:16} {g['damage']:44} "
            f"{', '.join(g['planted'])} -> {g['verdict'] or 'culprit outside planted/view'}"
        )
        print(f"        {g['example']['reproducer']}")
    print(f"\nfailing views by kind ({len(kind_list)} kinds: damage x planted class x run kind x verdict):")
    for k in kind_list:
        print(
            f"  {k['views']:4d} views / {len(k['runs']):2d} runs  {k['failure']:16} {k['family']:52} "
            f"{k['mode']:13} {k['expected']} -> {k['verdict']}"
        )

    n = len(rows)
    count = collections.Counter(r["outcome"] for r in rows)
    fail_count = collections.Counter(r["failure"] for r in rows if r["failure"])
    high = [r for r in rows if r["confidence"] == "high"]
    high_right = [r for r in high if not r["failure"]]
    high_exact = [r for r in high if not r["failure"] and r["outcome"] == "exact"]
    totals = {
        "runs": len(runs),
        "views": n,
        "passing_views": n - len(failing),
        "failing_views": len(failing),
        "different_class": fail_count.get("different-class", 0),
        "false_all_clear": fail_count.get("false-all-clear", 0),
        "invented_culprit_views": sum(1 for r in rows if r["invented"]),
        "crashes": fail_count.get("crash", 0),
        "abstentions": count.get("abstain", 0),
        "abstentions_no_evidence": sum(1 for r in rows if r["outcome"] == "abstain" and r["verdict"] == "no-evidence"),
        "honest_all_clear": count.get("honest-all-clear", 0),
        "less_specific": count.get("less-specific", 0),
        "peer_gone": count.get("peer-gone", 0),
        "exact": count.get("exact", 0),
        "high_confidence_verdicts": len(high),
        "high_confidence_right_share": round(len(high_right) / len(high), 4) if high else None,
        "high_confidence_exact_share": round(len(high_exact) / len(high), 4) if high else None,
        "high_confidence_wrong": len(high) - len(high_right),
        "failure_kinds": len(kind_list),
        "failure_damages": len(damage_list),
    }
    by_rule: dict[str, list[int]] = {}  # "rule|confidence" -> [verdicts, right] (bench_calibration)
    for r in rows:
        if r["confidence"] is not None:
            cell = by_rule.setdefault(f"{r.get('rule') or '(none)'}|{r['confidence']}", [0, 0])
            cell[0] += 1
            cell[1] += not r["failure"]
    print("\ntotals:")
    for key, val in totals.items():
        print(f"  {key:32} {val}")
    print(f"  {'wall_s':32} {wall:.1f} ({a.workers} workers)")

    import subprocess

    import denpex_nb

    pkg = os.path.dirname(os.path.abspath(denpex_nb.__file__))
    git = lambda *c: subprocess.run(["git", *c], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    code = {
        "denpex_nb": pkg,
        "repo_head": git("rev-parse", "--short", "HEAD"),
        "working_tree_dirty": bool(git("status", "--porcelain", "denpex_nb")) if pkg.startswith(ROOT) else None,
    }
    print(f"  {'code':32} {code}")

    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    with open(a.out, "w") as fh:
        json.dump(
            {
                "benchmark": "bench_keyhole",
                "command": "python benchmarks/bench_keyhole.py " + " ".join(argv or sys.argv[1:]),
                "acceptance_rule": "tests/keyhole.py: judge()",
                "seed": a.seed,
                "random_per_run": a.random,
                "workers": a.workers,
                "label": a.label,
                "code": code,
                "wall_s": round(wall, 1),
                "loadavg": load,
                "python": platform.python_version(),
                "totals": totals,
                "by_rule": by_rule,
                "damage": damage_list,
                "kinds": kind_list,
                "failing": failing,
            },
            fh,
            indent=1,
        )
    print(f"wrote {os.path.relpath(a.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The property bar of issue 16: one failure line in a healthy log never gives ``no-failure``.

Every healthy log (the recorded fixed runs' ``combined.log``, the wild corpus' negative controls,
generated healthy chatter with NCCL's benign WARNs) gets ONE line inserted at a random position,
from the generated grammar of ``tests/signal_grammar.py`` (>= 100 phrasings across the families
network/NCCL, device, memory, size/shape/dtype, timeout, process exit, launcher, stall/position),
behind a random wrapper (none, ``[rankN]:``, mpirun, slurm, pdsh, Ray, kubectl timestamps, docker,
torchrun, a launcher's ``ctime`` stamp before its tag). Each phrasing is tried in turn, ``--trials``
in all. Prints the trials that diagnosed ``no-failure`` (a false all-clear) by family and phrasing,
and writes
``benchmarks/results/bench_signal_grammar.json`` (with the code commit), which
``tests/analysis/test_signal_grammar.py`` holds the code to on a seeded subset.

    python benchmarks/bench_signal_grammar.py                  # 1070 trials, seed 0
    python benchmarks/bench_signal_grammar.py --trials 214 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests import signal_grammar as g  # noqa: E402


def run(trials: int, seed: int) -> dict:
    base_list = g.bases(random.Random(seed))
    with tempfile.TemporaryDirectory(prefix="dx-grammar-") as tmp:
        out = g.run(trials, seed, base_list, Path(tmp))
        (Path(tmp) / "subset").mkdir()
        sub = g.subset(Path(tmp) / "subset")
    cleared = [t for t in out if t.cleared]
    by_family = {
        fam: {"trials": sum(t.family == fam for t in out), "no_failure": sum(t.family == fam for t in cleared)}
        for fam in g.PHRASINGS
    }
    phr = Counter((t.family, t.phrasing) for t in cleared)
    return {
        "trials": len(out),
        "phrasings": g.n_phrasings(),
        "wrappers": sorted(g.WRAPPERS),
        "bases": len(base_list),
        "no_failure": len(cleared),
        "by_family": by_family,
        "by_wrapper": dict(Counter(t.wrapper for t in cleared)),
        "phrasings_cleared": [
            {"family": f, "phrasing": k, "times": n, "template": g.PHRASINGS[f][k][:160]}
            for (f, k), n in sorted(phr.items())
        ],
        "verdicts": dict(Counter(t.verdict for t in out)),
        "subset": {
            "seed": g.SUBSET_SEED,
            "trials": len(sub),
            "no_failure": sum(t.cleared for t in sub),
            "cleared": [i for i, t in enumerate(sub) if t.cleared],
        },
        "examples": [
            {"base": t.base, "family": t.family, "wrapper": t.wrapper, "line": t.line[:300]} for t in cleared[:40]
        ],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10 * g.n_phrasings())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res = run(args.trials, args.seed)
    wall = time.perf_counter() - t0
    for fam, v in res["by_family"].items():
        print(f"{fam:<10} {v['no_failure']:>5} no-failure of {v['trials']:>5} trials")
    for p in res["phrasings_cleared"]:
        print(f"  cleared {p['times']}x  {p['family']}[{p['phrasing']}]: {p['template'][:110]}")
    print(
        f"\n{res['no_failure']} of {res['trials']} trials gave no-failure "
        f"({100 * res['no_failure'] / max(res['trials'], 1):.1f} %; bar: 0) over {res['bases']} healthy logs, "
        f"{res['phrasings']} phrasings, {len(res['wrappers'])} wrappers; {wall:.0f} s"
    )
    if not args.no_write:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = None
        res.update(
            seed=args.seed,
            wall_s=round(wall, 1),
            code_commit=commit,
            how=f"python benchmarks/bench_signal_grammar.py --trials {args.trials} --seed {args.seed}",
            python=platform.python_version(),
        )
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "bench_signal_grammar.json"), "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

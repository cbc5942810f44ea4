"""The property of issue 16 on a seeded subset: one failure line in a healthy log is never ``no-failure``.

``benchmarks/bench_signal_grammar.py`` runs the full grammar (``tests/signal_grammar.py``) and
records, besides its own figure, this subset's result: which of its trials gave ``no-failure``.
The test reruns the subset and holds the code to that record: a trial recorded as caught must stay
caught (no new false all-clear), so the recorded set only shrinks, to nothing when the property holds.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests import signal_grammar as g

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bench_signal_grammar.json"


def test_the_grammar_is_big_enough_and_covers_every_family():
    assert g.n_phrasings() >= 100
    assert set(g.PHRASINGS) == {"network", "device", "memory", "size", "timeout", "exit", "launcher", "stall"}
    assert all(len(v) >= 8 for v in g.PHRASINGS.values())
    assert {"rank", "mpirun", "slurm", "pdsh", "ray", "kubectl", "docker"} <= set(g.WRAPPERS)


def test_the_subset_is_deterministic_and_every_line_is_inserted_once(tmp_path):
    base = g.bases(batches=False)[0]
    a = g.make(base, "timeout", 0, "rank", g.trial_rng(7, 3))
    b = g.make(base, "timeout", 0, "rank", g.trial_rng(7, 3))
    assert a == b and len(a[0]) == len(base.lines) + 1 and a[0][a[1]] == a[2]
    assert a[2].startswith("[rank") and "Watchdog caught collective operation timeout" in a[2]


def test_no_new_false_all_clear_on_the_seeded_subset(tmp_path):
    recorded = json.loads(RESULTS.read_text())["subset"]
    assert (recorded["seed"], recorded["trials"]) == (g.SUBSET_SEED, g.SUBSET_TRIALS)
    trials = g.subset(tmp_path)
    cleared = {i for i, t in enumerate(trials) if t.cleared}
    new = sorted(cleared - set(recorded["cleared"]))
    assert not new, [f"{trials[i].family}/{trials[i].wrapper}: {trials[i].line[:200]}" for i in new]

"""The wild corpus (tests/data/wild): real excerpts from public threads, scored like the benchmark.

The totals recorded by ``python benchmarks/bench_accuracy.py`` in
``benchmarks/results/bench_accuracy.json`` are the floor: fewer right verdicts, any invented
culprit or any false all-clear fails. Every case must keep its provenance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from denpex_nb.analysis.catalog import IDS
from tests import wild

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "bench_accuracy.json"
CASES = wild.cases()


def test_the_corpus_is_big_enough_and_mixed():
    roles = [c.get("role") for c in CASES]
    assert len(CASES) >= 40
    assert roles.count("negative-control") >= 4 and roles.count("decoy") >= 3
    assert len({c["source"]["repo"] for c in CASES}) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_keeps_its_provenance_and_a_truth(case):
    src = case["source"]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", src["repo"]) and int(src["number"]) > 0
    assert src["url"].startswith("https://github.com/" + src["repo"]) or src["url"].startswith("https://")
    assert case["cause"] and case["edits"] and case["certainty"] in ("high", "medium", "low")
    assert case["role"] in ("failure", "negative-control", "decoy")
    truth = case["truth"]
    assert truth["classes"] and set(truth["classes"]) <= set(IDS)
    assert isinstance(truth["failed"], bool)
    assert truth["culprit_ranks"] is None or all(isinstance(r, int) for r in truth["culprit_ranks"])
    if case["role"] == "negative-control":
        assert truth["classes"] == ["no-failure"] and truth["failed"] is False
    for f in case["files"]:
        assert (Path(case["dir"]) / f).is_file()


def test_totals_do_not_regress():
    """The cases the recorded run scored may not regress; a case added since is held out until the
    benchmark is rerun (its blind first score is recorded by ``benchmarks/bench_blind.py``)."""
    recorded_run = json.loads(RESULTS.read_text())
    recorded = recorded_run["totals"]
    recorded_ids = {c["id"] for c in recorded_run["cases"]}
    scores = [wild.score_case(c) for c in CASES if c["id"] in recorded_ids]
    now = wild.totals(scores)
    wrong = [
        f"{s.id}: {s.verdict} {s.culprits} (truth {s.truth_classes} {s.truth_culprits})"
        for s in scores
        if not s.right or s.invented_culprit or s.false_all_clear
    ]
    assert now["false_all_clears"] == 0, wrong
    assert now["invented_culprits"] == 0, wrong
    assert now["right"] >= recorded["right"], wrong
    if now["high_confidence"]:
        assert now["high_confidence_right_share"] >= 0.97, wrong

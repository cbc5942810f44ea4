"""Diagnosis shows itself as text and HTML and serialises to the JSON of issue 4."""

from __future__ import annotations

import dataclasses
import json

from denpex_nb import diagnose
from denpex_nb.analysis.model import Diagnosis, Evidence, Finding, RankView

from ._frames import ev, incident, steps


def _diag():
    rows = steps(4, 2) + [
        ev(r, 3, op="all_gather", shape=(3, 4) if r == 1 else (5, 4), out_shape=(12, 4) if r == 1 else (20, 4))
        for r in range(4)
    ]
    return diagnose(incident(rows))


def test_json_has_exactly_the_issue_keys_and_types():
    d = json.loads(_diag().to_json())
    assert {"verdict", "culprit_ranks", "initiating_rank", "findings", "ranks_seen", "lines"} <= set(d)
    assert d["verdict"] == "shape-mismatch" and d["culprit_ranks"] == [1]
    assert d["initiating_rank"] is None
    assert set(d["lines"]) == {"total", "parsed", "unparsed"}
    f = d["findings"][0]
    assert {"class", "pg", "seq", "op", "culprit_ranks", "ranks", "evidence", "confidence"} <= set(f)
    assert f["confidence"] in ("high", "medium", "low")
    assert set(f["ranks"]) == {"0", "1", "2", "3"}
    assert f["ranks"]["1"] == {
        "op": "all_gather",
        "seq": 3,
        "shapes": [[3, 4]],
        "dtypes": ["float32"],
        "state": "completed",
    }
    assert all(set(e) == {"file", "line", "text"} and isinstance(e["line"], int) for e in f["evidence"])
    assert d["ranks_seen"] == [0, 1, 2, 3]


def test_text_says_verdict_culprit_fix_and_evidence():
    s = str(_diag())
    assert s.startswith("Diagnosis: shape-mismatch")
    assert "culprit rank(s): 1" in s and "fix:" in s and "all_gather_uneven" in s
    assert "rank 1: all_gather seq 3 [[3, 4]] float32" in s
    assert "rank1.trace:3" in s


def test_html_is_escaped_and_marks_the_culprit():
    d = _diag()
    d.findings[0] = dataclasses.replace(d.findings[0], summary="<script>alert(1)</script>")
    html = d._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<tr style='font-weight:bold'><td>rank 1</td>" in html
    assert "<td>3 ranks (0, 2, 3)</td>" in html  # the agreeing majority is one row
    assert html.count("<tr") >= 3


def test_at_256_ranks_the_text_names_the_odd_rank_first_and_ranges_for_the_rest():
    rows = steps(256, 2) + [
        ev(r, 3, op="all_gather", shape=(3, 4) if r == 217 else (5, 4), out_shape=(12, 4) if r == 217 else (20, 4))
        for r in range(256)
    ]
    d = diagnose(incident(rows))
    s = str(d)
    assert d.culprit_ranks == [217]
    assert "ranks seen: 256 ranks (0–255)" in s
    per_rank = [ln.strip() for ln in s.splitlines() if ln.startswith("    ") and ": all_gather seq 3" in ln]
    assert per_rank[0].startswith("rank 217: ") and "[[3, 4]]" in per_rank[0]
    assert per_rank[1].startswith("255 ranks (0–216, 218–255): ")
    assert len(per_rank) == 2
    assert "0, 1, 2, 3" not in s  # no rank list spelled out one by one
    assert json.loads(d.to_json())["ranks_seen"] == list(range(256))  # the JSON keeps the full list


def test_no_failure_displays_plainly():
    d = diagnose(incident(steps(2, 3)))
    assert d.verdict == "no-failure" and "no-failure" in str(d)
    assert "no-failure" in d._repr_html_()
    assert json.loads(d.to_json())["findings"] == []


def test_nothing_read_is_no_evidence_not_an_all_clear():
    d = diagnose(incident())
    assert d.verdict == "no-evidence" and "not an all-clear" in str(d)
    assert "Collect" in d.first.summary and "no-evidence" in d._repr_html_()


def test_repr_is_one_line_and_findings_keep_catalog_links():
    d = _diag()
    assert "\n" not in repr(d)
    assert d.first.entry.id == "shape-mismatch"
    assert d.first.to_dict()["title"].startswith("Ranks passed tensors")


def test_long_evidence_is_clipped_and_unknown_class_does_not_break_display():
    f = Finding("not-in-catalog", "s", evidence=[Evidence("f", 1, "x" * 1000)], ranks={0: RankView()})
    d = Diagnosis(findings=[f])
    s = str(d)
    assert "…" in s and max(len(line) for line in s.splitlines()) < 400
    assert d._repr_html_() and d.to_dict()["findings"][0]["title"] is None


def test_indented_json_is_the_json_modules_text_character_for_character():
    """``diagnose --json`` writes with a faster encoder than ``json.dumps(indent=2)``: its text must
    be the json module's, for every value a diagnosis holds, and anything else must go through json
    (a user's parser, or a diff against an earlier run, would otherwise see other bytes)."""
    from enum import Enum

    from denpex_nb.analysis.model import _indented_json, _NotPlain

    value = {
        "a": [1, -2, 2.5, -0.0, 1e300, 10**30, float("nan"), float("inf"), -float("inf"), True, False, None],
        "text": ['é "quoted"\n\ttab', "", "\u2013", "\x00"],
        "empty": [[], {}, ()],
        "nested": {"k": {"z": [[{"x": (1, (2, 3))}]]}},
        3: {1.5: [], None: 0, True: 1, False: [[]]},
    }
    for indent in (0, 1, 2, 4):
        assert _indented_json(value, indent) == json.dumps(value, indent=indent)
    for scalar in (3, "x", None, [], {}):
        assert _indented_json(scalar, 2) == json.dumps(scalar, indent=2)

    class Kind(str, Enum):
        A = "a"

    try:
        _indented_json({"k": Kind.A}, 2)
        raise AssertionError("an Enum value must be left to json")
    except _NotPlain:
        pass
    d = _diag()
    assert d.to_json(indent=2) == json.dumps(d.to_dict(), indent=2)
    assert d.to_json() == json.dumps(d.to_dict())

"""Score the diagnosis against the wild corpus (``tests/data/wild/``, see its README).

One function decides whether a verdict is right, so the benchmark and the regression test count
the same way: :func:`score_case` diagnoses one case as a user would (``load`` of its files) and
returns a :class:`CaseScore`; :func:`totals` sums them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

WILD = Path(__file__).resolve().parent / "data" / "wild"


def cases() -> list[dict]:
    """Every case manifest, with ``dir`` set to its folder, in id order."""
    out = []
    for p in sorted(WILD.glob("*/case.json")):
        c = json.loads(p.read_text())
        c["dir"] = str(p.parent)
        out.append(c)
    return out


@dataclass
class CaseScore:
    id: str
    role: str
    certainty: str
    truth_classes: list
    truth_culprits: list | None
    failed: bool
    verdict: str
    culprits: list
    confidence: str
    right: bool  # the verdict is one of the truth's classes
    invented_culprit: bool  # named a culprit the truth does not name (or names none)
    false_all_clear: bool  # said no-failure although a rank failed
    high_right: bool | None  # for high-confidence verdicts: right and no invented culprit
    rule: str  # the rule behind the verdict ('' for no-failure)
    summary: str
    seconds: float


def score_case(case: dict, *, shared: bool = False) -> CaseScore:
    """Diagnose ``case`` as a user would and score it. ``shared`` (the tests): take the strict
    diagnosis :func:`tests.diagnosed.diagnosed` makes once per test process (``seconds`` is then
    the time to get it, nothing when another test file already made it)."""
    import time

    import denpex_nb as dx

    t0 = time.perf_counter()
    files = [str(Path(case["dir"]) / f) for f in case["files"]]
    if shared:
        from tests.diagnosed import diagnosed

        d = diagnosed(*files)
    else:
        d = dx.diagnose(dx.load(*files, progress=False))
    dt = time.perf_counter() - t0
    truth = case["truth"]
    right = d.verdict in truth["classes"]
    named = sorted(int(r) for r in d.culprit_ranks)
    allowed = truth.get("culprit_ranks")
    invented = bool(named) and (allowed is None or not set(named) <= set(allowed))
    false_clear = bool(truth["failed"]) and d.verdict == "no-failure"
    high_right = (right and not invented) if d.confidence == "high" else None
    return CaseScore(
        case["id"],
        case.get("role", "failure"),
        case.get("certainty", "medium"),
        truth["classes"],
        allowed,
        bool(truth["failed"]),
        d.verdict,
        named,
        d.confidence,
        right,
        invented,
        false_clear,
        high_right,
        d.first.rule if d.first is not None else "",
        d.summary(),
        round(dt, 3),
    )


def totals(scores: list[CaseScore]) -> dict:
    highs = [s for s in scores if s.high_right is not None]
    return {
        "cases": len(scores),
        "right": sum(s.right for s in scores),
        "right_share": round(sum(s.right for s in scores) / max(len(scores), 1), 4),
        "invented_culprits": sum(s.invented_culprit for s in scores),
        "false_all_clears": sum(s.false_all_clear for s in scores),
        "high_confidence": len(highs),
        "high_confidence_right": sum(bool(s.high_right) for s in highs),
        "high_confidence_right_share": round(sum(bool(s.high_right) for s in highs) / len(highs), 4) if highs else None,
        "by_role": {
            role: {
                "cases": sum(s.role == role for s in scores),
                "right": sum(s.right for s in scores if s.role == role),
            }
            for role in sorted({s.role for s in scores})
        },
    }


def as_dict(s: CaseScore) -> dict:
    return asdict(s)

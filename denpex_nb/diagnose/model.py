"""What a diagnosis says: :class:`Diagnosis` holds ordered :class:`Finding` objects.

Kept free of pandas and of the analysis so plots, reports and the CLI depend only on this.
The JSON form (``Diagnosis.to_dict``) is the contract of ``denpex-nb diagnose --json``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CONFIDENCES = ("high", "medium", "low")


@dataclass
class Evidence:
    """A line that supports a finding: where it is and what it says."""

    file: str
    line: int
    text: str
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": int(self.line), "text": self.text}


@dataclass
class RankView:
    """What one rank was doing at the finding's collective (None: not known / missing)."""

    op: str | None = None
    seq: int | None = None
    shapes: list[list[int]] | None = None
    dtypes: list[str] | None = None
    state: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "seq": self.seq, "shapes": self.shapes, "dtypes": self.dtypes, "state": self.state}


@dataclass
class Finding:
    """One divergence or failure, tied to a catalog entry."""

    class_id: str                                # catalog id: "shape-mismatch", "rank-desync" ...
    summary: str                                 # one sentence for a human
    confidence: str = "medium"                   # high | medium | low
    pg: str | None = None
    seq: int | None = None
    seq_kind: str | None = None
    op: str | None = None
    culprit_ranks: list[int] = field(default_factory=list)   # [] = undetermined
    ranks: dict[int, RankView] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    t_wall: Any = None                           # pandas Timestamp (UTC) when known, for ordering

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.class_id,
            "summary": self.summary,
            "pg": self.pg,
            "seq": None if self.seq is None else int(self.seq),
            "seq_kind": self.seq_kind,
            "op": self.op,
            "culprit_ranks": [int(r) for r in self.culprit_ranks],
            "ranks": {str(int(r)): v.to_dict() for r, v in sorted(self.ranks.items())},
            "evidence": [e.to_dict() for e in self.evidence],
            "confidence": self.confidence,
        }


@dataclass
class Diagnosis:
    """The answer: the verdict (first finding's class), culprits, the initiating rank, all findings."""

    findings: list[Finding] = field(default_factory=list)
    initiating_rank: int | None = None
    ranks_seen: list[int] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=lambda: {"total": 0, "parsed": 0, "unparsed": 0})
    notes: list[str] = field(default_factory=list)   # e.g. "nothing distributed was found"

    @property
    def verdict(self) -> str:
        return self.findings[0].class_id if self.findings else "no-failure"

    @property
    def culprit_ranks(self) -> list[int]:
        return list(self.findings[0].culprit_ranks) if self.findings else []

    @property
    def confidence(self) -> str:
        return self.findings[0].confidence if self.findings else "high"

    @property
    def first(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "culprit_ranks": [int(r) for r in self.culprit_ranks],
            "initiating_rank": None if self.initiating_rank is None else int(self.initiating_rank),
            "confidence": self.confidence,
            "findings": [f.to_dict() for f in self.findings],
            "ranks_seen": [int(r) for r in self.ranks_seen],
            "lines": {k: int(v) for k, v in self.lines.items()},
            "notes": list(self.notes),
        }

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

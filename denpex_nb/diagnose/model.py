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
            "title": self.entry.title if self.entry else None,
            "fix": self.entry.fix.get("text") if self.entry else None,
        }

    @property
    def entry(self):
        """The catalog entry for this finding's class (None for an id the catalog lacks)."""
        from .catalog import _load
        return _load().get(self.class_id)

    def where(self) -> str:
        parts = []
        if self.op:
            parts.append(self.op)
        if self.seq is not None:
            parts.append(f"{self.seq_kind or 'seq'} seq {self.seq}")
        if self.pg not in (None, ""):
            parts.append(f"pg {self.pg}")
        return ", ".join(parts)

    def __str__(self) -> str:
        culprit = ", ".join(map(str, self.culprit_ranks)) if self.culprit_ranks else "undetermined"
        head = f"[{self.class_id}] ({self.confidence}) {self.where()}".rstrip()
        lines = [head, f"  {self.summary}", f"  culprit: {culprit}"]
        for r, v in sorted(self.ranks.items())[:16]:
            shapes = "" if v.shapes is None else f" {v.shapes}"
            dt = "" if not v.dtypes else f" {','.join(v.dtypes)}"
            lines.append(f"    rank {r}: {v.op or '-'} seq {v.seq if v.seq is not None else '-'}{shapes}{dt}"
                         f"{' ' + v.state if v.state else ''}")
        for e in self.evidence[:4]:
            lines.append(f"    {e.file}:{e.line}: {_clip(e.text, 160)}")
        return "\n".join(lines)


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

    def summary(self) -> str:
        """One line: verdict, culprit, initiating rank."""
        if not self.findings:
            return "no-failure: no divergence or failure found" + (f" ({self.notes[0]})" if self.notes else "")
        f = self.findings[0]
        culprit = ", ".join(map(str, f.culprit_ranks)) if f.culprit_ranks else "undetermined"
        init = "undetermined" if self.initiating_rank is None else str(self.initiating_rank)
        return (f"{f.class_id} at {f.where() or 'unknown collective'}; culprit rank(s): {culprit}; "
                f"first to fail: {init}; confidence {f.confidence}")

    def __str__(self) -> str:
        lines = [f"Diagnosis: {self.summary()}", f"ranks seen: {self.ranks_seen}; lines {self.lines.get('total', 0)} "
                 f"({self.lines.get('parsed', 0)} parsed, {self.lines.get('unparsed', 0)} unparsed)"]
        first = self.first
        if first is not None and first.entry is not None:
            lines.append(f"what it is: {first.entry.title}")
            lines.append(f"fix: {first.entry.fix.get('text', '')}")
            if first.entry.fix.get("code"):
                lines += ["    " + ln for ln in first.entry.fix["code"].splitlines()]
        if self.findings:
            lines.append(f"findings ({len(self.findings)}, first = verdict):")
            for i, f in enumerate(self.findings[:20], 1):
                lines.append(f"{i}. " + str(f).replace("\n", "\n   "))
            if len(self.findings) > 20:
                lines.append(f"... {len(self.findings) - 20} more (see to_dict())")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Diagnosis {self.summary()}>"

    def __rich__(self):
        from rich.panel import Panel  # optional: only called by rich itself
        return Panel(str(self), title="denpex_nb diagnosis")

    def _repr_html_(self) -> str:
        from html import escape as esc
        colour = {"high": "#1b5e20", "medium": "#8d6e00", "low": "#b71c1c"}
        out = ["<div class='denpex-diagnosis'>",
               f"<h3 style='margin:0'>{esc(self.verdict)}</h3><p>{esc(self.summary())}</p>"]
        first = self.first
        if first is not None and first.entry is not None:
            out.append(f"<p><b>{esc(first.entry.title)}</b>. Fix: {esc(first.entry.fix.get('text', ''))}</p>")
            if first.entry.fix.get("code"):
                out.append(f"<pre>{esc(first.entry.fix['code'])}</pre>")
        if self.findings:
            out.append("<table><thead><tr><th>#</th><th>class</th><th>where</th><th>culprit</th>"
                       "<th>confidence</th><th>summary</th></tr></thead><tbody>")
            for i, f in enumerate(self.findings[:50], 1):
                cul = ", ".join(map(str, f.culprit_ranks)) or "undetermined"
                out.append(f"<tr><td>{i}</td><td>{esc(f.class_id)}</td><td>{esc(f.where())}</td><td>{esc(cul)}</td>"
                           f"<td style='color:{colour.get(f.confidence, '#000')}'>{esc(f.confidence)}</td>"
                           f"<td>{esc(f.summary)}</td></tr>")
            out.append("</tbody></table>")
            if first is not None and first.ranks:
                out.append("<details open><summary>ranks at the verdict's collective</summary><table><thead><tr>"
                           "<th>rank</th><th>op</th><th>seq</th><th>shapes</th><th>dtypes</th><th>state</th>"
                           "</tr></thead><tbody>")
                for r, v in sorted(first.ranks.items())[:64]:
                    bad = " style='font-weight:bold'" if r in first.culprit_ranks else ""
                    out.append(f"<tr{bad}><td>{r}</td><td>{esc(str(v.op))}</td><td>{esc(str(v.seq))}</td>"
                               f"<td>{esc(str(v.shapes))}</td><td>{esc(str(v.dtypes))}</td><td>{esc(str(v.state))}</td></tr>")
                out.append("</tbody></table></details>")
            if first is not None and first.evidence:
                out.append("<details><summary>evidence</summary><ul>")
                for e in first.evidence:
                    out.append(f"<li><code>{esc(e.file)}:{e.line}</code> {esc(_clip(e.text, 300))}</li>")
                out.append("</ul></details>")
        if self.notes:
            out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in self.notes) + "</ul>")
        out.append("</div>")
        return "".join(out)


def _clip(text: str, n: int) -> str:
    text = str(text).replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"

"""What a diagnosis says: :class:`Diagnosis` holds ordered :class:`Finding` objects.

Kept free of the analysis so plots, reports and the CLI depend only on this (pandas only for the
optional ``rank_state`` frame a Diagnosis carries). The JSON form (``Diagnosis.to_dict``) is the
contract of ``denpex-nb diagnose --json``.

Findings are immutable: a rule that explains another rule's finding (a crash behind a desync, DDP
buckets behind an all_reduce divergence) builds a new Finding with :func:`dataclasses.replace`
and says so in ``basis``; an earlier divergence makes a later one a ``consequence_of`` it (a
field, never text to parse back).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..human import count_ranks, rank_ranges
from ..vocab import ClassId

CONFIDENCES = ("high", "medium", "low")


@dataclass(frozen=True)
class Evidence:
    """A line that supports a finding: where it is and what it says."""

    file: str
    line: int
    text: str
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": int(self.line), "text": self.text}


@dataclass(frozen=True)
class RankView:
    """What one rank was doing at the finding's collective (None: not known / missing)."""

    op: str | None = None
    seq: int | None = None
    shapes: list[list[int]] | None = None
    dtypes: list[str] | None = None
    state: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "seq": self.seq, "shapes": self.shapes, "dtypes": self.dtypes, "state": self.state}


@dataclass(frozen=True)
class Finding:
    """One divergence or failure, tied to a catalog entry.

    ``rule`` names the rule that made it; ``culprit_basis`` says why the culprits are named (or
    why not): ``majority`` (a strict majority of the group disagrees with them), ``statement``
    (the evidence names them: a desync report, missing ranks, monitoredBarrier),
    ``own-failure`` (the only ranks that failed on their own), or ``undetermined: <why>``.
    ``basis`` holds the summaries of the findings this one explains (a refined finding keeps
    what it was built on); ``consequence_of`` is the :attr:`key` of an earlier finding that
    may have caused this one.
    """

    class_id: str  # catalog id: "shape-mismatch", "rank-desync" ...
    summary: str  # one sentence for a human
    confidence: str = "medium"  # high | medium | low
    pg: str | None = None
    seq: int | None = None
    seq_kind: str | None = None
    op: str | None = None
    culprit_ranks: tuple[int, ...] = ()  # () = undetermined
    ranks: dict[int, RankView] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    t_wall: Any = None  # pandas Timestamp (UTC) when known, for ordering
    rule: str = ""
    culprit_basis: str = ""
    basis: tuple[str, ...] = ()
    consequence_of: str | None = None
    #: consistent with the evidence but, by design, never the verdict (a launcher's first exit beside
    #: a collective failure that may have caused it): shown as an alternative only
    alternative_only: bool = False

    def __post_init__(self):
        object.__setattr__(self, "class_id", str(self.class_id))  # a plain string, also from ClassId
        if self.seq_kind is not None:
            object.__setattr__(self, "seq_kind", str(self.seq_kind))
        object.__setattr__(self, "culprit_ranks", tuple(sorted(int(r) for r in self.culprit_ranks)))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        object.__setattr__(self, "basis", tuple(self.basis))
        object.__setattr__(self, "ranks", dict(self.ranks))
        if not self.culprit_basis:
            object.__setattr__(self, "culprit_basis", "" if self.culprit_ranks else "undetermined")

    @property
    def key(self) -> str:
        """A stable name for this finding within its diagnosis: class@counter:seq (pg)."""
        where = f"{self.seq_kind}:{self.seq}" if self.seq is not None else "text"
        return f"{self.class_id}@{where}" + (f"/pg {self.pg}" if self.pg not in (None, "") else "")

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
            "rule": self.rule,
            "culprit_basis": self.culprit_basis,
            "consequence_of": self.consequence_of,
            "basis": list(self.basis),
            "title": self.entry.title if self.entry else None,
            "fix": self.entry.fix.get("text") if self.entry else None,
        }

    @property
    def entry(self):
        """The catalog entry for this finding's class (None for an id the catalog lacks)."""
        from . import catalog

        return catalog.find(self.class_id)

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
        culprit = rank_ranges(self.culprit_ranks) or "undetermined"
        head = f"[{self.class_id}] ({self.confidence}) {self.where()}".rstrip()
        lines = [
            head,
            f"  {self.summary}",
            f"  culprit: {culprit}" + (f" ({self.culprit_basis})" if self.culprit_basis else ""),
        ]
        if self.consequence_of:
            lines.append(f"  possibly a consequence of {self.consequence_of}")
        for b in self.basis[:3]:
            lines.append(f"  from: {_clip(b, 160)}")
        for who, v, _odd in _grouped_views(self.ranks, self.culprit_ranks)[:16]:
            shapes = "" if v.shapes is None else f" {v.shapes}"
            dt = "" if not v.dtypes else f" {','.join(v.dtypes)}"
            lines.append(
                f"    {who}: {v.op or '-'} seq {v.seq if v.seq is not None else '-'}{shapes}{dt}"
                f"{' ' + v.state if v.state else ''}"
            )
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
    notes: list[str] = field(default_factory=list)  # e.g. "nothing distributed was found"
    #: one row per rank: where it stopped, how it failed (see :mod:`denpex_nb.analysis.state`)
    rank_state: Any = None
    group_size: int | None = None  # from explicit evidence only, else None
    group_size_basis: str = ""  # which evidence gave it
    absent_ranks: list[int] = field(default_factory=list)  # known to exist, silent in the evidence
    all_clear_confidence: str = "medium"  # confidence of a no-failure verdict
    #: the other classes the evidence is consistent with, best first (one finding per class, never
    #: the verdict's class): "also consistent with"; the verdict stays the single best one
    alternatives: list[Finding] = field(default_factory=list)
    #: inputs nothing could be read from (``{"file", "problem"}``): the verdict is then partial
    not_read: list[dict[str, str]] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Some input could not be read: evidence may be missing from this verdict."""
        return bool(self.not_read)

    @property
    def verdict(self) -> str:
        return self.findings[0].class_id if self.findings else ClassId.NO_FAILURE

    @property
    def culprit_ranks(self) -> list[int]:
        return list(self.findings[0].culprit_ranks) if self.findings else []

    @property
    def confidence(self) -> str:
        return self.findings[0].confidence if self.findings else self.all_clear_confidence

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
            "group_size": None if self.group_size is None else int(self.group_size),
            "group_size_basis": self.group_size_basis,
            "absent_ranks": [int(r) for r in self.absent_ranks],
            "rank_state": _records(self.rank_state),
            "lines": {k: int(v) for k, v in self.lines.items()},
            "partial": self.partial,
            "not_read": [dict(x) for x in self.not_read],
            "notes": list(self.notes),
            "alternatives": [_alternative(f) for f in self.alternatives],
        }

    def also(self) -> str:
        """``also consistent with: rank-crash (medium), nccl-error (low)``, or "" when nothing else is."""
        if not self.alternatives:
            return ""
        return "also consistent with: " + ", ".join(f"{f.class_id} ({f.confidence})" for f in self.alternatives)

    def to_json(self, **kw) -> str:
        """``json.dumps(self.to_dict(), **kw)``; with only ``indent`` (the CLI's ``--json``) the same
        text from :func:`_indented_json`, ~3x faster than the json module's pure-Python indenting
        encoder (at 50,000 ranks: seconds)."""
        obj = self.to_dict()
        indent = kw.get("indent")
        if set(kw) == {"indent"} and type(indent) is int and indent >= 0:
            try:
                return _indented_json(obj, indent)
            except _NotPlain:
                pass  # a value the fast path does not know: json says what it makes of it
        return json.dumps(obj, **kw)

    def summary(self) -> str:
        """One line: verdict, culprit, initiating rank."""
        if not self.findings:
            return "no-failure: no divergence or failure found" + (f" ({self.notes[0]})" if self.notes else "")
        f = self.findings[0]
        culprit = rank_ranges(f.culprit_ranks) or "undetermined"
        init = "undetermined" if self.initiating_rank is None else str(self.initiating_rank)
        also = self.also()
        return (
            f"{f.class_id} at {f.where() or 'unknown collective'}; culprit rank(s): {culprit}; "
            f"first to fail: {init}; confidence {f.confidence}" + (f"; {also}" if also else "")
        )

    def __str__(self) -> str:
        lines = [
            f"Diagnosis: {self.summary()}",
            f"ranks seen: {count_ranks(self.ranks_seen)}; lines {self.lines.get('total', 0)} "
            f"({self.lines.get('parsed', 0)} parsed, {self.lines.get('unparsed', 0)} unparsed)",
        ]
        if self.not_read:
            lines.append(f"partial verdict: {len(self.not_read)} input(s) could not be read and may hold evidence:")
            lines += [f"  not read: {x['file']}: {x['problem']}" for x in self.not_read[:20]]
            if len(self.not_read) > 20:
                lines.append(f"  ... {len(self.not_read) - 20} more (see to_dict()['not_read'])")
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
        if self.alternatives:
            lines.append(f"also consistent with ({len(self.alternatives)}, not the verdict):")
            for f in self.alternatives:
                lines.append("  - " + str(f).replace("\n", "\n    "))
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
        out = [
            "<div class='denpex-diagnosis'>",
            f"<h3 style='margin:0'>{esc(self.verdict)}</h3><p>{esc(self.summary())}</p>",
        ]
        if self.not_read:
            out.append(
                "<p><b>Partial verdict</b>: not read: "
                + "; ".join(esc(f"{x['file']}: {x['problem']}") for x in self.not_read[:20])
                + "</p>"
            )
        first = self.first
        if first is not None and first.entry is not None:
            out.append(f"<p><b>{esc(first.entry.title)}</b>. Fix: {esc(first.entry.fix.get('text', ''))}</p>")
            if first.entry.fix.get("code"):
                out.append(f"<pre>{esc(first.entry.fix['code'])}</pre>")
        if self.findings:
            out.append(
                "<table><thead><tr><th>#</th><th>class</th><th>where</th><th>culprit</th>"
                "<th>confidence</th><th>summary</th></tr></thead><tbody>"
            )
            for i, f in enumerate(self.findings[:50], 1):
                cul = rank_ranges(f.culprit_ranks) or "undetermined"
                out.append(
                    f"<tr><td>{i}</td><td>{esc(f.class_id)}</td><td>{esc(f.where())}</td><td>{esc(cul)}</td>"
                    f"<td style='color:{colour.get(f.confidence, '#000')}'>{esc(f.confidence)}</td>"
                    f"<td>{esc(f.summary)}</td></tr>"
                )
            out.append("</tbody></table>")
            if first is not None and first.ranks:
                out.append(
                    "<details open><summary>ranks at the verdict's collective</summary><table><thead><tr>"
                    "<th>rank</th><th>op</th><th>seq</th><th>shapes</th><th>dtypes</th><th>state</th>"
                    "</tr></thead><tbody>"
                )
                for who, v, odd in _grouped_views(first.ranks, first.culprit_ranks)[:64]:
                    bad = " style='font-weight:bold'" if odd else ""
                    out.append(
                        f"<tr{bad}><td>{esc(who)}</td><td>{esc(str(v.op))}</td><td>{esc(str(v.seq))}</td>"
                        f"<td>{esc(str(v.shapes))}</td><td>{esc(str(v.dtypes))}</td><td>{esc(str(v.state))}</td></tr>"
                    )
                out.append("</tbody></table></details>")
            if first is not None and first.evidence:
                out.append("<details><summary>evidence</summary><ul>")
                for e in first.evidence:
                    out.append(f"<li><code>{esc(e.file)}:{e.line}</code> {esc(_clip(e.text, 300))}</li>")
                out.append("</ul></details>")
        if self.alternatives:
            out.append("<details open><summary>also consistent with</summary><ul>")
            for f in self.alternatives:
                cul = rank_ranges(f.culprit_ranks) or "undetermined"
                out.append(
                    f"<li><b>{esc(f.class_id)}</b> (<span style='color:{colour.get(f.confidence, '#000')}'>"
                    f"{esc(f.confidence)}</span>; culprit {esc(cul)}): {esc(f.summary)}"
                    + "".join(
                        f"<br><code>{esc(e.file)}:{e.line}</code> {esc(_clip(e.text, 200))}" for e in f.evidence[:3]
                    )
                    + "</li>"
                )
            out.append("</ul></details>")
        if self.notes:
            out.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in self.notes) + "</ul>")
        out.append("</div>")
        return "".join(out)


def _alternative(f: Finding) -> dict[str, Any]:
    """An alternative's JSON form: its class, confidence, culprits and evidence (no per-rank views)."""
    return {
        "class": f.class_id,
        "confidence": f.confidence,
        "summary": f.summary,
        "culprit_ranks": [int(r) for r in f.culprit_ranks],
        "culprit_basis": f.culprit_basis,
        "rule": f.rule,
        "evidence": [e.to_dict() for e in f.evidence],
    }


class _NotPlain(Exception):
    """A value :func:`_indented_json` leaves to the json module."""


_JSON_CONST = {None: "null", True: "true", False: "false"}


def _indented_json(obj: Any, indent: int) -> str:
    """``json.dumps(obj, indent=indent)``, character for character, for what ``to_dict`` holds:
    dicts, lists and tuples of str, int, float, bool and None (exact types; dict keys of those
    scalar types). Anything else raises :class:`_NotPlain` (the caller falls back to json)."""
    from json.encoder import encode_basestring_ascii as enc

    out: list[str] = []
    app = out.append
    float_repr = float.__repr__
    int_repr = int.__repr__

    def scalar(o) -> str:
        t = type(o)
        if t is str:
            return enc(o)
        if o is None or t is bool:
            return _JSON_CONST[o]
        if t is int:
            return int_repr(o)
        if t is float:
            if o != o:
                return "NaN"
            if o in (float("inf"), float("-inf")):
                return "Infinity" if o > 0 else "-Infinity"
            return float_repr(o)
        raise _NotPlain

    keys: dict[str, str] = {}  # a str key's JSON text (rank_state repeats ~20 keys per rank)

    def key(k) -> str:
        if type(k) is str:
            text = keys.get(k)
            if text is None:
                text = keys[k] = enc(k)
            return text
        t = type(k)
        if t is int or t is float or k is None or t is bool:
            return enc(scalar(k))
        raise _NotPlain

    def value(o, pad: str) -> None:
        t = type(o)
        if t is dict:
            if not o:
                app("{}")
                return
            inner = pad + " " * indent
            first, later = "{" + inner, "," + inner
            for k, v in o.items():
                app(first + key(k) + ": ")
                first = later
                t = type(v)
                if t is str:
                    app(enc(v))
                elif v is None:
                    app("null")
                elif t is int:
                    app(int_repr(v))
                elif t is dict or t is list or t is tuple:
                    value(v, inner)
                else:
                    app(scalar(v))
            app(pad + "}")
        elif t is list or t is tuple:
            if not o:
                app("[]")
                return
            inner = pad + " " * indent
            first, later = "[" + inner, "," + inner
            for v in o:
                app(first)
                first = later
                t = type(v)
                if t is int:
                    app(int_repr(v))
                elif t is str:
                    app(enc(v))
                elif t is dict or t is list or t is tuple:
                    value(v, inner)
                else:
                    app(scalar(v))
            app(pad + "]")
        else:
            app(scalar(o))

    value(obj, "\n")
    return "".join(out)


def _records(frame) -> list[dict[str, Any]]:
    """A rank_state frame as JSON-safe records (missing values as None), made column by column (one
    ``tolist`` per column, not a pandas row dict per rank: 50,000 ranks took seconds)."""
    if frame is None or len(frame) == 0:
        return []
    cols = list(frame.columns)
    if not frame.columns.is_unique:
        return [{k: _json_safe(v) for k, v in row.items()} for row in frame.to_dict("records")]
    values = []
    for c in cols:
        col = frame[c]
        values.append([None if m else _json_safe(v) for v, m in zip(col.tolist(), col.isna().tolist())])
    return [dict(zip(cols, row)) for row in zip(*values)]


def _json_safe(v: Any) -> Any:
    """One rank_state value as JSON: sequences as lists, missing values (None, NaN, ``<NA>``,
    ``NaT``) as None, times as ISO text, numpy scalars as Python ones."""
    t = type(v)
    if t is str:
        return None if v in ("<NA>", "NaT") else v
    if t is int or t is bool or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [list(x) if isinstance(x, tuple) else x for x in v]
    if (not isinstance(v, str) and v != v) or str(v) in ("<NA>", "NaT"):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if hasattr(v, "item"):
        return v.item()
    return v


def _grouped_views(ranks: dict, culprits) -> list[tuple[str, Any]]:
    """The ranks' views of one collective, identical views merged: the odd ones first, then the rest.

    Returns ``(label, view, odd)`` triples.

    At 1024 ranks a finding's per-rank list would be 1024 lines of the same thing; grouped, the
    culprits' rows come first (``odd: rank 300``) and the agreeing majority is one row with its
    count (``1023 ranks (0–299, 301–1023)``).
    """
    groups: dict[str, tuple[list[int], Any]] = {}
    for r, v in sorted(ranks.items()):
        key = repr((v.op, v.seq, v.shapes, v.dtypes, v.state))
        groups.setdefault(key, ([], v))[0].append(int(r))
    bad = {int(r) for r in culprits}
    rows = []
    for members, v in groups.values():
        odd = bool(bad.intersection(members)) or (len(groups) > 1 and len(members) * 2 < len(ranks))
        label = f"rank {members[0]}" if len(members) == 1 else count_ranks(members)
        rows.append((not odd, members[0], label, v, odd and len(groups) > 1))
    rows.sort(key=lambda x: x[:2])
    return [(label, v, odd) for *_, label, v, odd in rows]


def _clip(text: str, n: int) -> str:
    text = str(text).replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"

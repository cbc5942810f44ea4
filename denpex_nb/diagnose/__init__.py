"""Cross-rank analysis: align events per (pg, seq_kind, seq), apply rules, return a Diagnosis.

>>> d = denpex_nb.diagnose(incident)      # doctest: +SKIP
>>> d.verdict, d.culprit_ranks, d.initiating_rank

Steps: :func:`.align.align` finds every divergence in the events frame (vectorised);
:mod:`.rules` turns divergences and text-only evidence into findings; crashes and SyncBatchNorm
stacks refine a desync; one divergence seen through several counters (trace, Flight Recorder,
DETAIL) becomes one finding; findings are ordered by time and seq and the first is the verdict.
"""
from __future__ import annotations

import re

import pandas as pd

from . import catalog
from .align import KIND_PREFERENCE, Alignment, align
from .initiator import initiating_rank
from .model import Diagnosis, Evidence, Finding, RankView
from .rules import from_divergences, from_errors, from_progress, is_crash_error, timeout_finding

__all__ = ["diagnose", "Diagnosis", "Finding", "Evidence", "RankView", "catalog"]

_SYNCBN = re.compile(r"sync_batch_norm|SyncBatchNorm")
_CONF = {"high": 0, "medium": 1, "low": 2}


def diagnose(incident, *, strict: bool = False) -> Diagnosis:
    """Say what went wrong, where, on which rank it started, how sure we are: a :class:`Diagnosis`.

    ``incident`` is an :class:`~denpex_nb.incident.Incident` (from :func:`denpex_nb.load`).
    Never raises on odd or contradictory evidence: it lowers confidence instead. Should one rule
    fail on input nobody foresaw, the others still run and a note names the failed rule
    (``strict=True`` raises instead, for tests).
    """
    ranks_seen = list(incident.ranks_seen)
    diag = Diagnosis(ranks_seen=ranks_seen, lines=incident.lines.as_dict(), notes=list(incident.notes))
    if incident.is_empty:
        diag.notes.append("nothing distributed was found: no collective events and no errors in this evidence")
        return diag

    def safely(stage, fn, fallback):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one odd input must not cost the whole diagnosis
            if strict:
                raise
            diag.notes.append(f"rule {stage!r} failed on this input and was skipped: {type(exc).__name__}: {exc}")
            return fallback

    errors = incident.errors
    texts = safely("evidence texts", lambda: _error_texts(errors), {})
    al = safely("align", lambda: align(incident.events), Alignment([], {}, 0, 0, {}))
    findings = safely("divergences", lambda: from_divergences(al.divergences, texts), [])
    have_detail = any(k == "detail" for (_, k) in al.members)
    findings += safely("text evidence", lambda: from_errors(errors, ranks_seen, have_detail), [])
    findings += safely("progress", lambda: from_progress(incident.progress, set(al.members)), [])
    findings = safely("crash", lambda: _refine_crash(findings, errors), findings)
    findings = safely("syncbn", lambda: _refine_syncbn(findings, incident), findings)
    findings = safely("ddp", lambda: _refine_ddp(findings), findings)
    findings = safely("merge", lambda: _merge(findings), findings)
    if not findings:
        tf = safely("timeouts", lambda: timeout_finding(errors), None)
        if tf is not None:
            findings = [tf]
    findings = safely("order", lambda: _order(findings), findings)

    diag.findings = findings
    diag.initiating_rank = safely("initiating rank", lambda: initiating_rank(errors, incident.ranks), None)
    for (pg, kind), absent in al.missing_dumps.items():
        diag.notes.append(f"no {kind} evidence from {('rank ' if len(absent) == 1 else 'ranks ')}"
                          f"{', '.join(map(str, absent))} of pg {pg} (world size says they exist)")
    if al.n_events:
        diag.notes.append(f"aligned {al.n_events} collective events in {al.n_cells} (pg, counter, seq) cells")
    if findings and not findings[0].culprit_ranks and findings[0].class_id not in ("no-failure",):
        diag.notes.append("culprit undetermined: the evidence has no strict majority (a tie) or names no rank")
    return diag


def _error_texts(errors: pd.DataFrame) -> dict:
    if errors is None or errors.empty:
        return {}
    f = errors["file"].astype(object)
    ln = errors["line"]
    return {(str(a), int(b)): str(m)[:500] for a, b, m in zip(f, ln, errors["message"])
            if pd.notna(a) and pd.notna(b) and pd.notna(m)}


def _crashed(errors: pd.DataFrame) -> set[int]:
    if errors is None or errors.empty:
        return set()
    out = set()
    for k, m, sg, r in zip(errors["kind"].astype(str), errors["message"], errors["signal"].astype(object),
                           errors["rank"]):
        if pd.notna(r) and is_crash_error(k, None if pd.isna(m) else str(m), None if pd.isna(sg) else str(sg)):
            out.add(int(r))
    return out


def _refine_crash(findings: list[Finding], errors: pd.DataFrame) -> list[Finding]:
    """A desync whose laggards crashed on their own is a rank crash: the rank died, then the others waited."""
    crashed = _crashed(errors)
    if not crashed:
        return findings
    crash_f = [f for f in findings if f.class_id == "rank-crash"]
    out = []
    for f in findings:
        if f.class_id == "rank-desync" and f.culprit_ranks and set(f.culprit_ranks) <= crashed:
            f.class_id = "rank-crash"
            f.summary = (f"{'Rank' if len(f.culprit_ranks) == 1 else 'Ranks'} {', '.join(map(str, f.culprit_ranks))} "
                         f"failed on its own before reaching this collective; the others waited. " + f.summary)
            f.confidence = "high"
            for c in crash_f:
                if set(c.culprit_ranks) & set(f.culprit_ranks):
                    f.evidence = (c.evidence + f.evidence)[:12]
            crash_f = [c for c in crash_f if not set(c.culprit_ranks) & set(f.culprit_ranks)]
        out.append(f)
    # crash findings merged into a refined desync are dropped
    return [f for f in out if f.class_id != "rank-crash" or f.seq is not None or f in crash_f]


def _refine_syncbn(findings: list[Finding], incident) -> list[Finding]:
    """A desync or op mismatch where some ranks all_gather SyncBatchNorm's statistics is the SyncBatchNorm hang.

    Two kinds of evidence: a SyncBatchNorm stack or message (high confidence), or the collective's
    own signature: a 1-D all_gather of 2C+1 floats ([mean, invstd, count] for C channels) issued
    by some ranks only (medium confidence: a rank-only all_gather of an odd-length vector looks the same).
    """
    cands = [f for f in findings if f.class_id in ("rank-desync", "op-mismatch") and f.seq is not None
             and any((v.op or "").startswith("all_gather") for v in f.ranks.values())]
    if not cands:
        return findings
    mentioned = _mentions_syncbn(incident)
    for f in cands:
        gatherers = sorted(r for r, v in f.ranks.items() if (v.op or "").startswith("all_gather"))
        if not gatherers or len(gatherers) >= len(f.ranks):
            continue
        signature = all(_syncbn_shape(f.ranks[r]) for r in gatherers)
        if not (mentioned or signature):
            continue
        f.class_id = "syncbn-eval-hang"
        f.op = "all_gather"
        f.culprit_ranks = gatherers
        f.confidence = "high" if mentioned else "medium"
        why = ("a SyncBatchNorm stack in the evidence" if mentioned else
               "its signature: a 1-D all_gather of 2C+1 values ([mean, invstd, count] per channel)")
        f.summary = (f"SyncBatchNorm's statistics all_gather ran on {', '.join(map(str, gatherers))} only "
                     f"(recognised by {why}); the other ranks were elsewhere. " + f.summary)
    return findings


def _syncbn_shape(view: RankView) -> bool:
    if not view.shapes or len(view.shapes) != 1 or len(view.shapes[0]) != 1:
        return False
    n = view.shapes[0][0]
    floating = not view.dtypes or any(d and d.startswith(("float", "bfloat", "half")) for d in view.dtypes)
    return n >= 3 and n % 2 == 1 and floating


def _refine_ddp(findings: list[Finding]) -> list[Finding]:
    """DDP unused-parameter errors explain the all_reduce divergence they cause (different buckets)."""
    ddp = [f for f in findings if f.class_id == "unused-parameters" and f.seq is None]
    if not ddp:
        return findings
    cands = [f for f in findings if f.seq is not None and f.class_id in
             ("shape-mismatch", "rank-desync", "op-mismatch", "dtype-mismatch")
             and (f.op or "all_reduce").startswith("all_reduce")]
    if not cands:
        return findings
    target = _sorted(cands)[0]
    src = ddp[0]
    target.class_id = "unused-parameters"
    target.op = target.op or "all_reduce"
    if not target.culprit_ranks:
        target.culprit_ranks = list(src.culprit_ranks)
    target.summary = src.summary + " The ranks' bucket all_reduces diverge: " + target.summary
    target.evidence = (src.evidence + target.evidence)[:16]
    target.confidence = "high"
    return [f for f in findings if f is not src]


def _mentions_syncbn(incident) -> bool:
    e = incident.errors
    if len(e) and e["message"].astype(str).str.contains(_SYNCBN).any():
        return True
    for col in ("frames", "stack"):
        if col in incident.events.columns and incident.events[col].astype(str).str.contains(_SYNCBN).any():
            return True
    u = incident.unparsed
    if len(u) and "text" in u and u["text"].dropna().astype(str).str.contains(_SYNCBN).any():
        return True
    return False


def _merge(findings: list[Finding]) -> list[Finding]:
    """One divergence seen through several counters or sources becomes one finding."""
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (KIND_PREFERENCE.get(f.seq_kind, 9), f.seq is None)):
        twin = next((o for o in out if _same(o, f)), None)
        if twin is None:
            out.append(f)
            continue
        twin.evidence = (twin.evidence + [e for e in f.evidence if e not in twin.evidence])[:16]
        if not twin.culprit_ranks and f.culprit_ranks:
            twin.culprit_ranks = f.culprit_ranks
        for r, v in f.ranks.items():
            twin.ranks.setdefault(r, v)
        if twin.seq is None and f.seq is not None:
            twin.seq, twin.seq_kind, twin.pg = f.seq, f.seq_kind, f.pg
        if twin.op is None:
            twin.op = f.op
        if _CONF[f.confidence] < _CONF[twin.confidence]:
            twin.confidence = f.confidence
        if f.t_wall is not None and (twin.t_wall is None or f.t_wall < twin.t_wall):
            twin.t_wall = f.t_wall
    return out


def _same(a: Finding, b: Finding) -> bool:
    if a.class_id != b.class_id:
        return False
    if a.seq_kind == b.seq_kind and a.seq is not None and b.seq is not None:
        return False                        # two cells of one counter are two divergences
    if a.op and b.op and _op_family(a.op) != _op_family(b.op):
        return False
    if a.culprit_ranks and b.culprit_ranks and set(a.culprit_ranks) != set(b.culprit_ranks):
        return False
    return True


def _op_family(op: str) -> str:
    return "all_gather" if op.startswith("all_gather") else op.replace("_tensor", "")


def _order(findings: list[Finding]) -> list[Finding]:
    """By time, then seq; later divergences in the same counter are marked as possible consequences."""
    findings = _sorted(findings)
    first_in: dict = {}
    for f in findings:
        if f.seq is None:
            continue
        k = (f.pg, f.seq_kind)
        if k in first_in and f.seq > first_in[k]:
            f.confidence = "low"
            if not f.summary.startswith("After"):
                f.summary = f"After the divergence at {f.seq_kind} seq {first_in[k]} (possibly a consequence): " + f.summary
        else:
            first_in.setdefault(k, f.seq)
    return findings


def _sorted(findings: list[Finding]) -> list[Finding]:
    far = pd.Timestamp.max.tz_localize("UTC")

    def key(f: Finding):
        t = f.t_wall if f.t_wall is not None and not pd.isna(f.t_wall) else far
        if t is not far and t.tzinfo is None:
            t = t.tz_localize("UTC")
        undetermined = f.class_id == "timeout-undetermined"
        return (undetermined, t, f.seq if f.seq is not None else 1 << 62, _CONF[f.confidence])

    return sorted(findings, key=key)

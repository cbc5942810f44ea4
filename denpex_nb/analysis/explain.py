"""Explain rules: findings that account for other findings, and how findings are combined.

A crash explains the desync it caused; SyncBatchNorm explains an all_gather that only some ranks
issued; DDP's reducer error explains the bucket all_reduces that diverge. Each rule returns a new
list of findings; a refined finding is a new :class:`Finding` (``dataclasses.replace``) whose
``basis`` keeps the summaries it was built on. :func:`merge` folds one divergence seen through
several counters into one finding; :func:`order` sorts by time and seq and marks a later
divergence in the same counter as ``consequence_of`` the first.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pandas as pd

from ..vocab import MENTIONS, ClassId
from .align import KIND_PREFERENCE
from .model import Finding, RankView
from .rules import Context, fmt_ranks, own_failures, rule

_SYNCBN = re.compile("|".join(map(re.escape, MENTIONS["syncbn"])))
_CONF = {"high": 0, "medium": 1, "low": 2}


def crashed_ranks(errors: pd.DataFrame) -> set[int]:
    """Ranks with an own failure (exception that is not a collective error, OOM, a kill)."""
    if errors is None or errors.empty:
        return set()
    return {int(r) for r, own in zip(errors["rank"], own_failures(errors)) if own and pd.notna(r)}


@rule(
    "crash-behind-desync",
    stage="explain",
    emits=(ClassId.RANK_CRASH,),
    uses=("findings: rank-desync, rank-crash", "errors: own failures"),
)
def crash_behind_desync(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """A desync whose laggards crashed on their own is a rank crash: the rank died, then the others waited."""
    crashed = crashed_ranks(ctx.errors)
    if not crashed:
        return findings
    crash_f = [f for f in findings if f.class_id == ClassId.RANK_CRASH and f.seq is None]
    absorbed: set[int] = set()
    out = []
    for f in findings:
        behind = {r for r, v in f.ranks.items() if v.state == "absent"} or set(f.culprit_ranks)
        if f.class_id == ClassId.RANK_DESYNC and behind and behind <= crashed:
            mine = [c for c in crash_f if set(c.culprit_ranks) & behind]
            absorbed.update(id(c) for c in mine)
            f = replace(
                f,
                class_id=ClassId.RANK_CRASH,
                confidence="high",
                rule="crash-behind-desync",
                culprit_ranks=sorted(behind),
                culprit_basis="own-failure",
                summary=(
                    f"{fmt_ranks(behind).capitalize()} failed on "
                    f"{'its' if len(behind) == 1 else 'their'} own before reaching this "
                    f"collective; the others waited."
                ),
                basis=(f.summary,) + tuple(c.summary for c in mine),
                evidence=(tuple(e for c in mine for e in c.evidence) + f.evidence)[:12],
            )
        out.append(f)
    return [f for f in out if id(f) not in absorbed]


@rule(
    "syncbn",
    stage="explain",
    emits=(ClassId.SYNCBN_EVAL_HANG,),
    uses=("findings: rank-desync, op-mismatch", "events: in_shapes, dtype, frames", "errors/unparsed: SyncBatchNorm"),
)
def syncbn(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """A desync or op mismatch where some ranks all_gather SyncBatchNorm's statistics is the SyncBatchNorm hang.

    Two kinds of evidence: a SyncBatchNorm stack or message (high confidence), or the collective's
    own signature: a 1-D all_gather of 2C+1 floats ([mean, invstd, count] for C channels) issued
    by some ranks only (medium confidence: a rank-only all_gather of an odd-length vector looks the same).
    """
    # a finding without a seq (tracebacks' last calls) is only recognised by a SyncBatchNorm stack;
    # whether the evidence mentions one is asked only when an all_gather divergence is there
    gathers = [
        f
        for f in findings
        if f.class_id in (ClassId.RANK_DESYNC, ClassId.OP_MISMATCH)
        and any((v.op or "").startswith("all_gather") for v in f.ranks.values())
    ]
    if not gathers:
        return findings
    mentioned = _mentions_syncbn(ctx.incident)
    cands = [f for f in gathers if f.seq is not None or mentioned]
    if not cands:
        return findings
    out = []
    for f in findings:
        if f in cands:
            gatherers = sorted(r for r, v in f.ranks.items() if (v.op or "").startswith("all_gather"))
            signature = bool(gatherers) and all(_syncbn_shape(f.ranks[r]) for r in gatherers)
            if gatherers and len(gatherers) < len(f.ranks) and (mentioned or signature):
                why = (
                    "a SyncBatchNorm stack in the evidence"
                    if mentioned
                    else "its signature: a 1-D all_gather of 2C+1 values ([mean, invstd, count] per channel)"
                )
                others = len(f.ranks) - len(gatherers)
                group = ctx.group_of(len(f.ranks), ctx.group_size)
                named = others * 2 > group  # the ranks elsewhere must be a strict majority
                f = replace(
                    f,
                    class_id=ClassId.SYNCBN_EVAL_HANG,
                    op="all_gather",
                    culprit_ranks=gatherers if named else (),
                    confidence="high" if mentioned and named else "medium",
                    rule="syncbn",
                    culprit_basis="majority"
                    if named
                    else f"undetermined: {others} rank(s) elsewhere of a group of {group} is no majority",
                    summary=(
                        f"SyncBatchNorm's statistics all_gather ran on {fmt_ranks(gatherers)} "
                        f"only (recognised by {why}); the other ranks were elsewhere."
                    ),
                    basis=(f.summary,),
                )
        out.append(f)
    return out


def _syncbn_shape(view: RankView) -> bool:
    if not view.shapes or len(view.shapes) != 1 or len(view.shapes[0]) != 1:
        return False
    n = view.shapes[0][0]
    floating = not view.dtypes or any(d and d.startswith(("float", "bfloat", "half")) for d in view.dtypes)
    return n >= 3 and n % 2 == 1 and floating


def _mentions_syncbn(incident) -> bool:
    """Does any line read mention SyncBatchNorm? The loader noticed it while reading every line,
    parsed or not (``Incident.mentions``), so the unparsed text is not searched again here (a
    million kept lines cost ~1 s to search); an Incident built by hand has no such record."""
    mentions = getattr(incident, "mentions", None)
    if mentions is not None and mentions.get("syncbn"):
        return True
    e = incident.errors
    if len(e) and e["message"].astype(str).str.contains(_SYNCBN).any():
        return True
    for col in ("frames", "stack"):
        if col in incident.events.columns and incident.events[col].astype(str).str.contains(_SYNCBN).any():
            return True
    if mentions is not None:
        return False
    u = incident.unparsed
    if len(u) and "text" in u and u["text"].dropna().astype(str).str.contains(_SYNCBN).any():
        return True
    return False


@rule(
    "ddp-buckets",
    stage="explain",
    emits=(ClassId.UNUSED_PARAMETERS,),
    uses=("findings: unused-parameters (text), all_reduce divergences",),
)
def ddp_buckets(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """DDP unused-parameter errors explain the all_reduce divergence they cause (different buckets)."""
    ddp = [f for f in findings if f.class_id == ClassId.UNUSED_PARAMETERS and f.seq is None]
    if not ddp:
        return findings
    cands = [
        f
        for f in findings
        if f.seq is not None
        and f.class_id in (ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC, ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH)
        and (f.op or "all_reduce").startswith("all_reduce")
    ]
    if not cands:
        return findings
    target, src = sort_findings(cands)[0], ddp[0]
    refined = replace(
        target,
        class_id=ClassId.UNUSED_PARAMETERS,
        op=target.op or "all_reduce",
        confidence="high",
        culprit_ranks=target.culprit_ranks or src.culprit_ranks,
        culprit_basis=target.culprit_basis if target.culprit_ranks else src.culprit_basis,
        summary=src.summary + " The ranks' bucket all_reduces diverge.",
        rule="ddp-buckets",
        basis=(target.summary,),
        evidence=(src.evidence + target.evidence)[:16],
    )
    return [refined if f is target else f for f in findings if f is not src]


def merge(findings: list[Finding]) -> list[Finding]:
    """One divergence seen through several counters or sources becomes one finding."""
    out: list[Finding] = []
    # two findings of one class are one divergence unless they are two cells of one counter, or
    # name different op families, or different culprit sets; compared through a key per finding of
    # ``out``, by class (a thousand divergences were a million pairwise comparisons)
    keys: list[tuple] = []
    by_class: dict[str, list[int]] = {}
    for f in sorted(findings, key=lambda f: (KIND_PREFERENCE.get(f.seq_kind, 9), f.seq is None)):
        kind, has_seq, fam, culprits = _same_key(f)
        i = next(
            (
                i
                for i in by_class.get(f.class_id, ())
                if not (has_seq and keys[i][1] and keys[i][0] == kind)
                and (fam is None or keys[i][2] is None or keys[i][2] == fam)
                and (culprits is None or keys[i][3] is None or keys[i][3] == culprits)
            ),
            None,
        )
        if i is None:
            by_class.setdefault(f.class_id, []).append(len(out))
            out.append(f)
            keys.append((kind, has_seq, fam, culprits))
            continue
        twin = out[i]
        changes = dict(
            evidence=(twin.evidence + tuple(e for e in f.evidence if e not in twin.evidence))[:16],
            ranks={**f.ranks, **twin.ranks},
        )
        if not twin.culprit_ranks and f.culprit_ranks:
            changes.update(culprit_ranks=f.culprit_ranks, culprit_basis=f.culprit_basis)
        if twin.seq is None and f.seq is not None:
            changes.update(seq=f.seq, seq_kind=f.seq_kind, pg=f.pg)
        if twin.op is None:
            changes["op"] = f.op
        if _CONF[f.confidence] < _CONF[twin.confidence]:
            changes["confidence"] = f.confidence
        if f.t_wall is not None and (twin.t_wall is None or f.t_wall < twin.t_wall):
            changes["t_wall"] = f.t_wall
        out[i] = replace(twin, **changes)
        keys[i] = _same_key(out[i])
    return out


def _same_key(f: Finding) -> tuple:
    """(seq_kind, has a seq, op family or None, culprit set or None): what :func:`merge` compares
    of a finding beside its class."""
    return (
        f.seq_kind,
        f.seq is not None,
        _op_family(f.op) if f.op else None,
        frozenset(f.culprit_ranks) if f.culprit_ranks else None,
    )


def _op_family(op: str) -> str:
    return "all_gather" if op.startswith("all_gather") else op.replace("_tensor", "")


def order(findings: list[Finding]) -> list[Finding]:
    """By time, then seq; a later divergence in the same counter is a possible consequence of the first."""
    out = []
    first_in: dict = {}
    for f in sort_findings(findings):
        if f.seq is not None:
            k = (f.pg, f.seq_kind)
            if k in first_in and f.seq > first_in[k].seq:
                f = replace(f, confidence="low", consequence_of=first_in[k].key)
            else:
                first_in.setdefault(k, f)
        out.append(f)
    return out


def sort_findings(findings: list[Finding]) -> list[Finding]:
    far = pd.Timestamp.max.tz_localize("UTC")

    def key(f: Finding):
        t = f.t_wall if f.t_wall is not None and not pd.isna(f.t_wall) else far
        if t is not far and t.tzinfo is None:
            t = t.tz_localize("UTC")
        undetermined = f.class_id == ClassId.TIMEOUT_UNDETERMINED
        first = min(((e.file, e.line) for e in f.evidence), default=("\uffff", 1 << 62))
        # without times, the earlier line of the same file came first
        # a finding without a seq after every seq, however large (a counter may reach 2**63 - 1)
        return (undetermined, t, f.seq if f.seq is not None else math.inf, first, _CONF[f.confidence])

    return sorted(findings, key=key)

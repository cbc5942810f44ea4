"""Positions as evidence: ranks that stopped at different places when the evidence ends.

Two rules:

* ``stall-report`` (find): Horovod's stall inspector lists, for every rank of the job that has not
  submitted a tensor the others submitted, that tensor (``ingest/horovod.py``). The coordinator
  sees every rank's submissions, so the list is a statement of who has not submitted: those ranks
  are named as culprits when they are a strict minority of the group (its stated size, else the
  lower bound the evidence gives: the ranks seen, the highest rank named plus one, and at least one
  rank more than the missing ones, since some rank submitted each tensor). On a tie or a majority
  no one is named: the ranks that submitted may have made an extra or a different call.
* ``end-positions`` (explain, last): when no other rule explained the evidence, the last position
  each rank reached on each counter (:func:`.state.positions`: trace, Flight Recorder, DETAIL
  fingerprints, watchdog lines, NCCL COLL lines, progress counters). Ranks at different positions
  when the evidence ends, with no rank's record completing a collective past the lowest position
  (a completed collective needs every rank, so a completion past it says the rank behind got
  there and only its log stops early), are a ``rank-desync`` candidate naming who is behind. The
  culprits are the side off a strict majority of the group (its stated size, else the lower bound
  the evidence gives), never on a tie and never across groups or counters. When a failure was
  printed that no rule explains, it replaces "cause undetermined" (``medium`` when the culprits are
  named). When **no** failure was printed, the evidence cannot tell a hang from a log that was cut
  while the job still ran (ranks write their lines at different moments, and per-rank files end
  wherever each copy stopped: recorded healthy runs cut at any point show ranks apart by one to
  four collectives). Then the verdict is :func:`cannot_tell` (``no-evidence``: could not tell,
  what to collect) and the ``rank-desync`` candidate is its alternative at ``low``. It is never
  ``no-failure``: ranks that stopped at different places are not an all-clear.
"""

from __future__ import annotations

import pandas as pd

from ..vocab import COMPLETE_RECORD_KINDS, ClassId, ErrorKind
from .align import KIND_PREFERENCE
from .model import Evidence, Finding, RankView
from .rules import (
    MAX_EVIDENCE,
    Context,
    earliest,
    error_evidence,
    errors_of_kind,
    fmt_ranks,
    rule,
    strict_minority,
)
from .signals import failure_signals


def _ranks_of(v) -> set[int]:
    try:
        return {int(x) for x in v}
    except (TypeError, ValueError, OverflowError):
        return set()


@rule("stall-report", emits=(ClassId.RANK_DESYNC,), uses=("errors: stall_report (Horovod's stall inspector)",))
def stall_report(ctx: Context) -> list[Finding]:
    """Horovod's coordinator names the ranks that have not submitted what the others wait on."""
    st = errors_of_kind(ctx.errors, ErrorKind.STALL_REPORT)
    if not len(st):
        return []
    missing: set[int] = set()
    for v in st["related_ranks"].dropna():
        missing |= _ranks_of(v)
    ops = {str(o) for o in st["op"].dropna()} if "op" in st else set()
    op = ops.pop() if len(ops) == 1 else None
    # the group: its stated size, else at least every rank the evidence names (the report's too)
    seen = set(ctx.ranks_known) | missing | {int(r) for r in st["rank"].dropna()}
    group = ctx.group_of(len(seen), ctx.group_size)
    # a tensor is in the inspector's table only once some rank submitted it: at least one rank more
    # than the missing ones exists
    group = max(group, max(missing, default=-1) + 1, len(missing) + 1)
    if missing and len(missing) * 2 < group:
        culprits = sorted(missing)
        basis = (
            "statement: Horovod's stall inspector lists every rank that has not submitted a tensor the "
            f"others submitted; {fmt_ranks(culprits)}, a strict minority of a group of at least {group}"
        )
        conf = "medium"
    elif missing:
        culprits = []
        side = "a tie" if len(missing) * 2 == group else "most of the group"
        basis = (
            f"undetermined: the stall report names {len(missing)} of a group of at least {group} ranks ({side}); "
            "the ranks that submitted may have made an extra or different call"
        )
        conf = "low"
    else:
        culprits, basis, conf = [], "undetermined: the stall report's list of ranks is not in the evidence", "low"
    what = f" {op}" if op else ""
    shut = bool(st["shutdown"].fillna(False).astype(bool).any()) if "shutdown" in st else False
    summary = (
        f"Horovod's stall inspector: {fmt_ranks(sorted(missing)) if missing else 'some ranks'} never submitted the"
        f"{what} tensors the other ranks are waiting in"
        + (" (Horovod shut the job down)" if shut else "")
        + ": they are behind the others."
    )
    return [
        Finding(
            class_id=ClassId.RANK_DESYNC,
            summary=summary,
            confidence=conf,
            op=op,
            culprit_ranks=culprits,
            ranks={r: RankView(op=op, state="absent") for r in sorted(missing)},
            evidence=error_evidence(st),
            t_wall=earliest(st),
            rule="stall-report",
            culprit_basis=basis,
        )
    ]


@rule(
    "end-positions",
    stage="explain",
    emits=(ClassId.RANK_DESYNC, ClassId.NO_EVIDENCE),
    uses=("rank positions: trace, fr, detail, work, nccl_position, watchdog SeqNum, progress counters",),
)
def end_positions(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """Ranks at different positions when the evidence ends, no failure printed (see the module
    doc); only when no other rule explained the evidence. With a failure printed and no rule to
    explain it, diagnosis weighs the candidate against the failure signals
    (:func:`denpex_nb.analysis.diagnose`): it replaces "cause undetermined", and is an alternative
    beside a failure whose family says more."""
    if findings or printed_failure(ctx):
        return findings
    found = from_positions(ctx)
    return [found] if found is not None else findings


def printed_failure(ctx: Context) -> bool:
    """Did any rank fail, by a reader's row or a failure signal on a line no reader parsed?"""
    return (bool(len(ctx.state)) and bool(ctx.state["failed"].any())) or bool(len(failure_signals(ctx.incident)))


def from_positions(ctx: Context) -> Finding | None:
    """The candidate of the most precise counter whose ranks ended at different positions."""
    from .state import positions

    pos = positions(ctx.incident)
    if not len(pos):
        return None
    complete_level = _complete_levels(pos)
    failed = printed_failure(ctx)
    cells = []
    for (pg, counter), rows in pos.groupby([pos["pg"].astype(object), pos["counter"].astype(object)], dropna=False):
        if (pg is None or pd.isna(pg)) and (rows["stuck_places"] > 1).any():
            continue  # a rank stuck at several places, no group named: several groups' counters
        last = dict(zip(rows["rank"].astype(int), rows["position"].astype("int64")))
        if len(last) < 2 or len(set(last.values())) < 2:
            continue
        lo = min(last.values())
        behind = sorted(r for r, p in last.items() if p == lo)
        done = rows[rows["completed"]]
        if len(done) and int(done["position"].max()) > lo:
            continue  # a collective past the lowest position completed: every rank got there
        if str(counter) not in COMPLETE_RECORD_KINDS and all(complete_level.get(r) is True for r in behind):
            continue  # the ranks' complete records show them as far as everyone: their log was cut
        cells.append((KIND_PREFERENCE.get(str(counter), 9), -len(last), str(pg), pg, counter, rows, last, lo, behind))
    if not cells:
        return None
    _, _, _, pg, counter, rows, last, lo, behind = min(cells, key=lambda c: c[:3])
    pg = None if pg is None or pd.isna(pg) else str(pg)
    stated = ctx.group_size if pg in (None, "", "0", "default_pg") else None
    group = ctx.group_of(len(last), stated)
    culprits, basis = strict_minority(last, group)
    if basis == "majority":
        basis = (
            f"majority: {group - len(culprits) if stated else len(last) - len(culprits)} ranks of a group of "
            f"{group} stopped elsewhere on the {counter} counter"
        )
    ahead = sorted(r for r in last if r not in behind)
    hi = max(last.values())
    where = f"{counter} seq" + (f" of pg {pg}" if pg not in (None, "") else "")
    desc = "; ".join(f"{fmt_ranks(rs)} at {p}" for p, rs in sorted(_by_value(last).items()))
    summary = (
        f"The ranks stopped at different places ({where}: {desc}) and nothing completed after: "
        f"{fmt_ranks(behind)} {'is' if len(behind) == 1 else 'are'} behind "
        f"{fmt_ranks(ahead)} (up to {hi})."
    )
    if not failed:
        summary += " No failure was printed; a log that was cut unevenly would look the same."
    ev_rows = rows.sort_values("position", kind="stable")
    evidence = []
    for r, p, o, f, ln in zip(ev_rows["rank"], ev_rows["position"], ev_rows["op"], ev_rows["file"], ev_rows["line"]):
        file = str(f) if f is not None and not pd.isna(f) else "?"
        line = int(ln) if ln is not None and not pd.isna(ln) else 0
        text = ctx.texts.get((file, line)) or (
            f"rank {int(r)}: last {counter} seq {int(p)}" + (f" ({o})" if isinstance(o, str) else "")
        )
        evidence.append(Evidence(file=file, line=line, text=text, rank=int(r)))
    evidence = evidence[:MAX_EVIDENCE]
    ops = rows.set_index(rows["rank"].astype(int))["op"].to_dict()
    return Finding(
        class_id=ClassId.RANK_DESYNC,
        summary=summary,
        confidence="medium" if failed and culprits else "low",
        pg=pg,
        seq=lo + 1,
        seq_kind=str(counter),
        culprit_ranks=culprits,
        ranks={
            r: RankView(
                op=ops.get(r) if isinstance(ops.get(r), str) else None, seq=p, state="absent" if p == lo else None
            )
            for r, p in last.items()
        },
        evidence=evidence,
        rule="end-positions",
        culprit_basis=basis,
    )


def cannot_tell(candidate: Finding) -> Finding:
    """The verdict over a ``rank-desync`` candidate of positions alone, nothing failed printed: a
    "could not tell" that says where the ranks stopped, why that is not enough and what to collect
    (the candidate itself goes to the alternatives)."""
    from .catalog.entries import COLLECT_MORE

    where = candidate.summary.split(" and nothing completed after")[0]
    return Finding(
        class_id=ClassId.NO_EVIDENCE,
        confidence="low",
        rule="end-positions",
        culprit_basis="undetermined: no failure was printed; the ranks' last positions alone cannot tell a hang "
        "from a log cut while the job ran",
        summary=(
            f"Could not tell whether the job failed. {where}, and no failure was printed: a hang there and a "
            "log cut while the job still ran look the same (if it hung, see the rank-desync alternative). "
            "Collect: the end of every rank's log and the job's exit status, or the watchdog's timeout; "
            f"{COLLECT_MORE[0].lower() + COLLECT_MORE[1:]}"
        ),
        evidence=list(candidate.evidence),
        pg=candidate.pg,
        seq=candidate.seq,
        seq_kind=candidate.seq_kind,
    )


def _by_value(d: dict) -> dict:
    out: dict = {}
    for k, v in sorted(d.items()):
        out.setdefault(v, []).append(k)
    return out


def _complete_levels(pos: pd.DataFrame) -> dict[int, bool]:
    """Per rank with a complete record (trace, FR): True when it reached the furthest position of
    its group there, False when it is behind."""
    out: dict[int, bool] = {}
    comp = pos[pos["counter"].astype(object).isin([str(k) for k in COMPLETE_RECORD_KINDS])]
    for _, rows in comp.groupby([comp["pg"].astype(object), comp["counter"].astype(object)], dropna=False):
        hi = int(rows["position"].max())
        for r, p in zip(rows["rank"].astype(int), rows["position"].astype("int64")):
            out[r] = out.get(r, True) and int(p) == hi
    return out

"""A peer that closed the connection is the suspect: that side went away first.

gloo's ``Connection closed by peer [ip]:port`` / ``Read error [ip]:port: Connection reset by peer``
and c10d's socket errors are written by the rank that *stayed*: the other end of the connection
exited (crashed, was killed, or returned early) first. When these are the only failure the
evidence shows, the verdict is a ``rank-crash`` of that peer; its rank is named only where the
evidence establishes it:

* the failing call names its peer: a point-to-point ``dist.send(t, dst=0)`` / ``dist.recv(t, 0)``
  (its ``dst``/``src`` argument, or the second positional one);
* the peer's address belongs to exactly one rank (:meth:`.resolve.Resolver.by_addr`: NCCL's
  Bootstrap line of a ranked process, a host only one rank runs on); the basis says which.

For a point-to-point call the rule's finding is the verdict. In a collective (or a call the
evidence does not show) the other side may have left for a reason of its own that its own log
states (it crashed, was killed, returned early past a collective the others entered, or aborted on a
mismatch it detected: gloo's size check aborts the rank that sees it, and its peers read "closed by
peer"), so the rule's finding is an alternative beside whatever else the evidence explains. When
nothing else explains the failure (no rule found anything, no failure signal says more, and no other
collective failure is there: :func:`sole_peer_gone`), the closed connection is all the evidence
establishes, and what it establishes is that the peer went away first: ``rank-crash`` at low
confidence, naming only a peer the evidence maps, with the reasons the peer may have had (a size
mismatch it detected, a collective it skipped) as alternatives. Beside another collective failure (a
timeout, a mismatch, an NCCL error) the peer may have exited *because* of it: there a closed
connection stays an alternative. The finding carries no time, so a divergence found elsewhere stays
first.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd

from ..signals import family_of
from ..vocab import COLLECTIVE_ERROR_KINDS, FAILURE_KINDS, ClassId, ErrorKind, SignalFamily
from . import signals as _signals
from .model import Evidence, Finding
from .rules import Context, fmt_ranks, rule

_CLOSED = re.compile(r"Connection (?:closed|reset) by (?:remote )?peer")
_P2P = {"send", "recv", "isend", "irecv", "recv_anysource"}
_PEER_ARG = re.compile(r"\b(?:dst|src|peer)\s*=\s*(\d{1,9})\b")
#: ``dist.recv(input, 0)``: the second positional argument of a point-to-point call
_SECOND_ARG = re.compile(r"\(\s*[^,()=]+,\s*(\d{1,9})\s*[,)]")


def _i(v):
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def peer_of_call(op, call) -> int | None:
    """The peer rank a point-to-point call names (``dst=``/``src=``, or its second argument)."""
    if op is None or (not isinstance(op, str) and pd.isna(op)) or str(op) not in _P2P:
        return None
    if call is None or (not isinstance(call, str) and pd.isna(call)):
        return None
    m = _PEER_ARG.search(str(call)) or _SECOND_ARG.search(str(call))
    return int(m.group(1)) if m else None


def _closed(errs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per error row: (does it say the peer closed or reset the connection, is it another collective
    failure). The first are gloo's peer-gone rows and exceptions in those words; a gloo row that says
    something else (``Read timeout``, ``Socket closed``: no peer named as the side that left) is
    another collective failure, as a timeout or a mismatch is."""
    kinds = errs["kind"].astype(str)
    said = errs["message"].astype(str).str.contains(_CLOSED)
    closed = kinds.isin([str(ErrorKind.GLOO_PEER_GONE), str(ErrorKind.EXCEPTION)]) & said
    return closed, kinds.isin([str(k) for k in COLLECTIVE_ERROR_KINDS]) & ~closed


@rule(
    "peer-gone",
    # (sole_peer_gone adds the reasons the peer may have had as alternatives, under this rule's name)
    emits=(ClassId.RANK_CRASH, ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC),
    uses=(
        "errors: gloo_peer_gone, exceptions 'closed/reset by peer' with their point-to-point call",
        "signals: failure signals that say more than a process going away (sole_peer_gone)",
    ),
)
def peer_gone(ctx: Context) -> list[Finding]:
    """The side that closed the connection went away first (see the module doc)."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    closed, others = _closed(errs)
    if not closed.any():
        return []
    msg = errs["message"].astype(str)
    rows = errs[closed]
    reporters = sorted({int(r) for r in rows["rank"].dropna()})
    named: dict[int, str] = {}
    ops = rows["op"].astype(object) if "op" in rows else [None] * len(rows)
    calls = rows["collective_call"].astype(object) if "collective_call" in rows else [None] * len(rows)
    for op, call in zip(ops, calls):
        peer = peer_of_call(op, call)
        if peer is not None:
            named.setdefault(peer, f"the failing call {call} names its peer, rank {peer}")
    if not named:  # the peer's address, where one rank alone has it
        for addr in rows["peer"].dropna().astype(str) if "peer" in rows else ():
            hit = ctx.resolver.by_addr(addr)
            if hit is not None:
                named.setdefault(hit[0], f"the peer at {addr}: {hit[1]}")
    culprits: list[int] = []
    if len(named) == 1 and not set(named) & set(reporters):
        culprits = list(named)
        basis = f"statement: {named[culprits[0]]}, and it closed the connection"
    elif named:
        basis = f"undetermined: the calls name several peers ({fmt_ranks(named)}) or a rank that reported it"
    else:
        addr = sorted({str(p) for p in rows.get("peer", pd.Series(dtype=object)).dropna()})
        basis = (
            "undetermined: no evidence maps the peer" + (f" at {', '.join(addr[:3])}" if addr else "") + " to a rank"
        )
    p2p = any(o is not None and not pd.isna(o) and str(o) in _P2P for o in ops)
    who = fmt_ranks(culprits) if culprits else "The peer process"
    return [
        Finding(
            class_id=ClassId.RANK_CRASH,
            summary=(
                f"{who} closed the connection: {fmt_ranks(reporters) if reporters else 'a rank'} saw "
                f"'{_CLOSED.search(' '.join(msg[closed])).group(0)}', so the other side went away first."
            ),
            confidence="medium" if culprits else "low",
            culprit_ranks=culprits,
            evidence=tuple(
                Evidence(file=str(f), line=_i(ln) or 0, text=str(m)[:500], rank=_i(r))
                for f, ln, m, r in zip(rows["file"].astype(object), rows["line"], rows["message"], rows["rank"])
            )[:8],
            rule="peer-gone",
            culprit_basis=basis,
            op=next((str(o) for o in ops if o is not None and not pd.isna(o)), None),
            # only a point-to-point call makes the peer's exit the story; in a collective the other
            # side may have aborted on a mismatch it detected (a shape, an op), so there it is an
            # alternative, as it is beside any other collective failure
            alternative_only=bool(others.any()) or not p2p,
        )
    ]


def _distributed(rows: pd.DataFrame) -> pd.Series:
    """Rows a distributed component wrote: gloo's reader recognised them, or they were raised inside
    a collective or point-to-point call (an application's own HTTP client reset by its server is not
    a rank's peer)."""
    kinds = rows["kind"].astype(str)
    op = rows["op"] if "op" in rows else pd.Series([None] * len(rows), index=rows.index)
    return (kinds == ErrorKind.GLOO_PEER_GONE) | op.notna()


#: failure signals that say no more than a process going away (its exit, a launcher reporting it, a
#: plain line such as ``Traceback``): beside closed connections they leave the peer gone as the story
_GOING_AWAY = frozenset({SignalFamily.EXIT, SignalFamily.LAUNCHER, SignalFamily.OTHER})


def _a_cause_signalled(ctx: Context, closed: pd.Series) -> bool:
    """Does a failure signal, or an error a reader parsed, other than the closed connections say more
    (a size, a timeout, a stall, memory, a device, a network fault, a component's check: an abort on
    gloo's ``EnforceNotMet``)?"""
    fs = _signals.failure_signals(ctx.incident)
    if len(fs):
        gone = fs["text"].astype(str).str.contains(_signals.PEER_WORDS)
        if (~fs["family"].astype(object).isin([str(f) for f in _GOING_AWAY]) & ~gone).any():
            return True
    errs = ctx.errors
    rest = errs[~closed & errs["kind"].astype(str).isin([str(k) for k in FAILURE_KINDS])]
    return any(family_of(str(m)) not in _GOING_AWAY for m in rest["message"].astype(object))


def sole_peer_gone(ctx: Context, side: list[Finding]) -> list[Finding]:
    """The rule's finding as the verdict when a closed connection is all the evidence shows (see the
    module doc), then its alternatives; [] when it is not.

    Called by the diagnosis only when no rule found anything and no failure signal says more. The
    finding becomes the verdict when no collective failure other than the closed connections is in the
    errors, no failure signal says more (:func:`_a_cause_signalled`), and a distributed component wrote
    them (:func:`_distributed`)."""
    found = next((f for f in side if f.rule == "peer-gone" and f.class_id == ClassId.RANK_CRASH), None)
    errs = ctx.errors
    if found is None or errs is None or errs.empty:
        return []
    closed, others = _closed(errs)
    if others.any() or not _distributed(errs[closed]).any() or _a_cause_signalled(ctx, closed):
        return []
    verdict = replace(
        found,
        confidence="low",
        alternative_only=False,
        summary=(
            found.summary + " Why it went away is in its own log, not in this evidence: it crashed or was "
            "killed, returned early past a collective the others entered, or aborted on a mismatch it detected."
        ),
    )
    why = {
        ClassId.SHAPE_MISMATCH: (
            "The peer may have aborted on a size mismatch it detected: gloo's size check aborts the rank that "
            "sees it, and its peers read the connection closed. Its own log would say so ('Received data size "
            "doesn't match expected size')."
        ),
        ClassId.RANK_DESYNC: (
            "The peer may have returned early, past a collective the others entered (a skipped collective): "
            "its process ended and closed its connections. Its own log would show where it stopped."
        ),
    }
    alts = [
        replace(
            found,
            class_id=cls,
            summary=text,
            confidence="low",
            culprit_ranks=(),
            culprit_basis="undetermined: the peer's own log is not in this evidence",
            alternative_only=True,
        )
        for cls, text in why.items()
    ]
    return [verdict, *alts]

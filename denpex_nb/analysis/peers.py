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

It is the verdict only for a point-to-point call. In a collective (or a call the evidence does not
show) the other side may have aborted on a mismatch it detected (gloo's size check aborts the rank
that sees it, and its peers read "closed by peer"), and beside another failure (a timeout, a
mismatch, an NCCL error) the peer may have exited *because* of it: there a closed connection is only
an alternative. The finding carries no time, so a divergence found elsewhere stays first.
"""

from __future__ import annotations

import re

import pandas as pd

from ..vocab import COLLECTIVE_ERROR_KINDS, ClassId, ErrorKind
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


@rule(
    "peer-gone",
    emits=(ClassId.RANK_CRASH,),
    uses=("errors: gloo_peer_gone, exceptions 'closed/reset by peer' with their point-to-point call",),
)
def peer_gone(ctx: Context) -> list[Finding]:
    """The side that closed the connection went away first (see the module doc)."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    kinds = errs["kind"].astype(str)
    msg = errs["message"].astype(str)
    closed = (kinds == ErrorKind.GLOO_PEER_GONE) | ((kinds == ErrorKind.EXCEPTION) & msg.str.contains(_CLOSED))
    if not closed.any():
        return []
    rows = errs[closed]
    others = kinds.isin([str(k) for k in COLLECTIVE_ERROR_KINDS - {ErrorKind.GLOO_PEER_GONE}]) & ~closed
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

"""The initiating rank: the first rank to fail in time, not the one torchrun calls "Root Cause".

A rank's own failure (an exception that is not a collective error, OOM, a kill, a gloo abort, an
NCCL error) outranks the timeouts and peer-gone errors it causes elsewhere. Within a tier the
earliest timestamp wins; without timestamps, a tier held by exactly one rank names it; anything
else is undetermined (``None``). torchrun's agent and ChildFailedError rows are only used for the
signals they report (SIGTERM there means collateral).
"""

from __future__ import annotations

import pandas as pd

from ..vocab import VICTIM_KINDS, ErrorKind
from .rules import own_failures

#: kinds that are a rank's own failure (tier 0) when present
_OWN = {
    ErrorKind.OOM,
    ErrorKind.ABORT,
    ErrorKind.GLOO_ENFORCE,
    ErrorKind.NCCL_ERROR,
    ErrorKind.GLOO_INVALID_SIZE,
    ErrorKind.DETAIL_MISMATCH,
    ErrorKind.DDP_UNUSED_PARAMETERS,
    ErrorKind.DDP_ERROR,
}
#: kinds a rank shows when someone else failed first (tier 1)
_VICTIM = VICTIM_KINDS | {ErrorKind.MONITORED_BARRIER, ErrorKind.DESYNC_REPORT, ErrorKind.EXCEPTION}
_SIGNAL_OWN = {"SIGABRT", "SIGSEGV", "SIGKILL", "SIGBUS", "SIGILL", "SIGFPE"}


def initiating_rank(errors: pd.DataFrame, ranks: pd.DataFrame | None = None) -> int | None:
    """The first rank to fail, or None when the evidence cannot tell."""
    cands = []  # (tier, t_wall or None, rank)
    if errors is not None and len(errors):
        e = errors[errors["rank"].notna()]
        for k, sg, r, t, own in zip(
            e["kind"].astype(str), e["signal"].astype(object), e["rank"], e["t_wall"], own_failures(e)
        ):
            sg = None if pd.isna(sg) else str(sg)
            if (
                own
                or k in _OWN
                or (k in (ErrorKind.SIGNAL, ErrorKind.CHILD_FAILED, ErrorKind.AGENT) and sg in _SIGNAL_OWN)
            ):
                tier = 0
            elif k in _VICTIM:
                tier = 1
            else:
                continue
            cands.append((tier, None if pd.isna(t) else t, int(r)))
    if ranks is not None and len(ranks):
        for r, sg, t in zip(ranks["rank"], ranks["signal"].astype(object), ranks["first_error_t"]):
            if pd.notna(r) and pd.notna(sg) and str(sg) in _SIGNAL_OWN:
                cands.append((0, None if pd.isna(t) else t, int(r)))
    for tier in (0, 1):
        tier_c = [c for c in cands if c[0] == tier]
        if not tier_c:
            continue
        timed = [c for c in tier_c if c[1] is not None]
        if timed:
            t0 = min(c[1] for c in timed)
            first = {c[2] for c in timed if c[1] == t0}
            if len(first) == 1:
                return first.pop()
        ranks_in_tier = {c[2] for c in tier_c}
        if len(ranks_in_tier) == 1:
            return ranks_in_tier.pop()
        return None
    return None

"""Helpers the teaching notebooks call: run a lesson's reproducer, show sequences side by side.

Each teaching notebook is a list of one-line calls into this module, so the lesson's logic is
tested like any other code and the notebooks stay thin.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .incident import Incident, coerce


def synthetic_incident(n_ranks: int = 4, n_collectives: int = 10, *, mismatch_at: int | None = 6,
                       culprit: int = 1, kind: str = "shape", seq_kind: str = "trace",
                       t0: str = "2026-11-29 22:00:00") -> Incident:
    """A made-up incident for pictures, tests and benchmarks (never presented as real evidence).

    Every rank runs ``n_collectives`` collectives (all_reduce, with an all_gather every 5th);
    at ``mismatch_at`` the ``culprit`` rank passes a different shape (``kind="shape"``) or stops
    (``kind="skip"``: it never issues that collective and the others time out).
    """
    ranks = np.repeat(np.arange(n_ranks), n_collectives)
    seqs = np.tile(np.arange(1, n_collectives + 1), n_ranks)
    ops = np.where(seqs % 5 == 0, "all_gather", "all_reduce")
    rows_shape = np.where(seqs % 5 == 0, 5, 1024)
    in_shapes = [((int(r), 4),) for r in rows_shape]
    state = np.full(len(ranks), "completed", dtype=object)
    base = pd.Timestamp(t0, tz="UTC")
    t_wall = base + pd.to_timedelta(seqs * 0.05 + ranks * 0.001, unit="s")
    keep = np.ones(len(ranks), dtype=bool)
    if mismatch_at is not None:
        at = seqs == mismatch_at
        if kind == "shape":
            in_shapes = [((3, 4),) if (a and r == culprit) else s for s, a, r in zip(in_shapes, at, ranks)]
            state[seqs >= mismatch_at] = "scheduled"
            keep &= seqs <= mismatch_at
        else:
            keep &= ~((ranks == culprit) & (seqs >= mismatch_at))
            state[seqs >= mismatch_at] = "timed_out"
            keep &= seqs <= mismatch_at
    events = coerce("events", {
        "rank": ranks[keep], "pg": ["0"] * int(keep.sum()), "pg_desc": ["default_pg"] * int(keep.sum()),
        "seq": seqs[keep], "seq_kind": [seq_kind] * int(keep.sum()), "op": ops[keep],
        "in_shapes": [s for s, k in zip(in_shapes, keep) if k], "dtype": ["float32"] * int(keep.sum()),
        "state": state[keep], "t_wall": t_wall[keep], "source": ["synthetic"] * int(keep.sum()),
        "file": ["synthetic"] * int(keep.sum()), "line": np.arange(int(keep.sum())) + 1,
    })
    errors = []
    if mismatch_at is not None:
        t_err = base + pd.Timedelta(seconds=mismatch_at * 0.05 + 5)
        for r in range(n_ranks):
            if kind == "shape" and r == culprit:
                errors.append({"rank": r, "t_wall": t_err - pd.Timedelta(seconds=4.9), "kind": "gloo_enforce",
                               "message": "op.preamble.length <= op.nbytes. 40 vs 24", "source": "synthetic"})
            elif kind == "skip" and r != culprit:
                errors.append({"rank": r, "t_wall": t_err, "kind": "gloo_timeout", "seq": mismatch_at,
                               "seq_kind": seq_kind, "message": "Timed out waiting 5000ms for recv operation",
                               "source": "synthetic"})
    ranks_df = coerce("ranks", {"rank": np.arange(n_ranks), "host": ["localhost"] * n_ranks})
    return Incident(events=events, errors=coerce("errors", errors), ranks=ranks_df,
                    notes=["synthetic incident built by denpex_nb.teach.synthetic_incident"])

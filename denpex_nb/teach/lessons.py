"""Helpers the teaching notebooks call: run a lesson's reproducer, show sequences side by side.

Each teaching notebook is a list of one-line calls into this module, so the lesson's logic is
tested like any other code and the notebooks stay thin.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from .. import plot
from ..incident import Incident, coerce
from ..report import HTML
from ..vocab import ErrorKind


def synthetic_incident(
    n_ranks: int = 4,
    n_collectives: int = 10,
    *,
    mismatch_at: int | None = 6,
    culprit: int = 1,
    kind: str = "shape",
    seq_kind: str = "trace",
    t0: str = "2026-11-29 22:00:00",
) -> Incident:
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
    events = coerce(
        "events",
        {
            "rank": ranks[keep],
            "pg": ["0"] * int(keep.sum()),
            "pg_desc": ["default_pg"] * int(keep.sum()),
            "seq": seqs[keep],
            "seq_kind": [seq_kind] * int(keep.sum()),
            "op": ops[keep],
            "in_shapes": [s for s, k in zip(in_shapes, keep) if k],
            "dtype": ["float32"] * int(keep.sum()),
            "state": state[keep],
            "t_wall": t_wall[keep],
            "source": ["synthetic"] * int(keep.sum()),
            "file": ["synthetic"] * int(keep.sum()),
            "line": np.arange(int(keep.sum())) + 1,
        },
    )
    errors = []
    if mismatch_at is not None:
        t_err = base + pd.Timedelta(seconds=mismatch_at * 0.05 + 5)
        for r in range(n_ranks):
            if kind == "shape" and r == culprit:
                errors.append(
                    {
                        "rank": r,
                        "t_wall": t_err - pd.Timedelta(seconds=4.9),
                        "kind": ErrorKind.GLOO_ENFORCE,
                        "message": "op.preamble.length <= op.nbytes. 40 vs 24",
                        "source": "synthetic",
                    }
                )
            elif kind == "skip" and r != culprit:
                errors.append(
                    {
                        "rank": r,
                        "t_wall": t_err,
                        "kind": ErrorKind.GLOO_TIMEOUT,
                        "seq": mismatch_at,
                        "seq_kind": seq_kind,
                        "message": "Timed out waiting 5000ms for recv operation",
                        "source": "synthetic",
                    }
                )
    ranks_df = coerce("ranks", {"rank": np.arange(n_ranks), "host": ["localhost"] * n_ranks})
    return Incident(
        events=events,
        errors=coerce("errors", errors),
        ranks=ranks_df,
        notes=["synthetic incident built by denpex_nb.teach.synthetic_incident"],
    )


# --- lessons ------------------------------------------------------------------------------------

#: where the repository's data lives (a source checkout); installed packages have none
DATA_DIR = Path(__file__).resolve().parents[2] / "data"


@dataclass
class Lesson:
    """One reproducer run with what the toolkit makes of it."""

    scenario: str
    variant: str
    debug: str
    result: object  # denpex_nb.repro.RunResult
    incident: Incident
    diagnosis: object  # denpex_nb.Diagnosis

    @property
    def out_dir(self) -> Path:
        return Path(self.result.out_dir)


def run_lesson(
    scenario: str,
    *,
    fixed: bool = False,
    world_size: int = 2,
    timeout: float = 5.0,
    out=None,
    debug: str = "off",
    flight_recorder: bool = False,
) -> Lesson:
    """Run the reproducer as separate processes (bounded), then load and diagnose what it left.

    The collective tracer is always on: it is what shows each rank's sequence even when gloo
    aborts a rank from a C++ thread.
    """
    from .. import repro
    from ..analysis import diagnose
    from ..ingest import load

    variant = "fixed" if fixed else "broken"
    base = Path(out) if out else Path(tempfile.mkdtemp(prefix="denpex-lesson-"))
    run_dir = base / f"{scenario}-{variant}-{debug}{'-fr' if flight_recorder else ''}-w{world_size}"
    result = repro.run(
        scenario,
        fixed=fixed,
        world_size=world_size,
        debug=debug,
        flight_recorder=flight_recorder,
        trace=True,
        timeout=timeout,
        out=run_dir,
    )
    incident = load(str(result.out_dir))
    return Lesson(scenario, variant, debug, result, incident, diagnose(incident))


def outcome(lesson: Lesson) -> pd.DataFrame:
    """How each rank ended: exit code, signal, and its last line of output."""
    res = lesson.result
    rows = []
    for r, code in enumerate(res.exit_codes):
        sig = res.signals[r] if r < len(res.signals) else None
        rows.append({"rank": r, "exit code": code, "signal": sig or "", "last output": _last_line(lesson, r)})
    df = pd.DataFrame(rows).set_index("rank")
    df.attrs["wall_s"] = res.wall_s
    return df


def _last_line(lesson: Lesson, rank: int) -> str:
    for name in ("stderr.log", "stdout.log"):
        p = lesson.out_dir / "attempt_0" / str(rank) / name
        if p.exists():
            lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()]
            if lines:
                return lines[-1][:200]
    return ""


def sequences_frame(incident, seq_kind: str | None = None) -> pd.DataFrame:
    """Rows: seq; columns: ranks; cells: ``op [shape] dtype`` (empty where a rank has no entry)."""
    ln = plot.lanes(incident, seq_kind)
    df = ln.frame
    if df.empty:
        return pd.DataFrame()
    cell = [
        _cell(op, shp, numel, dt) for op, shp, numel, dt in zip(df["op"], df["in_shapes"], df["numel_in"], df["dtype"])
    ]
    table = (
        pd.DataFrame({"seq": df["seq"], "rank": df["rank"].map(lambda r: f"rank {r}"), "cell": cell})
        .pivot(index="seq", columns="rank", values="cell")
        .fillna("—")
    )
    table.columns.name = None
    table.attrs.update(seq_kind=ln.seq_kind, pg=ln.pg)
    return table


def _cell(op, shapes, numel, dtype) -> str:
    shape = plot.shape_label(shapes)
    if shape == "?" and numel is not None and not pd.isna(numel):
        shape = f"numel={int(numel)}"
    dt = "" if dtype is None or pd.isna(dtype) else f" {dtype}"
    return f"{op} {shape}{dt}"


def sequences(lesson_or_incident, seq_kind: str | None = None):
    """Each rank's collective sequence side by side; rows where the ranks differ in red."""
    incident = getattr(lesson_or_incident, "incident", lesson_or_incident)
    table = sequences_frame(incident, seq_kind)
    if table.empty:
        return HTML("<p>No collective was recorded.</p>")

    def _row(row):
        odd = row.nunique() > 1 or (row == "—").any()
        return ["background-color: #fdd; color: #900; font-weight: bold" if odd else ""] * len(row)

    return table.style.apply(_row, axis=1).set_caption(
        f"Collectives per rank ({table.attrs.get('seq_kind')} sequence numbers, process group {table.attrs.get('pg')})"
    )


def agree(incident, seq_kind: str | None = None) -> bool:
    """True when every rank issued the same collectives with the same shapes and dtypes."""
    table = sequences_frame(incident, seq_kind)
    if table.empty:
        return False
    return bool(((table.nunique(axis=1) == 1) & ~(table == "—").any(axis=1)).all())


def swimlane(lesson: Lesson, **kw):
    """The lesson's swimlane (see :func:`denpex_nb.plot.swimlane`)."""
    return plot.swimlane(lesson.incident, lesson.diagnosis, **kw)


def mechanism(class_id: str) -> HTML:
    """The catalog's account of the failure: root cause and what each backend does."""
    from ..analysis import catalog

    entry = catalog.find(class_id)
    if entry is None:
        return HTML(f"<p>The catalog has no entry for <code>{escape(class_id)}</code>.</p>")
    parts = [
        f"<p><b>{escape(entry.title)}</b> (catalog id <code>{escape(class_id)}</code>). {escape(entry.root_cause)}</p>"
    ]
    parts.append(
        "<ul>"
        + "".join(f"<li><b>{escape(str(k))}</b>: {escape(str(v))}</li>" for k, v in entry.mechanism.items())
        + "</ul>"
    )
    return HTML("".join(parts))


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def compare(broken: Lesson, fixed: Lesson) -> HTML:
    """Broken vs fixed: do the ranks' sequences agree now, and how did each run end?"""
    b_ok, f_ok = agree(broken.incident), agree(fixed.incident)
    return HTML(
        "<table><thead><tr><th></th><th>broken</th><th>fixed</th></tr></thead><tbody>"
        f"<tr><td>every rank ran the same collectives with the same shapes</td><td>{_yes(b_ok)}</td>"
        f"<td>{_yes(f_ok)}</td></tr>"
        f"<tr><td>exit codes</td><td>{broken.result.exit_codes}</td><td>{fixed.result.exit_codes}</td></tr>"
        f"<tr><td>verdict</td><td>{escape(broken.diagnosis.verdict)}</td><td>{escape(fixed.diagnosis.verdict)}</td></tr>"
        "</tbody></table>"
    )

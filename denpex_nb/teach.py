"""Helpers the teaching notebooks call: run a lesson's reproducer, show sequences side by side.

Each teaching notebook is a list of one-line calls into this module, so the lesson's logic is
tested like any other code and the notebooks stay thin.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from . import plot
from .incident import Incident, coerce
from .report import HTML, display
from .vocab import ErrorKind, SeqKind


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
DATA_DIR = Path(__file__).resolve().parents[1] / "data"


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
    from . import repro
    from .analysis import diagnose
    from .ingest import load

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
    from .analysis import catalog

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


def nccl_source(scenario: str) -> tuple[str, Path] | None:
    """("recorded" | "illustrative", path) of the NCCL evidence for a scenario, or None."""
    rec = DATA_DIR / "recorded" / "nccl" / scenario
    if rec.is_dir():
        runs = sorted(p for p in rec.iterdir() if p.is_dir() and p.name.startswith("broken"))
        if runs:
            return "recorded", runs[0]
        if any(rec.iterdir()):
            return "recorded", rec
    ill = DATA_DIR / "illustrative" / "nccl" / scenario
    if ill.is_dir():
        return "illustrative", ill
    return None


def nccl_view(scenario: str):
    """What NCCL does with the same bug: recorded runs if any, else the illustrative log (labelled)."""
    from .analysis import diagnose
    from .ingest import load

    src = nccl_source(scenario)
    if src is None:
        return HTML(
            "<p>No NCCL evidence for this scenario is available here (no recorded NCCL run and no "
            "illustrative log; an installed package carries neither).</p>"
        )
    kind, path = src
    incident = load(str(path))
    diagnosis = diagnose(incident)
    if kind == "illustrative":
        banner = (
            "<div style='border:2px dashed #ff7f0e;padding:6px 10px;background:#fff8ef'><b>ILLUSTRATIVE, "
            "not a real NCCL run.</b> This log was written from NCCL's and PyTorch's documented message "
            "templates because no GPU run was recorded; it shows the shape of what NCCL prints, not "
            f"measured behaviour. Source: <code>{escape(_rel(path))}</code></div>"
        )
    else:
        banner = (
            f"<div style='border-left:4px solid #2ca02c;padding:6px 10px'><b>Recorded NCCL run</b>: "
            f"<code>{escape(_rel(path))}</code></div>"
        )
    key = _key_lines(path)
    lines = "".join(f"{escape(ln)}\n" for ln in key)
    seq = sequences_frame(incident)
    verdict = (
        f"<p>denpex_nb on this evidence: <b>{escape(diagnosis.verdict)}</b> ({escape(diagnosis.confidence)} "
        f"confidence), culprit ranks {escape(str(diagnosis.culprit_ranks) or '[]')}.</p>"
    )
    return HTML(
        banner + "<p>The lines that matter:</p>"
        f"<pre style='font-size:80%;white-space:pre-wrap'>{lines}</pre>"
        + ("<p>Each rank's collectives as NCCL logged them:</p>" + seq.to_html() if not seq.empty else "")
        + verdict
    )


_KEY_WORDS = (
    "Watchdog caught",
    "failure detected by watchdog",
    "AllGather:",
    "AllReduce:",
    "Broadcast:",
    "Timeout at collective",
    "didn't join",
    "exitcode  :",
    "ILLUSTRATIVE",
    "NCCL WARN",
)


def _key_lines(path: Path, limit: int = 24) -> list[str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.log"))
    if path.is_dir() and (path / "combined.log").exists():
        files = [path / "combined.log"]
    out = []
    for f in files:
        for ln in f.read_text(errors="replace").splitlines():
            if any(k in ln for k in _KEY_WORDS):
                out.append(ln if len(ln) <= 260 else ln[:259] + "…")
                if len(out) >= limit:
                    return out
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(DATA_DIR.parent))
    except ValueError:
        return str(path)


_DETAIL_KINDS = ("detail_mismatch", "monitored_barrier")


def detail_view(lesson: Lesson) -> HTML:
    """What TORCH_DISTRIBUTED_DEBUG=DETAIL reported: the fingerprint mismatch / monitoredBarrier lines."""
    err = lesson.incident.errors
    hits = err[err["kind"].astype("object").isin(_DETAIL_KINDS)] if len(err) else err
    if hits.empty:
        txt = _grep(lesson.out_dir, ("Detected mismatch between collectives", "failed to pass monitoredBarrier"))
        if not txt:
            return HTML("<p><b>DETAIL mode</b> reported no fingerprint mismatch in this run.</p>")
        body = "".join(f"{escape(t)}\n" for t in txt)
    else:
        body = "".join(f"rank {escape(str(r))}: {escape(str(m))}\n" for r, m in zip(hits["rank"], hits["message"]))
    return HTML(
        "<p><b>With <code>TORCH_DISTRIBUTED_DEBUG=DETAIL</code></b> every rank checks the collective's "
        "fingerprint with the others before running it, and fails at once, naming the ranks and their "
        f"shapes:</p><pre style='font-size:80%;white-space:pre-wrap'>{body}</pre>"
        f"<p>Verdict from this run: <b>{escape(lesson.diagnosis.verdict)}</b>.</p>"
    )


def _grep(folder: Path, needles, limit: int = 6) -> list[str]:
    p = folder / "combined.log"
    if not p.exists():
        return []
    out = [ln[:400] for ln in p.read_text(errors="replace").splitlines() if any(n in ln for n in needles)]
    return out[:limit]


def flight_recorder_view(lesson: Lesson) -> HTML:
    """What the Flight Recorder dumps say: each rank's recorded collectives side by side."""
    fr_dir = lesson.out_dir / "fr"
    dumps = sorted(p.name for p in fr_dir.iterdir()) if fr_dir.is_dir() else []
    ranks = range(len(lesson.result.exit_codes))
    missing = [r for r in ranks if not any(d.endswith(f"_{r}") for d in dumps)]
    parts = [
        f"<p><b>Flight Recorder</b>: {len(dumps)} dump(s) in <code>fr/</code>"
        + (
            f"; no dump from rank(s) {', '.join(map(str, missing))} (a rank aborted by gloo or killed never dumps)"
            if missing
            else ""
        )
        + ".</p>"
    ]
    ev = lesson.incident.events
    if len(ev) and (ev["seq_kind"].astype("object") == SeqKind.FR).any():
        table = sequences_frame(lesson.incident, SeqKind.FR)
        parts.append("<p>Each rank's recorded collectives (<code>collective_seq_id</code>):</p>" + table.to_html())
    else:
        parts.append("<p>The dumps hold no collective entries.</p>")
    return HTML("".join(parts))


def compare(broken: Lesson, fixed: Lesson) -> HTML:
    """Broken vs fixed: do the ranks' sequences agree now, and how did each run end?"""
    b_ok, f_ok = agree(broken.incident), agree(fixed.incident)
    return HTML(
        "<table><thead><tr><th></th><th>broken</th><th>fixed</th></tr></thead><tbody>"
        f"<tr><td>every rank ran the same collectives with the same shapes</td><td>{b_ok}</td><td>{f_ok}</td></tr>"
        f"<tr><td>exit codes</td><td>{broken.result.exit_codes}</td><td>{fixed.result.exit_codes}</td></tr>"
        f"<tr><td>verdict</td><td>{escape(broken.diagnosis.verdict)}</td><td>{escape(fixed.diagnosis.verdict)}</td></tr>"
        "</tbody></table>"
    )


def record(**lessons: Lesson) -> None:
    """Display the lesson's key results as JSON (tests read them back from the executed notebook)."""
    out = {}
    for name, lesson in lessons.items():
        ev = lesson.incident.events
        out[name] = {
            "scenario": lesson.scenario,
            "variant": lesson.variant,
            "debug": lesson.debug,
            "verdict": lesson.diagnosis.verdict,
            "culprit_ranks": list(lesson.diagnosis.culprit_ranks),
            "exit_codes": list(lesson.result.exit_codes),
            "sequences_agree": agree(lesson.incident),
            "n_events": int(len(ev)),
            "seq_kinds": sorted(ev["seq_kind"].dropna().astype(str).unique().tolist()) if len(ev) else [],
            "detail_errors": int(lesson.incident.errors["kind"].astype("object").isin(_DETAIL_KINDS).sum())
            if len(lesson.incident.errors)
            else 0,
        }
    first = next(iter(lessons.values()), None)
    if first is not None:
        src = nccl_source(first.scenario)
        out["nccl_source"] = src[0] if src else None
    display({"application/json": out, "text/plain": json.dumps(out)}, raw=True)

"""The report's sections: what each cell of the ``incident_report`` notebook calls, one per cell.

Sections that return :class:`~.show.HTML` (``headline``, ``evidence``, ``fix``,
``other_findings``, ``inputs``) are rendered from the Jinja2 templates in ``templates/``, with
autoescaping on: every value from the evidence is text, so a redaction mask such as ``[host-1]``
or a log line holding ``<`` shows as written and never becomes markup. Sections that show
pictures or tables (``pictures``, ``errors_section``, ``rank_state_section``) display several
objects in turn. :func:`record` displays the summary the tests and the renderer read back.

The post-mortem notebook uses :func:`errors_frame` and :func:`record` too.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pandas as pd

from ..human import count_ranks, rank_ranges
from ..vocab import ClassId
from .contract import SUMMARY_MIME
from .show import HTML, display

#: the rank_state columns a reader of the report needs first (the frame has more)
RANK_STATE_COLUMNS = (
    "rank",
    "status",
    "last_op",
    "last_seq",
    "last_seq_kind",
    "last_completed_seq",
    "timeout_op",
    "timeout_seq",
    "call_op",
    "first_error_kind",
    "first_error",
    "exit_code",
    "signal",
)


@lru_cache(maxsize=1)
def _environment():
    """The Jinja2 environment over ``templates/`` (autoescape on; an unknown name is an error)."""
    from ..errors import require

    jinja2 = require("jinja2", "notebook")
    return jinja2.Environment(
        loader=jinja2.PackageLoader("denpex_nb.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def render_template(template: str, /, **values) -> HTML:
    """``templates/<template>`` rendered with ``values`` (autoescaped), as an HTML object."""
    return HTML(_environment().get_template(template).render(**values))


def ranks_text(ranks) -> str:
    """``1, 3`` or ``0–216, 218–255`` for a list of ranks; ``undetermined`` for none."""
    return rank_ranges(ranks or []) or "undetermined"


def verdict_text(diagnosis) -> str:
    """One line: ``shape-mismatch (high confidence): culprit ranks 1, initiating rank 1``."""
    init = diagnosis.initiating_rank
    return (
        f"{diagnosis.verdict} ({diagnosis.confidence} confidence): culprit ranks "
        f"{ranks_text(diagnosis.culprit_ranks)}, initiating rank {'undetermined' if init is None else init}"
    )


def _catalog_entry(class_id: str):
    from ..analysis import catalog

    return catalog.find(class_id)


def headline(incident, diagnosis, title: str | None = None) -> HTML:
    """Title, then the verdict and its confidence, culprit and initiating rank: what on-call reads first."""
    entry = _catalog_entry(diagnosis.verdict)
    name = entry.title if entry is not None else diagnosis.verdict
    heading = title or f"Incident report: {name}"
    if incident.is_empty:
        return render_template(
            "headline.html",
            heading=heading,
            empty=True,
            lines_read=incident.lines.total,
            n_files=len(incident.sources),
            notes=[*incident.notes, *diagnosis.notes],
        )
    first = diagnosis.first
    rows = [
        ("culprit rank(s)", ranks_text(diagnosis.culprit_ranks)),
        (
            "initiating rank (failed first)",
            "undetermined" if diagnosis.initiating_rank is None else str(diagnosis.initiating_rank),
        ),
    ]
    if first is not None:
        where = ", ".join(
            x
            for x in (
                f"op {first.op}" if first.op else "",
                f"seq {first.seq} ({first.seq_kind})" if first.seq is not None else "",
                f"process group {first.pg}" if first.pg is not None else "",
            )
            if x
        )
        if where:
            rows.append(("where", where))
    rows.append(("ranks seen", count_ranks(diagnosis.ranks_seen) if len(diagnosis.ranks_seen) else "none"))
    summary = first.summary if first is not None else "Every rank's collectives agree and no rank failed."
    alternatives = [
        {
            "class_id": f.class_id,
            "confidence": f.confidence,
            "culprits": ranks_text(f.culprit_ranks),
            "summary": f.summary,
        }
        for f in getattr(diagnosis, "alternatives", None) or []
    ]
    return render_template(
        "headline.html",
        alternatives=alternatives,
        heading=heading,
        empty=False,
        ok=diagnosis.verdict == ClassId.NO_FAILURE,
        verdict=diagnosis.verdict,
        confidence=diagnosis.confidence,
        name=name,
        summary=summary,
        rows=rows,
        notes=list(diagnosis.notes),
    )


def evidence(diagnosis, max_lines: int = 20) -> HTML:
    """The lines that support the verdict, with file:line and rank."""
    first = diagnosis.first
    if first is None or not first.evidence:
        missing = (
            "No evidence lines: nothing failed in this evidence."
            if first is None
            else "The finding carries no evidence lines."
        )
        return render_template("evidence.html", lines=[], missing=missing, more=0)
    lines = [
        {
            "rank": "" if getattr(e, "rank", None) is None else str(e.rank),
            "where": f"{e.file}:{int(e.line)}",
            "text": str(e.text),
        }
        for e in first.evidence[:max_lines]
    ]
    return render_template("evidence.html", lines=lines, missing="", more=len(first.evidence) - max_lines)


def fix(diagnosis) -> HTML:
    """From the catalog: the root cause, the mechanism per backend, the fix (with code) and how to confirm it."""
    return render_template("fix.html", entry=_catalog_entry(diagnosis.verdict), verdict=diagnosis.verdict)


def other_findings(diagnosis) -> HTML:
    """Every finding beyond the first (later divergences, collateral failures); nothing when there is none."""
    if len(diagnosis.findings) <= 1:
        return HTML("")
    rows = [
        {
            "class_id": f.class_id,
            "confidence": f.confidence,
            "op": str(f.op),
            "seq": "" if f.seq is None else f.seq,
            "culprits": ranks_text(f.culprit_ranks),
            "summary": f.summary,
        }
        for f in diagnosis.findings[1:]
    ]
    return render_template("other_findings.html", findings=rows)


def inputs(incident, max_files: int = 40) -> HTML:
    """What was read: files, formats, and the line accounting (parsed + unparsed = total)."""
    src = incident.sources
    files = (
        [
            {
                "file": str(s["file"]),
                "format": str(s["format"]),
                "lines": "" if pd.isna(s["lines_total"]) else int(s["lines_total"]),
                "problem": "" if pd.isna(s["error"]) else str(s["error"]),
            }
            for _, s in src.head(max_files).iterrows()
        ]
        if len(src)
        else []
    )
    return render_template("inputs.html", n_files=len(src), lines=incident.lines, files=files)


def pictures(incident, diagnosis) -> None:
    """Swimlane, the shapes at the divergence and who is behind (or why there is nothing to draw)."""
    from .. import plot

    if incident.events.empty:
        display(
            render_template(
                "heading.html",
                title="Pictures",
                text="No collective events were found, so there is no sequence to draw.",
            )
        )
        return
    display(render_template("heading.html", title="Every rank's collectives", text=""))
    display(plot.swimlane(incident, diagnosis))
    display(render_template("heading.html", title="Each rank at the divergence", text=""))
    display(plot.shapes_table(incident, diagnosis))
    display(render_template("heading.html", title="How far each rank got", text=""))
    display(plot.progress_bars(incident))


def errors_frame(incident, max_message: int = 240) -> pd.DataFrame:
    """Errors ordered by time (then rank): rank, time, kind, message (shortened), file:line."""
    err = incident.errors
    if err.empty:
        return pd.DataFrame(columns=["rank", "t_wall", "kind", "message", "where"])
    df = err.sort_values(["t_wall", "rank"], na_position="last", kind="stable")
    msg = (
        df["message"]
        .astype("object")
        .map(lambda m: m if not isinstance(m, str) or len(m) <= max_message else m[: max_message - 1] + "…")
    )
    where = [
        ("" if pd.isna(f) else f"{f}:{int(ln)}" if not pd.isna(ln) else str(f))
        for f, ln in zip(df["file"].astype("object"), df["line"].astype("object"))
    ]
    out = pd.DataFrame(
        {
            "rank": df["rank"],
            "t_wall": df["t_wall"],
            "kind": df["kind"].astype("object"),
            "message": msg,
            "where": where,
        }
    )
    return out.reset_index(drop=True)


def errors_section(incident, max_rows: int = 60) -> None:
    """The errors in time order (:func:`errors_frame`, the first ``max_rows``), or a line saying there are none."""
    df = errors_frame(incident)
    display(render_template("heading.html", title="Errors per rank", text=""))
    if df.empty:
        display(render_template("paragraph.html", text="No errors were found in this evidence."))
        return
    display(df.head(max_rows))


def rank_state_section(diagnosis, max_rows: int = 64) -> None:
    """Where each rank stopped (diagnosis.rank_state): the table the verdict compares ranks on."""
    st = getattr(diagnosis, "rank_state", None)
    display(render_template("heading.html", title="Where each rank stopped", text=""))
    if st is None or not len(st):
        display(render_template("paragraph.html", text="No rank is known from this evidence."))
        return
    size = diagnosis.group_size
    text = f"Group size: {'unknown' if size is None else size} ({diagnosis.group_size_basis})."
    if diagnosis.absent_ranks:
        text += f" Absent from the evidence: {ranks_text(diagnosis.absent_ranks)}."
    display(render_template("paragraph.html", text=text))
    cols = [c for c in RANK_STATE_COLUMNS if c in st.columns]
    view = st[cols].head(max_rows).copy()
    if "first_error" in view:
        view["first_error"] = view["first_error"].map(
            lambda m: m if m is None or len(str(m)) <= 160 else str(m)[:159] + "…"
        )
    display(view)


def summary(incident, diagnosis) -> dict:
    """The key results a notebook records (tests read them back from the executed notebook)."""
    d = diagnosis.to_dict()
    return {
        "verdict": d["verdict"],
        "confidence": d["confidence"],
        "culprit_ranks": d["culprit_ranks"],
        "initiating_rank": d["initiating_rank"],
        "ranks_seen": d["ranks_seen"],
        "op": d["findings"][0]["op"] if d["findings"] else None,
        "seq": d["findings"][0]["seq"] if d["findings"] else None,
        "summary": diagnosis.first.summary if diagnosis.first is not None else None,
        "n_events": int(len(incident.events)),
        "n_errors": int(len(incident.errors)),
        "empty": bool(incident.is_empty),
        "lines": d["lines"],
    }


def record(incident, diagnosis) -> None:
    """Display the summary as JSON: the last cell of the notebooks (tagged ``denpex-summary``)."""
    s = summary(incident, diagnosis)
    display({SUMMARY_MIME: s, "text/plain": json.dumps(s)}, raw=True)

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
import os
import re
from functools import lru_cache

import pandas as pd

from ..human import cell, count_ranks, is_missing, rank_ranges
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


def evidence(diagnosis, max_lines: int = 20, incident=None) -> HTML:
    """The lines that support the verdict, with file:line (relative to the inputs) and rank."""
    first = diagnosis.first
    if first is None or not first.evidence:
        missing = (
            "No evidence lines: nothing failed in this evidence."
            if first is None
            else "The finding carries no evidence lines."
        )
        return render_template("evidence.html", lines=[], missing=missing, more=0)
    root = input_root(incident) if incident is not None else ""
    lines = [
        {
            "rank": "" if getattr(e, "rank", None) is None else str(e.rank),
            "where": relative(f"{e.file}:{int(e.line)}", root),
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
    """What was read: files, formats, and the line accounting (parsed + unparsed = total).

    Files that differ only by a number (``fr/comm_lib_trace_rank_0`` ... ``_1023``, one per rank)
    are one row, ``fr/comm_lib_trace_rank_{0–1023}``, with their count and summed lines; a file
    with a problem always keeps its own row.
    """
    src = incident.sources
    root = input_root(incident)
    groups: dict[tuple, dict] = {}
    for _, s in src.iterrows() if len(src) else ():
        name = relative(str(s["file"]), root)
        problem = "" if pd.isna(s["error"]) else str(s["error"])
        m = _NUMBERED.match(name)
        key = (m.group(1), m.group(3), str(s["format"])) if m and not problem else (name, "", str(s["format"]), problem)
        g = groups.setdefault(
            key, {"names": [], "numbers": [], "lines": 0, "format": str(s["format"]), "problem": problem}
        )
        g["names"].append(name)
        if m and not problem:
            g["numbers"].append(int(m.group(2)))
        g["lines"] += 0 if pd.isna(s["lines_total"]) else int(s["lines_total"])
    files = []
    for key, g in groups.items():
        if len(g["names"]) == 1:
            label = g["names"][0]
        else:
            label = f"{key[0]}{{{rank_ranges(g['numbers'])}}}{key[1]} ({len(g['names'])} files)"
        files.append({"file": label, "format": g["format"], "lines": g["lines"], "problem": g["problem"]})
    return render_template("inputs.html", n_files=len(src), lines=incident.lines, files=files[:max_files])


#: a path around its last number (``fr/..._rank_12``, ``attempt_0/12/stderr.log``: the per-rank part)
_NUMBERED = re.compile(r"^(.*?)(\d+)(\D*)$")


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
    display(divergence_table(incident, diagnosis))
    display(render_template("heading.html", title="How far each rank got", text=""))
    display(plot.progress_bars(incident))


def divergence_frame(incident, diagnosis) -> pd.DataFrame:
    """Each rank's entry at the divergence, identical entries merged: the odd ranks first, then the
    agreeing majority as one row with its count (ranks as ranges). ``attrs`` carry pg, counter, seq."""
    from .. import plot

    df = plot.shapes_frame(incident, diagnosis)
    cols = [c for c in df.columns if c != "minority"]
    out_cols = ["ranks", "count", *cols]
    if df.empty:
        out = pd.DataFrame(columns=out_cols)
        out.attrs.update(df.attrs)
        return out
    text = df[cols].astype("object").map(cell)
    text["_minority"] = df["minority"].to_numpy() if "minority" in df else False
    text["_rank"] = df.index.to_numpy()
    rows = []
    for key, grp in text.groupby(cols, sort=False, dropna=False):
        ranks = sorted(int(r) for r in grp["_rank"])
        rows.append(
            {
                "ranks": rank_ranges(ranks),
                "count": len(ranks),
                **dict(zip(cols, key)),
                "_odd": bool(grp["_minority"].any()),
            }
        )
    culprits = set(getattr(diagnosis, "culprit_ranks", []) or [])
    for row, (_, grp) in zip(rows, text.groupby(cols, sort=False, dropna=False)):
        row["_odd"] = row["_odd"] or bool(culprits & {int(r) for r in grp["_rank"]})
    majority = max(r["count"] for r in rows)
    for r in rows:
        r["_odd"] = r["_odd"] or (len(rows) > 1 and r["count"] < majority)
    rows.sort(key=lambda r: (not r["_odd"], r["count"], r["ranks"]))
    out = pd.DataFrame(rows, columns=[*out_cols, "_odd"])
    out.attrs.update(df.attrs)
    return out


def divergence_table(incident, diagnosis):
    """:func:`divergence_frame` as a table for people: the odd rows in red, no index, a caption."""
    df = divergence_frame(incident, diagnosis)
    seq = df.attrs.get("seq")
    caption = (
        f"Each rank at the divergence: pg {df.attrs.get('pg')}, {df.attrs.get('seq_kind')} seq {seq}"
        if seq is not None
        else "No divergent collective found in the events"
    )
    odd = df["_odd"].tolist() if "_odd" in df else []
    view = df.drop(columns=["_odd"], errors="ignore")

    def _row_style(row):
        bad = odd[row.name] if row.name < len(odd) else False
        return ["background-color: #fdd; color: #900; font-weight: bold" if bad else ""] * len(row)

    return (
        view.style.apply(_row_style, axis=1)
        .hide(axis="index")
        .format(lambda v: cell(v), escape="html")
        .set_caption(caption)
        .set_table_styles([{"selector": "caption", "props": "caption-side: top; font-weight: bold;"}])
    )


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


def errors_table(incident, max_message: int = 240) -> pd.DataFrame:
    """One row per distinct error message with the ranks that printed it, in order of first appearance.

    Columns: ``first seen`` (time, empty when the line had none), ``kind``, ``message`` (a rank's own
    number inside it reads ``<rank>``, so "rank 7 ended with exit code 1" on 1024 ranks is one
    row), ``ranks`` (as ranges), ``count`` and ``where`` (the first file:line, relative to the
    inputs). Missing values are empty cells, never None/NaN/NaT.
    """
    df = errors_frame(incident, max_message=max_message)
    cols = ["first seen", "kind", "message", "ranks", "count", "where"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    root = input_root(incident)
    groups: dict[tuple, dict] = {}
    for rank, t, kind, msg, where in zip(df["rank"], df["t_wall"], df["kind"], df["message"], df["where"]):
        text = own_rank_masked(cell(msg), rank)
        key = (cell(kind), _INCIDENTAL.sub("#", text))  # ports, pids, times differ between ranks
        g = groups.setdefault(key, {"t": t, "ranks": [], "where": relative(cell(where), root), "text": text})
        if not is_missing(rank):
            g["ranks"].append(int(rank))
        if is_missing(g["t"]) and not is_missing(t):
            g["t"] = t
    rows = [
        {
            "first seen": _time_text(g["t"]),
            "kind": kind,
            "message": g["text"],
            "ranks": rank_ranges(g["ranks"]),
            "count": len(set(g["ranks"])) or "",
            "where": g["where"],
        }
        for (kind, _), g in groups.items()
    ]
    return pd.DataFrame(rows, columns=cols)


#: numbers that differ between ranks without meaning anything different: addresses and ports,
#: process ids, clock times (a size or a seq number is never one of them)
_INCIDENTAL = re.compile(
    r"\[?\d{1,3}(?:\.\d{1,3}){3}\]?(?::\d+)?|(?<=\]):\d+|\bpid:? ?\d+|\b\d\d:\d\d:\d\d(?:[.,]\d+)?"
)


def own_rank_masked(text: str, rank) -> str:
    """``text`` with the rank naming itself (``rank 7``, ``[rank7]``, ``Rank 7``) as ``<rank>``."""
    if is_missing(rank):
        return text
    return re.sub(rf"\b([Rr]ank\s*\[?){int(rank)}\b", r"\g<1><rank>", text)


def _time_text(t) -> str:
    if is_missing(t):
        return ""
    try:
        return pd.Timestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (TypeError, ValueError):
        return cell(t)


def input_root(incident) -> str:
    """The folder every local input file lies under (empty when there is none, e.g. URLs only)."""
    src = incident.sources
    if src is None or src.empty:
        return ""
    files = [str(f) for f in src["file"].astype("object") if isinstance(f, str) and "://" not in f]
    if not files:
        return ""
    try:
        root = os.path.commonpath([os.path.dirname(f) or "." for f in files])
    except ValueError:  # absolute and relative paths mixed
        return ""
    return root


def relative(where: str, root: str) -> str:
    """``where`` (``path`` or ``path:line``) relative to ``root``; unchanged outside it."""
    if not root or not where or root == ".":
        return where
    prefix = root.rstrip(os.sep) + os.sep
    return where[len(prefix) :] if where.startswith(prefix) else where


def errors_section(incident, max_rows: int = 60) -> None:
    """The errors, one row per distinct message with its ranks (:func:`errors_table`), or a line saying none."""
    df = errors_table(incident)
    display(render_template("heading.html", title="Errors per rank", text=""))
    if df.empty:
        display(render_template("paragraph.html", text="No errors were found in this evidence."))
        return
    root = input_root(incident)
    if root:
        display(
            render_template("paragraph.html", text=f"Files are named relative to {os.path.basename(root) or root}/.")
        )
    if len(df) > max_rows:
        display(render_template("paragraph.html", text=f"The first {max_rows} of {len(df)} distinct messages."))
    display(plain_table(df.head(max_rows)))


def plain_table(df: pd.DataFrame):
    """A table for people: no index column, missing values as empty cells, text escaped (log lines hold ``<``)."""
    return df.style.hide(axis="index").format(lambda v: cell(v), escape="html")


def rank_state_table(diagnosis) -> pd.DataFrame:
    """Where each rank stopped, ranks in the same state merged into one row: the odd ones first.

    Columns: ``ranks`` (ranges), ``count``, then the state columns (:data:`RANK_STATE_COLUMNS`) as
    text, empty where unknown. At 1024 ranks that stopped alike this is one row, not 1024.
    """
    st = getattr(diagnosis, "rank_state", None)
    if st is None or not len(st):
        return pd.DataFrame(columns=["ranks", "count"])
    cols = [c for c in RANK_STATE_COLUMNS if c in st.columns and c != "rank"]
    text = st[cols].astype("object").map(cell) if hasattr(st, "map") else st[cols].astype("object").applymap(cell)
    if "first_error" in text:
        text["first_error"] = [own_rank_masked(m, r) for r, m in zip(st["rank"], text["first_error"])]
        text["first_error"] = text["first_error"].map(lambda m: m if len(m) <= 160 else m[:159] + "…")
    text["_rank"] = st["rank"].to_numpy()
    rows = []
    for key, grp in text.groupby(cols, sort=False, dropna=False):
        ranks = [int(r) for r in grp["_rank"] if not is_missing(r)]
        rows.append({"ranks": rank_ranges(ranks), "count": len(ranks), **dict(zip(cols, key))})
    out = pd.DataFrame(rows, columns=["ranks", "count", *cols])
    first = out["ranks"].map(lambda r: int(re.match(r"\d+", r).group()) if r else 0)
    order = sorted(range(len(out)), key=lambda i: (out["count"].iloc[i] * 2 > len(st), first.iloc[i]))
    return out.iloc[order].reset_index(drop=True)


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
    table = rank_state_table(diagnosis)
    if len(table) > max_rows:
        text += f" The first {max_rows} of {len(table)} distinct states."
    display(render_template("paragraph.html", text=text))
    display(plain_table(table.head(max_rows)))


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

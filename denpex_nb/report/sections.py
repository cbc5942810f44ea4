"""Incident reports: the template's sections, papermill + nbconvert rendering, and the CLI.

``denpex-nb report PATH... -o report.html`` executes the ``incident_report`` notebook (built by
:mod:`denpex_nb.nbtemplates`, so it is found in an installed package too) with papermill and renders
it to HTML without input cells. The section functions below (``headline``, ``evidence``, ``fix``
...) are what the template's cells call, one per cell; the post-mortem notebook uses some of them.

A failing cell does not lose the report: papermill keeps the executed notebook with its error
cell, and it is rendered like any other (the traceback shows where it happened).
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import pandas as pd

from .errors import DenpexError, InputError

SUMMARY_MIME = "application/json"
REDACT_MIME = "application/vnd.denpex.redact+json"
#: where the kernel's ``prepare(redact=True)`` leaves its redactor's state for the renderer
REDACT_STATE_ENV = "DENPEX_NB_REDACT_STATE"
#: set in the kernel's environment when a notebook runs headless (papermill, nbconvert)
HEADLESS_ENV = "DENPEX_NB_HEADLESS"

_CSS = """<style>
.dx-verdict{border-left:6px solid #d62728;padding:8px 14px;margin:6px 0 12px;background:#fff6f6}
.dx-verdict.ok{border-color:#2ca02c;background:#f4fbf4}.dx-verdict.empty{border-color:#999;background:#f6f6f6}
.dx-verdict h2{margin:0 0 4px}.dx-badge{display:inline-block;padding:1px 8px;border-radius:9px;font-size:85%;
color:white;background:#777;margin-left:6px}.dx-badge.high{background:#2ca02c}.dx-badge.medium{background:#ff7f0e}
.dx-badge.low{background:#d62728}.dx-kv td{padding:2px 12px 2px 0;vertical-align:top}.dx-kv td:first-child{color:#555}
.dx-evidence{font-family:monospace;font-size:85%;white-space:pre-wrap;word-break:break-all}
</style>"""


class HTML:
    """Minimal HTML display object (no IPython import needed to build it)."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:  # a terminal or a text log still says something useful
        import re

        return re.sub(r"<[^>]+>", " ", self.html).strip()


def _display(*objs, raw: bool = False, metadata=None):
    try:
        from IPython.display import display
    except ImportError:  # plain Python: print what a notebook would show
        for o in objs:
            print(o if not raw else json.dumps(o, default=str)[:2000])
        return
    display(*objs, raw=raw, metadata=metadata)


# --- the template's sections -------------------------------------------------------------------

def prepare(logs, redact: bool = False):
    """Load and diagnose ``logs``; with ``redact``, both come back masked (see :mod:`denpex_nb.redact`).

    Diagnosis runs on the unredacted evidence (masking must not change the verdict). The hosts to
    mask are also emitted as a hidden output, so the renderer can redact every other output too.
    """
    import denpex_nb as dx

    from .incident import Incident

    import warnings

    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs or [])
    with warnings.catch_warnings(record=True) as caught:  # keep library warnings out of the report body
        warnings.simplefilter("always")
        incident = dx.load(*paths) if paths else Incident(notes=["no log paths were given"])
        diagnosis = dx.diagnose(incident)
    for w in caught:
        note = f"warning while reading: {w.message}"
        if note not in incident.notes:
            incident.notes.append(note)
    if redact:
        from .redact import redact_diagnosis, redact_incident, redactor_for

        r = redactor_for(incident, diagnosis)
        incident = redact_incident(incident, r)
        diagnosis = redact_diagnosis(diagnosis, r)
        _hand_over_redactor(r)
    return incident, diagnosis


def _hand_over_redactor(r) -> None:
    """Give the renderer what the kernel's redactor learned, so every output is masked alike.

    The state names the raw secrets, so it never becomes a notebook output: it goes to the private
    file the renderer named in ``REDACT_STATE_ENV`` (nothing happens when the notebook runs elsewhere).
    """
    path = os.environ.get(REDACT_STATE_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(r.state(), fh)


def catalog_entry(class_id: str):
    """The catalog entry for a class id, or None when the catalog does not have it (yet)."""
    try:
        from .analysis import catalog
    except ImportError:
        return None
    try:
        return catalog.get(class_id)
    except Exception:  # noqa: BLE001 - an unknown id must not break a report
        return None


def _entry_field(entry, name, default=None):
    if entry is None:
        return default
    if isinstance(entry, dict):
        return entry.get(name, default)
    return getattr(entry, name, default)


def _ranks_text(ranks) -> str:
    ranks = [int(r) for r in ranks or []]
    if not ranks:
        return "undetermined"
    return ", ".join(str(r) for r in ranks)


def verdict_text(diagnosis) -> str:
    """One line: ``shape-mismatch (high confidence): culprit rank 1, initiating rank 1``."""
    init = diagnosis.initiating_rank
    return (f"{diagnosis.verdict} ({diagnosis.confidence} confidence): culprit ranks "
            f"{_ranks_text(diagnosis.culprit_ranks)}, initiating rank {'undetermined' if init is None else init}")


def headline(incident, diagnosis, title: str | None = None) -> HTML:
    """Title, then the verdict and its confidence, culprit and initiating rank: what on-call reads first."""
    entry = catalog_entry(diagnosis.verdict)
    name = _entry_field(entry, "title", diagnosis.verdict)
    heading = escape(title or f"Incident report: {name}")
    first = diagnosis.first
    empty = incident.is_empty
    if empty:
        lc = incident.lines
        notes = "".join(f"<li>{escape(n)}</li>" for n in (list(incident.notes) + list(diagnosis.notes)))
        body = (
            "<div class='dx-verdict empty'><h2>No distributed content found</h2>"
            f"<p>These logs hold nothing about collectives, ranks or process groups ({lc.total} lines read, "
            f"{len(incident.sources)} files). denpex_nb cannot say why the job failed from this evidence.</p>"
            "<p>Collect next: the full torchrun output (<code>--tee 3</code>) or per-rank logs, a rerun with "
            "<code>TORCH_DISTRIBUTED_DEBUG=DETAIL</code>, Flight Recorder dumps, or "
            "<code>NCCL_DEBUG=INFO</code> output.</p>"
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")
        return HTML(f"{_CSS}<h1>{heading}</h1>{body}")
    ok = diagnosis.verdict == "no-failure"
    conf = escape(diagnosis.confidence)
    rows = [
        ("culprit rank(s)", _ranks_text(diagnosis.culprit_ranks)),
        ("initiating rank (failed first)", "undetermined" if diagnosis.initiating_rank is None
         else str(diagnosis.initiating_rank)),
    ]
    if first is not None:
        where = ", ".join(x for x in (
            f"op {first.op}" if first.op else "",
            f"seq {first.seq} ({first.seq_kind})" if first.seq is not None else "",
            f"process group {first.pg}" if first.pg is not None else "") if x)
        if where:
            rows.append(("where", where))
    rows.append(("ranks seen", ", ".join(str(r) for r in diagnosis.ranks_seen) or "none"))
    table = "".join(f"<tr><td>{escape(k)}</td><td><b>{escape(v)}</b></td></tr>" for k, v in rows)
    summary = escape(first.summary) if first is not None else "Every rank's collectives agree and no rank failed."
    notes = "".join(f"<li>{escape(n)}</li>" for n in diagnosis.notes)
    body = (f"<div class='dx-verdict{' ok' if ok else ''}'><h2>Verdict: <span class='dx-verdict-id'>"
            f"{escape(diagnosis.verdict)}</span> <span class='dx-badge {conf}'>{conf} confidence</span></h2>"
            f"<p>{escape(str(name))}. {summary}</p><table class='dx-kv'>{table}</table>"
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")
    return HTML(f"{_CSS}<h1>{heading}</h1>{body}")


def evidence(diagnosis, max_lines: int = 20) -> HTML:
    """The lines that support the verdict, with file:line and rank."""
    first = diagnosis.first
    if first is None or not first.evidence:
        return HTML("<h2>Evidence</h2><p>No evidence lines: nothing failed in this evidence.</p>"
                    if first is None else "<h2>Evidence</h2><p>The finding carries no evidence lines.</p>")
    rows = []
    for e in first.evidence[:max_lines]:
        rank = "" if getattr(e, "rank", None) is None else str(e.rank)
        rows.append(f"<tr><td>{escape(rank)}</td><td>{escape(str(e.file))}:{int(e.line)}</td>"
                    f"<td class='dx-evidence'>{escape(str(e.text))}</td></tr>")
    more = len(first.evidence) - max_lines
    tail = f"<p>… and {more} more lines.</p>" if more > 0 else ""
    return HTML("<h2>Evidence</h2><table><thead><tr><th>rank</th><th>where</th><th>line</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>{tail}")


def fix(diagnosis) -> HTML:
    """From the catalog: what goes wrong, the root cause, the fix (with code) and how to confirm it."""
    entry = catalog_entry(diagnosis.verdict)
    if entry is None:
        return HTML(f"<h2>Fix</h2><p>The catalog has no entry for <code>{escape(diagnosis.verdict)}</code>.</p>")
    parts = [f"<h2>Fix: {escape(str(_entry_field(entry, 'title', diagnosis.verdict)))}</h2>"]
    root = _entry_field(entry, "root_cause")
    if root:
        parts.append(f"<p><b>Root cause.</b> {escape(str(root))}</p>")
    mech = _entry_field(entry, "mechanism")
    if isinstance(mech, dict) and mech:
        items = "".join(f"<li><b>{escape(str(k))}</b>: {escape(str(v))}</li>" for k, v in mech.items())
        parts.append(f"<p><b>Mechanism.</b></p><ul>{items}</ul>")
    elif mech:
        parts.append(f"<p><b>Mechanism.</b> {escape(str(mech))}</p>")
    fx = _entry_field(entry, "fix")
    text, code = (fx.get("text"), fx.get("code")) if isinstance(fx, dict) else (fx, _entry_field(entry, "fix_code"))
    if text:
        parts.append(f"<p><b>Fix.</b> {escape(str(text))}</p>")
    if code:
        parts.append("<pre style='font-family:monospace;background:#f6f6f6;padding:8px'>"
                     f"{escape(str(code))}</pre>")
    confirm = _entry_field(entry, "confirm")
    if isinstance(confirm, dict):
        checklist = confirm.get("checklist") or []
        if checklist:
            parts.append("<p><b>How to confirm.</b></p><ul>"
                         + "".join(f"<li>{escape(str(c))}</li>" for c in checklist) + "</ul>")
        if confirm.get("command"):
            parts.append(f"<p>Then run: <code>{escape(str(confirm['command']))}</code></p>")
    elif confirm:
        parts.append(f"<p><b>How to confirm.</b> {escape(str(confirm))}</p>")
    return HTML("".join(parts))


def pictures(incident, diagnosis) -> None:
    """Swimlane, the shapes at the divergence and who is behind (or why there is nothing to draw)."""
    from . import plot

    if incident.events.empty:
        _display(HTML("<h2>Pictures</h2><p>No collective events were found, so there is no sequence to draw.</p>"))
        return
    _display(HTML("<h2>Every rank's collectives</h2>"))
    _display(plot.swimlane(incident, diagnosis))
    _display(HTML("<h2>Each rank at the divergence</h2>"))
    _display(plot.shapes_table(incident, diagnosis))
    _display(HTML("<h2>How far each rank got</h2>"))
    _display(plot.progress_bars(incident))


def errors_frame(incident, max_message: int = 240) -> pd.DataFrame:
    """Errors ordered by time (then rank): rank, time, kind, message (shortened), file:line."""
    err = incident.errors
    if err.empty:
        return pd.DataFrame(columns=["rank", "t_wall", "kind", "message", "where"])
    df = err.sort_values(["t_wall", "rank"], na_position="last", kind="stable")
    msg = df["message"].astype("object").map(
        lambda m: m if not isinstance(m, str) or len(m) <= max_message else m[: max_message - 1] + "…")
    where = [("" if pd.isna(f) else f"{f}:{int(ln)}" if not pd.isna(ln) else str(f))
             for f, ln in zip(df["file"].astype("object"), df["line"].astype("object"))]
    out = pd.DataFrame({"rank": df["rank"], "t_wall": df["t_wall"], "kind": df["kind"].astype("object"),
                        "message": msg, "where": where})
    return out.reset_index(drop=True)


def errors_section(incident) -> None:
    """Per-rank errors, first error per rank first, then the full list."""
    df = errors_frame(incident)
    _display(HTML("<h2>Errors per rank</h2>"))
    if df.empty:
        _display(HTML("<p>No errors were found in this evidence.</p>"))
        return
    _display(df.head(60))


#: the rank_state columns a reader of the report needs first (the frame has more)
RANK_STATE_COLUMNS = ("rank", "status", "last_op", "last_seq", "last_seq_kind", "last_completed_seq", "timeout_op",
                      "timeout_seq", "call_op", "first_error_kind", "first_error", "exit_code", "signal")


def rank_state_section(diagnosis, max_rows: int = 64) -> None:
    """Where each rank stopped (diagnosis.rank_state): the table the verdict compares ranks on."""
    st = getattr(diagnosis, "rank_state", None)
    _display(HTML("<h2>Where each rank stopped</h2>"))
    if st is None or not len(st):
        _display(HTML("<p>No rank is known from this evidence.</p>"))
        return
    size = diagnosis.group_size
    _display(HTML(f"<p>Group size: {'unknown' if size is None else size} ({escape(diagnosis.group_size_basis)})."
                  + (f" Absent from the evidence: {escape(_ranks_text(diagnosis.absent_ranks))}."
                     if diagnosis.absent_ranks else "") + "</p>"))
    cols = [c for c in RANK_STATE_COLUMNS if c in st.columns]
    view = st[cols].head(max_rows).copy()
    if "first_error" in view:
        view["first_error"] = view["first_error"].map(lambda m: m if m is None or len(str(m)) <= 160
                                                      else str(m)[:159] + "…")
    _display(view)


def other_findings(diagnosis) -> HTML:
    """Every finding beyond the first (later divergences, collateral failures)."""
    if len(diagnosis.findings) <= 1:
        return HTML("")
    rows = "".join(
        f"<tr><td>{escape(f.class_id)}</td><td>{escape(f.confidence)}</td><td>{escape(str(f.op))}</td>"
        f"<td>{'' if f.seq is None else f.seq}</td><td>{escape(_ranks_text(f.culprit_ranks))}</td>"
        f"<td>{escape(f.summary)}</td></tr>" for f in diagnosis.findings[1:])
    return HTML("<h2>Other findings</h2><table><thead><tr><th>class</th><th>confidence</th><th>op</th><th>seq</th>"
                f"<th>culprits</th><th>summary</th></tr></thead><tbody>{rows}</tbody></table>")


def inputs(incident) -> HTML:
    """What was read: files, formats, and the line accounting (parsed + unparsed = total)."""
    lc = incident.lines
    src = incident.sources
    rows = ""
    if len(src):
        for _, s in src.head(40).iterrows():
            rows += (f"<tr><td>{escape(str(s['file']))}</td><td>{escape(str(s['format']))}</td>"
                     f"<td>{'' if pd.isna(s['lines_total']) else int(s['lines_total'])}</td>"
                     f"<td>{'' if pd.isna(s['error']) else escape(str(s['error']))}</td></tr>")
    table = (f"<table><thead><tr><th>file</th><th>format</th><th>lines</th><th>problem</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>" if rows else "")
    return HTML(f"<h2>Inputs</h2><p>{len(src)} files, {lc.total} lines: {lc.parsed} parsed, {lc.unparsed} not "
                f"recognised.</p>{table}")


def summary(incident, diagnosis) -> dict:
    """The key results a notebook records (tests read them back from the executed notebook)."""
    d = diagnosis.to_dict()
    return {
        "verdict": d["verdict"], "confidence": d["confidence"], "culprit_ranks": d["culprit_ranks"],
        "initiating_rank": d["initiating_rank"], "ranks_seen": d["ranks_seen"],
        "op": d["findings"][0]["op"] if d["findings"] else None,
        "seq": d["findings"][0]["seq"] if d["findings"] else None,
        "summary": diagnosis.first.summary if diagnosis.first is not None else None,
        "n_events": int(len(incident.events)), "n_errors": int(len(incident.errors)),
        "empty": bool(incident.is_empty), "lines": d["lines"],
    }


def record(incident, diagnosis) -> None:
    """Display the summary as JSON: the last cell of the notebooks (tagged ``denpex-summary``)."""
    _display({SUMMARY_MIME: summary(incident, diagnosis), "text/plain": json.dumps(summary(incident, diagnosis))},
             raw=True)


# --- rendering ---------------------------------------------------------------------------------

@dataclass
class ReportResult:
    html: Path
    ipynb: Path | None
    summary: dict | None
    error: str | None = None                    # the failing cell's error, when one failed
    seconds: dict = field(default_factory=dict)


def _resolve_inputs(paths) -> list[str]:
    """Absolute paths; a missing path or an empty glob is a one-line InputError."""
    out = []
    for p in paths:
        p = str(p)
        if p == "-":
            data = sys.stdin.buffer.read()
            fd, tmp = tempfile.mkstemp(prefix="denpex-stdin-", suffix=".log")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            out.append(tmp)
            continue
        if any(c in p for c in "*?["):
            hits = sorted(glob.glob(p, recursive=True))
            if not hits:
                raise InputError(f"no file matches {p!r}", fix="check the pattern")
            out.extend(str(Path(h).resolve()) for h in hits)
            continue
        if not Path(p).exists():
            raise InputError(f"{p}: no such file or directory", fix="check the path")
        out.append(str(Path(p).resolve()))
    if not out:
        raise InputError("no log paths given", fix="pass the files or folders of the failed job")
    return out


@contextlib.contextmanager
def _headless_env():
    old = os.environ.get(HEADLESS_ENV)
    os.environ[HEADLESS_ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(HEADLESS_ENV, None)
        else:
            os.environ[HEADLESS_ENV] = old


@contextlib.contextmanager
def _env(name: str, value: str | None):
    """Set (or, with None, leave alone) one environment variable for the kernel papermill starts."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def _kernel_stderr_to(path: Path):
    """The kernel inherits our stderr and chats on it (transport warnings): send that to a file."""
    try:
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)



def _load_jupyter_stack_quickly() -> None:
    """Import jsonschema (under nbformat and papermill) without ``rfc3987_syntax``.

    Why: when installed, jsonschema imports ``rfc3987_syntax`` only to check the ``iri`` /
    ``iri-reference`` string formats, and that module builds a lark grammar at import: about 3 s
    on 2 cores, a fifth of a whole report. The notebook schema nbformat validates against uses
    neither format, so validation is unchanged. The block is lifted right after the import, so a
    later ``import rfc3987_syntax`` elsewhere in the process still works.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # `import` now raises ImportError
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass
    finally:
        if "rfc3987_syntax" in sys.modules and sys.modules["rfc3987_syntax"] is None:
            del sys.modules["rfc3987_syntax"]


def execute(nb, parameters: dict, *, cwd=None, timeout: float = 600) -> tuple[object, str | None]:
    """Run a notebook (NotebookNode) headless with papermill; returns (executed nb, error or None).

    A failing cell does not raise: papermill's executed notebook, with its error cell, is returned.
    """
    from .errors import require

    _load_jupyter_stack_quickly()
    pm = require("papermill", "notebook")
    nbformat = require("nbformat", "notebook")
    with tempfile.TemporaryDirectory(prefix="denpex-report-") as tmp:
        src = Path(tmp) / "in.ipynb"
        dst = Path(tmp) / "out.ipynb"
        nbformat.write(nb, str(src))
        error = None
        with _headless_env(), _kernel_stderr_to(Path(tmp) / "kernel.stderr"):
            try:
                pm.execute_notebook(str(src), str(dst), parameters=parameters, kernel_name="python3",
                                    progress_bar=False, log_output=False, cwd=cwd, execution_timeout=timeout)
            except pm.PapermillExecutionError as e:
                error = f"cell {e.exec_count}: {e.ename}: {e.evalue}".strip()
            except Exception as e:  # noqa: BLE001 - kernel missing or dead: one line, not a traceback
                detail = _tail(Path(tmp) / "kernel.stderr")
                raise DenpexError(f"the report notebook could not run: {type(e).__name__}: {e}{detail}",
                                  fix="check that ipykernel is installed: pip install 'denpex_nb[notebook]'") from None
        if not dst.exists():
            raise DenpexError("the report notebook did not run", fix="check that ipykernel is installed")
        return nbformat.read(str(dst), as_version=4), error


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f" (kernel said: {lines[-1][:200]})" if lines else ""


def read_summary(nb) -> dict | None:
    """The ``denpex-summary`` cell's JSON from an executed notebook (None when it did not run)."""
    for cell in nb.cells:
        if "denpex-summary" in cell.get("metadata", {}).get("tags", []):
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if SUMMARY_MIME in data:
                    val = data[SUMMARY_MIME]
                    return json.loads(val) if isinstance(val, str) else dict(val)
    return None


def _take_redact_hosts(nb) -> set[str]:
    """Hosts named by hidden redaction outputs (older templates emitted them); those outputs are removed."""
    hosts: set[str] = set()
    for cell in nb.cells:
        keep = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if REDACT_MIME in data:
                val = data[REDACT_MIME]
                hosts |= set((json.loads(val) if isinstance(val, str) else val).get("hosts", []))
                continue
            keep.append(out)
        if "outputs" in cell:
            cell["outputs"] = keep
    return hosts


def _render_redactor(state_path: Path, hosts: set[str], logs: list[str]):
    """The kernel's redactor (same masks, same numbers), else one learned from the inputs themselves.

    The inputs are learned from in any case (names and head/tail of each file): a cell that failed
    before ``prepare`` redacted anything still has its traceback masked.
    """
    from .redact import Redactor, common_root

    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    r = Redactor.from_state(state) if state else Redactor()
    for h in sorted(hosts):
        r.add_host(h)
    if not state:
        root = common_root(logs)
        if root:
            r.add_root(root)
        r.learn_files(logs)
    for p in logs:
        r.learn(p)
    return r


def to_html(nb, title: str, redactor=None) -> str:
    """nbconvert HTML without input cells or prompts; ``remove_cell``-tagged cells dropped.

    With a ``redactor``, the title and the finished page get a last literal pass
    (:meth:`~denpex_nb.redact.Redactor.scrub`: only names it knows, outside embedded images).
    """
    from .errors import require

    require("nbconvert", "notebook")
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config

    c = Config()
    c.TagRemovePreprocessor.remove_cell_tags = {"remove_cell"}
    c.TagRemovePreprocessor.enabled = True
    exporter = HTMLExporter(config=c, template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.register_preprocessor(TagRemovePreprocessor(config=c), enabled=True)
    if redactor is not None:
        title = redactor.scrub(redactor(title))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body if redactor is None else redactor.scrub(body)


def render(paths, output="report.html", *, title: str | None = None, redact: bool = False,
           ipynb=None, template=None, timeout: float = 600) -> ReportResult:
    """Execute the incident report for ``paths`` and write HTML (and optionally the .ipynb)."""
    t0 = time.perf_counter()
    logs = _resolve_inputs(paths)
    # as `denpex-nb diagnose`: a path naming nothing to read (an empty folder) is a one-line error;
    # inputs that exist but cannot be read make a no-evidence report (DENPEX_UNREADABLE below)
    from .ingest.sources import expand

    specs, problems = expand(logs)
    missing = [p for p in problems if p.missing]
    if missing or not (specs or problems):
        raise InputError(missing[0].one_line() if missing else "no log files found", fix=None if missing else
                         "pass the files or folders of the failed job")
    _load_jupyter_stack_quickly()
    if template is None:
        from .nbtemplates import build

        nb = build("incident_report")
    else:
        from .errors import require

        nbformat = require("nbformat", "notebook")
        nb = template if not isinstance(template, (str, os.PathLike)) else nbformat.read(str(template), as_version=4)
    out_html = Path(output)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    redactor = None
    with tempfile.TemporaryDirectory(prefix="denpex-redact-") as private, _env("DENPEX_UNREADABLE", "report"), \
            _env(REDACT_STATE_ENV, str(Path(private) / "state.json") if redact else None):
        executed, error = execute(nb, {"logs": logs, "title": title, "redact": bool(redact)},
                                  cwd=str(out_html.parent.resolve()), timeout=timeout)
        t1 = time.perf_counter()
        hosts = _take_redact_hosts(executed)
        if redact:
            from .redact import redact_notebook

            redactor = _render_redactor(Path(private) / "state.json", hosts, logs)
            # every source, output, traceback and metadata string (papermill's parameters: the paths)
            redact_notebook(executed, redactor)
            if error:
                error = redactor(error)
    summ = read_summary(executed)
    page_title = title or (f"Incident report: {summ['verdict']}" if summ else "Incident report")
    html = to_html(executed, page_title, redactor=redactor)
    out_html.write_text(html, encoding="utf-8")
    nb_path = None
    if ipynb:
        import nbformat

        nb_path = Path(ipynb)
        nb_path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(executed, str(nb_path))
    for p in logs:  # a temp file made from stdin
        if Path(p).name.startswith("denpex-stdin-") and Path(p).parent == Path(tempfile.gettempdir()):
            Path(p).unlink(missing_ok=True)
    t2 = time.perf_counter()
    return ReportResult(out_html, nb_path, summ, error,
                        {"execute": round(t1 - t0, 2), "render": round(t2 - t1, 2), "total": round(t2 - t0, 2)})


# --- CLI handlers ------------------------------------------------------------------------------

def cli_report(args) -> int:
    """``denpex-nb report PATH... -o report.html [--title T] [--redact] [--ipynb PATH]``."""
    res = render(args.paths, args.output, title=args.title, redact=args.redact, ipynb=args.ipynb)
    if res.summary:
        print(f"verdict: {res.summary['verdict']} ({res.summary['confidence']} confidence), "
              f"culprit ranks {_ranks_text(res.summary['culprit_ranks'])}")
    print(f"report: {res.html}")
    if res.ipynb:
        print(f"notebook: {res.ipynb}")
    if res.error:
        print(f"denpex-nb: warning: the report was rendered, but {res.error.splitlines()[0][:300]} "
              "(the error is shown in the report where it happened)", file=sys.stderr)
        return 1
    return 0


def cli_demo(args) -> int:
    """Run the all_gather shape-mismatch reproducer on gloo, diagnose it, render the report."""
    from . import repro

    t0 = time.perf_counter()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="denpex-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    print(f"running allgather-shape-mismatch on gloo with {args.world_size} ranks (a real multi-process job) ...",
          flush=True)
    result = repro.run("allgather-shape-mismatch", world_size=args.world_size, trace=True, timeout=5.0,
                       out=run_dir)
    codes = ", ".join(f"rank {r}: {c}" for r, c in enumerate(result.exit_codes))
    print(f"run finished in {result.wall_s:.1f} s ({codes}); logs in {result.out_dir}", flush=True)
    # the report's kernel loads and diagnoses the run; its recorded summary is the verdict printed here
    res = render([str(result.out_dir)], out / "report.html", title="denpex_nb demo: all_gather shape mismatch")
    if res.summary:
        s = res.summary
        init = "undetermined" if s["initiating_rank"] is None else s["initiating_rank"]
        print(f"verdict: {s['verdict']} ({s['confidence']} confidence): culprit ranks "
              f"{_ranks_text(s['culprit_ranks'])}, initiating rank {init}")
        if s.get("summary"):
            print(f"  {s['summary']}")
    else:
        print("verdict: unknown (the report notebook failed before diagnosing; see the report)")
    print(f"report: {res.html.resolve()}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    if res.error:
        print(f"denpex-nb: warning: the report was rendered, but {res.error.splitlines()[0][:300]}",
              file=sys.stderr)
        return 1
    return 0

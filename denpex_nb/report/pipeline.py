"""``render()``: logs in, one HTML report out (and the executed notebook when asked).

The steps, each in its own module: check the inputs (here), execute the ``incident_report``
notebook (:mod:`.execute`), mask it when asked and convert it to HTML (:mod:`.convert`).

A failing cell does not lose the report: papermill keeps the executed notebook with its error
cell, and it is rendered like any other (the traceback shows where it happened); the error is
returned in :attr:`ReportResult.error`.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DenpexError, InputError, UsageError, require
from .contract import REDACT_STATE_ENV
from .convert import renderer_redactor, take_redact_hosts, to_html
from .execute import environment, execute, load_jupyter_stack_quickly, read_summary

_STDIN_PREFIX = "denpex-stdin-"


@dataclass
class ReportResult:
    """What :func:`render` wrote and what the notebook recorded."""

    html: Path
    ipynb: Path | None
    summary: dict | None  # the notebook's summary (None when it failed before it)
    error: str | None = None  # the failing cell's error, when one failed
    seconds: dict = field(default_factory=dict)


def resolve_inputs(paths) -> list[str]:
    """Absolute paths (``-``: standard input, streamed to a temp file; URLs as they are, for the
    kernel's ``load`` to open); a missing path or an empty glob is a one-line InputError."""
    from ..ingest.remote import is_url

    out = []
    for p in paths:
        p = str(p)
        if p == "-":
            fd, tmp = tempfile.mkstemp(prefix=_STDIN_PREFIX, suffix=".log")
            with os.fdopen(fd, "wb") as fh:
                shutil.copyfileobj(sys.stdin.buffer, fh, 1 << 20)  # in pieces: never whole in memory
            out.append(tmp)
            continue
        if is_url(p):
            out.append(p)
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


def _template(template):
    """The notebook to execute: the built-in ``incident_report``, a NotebookNode, or a path to one."""
    if template is None:
        from .. import nbfiles

        return nbfiles.read("incident_report")
    if not isinstance(template, (str, os.PathLike)):
        return template
    return require("nbformat", "notebook").read(str(template), as_version=4)


def _check_writable(path: Path, flag: str) -> None:
    """Refuse, before the notebook runs, an output that names a folder or whose folder cannot be made."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder", fix=f"name a file, e.g. {flag} {path / 'report.html'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(
            f"cannot make the folder for {flag} {path}: {e.strerror or e}", fix="choose a writable place"
        ) from None


def write_output(path: Path, write) -> None:
    """``write(path)``; a write that fails (a full device, no permission, a folder) is one line
    naming the file and the cause, with the fix, never a traceback (exit 2 at the CLI)."""
    try:
        write(path)
    except OSError as e:
        raise DenpexError(
            f"cannot write {path}: {e.strerror or e}",
            fix="free space on that device or choose another place with -o",
        ) from None


def render(
    paths,
    output="report.html",
    *,
    title: str | None = None,
    redact: bool = False,
    ipynb=None,
    template=None,
    timeout: float = 600,
) -> ReportResult:
    """Execute the incident report for ``paths`` and write HTML (and optionally the .ipynb)."""
    t0 = time.perf_counter()
    logs = resolve_inputs(paths)
    # as `denpex-nb diagnose`: a path naming nothing to read (an empty folder) is a one-line error;
    # inputs that exist but cannot be read make a no-evidence report (DENPEX_UNREADABLE below)
    from ..ingest.sources import expand

    specs, problems = expand(logs)
    missing = [p for p in problems if p.missing]
    if missing or not (specs or problems):
        raise InputError(
            missing[0].one_line() if missing else "no log files found",
            fix=None if missing else "pass the files or folders of the failed job",
        )
    out_html = Path(output)
    _check_writable(out_html, "-o")
    if ipynb:
        _check_writable(Path(ipynb), "--ipynb")
    load_jupyter_stack_quickly()
    nb = _template(template)
    redactor = None
    with (
        tempfile.TemporaryDirectory(prefix="denpex-redact-") as private,
        environment("DENPEX_UNREADABLE", "report"),
        environment(REDACT_STATE_ENV, str(Path(private) / "state.json") if redact else None),
    ):
        executed, error = execute(
            nb,
            {"logs": logs, "title": title, "redact": bool(redact)},
            cwd=str(out_html.parent.resolve()),
            timeout=timeout,
            # the report's kernel starts no process and keeps no temporary file: its orderly exit
            # (seconds at 1024 ranks, freeing the incident) would only be waited for
            stop_kernel="immediate",
        )
        t1 = time.perf_counter()
        hosts = take_redact_hosts(executed)
        if redact:
            from ..redact import redact_notebook

            redactor = renderer_redactor(Path(private) / "state.json", hosts, logs)
            # every source, output, traceback and metadata string (papermill's parameters: the paths)
            redact_notebook(executed, redactor)
            if error:
                error = redactor(error)
    summ = read_summary(executed)
    page_title = title or (f"Incident report: {summ['verdict']}" if summ else "Incident report")
    write_output(out_html, lambda p: p.write_text(to_html(executed, page_title, redactor=redactor), encoding="utf-8"))
    nb_path = None
    if ipynb:
        nb_path = Path(ipynb)
        nbformat = require("nbformat", "notebook")
        write_output(nb_path, lambda p: nbformat.write(executed, str(p)))
    for p in logs:  # a temp file made from stdin
        if Path(p).name.startswith(_STDIN_PREFIX) and Path(p).parent == Path(tempfile.gettempdir()):
            Path(p).unlink(missing_ok=True)
    t2 = time.perf_counter()
    return ReportResult(
        out_html,
        nb_path,
        summ,
        error,
        {"execute": round(t1 - t0, 2), "render": round(t2 - t1, 2), "total": round(t2 - t0, 2)},
    )

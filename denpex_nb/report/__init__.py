"""Incident reports: ``denpex-nb report PATH... -o report.html`` as a library.

:func:`render` executes the ``incident_report`` notebook (shipped as package data, :mod:`denpex_nb.nbfiles`,
so it is found in an installed package too) with papermill and converts it to HTML without input
cells. The notebook's cells call the section functions re-exported here (``dx.report.headline``
...); the post-mortem notebook calls :func:`errors_frame` and :func:`record`.

One job per module:

============== =====================================================================================
``sections``   the cells' sections (HTML from the Jinja2 templates in ``templates/``), the summary
``prepare``    the first cell: load, diagnose, redact, hand the redactor's state to the renderer
``show``       :class:`HTML` and :func:`display`, without IPython to import
``execute``    papermill, headless, the kernel's stderr to a file; :func:`read_summary`
``convert``    nbconvert to one HTML page, and the renderer's side of redaction
``pipeline``   :func:`render`: inputs, execute, redact, convert, write
``contract``   the MIME types, cell tag and environment variables the kernel and renderer share
============== =====================================================================================

The command-line handlers (``report``, ``demo``) live in :mod:`denpex_nb.cli`.
"""

from __future__ import annotations

from .contract import HEADLESS_ENV, REDACT_MIME, REDACT_STATE_ENV, SUMMARY_MIME, SUMMARY_TAG
from .convert import to_html
from .execute import execute, read_summary
from .pipeline import ReportResult, render, resolve_inputs
from .prepare import prepare
from .sections import (
    RANK_STATE_COLUMNS,
    divergence_frame,
    divergence_table,
    errors_frame,
    errors_section,
    errors_table,
    evidence,
    fix,
    headline,
    inputs,
    other_findings,
    pictures,
    rank_state_section,
    rank_state_table,
    ranks_text,
    record,
    render_template,
    summary,
    verdict_text,
)
from .show import HTML, display

__all__ = [
    "render",
    "ReportResult",
    "resolve_inputs",
    "execute",
    "read_summary",
    "to_html",
    "prepare",
    "divergence_frame",
    "divergence_table",
    "errors_table",
    "rank_state_table",
    "headline",
    "evidence",
    "fix",
    "pictures",
    "rank_state_section",
    "errors_section",
    "errors_frame",
    "other_findings",
    "inputs",
    "summary",
    "record",
    "verdict_text",
    "ranks_text",
    "render_template",
    "RANK_STATE_COLUMNS",
    "HTML",
    "display",
    "SUMMARY_MIME",
    "SUMMARY_TAG",
    "REDACT_MIME",
    "REDACT_STATE_ENV",
    "HEADLESS_ENV",
]

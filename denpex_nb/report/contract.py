"""What the report's kernel and its renderer agree on: output types, a cell tag, environment variables.

The report notebook runs in a separate kernel process. Its cells (:mod:`.sections`, :mod:`.prepare`)
and the code that runs and renders it (:mod:`.execute`, :mod:`.pipeline`) share nothing but these
names, so they are written once, here.
"""

from __future__ import annotations

#: the MIME type of the summary :func:`~denpex_nb.report.sections.record` displays
SUMMARY_MIME = "application/json"
#: the tag of the cell whose output is the notebook's summary
SUMMARY_TAG = "denpex-summary"
#: hidden outputs naming hosts to mask (older templates emitted them; the renderer removes them)
REDACT_MIME = "application/vnd.denpex.redact+json"
#: where the kernel's ``prepare(redact=True)`` leaves its redactor's state for the renderer
REDACT_STATE_ENV = "DENPEX_NB_REDACT_STATE"
#: set in the kernel's environment when a notebook runs headless (papermill, nbconvert);
#: :func:`denpex_nb.widgets.is_headless` reads it
HEADLESS_ENV = "DENPEX_NB_HEADLESS"

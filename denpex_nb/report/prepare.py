"""The report notebook's first cell: load and diagnose the logs, masked when asked.

This runs in the notebook's kernel. With ``redact``, what the kernel's redactor learned is handed
to the renderer through a private file (see :data:`~.contract.REDACT_STATE_ENV`), so the renderer
masks every other output the same way.
"""

from __future__ import annotations

import json
import os
import warnings

from .contract import REDACT_STATE_ENV


def prepare(logs, redact: bool = False):
    """Load and diagnose ``logs``; with ``redact``, both come back masked (see :mod:`denpex_nb.redact`).

    Diagnosis runs on the unredacted evidence (masking must not change the verdict). Warnings
    raised while reading become notes of the incident instead of text in the report's body.
    """
    from ..analysis import diagnose
    from ..incident import Incident
    from ..ingest import load

    paths = [logs] if isinstance(logs, (str, os.PathLike)) else list(logs or [])
    with warnings.catch_warnings(record=True) as caught:  # keep library warnings out of the report body
        warnings.simplefilter("always")
        incident = load(*paths) if paths else Incident(notes=["no log paths were given"])
        diagnosis = diagnose(incident)
    for w in caught:
        note = f"warning while reading: {w.message}"
        if note not in incident.notes:
            incident.notes.append(note)
    if redact:
        from ..redact import redact_diagnosis, redact_incident, redactor_for

        r = redactor_for(incident, diagnosis)
        incident = redact_incident(incident, r)
        diagnosis = redact_diagnosis(diagnosis, r)
        hand_over_redactor(r)
    return incident, diagnosis


def hand_over_redactor(r) -> None:
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

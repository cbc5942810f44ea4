"""``denpex-nb diagnose PATH... [--json] [--redact]``: load the evidence, diagnose it, print a summary or the JSON.

``--scheduler tcp://host:8786`` parses the files on that ``dask.distributed`` cluster's workers
(``load(..., dask_client=...)``); an address nothing answers at is a one-line error (exit 2)
within ``DENPEX_DASK_TIMEOUT`` seconds. ``--redact`` masks hosts, addresses, user names, e-mails and tokens in what is printed (see
:mod:`denpex_nb.redact`); the diagnosis itself runs on the unmasked evidence.

Exit 0 whenever the diagnosis ran (whatever the verdict); bad input raises
:class:`~denpex_nb.errors.InputError` from the loader, which :func:`denpex_nb.cli.main` prints as
one line with exit code 2.
"""

from __future__ import annotations

import sys
import warnings


def run(args) -> int:
    from ..analysis import diagnose
    from ..ingest import gc_paused, load

    options = {}
    if getattr(args, "force_format", None):
        options["format"] = args.force_format
    if getattr(args, "year", None):
        options["year"] = args.year
    if getattr(args, "quiet", False) or getattr(args, "json", False):
        options["progress"] = False
    if getattr(args, "scheduler", None):  # the workers parse, this process diagnoses
        options["dask_client"] = args.scheduler
    # an input that exists but cannot be read is evidence of nothing: diagnose says no-evidence
    # (exit 0) and lists it; a path that names nothing stays a one-line error (exit 2)
    with warnings.catch_warnings():  # what could not be read is in the diagnosis' output
        warnings.simplefilter("ignore", RuntimeWarning)
        incident = load(*args.paths, unreadable="report", **options)
    with gc_paused():  # many containers, no cycles: see gc_paused
        diagnosis = diagnose(incident)
        redactor = None
        if getattr(args, "redact", False):
            from ..redact import redact_diagnosis, redactor_for

            redactor = redactor_for(incident, diagnosis)
            diagnosis = redact_diagnosis(diagnosis, redactor)
        text = diagnosis.to_json(indent=2) if getattr(args, "json", False) else str(diagnosis)
    if redactor is not None:
        text = redactor.scrub(text)
    sys.stdout.write(text + "\n")
    return 0

"""``denpex-nb diagnose PATH... [--json]``: load the evidence, diagnose it, print a summary or the JSON.

Exit 0 whenever the diagnosis ran (whatever the verdict); bad input raises
:class:`~denpex_nb.errors.InputError` from the loader, which ``denpex_nb.cli`` prints as one line
with exit code 2.
"""
from __future__ import annotations

import sys


def cli_diagnose(args) -> int:
    from .. import load
    from . import diagnose

    options = {}
    if getattr(args, "force_format", None):
        options["format"] = args.force_format
    if getattr(args, "year", None):
        options["year"] = args.year
    if getattr(args, "quiet", False) or getattr(args, "json", False):
        options["progress"] = False
    incident = load(*args.paths, **options)
    diagnosis = diagnose(incident)
    if getattr(args, "json", False):
        sys.stdout.write(diagnosis.to_json(indent=2) + "\n")
    else:
        sys.stdout.write(str(diagnosis) + "\n")
    return 0

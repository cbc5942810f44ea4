"""``denpex-nb report PATH... -o report.html [--title T] [--redact] [--ipynb PATH]``.

Renders the incident report with :func:`denpex_nb.report.render` and prints the verdict and where
the report went. Exit 0 when every cell ran; 1 when a cell failed (the report is still written,
with the error where it happened); bad input is a one-line error with exit 2 (see
:func:`denpex_nb.cli.main`).
"""

from __future__ import annotations

import sys


def run(args) -> int:
    from ..report import ranks_text, render
    from ..report.execute import import_papermill_without_s3

    import_papermill_without_s3()

    res = render(args.paths, args.output, title=args.title, redact=args.redact, ipynb=args.ipynb)
    if res.summary:
        print(
            f"verdict: {res.summary['verdict']} ({res.summary['confidence']} confidence), "
            f"culprit ranks {ranks_text(res.summary['culprit_ranks'])}"
        )
    print(f"report: {res.html}")
    if res.ipynb:
        print(f"notebook: {res.ipynb}")
    if res.error:
        print(
            f"denpex-nb: warning: the report was rendered, but {res.error.splitlines()[0][:300]} "
            "(the error is shown in the report where it happened)",
            file=sys.stderr,
        )
        return 1
    return 0

"""Showing things in a notebook cell: an HTML object and :func:`display`, both without IPython to import.

The report's sections and the teaching helpers (:mod:`denpex_nb.teach`) use these, so a section
also runs in plain Python (a script, a test), where it prints what a notebook would show.
"""

from __future__ import annotations

import json
import re


class HTML:
    """Minimal HTML display object (no IPython import needed to build it)."""

    def __init__(self, html: str):
        self.html = str(html)

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:  # a terminal or a text log still says something useful
        return re.sub(r"<[^>]+>", " ", self.html).strip()


def display(*objs, raw: bool = False, metadata=None) -> None:
    """IPython's ``display`` in a kernel; in plain Python, print each object (``raw``: as JSON)."""
    try:
        from IPython.display import display as ipython_display
    except ImportError:  # plain Python: print what a notebook would show
        for o in objs:
            print(o if not raw else json.dumps(o, default=str)[:2000])
        return
    ipython_display(*objs, raw=raw, metadata=metadata)

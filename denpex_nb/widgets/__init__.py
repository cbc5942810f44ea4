"""The explorer of the post-mortem notebook: live widgets in JupyterLab, static tables elsewhere.

``explorer(incident, diagnosis)`` is what ``notebooks/postmortem.ipynb`` calls. Modules, each with
one job: :mod:`.kernel` (is anybody there to interact? read from the kernel's own state),
:mod:`.grid` (the ranks x seqs model, odd cells, the collapsed tables), :mod:`.evidence` (the raw
lines behind an entry), :mod:`.canvas` (the picture, aggregated to the view, on an ipympl canvas),
:mod:`.explorer` (the widgets and the static twin), :mod:`.fallback` (the static view JupyterLab
shows in a widget's place when the notebook is reopened without its kernel).
"""

from __future__ import annotations

from .evidence import Excerpt, excerpts
from .explorer import Explorer, Model, StaticExplorer, counters, explorer, groups
from .grid import Grid, rank_ranges
from .kernel import Frontend, frontend, is_headless

__all__ = [
    "Excerpt",
    "Explorer",
    "Frontend",
    "Grid",
    "Model",
    "StaticExplorer",
    "counters",
    "entries_at",
    "excerpts",
    "explorer",
    "frontend",
    "groups",
    "is_headless",
    "rank_ranges",
    "rank_sequence",
]


def entries_at(incident, seq: int, *, pg=None, seq_kind=None, diagnosis=None, collapse: bool = True):
    """Every rank's entry at ``seq``: odd ranks first, the agreeing majority collapsed (:meth:`Grid.entries_at`)."""
    return Grid.build(incident, seq_kind, pg, diagnosis).entries_at(seq, collapse=collapse)


def rank_sequence(incident, rank: int, *, pg=None, seq_kind=None, around: int, width: int = 5):
    """One rank's entries from ``around - width`` to ``around + width`` (:meth:`Grid.rank_window`)."""
    return Grid.build(incident, seq_kind, pg).rank_window(rank, around, width)

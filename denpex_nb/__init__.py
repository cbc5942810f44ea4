"""denpex_nb: why did my multi-rank PyTorch job fail in its collectives?

>>> import denpex_nb as dx
>>> incident = dx.load("logs/")          # every log and dump -> pandas frames
>>> diagnosis = dx.diagnose(incident)    # align ranks, name divergence, culprit, fix
>>> diagnosis                            # shows itself in Jupyter and in a terminal

Heavy dependencies (torch, Jupyter) are imported lazily: reading logs needs neither.
"""
from __future__ import annotations

from .errors import DenpexError, InputError, UsageError
from .incident import Incident
# Imported eagerly: the sub-package denpex_nb.diagnose would otherwise shadow the function
# ``diagnose`` as an attribute of this package after its first import.
from .diagnose import diagnose
from .diagnose.model import Diagnosis

def _version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("denpex_nb")
    except PackageNotFoundError:      # a source tree that was never installed
        return "0+unknown"


__version__ = _version()

__all__ = ["load", "diagnose", "Incident", "Diagnosis", "DenpexError", "InputError", "UsageError", "__version__"]


def load(*paths, **options) -> Incident:
    """Read logs and dumps into an :class:`Incident`. See :func:`denpex_nb.ingest.load`."""
    from .ingest import load as _load

    return _load(*paths, **options)


def __getattr__(name):
    import importlib

    if name in {"ingest", "plot", "widgets", "report", "repro", "fixes", "trace", "catalog"}:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(name)

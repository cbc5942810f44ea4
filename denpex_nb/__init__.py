"""denpex_nb: why did my multi-rank PyTorch job fail in its collectives?

>>> import denpex_nb as dx
>>> incident = dx.load("logs/")          # every log and dump -> pandas frames
>>> diagnosis = dx.diagnose(incident)    # align ranks, name divergence, culprit, fix
>>> diagnosis                            # shows itself in Jupyter and in a terminal

The facade is lazy: ``import denpex_nb`` (and ``import denpex_nb.trace``, the line added to every
training rank) loads neither pandas nor the analysis; each name below is imported on first use.
The analysis lives in the sub-package :mod:`denpex_nb.analysis`, so the function
:func:`diagnose` never collides with a module of the same name.
"""

from __future__ import annotations

import importlib

from .errors import DenpexError, InputError, UsageError


def _version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("denpex_nb")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__all__ = [
    "load",
    "diagnose",
    "watch",
    "Incident",
    "Diagnosis",
    "DenpexError",
    "InputError",
    "UsageError",
    "__version__",
]


def load(*paths, **options):
    """Read logs and dumps into an :class:`~denpex_nb.incident.Incident`. See :func:`denpex_nb.ingest.load`."""
    from .ingest import load as _load

    return _load(*paths, **options)


def diagnose(incident, **options):
    """Say what went wrong and where: a :class:`~denpex_nb.analysis.model.Diagnosis`.

    See :func:`denpex_nb.analysis.diagnose`."""
    from .analysis import diagnose as _diagnose

    return _diagnose(incident, **options)


def watch(*paths, **options):
    """Follow a running job's evidence: a :class:`~denpex_nb.live.Watcher` (see ``denpex-nb watch``)."""
    from .live import Watcher

    return Watcher(list(paths), **options)


#: names imported on first use: attribute -> (module, attribute or None for the module itself)
_LAZY = {
    "Incident": (".incident", "Incident"),
    "Diagnosis": (".analysis.model", "Diagnosis"),
    **{
        name: (f".{name}", None)
        for name in (
            "analysis",
            "ingest",
            "plot",
            "widgets",
            "report",
            "repro",
            "fixes",
            "trace",
            "catalog",
            "redact",
            "teach",
            "vocab",
            "incident",
            "live",
        )
    },
}


def __getattr__(name):
    if name == "__version__":  # looked up on first use: importlib.metadata and the look-up cost every
        # import of the package (the tracer's line in each training rank, each CLI command) ~15 ms of CPU
        value = globals()["__version__"] = _version()
        return value
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'denpex_nb' has no attribute {name!r}") from None
    value = importlib.import_module(module, __name__)
    return value if attribute is None else getattr(value, attribute)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

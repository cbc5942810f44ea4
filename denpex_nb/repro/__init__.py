"""The reproducer zoo: real multi-process runs of the ways collectives fail, and their fixes.

>>> from denpex_nb import repro
>>> list(repro.scenarios())                      # ids, no torch needed
>>> result = repro.run("allgather-shape-mismatch", world_size=2, flight_recorder=True, trace=True)
>>> result.ok, result.exit_codes, result.out_dir

Each rank is a separate OS process (``python -m denpex_nb.repro._worker``) started by
:mod:`denpex_nb.repro.launch`; every run is bounded by a collective timeout and a hard kill.
"""

from __future__ import annotations

from .registry import Scenario, get, scenarios

__all__ = ["run", "RunResult", "Scenario", "get", "scenarios", "record"]


def run(scenario: str, **options):
    """Run one scenario; see :func:`denpex_nb.repro.launch.run`."""
    from .launch import run as _run

    return _run(scenario, **options)


def record(out="data/recorded", **options):
    """Regenerate the recorded runs; see :func:`denpex_nb.repro.record.record_all`."""
    from .record import record_all

    return record_all(out, **options)


def __getattr__(name):
    if name == "RunResult":
        from .launch import RunResult

        return RunResult
    raise AttributeError(name)

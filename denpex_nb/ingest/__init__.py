"""Ingest: every multi-rank log and Flight Recorder dump into one :class:`~denpex_nb.incident.Incident`.

:func:`load` is the one door. It expands paths (:mod:`.sources`), parses each file with the pure
function :func:`.parse.parse_file` (serially, in a process pool or on Dask: :mod:`.parallel`), where
text goes through the fast candidate scan (:mod:`.scan`) and structured files through their
FileReader (:mod:`.flight_recorder`, :mod:`.trace`), then assembles, de-duplicates and summarises
the frames (:mod:`.assemble`).
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys
import warnings
from typing import BinaryIO

from ..errors import InputError, UnsafePickleError, UsageError
from ..incident import Incident, coerce
from .assemble import build_incident, concat
from .parse import FileResult, format_names, parse_file
from .parallel import run_all
from .sources import FileSpec, Problem, expand

__all__ = ["load", "parse_file", "FileSpec", "FileResult", "DEFAULT_UNPARSED_TEXT_BUDGET"]

#: characters of unparsed text kept per load; past it, unparsed runs collapse to counts
DEFAULT_UNPARSED_TEXT_BUDGET = 32 << 20
#: inputs smaller than this never show a progress bar
PROGRESS_MIN_BYTES = 4 << 20
_MIN_BUDGET_PER_FILE = 256 << 10


def load(*paths, format: str | None = None, year: int | None = None, progress: bool | None = None,
         jobs: int | str | None = None, unparsed_text_budget: int = DEFAULT_UNPARSED_TEXT_BUDGET,
         stdin: BinaryIO | None = None, dedup: bool = True, strict: bool | None = None,
         unreadable: str = "raise", **options) -> Incident:
    """Read logs and dumps into an :class:`Incident`.

    ``paths``: files, folders (walked recursively), globs, ``-`` (standard input), ``.gz``,
    ``.bz2``, ``.xz``, ``.zst`` and ``.zip`` files, torchrun ``--log-dir`` trees. Lists of paths
    are accepted too. The format is detected per file; ``format=`` forces one reader (a reader
    name such as ``"fr_pickle"``, ``"trace"``, ``"c10d"``, or ``"text"`` for all text readers).

    ``year`` sets the year of year-less log timestamps (default: each file's modification year).
    ``progress``: None shows a bar for inputs over 4 MB on a terminal or in Jupyter; True/False
    force it. ``jobs``: parallel processes (None: automatic; ``"dask"``: Dask).
    ``unparsed_text_budget``: characters of unrecognised lines kept as text (shared by the files;
    past it, runs of unparsed lines are kept as counts only). ``dedup=False`` keeps observations
    that several files of one run repeat.

    Raises :class:`~denpex_nb.errors.InputError` when nothing at all can be loaded; when some
    inputs load, the others become ``load_error`` rows in ``errors`` and a warning.
    ``unreadable="report"`` returns an Incident even when every input that exists is unreadable
    (binary, corrupt, refused): its ``errors`` and ``sources`` say what could not be read, and
    diagnosis then says ``no-evidence``. Paths that do not exist still raise.

    A text reader that raises on some lines (a bug, not odd input) costs only those lines: they
    are kept as ``unparsed`` and the Incident gets one note per file naming the reader, the
    file:line and the exception. ``strict=True`` (default: the ``DENPEX_STRICT`` environment
    variable, ``1`` to enable) re-raises the exception instead; the test suite runs strict.
    """
    flat = []
    for p in paths:
        if isinstance(p, (list, tuple)):
            flat.extend(p)
        else:
            flat.append(p)
    if not flat:
        raise UsageError("no input given", fix="pass log files, folders, globs or '-'")
    if format is not None and format not in format_names():
        raise UsageError(f"unknown format {format!r}", fix=f"use one of {', '.join(format_names())}")
    specs, problems = expand(flat, year=year, stdin=stdin)
    budget = max(0, int(unparsed_text_budget))
    per_file = max(min(budget, _MIN_BUDGET_PER_FILE), budget // max(1, len(specs)))
    opts = dict(options, format=format, year=year, unparsed_text_budget_per_file=per_file)
    if strict is not None:
        opts["strict"] = bool(strict)

    bar = _progress_bar(progress, specs)
    try:
        with _gc_paused():
            results = run_all(specs, opts, jobs, on_bytes=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()

    notes: list[str] = []
    partial: list[str] = []
    kept: list[FileResult] = []
    failures: list[tuple[str, str, bool]] = [(p.path, p.one_line(), False) for p in problems]
    for spec, r in zip(specs, results):
        if r.fatal and r.format == "binary" and not spec.explicit:
            notes.append(f"skipped {spec.display}: binary file")
            continue
        kept.append(r)
        if r.fatal:
            failures.append((spec.display, f"{spec.display}: {r.error}", r.unsafe))
        elif r.error:   # partly read (truncated stream): rows kept, problem recorded and shown
            notes.append(f"{spec.display}: {r.error}")
            partial.append(f"{spec.display}: {r.error}")
        notes.extend(f"{spec.display}: {w}" for w in r.warnings)
        if r.reader_failure:
            notes.append(r.reader_failure)

    if not any(not r.fatal for r in kept):
        if unreadable != "report" or not (kept or problems) or any(p.missing for p in problems):
            _raise_nothing_loaded(failures, flat)

    extra = [_problem_result(p) for p in problems]
    with _gc_paused():
        incident = build_incident(kept + extra, notes=notes, dedup_rows=dedup)
    for line in [f[1] for f in failures] + partial:
        warnings.warn(f"denpex_nb.load: {line}", RuntimeWarning, stacklevel=3)
    return incident


@contextlib.contextmanager
def _gc_paused():
    """Loading creates millions of short-lived containers and no reference cycles; the cyclic
    collector would rescan everything kept so far again and again. Cycles, if any, are collected
    after the load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _raise_nothing_loaded(failures, flat) -> None:
    if not failures:
        raise InputError("no log files found", where=", ".join(map(str, flat)),
                         fix="pass the files or folders that hold the logs")
    path, line, unsafe = failures[0]
    more = f" (and {len(failures) - 1} more problem(s))" if len(failures) > 1 else ""
    cls = UnsafePickleError if unsafe else InputError
    raise cls(line + more)


def _problem_result(p: Problem) -> FileResult:
    from .parse import _failed

    spec = FileSpec(display=p.path)
    r = _failed(spec, p.problem + (f" (fix: {p.fix})" if p.fix else ""), fmt="missing")
    return r


def _interactive() -> bool:
    if "ipykernel" in sys.modules:
        try:
            from IPython import get_ipython

            if get_ipython() is not None:
                return True
        except Exception:
            pass
    try:
        return sys.stderr.isatty()
    except Exception:
        return False


def _progress_bar(progress: bool | None, specs: list[FileSpec]):
    if progress is False:
        return None
    total = sum(s.size for s in specs)
    if progress is None and (total < PROGRESS_MIN_BYTES or not _interactive()):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="denpex_nb.load",
                leave=False, disable=False)

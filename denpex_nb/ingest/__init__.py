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
import operator
import os
import sys
import warnings
from typing import BinaryIO

from ..errors import InputError, UnsafePickleError, UsageError
from ..incident import Incident
from .assemble import build_incident
from .parallel import run_all
from .parse import FileResult, format_names, parse_file
from .scan import DEFAULT_LINE_CAP
from .sources import (
    DEFAULT_MAX_DECOMPRESSED,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_STRUCTURED,
    YEAR_RANGE,
    FileSpec,
    Problem,
    expand,
    resolve_limits,
)

__all__ = [
    "load",
    "parse_file",
    "FileSpec",
    "FileResult",
    "DEFAULT_UNPARSED_TEXT_BUDGET",
    "DEFAULT_LINE_CAP",
    "DEFAULT_MAX_DECOMPRESSED",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_STRUCTURED",
]

#: characters of unparsed text kept per load; past it, unparsed runs collapse to counts
DEFAULT_UNPARSED_TEXT_BUDGET = 32 << 20
#: inputs smaller than this never show a progress bar
PROGRESS_MIN_BYTES = 4 << 20
_MIN_BUDGET_PER_FILE = 16 << 10  # a file keeps at least this much; the load as a whole about the budget


def load(
    *paths,
    format: str | None = None,
    year: int | None = None,
    progress: bool | None = None,
    jobs: int | str | None = None,
    unparsed_text_budget: int = DEFAULT_UNPARSED_TEXT_BUDGET,
    stdin: BinaryIO | None = None,
    dedup: bool = True,
    strict: bool | None = None,
    unreadable: str | None = None,
    max_decompressed: int | str | None = None,
    max_ratio: float | None = None,
    max_structured: int | str | None = None,
    line_cap: int | str | None = None,
    storage_options: dict | None = None,
    dask_client=None,
    **options,
) -> Incident:
    """Read logs and dumps into an :class:`Incident`.

    ``paths``: files, folders (walked recursively), globs, ``-`` (standard input), gzip, bz2, xz,
    zstd and zip files (recognised by content, whatever their name), torchrun ``--log-dir`` trees,
    and URLs: ``s3://bucket/prefix/`` (listed recursively like a folder), ``s3://bucket/run/*.log``,
    ``gs://...``, ``https://...`` (the optional ``remote`` extra: ``pip install
    'denpex_nb[remote]'``). Lists of paths are accepted too. The format is detected per file;
    ``format=`` forces one reader (a reader name such as ``"fr_pickle"``, ``"trace"``,
    ``"c10d"``, or ``"text"`` for all text readers).

    ``storage_options``: fsspec options for URLs (``{"endpoint_url": ..., "key": ..., "secret":
    ...}``, ``{"anon": True}``); by default credentials come from the environment (``AWS_*``,
    ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``; ``DENPEX_STORAGE_OPTIONS`` holds default options as
    JSON). An object that cannot be read (denied, truncated) is that file's ``load_error``; a URL
    that cannot be listed (no such bucket, unreachable store) is one like a missing path.

    ``year`` sets the year of year-less log timestamps (default: each file's modification year).
    ``progress``: None shows a bar for inputs over 4 MB on a terminal or in Jupyter; True/False
    force it. ``jobs``: parallel processes (None: automatic; ``"dask"``: a ``dask.distributed``
    cluster). ``dask_client``: the cluster to parse on (a ``distributed.Client`` or a scheduler
    address such as ``"tcp://host:8786"``; implies ``jobs="dask"``); without it, ``jobs="dask"``
    uses ``DENPEX_DASK_SCHEDULER`` (which, set, also sends ``jobs=None`` loads there), else the
    current client, else a temporary in-process cluster. Workers open the files themselves, so
    local paths must be visible to them at the same path (object storage always is).
    ``unparsed_text_budget``: characters of unrecognised lines kept as text (shared by the files;
    past it, runs of unparsed lines are kept as counts only). ``dedup=False`` keeps observations
    that several files of one run repeat.

    Raises :class:`~denpex_nb.errors.InputError` when nothing at all can be loaded; when some
    inputs load, the others become ``load_error`` rows in ``errors`` and a warning.
    ``unreadable="report"`` returns an Incident even when every input that exists is unreadable
    (binary, corrupt, refused): its ``errors`` and ``sources`` say what could not be read, and
    diagnosis then says ``no-evidence``. Paths that do not exist still raise. The default comes
    from the ``DENPEX_UNREADABLE`` environment variable (``report`` or ``raise``; unset: ``raise``),
    which is how ``denpex-nb report`` sets it for its notebook.

    Caps (each also settable by an environment variable; sizes like ``"64M"`` are accepted; a cap
    that stops a read keeps the rows read before it, gives the file a ``load_error`` row and an
    ``error`` in ``sources`` naming the cap and how to raise it):

    * ``max_decompressed`` (``DENPEX_MAX_DECOMPRESSED``, default 8 GiB): bytes one compressed file
      or zip member may decompress to;
    * ``max_ratio`` (``DENPEX_MAX_RATIO``, default 2000): decompressed / compressed bytes, checked
      once the output passes 64 MiB (real logs compress 5x-25x; bombs 1000x-30000x);
    * ``max_structured`` (``DENPEX_MAX_STRUCTURED``, default 512 MiB): bytes of a file read whole
      (Flight Recorder pickle / JSON, manifest: not read past it; tracer JSONL: the lines after it
      are counted as unparsed);
    * ``line_cap`` (``DENPEX_LINE_CAP``, default 1 MiB): bytes of one text line offered to the
      readers; the rest of a longer line is counted (an ``unparsed`` row with ``n_lines`` 0 says how
      many bytes) and never held in memory.

    Truncated (gz, bz2, xz, zst) and corrupt compressed files are always reported the same way.

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
    if year is not None:
        year = _check_year(year)
    if unreadable is None:
        unreadable = os.environ.get("DENPEX_UNREADABLE", "").strip().lower() or "raise"
    if unreadable not in ("raise", "report"):
        raise UsageError(f"unreadable must be 'raise' or 'report', not {unreadable!r}")
    try:
        limits = resolve_limits(
            {
                "max_decompressed": max_decompressed,
                "max_ratio": max_ratio,
                "max_structured": max_structured,
                "line_cap": line_cap,
            }
        )
    except ValueError as e:
        raise UsageError(str(e), fix="give a positive size in bytes, or with a K, M or G suffix") from None
    specs, problems = expand(flat, year=year, stdin=stdin, storage_options=storage_options)
    budget = max(0, int(unparsed_text_budget))
    per_file = max(min(budget, _MIN_BUDGET_PER_FILE), budget // max(1, len(specs)))
    opts = dict(options, format=format, year=year, unparsed_text_budget_per_file=per_file, **limits)
    if strict is not None:
        opts["strict"] = bool(strict)

    bar = _progress_bar(progress, specs)
    try:
        with gc_paused():
            results = run_all(
                specs, opts, jobs, on_bytes=bar.update if bar is not None else None, dask_client=dask_client
            )
    finally:
        if bar is not None:
            bar.close()
        for spec in specs:  # standard input spooled to a temporary file
            if spec.temp and spec.path:
                with contextlib.suppress(OSError):
                    os.unlink(spec.path)

    notes: list[str] = []
    partial: list[str] = []
    kept: list[FileResult] = []
    failures: list[tuple[str, str, bool]] = [(p.path, p.one_line(), False) for p in problems]
    skipped: list[FileResult] = []
    for spec, r in zip(specs, results):
        if r.fatal and r.format == "binary" and not spec.explicit:
            notes.append(f"skipped {spec.display}: binary file")
            skipped.append(r)
            continue
        kept.append(r)
        if r.fatal:
            failures.append((spec.display, f"{spec.display}: {r.error}", r.unsafe))
        elif r.error:  # partly read (truncated stream): rows kept, problem recorded and shown
            notes.append(f"{spec.display}: {r.error}")
            partial.append(f"{spec.display}: {r.error}")
        notes.extend(f"{spec.display}: {w}" for w in r.warnings)
        if r.reader_failure:
            notes.append(r.reader_failure)

    if not any(not r.fatal for r in kept):
        if unreadable == "report" and not (kept or problems) and skipped:
            kept = skipped  # a folder of binary files only: say what it held
        if unreadable != "report" or not (kept or problems) or any(p.missing for p in problems):
            _raise_nothing_loaded(failures, flat)

    extra = [_problem_result(p) for p in problems]
    with gc_paused():
        incident = build_incident(kept + extra, notes=notes, dedup_rows=dedup)
    for line in [f[1] for f in failures] + partial:
        warnings.warn(f"denpex_nb.load: {line}", RuntimeWarning, stacklevel=3)
    return incident


def _check_year(year) -> int:
    """``year`` as an int within :data:`.sources.YEAR_RANGE`, else a one-line UsageError."""
    lo, hi = YEAR_RANGE
    try:
        value = operator.index(year) if not isinstance(year, bool) else None
    except TypeError:
        value = None
    if value is None or not lo <= value <= hi:
        raise UsageError(f"year={year!r} is out of range", fix=f"give a whole year from {lo} to {hi}, or none")
    return value


@contextlib.contextmanager
def gc_paused():
    """The cyclic collector off for a block that builds many containers and no reference cycles:
    loading (millions of short-lived rows), and the CLI's diagnosis and its JSON (a row and a
    record per rank; at 50,000 ranks ~12 full collections, 1.2 s of 6.6 s of CPU). Each full
    collection would rescan everything kept so far; cycles, if any, are collected afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _raise_nothing_loaded(failures, flat) -> None:
    if not failures:
        raise InputError(
            "no log files found", where=", ".join(map(str, flat)), fix="pass the files or folders that hold the logs"
        )
    path, line, unsafe = failures[0]
    more = f" (and {len(failures) - 1} more problem(s))" if len(failures) > 1 else ""
    cls = UnsafePickleError if unsafe else InputError
    raise cls(line + more)


def _problem_result(p: Problem) -> FileResult:
    from .parse import failed_result

    spec = FileSpec(display=p.path)
    r = failed_result(spec, p.problem + (f" (fix: {p.fix})" if p.fix else ""), fmt="missing")
    return r


def _interactive() -> bool:
    """Is somebody watching? Not in a kernel told it is headless (``DENPEX_NB_HEADLESS``, set by
    ``denpex-nb report`` for the kernel papermill starts): there a bar is a widget nobody sees,
    whose import and updates cost the report CPU and whose saved state only grows the HTML."""
    if os.environ.get("DENPEX_NB_HEADLESS", "") not in ("", "0"):
        return False
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
    return tqdm(
        total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="denpex_nb.load", leave=False, disable=False
    )

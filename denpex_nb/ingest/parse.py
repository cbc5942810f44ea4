"""Parse one input file into frames: the pure, picklable unit of work behind :func:`load`.

``parse_file(spec, options) -> FileResult`` opens the stream, picks a format (a FileReader whose
``sniff`` accepts the head, a forced format, or text), runs the readers and returns frames plus
the file's line accounting. It touches no global state, so it runs the same in this process, in a
process pool or on a Dask worker.

Bounded: a compressed stream stops at the decompression caps (:func:`.sources.resolve_limits`),
a structured file read whole at ``max_structured`` bytes (a line-oriented one keeps the whole
lines before it and counts the rest; a pickle or JSON document past it is not read), and a text
line at ``line_cap`` bytes (:mod:`.scan`). Whatever stopped a read is the file's ``error`` (a
``load_error`` row, the ``sources`` row's ``error``); the rows read before it are kept.
"""
from __future__ import annotations

import bz2  # noqa: F401  (exceptions below)
import importlib
import lzma
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import DenpexError, MissingDependencyError, UnsafePickleError
from . import base
from .assemble import as_batches, batch_len, compact_batch, rows_to_batch
from .base import FileContext, FileReader, Output, TextReader
from .scan import NeedleMatcher, UnparsedSink, scan_text
from .sources import FileSpec, StreamError, human, open_stream, read_fully, resolve_limits
from ..vocab import ErrorKind

HEAD_BYTES = 64 << 10
_BUILTIN = ("c10d", "nccl", "python", "frtrace_text", "flight_recorder", "trace")
_missing_warned: set[str] = set()

#: errors raised by a truncated or corrupt (compressed) stream
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


@dataclass
class FileResult:
    """What one file yielded. ``frames`` follow :data:`denpex_nb.incident.SCHEMAS`."""

    file: str
    format: str
    frames: dict[str, list]           # frame name -> column batches (see assemble.build_frame)
    source: dict[str, Any]
    rank_info: dict[int, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None          # a load problem (the file may still have yielded rows)
    fatal: bool = False               # nothing usable came out of this file
    unsafe: bool = False              # a pickle that tried to call something
    pid_hint: int | None = None
    run_root: str = ""
    #: a text reader (or the prefix stripper) raised: one line naming reader, file:line, exception
    reader_failure: str | None = None


def _import_builtin() -> None:
    from . import manifest  # noqa: F401  (registers the reproducer-manifest reader)

    try:
        base._ensure_builtin()
        return
    except ImportError:
        pass
    for name in _BUILTIN:   # some reader modules may not exist yet: load those that do
        try:
            importlib.import_module(f"denpex_nb.ingest.{name}")
        except ImportError as e:
            if name not in _missing_warned:
                _missing_warned.add(name)
                warnings.warn(f"reader module denpex_nb.ingest.{name} unavailable: {e}", RuntimeWarning, stacklevel=3)


def all_text_readers() -> list[TextReader]:
    _import_builtin()
    return list(base._TEXT_READERS.values())


def all_file_readers() -> list[FileReader]:
    _import_builtin()
    return list(base._FILE_READERS.values())


def format_names() -> list[str]:
    return ["text"] + [r.name for r in all_text_readers()] + [r.name for r in all_file_readers()]


_TEXTLIKE = bytes(range(32, 127)) + b"\t\n\r\x1b\x0c\x08"


def looks_binary(head: bytes) -> bool:
    """NUL bytes plus a high share of control bytes in the first 8 KB: not a text log."""
    sample = head[:8192]
    if not sample or b"\x00" not in sample:
        return False
    ctrl = len(sample.translate(None, _TEXTLIKE + bytes(range(128, 256))))
    return ctrl > 0.05 * len(sample)


def _readers_for(options: dict) -> tuple[FileReader | None, list[TextReader] | None]:
    """(forced file reader, text readers) for a forced ``format``; (None, None) when not forced."""
    forced = options.get("format")
    if not forced:
        return None, None
    for r in all_file_readers():
        if r.name == forced:
            return r, []
    texts = all_text_readers()
    if forced == "text":
        return None, texts
    return None, [r for r in texts if r.name == forced]


def _frames_from(out: Output, ctx: FileContext, sink: UnparsedSink | None, file: str) -> dict[str, list]:
    """The file's rows as column batches per frame, with ``file`` and the rank hint filled in."""
    frames: dict[str, list] = {}
    for name in ("events", "errors", "ranks", "progress"):
        batches = as_batches([getattr(out, name)] + list(out.frames.get(name, [])))
        for b in batches:
            n = batch_len(b)
            if name != "ranks":
                col = b.get("file")
                if col is None:
                    b["file"] = [file] * n
                elif None in col:
                    b["file"] = [file if v is None else v for v in col]
            if ctx.rank_hint is not None:
                col = b.get("rank")
                if col is None:
                    b["rank"] = [ctx.rank_hint] * n
                elif None in col:
                    b["rank"] = [ctx.rank_hint if v is None else v for v in col]
        frames[name] = [compact_batch(name, b) for b in batches] if name == "events" else batches
    frames["unparsed"] = [sink.columns(file)] if sink is not None and sink.line else []
    return frames


def _load_error_row(spec: FileSpec, message: str) -> dict:
    return {"rank": spec.rank_hint, "kind": ErrorKind.LOAD_ERROR, "message": f"{spec.display}: {message}",
            "source": "load", "file": spec.display}


def parse_file(spec: FileSpec, options: dict | None = None, on_bytes: Callable[[int], None] | None = None) -> FileResult:
    """Parse one file. Never raises for bad content: problems go to ``FileResult.error``.

    A text reader that raises loses only what it added for that block (its lines stay unparsed)
    and the file's first such failure goes to ``FileResult.reader_failure``; with
    ``options["strict"]`` (or ``DENPEX_STRICT=1``) the exception propagates instead.
    """
    options = dict(options or {})
    ctx = FileContext(file=spec.display, rank_hint=spec.rank_hint, local_rank_hint=spec.local_rank_hint,
                      year=options.get("year") or spec.year,
                      options=dict(options, mtime=spec.mtime) if spec.mtime and not options.get("year") else options)
    out = Output()
    try:
        limits = resolve_limits(options)
    except ValueError as e:
        return _failed(spec, f"bad cap: {e}")
    budget = int(options.get("unparsed_text_budget_per_file", 1 << 20))
    sink = UnparsedSink(budget)
    fmt = "text"
    n_lines = 0
    error: str | None = None
    fatal = False
    unsafe = False
    rank_info: dict = {}
    notes: list[str] = []
    reader_failure: str | None = None
    bytes_read = 0
    overlong = None
    try:
        stream = open_stream(spec, limits)
    except MissingDependencyError as e:
        return _failed(spec, str(e.problem))
    except (OSError, ValueError) as e:
        return _failed(spec, _os_message(e))
    try:
        with stream:
            try:
                head = read_fully(stream, HEAD_BYTES)
            except _READ_ERRORS as e:
                head = getattr(e, "partial", b"")
                if not head:
                    return _failed(spec, f"cannot read: {_os_message(e)}")
                error = f"read stopped early: {_os_message(e)}"
                stream = _Empty()
            forced_file, forced_text = _readers_for(options)
            file_reader = forced_file
            if file_reader is None and forced_text is None:
                file_reader = next((r for r in all_file_readers() if _safe_sniff(r, head, spec.name)), None)
            if file_reader is not None:
                fmt = file_reader.name
                cap = limits["max_structured"]
                try:
                    data = head + read_fully(stream, max(0, cap + 1 - len(head)))
                except _READ_ERRORS as e:
                    data = head + getattr(e, "partial", b"")
                    error = f"read stopped early: {_os_message(e)}"
                skipped_lines = 0
                if len(data) > cap:
                    if not file_reader.line_oriented:
                        return _failed(spec, f"larger than the cap for files read whole ({human(cap)}): not read "
                                             f"(raise it: load(max_structured=...) or DENPEX_MAX_STRUCTURED)", fmt=fmt,
                                       size=len(data))
                    cut = data.rfind(b"\n", 0, cap) + 1
                    skipped_lines, more_error = _count_lines(data[cut:], stream)
                    data = data[:cut]
                    error = error or more_error or (
                        f"stopped at the cap for files read whole ({human(cap)}): the {skipped_lines} line(s) after "
                        f"it are counted, not read (raise it: load(max_structured=...) or DENPEX_MAX_STRUCTURED)")
                bytes_read = len(data)
                if on_bytes:
                    on_bytes(spec.size or len(data))
                try:
                    n_lines = file_reader.read(data, ctx, out) or 0
                except UnsafePickleError as e:
                    error, fatal, unsafe = f"refused: {e.problem}", True, True
                except DenpexError as e:
                    error, fatal = e.problem, not (out.events or out.errors or out.frames)
                except Exception as e:  # corrupt / truncated dump: this rank's dump is lost, others load
                    error, fatal = f"corrupt {fmt} input: {type(e).__name__}: {e}", True
                if file_reader.line_oriented and (n_lines or skipped_lines):
                    _unparsed_from_bytes(data, n_lines, out.parsed, sink)
                    sink.add_run(n_lines + 1, skipped_lines)
                    n_lines += skipped_lines
                else:
                    n_lines = 0
            else:
                if forced_text is None and looks_binary(head):
                    return _failed(spec, "binary file: not a text log or a Flight Recorder dump", fmt="binary",
                                   size=len(head))
                readers = forced_text if forced_text is not None else all_text_readers()
                matcher = NeedleMatcher.for_readers(readers)
                counter = [len(head)]

                def count(n, _c=counter):
                    _c[0] += n
                    if on_bytes:
                        on_bytes(n)

                if on_bytes:
                    on_bytes(len(head))
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        sc = scan_text(stream, readers, ctx, out, sink, head=head, matcher=matcher, on_bytes=count,
                                       chunk_size=int(options.get("chunk_size", 16 << 20)),
                                       line_cap=limits["line_cap"])
                    notes += [str(w.message) for w in caught]
                    n_lines = sc.lines_total
                    rank_info = sc.rank_info
                    reader_failure = sc.failure_note()
                    overlong = sc.overlong_rows(spec.display)
                    if sc.overlong:
                        notes.append(sc.overlong_note())
                    if sc.read_error is not None:
                        error = f"read stopped early: {_os_message(sc.read_error)}"
                except _READ_ERRORS as e:
                    if getattr(e, "_denpex_reader_failure", False):
                        raise                 # strict mode: a reader's ValueError is not a read error
                    error = f"read stopped early: {_os_message(e)}"
                    n_lines = sink.count + len(out.parsed)
                bytes_read = counter[0]
    except _READ_ERRORS as e:
        if getattr(e, "_denpex_reader_failure", False):
            raise
        error = error or f"cannot read: {_os_message(e)}"
    frames = _frames_from(out, ctx, sink, spec.display)
    if overlong:
        frames["unparsed"].append(overlong)
    if error:
        frames["errors"].append(rows_to_batch([_load_error_row(spec, error)]))
    n_unparsed = sink.count
    n_parsed = max(n_lines - n_unparsed, 0)
    if n_lines < n_unparsed:  # cannot happen; keep the identity even so
        n_lines = n_unparsed
    source = {"file": spec.display, "format": fmt, "rank_hint": spec.rank_hint,
              "bytes": spec.size or bytes_read, "lines_total": n_lines, "lines_parsed": n_parsed,
              "lines_unparsed": n_unparsed, "error": error}
    return FileResult(file=spec.display, format=fmt, frames=frames, source=source, rank_info=rank_info,
                      warnings=notes, error=error, fatal=fatal, unsafe=unsafe, pid_hint=spec.pid_hint,
                      run_root=spec.run_root, reader_failure=reader_failure)


class _Empty:
    """Stands in for a stream that already broke off."""

    def read(self, n=-1):
        return b""

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _safe_sniff(reader: FileReader, head: bytes, name: str) -> bool:
    try:
        return bool(reader.sniff(head, name))
    except Exception:
        return False


def _unparsed_from_bytes(data: bytes, n_lines: int, parsed: set[int], sink: UnparsedSink) -> None:
    texts = data.decode("utf-8", "replace").split("\n")
    if texts and texts[-1] == "":
        texts.pop()
    for i, t in enumerate(texts[:n_lines], start=1):
        if i not in parsed:
            sink.add_text(i, t.rstrip("\r")) if sink.budget > 0 else sink.add_run(i, 1)


def _count_lines(part: bytes, stream) -> tuple[int, str | None]:
    """Lines in ``part`` plus the rest of ``stream`` (read in chunks, never kept): (count, the read
    error that stopped the count or None). A last line without a newline counts."""
    n = part.count(b"\n")
    last = part[-1:] if part else b""
    error = None
    while True:
        try:
            block = read_fully(stream, 16 << 20)
        except _READ_ERRORS as e:
            block = getattr(e, "partial", b"")
            error = f"read stopped early: {_os_message(e)}"
        if block:
            n += block.count(b"\n")
            last = block[-1:]
        if not block or error:
            break
    return n + (1 if last and last != b"\n" else 0), error


def _os_message(e: BaseException) -> str:
    if isinstance(e, StreamError):
        return str(e)
    if isinstance(e, PermissionError):
        return "permission denied"
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, IsADirectoryError):
        return "is a folder"
    if isinstance(e, EOFError):
        return "compressed stream is truncated"
    text = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return text


def _failed(spec: FileSpec, message: str, *, fmt: str = "unreadable", size: int = 0) -> FileResult:
    frames: dict[str, list] = {name: [] for name in ("events", "ranks", "progress", "unparsed")}
    frames["errors"] = [rows_to_batch([_load_error_row(spec, message)])]
    source = {"file": spec.display, "format": fmt, "rank_hint": spec.rank_hint, "bytes": spec.size or size,
              "lines_total": 0, "lines_parsed": 0, "lines_unparsed": 0, "error": message}
    return FileResult(file=spec.display, format=fmt, frames=frames, source=source, error=message, fatal=True,
                      pid_hint=spec.pid_hint, run_root=spec.run_root)

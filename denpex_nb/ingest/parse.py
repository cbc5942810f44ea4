"""Parse one input file into frames: the pure, picklable unit of work behind :func:`load`.

``parse_file(spec, options) -> FileResult`` opens the stream, reads its head, picks a format (a
FileReader whose ``sniff`` accepts the head, a forced format, or text) and hands the stream to one
of two paths, each returning the same :class:`Outcome`: :func:`_parse_structured` (a dump or a
JSON file, read whole up to a cap) and :func:`_parse_text` (a log, scanned in chunks by
:mod:`.scan`). It reads no global state but the reader registry and the ``DENPEX_*`` caps, so it
runs the same in this process, in a process pool or on a Dask worker.

Bounded: a compressed stream stops at the decompression caps (:func:`.sources.resolve_limits`),
a structured file read whole at ``max_structured`` bytes (a line-oriented one keeps the whole
lines before it and counts the rest; a pickle or JSON document past it is not read), and a text
line at ``line_cap`` bytes (:mod:`.scan`). A read that breaks off arrives as
:class:`~.sources.ReadStopped` with the bytes before it; what stopped it is the file's ``error``
(a ``load_error`` row, the ``sources`` row's ``error``) and the rows read before it are kept.
A reader that raises is contained by the scanner (its lines stay unparsed, one note per file);
with ``strict`` its exception propagates from here unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import DenpexError, MissingDependencyError, UnsafePickleError
from ..vocab import ErrorKind
from .assemble import as_batches, batch_len, compact_batch, rows_to_batch
from .base import FileContext, FileReader, Output, TextReader, file_readers, text_readers
from .scan import UnparsedSink, matcher_for, mentions_in, scan_text
from .sources import FileSpec, ReadStopped, StreamError, human, open_stream, read_fully, resolve_limits

HEAD_BYTES = 64 << 10


@dataclass
class FileResult:
    """What one file yielded. ``frames`` follow :data:`denpex_nb.incident.SCHEMAS`."""

    file: str
    format: str
    frames: dict[str, list]  # frame name -> column batches (see assemble.build_frame)
    source: dict[str, Any]
    rank_info: dict[int, dict] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # a load problem (the file may still have yielded rows)
    fatal: bool = False  # nothing usable came out of this file
    unsafe: bool = False  # a pickle that tried to call something
    pid_hint: int | None = None
    run_root: str = ""
    #: a text reader (or the prefix stripper) raised: one line naming reader, file:line, exception
    reader_failure: str | None = None
    #: watched words (:data:`denpex_nb.vocab.MENTIONS`) found in the file, parsed lines or not
    mentions: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """What either parsing path made of one stream, before it becomes a :class:`FileResult`."""

    format: str
    out: Output
    sink: UnparsedSink
    n_lines: int = 0
    bytes_read: int = 0
    error: str | None = None  # what stopped the read, or a reader's refusal
    fatal: bool = False
    unsafe: bool = False
    rank_info: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reader_failure: str | None = None
    overlong: dict | None = None  # an ``unparsed`` batch for lines cut at the line cap
    failed: str | None = None  # nothing could be read: the one-line reason
    mentions: set[str] = field(default_factory=set)  # watched words found while reading


def all_text_readers() -> list[TextReader]:
    return text_readers()


def all_file_readers() -> list[FileReader]:
    return file_readers()


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
        rows, more = getattr(out, name), out.frames.get(name)
        if type(rows) is list and not rows and not more:  # (most frames of most files)
            frames[name] = []
            continue
        batches = as_batches([rows] + list(more or ()))
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
    frames["signals"] = list(out.frames.get("signals", []))
    return frames


def _load_error_row(spec: FileSpec, message: str) -> dict:
    return {
        "rank": spec.rank_hint,
        "kind": ErrorKind.LOAD_ERROR,
        "message": f"{spec.display}: {message}",
        "source": "load",
        "file": spec.display,
    }


def parse_file(
    spec: FileSpec, options: dict | None = None, on_bytes: Callable[[int], None] | None = None
) -> FileResult:
    """Parse one file. Never raises for bad content: problems go to ``FileResult.error``.

    A text reader that raises loses only what it added for that block (its lines stay unparsed)
    and the file's first such failure goes to ``FileResult.reader_failure``; with
    ``options["strict"]`` (or ``DENPEX_STRICT=1``) the exception propagates instead.
    """
    options = dict(options or {})
    ctx = FileContext(
        file=spec.display,
        rank_hint=spec.rank_hint,
        local_rank_hint=spec.local_rank_hint,
        year=options.get("year") or spec.year,
        options=dict(options, mtime=spec.mtime) if spec.mtime and not options.get("year") else options,
    )
    try:
        limits = resolve_limits(options)
    except ValueError as e:
        return failed_result(spec, f"bad cap: {e}")
    try:
        stream = open_stream(spec, limits)
    except MissingDependencyError as e:
        return failed_result(spec, str(e.problem))
    except (OSError, ValueError) as e:
        return failed_result(spec, _os_message(e))
    sink = UnparsedSink(int(options.get("unparsed_text_budget_per_file", 1 << 20)))
    try:
        try:
            head, stopped = read_fully(stream, HEAD_BYTES), None
        except ReadStopped as e:
            if not e.partial:
                return failed_result(spec, f"cannot read: {_os_message(e)}")
            head, stopped = e.partial, e
        forced_file, forced_text = _readers_for(options)
        file_reader = forced_file
        if file_reader is None and forced_text is None:
            name = spec.name
            file_reader = next((r for r in all_file_readers() if _safe_sniff(r, head, name)), None)
        if file_reader is not None:
            outcome = _parse_structured(file_reader, stream, head, stopped, ctx, sink, limits, spec, on_bytes)
        else:
            outcome = _parse_text(forced_text, stream, head, stopped, ctx, sink, limits, options, on_bytes)
    finally:
        _close(stream)
    if outcome.failed:
        return failed_result(spec, outcome.failed, fmt=outcome.format, size=outcome.bytes_read)
    return _result(spec, ctx, outcome)


def _parse_structured(
    reader: FileReader,
    stream,
    head: bytes,
    stopped: ReadStopped | None,
    ctx: FileContext,
    sink: UnparsedSink,
    limits: dict,
    spec: FileSpec,
    on_bytes,
) -> Outcome:
    """A dump or a structured file: read whole up to ``max_structured`` (a line-oriented one past
    the cap keeps its whole lines and counts the rest), then handed to ``reader.read``."""
    o = Outcome(format=reader.name, out=Output(), sink=sink)
    cap = limits["max_structured"]
    data = head
    if stopped is not None:
        o.error = f"read stopped early: {_os_message(stopped)}"
    else:
        try:
            data = head + read_fully(stream, max(0, cap + 1 - len(head)))
        except ReadStopped as e:
            data = head + e.partial
            o.error = f"read stopped early: {_os_message(e)}"
    skipped_lines = 0
    if len(data) > cap:
        if not reader.line_oriented:
            o.failed = (
                f"larger than the cap for files read whole ({human(cap)}): not read (raise it: "
                f"load(max_structured=...) or DENPEX_MAX_STRUCTURED)"
            )
            o.bytes_read = len(data)
            return o
        cut = data.rfind(b"\n", 0, cap) + 1
        skipped_lines, more_error = _count_lines(data[cut:], stream)
        data = data[:cut]
        o.error = (
            o.error
            or more_error
            or (
                f"stopped at the cap for files read whole ({human(cap)}): the {skipped_lines} line(s) after "
                f"it are counted, not read (raise it: load(max_structured=...) or DENPEX_MAX_STRUCTURED)"
            )
        )
    o.bytes_read = len(data)
    o.mentions = mentions_in(data)
    if on_bytes:
        on_bytes(spec.size or len(data))
    n_lines = 0
    try:
        n_lines = reader.read(data, ctx, o.out) or 0
    except UnsafePickleError as e:
        o.error, o.fatal, o.unsafe = f"refused: {e.problem}", True, True
    except DenpexError as e:
        o.error, o.fatal = e.problem, not (o.out.events or o.out.errors or o.out.frames)
    except Exception as e:  # noqa: BLE001 - a corrupt or truncated dump: this rank's dump is lost, others load
        o.error, o.fatal = f"corrupt {o.format} input: {type(e).__name__}: {e}", True
    if reader.line_oriented and (n_lines or skipped_lines):
        _unparsed_from_bytes(data, n_lines, o.out.parsed, sink)
        sink.add_run(n_lines + 1, skipped_lines)
        o.n_lines = n_lines + skipped_lines
    return o


def _parse_text(
    forced: list[TextReader] | None,
    stream,
    head: bytes,
    stopped: ReadStopped | None,
    ctx: FileContext,
    sink: UnparsedSink,
    limits: dict,
    options: dict,
    on_bytes,
) -> Outcome:
    """A log: candidate lines found by the scanner and handed to the text readers; the rest counted
    (or kept) as unparsed."""
    o = Outcome(format="text", out=Output(), sink=sink)
    if forced is None and looks_binary(head):
        o.failed, o.format, o.bytes_read = "binary file: not a text log or a Flight Recorder dump", "binary", len(head)
        return o
    readers = forced if forced is not None else all_text_readers()
    o.bytes_read = len(head)

    def count(n: int) -> None:
        o.bytes_read += n
        if on_bytes:
            on_bytes(n)

    if on_bytes:
        on_bytes(len(head))
    sc = scan_text(
        _Empty() if stopped is not None else stream,
        readers,
        ctx,
        o.out,
        sink,
        head=head,
        matcher=matcher_for(readers, signals=bool(options.get("signals", True))),
        on_bytes=count,
        chunk_size=int(options.get("chunk_size", 16 << 20)),
        line_cap=limits["line_cap"],
        at_eof=len(head) < HEAD_BYTES,  # read_fully stops short only at the end of the stream
    )
    o.n_lines = sc.lines_total
    o.rank_info = sc.rank_info
    o.mentions = sc.mentions
    if sc.signals is not None:
        batch = sc.signals.batch()
        if batch is not None:
            o.out.frames.setdefault("signals", []).append(batch)
        if sc.signals.dropped:
            o.notes.append(
                f"{ctx.file}: {sc.signals.dropped} more failure-signal lines past the first {sc.signals.cap} were counted, not kept"
            )
    o.reader_failure = sc.failure_note()
    o.overlong = sc.overlong_rows(ctx.file)
    if sc.overlong:
        o.notes.append(sc.overlong_note())
    read_error = stopped.cause if stopped is not None else sc.read_error
    if read_error is not None:
        o.error = f"read stopped early: {_os_message(read_error)}"
    return o


def _result(spec: FileSpec, ctx: FileContext, o: Outcome) -> FileResult:
    frames = _frames_from(o.out, ctx, o.sink, spec.display)
    if o.overlong:
        frames["unparsed"].append(o.overlong)
    if o.error:
        frames["errors"].append(rows_to_batch([_load_error_row(spec, o.error)]))
    n_unparsed = o.sink.count
    n_lines = max(o.n_lines, n_unparsed)  # the identity holds even for a reader that under-counts
    source = {
        "file": spec.display,
        "format": o.format,
        "rank_hint": spec.rank_hint,
        "bytes": spec.size or o.bytes_read,
        "lines_total": n_lines,
        "lines_parsed": n_lines - n_unparsed,
        "lines_unparsed": n_unparsed,
        "error": o.error,
    }
    return FileResult(
        file=spec.display,
        format=o.format,
        frames=frames,
        source=source,
        rank_info=o.rank_info,
        warnings=o.notes,
        error=o.error,
        fatal=o.fatal,
        unsafe=o.unsafe,
        pid_hint=spec.pid_hint,
        run_root=spec.run_root,
        reader_failure=o.reader_failure,
        mentions=sorted(o.mentions),
    )


def _close(stream) -> None:
    """Close a stream; a decompressor that complains only now has already said so on read."""
    try:
        stream.close()
    except (OSError, EOFError, ValueError):
        pass


class _Empty:
    """Stands in for a stream that already broke off."""

    def read(self, n=-1):
        return b""

    def close(self):
        pass


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
        except ReadStopped as e:
            block = e.partial
            error = f"read stopped early: {_os_message(e)}"
        if block:
            n += block.count(b"\n")
            last = block[-1:]
        if not block or error:
            break
    return n + (1 if last and last != b"\n" else 0), error


def _os_message(e: BaseException) -> str:
    if isinstance(e, ReadStopped):
        e = e.cause
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


def failed_result(spec: FileSpec, message: str, *, fmt: str = "unreadable", size: int = 0) -> FileResult:
    """The result of a file nothing could be read from: a ``load_error`` row and a ``sources`` row."""
    frames: dict[str, list] = {name: [] for name in ("events", "ranks", "progress", "unparsed")}
    frames["errors"] = [rows_to_batch([_load_error_row(spec, message)])]
    source = {
        "file": spec.display,
        "format": fmt,
        "rank_hint": spec.rank_hint,
        "bytes": spec.size or size,
        "lines_total": 0,
        "lines_parsed": 0,
        "lines_unparsed": 0,
        "error": message,
    }
    return FileResult(
        file=spec.display,
        format=fmt,
        frames=frames,
        source=source,
        error=message,
        fatal=True,
        pid_hint=spec.pid_hint,
        run_root=spec.run_root,
    )

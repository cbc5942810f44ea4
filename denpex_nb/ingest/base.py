"""The contract between the loader and the readers.

Two kinds of reader plug into :func:`denpex_nb.load`, registered by name like papermill's engines:

* :class:`TextReader` — for line-oriented logs. It declares ``needles``: literal byte strings one
  of which every line it can parse contains. The loader finds candidate lines with a fast
  multi-literal search (hyperscan when installed, ``bytes.find`` otherwise), groups consecutive
  candidates (plus their continuation lines) into *blocks*, strips rank prefixes and glog headers
  (:mod:`denpex_nb.ingest.prefixes`) and hands each block to every text reader. Lines that
  contain no needle never reach Python-level parsing: that is what makes a 1 GB log cheap.
* :class:`FileReader` — for whole files with a structure of their own (Flight Recorder pickles
  and JSON, the denpex_nb.trace JSONL). ``sniff`` looks at the first bytes and the name.

Readers append rows (dicts keyed by the column names in :data:`denpex_nb.incident.SCHEMAS`) to
an :class:`Output` and mark the physical lines they consumed. The loader turns everything else
into ``unparsed`` rows, so ``lines_total == lines_parsed + lines_unparsed`` for every file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar


@dataclass(slots=True)
class Line:
    """One logical log line after normalisation and prefix stripping.

    A physical line that held two ranks' output run together yields two ``Line`` objects with
    the same ``lineno``; a hard-wrapped line joined back together has ``n_lines > 1``.
    """

    lineno: int  # 1-based physical line number of the first physical line
    text: str  # the message: prefixes and glog header removed
    raw: str = ""  # the line before prefix stripping (ANSI, CR, collector wrappers and line numbers removed)
    n_lines: int = 1  # physical lines this logical line spans
    rank: int | None = None  # global rank, by the trust order in docs/formats.md#rank-trust
    local_rank: int | None = None  # torchrun [defaultN]: or the log-dir folder
    host: str | None = None  # pdsh / NCCL prefix host
    pid: int | None = None  # from the Python glog header or the NCCL prefix
    t_wall: datetime | None = None  # timezone-aware UTC when the header had a time
    severity: str | None = None  # glog letter (F E W I V D C) or NCCL level (INFO, WARN)
    origin: str | None = None  # emitting source file:line from the glog header
    prefixes: tuple[str, ...] = ()  # kinds of prefix stripped, outermost first ("rank", "torchrun" ...)

    @property
    def linenos(self) -> range:
        return range(self.lineno, self.lineno + self.n_lines)


@dataclass
class FileContext:
    """What a reader may know about the file a block came from."""

    file: str  # display path, as it goes in the ``file`` columns
    rank_hint: int | None = None  # rank from the file name (trace_3, rank3.log, NCCL_DEBUG_FILE map)
    local_rank_hint: int | None = None  # torchrun --log-dir folder number
    year: int | None = None  # for year-less glog timestamps (from mtime or an option)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Output:
    """Rows produced from one file. ``parsed`` holds the physical line numbers consumed."""

    events: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    ranks: list[dict] = field(default_factory=list)
    progress: list[dict] = field(default_factory=list)
    parsed: set[int] = field(default_factory=set)
    #: column-wise frames from bulk readers (FR dumps): name -> DataFrame, appended as is
    frames: dict[str, list] = field(default_factory=dict)

    def consume(self, line: Line) -> None:
        self.parsed.update(line.linenos)

    def mark(self) -> tuple[int, int, int, int]:
        """Row counts now, for :meth:`rollback` (the loader marks before each reader call)."""
        return len(self.events), len(self.errors), len(self.ranks), len(self.progress)

    def rollback(self, mark: tuple[int, int, int, int], linenos: Iterable[int], parsed_before: set[int]) -> None:
        """Drop the rows added since ``mark`` and un-consume the lines of ``linenos`` that were not
        parsed before (``parsed_before``): what a reader that raised half-way through a block left."""
        seen_err = self.__dict__.get("_error_keys")
        seen_ev = self.__dict__.get("_event_keys")
        if seen_err is not None:
            for row in self.errors[mark[1] :]:
                seen_err.discard((row.get("rank"), row.get("kind"), row.get("message")))
        if seen_ev is not None:
            from ._text import event_key

            for row in self.events[mark[0] :]:
                seen_ev.discard(event_key(row))
        del self.events[mark[0] :], self.errors[mark[1] :], self.ranks[mark[2] :], self.progress[mark[3] :]
        for n in linenos:
            if n not in parsed_before:
                self.parsed.discard(n)

    def extend(self, other: Output) -> None:
        self.events += other.events
        self.errors += other.errors
        self.ranks += other.ranks
        self.progress += other.progress
        self.parsed |= other.parsed
        for k, v in other.frames.items():
            self.frames.setdefault(k, []).extend(v)


class TextReader:
    """Base class for line readers. Subclasses set ``name`` and ``needles`` and implement ``parse``."""

    name: ClassVar[str] = ""
    #: literal byte strings; a line containing none of them is never offered to this reader
    needles: ClassVar[tuple[bytes, ...]] = ()
    #: True when what ``parse`` makes of a block depends only on the block's text, never on what the
    #: reader saw earlier in the file: the scanner may then skip a block whose bytes already yielded
    #: nothing in this file (the same warning every few hundred steps) instead of parsing it again
    blocks_alone: ClassVar[bool] = False

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        """Parse one block (consecutive candidate lines of one file, in file order).

        Append rows to ``out`` and call ``out.consume(line)`` for every line used. Odd input is
        not an error: leave the line unconsumed and it is kept as unparsed. Do not catch
        exceptions wholesale: when a reader raises, the loader drops what it added for this
        block, keeps the block's lines as unparsed and puts one note per file on the Incident
        (``load(strict=True)`` or ``DENPEX_STRICT=1`` re-raise instead), so a bug is seen.
        """
        raise NotImplementedError


class FileReader:
    """Base class for whole-file readers (binary or structured)."""

    name: ClassVar[str] = ""
    #: True when the format is line-oriented, so each line counts in the line accounting
    line_oriented: ClassVar[bool] = False

    def sniff(self, head: bytes, path: str) -> bool:
        """Cheap check on the first few KB and the file name."""
        raise NotImplementedError

    def read(self, data: bytes, ctx: FileContext, out: Output) -> int:
        """Parse the whole file's bytes into ``out``; return the number of lines (0 for binary)."""
        raise NotImplementedError


_TEXT_READERS: dict[str, TextReader] = {}
_FILE_READERS: dict[str, FileReader] = {}


def register_text_reader(reader: TextReader) -> TextReader:
    _TEXT_READERS[reader.name] = reader
    return reader


def register_file_reader(reader: FileReader) -> FileReader:
    _FILE_READERS[reader.name] = reader
    return reader


def text_readers(names: Iterable[str] | None = None) -> list[TextReader]:
    _ensure_builtin()
    return [r for n, r in _TEXT_READERS.items() if names is None or n in names]


def file_readers(names: Iterable[str] | None = None) -> list[FileReader]:
    _ensure_builtin(text=False)
    return [r for n, r in _FILE_READERS.items() if names is None or n in names]


_LOADED: set[str] = set()  # "files", "text": which built-in reader sets are imported


def _ensure_builtin(text: bool = True) -> None:
    """Import the built-in reader modules once; each registers itself on import. ``text=False``:
    the file readers only (a load of dumps never pays for the text readers' regular expressions,
    ~0.09 s of CPU). (Asked per file: the flag spares the import machinery's look-up, a few µs a
    call.)"""
    kind = "text" if text else "files"
    if kind not in _LOADED:
        if text:
            from . import _builtin  # noqa: F401
        else:
            from . import _builtin_files  # noqa: F401
        _LOADED.add(kind)

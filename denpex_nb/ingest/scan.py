"""Find the few lines worth parsing in a big text stream, fast, and account for every line.

Why this shape: in a 1 GB training log ~0.2 % of lines are distributed ones. Python-level work per
line would cost ~10 s/GB; instead we search large chunks of bytes for the readers' literal needles
(hyperscan when installed, ``bytes.find`` otherwise), count newlines with ``bytes.count`` and touch
individual lines only around the hits. Everything else is accounted for in bulk as ``unparsed``:
one row per line (with its text) while the load's text budget lasts, then one row per run of
consecutive lines, so memory grows with what is kept, not with the size of the file.

A *block* is a maximal run of consecutive candidate lines plus their continuation lines (see
:func:`is_continuation`); each block is decoded, turned into :class:`~denpex_nb.ingest.base.Line`
objects by :func:`denpex_nb.ingest.prefixes.to_lines` and offered to every text reader. A launcher
tag with nothing after it (``[1,2]<stdout>:``, ``(RayWorker pid=7) ``, a quoted ``>``) counts as
parsed when a reader consumed another line of its block (:func:`_consume_blank_tags`).

A line longer than the line cap (``line_cap``, default 1 MiB) is read in pieces: its first
``line_cap`` bytes are offered to the readers (or kept as unparsed text), the rest is skipped up
to its newline and only counted (``BlockScanner.overlong``: one ``unparsed`` row with ``n_lines`` 0
per such line, and a note), so memory stays at the chunk size plus the cap and the work linear.

A reader (or ``to_lines``) that raises loses only what it added for that block: its rows are
rolled back, the block's lines it had claimed go back to ``unparsed``, and the file's first
failure (reader, file:line, exception) becomes one note on the Incident. In strict mode
(``load(strict=True)`` or ``DENPEX_STRICT=1``) the exception propagates instead.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import BinaryIO

from .base import FileContext, Line, Output, TextReader

CHUNK_SIZE = 16 << 20  # bytes read per step; blocks never straddle two processed chunks
CARRY_CAP = 8 << 20  # a block that fills a whole buffer this large is processed as it is
MAX_BLOCK_LINES = 5000  # a runaway continuation run is cut here (keeps memory bounded)
DEFAULT_LINE_CAP = 1 << 20  # bytes of one line offered to the readers; the rest is counted, not kept
WRAP_WIDTHS = frozenset({80, 100, 120, 160, 200})

#: launcher and worker prefixes in front of a message (the bytes twin of prefixes._strip's outer
#: layers): ``[rank3]:`` / ``[default0]:`` / Open MPI ``[1,3]<stdout>:``, a colour code that lost its
#: escape byte (`` [36m``), a Ray / vLLM worker tag ``(VllmWorker rank=3 pid=406) ``, vLLM's logger
#: header ``ERROR 07-24 08:26:01 [file.py:226] `` (one space after ``]`` belongs to it) and a pdsh
#: node label ``node7: `` / ``10.0.0.5: `` (so an indented traceback line behind it continues its block)
PREFIX_RUN = re.compile(
    rb"^(?:\s*\[[^\]\n]{1,64}\](?:<std(?:out|err|diag)>:?|:)"
    rb"|\s?\[\d{1,3}(?:;\d{1,3})*m ?"
    rb"|\([\w.:-]+(?: [\w=]+)* pid=\d+(?:, ip=[^)\s]+)?\) ?"
    rb"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[?[\w.+-]+:\d+\] "
    # a pdsh node label (a host with a digit in it, or an IPv4 address: DeepSpeed's pdsh runner)
    rb"|(?:[A-Za-z][\w-]{0,62}\d[\w.-]{0,62}|\d{1,3}(?:\.\d{1,3}){3}): "
    rb")*"
)
#: collector wrappers in front of a whole line (the bytes twin of prefixes._peel_outer): grep -H
#: file name, docker-compose label, kubectl/docker RFC 3339 time, syslog/journald header, a launcher's
#: ``ctime`` stamp (``Fri Sep 25 16:52:53 2020[0]<stderr>:``)
OUTER_RUN = re.compile(
    rb"^(?:(?:>{1,2}(?: |$))+(?: (?=\[))?)?"
    rb"(?:[^\s:\[\]()]*?(?:\.(?:log|txt|out|err|stdout|stderr)(?:\.\d+)?|[/_.-](?:stdout|stderr))(?P<sep>[:-])(?:\d+(?P=sep))?)?"
    rb"(?:[A-Za-z0-9][\w.-]* +\| )?"
    rb"(?:\d{1,9}Z |\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d) (?:[\w.-]+ [\w./@-]+?\[\d+\]: )?"
    rb"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}\d{1,2} \d\d:\d\d:\d\d [\w.-]+ [\w./@-]+?(?:\[\d+\])?: "
    rb"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}\d{1,2} "
    rb"\d\d:\d\d:\d\d (?:[A-Z]{2,5} )?\d{4}(?:(?=\[)|: ?| (?=\S)))?"
)
ANSI_B = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: a Python warning's first line (``warnings.formatwarning``: ``file.py:12: UserWarning: message``); its
#: message may run over several unindented lines, up to the indented source line
_PY_WARNING = re.compile(rb"\.py:\d+: [A-Z]\w*Warning: ")
#: a carriage return that is not the first half of a CRLF: a line end of its own
_LONE_CR = re.compile(rb"\r(?!\n)")
_WARNING_BODY_MAX = 20


def peel(line: bytes) -> bytes:
    """``line`` without ANSI codes and collector wrappers."""
    if b"\x1b" in line:
        line = ANSI_B.sub(b"", line)
    m = OUTER_RUN.match(line)
    return line[m.end() :] if m and m.end() else line


_CONT_STARTS = (
    b"frame #",
    b"what():",
    b"Exception raised from",
    "│".encode(),
    "┃".encode(),
    "╰".encode(),
    "┗".encode(),
)  # Rich traceback box sides and bottom
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

#: bound by :func:`_late` on first use: modules that import this one (``hardwrap``, ``prefixes``), and
#: the failure signals (not needed by a load of dumps only)
hardwrap = APP_B = joins_b = classify = SignalSink = prefix_to_lines = None


def _late() -> None:
    """Bind the late imports once: an import statement inside a function costs ~1 µs a call, and
    the scan of one tiny file made a dozen (2,000 files: ~25 ms)."""
    global hardwrap, APP_B, joins_b, classify, SignalSink, prefix_to_lines
    from ..signals import SignalSink, classify
    from . import hardwrap
    from .hardwrap import joins_b
    from .prefixes import APP_B

    try:
        from .prefixes import to_lines as prefix_to_lines
    except ImportError:
        prefix_to_lines = _fallback_to_lines


# --- needle search -------------------------------------------------------------------------------


class NeedleMatcher:
    """Find the lines that contain any of a set of literal byte strings, and which strings.

    ``groups`` (optional) is one tuple of needles per reader; :meth:`line_hits` then also says, per
    line, which readers' needles it holds (a bitmask), so a block goes only to readers that have a
    line in it. Without groups every mask is "all readers".
    """

    def __init__(
        self,
        needles: Iterable[bytes],
        *,
        use_hyperscan: bool | None = None,
        groups: list[tuple[bytes, ...]] | None = None,
        single_match: bool = False,
        once_mask: int = 0,
    ):
        self.needles = sorted({bytes(n) for n in needles if n and b"\n" not in n})
        index = {n: i for i, n in enumerate(self.needles)}
        self.masks = [-1] * len(self.needles)  # needle -> reader bitmask (-1: everyone)
        if groups is not None:
            self.masks = [0] * len(self.needles)
            for g, group in enumerate(groups):
                for n in group:
                    if n in index:
                        self.masks[index[n]] |= 1 << g
        #: needles reported once per search (their first line only): those of the groups in ``once_mask``
        #: and of no other group (a needle that is also a reader's is reported everywhere)
        self.once = frozenset(i for i, m in enumerate(self.masks) if once_mask and m > 0 and not m & ~once_mask)
        self.watch_bits: dict[int, str] = {}  # group bit -> watched word (see for_readers)
        self.watch_mask = 0
        self._single_match = single_match
        #: databases without some once-reported needles, by the ids left out (see :meth:`_once_split`)
        self._without: dict[frozenset[int], object] = {}
        self._once_db = None  # the once-reported needles alone (made when first needed)
        self._db = None
        if use_hyperscan is not False and self.needles:
            try:
                self._db = self._compile(range(len(self.needles)))
            except Exception:  # not installed, or an old build without the literal API
                if use_hyperscan:
                    raise
                self._db = None

    def _compile(self, ids: Iterable[int]):
        """A hyperscan database of the needles ``ids`` (a match reports its needle's index)."""
        import hyperscan

        ids = list(ids)
        single = self._single_match
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(
            expressions=[self.needles[i] for i in ids],
            ids=ids,
            elements=len(ids),
            # single_match: each needle reported once per scan (:meth:`groups_in` needs no more)
            flags=[hyperscan.HS_FLAG_SINGLEMATCH if single or i in self.once else 0 for i in ids]
            if single or self.once
            else 0,
            literal=True,
        )
        return db

    @classmethod
    def for_readers(
        cls, readers, watch: dict[str, tuple[bytes, ...]] | None = None, *, signals: bool = False, **kw
    ) -> NeedleMatcher:
        """One group per reader, then one per ``watch`` entry (words noticed, not parsed: see
        :meth:`BlockScanner.mentions`); :attr:`watch_bits` maps those groups' bits to their names.
        With ``signals``, the failure signals' needles (:data:`denpex_nb.signals.NEEDLES`) are one
        more group after them, whose bit is :attr:`signal_bit`, and the progress needles
        (:data:`denpex_nb.signals.PROGRESS_NEEDLES`) one more, :attr:`progress_bit`: each of those is
        reported once per search (ordinary training output holds them on every line)."""
        groups = [tuple(r.needles) for r in readers]
        names = list(watch or {})
        groups += [tuple(watch[k]) for k in names]
        progress_bit = 0
        if signals:
            from ..signals import NEEDLES, PROGRESS_NEEDLES

            groups.append(NEEDLES)
            groups.append(PROGRESS_NEEDLES)
            progress_bit = 1 << (len(groups) - 1)
        m = cls((n for g in groups for n in g), groups=groups, once_mask=progress_bit, **kw)
        m.watch_bits = {1 << (len(readers) + i): name for i, name in enumerate(names)}
        m.watch_mask = sum(m.watch_bits)
        m.signal_bit = 1 << (len(readers) + len(names)) if signals else 0
        m.progress_bit = progress_bit
        return m

    def masks_array(self):
        """:attr:`masks` as a numpy int64 array (made once)."""
        arr = getattr(self, "_masks_np", None)
        if arr is None:
            import numpy as np

            arr = self._masks_np = np.array(self.masks, dtype=np.int64)
        return arr

    @property
    def engine(self) -> str:
        return "hyperscan" if self._db is not None else "bytes.find"

    def groups_in(self, buf) -> int:
        """The OR of the masks of the needles that occur anywhere in ``buf`` (no line work): one
        hyperscan pass, stopped as soon as every group is found, else ``in`` per needle."""
        found = 0
        every = 0
        for m in self.masks:
            every |= m
        if self._db is not None:
            masks_of = self.masks

            def on_match(nid, _frm, _to, _flags, _ctx):
                nonlocal found
                found |= masks_of[nid]
                return found == every  # True stops the scan

            try:
                self._db.scan(buf, match_event_handler=on_match)
            except Exception as e:  # hyperscan.ScanTerminated: on_match stopped it, all found
                if type(e).__name__ != "ScanTerminated":
                    raise
            return found
        for nid, needle in enumerate(self.needles):
            if not self.masks[nid] & ~found:
                continue
            if needle in buf:
                found |= self.masks[nid]
        return found

    def line_starts(self, buf: bytes) -> list[int]:
        """Sorted, unique start offsets of the lines of ``buf`` that contain a needle."""
        return self.line_hits(buf)[0]

    def line_hits(
        self, buf: bytes | bytearray, end: int | None = None, newlines: Newlines | None = None, *, arrays=False
    ) -> tuple[list[int], list[int]]:
        """(sorted line start offsets, reader bitmask per line) of the lines holding a needle, in
        ``buf[:end]`` (without copying it; ``end`` defaults to the whole buffer). With ``newlines``
        (of the same bytes), many matches are put on their lines in bulk (numpy) instead of one by one;
        with ``arrays`` too, those come back as numpy arrays (int64), not lists."""
        if not self.needles:
            return [], []
        n = len(buf) if end is None else end
        masks_of = self.masks
        starts: list[int] = []
        masks: list[int] = []
        if self._db is not None:
            k = len(self.needles)
            hits: list[int] = []
            app = hits.append

            def on_match(nid, _frm, to, _flags, _ctx):
                app(to * k + nid)  # one int per match: sorts by end offset, keeps the needle

            db = self._once_split(buf, n, on_match) if self.once and n >= _ONCE_SPLIT_MIN else self._db
            db.scan(buf if n == len(buf) else memoryview(buf)[:n], match_event_handler=on_match)
            if newlines is not None and len(hits) >= _BULK_HITS:
                nl = newlines.index()
                if nl is not None:
                    starts_a, masks_a = _lines_of(hits, k, nl, self.masks_array())
                    return (starts_a, masks_a) if arrays else (starts_a.tolist(), masks_a.tolist())
            hits.sort()
            line_end = -1
            rfind, find = buf.rfind, buf.find
            for v in hits:
                p, nid = divmod(v, k)
                if p <= line_end:
                    masks[-1] |= masks_of[nid]
                    continue
                s = rfind(b"\n", 0, p - 1) + 1
                line_end = find(b"\n", p - 1, n)
                if line_end < 0:
                    line_end = n
                starts.append(s)
                masks.append(masks_of[nid])
            return starts, masks
        found: dict[int, int] = {}
        find, rfind = buf.find, buf.rfind
        once = self.once
        for nid, needle in enumerate(self.needles):
            m = masks_of[nid]
            pos = find(needle, 0, n)
            while pos >= 0:
                s = rfind(b"\n", 0, pos) + 1
                found[s] = found.get(s, 0) | m
                e = find(b"\n", pos, n)
                if e < 0 or nid in once:
                    break
                pos = find(needle, e, n)
        starts = sorted(found)
        return starts, [found[s] for s in starts]

    def _once_split(self, buf, n: int, on_match):
        """The database to search ``buf[:n]`` with, the once-reported needles (:attr:`once`) found in
        its first :data:`_ONCE_WINDOW` bytes already reported to ``on_match`` and left out of it.

        Why: hyperscan still finds every occurrence of a needle it reports once (and drops it), and
        training output holds ``loss`` / ``grad_norm`` / ``tokens/s`` on every line: the scan of such
        output cost ~1.5x that of the other needles alone. A needle's first occurrence in the window
        is its first in the whole search, so the matches reported are the same. The databases without
        the needles found are compiled once per set found (at most :data:`_ONCE_VARIANTS`; past that,
        or when none is found, the whole database, nothing reported here)."""
        early: list[tuple[int, int]] = []
        if self._once_db is None:
            self._once_db = self._compile(sorted(self.once))
        self._once_db.scan(
            memoryview(buf)[: min(n, _ONCE_WINDOW)],
            match_event_handler=lambda nid, _frm, to, _flags, _ctx: early.append((nid, to)),
        )
        if not early:
            return self._db
        key = frozenset(nid for nid, _ in early)
        db = self._without.get(key)
        if db is None:
            if len(self._without) >= _ONCE_VARIANTS:
                return self._db
            db = self._without[key] = self._compile(i for i in range(len(self.needles)) if i not in key)
        for nid, to in early:
            on_match(nid, 0, to, 0, None)
        return db


#: from this many needle matches in a chunk on, they are put on their lines in bulk (numpy)
_BULK_HITS = 256
#: the bytes at a search's start where the once-reported needles are looked for first, and the size
#: of search from which that is done (see :meth:`NeedleMatcher._once_split`), and how many databases
#: without some of them a matcher compiles at most (~20 ms each)
_ONCE_WINDOW = 64 << 10
_ONCE_SPLIT_MIN = 256 << 10
_ONCE_VARIANTS = 8


class Newlines:
    """The offsets of the newlines of ``buf[:n]``, found once (numpy) when first asked for, so that
    many needle matches are put on their lines, gaps counted and line ends found by binary search
    instead of one Python call each. None (not made) when the lines are so short that the index
    would cost more memory than a fraction of the chunk (a run of empty lines)."""

    def __init__(self, buf: bytes | bytearray, n: int):
        self.buf, self.n = buf, n
        self._nl = None
        self._done = False

    def index(self):
        if not self._done:
            import numpy as np

            self._done = True
            is_nl = np.frombuffer(self.buf, np.uint8, count=self.n) == 10
            if np.count_nonzero(is_nl) <= self.n // 32:  # 8 bytes an offset: at most 1/4 of the chunk
                self._nl = np.flatnonzero(is_nl)
        return self._nl

    @property
    def known(self):
        """The index when it was made, else None (never makes it)."""
        return self._nl


def _lines_of(hits: list[int], k: int, nl, masks_of):
    """:meth:`NeedleMatcher.line_hits` in bulk: ``hits`` (``end * k + needle``) on their lines, by
    binary search in the newline offsets ``nl``; the masks of one line's needles OR-ed together."""
    import numpy as np

    v = np.array(hits, dtype=np.int64)
    v.sort()
    p, nid = np.divmod(v, k)
    li = np.searchsorted(nl, p - 1)  # the line holding the match's last byte (no needle holds a newline)
    first = np.flatnonzero(np.r_[True, li[1:] != li[:-1]])
    masks = np.bitwise_or.reduceat(masks_of[nid], first)
    lines = li[first]
    starts = np.where(lines > 0, nl[np.maximum(lines - 1, 0)] + 1, 0)
    return starts, masks


#: per thread: compiled matchers by reader needles, and the scan buffer (see :func:`matcher_for`)
_LOCAL = threading.local()
#: a scan buffer larger than this is not kept for the next file
_KEEP_BUFFER_MAX = 64 << 20


def watched() -> dict[str, tuple[bytes, ...]]:
    """:data:`denpex_nb.vocab.MENTIONS` as byte needles (encoded once: asked for every file)."""
    return dict(_watched_items())


@functools.lru_cache(maxsize=1)
def _watched_items() -> tuple[tuple[str, tuple[bytes, ...]], ...]:
    from ..vocab import MENTIONS

    return tuple((name, tuple(w.encode() for w in words)) for name, words in MENTIONS.items())


def mentions_in(data) -> set[str]:
    """The watched words (:func:`watched`) that occur anywhere in ``data``: a file read whole (a
    Flight Recorder dump) is searched once for all of them, by a hyperscan database compiled once
    per thread (``in`` per word without hyperscan: ~0.2 s a word over 1024 dumps of 0.37 MB)."""
    watch = watched()
    m = getattr(_LOCAL, "mentions_matcher", None)
    if m is None or m[0] != watch:
        names = list(watch)
        # single_match: a word a dump repeats (one per entry) must not call back into Python each time
        matcher = NeedleMatcher(
            (w for ws in watch.values() for w in ws), groups=[watch[k] for k in names], single_match=True
        )
        m = _LOCAL.mentions_matcher = (watch, names, matcher)
    _, names, matcher = m
    found = matcher.groups_in(data)
    return {name for i, name in enumerate(names) if found >> i & 1}


def matcher_for(readers: list[TextReader], *, signals: bool = False) -> NeedleMatcher:
    """The :class:`NeedleMatcher` of ``readers``, compiled once per thread and reused for every file.

    Why: compiling the hyperscan database costs ~2 ms, more than scanning a small file; a folder of
    2,000 per-rank logs compiled it 2,000 times. Per thread, because a hyperscan database's scratch
    space may not be shared by two scans at once (Dask workers run tasks in threads)."""
    # per file, the same reader objects with the same needle tuples come back: known by identity
    # (the entry holds the readers and their needles, so neither id can be reused meanwhile)
    last = getattr(_LOCAL, "last_matcher", None)
    if (
        last is not None
        and last[0] == signals
        and len(last[1]) == len(readers)
        and all(a is b and n is b.needles for a, n, b in zip(last[1], last[2], readers))
    ):
        return last[3]
    watch = watched()
    key = (tuple(tuple(r.needles) for r in readers), tuple(watch.items()), signals)
    cache = getattr(_LOCAL, "matchers", None)
    if cache is None:
        cache = _LOCAL.matchers = {}
    m = cache.get(key)
    if m is None:
        if len(cache) >= 8:  # forced formats make other sets; a handful is all a process sees
            cache.clear()
        m = cache[key] = NeedleMatcher.for_readers(readers, watch=watch, signals=signals)
    _LOCAL.last_matcher = (signals, tuple(readers), tuple(r.needles for r in readers), m)
    return m


def _scan_buffer(size: int) -> bytearray:
    """A buffer of at least ``size`` bytes, reused by the files this thread scans one after the
    other: a fresh 16 MiB buffer per file (allocated and zeroed) cost more than reading a small
    file. Its bytes past what a scan fills are stale, which the scanner never reads (every search
    in it is bounded by the processed end, and that ends with a newline)."""
    buf = getattr(_LOCAL, "buffer", None)
    if buf is not None and len(buf) >= size:
        _LOCAL.buffer = None  # taken: a nested scan in this thread gets its own
        return buf
    return bytearray(size + size // 8)


def _give_back(buf: bytearray) -> None:
    if 0 < len(buf) <= _KEEP_BUFFER_MAX:
        _LOCAL.buffer = buf


# --- continuation lines --------------------------------------------------------------------------


#: a Python frame header that lost its indentation (a traceback quoted in markdown, pasted flat): the
#: line after it is its source line, which has no indentation left to say so either
_FLAT_FRAME_B = re.compile(rb'File "[^"\n]{1,500}", line \d{1,7}, in \S')


def _after_flat_frame(prev: bytes) -> bool:
    """Is ``prev`` (peeled) an unindented frame header, so that the line after it belongs to its traceback?"""
    return _FLAT_FRAME_B.match(prev, PREFIX_RUN.match(prev).end()) is not None


def _balance_open(line: bytes) -> bool:
    return line.count(b"(") > line.count(b")") or line.count(b"[") > line.count(b"]")


def is_continuation(prev: bytes, line: bytes) -> bool:
    """Does ``line`` continue the block line ``prev`` (both without the newline)?

    True when, after optional prefixes (``[...]:``, Open MPI ``[1,3]<stdout>:``, a Ray / vLLM
    worker tag, vLLM's logger header, a colour code that lost its escape byte), it starts with
    whitespace, is empty (a tag with nothing after it), or is a ``frame #``, ``what():``,
    ``Exception raised from`` or Rich traceback-box line; or when ``prev`` has a common hard-wrap
    width (80, 100, 120, 160, 200) or left ``(``/``[`` open. ANSI codes and collector wrappers
    (markdown quote, kubectl/docker time or its cut tail, compose label, syslog header, ``grep -H``
    name) are ignored on both lines, widths included, so a wrapped log reads like the plain one.

    (The block grower adds one rule of its own: a Python warning's first line ``x.py:12:
    UserWarning: ...`` lets up to 20 unindented message lines follow, until its indented source
    line.)
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line:
        return False
    line = peel(line)
    cut = PREFIX_RUN.match(line).end()
    rest = line[cut:]
    if rest[:1] in (b" ", b"\t"):
        return rest.strip() != b"" or cut > 0
    if not rest:
        return cut > 0  # a launcher tag with nothing after it (``[1,2]<stdout>:``): a blank line of the block
    if rest.startswith(_CONT_STARTS):
        return True
    if prev.endswith(b"\r"):
        prev = prev[:-1]
    prev = peel(prev)
    return len(prev) in WRAP_WIDTHS or _balance_open(prev) or _after_flat_frame(prev)


def _continues(prev: bytes, line: bytes, app_b: re.Pattern) -> bool:
    """``is_continuation(prev, line) or prefixes.continues_b(prev, line)`` (the block grower's test),
    peeling ``line`` once (``app_b`` is :data:`denpex_nb.ingest.prefixes.APP_B`)."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line:
        return False
    s = peel(line)
    cut = PREFIX_RUN.match(s).end()
    rest = s[cut:]
    c = rest[:1]
    if c in (b" ", b"\t"):
        return rest.strip() != b"" or cut > 0
    if not rest:
        return cut > 0  # a launcher tag with nothing after it (``[1,2]<stdout>:``): a blank line of the block
    if rest.startswith(_CONT_STARTS):
        return True
    p = prev[:-1] if prev.endswith(b"\r") else prev
    p = peel(p)
    if len(p) in WRAP_WIDTHS or _balance_open(p) or _after_flat_frame(p):
        return True
    # an application logger's header in the prefix chain: what follows it decides (continues_b)
    m = app_b.match(s, cut) if c in (b"[", b"0", b"1", b"2") else None
    if m is None:
        return False
    after = s[m.end() :]
    return is_continuation(prev, after) if after else True


def _warning_opens(buf: bytes, s: int, e: int) -> int:
    """How many unindented message lines may follow the line ``buf[s:e]``: a Python warning's first
    line opens up to ``_WARNING_BODY_MAX`` of them, any other line none."""
    pos = buf.find(b"Warning: ", s, e)
    return _WARNING_BODY_MAX if pos >= 0 and _PY_WARNING.search(buf, s, e) else 0


def _warning_next(buf: bytes, s: int, left: int) -> int:
    """Lines an open warning message may still take after the line at ``s``: none once its
    indented source line came, else one fewer."""
    if not left or buf[s : s + 1] in (b" ", b"\t"):
        return 0
    return left - 1


def _warning_body(line: bytes) -> bool:
    """Can ``line`` be a line of a multi-line warning message (not blank, not a new record)?"""
    line = line.rstrip(b"\r")
    return (
        bool(line.strip())
        and not line.startswith((b"Traceback", b"[", b"During handling"))
        and _PY_WARNING.search(line) is None
    )


# --- unparsed rows -------------------------------------------------------------------------------


#: what one kept unparsed line costs on top of its characters (its str object and its slots in the
#: three column lists, in bytes): a file of empty lines must use up the budget too
ROW_COST = 64


class UnparsedSink:
    """Collect ``unparsed`` rows column-wise: texts while the budget lasts, then collapsed runs.

    The budget is in bytes of memory, roughly: a kept line costs its characters plus
    :data:`ROW_COST`. So the rows kept are bounded by the budget whatever the lines hold (200 MB of
    empty lines keep ``budget / 64`` rows, then one counted run), never one object per line read.
    """

    def __init__(self, budget_chars: int):
        self.budget = budget_chars
        self.line: list[int] = []
        self.n_lines: list[int] = []
        self.text: list[str | None] = []
        self.count = 0

    def add_text(self, lineno: int, text: str) -> None:
        self.count += 1
        cost = len(text) + ROW_COST
        if self.budget >= cost:
            self.budget -= cost
            self.line.append(lineno)
            self.n_lines.append(1)
            self.text.append(text)
        else:
            self.budget = -1
            self.add_run(lineno, 1, counted=True)

    def add_run(self, lineno: int, n: int, *, counted: bool = False) -> None:
        if n <= 0:
            return
        if not counted:
            self.count += n
        if self.text and self.text[-1] is None and self.line[-1] + self.n_lines[-1] == lineno:
            self.n_lines[-1] += n
        else:
            self.line.append(lineno)
            self.n_lines.append(n)
            self.text.append(None)

    def add_region(self, buf: bytes, start: int, end: int, lineno: int, n: int) -> None:
        """``n`` whole lines ``buf[start:end]`` starting at ``lineno`` (``end`` after the last newline).

        Bulk work only (decode, split, accumulate): this runs over most of a big log's bytes.
        """
        if n <= 0:
            return
        if self.budget <= 0:
            self.add_run(lineno, n)
            return
        # decode only as much as the budget can still hold (a char is at most 4 bytes)
        cap = min(end, start + 4 * self.budget + 4)
        if cap < end:
            cap = buf.rfind(b"\n", start, cap) + 1
        if cap <= start:
            self.add_run(lineno, n)
            self.budget = -1
            return
        chunk = buf[start:cap]
        # no more lines than the budget can hold (each costs ROW_COST at least): the rest of the
        # region stays one string, dropped at once, so a run of empty lines makes no object per line
        most = self.budget // ROW_COST + 1
        texts = chunk.decode("utf-8", "replace").split("\n", most)
        if len(texts) > most:
            texts.pop()  # the lines past what the budget can hold, as one string
            cap = -1  # not every line of the region is in ``texts``
        else:
            texts.pop()  # the split after the final newline
        if b"\r" in chunk:
            texts = [t[:-1] if t.endswith("\r") else t for t in texts]
        lengths = list(accumulate(map(len, texts)))
        # lines that fit in what is left of the budget (the first k cost their characters + k rows)
        k = bisect_right(range(len(texts)), self.budget, key=lambda i: lengths[i] + ROW_COST * (i + 1))
        if k:
            self.budget -= lengths[k - 1] + ROW_COST * k
            self.line.extend(range(lineno, lineno + k))
            self.n_lines.extend([1] * k)
            self.text.extend(texts[:k] if k < len(texts) else texts)
            self.count += k
        if k < len(texts) or cap < end:
            self.budget = -1
            self.add_run(lineno + k, n - k)

    def columns(self, file: str) -> dict[str, list]:
        return {"file": [file] * len(self.line), "line": self.line, "n_lines": self.n_lines, "text": self.text}


# --- blocks --------------------------------------------------------------------------------------


def _fallback_to_lines(physical: list[tuple[int, str]], ctx: FileContext) -> list[Line]:
    """Used only while :mod:`prefixes` is missing: no prefix stripping beyond ANSI codes."""
    return [
        Line(lineno=n, text=_ANSI.sub("", t), raw=_ANSI.sub("", t), rank=ctx.rank_hint, local_rank=ctx.local_rank_hint)
        for n, t in physical
    ]


def resolve_to_lines() -> Callable[[list[tuple[int, str]], FileContext], list[Line]]:
    if prefix_to_lines is None:
        _late()
    return prefix_to_lines


class BlockScanner:
    """Scan one text stream; feed blocks to readers; produce accounting and unparsed rows."""

    def __init__(
        self,
        readers: list[TextReader],
        matcher: NeedleMatcher,
        ctx: FileContext,
        out: Output,
        sink: UnparsedSink,
        *,
        to_lines=None,
        on_bytes: Callable[[int], None] | None = None,
        chunk_size: int = CHUNK_SIZE,
        line_cap: int = DEFAULT_LINE_CAP,
    ):
        self.readers = readers
        self.matcher = matcher
        self.ctx = ctx
        self.out = out
        self.sink = sink
        if prefix_to_lines is None:
            _late()
        self.to_lines = to_lines or prefix_to_lines
        self.on_bytes = on_bytes
        self.chunk_size = chunk_size
        self.lines_total = 0
        self.reader_failures: list[str] = []  # "reader 'x' failed at file:line: Type: message"
        self.n_failures = 0
        self.strict = strict_mode(ctx.options)
        self.rank_info: dict[int, dict] = {}
        self.read_error: BaseException | None = None  # the stream broke off; lines before it are kept
        self.line_cap = max(1, int(line_cap))
        #: (line number, bytes past the cap not read) per line longer than ``line_cap``
        self.overlong: list[tuple[int, int]] = []
        self._cr_pending = False  # the last read ended in a CR (made a newline): skip an LF next
        #: blocks (reader mask, bytes) that yielded nothing in this file, for readers whose blocks
        #: stand alone (``TextReader.blocks_alone``): a repeat is accounted as unparsed at once
        self._fruitless: set[tuple[int, bytes]] = set()
        self._alone_mask = sum(1 << b for b, r in enumerate(readers) if getattr(r, "blocks_alone", False))
        #: names of the watched words (``NeedleMatcher.for_readers(watch=...)``) found in any line
        self.mentions: set[str] = set()
        #: the failure signals (:mod:`denpex_nb.signals`): their needles are the matcher's last group
        #: when it has one (``NeedleMatcher.for_readers(..., signals=True)``)
        self.sig_bit = getattr(matcher, "signal_bit", 0)
        #: training progress (:data:`denpex_nb.signals.PROGRESS`): its needles are reported once per chunk
        self.prog_bit = getattr(matcher, "progress_bit", 0)
        self.signals = None
        if self.sig_bit:
            self.signals = SignalSink(ctx.file)

    # The stream is processed in chunks that end at a newline. When the last block of a chunk
    # reaches its end, it may continue in the next chunk: those bytes are carried over and
    # processed again with the next chunk, so a block never straddles two processed chunks.
    # A line longer than ``line_cap`` keeps only its first ``line_cap`` bytes (they wait at the end
    # of the carry); the rest is skipped up to its newline and only counted (``overlong``), so a
    # 100 MB line costs one pass and ``line_cap`` bytes of memory.
    def run(self, stream: BinaryIO, head: bytes = b"", at_eof: bool = False) -> None:
        """Scan ``stream``, whose first bytes ``head`` were read already (``at_eof``: they are all of
        it, so it is never read again and a small file is processed in one step)."""
        # One buffer serves the whole stream: the carry at its front, the next chunk read into it
        # right after (``readinto`` for plain files), processed up to ``end`` without slicing. A 1 GB
        # file so costs no copy of its bytes and no fresh memory per chunk.
        cap = self.line_cap
        carry = b""  # bytes in front of the next read (copied out of ``buf``)
        pending = head
        lineno = 1  # number of the first line in ``carry``
        eof = False
        skipping = False  # inside an overlong line whose kept head ends ``carry``
        skipped = 0
        long_line = 0
        buf = bytearray()
        exhausted = False  # nothing more to read: the head was the whole stream
        try:
            while not eof:
                k = len(carry)
                need = k + (len(pending) if pending else self.chunk_size) + 1  # + 1: a last newline at EOF
                if len(buf) < need:
                    buf = _scan_buffer(need)
                if k:
                    buf[:k] = carry
                if pending:
                    n = len(pending)
                    buf[k : k + n] = pending
                    pending = b""
                    exhausted = at_eof
                elif self.read_error is not None or exhausted:
                    n = 0
                else:
                    n = self._fill(stream, buf, k, self.chunk_size)
                    if self.on_bytes and n:
                        self.on_bytes(n)
                blen = k + n  # ``buf[:blen]`` is carry + the new data
                if n or self._cr_pending:
                    blen = self._lone_cr(buf, k, blen)
                    if n and blen == k:
                        continue  # the read was only the LF of a CRLF split across reads
                if skipping:
                    if n:
                        nl = buf.find(b"\n", k, blen)
                        if nl < 0:
                            skipped += n
                            continue
                        skipped += nl - k
                        if nl > k:  # drop the skipped bytes: the data resumes at the newline
                            buf[k : blen - (nl - k)] = buf[nl:blen]
                            blen -= nl - k
                    self.overlong.append((long_line, skipped))
                    skipping = False
                if blen == k or (exhausted and blen - buf.rfind(b"\n", 0, blen) - 1 <= cap):
                    # the end of the stream: no more data, or the head was all of it (and its last
                    # line, if unfinished, is within the cap)
                    eof = True
                    if not blen:
                        break
                    if buf[blen - 1] != 10:
                        buf[blen] = 10  # a truncated last line still counts
                        blen += 1
                    end, carry = blen, b""
                else:
                    cut = buf.rfind(b"\n", 0, blen) + 1
                    if blen - cut > cap:  # the unfinished last line is past the cap already
                        long_line = lineno + buf.count(b"\n", 0, cut)
                        skipped = blen - cut - cap
                        kept = bytes(buf[cut : cut + cap])
                        skipping = True
                        if cut == 0:
                            carry = kept
                            continue
                        end, carry = cut, kept
                    elif cut == 0:
                        carry = bytes(buf[:blen])
                        continue
                    else:
                        end, carry = cut, bytes(buf[cut:blen])
                done_upto, lineno = self._process(buf, lineno, final=eof, end=end)
                if done_upto < end:
                    carry = bytes(buf[done_upto:end]) + carry
        finally:
            _give_back(buf)
        # in line order: a line cut while streaming is recorded when its end is read, one cut inside
        # a buffer when the buffer is processed (which came first depended on the chunk size)
        self.overlong.sort()

    def _lone_cr(self, buf: bytearray, k: int, blen: int) -> int:
        """Lone carriage returns in the new data ``buf[k:blen]`` become newlines, in place (a log
        written with ``\\r`` line ends, or a progress bar's redraws, reads as lines, as CRLF does);
        a CR that ended the previous read and the LF that starts this one are one CRLF line end.
        Returns the new end (one less when that LF was dropped)."""
        if self._cr_pending:
            self._cr_pending = False
            if blen > k and buf[k] == 10:
                buf[k : blen - 1] = buf[k + 1 : blen]
                blen -= 1
        if blen == k:
            return blen
        if buf.find(b"\r", k, blen) < 0:  # (a search stops at no CR: one fast pass, where count is slow)
            return blen
        n_cr = buf.count(b"\r", k, blen)
        if not n_cr or (n_cr == buf.count(b"\r\n", k, blen) and buf[blen - 1] != 13):
            return blen  # none, or only CRLF pairs
        self._cr_pending = buf[blen - 1] == 13  # its LF, if any, comes with the next read
        buf[k:blen] = _LONE_CR.sub(b"\n", bytes(buf[k:blen]))  # one byte for one: same length
        return blen

    def _fill(self, stream: BinaryIO, buf: bytearray, k: int, size: int) -> int:
        """Read up to ``size`` bytes of ``stream`` into ``buf[k:]`` (looping over short reads); the
        number read. A read error keeps the bytes before it and goes to ``read_error``."""
        if type(stream) not in (io.FileIO, io.BytesIO):
            from .sources import ReadStopped, read_fully

            try:
                data = read_fully(stream, size)
            except ReadStopped as e:  # truncated/corrupt stream: keep what came
                self.read_error = e.cause
                data = e.partial
            buf[k : k + len(data)] = data
            return len(data)
        got = 0
        mv = memoryview(buf)
        try:
            while got < size:
                r = stream.readinto(mv[k + got : k + size])
                if not r:
                    break
                got += r
        except Exception as e:  # an I/O error mid-file: keep what came
            self.read_error = e
        return got

    def _cap_lines(self, raw: bytes, ln: int) -> bytes:
        """``raw`` (whole lines from line ``ln``) with each line cut to ``line_cap`` bytes; what is
        cut is recorded in ``overlong``."""
        cap = self.line_cap
        parts = raw.split(b"\n")
        for k, part in enumerate(parts):
            if len(part) > cap:
                self.overlong.append((ln + k, len(part) - cap))
                parts[k] = part[:cap]
        return b"\n".join(parts)

    def _process(self, buf: bytes | bytearray, lineno: int, *, final: bool, end: int | None = None) -> tuple[int, int]:
        """Process whole lines of ``buf[:end]`` (which ends with a newline; ``end`` defaults to the
        whole buffer) starting at line ``lineno``.

        Returns (bytes processed, line number of the next unprocessed line). Stops before a last
        block that touches ``end`` unless ``final`` or the block starts at offset 0.
        A hard-wrapped file (:mod:`denpex_nb.ingest.hardwrap`, width decided once from the file's
        first bytes) is searched unwrapped, its tails join blocks and no logical line is cut.
        """
        n_buf = len(buf) if end is None else end
        if "wrap_width" not in self.ctx.options:
            if n_buf < hardwrap.WRAP_SAMPLE and not final:
                return 0, lineno  # the width is decided on the same bytes for any chunk size
            with memoryview(buf) as view:  # the sample copied once (a slice of the buffer, then bytes, was two)
                sample = bytes(view[: buf.rfind(b"\n", 0, min(hardwrap.WRAP_SAMPLE, n_buf)) + 1])
            self.ctx = dataclasses.replace(
                self.ctx, options={**self.ctx.options, "wrap_width": hardwrap.detect_width(sample)}
            )
            del sample
        wrap = self.ctx.options["wrap_width"]
        if wrap and not final:
            cut = hardwrap.safe_end(buf, wrap, n_buf)
            if cut == 0 and n_buf < CARRY_CAP:
                return 0, lineno
            n_buf = cut if cut else n_buf
        newlines = Newlines(buf, n_buf)
        starts, masks = (
            hardwrap.line_hits(self.matcher, buf, wrap, n_buf)
            if wrap
            else self.matcher.line_hits(buf, n_buf, newlines=newlines, arrays=True)
        )
        sig_at: list[int] = []  # lines holding a signal needle (reader lines among them too)
        prog_at: list[int] = []  # the first line of each progress needle in these bytes
        if not isinstance(starts, list):  # many hits, in numpy arrays: mentions and signals split in bulk
            starts, masks, sig_at, prog_at = self._split_arrays(starts, masks)
        else:
            if self.matcher.watch_mask:
                starts, masks = self._take_mentions(starts, masks)
            if self.prog_bit:
                starts, masks, prog_at = _split_signal_hits(starts, masks, self.prog_bit)
            if self.sig_bit:
                starts, masks, sig_at = _split_signal_hits(starts, masks, self.sig_bit)
        count = _newline_counter(buf, n_buf, newlines.known)
        self._sig_at, self._sig_k = sig_at, 0
        # the signal lines a gap may hold that signal at all (the rest are skipped there unread)
        self._sig_hot, self._hot_k = (sig_at if wrap else _signalling(buf, sig_at, n_buf, self.line_cap, newlines)), 0

        def grows(prev_s: int, be: int, nxt_end: int) -> bool:
            """Does the line ``buf[be:nxt_end]`` continue the block whose last line starts at ``prev_s``?"""
            prev = buf[prev_s : be - 1]
            if wrap:
                return hardwrap.joins_b(prev, buf[be : nxt_end - 1], wrap) or _continues(
                    prev, hardwrap.logical_start(buf, be, wrap, stop=n_buf), APP_B
                )
            return _continues(prev, buf[be : nxt_end - 1], APP_B)

        find = buf.find
        pos = 0  # first unprocessed byte (always a line start)
        ln = lineno  # its line number
        i = 0
        while i < len(starts):
            bs = starts[i]
            if bs < pos:
                i += 1
                continue
            # the gap before the block: whole lines, accounted in bulk
            if sig_at:
                self._gap_signals(buf, pos, bs, ln, count, wrap, n_buf)
            gap_lines = count(b"\n", pos, bs)
            self._region(buf, pos, bs, ln, gap_lines)
            ln += gap_lines
            # grow the block: consecutive candidates and continuation lines
            be = find(b"\n", bs) + 1
            prev_s = bs
            n_block = 1
            mask = masks[i]
            i += 1
            warn_left = _warning_opens(buf, bs, be)
            while be < n_buf and n_block < MAX_BLOCK_LINES:
                nxt_end = find(b"\n", be) + 1
                if i < len(starts) and starts[i] == be:
                    mask |= masks[i]
                    i += 1
                    warn_left = _warning_opens(buf, be, nxt_end) or _warning_next(buf, be, warn_left)
                elif grows(prev_s, be, nxt_end):
                    warn_left = _warning_next(buf, be, warn_left)
                elif warn_left and _warning_body(buf[be : nxt_end - 1]):
                    warn_left -= 1  # a line of a multi-line warning message
                else:
                    break
                prev_s, be = be, nxt_end
                n_block += 1
            if be >= n_buf and not final and (bs > 0 or n_buf < CARRY_CAP):
                if prog_at:
                    self._progress(buf, bs, lineno, prog_at, count, wrap)
                return bs, ln  # may continue in the next chunk: carry it over
            while i < len(starts) and starts[i] < be:  # candidates swallowed as continuation lines
                mask |= masks[i]
                i += 1
            sig_lines = self._block_signals(buf, bs, be, ln) if sig_at else ()
            if sig_lines and wrap:  # hits name a logical line's first piece: classify every line of the block
                sig_lines = _EVERY_LINE
            self._block(buf, bs, be, ln, n_block, mask, sig_lines)
            ln += n_block
            pos = be
        if sig_at:
            self._gap_signals(buf, pos, n_buf, ln, count, wrap, n_buf)
        tail = count(b"\n", pos, n_buf)
        self._region(buf, pos, n_buf, ln, tail)
        ln += tail
        self.lines_total = ln - 1
        if prog_at:
            self._progress(buf, n_buf, lineno, prog_at, count, wrap)
        return n_buf, ln

    def _progress(self, buf, upto: int, lineno: int, first: list[int], count, wrap: int) -> None:
        """The progress rows of ``buf[:upto]`` (whole lines from line ``lineno``): the lines that hold a
        progress needle first (``first``: the matcher reports each once) and the last line that holds
        one and reads as progress (:data:`denpex_nb.signals.PROGRESS`), found from the end with
        ``rfind`` for the needles these bytes hold only (at most :data:`_PROGRESS_TRIES` lines looked
        at). Ordinary training output is so never read line by line."""
        from ..signals import PROGRESS_NEEDLES, SignalFamily, classify

        rfind, find = buf.rfind, buf.find
        heads = [s for s in first if s < upto]
        if not heads:
            return

        texts: dict[int, str] = {}

        def text_at(s: int) -> str:
            text = texts.get(s)
            if text is None:
                text = texts[s] = line_at(s)
            return text

        def line_at(s: int) -> str:
            e = find(b"\n", s, upto)
            e = upto if e < 0 else e
            raw = bytes(buf[s : min(e, s + self.line_cap)])
            if wrap:  # a hard-wrapped logical line: its tails too
                ps = s
                for _ in range(8):
                    nxt = find(b"\n", e + 1, upto)
                    if e + 1 >= upto or nxt < 0 or not joins_b(buf[ps:e], buf[e + 1 : nxt], wrap):
                        break
                    raw += buf[e + 1 : nxt]
                    ps, e = e + 1, nxt
            return raw.decode("utf-8", "replace").rstrip("\r")

        done: set[int] = set()

        def add(s: int) -> bool:
            if s in done:
                return False
            done.add(s)
            text = text_at(s)
            sig = classify(text)
            if sig is None or sig.family != SignalFamily.PROGRESS:
                return False
            self._signal_line(sig, lineno + count(b"\n", 0, s), text)
            return True

        head_bytes = [text_at(s).encode("utf-8", "replace") for s in heads]
        held = {nd for nd in PROGRESS_NEEDLES for raw in head_bytes if nd in raw}
        last = {nd: rfind(nd, 0, upto) for nd in held}
        for _ in range(_PROGRESS_TRIES):
            p = max(last.values(), default=-1)
            if p < 0:
                break
            s = rfind(b"\n", 0, p) + 1
            if add(s):
                break
            for nd, q in last.items():  # the needles of that line: their occurrence before it
                if q >= s:
                    last[nd] = rfind(nd, 0, s)
        for s in heads:
            add(s)

    def _split_arrays(self, starts, masks) -> tuple[list[int], list[int], list[int], list[int]]:
        """:meth:`_take_mentions` then :func:`_split_signal_hits` (progress, then signals) on numpy
        arrays (the same lists come out): the hits of a big chunk are never walked one by one in Python."""
        import numpy as np

        wm, bit = self.matcher.watch_mask, self.sig_bit
        prog_at: list[int] = []
        if self.prog_bit:
            prog = (masks & self.prog_bit) != 0
            if prog.any():
                prog_at = starts[prog].tolist()
                keep = (masks & ~self.prog_bit) != 0
                starts, masks = starts[keep], masks[keep] & ~self.prog_bit
        if wm:
            seen = int(np.bitwise_or.reduce(masks)) if len(masks) else 0
            for b, name in self.matcher.watch_bits.items():
                if seen & b:
                    self.mentions.add(name)
            if seen & wm:
                keep = (masks & ~wm) != 0
                starts, masks = starts[keep], masks[keep] & ~wm
        sig_at: list[int] = []
        if bit:
            sig = (masks & bit) != 0
            if sig.any():
                sig_at = starts[sig].tolist()
                keep = (masks & ~bit) != 0
                starts, masks = starts[keep], masks[keep] & ~bit
        return starts.tolist(), masks.tolist(), sig_at, prog_at

    def _take_mentions(self, starts: list[int], masks: list[int]) -> tuple[list[int], list[int]]:
        """Note the watched words among the candidate lines (``mentions``) and keep as candidates
        only the lines that hold a reader's needle: a word is noticed where it is found, in the
        one search every byte already gets, and no line is read twice for it."""
        wm = self.matcher.watch_mask
        hits = 0
        for m in masks:
            hits |= m
        if not hits & wm:
            return starts, masks
        for bit, name in self.matcher.watch_bits.items():
            if hits & bit:
                self.mentions.add(name)
        keep = [(s, m & ~wm) for s, m in zip(starts, masks) if m & ~wm]
        return [s for s, _ in keep], [m for _, m in keep]

    def _gap_signals(self, buf, start: int, end: int, ln: int, count, wrap: int, n_buf: int) -> None:
        """Classify the signal lines of ``buf[start:end]`` (whole lines from line ``ln``, no reader's):
        the text is classified first, and only a line that signals is given to the prefix stripper
        for its rank and time. Nothing is consumed: the lines stay ``unparsed``."""
        at, k = self._sig_hot, self._hot_k
        while k < len(at) and at[k] < start:
            k += 1
        pos, n = start, ln
        while k < len(at) and at[k] < end:
            s = at[k]
            k += 1
            e = buf.find(b"\n", s, n_buf)
            e = n_buf if e < 0 else e
            raw = buf[s : min(e, s + self.line_cap)]
            pieces = [raw]
            if wrap:  # a hard-wrapped logical line: its tails too (a few pieces at most)
                ps = s
                for _ in range(8):
                    if e + 1 >= end:
                        break
                    nxt = buf.find(b"\n", e + 1, n_buf)
                    nxt = n_buf if nxt < 0 else nxt
                    if not joins_b(buf[ps:e], buf[e + 1 : nxt], wrap):
                        break
                    pieces.append(buf[e + 1 : nxt])
                    raw += pieces[-1]
                    ps, e = e + 1, nxt
            text = raw.decode("utf-8", "replace").rstrip("\r")
            sig = classify(text)
            if sig is None:
                continue
            n += count(b"\n", pos, s)
            pos = s
            added = self._signal_line(sig, n, text)
            if len(pieces) > 1 and (added is None or not added.failure):
                # an unprefixed line of another record taken for a tail (two lines of one length read as
                # a wrap) still signals on its own, as in a block (:meth:`_classify_lines`); a prefixed
                # piece is a record's head whose own tail may be cut off (its inner header with it)
                from .prefixes import APP_B

                for j, piece in enumerate(pieces[1:], 1):
                    bare = peel(piece)
                    if PREFIX_RUN.match(bare).end() or APP_B.match(bare):
                        continue
                    ptext = piece.decode("utf-8", "replace").rstrip("\r")
                    psig = classify(ptext)
                    if psig is not None and psig.failure:
                        self._signal_line(psig, n + j, ptext, failures_only=True)
        self._hot_k = k

    def _block_signals(self, buf, bs: int, be: int, ln: int) -> set[int]:
        """Line numbers of the block ``buf[bs:be]`` (from line ``ln``) that hold a signal needle."""
        at, k = self._sig_at, self._sig_k
        while k < len(at) and at[k] < bs:
            k += 1
        out = set()
        while k < len(at) and at[k] < be:
            out.add(ln + buf.count(b"\n", bs, at[k]))
            k += 1
        self._sig_k = k
        return out

    def _signal_line(self, sig, lineno: int, text: str, failures_only: bool = False):
        """One signal row for a line no reader was given: rank, time and message from the prefix
        stripper (a failure in it is the stripper's bug: the row keeps the raw text). Returns the
        signal added (None when the line's own header level made it chatter). ``failures_only``:
        add it only if it is still a failure once its headers are read (a piece of a joined line)."""
        try:
            lines = self.to_lines([(lineno, text)], self.ctx)
        except Exception:  # noqa: BLE001 - a prefix bug already reported for blocks; the signal stays
            lines = []
        if lines:
            line = lines[0]
            if line.severity:  # the header's own level: chatter at INFO is no signal
                sig = classify(line.text, line.severity)
                if sig is None:
                    return None
            if failures_only and not sig.failure:
                return None
            self.signals.add(sig, line=lineno, text=line.text, rank=line.rank, t_wall=line.t_wall, host=line.host)
        else:
            self.signals.add(sig, line=lineno, text=text, rank=self.ctx.rank_hint)
        return sig

    def _block(self, buf: bytes, bs: int, be: int, ln: int, n: int, mask: int = -1, sig_lines=()) -> None:
        raw = buf[bs:be]
        if be - bs > self.line_cap:
            raw = self._cap_lines(raw, ln)
        key = None
        # (not a block holding a signal line: each of those must be classified where it is)
        if not sig_lines and mask >= 0 and not mask & ~self._alone_mask and be - bs <= _MEMO_BLOCK_MAX:
            key = (mask, bytes(raw))
            if key in self._fruitless:  # these bytes yielded nothing before: they are unparsed again
                self._region(buf, bs, be, ln, n)
                return
        texts = raw.decode("utf-8", "replace").split("\n")
        texts.pop()
        physical = [(ln + k, t[:-1] if t.endswith("\r") else t) for k, t in enumerate(texts)]
        out = self.out
        linenos = [k for k, _ in physical]
        if key is not None:
            start, failures = out.mark(), self.n_failures
        try:
            lines = self.to_lines(physical, self.ctx)
        except Exception as e:  # a prefix bug: the block stays unparsed, the failure is reported
            self._failed("prefixes", e, ln)
            lines = None
        if lines is not None:
            for line in lines:
                if line.rank is not None and (line.host or line.pid is not None or line.local_rank is not None):
                    info = self.rank_info.setdefault(int(line.rank), {})
                    if line.host:
                        info.setdefault("host", line.host)
                    if line.pid is not None:
                        info.setdefault("pid", line.pid)
                    if line.local_rank is not None:
                        info.setdefault("local_rank", line.local_rank)
            for bit, reader in enumerate(self.readers):
                # a reader none of whose needles occur in the block has no line of its own in it
                if not (mask >> bit) & 1:
                    continue
                mark = out.mark()
                before = {k for k in linenos if k in out.parsed}
                try:
                    reader.parse(lines, self.ctx, out)
                except Exception as e:  # a reader bug: drop what it added here, report it once per file
                    out.rollback(mark, linenos, before)
                    self._failed(reader.name, e, ln)
            _consume_blank_tags(lines, linenos, out)
            if sig_lines:
                self._classify_lines(lines, sig_lines, physical)
        parsed = out.parsed
        if (
            key is not None
            and out.mark() == start
            and self.n_failures == failures
            and len(self._fruitless) < _MEMO_MAX
            and not any(k in parsed for k in linenos)
        ):
            self._fruitless.add(key)
        for lineno, text in physical:
            if lineno not in parsed:
                self.sink.add_text(lineno, text) if self.sink.budget > 0 else self.sink.add_run(lineno, 1)

    def _classify_lines(self, lines: list[Line], sig_lines, physical: list[tuple[int, str]]) -> None:
        """Signal rows for the block's lines that hold a signal needle (parsed by a reader or not). A
        logical line joined from several physical ones (a hard-wrap tail, a continuation) that gives
        no failure as a whole has its pieces classified one by one: a line of another record that was
        taken for a tail still signals."""
        every = sig_lines is _EVERY_LINE
        texts = None
        for line in lines:
            if not (every or any(n in sig_lines for n in line.linenos)):
                continue
            sig = classify(line.text, line.severity)
            if sig is not None:
                self.signals.add(
                    sig, line=line.lineno, text=line.text, rank=line.rank, t_wall=line.t_wall, host=line.host
                )
            if line.n_lines > 1 and (sig is None or not sig.failure):
                texts = texts if texts is not None else dict(physical)
                for n in line.linenos[1:]:
                    piece = texts.get(n)
                    if piece is not None and (every or n in sig_lines):
                        psig = classify(piece)
                        if psig is not None and psig.failure:
                            self.signals.add(psig, line=n, text=piece)  # whose line it is is unsure

    def _region(self, buf: bytes, start: int, end: int, ln: int, n: int) -> None:
        """Unparsed whole lines, in bulk; while their text is kept, lines past ``line_cap`` keep
        their first ``line_cap`` bytes (the rest is recorded in ``overlong``)."""
        sink = self.sink
        if sink.budget > 0 and n and end - start > self.line_cap and _has_long_line(buf, start, end, self.line_cap):
            capped = self._cap_lines(buf[start : end - 1], ln) + b"\n"
            sink.add_region(capped, 0, len(capped), ln, n)
            return
        sink.add_region(buf, start, end, ln, n)

    def overlong_rows(self, file: str, max_rows: int = 1000) -> dict[str, list] | None:
        """``unparsed`` rows (``n_lines`` 0: the line itself is counted where it is) saying how many
        bytes of each line past the cap were not read; past ``max_rows`` lines, one row sums the rest."""
        if not self.overlong:
            return None
        cap = _human(self.line_cap)
        rows = [
            (ln, f"line {ln}: {extra} bytes past the line cap ({cap}) not read")
            for ln, extra in self.overlong[:max_rows]
        ]
        rest = self.overlong[max_rows:]
        if rest:
            rows.append(
                (
                    rest[0][0],
                    f"{len(rest)} more lines past the line cap ({cap}) from line {rest[0][0]}: "
                    f"{sum(x for _, x in rest)} bytes not read",
                )
            )
        return {
            "file": [file] * len(rows),
            "line": [r[0] for r in rows],
            "n_lines": [0] * len(rows),
            "text": [r[1] for r in rows],
        }

    def overlong_note(self) -> str | None:
        """One line for the Incident's notes when lines were cut at the line cap."""
        if not self.overlong:
            return None
        n, extra = len(self.overlong), sum(x for _, x in self.overlong)
        first = self.overlong[0][0]
        return (
            f"{n} line(s) longer than the line cap ({_human(self.line_cap)}), first at line {first}: their "
            f"first {_human(self.line_cap)} were read, {extra} bytes past it were counted, not read (raise it: "
            f"load(line_cap=...) or DENPEX_LINE_CAP)"
        )

    def _failed(self, who: str, e: Exception, first_line: int) -> None:
        """Record (or, in strict mode, raise) a reader's or the prefix stripper's exception."""
        where = f"{self.ctx.file}:{_failing_line(e, first_line)}"
        if self.strict:
            try:
                e.add_note(f"denpex_nb: reader {who!r} failed at {where}")
            except AttributeError:  # Python < 3.11
                pass
            raise e
        self.n_failures += 1
        if len(self.reader_failures) < 20:
            self.reader_failures.append(f"reader {who!r} failed at {where}: {type(e).__name__}: {e}")

    def failure_note(self) -> str | None:
        """One line for the Incident's notes: the first failure and how many there were."""
        if not self.reader_failures:
            return None
        more = f" ({self.n_failures} failures in this file)" if self.n_failures > 1 else ""
        return f"{self.reader_failures[0]}; the lines it could not read are kept as unparsed{more}"


#: fruitless blocks remembered per file, and the largest block remembered (bytes)
_MEMO_MAX = 4096
_MEMO_BLOCK_MAX = 4096


class _Every:
    """Stands for "every line of the block" (a hard-wrapped file's hits name logical lines)."""

    def __bool__(self) -> bool:
        return True


_EVERY_LINE = _Every()


def _split_signal_hits(starts: list[int], masks: list[int], bit: int) -> tuple[list[int], list[int], list[int]]:
    """(reader line starts, their masks, starts of every line holding a signal needle): lines that
    hold only signal needles start no block, so the readers see the same blocks as without signals."""
    sig_at = [s for s, m in zip(starts, masks) if m & bit]
    if not sig_at:
        return starts, masks, sig_at
    keep = [k for k, m in enumerate(masks) if m & ~bit]
    return [starts[k] for k in keep], [masks[k] & ~bit for k in keep], sig_at


#: lines looked at from a chunk's end for its last progress line (see :meth:`BlockScanner._progress`)
_PROGRESS_TRIES = 16

#: below this many signal lines in a chunk, each is classified where it is (numpy's overhead)
_SHAPES_MIN = 64


def _signalling(
    buf: bytes | bytearray, at: list[int], n: int, line_cap: int, newlines: Newlines | None = None
) -> list[int]:
    """The starts among ``at`` (lines of ``buf[:n]`` holding a signal needle, sorted) of the lines whose
    text :func:`denpex_nb.signals.classify` may give a signal: the others are skipped unread.

    Why: a log's noise holds signal needles too (Python logging's ``WARNING``, ``timeout=`` in a
    config line): millions of lines in a big log, each costing a decode and a digit substitution
    before the memo per shape answers None. Here the shapes of all of a chunk's signal lines are
    made at once, in bulk (numpy: a run of two or more ASCII digits becomes ``11``, as
    :func:`~denpex_nb.signals.classify` does), each distinct shape is classified once, and only the
    lines of a shape that signals are returned. Exact: a line that is not ASCII, or whose bytes
    could read otherwise than ``classify`` reads its text, is returned as it is (classified there).
    """
    if len(at) < _SHAPES_MIN or buf[n - 1] != 10:  # (``buf[:n]`` is whole lines)
        return at
    import numpy as np

    from ..signals import SHAPE_CHARS, classify

    cut = min(line_cap, SHAPE_CHARS)  # what classify reads of a line (ASCII: a byte per character)
    nl = newlines.known if newlines is not None else None
    if nl is not None:  # each line's end by binary search, cut where classify stops reading
        starts = np.array(at, dtype=np.int64)
        ends = np.minimum(nl[np.searchsorted(nl, starts)], starts + cut).tolist()
        parts = [buf[s:e] for s, e in zip(at, ends)]
    else:
        find = buf.find
        parts = [buf[s : min(find(b"\n", s, n), s + cut)] for s in at]
    blob = b"\n".join(parts)
    if b"\r" in blob:  # a CRLF line end (a lone CR is a line end already): classify strips it
        blob = blob.replace(b"\r\n", b"\n")
        if blob.endswith(b"\r"):
            blob = blob[:-1]
        if b"\r" in blob:
            return at
    if not blob.isascii():
        return at
    b = np.frombuffer(blob, np.uint8)
    digit = (b >= 48) & (b <= 57)
    before = np.zeros_like(digit)
    before[1:] = digit[:-1]
    after = np.zeros_like(digit)
    after[:-1] = digit[1:]
    before2 = np.zeros_like(digit)
    before2[2:] = digit[:-2]
    norm = b.copy()
    norm[digit & (before | after)] = 49  # a run of 2+ digits: its first two become "11" ...
    shapes = norm[~(digit & before & before2)].tobytes().split(b"\n")  # ... and the rest go
    hot = {sh for sh in set(shapes) if classify(sh.decode("ascii")) is not None}
    if not hot:
        return []
    return [s for s, sh in zip(at, shapes) if sh in hot]


#: below this many bytes ``bytes.count`` beats numpy's call overhead
_NUMPY_COUNT_MIN = 4096


def _newline_counter(buf: bytes | bytearray, n: int, nl=None) -> Callable[[bytes, int, int], int]:
    """``buf.count`` for newlines in ``buf[:n]``, vectorised (numpy compares 16-32 bytes a step where
    ``bytes.count`` takes one): counting the lines of the gaps between blocks is most of the work
    left over a big log once the needles are found. With the newline offsets ``nl`` (:class:`Newlines`)
    a count is two binary searches."""
    import numpy as np

    if nl is not None:
        ss = nl.searchsorted

        def count_nl(sub: bytes, start: int, end: int) -> int:  # sub is always b"\n"
            return int(ss(end) - ss(start))

        return count_nl

    a = np.frombuffer(buf, np.uint8, count=n)
    bcount = buf.count
    nonzero = np.count_nonzero

    def count(sub: bytes, start: int, end: int) -> int:  # sub is always b"\n"
        if end - start < _NUMPY_COUNT_MIN:
            return bcount(sub, start, end)
        return int(nonzero(a[start:end] == 10))

    return count


def _has_long_line(buf: bytes, start: int, end: int, cap: int) -> bool:
    """Does ``buf[start:end]`` (whole lines) hold a line longer than ``cap`` bytes? Linear: from a
    line start, the last newline within the next ``cap + 1`` bytes starts the next window, and a
    window without one is a long line."""
    rfind = buf.rfind
    pos = start
    while end - 1 - pos > cap:
        back = rfind(b"\n", pos, pos + cap + 1)
        if back < 0:
            return True
        pos = back + 1
    return False


def _human(n: int) -> str:
    from .sources import human

    return human(n)


def _consume_blank_tags(lines: list[Line], linenos: list[int], out: Output) -> None:
    """A launcher tag with nothing after it (``[1,2]<stdout>:``, ``(RayWorker pid=7) ``, a quoted
    ``>``) is the blank line of that process's output: it counts as parsed when a reader consumed
    another line of the same block (a block of such lines alone proves nothing)."""
    parsed = out.parsed
    if not any(n in parsed for n in linenos):
        return
    for line in lines:
        if line.prefixes and line.lineno not in parsed and not line.text.strip():
            out.consume(line)


def strict_mode(options: dict | None) -> bool:
    """``strict`` from the load options, else the ``DENPEX_STRICT`` environment variable."""
    value = (options or {}).get("strict")
    if value is None:
        value = os.environ.get("DENPEX_STRICT", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _failing_line(e: BaseException, default: int) -> int:
    """The physical line a reader was handling when it raised: the innermost frame holding a
    ``Line`` (readers name it ``line``), else the block's first line."""
    found = default
    tb = e.__traceback__
    while tb is not None:
        cand = tb.tb_frame.f_locals.get("line")
        if isinstance(cand, Line):
            found = cand.lineno
        tb = tb.tb_next
    return found


def scan_text(
    stream: BinaryIO,
    readers: list[TextReader],
    ctx: FileContext,
    out: Output,
    sink: UnparsedSink,
    *,
    head: bytes = b"",
    matcher: NeedleMatcher | None = None,
    on_bytes=None,
    chunk_size: int = CHUNK_SIZE,
    line_cap: int = DEFAULT_LINE_CAP,
    at_eof: bool = False,
) -> BlockScanner:
    """Scan a whole text stream (``head`` = bytes already read from it; ``at_eof``: all of it). Returns the scanner
    with ``lines_total``, ``reader_failures`` (see :meth:`BlockScanner.failure_note`),
    ``overlong`` (lines cut at ``line_cap``) and ``rank_info`` filled in. In strict mode
    (:func:`strict_mode`) a reader's exception propagates."""
    if matcher is None:
        matcher = NeedleMatcher.for_readers(readers)
    sc = BlockScanner(readers, matcher, ctx, out, sink, on_bytes=on_bytes, chunk_size=chunk_size, line_cap=line_cap)
    sc.run(stream, head, at_eof)
    return sc

"""Hard-wrapped copies of a log: one file-wide width, detected once, undone before any reader runs.

A terminal or a log collector that wraps every physical line at a fixed width ``W`` (80, 120 ...)
leaves the first piece of a long line with its prefix (``2024-05-01T12:00:00.479500055Z
[default1]:[rank1]: ``, ``May  1 12:00:03 node1 python[3871]: [rank1]: ``) and puts the rest on the
next physical lines *without* any prefix, cut mid-word. The width is a property of the file, so it is
decided once per file (:func:`detect_width`, from its first :data:`WRAP_SAMPLE` bytes: many lines
of exactly the same length ``W >= 60`` and none longer) and kept in ``ctx.options["wrap_width"]``
(``load(wrap_width=80)`` forces a width, ``wrap_width=0`` turns the detection off). With a width:

* the loader (:mod:`denpex_nb.ingest.scan`) searches the readers' needles in the *unwrapped* text
  (:func:`line_hits`: a needle cut by the wrap, ``Traceback (most recent call l`` / ``ast):``, is
  still found, and attributed to the logical line's first physical line), grows blocks over the
  wrapped tails (:func:`joins_b`), tests whether a logical line continues a block on its joined
  start (:func:`logical_start`: a wrap may cut through a prefix) and never cuts a logical line
  between two processed chunks (:func:`safe_end`);
* :func:`denpex_nb.ingest.prefixes.to_lines` joins a physical line of length ``W`` with the lines
  after it that carry no line-start prefix, verbatim, until a line shorter than ``W`` ends the
  logical line (so every reader gets whole lines; a joined Line has ``n_lines > 1`` and its
  physical lines count as parsed when it is).

A line is *at the width* when it has ``W`` characters (or ``W`` bytes), or ``W - 1`` ending in a
space (a copy that trimmed the wrap column). A tail never carries the file's line-start prefix: when
the line before has a collector wrapper (timestamp, syslog, ``grep -H``, compose), a tail has none;
otherwise it has no launcher/rank tag (``[rank1]:``, ``[default0]:`` ...) at its start either
(``to_lines`` also refuses headers and, after a tagged head, unprefixed C++ stderr). Lines that
are all shorter than ``W``, or a line of exactly ``W`` followed by a prefixed line, are never joined.

A message cut into pieces *without* a file-wide width (a paste of one DETAIL message re-cut at its
own width) is the c10d reader's to join; its "this piece stopped at a fixed-width cut" test is
:func:`cut_at`.
"""

from __future__ import annotations

import re

import numpy as np

from .prefixes import APP_B
from .scan import ANSI_B, OUTER_RUN

__all__ = [
    "WRAP_SAMPLE",
    "MIN_WIDTH",
    "detect_width",
    "at_width",
    "at_width_b",
    "joins_b",
    "logical_start",
    "line_hits",
    "safe_end",
    "cut_at",
]

#: bytes from the start of a file that decide its wrap width (the same for any chunk size)
WRAP_SAMPLE = 1 << 20
#: narrower "wraps" are too likely to be ordinary lines of one fixed format
MIN_WIDTH = 60
#: no terminal or collector wraps wider
MAX_WIDTH = 1024
#: common terminal widths: one wrapped line there is enough evidence in a small file
COMMON_WIDTHS = frozenset({80, 100, 120, 160, 200})
#: a logical line is never joined past this many physical lines (memory stays bounded)
MAX_PIECES = 5000


def detect_width(sample: bytes) -> int | None:
    """The hard-wrap width of a file from its first bytes (whole lines), or None.

    Line lengths are counted in characters (UTF-8), without newline and CR. Wrapped: the longest
    length ``W >= 60`` (one longer line in 50 is let pass) occurs at least twice (at a common
    terminal width once is enough), and those lines look cut (:func:`_pieces_look_cut`: as many of
    them followed by a tail).
    """
    if len(sample) < MIN_WIDTH:
        return None
    if len(sample) <= _SMALL_SAMPLE and sample.isascii() and _no_candidate_width(sample):
        return None
    a = np.frombuffer(sample, np.uint8)
    nl = np.flatnonzero(a == 10)
    if nl.size < 2:
        return None
    starts = np.empty_like(nl)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    cr = (nl > starts) & (a[nl - 1] == 13)
    lens = nl - starts - cr
    if not sample.isascii():  # UTF-8 continuation bytes take no column
        cont = np.concatenate(([0], np.cumsum((a & 0xC0) == 0x80, dtype=np.int32)))
        lens = lens - (cont[nl] - cont[starts])
    counts = np.bincount(np.minimum(lens, MAX_WIDTH + 1))  # longer lines: one bin past the widest wrap
    if counts.size <= MIN_WIDTH:
        return None
    longer = 0
    for w in (np.flatnonzero(counts[MIN_WIDTH:])[::-1][:8] + MIN_WIDTH).tolist():
        if w > MAX_WIDTH:
            longer += int(counts[w])
            continue
        n = int(counts[w])
        if longer <= n // 50 and n >= (1 if w in COMMON_WIDTHS else 2):
            return w if _pieces_look_cut(sample, starts, nl - cr, lens, w, counts) else None
        longer += n
        if longer > 8:
            break
    return None


#: a sample this small is first looked at without numpy (a tiny file: numpy's set-up cost more than its work)
_SMALL_SAMPLE = 16 << 10


def _no_candidate_width(sample: bytes) -> bool:
    """True when :func:`detect_width`'s count of line lengths in ``sample`` (ASCII) gives no width
    to look at (so it returns None); False when it might: then the full count decides. The same
    arithmetic as there, in plain Python: lines end at each newline (a last unterminated piece is
    not a line), a CR before it takes no column."""
    lines = sample.split(b"\n")
    del lines[-1]
    if len(lines) < 2:
        return True
    counts: dict[int, int] = {}
    for line in lines:
        n = len(line)
        if n >= MIN_WIDTH:
            n = min(n - (line[-1] == 13), MAX_WIDTH + 1)
            if n >= MIN_WIDTH:
                counts[n] = counts.get(n, 0) + 1
    longer = 0
    for w in sorted(counts, reverse=True)[:8]:
        n = counts[w]
        if w > MAX_WIDTH:
            longer += n
            continue
        if longer <= n // 50 and n >= (1 if w in COMMON_WIDTHS else 2):
            return False
        longer += n
        if longer > 8:
            break
    return True


#: a row of a box drawn to a width (Rich's traceback box, tables), never a piece cut by a wrap
_BOX_ENDS = tuple(c.encode() for c in "│┃║╮╯┓┛╗╝┐┘┤")


def _pieces_look_cut(
    sample: bytes, starts: np.ndarray, ends: np.ndarray, lens: np.ndarray, w: int, counts: np.ndarray
) -> bool:
    """Are the lines of length ``w`` pieces of wrapped lines, not lines that happen to be that long?

    Lines drawn to a width (a Rich box's rows end in a box-drawing character) are no pieces. The
    evidence of a wrap is lines that were *cut*, not lines that are long: at a width no terminal is
    known for, two lines at least must be followed by a tail (several ranks print one warning at one
    length; one of them followed by another rank's short line is no wrap). Either way most lines of length ``w`` must be followed by a line :func:`joins_b` takes for their tail
    (a wrap cuts every longer line; the longest lines of a prefixed file sharing one length, one of
    them followed by an unprefixed line, are no wrap). In a prefixed file (nearly every first piece
    carries a collector wrapper, a launcher/rank tag or an app logger's header) a tail is told by its
    missing prefix, so that is enough.
    Unprefixed, the length ``w`` must stand out (three times at least, and twice as often as any of
    the ten lengths below it: a word wrap fills lines to *about* its width), most first pieces (with
    the line after each) must differ, of three cuts or more one at least must fall inside a token,
    and the "tails" must not all start like the line before them (the rows of a fixed-width table,
    records of one format and one length, are cut between records only).
    """
    n_lines = len(starts)
    # a few hundred lines are looked at: index the arrays, never turn all of them into lists
    line = lambda i: sample[int(starts[i]) : int(ends[i])] if i < n_lines else b""  # noqa: E731
    idx = [i for i in np.flatnonzero(lens == w)[:200].tolist() if not line(i).endswith(_BOX_ENDS)]
    wide = set(idx)
    tails = {i: i + 1 < n_lines and joins_b(line(i), line(i + 1), w) for i in idx}  # asked up to 3 times each
    is_tail = tails.__getitem__
    if not any(tails.values()):
        return False
    heads = [i for i in idx if not (i - 1 in wide and tails[i - 1])]
    # a wrap cuts every line longer than the width, so most lines at the width are followed by their
    # tail; the longest lines of a prefixed file that happen to share one length (DETAIL fingerprints,
    # a fixed format) with one unprefixed line after one of them are no wrap
    followed = sum(1 for i in idx if is_tail(i))
    if followed < (1 if w in COMMON_WIDTHS else 2):
        return False  # one long line with a short one after it: two *cut* lines at a width no terminal is known for
    # "nearly every head is prefixed" (9 in 10): stop counting once too many are not
    unprefixed, allowed = 0, len(heads) - (9 * len(heads) + 9) // 10
    for i in heads:
        if not _prefixed(line(i)):
            unprefixed += 1
            if unprefixed > allowed:
                break
    else:
        return 2 * followed >= len(idx)
    below = counts[max(MIN_WIDTH, w - 10) : w]
    if counts[w] < 3 or (below.size and int(counts[w]) < 2 * int(below.max())):
        return False  # too few, or no spike at the width: a word wrap, a fixed format
    if 2 * len({(line(i), line(i + 1)) for i in heads}) < len(heads):
        return False  # the same line (and the same line after it) again and again
    joints = [i for i in idx if is_tail(i)]
    if len(joints) >= 3 and not any(_mid_token(line(i), line(i + 1)) for i in joints):
        return False  # every "cut" falls between two records: the rows of a fixed-width table
    if len(joints) >= 2 and all(line(i + 1)[:4] == line(i)[:4] for i in joints):
        return False  # every "tail" starts like the line before it: records of one format, one length
    return 2 * followed >= len(idx)


def _mid_token(head: bytes, tail: bytes) -> bool:
    """Does the cut between ``head`` and ``tail`` fall inside a token (no blank on either side)? A
    wrap at a fixed column does so about two times in three; a table's rows never."""
    return bool(head) and bool(tail) and not head[-1:].isspace() and not tail[:1].isspace()


def at_width(text: str, w: int) -> bool:
    """Does this physical line (str, without newline) fill the wrap width ``w``?"""
    n = len(text)
    if n == w or (n == w - 1 and text.endswith(" ")):
        return True
    return n < w and not text.isascii() and len(text.encode("utf-8", "replace")) == w


def at_width_b(line: bytes, w: int) -> bool:
    """:func:`at_width` for bytes (CR already removed)."""
    n = len(line)
    if n == w or (n == w - 1 and line.endswith(b" ")):
        return True
    return n > w and not line.isascii() and len(line.decode("utf-8", "replace")) == w


def joins_b(prev: bytes, line: bytes, w: int) -> bool:
    """Is ``line`` the wrapped tail of ``prev`` (physical lines, bytes, without newline) at width ``w``?"""
    if prev.endswith(b"\r"):
        prev = prev[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line or not at_width_b(prev, w):
        return False
    line, k = _outer(line)
    if k:
        return False  # the line has a collector wrapper of its own
    if _outer(prev)[1]:
        return True  # prev has one, the line none
    return not _tag(line)


def _prefixed(line: bytes) -> bool:
    """Does ``line`` start with a collector wrapper, a launcher/rank tag or an app logger's header?"""
    line, k = _outer(line)
    return bool(k) or _tag(line) or APP_B.match(line) is not None


#: launcher/rank tags at a line start (the bytes twin of the tags prefixes._strip peels): ``[rank1]:``,
#: ``[default0]:``, ``[trainer|3|1]:``, Open MPI ``[1,3]<stdout>:``, a lost colour code, a Ray/vLLM worker,
#: vLLM's header; never ``[127.0.0.1]:29500`` (a wrap may cut just before an address)
_TAG = re.compile(
    rb"\[[A-Za-z_][^\]\n]{0,63}\]:|\[\d+(?:,\d+)?\]<std(?:out|err|diag)>:?|\[\d{1,3}(?:;\d{1,3})*m"
    rb"|\([\w.:-]+(?: [\w=]+)* pid=\d+|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
)


def _tag(line: bytes) -> bool:
    """Does ``line`` start with a launcher/rank tag (:data:`_TAG`)? Not when indented."""
    return _TAG.match(line) is not None


def _outer(line: bytes) -> tuple[bytes, int]:
    """(``line`` without ANSI codes, length of its collector wrapper)."""
    if b"\x1b" in line:
        line = ANSI_B.sub(b"", line)
    return line, OUTER_RUN.match(line).end()


def logical_start(buf: bytes, start: int, w: int, max_pieces: int = 8, stop: int | None = None) -> bytes:
    """The logical line whose first physical line starts at ``start`` in ``buf[:stop]`` (whole lines),
    its pieces joined (at most ``max_pieces``: enough for a test of how the line starts, such as the
    loader's continuation test, which a wrap through a prefix (``[ran`` / ``k1]:``) would fool)."""
    n = len(buf) if stop is None else stop
    end = buf.find(b"\n", start, n)
    if end < 0:
        end = n
    last = buf[start:end].rstrip(b"\r")
    parts = [last]
    while len(parts) < max_pieces and end + 1 < n and at_width_b(last, w):
        nxt_end = buf.find(b"\n", end + 1, n)
        if nxt_end < 0:
            nxt_end = n
        nxt = buf[end + 1 : nxt_end].rstrip(b"\r")
        if not joins_b(last, nxt, w):
            break
        parts.append(nxt)
        last, end = nxt, nxt_end
    return b"".join(parts)


def _join_points(buf: bytes, w: int, end: int | None = None) -> list[int]:
    """Offsets of the newlines (each with its CR) that a wrap at width ``w`` put into ``buf[:end]``
    (whole lines), flattened: the bytes to drop to get the unwrapped text."""
    a = np.frombuffer(buf, np.uint8, count=len(buf) if end is None else end)
    nl = np.flatnonzero(a == 10)
    if nl.size < 2:
        return []
    starts = np.empty_like(nl)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    cr = (nl > starts) & (a[nl - 1] == 13)
    ends = nl - cr
    lens = ends - starts
    cand = (lens == w) | ((lens == w - 1) & (a[np.maximum(ends - 1, 0)] == 32))
    cand |= (lens > w) & (lens <= 4 * w)  # non-ASCII lines: checked in joins_b
    out: list[int] = []
    s, e = starts.tolist(), ends.tolist()
    nls, crs = nl.tolist(), cr.tolist()
    for i in np.flatnonzero(cand[:-1]).tolist():
        if joins_b(buf[s[i] : e[i]], buf[s[i + 1] : e[i + 1]], w):
            if crs[i]:
                out.append(nls[i] - 1)
            out.append(nls[i])
    return out


def line_hits(matcher, buf: bytes, w: int, end: int | None = None) -> tuple[list[int], list[int]]:
    """``matcher.line_hits(buf[:end])`` on the unwrapped text: (start offsets in ``buf`` of the *first*
    physical line of each logical line holding a needle, reader bitmask per line)."""
    n = len(buf) if end is None else end
    drop = _join_points(buf, w, n)
    if not drop:
        return matcher.line_hits(buf, n)
    a = np.frombuffer(buf, np.uint8, count=n)
    keep = np.ones(a.size, dtype=bool)
    removed = np.asarray(drop, dtype=np.int64)
    keep[removed] = False
    starts, masks = matcher.line_hits(a[keep].tobytes())
    if not starts:
        return starts, masks
    # a kept byte at unwrapped offset q follows every dropped byte j with removed[j] - j <= q
    shift = removed - np.arange(removed.size, dtype=np.int64)
    st = np.asarray(starts, dtype=np.int64)
    return (st + np.searchsorted(shift, st, side="right")).tolist(), masks


def safe_end(buf: bytes, w: int, end: int | None = None) -> int:
    """Where ``buf[:end]`` (whole lines) may be cut without splitting a logical line: the start of its
    last logical line when that line ends at the width (its tail may be in the next bytes), else its end."""
    n = len(buf) if end is None else end
    s = buf.rfind(b"\n", 0, n - 1) + 1
    if not at_width_b(buf[s : n - 1].rstrip(b"\r"), w):
        return n
    for _ in range(MAX_PIECES):  # walk back to the head of the logical line
        if s == 0:
            return 0
        p = buf.rfind(b"\n", 0, s - 1) + 1
        if not joins_b(buf[p : s - 1], buf[s : buf.find(b"\n", s, n)], w):
            return s
        s = p
    return s


def cut_at(lengths: list[int]) -> bool:
    """Did the last of these pieces (lengths of consecutive pieces of one message, stripped) stop at
    a fixed-width cut, in a paste of that message re-cut at some width of its own (no file-wide
    width: that one is undone before any reader runs)? Every piece but the last has the longest
    piece's length."""
    return len(lengths) >= 2 and lengths[-1] == max(lengths)

"""The raw evidence behind one rank's entry at one seq: ``file:line`` and the lines around it.

Why read the file again: a table says *what* the loader understood; an engineer checking a verdict
wants the text the rank actually printed, with its neighbours (the traceback below a watchdog
line, the warning above it). Each event keeps its ``file`` and ``line``; this module opens that
file (plain, gzip, bz2 or xz, recognised by content) and returns a few lines either side. A
Flight Recorder entry has no text line: its ``line`` is the entry's index in the dump, shown as
the decoded entry instead. Remote and zipped inputs are named, not re-read (no second download).
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: sources whose ``line`` is an entry index in a binary dump, not a text line
BINARY_SOURCES = ("fr_pickle",)
#: never read further than this many lines into a file for context (a 1 GB log stays responsive)
MAX_LINE = 5_000_000


@dataclass
class Excerpt:
    """Lines ``first..`` of ``file`` around ``line`` (1-based), or why they cannot be shown."""

    file: str
    line: int | None
    source: str
    first: int = 0
    lines: tuple[str, ...] = ()
    note: str = ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


def _opener(path: Path):
    with open(path, "rb") as f:
        head = f.read(6)
    if head[:2] == b"\x1f\x8b":
        return gzip.open
    if head[:3] == b"BZh":
        return bz2.open
    if head[:6] == b"\xfd7zXZ\x00":
        return lzma.open
    return open


def read_context(file: str, line: int, context: int = 3) -> tuple[int, tuple[str, ...]]:
    """Lines ``line - context .. line + context`` (1-based) of a local text file: (first, lines)."""
    path = Path(file)
    first = max(1, int(line) - context)
    stop = int(line) + context
    if stop > MAX_LINE:
        raise ValueError(f"line {line} is beyond the {MAX_LINE:,} lines read for context")
    with _opener(path)(path, "rb") as f:
        chunk = list(itertools.islice(f, first - 1, stop))
    return first, tuple(b.decode("utf-8", errors="replace").rstrip("\r\n") for b in chunk)


class EventIndex:
    """Where each (rank, seq) of one counter sits in the evidence: a sorted index built once, so a
    lookup at 1M events costs a binary search, not a scan of the events frame."""

    def __init__(self, incident, seq_kind):
        ev = incident.events
        if ev.empty:
            self.key = np.zeros(0, dtype=np.int64)
            self.rows = pd.DataFrame(columns=["pg", "file", "line", "source"])
            return
        m = ev["rank"].notna() & ev["seq"].notna()
        if seq_kind is not None:
            m &= ev["seq_kind"].astype("object") == seq_kind
        sub = ev.loc[m.to_numpy(dtype=bool), ["rank", "seq", "pg", "file", "line", "source"]]
        key = sub["rank"].to_numpy(dtype=np.int64) * _SEQ_SPAN + sub["seq"].to_numpy(dtype=np.int64)
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.rows = sub.iloc[order].reset_index(drop=True)

    def find(self, rank: int, seq: int, pg=None) -> pd.DataFrame:
        k = int(rank) * _SEQ_SPAN + int(seq)
        lo, hi = np.searchsorted(self.key, k), np.searchsorted(self.key, k, side="right")
        rows = self.rows.iloc[lo:hi]
        if pg is not None and len(rows):
            rows = rows[rows["pg"].astype("object").astype(str) == str(pg)]
        return rows


_SEQ_SPAN = 1 << 40


def excerpts(
    incident, rank: int, seq: int, *, seq_kind=None, pg=None, context: int = 3, index: EventIndex | None = None
) -> list[Excerpt]:
    """One :class:`Excerpt` per event of ``rank`` at ``seq`` (in that counter and process group)."""
    index = index if index is not None else EventIndex(incident, seq_kind)
    rows = index.find(rank, seq, pg)[["file", "line", "source"]].drop_duplicates()
    out = []
    for file, line, source in rows.itertuples(index=False):
        file = "" if pd.isna(file) else str(file)
        ln = None if pd.isna(line) else int(line)
        source = str(source)
        ex = Excerpt(file, ln, source)
        if source in BINARY_SOURCES:
            ex.note = f"Flight Recorder dump: entry #{ln} (a binary record, shown decoded in the tables)"
        elif not file or ln is None:
            ex.note = "no file position recorded for this entry"
        elif "://" in file or "!" in file or not Path(file).is_file():
            ex.note = "the file is not on this machine (remote, inside an archive or moved): open it at this line"
        else:
            try:
                ex.first, ex.lines = read_context(file, ln, context)
            except (OSError, ValueError, EOFError, lzma.LZMAError) as e:
                ex.note = f"cannot read it: {e}"
        out.append(ex)
    return out


def excerpts_html(items: list[Excerpt], title: str = "") -> str:
    """The excerpts as HTML: ``file:line`` headings, the line itself highlighted."""
    from html import escape

    parts = [f"<div class='dx-evidence'><b>{escape(title)}</b>"] if title else ["<div class='dx-evidence'>"]
    if not items:
        parts.append("<p>No entry of this rank at this seq in the evidence.</p>")
    for ex in items:
        parts.append(f"<div><code>{escape(ex.where)}</code> <i>({escape(ex.source)})</i>")
        if ex.note:
            parts.append(f"<p>{escape(ex.note)}</p>")
        if ex.lines:
            rows = []
            for k, text in enumerate(ex.lines):
                n = ex.first + k
                mark = n == ex.line
                style = " style='background:#fdd;font-weight:bold'" if mark else ""
                rows.append(f"<span{style}>{n:>7}{'▶' if mark else ' '} {escape(text[:400])}</span>")
            parts.append(
                "<pre style='font-size:11px;line-height:1.3;margin:2px 0;white-space:pre-wrap'>"
                + "\n".join(rows)
                + "</pre>"
            )
        parts.append("</div>")
    parts.append("</div>")
    return "".join(parts)

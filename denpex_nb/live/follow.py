"""Follow files that a running job is still writing: only new bytes, whole lines, never a rescan.

Why a follower of its own: ``load()`` reads a file from its start; a watcher polls the same files
many times a second and must cost nothing when nothing changed. Each followed file is known by its
inode and keeps an offset and the unfinished tail of its last line. A file renamed away by
rotation keeps its inode, so its last lines are still read under its new name while the new file
at the old name is read from its start; a file that shrinks in place (truncated) is read again
from its start and the reason is reported once. Paths are discovered again every ``rescan_s``
seconds (folders recursively, globs expanded), so files that appear later (a rank that starts
late, a Flight Recorder dump written at the end) are picked up.
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass, field

#: the most bytes read from one file in one poll: a burst is spread over polls, memory stays flat
READ_CHUNK = 4 << 20
#: an unfinished line longer than this is cut and kept as a line (a runaway write cannot grow it)
MAX_LINE = 1 << 20


@dataclass
class _Tail:
    path: str
    inode: int
    offset: int = 0
    partial: bytes = b""


@dataclass
class Chunk:
    """New whole lines of one file (``first_line`` is the 1-based number of the first)."""

    path: str
    lines: list[bytes]
    first_line: int


@dataclass
class Follower:
    """Poll ``paths`` (files, folders, globs) and return the whole lines appended since last time."""

    paths: list[str]
    rescan_s: float = 1.0
    accept: object = None  # callable(path) -> bool: which discovered files to follow
    tails: dict[int, _Tail] = field(default_factory=dict)  # inode -> what was read of it
    restarts: list[tuple[str, str]] = field(default_factory=list)  # (path, "truncated" | "rotated")
    _lines_seen: dict[int, int] = field(default_factory=dict)
    _scanned_at: float = float("-inf")

    def discover(self) -> list[str]:
        """The files the paths name now (sorted); folders are walked, globs expanded."""
        found: set[str] = set()
        for p in self.paths:
            matches = glob.glob(p, recursive=True) if glob.has_magic(p) else [p]
            for m in matches:
                if os.path.isdir(m):
                    for root, _dirs, files in os.walk(m):
                        found.update(os.path.join(root, f) for f in files)
                elif os.path.isfile(m):
                    found.add(m)
        accept = self.accept
        return sorted(f for f in found if accept is None or accept(f))

    def _rescan(self) -> None:
        self._scanned_at = time.monotonic()
        for path in self.discover():
            try:
                st = os.stat(path)
            except OSError:
                continue
            tail = self.tails.get(st.st_ino)
            if tail is None:
                self.tails[st.st_ino] = _Tail(path, st.st_ino)
            elif tail.path != path:
                if os.path.basename(path).startswith(os.path.basename(tail.path)):
                    self.restarts.append((tail.path, "rotated"))
                tail.path = path  # renamed (rotated away): keep reading it where we were

    def poll(self) -> list[Chunk]:
        if time.monotonic() - self._scanned_at >= self.rescan_s:
            self._rescan()
        out = []
        moved = False
        for tail in list(self.tails.values()):
            chunk, gone = self._read(tail)
            moved |= gone
            if chunk is not None:
                out.append(chunk)
        if moved:  # a path now names another file: find where ours went, and the new one
            self._rescan()
            for tail in list(self.tails.values()):
                chunk, _ = self._read(tail)
                if chunk is not None:
                    out.append(chunk)
        return out

    def _read(self, tail: _Tail) -> tuple[Chunk | None, bool]:
        try:
            st = os.stat(tail.path)
        except OSError:
            return None, False  # gone for now; found again by a rescan if it was renamed
        if st.st_ino != tail.inode:
            return None, True
        if st.st_size < tail.offset:
            self.restarts.append((tail.path, "truncated"))
            tail.offset, tail.partial = 0, b""
            self._lines_seen[tail.inode] = 0
        if st.st_size == tail.offset:
            return None, False
        try:
            with open(tail.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_ino != tail.inode:
                    return None, True
                fh.seek(tail.offset)
                data = fh.read(READ_CHUNK)
        except OSError:
            return None, False
        tail.offset += len(data)
        data = tail.partial + data
        lines = data.split(b"\n")
        tail.partial = lines.pop()
        if len(tail.partial) > MAX_LINE:
            lines.append(tail.partial)
            tail.partial = b""
        if not lines:
            return None, False
        first = self._lines_seen.get(tail.inode, 0) + 1
        self._lines_seen[tail.inode] = first - 1 + len(lines)
        return Chunk(tail.path, lines, first), False

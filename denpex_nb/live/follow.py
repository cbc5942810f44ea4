"""Follow files that a running job is still writing: only new bytes, whole lines, never a rescan.

Why a follower of its own: ``load()`` reads a file from its start; a watcher polls the same files
many times a second and must cost nothing when nothing changed. Each followed file is known by its
inode and keeps an offset and the unfinished tail of its last line. A file renamed away by
rotation keeps its inode, so its last lines are still read under its new name while the new file
at the old name is read from its start; a file that shrinks in place (truncated) is read again
from its start and the reason is reported once. Paths are discovered again at every poll while
walking them is cheap, at most every ``rescan_s`` seconds when it is not (folders recursively,
globs expanded), so files that appear later (a rank that starts
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
    fd: int | None = None  # kept open: reads follow the inode wherever it is renamed


def _raise_fd_limit() -> int:
    """Lift the soft open-file limit to the hard one (a job of 1,024 ranks is 1,024 files)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        return 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)
    except (ImportError, OSError, ValueError):
        return 1024


@dataclass
class Chunk:
    """New whole lines of one file (``first_line`` is the 1-based number of the first)."""

    path: str
    lines: list[bytes]
    first_line: int


@dataclass
class Follower:
    """Poll ``paths`` (files, folders, globs) and return the whole lines appended since last time.

    Followed files stay open (up to the open-file limit less a margin; beyond it a file is opened
    for each read), so a poll costs one ``fstat`` per file and a read where something was added.
    """

    paths: list[str]
    rescan_s: float = 1.0
    accept: object = None  # callable(path) -> bool: which discovered files to follow
    tails: dict[int, _Tail] = field(default_factory=dict)  # inode -> what was read of it
    restarts: list[tuple[str, str]] = field(default_factory=list)  # (path, "truncated" | "rotated")
    _lines_seen: dict[int, int] = field(default_factory=dict)
    _known: dict[str, int] = field(default_factory=dict)  # path -> inode at the last discovery
    _scanned_at: float = float("-inf")
    _fd_budget: int = -1
    _pending: list = field(default_factory=list)  # chunks drained from files let go at a rescan
    _rescan_cost: float = 0.0  # seconds the last walk took

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
        if self._fd_budget < 0:
            self._fd_budget = max(0, _raise_fd_limit() - 256)
        known: dict[str, int] = {}
        for path in self.discover():
            try:
                ino = os.stat(path).st_ino
            except OSError:
                continue
            known[path] = ino
            tail = self.tails.get(ino)
            if tail is None:
                self.tails[ino] = _Tail(path, ino)
            elif tail.path != path:
                if path.startswith(tail.path):
                    self.restarts.append((tail.path, "rotated"))
                tail.path = path  # renamed (rotated away): keep reading it where we were
        for ino in [i for i in self.tails if i not in known.values()]:
            tail = self.tails[ino]  # deleted, or moved out of sight: read what is left, then let go
            if tail.fd is not None:
                self._drain(tail)
                os.close(tail.fd)
                self._fd_budget += 1
            del self.tails[ino]
        self._known = known

    def poll(self) -> list[Chunk]:
        # a small tree is walked at every poll (a rank's file that appears is read at once); a
        # large one at most every ``rescan_s``, and never more than 5 % of the time
        if time.monotonic() - self._scanned_at >= min(self.rescan_s, 20 * self._rescan_cost):
            t0 = time.monotonic()
            self._rescan()
            self._rescan_cost = time.monotonic() - t0
        out = []
        for tail in list(self.tails.values()):
            chunk = self._read(tail)
            if chunk is not None:
                out.append(chunk)
        out += self._pending
        self._pending = []
        return out

    def _drain(self, tail: _Tail) -> None:
        chunk = self._read(tail)
        if chunk is not None:
            self._pending.append(chunk)

    def _open(self, tail: _Tail) -> int | None:
        try:
            fd = os.open(tail.path, os.O_RDONLY)
        except OSError:
            return None
        if os.fstat(fd).st_ino != tail.inode:
            os.close(fd)
            return None
        return fd

    def _read(self, tail: _Tail) -> Chunk | None:
        fd = tail.fd
        keep = True
        if fd is None:
            fd = self._open(tail)
            if fd is None:
                return None  # gone for now; found again by a rescan if it was renamed
            if self._fd_budget > 0:
                tail.fd, self._fd_budget = fd, self._fd_budget - 1
            else:
                keep = False
        try:
            size = os.fstat(fd).st_size
            if size < tail.offset:
                self.restarts.append((tail.path, "truncated"))
                tail.offset, tail.partial = 0, b""
                self._lines_seen[tail.inode] = 0
            if size == tail.offset:
                return None
            data = os.pread(fd, min(READ_CHUNK, size - tail.offset), tail.offset)
        except OSError:
            return None
        finally:
            if not keep:
                os.close(fd)
        tail.offset += len(data)
        data = tail.partial + data
        lines = data.split(b"\n")
        tail.partial = lines.pop()
        if len(tail.partial) > MAX_LINE:
            lines.append(tail.partial)
            tail.partial = b""
        if not lines:
            return None
        first = self._lines_seen.get(tail.inode, 0) + 1
        self._lines_seen[tail.inode] = first - 1 + len(lines)
        return Chunk(tail.path, lines, first)

    def close(self) -> None:
        """Close the files kept open."""
        for tail in self.tails.values():
            if tail.fd is not None:
                os.close(tail.fd)
                tail.fd = None

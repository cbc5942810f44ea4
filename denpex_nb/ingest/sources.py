"""Turn what a user typed (files, folders, globs, ``-``, archives) into a list of :class:`FileSpec`.

A :class:`FileSpec` is a small picklable description of one input stream: where its bytes come
from (a path, a compressed path, a zip member, or bytes already read from stdin), the name it
shows under in the ``file`` columns, and what its name says about the rank. Nothing here parses
log content: :func:`open_stream` only hands back a binary file object.
"""
from __future__ import annotations

import bz2
import glob
import gzip
import io
import lzma
import os
import stat
import re
import sys
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import BinaryIO

#: file-name endings handled by decompressing on the fly
COMPRESSIONS = {".gz": "gz", ".bz2": "bz2", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}

#: names a folder walk never treats as logs (reproducer metadata, editors, pictures ...)
_SKIP_NAMES = {"error.json", ".DS_Store"}
_SKIP_EXTS = {
    ".py", ".pyc", ".ipynb", ".html", ".htm", ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg",
    ".pdf", ".so", ".whl", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".lock", ".sh",
}
_SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints", ".hypothesis", ".pytest_cache", "node_modules"}

_GLOB_CHARS = re.compile(r"[*?\[]")

# Rank in a file name, most specific first. Each pattern is searched in the base name.
_RANK_NAME_PATTERNS = [
    re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?![\d])", re.I),        # rank3.log, comm_lib_trace_rank_3, denpex_trace_rank3
    re.compile(r"(?:^|[^a-z])trace_(\d+)$", re.I),                   # trace_3 (FR with a custom prefix)
    re.compile(r"(?:^|[^a-z])worker[-_]?(\d+)(?![\d])", re.I),      # worker-3.log
    re.compile(r"^(\d+)\.(?:log|txt|out|err)$", re.I),               # 3.log
]
_NCCL_DEBUG_FILE = re.compile(r"^nccl\.(?P<host>[^/]+?)\.(?P<pid>\d+)(?:\.log|\.txt|\.out)?$", re.I)
_ATTEMPT = re.compile(r"^attempt_\d+$")


@dataclass
class FileSpec:
    """One input stream; picklable so a worker process (or Dask) can open and parse it."""

    display: str                        # what goes in the ``file`` columns
    path: str | None = None             # file on disk (None for stdin)
    member: str | None = None           # zip member name
    compression: str | None = None      # gz, bz2, xz, zst or None
    data: bytes | None = None           # bytes already read (stdin)
    size: int = 0                       # bytes on disk (compressed size), for progress and scheduling
    rank_hint: int | None = None
    local_rank_hint: int | None = None
    pid_hint: int | None = None         # NCCL_DEBUG_FILE nccl.<host>.<pid>.log
    host_hint: str | None = None
    year: int | None = None             # from the file's mtime (year-less glog headers)
    mtime: float | None = None          # epoch seconds (lets prefixes roll December lines back a year)
    run_root: str = ""                  # files of one run share it; de-duplication stays inside a run
    explicit: bool = True               # named by the user (not found by walking a folder)

    @property
    def name(self) -> str:
        return os.path.basename(self.member or self.path or self.display)


@dataclass
class Problem:
    """An input that could not be used, with a one-line reason."""

    path: str
    problem: str
    fix: str | None = None
    missing: bool = False          # the path names nothing to read (no file, no glob match, empty folder)

    def one_line(self) -> str:
        msg = f"{self.path}: {self.problem}"
        return msg + (f" (fix: {self.fix})" if self.fix else "")


def rank_hints(path: str) -> dict:
    """What a path says about its rank: ``rank_hint``, ``local_rank_hint``, ``pid_hint``, ``host_hint``.

    ``.../attempt_<k>/<local_rank>/stdout.log`` gives a *local* rank only (torchrun --log-dir).
    """
    base = os.path.basename(path)
    stem = base
    for ext in COMPRESSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    hints: dict = {}
    m = _NCCL_DEBUG_FILE.match(stem)
    if m:
        hints["pid_hint"] = int(m.group("pid"))
        hints["host_hint"] = m.group("host")
    else:
        for pat in _RANK_NAME_PATTERNS:
            m = pat.search(stem)
            if m:
                hints["rank_hint"] = int(m.group(1))
                break
    parts = path.replace("\\", "/").split("/")
    if len(parts) >= 3 and parts[-2].isdigit() and _ATTEMPT.match(parts[-3]):
        hints["local_rank_hint"] = int(parts[-2])
    return hints


def run_root(path: str) -> str:
    """The folder of the run a file belongs to: ``<out>`` for ``<out>/attempt_0/1/stdout.log``,
    ``<out>/fr/x`` and ``<out>/trace/x`` as well as ``<out>/combined.log``."""
    d = os.path.dirname(os.path.abspath(path))
    parts = d.split(os.sep)
    if len(parts) >= 2 and parts[-1].isdigit() and _ATTEMPT.match(parts[-2]):
        parts = parts[:-2]
    elif parts and parts[-1] in ("fr", "trace", "logs", "nccl"):
        parts = parts[:-1]
    # torchrun --log-dir D/<run_id>_<rand>/attempt_k/...: the run is D/<run_id>_<rand>
    return os.sep.join(parts)


def _compression_of(name: str) -> str | None:
    low = name.lower()
    for ext, kind in COMPRESSIONS.items():
        if low.endswith(ext):
            return kind
    return None


def _mtime_year(path: str) -> int | None:
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, tz=timezone.utc).year
    except OSError:
        return None


def _walk(folder: str, problems: list | None = None) -> list[str]:
    """Regular files under ``folder``, sorted. Folders that cannot be listed and special files
    (FIFOs, sockets, devices: opening one can block forever) become :class:`Problem` rows."""
    found = []

    def unreadable(err: OSError) -> None:
        if problems is not None:
            problems.append(Problem(err.filename or folder, f"cannot list this folder: {_reason(err)}",
                                    "make it readable (chmod +rx) or pass the files inside it"))

    for root, dirs, files in os.walk(folder, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f in _SKIP_NAMES or f.startswith("."):
                continue
            ext = os.path.splitext(f)[1].lower()
            if ext in _SKIP_EXTS:
                continue
            path = os.path.join(root, f)
            special = _special_kind(path)
            if special:
                if problems is not None:
                    problems.append(Problem(path, f"{special}, not a file: skipped", None))
                continue
            found.append(path)
    return found


def _special_kind(path: str) -> str | None:
    """'a FIFO' / 'a socket' / 'a device' for special files (never opened: a read could block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None                    # a dangling link or a race: the open reports it
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _reason(err: OSError) -> str:
    return "permission denied" if isinstance(err, PermissionError) else (err.strerror or str(err)).lower()


def _spec_for_file(path: str, display: str, *, explicit: bool, year: int | None) -> FileSpec:
    hints = rank_hints(path)
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        mtime = None
    return FileSpec(display=display, path=path, compression=_compression_of(path), size=size, mtime=mtime,
                    year=year if year is not None else _mtime_year(path), run_root=run_root(path),
                    explicit=explicit, **hints)


def _zip_specs(path: str, display: str, *, explicit: bool, year: int | None) -> tuple[list[FileSpec], list[Problem]]:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError) as e:
        return [], [Problem(display, f"cannot read zip archive: {e}", "check the file is a complete .zip")]
    specs = []
    for info in infos:
        base = os.path.basename(info.filename)
        if not base or base in _SKIP_NAMES or base.startswith(".") or "__MACOSX" in info.filename:
            continue
        if os.path.splitext(base)[1].lower() in _SKIP_EXTS:
            continue
        hints = rank_hints(info.filename)
        member_year = year if year is not None else info.date_time[0]
        specs.append(FileSpec(display=f"{display}:{info.filename}", path=path, member=info.filename,
                              compression=_compression_of(info.filename), size=info.compress_size,
                              year=member_year, run_root=display + ":" + run_root(info.filename),
                              explicit=explicit, **hints))
    if not specs:
        return [], [Problem(display, "zip archive holds no log files", "pass the archive that holds the logs")]
    return specs, []


def expand(paths, *, year: int | None = None, stdin: BinaryIO | None = None) -> tuple[list[FileSpec], list[Problem]]:
    """Expand user paths into file specs, in a stable order, plus the problems met on the way."""
    specs: list[FileSpec] = []
    problems: list[Problem] = []
    seen: set[tuple] = set()

    def add(spec: FileSpec) -> None:
        key = (os.path.abspath(spec.path) if spec.path else spec.display, spec.member)
        if key not in seen:
            seen.add(key)
            specs.append(spec)

    def add_file(path: str, display: str, explicit: bool) -> None:
        if path.lower().endswith(".zip"):
            zs, zp = _zip_specs(path, display, explicit=explicit, year=year)
            for s in zs:
                add(s)
            problems.extend(zp)
        else:
            add(_spec_for_file(path, display, explicit=explicit, year=year))

    for raw in paths:
        p = os.fspath(raw)
        if p == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            data = stream.read()
            add(FileSpec(display="<stdin>", data=data, size=len(data), year=year, run_root="<stdin>"))
            continue
        if os.path.isdir(p):
            before = len(problems)
            files = _walk(p, problems)
            if not files and len(problems) == before:
                problems.append(Problem(p, "folder holds no log files",
                                        "pass the folder that holds the logs (e.g. the torchrun --log-dir)",
                                        missing=True))
            for f in files:
                add_file(f, f, explicit=False)
            continue
        if os.path.exists(p):
            special = _special_kind(p)
            if special:
                problems.append(Problem(p, f"{special}, not a file: not read",
                                        "save the stream to a file first, or pipe it in with '-'"))
                continue
            add_file(p, p, explicit=True)
            continue
        if _GLOB_CHARS.search(p):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                problems.append(Problem(p, "no file matches this pattern", "check the glob", missing=True))
            for m in matches:
                if os.path.isdir(m):
                    for f in _walk(m, problems):
                        add_file(f, f, explicit=False)
                else:
                    add_file(m, m, explicit=True)
            continue
        problems.append(Problem(p, "no such file or folder", "check the path", missing=True))
    return specs, problems


def open_stream(spec: FileSpec) -> BinaryIO:
    """A binary file object over the (decompressed) bytes of ``spec``. Raises OSError & co."""
    if spec.data is not None:
        raw: BinaryIO = io.BytesIO(spec.data)
    elif spec.member is not None:
        zf = zipfile.ZipFile(spec.path)
        raw = _ZipMember(zf, zf.open(spec.member))
    else:
        if spec.compression is None:
            return open(spec.path, "rb", buffering=0)
        raw = open(spec.path, "rb")
    kind = spec.compression
    if kind is None:
        return raw
    if kind == "gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bz2":
        return bz2.BZ2File(raw, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(raw, mode="rb")
    if kind == "zst":
        try:
            import zstandard
        except ImportError:
            raw.close()
            from ..errors import MissingDependencyError

            raise MissingDependencyError("zstandard is not installed, cannot read .zst files",
                                         fix="pip install 'denpex_nb[fast]'", where=spec.display) from None
        return _ZstdReader(zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True), raw)
    raise ValueError(f"unknown compression {kind}")


class _ZipMember(io.RawIOBase):
    """A zip member stream that also closes its archive."""

    def __init__(self, zf: zipfile.ZipFile, member):
        self._zf, self._m = zf, member

    def readable(self):
        return True

    def read(self, n=-1):
        return self._m.read(n)

    def readinto(self, b):
        data = self._m.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self):
        try:
            self._m.close()
            self._zf.close()
        finally:
            super().close()


class _ZstdReader(io.RawIOBase):
    def __init__(self, reader, raw):
        self._r, self._raw = reader, raw

    def readable(self):
        return True

    def read(self, n=-1):
        if n is None or n < 0:
            chunks = []
            while True:
                c = self._r.read(1 << 20)
                if not c:
                    return b"".join(chunks)
                chunks.append(c)
        # zstandard may return fewer bytes than asked; loop to fill like a file would
        out = []
        got = 0
        while got < n:
            c = self._r.read(n - got)
            if not c:
                break
            out.append(c)
            got += len(c)
        return b"".join(out)

    def close(self):
        try:
            self._r.close()
            self._raw.close()
        finally:
            super().close()


def read_fully(f: BinaryIO, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads (raw files, pipes, decompressors).

    A read error after some bytes arrived (a truncated .gz) is re-raised with the bytes read so
    far in ``err.partial``, so callers can keep them.
    """
    parts = []
    got = 0
    # read1 hands over what one decompression step yields, so a later error loses nothing before it
    read = getattr(f, "read1", None) or f.read
    while got < n:
        try:
            c = read(n - got)
        except Exception as e:
            e.partial = b"".join(parts)  # type: ignore[attr-defined]
            raise
        if not c:
            break
        parts.append(c)
        got += len(c)
    return parts[0] if len(parts) == 1 else b"".join(parts)

"""Turn what a user typed (files, folders, globs, ``-``, archives) into a list of :class:`FileSpec`.

A :class:`FileSpec` is a small picklable description of one input stream: where its bytes come
from (a path, a compressed path, a zip member, or bytes already read from stdin), the name it
shows under in the ``file`` columns, and what its name says about the rank. Nothing here parses
log content: :func:`open_stream` only hands back a binary file object.

Every decompressed stream is bounded (:class:`Limits`): its output stops at ``max_decompressed``
bytes, or earlier at ``max_ratio`` times its compressed size once past ``RATIO_FLOOR``; reaching a
cap, a truncated stream (gz, bz2, xz, zst: a zstd frame that never ends is detected by walking the
frame structure, as ``zstandard``'s stream reader ends silently there) and a corrupt one raise
:class:`StreamError` (an ``OSError``) after the bytes before it; :func:`read_fully` turns any
read that breaks off into :class:`ReadStopped`, which carries those bytes, so the caller keeps them. Standard input is read into memory up to
``STDIN_MEMORY`` bytes and spooled to a temporary file past that.

Compression is recognised by content (the format's magic bytes: gzip, zstd, bz2, xz, zip), so a
compressed file without the usual ending, or with a wrong one, still reads; a name that says
compressed is believed only when the content is not plain text (so corrupt data is reported as
corrupt, and a log that was decompressed but kept its ``.gz`` name reads as text).

URLs (``s3://``, ``gs://``, ``https://`` ...) expand and open through fsspec (:mod:`.remote`);
their specs carry the URL and the storage options, and every reader opens the object itself.
"""

from __future__ import annotations

import bz2
import collections
import glob
import gzip
import io
import lzma
import os
import re
import stat
import sys
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import BinaryIO

from ._text import i32, i64

#: file-name endings handled by decompressing on the fly
COMPRESSIONS = {".gz": "gz", ".bz2": "bz2", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}
_COMPRESSION_ENDS = tuple(COMPRESSIONS)

#: names a folder walk never treats as logs (reproducer metadata, editors, pictures ...)
_SKIP_NAMES = {"error.json", ".DS_Store"}
_SKIP_EXTS = {
    ".py",
    ".pyc",
    ".ipynb",
    ".html",
    ".htm",
    ".css",
    ".js",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".svg",
    ".pdf",
    ".so",
    ".whl",
    ".toml",
    ".yaml",
    ".yml",
    ".cfg",
    ".ini",
    ".lock",
    ".sh",
}
_SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints", ".hypothesis", ".pytest_cache", "node_modules"}

_GLOB_CHARS = re.compile(r"[*?\[]")

# --- caps ----------------------------------------------------------------------------------------
#
# Measured (gzip -9 / zstd -19): the recorded runs' combined.log 15x / 22x, per-rank logs 15x / 23x,
# the wild corpus and its NCCL INFO logs ~5x, a 64 MB synthetic training log 5x / 6x; a fully
# repetitive NCCL COLL stream (only opCount changes) 68x gzip, 178x zstd, 196x bz2, ~1000x xz.
# Bombs: zeros reach ~1030x with gzip (its format's ceiling) and ~31000x with zstd.

#: bytes one compressed file (or zip member) may decompress to
DEFAULT_MAX_DECOMPRESSED = 8 << 30
#: decompressed / compressed bytes allowed once the output passes RATIO_FLOOR
DEFAULT_MAX_RATIO = 2000.0
#: output below this never trips the ratio cap (a small file is harmless whatever its ratio)
RATIO_FLOOR = 64 << 20
#: bytes a structured file read whole (FR pickle / JSON, manifest, tracer JSONL) may have
DEFAULT_MAX_STRUCTURED = 512 << 20
#: standard input kept in memory up to this; past it, spooled to a temporary file
STDIN_MEMORY = 64 << 20

_ENV = {
    "max_decompressed": "DENPEX_MAX_DECOMPRESSED",
    "max_ratio": "DENPEX_MAX_RATIO",
    "max_structured": "DENPEX_MAX_STRUCTURED",
    "line_cap": "DENPEX_LINE_CAP",
}
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value) -> float:
    """``1048576``, ``"64M"``, ``"8G"``, ``"1.5k"`` -> a number (binary units; ``B``/``iB`` ignored)."""
    if isinstance(value, (int, float)):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*", str(value), re.I)
    if not m:
        raise ValueError(f"not a size: {value!r} (use bytes, or a number with K, M, G)")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def human(n: float) -> str:
    """``8589934592`` -> ``8 GiB``, ``1500`` -> ``1500 B``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def resolve_limits(options: dict | None = None) -> dict:
    """The caps a load runs under: each from ``options`` (``load(max_decompressed=...)``), else its
    environment variable (``DENPEX_MAX_DECOMPRESSED``, ``DENPEX_MAX_RATIO``,
    ``DENPEX_MAX_STRUCTURED``, ``DENPEX_LINE_CAP``; sizes such as ``64M`` are accepted), else the
    default. Raises ValueError for a value that is not a positive size."""
    from .scan import DEFAULT_LINE_CAP

    defaults = {
        "max_decompressed": DEFAULT_MAX_DECOMPRESSED,
        "max_ratio": DEFAULT_MAX_RATIO,
        "max_structured": DEFAULT_MAX_STRUCTURED,
        "line_cap": DEFAULT_LINE_CAP,
    }
    out = {}
    for name, default in defaults.items():
        value = (options or {}).get(name)
        if value is None:
            value = os.environ.get(_ENV[name]) or None
        value = default if value is None else parse_size(value)
        if not value > 0:
            raise ValueError(f"{name} must be positive, not {value!r}")
        out[name] = float(value) if name == "max_ratio" else int(value)
    return out


class StreamError(OSError):
    """A (decompressed) stream that broke off: truncated, corrupt, or past a cap. Bytes before it
    are good; :func:`read_fully` hands them over in :class:`ReadStopped`."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class CapReached(StreamError):
    """The decompressed output reached ``max_decompressed`` or the ratio cap."""


# Rank in a file name, most specific first. Each pattern is searched in the base name.
_RANK_NAME_PATTERNS = [
    re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)(?![\d])", re.I),  # rank3.log, comm_lib_trace_rank_3, denpex_trace_rank3
    re.compile(r"(?:^|[^a-z])trace_(\d+)$", re.I),  # trace_3 (FR with a custom prefix)
    re.compile(r"(?:^|[^a-z])worker[-_]?(\d+)(?![\d])", re.I),  # worker-3.log
    re.compile(r"^(\d+)\.(?:log|txt|out|err)$", re.I),  # 3.log
]
_NCCL_DEBUG_FILE = re.compile(r"^nccl\.(?P<host>[^/]+?)\.(?P<pid>\d+)(?:\.log|\.txt|\.out)?$", re.I)
_ATTEMPT = re.compile(r"^attempt_\d+$")


@dataclass
class FileSpec:
    """One input stream; picklable so a worker process (or Dask) can open and parse it."""

    display: str  # what goes in the ``file`` columns
    path: str | None = None  # file on disk (None for stdin)
    member: str | None = None  # zip member name
    compression: str | None = None  # gz, bz2, xz, zst or None
    data: bytes | None = None  # bytes already read (stdin)
    size: int = 0  # bytes on disk (compressed size), for progress and scheduling
    rank_hint: int | None = None
    local_rank_hint: int | None = None
    pid_hint: int | None = None  # NCCL_DEBUG_FILE nccl.<host>.<pid>.log
    host_hint: str | None = None
    year: int | None = None  # from the file's mtime (year-less glog headers)
    mtime: float | None = None  # epoch seconds (lets prefixes roll December lines back a year)
    run_root: str = ""  # files of one run share it; de-duplication stays inside a run
    explicit: bool = True  # named by the user (not found by walking a folder)
    temp: bool = False  # a temporary file (spooled stdin) to delete after the load
    storage_options: dict | None = None  # fsspec options for a URL ``path`` (endpoint, credentials ...)
    #: the first bytes of a local file, read once when it was found (is it a zip archive? a pickle?):
    #: None when not read (a URL, stdin, a zip member, a name ending in .zip)
    magic: bytes | None = None

    @property
    def name(self) -> str:
        """The base name the readers see, without a compression ending (``manifest.json.zst`` is a
        ``manifest.json`` to them: they get the decompressed bytes)."""
        base = os.path.basename(self.member or self.path or self.display)
        ext = next((e for e in COMPRESSIONS if base.lower().endswith(e)), None)
        return base[: -len(ext)] if ext and len(base) > len(ext) else base

    @property
    def remote(self) -> bool:
        """``path`` is a URL (read through fsspec), not a file on this machine."""
        from .remote import is_url

        return bool(self.path) and is_url(self.path)


@dataclass
class Problem:
    """An input that could not be used, with a one-line reason."""

    path: str
    problem: str
    fix: str | None = None
    missing: bool = False  # the path names nothing to read (no file, no glob match, empty folder)

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
        hints["pid_hint"] = i64(m.group("pid"))
        hints["host_hint"] = m.group("host")
    else:
        for pat in _RANK_NAME_PATTERNS:
            m = pat.search(stem)
            if m:
                hints["rank_hint"] = i32(m.group(1))
                break
    parts = path.replace("\\", "/").split("/")
    if len(parts) >= 3 and parts[-2].isdigit() and _ATTEMPT.match(parts[-3]):
        hints["local_rank_hint"] = i32(parts[-2])
    return hints


def run_root(path: str) -> str:
    """The folder of the run a file belongs to: ``<out>`` for ``<out>/attempt_0/1/stdout.log``,
    ``<out>/fr/x`` and ``<out>/trace/x`` as well as ``<out>/combined.log`` (URLs alike:
    ``s3://b/run`` for ``s3://b/run/fr/x``)."""
    from .remote import is_url

    if is_url(path):
        scheme, rest = path.split("://", 1)
        parts = rest.rstrip("/").split("/")[:-1]
        return scheme + "://" + "/".join(_run_parts(parts))
    d = os.path.dirname(os.path.abspath(path))
    return os.sep.join(_run_parts(d.split(os.sep)))


def _run_parts(parts: list[str]) -> list[str]:
    if len(parts) >= 2 and parts[-1].isdigit() and _ATTEMPT.match(parts[-2]):
        parts = parts[:-2]
    elif parts and parts[-1] in ("fr", "trace", "logs", "nccl"):
        parts = parts[:-1]
    # torchrun --log-dir D/<run_id>_<rand>/attempt_k/...: the run is D/<run_id>_<rand>
    return parts


def _compression_of(name: str) -> str | None:
    """The compression a file name says (``x.log.gz`` -> ``gz``); the content decides in the end
    (:func:`detect_compression`)."""
    low = name.lower()
    if not low.endswith(_COMPRESSION_ENDS):  # (most names: one test, not one per ending)
        return None
    for ext, kind in COMPRESSIONS.items():
        if low.endswith(ext):
            return kind
    return None


#: bytes read from the start of a stream to recognise its format
MAGIC_BYTES = 16


def sniff_compression(head: bytes) -> str | None:
    """``gz``, ``zst``, ``bz2``, ``xz`` or ``zip`` from a stream's first bytes, else None."""
    if head[:3] == b"\x1f\x8b\x08":
        return "gz"
    if head[:4] == b"\x28\xb5\x2f\xfd" or (head[:1] and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"):
        return "zst"  # a frame, or a skippable frame (0x184D2A5?)
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[3:4] and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"  # a block, or the end of an empty stream
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    return None


def _looks_plain(head: bytes) -> bool:
    """No NUL and valid UTF-8 (a character cut by the sample's end is fine): text, not a
    compressed stream."""
    sample = head[:4096]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(sample) - 3 and e.reason == "unexpected end of data"
    return True


def detect_compression(head: bytes, named: str | None) -> str | None:
    """The compression to read a stream with: its magic bytes when they name one; else what its
    name says (``named``) unless the content is plain text; else None."""
    kind = sniff_compression(head)
    if kind is not None:
        return kind
    if named is not None and not _looks_plain(head):
        return named
    return None


#: years ``load(year=)`` / ``--year`` accept: timestamps are pandas nanoseconds (they end in 2262),
#: and no PyTorch log predates 1970
YEAR_RANGE = (1970, 2261)


def _year_of(mtime: float | None) -> int | None:
    if mtime is None:
        return None
    try:
        return datetime.fromtimestamp(mtime, tz=timezone.utc).year
    except (OverflowError, OSError, ValueError):
        return None


def _skip_dir(name: str) -> bool:
    return name in _SKIP_DIRS or name.startswith(".")


def _skip_file(name: str) -> bool:
    """A folder walk never treats these as logs (metadata, pictures, code, hidden files)."""
    return name in _SKIP_NAMES or name.startswith(".") or not name or os.path.splitext(name)[1].lower() in _SKIP_EXTS


def _keep_walked(rel: str) -> bool:
    """The folder-walk rules for a path relative to the folder (``a/b/x.log``)."""
    parts = rel.split("/")
    return not any(_skip_dir(d) for d in parts[:-1]) and not _skip_file(parts[-1])


def _walk(folder: str, problems: list | None = None) -> list[str]:
    """Regular files under ``folder``, sorted. Folders that cannot be listed and special files
    (FIFOs, sockets, devices: opening one can block forever) become :class:`Problem` rows."""
    return [path for path, _ in _walk_stat(folder, problems)]


def _walk_stat(folder: str, problems: list | None = None) -> list[tuple[str, os.stat_result | None]]:
    """:func:`_walk`, each file with its ``os.stat`` (None when it failed: a dangling link, a race),
    taken once: the spec's size and time come from it (a walk of 50,000 files stat'ed each twice)."""
    found = []

    def unreadable(err: OSError) -> None:
        if problems is not None:
            problems.append(
                Problem(
                    err.filename or folder,
                    f"cannot list this folder: {_reason(err)}",
                    "make it readable (chmod +rx) or pass the files inside it",
                )
            )

    for root, dirs, files in os.walk(folder, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not _skip_dir(d))
        for f in sorted(files):
            if _skip_file(f):
                continue
            path = os.path.join(root, f)
            try:
                st = os.stat(path)
            except OSError:
                st = None  # a dangling link or a race: the open reports it
            special = _special_mode(st.st_mode) if st is not None else None
            if special:
                if problems is not None:
                    problems.append(Problem(path, f"{special}, not a file: skipped", None))
                continue
            found.append((path, st))
    return found


def _special_kind(path: str) -> str | None:
    """'a FIFO' / 'a socket' / 'a device' for special files (never opened: a read could block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # a dangling link or a race: the open reports it
    return _special_mode(mode)


def _special_mode(mode: int) -> str | None:
    """:func:`_special_kind` of a file mode."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _reason(err: OSError) -> str:
    return "permission denied" if isinstance(err, PermissionError) else (err.strerror or str(err)).lower()


def _magic(path: str) -> bytes | None:
    """The first 4 bytes of a local file (fewer when it is shorter), None when it cannot be read.
    Read once per file when it is found: whether it is a zip archive is decided on them here, and
    whether it is a pickle (:meth:`FlightRecorderReader.prepare`) from ``FileSpec.magic``."""
    try:  # a bare descriptor: a walk of 50,000 files opens each once here (a buffered file costs 2x)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        try:
            head = os.read(fd, 4)
            if 0 < len(head) < 4:  # a short read (never on a regular file; cheap to be sure)
                head += os.read(fd, 4 - len(head))
        finally:
            os.close(fd)
        return head
    except OSError:
        return None  # the open while parsing reports it


def _spec_for_file(
    path: str,
    display: str,
    *,
    explicit: bool,
    year: int | None,
    st: os.stat_result | None | bool = False,
    magic: bytes | None = None,
) -> FileSpec:
    """The spec of a local file; ``st``: its ``os.stat`` when the caller has it (None: it failed);
    ``magic``: its first bytes when read (:func:`_magic`)."""
    hints = rank_hints(path)
    if st is False:
        try:  # one stat for the size, the time and the year (a walk of 50,000 files made three each)
            st = os.stat(path)
        except OSError:
            st = None
    size, mtime = (st.st_size, st.st_mtime) if st is not None else (0, None)
    return FileSpec(
        display=display,
        path=path,
        compression=_compression_of(path),
        size=size,
        mtime=mtime,
        year=year if year is not None else _year_of(mtime),
        run_root=run_root(path),
        explicit=explicit,
        magic=magic,
        **hints,
    )


def _zip_specs(
    path: str, display: str, *, explicit: bool, year: int | None, opener=None, storage_options: dict | None = None
) -> tuple[list[FileSpec], list[Problem]]:
    """One spec per log member of the archive at ``path`` (``opener()``: a seekable binary file
    over it, for an archive in object storage; default: the local file)."""
    try:
        if opener is None:
            with zipfile.ZipFile(path) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
        else:
            with opener() as f, zipfile.ZipFile(f) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, OSError) as e:
        return [], [Problem(display, f"cannot read zip archive: {e}", "check the file is a complete .zip")]
    specs = []
    for info in infos:
        base = os.path.basename(info.filename)
        if "__MACOSX" in info.filename or _skip_file(base):
            continue
        hints = rank_hints(info.filename)
        member_year = year if year is not None else info.date_time[0]
        specs.append(
            FileSpec(
                display=f"{display}:{info.filename}",
                path=path,
                member=info.filename,
                compression=_compression_of(info.filename),
                size=info.compress_size,
                year=member_year,
                run_root=display + ":" + run_root(info.filename),
                explicit=explicit,
                storage_options=storage_options,
                **hints,
            )
        )
    if not specs:
        return [], [Problem(display, "zip archive holds no log files", "pass the archive that holds the logs")]
    return specs, []


def expand(
    paths, *, year: int | None = None, stdin: BinaryIO | None = None, storage_options: dict | None = None
) -> tuple[list[FileSpec], list[Problem]]:
    """Expand user paths into file specs, in a stable order, plus the problems met on the way.

    Local paths: files, folders (walked), globs, ``-``, zip archives (recognised by content).
    URLs (``s3://bucket/prefix/``, ``gs://...``, ``https://...``): objects, prefixes (listed
    recursively with the same rules), globs, ``.zip`` objects; ``storage_options`` go to fsspec
    (see :mod:`.remote`). A URL that cannot be listed is a :class:`Problem` with
    ``missing=True``; a URL whose protocol's library is missing raises InputError.
    """
    from .remote import expand_url, info_mtime, info_size, is_url

    specs: list[FileSpec] = []
    problems: list[Problem] = []
    seen: set[tuple] = set()

    def add(spec: FileSpec) -> None:
        where = spec.path if spec.remote else (os.path.abspath(spec.path) if spec.path else spec.display)
        key = (where, spec.member)
        if key not in seen:
            seen.add(key)
            specs.append(spec)

    def add_file(path: str, display: str, explicit: bool, st: os.stat_result | None | bool = False) -> None:
        named_zip = path.lower().endswith(".zip")
        magic = None if named_zip else _magic(path)  # one open per file: zip? (here) pickle? (FR prepare)
        if named_zip or (magic is not None and sniff_compression(magic) == "zip"):
            zs, zp = _zip_specs(path, display, explicit=explicit, year=year)
            for s in zs:
                add(s)
            problems.extend(zp)
        else:
            add(_spec_for_file(path, display, explicit=explicit, year=year, st=st, magic=magic))

    def add_url(url: str, info: dict, explicit: bool, opts: dict) -> None:
        mtime = info_mtime(info)
        add(
            FileSpec(
                display=url,
                path=url,
                compression=_compression_of(url),
                size=info_size(info),
                mtime=mtime,
                year=year if year is not None else _year_of(mtime),
                run_root=run_root(url),
                explicit=explicit,
                storage_options=opts,
                **rank_hints(url),
            )
        )

    def add_url_zip(url: str, info: dict, explicit: bool, fs, path: str, opts: dict) -> None:
        from .remote import open_raw

        probe = FileSpec(display=url, path=url, storage_options=opts)
        zs, zp = _zip_specs(
            url,
            url,
            explicit=explicit,
            year=year if year is not None else _year_of(info_mtime(info)),
            opener=lambda: open_raw(probe),
            storage_options=opts,
        )
        for s in zs:
            add(s)
        problems.extend(zp)

    for raw in paths:
        p = os.fspath(raw)
        if p == "-":
            stream = stdin if stdin is not None else sys.stdin.buffer
            add(_stdin_spec(stream, year))
            continue
        if is_url(p):
            expand_url(p, storage_options, _keep_walked, problems, add_spec=add_url, add_zip=add_url_zip)
            continue
        if p.lower().startswith("file://"):
            from urllib.parse import unquote, urlparse

            p = unquote(urlparse(p).path)
        if os.path.isdir(p):
            before = len(problems)
            files = _walk_stat(p, problems)
            if not files and len(problems) == before:
                problems.append(
                    Problem(
                        p,
                        "folder holds no log files",
                        "pass the folder that holds the logs (e.g. the torchrun --log-dir)",
                        missing=True,
                    )
                )
            for f, st in files:
                add_file(f, f, explicit=False, st=st)
            continue
        if os.path.exists(p):
            special = _special_kind(p)
            if special:
                problems.append(
                    Problem(
                        p, f"{special}, not a file: not read", "save the stream to a file first, or pipe it in with '-'"
                    )
                )
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
                elif _special_kind(m):
                    problems.append(Problem(m, f"{_special_kind(m)}, not a file: skipped", None))
                else:
                    add_file(m, m, explicit=True)
            continue
        problems.append(Problem(p, "no such file or folder", "check the path", missing=True))
    return specs, problems


def _stdin_spec(stream: BinaryIO, year: int | None) -> FileSpec:
    """Standard input as a spec: its bytes while they fit :data:`STDIN_MEMORY`, else a temporary
    file (``temp=True``; :func:`denpex_nb.ingest.load` deletes it) so memory stays bounded."""
    try:
        data = read_fully(stream, STDIN_MEMORY + 1)
    except ReadStopped as e:  # a pipe that broke: what arrived is the input
        data = e.partial
    if len(data) <= STDIN_MEMORY:
        return FileSpec(display="<stdin>", data=data, size=len(data), year=year, run_root="<stdin>")
    fd, tmp = tempfile.mkstemp(prefix="denpex-stdin-", suffix=".log")
    size = len(data)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        del data
        while True:
            try:
                block = read_fully(stream, 16 << 20)
            except ReadStopped as e:
                block = e.partial or b""
                if block:
                    fh.write(block)
                    size += len(block)
                break
            if not block:
                break
            fh.write(block)
            size += len(block)
    return FileSpec(display="<stdin>", path=tmp, size=size, year=year, run_root="<stdin>", temp=True)


def _source(spec: FileSpec) -> BinaryIO:
    """The stored bytes of ``spec``, not yet decompressed: stdin data, a local file, a remote
    object, or a zip member (decompressed by zipfile; bounded by the caller)."""
    if spec.data is not None:
        return io.BytesIO(spec.data)
    if spec.member is not None and not spec.remote:
        try:
            zf = _local_archive(spec.path)
            return _ZipMember(zf, zf.open(spec.member), owns_archive=False)
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise StreamError(_stream_message("zip", e)) from e
    if spec.remote:
        from .remote import open_raw

        raw = open_raw(spec)
    else:
        return open(spec.path, "rb", buffering=0)
    if spec.member is None:
        return raw
    try:
        zf = zipfile.ZipFile(raw)
        try:
            return _ZipMember(zf, zf.open(spec.member), raw)
        except BaseException:
            zf.close()
            raise
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raw.close()
        raise StreamError(_stream_message("zip", e)) from e
    except BaseException:
        raw.close()
        raise


def _peek(raw: BinaryIO, kind: str | None = None) -> tuple[bytes, BinaryIO]:
    """The first :data:`MAGIC_BYTES` of ``raw``, and a stream that still starts at its beginning.
    ``kind``: what ``raw`` decompresses (a zip member), for the message when that fails."""
    try:
        head = read_fully(raw, MAGIC_BYTES)
    except ReadStopped as stopped:  # the first read of the caller meets it, as without a peek
        e = stopped.cause
        if kind is not None and not isinstance(e, (StreamError, _remote_error())):
            e = StreamError(_stream_message(kind, e))
        return b"", _Failing(e, raw)
    try:
        if raw.seekable():
            raw.seek(0)
            return head, raw
    except (OSError, ValueError):
        pass
    return head, _Replay(head, raw)


def _only_member(raw: BinaryIO, display: str) -> BinaryIO:
    """A zip archive met where one stream was expected (a remote object, a zip member): its only
    file member; an archive of several files is an error that says how to read it."""
    try:
        zf = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, EOFError) as e:
        raise StreamError(_stream_message("zip", e)) from e
    try:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        if len(infos) != 1:
            raise StreamError(
                f"a zip archive of {len(infos)} files where one log was expected: pass the archive "
                f"itself (a path or URL ending in .zip) so each member is read"
            )
        return _ZipMember(zf, zf.open(infos[0]), raw)
    except BaseException:
        zf.close()
        raise


def open_stream(spec: FileSpec, limits: dict | None = None) -> BinaryIO:
    """A binary file object over the (decompressed) bytes of ``spec``. Raises OSError & co.

    The compression is detected from the content (:func:`detect_compression`). Compressed files
    and zip members are bounded by ``limits`` (see :func:`resolve_limits`): past a cap, a
    truncated end or a corrupt block, reads raise :class:`StreamError`. A remote object's read
    errors are :class:`.remote.RemoteError` (an OSError) with a one-line message.
    """
    raw = _source(spec)
    try:
        head, raw = _peek(raw, "zip" if spec.member is not None else None)
        named = _compression_of(spec.member) if spec.member is not None else spec.compression
        kind = detect_compression(head, named)
        zipped = spec.member is not None
        if kind == "zip":
            if zipped:
                raise StreamError("a zip archive inside a zip archive: unpack the outer one and pass the inner one")
            raw = _only_member(raw, spec.display)
            zipped = True
            head, raw = _peek(raw, "zip")
            kind = detect_compression(head, _compression_of(getattr(raw, "name", "") or ""))
            if kind == "zip":
                raise StreamError("a zip archive inside a zip archive: unpack the outer one and pass the inner one")
    except BaseException:
        raw.close()
        raise
    if kind is None and not zipped:
        return raw
    try:
        if kind is None:
            inner: BinaryIO = raw
        elif kind == "gz":
            inner = gzip.GzipFile(fileobj=raw, mode="rb")
        elif kind == "bz2":
            inner = bz2.BZ2File(raw, mode="rb")
        elif kind == "xz":
            inner = lzma.LZMAFile(raw, mode="rb")
        elif kind == "zst":
            try:
                import zstandard
            except ImportError:
                from ..errors import MissingDependencyError

                raise MissingDependencyError(
                    "zstandard is not installed, cannot read .zst files",
                    fix="pip install 'denpex_nb[fast]'",
                    where=spec.display,
                ) from None
            frames = _ZstdFrames()
            tee = _Tee(raw, frames.feed)
            inner = _ZstdReader(zstandard.ZstdDecompressor().stream_reader(tee, read_across_frames=True), tee, frames)
        else:
            raise ValueError(f"unknown compression {kind}")
    except BaseException:
        raw.close()
        raise
    compressed = spec.size or (len(spec.data) if spec.data is not None else 0)
    return _Bounded(inner, kind or "zip", compressed, limits or resolve_limits(), raw=raw)


class _Wrapper(io.RawIOBase):
    """A readable raw stream over another one (``_raw``): ``readinto`` goes through ``read``, and
    closing it closes what it wraps (:meth:`_close_wrapped`). The streams below only say how they read."""

    _raw = None

    def readable(self):
        return True

    def readinto(self, b):
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def _close_wrapped(self) -> None:
        if self._raw is not None:
            self._raw.close()

    def close(self):
        try:
            self._close_wrapped()
        finally:
            super().close()


class _Failing(_Wrapper):
    """A stream whose first bytes could not be read: every read raises that error."""

    def __init__(self, err: BaseException, raw):
        self._err, self._raw = err, raw

    def read(self, n=-1):
        raise self._err

    read1 = read


class _Replay(_Wrapper):
    """``head`` (already read) followed by the rest of ``raw``: a stream that cannot seek back."""

    def __init__(self, head: bytes, raw):
        self._head, self._raw = head, raw
        self.name = getattr(raw, "name", "")

    def read(self, n=-1):
        if self._head:
            if n is None or n < 0:
                data, self._head = self._head + self._raw.read(), b""
                return data
            data, self._head = self._head[:n], self._head[n:]
            if len(data) < n:  # fill the request as a file would
                data += self._raw.read(n - len(data)) or b""
            return data
        return self._raw.read(n)

    def read1(self, n=-1):
        if self._head:
            return self.read(n)
        r1 = getattr(self._raw, "read1", None) or self._raw.read
        return r1(n)


_STREAM_ERRORS = (EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, ValueError, OSError)


class _Bounded(_Wrapper):
    """A decompressed stream with a cap on its output and one error type (:class:`StreamError`)
    for everything that can go wrong while decompressing."""

    def __init__(self, inner, kind: str, compressed: int, limits: dict, raw=None):
        self._inner, self.kind, self.compressed = inner, kind, compressed
        self._raw = raw  # the compressed file: the decompressors do not close what they were given
        self.max_abs = int(limits["max_decompressed"])
        self.max_ratio = float(limits["max_ratio"])
        by_ratio = max(RATIO_FLOOR, int(self.max_ratio * max(compressed, 1)))
        self.limit = min(self.max_abs, by_ratio)
        self.by_ratio = by_ratio < self.max_abs
        self.out = 0
        self._read1 = getattr(inner, "read1", None) or inner.read

    def read(self, n=-1):
        """Up to ``n`` bytes, at most what one decompression step yields (so an error after it
        loses nothing read before): :func:`read_fully` loops."""
        if n is None or n < 0:
            n = 1 << 20
        if self.out >= self.limit:
            if self._call(1):  # more where the cap stopped us
                raise CapReached(self._cap_message())
            return b""
        data = self._call(min(n, self.limit - self.out))
        self.out += len(data)
        return data

    read1 = read

    def _call(self, n: int) -> bytes:
        try:
            return self._read1(n)
        except StreamError:
            raise
        except _remote_error() as e:  # the object store failed under the decompressor: say so, not "corrupt"
            raise StreamError(str(e)) from e
        except _STREAM_ERRORS as e:
            raise StreamError(_stream_message(self.kind, e)) from e
        except Exception as e:  # zstandard.ZstdError and other decompressor errors
            raise StreamError(f"corrupt {self.kind} data: {type(e).__name__}: {e}") from e

    def _cap_message(self) -> str:
        if self.by_ratio:
            return (
                f"decompressed output reached the ratio cap ({self.max_ratio:g}x its {human(self.compressed)} "
                f"compressed = {human(self.limit)}); the first {human(self.limit)} are kept (raise it: "
                f"load(max_ratio=...) or DENPEX_MAX_RATIO)"
            )
        return (
            f"decompressed output reached the cap of {human(self.limit)}; the first {human(self.limit)} are kept "
            f"(raise it: load(max_decompressed=...) or DENPEX_MAX_DECOMPRESSED)"
        )

    def _close_wrapped(self) -> None:
        try:
            self._inner.close()
        finally:
            if self._raw is not None and self._raw is not self._inner:
                self._raw.close()


def _remote_error() -> type:
    from .remote import RemoteError

    return RemoteError


def _stream_message(kind: str, e: BaseException) -> str:
    if isinstance(e, EOFError):
        return f"truncated {kind} stream: it ends before its end-of-stream marker"
    if isinstance(e, PermissionError):
        return "permission denied"
    text = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return f"corrupt {kind} data: {text}"


#: local zip archives this process has open, by path: their member list is read once, not once per
#: member (a zip of 2,000 logs cost 2,000 x 2,000 directory entries); a forked worker opens its own
_ARCHIVES: collections.OrderedDict = collections.OrderedDict()
_ARCHIVES_KEPT = 4


def _local_archive(path: str) -> zipfile.ZipFile:
    st = os.stat(path)  # an archive rewritten in place is a new archive
    key = (os.getpid(), path, st.st_ino, st.st_size, st.st_mtime_ns)
    zf = _ARCHIVES.get(key)
    if zf is not None:
        _ARCHIVES.move_to_end(key)
        return zf
    zf = zipfile.ZipFile(path)
    _ARCHIVES[key] = zf
    while len(_ARCHIVES) > _ARCHIVES_KEPT:
        (pid, *_), old = _ARCHIVES.popitem(last=False)
        if pid == os.getpid():
            old.close()  # a member still open keeps the file open until it is closed
    return zf


class _ZipMember(_Wrapper):
    """A zip member stream that also closes its archive (and the file the archive was opened on),
    unless the archive is shared (``owns_archive=False``: :func:`_local_archive` keeps it)."""

    def __init__(self, zf: zipfile.ZipFile, member, raw=None, owns_archive: bool = True):
        self._zf, self._m, self._raw, self._owns = zf, member, raw, owns_archive
        self.name = getattr(member, "name", "")

    def read(self, n=-1):
        return self._m.read(n)

    def read1(self, n=-1):
        return self._m.read1(n)

    def seekable(self):
        return self._m.seekable()

    def seek(self, pos, whence=0):
        return self._m.seek(pos, whence)

    def tell(self):
        return self._m.tell()

    def _close_wrapped(self) -> None:
        self._m.close()
        if self._owns:
            self._zf.close()
        if self._raw is not None:
            self._raw.close()


class _Tee(_Wrapper):
    """A raw stream that shows every byte read through it to ``see``."""

    def __init__(self, raw, see):
        self._raw, self._see = raw, see

    def read(self, n=-1):
        data = self._raw.read(n)
        if data:
            self._see(data)
        return data


class _ZstdFrames:
    """Walks the zstd frame structure (frame and block headers only; block contents are skipped by
    count) over the compressed bytes as they stream by, to tell a complete stream from a truncated
    one: ``zstandard``'s stream reader simply ends when its input ends inside a frame."""

    _MAGIC = 0xFD2FB528

    def __init__(self):
        self.state = "magic"  # magic, skip_size, fhd, header, block, skip, checksum
        self.need = 4  # bytes the current state still needs
        self.buf = b""
        self.skip = 0  # bytes of content still to skip
        self.checksum = False
        self.frames = 0
        self.bad: str | None = None

    @property
    def complete(self) -> bool:
        """The stream ended between frames (an empty stream counts as complete)."""
        return self.bad is None and self.state == "magic" and not self.buf and self.skip == 0

    def feed(self, data: bytes) -> None:
        pos, n = 0, len(data)
        while pos < n and self.bad is None:
            if self.skip:
                step = min(self.skip, n - pos)
                self.skip -= step
                pos += step
                if not self.skip:
                    self._after_skip()
                continue
            take = min(self.need - len(self.buf), n - pos)
            self.buf += data[pos : pos + take]
            pos += take
            if len(self.buf) == self.need:
                head, self.buf = self.buf, b""
                self._step(head)

    def _after_skip(self) -> None:
        if self.state == "skip":  # a skippable frame or the last block's content ended
            self.state, self.need = "magic", 4
        elif self.state == "block_data":
            self.state, self.need = "block", 3
        elif self.state == "last_data":
            if self.checksum:
                self.state, self.need = "checksum", 4
            else:
                self.state, self.need = "magic", 4
                self.frames += 1

    def _step(self, head: bytes) -> None:
        st = self.state
        if st == "magic":
            magic = int.from_bytes(head, "little")
            if magic == self._MAGIC:
                self.state, self.need = "fhd", 1
            elif magic & 0xFFFFFFF0 == 0x184D2A50:
                self.state, self.need = "skip_size", 4
            else:
                self.bad = "not a zstd frame"
        elif st == "skip_size":
            self.state, self.skip = "skip", int.from_bytes(head, "little")
            if not self.skip:
                self.state, self.need = "magic", 4
        elif st == "fhd":
            fhd = head[0]
            single = (fhd >> 5) & 1
            fcs = (0, 2, 4, 8)[fhd >> 6] or single
            did = (0, 1, 2, 4)[fhd & 3]
            self.checksum = bool((fhd >> 2) & 1)
            rest = (0 if single else 1) + did + fcs
            if rest:
                self.state, self.need = "header", rest
            else:
                self.state, self.need = "block", 3
        elif st == "header":
            self.state, self.need = "block", 3
        elif st == "block":
            bh = int.from_bytes(head, "little")
            last, btype, size = bh & 1, (bh >> 1) & 3, bh >> 3
            if btype == 3:
                self.bad = "reserved block type"
                return
            content = 1 if btype == 1 else size
            self.state = "last_data" if last else "block_data"
            self.skip = content
            if not content:
                self._after_skip()
        elif st == "checksum":
            self.state, self.need = "magic", 4
            self.frames += 1


class _ZstdReader(_Wrapper):
    """A zstd stream that reports an unfinished last frame (``zstandard`` ends silently there)."""

    def __init__(self, reader, raw, frames: _ZstdFrames | None = None):
        self._r, self._raw, self._frames = reader, raw, frames
        self._done = False

    def _next(self, n: int) -> bytes:
        c = self._r.read(n)
        if not c and self._frames is not None and not self._done:
            self._done = True
            left = 0  # input the decompressor did not take (it should take all)
            while True:
                more = self._raw.read(1 << 16)
                if not more:
                    break
                left += len(more)
            if not self._frames.complete:
                why = self._frames.bad or "its last frame is incomplete"
                raise EOFError(f"zst stream ends early ({why})")
            if left:
                raise ValueError(f"{left} bytes after the last zst frame were not read")
        return c

    def read(self, n=-1):
        if n is None or n < 0:
            chunks = []
            while True:
                c = self._next(1 << 20)
                if not c:
                    return b"".join(chunks)
                chunks.append(c)
        # zstandard may return fewer bytes than asked; loop to fill like a file would
        out = []
        got = 0
        while got < n:
            c = self._next(n - got)
            if not c:
                break
            out.append(c)
            got += len(c)
        return b"".join(out)

    def read1(self, n=-1):
        return self._next(n if n is not None and n >= 0 else 1 << 20)

    def _close_wrapped(self) -> None:
        try:
            self._r.close()
        finally:
            self._raw.close()


class ReadStopped(Exception):
    """A read that broke off: ``partial`` holds the bytes that arrived before ``cause`` (a truncated
    or corrupt stream, a cap reached, a connection lost) stopped it. Raised by :func:`read_fully`,
    so a caller can keep what was read and report why the rest was not."""

    def __init__(self, partial: bytes, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.partial = partial
        self.cause = cause


def read_fully(f: BinaryIO, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads (raw files, pipes, decompressors).

    Whatever stops a read (a truncated .gz, a cap, a lost connection) is raised as
    :class:`ReadStopped` with the bytes read so far, so callers can keep them.
    """
    parts = []
    got = 0
    # read1 hands over what one decompression step yields, so a later error loses nothing before it
    read = getattr(f, "read1", None) or f.read
    # Ask for 1 MiB first, then twice as much each time (up to 64 MiB): a raw file's read(n)
    # allocates n bytes before it reads, and n is the cap (512 MiB for a dump), which cost ~0.5 ms
    # per file, 10x the read of a 140 KB dump (16,384 of them in an incident)
    step = READ_FIRST
    while got < n:
        try:
            c = read(min(n - got, step))
        except Exception as e:  # noqa: BLE001 - every way a stream can break off is the same to a caller
            raise ReadStopped(b"".join(parts), e) from e
        if not c:
            break
        parts.append(c)
        got += len(c)
        step = min(2 * step, READ_MOST)
    return parts[0] if len(parts) == 1 else b"".join(parts)


#: :func:`read_fully`'s first request and its largest one (bytes)
READ_FIRST, READ_MOST = 1 << 20, 64 << 20

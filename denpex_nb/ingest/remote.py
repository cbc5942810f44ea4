"""Evidence in object storage and on web servers (``s3://``, ``gs://``, ``https://`` ...), through fsspec.

:func:`expand_url` turns a URL into :class:`~.sources.FileSpec` rows the way a local path is
expanded: a "folder" (a prefix) is listed recursively with the same skip rules as a folder walk,
a glob is matched, an object is one spec, a ``.zip`` object gives one spec per member. A spec
keeps the URL and the storage options, never the bytes: whoever parses it (this process, a pool
worker, a Dask worker) opens the object itself with :func:`open_raw`, which reads it in blocks
(``BLOCK_SIZE``) as the parser asks, so memory stays bounded by the same caps as for a local file
(decompression is bounded in :func:`.sources.open_stream`, whatever the source).

Credentials come from the usual places (for S3: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
/ ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, instance roles; ``AWS_ENDPOINT_URL`` for an
S3-compatible store), from ``storage_options`` given to :func:`denpex_nb.load`, and from the
``DENPEX_STORAGE_OPTIONS`` environment variable (JSON, for the CLI); explicit options win.
Connections are bounded in time (S3: ``connect_timeout`` 5 s, ``read_timeout`` 30 s, 3 attempts
unless the options or ``AWS_MAX_ATTEMPTS`` say otherwise; HTTP: 10 s to connect, 60 s per read),
so an unreachable store is a one-line error within seconds, not a hang. A web server's folder (a
URL ending in ``/``) is walked through the links on its page.

Nothing here imports fsspec, s3fs or botocore at module level: ``import denpex_nb.ingest`` stays
light, and remote support is the optional ``remote`` extra (``pip install 'denpex_nb[remote]'``).
A URL whose protocol's library is missing is an :class:`~denpex_nb.errors.InputError` naming the
install command.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
from datetime import datetime, timezone

from ..errors import InputError

#: bytes fetched per request while reading an object (the read-ahead block)
BLOCK_SIZE = 8 << 20
#: environment variable holding default storage options as JSON (``'{"anon": true}'``)
OPTIONS_ENV = "DENPEX_STORAGE_OPTIONS"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_GLOB_CHARS = re.compile(r"[*?\[]")
#: what to install for a protocol fsspec cannot load (others: the package fsspec names)
_INSTALL = {
    "s3": "pip install 'denpex_nb[remote]'",
    "s3a": "pip install 'denpex_nb[remote]'",
    "gs": "pip install gcsfs",
    "gcs": "pip install gcsfs",
    "http": "pip install aiohttp",
    "https": "pip install aiohttp",
    "az": "pip install adlfs",
    "abfs": "pip install adlfs",
    "abfss": "pip install adlfs",
}
_S3 = ("s3", "s3a")


class RemoteError(OSError):
    """Reading a remote object failed (denied, missing, unreachable ...). ``str()`` is one line
    naming the problem and the fix; it is an ``OSError`` so the parser treats it like a local
    read error (the file's ``load_error``, what was read before it kept)."""

    def __init__(self, problem: str, fix: str | None = None):
        self.problem, self.fix = problem, fix
        super().__init__(problem + (f" (fix: {fix})" if fix else ""))

    def __str__(self) -> str:
        return self.args[0]


def is_url(path) -> bool:
    """``s3://b/k``, ``https://host/x.log`` ...; not a local path, not ``file://`` (read locally)."""
    m = _URL.match(str(path))
    return bool(m) and m.group(1).lower() != "file"


def protocol_of(url: str) -> str:
    m = _URL.match(url)
    return m.group(1).lower() if m else "file"


def storage_options_for(url: str, given: dict | None = None) -> dict:
    """The options a filesystem for ``url`` is made with: ``DENPEX_STORAGE_OPTIONS`` (JSON),
    overridden by ``given``, plus bounded timeouts and the endpoint from the environment where
    neither says otherwise. Raises InputError for unreadable JSON in the environment."""
    opts: dict = {}
    env = os.environ.get(OPTIONS_ENV, "").strip()
    if env:
        try:
            opts = json.loads(env)
        except ValueError as e:
            raise InputError(
                f"{OPTIONS_ENV} is not valid JSON: {e}", fix=f"""set it like {OPTIONS_ENV}='{{"anon": true}}'"""
            ) from None
        if not isinstance(opts, dict):
            raise InputError(
                f"{OPTIONS_ENV} must be a JSON object", fix=f"""set it like {OPTIONS_ENV}='{{"anon": true}}'"""
            )
    opts.update(given or {})
    if protocol_of(url) in _S3:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and not opts.get("endpoint_url") and "endpoint_url" not in (opts.get("client_kwargs") or {}):
            opts["endpoint_url"] = endpoint
        config = dict(opts.get("config_kwargs") or {})
        config.setdefault("connect_timeout", 5)
        config.setdefault("read_timeout", 30)
        if "retries" not in config and not os.environ.get("AWS_MAX_ATTEMPTS"):
            config["retries"] = {"max_attempts": 3, "mode": "standard"}
        opts["config_kwargs"] = config
    elif protocol_of(url) in ("http", "https"):
        client = dict(opts.get("client_kwargs") or {})
        if "timeout" not in client:
            try:
                import aiohttp
            except ImportError:
                pass  # filesystem() names the install
            else:
                client["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)
                opts["client_kwargs"] = client
    return opts


def filesystem(url: str, options: dict | None = None):
    """(fsspec filesystem, path inside it) for ``url``. Raises InputError naming the package to
    install when the protocol's library (or fsspec itself) is missing."""
    proto = protocol_of(url)
    try:
        import fsspec
        from fsspec.core import url_to_fs
    except ImportError:
        raise InputError(
            f"reading {proto}:// URLs needs fsspec, which is not installed",
            fix=_INSTALL.get(proto, "pip install 'denpex_nb[remote]'"),
            where=url,
        ) from None
    try:
        fsspec.get_filesystem_class(proto)
    except ImportError as e:
        raise InputError(
            f"reading {proto}:// URLs needs a library that is not installed ({_one_line(e)})",
            fix=_INSTALL.get(proto, f"pip install the fsspec backend for {proto}://"),
            where=url,
        ) from None
    except ValueError:
        raise InputError(
            f"unknown protocol {proto}://", fix="use a local path or an s3://, gs:// or https:// URL", where=url
        ) from None
    try:
        return url_to_fs(url, **(options or {}))
    except Exception as e:  # bad options (an unknown keyword ...)
        raise InputError(
            f"cannot set up {proto}:// access: {_one_line(e)}",
            fix="check storage_options / DENPEX_STORAGE_OPTIONS",
            where=url,
        ) from None


# --- listing ---------------------------------------------------------------------------------------


def expand_url(url: str, options: dict | None, keep, problems: list, *, add_spec, add_zip) -> None:
    """Expand one URL: ``add_spec(full_url, info, explicit, options)`` for each object to read,
    ``add_zip(full_url, info, explicit, fs, path, options)`` for ``.zip`` objects, and
    :class:`~.sources.Problem` rows in ``problems`` for what cannot be listed (``missing=True``:
    the URL names nothing readable, so a load of it alone is a one-line error). ``keep(rel)``
    applies the folder-walk skip rules to a path relative to the listed prefix. Objects under a
    prefix come in ``os.walk`` order (:func:`_walk_order`)."""
    from .sources import Problem

    opts = storage_options_for(url, options)
    fs, path = filesystem(url, opts)

    def emit(p: str, info: dict, explicit: bool) -> None:
        full = fs.unstrip_protocol(p)
        if full.lower().endswith(".zip"):
            add_zip(full, info, explicit, fs, p, opts)
        else:
            add_spec(full, info, explicit, opts)

    def walk(root: str) -> int:
        """Emit the objects under ``root``; add a Problem when it holds none to read."""
        found = fs.find(root, detail=True)
        n = 0
        for p in sorted(found, key=_walk_order):
            info = found[p]
            if info.get("type") == "directory" or p.endswith("/"):
                continue
            rel = p[len(root.rstrip("/")) + 1 :] if p.startswith(root.rstrip("/") + "/") else posixpath.basename(p)
            if not keep(rel):
                continue
            emit(p, info, False)
            n += 1
        if not n:
            web = protocol_of(url) in ("http", "https")
            what = (
                ("links to no log files" if web else "holds no log files")
                if found
                else ("links to nothing" if web else "no objects under this prefix")
            )
            problems.append(
                Problem(url, what, "check the URL: pass the prefix (or page) that holds the logs", missing=True)
            )
        return n

    listing = True
    try:
        if _GLOB_CHARS.search(path):
            matches = fs.glob(path, detail=True)
            if not matches:
                problems.append(Problem(url, "no object matches this pattern", "check the glob", missing=True))
            for p in sorted(matches):
                if matches[p].get("type") == "directory":
                    walk(p)
                else:
                    emit(p, matches[p], True)
            return
        if url.endswith("/"):  # a prefix (or a web server's page of links): list it
            walk(path)
            return
        listing = False
        info = fs.info(path)
        listing = True
        if info.get("type") == "directory":
            walk(path)
        else:
            emit(path, info, True)
    except InputError:
        raise
    except Exception as e:
        problem, fix = describe(e, url, fs, listing=listing)
        problems.append(Problem(url, problem, fix, missing=True))


def _walk_order(path: str) -> list:
    """The order ``os.walk`` gives a local folder (sorted, a folder's files before its subfolders),
    so a run in storage loads in the same order as its local copy (de-duplication keeps the first)."""
    parts = path.split("/")
    return [(1, d) for d in parts[:-1]] + [(0, parts[-1])]


def info_mtime(info: dict) -> float | None:
    """Modification time (epoch seconds) from an fsspec info dict, whatever the backend calls it."""
    for key in ("LastModified", "mtime", "last_modified", "updated", "modified", "created"):
        v = info.get(key)
        if v is None:
            continue
        try:
            if isinstance(v, datetime):
                return (v if v.tzinfo else v.replace(tzinfo=timezone.utc)).timestamp()
            if isinstance(v, (int, float)):
                return float(v)
            return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            continue
    return None


def info_size(info: dict) -> int:
    try:
        return int(info.get("size") or info.get("Size") or 0)
    except (TypeError, ValueError):
        return 0


# --- reading ---------------------------------------------------------------------------------------


def open_raw(spec) -> RemoteFile:
    """A raw binary stream over the object ``spec.path`` (a URL), read in ``BLOCK_SIZE`` blocks.
    Every failure, at open or mid-read, is a :class:`RemoteError` with a one-line message."""
    try:
        fs, path = filesystem(spec.path, spec.storage_options)
    except InputError as e:
        raise RemoteError(e.problem, e.fix) from None
    try:
        f = fs.open(path, "rb", block_size=BLOCK_SIZE, cache_type="readahead")
    except Exception as e:
        raise RemoteError(*describe(e, spec.path, fs)) from None
    return RemoteFile(f, spec.path, fs)


class RemoteFile(io.RawIOBase):
    """An fsspec file whose errors are :class:`RemoteError` (seekable, for zip members)."""

    def __init__(self, f, url: str, fs):
        self._f, self._url, self._fs = f, url, fs

    def _guard(self, call, *args):
        try:
            return call(*args)
        except RemoteError:
            raise
        except Exception as e:
            raise RemoteError(*describe(e, self._url, self._fs)) from None

    def readable(self):
        return True

    def seekable(self):
        return True

    def read(self, n=-1):
        return self._guard(self._f.read, -1 if n is None else n)

    read1 = read

    def readinto(self, b):
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def seek(self, pos, whence=0):
        return self._guard(self._f.seek, pos, whence)

    def tell(self):
        return self._f.tell()

    def close(self):
        try:
            self._f.close()
        except Exception:
            pass
        finally:
            super().close()


# --- errors ----------------------------------------------------------------------------------------

_UNREACHABLE = (
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "ClientOSError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "gaierror",
    "ConnectError",
    "ProxyConnectionError",
    "SSLError",
    "ClientConnectorDNSError",
)
_TIMEOUT = ("ReadTimeoutError", "FSTimeoutError", "TimeoutError", "ServerTimeoutError")
_NO_CREDENTIALS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "CredentialRetrievalError",
    "DefaultCredentialsError",
    "RefreshError",
)
_BAD_CREDENTIALS = (
    "InvalidAccessKeyId",
    "does not exist in our records",
    "SignatureDoesNotMatch",
    "signature we calculated does not match",
    "ExpiredToken",
    "InvalidToken",
    "security token",
)


def describe(err: BaseException, url: str, fs=None, *, listing: bool = False) -> tuple[str, str | None]:
    """(problem, fix) for an exception from fsspec / s3fs / botocore / aiohttp, one line each."""
    proto = protocol_of(url)
    names = {c.__name__ for c in type(err).__mro__}
    text = _one_line(err)
    where = _endpoint(fs, url)
    creds_fix = _credentials_fix(proto)
    if names & set(_NO_CREDENTIALS):
        return f"no credentials found for {proto}://", creds_fix
    if names & set(_UNREACHABLE) or (
        isinstance(err, OSError) and getattr(err, "errno", None) in (111, 113, 101, -2, -3)
    ):
        return (
            f"cannot reach the store at {where}: {text}",
            "check the network and the endpoint"
            + (" (AWS_ENDPOINT_URL, or storage_options={'endpoint_url': ...})" if proto in _S3 else ""),
        )
    if names & set(_TIMEOUT):
        return (
            f"the store at {where} did not answer in time: {text}",
            "check the network; raise the timeouts with storage_options (config_kwargs={'read_timeout': ...})"
            if proto in _S3
            else "check the network",
        )
    if isinstance(err, PermissionError):
        if any(s.lower() in text.lower() for s in _BAD_CREDENTIALS):
            return f"the store rejected the credentials: {text}", creds_fix
        what = "to list this location" if listing else "to read it"
        return (
            f"access denied: {text}",
            f"ask for permission {what}, or use credentials that have it ({_cred_vars(proto)})",
        )
    if isinstance(err, FileNotFoundError):
        low = text.lower()
        if "bucket" in low and ("not exist" in low or "nosuchbucket" in low):
            bucket = url.split("://", 1)[1].split("/", 1)[0]
            return (
                f"no such bucket {bucket!r}",
                "check the bucket name, and that the endpoint/account it lives in is the one configured",
            )
        return (
            "no such object or prefix" if proto in _S3 + ("gs", "gcs") else "not found",
            "check the URL (list the parent prefix to see what is there)",
        )
    if isinstance(err, IsADirectoryError):
        return "is a folder (a prefix), not an object", "pass it with a trailing / to read everything under it"
    return f"{type(err).__name__}: {text}", None


def _credentials_fix(proto: str) -> str:
    if proto in _S3:
        return (
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or for a public bucket "
            """storage_options={'anon': True} / DENPEX_STORAGE_OPTIONS='{"anon": true}'"""
        )
    if proto in ("gs", "gcs"):
        return "set GOOGLE_APPLICATION_CREDENTIALS, or storage_options={'token': 'anon'} for a public bucket"
    return "pass credentials in storage_options / DENPEX_STORAGE_OPTIONS"


def _cred_vars(proto: str) -> str:
    return "AWS_PROFILE / AWS_ACCESS_KEY_ID" if proto in _S3 else "storage_options"


def _endpoint(fs, url: str) -> str:
    ep = getattr(fs, "endpoint_url", None) if fs is not None else None
    if not ep and fs is not None:
        ep = (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url")
    if ep:
        return str(ep)
    if protocol_of(url) in ("http", "https"):
        return url.split("/", 3)[2] if url.count("/") >= 2 else url
    return f"the default {protocol_of(url)}:// endpoint"


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."

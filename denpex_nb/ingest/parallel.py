"""Run :func:`~denpex_nb.ingest.parse.parse_file` over many files: serially, in a process pool, or on Dask.

Small inputs parse serially (a pool costs more to start than it saves). Large multi-file inputs
use a process pool of ``min(files, cpus)`` workers, biggest files first so the pool stays busy,
small files grouped into tasks (:func:`_chunks`) so a thousand dumps are not a thousand round trips.
Before any file is parsed, each file reader with a ``prepare(specs)`` method sees the whole input
list (:func:`prepare_readers`): what a reader loads once there (the Flight Recorder reader's
compiled decoder) is inherited by forked workers.

``jobs="dask"`` parses on a ``dask.distributed`` cluster (:func:`_run_dask`): the client passed as
``dask_client=`` (a ``distributed.Client`` or a scheduler address), else the scheduler named by
``DENPEX_DASK_SCHEDULER`` (which also sends loads with ``jobs=None`` there), else the current
client of this process, else a temporary in-process cluster. Tasks carry file specs, never file
bytes: each worker opens its files (local paths it can see, or objects in storage) itself. Results
are gathered as they complete and each future is released once gathered, so the cluster drops its
copy while the client keeps one. A scheduler that cannot be reached, a cluster that goes away or
stays without workers for ``DENPEX_DASK_TIMEOUT`` seconds (default 10), and a worker that keeps
dying on a file are one-line :class:`~denpex_nb.errors.DenpexError` s naming the fix, never a hang.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

from ..errors import DenpexError, UsageError, require
from .assemble import merge_batches
from .parse import FileResult, parse_file
from .sources import FileSpec

#: below this much input, parallel start-up costs more than it saves
PARALLEL_MIN_BYTES = 64 << 20


#: scheduler address (``tcp://host:8786``) for ``jobs="dask"``; set, it also sends ``jobs=None`` loads there
SCHEDULER_ENV = "DENPEX_DASK_SCHEDULER"
#: seconds to connect to a scheduler, and that a cluster may stay unreachable or without workers
TIMEOUT_ENV = "DENPEX_DASK_TIMEOUT"
DEFAULT_DASK_TIMEOUT = 10.0


def choose_jobs(specs: list[FileSpec], jobs) -> int | str:
    if jobs == "dask" or (jobs is None and os.environ.get(SCHEDULER_ENV, "").strip()):
        return "dask"
    if isinstance(jobs, str):
        raise UsageError(f"jobs={jobs!r} is not understood", fix="use an int, None or 'dask'")
    if jobs is not None:
        if int(jobs) < 1:
            raise UsageError(f"jobs={jobs} must be at least 1")
        return max(1, min(int(jobs), len(specs) or 1))
    total = sum(s.size for s in specs)
    if len(specs) < 2 or total < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(len(specs), os.cpu_count() or 1))


def _context():
    methods = mp.get_all_start_methods()
    # fork is cheap (no re-import of pandas); fall back to the platform default elsewhere
    return mp.get_context("fork") if "fork" in methods else mp.get_context()


def run_all(
    specs: list[FileSpec],
    options: dict,
    jobs,
    on_bytes: Callable[[int], None] | None = None,
    on_file: Callable[[FileSpec], None] | None = None,
    dask_client=None,
) -> list[FileResult]:
    """Parse every spec; results come back in input order. ``dask_client`` (a
    ``distributed.Client`` or a scheduler address) implies ``jobs="dask"``."""
    if dask_client is not None:
        if jobs not in (None, "dask"):
            raise UsageError(f"dask_client= was given with jobs={jobs!r}", fix="drop jobs=, or pass jobs='dask'")
        jobs = "dask"
    n = choose_jobs(specs, jobs)
    prepare_readers(specs)
    if n == "dask":
        return _run_dask(specs, options, on_bytes, on_file, dask_client)
    if n == 1:
        results = []
        for spec in specs:
            results.append(parse_file(spec, options, on_bytes=on_bytes))
            if on_file:
                on_file(spec)
        return results
    results: list[FileResult | None] = [None] * len(specs)
    with ProcessPoolExecutor(max_workers=n, mp_context=_context()) as pool:
        futures = {
            pool.submit(_parse_chunk, [specs[i] for i in chunk], options, True): chunk
            for chunk in _chunks(list(range(len(specs))), specs, n)
        }
        try:
            for fut in as_completed(futures):
                for i, result in zip(futures[fut], fut.result()):
                    results[i] = result
                    if on_bytes:
                        on_bytes(specs[i].size)
                    if on_file:
                        on_file(specs[i])
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return results  # type: ignore[return-value]


#: a task holds at most this many bytes of input (a big file goes alone)
CHUNK_BYTES = 32 << 20


def _chunks(order: list[int], specs: list[FileSpec], workers: int) -> list[list[int]]:
    """Group files into tasks: runs of consecutive entries of ``order``, up to 64 small files per
    task, so 1024 Flight Recorder dumps on 2 workers cost 16 round trips to the pool instead of
    1024, yet each worker still gets several tasks (>= 4) to balance the load. Tasks go out biggest
    first (a big file goes alone), so the pool stays busy. The process pool passes the input order,
    so a task's files are consecutive inputs and their rows can be merged in the worker
    (:func:`_parse_chunk`) and still come back in input order."""
    per_task = max(1, min(64, len(order) // (workers * 4)))
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in order:
        if current and (len(current) >= per_task or size + specs[i].size > CHUNK_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(i)
        size += specs[i].size
    if current:
        chunks.append(current)
    return sorted(chunks, key=lambda c: -sum(specs[i].size for i in c))


def _parse_chunk(specs: list[FileSpec], options: dict, merge: bool = False) -> list[FileResult]:
    """Parse a task's files. With ``merge`` (the files are consecutive inputs), their events
    batches are merged into the first readable file's result (:func:`.assemble.merge_batches`,
    when every column merges exactly): the parent then concatenates one part per task instead of
    one per file (its per-part work was ~0.5 s for 1024 dumps), in the same row order."""
    results = [parse_file(spec, options) for spec in specs]
    holders = [r for r in results if not r.fatal and r.frames.get("events")]
    if merge and len(holders) > 1:
        merged = merge_batches("events", [b for r in holders for b in r.frames["events"]])
        if len(merged) == 1:
            holders[0].frames["events"] = merged
            for r in holders[1:]:
                r.frames["events"] = []
    return results


def _parse_chunk_there(specs: list[FileSpec], options: dict, merge: bool = False) -> list[FileResult]:
    """A Dask task: the worker process was not forked from the client, so what
    :func:`prepare_readers` chose or loaded there is not here. The readers look at this task's
    files first (the Flight Recorder reader then loads its compiled decoder for a task of many
    small dumps, which alone would each go through the unpickler, ~10x slower). With ``merge``
    (the task's files are consecutive inputs) their events batches come back merged, as from the
    process pool: one part per column and task to send and to concatenate, not one per file."""
    prepare_readers(specs)
    return _parse_chunk(specs, options, merge)


def prepare_readers(specs: list[FileSpec]) -> None:
    """Give every file reader that wants it (a ``prepare(specs)`` method) a look at all inputs
    before any is parsed and before the pool forks, so what it loads once (a compiled decoder) is
    inherited by the workers. What to prepare, and whether at all, is the reader's business."""
    from .base import file_readers

    for reader in file_readers():
        prepare = getattr(reader, "prepare", None)
        if prepare is not None:
            prepare(specs)


def dask_timeout() -> float:
    """Seconds to connect to a scheduler, and that a cluster may stay gone or workerless mid-load."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_DASK_TIMEOUT
    except ValueError:
        raise UsageError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds", fix=f"set {TIMEOUT_ENV}=30") from None
    return value if value > 0 else DEFAULT_DASK_TIMEOUT


_DASK_FIX = (
    "check that the scheduler and its workers are up (dask scheduler / dask worker) and that {env}, "
    "dask_client= or --scheduler name it, then load again; or load without jobs='dask'"
)


@contextlib.contextmanager
def dask_client(given=None, timeout: float | None = None):
    """The ``distributed.Client`` a load runs on, as ``(client, where)``: ``given`` (a Client, or a
    scheduler address), else ``DENPEX_DASK_SCHEDULER``, else this process' current client, else a
    temporary in-process cluster (closed afterwards, as is a client made for an address)."""
    distributed = require("distributed", "dask")
    timeout = dask_timeout() if timeout is None else timeout
    if given is not None and not isinstance(given, str):
        if not hasattr(given, "submit"):
            raise UsageError(
                f"dask_client={given!r} is neither a distributed.Client nor a scheduler address",
                fix="pass a distributed.Client or 'tcp://host:8786'",
            )
        yield given, _where(given)
        return
    address = given or os.environ.get(SCHEDULER_ENV, "").strip() or None
    if address is not None:
        _check_address(address, distributed)
        try:
            client = distributed.Client(address, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise DenpexError(
                f"cannot reach the Dask scheduler at {address}: {_one_line(e)}", fix=_DASK_FIX.format(env=SCHEDULER_ENV)
            ) from None
        try:
            yield client, address
        finally:
            _quietly(client.close, timeout=min(timeout, 10))
        return
    try:
        yield distributed.default_client(), None
        return
    except ValueError:  # no client in this process: a small temporary one
        pass
    cluster = distributed.LocalCluster(
        n_workers=1, threads_per_worker=max(1, min(4, os.cpu_count() or 1)), processes=False, dashboard_address=":0"
    )
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client, None
    finally:
        _quietly(client.close)
        _quietly(cluster.close)


def _check_address(address: str, distributed) -> None:
    """Refuse what is not a scheduler address before a Client is made for it: a Client that fails
    to parse its address is left half-built and prints a traceback when it is collected."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address, strict=False)
        if scheme in ("tcp", "tls", "ws", "wss"):
            host, port = parse_host_port(location)
            if not host or any(c.isspace() for c in host) or not port:
                raise ValueError("no host or no port")
    except (ValueError, TypeError) as e:
        raise UsageError(
            f"{address!r} is not a Dask scheduler address ({_one_line(e)})",
            fix=f"give one like tcp://host:8786 (--scheduler, dask_client= or {SCHEDULER_ENV})",
        ) from None


def _run_dask(specs: list[FileSpec], options: dict, on_bytes, on_file, given=None) -> list[FileResult]:
    """Parse on a Dask cluster: one task per group of files (:func:`_chunks`), the files' specs as
    its input; results gathered as they complete (``as_completed``) and each future released
    right after, so no result is held twice. Specs only this machine can read (standard input,
    its spooled copy) are parsed here meanwhile."""
    distributed = require("distributed", "dask")
    results: list[FileResult | None] = [None] * len(specs)
    here = [i for i, s in enumerate(specs) if s.data is not None or s.temp]
    there = [i for i, s in enumerate(specs) if not (s.data is not None or s.temp)]  # input order: see _chunks
    timeout = dask_timeout()
    with dask_client(given, timeout) as (client, where):
        workers = max(1, len(_workers(client)))
        tag = uuid.uuid4().hex[:12]
        pending = {}
        for k, chunk in enumerate(_chunks(there, specs, workers)):
            consecutive = all(b == a + 1 for a, b in zip(chunk, chunk[1:]))  # no stdin file between them
            fut = client.submit(
                _parse_chunk_there,
                [specs[i] for i in chunk],
                options,
                consecutive,
                pure=False,
                key=f"denpex-parse-{tag}-{k}",
            )
            pending[fut] = chunk
        try:
            for i in here:
                results[i] = parse_file(specs[i], options, on_bytes=on_bytes)
                if on_file:
                    on_file(specs[i])
            _gather(client, where, pending, specs, results, on_bytes, on_file, timeout, distributed)
        finally:
            for fut in pending:  # what an error left behind
                with contextlib.suppress(Exception):
                    fut.release()
            pending.clear()
    return results  # type: ignore[return-value]


#: seconds between looks at the cluster while no result is ready
_POLL = 0.05


def _gather(client, where, pending: dict, specs, results, on_bytes, on_file, timeout: float, distributed) -> None:
    """Take results as they complete, release each future, watch the cluster meanwhile."""
    total = sum(len(chunk) for chunk in pending.values())
    done = 0  # files gathered
    ac = distributed.as_completed(list(pending), loop=client.loop)
    trouble_since: float | None = None
    while not ac.is_empty():
        batch = ac.next_batch(block=False)
        if not batch:
            problem = _cluster_problem(client)
            if problem is None:
                trouble_since = None
            else:
                trouble_since = trouble_since or time.monotonic()
                if problem == "closed" or time.monotonic() - trouble_since > timeout:
                    raise _gone(
                        where,
                        done,
                        total,
                        f"the client is {client.status}"
                        if problem == "closed"
                        else f"{problem} (for {timeout:g} s, {TIMEOUT_ENV})",
                    )
            time.sleep(_POLL)
            continue
        for fut in batch:
            chunk = pending.pop(fut)
            try:
                part = fut.result(timeout=max(timeout, 300))
            except Exception as e:
                raise _task_error(e, where, done, total, [specs[i] for i in chunk]) from None
            finally:
                fut.release()
            del fut
            for i, result in zip(chunk, part):
                results[i] = result
                if on_bytes:
                    on_bytes(specs[i].size)
                if on_file:
                    on_file(specs[i])
            del part
            done += len(chunk)


def _cluster_problem(client) -> str | None:
    """None while the cluster looks able to finish the load, else what is wrong."""
    status = getattr(client, "status", "running")
    if status in ("closed", "closing"):
        return "closed"
    if status != "running":
        return f"the connection to the scheduler is lost (client {status})"
    if not _workers(client):
        return "the cluster has no workers"
    return None


def _workers(client) -> dict:
    try:
        return (client.scheduler_info() or {}).get("workers") or {}
    except Exception:
        return {}


def _task_error(e: BaseException, where, done: int, total: int, chunk: list[FileSpec]) -> BaseException:
    """A failed task as the error the caller should see: the parser's own exception as is (strict
    mode), the cluster's failures as one line with the fix."""
    names = {c.__name__ for c in type(e).__mro__}
    files = ", ".join(s.display for s in chunk[:3]) + (f" and {len(chunk) - 3} more" if len(chunk) > 3 else "")
    if "KilledWorker" in names:
        return DenpexError(
            f"Dask workers died while parsing {files}: {_one_line(e)}",
            fix="give the workers more memory (a file needs up to its line and decompression caps), "
            "lower the caps (max_decompressed=, line_cap=), or load those files without jobs='dask'",
        )
    if names & {"CancelledError", "FutureCancelledError", "CommClosedError", "TimeoutError", "OSError"} or isinstance(
        e, (OSError, TimeoutError)
    ):
        return _gone(where, done, total, _one_line(e))
    return e


def _gone(where, done: int, total: int, why: str) -> DenpexError:
    at = f" at {where}" if where else ""
    return DenpexError(
        f"the Dask cluster{at} went away mid-load ({done} of {total} files parsed): {why}",
        fix=_DASK_FIX.format(env=SCHEDULER_ENV),
    )


def _where(client) -> str | None:
    try:
        return client.scheduler.address
    except Exception:
        return None


def _quietly(close, **kw) -> None:
    with contextlib.suppress(Exception):
        close(**kw)


def _one_line(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."

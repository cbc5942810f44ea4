"""Run :func:`~denpex_nb.ingest.parse.parse_file` over many files: serially, in a process pool, or on Dask.

Small inputs parse serially (a pool costs more to start than it saves). Large multi-file inputs
use a process pool of ``min(files, cpus)`` workers, biggest files first so the pool stays busy,
small files grouped into tasks (:func:`_chunks`) so a thousand dumps are not a thousand round trips.
``jobs="dask"`` submits the same pure function to the current Dask client (or Dask's default
scheduler), for when one machine is not enough. Before any file is parsed, each file reader with a
``prepare(specs)`` method sees the whole input list (:func:`prepare_readers`): what a reader loads
once there (the Flight Recorder reader's compiled decoder) is inherited by forked workers.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

from ..errors import UsageError, require
from .parse import FileResult, parse_file
from .sources import FileSpec

#: below this much input, parallel start-up costs more than it saves
PARALLEL_MIN_BYTES = 64 << 20


def choose_jobs(specs: list[FileSpec], jobs) -> int | str:
    if jobs == "dask":
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


def run_all(specs: list[FileSpec], options: dict, jobs, on_bytes: Callable[[int], None] | None = None,
            on_file: Callable[[FileSpec], None] | None = None) -> list[FileResult]:
    """Parse every spec; results come back in input order."""
    n = choose_jobs(specs, jobs)
    prepare_readers(specs)
    if n == "dask":
        return _run_dask(specs, options, on_file)
    if n == 1:
        results = []
        for spec in specs:
            results.append(parse_file(spec, options, on_bytes=on_bytes))
            if on_file:
                on_file(spec)
        return results
    order = sorted(range(len(specs)), key=lambda i: -specs[i].size)
    results: list[FileResult | None] = [None] * len(specs)
    with ProcessPoolExecutor(max_workers=n, mp_context=_context()) as pool:
        futures = {pool.submit(_parse_chunk, [specs[i] for i in chunk], options): chunk
                   for chunk in _chunks(order, specs, n)}
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
    """Group files (biggest first) into tasks: up to 64 small files per task, so 1024 Flight
    Recorder dumps on 2 workers cost 16 round trips to the pool instead of 1024, yet each worker
    still gets several tasks (>= 4) to balance the load."""
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
    return chunks


def _parse_chunk(specs: list[FileSpec], options: dict) -> list[FileResult]:
    return [parse_file(spec, options) for spec in specs]


def prepare_readers(specs: list[FileSpec]) -> None:
    """Give every file reader that wants it (a ``prepare(specs)`` method) a look at all inputs
    before any is parsed and before the pool forks, so what it loads once (a compiled decoder) is
    inherited by the workers. What to prepare, and whether at all, is the reader's business."""
    from .base import file_readers

    for reader in file_readers():
        prepare = getattr(reader, "prepare", None)
        if prepare is not None:
            prepare(specs)


def _run_dask(specs: list[FileSpec], options: dict, on_file) -> list[FileResult]:
    dask = require("dask", "dask")
    delayed = dask.delayed(parse_file)
    tasks = [delayed(s, options) for s in specs]
    results = list(dask.compute(*tasks))
    if on_file:
        for s in specs:
            on_file(s)
    return results

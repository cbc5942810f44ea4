"""The crash-proof campaign both fuzzers run (``bench_fuzz.py`` on logs, ``bench_fuzz_pickles.py`` on dumps).

Cases run in worker subprocesses, a chunk each, under an address-space cap. A worker writes the
index of the case it is on to a progress file before running it, so a worker that dies or hangs
is a crash *of that case*: the chunk is run again around it in fresh workers (the dead one took
its results with it). The parent drives the chunks from ``workers`` threads.

A fuzzer supplies: its worker command (``worker_args``), what to record of a crashed case
(``on_crash``), and, in the worker, a function running one case (``run_one``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

#: worker processes use one thread each: the campaign's parallelism is its workers
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


def run_cases(start: int, count: int, progress_file: str, run_one: Callable[[int], dict], limit_as: int) -> None:
    """In a worker: run cases [start, start + count) with ``run_one(i)`` (a dict with at least
    ``kind`` and ``bytes``), add time and peak RSS to each, print them as one JSON line."""
    resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    results = []
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(progress_file, "w") as prog:
        for i in range(start, start + count):
            prog.seek(0)
            prog.write(f"{i:012d}\n")
            prog.flush()
            t = time.perf_counter()
            got = run_one(i)
            got["s"] = round(time.perf_counter() - t, 4)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            got.update(i=i, rss_mb=round(rss / 1024, 1), rss_grew=rss > rss_before)
            rss_before = rss
            results.append(got)
    sys.stdout.write(json.dumps(results) + "\n")


def run_chunk(
    worker_args: Callable[[int, int, str], list[str]],
    on_crash: Callable[[int, object, str], dict],
    start: int,
    count: int,
    timeout: float,
) -> tuple[list[dict], list[dict]]:
    """One worker over cases [start, start + count): (case results, []) when it finishes, or
    ([], [``on_crash(case, returncode, stderr)``]) when it dies or hangs."""
    with tempfile.NamedTemporaryFile("w+", delete=False, suffix=".progress") as pf:
        progress = pf.name
    env = dict(os.environ, **WORKER_ENV)
    try:
        run = subprocess.run(
            worker_args(start, count, progress), capture_output=True, text=True, timeout=timeout, env=env
        )
        rc, out, err = run.returncode, run.stdout, run.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", "", e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    try:
        bad = int(Path(progress).read_text().strip() or start)
    except (OSError, ValueError):
        bad = start
    os.unlink(progress)
    if rc == 0:
        return json.loads(out.strip().splitlines()[-1]), []
    return [], [on_crash(bad, rc, err)]


def run_chunk_complete(run_one_chunk: Callable[[int, int], tuple[list[dict], list[dict]]], start: int, count: int):
    """A chunk; after a crash at case k, the cases before k run again in a fresh worker and the
    chunk goes on after k. Returns (results, crashes)."""
    results, crashes = [], []
    pending = [(start, count)]
    while pending:
        s, c = pending.pop()
        r, cr = run_one_chunk(s, c)
        if cr:
            bad = cr[0]["i"]
            crashes.append(cr[0])
            if bad > s:
                pending.append((s, bad - s))
            if bad + 1 < s + c:
                pending.append((bad + 1, s + c - bad - 1))
        else:
            results.extend(r)
    return results, crashes


def drive(
    run_one_chunk: Callable[[int, int], tuple[list[dict], list[dict]]], cases: int, chunk: int, workers: int
) -> tuple[list[dict], list[dict], float]:
    """All chunks of ``cases`` from ``workers`` threads, with a progress line now and then.
    Returns (results, crashes, wall seconds)."""
    chunks = [(s, min(chunk, cases - s)) for s in range(0, cases, chunk)]
    results: list[dict] = []
    crashes: list[dict] = []
    lock = threading.Lock()
    todo = list(chunks)
    t0 = time.perf_counter()

    def one_thread():
        while True:
            with lock:
                if not todo:
                    return
                s, c = todo.pop(0)
            r, cr = run_chunk_complete(run_one_chunk, s, c)
            with lock:
                results.extend(r)
                crashes.extend(cr)
                done = len(results) + len(crashes)
                if len(chunks) > 4 and done % (chunk * max(1, len(chunks) // 20)) < chunk:
                    print(f"  {done}/{cases} cases, {time.perf_counter() - t0:.0f} s", flush=True)

    threads = [threading.Thread(target=one_thread) for _ in range(max(1, workers))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, crashes, time.perf_counter() - t0

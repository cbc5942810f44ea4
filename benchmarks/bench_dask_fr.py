"""A Flight Recorder incident of many ranks on a dask.distributed cluster, beside one process.

    python benchmarks/bench_dask_fr.py                                # 1024, 4096, 16384 ranks x 200 entries
    python benchmarks/bench_dask_fr.py --ranks 256,1024 --repeat 1   # quick

For each size: synthetic dumps (``testing.frcompare.write_synthetic_dumps``, one planted size
mismatch at rank 17's last collective), then, alternating, median of ``--repeat``:

* ``single_s``: ``denpex-nb diagnose DIR --json`` in a fresh process (its own process pool, the
  default ``jobs``), as a user runs it on one machine;
* ``cluster_s``: ``denpex-nb diagnose DIR --json --scheduler ADDR`` in a fresh process against a
  ``LocalCluster`` of ``--workers`` worker processes (one thread each) started before the clock,
  as an existing cluster would be: the workers open the files, parse them into the events'
  column batches, merge a task's batches into one (a task is a run of consecutive files) and
  send that back; the client assembles the incident and runs the diagnosis.

Both must give the same verdict, culprit and seq (``same_diagnosis``), and the same whole JSON
(``same_json``, its digest kept). Beside each wall time: the CPU seconds of the CLI process (with
its process pool) and, for the cluster, of the workers, and the 1-minute load average at each
start: on a shared machine the wall figure alone says little. Per worker, the peak RSS of its process
(``VmHWM``, after the cluster runs) is reported: what the worker held at most while it parsed
its tasks (a task is at most 64 files or 32 MB of input, ``parallel.CHUNK_BYTES``). Writes
benchmarks/results/bench_dask_fr.json. Bar (issue 17): 16,384 ranks on 2 workers < 60 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from denpex_nb.testing.frcompare import write_synthetic_dumps  # noqa: E402


def children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far (a CLI run and the
    process pool it waited for)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cli(folder: Path, scheduler: str | None) -> tuple[float, float, dict | None, str]:
    """(wall s, CPU s of the CLI process and its pool, the JSON, stderr's tail) of one run."""
    cmd = [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(folder), "--json"]
    if scheduler:
        cmd += ["--scheduler", scheduler]
    cpu = children_cpu()
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    cpu = children_cpu() - cpu
    try:
        out = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        out = None
    return wall, cpu, out, proc.stderr.strip()[-300:]


def key(out: dict | None):
    if out is None:
        return None
    first = out["findings"][0] if out.get("findings") else {}
    return out["verdict"], out["culprit_ranks"], first.get("seq")


def _worker_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def workers_cpu(client) -> float:
    """CPU seconds the cluster's worker processes have used so far, all together."""
    return sum(client.run(_worker_cpu).values())


def digest(out: dict | None) -> str | None:
    return None if out is None else hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:16]


def _peak_rss_kb() -> int:
    """This process' peak RSS: ``VmHWM`` (``ru_maxrss`` keeps the peak of the process image a
    spawned worker was forked from, before its exec: the benchmark's own, after generating dumps)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss_mb(client) -> dict:
    got = client.run(_peak_rss_kb)
    return {w: round(kb / 1024, 1) for w, kb in got.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--entries", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=str(HERE / "_data" / "dask_fr"))
    ap.add_argument("--keep", action="store_true", help="keep the generated dumps")
    ap.add_argument("--out", default="bench_dask_fr.json", help="file name under benchmarks/results/")
    args = ap.parse_args(argv)
    import distributed

    rows = []
    for ranks in [int(x) for x in args.ranks.split(",") if x.strip()]:
        folder = Path(args.data) / f"fr_{ranks}x{args.entries}"
        if not folder.exists() or len(list(folder.iterdir())) != ranks:
            shutil.rmtree(folder, ignore_errors=True)
            planted = write_synthetic_dumps(folder, ranks, args.entries, "size", plant_rank=min(17, ranks - 1))
            seq = planted.seq
        else:
            seq = None
        mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        for f in folder.iterdir():  # page cache warm, as for the others
            f.read_bytes()
        with (
            distributed.LocalCluster(
                n_workers=args.workers,
                processes=True,
                threads_per_worker=1,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            ) as cluster,
            distributed.Client(cluster, set_as_default=False) as client,
        ):
            single, multi, outs, errs = [], [], set(), []
            single_cpu, client_cpu, worker_cpu, loads, digests = [], [], [], [], set()
            for _ in range(args.repeat):  # alternate: both see the same machine state
                loads.append(round(os.getloadavg()[0], 1))
                w, cpu, out, err = cli(folder, None)
                single.append(w)
                single_cpu.append(cpu)
                outs.add(json.dumps(key(out)))
                digests.add(digest(out))
                errs.append(err) if out is None else None
                loads.append(round(os.getloadavg()[0], 1))
                before = workers_cpu(client)
                w, cpu, out, err = cli(folder, cluster.scheduler_address)
                worker_cpu.append(workers_cpu(client) - before)
                multi.append(w)
                client_cpu.append(cpu)
                outs.add(json.dumps(key(out)))
                digests.add(digest(out))
                errs.append(err) if out is None else None
            loads.append(round(os.getloadavg()[0], 1))
            rss = peak_rss_mb(client)
        row = {
            "ranks": ranks,
            "entries": args.entries,
            "dump_mb": round(mb, 1),
            "single_s": round(statistics.median(single), 2),
            "cluster_s": round(statistics.median(multi), 2),
            "single_all_s": [round(x, 2) for x in single],
            "cluster_all_s": [round(x, 2) for x in multi],
            "single_cpu_s": round(statistics.median(single_cpu), 2),
            "cluster_client_cpu_s": round(statistics.median(client_cpu), 2),
            "cluster_workers_cpu_s": round(statistics.median(worker_cpu), 2),
            "load_1min_at_starts": loads,
            "workers": args.workers,
            "worker_peak_rss_mb": rss,
            "same_diagnosis": len(outs) == 1 and "null" not in outs,
            "same_json": len(digests) == 1 and None not in digests,
            "json_sha256": sorted(d or "none" for d in digests),
            "diagnosis": json.loads(next(iter(outs))) if len(outs) == 1 else sorted(outs),
            "planted_seq": seq,
            "errors": errs[:2],
            "load_avg": [round(x, 1) for x in os.getloadavg()],
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    faster = [r["ranks"] for r in rows if r["single_s"] <= r["cluster_s"]]
    out = {
        "benchmark": "bench_dask_fr",
        "command": "python benchmarks/bench_dask_fr.py " + " ".join(argv or sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "bars": {"cluster_s_16384x200": 60.0},
        "single_process_not_slower_up_to_ranks": max(faster) if faster else None,
        "rows": rows,
    }
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Diagnose Flight Recorder dumps of many ranks: denpex_nb (load + diagnose) vs torchfrtrace, same dumps, one run.

    python benchmarks/bench_diagnose_fr.py                      # 1024 ranks x 2000 entries + sweep 64, 256
    python benchmarks/bench_diagnose_fr.py --ranks 64 --sweep "" --frtrace-timeout 120   # quick

Synthetic pickled dumps (denpex_nb.testing.frcompare.write_synthetic_dumps: NCCL-style schema,
protocol 2) with one planted size mismatch on one rank at the last collective. torchfrtrace runs
in a subprocess with a hard timeout; when it hits the cap its time is reported as a lower bound
(the ratio then too). Also measured: the floor of just unpickling the dumps with the C pickle
module (what the unpickler path cannot go below), and, in the same run, denpex with its compiled
decoder turned off (DENPEX_FR_DECODER=unpickle: the path before the decoder existed), so the
before/after ratio comes from one run on one machine state. The decoder runs its C kernels where
the package's extension is built (``decoder`` says which: nothing to compile or import), else its
numba kernels: their one-time compilation (first use after install, ~10 s, cached on disk) is then
not in the figures, loading the cached code and importing numba (~1 s) is; the first run after
an install is measured by benchmarks/bench_fr_first_run.py. ``denpex_cli_s`` is ``denpex-nb diagnose --json`` in a
fresh process (Python start and imports included, as torchfrtrace's time includes them; its bytecode
cached as after ``pip install``, see _cli_env.py), with its
CPU seconds (``denpex_cli_cpu_s``: the process and its pool's workers) and ``cli_ratio``
(torchfrtrace's time over it). ``numba_cache_warm_s`` is this benchmark's own step that makes
sure numba's on-disk cache is current before timing (numba kernels only: a separate process,
Python start included); the CLI never runs it, and with the C kernels it does not exist.
The load average is recorded before each timed step (the machine is shared). Bars: issue 4 (denpex
< 10 s for 1024 x 2000, >= 10x torchfrtrace) and issue 17 (the CLI < 2 s, >= 30x torchfrtrace).

Prints a table and writes benchmarks/results/bench_diagnose_fr.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import platform
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from denpex_nb.ingest.flight_recorder import DECODER_ENV, compiled_decoder_enabled  # noqa: E402
from denpex_nb.testing.frcompare import run_torchfrtrace, write_synthetic_dumps  # noqa: E402

sys.path.insert(0, str(HERE))
from _cli_env import cli_env, warm_bytecode  # noqa: E402


def pickle_floor(files) -> float:
    """Seconds to unpickle every dump with the C unpickler (gc off), nothing else."""
    gc.disable()
    try:
        t = time.perf_counter()
        for f in files:
            with open(f, "rb") as fh:
                pickle.load(fh)
        return time.perf_counter() - t
    finally:
        gc.enable()


def ensure_compiled() -> float:
    """Make sure numba's on-disk cache of the decoder is current (compiling it if a source file
    changed), in a separate process so this one still pays the cache load like a user would.
    Returns that process's wall time (~10-15 s when it compiled, ~2 s when the cache was there)."""
    import subprocess

    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "from denpex_nb.ingest.fr_columns import warm; warm()"], check=True, timeout=600
    )
    return time.perf_counter() - t


def measure(ranks: int, entries: int, data: Path, frtrace_timeout: float, plant_rank: int, jobs) -> dict:
    import denpex_nb as dx

    folder = data / f"fr_{ranks}x{entries}"
    if folder.exists():
        shutil.rmtree(folder)
    t = time.perf_counter()
    planted = write_synthetic_dumps(folder, ranks, entries, "size", plant_rank=plant_rank)
    gen_s = time.perf_counter() - t
    size_mb = sum(os.path.getsize(f) for f in planted.files) / 1e6

    floor_s = pickle_floor(planted.files)
    compile_s = ensure_compiled() if compiled_decoder_enabled() and _kernels() == "numba" else None
    loads = {"before_unpickle_path": os.getloadavg()[0]}
    # before: the restricted unpickler path (what denpex did before the compiled decoder)
    before_s, before_ok = _denpex(dx, folder, jobs, planted, plant_rank, decoder="unpickle")
    loads["before_in_process"] = os.getloadavg()[0]
    incident, diagnosis, load_s, diag_s = _denpex_run(dx, folder, jobs, decoder="")
    ours = load_s + diag_s
    n_events = int(len(incident.events))
    del incident
    gc.collect()
    warm_bytecode(HERE.parent, ["diagnose", str(folder), "--json"])  # untimed: what pip does at install
    loads["before_cli"] = os.getloadavg()[0]
    cli_s, cli_cpu_s, cli_ok = _denpex_cli(folder, planted, plant_rank)
    first = diagnosis.first
    correct = (
        diagnosis.verdict == "shape-mismatch"
        and diagnosis.culprit_ranks == [plant_rank]
        and first is not None
        and first.seq == planted.seq
    )

    loads["before_torchfrtrace"] = os.getloadavg()[0]
    fr = run_torchfrtrace(folder, timeout=frtrace_timeout)
    theirs_correct = any(f["seq"] == planted.seq and f["culprit_ranks"] == [plant_rank] for f in fr.findings)
    row = {
        "ranks": ranks,
        "entries": entries,
        "events": n_events,
        "dump_mb": round(size_mb, 1),
        "generate_s": round(gen_s, 2),
        "pickle_floor_s": round(floor_s, 2),
        "denpex_unpickle_total_s": round(before_s, 2),
        "denpex_unpickle_correct": before_ok,
        "decoder": f"compiled ({_kernels()} kernels)"
        if compiled_decoder_enabled()
        else "unpickle (no compiled kernels)",
        "numba_cache_warm_s": None if compile_s is None else round(compile_s, 2),
        "denpex_load_s": round(load_s, 2),
        "denpex_diagnose_s": round(diag_s, 2),
        "denpex_total_s": round(ours, 2),
        "speedup_vs_unpickle_path": round(before_s / ours, 2) if ours > 0 else None,
        "denpex_cli_s": round(cli_s, 2),
        "denpex_cli_cpu_s": round(cli_cpu_s, 2),
        "denpex_cli_correct": cli_ok,
        "denpex_correct": bool(correct),
        "verdict": diagnosis.verdict,
        "culprit_ranks": diagnosis.culprit_ranks,
        "seq": None if first is None else first.seq,
        "torchfrtrace_s": round(fr.wall_s, 2),
        "torchfrtrace_capped": fr.timed_out,
        "torchfrtrace_rc": fr.rc,
        "torchfrtrace_correct": bool(theirs_correct),
        "ratio": round(fr.wall_s / ours, 1) if ours > 0 else None,
        "ratio_is_lower_bound": fr.timed_out,
        "cli_ratio": round(fr.wall_s / cli_s, 1) if cli_s > 0 else None,
        "load_avg": loads,
    }
    add_analysis_estimate(row)
    shutil.rmtree(folder, ignore_errors=True)
    return row


def _kernels() -> str:
    from denpex_nb.ingest import pickle_nodes

    return str(pickle_nodes.backend())


def _denpex_run(dx, folder, jobs, decoder: str):
    """load + diagnose with the Flight Recorder decoder chosen by DENPEX_FR_DECODER."""
    old = os.environ.get(DECODER_ENV)
    os.environ[DECODER_ENV] = decoder
    try:
        t = time.perf_counter()
        incident = dx.load(folder, progress=False, jobs=jobs)
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        diagnosis = dx.diagnose(incident)
        return incident, diagnosis, load_s, time.perf_counter() - t
    finally:
        if old is None:
            os.environ.pop(DECODER_ENV, None)
        else:
            os.environ[DECODER_ENV] = old


def _denpex_cli(folder, planted, plant_rank) -> tuple[float, float, bool]:
    """``denpex-nb diagnose FOLDER --json`` in a fresh process, as a user runs it (Python start,
    imports and numba's cache load included), like torchfrtrace is measured: (wall, CPU of the
    process and its pool, right)."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from denpex_nb.cli import main; sys.exit(main())",
            "diagnose",
            str(folder),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env(HERE.parent),
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        out = json.loads(proc.stdout)
        ok = (
            proc.returncode == 0
            and out["verdict"] == "shape-mismatch"
            and out["culprit_ranks"] == [plant_rank]
            and out["findings"][0]["seq"] == planted.seq
        )
    except (ValueError, KeyError, IndexError):
        ok = False
    return wall, cpu, bool(ok)


def _denpex(dx, folder, jobs, planted, plant_rank, decoder: str) -> tuple[float, bool]:
    incident, diagnosis, load_s, diag_s = _denpex_run(dx, folder, jobs, decoder)
    first = diagnosis.first
    ok = (
        diagnosis.verdict == "shape-mismatch"
        and diagnosis.culprit_ranks == [plant_rank]
        and first is not None
        and first.seq == planted.seq
    )
    del incident
    gc.collect()
    return load_s + diag_s, bool(ok)


def add_analysis_estimate(row: dict) -> dict:
    """Analysis alone: torchfrtrace's time minus the unpickling floor (it unpickles with gc off, like
    the floor) vs denpex's diagnose step. An estimate (its startup and import are left in)."""
    est = row["torchfrtrace_s"] - row["pickle_floor_s"]
    row["torchfrtrace_analysis_est_s"] = round(est, 2)
    row["analysis_ratio_est"] = round(est / row["denpex_diagnose_s"], 1) if row["denpex_diagnose_s"] > 0 else None
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--sweep", default="64,256", help="comma-separated smaller rank counts ('' for none)")
    ap.add_argument("--frtrace-timeout", type=float, default=300.0, help="cap on torchfrtrace per size, seconds")
    ap.add_argument("--jobs", default=None, help="load(jobs=...): None (auto), 1, 2 ...")
    ap.add_argument("--data", default=str(HERE / "_data"))
    args = ap.parse_args(argv)
    jobs = None if args.jobs in (None, "None") else int(args.jobs)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sweep.split(",") if x.strip()] + [args.ranks]
    rows = []
    for n in sizes:
        row = measure(n, args.entries, data, args.frtrace_timeout, plant_rank=min(17, n - 1), jobs=jobs)
        rows.append(row)
        print(json.dumps(row), flush=True)

    hdr = [
        "ranks",
        "events",
        "dump_mb",
        "pickle_floor_s",
        "denpex_unpickle_total_s",
        "denpex_load_s",
        "denpex_diagnose_s",
        "denpex_total_s",
        "denpex_cli_s",
        "torchfrtrace_s",
        "ratio",
        "torchfrtrace_analysis_est_s",
        "analysis_ratio_est",
        "denpex_correct",
        "torchfrtrace_correct",
    ]
    print("\n" + " | ".join(hdr))
    for r in rows:
        cells = [
            str(r[h])
            + (
                "+"
                if h in ("torchfrtrace_s", "ratio", "torchfrtrace_analysis_est_s", "analysis_ratio_est")
                and r["torchfrtrace_capped"]
                else ""
            )
            for h in hdr
        ]
        print(" | ".join(cells))
    print("(+ = torchfrtrace hit the cap: its time and the ratio are lower bounds)")
    out = {
        "benchmark": "bench_diagnose_fr",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_end": os.getloadavg()},
        "bars": {"denpex_total_s_1024x2000": 10.0, "ratio": 10.0, "denpex_cli_s_1024x2000": 2.0, "cli_ratio": 30.0},
        "rows": rows,
    }
    res = HERE / "results"
    res.mkdir(exist_ok=True)
    (res / "bench_diagnose_fr.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

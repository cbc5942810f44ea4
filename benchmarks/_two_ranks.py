"""Helper for the gloo micro-benchmarks: run ``fn(rank, world)`` in N real processes, collect rank 0's dict."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile


def launch(script: str, world: int = 2, timeout: float = 600.0) -> dict:
    """Start ``script --rank-worker`` as ``world`` processes (gloo env), return rank 0's JSON result."""
    from denpex_nb.repro.launch import free_port

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        procs = []
        for r in range(world):
            env = dict(
                os.environ,
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                RANK=str(r),
                WORLD_SIZE=str(world),
                LOCAL_RANK=str(r),
                BENCH_RESULT=result,
                OMP_NUM_THREADS="1",
            )
            procs.append(subprocess.Popen([sys.executable, script, "--rank-worker"], env=env, start_new_session=True))
        try:
            for p in procs:
                p.wait(timeout=timeout)
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        if any(p.returncode for p in procs):
            raise SystemExit(f"benchmark ranks failed: {[p.returncode for p in procs]}")
        with open(result) as fh:
            return json.load(fh)


def save(name: str, data: dict) -> str:
    data = dict(data, load_average=os.getloadavg(), cpus=os.cpu_count())
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    return path

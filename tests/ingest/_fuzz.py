"""Run a seeded subset of a fuzz benchmark (``benchmarks/bench_fuzz*.py``) in a subprocess and read its summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def campaign(bench: str, cases: int, seed: int, *, workers: int, chunk: int, env: dict | None = None) -> dict:
    """The JSON summary of ``benchmarks/<bench> --cases ... --no-write`` (its last line)."""
    cmd = [
        sys.executable,
        os.path.join(ROOT, "benchmarks", bench),
        "--cases",
        str(cases),
        "--seed",
        str(seed),
        "--workers",
        str(workers),
        "--chunk",
        str(chunk),
        "--no-write",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env or dict(os.environ))
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith('{"benchmark"')]
    assert lines, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    return json.loads(lines[-1])

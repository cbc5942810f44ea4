"""The environment a benchmark runs a checkout's CLI in: as after ``pip install`` (as bench_ingest.cli_env).

pip compiles the package's bytecode at install, so a user's ``denpex-nb`` imports cached bytecode.
A session that sets ``PYTHONDONTWRITEBYTECODE`` (as these machines do) would make every timed run
compile its ~60 modules from source instead: ~0.15-0.2 s of a 2 s Flight Recorder diagnosis,
measured 2026-12-02. Here the bytecode is cached in ``benchmarks/_data/pycache`` (a folder per
checkout, never in the tree); the first run of a checkout writes it, so a benchmark runs the CLI
once untimed first (:func:`warm_bytecode`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_data")


def cli_env(root: str, base: dict | None = None) -> dict:
    """``base`` (default: this environment) with ``root``'s modules first on the path and their
    bytecode cached, as after ``pip install``."""
    env = dict(os.environ if base is None else base, PYTHONPATH=str(root))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    tag = hashlib.sha1(os.path.realpath(str(root)).encode()).hexdigest()[:10]
    env["PYTHONPYCACHEPREFIX"] = os.path.join(DATA, "pycache", tag)
    return env


def warm_bytecode(root: str) -> None:
    """Write ``root``'s bytecode cache (what pip does at install) before anything is timed."""
    code = "import denpex_nb.cli.diagnose, denpex_nb.analysis, denpex_nb.ingest.flight_recorder, denpex_nb.ingest.fr_columns"
    subprocess.run([sys.executable, "-c", code], env=cli_env(root), cwd=str(root), check=True, timeout=300)

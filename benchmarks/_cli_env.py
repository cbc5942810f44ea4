"""The environment a benchmark runs a checkout's CLI in: as after ``pip install`` (as bench_ingest.cli_env).

pip compiles the package's bytecode at install, so a user's ``denpex-nb`` imports cached bytecode.
A session that sets ``PYTHONDONTWRITEBYTECODE`` (as these machines do) would make every timed run
compile its ~60 modules from source instead: ~0.15-0.2 s of a 2 s Flight Recorder diagnosis,
measured 2026-12-02. Here the bytecode is cached in ``benchmarks/_data/pycache`` (a folder per
checkout, never in the tree), written before any timed run (:func:`warm_bytecode`).
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


#: what ``denpex-nb diagnose`` imports on a load of dumps (each module that a checkout has)
_CLI_MODULES = (
    "denpex_nb.cli.diagnose",
    "denpex_nb.analysis",
    "denpex_nb.ingest",
    "denpex_nb.ingest.flight_recorder",
    "denpex_nb.ingest.fr_columns",
)


def warm_bytecode(root: str, cli_args: list[str] | None = None) -> None:
    """Write the bytecode cache before anything is timed, as pip does at install: ``compileall``
    over the package, then an import of what the CLI imports (the cache prefix holds every
    module's bytecode, numpy's, pandas' and the standard library's too, so those are written here
    as well), then, given ``cli_args``, one untimed run of the CLI with them (what it imports
    only while it runs: the process pool's modules)."""
    env = cli_env(root)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", os.path.join(str(root), "denpex_nb")],
        env=env,
        cwd=str(root),
        check=False,
        timeout=300,
        stdout=subprocess.DEVNULL,
    )
    lines = ["import importlib", f"for m in {_CLI_MODULES!r}:", "    try:", "        importlib.import_module(m)"]
    code = "\n".join(lines + ["    except ImportError:", "        pass", ""])
    subprocess.run([sys.executable, "-c", code], env=env, cwd=str(root), check=True, timeout=300)
    if cli_args:
        subprocess.run(
            [sys.executable, "-m", "denpex_nb.cli", *cli_args],
            env=env,
            cwd=str(root),
            check=False,
            timeout=600,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

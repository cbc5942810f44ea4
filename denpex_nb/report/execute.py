"""Running a notebook headless with papermill, and reading back what it recorded.

:func:`execute` is used for the incident report (by :func:`~.pipeline.render`) and by the tests of
every committed notebook. The kernel papermill starts sees ``DENPEX_NB_HEADLESS=1`` (widgets fall
back to static tables); what the kernel writes on its stderr goes to a file, and its last line
is quoted when the kernel cannot start.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from ..errors import DenpexError, require
from .contract import HEADLESS_ENV, SUMMARY_MIME, SUMMARY_TAG


@contextlib.contextmanager
def environment(name: str, value: str | None):
    """Set (or, with None, leave alone) one environment variable for the kernel papermill starts."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def _kernel_stderr_to(path: Path):
    """The kernel inherits our stderr and chats on it (transport warnings): send that to a file."""
    try:
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def load_jupyter_stack_quickly() -> None:
    """Import jsonschema (under nbformat and papermill) without ``rfc3987_syntax``.

    Why: when installed, jsonschema imports ``rfc3987_syntax`` only to check the ``iri`` /
    ``iri-reference`` string formats, and that module builds a lark grammar at import: about 3 s
    on 2 cores, a fifth of a whole report. The notebook schema nbformat validates against uses
    neither format, so validation is unchanged. The block is lifted right after the import, so a
    later ``import rfc3987_syntax`` elsewhere in the process still works.
    """
    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        return
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # `import` now raises ImportError
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass
    finally:
        if "rfc3987_syntax" in sys.modules and sys.modules["rfc3987_syntax"] is None:
            del sys.modules["rfc3987_syntax"]


def import_papermill_without_s3():
    """Import papermill without its S3 handler (boto3), for ``denpex-nb report``'s own process.

    Why: papermill imports boto3 at import time when it is installed (~0.3 s of a report's CPU),
    only to read and write ``s3://`` notebooks. The renderer hands papermill local temp files,
    never an S3 path. Only for a process that imports papermill for this alone (the CLI): in a
    user's process papermill stays whole. boto3 itself stays importable afterwards.
    """
    load_jupyter_stack_quickly()
    if "papermill" in sys.modules or "boto3" in sys.modules:
        return
    sys.modules["boto3"] = None  # type: ignore[assignment]  # papermill.iorw then falls back
    try:
        import papermill  # noqa: F401
    except ImportError:
        pass
    finally:
        if "boto3" in sys.modules and sys.modules["boto3"] is None:
            del sys.modules["boto3"]


def execute(
    nb, parameters: dict, *, cwd=None, timeout: float = 600, stop_kernel: str = "graceful"
) -> tuple[object, str | None]:
    """Run a notebook (NotebookNode) headless with papermill; returns (executed nb, error or None).

    A failing cell does not raise: papermill's executed notebook, with its error cell, is returned.
    A kernel that cannot start is a one-line :class:`~denpex_nb.errors.DenpexError`.

    ``stop_kernel="immediate"`` kills the kernel once the last cell's outputs are in, instead of
    asking it to shut down and waiting for it: for a notebook whose kernel leaves nothing to clean
    up (no processes, no temporary files of its own), where a big kernel's orderly exit (tearing
    down a 1024-rank incident's frames) is seconds of waiting for nothing.
    """
    load_jupyter_stack_quickly()
    pm = require("papermill", "notebook")
    nbformat = require("nbformat", "notebook")
    with tempfile.TemporaryDirectory(prefix="denpex-report-") as tmp:
        src = Path(tmp) / "in.ipynb"
        dst = Path(tmp) / "out.ipynb"
        nbformat.write(nb, str(src))
        error = None
        with environment(HEADLESS_ENV, "1"), _kernel_stderr_to(Path(tmp) / "kernel.stderr"):
            try:
                pm.execute_notebook(
                    str(src),
                    str(dst),
                    parameters=parameters,
                    kernel_name="python3",
                    progress_bar=False,
                    log_output=False,
                    cwd=cwd,
                    execution_timeout=timeout,
                    shutdown_kernel=stop_kernel,
                )
            except pm.PapermillExecutionError as e:
                error = f"cell {e.exec_count}: {e.ename}: {e.evalue}".strip()
            except Exception as e:  # noqa: BLE001 - kernel missing or dead: one line, not a traceback
                detail = _tail(Path(tmp) / "kernel.stderr")
                raise DenpexError(
                    f"the report notebook could not run: {type(e).__name__}: {e}{detail}",
                    fix="check that ipykernel is installed: pip install 'denpex_nb[notebook]'",
                ) from None
        if not dst.exists():
            raise DenpexError("the report notebook did not run", fix="check that ipykernel is installed")
        return nbformat.read(str(dst), as_version=4), error


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f" (kernel said: {lines[-1][:200]})" if lines else ""


def read_summary(nb) -> dict | None:
    """The ``denpex-summary`` cell's JSON from an executed notebook (None when it did not run)."""
    for cell in nb.cells:
        if SUMMARY_TAG in cell.get("metadata", {}).get("tags", []):
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if SUMMARY_MIME in data:
                    val = data[SUMMARY_MIME]
                    return json.loads(val) if isinstance(val, str) else dict(val)
    return None

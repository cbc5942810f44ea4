"""Suite-wide guards: no test may leave a child process behind (reproducers, kernels, browsers),
and the loader runs strict, so a reader that raises fails the test instead of becoming a note.

Under pytest-xdist (the README's ``-n 2 --dist loadfile``) each test file runs whole on one worker,
and the files that share work made once per test process (:data:`SHARED_WORK`) run on the same
worker, so that work is still made once per run, not once per worker."""

from __future__ import annotations

import os
import time

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
# denpex_nb.load(strict=None) reads this: a reader's exception propagates instead of becoming a
# note on the Incident (tests that check the non-strict path pass strict=False explicitly)
os.environ["DENPEX_STRICT"] = "1"


@pytest.fixture(scope="session", autouse=True)
def no_leftover_child_processes():
    """After the whole suite, this pytest process must have no live descendants."""
    yield
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    deadline = time.monotonic() + 10
    alive = []
    while time.monotonic() < deadline:
        alive = [p for p in me.children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            break
        time.sleep(0.2)
    if alive:
        desc = "; ".join(f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in alive)
        for p in alive:
            p.kill()
        pytest.fail(f"tests left {len(alive)} child process(es) running: {desc}")


#: test files (or folders) that share work made once per test process -> the one xdist work unit they
#: form: the wild corpus and recorded runs diagnosed once (tests/diagnosed.py), the rendered report
#: and the run the notebooks read (tests/_nb_runs.py; these files also start Jupyter kernels and a
#: JupyterLab server, one at a time so), the reproducer runs (tests/repro/conftest.py), the S3
#: server (tests/ingest/s3server.py)
SHARED_WORK = {
    "tests/analysis/test_catalog.py": "shared: tests/diagnosed.py",
    "tests/analysis/test_wild.py": "shared: tests/diagnosed.py",
    "tests/analysis/test_closed_loop.py": "shared: tests/diagnosed.py",
    "tests/test_report.py": "shared: tests/_nb_runs.py",
    "tests/test_browser.py": "shared: tests/_nb_runs.py",
    "tests/test_notebooks.py": "shared: tests/_nb_runs.py",
    "tests/test_jupyterlab.py": "shared: tests/_nb_runs.py",
    "tests/repro/": "shared: tests/repro/conftest.py",
    "tests/ingest/test_remote.py": "shared: tests/ingest/s3server.py",
    "tests/ingest/test_dask.py": "shared: tests/ingest/s3server.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the files of :data:`SHARED_WORK` in one work unit each, handed out
    first: they are few tests but long ones (real runs, kernels, servers), and xdist otherwise hands
    out the units with the most tests first, which would leave one of them for the end on one worker."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedWorkScheduling(LoadFileScheduling):
        _shared_first = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((unit for prefix, unit in SHARED_WORK.items() if path.startswith(prefix)), path)

        def _assign_work_unit(self, node) -> None:
            if not self._shared_first:
                self._shared_first = True
                for unit in reversed([u for u in self.workqueue if u in SHARED_WORK.values()]):
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return SharedWorkScheduling(config, log)

"""Suite-wide guards: no test may leave a child process behind (reproducers, kernels, browsers),
and the loader runs strict, so a reader that raises fails the test instead of becoming a note."""

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

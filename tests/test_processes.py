"""Exit codes read as signals, and process groups stopped for real (denpex_nb.processes)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from denpex_nb.processes import signal_name, stop_group


@pytest.mark.parametrize(
    "code, shell, name",
    [
        (-9, False, "SIGKILL"),
        (-11, False, "SIGSEGV"),
        (-6, False, "SIGABRT"),
        (-64, False, "SIG64"),
        (137, False, None),
        (137, True, "SIGKILL"),
        (139, True, "SIGSEGV"),
        (1, True, None),
        (0, False, None),
        (None, False, None),
        ("x", True, None),
        (10**40, True, None),
        (-15, True, "SIGTERM"),
    ],
)
def test_signal_name(code, shell, name):
    assert signal_name(code, shell=shell) == name


def test_stop_group_ends_a_group_that_ignores_sigterm():
    """A parent and its child, both ignoring SIGTERM: SIGKILL follows the grace period; nothing is left."""
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); print(c.pid, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = int(proc.stdout.readline())
    t0 = time.monotonic()
    stop_group(proc, grace_s=0.5)
    assert proc.returncode == -9 and time.monotonic() - t0 < 10
    for _ in range(50):  # the child got the group's SIGKILL too
        try:
            with open(f"/proc/{child}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"child {child} still running")
    proc.stdout.close()

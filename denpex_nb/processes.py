"""Processes, spelled once: what a rank's exit code says about its end, and how a process group is stopped.

Signal names come from a fixed Linux table rather than the running platform's ``signal`` module:
the logs describe Linux training nodes wherever they are read.
"""

from __future__ import annotations

import os
import signal
import subprocess

#: Linux signal numbers a training process dies of (and the harmless ones a launcher sends)
SIGNALS = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
}


def signal_name(exit_code, *, shell: bool = False) -> str | None:
    """The signal that ended a process, from its exit code: ``-9`` -> ``'SIGKILL'`` (Python's
    ``Popen.returncode``, torchrun's tables); with ``shell=True`` also ``137`` -> ``'SIGKILL'``
    (a shell's 128 + N). None for a normal exit or a code that is not a number."""
    try:
        code = int(exit_code)
    except (TypeError, ValueError, OverflowError):
        return None
    if code < 0:
        return SIGNALS.get(-code, f"SIG{-code}")
    if shell and 128 < code < 160:
        return SIGNALS.get(code - 128, f"SIG{code - 128}")
    return None


def stop_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM ``proc``'s process group (it must have been started with ``start_new_session=True``),
    then SIGKILL it if it has not exited after ``grace_s``; returns once it has exited."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signal_group(proc, sig)
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to ``proc``'s process group; a group that is already gone is fine."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

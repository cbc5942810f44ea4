"""Is a rank's process alive, and is it doing anything? Read from ``/proc``, same host only.

Why: the tracer records each rank's pid and host. When the watcher runs on the rank's host it can
tell "the process is gone" (a rank died while the others wait: the clearest culprit there is) and
"the process is busy outside collectives" (writing a checkpoint, loading data: CPU time advances)
from "the process sits idle" (hung outside collectives: CPU time stands still). Elsewhere, or on
a system without ``/proc``, nothing is known and the callers fall back to time alone.
"""

from __future__ import annotations

import os
import socket

_HOST = socket.gethostname()


def local(host: str | None) -> bool:
    """True when ``host`` (as the tracer wrote it) is this machine."""
    return host is not None and host == _HOST and os.path.isdir("/proc/self")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except (OSError, ValueError, OverflowError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after its last ')'
    return raw[raw.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process' start time in clock ticks (tells a reused pid apart), or None if it is gone."""
    f = _stat(pid)
    return int(f[19]) if f and len(f) > 19 else None


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU time in clock ticks, or None if the process is gone."""
    f = _stat(pid)
    return int(f[11]) + int(f[12]) if f and len(f) > 12 else None


def state(pid: int) -> str | None:
    """The one-letter state (R, S, D, Z ...); a zombie (Z) or a missing process has ended."""
    f = _stat(pid)
    return f[0] if f else None


def alive(pid: int, started: int | None) -> bool:
    """The process ``pid`` that started at ``started`` ticks still runs (not ended, not a zombie)."""
    f = _stat(pid)
    if not f or f[0] in ("Z", "X"):
        return False
    return started is None or (len(f) > 19 and int(f[19]) == started)

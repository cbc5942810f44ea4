"""Dump the Flight Recorder ring of this process to ``<dir>/comm_lib_trace_rank_<R>``, crash-safely.

Why: on gloo the Flight Recorder records every collective but never dumps by itself (not on
timeout, not at exit). So a rank has to dump explicitly: on a caught failure, at exit, and when
it is told to stop (SIGTERM from a launcher such as torchrun or ours). The dump takes 1.5-3 s on
a 2-core machine, and a rank killed while writing leaves a truncated file, so the bytes go to a
``.tmp`` file first and are renamed into place.

Stack traces (each entry's ``frames``) are off by default: symbolising them costs 1.5-3 s of CPU
the first time per process (measured on 2 cores), while a dump without them takes well under a
millisecond. Switch them on where the call sites matter and the time is affordable.

The SIGTERM path cannot use a plain Python signal handler: a rank blocked inside a gloo
collective only runs Python handlers after the collective returns, i.e. after the timeout. Instead
the C-level handler writes the signal number to a wake-up pipe (``signal.set_wakeup_fd``) and a
small daemon thread does the dump, restores the default disposition and re-sends SIGTERM, so the
rank still ends with -15 as a launcher expects.
"""

from __future__ import annotations

import os
import select
import signal
import threading


class FlightRecorderDumper:
    """Per-rank dumper: call :meth:`dump` on failure/exit; :meth:`install_sigterm` once at start."""

    def __init__(self, directory: str | os.PathLike, rank: int, stack_traces: bool = False):
        self.stack_traces = stack_traces
        self.directory = os.fspath(directory)
        self.rank = rank
        self.path = os.path.join(self.directory, f"comm_lib_trace_rank_{rank}")
        self._lock = threading.Lock()
        self.done = False

    def dump(self, reason: str = "exit") -> str | None:
        """Write the dump once (later calls return the existing path). Never raises."""
        with self._lock:
            if self.done:
                return self.path
            try:
                from torch._C._distributed_c10d import _dump_fr_trace

                data = _dump_fr_trace(includeCollectives=True, includeStackTraces=self.stack_traces)
                os.makedirs(self.directory, exist_ok=True)
                tmp = self.path + ".tmp"
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, self.path)
                self.done = True
                return self.path
            except Exception as exc:  # evidence collection must never mask the real failure
                os.write(2, f"denpex: flight recorder dump on {reason} failed: {exc}\n".encode())
                return None

    def install_sigterm(self) -> None:
        """Dump on SIGTERM even while the main thread is blocked in a collective; then die by SIGTERM."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        thread = threading.Thread(target=self._watch, args=(read_fd,), name="denpex-fr-sigterm", daemon=True)
        thread.start()

    def _watch(self, read_fd: int) -> None:
        while True:
            select.select([read_fd], [], [])
            data = os.read(read_fd, 64)
            if not data or signal.SIGTERM in data:
                break
        self.dump("sigterm")
        _die_by_sigterm()


def _die_by_sigterm() -> None:
    """Restore SIG_DFL at the C level (callable from any thread) and re-send SIGTERM to ourselves."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.signal(int(signal.SIGTERM), None)  # SIG_DFL == 0
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        os._exit(128 + int(signal.SIGTERM))

"""Watch a running job's evidence and name the divergence while the job still hangs.

``denpex-nb watch PATH...`` and ``dx.watch(PATH)`` (a :class:`Watcher`) follow the files a job is writing: the tracer's
JSONL (:mod:`denpex_nb.trace`: the live state, decided by :mod:`.state`), and everything else the
loader reads (rank logs, NCCL_DEBUG output, Flight Recorder dumps) as it is appended or appears.
Only new bytes are read (:mod:`.follow`). A finding is reported the moment the evidence shows it;
when the job ends (every rank's process on this host has exited, or ``idle_exit`` seconds pass
without a new byte), on Ctrl-C, or after the first finding with ``once``, the watcher stops and
the whole evidence gets the ordinary diagnosis (:func:`denpex_nb.diagnose`).

    w = Watcher(["runs/job/"])
    for finding in w.findings():        # blocks; yields LiveFinding as they are made
        print(finding)
    w.final_diagnosis()
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator

from .follow import Follower
from .state import LiveFinding, LiveState, is_trace_file

__all__ = ["LiveFinding", "LiveState", "Watcher"]

#: how often the files are polled (seconds): a finding is seen within about this much of its evidence
POLL_S = 0.25
#: rows kept from logs and dumps for the live diagnosis of non-tracer evidence (older ones are dropped)
MAX_LOG_ROWS = 50_000


class Watcher:
    """Follow ``paths`` and report findings as they happen (see the module docstring)."""

    def __init__(
        self,
        paths: list[str],
        *,
        stall: float | None = None,
        interval: float = POLL_S,
        idle_exit: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        from ..errors import UsageError

        if stall is not None and not (0 < stall < 86_400):
            raise UsageError(f"--stall must be between 0 and 86400 seconds, got {stall}", fix="pass e.g. --stall 5")
        if not (0 < interval <= 60):
            raise UsageError(f"--interval must be between 0 and 60 seconds, got {interval}", fix="pass e.g. 0.25")
        if idle_exit is not None and not (0 < idle_exit < 10**7):
            raise UsageError(f"--idle-exit must be a positive number of seconds, got {idle_exit}", fix="e.g. 600")
        self.paths = [os.fspath(p) for p in paths]
        self.interval = interval
        self.idle_exit = idle_exit
        self.clock = clock
        self.state = LiveState(stall=stall, clock=clock)
        self.trace = Follower(self.paths, accept=is_trace_file)
        self.other = Follower(self.paths, accept=lambda p: not is_trace_file(p))
        self.reported: list[LiveFinding] = []
        self.last_byte_at = clock()
        self.started_at = clock()
        self._log_rows: dict[str, list] = {"events": [], "errors": [], "ranks": [], "progress": []}
        self._log_keys: set[tuple] = set()
        self._dumps: dict[str, tuple[int, float]] = {}  # binary file -> (size, since) until it is stable
        self._loaded_dumps: set[str] = set()
        self._tmp = tempfile.mkdtemp(prefix="denpex-watch-")
        self.ended_reason: str | None = None

    # --- one poll --------------------------------------------------------------------------------

    def poll(self) -> list[LiveFinding]:
        """Read what was appended since the last poll and return the new findings."""
        now = self.clock()
        got = False
        for chunk in self.trace.poll():
            got = True
            self.state.feed(chunk.path, chunk.lines, chunk.first_line)
        found = self.state.check()
        new_other = False
        for chunk in self.other.poll():
            got = True
            new_other |= self._take_text(chunk.path, chunk.lines, chunk.first_line)
        new_other |= self._take_dumps(now)
        if got:
            self.last_byte_at = now
        if new_other:
            found += self._diagnose_other(self.reported + found)
        self.reported += found
        return found

    def findings(self, *, ticks: bool = False) -> Iterator[LiveFinding | None]:
        """Poll until the job's evidence ends; yield each finding as it is made.

        With ``ticks`` a ``None`` follows every poll, so a caller can speak while nothing happens.
        """
        try:
            while True:
                yield from self.poll()
                reason = self.ended()
                if reason:
                    self.ended_reason = reason
                    return
                if ticks:
                    yield None
                time.sleep(self.interval)
        finally:
            self.close()

    def ended(self) -> str | None:
        """Why the job's evidence has ended (None while it may still grow)."""
        ranks = self.state.ranks.values()
        from . import procs

        local = [r for r in ranks if r.pid is not None and procs.local(r.host)]
        if local and len(local) == len(ranks) and all(r.ended_at is not None for r in local):
            groups = [g for g in self.state.groups.values()]
            expected = max((g.n_members() for g in groups), default=0)
            if len(local) >= expected:
                return f"every rank's process has exited ({len(local)} ranks)"
        if self.idle_exit is not None and self.clock() - self.last_byte_at >= self.idle_exit:
            return f"no new evidence for {self.idle_exit:g} s"
        return None

    def waiting_for(self) -> str | None:
        """What the watcher still waits for before it has any evidence (None once it has some)."""
        if self.trace.tails or self.other.tails:
            return None
        return (
            f"waiting for evidence under {', '.join(self.paths)}: tracer files (denpex_trace_rank<R>.jsonl), "
            "rank logs, NCCL_DEBUG output or Flight Recorder dumps"
        )

    def absent_ranks(self) -> list[int]:
        """Ranks of a stated group size that have written no tracer line yet."""
        out: set[int] = set()
        for g in self.state.groups.values():
            out |= g.members() - set(self.state.ranks)
        return sorted(out)

    # --- logs and dumps -------------------------------------------------------------------------

    def _take_text(self, path: str, lines: list[bytes], first_line: int) -> bool:
        """Parse appended log lines with the loader's readers; True when they held new rows."""
        if _binary(lines):
            self._dumps.setdefault(path, (-1, self.clock()))
            return False
        piece = self._load_piece(path, b"\n".join(lines) + b"\n", first_line)
        return piece is not None and self._keep(piece)

    def _take_dumps(self, now: float) -> bool:
        """Load binary files (Flight Recorder dumps) once their size has stood still for a poll."""
        new = False
        for path, (size, since) in list(self._dumps.items()):
            if path in self._loaded_dumps:
                continue
            try:
                cur = os.path.getsize(path)
            except OSError:
                continue
            if cur != size:
                self._dumps[path] = (cur, now)
                continue
            if now - since < self.interval:
                continue
            self._loaded_dumps.add(path)
            try:
                from ..ingest import load

                new |= self._keep(load(path, progress=False, unreadable="report"))
            except Exception:  # a dump that cannot be read now is read by the final diagnosis
                continue
        return new

    def _load_piece(self, path: str, data: bytes, first_line: int):
        """Load a block of lines as the file it came from (same name, so the same rank hints)."""
        from ..ingest import load

        rel = os.path.relpath(os.path.abspath(path), "/").lstrip("./")
        tmp = os.path.join(self._tmp, rel)
        os.makedirs(os.path.dirname(tmp), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
        try:
            piece = load(tmp, progress=False, unreadable="report")
        except Exception:
            return None
        finally:
            os.unlink(tmp)
        for name in ("events", "errors"):
            df = getattr(piece, name)
            if len(df):
                df["file"] = path
                df["line"] = df["line"] + (first_line - 1)
        return piece

    def _keep(self, piece) -> bool:
        new = False
        for name in ("events", "errors", "ranks", "progress"):
            df = getattr(piece, name)
            if not len(df):
                continue
            rows = self._log_rows[name]
            for row in df.to_dict("records"):
                key = (name, row.get("rank"), row.get("file"), row.get("line"), row.get("seq"), row.get("kind"))
                if key in self._log_keys:
                    continue
                self._log_keys.add(key)
                rows.append(row)
                new |= name in ("events", "errors")
            del rows[: max(0, len(rows) - MAX_LOG_ROWS)]
        return new

    def _diagnose_other(self, said: list[LiveFinding]) -> list[LiveFinding]:
        """The ordinary diagnosis over the logs and dumps read so far; a new failure verdict is a finding."""
        from ..analysis import diagnose
        from ..incident import Incident, coerce
        from ..vocab import ABSTENTIONS, ClassId

        inc = Incident(**{k: coerce(k, v) for k, v in self._log_rows.items()})
        d = diagnose(inc)
        f = d.first
        if f is None or f.class_id == ClassId.NO_FAILURE or (f.class_id in ABSTENTIONS and not len(inc.errors)):
            return []
        key = ("logs", f.class_id, f.pg, f.seq, f.culprit_ranks)
        if key in self.state.reported:
            return []
        if any(r.finding.class_id == f.class_id and f.seq in (None, r.finding.seq) for r in said):
            return []  # the logs confirm what was already said (an abort after the mismatch): not news
        self.state.reported.add(key)
        began = f.t_wall.timestamp() if f.t_wall is not None and hasattr(f.t_wall, "timestamp") else None
        return [LiveFinding(f, began, time.time())]

    # --- in JupyterLab ---------------------------------------------------------------------------

    def view(self, refresh_s: float = 1.0):
        """A live widget (:class:`~denpex_nb.live.view.LiveView`) polling in a background thread."""
        from .view import LiveView

        return LiveView(self, refresh_s)

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Shown in a notebook: the live widget, with an HTML snapshot for pages without widgets."""
        from .view import snapshot_html

        try:
            live = self.view()
        except ImportError:  # no ipywidgets: a snapshot, and how to get the live view
            note = "<p><i>install ipywidgets (pip install 'denpex_nb[notebook]') for the live view</i></p>"
            return {"text/html": snapshot_html(self) + note, "text/plain": repr(self)}
        self._live = live
        live.refresh()
        bundle = live.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/html"] = snapshot_html(self)  # what a saved page shows without a kernel
        return bundle

    def __repr__(self) -> str:
        return f"<Watcher {', '.join(self.paths)}: {len(self.state.ranks)} ranks, {len(self.reported)} findings>"

    # --- the end ------------------------------------------------------------------------------

    def final_diagnosis(self):
        """The ordinary diagnosis of everything the paths hold now (a full read, once, at the end)."""
        from ..analysis import diagnose
        from ..ingest import load

        return diagnose(load(*self.paths, progress=False, unreadable="report"))

    def close(self) -> None:
        self.trace.close()
        self.other.close()
        shutil.rmtree(self._tmp, ignore_errors=True)


def _binary(lines: list[bytes]) -> bool:
    head = b"\n".join(lines[:4])[:4096]
    return b"\x00" in head or head[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")

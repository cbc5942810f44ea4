"""The live state of a running job, from its tracer lines, and the findings worth waking someone for.

The tracer (:mod:`denpex_nb.trace`) writes each collective's ``issue`` line before the collective
starts and a ``done`` (or ``error``) line when it returns, so at any moment the files say, per
rank and process group, which collectives were entered and which finished. This module keeps
that as a small window per process group (collectives some rank has not finished, plus the last
:data:`KEEP_DONE` finished ones, so memory stays flat over a week-long job) and looks for three
things after every poll:

* **divergence** at one (group, seq): ranks entered it with different ops, shapes or dtypes. The
  rows of that collective are handed to the same analysis ``denpex-nb diagnose`` runs
  (:func:`denpex_nb.analysis.diagnose`), so the class, the culprit and the wording are the
  diagnosis' own, decided once every member entered it (or :data:`GRACE_S` after the first did);
* **a stall**: ranks wait inside collective ``seq`` while other members never entered it, and
  nobody has written anything for the stall time. Healthy jobs drift apart (data loading, uneven
  steps, a checkpoint on rank 0), so the stall time adapts (:meth:`LiveState.stall_s`) and a rank
  that is busy outside collectives on this host (its CPU time advances, or it is in disk wait) is
  given up to :attr:`LiveState.stall_max_s` before it is called stuck;
* **a death**: a rank's process (on this host) ended while other ranks wait in a collective.

Each finding is an :class:`~denpex_nb.analysis.model.Finding` (the fields of ``diagnose --json``)
plus when the divergence began and how long it took to see it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from ..analysis.model import Evidence, Finding, RankView
from ..analysis.rules import strict_minority
from ..human import rank_ranges
from ..incident import Incident, coerce
from ..ingest.base import FileContext, Output
from ..ingest.trace import TraceReader
from ..vocab import ClassId, SeqKind, State
from . import procs

#: finished collectives kept per process group (for the adaptive stall time and for context)
KEEP_DONE = 64
#: how long a divergence waits for the remaining members before it is decided without them
GRACE_S = 0.5
#: the stall time's floor (seconds): see :meth:`LiveState.stall_s` and the README for how it was chosen
STALL_FLOOR_S = 2.0
#: the stall time is this many times the longest spread of arrivals seen at healthy collectives
STALL_SPREAD_FACTOR = 3.0
#: a rank whose CPU time advanced within this many seconds is busy (working outside collectives)
BUSY_WINDOW_S = 1.0
#: a death is reported once the others still wait this long after it (a rank that exits at the
#: job's normal end races the others' last ``done`` lines)
DEATH_CONFIRM_S = 1.0
#: classes the divergence check reports (what a comparison of one collective across ranks can show)
_DIVERGENCE = {ClassId.SHAPE_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.OP_MISMATCH, ClassId.RANK_DESYNC}

_READER = TraceReader()


def is_trace_file(path: str) -> bool:
    """The tracer's per-rank files (``denpex_trace_rank<R>.jsonl`` and rotated ``.jsonl.N``)."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("denpex_trace_rank") and ".jsonl" in name


@dataclass
class LiveFinding:
    """A finding made while the job runs, with its timing."""

    finding: Finding
    divergence_wall: float | None  # epoch seconds: the first rank's issue of the diverging collective
    detected_wall: float  # epoch seconds: when the watcher saw it

    @property
    def since_divergence_s(self) -> float | None:
        return None if self.divergence_wall is None else max(0.0, self.detected_wall - self.divergence_wall)

    def to_dict(self) -> dict:
        f = self.finding
        return {
            "verdict": f.class_id,
            "culprit_ranks": [int(r) for r in f.culprit_ranks],
            "confidence": f.confidence,
            "summary": f.summary,
            "pg": f.pg,
            "seq": f.seq,
            "op": f.op,
            "findings": [f.to_dict()],
            "since_divergence_s": None if self.since_divergence_s is None else round(self.since_divergence_s, 3),
            "divergence_at": self.divergence_wall,
            "detected_at": round(self.detected_wall, 3),
        }

    def __str__(self) -> str:
        f = self.finding
        culprit = rank_ranges(f.culprit_ranks) or "undetermined"
        since = "" if self.since_divergence_s is None else f", {self.since_divergence_s:.1f} s after it began"
        return (
            f"{f.class_id} at {f.where() or 'unknown collective'}; culprit rank(s): {culprit}; "
            f"confidence {f.confidence}{since}\n  {f.summary}"
        )


@dataclass
class _Rank:
    rank: int
    host: str | None = None
    pid: int | None = None
    started: int | None = None  # process start ticks (local ranks only)
    last_seen: float = float("-inf")  # monotonic time of its last tracer line
    cpu: int | None = None
    cpu_changed: float = float("-inf")  # monotonic time its CPU time last advanced
    ended_at: float | None = None
    last_issued: dict[str, int] = field(default_factory=dict)


@dataclass
class _Call:
    row: dict  # the tracer reader's event row
    seen: float  # monotonic time the issue line was read


@dataclass
class _Group:
    size: int | None = None
    desc: str | None = None
    calls: dict[int, dict[int, _Call]] = field(default_factory=dict)  # seq -> rank -> call
    open: dict[int, int] = field(default_factory=dict)  # seq -> calls not yet returned
    seen: set[int] = field(default_factory=set)  # ranks that entered any collective of the group
    finished: deque = field(default_factory=deque)  # seqs every member finished, oldest first
    decided: set[int] = field(default_factory=set)  # seqs whose divergence check is final
    pending: set[int] = field(default_factory=set)  # seqs to (re)check for a divergence

    def members(self) -> set[int]:
        """Every rank of the default group of a stated size, else the ranks seen in the group."""
        if self.desc == "default_pg" and self.size:
            return set(range(self.size)) | self.seen
        return self.seen

    def n_members(self) -> int:
        return max(self.size or 0, len(self.seen)) if self.desc == "default_pg" else len(self.seen)


class LiveState:
    """Feed it tracer lines (:meth:`feed`), ask it for new findings (:meth:`check`)."""

    def __init__(self, *, stall: float | None = None, stall_max: float | None = None, clock=time.monotonic):
        self.fixed_stall = stall
        self.stall_max_s = stall_max if stall_max is not None else max(60.0, 10 * (stall or STALL_FLOOR_S))
        self.clock = clock
        self.ranks: dict[int, _Rank] = {}
        self.groups: dict[str, _Group] = {}
        self.spreads: deque[float] = deque(maxlen=256)  # arrival spreads of finished collectives
        self.reported: set[tuple] = set()
        self.bad_lines = 0
        self.lines = 0
        self.newest_wall: float | None = None  # the latest issue time read (how far behind the writers we are)

    # --- input ---------------------------------------------------------------------------------

    def feed(self, path: str, lines: list[bytes], first_line: int = 1) -> None:
        """Take whole tracer lines of ``path`` (``first_line`` is the number of the first)."""
        now = self.clock()
        out = Output()
        n = _READER.read(b"\n".join(lines) + b"\n", FileContext(file=path), out)
        self.lines += n
        self.bad_lines += n - len(out.parsed)
        for meta in out.ranks:
            self._rank(meta.get("rank"), now, host=meta.get("host"), pid=meta.get("pid"))
        for row in out.events:
            rank, seq, pg = row.get("rank"), row.get("seq"), str(row.get("pg"))
            if not isinstance(rank, int) or not isinstance(seq, int):
                self.bad_lines += 1
                continue
            row["line"] = (row.get("line") or 1) + first_line - 1
            if row.get("t_wall") is not None:
                t = row["t_wall"].timestamp()
                self.newest_wall = t if self.newest_wall is None else max(self.newest_wall, t)
            r = self._rank(rank, now)
            g = self.groups.setdefault(pg, _Group())
            if isinstance(row.get("world_size"), int) and row["world_size"] > 0:
                g.size = row["world_size"]
            g.desc = g.desc or row.get("pg_desc")
            g.seen.add(rank)
            calls = g.calls.setdefault(seq, {})
            old = calls.get(rank)
            if old is None:
                calls[rank] = _Call(row, now)
                g.open[seq] = g.open.get(seq, 0) + (row["state"] == State.SCHEDULED)
                r.last_issued[pg] = max(seq, r.last_issued.get(pg, 0))
                if seq not in g.decided:
                    g.pending.add(seq)
            elif row["state"] != State.SCHEDULED and old.row["state"] == State.SCHEDULED:
                for k in ("state", "t_done_wall", "t_done_mono"):
                    old.row[k] = row.get(k)
                g.open[seq] -= 1
            self._retire(pg, g, seq)

    def _rank(self, rank, now: float, host=None, pid=None) -> _Rank:
        r = self.ranks.get(rank)
        if r is None:
            r = self.ranks[rank] = _Rank(rank)
        r.last_seen = now
        if host is not None:
            r.host = host
        if isinstance(pid, int) and pid != r.pid:
            r.pid, r.ended_at = pid, None
            r.started = procs.start_ticks(pid) if procs.local(r.host) else None
        return r

    def _retire(self, pg: str, g: _Group, seq: int) -> None:
        """Once every member finished ``seq``: learn how far apart they arrived, forget old ones."""
        calls = g.calls.get(seq)
        if not calls or g.open.get(seq) or len(calls) < g.n_members() or seq in g.finished:
            return
        if ("divergence", pg, seq) not in self.reported and ("stall", pg, seq) not in self.reported:
            seen = [c.seen for c in calls.values()]
            self.spreads.append(max(seen) - min(seen))
        g.finished.append(seq)
        while len(g.finished) > KEEP_DONE:
            old = g.finished.popleft()
            g.calls.pop(old, None)
            g.open.pop(old, None)
            g.decided.discard(old)
            g.pending.discard(old)

    # --- decisions -------------------------------------------------------------------------------

    def stall_s(self) -> float:
        """How long nobody may move before ranks missing from a collective are called stuck.

        ``--stall`` when given; otherwise :data:`STALL_FLOOR_S`, raised to
        :data:`STALL_SPREAD_FACTOR` times the widest spread of arrival times seen at the last 256
        collectives that every member finished (a job whose ranks healthily arrive seconds apart
        gets a longer stall time), never above :attr:`stall_max_s`.
        """
        if self.fixed_stall is not None:
            return self.fixed_stall
        learned = STALL_SPREAD_FACTOR * max(self.spreads, default=0.0)
        return min(self.stall_max_s, max(STALL_FLOOR_S, learned))

    def check(self) -> list[LiveFinding]:
        """New findings since the last call (each reported once)."""
        now = self.clock()
        self._refresh_processes(now)
        found: list[LiveFinding] = []
        for pg, g in self.groups.items():
            found += self._divergences(pg, g, now)
            found += self._stall(pg, g, now)
        found += self._deaths(now)
        return found

    def _refresh_processes(self, now: float) -> None:
        for r in self.ranks.values():
            if r.pid is None or r.ended_at is not None or not procs.local(r.host):
                continue
            if not procs.alive(r.pid, r.started):
                r.ended_at = now
                continue
            cpu = procs.cpu_ticks(r.pid)
            if cpu is not None and cpu != r.cpu:
                r.cpu, r.cpu_changed = cpu, now
            if procs.state(r.pid) == "D":  # disk wait: writing a checkpoint is work
                r.cpu_changed = now

    def _divergences(self, pg: str, g: _Group, now: float) -> list[LiveFinding]:
        found = []
        members = g.members()
        for seq in sorted(g.pending):
            calls = g.calls.get(seq, {})
            sigs = {
                r: (c.row.get("op"), c.row.get("in_shapes"), c.row.get("out_shapes"), c.row.get("dtype"))
                for r, c in calls.items()
            }
            everyone = bool(members) and set(calls) >= members
            if len(set(sigs.values())) < 2:
                if everyone:
                    g.pending.discard(seq)
                    g.decided.add(seq)
                continue
            if not everyone and now - min(c.seen for c in calls.values()) < GRACE_S:
                continue  # give the other members a moment to arrive before deciding
            g.pending.discard(seq)
            g.decided.add(seq)
            finding = self._diagnose_one(calls)
            if finding is not None and self._new(("divergence", pg, seq)):
                found.append(LiveFinding(finding, _first_issue(calls), time.time()))
        return found

    def _diagnose_one(self, calls: dict[int, _Call]) -> Finding | None:
        """The analysis' own verdict on one collective's rows (the same rules as ``diagnose``)."""
        from ..analysis import diagnose

        rows = [dict(c.row) for c in calls.values()]
        d = diagnose(Incident(events=coerce("events", rows)))
        first = d.first
        return first if first is not None and first.class_id in _DIVERGENCE else None

    def _stall(self, pg: str, g: _Group, now: float) -> list[LiveFinding]:
        open_seqs = [s for s, n in g.open.items() if n > 0]
        if not open_seqs:
            return []
        seq = min(open_seqs)
        if ("divergence", pg, seq) in self.reported or ("stall", pg, seq) in self.reported:
            return []
        members = g.members()
        inside = {r: c for r, c in g.calls[seq].items() if c.row["state"] == State.SCHEDULED}
        behind = sorted(r for r in members if self.ranks.get(r) is None or self.ranks[r].last_issued.get(pg, 0) < seq)
        stall = self.stall_s()
        waited = now - min(c.seen for c in inside.values())
        quiet = now - max((self.ranks[r].last_seen for r in self.ranks), default=float("-inf"))
        if waited < stall or quiet < stall:
            return []
        if not behind:
            if waited < 3 * stall or set(g.calls[seq]) != members:
                return []
            finding = self._all_waiting(pg, g, seq, inside, waited)
        else:
            busy = [r for r in behind if r in self.ranks and now - self.ranks[r].cpu_changed < BUSY_WINDOW_S]
            if busy and waited < self.stall_max_s:
                return []  # busy outside collectives (a checkpoint, data loading): not stuck yet
            finding = self._stuck(pg, g, seq, inside, behind, members, waited, busy)
        if not self._new(("stall", pg, seq)):
            return []
        return [LiveFinding(finding, _first_issue(g.calls[seq]), time.time())]

    def _stuck(self, pg, g, seq, inside, behind, members, waited, busy) -> Finding:
        op = _op(inside)
        sig = {r: ("behind" if r in behind else "entered") for r in members}
        culprits, basis = strict_minority(sig, len(members) if g.size else None)
        local_idle = all(r in self.ranks and procs.local(self.ranks[r].host) for r in behind) and not busy
        if not culprits and local_idle and set(inside) | set(behind) == members:
            # no majority to vote with (two ranks, a tie), but the processes say it: every other
            # member sits inside the collective, these are alive, idle, and never entered it
            culprits, basis = behind, "statement: never entered the collective the others wait in; idle on this host"
        views = {r: _view(c) for r, c in inside.items()}
        for r in behind:
            last = self.ranks[r].last_issued.get(pg) if r in self.ranks else None
            prev = g.calls.get(last, {}).get(r) if last is not None else None
            views[r] = _view(prev) if prev is not None else RankView()
        never = [r for r in behind if r not in self.ranks]
        n_in = len(inside)
        summary = (
            f"{_ranks(behind)} never entered collective {seq} ({op}) of process group {pg}, where "
            f"{_ranks(sorted(inside))} {'has' if n_in == 1 else 'have'} waited {waited:.1f} s with nothing written since"
            + (f"; {_ranks(never)} wrote no trace at all (absent)" if never else "")
            + ("" if not busy else f"; {_ranks(busy)} still use CPU (busy, or spinning)")
        )
        return Finding(
            ClassId.RANK_DESYNC,
            summary,
            confidence="medium" if local_idle and culprits else "low",
            pg=pg,
            seq=seq,
            seq_kind=SeqKind.TRACE,
            op=op,
            culprit_ranks=tuple(culprits),
            ranks=views,
            evidence=_evidence(inside),
            rule="watch-stall",
            culprit_basis=basis,
        )

    def _all_waiting(self, pg, g, seq, inside, waited) -> Finding:
        op = _op(inside)
        return Finding(
            ClassId.TIMEOUT_UNDETERMINED,
            f"every rank of process group {pg} has waited {waited:.1f} s in collective {seq} ({op}) and they "
            "agree on what it is: the collective itself is stuck (network, a peer's device, or a rank that "
            "entered it in another group)",
            confidence="low",
            pg=pg,
            seq=seq,
            seq_kind=SeqKind.TRACE,
            op=op,
            ranks={r: _view(c) for r, c in inside.items()},
            evidence=_evidence(inside),
            rule="watch-stall",
        )

    def _deaths(self, now: float) -> list[LiveFinding]:
        found = []
        for r in self.ranks.values():
            if r.ended_at is None or now - r.ended_at < DEATH_CONFIRM_S or ("death", r.rank) in self.reported:
                continue
            waits = [
                (pg, s, rank, c)
                for pg, g in self.groups.items()
                if r.rank in g.members()
                for s, n in g.open.items()
                if n > 0
                for rank, c in g.calls[s].items()
                if rank != r.rank and c.row["state"] == State.SCHEDULED and self._alive(rank)
            ]
            if not waits:
                continue  # ended with nobody waiting on it: a normal end, so far
            self.reported.add(("death", r.rank))
            pg, seq = min((w[0], w[1]) for w in waits)
            inside = {rank: c for p, s, rank, c in waits if (p, s) == (pg, seq)}
            own = next((c for cs in self.groups[pg].calls.values() for rk, c in cs.items() if rk == r.rank), None)
            summary = (
                f"rank {r.rank}'s process (pid {r.pid}) ended while {_ranks(sorted(inside))} "
                f"{'waits' if len(inside) == 1 else 'wait'} in collective {seq} ({_op(inside)}) of process group {pg}: "
                "they cannot finish without it"
            )
            finding = Finding(
                ClassId.RANK_CRASH,
                summary,
                confidence="high",
                pg=pg,
                seq=seq,
                seq_kind=SeqKind.TRACE,
                op=_op(inside),
                culprit_ranks=(r.rank,),
                ranks={**{k: _view(c) for k, c in inside.items()}, r.rank: _view(own) if own else RankView()},
                evidence=_evidence(inside),
                rule="watch-death",
                culprit_basis="own-failure",
            )
            found.append(LiveFinding(finding, time.time() - (now - r.ended_at), time.time()))
        return found

    def _alive(self, rank: int) -> bool:
        """A rank that waits must still run: one whose process ended (on this host) waits for nothing."""
        r = self.ranks.get(rank)
        return r is None or r.ended_at is None

    def _new(self, key: tuple) -> bool:
        if key in self.reported:
            return False
        self.reported.add(key)
        return True

    def positions(self) -> dict[int, dict]:
        """Each rank's current position: last collective entered per group, and whether it is inside."""
        out = {}
        for rank, r in sorted(self.ranks.items()):
            inside = {
                pg: s
                for pg, g in self.groups.items()
                for s, cs in g.calls.items()
                if rank in cs and cs[rank].row["state"] == State.SCHEDULED
            }
            out[rank] = {"last_issued": dict(r.last_issued), "inside": inside, "ended": r.ended_at is not None}
        return out


def _first_issue(calls: dict[int, _Call]) -> float | None:
    times = [c.row["t_wall"].timestamp() for c in calls.values() if c.row.get("t_wall") is not None]
    return min(times) if times else None


def _op(calls: dict[int, _Call]) -> str | None:
    ops = sorted({str(c.row.get("op")) for c in calls.values() if c.row.get("op")})
    return "/".join(ops) or None


def _view(c: _Call) -> RankView:
    row = c.row
    shapes = row.get("in_shapes")
    return RankView(
        op=row.get("op"),
        seq=row.get("seq"),
        shapes=[list(s) for s in shapes] if shapes is not None else None,
        dtypes=[row["dtype"]] if row.get("dtype") else None,
        state=str(row.get("state")),
    )


def _evidence(calls: dict[int, _Call], limit: int = 4) -> tuple[Evidence, ...]:
    out = []
    for r, c in sorted(calls.items())[:limit]:
        row = c.row
        out.append(Evidence(row.get("file") or "", int(row.get("line") or 0), f"rank {r}: issued {row.get('op')}", r))
    return tuple(out)


def _ranks(ranks) -> str:
    from ..analysis.rules import fmt_ranks

    return fmt_ranks(ranks)

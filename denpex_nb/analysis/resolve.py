"""Which global rank a piece of evidence speaks of, and on what basis: the one resolver.

Evidence names processes in many ways: a ``[rankN]:`` prefix or ``Rank N`` in a message (the rank
itself), a launcher's local rank (``failed (exitcode: 1) local_rank: 3 (pid: 1234)``: a rank
*within one node*), a ``host:pid`` (NCCL's prefix, a Ray worker's ``pid=``), a pid alone (the
launcher's SIGTERM lines). Every rule that names a process asks this module, so "local rank 3 on
node-7 is rank 27" is decided once, by one set of rules, and every mapping carries its ``basis``
(the evidence that establishes it), which goes into the finding's evidence and culprit basis.

What establishes a mapping (most direct first; a mapping two pieces of evidence contradict is
dropped, never guessed between):

* the row's own ``rank`` (a ``[rankN]:`` prefix, a file's rank, a table row that states it);
* a pid: any row that states both a rank and that pid (torchelastic's failure table, NCCL's Init
  line of ``host:pid``, a rank report), matched on the host too when both sides name one;
* a local rank with its node: a rank report stating (host, local_rank, rank) — torchrun's
  rendezvous result, DeepSpeed's ``global_rank_mapping``;
* a local rank when the launcher that names it ran the whole job: the processes of one launcher
  (its ``Sending process P closing signal`` lines plus the failed one) are the world the evidence
  states (group size), so the job had one node and the local rank is the global rank;
* an address (a peer's ``[10.0.0.3]:4000`` in "connection closed by peer"): the address NCCL's
  ``Bootstrap : Using eth0:10.0.0.3<0>`` line gives a process the evidence ranks, or a host of that
  name or address a rank runs on, when exactly one rank has it (eight ranks on one node share
  its address: then the peer is that node, not a rank).

Otherwise the process is described, not ranked: "local rank 3 on node-7", "pid 1234 on node-7"
(:attr:`Who.label`). A rule never names a culprit it could only describe.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from ..vocab import ErrorKind

__all__ = ["Who", "Resolver"]


@dataclass(frozen=True)
class Who:
    """A process as the evidence names it: its global rank when established, and why."""

    rank: int | None = None
    local_rank: int | None = None
    node: str | None = None  # host, else the file the launcher wrote
    pid: int | None = None
    basis: str = ""  # how the rank was established (or why it was not)
    name: str | None = None  # a launcher's own name for the process ("slurm task 5"), when nothing else

    @property
    def label(self) -> str:
        """``rank 27`` when known, else what the evidence says: ``local rank 3 on node-7``."""
        if self.rank is not None:
            return f"rank {self.rank}"
        parts = []
        if self.local_rank is not None:
            parts.append(f"local rank {self.local_rank}")
        if self.pid is not None:
            parts.append(f"pid {self.pid}" if not parts else f"(pid {self.pid})")
        where = f" on {self.node}" if self.node else ""
        return (" ".join(parts) or self.name or "a process") + where


def _int(v) -> int | None:
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _str(v) -> str | None:
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) or str(v) == "" else str(v)


def _col(frame: pd.DataFrame, name: str) -> list:
    return frame[name].astype(object).tolist() if name in frame.columns else [None] * len(frame)


class Resolver:
    """Maps (pid, host, local rank) to global ranks from every source of one incident."""

    def __init__(self, incident, group_size: int | None = None):
        self.group_size = group_size
        # key -> {rank: basis}; a key that maps to two ranks is ambiguous and resolves to nothing
        self._pid: dict[tuple, dict[int, str]] = defaultdict(dict)
        self._local: dict[tuple, dict[int, str]] = defaultdict(dict)
        self._launcher_pids: dict[str, set[int]] = defaultdict(set)  # file -> pids the launcher named
        self._addr: dict[str, dict[int, str]] = defaultdict(dict)  # address or host -> {rank: basis}
        for frame, what in ((incident.errors, "errors"), (incident.events, "events"), (incident.ranks, "ranks")):
            if frame is not None and len(frame):
                self._learn(frame, what)
        self._learn_addresses(incident)
        errs = incident.errors
        if errs is not None and len(errs) and "pid" in errs.columns:
            agent = errs[errs["kind"].astype(str) == ErrorKind.AGENT]
            for f, pid, msg in zip(_col(agent, "file"), _col(agent, "pid"), _col(agent, "message")):
                torchelastic = "closing signal" in str(msg) or "failed (exitcode" in str(msg)
                if torchelastic and _str(f) is not None and _int(pid) is not None:
                    self._launcher_pids[str(f)].add(int(pid))

    # --- learning ------------------------------------------------------------------------------

    def _learn(self, frame: pd.DataFrame, what: str) -> None:
        if "rank" not in frame.columns:
            return
        has = frame["rank"].notna()
        if not has.any() or not ({"pid", "local_rank"} & set(frame.columns)):
            return
        f = frame[has]
        kinds = _col(f, "kind")
        sources = _col(f, "source")
        for rank, pid, host, local, kind, src, file, line in zip(
            _col(f, "rank"),
            _col(f, "pid"),
            _col(f, "host"),
            _col(f, "local_rank"),
            kinds,
            sources,
            _col(f, "file"),
            _col(f, "line"),
        ):
            rank, pid, local, host = _int(rank), _int(pid), _int(local), _str(host)
            if rank is None:
                continue
            where = f" ({file}:{_int(line)})" if _str(file) and _int(line) is not None else ""
            if what == "ranks":
                source = "a rank report (NCCL Init line, launcher rank map or failure table)"
            elif str(kind) == ErrorKind.CHILD_FAILED:
                source = "torchelastic's failure table" + where
            elif str(src) == "nccl":
                source = "NCCL's line of that host:pid" + where
            else:
                source = f"a {src or what} line stating both" + where
            if pid is not None:
                on = f" on {host}" if host else ""
                self._pid[(host, pid)].setdefault(rank, f"pid {pid}{on} is rank {rank}: {source}")
            if local is not None and host is not None:  # a local rank means nothing without its node
                self._local[(host, local)].setdefault(rank, f"local rank {local} on {host} is rank {rank}: {source}")

    def _learn_addresses(self, incident) -> None:
        """Address or host -> ranks: the ranks frame's bootstrap ``addr`` and ``host``, and the host a
        failure signal's line names beside its rank."""
        rk = incident.ranks
        if rk is not None and len(rk):
            for r, a, h, pid in zip(_col(rk, "rank"), _col(rk, "addr"), _col(rk, "host"), _col(rk, "pid")):
                r, a, h, pid = _int(r), _str(a), _str(h), _int(pid)
                if r is None:
                    continue
                proc = f"{h}:{pid}" if h and pid is not None else (h or "its process")
                if a is not None:
                    self._addr[a].setdefault(
                        r, f"{a} is rank {r}: NCCL's Bootstrap line of {proc} uses it, and that process is rank {r}"
                    )
                if h is not None:
                    self._addr[h].setdefault(r, f"{h} is rank {r}'s host (its NCCL or launcher lines name it)")
        sig = getattr(incident, "signals", None)
        if sig is not None and len(sig) and "host" in sig.columns:
            for r, h, f, ln in zip(_col(sig, "rank"), _col(sig, "host"), _col(sig, "file"), _col(sig, "line")):
                r, h = _int(r), _str(h)
                if r is not None and h is not None:
                    self._addr[h].setdefault(r, f"{h} is rank {r}'s host ({f}:{_int(ln)} names both)")

    @staticmethod
    def _one(cands: dict[int, str] | None) -> tuple[int, str] | None:
        if not cands or len(cands) != 1:
            return None
        ((rank, basis),) = cands.items()
        return rank, basis

    # --- asking --------------------------------------------------------------------------------

    def by_pid(self, pid: int | None, host: str | None = None) -> tuple[int, str] | None:
        """The rank of ``pid`` (on ``host`` when named) and the basis, or None."""
        if pid is None:
            return None
        if host is not None:
            hit = self._one(self._pid.get((host, pid)))
            if hit:
                return hit
        # the pid alone: every host that names it must agree (pids repeat across nodes)
        merged: dict[int, str] = {}
        for (h, p), cands in self._pid.items():
            if p == pid and (host is None or h is None or h == host):
                merged.update(cands)
        return self._one(merged)

    def by_local(self, local: int | None, node: str | None = None, file: str | None = None) -> tuple[int, str] | None:
        """The rank of local rank ``local`` on ``node`` (a host), or None."""
        if local is None:
            return None
        if node is not None:
            hit = self._one(self._local.get((node, local)))
            if hit:
                return hit
        if file is not None and self.group_size:
            procs = self._launcher_pids.get(file, set())
            if len(procs) == self.group_size and 0 <= local < self.group_size:
                return local, (
                    f"the launcher in {file} ran {len(procs)} processes, the whole world of {self.group_size}: "
                    f"one node, so local rank {local} is rank {local}"
                )
        return None

    def by_addr(self, addr: str | None) -> tuple[int, str] | None:
        """The rank at ``addr`` (``10.0.0.3``, ``[10.0.0.3]:4000``, ``node7``) and the basis, or None
        when no rank or several have it."""
        a = _str(addr)
        if a is None:
            return None
        a = a.strip()
        if a.startswith("["):  # [ip]:port, [v6]:port
            a = a[1 : a.index("]")] if "]" in a else a[1:]
        elif a.count(":") == 1:  # ip:port, host:port
            a = a.split(":", 1)[0]
        return self._one(self._addr.get(a))

    def who(self, row: dict) -> Who:
        """The process an errors row speaks of: its rank when the row states it or another piece of
        evidence maps its pid / local rank to one; otherwise its description."""
        rank = _int(row.get("rank"))
        pid = _int(row.get("pid"))
        local = _int(row.get("local_rank"))
        host = _str(row.get("host"))
        file = _str(row.get("file"))
        basis = _str(row.get("rank_basis"))
        if rank is not None:
            return Who(rank, local, host, pid, basis or "the line states its rank")
        hit = self.by_pid(pid, host) or self.by_local(local, host, file)
        if hit is not None:
            return Who(hit[0], local, host, pid, hit[1])
        node = host or (f"the node whose launcher wrote {file}" if file and local is not None else None)
        return Who(None, local, node, pid, "undetermined: no evidence maps this process to a global rank")

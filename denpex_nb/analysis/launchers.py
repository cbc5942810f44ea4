"""Launchers say who failed first: torchelastic, DeepSpeed, Ray, a closed rendezvous, read as they behave.

A launcher watches its workers and reports when one ends badly, which makes it a witness of who
failed *first* that no rank's own log can be:

* torchelastic's agent sends SIGTERM to the survivors and then logs the first failure of its node,
  ``failed (exitcode: C) local_rank: L (pid: P)`` (the earliest by its own timestamps), and raises
  ``ChildFailedError`` with a table whose ``Root Cause (first observed failure)`` row states the
  global rank, its local rank, host, pid and exit code. Each node's agent reports only its node.
* DeepSpeed's launcher prints, on failure, ``<cmd> exits with return code = C`` where ``cmd`` is the
  command line of the *last process it started*, not of the one that died (the loop variable
  outlives the loop); ``torch.distributed.launch`` raises ``CalledProcessError`` with the same
  last command. The failure holds; the culprit is undetermined (the reader keeps that command's
  local rank apart, as ``launched_last_local_rank``).
* Ray reports a dead worker by pid and IP (``Worker PID: P``, ``pid: P`` / ``ip: X`` under a
  ``RayActorError`` / ``ActorDiedError``); the rank is known only where other evidence maps it.
* PaddlePaddle's launcher logs, for the first failed container of its pod (in container order, polled
  each second), ``Container rank L status failed cmd [...] code C``: ``L`` is the container's index in
  the pod, a local rank on that node, not the global rank.
* ``RendezvousClosedError`` on a node means another node's agent closed the rendezvous after its
  workers failed: a failure elsewhere, of a process this node cannot name.
* The launcher's own traceback (torchrun's ``main``, ``launch_agent``) is its own failure, outside
  any worker, unless what failed it was the rendezvous store out of reach: its message, or the
  exception chained right before it (``The above exception was the direct cause ...``), of the
  network or timeout family (``connect() timed out``, ``The client socket has timed out after 60s
  while trying to connect to (host, port)``, ``RendezvousConnectionError: The connection to the C10d
  store has failed``, ``RendezvousTimeoutError``). No worker ever started then: no statement of a
  process's failure; the signal layer gives the family (the network's, or a timeout).

A stated exit is a rank's own failure when its code is an error (> 0) or a crash signal. SIGTERM,
SIGINT and SIGHUP are the launcher's (or a scheduler's) doing; SIGABRT is how the NCCL watchdog
takes a process down, so beside a collective failure it is a victim. A process that exits with an
error beside a collective failure (a timeout, a peer gone, an NCCL error, a mismatch; a wait at init
for ranks that never joined, timed out: ``signals.INIT_WAIT_TIMEOUT``; a store client that could not
reach the master: ``signals.STORE_UNREACHABLE``) may have exited *because of*
it, so the launcher's statement then is only an alternative, never the verdict.
Ranks come from :mod:`.resolve`; a statement that names only a local rank says so and names no
culprit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from ..signals import INIT_WAIT_TIMEOUT, NCCL_CODES, STOPPED, STORE_UNREACHABLE, family_of
from ..vocab import COLLECTIVE_ERROR_KINDS, TRUNCATED_TRACEBACK, ClassId, ErrorKind, SignalFamily
from .model import Evidence, Finding
from .resolve import Resolver, Who
from .rules import Context, is_failure, rule, wrapped_nccl_errors

#: signals a launcher or a scheduler sends (not a rank's own failure)
_SENT = {"SIGTERM", "SIGINT", "SIGHUP"}
#: signals that are a rank's own crash whatever else failed (SIGKILL: the OOM killer or the user)
_CRASH = {"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGKILL"}
_RAY_DEAD = re.compile(
    r"worker died or was killed|actor died unexpectedly|(?:RayActorError|ActorDiedError|ActorUnavailableError)\b",
    re.I,
)
_RAY_PID = re.compile(r"(?:Worker PID|\bpid)\s*[:=]\s*(\d{1,10})\b")
_RAY_IP = re.compile(r"(?:Worker IP address|\bip)\s*[:=]\s*([0-9a-fA-F.:]{3,45})\b")
_RDZV_CLOSED = re.compile(r"RendezvousClosedError")
_LAST_CMD = re.compile(r"exits with return code")
_PEER_DIED = r"remote process exited|Connection (?:reset|closed) by (?:remote )?peer|peer process has unexpectedly"
_ELSEWHERE = "undetermined: the process is on another node"
_TASK_BASIS = "undetermined: a slurm task is a rank only when srun starts one process per rank"
_LAUNCHER_ITSELF = "undetermined: the launcher failed itself, outside any worker"
_NOT_NAMED = "undetermined: the launcher stopped the other workers, and its line naming the failed one is not here"
#: frames only the launcher's own stack has (torchrun's main, launch_agent)
_LAUNCHER_MAIN = ("torch/distributed/run.py", "torch/distributed/launcher/api.py")
_CALLED = re.compile(r"returned non-zero exit status (\d{1,9})")
_LAST_CMD_BASIS = (
    "undetermined: the launcher printed the command line of the last process it started, "
    "which is not necessarily the one that died"
)


@dataclass(frozen=True)
class Statement:
    """One launcher's word that a process ended badly."""

    who: Who
    launcher: str  # torchelastic | torchelastic table | deepspeed | mpirun | ray | ray train | rendezvous ...
    exit_code: int | None
    signal: str | None
    first: bool  # the launcher says this one failed first (of its node)
    t: object
    evidence: Evidence
    always: bool = False  # the statement is a failure whatever its exit code says (a dead worker, a node lost)


def _i(v):
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _s(v):
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) or str(v) == "" else str(v)


def statements(ctx: Context, resolver: Resolver) -> list[Statement]:
    """Every launcher statement of a failed process in the incident's errors."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    out = []
    sigterms = 0  # torchelastic's "Sending process P closing signal SIGTERM" lines
    stopped_from_outside = False  # the agent itself was stopped, or the membership changed
    rows = errs.to_dict("records")
    for i, row in enumerate(rows):
        kind, msg = str(row.get("kind")), _s(row.get("message")) or ""
        ev = Evidence(
            file=_s(row.get("file")) or "?", line=_i(row.get("line")) or 0, text=msg[:500], rank=_i(row.get("rank"))
        )
        code, sig = _i(row.get("exit_code")), _s(row.get("signal"))
        t = row.get("t_wall")
        t = None if t is None or pd.isna(t) else t
        launcher = _s(row.get("launcher"))
        if kind == ErrorKind.AGENT and launcher is not None:
            if row.get("stopped") is True or row.get("membership_change") is True:
                stopped_from_outside = True
                continue
            who = resolver.who(row)
            if launcher == "srun" and _s(row.get("task")):
                who = Who(None, None, _s(row.get("host")), None, _TASK_BASIS, name=f"slurm task {row.get('task')}")
            if who.rank is None and _s(row.get("peer_host")):
                who = Who(None, None, _s(row.get("peer_host")), None, "undetermined: only the peer's host is named")
            if launcher == "ray":
                out.append(_ray(row, msg, resolver, t, ev))
                continue
            first = row.get("first") is True or (launcher == "mpirun" and who.rank is not None)
            out.append(Statement(who, launcher, code, sig, first, t, ev, always=True))
        elif kind == ErrorKind.AGENT and "failed (exitcode" in msg:
            out.append(Statement(resolver.who(row), "torchelastic", code, sig, True, t, ev))
        elif kind == ErrorKind.AGENT and "closing signal" in msg:
            sigterms += 1
        elif kind == ErrorKind.CHILD_FAILED:
            first = bool(row.get("root_cause")) if _s(row.get("root_cause")) is not None else False
            out.append(Statement(resolver.who(row), "torchelastic table", code, sig, first, t, ev))
        elif _RAY_DEAD.search(msg):
            out.append(_ray(row, msg, resolver, t, ev))
        elif kind == ErrorKind.AGENT and _LAST_CMD.search(msg) and (code or 0) != 0:
            # DeepSpeed: the command printed is the last one it started, not the failed one's
            pid = _i(row.get("pid"))
            who = resolver.who({"pid": pid, "host": row.get("host")}) if pid is not None else Who()
            if who.rank is None:
                who = Who(None, None, None, pid, _LAST_CMD_BASIS)
            out.append(Statement(who, "deepspeed", code, sig, True, t, ev))
        elif kind == ErrorKind.EXCEPTION and _CALLED.search(msg) and "local_rank" in msg:
            status = _CALLED.search(msg)
            out.append(
                Statement(
                    Who(basis=_LAST_CMD_BASIS), "torch.distributed.launch", _i(status.group(1)), None, True, t, ev
                )
            )
        elif kind == ErrorKind.EXCEPTION and _RDZV_CLOSED.search(msg):
            out.append(Statement(Who(basis=_ELSEWHERE), "rendezvous", None, None, False, t, ev, always=True))
        elif (kind == ErrorKind.EXCEPTION or kind == ErrorKind.AGENT) and STOPPED.search(msg):
            # the launcher (or a worker) was stopped from outside: a user's Ctrl-C, a scheduler's signal; the
            # workers it then stops are its consequence, nobody failed first
            stopped_from_outside = True
        elif kind == ErrorKind.EXCEPTION and _launcher_frames(row.get("frames")) and "ChildFailedError" not in msg:
            if _store_unreachable(rows, i):
                continue  # the rendezvous store was out of reach: no worker started, none failed
            # the launcher's own traceback (torchrun's main, the elastic agent): it failed itself
            out.append(Statement(Who(basis=_LAUNCHER_ITSELF), "torchrun", None, None, True, t, ev, always=True))
    if any(s.launcher.startswith("torchelastic") and s.who.basis != _NOT_NAMED for s in out):
        # the launcher's own traceback after its agent named a failed worker is how it raises that
        # failure (ChildFailedError, its last line cut by the paste): the same failure, not a second one
        out = [s for s in out if not (s.launcher == "torchrun" and s.who.basis == _LAUNCHER_ITSELF)]
    if sigterms and not stopped_from_outside and not any(s.launcher.startswith("torchelastic") for s in out):
        # the agent stops the others only after a worker failed; the line naming it is not here
        ev = _first_sigterm(errs)
        out.append(Statement(Who(basis=_NOT_NAMED), "torchelastic", None, None, False, None, ev, always=True))
    return out


def _ray(row: dict, msg: str, resolver: Resolver, t, ev: Evidence) -> Statement:
    """A dead Ray worker, by pid and IP (ranked only where other evidence maps the pid)."""
    pid = _RAY_PID.search(msg)
    ip = _RAY_IP.search(msg)
    probe = {
        "pid": int(pid.group(1)) if pid else _i(row.get("pid")),
        "host": ip.group(1) if ip else _s(row.get("host")),
    }
    who = resolver.who(probe)
    if who.rank is None and probe["host"]:
        who = Who(None, None, probe["host"], probe["pid"], who.basis)
    return Statement(who, "ray", None, None, True, t, ev, always=True)


def _first_sigterm(errs: pd.DataFrame) -> Evidence:
    rows = errs[errs["message"].astype(str).str.contains("closing signal", regex=False)]
    r = rows.iloc[0]
    return Evidence(file=_s(r["file"]) or "?", line=_i(r["line"]) or 0, text=str(r["message"])[:500])


#: lines between a chained cause's last line and the traceback it caused (a blank line, Python's
#: ``The above exception was the direct cause of the following exception:``, a blank line)
_CHAIN_GAP = 4


def _store_unreachable(rows: list[dict], i: int) -> bool:
    """Did the launcher's own traceback ``rows[i]`` fail because the rendezvous store was out of reach:
    its message, or the exception that ends right before it in the same file and process (its chained
    cause), of the network or timeout family?"""
    fams = (SignalFamily.NETWORK, SignalFamily.TIMEOUT)
    row = rows[i]
    msg = _s(row.get("message")) or ""
    if not msg.startswith(TRUNCATED_TRACEBACK) and family_of(msg) in fams:
        return True
    line, f, r = _i(row.get("line")), _s(row.get("file")), _i(row.get("rank"))
    for prev in reversed(rows[:i]):
        if str(prev.get("kind")) != ErrorKind.EXCEPTION or _s(prev.get("file")) != f or _i(prev.get("rank")) != r:
            continue
        start, n = _i(prev.get("line")), _i(prev.get("n_traceback_lines")) or 1
        if line is None or start is None or start > line or start + n - 1 + _CHAIN_GAP < line:
            return False
        pmsg = _s(prev.get("message")) or ""
        return not pmsg.startswith(TRUNCATED_TRACEBACK) and family_of(pmsg) in fams
    return False


def _launcher_frames(frames) -> bool:
    """The traceback is the launcher's own: torchrun's main or launch_agent is in it and the innermost
    frame is torch.distributed's (a worker's traceback never passes through launch_agent)."""
    f = _s(frames)
    return bool(f) and any(m in f for m in _LAUNCHER_MAIN) and "torch/distributed/" in f.rsplit("\n", 1)[-1]


def _own(s: Statement) -> bool:
    """Is the stated end the process's own failure (not the launcher's kill, not a watchdog's abort)?"""
    sig = s.signal
    if sig in _SENT:
        return False
    if s.always:
        return True  # a dead worker, a node that failed: the failure is the statement itself
    # SIGABRT counts, but it is no crash signal: the NCCL watchdog aborts the process it runs in, so
    # beside a collective failure it is only an alternative (see launcher_first_failure)
    return sig is not None or (s.exit_code is not None and s.exit_code > 0)


def _collective_failure(ctx: Context) -> tuple[bool, object]:
    """Does the evidence show a collective failure (which a process may have exited because of)?
    And the earliest time one was printed (None: no time)."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return False, None
    kinds = errs["kind"].astype(str)
    coll = kinds.isin([str(k) for k in COLLECTIVE_ERROR_KINDS]).to_numpy(bool).copy()
    coll |= wrapped_nccl_errors(errs).to_numpy(bool)  # NCCL's error inside another framework's exception
    # a wait at init for ranks that never joined, timed out: the exit that follows is its consequence
    waited = errs["message"].astype(str).str.contains(INIT_WAIT_TIMEOUT)
    # so is a store client that could not reach the master (no route, the connection failed for good)
    waited |= errs["message"].astype(str).str.contains(STORE_UNREACHABLE)
    coll |= ((kinds == ErrorKind.EXCEPTION) & waited).to_numpy(bool)
    warn = (kinds == ErrorKind.NCCL_WARN).to_numpy(bool)
    for i in warn.nonzero()[0]:
        coll[i] = is_failure(ErrorKind.NCCL_WARN, errs["message"].iloc[i])
    # a peer that died is what these report: a consequence of a death, never the cause of an exit
    msg = errs["message"].astype(str)
    coll = coll & ~((kinds == ErrorKind.GLOO_PEER_GONE) | msg.str.contains(_PEER_DIED, regex=True)).to_numpy(bool)
    if not coll.any():
        # NCCL's own error words on a line no reader parsed (another framework's log line)
        sig = getattr(ctx.incident, "signals", None)
        if sig is not None and len(sig):
            fail = sig[sig["failure"].fillna(False).astype(bool)]
            if any(NCCL_CODES.search(str(t)) for t in fail["text"].astype(object)):
                return True, None
        return False, None
    t = errs["t_wall"][coll].dropna()
    return True, (t.min() if len(t) and t.notna().all() and len(t) == int(coll.sum()) else None)


@rule(
    "launcher-first-failure",
    emits=(ClassId.RANK_CRASH,),
    uses=(
        "errors: agent (torchelastic failed line), child_failed (Root Cause), Ray worker deaths, RendezvousClosedError",
    ),
)
def launcher_first_failure(ctx: Context) -> list[Finding]:
    """The process a launcher names as the first to fail, as a ``rank-crash`` (see the module doc)."""
    resolver = ctx.resolver
    found = statements(ctx, resolver)
    if not found:
        return []
    collective, t_collective = _collective_failure(ctx)
    own = [s for s in found if _own(s)]
    if not own:
        return []
    # a crash signal, or a worker the launcher saw die (not exit): nothing collective explains that
    crash_signal = any(s.signal in _CRASH or s.launcher == "ray" for s in own)
    firsts = [s for s in own if s.first] or own
    # one process may be named twice (the agent's line and its table's row): keep one per process
    procs: dict = {}
    for s in firsts:
        key = (s.who.rank,) if s.who.rank is not None else (s.who.pid, s.who.local_rank, s.who.node)
        procs.setdefault(key, s)
    chosen = list(procs.values())
    timed = [s for s in chosen if s.t is not None]
    if len(chosen) > 1 and len(timed) == len(chosen):
        t0 = min(s.t for s in timed)
        earliest = [s for s in timed if s.t == t0]
        chosen = earliest if len(earliest) == 1 else chosen
    evidence = tuple(s.evidence for s in own)[:8]
    launchers = sorted({s.launcher for s in own})
    tied = _tied(chosen, own)
    if tied:
        culprits = []
        basis = (
            f"undetermined: {len(tied) + 1} processes failed in the same second ({chosen[0].t}); the launcher's "
            "'first observed' is the order it recorded them in, not an order of failure"
        )
        what = "several processes at once"
    elif len(chosen) == 1 and chosen[0].who.rank is not None:
        s = chosen[0]
        culprits, basis = (
            [s.who.rank],
            f"statement: {s.launcher} names {s.who.label} as the first to fail; {s.who.basis}",
        )
        what = f"{s.who.label}" + (f" (local rank {s.who.local_rank})" if s.who.local_rank is not None else "")
    elif len(chosen) == 1:
        s = chosen[0]
        culprits = []
        basis = f"undetermined: {s.launcher} names {s.who.label}, and {s.who.basis.removeprefix('undetermined: ')}"
        what = s.who.label
    else:
        culprits = []
        named = ", ".join(sorted({s.who.label for s in chosen}))
        basis = f"undetermined: the launchers name several processes ({named}) and nothing orders them"
        what = "several processes"
    how = _how(chosen[0]) if len(chosen) == 1 and not tied else "failed"
    # an exit with an error beside a collective failure may be its consequence, unless the launcher
    # saw it before any collective failure was printed
    t_first = min((s.t for s in chosen if s.t is not None), default=None)
    before = t_first is not None and t_collective is not None and t_first < t_collective
    only_alt = collective and not crash_signal and not before
    stopped = _stopped(ctx)
    summary = (
        f"The launcher ({', '.join(launchers)}) reports {what} {how} first"
        + (f"; it then stopped {stopped} other worker(s) (SIGTERM)." if stopped else ".")
        + (" A collective failed too, so this exit may be its consequence." if only_alt else "")
    )
    return [
        Finding(
            class_id=ClassId.RANK_CRASH,
            summary=summary,
            confidence="low" if only_alt or not culprits and len(chosen) > 1 else "medium",
            culprit_ranks=culprits,
            evidence=evidence,
            t_wall=min((s.t for s in own if s.t is not None), default=None),
            rule="launcher-first-failure",
            culprit_basis=basis,
            alternative_only=only_alt,
        )
    ]


def _tied(chosen: list[Statement], own: list[Statement]) -> list[Statement]:
    """Other processes whose stated failure has the same time as the one chosen (a failure table's
    times have one-second resolution: a tie there orders nothing)."""
    if len(chosen) != 1 or chosen[0].t is None:
        return []
    c = chosen[0]
    me = {(c.who.rank, c.who.pid)}
    return [
        s for s in own if s.t == c.t and (s.who.rank, s.who.pid) not in me and (s.who.rank, s.who.pid) != (None, None)
    ]


def _stopped(ctx: Context) -> int:
    """How many workers the launchers stopped (``Sending process P closing signal SIGTERM``)."""
    errs = ctx.errors
    agent = errs[errs["kind"].astype(str) == ErrorKind.AGENT]
    if not len(agent):
        return 0
    sent = agent[agent["signal"].astype(object).isin(list(_SENT)) & agent["exit_code"].isna()]
    return int(sent["pid"].nunique()) if "pid" in sent.columns else len(sent)


def _how(s: Statement) -> str:
    if s.launcher == "ray":
        return "died"
    if s.launcher == "rendezvous":
        return "failed (its agent closed the rendezvous)"
    if s.signal:
        return f"was killed by {s.signal}" + (f" (exit code {s.exit_code})" if s.exit_code is not None else "")
    return f"exited with code {s.exit_code}" if s.exit_code is not None else "failed"

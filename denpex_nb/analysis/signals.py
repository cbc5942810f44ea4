"""Verdicts from the failure signals (``Incident.signals``) when no specific rule explains a failure.

The readers give structure where they know a format; the failure-signal layer
(``denpex_nb.signals``, docs/signals.md) gives every line a severity and a family whatever
its format. Diagnosis uses it for three things:

* **No false all-clear.** ``no-failure`` needs that no line on any rank signalled a failure
  (:func:`failure_signals` empty).
* **The family of the first failure.** When no rule found anything (or only "something failed"),
  the verdict follows the family of the first failure signal (by time, else by file order):
  network -> ``nccl-error``, size -> ``shape-mismatch`` (``dtype-mismatch`` for dtypes), memory /
  device / process exit / launcher -> ``rank-crash``, timeout -> ``timeout-undetermined``,
  stall -> ``rank-desync``; at medium or low confidence (:func:`signal_finding`). A line of no family
  that says another process raised (``caused by an exception on one of the ranks``) is a
  ``rank-crash`` of a rank it does not name, at low confidence.
* **A process's own error is not a collective failure.** Evidence from a single process (no other
  rank anywhere) with an out-of-memory, a device fault or a crash after the work said it finished is
  a ``rank-crash`` of that process at low or medium confidence (:func:`own_process_error`); not where
  NCCL reported the fault as its own error (``ncclUnhandledCudaError ... Last error: Cuda failure``:
  a communicator was in use, the failure is NCCL's).

Processes that raised, their tracebacks cut before the exception line, with nothing else failing
anywhere, may have crashed (:func:`cut_tracebacks`): a ``rank-crash`` at low confidence, offered as an
alternative beside "cause undetermined" (the cut may have taken a collective's own error).

NCCL's remote-allocator service thread failing on a stray connection while the log goes on after it
is set aside before any rule runs (:func:`allocator_noise`): that thread's failures are not the job's.

A peer that closed or reset the connection died first (:func:`peer_gone`): its address or host is
mapped to a rank when a prefix, an NCCL line or the ranks frame ties that host to one rank.
"""

from __future__ import annotations

import re

import pandas as pd

from .. import human
from ..ops import normalize_op
from ..signals import (
    BACKTRACE_LINE,
    CRASH_ELSEWHERE,
    INIT_ENTERING,
    NCCL_CODES,
    NCCL_THREAD,
    REMOTE_ALLOCATOR,
    RETRYING,
    STORE_CONNECT_TRY,
    TERMINATE,
    USAGE_ERROR,
    WAITING,
    family_of,
)
from ..vocab import FAILURE_KINDS, TRUNCATED_TRACEBACK, VICTIM_KINDS, ClassId, ErrorKind, SignalFamily
from .model import Evidence, Finding

#: the class each family points to when nothing more specific explains the failure
FAMILY_CLASS = {
    SignalFamily.NETWORK: ClassId.NCCL_ERROR,
    SignalFamily.SIZE: ClassId.SHAPE_MISMATCH,
    SignalFamily.MEMORY: ClassId.RANK_CRASH,
    SignalFamily.DEVICE: ClassId.RANK_CRASH,
    SignalFamily.EXIT: ClassId.RANK_CRASH,
    SignalFamily.LAUNCHER: ClassId.RANK_CRASH,
    SignalFamily.PORT: ClassId.RANK_CRASH,
    SignalFamily.SETUP: ClassId.RANK_CRASH,
    SignalFamily.TIMEOUT: ClassId.TIMEOUT_UNDETERMINED,
    SignalFamily.STALL: ClassId.RANK_DESYNC,
    SignalFamily.COMPONENT: ClassId.TIMEOUT_UNDETERMINED,
    SignalFamily.STOP: ClassId.TIMEOUT_UNDETERMINED,
}
#: families that are a process's own failure, not a collective's (its memory, its device, a port it
#: could not bind: another process holds it, a backend its build or its machine lacks)
OWN_FAMILIES = frozenset({SignalFamily.MEMORY, SignalFamily.DEVICE, SignalFamily.PORT, SignalFamily.SETUP})
#: families that speak of more than one process (a signal of these is distributed evidence)
DISTRIBUTED_FAMILIES = frozenset(
    {
        SignalFamily.NETWORK,
        SignalFamily.COMPONENT,
        SignalFamily.SIZE,
        SignalFamily.STALL,
        SignalFamily.LAUNCHER,
        SignalFamily.TIMEOUT,
    }
)
_OP_WORD = re.compile(
    r"(?i)\b(all_?reduce(?:_coalesced)?|all_?gather(?:_into_tensor|_base|_coalesced)?|reduce_?scatter(?:_tensor)?"
    r"|all_?to_?all(?:_single)?|broadcast|barrier|\breduce\b|\bgather\b|\bscatter\b|send|recv)\b"
)
_DTYPE_WORD = re.compile(r"(?i)\bdtypes?\b|\bscalar type\b")
_SIZE_WORD = re.compile(r"(?i)\bsizes?\b|\bshapes?\b|\bnumel\b|\bcounts?\b|\bnumber of\b|\blength\b")
_LOCAL_SIZE = re.compile(r"(?i)mismatch|must match|does not match|doesn't match|expected|invalid|divisible")
_EXC = re.compile(r"\b[A-Za-z_]\w*?(?:Error|Exception)\b")
_USAGE = re.compile(USAGE_ERROR)
#: a connection the other side closed or reset, or a remote process gone, in words
PEER_WORDS = re.compile(
    r"(?i)(?:closed|reset) by (?:the )?(?:remote )?peer|connection (?:reset|closed)|remote (?:process|peer) (?:exited|closed|died)"
)
_PEER = PEER_WORDS
# a host name starts a token (the lookbehind): a long run of word characters without a port costs
# one attempt, not one per position (tests/test_regex_linear.py)
_ADDR = re.compile(r"\[?((?:\d{1,3}\.){3}\d{1,3}|(?<![\w.-])[A-Za-z][\w-]*(?:\.[\w-]+)*)\]?:(\d{2,5})\b")
_ADDR_PEER = re.compile(r"(?i)peer[^\n]{0,40}?\[?((?:\d{1,3}\.){3}\d{1,3})\]?|\[((?:\d{1,3}\.){3}\d{1,3})\]:\d{2,5}")
#: a message that names the peer of a connection by its rank, not its address (torch.distributed.rpc's
#: agents: ``RPC agent for 3 encountered error when sending outgoing request #0 to 0: ... Connection reset
#: by peer``, ``... reading incoming response from 0: ...``; ``peer rank 3``, ``remote worker 3``)
_PEER_RANK = re.compile(
    r"(?i)\b(?:request|response|message|reply)\b[^\n:]{0,40}?\b(?:to|from) (?:rank |worker )?(\d{1,6}):"
    r"|\b(?:peer|remote) (?:rank|worker) (\d{1,6})\b"
)
#: the rank that wrote such a message, where the message says it (``RPC agent for 3``, ``rank 3``)
_REPORTER_RANK = re.compile(r"(?i)\b(?:agent for|rank|worker) (\d{1,6})\b")
_CONF = {"high": 0, "medium": 1, "low": 2}
#: NCCL's ncclRemoteError, an either-or of its own: "remote process exited or there was a network
#: error". With nothing else failing it is NCCL's error (low: a crash elsewhere is as consistent),
#: not a victim's line beside an unseen cause (a peer that closed the connection is that)
_EITHER = re.compile(r"remote process exited or there was a network error|\bncclRemoteError\b")


def _empty(incident) -> bool:
    s = getattr(incident, "signals", None)
    return s is None or not len(s)


def failure_signals(incident) -> pd.DataFrame:
    """The failure rows of ``incident.signals``, first failure first: by time where the lines have one
    (lines without come after), then by the order of files and lines as read."""
    if _empty(incident):
        return pd.DataFrame(columns=["rank", "t_wall", "file", "line", "severity", "family", "failure", "text"])
    s = incident.signals
    f = s[s["failure"].fillna(False).astype(bool)]
    if not len(f):
        return f
    order = {name: i for i, name in enumerate(incident.sources["file"].astype(object))} if len(incident.sources) else {}
    f = f.assign(_file=f["file"].astype(object).map(order).fillna(len(order)).astype("int64"))
    f = f.sort_values(["_file", "line"], kind="stable")
    # within a file its lines are in order; a line without a time takes its neighbours' (the one
    # before, else the one after), so times order the files without reordering one file's lines
    # (grouped fills, not a Python function per file: a folder of thousands of rank logs)
    t = f.groupby("_file", sort=False)["t_wall"].ffill().groupby(f["_file"], sort=False).bfill()
    f = f.assign(_t=t)
    return f.sort_values(["_t", "_file", "line"], na_position="last", kind="stable").drop(columns=["_t", "_file"])


def allocator_noise(incident):
    """The incident without the failure lines of NCCL's remote-allocator service thread, and a note
    saying so; None when there are none to set aside.

    A thread (``host:pid:tid`` of NCCL's prefix) is the allocator's when it printed a ``[Rem
    Allocator]`` WARN (:data:`denpex_nb.signals.REMOTE_ALLOCATOR`); its lines (that WARN, the closed
    socket and the ``'out of memory'`` before it, their call traces) are set aside when the same file
    goes on after the last of them (a collective read, or a line that signals no failure: training
    output): nccl#555, the job's threads carry on. A file that ends at them keeps them (the job may
    have stopped there: nccl#847 was cancelled while they repeated); every other line's failure still
    counts, so a failure of the job's own threads still decides."""
    if _empty(incident):
        return None
    s = incident.signals
    texts = s["text"].astype(str)
    rem = s[texts.str.contains(REMOTE_ALLOCATOR)]
    if not len(rem):
        return None
    threads: dict = {}
    for f, t in zip(rem["file"].astype(object), rem["text"].astype(str)):
        m = NCCL_THREAD.search(t)
        if m:
            threads.setdefault(f, set()).add((m.group(1), int(m.group(2)), int(m.group(3))))
    errs = incident.errors
    sig_drop, err_drop = [], []
    for f, keys in threads.items():
        ours = pd.Series([_thread(t) in keys for t in texts], index=s.index, dtype=bool)
        mine = s.index[(s["file"].astype(object) == f) & ours].tolist()
        e_mine = []
        if len(errs) and "tid" in errs:
            er = errs[(errs["file"].astype(object) == f) & errs["tid"].notna() & errs["pid"].notna()]
            e_mine = [
                i
                for i, h, p, t in zip(er.index, er["host"].astype(object), er["pid"], er["tid"])
                if (str(h), int(p), int(t)) in keys
            ]
        last = max([int(s.at[i, "line"]) for i in mine] + [int(errs.at[i, "line"]) for i in e_mine])
        if _went_on(incident, f, last):
            sig_drop += mine
            err_drop += e_mine
    if not sig_drop:
        return None
    from dataclasses import replace

    first = s.loc[sig_drop[0]]
    note = (
        f"set aside {len(sig_drop)} line(s) of NCCL's remote-allocator service thread (the first "
        f"{first['file']}:{first['line']}: {str(first['text'])[:120]}): that thread fails on a connection not "
        "meant for it while the job's threads carry on (nccl#555), and this log goes on after them"
    )
    return replace(incident, signals=s.drop(index=sig_drop), errors=errs.drop(index=err_drop)), note


def _thread(text: str):
    m = NCCL_THREAD.search(text)
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def _went_on(incident, file, last: int) -> bool:
    """Does ``file`` say the work went on after line ``last``: a collective read after it, or a line
    after it with words that signals no failure?"""
    ev = incident.events
    if len(ev) and ((ev["file"].astype(object) == file) & (ev["line"] > last)).any():
        return True
    up = incident.unparsed
    if not len(up):
        return False
    after = up[(up["file"].astype(object) == file) & (up["line"] > last)]
    s = incident.signals
    failing = set(s.loc[(s["file"].astype(object) == file) & s["failure"].fillna(False).astype(bool), "line"])
    return any(
        isinstance(t, str) and _WORDS.search(t) is not None and int(ln) not in failing
        for ln, t in zip(after["line"], after["text"])
    )


_WORDS = re.compile(r"[A-Za-z]{2}")


def warnings_of_note(incident) -> str:
    """One line on the warnings of a failure family (network, device, memory, timeout, stall) when
    no line failed: a warning whose tail a paste cut off reads as one, so an all-clear beside them is
    a weak one. Empty when there are none."""
    if _empty(incident):
        return ""
    s = incident.signals
    fam = s["family"].astype(object)
    w = s[~s["failure"].fillna(False).astype(bool) & fam.isin([str(f) for f in _NOTE_FAMILIES])]
    if not len(w):
        return ""
    first = w.iloc[0]
    return f"{len(w)} warning line(s) of a failure family, the first {first['file']}:{first['line']}: {str(first['text'])[:160]}"


_NOTE_FAMILIES = (
    SignalFamily.NETWORK,
    SignalFamily.COMPONENT,
    SignalFamily.DEVICE,
    SignalFamily.MEMORY,
    SignalFamily.TIMEOUT,
    SignalFamily.STALL,
)


def activity(incident) -> bool:
    """Did a line say the distributed machinery ran (:data:`denpex_nb.signals.ACTIVITY`: a barrier's
    device guessed, DDP's reducer mid-training, Lightning's distributed epoch-end logging)? Positive
    evidence of a distributed run that no reader parsed: with no failure signal anywhere, an all-clear
    at low confidence, not "nothing distributed could be read"."""
    if _empty(incident):
        return False
    return bool((incident.signals["family"].astype(object) == SignalFamily.ACTIVITY).any())


def progress_lines(incident) -> pd.DataFrame:
    """The last progress row (:data:`denpex_nb.signals.PROGRESS`: a step counter and a metric, a
    benchmark's result) of each rank in each file, in file order: positive evidence that the run went on
    up to there, and no further."""
    if _empty(incident):
        return pd.DataFrame()
    s = incident.signals
    p = s[s["family"].astype(object) == SignalFamily.PROGRESS]
    if not len(p):
        return p
    key = p["rank"].astype("Int64").astype(object).where(p["rank"].notna(), -1)
    return p.assign(_rank=key).drop_duplicates(["file", "_rank"], keep="last").drop(columns="_rank")


def progress_note(incident) -> str:
    """One line for an all-clear that rests on progress lines: the last progress line of each rank or
    file (a few) and the limit of such evidence. Empty when there is none."""
    last = progress_lines(incident)
    if not len(last):
        return ""
    from .catalog.entries import COLLECT_MORE

    head = last.tail(3)  # the last files' (the newest lines of a folder of rank logs are as good as any)
    shown = "; ".join(
        f"{f}:{ln}" + ("" if pd.isna(r) else f" (rank {int(r)})") + f": {str(t).strip()[:120]}"
        for f, ln, r, t in zip(head["file"].astype(object), head["line"], head["rank"], head["text"])
    )
    more = f" (and {len(last) - 3} more ranks or files)" if len(last) > 3 else ""
    return (
        f"training/benchmark progress was printed and nothing failed up to the last line: {shown}{more}. "
        f"This does not show the job finished: if it hung or died after, collect every rank's log to its "
        f"end (py-spy dump --pid of every rank if it still runs), and {COLLECT_MORE[0].lower() + COLLECT_MORE[1:]}"
    )


def finish_lines(incident) -> pd.DataFrame:
    """Rows saying the work finished."""
    if _empty(incident):
        return pd.DataFrame()
    s = incident.signals
    return s[s["family"].astype(object) == SignalFamily.FINISH]


def single_process(incident, state: pd.DataFrame, group_size: int | None) -> bool:
    """True when nothing in the evidence speaks of a second process: at most one rank anywhere (rank
    state, signals), and that rank 0 (a rank 7 is one of at least eight), no stated group size above
    one, no collective record of a group above one, no error raised inside a collective call (a
    process group ran it: its failure is the collective's, whatever CUDA call inside it failed), one
    host, at most one pid."""
    ranks = set(int(r) for r in state["rank"]) if len(state) else set()
    if not _empty(incident):
        ranks |= {int(r) for r in incident.signals["rank"].dropna().unique()}
    if len(ranks) > 1 or max(ranks, default=0) > 0 or (group_size or 0) > 1:
        return False
    er = incident.errors
    if len(er) and "op" in er and er["op"].notna().any():
        return False
    ev = incident.events
    if len(ev) and "world_size" in ev and (pd.to_numeric(ev["world_size"], errors="coerce") > 1).any():
        return False
    sig = incident.signals if not _empty(incident) else None
    if sig is not None and len(sig["host"].dropna().unique()) > 1:
        return False
    return len(_processes(incident)) <= 1


def _processes(incident) -> set:
    """The distinct processes the evidence names by host and pid (NCCL's ``host:pid:tid`` prefix, a
    launcher's pid): two pids are two processes even where no line gives either a rank."""
    out: set = set()
    for frame in (incident.errors, incident.ranks):
        if frame is None or not len(frame) or "pid" not in frame.columns:
            continue
        hosts = frame["host"].astype(object) if "host" in frame.columns else [None] * len(frame)
        for h, p in zip(hosts, frame["pid"].astype(object)):
            if p is not None and not pd.isna(p):
                out.add((None if h is None or (not isinstance(h, str) and pd.isna(h)) else str(h), int(p)))
    return out


def _evidence(rows: pd.DataFrame, n: int = 6) -> tuple[Evidence, ...]:
    out = []
    for r in rows.head(n).to_dict("records"):
        rank = r.get("rank")
        out.append(
            Evidence(
                file=str(r.get("file") or "?"),
                line=int(r["line"]) if pd.notna(r.get("line")) else 0,
                text=str(r.get("text") or "")[:500],
                rank=None if rank is None or pd.isna(rank) else int(rank),
            )
        )
    return tuple(out)


def _op_of(text: str) -> str | None:
    m = _OP_WORD.search(text)
    return normalize_op(m.group(1)) if m else None


def signal_finding(ctx, *, after: Finding | None = None) -> Finding | None:
    """A finding from the first failure signal's family, or None when no line signalled a failure.

    ``after``: the ``timeout-undetermined`` fallback, when there is one: a signal of family timeout
    (or none) adds nothing to it, so it is kept; a more specific family replaces it (its evidence
    stays in ``basis``)."""
    fs = failure_signals(ctx.incident)
    if not len(fs):
        fs = read_failures(ctx)
    if not len(fs):
        return unrecovered_connections(ctx.incident) or unjoined_waits(ctx.incident) or stopped_at_init(ctx.incident)
    if fs["text"].astype(str).str.contains(BACKTRACE_LINE).all():
        # only backtrace lines failed (they say where, not what): a connection retried to the end of
        # the log, whose exception they are, says what
        stuck = unrecovered_connections(ctx.incident)
        if stuck is not None:
            return stuck
    fam_col = fs["family"].astype(object)
    first = fs.iloc[0]
    fam = str(first["family"])
    if fam == SignalFamily.OTHER:
        # a plain error first: the first line with a family says what kind of failure it was
        specific = fs[~fam_col.isin([SignalFamily.OTHER, SignalFamily.FINISH])]
        if len(specific):
            first = specific.iloc[0]
            fam = str(first["family"])
    if fam == SignalFamily.OTHER:
        sized = collective_size_error(ctx.errors)
        if sized is not None:
            return _size_in_collective(sized, fs, after)
    first = _what_of(fs, first)
    fam = str(first["family"])
    either = _EITHER.search(str(first["text"])) is not None
    if not either and not len(_causes(fs.loc[[first.name]], ctx.errors)):
        # the first failure is a victim's (a timeout, a peer gone): someone else failed first, unseen
        fam = SignalFamily.TIMEOUT
    if not either and fam in (SignalFamily.TIMEOUT, SignalFamily.COMPONENT):
        # a timeout (or a component's failure) beside NCCL's remote error: the remote error says more
        rem = fs[fs["text"].astype(str).str.contains(_EITHER)]
        if len(rem):
            first, fam, either = rem.iloc[0], SignalFamily.NETWORK, True
    text = str(first["text"])
    cls = FAMILY_CLASS.get(fam)
    # the line says another process raised (its reporter a victim): a crash of a rank it does not name
    elsewhere = cls is None and CRASH_ELSEWHERE.search(text) is not None
    if cls is None:  # a plain exception, or a size error outside any collective: its process's own error
        own = _EXC.search(text) or (_SIZE_WORD.search(text) and _LOCAL_SIZE.search(text)) or elsewhere
        cls = ClassId.RANK_CRASH if own else ClassId.TIMEOUT_UNDETERMINED
    if fam == SignalFamily.SIZE and _DTYPE_WORD.search(text) and not _SIZE_WORD.search(text):
        cls = ClassId.DTYPE_MISMATCH
    if cls == ClassId.TIMEOUT_UNDETERMINED and after is not None and fam != SignalFamily.STOP:
        return None
    rank = None if pd.isna(first["rank"]) else int(first["rank"])
    fam_rows = fs[fam_col == fam]
    reporters = sorted({int(r) for r in fam_rows["rank"].dropna()})
    culprits: list[int] = []
    basis = "undetermined: a failure signal, not a statement of who failed"
    if elsewhere:
        basis = "undetermined: the line says another process raised, not which"
    elif cls == ClassId.RANK_CRASH and reporters:
        culprits, basis = ctx.reporters_named(reporters)
        if not culprits and len(reporters) == 1:
            basis = f"undetermined: rank {reporters[0]} printed it first; the others may have failed unseen"
    conf = "low"
    if (
        cls in (ClassId.NCCL_ERROR, ClassId.RANK_CRASH)
        and str(first["severity"]) in ("error", "fatal")
        and not either
        and not elsewhere
    ):
        conf = "medium"
    if either:
        basis = (
            "undetermined: NCCL says a remote process exited or the network failed; neither the remote "
            "process nor the link is named in this evidence"
        )
    where = f"rank {rank}" if rank is not None else "a rank"
    if elsewhere:
        where = f"a rank that {where} says raised, not named"
    what = {
        ClassId.NCCL_ERROR: "a network / NCCL error",
        ClassId.SHAPE_MISMATCH: "a size or shape error of a collective",
        ClassId.DTYPE_MISMATCH: "a dtype error of a collective",
        ClassId.RANK_CRASH: f"{'an' if fam[:1] in 'aeiou' else 'a'} {fam.replace('other', 'process')} failure",
        ClassId.RANK_DESYNC: "ranks that stalled, did not arrive or disagree on a value",
        ClassId.TIMEOUT_UNDETERMINED: "a failure of undetermined cause",
    }[cls]
    summary = (
        f"No reader explains this failure; the first failure signal ({fam} family, {first['severity']}) "
        f"is {what} on {where}: {text[:240]}"
    )
    if fam == SignalFamily.EXIT and _USAGE.search(text):
        summary = (
            f"A command line was rejected by its parser before anything ran (the program exited with its usage "
            f"error): {text[:240].rstrip('.')}. No process of the job started: the launching process's own error, not a "
            f"collective failure; fix the command (is the program on PATH the one meant?)"
        )
    if fam == SignalFamily.STOP:
        summary = (
            f"The job was stopped from outside (a user's Ctrl-C, a scheduler's or an operator's signal) before "
            f"anything else failed: {text[:240]}. A stop is not a crash; if it was stopped because it hung, why "
            f"it hung is not in this evidence"
        )
    if cls == ClassId.TIMEOUT_UNDETERMINED:
        from .catalog.entries import COLLECT_MORE

        summary += f". Collect next: {COLLECT_MORE}"
    return Finding(
        class_id=cls,
        summary=summary,
        confidence=conf,
        op=_op_of(text) or _raised_in(ctx.errors, first)
        if cls in (ClassId.SHAPE_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.NCCL_ERROR)
        else None,
        culprit_ranks=culprits,
        evidence=_evidence(pd.concat([fs.loc[[first.name]], fs.drop(index=first.name)])),
        t_wall=first["t_wall"] if pd.notna(first["t_wall"]) else None,
        rule="failure-signals",
        culprit_basis=basis if not culprits else "own-failure",
        basis=(after.summary,) if after is not None else (),
    )


def read_failures(ctx) -> pd.DataFrame:
    """Failures a reader recognised on lines that hold no failure word of their own (a DDP check's
    ``Rank 0 has 161 params, while rank 1 has inconsistent 0 params`` quoted in a sentence, no
    ``RuntimeError:`` in front), as rows of the signals' schema, when no line signalled a failure: the
    family of the message says what kind of failure it is (a reader's row is a failure whatever words
    surround it). Victims' rows (a timeout, a peer gone) and cut tracebacks are left out; so are messages
    of no family. Empty when there are none."""
    cols = ["rank", "t_wall", "file", "line", "severity", "family", "failure", "text", "host"]
    errs = ctx.errors
    if errs is None or not len(errs):
        return pd.DataFrame(columns=cols)
    kinds = errs["kind"].astype(str)
    victims = {str(k) for k in VICTIM_KINDS} | {
        str(ErrorKind.WARNING),
        str(ErrorKind.LOAD_ERROR),
        str(ErrorKind.NCCL_WARN),
    }
    rows = []
    failures = {str(k) for k in FAILURE_KINDS}  # a row of another kind (a reader's notice) is no failure
    for r in errs[kinds.isin(failures) & ~kinds.isin(victims)].to_dict("records"):
        msg = r.get("message")
        if not isinstance(msg, str) or msg.startswith(TRUNCATED_TRACEBACK):
            continue
        fam = family_of(msg)
        if fam in (SignalFamily.OTHER, SignalFamily.FINISH):
            continue
        rows.append(
            {
                "rank": r.get("rank"),
                "t_wall": r.get("t_wall"),
                "file": r.get("file"),
                "line": r.get("line"),
                "severity": "error",
                "family": str(fam),
                "failure": True,
                "text": msg[:2000],  # whole: the words that decide the class may come late
                "host": r.get("host"),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def _raised_in(errors: pd.DataFrame, sig) -> str | None:
    """The collective call an exception was raised in (its traceback's frames), for the signal row of
    its message line: the exception row of the same file and rank whose traceback ends there."""
    if errors is None or not len(errors) or "op" not in errors:
        return None
    ex = errors[(errors["kind"].astype(str) == ErrorKind.EXCEPTION) & errors["op"].notna()]
    ex = ex[(ex["file"].astype(object) == sig["file"]) & (ex["line"] <= sig["line"])]
    if pd.notna(sig["rank"]):
        ex = ex[ex["rank"] == sig["rank"]]
    if "n_traceback_lines" in ex:  # the traceback reaches the message line
        ex = ex[(ex["line"] + ex["n_traceback_lines"].fillna(0)) >= sig["line"]]
    return normalize_op(str(ex["op"].iloc[-1])) if len(ex) else None


def collective_size_error(errors: pd.DataFrame) -> dict | None:
    """The first exception raised inside a collective call (its traceback's frames name the call) whose
    message is about sizes, shapes or counts once that call is its context: c10d's and the libraries'
    size checks name no collective (``Split sizes doesn't match total dim 0 size`` raised in
    ``all_to_all_single``), the traceback does. None when there is none."""
    if errors is None or not len(errors) or "op" not in errors:
        return None
    ex = errors[(errors["kind"].astype(str) == ErrorKind.EXCEPTION) & errors["op"].notna()]
    for row in ex.to_dict("records"):
        msg = str(row.get("message") or "")
        if msg.startswith(TRUNCATED_TRACEBACK):
            continue
        if family_of(f"{msg} (in {row['op']})") == SignalFamily.SIZE:
            return row
    return None


def _size_in_collective(row: dict, fs: pd.DataFrame, after: Finding | None) -> Finding:
    """A ``shape-mismatch`` of the collective a size error was raised in (low confidence: the message
    says the sizes are wrong, not which rank's)."""
    text = str(row.get("message") or "")
    cls = ClassId.DTYPE_MISMATCH if _DTYPE_WORD.search(text) and not _SIZE_WORD.search(text) else ClassId.SHAPE_MISMATCH
    rank = row.get("rank")
    where = "a rank" if rank is None or pd.isna(rank) else f"rank {int(rank)}"
    ev = Evidence(
        file=str(row.get("file") or "?"),
        line=int(row["line"]) if pd.notna(row.get("line")) else 0,
        text=text[:500],
        rank=None if rank is None or pd.isna(rank) else int(rank),
    )
    return Finding(
        class_id=cls,
        summary=(
            f"A size error raised inside a collective call ({row['op']}) on {where}: the call's arguments do not fit "
            f"what the collective needs across ranks: {text[:240]}"
        ),
        confidence="low",
        op=normalize_op(str(row["op"])),
        evidence=(ev,) + _evidence(fs, 5),
        t_wall=row.get("t_wall") if pd.notna(row.get("t_wall")) else None,
        rule="failure-signals",
        culprit_basis="undetermined: a size error names no rank whose sizes are the odd ones",
        basis=(after.summary,) if after is not None else (),
    )


def _what_of(fs: pd.DataFrame, first: pd.Series) -> pd.Series:
    """C++'s abort names only the exception's class (``terminate called after throwing an instance of
    'c10::DistBackendError'``); its ``what()`` on the next line of the same file says what failed (a
    watchdog timeout, an NCCL error): that line decides the family when it signalled a failure."""
    if not TERMINATE.search(str(first["text"])):
        return first
    nxt = fs[(fs["file"].astype(object) == first["file"]) & (fs["line"] == first["line"] + 1)]
    if len(nxt) and str(nxt.iloc[0]["family"]) not in (SignalFamily.OTHER, SignalFamily.FINISH):
        return nxt.iloc[0]
    return first


def _causes(fs: pd.DataFrame, errors: pd.DataFrame) -> pd.DataFrame:
    """The failure signals that may be a cause: not the lines a reader read as a victim's error (a
    timeout, a peer gone: someone else failed first) and not a connection the peer closed or reset
    (the peer is the suspect, :func:`peer_gone`)."""
    if not len(fs):
        return fs
    victim_at: set = set()
    if errors is not None and len(errors):
        v = errors[errors["kind"].astype(str).isin([str(k) for k in VICTIM_KINDS])]
        victim_at = {(str(f), int(ln)) for f, ln in zip(v["file"].astype(object), v["line"]) if pd.notna(ln)}
    keep = [
        (str(f), int(ln)) not in victim_at and not _PEER.search(str(t))
        for f, ln, t in zip(fs["file"].astype(object), fs["line"], fs["text"].astype(object))
    ]
    return fs[keep]


#: error kinds that say nothing failed (a cut traceback beside only these is still alone)
_QUIET_KINDS = {str(ErrorKind.WARNING), str(ErrorKind.LOAD_ERROR)}


def cut_tracebacks(ctx) -> Finding | None:
    """Tracebacks cut before their exception line (a paste that kept only the frames), and nothing
    else that failed: no other error row, no failure signal of any family (but a connection that the
    other side closed or reset: a victim of the crash), no traceback ending in a collective call, and
    frames in each (a ``Traceback`` header alone, the paste ending there, says nothing of where). The processes raised, so they crashed: a ``rank-crash`` at low confidence, the
    reporters named only against a quiet majority. None otherwise (a timeout, a collective or NCCL
    error anywhere, or a frame in a collective call keeps the cause undetermined)."""
    errs = ctx.errors
    if errs is None or not len(errs):
        return None
    kinds = errs["kind"].astype(str)
    failing = errs[~kinds.isin(_QUIET_KINDS)]
    if not len(failing) or not (failing["kind"].astype(str) == ErrorKind.EXCEPTION).all():
        return None
    if not failing["message"].astype(str).str.startswith(TRUNCATED_TRACEBACK).all():
        return None
    if "op" in failing and failing["op"].notna().any():
        return None
    if "collective_call" in failing and failing["collective_call"].notna().any():
        return None
    # the frames say where it raised; a header alone (the paste ends there) says nothing of where
    frames = failing["frames"].astype(object) if "frames" in failing else pd.Series([None] * len(failing))
    if not all(isinstance(f, str) and f.strip() for f in frames):
        return None
    # a connection the other side closed or reset is a victim's line (the crashed process was that side)
    fs = _causes(failure_signals(ctx.incident), errs)
    if len(fs) and not fs["family"].astype(object).isin([SignalFamily.OTHER, SignalFamily.FINISH]).all():
        return None
    reporters = sorted({int(r) for r in failing["rank"].dropna()})
    culprits, basis = ctx.reporters_named(reporters) if reporters else ([], "")
    if not culprits:
        basis = "undetermined: a cut traceback does not say which rank failed first"
    rows = failing.sort_values("line", kind="stable")
    ev = tuple(
        Evidence(
            file=str(f),
            line=int(ln) if pd.notna(ln) else 0,
            text=str(m)[:500],
            rank=None if pd.isna(r) else int(r),
        )
        for f, ln, m, r in zip(rows["file"].astype(object), rows["line"], rows["message"], rows["rank"])
    )[:6]
    return Finding(
        class_id=ClassId.RANK_CRASH,
        summary=(
            f"{len(failing)} process traceback(s) cut before the exception line, and nothing else failed (no "
            f"timeout, no collective or NCCL error): the process(es) raised, i.e. crashed; what they raised is "
            f"not in this evidence. {str(rows.iloc[0]['message'])[:200]}"
        ),
        confidence="low",
        culprit_ranks=culprits,
        culprit_basis=basis,
        evidence=ev,
        rule="cut-traceback",
    )


#: a line blank but for a launcher's or collector's tag (``0: ``, ``[rank0]:``, a stamp ``...Z``)
_TAG_ONLY = re.compile(r"^(?:\S{0,60}[:\]>Z|])?\s*$")
#: an indented line behind such a tag: a traceback's source line (a reader may leave it unparsed)
_INDENTED = re.compile(r"^(?:\S{0,60}[:\]>Z|)]\s?)?\s{2,}\S")


def connection_then_cut(ctx, cut: Finding) -> Finding | None:
    """A traceback cut before its exception line (:func:`cut_tracebacks`) right after c10d's store client
    said a try to connect failed (:data:`denpex_nb.signals.STORE_CONNECT_TRY`, even a probe of an address not
    usable here that a run goes on from), with no other line between them and the file ending in that
    traceback: the process ended at the connection it could not make (torchrun on Windows: ``failed to
    connect to [host]:29500 (system error: 10049 ...)``, then ``DistNetworkError`` ends it). ``nccl-error``
    at low confidence (what it raised is cut); None otherwise (a line between them, output after the
    traceback, a traceback whose exception is shown: that one decides)."""
    inc = ctx.incident
    up, src, errs = inc.unparsed, inc.sources, ctx.errors
    if not len(up) or not len(src) or errs is None or not len(errs):
        return None
    cut_at = {(e.file, e.line) for e in cut.evidence}
    tbs = errs[[(str(f), int(ln) if pd.notna(ln) else -1) in cut_at for f, ln in zip(errs["file"], errs["line"])]]
    found = []
    for f, ln, n in zip(tbs["file"].astype(object), tbs["line"], tbs.get("n_traceback_lines", [None] * len(tbs))):
        mine = up[up["file"].astype(object) == f]
        texts = dict(zip(mine["line"].astype(int), mine["text"].astype(object)))
        before = int(ln) - 1
        while before > 0 and isinstance(texts.get(before), str) and _TAG_ONLY.match(texts[before]):
            before -= 1
        said = texts.get(before)
        if not isinstance(said, str) or not STORE_CONNECT_TRY.search(said):
            return None
        total = src.loc[src["file"].astype(object) == f, "lines_total"]
        if not len(total) or pd.isna(total.iloc[0]) or n is None or pd.isna(n):
            return None
        after = range(int(ln) + int(n), int(total.iloc[0]) + 1)
        if not all(k not in texts or _TAG_ONLY.match(texts[k]) or _INDENTED.match(texts[k]) for k in after):
            return None  # the file goes on after the traceback (lines of its own body aside)
        found.append(Evidence(file=str(f), line=before, text=said[:500]))
    if not found:
        return None
    return Finding(
        class_id=ClassId.NCCL_ERROR,
        summary=(
            "The store client could not connect, and the process ended right after it in a traceback whose "
            f"exception the log does not show: {found[0].text[:200]}. Check the master's address and port (the "
            "host name resolves to an address this machine cannot use: set MASTER_ADDR / --master_addr to an "
            "address it can reach)"
        ),
        confidence="low",
        evidence=tuple(found) + cut.evidence[:4],
        rule="failure-signals",
        culprit_basis="undetermined: the process that could not connect names no rank",
    )


def cut_traceback_decides(ctx, cut: Finding) -> str:
    """Why a :func:`cut_tracebacks` finding is the verdict, not only an alternative; '' when it is not.

    A traceback cut before its exception line cannot tell, by its frames, the process's own crash
    from a collective's error it raised (recorded collective failures cut mid-traceback read the
    same). Two kinds of evidence around it can:

    * **a lone process**: nothing in the evidence names a rank, a group, a second host or a
      distributed component (no rank prefix, no per-rank file, no signal of a distributed family):
      no collective of several processes ran under it, so its exception is its own;
    * **its going away seen by the others**: another rank, after it, lost its connection (closed or
      reset by the peer, a store's socket): the process that raised went away; with nothing else
      failing anywhere, that is a crash.
    """
    inc = ctx.incident
    fs = failure_signals(inc)
    if _lone_process(ctx, fs, cut):
        return "nothing in the evidence speaks of a second process: the exception is the process's own"
    raised = {int(e.rank) for e in cut.evidence if e.rank is not None}
    if not raised or not len(fs):
        return ""
    first_line = {e.file: e.line for e in cut.evidence}
    for f, ln, r, t in zip(fs["file"].astype(object), fs["line"], fs["rank"], fs["text"].astype(object)):
        if pd.isna(r) or int(r) in raised or not _PEER.search(str(t)):
            continue
        if str(f) in first_line and pd.notna(ln) and int(ln) < first_line[str(f)]:
            continue  # before the traceback in the same file: not its consequence
        return f"rank {int(r)} then lost its connection to it ({str(t)[:120]}): the process that raised went away"
    return ""


#: a frame in a library that runs collectives (its traceback may have been heading into one)
_DIST_FRAME = re.compile(
    r"(?i)torch[/\\]distributed|torch[/\\]nn[/\\]parallel|deepspeed|megatron|fairscale|horovod|colossalai"
    r"|[/\\]accelerate[/\\]|apex[/\\]transformer"
)


def shows_a_job_of_processes(incident) -> bool:
    """Something in the evidence says it comes from a job of several processes: a rank (a prefix, a
    per-rank file name, a record), a node a launcher labelled a line with, or a word only such a job
    prints in any file (``vocab.MENTIONS['distributed']``: a backend, the c10d API, a collective, a
    launcher's variables, mpirun's tagged output). A log with none of these is one process's, whatever
    else it shows."""
    if incident.ranks_seen:
        return True
    src = incident.sources
    if len(src) and "rank_hint" in src and src["rank_hint"].notna().any():
        return True
    if not _empty(incident):
        s = incident.signals
        if s["rank"].notna().any() or s["host"].notna().any():
            return True
    return bool((getattr(incident, "mentions", None) or {}).get("distributed"))


def _lone_process(ctx, fs: pd.DataFrame, cut: Finding) -> bool:
    """Nothing in the evidence speaks of a second process: no rank (no prefix, no per-rank file), no
    host, no group, no signal of a distributed family, no word of a distributed job in any file
    (``vocab.MENTIONS['distributed']``: a backend, the c10d API, a collective), and no frame of the
    traceback in a library that runs collectives."""
    inc = ctx.incident
    if len(ctx.state) or shows_a_job_of_processes(inc) or not single_process(inc, ctx.state, ctx.group_size):
        return False
    if len(fs) and fs["family"].astype(object).isin(list(DISTRIBUTED_FAMILIES)).any():
        return False
    errs = ctx.errors
    if errs is not None and len(errs):
        for col in ("host", "pid", "local_rank"):
            if col in errs and errs[col].notna().any():
                return False
        frames = errs["frames"].astype(object) if "frames" in errs else []
        if any(isinstance(f, str) and _DIST_FRAME.search(f) for f in frames):
            return False
    return True


def unrecovered_connections(incident) -> Finding | None:
    """A file whose last word on a connection is an info row saying it failed (NCCL retrying on "No
    route to host", "Connection refused", c10d's store client ``failed to connect/validate ... -
    retrying``) at which the file ends (after it only blank lines, more retries and the lines of the
    backtrace it quotes: training output after it says the job went on): the connection never came
    up before the log ends. ``nccl-error`` at low confidence; None otherwise."""
    if _empty(incident):
        return None
    s = incident.signals
    fam = s["family"].astype(object)
    rows = s[(fam == SignalFamily.NETWORK) & ~s["failure"].fillna(False).astype(bool)]
    rows = rows[rows["severity"].astype(object) == "info"]
    if not len(rows):
        return None
    rec = s[fam == SignalFamily.RECOVERED]
    ev = incident.events
    stuck = []
    for f, grp in rows.groupby(rows["file"].astype(object), sort=False):
        last = grp["line"].max()
        later = rec[(rec["file"].astype(object) == f) & (rec["line"] > last)]
        ran = len(ev) and ((ev["file"].astype(object) == f) & (ev["line"] > last)).any()
        if not len(later) and not ran and _ends_at(incident, f, int(last)):
            stuck.append(grp.sort_values("line").iloc[[-1]])
    if not stuck:
        return None
    ev = pd.concat(stuck)
    return Finding(
        class_id=ClassId.NCCL_ERROR,
        summary=(
            "A connection kept failing up to the end of the log, with no line after it saying it was made "
            f"(retried, each try failing): {str(ev.iloc[0]['text'])[:200]}"
        ),
        confidence="low",
        evidence=_evidence(ev),
        rule="failure-signals",
        culprit_basis="undetermined: the process that could not connect is a victim of the unreachable side",
    )


def _ends_at(incident, file, last: int) -> bool:
    """Does ``file`` end at line ``last`` as far as what it says goes: every line after it unparsed and
    blank, another connection retry, or a line of the backtrace the retry quotes (a counted span, whose
    words are unknown, or a parsed line says the log went on)?"""
    src = incident.sources
    tot = src.loc[src["file"].astype(object) == file, "lines_total"] if len(src) else []
    if not len(tot) or pd.isna(tot.iloc[0]):
        return False
    total = int(tot.iloc[0])
    up = incident.unparsed
    after = up[(up["file"].astype(object) == file) & (up["line"] > last)] if len(up) else up
    if "n_lines" in after and len(after) and (after["n_lines"].fillna(1) > 1).any():
        return False
    texts = list(after["text"]) if len(after) else []
    if len(texts) != total - last:
        return False
    return all(isinstance(t, str) and (not t.strip() or BACKTRACE_LINE.search(t) or RETRYING.search(t)) for t in texts)


_WAIT_RANK = re.compile(r"(?i)rank:? (\d{1,10})\b")
_WAIT_WORLD = re.compile(r"world_size=(\d{1,10})")
_WAIT_JOINED = re.compile(r"(?:worker_count|num_workers_joined)=(\d{1,10})")


def unjoined_waits(incident) -> Finding | None:
    """A file whose last word on process-group initialisation is a rank still waiting for the others
    to join (c10d's store-based barrier, :data:`denpex_nb.signals.WAITING`), with nothing after it in
    that file saying the wait ended (``Completed store-based barrier``, a communicator up, the work
    finished) and no collective read after it: the job hung at init, because ranks never joined.

    ``timeout-undetermined`` at low confidence (a copy cut while the ranks were still coming up looks
    the same), no culprit: the store counts the ranks that joined, it never names the missing ones.
    None when no wait is left open."""
    if _empty(incident):
        return None
    s = incident.signals
    fam = s["family"].astype(object)
    waits = s[(fam == SignalFamily.STALL) & ~s["failure"].fillna(False).astype(bool)]
    if not len(waits):
        return None
    waits = waits[[bool(WAITING.search(str(t))) for t in waits["text"]]]
    if not len(waits):
        return None
    ended = s[fam.isin([SignalFamily.RECOVERED, SignalFamily.FINISH])]
    ev = incident.events
    open_ = []
    for f, grp in waits.groupby(waits["file"].astype(object), sort=False):
        last = grp.sort_values("line").iloc[-1]
        after = ended[(ended["file"].astype(object) == f) & (ended["line"] > last["line"])]
        ran = len(ev) and ((ev["file"].astype(object) == f) & (ev["line"] > last["line"])).any()
        if not len(after) and not ran:
            open_.append(last)
    if not open_:
        return None
    rows = pd.DataFrame(open_)
    first = rows.iloc[0]
    text = str(first["text"])
    rank = _WAIT_RANK.search(text)
    world = _WAIT_WORLD.search(text)
    joined = _WAIT_JOINED.search(text)
    who = f"rank {rank.group(1)}" if rank else "a rank"
    counts = ""
    if world and joined:
        w, j = int(world.group(1)), int(joined.group(1))
        counts = (
            f" ({j} of {w} ranks had joined)"
            if j <= w
            else f" ({j} joined a group of {w}: a reused key or a wrong world size)"
        )
    absent, basis = _never_joined(waits)
    if absent:
        counts += f"; the ranks that never joined: {', '.join(str(r) for r in absent)}"
    return Finding(
        class_id=ClassId.TIMEOUT_UNDETERMINED,
        culprit_ranks=absent,
        summary=(
            f"The job hung at process-group initialisation: {who} was still waiting in the store-based barrier for "
            f"the other ranks to join{counts} when the log ends, and nothing says the barrier completed. Why they "
            f"did not join (not started, crashed before init, another MASTER_ADDR/port or world size) is not in "
            f"this evidence: {text[:200]}. Collect next: every rank's log from its start (did each reach "
            f"init_process_group, with which MASTER_ADDR, MASTER_PORT, rank and world size?) and the launcher's output."
        ),
        confidence="low",
        evidence=_evidence(rows),
        t_wall=first["t_wall"] if pd.notna(first["t_wall"]) else None,
        rule="init-wait",
        culprit_basis=basis,
    )


def stopped_at_init(incident) -> Finding | None:
    """Every log ends right after its ranks announced that they ENTER process-group initialisation
    (:data:`denpex_nb.signals.INIT_ENTERING`: printed before the group is up), with nothing after it in
    any file (only blank lines, or other ranks' announcements), no collective read and no failure
    printed: the evidence never shows the job past init. Not an all-clear (the job may hang in init or
    in its first collective: rendezvous, communicator setup), not a failure it can name either (a copy
    cut there looks the same): ``timeout-undetermined`` at low confidence, with what to collect.

    None when a file holds anything after its last announcement (training output, a completed init, a
    collective), when a file with lines holds no announcement, or when a file's lines past the
    budget were kept only as counted spans (what they said is unknown)."""
    if _empty(incident) or len(incident.events):
        return None
    s = incident.signals
    ann = s[s["text"].astype(str).str.contains(INIT_ENTERING)]
    if not len(ann):
        return None
    src = incident.sources
    if not len(src):
        return None
    up = incident.unparsed
    files = ann["file"].astype(object)
    lasts = []
    for f, total in zip(src["file"].astype(object), src["lines_total"]):
        total = 0 if pd.isna(total) else int(total)
        if total == 0:
            continue
        mine = ann[files == f]
        if not len(mine):
            return None  # a file that says something else (and no announcement): not all stopped at init
        last = int(mine["line"].max())
        after = up[(up["file"].astype(object) == f) & (up["line"] > last)] if len(up) else up
        if "n_lines" in after and len(after) and (after["n_lines"].fillna(1) > 1).any():
            return None  # a counted span after it: what those lines said is unknown
        texts = list(after["text"]) if len(after) else []
        if len(texts) != total - last:
            return None  # a line after it that a reader parsed: the job said more
        if any(not isinstance(t, str) or (t.strip() and not INIT_ENTERING.search(t)) for t in texts):
            return None  # something after it other than blank lines and other ranks' announcements
        lasts.append(mine.loc[mine["line"].idxmax()])
    if not lasts:
        return None
    rows = pd.DataFrame(lasts)
    text = str(rows.iloc[0]["text"])
    return Finding(
        class_id=ClassId.TIMEOUT_UNDETERMINED,
        summary=(
            f"The log ends right after the ranks announced that they enter process-group initialisation ({text[:160]}), "
            f"with nothing after it: no step, no collective, no error. The evidence never shows the job past init: "
            f"either it hung there or in its first collective (rendezvous, communicator setup), or the copy stops "
            f"there. This is not an all-clear. Collect next: is the job still running (then py-spy dump --pid of "
            f"every rank), every rank's log to its end, NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL output, "
            f"and the launcher's MASTER_ADDR, MASTER_PORT, world size and rank per process."
        ),
        confidence="low",
        evidence=_evidence(rows),
        rule="init-wait",
        culprit_basis="undetermined: every rank announced init and none says more; nothing tells them apart",
    )


def _never_joined(waits: pd.DataFrame) -> tuple[list[int], str]:
    """The ranks that never joined, by elimination: every waiting rank printed its wait (``for rank:
    R``), all the waits state the same world size W and the same count N of ranks that joined, and
    exactly N distinct ranks below W printed one: the other W - N ranks of 0..W-1 never joined (the
    store says N joined, and the N are named), named while they are a strict minority of W (as the
    stall report's missing ranks are). Otherwise nobody (the store names no one)."""
    undetermined = "undetermined: the store counts the ranks that joined; it does not name the missing ones"
    ranks, worlds, joined = set(), set(), set()
    for t in waits["text"].astype(str):
        r, w, j = _WAIT_RANK.search(t), _WAIT_WORLD.search(t), _WAIT_JOINED.search(t)
        if not (r and w and j):
            return [], undetermined
        ranks.add(int(r.group(1)))
        worlds.add(int(w.group(1)))
        joined.add(int(j.group(1)))
    if len(worlds) != 1 or len(joined) != 1:
        return [], undetermined
    (w,), (n,) = worlds, joined
    if not (0 < n < w) or len(ranks) != n or max(ranks) >= w:
        return [], undetermined
    absent = sorted(set(range(w)) - ranks)
    if len(absent) * 2 >= w:
        # most of the group missing: the few that joined may be the odd ones (another MASTER_ADDR)
        return [], (
            f"undetermined: {len(absent)} of {w} ranks never joined, not a strict minority; the {n} that joined "
            "may be the ones that went wrong"
        )
    return absent, (
        f"statement: every wait says {n} of {w} ranks joined the store-based barrier, and exactly {n} ranks "
        f"({', '.join(str(r) for r in sorted(ranks))}) printed their wait: by elimination "
        f"{', '.join(str(r) for r in absent)} never joined"
    )


def own_process_error(ctx, findings: list[Finding]) -> list[Finding]:
    """A single process's own error is reported as what it is: a ``rank-crash`` of that process, not
    a collective failure, at low confidence (medium for an out-of-memory or a device fault seen as
    such), whatever distributed class a rule gave it; a crash after the process said its work had
    finished is a teardown crash. A device or memory fault that NCCL reported as its own error is
    NCCL's (a communicator was in use), not the lone process's."""
    if not findings or not single_process(ctx.incident, ctx.state, ctx.group_size):
        return findings
    fs = failure_signals(ctx.incident)
    if not len(fs):
        return findings
    first = fs.iloc[0]
    fam = str(first["family"])
    fin = finish_lines(ctx.incident)
    teardown = bool(len(fin)) and _before(fin, first)
    # NCCL's own error (an ``nccl...Error`` code, ``NCCL error in ...``) means a communicator was in use:
    # the CUDA call or allocation that failed inside it is NCCL's failure, the group's, not a lone
    # process's device error (a crash after the work finished is still a teardown crash)
    nccls = _nccl_own(ctx.incident, fs)
    own = not nccls and (fam in OWN_FAMILIES or bool(fs["family"].astype(object).isin(list(OWN_FAMILIES)).any()))
    head = findings[0]
    if not (own or teardown):
        if _CONF[head.confidence] == 0 and head.class_id != ClassId.RANK_CRASH:
            return [_replace(head, confidence="medium")] + findings[1:]
        return findings
    if head.class_id == ClassId.RANK_CRASH and not teardown:
        return findings
    why = (
        "after the process said its work had finished (a crash in teardown)"
        if teardown
        else f"a {fam if fam in OWN_FAMILIES else 'memory or device'} error of this process"
    )
    own_rows = fs[fs["family"].astype(object).isin(list(OWN_FAMILIES))] if own and not teardown else fs
    refined = Finding(
        class_id=ClassId.RANK_CRASH,
        summary=(
            f"One process failed on its own, {why}: {str(own_rows.iloc[0]['text'])[:240]}. The evidence shows "
            "no other rank: this is not a collective failure."
        ),
        confidence="medium" if own and not teardown else "low",
        evidence=_evidence(own_rows),
        t_wall=head.t_wall,
        rule="own-process-error",
        culprit_basis="undetermined: a single process, no group to single it out in",
        basis=(head.summary,),
    )
    return [refined] + [f for f in findings[1:]]


def _nccl_own(incident, fs: pd.DataFrame) -> bool:
    """Did NCCL report an error of its own (an ``nccl_error`` row, or its error words on a failure line)?"""
    er = incident.errors
    if len(er) and (er["kind"].astype(str) == ErrorKind.NCCL_ERROR).any():
        return True
    return any(NCCL_CODES.search(str(t)) for t in fs["text"].astype(object))


def _before(fin: pd.DataFrame, first) -> bool:
    """Did a finish line come before the first failure (same file, an earlier line; or an earlier time)?"""
    same = fin[fin["file"].astype(object) == first["file"]]
    if len(same) and (same["line"] < first["line"]).any():
        return True
    t = first["t_wall"]
    return pd.notna(t) and bool((fin["t_wall"].dropna() < t).any())


def _replace(f: Finding, **kw) -> Finding:
    from dataclasses import replace

    return replace(f, **kw)


def peer_gone(ctx) -> list[Finding]:
    """The other side of a closed or reset connection died first: when the messages name it by its
    rank (:data:`_PEER_RANK`, a rank other than the one that wrote it), or the address or host they name
    belongs to exactly one rank of the evidence, and that is one rank for all of them, that rank is the
    suspect (``rank-crash``, medium)."""
    inc = ctx.incident
    texts: list[tuple[str, object]] = []
    er = inc.errors
    if len(er):
        for m, r in zip(er["message"].astype(object), er["rank"]):
            if isinstance(m, str) and _PEER.search(m):
                texts.append((m, r))
    if not _empty(inc):
        s = inc.signals
        for m, r, fail in zip(s["text"].astype(object), s["rank"], s["failure"].fillna(False).astype(bool)):
            if fail and isinstance(m, str) and _PEER.search(m):
                texts.append((m, r))
    if not texts:
        return []
    named: dict[int, tuple[str, str]] = {}
    by_rank: dict[int, set] = {}
    for m, reporter in texts:
        # the peer named by its rank in the message: a statement, no address to resolve
        for g in _PEER_RANK.finditer(m):
            peer = int(g.group(1) or g.group(2))
            rest = m[: g.start()] + m[g.end() :]
            said = _REPORTER_RANK.search(rest)
            me = int(reporter) if not pd.isna(reporter) else (int(said.group(1)) if said else None)
            if me != peer:
                by_rank.setdefault(peer, set()).add(me)
                named.setdefault(peer, (m, ""))
        for g in _ADDR_PEER.finditer(m):
            addr = g.group(1) or g.group(2)
            hit = ctx.resolver.by_addr(addr)  # the one resolver: one rank alone has that address
            if hit is not None:
                r = hit[0]
                if pd.isna(reporter) or int(reporter) != r:
                    named.setdefault(r, (m, hit[1]))
    if len(named) != 1:
        return []
    ((rank, (msg, basis)),) = named.items()
    if rank in by_rank:
        who = sorted(r for r in by_rank[rank] if r is not None)
        basis = (
            f"statement: {human.fmt_ranks(who, none='a rank')} name(s) rank {rank} as the peer that reset or "
            "closed the connection"
        )
    return [
        Finding(
            class_id=ClassId.RANK_CRASH,
            summary=(
                f"A peer closed or reset the connection: the other side, rank {rank} ("
                + (
                    "named by rank in the messages"
                    if rank in by_rank
                    else "its address in the message belongs to it alone"
                )
                + f"), died or left first; the others failed on its connection. {msg[:200]}"
            ),
            confidence="medium",
            culprit_ranks=[rank],
            culprit_basis=basis
            if rank in by_rank
            else f"statement: the peer address of a closed connection maps to this rank ({basis})",
            rule="peer-gone",
        )
    ]

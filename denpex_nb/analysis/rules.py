"""The rules: each turns one kind of evidence into :class:`Finding` objects tied to catalog ids.

A rule is a function of a :class:`Context` (the incident, the alignment, the per-rank state,
the group size) registered with :func:`rule`, which declares the class ids it may emit and the
evidence it reads. Diagnosis runs every ``find`` rule, then the ``explain`` rules (a crash behind
a desync, SyncBatchNorm or DDP behind a divergence), each returning a new list of findings;
a finding with a class its rule did not declare is refused (a test checks every declaration
against the catalog). Adding a kind of evidence means adding a rule, not editing a ladder.

Culprits are named only on a strict majority of the group (more than half of its known size)
or an explicit statement (a desync report, missing ranks named by a tool, monitoredBarrier, the
only ranks that failed on their own); otherwise they stay undetermined and ``culprit_basis``
says why.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from .. import human
from .. import vocab as _vocab
from ..ops import EVERY_RANK_NEEDED, normalize_op
from ..ops import UNKNOWN as UNKNOWN_OP
from ..processes import signal_name
from ..signals import (
    CONNECTION_LOST,
    NAME_NOT_RESOLVED,
    NCCL_CODES,
    NO_PROCESS_GROUP,
    NO_PROCESS_GROUP_FRAME,
    STOPPED,
    WRAPPER_FAILURE,
    family_of,
)
from ..vocab import COMPLETE_RECORD_KINDS, TRUNCATED_TRACEBACK, ClassId, ErrorKind, SeqKind, SignalFamily, State
from .align import Divergence
from .model import Evidence, Finding, RankView

MAX_EVIDENCE = 8

#: exception texts that are collective failures (victims or detectors), not a rank's own crash
_DISTRIBUTED = re.compile(
    r"Detected mismatch between collectives|monitoredBarrier|gloo|NCCL|nccl|Connection (reset|closed)|"
    r"Timed out|timed out|ProcessGroup|DistBackendError|DistNetworkError|DistStoreError|TCPStore|Socket|"
    r"collective|[Ww]atchdog|Expected to have finished reduction|did not receive grad|marked as ready|"
    r"mark a variable ready|not used in producing (?:the )?loss|CheckpointException|"
    r"got signal|SignalException|ChildFailedError|ProcessRaisedException|ProcessExitedException|"
    r"Broken pipe|EnforceNotMet|invalid tensor size|distributed|"
    # a launcher reporting another process's end (a node's rendezvous closed, a Ray worker died), or its
    # rendezvous store out of reach (no worker ran)
    r"Rendezvous(?:Closed|Timeout|Connection)Error|RayActorError|ActorDiedError|actor died unexpectedly|worker died|"
    # Ray: the actor a handle names is gone (its creator, another job, went away)
    r"ActorHandleNotFoundError|"
    r"Horovod has been shut down",
    re.S,
)
_CRASH_SIGNALS = {"SIGSEGV", "SIGKILL", "SIGBUS", "SIGILL", "SIGFPE"}
#: a rank's own device failure, whatever wraps it (a watchdog, a NCCL error, a Ray worker): the
#: GPU faulted on that rank, the collectives around it are collateral
_DEVICE_FAULT = re.compile(
    r"illegal memory access|device-side assert|invalid device ordinal|unspecified launch failure|"
    r"uncorrectable ECC|misaligned address|illegal instruction|CUBLAS_STATUS_(?!SUCCESS)|CUDNN_STATUS_(?!SUCCESS)|"
    r"CUDA out of memory|OutOfMemoryError|Xid \d+|GPU has fallen off the bus",
    re.I,
)
#: NCCL WARN texts that report a failure (many WARNs are benign: a missing IB library, a plugin)
_NCCL_WARN_FAILURE = re.compile(
    r"error|status=\d+|Duplicate GPU|unhandled|invalid|timeout|timed out|abort|Connection (?:closed|reset|refused)|"
    r"illegal|out of memory|Cuda failure|NCCL failure|mismatch|remote process exited|peer .*(?:closed|gone)",
    re.I,
)
_NCCL_WARN_BENIGN = re.compile(
    r"libibverbs|No device found|No plugin found|[Pp]lugin|deprecated|ignored|"
    r"Unknown command from localRank",
    re.I,
)
#: an ncclRemoteError ("remote process exited or there was a network error") whose ``Last error:`` names
#: a transport's own failure (an IB completion with error 12, a libfabric request completed with error):
#: the network failed under NCCL, seen by this rank; not a victim of an unseen crash elsewhere
_TRANSPORT_FAULT = re.compile(
    r"Last error:\s*(?:NET/\w+\s*:?\s*)?[^\n]{0,160}?(?:completion[^\n]{0,80}? with error|completed with error|"
    r"status=\d+|UNDELIVERABLE|ibv_\w+ failed|vendor err)",
    re.I,
)
#: a connection the other side closed or reset: the reporting rank is the victim
_PEER_CLOSED = re.compile(
    r"(?i)(?:closed|reset) by (?:the )?(?:remote )?peer|remote (?:process|peer) (?:exited|closed|died)"
)
#: (the kinds of evidence come from the one vocabulary, denpex_nb.vocab)
VICTIM_KINDS = _vocab.VICTIM_KINDS
FAILURE_KINDS = _vocab.FAILURE_KINDS


def is_crash_error(
    kind: str,
    message: str | None,
    signal: str | None = None,
    exit_code=None,
    in_collective: bool = False,
    frames: str | None = None,
) -> bool:
    """True for a rank's own failure that is not a collective error: an exception, OOM, a device
    fault (even wrapped in a watchdog or NCCL message), a kill (a crash signal, or an exit code
    that is minus one). ``in_collective``: the exception's traceback ends in a torch.distributed
    collective call, so whatever its (possibly cut) message says, it failed in a collective; except
    when it says no process group exists (:data:`denpex_nb.signals.NO_PROCESS_GROUP`): then no
    collective ran, and the process misused the API on its own (``frames``: a traceback cut before its
    exception line whose innermost frame is that check says the same)."""
    message = None if message is None or pd.isna(message) else str(message)
    signal = None if signal is None or pd.isna(signal) else str(signal)
    if kind == ErrorKind.OOM:
        return True
    if message and _device_fault(message):
        return True
    if kind == ErrorKind.EXCEPTION:
        if (message and NO_PROCESS_GROUP.search(message)) or _in_group_check(message, frames):
            # no process group exists (its check's words, or a cut traceback's last line quoting them):
            # the process's own misuse of the API, whatever call raised it; no collective ran
            return True
        if not message or message.startswith(TRUNCATED_TRACEBACK) or in_collective:
            return False  # unknown, or raised inside a collective: not an own failure
        if STOPPED.search(message):
            return False  # stopped from outside (KeyboardInterrupt, a launcher's SignalException): no crash
        if "returned non-zero exit status" in message and "local_rank" in message:
            return False  # a launcher's CalledProcessError about a worker, not the line's own failure
        if WRAPPER_FAILURE.search(message):
            return False  # it wraps a failure reported elsewhere ("See root cause above"): that one decides
        # a library's error about a collective's sizes, shapes or counts across ranks, or about ranks
        # that disagree on a value, is a collective failure (the failure-signal vocabulary's size and
        # stall families), not the rank's own crash
        return not _collective_message(message)
    if kind in (ErrorKind.SIGNAL, ErrorKind.CHILD_FAILED, ErrorKind.AGENT, ErrorKind.EXIT):
        return (signal or signal_name(exit_code, shell=True)) in _CRASH_SIGNALS
    return False


def _in_group_check(message: str | None, frames) -> bool:
    """A traceback cut before its exception line whose innermost frame is c10d's check that a default
    process group exists (:data:`denpex_nb.signals.NO_PROCESS_GROUP_FRAME`)."""
    if not message or not message.startswith(TRUNCATED_TRACEBACK) or not isinstance(frames, str):
        return False
    return NO_PROCESS_GROUP_FRAME.search(frames.rsplit("\n", 1)[-1]) is not None


# What the patterns say of one message, remembered: the same messages come back for every rank and
# every rule that asks (a 256-rank timeout: 256 equal messages, read by four rules)
@functools.lru_cache(maxsize=4096)
def _device_fault(message: str) -> bool:
    if message.isascii():  # the same answer on ASCII text, ten times faster than IGNORECASE's search
        return _DEVICE_FAULT_ASCII.search(message.lower()) is not None
    return _DEVICE_FAULT.search(message) is not None


#: :data:`_DEVICE_FAULT` in lower case, searched in lowered ASCII text: one message per rank (a
#: watchdog line names its rank) misses the cache above, and IGNORECASE costs ~70 µs a line
_DEVICE_FAULT_ASCII = re.compile(_DEVICE_FAULT.pattern.lower())


@functools.lru_cache(maxsize=4096)
def _collective_message(message: str) -> bool:
    # (the collective library's own error, whatever wraps it: NCCL's or HCCL's, ``signals.NCCL_CODES``)
    return (
        _DISTRIBUTED.search(message) is not None
        or family_of(message) in _COLLECTIVE_FAMILIES
        or NCCL_CODES.search(message) is not None
    )


#: failure-signal families whose message is about several ranks: a library's exception saying a
#: collective's sizes differ (size) or that ranks disagree on a value or did not arrive (stall) is a
#: collective failure, not the raising rank's own crash
_COLLECTIVE_FAMILIES = (SignalFamily.SIZE, SignalFamily.STALL)


def own_failures(errors: pd.DataFrame) -> list[bool]:
    """Per error row: is it its rank's own failure (:func:`is_crash_error`)? The one place that
    reads an error row for that, so every rule and the rank state agree."""
    if errors is None or errors.empty:
        return []
    kinds = errors["kind"].astype(str)
    ops = errors["op"].astype(object) if "op" in errors else [None] * len(errors)
    # an exception whose message line (or the lines it wraps onto) another reader recognised as a
    # collective error (a DETAIL mismatch, a gloo or NCCL error) is that error, even when its own
    # text was cut mid-word (a terminal copy wrapped at 80 columns)
    where = list(zip(errors["file"].astype(object), errors["rank"].astype(object), errors["line"]))
    collective_at = {
        (f, r, int(ln)) for (f, r, ln), k in zip(where, kinds) if k in _COLLECTIVE_ERROR_KINDS and pd.notna(ln)
    }

    def near_collective_error(f, r, ln) -> bool:
        return pd.notna(ln) and any((f, r, int(ln) + d) in collective_at for d in range(_WRAP_LINES + 1))

    # a traceback whose last line names no exception type (another stream's line landed inside it)
    # says nothing about what failed: not evidence of an own failure
    exc_types = errors["exc_type"].astype(object) if "exc_type" in errors else [None] * len(errors)
    typed = "exc_type" in errors
    frames = errors["frames"].astype(object) if "frames" in errors else [None] * len(errors)
    return [
        is_crash_error(
            k,
            m,
            sg,
            code,
            in_collective=k == ErrorKind.EXCEPTION
            and (
                (op is not None and op == op)
                or near_collective_error(*w)
                or (typed and not _known(t))
                or _rendezvous_unresolved(m, fr)
            ),
            frames=fr,
        )
        for k, m, sg, code, op, w, t, fr in zip(
            kinds,
            errors["message"],
            errors["signal"].astype(object),
            errors["exit_code"].astype(object),
            ops,
            where,
            exc_types,
            frames,
        )
    ]


#: a frame of torch.distributed's set-up of a process group: its rendezvous, its store
_RENDEZVOUS_FRAME = re.compile(
    r"(?i)torch[/\\]distributed[/\\](?:rendezvous|elastic[/\\]rendezvous)|\bin (?:init_process_group|_\w*rendezvous\w*)\b"
    r"|\bTCPStore\b|\b_create_c10d_store\b"
)


def _rendezvous_unresolved(message, frames) -> bool:
    """An exception saying a host name does not resolve (``ValueError: host not found: Name or service not
    known``), raised while torch.distributed set up the process group (its traceback's frames in the
    rendezvous, the store, ``init_process_group``): the rendezvous address cannot be looked up, the
    network's failure at init, not the process's own crash (a download's name lookup stays its own)."""
    if not isinstance(message, str) or NAME_NOT_RESOLVED.search(message) is None:
        return False
    return isinstance(frames, str) and _RENDEZVOUS_FRAME.search(frames) is not None


def _known(v) -> bool:
    return v is not None and not pd.isna(v) and str(v) != ""


_COLLECTIVE_ERROR_KINDS = _vocab.COLLECTIVE_ERROR_KINDS
#: an exception text that is itself a collective failure (a victim's), not an unknown one
_COLLECTIVE_TEXT = r"NCCL|Watchdog|timed out|Timed out|Connection (?:reset|closed)|ProcessGroup|DistBackendError"
#: how many physical lines after an exception line may hold the rest of its wrapped message
_WRAP_LINES = 3


def is_failure(kind: str, message: str | None = None) -> bool:
    """True for an error row that means something failed on its rank (see FAILURE_KINDS)."""
    if kind in FAILURE_KINDS:
        return True
    if kind == ErrorKind.NCCL_WARN and message is not None and not pd.isna(message):
        m = str(message)
        return bool(_NCCL_WARN_FAILURE.search(m)) and not _NCCL_WARN_BENIGN.search(m)
    return False


# --- the registry ------------------------------------------------------------------------------


@dataclass
class Context:
    """What every rule may read: the incident's frames and what diagnosis derived from them."""

    incident: object
    alignment: object
    state: pd.DataFrame  # rank_state: one row per rank
    group_size: int | None  # explicit evidence only
    texts: dict = field(default_factory=dict)  # (file, line) -> message, for evidence lines
    _resolver: object = field(default=None, repr=False)

    @property
    def resolver(self):
        """The one :class:`~.resolve.Resolver` of this incident (pid, local rank, host -> global rank)."""
        if self._resolver is None:
            from .resolve import Resolver

            self._resolver = Resolver(self.incident, self.group_size)
        return self._resolver

    @property
    def errors(self) -> pd.DataFrame:
        return self.incident.errors

    @property
    def ranks_known(self) -> list[int]:
        return [int(r) for r in self.state["rank"]] if len(self.state) else []

    def reporters_named(self, reporters: list[int]) -> tuple[list[int], str]:
        """Name the ranks that reported an error only when the evidence shows a strict majority of
        the group present and not reporting it (else the others may have said the same, unseen)."""
        if not reporters:
            return [], "undetermined: the evidence names no rank"
        st = self.state
        present = set(int(r) for r in st.loc[st["present"], "rank"]) if len(st) else set()
        quiet = present - set(reporters)
        group = self.group_of(len(present), self.group_size)
        if len(quiet) * 2 > group:
            return sorted(reporters), "own-failure"
        return [], (
            f"undetermined: only {len(quiet)} other rank(s) of a group of {group} are seen without this "
            "error; the rest may have reported it too"
        )

    def group_of(self, members: int, stated: int | None = None) -> int:
        """The size a majority is counted against: the stated group size, else a lower bound from
        the evidence (the ranks seen, and the highest rank number seen plus one)."""
        top = max(self.ranks_known, default=-1) + 1
        return max(int(stated or 0), members, top, 1)


@dataclass(frozen=True)
class Rule:
    name: str
    stage: str  # "find" | "explain"
    emits: tuple[str, ...]  # catalog ids this rule may produce
    uses: tuple[str, ...]  # the evidence it reads (frames, error kinds)
    fn: Callable


RULES: list[Rule] = []


def rule(name: str, *, emits: tuple[str, ...], uses: tuple[str, ...], stage: str = "find"):
    """Register a rule. ``find`` rules take a Context; ``explain`` rules take (Context, findings)."""

    def deco(fn):
        RULES.append(Rule(name, stage, tuple(emits), tuple(uses), fn))
        return fn

    return deco


def strict_minority(sig: dict[int, object], group: int | None = None) -> tuple[list[int], str]:
    """Ranks off the majority value, and why they are (or are not) named.

    The majority must hold more than half of ``group`` (the group's known size, else the ranks
    that have a value): with ranks absent from the evidence a local majority proves nothing.
    """
    sig = {r: v for r, v in sig.items() if v is not None and not (isinstance(v, float) and pd.isna(v))}
    counts = Counter(sig.values()).most_common()
    if len(counts) < 2:
        return [], "undetermined: the ranks agree"
    if counts[0][1] == counts[1][1]:
        return [], "undetermined: a tie, no majority"
    n = max(group or 0, len(sig))
    if counts[0][1] * 2 <= n:
        return [], f"undetermined: the largest side ({counts[0][1]} ranks) is not a majority of the group of {n}"
    majority = counts[0][0]
    return sorted(r for r, v in sig.items() if v != majority), "majority"


# --- helpers -----------------------------------------------------------------------------------


def _shapes(v) -> list[list[int]] | None:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    try:
        return [list(map(int, s)) for s in v]
    except TypeError:
        return None


def _s(v) -> str | None:
    return None if v is None or (not isinstance(v, (list, tuple)) and pd.isna(v)) else str(v)


def _i(v) -> int | None:
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _view(row) -> RankView:
    dt = _s(row.get("dtype"))
    state = _s(row.get("state"))
    if row.get("_done") and state != State.COMPLETED:
        state = State.COMPLETED
    return RankView(
        op=_s(row.get("op")),
        seq=_i(row.get("seq")),
        shapes=_shapes(row.get("in_shapes")),
        dtypes=[dt] if dt else None,
        state=state,
    )


def _evidence_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Evidence lines: the odd ranks first (rows whose op, size or dtype is rarer than the most
    common one), then the first row of the most common value, then the rest in their order: the
    lines shown hold every side even when ranks whose size is unknown come first. On a tie for the
    most common (two sizes on as many ranks each) no side is the odd one: the first row of each
    tied value comes before any second one, so the first lines a summary shows hold every side,
    from the lowest rank on, whichever value is smaller."""
    if len(rows) <= MAX_EVIDENCE:
        return rows
    odd = pd.Series(False, index=rows.index)
    lead = pd.Series(False, index=rows.index)
    for col in ("op", "_size", "dtype"):
        if col in rows:
            v = rows[col].astype(object)
            mode = v.mode(dropna=True)
            if len(mode):
                modal = v.isin(list(mode))
                odd |= v.notna() & ~modal
                lead |= modal & ~v.duplicated()
    lead &= ~odd
    return pd.concat([rows[odd], rows[lead], rows[~odd & ~lead]]).head(MAX_EVIDENCE)


def _describe(row) -> str:
    sh = _shapes(row.get("in_shapes"))
    parts = [
        f"rank {_i(row.get('rank'))}",
        str(_s(row.get("op")) or "?"),
        f"{row.get('seq_kind')} seq {_i(row.get('seq'))}",
    ]
    if sh is not None:
        parts.append(f"in={sh}")
    elif _i(row.get("numel_in")) is not None:
        parts.append(f"numel_in={_i(row.get('numel_in'))}")
    if _s(row.get("dtype")):
        parts.append(str(row.get("dtype")))
    return " ".join(parts)


def _evidence(rows, texts: dict, culprits=(), records: list[dict] | None = None) -> list[Evidence]:
    """The evidence lines of ``rows`` (a frame, or a divergence: its ``rows``): the culprits' first,
    then the odd ranks. ``records``, when given, is ``rows.to_dict("records")``: a few rows are
    ordered without pandas, and a divergence's frame is not made."""
    if records is not None and len(records) <= MAX_EVIDENCE:
        chosen = records
        if culprits:
            wanted = set(culprits)
            is_c = [_in(row.get("rank"), wanted) for row in records]
            chosen = [r for r, c in zip(records, is_c) if c] + [r for r, c in zip(records, is_c) if not c]
    else:
        if not isinstance(rows, pd.DataFrame):
            rows = rows.rows
        if culprits:
            is_c = rows["rank"].isin(list(culprits)).to_numpy(bool, na_value=False)
            rows = pd.concat([rows[is_c], rows[~is_c]])
        chosen = _evidence_rows(rows).to_dict("records")
    out = []
    for row in chosen:
        file, line = _s(row.get("file")), _i(row.get("line"))
        if file is None:
            continue
        text = texts.get((file, line)) or _describe(row)
        out.append(Evidence(file=file, line=line or 0, text=text, rank=_i(row.get("rank"))))
    return out


def _stated_size(d, records: list[dict]) -> int | None:
    """The largest ``world_size`` the divergence's rows state (None when none does)."""
    if records and "world_size" in records[0]:
        vals = [r["world_size"] for r in records]
        known = [v for v in vals if v is not None and v is not pd.NA]
        if all(type(v) is int for v in known):  # Int32 cells: the max of the numbers, as pandas says it
            return _i(max(known)) if known else None
    rows = d.rows
    return _i(pd.to_numeric(rows["world_size"], errors="coerce").max()) if "world_size" in rows else None


def _in(v, wanted: set) -> bool:
    """``v`` is one of ``wanted`` (as ``Series.isin`` says it: a missing value is in nothing)."""
    try:
        return not pd.isna(v) and v in wanted
    except (TypeError, ValueError):  # an unhashable or array-like cell
        return False


def _seq_op_order(seq_op: tuple) -> tuple:
    """Order (seq, op) pairs whose op may be unknown (None sorts first)."""
    return seq_op[0], seq_op[1] or ""


def fmt_ranks(ranks) -> str:
    """``rank 3`` / ``ranks 0–216, 218–255``: rank lists in text read as ranges (:mod:`denpex_nb.human`)."""
    return human.fmt_ranks(ranks, none="ranks")


def _group(sig: dict) -> dict:
    out: dict = {}
    for r, v in sorted(sig.items()):
        out.setdefault(v, []).append(r)
    return out


def _shape_text(view: RankView, row) -> str:
    if view.shapes is not None:
        return str(view.shapes) + (f" {view.dtypes[0]}" if view.dtypes else "")
    n = _i(row.get("numel_in"))
    return f"numel {n}" if n is not None else "size unknown"


def _err_evidence(rows: pd.DataFrame) -> list[Evidence]:
    out = []
    for e in rows.head(MAX_EVIDENCE).to_dict("records"):
        out.append(
            Evidence(
                file=_s(e.get("file")) or "?",
                line=_i(e.get("line")) or 0,
                text=str(e.get("message") or "")[:500],
                rank=_i(e.get("rank")),
            )
        )
    return out


def _tmin(rows: pd.DataFrame):
    t = rows["t_wall"].dropna()
    return t.min() if len(t) else None


def _related(rows: pd.DataFrame) -> list[int]:
    out: set[int] = set()
    for v in rows["related_ranks"].dropna():
        try:
            out.update(int(x) for x in v)
        except (TypeError, ValueError, OverflowError):
            continue
    return sorted(out)


def _first_op(rows: pd.DataFrame) -> str | None:
    ops = rows["op"].dropna()
    return _s(ops.iloc[0]) if len(ops) else None


def _kind(errors: pd.DataFrame, *kinds: str) -> pd.DataFrame:
    if errors is None or errors.empty:
        return errors.iloc[0:0] if errors is not None else pd.DataFrame()
    return errors[errors["kind"].astype(str).isin(kinds)]


#: the helpers other rule modules use (analysis/positions.py): the error rows of some kinds, their
#: evidence lines, their earliest time
errors_of_kind = _kind
error_evidence = _err_evidence
earliest = _tmin


# --- cross-rank divergences (aligned collective records) ---------------------------------------


@rule(
    "divergences",
    emits=(ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC),
    uses=("events: trace, fr, detail, work, nccl_position",),
)
def divergences(ctx: Context) -> list[Finding]:
    """Cross-rank comparison of aligned records. A rank whose *log lines* end earlier than the
    others' is a desync only when something failed: in a run where nothing failed, a log that
    ends early is a cut, wrapped or partial copy (trace files and Flight Recorder dumps are
    complete per rank, so their ends count either way)."""
    failed = bool(len(ctx.state)) and bool(ctx.state["failed"].any())
    level = _complete_record_levels(ctx.alignment)
    divs = [
        d
        for d in ctx.alignment.divergences
        if d.kind != "missing"
        or (
            not completed_without_them(d)
            and (d.seq_kind in COMPLETE_RECORDS or (failed and not _contradicted_by_complete_records(d, level)))
        )
    ]
    return from_divergences(divs, ctx.texts, ctx.group_size, top=ctx.group_of(0))


def _records(d: Divergence) -> list[dict]:
    """The rows of the ranks present at a divergence, as dicts (align makes them once for all)."""
    if d.records is not None:
        return d.records
    return d.rows.to_dict("records") if d.rows is not None else []


def completed_without_them(d: Divergence) -> str:
    """Why the ranks a ``missing`` divergence names were there after all ('' when they may not
    have been): another rank's record at that seq shows a collective that every rank must issue
    before it completes on any (all_reduce, all_gather, barrier ...) as completed. Their records
    end earlier than the others' (a dump taken earlier, a ring buffer that wrapped, a cut copy),
    not their ranks: calling that a desync names a bystander at high confidence. Flight Recorder
    records only: dumps are taken rank by rank, on request or when a rank notices a timeout, and
    each keeps the last N entries (the tracer writes each rank's calls until that rank stops).

    However few the ranks that completed it: a collective is matched by each rank's n-th call in its
    group, so one completed at seq n on any rank had every rank's n-th call (one rank's extra call
    never completes; it waits for calls the others never make). When the ranks that completed it show
    different ops there (an op mismatch, found apart), the note names each op with its ranks."""
    if d.kind != "missing" or d.seq_kind != SeqKind.FR or not d.missing:
        return ""
    by_op: dict[str, set[int]] = {}
    for row in _records(d):
        op = normalize_op(_s(row.get("op")))
        if row.get("_done") and op in EVERY_RANK_NEEDED:
            by_op.setdefault(op, set()).add(int(row["rank"]))
    if not by_op:
        return ""
    done = sorted(set().union(*by_op.values()))
    op = " and ".join(op if len(by_op) == 1 else f"{op} ({fmt_ranks(ranks)})" for op, ranks in sorted(by_op.items()))
    where = f"{d.seq_kind} seq {d.seq}" + (f" of pg {d.pg}" if d.pg not in (None, "") else "")
    lag = ", ".join(f"rank {r} at seq {d.lag.get(r)}" for r in sorted(d.missing))
    return (
        f"the records of {fmt_ranks(d.missing)} end earlier ({lag}), but {fmt_ranks(done)} completed "
        f"{op} at {where}, which needs every rank: those ranks were there, their records stop "
        f"sooner (dumped earlier, a ring buffer that wrapped, or a cut copy); compare records "
        f"taken at the same moment"
    )


def _complete_record_levels(alignment) -> dict[int, bool]:
    """Per rank with a complete record (trace, FR): True when it reached the furthest seq of its
    group there (it is not behind), False when it is behind."""
    out: dict[int, bool] = {}
    for d in alignment.divergences:
        if d.kind == "missing" and d.seq_kind in COMPLETE_RECORDS:
            for r in d.missing:
                out[int(r)] = False
    for (_, kind), members in alignment.members.items():
        if kind in COMPLETE_RECORDS:
            for r in members:
                out.setdefault(int(r), True)
    return out


def _contradicted_by_complete_records(d, level: dict[int, bool]) -> bool:
    """A log-line counter says these ranks fell behind, but their complete records (tracer, Flight
    Recorder) show them as far as everyone: the log copy was cut, not the rank."""
    return bool(d.missing) and all(level.get(int(r)) is True for r in d.missing)


COMPLETE_RECORDS = COMPLETE_RECORD_KINDS


def from_divergences(divs: list[Divergence], texts: dict, group_size: int | None = None, top: int = 0) -> list[Finding]:
    """One finding per divergence (ranks present: their views; ranks missing: absent). ``top`` is the
    highest rank number the evidence shows plus one: the default group has at least that many ranks,
    so a majority there is counted against it (ranks 1-3 seen: rank 0 exists, unseen)."""
    findings = []
    for d in divs:
        records = _records(d)
        by_rank = {int(row["rank"]): row for row in records}
        views = {r: _view(row) for r, row in by_rank.items()}
        ops = {r: views[r].op for r in views}
        majority_op = Counter(ops.values()).most_common(1)[0][0] if ops else None
        where = f"{d.seq_kind} seq {d.seq}" + (f" of pg {d.pg}" if d.pg not in (None, "") else "")
        stated = _stated_size(d, records)
        default = d.pg in (None, "", "0", "default_pg")
        if stated is None and default and group_size:
            stated = group_size
        n_members = len(set(by_rank) | set(d.missing))
        group = max(stated or 0, n_members, top if default else 0)
        basis = "majority"
        if d.kind == "op" and len({op for op in ops.values() if op not in (None, UNKNOWN_OP)}) < 2:
            continue  # an op a line did not say, or cut (a wrap broke its field), is unknown, not another op
        if d.kind == "op":
            culprits, basis = strict_minority(ops, group)
            cls = ClassId.OP_MISMATCH
            desc = ", ".join(f"{fmt_ranks(rs)}: {op}" for op, rs in _group(ops).items())
            summary = f"Ranks called different collectives at {where}: {desc}."
        elif d.kind == "dtype":
            dts = {r: (v.dtypes or [None])[0] for r, v in views.items()}
            culprits, basis = strict_minority(dts, group)
            cls = ClassId.DTYPE_MISMATCH
            desc = ", ".join(f"{fmt_ranks(rs)}: {dt}" for dt, rs in _group(dts).items())
            summary = f"{majority_op} at {where} got different dtypes: {desc}."
        elif d.kind == "size":
            sizes = {r: row.get("_size") for r, row in by_rank.items()}
            culprits, basis = strict_minority(sizes, group)
            cls = ClassId.SHAPE_MISMATCH
            desc = ", ".join(
                f"{fmt_ranks(rs)}: {_shape_text(views[rs[0]], by_rank[rs[0]])}" for _, rs in _group(sizes).items()
            )
            summary = f"{majority_op} at {where} got different sizes: {desc}."
        elif d.kind == "shape":
            shapes = {r: None if v.shapes is None else tuple(map(tuple, v.shapes)) for r, v in views.items()}
            culprits, basis = strict_minority(shapes, group)
            cls = ClassId.SHAPE_MISMATCH
            desc = ", ".join(
                f"{fmt_ranks(rs)}: {[list(t) for t in sh] if sh else sh}" for sh, rs in _group(shapes).items()
            )
            summary = (
                f"{majority_op} at {where} got tensors of different shapes with the same number of "
                f"elements: {desc}. It completes on every backend, but elements are combined by their "
                f"flat position, so the result is silently wrong unless the reshape is intended."
            )
        elif d.kind == "local-size":
            bad = sorted(r for r, row in by_rank.items() if row.get("_local_bad"))
            culprits, basis = (bad, "majority") if len(bad) * 2 < group else ([], "undetermined: most ranks")
            cls = ClassId.SHAPE_MISMATCH
            summary = (
                f"{majority_op} at {where}: on {fmt_ranks(bad)} the output size is not the input size "
                f"times the group size."
            )
        else:  # missing
            extra = len(d.present) < len(d.missing)
            side = sorted(d.present) if extra else sorted(d.missing)
            other = len(d.missing) if extra else len(d.present)
            if other * 2 > group:
                culprits, basis = side, "majority"
            else:
                culprits, basis = [], f"undetermined: {other} of a group of {group} ranks is not a majority"
            cls = ClassId.RANK_DESYNC
            for r in d.missing:
                views[r] = RankView(op=None, seq=d.lag.get(r), state="absent")
            lag_txt = ", ".join(f"rank {r} last at seq {d.lag.get(r)}" for r in sorted(d.missing))
            if extra:
                summary = (
                    f"{fmt_ranks(d.present)} issued {majority_op} at {where}, which the other "
                    f"{len(d.missing)} ranks never called ({lag_txt}): an extra collective."
                )
            else:
                summary = (
                    f"{fmt_ranks(d.missing)} never reached {where} ({majority_op}, issued by "
                    f"{fmt_ranks(d.present)}); {lag_txt}."
                )
        op = majority_op
        if d.kind == "op":
            culprit_ops = {ops[r] for r in culprits}
            op = culprit_ops.pop() if len(culprit_ops) == 1 else None  # a tie names no op
        conf = "high" if culprits else "medium"
        if d.kind == "shape":  # nothing failed, and a deliberate reshape is possible
            conf = "medium" if culprits else "low"
        findings.append(
            Finding(
                class_id=cls,
                summary=summary,
                confidence=conf,
                pg=d.pg,
                seq=d.seq,
                seq_kind=d.seq_kind,
                op=op,
                culprit_ranks=culprits,
                ranks=views,
                evidence=_evidence(d, texts, culprits, records),
                t_wall=d.t_wall,
                rule="divergences",
                culprit_basis=basis
                if culprits
                else (basis if basis != "majority" else "undetermined: a tie, no majority"),
            )
        )
    return findings


# --- text evidence that names its class ----------------------------------------------------------

_ENFORCE = re.compile(r"(?<!\d)(\d+) vs (\d+)")  # (?<!\d): linear on a long run of digits
#: a gloo enforce failure that is its check of a message's size against the buffer posted for it (``op.preamble.length
#: <= op.nbytes. 40 vs 24``, ``buffer.cc:72] 8 vs 16``, ``Received data size doesn't match expected size``); gloo's
#: other enforce checks (a host or interface without a usable address, a socket call that failed) are not sizes
_ENFORCE_SIZE = re.compile(r"(?<!\d)\d+ vs \d+|\bnbytes\b|\blength\b|(?i:\bsize\b)")
_FR_CLASS = (
    ("COLLECTIVE_TYPE_MISMATCH", ClassId.OP_MISMATCH),
    ("COLLECTIVE_DTYPE_MISMATCH", ClassId.DTYPE_MISMATCH),
    ("SIZE_OR_SYNTAX_MISMATCH", ClassId.SHAPE_MISMATCH),
    ("Not all ranks joining", ClassId.RANK_DESYNC),
    ("missing ranks", ClassId.RANK_DESYNC),
)
_DETAIL_CLASS = (
    ("Op type:", ClassId.OP_MISMATCH),
    ("dtypes:", ClassId.DTYPE_MISMATCH),
    ("shapes:", ClassId.SHAPE_MISMATCH),
    ("Sequence number:", ClassId.RANK_DESYNC),
)


def _text_finding(cls, summary, rows, rule_name, conf="medium", culprits=(), basis="", **kw) -> Finding:
    culprits = sorted(set(culprits))
    if not culprits and not basis.startswith("undetermined"):
        basis = "undetermined: the evidence names no rank"
    return Finding(
        class_id=cls,
        summary=summary,
        confidence=conf,
        culprit_ranks=culprits,
        evidence=_err_evidence(rows),
        t_wall=_tmin(rows),
        rule=rule_name,
        culprit_basis=basis,
        **kw,
    )


@rule("monitored-barrier", emits=(ClassId.RANK_DESYNC,), uses=("errors: monitored_barrier",))
def monitored_barrier(ctx: Context) -> list[Finding]:
    mb = _kind(ctx.errors, ErrorKind.MONITORED_BARRIER)
    if not len(mb):
        return []
    missing = _related(mb)
    return [
        _text_finding(
            ClassId.RANK_DESYNC,
            f"{fmt_ranks(missing) if missing else 'Some ranks'} failed to pass "
            "monitoredBarrier (DETAIL): they never reached the collective the others were in.",
            mb,
            "monitored-barrier",
            "high" if missing else "medium",
            missing,
            "statement",
        )
    ]


#: the desync report's line for the ranks inside the collective it names (``[0, 1, 2] joined but didn't
#: finish collective #730 (count from 1)``)
_DS_JOINED = re.compile(r"joined but didn.t finish collective")


def all_joined(ctx: Context) -> tuple[list[int], pd.DataFrame] | None:
    """A desync report whose ``joined but didn't finish`` line names every rank of the group: all of
    them are inside the one collective and none finished it, so none is behind the others (the
    collective hung under all of them: the network, a device, or a rank outside this group). The
    ranks and that line's rows; None otherwise."""
    ds = _kind(ctx.errors, ErrorKind.DESYNC_REPORT)
    if not len(ds):
        return None
    rows = ds[ds["message"].astype(str).str.contains(_DS_JOINED)]
    joined = _related(rows)
    return (joined, rows) if _names_every_rank(ctx, joined, _related(ds)) else None


def _names_every_rank(ctx: Context, named: list[int], reported: list[int]) -> bool:
    """``named`` (two ranks at least) covers the whole group: the ranks known anywhere and those the
    report mentions (``reported``), counted from 0, or the stated group size where it is larger."""
    members = set(ctx.ranks_known) | set(reported)
    group = max(int(ctx.group_size or 0), max(members, default=-1) + 1)
    return len(named) >= 2 and set(named) >= set(range(group))


@rule("desync-report", emits=(ClassId.RANK_DESYNC,), uses=("errors: desync_report",))
def desync_report(ctx: Context) -> list[Finding]:
    """The ranks torch's desync report names as lagging. A report in which every rank joined the
    collective and none finished it names no desync (:func:`all_joined`): no finding, the failure
    stays undetermined (:func:`undetermined_failure` says what the report showed)."""
    ds = _kind(ctx.errors, ErrorKind.DESYNC_REPORT)
    if not len(ds) or all_joined(ctx) is not None:
        return []
    lag = _related(ds)
    if _names_every_rank(ctx, lag, lag):
        # the report's lines name every rank between them (some inside the collective, the others
        # done with it and not in the next): it singles nobody out
        return [
            _text_finding(
                ClassId.RANK_DESYNC,
                f"The desync report names every rank ({fmt_ranks(lag)}) between its lines: all of them are at "
                "the same collective, some still inside it, the others done with it and not in the next; it "
                "singles nobody out (a hang under some of them, or a rank outside the evidence).",
                ds,
                "desync-report",
                "low",
                (),
                "undetermined: the report names every rank of the group",
            )
        ]
    return [
        _text_finding(
            ClassId.RANK_DESYNC,
            f"The desync report names {fmt_ranks(lag) if lag else 'no rank'} as lagging.",
            ds,
            "desync-report",
            "high" if lag else "low",
            lag,
            "statement",
        )
    ]


@rule("nccl-ras", emits=(ClassId.RANK_DESYNC,), uses=("errors: nccl_ras",))
def nccl_ras(ctx: Context) -> list[Finding]:
    """NCCL RAS's MISMATCH names the ranks it lists as outliers. When its counts show them AHEAD of
    the others (``2 ranks have launched up to operation 641`` beside ``30 ... up to 640``), the
    stragglers are the unlisted ranks behind: the listed ones are no culprits, and the others are
    not named either (RAS does not list them)."""
    ras = _kind(ctx.errors, ErrorKind.NCCL_RAS)
    if not len(ras):
        return []
    named = _related(ras)
    basis = "statement"
    if named and any(_ras_listed_ahead(str(m), len(named)) for m in ras["message"]):
        named, basis = (
            [],
            ("undetermined: RAS lists the ranks that are ahead; the ranks behind, the stragglers, are not listed"),
        )
    return [
        _text_finding(
            ClassId.RANK_DESYNC,
            "NCCL RAS: communicator ranks have different operation counts.",
            ras,
            "nccl-ras",
            "medium",
            named,
            basis,
        )
    ]


_RAS_COUNT = re.compile(r"(?<!\d)(\d{1,9}) ranks? ha(?:ve|s) launched up to operation (\d{1,12})")


def _ras_listed_ahead(message: str, n_listed: int) -> bool:
    """Do RAS's counts put the ``n_listed`` listed ranks at the highest operation count?"""
    counts = [(int(n), int(op)) for n, op in _RAS_COUNT.findall(message)]
    if len(counts) < 2:
        return False
    top = max(op for _, op in counts)
    return any(n == n_listed and op == top for n, op in counts) and not any(
        n == n_listed and op < top for n, op in counts
    )


@rule(
    "detail-text",
    emits=(ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC),
    uses=("errors: detail_mismatch",),
)
def detail_text(ctx: Context) -> list[Finding]:
    """DETAIL's own verdict text, when its fingerprints cannot be compared as aligned events.

    The aligned events decide when two or more ranks' fingerprints were read. Otherwise the message's
    ``differ in the following aspects`` line says which aspect differs; a message without it (cut,
    or from a PyTorch that printed only the reporting rank's fingerprint) still says the ranks ran
    different collectives at one point: a desync whose aspect is unread, never the dtype or shape
    that the one fingerprint shown happens to mention."""
    if any(k == SeqKind.DETAIL and len(ranks) > 1 for (_, k), ranks in ctx.alignment.members.items()):
        return []
    dm = _kind(ctx.errors, ErrorKind.DETAIL_MISMATCH)
    out = []
    aspectless = dm[~dm["message"].astype(str).apply(lambda m: any(key in m for key, _ in _DETAIL_CLASS))]
    if len(aspectless) and len(aspectless) == len(dm):
        out.append(
            _text_finding(
                ClassId.RANK_DESYNC,
                "DETAIL's fingerprint check found the ranks running different collectives, but the evidence "
                "holds one side only (the message is cut or names no differing aspect): which of op, "
                "shape, dtype or sequence differs is not shown. Collect every rank's log of that moment. "
                + str(aspectless["message"].iloc[0])[:200],
                aspectless,
                "detail-text",
                "low",
                op=_first_op(aspectless),
            )
        )
    for cls in sorted({c for m in dm["message"].astype(str) for key, c in _DETAIL_CLASS if key in m}):
        key = next(k for k, c in _DETAIL_CLASS if c == cls)
        rows = dm[dm["message"].astype(str).str.contains(key, regex=False)]
        out.append(
            _text_finding(
                cls,
                "DETAIL fingerprint check: " + str(rows["message"].iloc[0]).split("aspects:")[-1].strip()[:300],
                rows,
                "detail-text",
                "medium",
                op=_first_op(rows),
            )
        )
    return out


@rule(
    "fr-analyzer-text",
    emits=(ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC),
    uses=("errors: fr_finding",),
)
def fr_analyzer_text(ctx: Context) -> list[Finding]:
    """torchfrtrace's findings; missing ranks it names are a statement, so they are culprits."""
    fr = _kind(ctx.errors, ErrorKind.FR_FINDING)
    out = []
    for cls in sorted({c for m in fr["message"].astype(str) for key, c in _FR_CLASS if key in m}):
        keys = [k for k, c in _FR_CLASS if c == cls]
        rows = fr[fr["message"].astype(str).apply(lambda m, keys=keys: any(k in m for k in keys))]
        seq = rows["seq"].dropna()
        named = _related(rows)
        out.append(
            _text_finding(
                cls,
                "torchfrtrace reported: " + str(rows["message"].iloc[0])[:200],
                rows,
                "fr-analyzer-text",
                "high" if named else "medium",
                named,
                "statement",
                op=_first_op(rows),
                seq=_i(seq.iloc[0]) if len(seq) else None,
                seq_kind=SeqKind.FR if len(seq) else None,
            )
        )
    return out


@rule("gloo-size", emits=(ClassId.SHAPE_MISMATCH,), uses=("errors: gloo_enforce, gloo_invalid_size",))
def gloo_size(ctx: Context) -> list[Finding]:
    """gloo's size checks: an enforce failure on a message's size (:data:`_ENFORCE_SIZE`; gloo's other enforce
    checks say nothing of sizes) and ``ProcessGroupGloo``'s invalid tensor size."""
    out = []
    en = _kind(ctx.errors, ErrorKind.GLOO_ENFORCE)
    en = en[en["message"].astype(str).str.contains(_ENFORCE_SIZE)] if len(en) else en
    if len(en):
        m = _ENFORCE.search(str(en["message"].iloc[0]))
        sizes = f" ({m.group(1)} bytes sent, {m.group(2)} expected)" if m else ""
        aborted = sorted(int(r) for r in en["rank"].dropna().unique())
        out.append(
            _text_finding(
                ClassId.SHAPE_MISMATCH,
                f"gloo aborted {fmt_ranks(aborted) if aborted else 'a rank'}: a peer sent more "
                f"bytes than its buffer holds{sizes}. The ranks' tensor sizes differ; whether by shape or by dtype "
                "is undetermined from this evidence, and the aborting rank is not necessarily the culprit.",
                en,
                "gloo-size",
                "medium",
            )
        )
    inv = _kind(ctx.errors, ErrorKind.GLOO_INVALID_SIZE)
    if len(inv):
        out.append(
            _text_finding(
                ClassId.SHAPE_MISMATCH,
                "gloo rejected an output list whose tensors differ in size from the input: "
                "the ranks' shapes differ (uneven all_gather). " + str(inv["message"].iloc[0])[:200],
                inv,
                "gloo-size",
                "medium",
                op=_first_op(inv),
            )
        )
    return out


@rule("ddp-reducer", emits=(ClassId.UNUSED_PARAMETERS,), uses=("errors: ddp_unused_parameters, ddp_error",))
def ddp_reducer(ctx: Context) -> list[Finding]:
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    kind, msg = errs["kind"].astype(str), errs["message"].astype(str)
    ddp = errs[
        (kind == ErrorKind.DDP_UNUSED_PARAMETERS)
        | (
            (kind == ErrorKind.DDP_ERROR)
            & msg.str.contains("receive grad|finished reduction|marked as ready|mark a variable ready", regex=True)
        )
    ]
    if not len(ddp):
        return []
    rep = sorted(int(r) for r in ddp["rank"].dropna().unique())
    # the reducer runs the same model code on every rank: each rank that reached the iteration raises
    # it, so one rank's copy names that rank only against a quiet majority
    culprits, basis = ctx.reporters_named(rep)
    twice = ddp["message"].astype(str).str.contains("marked as ready|mark a variable ready", regex=True).all()
    what = (
        "a parameter was marked ready twice in one iteration (reused by reentrant backward passes, e.g. "
        "gradient checkpointing, or used outside forward)"
        if twice
        else "parameters did not receive gradients (unused parameters / data-dependent control flow)"
    )
    return [
        _text_finding(
            ClassId.UNUSED_PARAMETERS,
            f"DDP reducer on {fmt_ranks(rep) if rep else 'some rank'}: {what}.",
            ddp,
            "ddp-reducer",
            "high",
            culprits,
            basis,
        )
    ]


#: a distributed checkpoint's CheckpointException: the ranks whose own step raised (printed on every rank)
_DCP_RANKS = re.compile(r"CheckpointException ranks:\s*(?:dict_keys\(|\{|\[)*\[?([\d,\s]*)")


@rule(
    "checkpoint-ranks",
    emits=(ClassId.RANK_CRASH,),
    uses=("errors: exception (torch.distributed.checkpoint's CheckpointException and its ranks)",),
)
def checkpoint_ranks(ctx: Context) -> list[Finding]:
    """A distributed checkpoint (``torch.distributed.checkpoint``) gathers each rank's exception from a
    planning or I/O step and re-raises them together, on every rank, as ``CheckpointException
    ranks:dict_keys([...])``: the ranks listed failed on their own (a missing key, a file not found),
    not in a collective; the rank that printed it may be any. ``rank-crash``; the listed ranks are
    culprits by that statement while they are fewer than the group (all of them singles no one out)."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    exc = errs[errs["kind"].astype(str) == ErrorKind.EXCEPTION]
    rows = exc[exc["message"].astype(str).str.contains("CheckpointException ranks:", regex=False)]
    if not len(rows):
        return []
    listed: set[int] = set()
    for m in rows["message"].astype(str):
        g = _DCP_RANKS.search(m)
        if g:
            listed |= {int(x) for x in re.findall(r"\d{1,10}", g.group(1))}
    group = ctx.group_of(len(set(ctx.ranks_known) | listed), ctx.group_size)
    if listed and len(listed) < group:
        culprits, basis = sorted(listed), "statement: the CheckpointException lists the ranks whose own step raised"
    else:
        culprits = []
        basis = (
            "undetermined: the CheckpointException lists every rank of the group"
            if listed
            else "undetermined: the CheckpointException's rank list is not in this evidence"
        )
    who = fmt_ranks(sorted(listed)) if listed else "some rank"
    return [
        _text_finding(
            ClassId.RANK_CRASH,
            f"A distributed checkpoint step failed on {who}, each rank with its own error (DCP gathers every "
            f"rank's exception and re-raises them together as a CheckpointException on each rank): not a "
            f"collective failure. {str(rows.iloc[0]['message'])[:200]}",
            rows,
            "checkpoint-ranks",
            "medium",
            culprits,
            basis,
        )
    ]


@rule("own-failure", emits=(ClassId.RANK_CRASH,), uses=("errors: exception, oom, signal, child_failed, agent",))
def own_failure(ctx: Context) -> list[Finding]:
    """Ranks that failed on their own (not in a collective): an exception, OOM, a kill."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    crash = errs[own_failures(errs)]
    # a launcher's statement about a worker (torchelastic's agent line and table) is read by the
    # launcher-first-failure rule, which knows how each launcher reports (and which rank it means)
    crash = crash[~crash["kind"].astype(str).isin([ErrorKind.AGENT, ErrorKind.CHILD_FAILED])]
    if not len(crash):
        return []
    crashed = sorted(int(r) for r in crash["rank"].dropna().unique())
    group = ctx.group_of(len(ctx.ranks_known), ctx.group_size)
    unsure = _unknown_failures(errs, set(crashed))
    named = bool(crashed) and len(crashed) < group and not unsure and crash["rank"].notna().all()
    # a process that could not reach another (refused, reset, closed by the peer) is that side's victim
    lost = bool(crash["message"].astype(str).str.contains(CONNECTION_LOST).all())
    first = crash.sort_values("t_wall", na_position="last").iloc[0]
    who = fmt_ranks(crashed) if crashed else "A rank"
    if lost:
        named = False
        why = (
            "; it could not reach another process (its connection was refused or dropped): the side that was "
            "not there (not started, crashed, listening elsewhere) failed first, and which rank that is, is not "
            "in this evidence"
        )
    elif named:
        why = ""
    elif unsure:
        why = f"; no rank can be singled out: {fmt_ranks(unsure)} failed too, how is not in this evidence"
    elif crash["rank"].isna().any():
        why = "; no rank can be singled out: a failure here names no rank"
    else:
        why = "; no rank can be singled out"
    return [
        _text_finding(
            ClassId.RANK_CRASH,
            f"{who} failed on {'its' if len(crashed) == 1 else 'their'} own (not in a collective): "
            f"{str(first['message'])[:200]}{why}",
            crash,
            "own-failure",
            "low" if lost else "high" if named and _quiet_majority(ctx, crashed, group) else "medium",
            crashed if named else [],
            "undetermined: the rank that raised could not reach another; the other side failed first"
            if lost
            else "own-failure",
        )
    ]


def _quiet_majority(ctx: Context, crashed: list[int], group: int) -> bool:
    """``high`` for a named crash needs the others seen: a strict majority of the group present in
    the evidence without a failure of its own (calibration: when the group was only inferred, the
    rule's high verdicts were right 6 times in 11 on the blind batches of 2026-12, bench_calibration)."""
    st = ctx.state
    if not len(st):
        return False
    quiet = st["present"] & ~st["own_failure"] & ~st["rank"].isin(crashed)
    return int(quiet.sum()) * 2 > group


def _unknown_failures(errs: pd.DataFrame, crashed: set[int]) -> list[int]:
    """Other ranks whose traceback is in the evidence but whose exception is not (a cut traceback,
    one that names no type): they failed too, maybe the same way, so the crashed ranks are no
    minority anyone can name (a culprit is never named when another process's failure is unknown)."""
    ex = errs[errs["kind"].astype(str) == ErrorKind.EXCEPTION]
    if not len(ex):
        return []
    msg = ex["message"].astype(str)
    cut = msg.str.startswith(TRUNCATED_TRACEBACK)
    if "exc_type" in ex:
        cut |= ex["exc_type"].isna() & ~msg.str.contains(_COLLECTIVE_TEXT, regex=True)
    ranks = ex.loc[cut, "rank"].dropna()
    return sorted({int(r) for r in ranks} - crashed)


@rule(ClassId.NCCL_ERROR, emits=(ClassId.NCCL_ERROR,), uses=("errors: nccl_error, nccl_warn",))
def nccl_error(ctx: Context) -> list[Finding]:
    """NCCL's own errors; an NCCL WARN counts only on a rank that also failed (many WARNs are benign)."""
    errs = ctx.errors
    if errs is None or errs.empty:
        return []
    kind, msg = errs["kind"].astype(str), errs["message"].astype(str)
    failing_warn = pd.Series(
        [k == ErrorKind.NCCL_WARN and is_failure(k, m) for k, m in zip(kind, errs["message"])],
        index=errs.index,
        dtype=bool,
    )
    # "remote process exited or there was a network error" is a victim's, unless its last error names
    # the transport's own failure
    victim = msg.str.contains(r"remote process exited|\bncclRemoteError\b", regex=True) & ~msg.str.contains(
        _TRANSPORT_FAULT, regex=True
    )
    nc = errs[((kind == ErrorKind.NCCL_ERROR) | failing_warn | wrapped_nccl_errors(errs)) & ~victim]
    nc = nc[[not _device_fault(str(m)) for m in nc["message"]]]  # a device fault is a crash
    if not len(nc):
        return []
    # a rank whose connection the peer closed or reset is that peer's victim, not a culprit
    own = nc[[not _PEER_CLOSED.search(str(m)) for m in nc["message"]]]
    rep = sorted(int(r) for r in own["rank"].dropna().unique())
    culprits, basis = ctx.reporters_named(rep)
    if not culprits:
        culprits, basis = _local_adapter_fault(own) or (culprits, basis)
    if not len(own):
        basis = "undetermined: the peer closed or reset the connection; the reporting ranks are its victims"
    return [
        _text_finding(
            ClassId.NCCL_ERROR,
            "NCCL reported an error of its own: " + str(nc["message"].iloc[0])[:200],
            nc,
            ClassId.NCCL_ERROR,
            "medium",
            culprits,
            basis,
        )
    ]


#: an InfiniBand async event NCCL reports about the *local* adapter (its own port, its own queue pair,
#: the device itself): the fault is on the reporting process's node, whatever the peers saw
_LOCAL_ADAPTER = re.compile(
    r"Got async event\s*:\s*(?:local catastrophic error|local (?:access violation |protection |invalid request )?"
    r"work queue (?:catastrophic )?error|port error|device fatal|local catastrophic)",
    re.I,
)


def _local_adapter_fault(rows: pd.DataFrame) -> tuple[list[int], str] | None:
    """The ranks that reported their own adapter's async fault, when they all run on one host (the
    host's adapter failed: its ranks are the culprits by NCCL's statement); None otherwise."""
    if not len(rows):
        return None
    local = rows[rows["message"].astype(str).str.contains(_LOCAL_ADAPTER) & rows["rank"].notna()]
    if not len(local) or "host" not in local:
        return None
    hosts = {str(h) for h in local["host"].dropna()}
    if len(hosts) != 1 or local["host"].isna().any():
        return None
    ranks = sorted(int(r) for r in local["rank"].unique())
    (host,) = hosts
    return ranks, (
        f"statement: NCCL reports an async event of the local InfiniBand adapter on {host} from "
        f"{fmt_ranks(ranks)} (each line names its rank and that host): the fault is on that node"
    )


def wrapped_nccl_errors(errs: pd.DataFrame) -> pd.Series:
    """Per error row: an exception of another framework whose message is NCCL's own error (an NCCL
    result code, its text, an NCCL call that failed: ``UnknownError: ncclCommInitRank failed:
    unhandled system error``, ``HorovodInternalError: ncclAllReduce failed: unhandled cuda error``).
    It is NCCL's error, whatever wraps it."""
    kind = errs["kind"].astype(str)
    return pd.Series(
        [
            k == ErrorKind.EXCEPTION and isinstance(m, str) and NCCL_CODES.search(m) is not None
            for k, m in zip(kind, errs["message"].astype(object))
        ],
        index=errs.index,
        dtype=bool,
    )


@rule("traceback-calls", emits=(ClassId.OP_MISMATCH,), uses=("rank_state: call_op (tracebacks' last collective call)",))
def traceback_calls(ctx: Context) -> list[Finding]:
    """Ranks whose tracebacks end in different collective calls (dist.broadcast here, all_reduce there)."""
    st = ctx.state
    if not len(st) or "call_op" not in st:
        return []
    calls = {int(r): str(op) for r, op in zip(st["rank"], st["call_op"]) if op is not None and op == op}
    if len(set(calls.values())) < 2:
        return []
    group = ctx.group_of(len(calls), ctx.group_size)
    culprits, basis = strict_minority(calls, group)
    desc = ", ".join(f"{fmt_ranks(rs)}: {op}" for op, rs in _group(calls).items())
    ex = _kind(ctx.errors, "exception")
    ex = ex[ex["op"].notna()]
    return [
        Finding(
            class_id=ClassId.OP_MISMATCH,
            summary=f"The ranks' tracebacks end in different collectives: {desc}.",
            confidence="medium",
            op=calls[culprits[0]] if culprits and len({calls[r] for r in culprits}) == 1 else None,
            culprit_ranks=culprits,
            ranks={r: RankView(op=op) for r, op in calls.items()},
            evidence=_err_evidence(ex),
            t_wall=_tmin(ex),
            rule="traceback-calls",
            culprit_basis=basis,
        )
    ]


def _group_ids(vic: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per victim row, the group it belongs to as far as the evidence says, and whether that was
    assumed. Its own ``pg``, else the one its rank's companion line at the same work names (torch
    2.4+ prints ``[Rank 1] Watchdog caught ... WorkNCCL(SeqNum=216, ...)`` without a group, then ``[PG
    ID 11 PG GUID 119 Rank 1] ... at work: 216``); else, when the rows of its counter name one group
    only, that one (assumed); else None."""
    key = list(zip(vic["rank"].astype(int), vic["seq"].astype("int64"), vic["seq_kind"].astype(object)))
    named: dict[tuple, str] = {}
    for k, pg in zip(key, vic["pg"].astype(object)):
        if not pd.isna(pg):
            named.setdefault(k, str(pg))
    by_kind: dict = {}
    for (_r, _s, sk), g in named.items():
        by_kind.setdefault(sk, set()).add(g)
    ids, assumed = [], []
    for k in key:
        sole = by_kind.get(k[2], set())
        ids.append(named.get(k) or (next(iter(sole)) if len(sole) == 1 else None))
        assumed.append(k not in named)
    return pd.Series(ids, index=vic.index, dtype=object), pd.Series(assumed, index=vic.index, dtype=bool)


def _with_ops(places: set) -> set:
    """``(seq, None)`` for each seq of ``places`` that some (seq, op) names the op of."""
    return {(s, None) for s, op in places if op is not None}


@rule("stuck-points", emits=(ClassId.RANK_DESYNC,), uses=("errors: watchdog timeouts with SeqNum/OpType",))
def stuck_points(ctx: Context) -> list[Finding]:
    """Ranks that timed out at different places in one counter: some are ahead, some behind.

    Each rank's watchdog line says where it is stuck (SeqNum, OpType). Compared only within one
    process group and counter (a line that names no group takes the group its rank's companion line
    at the same work names, else the counter's one group when its lines name only one); a rank stuck
    at several places with no group named is skipped (its timeouts may belong to different groups,
    whose counters are unrelated).
    """
    vic = _kind(ctx.errors, *VICTIM_KINDS)
    vic = vic[vic["rank"].notna() & vic["seq"].notna()] if len(vic) else vic
    out = []
    if not len(vic):
        return out
    gids, assumed = _group_ids(vic)
    for (gid, sk), rows in vic.groupby([gids, vic["seq_kind"].astype(object)], dropna=False, sort=False):
        no_group = pd.isna(gid)
        pg = None if no_group else gid
        at: dict[int, set] = {}
        for r, s, op in zip(rows["rank"].astype(int), rows["seq"].astype("int64"), rows["op"].astype(object)):
            at.setdefault(int(r), set()).add((int(s), _s(op)))
        # a companion line (no op) says no more than the timeout line of the same work (its op)
        at = {r: {(s, op) for s, op in v if op is not None or (s, None) not in _with_ops(v)} for r, v in at.items()}
        unnamed = rows[assumed.loc[rows.index]]
        if unnamed.groupby(unnamed["rank"].astype(int))["seq"].nunique().gt(1).any():
            continue  # a rank stuck at several places, none of them in a named group
        pos = {r: min(v, key=_seq_op_order) for r, v in at.items()}
        if len({s for s, _ in pos.values()}) < 2:
            continue
        stated = ctx.group_size if no_group or str(pg) in ("0", "default_pg") else None
        culprits, basis = strict_minority({r: s for r, (s, _) in pos.items()}, ctx.group_of(len(pos), stated))
        groups = _group({r: p for r, p in pos.items()})
        desc = "; ".join(
            f"{fmt_ranks(rs)} timed out in {op or 'a collective'} at {sk} seq {s}"
            for (s, op), rs in sorted(groups.items(), key=lambda kv: _seq_op_order(kv[0]))
        )
        lo = min(s for s, _ in pos.values())
        behind = sorted(r for r, (s, _) in pos.items() if s == lo)
        out.append(
            Finding(
                class_id=ClassId.RANK_DESYNC,
                confidence="high" if culprits else "medium",
                summary=f"The ranks are stuck at different places: {desc}. {fmt_ranks(behind).capitalize()} "
                f"{'is' if len(behind) == 1 else 'are'} behind the others.",
                pg=None if pd.isna(pg) else str(pg),
                seq_kind=None if pd.isna(sk) else str(sk),
                op=pos[culprits[0]][1] if culprits and len({pos[r] for r in culprits}) == 1 else None,
                culprit_ranks=culprits,
                ranks={r: RankView(op=op, seq=s, state=State.TIMED_OUT) for r, (s, op) in pos.items()},
                evidence=_err_evidence(rows),
                t_wall=_tmin(rows),
                rule="stuck-points",
                culprit_basis=basis,
            )
        )
    return out


@rule(
    "fingerprint-pairs",
    emits=(ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.SHAPE_MISMATCH, ClassId.RANK_DESYNC),
    uses=("events: DETAIL fingerprints named in one mismatch message",),
)
def fingerprint_pairs(ctx: Context) -> list[Finding]:
    """One DETAIL mismatch message names two ranks' fingerprints: compare them directly (op, then
    dtype, then shape, then sequence number), seq or no seq; the message names no culprit."""
    ev = ctx.incident.events
    if not len(ev) or "source" not in ev:
        return []
    is_detail = (ev["seq_kind"] == SeqKind.DETAIL).to_numpy(bool, na_value=False)  # codes, not strings
    if not is_detail.any():
        return []
    det = ev[
        is_detail
        & ev["rank"].notna().to_numpy(bool)
        & ev["file"].notna().to_numpy(bool)
        & ev["line"].notna().to_numpy(bool)
    ]
    out = []
    # grouped by (file, line) in order of first appearance, as ``groupby(sort=False)``: one
    # ``to_dict`` for all rows (a DETAIL log of thousands of messages made a frame per message)
    groups: dict[tuple, list[dict]] = {}
    for row in det.to_dict("records"):
        groups.setdefault((row["file"], row["line"]), []).append(row)
    for (file, line), rows in groups.items():
        by_rank = {int(row["rank"]): row for row in rows}
        if len(by_rank) < 2:
            continue
        views = {r: _view(row) for r, row in by_rank.items()}
        for cls, key in (
            (ClassId.OP_MISMATCH, lambda v: v.op),
            (ClassId.DTYPE_MISMATCH, lambda v: (v.dtypes or [None])[0]),
            (ClassId.SHAPE_MISMATCH, lambda v: None if v.shapes is None else str(v.shapes)),
            (ClassId.RANK_DESYNC, lambda v: v.seq),
        ):
            vals = {r: key(v) for r, v in views.items()}
            known = {r: v for r, v in vals.items() if v is not None}
            if len(known) >= 2 and len(set(known.values())) > 1:
                desc = ", ".join(
                    f"rank {r}: {views[r].op} seq {views[r].seq}"
                    + (f" {views[r].shapes}" if views[r].shapes is not None else "")
                    + (f" {views[r].dtypes[0]}" if views[r].dtypes else "")
                    for r in sorted(views)
                )
                seqs = {v.seq for v in views.values()}
                out.append(
                    Finding(
                        class_id=cls,
                        confidence="medium",
                        summary=f"DETAIL's fingerprint check found two ranks at different collectives: {desc}.",
                        seq_kind=SeqKind.DETAIL if len(seqs) == 1 and None not in seqs else None,
                        seq=next(iter(seqs)) if len(seqs) == 1 else None,
                        op=None
                        if cls == ClassId.OP_MISMATCH
                        else Counter(v.op for v in views.values()).most_common(1)[0][0],
                        ranks=views,
                        evidence=(
                            Evidence(file=str(file), line=int(line), text=ctx.texts.get((str(file), int(line)), "")),
                        ),
                        rule="fingerprint-pairs",
                        culprit_basis="undetermined: a pair of ranks, no majority",
                    )
                )
                break
    return out


@rule(
    "nccl-opcounts",
    emits=(ClassId.OP_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.SHAPE_MISMATCH),
    uses=("events: nccl_opcount with nranks, host, pid",),
)
def nccl_opcounts(ctx: Context) -> list[Finding]:
    """NCCL COLL lines of different processes at the same opCount of same-sized communicators.

    A communicator's address differs per process, so processes are matched by communicator size
    (``[nranks=N]``) and opCount; a process with several communicators of that size is left out
    (their opCounts are unrelated). A process is its rank when known, else ``host:pid``; culprits
    need known ranks and a strict majority of the communicator (a ``host:pid`` another line ranks,
    e.g. torchelastic's failure table, counts as that rank: :mod:`.resolve`). Only the first
    disagreement is reported: everything after it is a consequence.
    """
    ev = ctx.incident.events
    if not len(ev):
        return []
    # compared on the column as it is (a categorical compares its codes): turning 2M Flight
    # Recorder rows into Python strings to find none of these cost ~0.2 s
    is_nccl = (ev["seq_kind"] == SeqKind.NCCL_OPCOUNT).to_numpy(bool, na_value=False)
    if not is_nccl.any():
        return []
    e = ev[is_nccl & ev["seq"].notna().to_numpy(bool) & ev["world_size"].notna().to_numpy(bool)]
    if e.empty:
        return []
    host = e["host"].astype(object) if "host" in e else pd.Series(None, index=e.index, dtype=object)
    pid = e["pid"].astype(object) if "pid" in e else pd.Series(None, index=e.index, dtype=object)

    def name(r, h, p):
        if pd.notna(r):
            return f"rank {int(r)}"
        if h is None or pd.isna(p):
            return None
        hit = ctx.resolver.by_pid(int(p), None if pd.isna(h) else str(h))  # another line may rank this pid
        return f"rank {hit[0]}" if hit is not None else f"{h}:{p}"

    proc = [name(r, h, p) for r, h, p in zip(e["rank"], host, pid)]
    e = e.assign(_proc=proc)
    e = e[e["_proc"].notna()]
    out = []
    for n, grp in e.groupby(e["world_size"].astype(int), sort=True):
        comms = grp.groupby("_proc")["pg"].nunique()
        grp = grp[grp["_proc"].isin(comms[comms <= 1].index)]
        seqs = grp["seq"].astype("int64")
        # only an opCount two processes reached can disagree: the others are not looked at one by one
        n_procs = grp["_proc"].groupby(seqs, sort=True).nunique()
        for seq in n_procs.index[n_procs.to_numpy() >= 2]:
            first = grp[(seqs == seq).to_numpy()].drop_duplicates("_proc")
            found = _nccl_cell(first, int(n), int(seq), ctx)
            if found is not None:
                out.append(found)
                break
    return out


def _nccl_cell(cell: pd.DataFrame, nranks: int, seq: int, ctx: Context) -> Finding | None:
    from ..ops import SCATTER_LIKE

    ops = dict(zip(cell["_proc"], cell["op"].astype(object)))
    dts = dict(zip(cell["_proc"], cell["dtype"].astype(object)))
    sizes = {
        p: (_i(no) if op in SCATTER_LIKE else _i(ni))
        for p, op, ni, no in zip(cell["_proc"], cell["op"].astype(object), cell["numel_in"], cell["numel_out"])
    }
    for cls, sig in ((ClassId.OP_MISMATCH, ops), (ClassId.DTYPE_MISMATCH, dts), (ClassId.SHAPE_MISMATCH, sizes)):
        known = {p: v for p, v in sig.items() if v is not None and not (isinstance(v, float) and pd.isna(v))}
        if len(set(known.values())) < 2:
            continue
        ranked = {int(p.split()[1]): v for p, v in known.items() if p.startswith("rank ")}
        culprits, basis = ([], "undetermined: some processes are known only by host:pid")
        if len(ranked) == len(known):
            culprits, basis = strict_minority(ranked, nranks)
        desc = "; ".join(
            f"{', '.join(ps)}: {ops[ps[0]]} count {sizes[ps[0]]} {dts[ps[0]]}" for _, ps in _group(known).items()
        )
        return Finding(
            class_id=cls,
            confidence="high" if culprits else "medium",
            summary=(
                f"At NCCL opCount {seq} ({seq:#x}) of a {nranks}-rank communicator the processes issued "
                f"different collectives: {desc}."
            ),
            seq=seq,
            seq_kind=SeqKind.NCCL_OPCOUNT,
            op=None if cls == ClassId.OP_MISMATCH else Counter(ops.values()).most_common(1)[0][0],
            culprit_ranks=culprits,
            ranks={
                int(p.split()[1]): RankView(op=ops[p], seq=seq, dtypes=[dts[p]] if dts[p] else None)
                for p in known
                if p.startswith("rank ")
            },
            evidence=tuple(
                Evidence(
                    file=_s(f) or "?",
                    line=_i(ln) or 0,
                    text=ctx.texts.get((_s(f), _i(ln)), "") or f"{p}: {ops[p]} opCount {seq:#x}",
                    rank=None,
                )
                for p, f, ln in zip(cell["_proc"], cell["file"].astype(object), cell["line"])
            ),
            rule="nccl-opcounts",
            culprit_basis=basis,
        )
    return None


@rule("progress", emits=(ClassId.RANK_DESYNC,), uses=("progress: counters without aligned events",))
def progress_counters(ctx: Context) -> list[Finding]:
    return from_progress(ctx.incident.progress, set(ctx.alignment.members), ctx.group_size)


def from_progress(progress: pd.DataFrame, aligned: set, group_size: int | None = None) -> list[Finding]:
    """Laggards from progress counters (watchdog status lines) of a counter no event shows.

    Only counters without any aligned events are used: Flight Recorder ``pg_status`` and trace
    progress repeat what their events show (and DETAIL's helper group legitimately counts unevenly).

    Ranks whose last enqueued seq is lowest never issued what the others did: they are the
    culprits of a desync (by strict majority: if the laggards are the many, the few ahead made
    extra calls).
    """
    if progress is None or progress.empty:
        return []
    p = progress[progress["rank"].notna() & progress["last_enqueued"].notna()]
    out = []
    for (pg, kind), rows in p.groupby([p["pg"].astype(object), p["seq_kind"].astype(object)], dropna=False, sort=False):
        if str(kind) in {k for _, k in aligned}:
            continue
        last = rows.groupby(rows["rank"].astype(int))["last_enqueued"].max()
        if len(last) < 2 or last.nunique() < 2:
            continue
        lo = int(last.min())
        behind = sorted(int(r) for r in last[last == lo].index)
        ahead = sorted(int(r) for r in last[last > lo].index)
        stated = group_size if pd.isna(pg) or str(pg) in ("0", "default_pg") else None
        group = max(stated or 0, len(last))
        side, other = (ahead, behind) if len(ahead) < len(behind) else (behind, ahead)
        culprits = side if len(other) * 2 > group else []
        basis = "majority" if culprits else f"undetermined: {len(other)} of a group of {group} is not a majority"
        summary = (
            f"Progress counters disagree in pg {pg}: {fmt_ranks(behind)} last enqueued seq {lo}, "
            f"{fmt_ranks(ahead)} went further (up to {int(last.max())})."
        )
        ev_rows = rows[rows["rank"].astype(int).isin(behind + ahead)].head(MAX_EVIDENCE)
        evidence = [
            Evidence(
                file=_s(r.get("file")) or "?",
                line=_i(r.get("line")) or 0,
                text=f"rank {_i(r.get('rank'))}: last enqueued {_i(r.get('last_enqueued'))}, "
                f"last completed {_i(r.get('last_completed'))}",
                rank=_i(r.get("rank")),
            )
            for r in ev_rows.to_dict("records")
        ]
        out.append(
            Finding(
                class_id=ClassId.RANK_DESYNC,
                summary=summary,
                confidence="medium",
                pg=None if pd.isna(pg) else str(pg),
                seq=lo + 1,
                seq_kind=str(kind),
                culprit_ranks=culprits,
                evidence=evidence,
                rule="progress",
                culprit_basis=basis,
            )
        )
    return out


# --- when no rule names a class --------------------------------------------------------------------


def undetermined_failure(ctx: Context) -> Finding | None:
    """``timeout-undetermined`` when something failed (timeouts, peers gone, distributed errors,
    non-zero exits, signals) and no rule could say what: a failure, never an all-clear."""
    from .catalog.entries import COLLECT_MORE

    errs = ctx.errors
    failing = (
        errs[[is_failure(k, m) for k, m in zip(errs["kind"].astype(str), errs["message"])]]
        if errs is not None and len(errs)
        else pd.DataFrame()
    )
    st = ctx.state
    failed_ranks = sorted(int(r) for r in st.loc[st["failed"], "rank"]) if len(st) else []
    if not len(failing) and not failed_ranks:
        return None
    if len(failing):
        kinds = failing["kind"].astype(str).value_counts()
        what = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in kinds.items())
    else:
        what = "non-zero exits or signals"
    victims = _kind(errs, *VICTIM_KINDS) if len(failing) else failing
    ops = victims["op"].dropna() if len(victims) else pd.Series(dtype=object)
    seqs = victims["seq"].dropna() if len(victims) else pd.Series(dtype=object)
    one_seq = len(seqs) and victims["seq"].nunique() == 1
    rows = failing if len(failing) else (errs.iloc[0:0] if errs is not None else pd.DataFrame())
    joined = all_joined(ctx) if len(failing) else None
    seen = "no divergence is visible in this evidence and nothing tells the ranks apart"
    if joined is not None:
        n = _i(joined[1]["seq"].dropna().iloc[0]) if joined[1]["seq"].notna().any() else None
        seen = (
            f"the desync report says every rank ({fmt_ranks(joined[0])}) joined "
            f"{f'collective #{n}' if n is not None else 'the collective'} and none finished it: no rank is "
            "behind the others, the "
            "collective hung under all of them (the network, a device, or a rank outside this group; not a "
            "desync between these ranks)"
        )
    return Finding(
        class_id=ClassId.TIMEOUT_UNDETERMINED,
        summary=(
            f"Collectives or ranks failed on {fmt_ranks(failed_ranks) if failed_ranks else 'the ranks'} "
            f"({what}), but {seen}. Collect next: {COLLECT_MORE}"
        ),
        confidence="low",
        op=_s(ops.iloc[0]) if len(ops) else None,
        seq=_i(seqs.iloc[0]) if one_seq else None,
        seq_kind=_s(victims["seq_kind"].dropna().iloc[0]) if one_seq and victims["seq_kind"].notna().any() else None,
        evidence=_err_evidence(rows) if len(rows) else (),
        t_wall=_tmin(rows) if len(rows) else None,
        rule="undetermined-failure",
        culprit_basis="undetermined: nothing in this evidence tells the ranks apart",
    )

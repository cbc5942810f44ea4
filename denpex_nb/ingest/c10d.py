"""c10d lines: ProcessGroupNCCL watchdog / status / teardown / heartbeat / desync report, DETAIL
fingerprints and monitoredBarrier, the DDP reducer, and gloo's errors (docs/formats.md §3-§6).

These are the lines that say *which collective* a rank was in when things went wrong, so each
one becomes an ``errors`` row and, where it names a collective, an ``events`` row too. Counters
keep their own ``seq_kind``: WorkNCCL SeqNum and status-line ids are ``work``, DETAIL
SequenceNumber is ``detail``, the desync report's ``#N`` is ``desync``.

DETAIL mismatch messages (``Detected mismatch between collectives on ranks. Rank 0 is running
collective: CollectiveFingerPrint(...), but Rank 1 is running collective: ...``, from
ProcessGroupWrapper.cpp) are found wherever they sit: alone, after ``RuntimeError: `` or another
exception's name, inside an application logger's line, or split over several lines by a paste
(the pieces are joined back: fixed-width cuts (:func:`denpex_nb.ingest.hardwrap.cut_at`), word
wraps, the ``Collectives differ`` tail on its own line). A whole file hard-wrapped at one width
reaches this reader unwrapped already (:mod:`denpex_nb.ingest.hardwrap`, in ``to_lines``); this
join is for a message cut on its own (a paste of it, a logger that splits long messages). Each
gives one ``detail_mismatch`` error (``rank`` = the reporting rank, ``related_ranks`` = every rank
the message names, ``op``/``seq`` of the reporting rank's fingerprint) and one ``events`` row per
named rank: ``seq_kind="detail"``, ``seq``, ``op``,
``in_shapes``/``numel_in``/``dtype`` when the fingerprint has tensors, ``state="failed"``, and the
file/line of the message's first line. Numbers out of range become missing values.

Benign lines that prove the machinery ran are consumed: ProcessGroupNCCL's options block (the
``initialized with following options:`` header and its ``NCCL_ASYNC_ERROR_HANDLING: 0``-style
lines, ``PG ID``/``PG GUID``; the one-line ``initialization options: size: N, global rank: R``
gives a ``ranks`` row, with ``world_size`` only for the default group) and the teardown warnings
``process group has NOT been destroyed before it is being destructed`` (``... before we destruct
ProcessGroupNCCL`` since torch 2.4) / ``destroy_process_group() was not called before program exit``,
and c10d's other warnings that say the machinery ran (a renamed ``NCCL_*`` variable read by
ProcessGroupNCCL's constructor, a barrier's guessed device, the DDP reducer's "no unused parameters
found" and "grad strides do not match bucket view strides"): ``warning`` rows.

Extra columns (beyond the schema, kept by :func:`denpex_nb.incident.coerce`): ``ran_for_ms``
(watchdog timeout), ``timeout_ms`` (monitoredBarrier, gloo timeout), ``reported_by`` and ``n_reports``
(DETAIL events: the rank whose message gave this row, preferring the rank itself, and how many
messages in the file named this fingerprint), ``param_names`` / ``param_indices`` (DDP),
``bytes_got`` / ``bytes_expected`` (gloo EnforceNotMet "X vs Y"), ``index`` / ``expected_shape`` /
``got_shape`` (gloo invalid tensor size), ``peer`` (gloo peer gone).
"""

from __future__ import annotations

import re

from ..ops import normalize_op
from ..vocab import ErrorKind, SeqKind, State
from ._text import (
    add_error,
    add_event,
    balanced,
    error_row,
    event_row,
    i32,
    i64,
    parse_dims,
    parse_fingerprint,
    parse_ranks,
    pg_of,
    progress_row,
    update_event,
)
from .base import FileContext, Line, Output, TextReader, register_text_reader
from .hardwrap import cut_at

SOURCE = "c10d"

_WORK_TIMEOUT = re.compile(r"(?:Watchdog caught|Caught) collective operation timeout: WorkNCCL\(")
_BLOCKING = re.compile(r"Work WorkNCCL\(")
_ASYNC = re.compile(r"Collective WorkNCCL\(")
_KV = re.compile(r"(?<!\w)(\w+(?:\(ms\))?)=(\[[^\]]*\]|[^,()]+)")
_RAN_FOR = re.compile(r"ran for (\d+) milliseconds")
_STATUS = re.compile(
    r"(?:Timeout at NCCL work|detected by watchdog at work(?: sequence id)?):? (?P<s>-?\d+),? (?:PG status: )?"
    r"last enqueued (?:NCCL )?work: (?P<e>-?\d+), last completed (?:NCCL )?work: (?P<c>-?\d+)"
)
_TEARDOWN = re.compile(
    r"Some NCCL operations have failed or timed out|(?:Process group|NCCL) watchdog thread terminated with exception"
    r"|NCCL communicator was aborted on rank"
)
_TAKING_DOWN = re.compile(
    r"we are taking the entire process down|Stack trace of the failed collective|^#\d+ \S+ from \S+:\d+"
)
_HEARTBEAT = re.compile(
    r"Heartbeat monitor timed out|watchdog got stuck for|Terminating the process after attempting to dump debug info"
    r"|Received a dump signal due to a collective timeout"
)
_DUMP_FROM = re.compile(r"collective timeout from (?:this local rank|rank (\d+))")
# desync report body (docs/formats.md §3.7)
_DS_TIMEOUT = re.compile(r"- \[(\d+)\] Timeout at collective: (\w+), #(\d+)")
_DS_LAGGING = re.compile(r"ranks \[([\d, ]*)\] are the lagging ranks")
_DS_JOINED = re.compile(r"\[([\d, ]*)\] joined but didn't finish collective #(\d+)")
_DS_FINISHED = re.compile(r"\[([\d, ]*)\] finished collective #(\d+), but didn't join collective #(\d+)")
_DS_SNAP_HDR = re.compile(r"#(\d+) (started|finished) ranks:")
_DS_SNAP = re.compile(r"\[([\d, ]*)\] (started|finished) (\w+)")
_DS_OTHER = re.compile(r"lagging/dead/mismatched ranks|Snapshot of ranks' latest states")
_DS_HEADER = re.compile(r"^\[(?:PG [^\]]*)?Rank \d+\]\s*Rank \d+\s*$")  # the report's first line: "<pg> Rank <r>"
# DETAIL (docs/formats.md §4)
# ProcessGroupWrapper.cpp: "Detected mismatch between collectives on ranks. Rank <me> is running
# collective: <fp>, but Rank <r> is running collective: <fp>.Collectives differ in the following
# aspects: \t Sequence number: 12vs 13  Op type: ALLREDUCEvs BARRIER  Tensor Tensor shapes: ..."
# (older torch: "is running inconsistent collective", no SequenceNumber). Whitespace may be lost
# where a pasted message was re-wrapped, so the pattern tolerates it.
_MISMATCH = re.compile(r"Rank\s*(\d+)\s*is\s*running\s*(?:inconsistent\s*)?collective:\s*CollectiveFingerPrint\(")
_NAMED = re.compile(r"Rank\s*(\d+)\s*is\s*running\b")
_DETAIL_START = re.compile(r"Detected mismatch between|is running (?:inconsistent )?collective")
_DETAIL_TAIL = re.compile(
    r"^\s*(?:Collectives differ in the following aspects|Sequence number:|Op type:"
    r"|Tensor Tensor (?:shapes|dtypes|devices):)"
)
_DETAIL_BREAK = re.compile(
    r"^(?:Traceback \(|During handling|The above exception|terminate called|\s*what\(\):"
    r"|Exception raised from|frame #|\s+File \")"
)
_DETAIL_VOCAB = re.compile(
    r"FingerPrint|is\s*running|but\s*Rank|OpType|SequenceNumber|TensorShape|TensorDtypes"
    r"|TensorDeviceTypes|Collectives differ|Sequence number:|Op type:|Tensor Tensor|Device\("
)
_TAIL_VOCAB = re.compile(r"Sequence number:|Op type:|Tensor Tensor|\dvs |\wvs \w|following aspects")
_DETAIL_MAX_LINES = 24
_RUNNING = re.compile(r"Running collective: CollectiveFingerPrint\(")
_MB = re.compile(r"(?:\[Rank (\d+)\]: )?Ranks? ([\d, ]+) failed to pass monitoredBarrier in (\d+) ms")
_MB_WRAP = re.compile(r"Monitored Barrier encountered error running collective: CollectiveFingerPrint\(")
_RANK_TAG = re.compile(r"\[Rank (\d+)\]")
# DDP reducer (docs/formats.md §5)
#: DDP's unused-parameter error, in its own words and in a framework's (Lightning: "your LightningModule has
#: parameters that were not used in producing the loss returned by training_step"): the same error
_DDP_UNUSED = re.compile(
    r"Expected to have finished reduction in the prior iteration|parameters that were not used in producing (?:the )?loss"
)
#: the later sentences of that error (reducer.cpp's ensure_prior_reduction_finished prints them on lines
#: of their own after its head), each said by no other message: a paste that cut the head still names it
_DDP_UNUSED_TAIL = re.compile(
    r"enable unused parameter detection by passing|outputs participate in c(?:alculating|omputing) loss"
    r"|locate the output tensors in the return value|which particular parameters did not receive gradient"
)
_DDP_NAMES = re.compile(r"Parameters which did not receive grad for rank (\d+): (.*)")
_DDP_IDX = re.compile(r"Parameter indices which did not receive grad for rank (\d+): ([\d ]*)")
_DDP_NOGRAD = re.compile(r"Parameter: (\S+) did not get gradient in backwards pass")  # reducer INFO, debug INFO
_DDP_ERR = re.compile(
    r"Expected to mark a variable ready only once|has been marked as ready twice|DDP expects same model across all ranks"
    r"|appears not to match sizes of the same param|Parameter at index \d+"
)
# gloo (docs/formats.md §6)
_ENFORCE = re.compile(r"enforce fail at [^\]]*gloo[^\]]*\] (.*)")
_VS = re.compile(r"(?<!\d)(\d+) vs (\d+)")  # (?<!\d): linear on a long run of digits
_INVALID = re.compile(
    r"ProcessGroupGloo::(\w+): invalid tensor (size|type) at index (\d+)(?: \(expected \(([^)]*)\), got \(([^)]*)\)\))?"
)
_PEER = re.compile(
    r"Connection reset by peer|Connection closed by peer|Socket closed|Read timeout|Write timeout|Connect timeout"
)
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (\d+)ms for (\w+) operation to complete")
_PEER_ADDR = re.compile(r"\[([\w.:-]+)\]:(\d+)")
# ProcessGroupNCCL's options: "[Rank 3] ProcessGroupNCCL initialized with following options:" then one
# "KEY: value" per line (torch 2.0/2.1), or one line "[PG ID 0 PG GUID 0 Rank 3] ProcessGroupNCCL
# initialization options: size: 8, global rank: 3, TIMEOUT(ms): 600000, ..." (newer)
_PG_OPTIONS = re.compile(r"ProcessGroupNCCL (?:initialized with following options|initialization options|environments)")
_PG_OPTION_LINE = re.compile(
    r"^\s*(?:(?:TORCH_)?NCCL_[A-Z_]+|TIMEOUT\(ms\)|USE_HIGH_PRIORITY_STREAM|TORCH_DISTRIBUTED_DEBUG"
    r"|PG (?:ID|GUID))\s*: ?\S*\s*$"
)
#: more keys of the block, read only right after its header
_PG_OPTION_MORE = re.compile(
    r"^\s*(?:PG (?:Name|Description)|SPLIT_FROM|SPLIT_COLOR|ID|[Ss]ize|global rank|NCCL version)"
    r"\s*[:=] ?\S*\s*$"
)
_PG_SIZE = re.compile(r"\bsize: (\d+), global rank: (\d+)")
_PG_NAME0 = re.compile(r"PG Name: (?:0|default_pg)\b")
_NOT_DESTROYED = re.compile(
    r"process group has NOT been destroyed before (?:it is being destructed|we destruct ProcessGroup)"
    r"|destroy_process_group\(\) was not called before program exit"
)
#: c10d's own warnings that say the machinery ran and nothing failed: ProcessGroupNCCL read a renamed
#: environment variable (its constructor), guessed a barrier's device (a barrier was issued), the DDP
#: reducer found no unused parameter after an iteration, or saw a gradient laid out unlike its bucket
#: (a backward pass ran). Each is a ``warning`` row: distributed evidence, not a failure.
_C10D_BENIGN = re.compile(
    r"Environment variable (?:TORCH_)?NCCL_\w+ is deprecated; use TORCH_NCCL_\w+ instead"
    r"|to perform barrier as devices used by this process are currently unknown"
    r"|find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters"
    r"|Grad strides do not match bucket view strides"
)
_PY_WARNING = re.compile(r"\.py:\d+: \w*Warning: ")  # a Python warning with its source: the python reader's
# aborts
_TERMINATE = re.compile(
    r"terminate called after throwing an instance of '([^']+)'|terminate called without an active exception|terminate called recursively"
)
_WHAT = re.compile(r"^\s*what\(\):\s*(.*)$")
_EXC_PREFIX = re.compile(r"^(?:[\w.]+(?:Error|Exception)\w*: )+")


def _work_fields(text: str, start: int) -> tuple[dict, int]:
    """Parse ``WorkNCCL(k=v, ...)`` whose ``(`` is at ``start``: op, seq, numel and shapes."""
    end = balanced(text, start)
    body = text[start + 1 : end - 1]
    kv = {k: v.strip() for k, v in _KV.findall(body)}
    out: dict = {}
    if "SeqNum" in kv and kv["SeqNum"].lstrip("-").isdigit():
        out["seq"] = i64(kv["SeqNum"])
        out["seq_kind"] = SeqKind.WORK
    if "OpType" in kv:
        out["op"] = normalize_op(kv["OpType"])
    for key, col in (("NumelIn", "numel_in"), ("NumelOut", "numel_out")):
        if key in kv and kv[key].lstrip("-").isdigit():
            out[col] = i64(kv[key])
    if "TensorShape" in kv:
        dims = parse_dims(kv["TensorShape"])
        if dims is not None:
            out["in_shapes"] = (dims,)
    return out, end


def _clean(text: str) -> str:
    """The message without a leading ``RuntimeError: `` (so the glog and Python copies dedup)."""
    return _EXC_PREFIX.sub("", text.strip())


#: how far back a status line looks for the timeout line of its work (the watchdog prints it right after)
_COMPANION_ROWS = 8


def _name_group(out: Output, rank: int | None, seq: int | None, pg: str, desc: str | None) -> None:
    """Give the timeout line of this rank's work its group: torch 2.4+ prints ``[Rank 1] Watchdog caught
    ... WorkNCCL(SeqNum=216, ...)`` without one, and the watchdog's status line for the same work right
    after names it (``[PG ID 11 PG GUID 119 Rank 1] ... at work: 216``). Only the latest rows of the same
    rank and work that name no group are named; without it, timeouts of different groups (two threads,
    two communicators) would read as positions of one counter."""
    if rank is None or seq is None:
        return
    for row in out.errors[-_COMPANION_ROWS:]:
        if (
            row.get("kind") == ErrorKind.WATCHDOG_TIMEOUT
            and row.get("rank") == rank
            and row.get("seq") == seq
            and row.get("pg") is None
        ):
            row["pg"] = pg
    for row in out.events[-_COMPANION_ROWS:]:
        if (
            row.get("state") == State.TIMED_OUT
            and row.get("rank") == rank
            and row.get("seq") == seq
            and row.get("seq_kind") == SeqKind.WORK
            and row.get("pg") is None
        ):
            update_event(out, row, pg=pg, pg_desc=row.get("pg_desc") or desc)


class C10dReader(TextReader):
    name = SOURCE
    blocks_alone = True  # no state across blocks (c10d's DETAIL de-duplication only drops rows)
    needles = (
        b"atchdog",
        b"WorkNCCL",
        b"NCCL work",
        b"NCCL operations",
        b"process down",
        b"eartbeat",
        b"dump signal",
        b"Timeout at collective",
        b"lagging",
        b"collective #",
        b"CollectiveFingerPrint",
        b"monitoredBarrier",
        b"Monitored Barrier",
        b"receive grad",
        b"finished reduction",
        b"marked as ready",
        b"mark a variable ready",
        b"not used in producing",
        b"unused parameter detection",
        b"outputs participate in",
        b"locate the output tensors",
        b"particular parameters did not",
        b"DDP expects",
        b"appears not to match",
        b"gloo",
        b"ProcessGroupGloo",
        b"terminate called",
        # a DETAIL message split over lines: every piece holds one of these or continues an open "("
        b"Detected mismatch",
        b"FingerPrint",
        b"is running",
        b"collective",
        b"but Rank",
        b"SequenceNumber",
        b"OpType=",
        b"TensorShape=",
        b"TensorDtypes",
        b"TensorDeviceTypes",
        b"Device(",
        b"Collectives differ",
        b"aspects",
        b"Sequence number:",
        b"Op type:",
        b"Tensor Tensor",
        b"vs ",
        # ProcessGroupNCCL's options block and its teardown warnings (benign: the machinery ran)
        b"ProcessGroupNCCL initializ",
        b"ProcessGroupNCCL environments",
        b"NCCL_ASYNC_ERROR_HANDLING",
        b"NCCL_BLOCKING_WAIT",
        b"NCCL_DESYNC_DEBUG",
        b"NCCL_ENABLE_TIMING",
        b"TIMEOUT(ms): ",
        b"USE_HIGH_PRIORITY_STREAM",
        b"TORCH_DISTRIBUTED_DEBUG",
        b"NCCL_DEBUG: ",
        b"PG ID: ",
        b"PG GUID: ",
        b"has NOT been destroyed",
        b"destroy_process_group() was not called",
        b"is deprecated; use TORCH_NCCL_",
        b"to perform barrier as devices",
        b"find_unused_parameters=True was specified",
        b"bucket view strides",
    )

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        state = {"ddp": None, "snap_seq": None, ErrorKind.ABORT: None, SeqKind.DETAIL: None, "options": False}
        for line in block:
            if state[SeqKind.DETAIL] is not None:
                if self._detail_more(line, state[SeqKind.DETAIL]):
                    continue
                self._detail_flush(ctx, out, state)
            if _DETAIL_START.search(line.text) or (
                "Detected" in line.text
                and line.text.rstrip().endswith(("Detected", "Detected mismatch", "Detected mismatch between"))
            ):
                state[SeqKind.DETAIL] = {
                    "lines": [line],
                    "text": line.text.strip(),
                    "rank": line.rank,
                    "lens": [len(line.text.strip())],
                }
                continue
            if self._line(line, ctx, out, state):
                out.consume(line)
        if state[SeqKind.DETAIL] is not None:
            self._detail_flush(ctx, out, state)

    # one logical line; True when consumed. Cheap literal tests gate every regex: Python's re
    # has no literal prefilter for alternations, and these lines can be ~700 characters long.
    def _line(self, line: Line, ctx: FileContext, out: Output, st: dict) -> bool:
        text = line.text
        if "what()" in text and (m := _WHAT.match(text)):
            text = m.group(1)
            if st[ErrorKind.ABORT] is not None:  # the what() of the terminate line before it
                abort = st[ErrorKind.ABORT]
                abort["message"] += ": " + text
                st[ErrorKind.ABORT] = None
                if abort.get("rank") is None:  # the process that aborted is the one its message names
                    abort["rank"] = self._rank(line, text)
                # the exception that aborted the process is a record of its own (a watchdog's timeout: the
                # abort, and the launcher's exit -6 after it, are that timeout's consequence)
                if (
                    self._gloo(line, text, ctx, out)
                    or self._teardown(line, text, ctx, out)
                    or ("WorkNCCL" in text and self._timeout(line, text, ctx, out))
                ):
                    return True
                return True
        st[ErrorKind.ABORT] = None
        if "Exception raised from" in text or text.startswith("frame #"):
            return True
        if ("ProcessGroupNCCL" in text or "destroy" in text or ": " in text or "barrier" in text) and self._pg_nccl(
            line, text, ctx, out, st
        ):
            return True
        st["options"] = False
        if "terminate called" in text and _TERMINATE.search(text):
            row = error_row(line, ctx, SOURCE, ErrorKind.ABORT, text.strip(), signal="SIGABRT")
            add_error(out, row)
            st[ErrorKind.ABORT] = row
            return True
        work = "WorkNCCL" in text
        if work and self._timeout(line, text, ctx, out):
            return True
        if ("NCCL work" in text or "detected by watchdog" in text) and self._status(line, text, ctx, out):
            return True
        if (
            "NCCL operations" in text or "thread terminated" in text or "communicator was aborted" in text
        ) and self._teardown(line, text, ctx, out):
            return True
        if ("process down" in text or "Stack trace of the failed" in text or text[:1] == "#") and _TAKING_DOWN.search(
            text
        ):
            return True
        if (
            "eartbeat" in text or "got stuck" in text or "Terminating the process" in text or "dump signal" in text
        ) and self._heartbeat(line, text, ctx, out):
            return True
        if (
            "collective" in text
            or "ranks" in text
            or "] started " in text
            or "] finished " in text
            or _DS_HEADER.match(text.strip())
        ) and self._desync(line, text, ctx, out, st):
            return True
        if (
            "CollectiveFingerPrint" in text or "onitoredBarrier" in text or "onitored Barrier" in text
        ) and self._detail(line, text, ctx, out):
            return True
        if (
            "grad" in text
            or "reduction" in text
            or "ready" in text
            or "DDP" in text
            or "param" in text
            or "Param" in text
            or "output" in text
        ) and self._ddp(line, text, ctx, out, st):
            return True
        if ("gloo" in text or "Gloo" in text or "Timed out waiting" in text) and self._gloo(line, text, ctx, out):
            return True
        if work and _ASYNC.search(text):
            return self._async(line, text, ctx, out)
        return False

    # --- ProcessGroupNCCL ---------------------------------------------------------------------

    def _pg_nccl(self, line: Line, text: str, ctx: FileContext, out: Output, st: dict) -> bool:
        """The options block (consumed; the one-line form's ``size``/``global rank`` of the default
        group give a ``ranks`` row with ``world_size``) and the not-destroyed warnings (``warning``)."""
        if "ProcessGroupNCCL" in text and _PG_OPTIONS.search(text):
            st["options"] = True
            m = _PG_SIZE.search(text)
            if m:
                pg, _desc, _r = pg_of(text)
                default = pg == "0" or bool(_PG_NAME0.search(text))
                out.ranks.append(
                    {
                        "rank": i32(m.group(2)),
                        "world_size": i32(m.group(1)) if default else None,
                        "pid": line.pid,
                        "host": line.host,
                        "source": SOURCE,
                        "file": ctx.file,
                        "line": line.lineno,
                    }
                )
            return True
        if _PG_OPTION_LINE.match(text) or (st["options"] and _PG_OPTION_MORE.match(text)):
            return True  # "NCCL_ASYNC_ERROR_HANDLING: 0" (alone, or in the block after its header)
        if ("destroy" in text and _NOT_DESTROYED.search(text)) or (
            ("deprecated" in text or "barrier" in text or "unused param" in text or "strides" in text)
            and _C10D_BENIGN.search(text)
            and not _PY_WARNING.search(text)
        ):
            add_error(out, error_row(line, ctx, SOURCE, ErrorKind.WARNING, text.strip(), rank=self._rank(line, text)))
            return True
        return False

    def _rank(self, line: Line, text: str) -> int | None:
        """``[rankN]:`` wins; the message's ``[Rank r]`` only when nothing better is known."""
        if line.rank is not None:
            return line.rank
        m = _RANK_TAG.search(text)
        return i32(m.group(1)) if m else None

    def _timeout(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        if "terminated with exception" in text or "communicator was aborted" in text:
            return False  # a teardown line repeating the timeout: see _teardown
        m = _WORK_TIMEOUT.search(text) or (_BLOCKING.search(text) if "timed out in blocking wait" in text else None)
        if not m:
            return False
        fields, _ = _work_fields(text, m.end() - 1)
        pg, desc, _r = pg_of(text[: m.start()])
        rank = self._rank(line, text)
        ran = _RAN_FOR.search(text)
        add_event(out, event_row(line, ctx, SOURCE, rank=rank, pg=pg, pg_desc=desc, state=State.TIMED_OUT, **fields))
        msg = _clean(text)
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.WATCHDOG_TIMEOUT,
                msg,
                rank=rank,
                pg=pg,
                op=fields.get("op"),
                seq=fields.get("seq"),
                seq_kind=fields.get("seq_kind"),
                ran_for_ms=i64(ran.group(1)) if ran else None,
            ),
        )
        return True

    def _status(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        m = _STATUS.search(text)
        if not m:
            return False
        pg, desc, in_group = pg_of(text)
        s, e, c = i64(m.group("s")), i64(m.group("e")), i64(m.group("c"))
        rank = self._rank(line, text)
        out.progress.append(
            progress_row(
                line,
                ctx,
                SOURCE,
                rank=rank,
                pg=pg if pg is not None else "0",
                seq_kind=SeqKind.WORK,
                last_enqueued=e,
                last_completed=c,
            )
        )
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.WATCHDOG_STATUS,
                _clean(text),
                rank=rank,
                pg=pg,
                seq=s,
                seq_kind=SeqKind.WORK,
            ),
        )
        if pg is not None:  # the timeout's ``[Rank k]`` and the prefix's rank are both the one in the group
            _name_group(out, rank if rank is not None else in_group, s, pg, desc)
        return True

    def _teardown(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        m = _TEARDOWN.search(text)
        if not m:
            return False
        fields: dict = {}
        w = _WORK_TIMEOUT.search(text) or _BLOCKING.search(text)
        if w:
            fields, _ = _work_fields(text, w.end() - 1)
        pg, _desc, _r = pg_of(text[: m.start()])
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.WATCHDOG_ABORT,
                _clean(text),
                rank=self._rank(line, text),
                pg=pg,
                op=fields.get("op"),
                seq=fields.get("seq"),
                seq_kind=fields.get("seq_kind"),
            ),
        )
        return True

    def _heartbeat(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        if not _HEARTBEAT.search(text):
            return False
        pg, _desc, _r = pg_of(text)
        related = None
        m = _DUMP_FROM.search(text)
        if m:
            related = (
                (i32(m.group(1)),)
                if m.group(1) and i32(m.group(1)) is not None
                else ((line.rank,) if line.rank is not None else None)
            )
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.HEARTBEAT,
                _clean(text),
                rank=self._rank(line, text),
                pg=pg,
                related_ranks=related,
            ),
        )
        return True

    def _async(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        m = _ASYNC.search(text)
        fields, _ = _work_fields(text, m.end() - 1)
        pg, desc, _r = pg_of(text[: m.start()])
        rank = self._rank(line, text)
        add_event(out, event_row(line, ctx, SOURCE, rank=rank, pg=pg, pg_desc=desc, state=State.FAILED, **fields))
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.NCCL_ERROR,
                _clean(text),
                rank=rank,
                pg=pg,
                op=fields.get("op"),
                seq=fields.get("seq"),
                seq_kind=fields.get("seq_kind"),
            ),
        )
        return True

    def _desync(self, line: Line, text: str, ctx: FileContext, out: Output, st: dict) -> bool:
        m = _DS_TIMEOUT.search(text)
        if m:
            r, op, seq = i32(m.group(1)), normalize_op(m.group(2)), i64(m.group(3))
            rank = line.rank if line.rank is not None else r
            add_event(
                out,
                event_row(line, ctx, SOURCE, rank=rank, op=op, seq=seq, seq_kind=SeqKind.DESYNC, state=State.TIMED_OUT),
            )
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.DESYNC_REPORT,
                    text.strip(),
                    rank=rank,
                    op=op,
                    seq=seq,
                    seq_kind=SeqKind.DESYNC,
                ),
            )
            return True
        m = _DS_LAGGING.search(text)
        if m:
            add_error(
                out,
                error_row(
                    line, ctx, SOURCE, ErrorKind.DESYNC_REPORT, text.strip(), related_ranks=parse_ranks(m.group(1))
                ),
            )
            return True
        m = _DS_JOINED.search(text)
        if m:
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.DESYNC_REPORT,
                    text.strip(),
                    seq=i64(m.group(2)),
                    seq_kind=SeqKind.DESYNC,
                    related_ranks=parse_ranks(m.group(1)),
                ),
            )
            return True
        m = _DS_FINISHED.search(text)
        if m:
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.DESYNC_REPORT,
                    text.strip(),
                    seq=i64(m.group(3)),
                    seq_kind=SeqKind.DESYNC,
                    related_ranks=parse_ranks(m.group(1)),
                ),
            )
            return True
        m = _DS_SNAP_HDR.search(text)
        if m:
            st["snap_seq"] = i64(m.group(1))
            return True
        m = _DS_SNAP.search(text)
        if m and st["snap_seq"] is not None:
            op = normalize_op(m.group(3))
            state = State.STARTED if m.group(2) == State.STARTED else State.COMPLETED
            for r in parse_ranks(m.group(1)):
                add_event(
                    out,
                    event_row(
                        line, ctx, SOURCE, rank=r, op=op, seq=st["snap_seq"], seq_kind=SeqKind.DESYNC, state=state
                    ),
                )
            return True
        return bool(_DS_OTHER.search(text) or _DS_HEADER.match(text.strip()))

    # --- DETAIL -------------------------------------------------------------------------------

    @staticmethod
    def _detail_complete(text: str) -> bool:
        """Both ranks' fingerprints present, the second one's parentheses closed."""
        fps = list(_MISMATCH.finditer(text))
        return (
            len(fps) >= 2
            and balanced(text, fps[-1].end() - 1) < len(text)
            or (len(fps) >= 2 and text.rstrip().endswith(")"))
        )

    def _detail_more(self, line: Line, d: dict) -> bool:
        """Take ``line`` into the pending DETAIL message ``d`` (a message split over lines, or its
        ``Collectives differ`` tail); False when the line is not part of it.

        A piece belongs to the message when it carries the message's vocabulary, when the text so
        far leaves a parenthesis open, or when the previous piece was cut by a wrap: as long as the
        longest piece (a fixed-width cut) or too long for the piece's first word to fit (a word wrap).
        """
        text = line.text
        piece = text.strip()
        if not piece or (d["rank"] is not None and line.rank is not None and line.rank != d["rank"]):
            return False
        if len(d["lines"]) >= _DETAIL_MAX_LINES or _DETAIL_BREAK.match(text):
            return False
        vocab = bool(_DETAIL_VOCAB.search(piece))
        if line.severity is not None and not vocab:
            return False  # a new log record
        lens = d["lens"]
        wrapped = cut_at(lens) or (len(lens) >= 2 and lens[-1] + 1 + len(piece.split(" ", 1)[0]) > max(lens))
        if self._detail_complete(d["text"]):
            if "Detected mismatch" in piece or _MISMATCH.search(piece):
                return False  # the next message
            tail_started = "Collectives differ" in d["text"]
            cut = wrapped and not d["text"].endswith((".", ")"))  # the last piece stopped mid-word
            if not (_DETAIL_TAIL.match(text) or cut or (tail_started and _TAIL_VOCAB.search(piece))):
                return False
        elif not (vocab or wrapped or len(lens) == 1 or d["text"].count("(") > d["text"].count(")")):
            return False
        # a cut mid-token joins verbatim (the patterns tolerate a lost space); after a sentence, a space
        d["text"] += (" " if d["text"].endswith((".", ",", ":")) or _DETAIL_TAIL.match(text) else "") + piece
        d["lines"].append(line)
        lens.append(len(piece))
        return True

    def _detail_flush(self, ctx: FileContext, out: Output, st: dict) -> None:
        d, st[SeqKind.DETAIL] = st[SeqKind.DETAIL], None
        first: Line = d["lines"][0]
        joined = Line(
            lineno=first.lineno,
            text=d["text"],
            raw=first.raw,
            rank=first.rank,
            local_rank=first.local_rank,
            host=first.host,
            pid=first.pid,
            t_wall=first.t_wall,
            severity=first.severity,
            origin=first.origin,
            prefixes=first.prefixes,
        )
        if self._detail(joined, d["text"], ctx, out) or self._line(joined, ctx, out, st):
            for ln in d["lines"]:
                out.consume(ln)
            return
        # not a DETAIL message after all: offer the lines one by one
        for ln in d["lines"]:
            if self._line(ln, ctx, out, st):
                out.consume(ln)

    def _detail(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        found = [m for m in _MISMATCH.finditer(text) if i32(m.group(1)) is not None]
        if found:
            fps = []
            for m in found:
                end = balanced(text, m.end() - 1)
                fps.append((i32(m.group(1)), parse_fingerprint("CollectiveFingerPrint(" + text[m.end() : end])))
            own_rank = line.rank if line.rank is not None else fps[0][0]
            named = {r for r in (i32(x) for x in _NAMED.findall(text)) if r is not None}
            seen = out.__dict__.setdefault("_detail_events", {})
            for r, fp in fps:
                fp.pop("op_raw", None)
                # every rank's message names a peer's fingerprint too: one row per (rank, fingerprint)
                # in a file, counting the reports and preferring the rank's own line
                key = (r, fp.get("seq"), fp.get("op"), fp.get("in_shapes"), fp.get("dtype"))
                row = seen.get(key)
                if row is None:
                    row = seen[key] = event_row(
                        line,
                        ctx,
                        SOURCE,
                        rank=r,
                        seq_kind=SeqKind.DETAIL,
                        state=State.FAILED,
                        reported_by=own_rank,
                        n_reports=1,
                        **fp,
                    )
                    out.events.append(row)
                    continue
                row["n_reports"] += 1
                if r == own_rank and row["reported_by"] != r:
                    row.update(reported_by=r, line=line.lineno, t_wall=line.t_wall)
            first = fps[0][1]
            # every rank the message names, the reporting rank included: the pair that differs
            related = tuple(sorted(named | {r for r, _ in fps}))
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.DETAIL_MISMATCH,
                    _clean(text),
                    rank=own_rank,
                    op=first.get("op"),
                    seq=first.get("seq"),
                    seq_kind=SeqKind.DETAIL,
                    related_ranks=related,
                ),
            )
            return True
        m = _MB_WRAP.search(text)
        if m:
            end = balanced(text, m.end() - 1)
            fp = parse_fingerprint(text[m.end() - len("CollectiveFingerPrint(") : end])
            fp.pop("op_raw", None)
            rank = self._rank(line, text)
            out.events.append(
                event_row(line, ctx, SOURCE, rank=rank, seq_kind=SeqKind.DETAIL, state=State.FAILED, **fp)
            )
            mb = _MB.search(text)
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.MONITORED_BARRIER,
                    _clean(text),
                    rank=rank,
                    op=fp.get("op"),
                    seq=fp.get("seq"),
                    seq_kind=SeqKind.DETAIL,
                    related_ranks=parse_ranks(mb.group(2)) if mb else None,
                ),
            )
            return True
        m = _MB.search(text)
        if m:
            rank = line.rank if line.rank is not None else (i32(m.group(1)) if m.group(1) else None)
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.MONITORED_BARRIER,
                    _clean(text),
                    rank=rank,
                    related_ranks=parse_ranks(m.group(2)),
                    timeout_ms=i64(m.group(3)),
                ),
            )
            return True
        m = _RUNNING.search(text)
        if m:
            end = balanced(text, m.end() - 1)
            fp = parse_fingerprint(text[m.end() - len("CollectiveFingerPrint(") : end])
            fp.pop("op_raw", None)
            out.events.append(
                event_row(
                    line, ctx, SOURCE, rank=self._rank(line, text), seq_kind=SeqKind.DETAIL, state=State.SCHEDULED, **fp
                )
            )
            return True
        return False

    # --- DDP reducer ----------------------------------------------------------------------------

    def _ddp(self, line: Line, text: str, ctx: FileContext, out: Output, st: dict) -> bool:
        m = _DDP_NOGRAD.search(text)
        if m:  # one row per run of these INFO lines of a rank, listing the parameters
            rank = self._rank(line, text)
            row = st.get("nograd")
            if row is None or row["rank"] != rank:
                row = st["nograd"] = error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.DDP_UNUSED_PARAMETERS,
                    f"Parameters that did not get gradient on rank {rank}: ",
                    rank=rank,
                    param_names=(),
                )
                out.errors.append(row)
            row["param_names"] = row["param_names"] + (m.group(1),)
            row["message"] = row["message"].split(": ", 1)[0] + ": " + ", ".join(row["param_names"])
            return True
        if _DDP_UNUSED.search(text):
            row = error_row(line, ctx, SOURCE, ErrorKind.DDP_UNUSED_PARAMETERS, _clean(text))
            add_error(out, row)
            st["ddp"] = row
            return True
        if _DDP_UNUSED_TAIL.search(text):
            rank, row = self._rank(line, text), st["ddp"]
            if row is None or (rank is not None and row["rank"] is not None and row["rank"] != rank):
                row = error_row(line, ctx, SOURCE, ErrorKind.DDP_UNUSED_PARAMETERS, _clean(text), rank=rank)
                add_error(out, row)
                st["ddp"] = row
            return True  # else a later sentence of the error the open row holds
        m = _DDP_NAMES.search(text) or _DDP_IDX.search(text)
        if m:
            r = i32(m.group(1))
            row = st["ddp"]
            if row is not None and (row["rank"] is None or row["rank"] == r):
                row["message"] += "\n" + text.strip()
                if row["rank"] is None:
                    row["rank"] = r
            else:
                row = error_row(line, ctx, SOURCE, ErrorKind.DDP_UNUSED_PARAMETERS, text.strip())
                row["rank"] = r if line.rank is None else line.rank
                add_error(out, row)
                st["ddp"] = row
            key = "param_names" if "Parameters which" in m.group(0) else "param_indices"
            vals = m.group(2).strip()
            row[key] = (
                tuple(v for v in map(i64, vals.split()) if v is not None)
                if key == "param_indices"
                else tuple(x.strip() for x in vals.strip("[]").split(",") if x.strip())
            )
            return True
        if _DDP_ERR.search(text):
            add_error(out, error_row(line, ctx, SOURCE, ErrorKind.DDP_ERROR, _clean(text)))
            return True
        return False

    # --- gloo -----------------------------------------------------------------------------------

    def _gloo(self, line: Line, text: str, ctx: FileContext, out: Output) -> bool:
        m = _ENFORCE.search(text)
        if m:
            vs = _VS.search(m.group(1))
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.GLOO_ENFORCE,
                    _clean(text),
                    signal="SIGABRT",
                    bytes_got=i64(vs.group(1)) if vs else None,
                    bytes_expected=i64(vs.group(2)) if vs else None,
                ),
            )
            return True
        m = _INVALID.search(text)
        if m:
            exp = parse_dims(m.group(4)) if m.group(4) is not None else None
            got = parse_dims(m.group(5)) if m.group(5) is not None else None
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.GLOO_INVALID_SIZE,
                    _clean(text),
                    op=normalize_op(m.group(1)),
                    index=i32(m.group(3)),
                    expected_shape=exp,
                    got_shape=got,
                ),
            )
            return True
        m = _GLOO_TIMEOUT.search(text)
        if m:
            add_error(
                out, error_row(line, ctx, SOURCE, ErrorKind.GLOO_TIMEOUT, _clean(text), timeout_ms=i64(m.group(1)))
            )
            return True
        if "gloo" in text and _PEER.search(text):
            a = _PEER_ADDR.search(text)
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.GLOO_PEER_GONE,
                    _clean(text),
                    peer=f"{a.group(1)}:{a.group(2)}" if a else None,
                ),
            )
            return True
        return False


register_text_reader(C10dReader())

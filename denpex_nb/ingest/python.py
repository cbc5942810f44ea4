"""Python-side evidence: tracebacks (attached to their rank), OOM, the torchrun agent's lines and
ChildFailedError table, ``mp.spawn`` exceptions, Lightning's rank banner and deprecation
warnings for collectives (log-formats.md §7).

Tracebacks of several ranks interleave in a torchrun stream, so records are kept per rank while
a block is read; each finished traceback becomes one ``exception`` row (``oom`` when it is an
out-of-memory error) whose message is the final exception line plus its continuation lines.

A traceback that passes through a ``torch.distributed`` collective is collective evidence: its
row's ``op`` is the canonical op of the last collective call in it (the innermost frame in
``torch/distributed/distributed_c10d.py`` / ``c10d_logger.py`` whose function is a collective,
else a ``dist.<op>(`` / ``torch.distributed.<op>(`` source line), and ``collective_call`` holds
the call's text (the user's source line, e.g. ``dist.broadcast(t, src=0)``).

Extra columns: ``exc_type``, ``n_traceback_lines``, ``collective_call``, ``call_site`` (innermost
frame outside site-packages: where the failing call was made), ``device`` (OOM), ``local_rank`` and ``pid``
(agent lines, ChildFailedError rows), ``host``, ``root_cause``, ``error_file`` (ChildFailedError),
``spawn_index`` (mp.spawn). Agent lines name only a *local* rank, so their ``rank`` stays empty;
the loader joins them to global ranks through the pid.
"""
from __future__ import annotations

import re
from datetime import datetime

from ..ops import normalize_op
from ._text import add_error, error_row, i32, i64, signal_name
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "python"

_TB_START = re.compile(r"^Traceback \(most recent call last\):")
_CHAIN = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_FRAME = re.compile(r"^\s")
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
_EXC_NAMED = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\w*): ?(?P<msg>.*)$")
_OOM = re.compile(r"out of memory|OutOfMemoryError|can't allocate memory", re.I)
_GPU = re.compile(r"\bGPU (\d+)")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\) of binary: (.*)$")
_CLOSING = re.compile(r"Sending process (\d+) closing signal (SIG\w+)")
_SPAWN_TERM = re.compile(r"Terminating process (\d+) via signal (SIG\w+)")
_SPAWN_EXITED = re.compile(r"ProcessExitedException: process (\d+) terminated with (?:signal (SIG\w+)|exit code (-?\d+))")
_SPAWN_RAISED = re.compile(r"ProcessRaisedException:")
_SPAWN_PROC = re.compile(r"^-- Process (\d+) terminated with the following error:")
_CFE = re.compile(r"ChildFailedError:")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*: ?(.*)$")
_CFE_RANK = re.compile(r"(-?\d+) \(local_rank: (\d+)\)")
_CFE_EXIT = re.compile(r"(-?\d+) \(pid: (\d+)\)(?:\s+\((SIG\w+)\))?")
_CFE_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)")
_ROOT = re.compile(r"^Root Cause \(first observed failure\):")
_TABLE_MISC = re.compile(r"^(?:Failures:|\s*<NO_OTHER_FAILURES>)\s*$")
_RULE = re.compile(r"^\s*(?:={10,}|-{10,})\s*$")
_ENTRY_FAILED = re.compile(r"^\S+ FAILED\s*$")
_INDEX = re.compile(r"^\[\d+\]:\s*$")
_LIGHTNING = re.compile(r"Initializing distributed: GLOBAL_RANK: (\d+), MEMBER: (\d+)/(\d+)")
_FUTURE = re.compile(r"(?:FutureWarning|UserWarning): .*?`?torch\.distributed\.(\w+)`? is deprecated")
_WARN_LOC = re.compile(r"^\s+warnings\.warn\(|^\s+return func\(|^\s+\w+\(")
_NEW_RECORD = re.compile(r"^(?:Traceback \(|During handling|The above exception|terminate called|\s*what\(\):|=+$|-+$)")
_MAX_MSG_LINES = 30
_FRAME_AT = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
_LIBRARY = re.compile(
    r"[/\\](?:site-packages|dist-packages|lib/python\d[\d.]*)[/\\]|^<frozen "
    r"|[/\\]torch[/\\](?:distributed|nn|multiprocessing|utils|autograd|_dynamo|_tensor\.py)"
    r"|[/\\]denpex_nb[/\\]trace\.py$"          # the opt-in tracer wraps every collective
)


_C10D_FILE = re.compile(r"[/\\]torch[/\\]distributed[/\\](?:distributed_c10d|c10d_logger)\.py$")
_DIST_CALL = re.compile(r"(?:^|[^\w.])((?:torch\.distributed|dist|c10d|[A-Za-z_]\w*)\.(\w+))\s*\(")
_MARKERS = re.compile(r"^\s*[~^]+\s*$")
_P2P_ASYNC = {"isend": "send", "irecv": "recv"}


def _op_of(name: str) -> str | None:
    """A torch.distributed function name as a canonical op, or None when it is no collective."""
    op = _P2P_ASYNC.get(name) or normalize_op(name)
    return op if op not in (None, "unknown", "coalesced") else None


def _call_op(name: str) -> str | None:
    """Like :func:`_op_of` for a user's call, which may be an object or multi-GPU variant
    (``all_gather_object``, ``broadcast_object_list``): the collective underneath."""
    op = _op_of(name)
    if op is None:
        for suffix in ("_object_list", "_object", "_multigpu"):
            if name.endswith(suffix):
                return _op_of(name[: -len(suffix)])
    return op


def _frames(lines: list[Line]) -> list[tuple[str, str, str | None]]:
    """(path, function, source line or None) per traceback frame, outermost first."""
    out: list[tuple[str, str, str | None]] = []
    for ln in lines:
        m = _FRAME_AT.match(ln.text)
        if m:
            out.append((m.group(1), m.group(3), None))
        elif out and out[-1][2] is None and ln.text.strip() and not _MARKERS.match(ln.text) \
                and ln.text[:1].isspace():
            path, func, _ = out[-1]
            out[-1] = (path, func, ln.text.strip())
    return out


def collective_of(lines: list[Line]) -> tuple[str | None, str | None]:
    """(canonical op, call text) of the last collective call a traceback passes through.

    The op comes from the innermost frame in ``torch/distributed/distributed_c10d.py`` (or
    ``c10d_logger.py``) whose function is a collective; the call text is the innermost source
    line above it that calls a collective (the user's ``dist.broadcast(t, 0)``), else that frame's
    own source line. Without torch frames (a cut traceback), a source line calling
    ``dist.<op>(`` / ``torch.distributed.<op>(`` gives both."""
    frames = _frames(lines)
    inner = None
    for i, (path, func, _src) in enumerate(frames):
        if _C10D_FILE.search(path) and _op_of(func):
            inner = i
    if inner is not None:
        op = _op_of(frames[inner][1])
        for path, _func, src in reversed(frames[:inner]):
            if src and not _C10D_FILE.search(path):
                for m in reversed(list(_DIST_CALL.finditer(src))):
                    if _call_op(m.group(2)):
                        return op, src
        return op, frames[inner][2] or frames[inner][1]
    for _path, _func, src in reversed(frames):
        for m in reversed(list(_DIST_CALL.finditer(src or ""))):
            if m.group(1).startswith(("dist.", "torch.distributed.", "c10d.")) and _call_op(m.group(2)):
                return _call_op(m.group(2)), src
    return None, None


def call_site(lines: list[Line]) -> str | None:
    """``path:line in func`` of the innermost traceback frame in user code (not a library):
    where the failing collective was called from, the place a fix goes."""
    site = None
    for ln in lines:
        m = _FRAME_AT.match(ln.text)
        if m and not _LIBRARY.search(m.group(1)):
            site = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
    return site


class _Record:
    """One traceback being read: its rank, its lines and (once seen) its exception line."""

    __slots__ = ("first", "lines", "exc", "msg_lines", "rank", "spawn")

    def __init__(self, first: Line, rank: int | None, spawn: int | None):
        self.first, self.lines, self.exc, self.msg_lines = first, [first], None, []
        self.rank, self.spawn = rank, spawn


class PythonReader(TextReader):
    name = SOURCE
    needles = (b"Traceback", b"Error:", b"Exception", b"out of memory", b"exitcode", b"closing signal",
               b"local_rank", b"Root Cause", b" FAILED", b"      : ", b"terminated with", b"via signal",
               b"FutureWarning", b"GLOBAL_RANK", b"Failures:", b"==========")
    # "==========" closes the Root Cause row of a ChildFailedError table (see _table); the "-" rules
    # are not needles: progress bars and separators would make too many ordinary lines candidates

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        st = {"open": {}, "spawn": None, "root": False, "cfe": None, "last": None, "table": False}
        for line in block:
            self._line(line, ctx, out, st)
        for rec in list(st["open"].values()):
            self._finish(rec, ctx, out, st)
        self._finish_cfe(st, ctx, out)

    # --- dispatch -------------------------------------------------------------------------------

    def _line(self, line: Line, ctx: FileContext, out: Output, st: dict) -> None:
        text = line.text
        key = line.rank
        rec = st["open"].get(key)
        if rec is None and key is not None and None in st["open"] and "rank" not in line.prefixes:
            rec, key = st["open"][None], None
        if rec is not None:
            if self._in_traceback(rec, line, text, ctx, out, st):
                return
            rec = None                      # it ended before this line
        if _TB_START.match(text):
            old = st["open"].get(line.rank)
            if old is not None:
                self._finish(old, ctx, out, st)
            rank = line.rank if line.rank is not None else st["spawn"]
            st["open"][line.rank] = _Record(line, rank, st["spawn"])
            out.consume(line)
            return
        if _CHAIN.match(text):
            out.consume(line)
            return
        if self._table(line, text, ctx, out, st):
            out.consume(line)
            return
        if self._agent(line, text, ctx, out, st):
            out.consume(line)
            return
        m = _SPAWN_PROC.match(text)
        if m:
            # mp.spawn's child caught an exception, sent its traceback to the parent and exited 1
            idx = st["spawn"] = i32(m.group(1))
            add_error(out, error_row(line, ctx, SOURCE, "exit", f"ProcessRaisedException: {text.strip()}",
                                        rank=idx, exit_code=1, spawn_index=idx))
            out.consume(line)
            return
        m = _LIGHTNING.search(text) if "GLOBAL_RANK" in text else None
        if m:
            r = i32(m.group(1))
            out.ranks.append({"rank": r, "host": line.host, "pid": line.pid, "world_size": i32(m.group(3)),
                              "source": SOURCE, "file": ctx.file, "line": line.lineno})
            out.consume(line)
            return
        m = _FUTURE.search(text) if "deprecated" in text else None
        if m:
            add_error(out, error_row(line, ctx, SOURCE, "warning", text.strip(), op=normalize_op(m.group(1))))
            out.consume(line)
            st["last"] = "warning"
            return
        if st["last"] == "warning" and _WARN_LOC.match(text):
            out.consume(line)
            return
        st["last"] = None
        m = _EXC_NAMED.match(text) if ":" in text else None
        if m and "ChildFailedError" not in text:     # an exception line without its traceback (e.g. cut off)
            self._exception(line, ctx, out, m.group("type"), text.strip(), line.rank)
            out.consume(line)

    # --- tracebacks -----------------------------------------------------------------------------

    def _in_traceback(self, rec: _Record, line: Line, text: str, ctx, out, st) -> bool:
        """Feed a line to an open traceback; False when the line is not part of it."""
        if rec.exc is None:
            if _FRAME.match(text) or not text:
                rec.lines.append(line)
                out.consume(line)
                return True
            if _TB_START.match(text) or _CHAIN.match(text):
                self._finish(rec, ctx, out, st)
                return False
            if line.severity is not None:
                return False        # a log line of the same process cut in: the traceback stays open
            m = _EXC.match(text.strip())
            rec.exc = text.strip() if m else text.strip()
            rec.lines.append(line)
            out.consume(line)
            if _CFE.search(text) or _SPAWN_RAISED.search(text) or _SPAWN_EXITED.search(text):
                st["table"] = st["table"] or bool(_CFE.search(text))
                self._finish(rec, ctx, out, st)
                self._agent(line, text, ctx, out, st)   # the spawn/agent exception has its own rows
            return True
        # message continuation lines: same rank, not a new record, not a table
        if (_NEW_RECORD.match(text) or _FIELD.match(text) or _ROOT.match(text) or _SPAWN_PROC.match(text)
                or _EXC_NAMED.match(text) or len(rec.msg_lines) >= _MAX_MSG_LINES or line.severity is not None):
            self._finish(rec, ctx, out, st)
            return False
        rec.msg_lines.append(text.strip())
        rec.lines.append(line)
        out.consume(line)
        return True

    def _finish(self, rec: _Record, ctx: FileContext, out: Output, st: dict | None = None) -> None:
        opened = st["open"] if st is not None else None
        if opened is not None:
            for k, v in list(opened.items()):
                if v is rec:
                    del opened[k]
        if rec.exc is None:
            last = rec.lines[-1].text.strip() if len(rec.lines) > 1 else ""
            msg = f"traceback without its exception line (last: {last})" if last else "traceback without its exception line"
            op, call = collective_of(rec.lines)
            add_error(out, error_row(rec.first, ctx, SOURCE, "exception", msg, rank=rec.rank,
                                        n_traceback_lines=len(rec.lines), op=op, collective_call=call))
            return
        if _CFE.search(rec.exc) or _SPAWN_RAISED.search(rec.exc) or _SPAWN_EXITED.search(rec.exc):
            return                      # the agent/spawn rows describe these; no generic exception row
        msg = rec.exc
        body = [m for m in rec.msg_lines if m]
        if body:
            msg += "\n" + "\n".join(body)
        m = _EXC.match(rec.exc)
        op, call = collective_of(rec.lines)
        self._exception(rec.first, ctx, out, m.group("type") if m else None, msg, rec.rank,
                        n_traceback_lines=len(rec.lines), t_wall=rec.first.t_wall, call_site=call_site(rec.lines),
                        op=op, collective_call=call)

    def _exception(self, line: Line, ctx, out, exc_type, msg, rank, **extra) -> None:
        kind = "oom" if _OOM.search(msg) else "exception"
        row = error_row(line, ctx, SOURCE, kind, msg, rank=rank, exc_type=exc_type, **extra)
        if kind == "oom":
            g = _GPU.search(msg)
            row["device"] = f"cuda:{g.group(1)}" if g else None
        add_error(out, row)

    # --- torchrun agent and spawn -------------------------------------------------------------

    def _agent(self, line: Line, text: str, ctx, out, st) -> bool:
        if not ("exitcode" in text or "signal" in text or "Process" in text):
            return False
        m = _AGENT_FAILED.search(text)
        if m:
            code, lr, pid = i32(m.group(1)), i32(m.group(2)), i64(m.group(3))
            add_error(out, error_row(line, ctx, SOURCE, "agent", text.strip(), rank=None, exit_code=code,
                                        signal=signal_name(code), local_rank=lr, pid=pid))
            out.ranks.append({"rank": None, "local_rank": lr, "pid": pid, "exit_code": code, "signal": signal_name(code),
                              "host": line.host, "source": SOURCE, "file": ctx.file, "line": line.lineno})
            return True
        m = _CLOSING.search(text) or _SPAWN_TERM.search(text)
        if m:
            add_error(out, error_row(line, ctx, SOURCE, "agent", text.strip(), rank=None, signal=m.group(2),
                                        pid=i64(m.group(1))))
            return True
        m = _SPAWN_EXITED.search(text)
        if m:
            idx = i32(m.group(1))
            if m.group(2):
                add_error(out, error_row(line, ctx, SOURCE, "signal", text.strip(), rank=idx, signal=m.group(2),
                                            spawn_index=idx))
            else:
                code = i32(m.group(3))
                add_error(out, error_row(line, ctx, SOURCE, "exit", text.strip(), rank=idx, exit_code=code,
                                            signal=signal_name(code), spawn_index=idx))
            return True
        if _SPAWN_RAISED.search(text):
            st["spawn_raised"] = line
            return True
        return False

    # --- ChildFailedError table ---------------------------------------------------------------

    def _table(self, line: Line, text: str, ctx, out, st) -> bool:
        """ChildFailedError table lines. A record closed by the ``=`` border is the Root Cause one
        (failures end with a ``-`` rule), so the flag survives the table being split into blocks."""
        if "ChildFailedError" in text:
            self._finish_cfe(st, ctx, out)
            st["table"] = True
            return True
        if _ROOT.match(text):
            self._finish_cfe(st, ctx, out)
            st["root"] = st["table"] = True
            return True
        m = _FIELD.match(text)
        if m:
            name, value = m.group(1), m.group(2).strip()
            cur = st["cfe"]
            if name == "time" or cur is None or name in cur:
                self._finish_cfe(st, ctx, out)
                cur = st["cfe"] = {"_line": line, "_root": st["root"], "_tb": []}
                st["root"] = False
            cur[name] = value
            st["table"] = True
            return True
        if st["cfe"] is not None and "traceback" in st["cfe"] and text[:1].isspace() and text.strip():
            st["cfe"]["_tb"].append(text.strip())       # @record: the traceback row runs on
            return True
        if _RULE.match(text):
            if st["cfe"] is not None:
                if text.lstrip().startswith("="):
                    st["cfe"]["_root"] = True
                self._finish_cfe(st, ctx, out)
                return True
            return st["table"]
        if _TABLE_MISC.match(text):
            return True
        if _ENTRY_FAILED.match(text) or _INDEX.match(text):
            if st["table"]:
                self._finish_cfe(st, ctx, out)
            return st["table"]
        return False

    def _finish_cfe(self, st: dict, ctx: FileContext, out: Output) -> None:
        cur, st["cfe"] = st["cfe"], None
        if not cur:
            return
        line: Line = cur["_line"]
        rank = local = pid = code = None
        sig = None
        m = _CFE_RANK.search(cur.get("rank", ""))
        if m:
            rank, local = i32(m.group(1)), i32(m.group(2))
        elif cur.get("rank", "").lstrip("-").isdigit():
            rank = i32(cur["rank"])
        m = _CFE_EXIT.search(cur.get("exitcode", ""))
        if m:
            code, pid, sig = i32(m.group(1)), i64(m.group(2)), m.group(3)
        sig = sig or signal_name(code)
        t = None
        m = _CFE_TIME.search(cur.get("time", ""))
        if m:
            try:
                from .prefixes import _local_to_utc   # same tz rule as every header

                t = _local_to_utc(datetime(*(int(x) for x in m.groups())), ctx)
            except ValueError:
                t = None
        host = cur.get("host") or None
        tb = cur.get("traceback", "")
        if cur["_tb"]:
            tb = (tb + "\n" + "\n".join(cur["_tb"])).strip()
        parts = [f"rank {rank} (local_rank {local})" if rank is not None else "rank ?",
                 f"exitcode {code}" + (f" ({sig})" if sig else ""), f"pid {pid}", f"host {host}"]
        if cur["_root"]:
            parts.insert(0, "Root Cause (first observed failure)")
        msg = "; ".join(parts) + (f"; traceback: {tb}" if tb else "")
        add_error(out, error_row(line, ctx, SOURCE, "child_failed", msg, rank=rank, t_wall=t, exit_code=code,
                                    signal=sig, host=host, local_rank=local, pid=pid, root_cause=bool(cur["_root"]),
                                    error_file=cur.get("error_file")))
        out.ranks.append({"rank": rank, "host": host, "pid": pid, "local_rank": local, "exit_code": code,
                          "signal": sig, "first_error_t": t, "source": SOURCE, "file": ctx.file, "line": line.lineno})


register_text_reader(PythonReader())


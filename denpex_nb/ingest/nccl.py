"""NCCL_DEBUG output: Init lines (comm -> rank), COLL lines, WARN lines, error traces, RAS reports,
the ``DistBackendError: NCCL error in: ...`` trail PyTorch raises (docs/formats.md#nccl) and NCCL
errors raised outside torch (vLLM's pynccl ``RuntimeError: NCCL error: unhandled cuda error``).

Error traces: for a call that returned a non-zero ``ncclResult_t``, NCCLCHECK prints one INFO
line per stack level, innermost first (``init.cc:903 -> 5``, ``proxy.cc:878 -> 6 [Progress
Thread]``). Each burst of one process (host:pid; any other line of that process ends it) is ONE
``nccl_error`` row: the message names the result (``ncclInvalidUsage (5: invalid usage)``) and the
innermost location; ``rank`` as below. WARN lines stay ``nccl_warn`` rows (the diagnosis decides
whether one reports a failure). A Python-side ``NCCL error: <ncclGetErrorString>`` or an
``ncclSystemError``-style name (behind an exception name too) is an ``nccl_error`` row with
``nccl_result``; indented traceback source lines are not.

COLL lines are the only per-op record NCCL keeps, printed at host enqueue, so a hung rank's last
COLL line is what it enqueued. They carry a communicator *pointer* (process-local, reused after
Destroy) that only the Init line maps to a rank and a commId. The reader keeps that map inside
one ``parse`` call; for whole NCCL_DEBUG_FILE files the loader uses :func:`pid_rank_map`.

Each COLL line gives two ``events`` rows, one per counter: ``seq_kind="nccl_opcount"`` (``seq`` =
opCount, per communicator, rises per launched plan, may stay 0: a consistency check) and
``seq_kind="nccl_position"`` (``seq`` = 1-based ordinal of the line per pid and communicator in
file order: the key that aligns ranks). Both carry the commId (else the pointer) in ``pg``.

COLL lines (NCCL ``src/enqueue.cc``; RCCL adds ``task N globalrank R``): ``opCount`` is printed
in HEX (``opCount 1a`` = 26); ``count``/``datatype`` become ``numel_in``/``numel_out`` (count is
per rank: times nranks for the gathered output / scattered input) and ``dtype``; ``[nranks=N]``
is ``world_size``; the communicator (commId from its Init line, else the pointer) is ``pg``.

Rank: ``[rankN]:`` or the file's rank (name, ``grep -H`` name) first; else the world Init line
(``comm 0x.. rank R nranks N cudaDev D ... - Init COMPLETE`` with the largest ``nranks`` seen)
of the same ``host:pid``, which attributes every later line of that process; else RCCL's
``globalrank``. The ``[d]`` bracket of the prefix is a local CUDA device, never a rank; a line
whose rank stays unknown keeps ``rank`` empty but still names ``host`` and ``pid``.

Extra columns: events ``host``, ``pid``, ``device`` (``cuda:<d>``), ``comm`` (pointer),
``comm_rank`` (rank inside that communicator), ``redop``, ``nccl_position`` and ``nccl_opcount``
(both counters on both rows); errors ``host``, ``pid``, ``tid`` (the thread of NCCL's prefix, on
WARN and trace rows), ``device``, ``origin`` (NCCL source
file:line; for traces the innermost location), ``nccl_result`` (the ncclResult_t name, also for
torch's and pynccl's messages), ``nccl_code`` (its number, traces), ``nccl_trace`` (the burst's
locations, newline-joined), ``last_warn`` (the process's last WARN text before the burst),
``nccl_version``, ``ras_status``; ranks ``bus_id``, ``world_size``,
``comm_id``. Numbers past the column's range become missing values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..ops import normalize_op
from ..vocab import ErrorKind, SeqKind, State
from ._text import NCCL_DTYPES, add_error, error_row, event_row, i32, i64
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "nccl"

#: host:pid:tid [dev] [src:line] NCCL LEVEL; at the start of a line the host:pid:tid may be missing (a
#: paste or a launcher that kept only the ``[dev]`` bracket, which the prefix stripper already took), and
#: the pid:tid may be missing before a ``[dev]`` bracket (``gpu-server320 [5] NCCL INFO ...``: a paste
#: that dropped them, a logger that prints the host only)
PREFIX = re.compile(
    r"(?:(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\] )?(?P<host>(?<![\w.-])[\w.-]+)"
    r"(?::(?P<pid>\d+):(?P<tid>\d+) | (?=\[\d+\] ))|^)"
    r"(?:\[(?P<dev>\d+)\] )?(?:(?P<src>\S+:\d+)(?: \((?P<func>[^)]*)\))? )?NCCL (?P<lvl>INFO|WARN|TRACE|CALL|ABORT)\b ?"
)
_INIT = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
    r"(?P<rest>.*?)- Init (?P<st>START|COMPLETE)"
)
# init.cc, after the topology: INFO(NCCL_INIT, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d
# MNNVL %d", ...) -- the process's rank, the communicator's size and its rank within the node
_NRANKS = re.compile(
    r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d{1,9}) nRanks (?P<nranks>\d{1,9})\b"
    r"(?:.*?\blocalRank (?P<local>\d{1,9})\b)?"
)
# init.cc, NCCL 2.23+: INFO(NCCL_INIT | NCCL_PROFILE, "Init timings - %s: rank %d nranks %d total %.2f (...)", ...)
_TIMINGS = re.compile(r"Init timings - \w+: rank (?P<rank>\d{1,9}) nranks (?P<nranks>\d{1,9})\b")


def _rank_line(msg: str) -> tuple[int | None, int | None, int | None] | None:
    """(rank, nranks, localRank) of an ``nRanks`` or ``Init timings`` line, else None."""
    m = _NRANKS.search(msg) if " nRanks " in msg else (_TIMINGS.search(msg) if "Init timings" in msg else None)
    if m is None:
        return None
    local = m.groupdict().get("local")
    return _num(m.group("rank"), 31), _num(m.group("nranks"), 31), _num(local, 31) if local else None


# bootstrap.cc: INFO(NCCL_INIT, "Bootstrap : Using %s", ...) -- "eth0:10.0.0.1<0>": the address the
# process's bootstrap (and, without IB, its sockets) use, the one a peer's error names
_BOOTSTRAP = re.compile(
    r"Bootstrap ?: Using [\w.-]+:(?P<addr>\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:]+)(?:%[\w.-]+)?<\d+>"
)
_COMMID = re.compile(r"commId (0x[0-9a-fA-F]+)")
_PARENT = re.compile(r"parent (0x[0-9a-fA-F]+).*?color (-?\d+)")
_BUSID = re.compile(r"busId ([0-9a-fA-Fx]+)")
_END = re.compile(r"comm (0x[0-9a-fA-F]+) .*- (?:Destroy|Abort) COMPLETE")
# enqueue.cc: INFO(NCCL_COLL,"%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d
# comm %p [nranks=%d] stream %p", ...) -- opCount is HEX; RCCL appends "task %d globalrank %d"
_COLL = re.compile(
    r"(?<!\w)(?P<op>\w+): opCount (?:0x)?(?P<oc>[0-9a-fA-F]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) datatype (?P<dt>\d+) "
    r"op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-fA-F]+|\(nil\))(?: \[nranks=(?P<nranks>\d+)\])?"
    r"(?:.*? globalrank (?P<grank>\d+))?"
)
_DEV = re.compile(r":\d+ \[(\d+)\] ")


def line_device(text: str) -> str | None:
    """``cuda:<d>`` from an NCCL prefix's ``[d]`` (a local device index, not a rank)."""
    m = _DEV.search(text[:200])
    return f"cuda:{m.group(1)}" if m else None


_WARN_RANKS = re.compile(r"\brank (\d+)")  # "Duplicate GPU detected : rank 1 and rank 0", "around rank 3"
_REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}
_DIST_ERR = re.compile(r"NCCL error in: (?P<where>\S+?), (?P<what>.*?)(?:, NCCL version (?P<ver>[\w.+-]+))?$")
_ENUM = re.compile(
    r"^(?:[\w.]+(?:Error|Exception)\w*: )*(nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument"
    r"|InvalidUsage|RemoteError|InProgress))\b:? ?(.*)"
)
#: ncclResult_t: the code an NCCL trace line ("init.cc:903 -> 5") returns, its name and ncclGetErrorString
NCCL_RESULTS = {
    1: ("ncclUnhandledCudaError", "unhandled cuda error"),
    2: ("ncclSystemError", "unhandled system error"),
    3: ("ncclInternalError", "internal error"),
    4: ("ncclInvalidArgument", "invalid argument"),
    5: ("ncclInvalidUsage", "invalid usage"),
    6: ("ncclRemoteError", "remote process exited or there was a network error"),
    7: ("ncclInProgress", "NCCL operation in progress"),
}
_RESULT_BY_TEXT = {text: name for name, text in NCCL_RESULTS.values()}
# NCCLCHECK's trace of a failing call, innermost first: "init.cc:903 -> 5", "proxy.cc:878 -> 6 [Progress Thread]"
_TRACE = re.compile(r"^(?P<loc>[\w./+-]+:\d+) -> (?P<code>\d+)(?: \[(?P<thread>[^\]]*)\])?\s*$")
# an NCCL error raised outside torch (vLLM's pynccl: RuntimeError(f"NCCL error: {ncclGetErrorString(r)}"))
_PYNCCL = re.compile(r"\bNCCL error: (?P<what>[\w ]+?)(?: \(run with NCCL_DEBUG|,| -|$)")
_LAST_ERROR = re.compile(r"^Last error:\s*(.*)$")
_RAS_HDR = re.compile(r"^#(?P<g>\d+)-(?P<c>\d+) \((?P<hash>[0-9a-fA-F]+)\) (?P<status>[A-Z_]+(?: [A-Z_]+)*)\s*$")
_RAS_OPS = re.compile(r"Communicator ranks have different (\w+) operation counts")
_RAS_RANK = re.compile(r"Rank (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)")
_RAS_BODY = re.compile(
    r"ranks have (?:launched up to operation|not launched)|operation counts|managed by process"
    r"|^\s*(?:Group|#)\s+(?:Comms|in group)"
)

#: NCCL COLL op names -> what count means: per-rank input ("in") or output ("out") elements
_GATHERS = {"all_gather", "gather"}
_SCATTERS = {"reduce_scatter", "scatter"}


def _what(text: str | None) -> str:
    """``unhandled cuda error (run with NCCL_DEBUG=INFO for details)`` -> ``unhandled cuda error``."""
    text = (text or "").strip()
    for suffix in (" (run with", " - please report"):
        if suffix in text:
            text = text[: text.index(suffix)]
    return text.strip()


def _hexint(s: str) -> int | None:
    """``opCount 1a`` -> 26; past Int64 -> None (a missing value, not an error)."""
    if len(s) > 16:  # more hex digits cannot fit Int64 (and int() of many is slow)
        return None
    try:
        v = int(s, 16)
    except ValueError:
        return None
    return v if v < 2**63 else None


def _num(s: str | None, bits: int = 63) -> int | None:
    """Decimal digits as an int that fits the column (Int64, or Int32 for ranks), else None."""
    return i32(s) if bits == 31 else i64(s)


def pid_rank_map(lines: Iterable[str]) -> dict[int, int]:
    """pid -> global rank from NCCL Init lines, for NCCL_DEBUG_FILE files that carry no rank.

    For each pid, the rank of the Init line whose ``nranks`` is the largest seen anywhere in
    ``lines`` (that communicator is the world); pids without such a line are left out.
    """
    best: dict[int, tuple[int, int]] = {}
    for text in lines:
        if "Init" not in text:
            continue
        p = PREFIX.search(text)
        m = _INIT.search(text)
        if not p or not m:
            continue
        pid, rank, nranks = _num(p.group("pid")), _num(m.group("rank"), 31), _num(m.group("nranks"), 31)
        if pid is None or rank is None or nranks is None:
            continue
        if pid not in best or nranks > best[pid][1]:
            best[pid] = (rank, nranks)
    if not best:
        return {}
    world = max(n for _, n in best.values())
    return {pid: r for pid, (r, n) in best.items() if n == world}


class NcclReader(TextReader):
    name = SOURCE
    needles = (
        b" NCCL INFO ",
        b" NCCL WARN ",
        b" NCCL CALL ",
        b"NCCL error",
        b"Last error:",
        b"ncclUnhandled",
        b"ncclSystemError",
        b"ncclInternalError",
        b"ncclInvalid",
        b"ncclRemoteError",
        b") MISMATCH",
        b") INCOMPLETE",
        b") TIMEOUT",
        b") DEAD",
        b"operation counts",
        b"managed by process",
    )

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        # The comm map must outlive one block (Init lines and the COLL lines that use them are
        # usually separated by ordinary output). The reader itself stays stateless: the map lives
        # on this file's Output, so a COLL line resolves against Init lines seen earlier in the
        # same file (or the same byte range, should the loader split files).
        fs = out.__dict__.setdefault("_nccl_file_state", {"comms": {}, "pid_rank": {}, "world": 0, "position": {}})
        comms: dict[tuple, dict] = fs["comms"]  # (host, pid, comm pointer) -> init info
        block_world = max(
            (
                i32(m.group("nranks")) or 0
                for ln in block
                if "Init" in ln.text or " nRanks " in ln.text
                for m in [_INIT.search(ln.text) or _NRANKS.search(ln.text) or _TIMINGS.search(ln.text)]
                if m
            ),
            default=0,
        )
        fs["world"] = max(fs["world"], block_world)
        world = fs["world"] or None
        pid_rank: dict[tuple, int] = fs["pid_rank"]  # (host, pid) -> global rank (world Init line)
        st = {
            "dist": None,
            "ras": None,
            "position": fs["position"],
            "traces": {},
            "warns": fs.setdefault("warns", {}),
            "addrs": fs.setdefault("addrs", {}),  # (host, pid) -> its bootstrap address
        }
        for line in block:
            if self._line(line, ctx, out, comms, pid_rank, world, st):
                out.consume(line)

    def _rank(self, line: Line, proc: tuple, pid_rank: dict[tuple, int]) -> int | None:
        """``[rankN]:`` / file rank first, then the world Init line of the same host:pid. The
        ``[dev]`` bracket is a local CUDA device index, never a global rank."""
        if line.rank is not None:
            return line.rank
        return pid_rank.get(proc)

    def _line(self, line, ctx, out, comms, pid_rank, world, st) -> bool:
        text = line.text
        p = (PREFIX.match(text) or PREFIX.search(text)) if "NCCL " in text else None  # usually at the start
        if p is None:
            return self._pytorch(line, text, ctx, out, st)
        st["dist"] = None
        pid = _num(p.group("pid"))
        host = p.group("host")
        proc = (host, pid)
        level, msg = p.group("lvl"), text[p.end() :]
        if level == "WARN":
            st["traces"].pop(proc, None)
            st["warns"][proc] = msg.strip()
            named = tuple(sorted({r for r in map(lambda x: _num(x, 31), _WARN_RANKS.findall(msg)) if r is not None}))
            row = error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.NCCL_WARN,
                msg.strip(),
                rank=self._rank(line, proc, pid_rank),
                host=host,
                pid=pid,
                tid=_num(p.group("tid")),
                device=p.group("dev"),
                origin=p.group("src"),
                related_ranks=named or None,
            )
            add_error(out, row)
            return True
        m = _TRACE.match(msg) if " -> " in msg else None
        if m:
            self._trace(line, ctx, out, m, proc, p, pid_rank, st)
            return True
        st["traces"].pop(proc, None)  # any other line of the process ends its burst
        m = _INIT.search(msg)
        if m:
            info = {"rank": _num(m.group("rank"), 31), "nranks": _num(m.group("nranks"), 31), "dev": m.group("dev")}
            cid = _COMMID.search(m.group("rest"))
            par = _PARENT.search(m.group("rest"))
            info["comm_id"] = cid.group(1) if cid else (f"{par.group(1)}/color{par.group(2)}" if par else None)
            comms[(host, pid, m.group("comm"))] = info
            if m.group("st") == "COMPLETE" and world is not None and info["nranks"] == world:
                pid_rank[proc] = info["rank"]
                bus = _BUSID.search(m.group("rest"))
                out.ranks.append(
                    {
                        "rank": line.rank if line.rank is not None else info["rank"],
                        "host": p.group("host"),
                        "pid": pid,
                        "device": f"cuda:{info['dev']}",
                        "local_rank": line.local_rank,
                        "bus_id": bus.group(1) if bus else None,
                        "world_size": info["nranks"],
                        "comm_id": info["comm_id"],
                        "addr": st["addrs"].get(proc),
                        "source": SOURCE,
                        "file": ctx.file,
                        "line": line.lineno,
                    }
                )
            return True
        said = _rank_line(msg)
        if said is not None:
            rank, nranks, local = said
            if world is not None and nranks == world and rank is not None:
                pid_rank.setdefault(proc, rank)
                out.ranks.append(
                    {
                        "rank": line.rank if line.rank is not None else rank,
                        "host": host,
                        "pid": pid,
                        "device": f"cuda:{p.group('dev')}" if p.group("dev") else None,
                        # the line's own localRank: NCCL's count of the ranks on this node, by host hash
                        "local_rank": local if local is not None else line.local_rank,
                        "world_size": nranks,
                        "addr": st["addrs"].get(proc),
                        "source": SOURCE,
                        "file": ctx.file,
                        "line": line.lineno,
                    }
                )
            return True
        m = _BOOTSTRAP.search(msg) if "Bootstrap" in msg else None
        if m:
            st["addrs"][proc] = m.group("addr")
            return True
        m = _END.search(msg)
        if m:
            comms.pop((host, pid, m.group(1)), None)
            st["position"].pop((host, pid, m.group(1)), None)  # a reused pointer is a new communicator
            return True
        m = _COLL.search(msg)
        if m:
            self._coll(line, ctx, out, m, proc, comms, pid_rank, st["position"])
            return True
        return level in ("INFO", "CALL", "TRACE")  # other INFO lines: recognised NCCL chatter, nothing to keep

    def _trace(self, line, ctx, out, m, proc, p, pid_rank, st) -> None:
        """One ``file:line -> N`` line: the first of a process's burst gives its ``nccl_error`` row
        (the code's meaning, the innermost location), the rest add their location to it."""
        row = st["traces"].get(proc)
        if row is not None:
            row["nccl_trace"] += "\n" + m.group("loc")
            return
        code = _num(m.group("code"), 31)
        name, meaning = NCCL_RESULTS.get(code, (f"ncclResult {code}", "unknown result code"))
        where = m.group("loc") + (f" [{m.group('thread')}]" if m.group("thread") else "")
        msg = f"NCCL call failed with {name} ({code}: {meaning}) at {where}"
        row = error_row(
            line,
            ctx,
            SOURCE,
            ErrorKind.NCCL_ERROR,
            msg,
            rank=self._rank(line, proc, pid_rank),
            host=proc[0],
            pid=proc[1],
            tid=_num(p.group("tid")),
            device=p.group("dev"),
            origin=m.group("loc"),
            nccl_result=name,
            nccl_code=code,
            nccl_trace=m.group("loc"),
            last_warn=st["warns"].get(proc),
        )
        out.errors.append(row)  # no fold by message: two processes may fail alike
        st["traces"][proc] = row

    def _coll(self, line, ctx, out, m, proc, comms, pid_rank, positions) -> None:
        host, pid = proc
        info = comms.get((host, pid, m.group("comm")))
        # ordinal of this COLL line per (host, pid, comm) in file order: the alignment key when
        # opCount stays 0 or one torch op launches several NCCL calls (docs/formats.md#nccl-coll)
        pos_key = (host, pid, m.group("comm"))
        positions[pos_key] = position = positions.get(pos_key, 0) + 1
        op = normalize_op(m.group("op"))
        count = _num(m.group("count"))
        nranks = _num(m.group("nranks"), 31) if m.group("nranks") else (info["nranks"] if info else None)
        rank = self._rank(line, proc, pid_rank)
        if rank is None and m.group("grank") is not None:  # RCCL names the global rank itself
            rank = _num(m.group("grank"), 31)
        if (
            rank is None
            and info is not None
            and nranks is not None
            and info["nranks"] == nranks
            and pid_rank.get(proc) is None
        ):
            rank = info["rank"]
        numel_in = numel_out = count
        if count is not None and op in _GATHERS and nranks:
            numel_out = _num(str(count * nranks))
        elif count is not None and op in _SCATTERS and nranks:
            numel_in = _num(str(count * nranks))
        dt = _num(m.group("dt"))
        opcount = _hexint(m.group("oc"))
        row = event_row(
            line,
            ctx,
            SOURCE,
            rank=rank,
            pg=(info["comm_id"] if info and info["comm_id"] else m.group("comm")),
            seq=opcount,
            seq_kind=SeqKind.NCCL_OPCOUNT,
            op=op,
            numel_in=numel_in,
            numel_out=numel_out,
            dtype=NCCL_DTYPES.get(dt, f"nccl_dtype_{dt}") if dt is not None else None,
            state=State.SCHEDULED,
            world_size=nranks,
            root=_num(m.group("root"), 31),
            comm=m.group("comm"),
            comm_rank=info["rank"] if info else None,
            redop=_REDOPS.get(_num(m.group("redop"))),
            host=host,
            pid=pid,
            device=line_device(line.text),
            nccl_position=position,
            nccl_opcount=opcount,
        )
        # two counters, two rows: opCount (a consistency check, may stay 0) and the position, which
        # is what alignment across ranks uses (docs/formats.md#nccl-coll); never one seq for both
        out.events.append(row)
        out.events.append(dict(row, seq=position, seq_kind=SeqKind.NCCL_POSITION))

    # --- PyTorch's NCCL error trail and RAS reports (no NCCL prefix) ---------------------------

    def _pytorch(self, line: Line, text: str, ctx: FileContext, out: Output, st: dict) -> bool:
        m = _DIST_ERR.search(text) if "NCCL error in:" in text else None
        if m:
            row = error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.NCCL_ERROR,
                text.strip(),
                nccl_version=m.group("ver"),
                nccl_result=_RESULT_BY_TEXT.get(_what(m.group("what"))),
                host=line.host,
                pid=line.pid,
            )
            add_error(out, row)
            st["dist"] = row
            return True
        m = _PYNCCL.search(text) if "NCCL error: " in text and not text[:1].isspace() else None
        if m:
            row = error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.NCCL_ERROR,
                text.strip(),
                nccl_result=_RESULT_BY_TEXT.get(_what(m.group("what"))),
                host=line.host,
                pid=line.pid,
            )
            add_error(out, row)
            st["dist"] = row
            return True
        m = _ENUM.match(text.strip()) if "nccl" in text and not text[:1].isspace() else None
        if m:
            if st["dist"] is not None and st["dist"]["rank"] == line.rank:
                st["dist"]["message"] += "\n" + text.strip()
                st["dist"]["nccl_result"] = m.group(1)
            else:
                row = error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.NCCL_ERROR,
                    text.strip(),
                    nccl_result=m.group(1),
                    host=line.host,
                    pid=line.pid,
                )
                add_error(out, row)
                st["dist"] = row
            return True
        m = _LAST_ERROR.match(text.strip())
        if m and st["dist"] is not None:
            st["dist"]["message"] += "\n" + text.strip()
            st["dist"]["await_last"] = not m.group(1)
            return True
        if st["dist"] is not None and st["dist"].pop("await_last", False) and st["dist"]["rank"] == line.rank:
            st["dist"]["message"] += " " + text.strip()
            return True
        st["dist"] = None
        return self._ras(line, text, ctx, out, st)

    def _ras(self, line: Line, text: str, ctx: FileContext, out: Output, st: dict) -> bool:
        if st["ras"] is None and not ("#" in text or "operation" in text or "managed by" in text or "Group" in text):
            return False
        m = _RAS_HDR.match(text.strip())
        if m:
            row = error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.NCCL_RAS,
                text.strip(),
                pg=f"0x{m.group('hash')}",
                related_ranks=(),
                ras_status=m.group("status"),
            )
            add_error(out, row)
            st["ras"] = row
            return True
        row = st["ras"]
        if row is None:
            return bool(_RAS_BODY.search(text))
        m = _RAS_OPS.search(text)
        if m:
            row["op"] = normalize_op(m.group(1))
        m = _RAS_RANK.search(text)
        if m:
            row["related_ranks"] = tuple(
                sorted(set(row["related_ranks"]) | {r for r in [i32(m.group(1))] if r is not None})
            )
        if _RAS_BODY.search(text) or m or text[:1].isspace():
            row["message"] += "\n" + text.strip()
            return True
        st["ras"] = None
        return False


register_text_reader(NcclReader())

__all__ = ["NcclReader", "pid_rank_map", "PREFIX"]

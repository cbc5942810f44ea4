"""Turn the physical lines of one block into :class:`~denpex_nb.ingest.base.Line` objects.

Real logs arrive wrapped in layers: a line number from ``cat -n``/``grep -n``, a host from pdsh,
a task label from ``srun -l`` or Open MPI, a Ray actor tag, torchrun's ``[default3]:``, torch's own
``[rank5]:``, and finally the message's header (C++ glog, Python ``torch._logging``, DeepSpeed,
Lightning, NCCL). Every reader wants only the message and *which rank said it*, so this module
peels the layers in the order of docs/formats.md §2.1, keeps each value on the Line, and repairs the
two kinds of damage seen in pasted logs: two ranks' output run together on one line (``mp.spawn``
children share a pipe) and hard-wrapped long lines (DETAIL messages reach ~700 characters).

Outermost come the wrappers of log collectors, peeled per physical line before anything else
(:func:`_peel_outer`): markdown quoting of a paste (``> ``, ``>> ``, ``> > ``; never a REPL's
``>>> ``), a ``grep -H``/``-Hn`` file name (also ``rank3.log-`` context lines), a docker-compose
label (``worker-1  | ``), a kubectl/docker ``--timestamps`` RFC 3339 time (or its tail cut by a
paste, ``056444Z ``), a syslog/journald header (``May  1 12:00:00 host python[1234]: ``), a ``ctime``
time that a launcher stamps its children's lines with (``Fri Sep 25 16:52:53 2020[0]<stderr>:``); ANSI codes,
colour codes that lost their escape byte (`` [36m``) and CR go first. Then launcher and worker
tags: Open MPI ``[1,3]<stdout>:`` (Horovod's ``[3]<stdout>:``), Ray / vLLM workers ``(RayWorkerWrapper pid=123, ip=10.0.0.1) ``,
``(VllmWorker rank=3 pid=406) `` (``rank=N`` attributes the rank; a pid names only a process).
Innermost, besides glog/torch/DeepSpeed/Lightning/NCCL headers, application-logger headers are
removed (``logging``'s ``asctime - name - LEVEL - ``, loguru, ``[date] [LEVEL] name: ``), with an
optional ``[RANK N] `` in front; vLLM's ``ERROR 07-24 08:26:01 [file.py:226] ``; sglang's
``[2025-01-01 12:00:00 TP14 EP14] `` (``TPn`` is taken as the rank only when no DP/PP tag says the
TP group is part of a larger job; an EP tag splits the TP group and changes nothing); Rich's
logging columns (level padded to 8, ``file.py:NN`` right-aligned: the origin; a message Rich
wrapped onto an indented line is joined back) and Rich's traceback box (``╭─ Traceback (most recent
call last) ─╮`` becomes ``Traceback (most recent call last):``, ``│ frame │`` its inner text,
``╰──╯`` an empty line). A tag with nothing after it (``[1,2]<stdout>:``) is a Line with empty
text (the loader counts it parsed inside a block a reader used). Line kinds stripped are listed in
``Line.prefixes`` (``quote``, ``cut_time``, ``grep_h``, ``compose``, ``timestamp``, ``ctime``, ``syslog``,
``mpi``, ``ray``, ``app_rank``, ``applog``, ``vllm``, ``sglang``, ``rich``, ``rich_box`` ...).

Layers also come in other orders, and the first header is not always the last layer: an app
logger's header around torchrun's line (``[RANK 1] 2025-01-01 12:00:00 [ERROR] trainer: [rank1]:
Traceback ...``), a glog header after that, a kubectl/syslog time inside an app logger's message.
After the usual order, :func:`_peel_inner` keeps peeling (torchrun tag, ``[rankN]:``, ``[RANK N]``,
an ISO/syslog time, any header) while a layer starts the rest; the outermost rank said wins.

Hard-wrapped files (a terminal or collector cut every physical line at one width, the tails carry no
prefix): the loader finds the file's width (:mod:`denpex_nb.ingest.hardwrap`, in
``ctx.options["wrap_width"]``) and :func:`_unwrap` joins each line of that width with its unprefixed
tails, verbatim, before anything else here runs, so every reader sees whole lines. Without a width,
the older rule for pastes stays: a line at a common width (80, 100, 120, 160, 200 after its wrappers)
or with an open bracket, and an unprefixed line after it.

Rank trust order: ``[rankN]:`` > the file's rank hint (name, NCCL Init map) > a ``grep -H`` file
name or a rank-named compose service (``trainer-rank-3``; ``worker-3`` is a replica number, not a
rank) > a C++ continuation line's owner (``what():`` ... follow the record they belong to) >
launcher labels (srun, MPI, ``[role|rank|local]:``, DeepSpeed, Lightning, an app logger's
``[RANK N]``, a vLLM worker's ``rank=N``, sglang's lone ``TPn``) > torchrun's local rank. Numbers that do not fit Int32/Int64 name nothing (None).
Host, pid and time: the inner header's when it has them, else the wrapper's.

Times: glog headers carry no year (``ctx.year``; falls back to the current year) and local time
(treated as UTC unless ``ctx.options["tz"]`` names a zone). With ``ctx.options["mtime"]`` (epoch
seconds of the file) a line takes the latest year that puts it no later than the file's time plus a
day (a zone ahead of UTC): a December line in a file written in January gets the previous year, a
February line in a file written in January too, a 1 January line in a file written late on 31
December UTC the next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from ._text import i32, i64
from .base import FileContext, Line

__all__ = ["to_lines", "strip_ansi", "parse_header"]

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


# --- line numbers (decided per block: they must fit every line) ------------------------------

_CAT_N = re.compile(r"^\s*(\d{1,18})\t")
_GUTTER = re.compile(r"^\s*(\d{1,18})\s*[|│] ?")
_GREP_HN = re.compile(r"^([^\s:\[(]+):(\d{1,18})([:-])")
_GREP_N = re.compile(r"^(\d{1,18})([:-])(?=\S)")
_NUM_SPACE = re.compile(r"^\s*(\d{1,18}): ")
_LOGFILE = re.compile(r"(?:\.(?:log|txt|out|err|stdout|stderr)(?:\.\d+)?|stdout|stderr)$", re.I)
_NCCL_AFTER = re.compile(r"^\d+ \[\d+\]|^\d+ NCCL")


@lru_cache(maxsize=256)
def _rank_of_file(fname: str) -> int | None:
    """Rank a ``grep -Hn`` file name says, by the loader's own file-name rules (one place for them)."""
    from .sources import rank_hints

    return rank_hints(fname).get("rank_hint")


def _rising(nums: list[int], exact: bool) -> bool:
    if len(nums) < 2:
        return False
    steps = [b - a for a, b in zip(nums, nums[1:])]
    return all(s == 1 for s in steps) if exact else all(s > 0 for s in steps)


def _line_number_kind(texts: list[str]) -> str | None:
    """Which line-number prefix every non-empty line of the block carries, if any."""
    lines = [t for t in texts if t.strip()]
    if not lines:
        return None
    head = lines[0].lstrip()[:1]
    if not head.isdigit() and (head in "[(" or not _GREP_HN.match(lines[0])):
        return None  # the common case: no line-number prefix can fit the first line
    ms = [_CAT_N.match(t) for t in lines]
    if all(ms):
        return "cat_n"
    ms = [_GUTTER.match(t) for t in lines]
    if all(ms):
        return "gutter"
    ms = [_GREP_HN.match(t) for t in lines]
    if all(ms) and all(
        not _NCCL_AFTER.match(t[m.end() :]) and (_LOGFILE.search(m.group(1)) or t[m.end() :].startswith("["))
        for m, t in zip(ms, lines)
    ):
        return "grep_hn"
    ms = [_GREP_N.match(t) for t in lines]
    if all(ms) and (all(m.group(2) == ":" for m in ms) or _rising([int(m.group(1)) for m in ms], False)):
        return "grep_n"
    ms = [_NUM_SPACE.match(t) for t in lines]
    if all(ms) and _rising([int(m.group(1)) for m in ms], True):
        return "num_space"  # cat -n style numbers followed by ": "; srun labels never rise by one
    return None


def _strip_line_number(text: str, kind: str | None) -> tuple[str, str | None]:
    """Remove the block's line-number prefix; also return a file name from ``grep -Hn``."""
    if kind is None:
        return text, None
    rx = {"cat_n": _CAT_N, "gutter": _GUTTER, "grep_hn": _GREP_HN, "grep_n": _GREP_N, "num_space": _NUM_SPACE}[kind]
    m = rx.match(text)
    if not m:
        return text, None
    return text[m.end() :], (m.group(1) if kind == "grep_hn" else None)


# --- outer wrappers: what log collectors put in front of a whole line ---------------------------
#
# These come before everything else on a physical line, in this order when several are present:
# ``grep -H`` file name (``run.3.log:``, ``run.3.log:123:``, context lines ``rank3.log-``), a
# docker-compose service label (``worker-1  | ``), a kubectl/docker ``--timestamps`` RFC 3339 time
# (``2024-05-01T12:00:00.123456789Z ``), a syslog/journald header (``May  1 12:00:00 host
# python[1234]: ``, or ``journalctl -o short-iso``'s ISO time with the same ``host prog[pid]:``).

_OUT_GREP = re.compile(
    r"^(?P<f>[^\s:\[\]()]*?(?:\.(?:log|txt|out|err|stdout|stderr)(?:\.\d+)?|[/_.-](?:stdout|stderr)))"
    r"(?P<sep>[:-])(?:(?P<n>\d+)(?P=sep))?"
)
_OUT_COMPOSE = re.compile(r"^(?P<svc>[A-Za-z0-9][\w.-]*) +\| ")
_OUT_ISO = re.compile(
    r"^(?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d\d:?\d\d):? "
)
_OUT_SYSLOG = re.compile(
    r"^(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d) "
    r"(?P<host>[\w.-]+) (?P<prog>[\w./@-]+?)(?:\[(?P<pid>\d+)\])?: "
)
#: a ``ctime`` / ``date`` time in front of a line (``Fri Sep 25 16:52:53 2020``, ``date``'s ``Fri Sep 25
#: 16:52:53 UTC 2020``): what a launcher that stamps its children's lines writes (``horovodrun
#: --prefix-output-with-timestamp``, Open MPI's ``--timestamp-output``), glued to the tag that follows
#: (``Fri Sep 25 16:52:53 2020[0]<stderr>:``) or a space before the message; local time
_OUT_CTIME = re.compile(
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(?P<day>\d{1,2}) "
    r"(?P<hms>\d\d:\d\d:\d\d) (?:[A-Z]{2,5} )?(?P<year>\d{4})(?:(?=\[)|: ?| (?=\S))"
)
_OUT_SYSLOG_TAIL = re.compile(r"^(?P<host>[\w.-]+) (?P<prog>[\w./@-]+?)\[(?P<pid>\d+)\]: ")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
#: a compose service / container name that clearly names a rank (``rank-3``, ``trainer_rank3``)
_RANK_LABEL = re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)$", re.I)
_OUTER_HINT = re.compile(r"^(?:\d{4}-|[A-Z][a-z]{2} |[^\s|]+ +\| |[^\s:]*(?:\.\w+|std\w+)[:-]|>|\d{1,9}Z )")
#: markdown quoting of a paste (``> ``, nested ``>> `` / ``> > ``; a quoted blank line is ``>``); never
#: a REPL's ``>>> ``. One space after the marker belongs to it; a second one before a ``[`` header is
#: paste noise (``>  [E ProcessGroupNCCL.cpp:481] ...``) and goes too, any other indentation stays.
_OUT_QUOTE = re.compile(r"^(?:>{1,2}(?: |$))+(?: (?=\[))?")
#: the tail of a kubectl/docker ``--timestamps`` time cut off by a paste (``056444Z ``: fraction + Z)
_OUT_CUT_TIME = re.compile(r"^\d{1,9}Z ")


@dataclass(slots=True)
class _Outer:
    """What the outer wrappers of one physical line said."""

    kinds: list[str] = field(default_factory=list)
    file: str | None = None  # grep -H file name
    rank: int | None = None  # from that file name or a rank-named compose service
    host: str | None = None
    pid: int | None = None
    t_wall: datetime | None = None


_NO_OUTER = _Outer()


def _peel_outer(text: str, ctx: FileContext) -> tuple[str, _Outer]:
    """Remove the collector wrappers in front of one physical line (see above)."""
    if not _OUTER_HINT.match(text):
        return text, _NO_OUTER
    o = _Outer()
    s = text
    m = _OUT_QUOTE.match(s) if s[:1] == ">" else None
    if m:
        o.kinds.append("quote")
        s = s[m.end() :]
    m = _OUT_GREP.match(s)
    if m and m.end() < len(s) and not _NCCL_AFTER.match(s[m.end() :]):
        o.file = m.group("f")
        o.rank = _rank_of_file(o.file)
        o.kinds.append("grep_h")
        s = s[m.end() :]
    m = _OUT_COMPOSE.match(s)
    if m and re.search(r"[A-Za-z]", m.group("svc")):
        r = _RANK_LABEL.search(m.group("svc"))
        if r and o.rank is None:
            o.rank = i32(r.group(1))
        o.kinds.append("compose")
        s = s[m.end() :]
    m = _OUT_CUT_TIME.match(s) if s[:1].isdigit() else None
    if m:
        o.kinds.append("cut_time")
        s = s[m.end() :]
    m = _OUT_ISO.match(s)
    if m:
        o.t_wall = _rfc3339(m)
        o.kinds.append("timestamp")
        s = s[m.end() :]
        m = _OUT_SYSLOG_TAIL.match(s)
        if m:
            o.host, o.pid = m.group("host"), i64(m.group("pid"))
            o.kinds.append("syslog")
            s = s[m.end() :]
    else:
        m = _OUT_CTIME.match(s) if s[:1].isupper() else None
        if m:
            o.t_wall = _iso_time(
                f"{m.group('year')}-{_MONTHS[m.group('mon')]:02d}-{int(m.group('day')):02d}", m.group("hms"), 0, ctx
            )
            o.kinds.append("ctime")
            s = s[m.end() :]
        m = _OUT_SYSLOG.match(s) if m is None else None
        if m:
            o.host, o.pid = m.group("host"), i64(m.group("pid")) if m.group("pid") else None
            o.t_wall = _syslog_time(m, ctx)
            o.kinds.append("syslog")
            s = s[m.end() :]
    if not o.kinds:
        return text, _NO_OUTER
    return s, o


def _rfc3339(m: re.Match) -> datetime | None:
    try:
        y, mo, d = (int(x) for x in m.group("date").split("-"))
        h, mi, sec = (int(x) for x in m.group("hms").split(":"))
        us = int((m.group("frac") or "0")[:6].ljust(6, "0"))
        dt = datetime(y, mo, d, h, mi, sec, us, tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        return None
    tz = m.group("tz")
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        hh, mm = int(tz[1:3]), int(tz[-2:])
        from datetime import timedelta

        dt -= sign * timedelta(hours=hh, minutes=mm)
    return dt


def _syslog_time(m: re.Match, ctx: FileContext) -> datetime | None:
    return _glog_time(f"{_MONTHS[m.group('mon')]:02d}{int(m.group('day')):02d}", m.group("hms"), None, ctx)


# --- launcher and rank prefixes --------------------------------------------------------------

#: a pdsh label: a host name, or the node's IPv4 address (DeepSpeed's pdsh runner labels lines by it)
_PDSH = re.compile(r"^([A-Za-z][\w.-]*|\d{1,3}(?:\.\d{1,3}){3}): ")
_NOT_HOST = re.compile(
    r"(?i)(?:error|exception|warning|warn|interrupt|exit|note|hint|failures|info|debug|traceback|"
    r"what|cause|time|host|rank|exitcode|error_file|msg|status|size|sizes|state|ranks)$|^nccl"
)
_SRUN = re.compile(r"^\s*(\d+): ")
#: Open MPI's ``--tag-output`` ``[jobid,rank]<stdout>:`` and Horovod's own launcher (``horovodrun``
#: over gloo) ``[rank]<stdout>:``; a paste may lose the colon (``[0]<stdout>[0] NCCL INFO ...``)
_MPI = re.compile(r"^\[(\d+)(?:,(\d+))?\]<(?:stdout|stderr|stddiag)>(?::| (?=\S))?")
_HYDRA = re.compile(r"^\[(\d+)\] (?=\S)")
# worker prefixes: Ray actors ``(RayWorkerWrapper pid=123, ip=10.0.0.1) ``, vLLM's multiprocessing
# workers ``(VllmWorkerProcess pid=760) `` / ``(VllmWorker rank=3 pid=406) `` (``rank=N`` names the
# rank; tags like ``TP0``/``DP1`` are group indices and name none; a pid only gives a process)
_RAY = re.compile(
    r"^\((?P<name>[\w.:-]+)(?: (?:rank=(?P<rank>\d+)|[A-Za-z_]+\d+))* pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)\s]+))?\)\s?"
)
_RAY_REPEAT = re.compile(r"\[repeated (\d{1,18})x across cluster\]\s*$")  # spaces before it: rstrip
#: an SGR colour code whose escape byte was lost in a paste (`` [36m(RayWorker pid=1) [0m ...``): at
#: the line start or after a space, with the space that stood for the escape byte
_SGR_HINT = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")
_LOST_SGR = re.compile(r"(?:^|\s)\[\d{1,3}(?:;\d{1,3})*m(?=[\s(\[]|$)")
_TEMPLATE = re.compile(r"^\[(?P<role>[A-Za-z_][\w-]*)\|(?P<r>\d+)\|(?P<lr>\d+)\]:")
_TORCHRUN = re.compile(r"^\[(?P<role>[A-Za-z_][\w-]*?)(?P<lr>\d+)\]:")
_RANK = re.compile(r"^\[rank(\d+)\]: ?")

# --- message-level markers (docs/formats.md §2.5-§2.6) -----------------------------------------

_CPP = re.compile(
    r"^\[(?P<sev>[FEWIV])(?:(?P<md>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d+) )?\s*"
    r"(?P<file>[\w.+-]+):(?P<line>\d+)\] ?"
)
_GLOG = re.compile(
    r"^(?P<sev>[DIWECFV])(?P<md>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d+) +(?P<pid>\d+) "
    r"(?P<file>[^\s\]]+):(?P<line>\d+)\] ?"
)
_PY_OLD = re.compile(r"^(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>[\w.]+):")
_PY_23 = re.compile(
    r"^\[(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d),(?P<ms>\d{3})\] (?P<logger>[\w.]+): \[(?P<lvl>[A-Z]+)\] ?"
)
#: the same header without its date, Python logging's ``%(name)s: [%(levelname)s] %(message)s``
#: (``torch.testing._internal.common_distributed: [ERROR]   File "...", line 157, in _sync_tp_grads``:
#: the multi-process test harness logging a child's traceback line by line); never an exception line
#: whose message starts with a level in brackets (``RuntimeError: [ERROR] ...``)
_PY_NAMED = re.compile(
    r"^(?P<logger>(?![\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Failure):)[A-Za-z_][\w.]{0,200}): "
    r"\[(?P<lvl>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\] ?"
)
_DEEPSPEED = re.compile(
    r"^\[(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d),(?P<ms>\d{3})\] \[(?P<lvl>[A-Z]+)\] "
    r"\[(?P<where>[^\]]*)\] (?:\[Rank (?P<r>-?\d+)\] )?"
)
_LIGHTNING = re.compile(r"^\[rank: (\d+)\] ")
# application loggers (docs/formats.md §2.6): an optional "[RANK 1] " then a dated header, e.g.
# "[RANK 1] 2025-01-01 12:00:00 [ERROR] trainer: ", "2024-01-01 12:00:00,123 - root - ERROR - ",
# "2024-01-01 12:00:00.123 | ERROR    | mod:fn:12 - " (loguru), "[2024-01-01 12:00:00,123] [INFO] "
_LVL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|EXCEPTION|TRACE|SUCCESS)"
_APP_RANK = re.compile(r"^\[(?:RANK|Rank|rank)[ :]?(\d+)\] ?(?=\[?\d{4}-\d\d-\d\d[ T]\d\d:)")
_APP = re.compile(
    r"^\[?(?P<date>\d{4}-\d\d-\d\d)[ T](?P<hms>\d\d:\d\d:\d\d)(?:[,.](?P<frac>\d{1,9}))?(?:Z|[+-]\d\d:?\d\d)?\]?"
    r"(?:"
    r" - (?P<n1>\S[^\n]{0,80}?) - (?P<l1>" + _LVL + r") - "  # logging: asctime - name - level -
    r"| \[(?P<l2>" + _LVL + r")\] (?:\[(?P<w2>[^\]]*)\] |(?P<n2>[\w.<>-]+): )?"  # [LEVEL] [where] / name:
    r"| \| (?P<l3>" + _LVL + r") *\| (?:(?P<w3>\S+) - )?"  # loguru
    r"| (?P<l4>" + _LVL + r")(?: (?P<n4>[\w.<>-]+):)? "  # asctime LEVEL name: msg
    r")"
)
#: the bytes twin of ``[RANK N] `` + :data:`_APP` for the loader's continuation test (:func:`continues_b`)
APP_B = re.compile(rb"(?:\[(?:RANK|Rank|rank)[ :]?\d+\] ?)?" + _APP.pattern[1:].encode())
# vLLM's logger: "ERROR 07-24 08:26:01 multiproc_worker_utils.py:226] " (newer: "[file.py:NN] ")
_VLLM = re.compile(
    r"^(?P<lvl>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))? "
    r"\[?(?P<file>[\w.+-]+):(?P<line>\d+)\] ?"
)
# sglang's logger: "[2025-01-01 12:00:00 TP14 EP14] ", "[2025-01-01 12:00:00 DP1 TP3] ", "[2025-01-01 12:00:00] "
_SGLANG = re.compile(
    r"^\[(?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<tags>(?: [A-Z][A-Z_]{1,9}\d+)*)\] "
)
_SG_TAG = re.compile(r"([A-Z][A-Z_]{1,9})(\d+)")
# Rich's logging handler (accelerate, typer CLIs): an optional "[time]" column, the level left-justified
# in 8 columns plus a space, the message, then the emitting "file.py:NN" right-aligned (>= 2 spaces)
_RICH = re.compile(r"^ ?(?:\[[^\]]{4,40}\] ?)?(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)(?P<pad> +)(?=\S)")
_RICH_FILE = re.compile(r"(?<! ) {2,}(?P<file>[\w.-]+\.py):(?P<line>\d+)\s*$")  # (?<! ): linear on spaces
# Rich's traceback box: "╭─── Traceback (most recent call last) ───╮", "│ frame │", "╰───╯"
_BOX_TOP = re.compile(r"^[╭┏]─*[─━] ?Traceback \(most recent call last\) ?[─━]*[╮┓]\s*$")
_BOX_SIDE = re.compile(r"^[│┃](?P<inner>.*?)(?:[│┃]\s*)?$")
_BOX_EDGE = re.compile(r"^[╰╭┗┏][─━]*[╯╮┛┓]\s*$")
_NCCL = re.compile(
    r"^(?:\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\] )?(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) "
    r"(?:\[(?P<dev>\d+)\] )?(?:\S+:\d+(?: \([^)]*\))? )?NCCL (?P<lvl>INFO|WARN|TRACE|CALL|ABORT|VERSION)\b"
)
_LEVELS = {"DEBUG": "D", "INFO": "I", "WARNING": "W", "WARN": "W", "ERROR": "E", "CRITICAL": "C", "FATAL": "F"}

#: where a second rank's line may start inside a physical line (§1 "two ranks on one line")
_SPLIT = re.compile(
    r"\[rank\d+\]:|\[[FEWIV]\d{3,4} \d\d:\d\d:\d\d|[DIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\s\]]+:\d+\]"
    r"|Traceback \(most recent|terminate called|(?<![\w.-])[\w.-]+:\d+:\d+ \[\d+\] NCCL"
)
#: literals one of which any split point contains: Python's re is slow on alternations, so
#: lines without any of them skip the regex (most candidate lines)
_SPLIT_HINTS = (
    "[rank",
    "Traceback (",
    "terminate called",
    "[E",
    "[W",
    "[I",
    "[F",
    "[V",
    ".py:",
    ".cc:",
    ".cpp:",
    ".h:",
    " NCCL ",
)


def _has_split_hint(tail: str) -> bool:
    """``any(h in tail for h in _SPLIT_HINTS)``, unrolled (no generator per line)."""
    if "[" in tail and (
        "[rank" in tail or "[E" in tail or "[W" in tail or "[I" in tail or "[F" in tail or "[V" in tail
    ):
        return True
    return (
        "Traceback (" in tail
        or "terminate called" in tail
        or ".py:" in tail
        or ".cc:" in tail
        or ".cpp:" in tail
        or ".h:" in tail
        or " NCCL " in tail
    )


def _split_points(text: str, offset: int) -> list[int]:
    """Offsets > ``offset`` where a new record starts inside ``text`` (merged output)."""
    tail = text[offset + 1 :]
    if not _has_split_hint(tail):
        return []
    cuts = []
    for m in _SPLIT.finditer(text, offset + 1):
        i, g = m.start(), m.group()
        before = text[i - 1]
        if g.startswith(("Traceback", "terminate")):
            if before.isspace():  # "traceback : Traceback (...": not a merge
                continue
        elif g.endswith("] NCCL"):
            pass  # an NCCL prefix (host matched as far back as it goes)
        elif not g.startswith("[") and before.isalpha():
            continue  # "[DIWEC]MMDD" glued to a word: not a header
        cuts.append(i)
    return cuts


#: lines that start a record of their own: never a wrapped line's tail
#: a logger's or library's record header, its name then a level (``MIOpen(HIP): Warning [...]``,
#: ``rocBLAS: Warning``, ``torch._dynamo.convert_frame: WARNING``): a record of its own, never a
#: wrapped tail, also after a tagged head (a cut leaves a fragment, not a name, a colon and a level)
_NAMED_LEVEL = (
    r"[A-Za-z_][\w.]*(?:\([\w.]*\))?: (?:Warning|Error|Info|Debug|Fatal|WARNING|WARN|ERROR|INFO|DEBUG|FATAL|CRITICAL)\b"
)
_RECORD_START = re.compile(
    r"^(?:Traceback \(most recent|terminate called|During handling|The above exception|frame #|Exception raised from"
    r"|\s+what\(\):|\s+File \"|\t|[A-Za-z_][\w.]*(?:Error|Exception|Warning)\b|\[[FEWIV]\d{3,4} |[DIWEC]\d{4} \d\d:"
    r"|" + _NAMED_LEVEL + ")"
)
_WRAP_WIDTHS = frozenset({80, 100, 120, 160, 200})
#: C++ continuation lines: unprefixed, they belong to the record before them (§3.4)
_CPP_CONT = re.compile(r"^(?:\s+what\(\):|terminate called|Exception raised from|frame #|\t)")


@dataclass(slots=True)
class _Parsed:
    message: str
    kinds: list[str] = field(default_factory=list)
    rank: int | None = None  # [rankN]:
    label_rank: int | None = None  # srun / MPI / template / DeepSpeed / Lightning
    node_label: bool = False  # srun or pdsh label (node index when torchrun runs per node)
    local_rank: int | None = None  # torchrun [roleN]: / template local
    host: str | None = None
    pid: int | None = None
    t_wall: datetime | None = None
    severity: str | None = None
    origin: str | None = None
    repeat: int | None = None


def _accepted_hosts(texts: list[str]) -> set[str]:
    """pdsh host labels: tokens that start several lines, or sit before a known inner prefix."""
    counts: dict[str, int] = {}
    hosts: set[str] = set()
    for t in texts:
        m = _PDSH.match(t) if t[:1].isascii() and (t[:1].isalpha() or t[:1].isdigit()) else None
        if not m or _NOT_HOST.search(m.group(1)):
            continue
        tok = m.group(1)
        rest = t[m.end() :]
        if rest.startswith(("[rank", "[default", "(")) or _CPP.match(rest) or _GLOG.match(rest) or _NCCL.match(rest):
            hosts.add(tok)
        if re.search(r"[\d-]", tok):
            counts[tok] = counts.get(tok, 0) + 1
    hosts.update(t for t, n in counts.items() if n >= 2)
    return hosts


def _role_start(c: str) -> bool:
    """Can ``c`` start ``[A-Za-z_]`` (a torchrun role, a template's role, ``rank``, ``RANK``)?"""
    return "a" <= c <= "z" or "A" <= c <= "Z" or c == "_"


def _strip(text: str, hosts: set[str], ctx: FileContext, allow_srun: bool = True) -> _Parsed:
    """Peel every prefix layer off one logical line (no line numbers: already gone)."""
    # Every pattern here is anchored at the start; a cheap test of the first characters skips the
    # ones that cannot match there (this runs on every line of every block).
    p = _Parsed(message=text)
    s = text
    m = _PDSH.match(s) if hosts else None  # a pdsh label counts only when it is an accepted host
    if m and m.group(1) in hosts:
        p.host, p.node_label = m.group(1), True
        p.kinds.append("pdsh")
        s = s[m.end() :]
    c, c1 = s[:1], s[1:2]
    m = _MPI.match(s) if c == "[" and c1.isdigit() else None
    if m:
        p.label_rank = i32(m.group(2) if m.group(2) is not None else m.group(1))
        p.kinds.append("mpi")
        s = s[m.end() :]
    elif allow_srun and (c.isdigit() or c.isspace()) and (m := _SRUN.match(s)):
        p.label_rank, p.node_label = i32(m.group(1)), True
        p.kinds.append("srun")
        s = s[m.end() :]
    elif c == "[" and c1.isdigit() and (m := _HYDRA.match(s)):
        p.label_rank = i32(m.group(1))
        p.kinds.append("mpi")
        s = s[m.end() :]
    while s[:1] == "(" and (m := _RAY.match(s)):
        p.pid = i64(m.group("pid"))
        if m.group("ip"):
            p.host = m.group("ip")
        if m.group("rank") is not None:
            p.label_rank = i32(m.group("rank"))
        p.kinds.append("ray")
        s = s[m.end() :]
    if "ray" in p.kinds:
        r = _RAY_REPEAT.search(s)
        if r:
            p.repeat = int(r.group(1))
            p.kinds.append(f"ray_repeated={p.repeat}")
            s = s[: r.start()].rstrip()
    m = _RANK.match(s) if s.startswith("[rank") else None
    # "[" then [A-Za-z_]: a torchrun or template tag may follow (never where ``[rankN]:`` starts the line:
    # the template needs a "|", and torchrun's tag would be role "rank", which it leaves to _RANK)
    if m is None and s[:1] == "[" and _role_start(s[1:2]):
        m = _TEMPLATE.match(s)
        if m:
            p.label_rank, p.local_rank = i32(m.group("r")), i32(m.group("lr"))
            p.node_label = False
            p.kinds.append("torchrun")
            s = s[m.end() :]
        else:
            m = _TORCHRUN.match(s)
            if m and m.group("role") != "rank":
                p.local_rank = i32(m.group("lr"))
                p.kinds.append("torchrun")
                s = s[m.end() :]
        m = _RANK.match(s) if s.startswith("[rank") else None
    if m:
        p.rank = i32(m.group(1))
        p.kinds.append("rank")
        s = s[m.end() :]
    m = _APP_RANK.match(s) if s[:1] == "[" and s[1:2] in ("R", "r") else None
    if m:
        p.label_rank = i32(m.group(1))
        p.kinds.append("app_rank")
        s = s[m.end() :]
    s = _strip_header(s, p, ctx)
    for _ in range(_MAX_CHAIN):
        rest = _peel_inner(s, p, ctx)
        if rest is None:
            break
        s = rest
    p.message = s
    return p


#: layers peeled after the first header (a chain seldom has more than three)
_MAX_CHAIN = 6
#: level words a header of :func:`_strip_header` may start with (vLLM, ``logging``'s old format, Rich)
_LEVEL_WORDS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")


def _peel_inner(s: str, p: _Parsed, ctx: FileContext) -> str | None:
    """One more layer of a prefix chain, found after the layers :func:`_strip` took in their usual
    order: an app logger's header wrapping a torchrun line (``[RANK 1] 2025-01-01 12:00:00 [ERROR]
    trainer: [rank1]: Traceback ...``), a glog header after that, a kubectl/syslog time inside an app
    logger's message ... Returns the rest, or None when ``s`` starts with no layer.

    A rank, local rank or label already found is kept (the outer layer said it first); time, host,
    pid, severity and origin come from the innermost layer that has them, as for the first header.
    """
    if not s or "nccl" in p.kinds or "rich_box" in p.kinds:
        return None
    c = s[0]
    if not (
        c == "["
        or c.isdigit()
        or (c in "DIWECFV" and s[1:2].isdigit())
        or s.startswith(_LEVEL_WORDS)
        or (s[:3] in _MONTHS and s[3:4] == " ")
    ):
        return None  # most messages: nothing here can be a layer
    if s[0] == "[" and _role_start(s[1:2]):
        m = _TEMPLATE.match(s)
        if m:
            if p.local_rank is None:
                p.label_rank = p.label_rank if p.label_rank is not None else i32(m.group("r"))
                p.local_rank = i32(m.group("lr"))
            p.kinds.append("torchrun")
            return s[m.end() :]
        m = _TORCHRUN.match(s)
        if m and m.group("role") != "rank":
            if p.local_rank is None:
                p.local_rank = i32(m.group("lr"))
            p.kinds.append("torchrun")
            return s[m.end() :]
        m = _RANK.match(s) if s.startswith("[rank") else None
        if m:
            if p.rank is None:
                p.rank = i32(m.group(1))
            p.kinds.append("rank")
            return s[m.end() :]
        m = _APP_RANK.match(s) if s[1] in ("R", "r") else None
        if m:
            if p.label_rank is None:
                p.label_rank = i32(m.group(1))
            p.kinds.append("app_rank")
            return s[m.end() :]
    m = _OUT_ISO.match(s) if s[0].isdigit() else (_OUT_SYSLOG.match(s) if s[:3] in _MONTHS else None)
    if m:
        if s[0].isdigit():
            p.t_wall = _rfc3339(m) or p.t_wall
            p.kinds.append("timestamp")
        else:
            p.host = m.group("host")
            p.pid = i64(m.group("pid")) if m.group("pid") else p.pid
            p.t_wall = _syslog_time(m, ctx) or p.t_wall
            p.kinds.append("syslog")
        return s[m.end() :]
    n = len(p.kinds)
    rest = _strip_header(s, p, ctx)
    if len(p.kinds) > n and rest != s:
        return rest
    return None


#: first characters the anchored header patterns below need (the patterns themselves decide)
_CPP_SEV = frozenset("FEWIV")
_GLOG_SEV = frozenset("DIWECFV")
_PY_OLD_FIRST = frozenset("DIWEC")


def _strip_header(s: str, p: _Parsed, ctx: FileContext) -> str:
    c, c1 = s[:1], s[1:2]
    bracket = c == "["
    dated = bracket and c1.isdigit()  # "[2025-...": DeepSpeed, Python 2.3, app loggers, NCCL, sglang
    m = _CPP.match(s) if bracket and c1 in _CPP_SEV else None
    if m:
        p.severity, p.origin = m.group("sev"), f"{m.group('file')}:{m.group('line')}"
        if m.group("md"):
            p.t_wall = _glog_time(m.group("md"), m.group("hms"), m.group("frac"), ctx)
        p.kinds.append("glog_cpp")
        return s[m.end() :]
    m = _GLOG.match(s) if c in _GLOG_SEV else None
    if m:
        p.severity, p.origin = m.group("sev"), f"{m.group('file')}:{m.group('line')}"
        p.t_wall = _glog_time(m.group("md"), m.group("hms"), m.group("frac"), ctx)
        f = m.group("file")
        if "/" in f or f.endswith(".py"):  # torch._logging: the emitter's pid; real glog: a thread id
            p.pid = i64(m.group("pid"))
        p.kinds.append("glog")
        return s[m.end() :]
    m = _DEEPSPEED.match(s) if dated else None
    if m:
        p.severity, p.origin = _LEVELS.get(m.group("lvl"), m.group("lvl")[:1]), m.group("where")
        p.t_wall = _iso_time(m.group("date"), m.group("hms"), int(m.group("ms")) * 1000, ctx)
        if m.group("r") is not None and not m.group("r").startswith("-"):
            p.label_rank = i32(m.group("r"))
        p.kinds.append("deepspeed")
        return s[m.end() :]
    m = _PY_23.match(s) if dated else None
    if m:
        p.severity, p.origin = _LEVELS.get(m.group("lvl"), m.group("lvl")[:1]), m.group("logger")
        p.t_wall = _iso_time(m.group("date"), m.group("hms"), int(m.group("ms")) * 1000, ctx)
        p.kinds.append("pylog")
        return s[m.end() :]
    m = _PY_OLD.match(s) if c in _PY_OLD_FIRST else None
    if m:
        p.severity, p.origin = _LEVELS[m.group("lvl")], m.group("logger")
        p.kinds.append("pylog")
        return s[m.end() :]
    m = _PY_NAMED.match(s) if (c.isalpha() or c == "_") and ": [" in s[:220] else None
    if m:
        p.severity, p.origin = _LEVELS[m.group("lvl")], m.group("logger")
        p.kinds.append("pylog")
        return s[m.end() :]
    m = _LIGHTNING.match(s) if s.startswith("[rank: ") else None
    if m:
        p.label_rank = i32(m.group(1))
        p.kinds.append("lightning")
        return s[m.end() :]
    m = _APP.match(s) if c in "[0123456789" and (dated or not bracket) else None
    if m:
        lvl = m.group("l1") or m.group("l2") or m.group("l3") or m.group("l4")
        p.severity = _LEVELS.get(lvl, lvl[:1])
        p.origin = m.group("n1") or m.group("w2") or m.group("n2") or m.group("w3") or m.group("n4")
        us = int((m.group("frac") or "0")[:6].ljust(6, "0"))
        p.t_wall = _iso_time(m.group("date"), m.group("hms"), us, ctx)
        p.kinds.append("applog")
        return s[m.end() :]
    if s[:1] in "DIWEC" and (m := _VLLM.match(s)):
        p.severity, p.origin = _LEVELS[m.group("lvl")], f"{m.group('file')}:{m.group('line')}"
        p.t_wall = _glog_time(m.group("md").replace("-", ""), m.group("hms"), m.group("frac"), ctx)
        p.kinds.append("vllm")
        return s[m.end() :]
    m = _RICH.match(s) if s[:2].lstrip()[:1] in "[DIWEC" else None
    if m and len(m.group("lvl")) + len(m.group("pad")) == 9:
        p.severity = _LEVELS[m.group("lvl")]
        s = s[m.end() :]
        f = _RICH_FILE.search(s)
        if f:
            p.origin = f"{f.group('file')}:{f.group('line')}"
            s = s[: f.start()]
        p.kinds.append("rich")
        return s
    if s[:1] in "│┃╭╰┏┗":
        if _BOX_TOP.match(s):
            p.kinds.append("rich_box")
            return "Traceback (most recent call last):"
        if _BOX_EDGE.match(s):
            p.kinds.append("rich_box")
            return ""
        m = _BOX_SIDE.match(s)
        if m:
            p.kinds.append("rich_box")
            inner = m.group("inner").rstrip()
            return inner if inner.strip() else ""
    m = _NCCL.match(s) if (dated if bracket else (c.isalnum() or c in ("_", ".", "-"))) else None
    if m:
        p.host, p.pid, p.severity = m.group("host"), i64(m.group("pid")), m.group("lvl")
        if m.group("ts"):
            date, hms = m.group("ts").split(" ")
            p.t_wall = _iso_time(date, hms, 0, ctx)
            s = s[s.index("] ") + 2 :]
        p.kinds.append("nccl")
        return s  # the NCCL prefix stays: the nccl reader needs tid and device
    if dated and (m := _SGLANG.match(s)):
        us = int((m.group("frac") or "0")[:6].ljust(6, "0"))
        p.t_wall = _iso_time(m.group("date"), m.group("hms"), us, ctx)
        tags = dict(_SG_TAG.findall(m.group("tags") or ""))
        # TPn is the rank in the tensor-parallel group; with no DP/PP (or other) tag that group is
        # the whole job (EP splits the TP group, so an EP tag changes nothing): then it is the rank
        if "TP" in tags and set(tags) <= {"TP", "EP"}:
            p.label_rank = i32(tags["TP"])
        p.kinds.append("sglang")
        return s[m.end() :]
    return s


def continues_b(prev: bytes, line: bytes) -> bool:
    """The loader's continuation test (:func:`denpex_nb.ingest.scan.is_continuation`) for a line
    whose prefix chain holds an application logger's header (``[RANK 1] 2025-01-01 12:00:00 [ERROR]
    trainer: [rank1]:     body(...)``, also after collector wrappers and torchrun tags): what
    follows the header decides, as it would without the header."""
    from .scan import PREFIX_RUN, is_continuation, peel

    s = peel(line[:-1] if line.endswith(b"\r") else line)
    cut = PREFIX_RUN.match(s).end()
    m = APP_B.match(s, cut) if s[cut : cut + 1] in (b"[", b"0", b"1", b"2") else None
    if m is None:
        return False
    rest = s[m.end() :]
    return is_continuation(prev, rest) if rest else True  # a header with nothing after it: a blank line


def parse_header(text: str, ctx: FileContext | None = None) -> Line:
    """Strip the prefixes of a single line (no block context): handy for tests and notebooks."""
    return to_lines([(1, text)], ctx or FileContext(file="<text>"))[0]


# --- time ------------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _zone(name: str | None):
    if not name or str(name).upper() == "UTC":
        return timezone.utc
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(str(name))
    except (ImportError, KeyError, ValueError, OSError):  # unknown zone name (a user option): UTC
        return timezone.utc


#: a header's clock is local, the file's time UTC: a zone ahead of UTC (up to +14 h) dates its last
#: lines up to a day past the file's time
_ZONE_SLACK = timedelta(days=1)


def _year_of(when: tuple[int, int, int, int, int], mtime: Any, year: int | None) -> int:
    """The year of a year-less (month, day, hour, minute, second): with the file's time, the latest
    year that puts it no later than the file's time plus a day of zone slack (the closest year before
    the file was last written); else the stated year; else the current one."""
    if mtime:
        try:
            ref = datetime.fromtimestamp(float(mtime), timezone.utc)
        except (OverflowError, OSError, ValueError, TypeError):
            ref = None
        if ref is not None:
            try:
                limit = ref.replace(tzinfo=None) + _ZONE_SLACK
            except OverflowError:
                limit = ref.replace(tzinfo=None)
            last = (limit.month, limit.day, limit.hour, limit.minute, limit.second)
            return limit.year if when <= last else limit.year - 1
    if year:
        return int(year)
    return datetime.now(timezone.utc).year


def local_to_utc(dt: datetime, ctx: FileContext) -> datetime:
    tz = _zone(ctx.options.get("tz"))
    if tz is timezone.utc:
        return dt.replace(tzinfo=tz)
    return dt.replace(tzinfo=tz).astimezone(timezone.utc)


def _glog_time(md: str, hms: str, frac: str | None, ctx: FileContext) -> datetime | None:
    base = _glog_second(md, hms, ctx.year, ctx.options.get("mtime"), ctx.options.get("tz"))
    if base is None:
        return None
    return base.replace(microsecond=int((frac or "0")[:6].ljust(6, "0")))


@lru_cache(maxsize=4096)
def _glog_second(md: str, hms: str, year: int | None, mtime: Any, tz: Any) -> datetime | None:
    """The UTC time of a year-less header, to the second (cached: lines share seconds)."""
    try:
        month, day = divmod(int(md), 100)
        h, mi, s = (int(x) for x in hms.split(":"))
        local = datetime(_year_of((month, day, h, mi, s), mtime, year), month, day, h, mi, s)
    except (ValueError, OverflowError, TypeError):
        return None
    zone = _zone(tz)
    return local.replace(tzinfo=zone) if zone is timezone.utc else local.replace(tzinfo=zone).astimezone(timezone.utc)


def _iso_time(date: str, hms: str, us: int, ctx: FileContext) -> datetime | None:
    try:
        y, mo, d = (int(x) for x in date.split("-"))
        h, mi, s = (int(x) for x in hms.split(":"))
        return local_to_utc(datetime(y, mo, d, h, mi, s, us), ctx)
    except (ValueError, OverflowError):
        return None


# --- the block -------------------------------------------------------------------------------

#: the level word after an NCCL prefix (a merged line is split only past it)
_NCCL_LEVEL = re.compile(r" NCCL [A-Z]+\b")


def _split_merged(text: str, hosts: set[str], ctx: FileContext) -> list[tuple[str, _Parsed | None]]:
    """Split a physical line where a second rank's output starts (offset > 0 past the prefixes).

    Returns (piece, parsed prefixes or None) so the caller need not strip an unsplit line twice.
    """
    p = _strip(text, hosts, ctx)
    if len(text) < 12:
        return [(text, p)]
    offset = len(text) - len(p.message)
    if "nccl" in p.kinds:  # the NCCL prefix stays in the message: skip past it
        m = _NCCL_LEVEL.search(text, offset)
        offset = m.end() if m else offset
    cuts = _split_points(text, offset)
    if not cuts:
        return [(text, p)]
    pieces, start = [], 0
    for c in cuts:
        if c <= start:
            continue
        if start > 0 and not _strip(text[start:c], hosts, ctx).message.strip():
            continue  # only prefixes since the last cut: the same rank's header, keep together
        pieces.append(text[start:c])
        start = c
    pieces.append(text[start:])
    return [(x, None) for x in pieces if x]


def _has_prefix(text: str, hosts: set[str], ctx: FileContext) -> bool:
    p = _strip(text, hosts, ctx)
    return bool(p.kinds)


def _piece_spans(n: int, count: int, offsets: list[int] | None, skip: int, pieces: list[str]) -> list[tuple[int, int]]:
    """(first line number, physical lines) of each piece a logical line was split into (merged
    ranks): by where the piece starts and ends among the physical lines joined into it (``offsets``
    into the joined text; ``skip`` characters of prefixes came off its front)."""
    if len(pieces) == 1:
        return [(n, count)]
    from bisect import bisect_right

    spans, pos = [], skip
    for k, p in enumerate(pieces):
        a = 0 if k == 0 else bisect_right(offsets, pos) - 1
        end = pos + len(p)
        b = count - 1 if k == len(pieces) - 1 else bisect_right(offsets, max(pos, end - 1)) - 1
        spans.append((n + a, b - a + 1))
        pos = end
    return spans


def _is_wrapped_tail(
    prev: str, cur: str, hosts: set[str], ctx: FileContext, widths: frozenset[int] = _WRAP_WIDTHS
) -> bool:
    """Is ``cur`` the hard-wrapped continuation of ``prev`` (§1 "Hard-wrapped lines")? For pastes
    without a file-wide wrap width (see :mod:`.hardwrap` for those): a common width or an open
    bracket."""
    if not cur or not prev:
        return False
    at_width = len(prev) in widths
    open_ = prev.count("(") > prev.count(")") or prev.count("[") > prev.count("]")
    if not (at_width or open_):
        return False
    if _RECORD_START.match(cur) or _CPP_CONT.match(cur):
        return False
    cur_prefixed = _has_prefix(cur, hosts, ctx)
    if cur_prefixed:
        return False
    if _has_prefix(prev, hosts, ctx):
        return True
    # neither carries a prefix: only a cut exactly at a wrap width, never an indented line, never a
    # line that starts like the one before it (records of one format that happen to be that long)
    return at_width and not cur[:1].isspace() and cur[:4] != prev[:4]


def _is_rich_tail(cur: str, hosts: set[str], ctx: FileContext) -> bool:
    """Is ``cur`` the wrapped tail of a Rich log record's message: indented, no header of its own."""
    if not cur[:1].isspace() or not cur.strip() or _RECORD_START.match(cur) or _CPP_CONT.match(cur):
        return False
    return not _has_prefix(cur, hosts, ctx)


def _join(joined: str, last: str, cur: str, widths: frozenset[int] = _WRAP_WIDTHS) -> str:
    """Append a wrapped tail: verbatim after a cut at a wrap width (mid-token), else with a space."""
    if len(last) in widths or last.endswith((" ", "(", "[")) or cur.startswith((" ", ")", "]")):
        return joined + cur
    return joined + " " + cur


def to_lines(physical: list[tuple[int, str]], ctx: FileContext) -> list[Line]:
    """Normalise one block of consecutive physical lines into logical :class:`Line` objects.

    ``physical`` holds (1-based line number, decoded text without newline or CR). The result
    keeps file order; merged lines yield several Lines with one ``lineno``; wrapped lines yield
    one Line with ``n_lines > 1``. Odd text is no error; a bug raises (the loader keeps the block
    unparsed and reports it, see :mod:`denpex_nb.ingest.scan`).
    """
    if not physical:
        return []
    return _to_lines(physical, ctx)


#: line-start prefixes that ordinary text can look like (``12: ``, ``[3] x``, ``host: ``, ``5Z ``, a
#: level word): in a hard-wrapped file they mark a new line only where the head line has them too
_WEAK_KINDS = frozenset({"srun", "mpi", "pdsh", "cut_time", "rich"})


def _line_start(text: str, ctx: FileContext) -> tuple[list[str], list[str]]:
    """(collector wrapper kinds, launcher/rank/header kinds) at the start of a physical line."""
    body, outer = _peel_outer(strip_ansi(text), ctx)
    return outer.kinds, _strip(body, set(), ctx).kinds


def _is_hard_wrap_tail(text: str, head: tuple[list[str], list[str]], ctx: FileContext) -> bool:
    """In a file hard-wrapped at a known width: is ``text`` (the physical line after one that fills
    the width) the rest of that logical line, whose first physical line had the prefixes ``head``?

    A tail carries none of the file's line-start prefixes: no collector wrapper; when the head had
    none, no launcher/rank tag or header either, and nothing that starts a record of its own (an
    unprefixed ``terminate called`` after a ``[rank1]:`` line is C++ stderr, not a tail; after an
    unprefixed head any exception-like start counts too, after a tagged one only whole phrases: a
    cut leaves ``meError: ...``). Prefixes that ordinary text can look like count only when the
    head has the same kind.
    """
    if not text:
        return False
    outer, inner = _line_start(text, ctx)
    head_outer, head_inner = head
    if any(k not in _WEAK_KINDS or k in head_outer for k in outer):
        return False
    if head_outer:
        return True
    if any(k not in _WEAK_KINDS or k in head_inner for k in inner):
        return False
    if head_inner:  # after a tagged line: unprefixed C++ stderr and traceback heads, not a cut word ("meError:")
        return not (_CPP_CONT.match(text) or _OWN_RECORD.match(text))
    return not (_RECORD_START.match(text) or _CPP_CONT.match(text))


#: whole phrases that start a record of their own even where the line before was cut at the width
_OWN_RECORD = re.compile(
    r"^(?:Traceback \(most recent call last\)|During handling of|The above exception was"
    r"|Fatal Python error|\s+File \"|" + _NAMED_LEVEL + ")"
)


def _unwrap(
    physical: list[tuple[int, str]], width: int, ctx: FileContext
) -> list[tuple[int, int, str, list[int] | None]]:
    """Join the physical lines of a file hard-wrapped at ``width`` (:mod:`.hardwrap`) into logical
    lines: (first line number, physical lines, text joined verbatim, offset of each piece in it)."""
    from .hardwrap import MAX_PIECES, at_width

    out: list[tuple[int, int, str, list[int] | None]] = []
    i, n = 0, len(physical)
    while i < n:
        first, text = physical[i]
        j = i + 1
        if at_width(text, width) and j < n:
            head = _line_start(text, ctx)
            pieces = [text]
            last = text
            while (
                j < n
                and physical[j][0] == first + len(pieces)
                and at_width(last, width)
                and len(pieces) < MAX_PIECES
                and _is_hard_wrap_tail(physical[j][1], head, ctx)
            ):
                last = physical[j][1]
                pieces.append(last)
                j += 1
            if len(pieces) > 1:
                offsets, k = [], 0
                for p in pieces:
                    offsets.append(k)
                    k += len(p)
                out.append((first, len(pieces), "".join(pieces), offsets))
                i = j
                continue
        out.append((first, 1, text, None))
        i = j
    return out


def _to_lines(physical: list[tuple[int, str]], ctx: FileContext) -> list[Line]:
    width = ctx.options.get("wrap_width")
    # hard-wrapped lines joined first (n, physical lines, text, piece offsets); else each line alone
    groups = _unwrap(physical, int(width), ctx) if width else None
    raw_texts = [t for _, t in physical] if groups is None else [g[2] for g in groups]
    texts = [strip_ansi(t) for t in raw_texts]
    texts = [_LOST_SGR.sub("", t) if "m" in t and _SGR_HINT.search(t) else t for t in texts]
    peeled = [_peel_outer(t, ctx) for t in texts]
    bodies = [b for b, _ in peeled]
    ln_kind = _line_number_kind(bodies)
    stripped: list[tuple[int, str, str | None, _Outer]] = []
    for n, (b, outer) in zip([x[0] for x in (physical if groups is None else groups)], peeled):
        body, fname = _strip_line_number(b, ln_kind)
        stripped.append((n, body, fname, outer))
    hosts = _accepted_hosts([b for _, b, _, _ in stripped])
    # the width rule of pastes without a file-wide width (below) is off where the width is known
    widths = frozenset() if width else _WRAP_WIDTHS

    # split merged lines, then join wrapped ones
    logical: list[list[Any]] = []
    for k, (n, body, fname, outer) in enumerate(stripped):
        pieces = _split_merged(body, hosts, ctx)
        count, offsets = (1, None) if groups is None else (groups[k][1], groups[k][3])
        first = pieces[0][0]
        if (
            count == 1
            and logical
            and logical[-1][0] + logical[-1][1] == n
            and not outer.kinds
            and _is_wrapped_tail(logical[-1][3], first, hosts, ctx, widths)
        ):
            prev = logical[-1]
            prev[2] = _join(prev[2], prev[3], first, widths)
            prev[3] = first
            prev[1] += 1
            prev[5] = None
            pieces = pieces[1:]
        elif (
            count == 1
            and logical
            and logical[-1][7]
            and logical[-1][0] + logical[-1][1] == n
            and len(pieces) == 1
            and _is_rich_tail(first, hosts, ctx)
        ):
            # Rich wrapped its message column: the tail goes before the right-aligned file column
            prev = logical[-1]
            f = _RICH_FILE.search(prev[2])
            at = f.start() if f else len(prev[2])  # no file column after all: the tail goes last
            prev[2] = prev[2][:at] + " " + first.strip() + prev[2][at:]
            prev[3] = first
            prev[1] += 1
            prev[5] = None
            pieces = []
        if offsets is None:
            for piece, parsed in pieces:
                # [lineno, n_lines, joined text, last physical segment (for the width test), grep
                #  file, parsed, outer wrappers, a Rich log record with its file column (its tail may wrap)]
                rich = parsed is not None and parsed.origin is not None and "rich" in parsed.kinds
                logical.append([n, count, piece, piece, fname, parsed, outer, rich])
            continue
        spans = _piece_spans(n, count, offsets, len(raw_texts[k]) - len(body), [p for p, _ in pieces])
        for (piece, parsed), (pn, pcount) in zip(pieces, spans):
            rich = parsed is not None and parsed.origin is not None and "rich" in parsed.kinds
            # "\0": a hard-wrapped line ended short of the width, the paste rule never joins after it
            logical.append([pn, pcount, piece, "\0", fname, parsed, outer, rich])

    lines: list[Line] = []
    prev_line: Line | None = None
    for n, count, text, _, fname, parsed, outer, _rich in logical:
        p = parsed or _strip(text, hosts, ctx)
        file_rank = _rank_of_file(fname) if fname else outer.rank
        local = p.local_rank if p.local_rank is not None else ctx.local_rank_hint
        rank = p.rank
        if rank is None:
            rank = ctx.rank_hint if ctx.rank_hint is not None else file_rank
        if (
            rank is None
            and prev_line is not None
            and prev_line.rank is not None
            and _CPP_CONT.match(p.message)
            and "rank" not in p.kinds
            and prev_line.local_rank == local
        ):
            rank = prev_line.rank
        if rank is None and p.label_rank is not None and not (p.node_label and p.local_rank is not None):
            rank = p.label_rank
        if rank is None and local is not None and not p.node_label:
            rank = local
        line = Line(
            lineno=n,
            text=p.message,
            raw=text,
            n_lines=count,
            rank=rank,
            local_rank=local,
            host=p.host or outer.host,
            pid=p.pid if p.pid is not None else outer.pid,
            t_wall=p.t_wall or outer.t_wall,
            severity=p.severity,
            origin=p.origin,
            prefixes=tuple(outer.kinds) + tuple(p.kinds),
        )
        lines.append(line)
        prev_line = line
    return lines


def wrap_widths() -> frozenset[int]:
    """The wrap widths treated as hard wraps (shared with the loader's continuation test)."""
    return _WRAP_WIDTHS

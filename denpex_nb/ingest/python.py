"""Python-side evidence: tracebacks (attached to their rank), OOM, the torchrun agent's lines and
ChildFailedError table, ``mp.spawn`` exceptions, Lightning's rank banner and deprecation
warnings for collectives (docs/formats.md §8).

Tracebacks of several ranks interleave in a torchrun stream, so records are kept per rank while
a block is read; each finished traceback becomes one ``exception`` row (``oom`` when it is an
out-of-memory error) whose message is the final exception line plus its continuation lines.

A traceback that passes through a ``torch.distributed`` collective is collective evidence: its
row's ``op`` is the canonical op of the last collective call in it (the innermost frame in
``torch/distributed/distributed_c10d.py`` / ``c10d_logger.py`` whose function is a collective,
else a ``dist.<op>(`` / ``torch.distributed.<op>(`` source line), and ``collective_call`` holds
the call's text (the user's source line, e.g. ``dist.broadcast(t, src=0)``).

Tracebacks are also read when they come as pasted: without their ``Traceback`` line (the paste
starts at a ``File "..."`` frame), with a logger header on every line (vLLM, Ray: a header like the
traceback's own first one does not cut it), as a Rich box (``x.py:8 in f`` frames), or announced
by a message on the ``Traceback`` line itself (vLLM's ``Exception in worker W while processing
method M: <message>, Traceback (most recent call last):``: when the exception line never comes,
the row's message is that ``<message>``). A traceback that ends without its exception line gives
an ``exception`` row whose message is :data:`denpex_nb.incident.TRUNCATED_TRACEBACK` plus
`` (last: <last line>)``. Each traceback of a worker that names only a pid is kept apart per pid.
An exception Python reports it ignored (``Exception ignored in: <... __del__ ...>`` and the traceback
after it: raised in a destructor, a callback or at exit, it never reached the program) is a
``warning`` row of category :data:`denpex_nb.vocab.IGNORED_EXCEPTION` at the report's line, its
``n_traceback_lines`` spanning the traceback (the loader then excuses the lines of that span).

Also read: Python warnings from ``torch/distributed/`` (and ``torch/nn/parallel/distributed.py``):
``file.py:N: UserWarning: message``, its further unindented message lines and its indented source
line become one ``warning`` row (a lowercase line after a letter joins without a break: a paste
hard-wrapped mid-word); ``Fatal Python error: Aborted`` (faulthandler) is a ``signal`` row with
the signal (SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL); launchers: DeepSpeed's own lines (origin
``runner.py:`` / ``launch.py:``, all consumed; ``global_rank_mapping`` gives a ``ranks`` row per
rank with ``host``, ``local_rank`` and ``world_size``; ``... exits with return code = N`` and
``Killing subprocess N`` are ``agent`` rows; ``[cmd] exits with return code`` names the command line
of the *last* process DeepSpeed started, not the failed one, so its ``--local_rank`` goes to
``launched_last_local_rank``, never ``local_rank``), Ray's ``A worker died or was killed`` (an
``agent`` row with the dead worker's ``pid``, its IP as ``host``, ``launcher`` = ``ray``), torchrun's elastic start (``Starting elastic_operator``
and the ``Rendezvous complete for workers. Result:`` block: a ``ranks`` row per ``global_ranks``
entry with ``local_rank`` and ``world_size`` from ``global_world_sizes``; the agent's later
``failed ... local_rank: L`` line in the same file gets the global rank it maps L to, with
``rank_basis`` saying so), Lightning's banner
(``distributed_backend=``, ``All distributed processes registered``).

Extra columns: ``exc_type``, ``n_traceback_lines``, ``collective_call``, ``call_site`` (innermost
frame outside site-packages: where the failing call was made), ``frames`` (exception rows with a
traceback: ``path:line in func`` per frame, newline-joined, innermost last, at most 30: the
innermost), ``device`` (OOM), ``local_rank`` and ``pid`` (agent lines, ChildFailedError rows, an
announced exception, ``Fatal Python error``), ``host``, ``root_cause``, ``error_file``
(ChildFailedError), ``spawn_index`` (mp.spawn), ``origin`` (warnings: the warning's ``file:line``)
and ``warning_category``; ranks ``world_size``. Agent lines name only a *local* rank, so their
``rank`` stays empty; the loader joins them to global ranks through the pid.
"""

from __future__ import annotations

import re
from datetime import datetime

from ..incident import TRUNCATED_TRACEBACK
from ..ops import normalize_op
from ..processes import signal_name
from ..signals import OUT_OF_SYNC
from ..vocab import IGNORED_EXCEPTION, ErrorKind
from ._text import add_error, error_row, i32, i64
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "python"

_TB_START = re.compile(r"^Traceback \(most recent call last\):")
#: Python's report of an exception it ignored (``sys.unraisablehook``: raised in a ``__del__``, a weakref
#: or ctypes callback, at exit), the traceback that follows is that exception's
_IGNORED = re.compile(r"^Exception ignored (?:in|on|while)\b")
#: a traceback header that names whose traceback it is: a distributed checkpoint's CheckpointException
#: re-raises every failed rank's traceback on each rank, each under ``Traceback (...): (RANK R)``
_TB_OF_RANK = re.compile(r"^Traceback \(most recent call last\): \(RANK (\d{1,10})\)")
#: a message that announces the traceback after it on the same line (vLLM's worker: "Exception in
#: worker X while processing method M: <exception message>, Traceback (most recent call last):")
#: a message that ends in the start of a traceback (greedy: one pass; the message must hold a word)
_TB_TAIL = re.compile(r"^(?P<msg>\S.*), Traceback \(most recent call last\):\s*$")
_WORD = re.compile(r"\w")
_CHAIN = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_FRAME = re.compile(r"^\s")
#: the exception line; Ray wraps a worker's exception as ``RayTaskError(OutOfMemoryError): ...``
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?:\([A-Za-z_][\w.]{0,100}\))?(?::\s?(?P<msg>.*))?$")
_EXC_NAMED = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\w*)"
    r"(?:\([A-Za-z_][\w.]{0,100}\))?: ?(?P<msg>.*)$"
)
#: a whole traceback flattened onto one line by whatever carried it (a platform's failure reason:
#: SageMaker's ``AlgorithmError: ExecuteUserScriptError: ... Traceback (most recent call last): File
#: "mnist.py", line 257, in <module> ... RuntimeError: Dataset not found``, a job status's ``ErrorMessage
#: "Traceback (most recent call last):\\n  File \\"train.py\\" ...``, a UI that joins lines): its last
#: frame, then the exception it raised, which is the process's error (not the wrapper's name before it)
_FLAT_TB = re.compile(r"Traceback \(most recent call last\):")
_FLAT_FRAME = re.compile(r"File \\?\"[^\"\\]{1,400}\\?\", line \d+, in [\w<>.]+")
_FLAT_EXC = re.compile(
    r"(?:(?<![\w.])|(?<=\\n))(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\w*)"
    r"(?:\([A-Za-z_][\w.]{0,100}\))?: ?(?P<msg>.*)$"
)
_OOM = re.compile(r"out of memory|OutOfMemoryError|can't allocate memory", re.I)
_OUT_OF_SYNC = re.compile(OUT_OF_SYNC)
_GPU = re.compile(r"\bGPU (\d+)")
_AGENT_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\) of binary: (.*)$")
_CLOSING = re.compile(r"Sending process (\d+) closing signal (SIG\w+)")
_SPAWN_TERM = re.compile(r"Terminating process (\d+) via signal (SIG\w+)")
_SPAWN_EXITED = re.compile(
    r"ProcessExitedException: process (\d+) terminated with (?:signal (SIG\w+)|exit code (-?\d+))"
)
_SPAWN_RAISED = re.compile(r"ProcessRaisedException:")
_SPAWN_PROC = re.compile(r"^-- Process (\d+) terminated with the following error:")
_CFE = re.compile(r"ChildFailedError:")
_FIELD = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*: ?(.*)$")
_CFE_RANK = re.compile(r"(?<!\d)(-?\d+) \(local_rank: (\d+)\)")
_CFE_EXIT = re.compile(r"(?<!\d)(-?\d+) \(pid: (\d+)\)(?:\s+\((SIG\w+)\))?")
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
#: a frame of a Rich traceback box (``/path/file.py:8 in <module>``, the box sides already removed)
_RICH_FRAME = re.compile(r"^\s*(\S+?):(\d+) in (\S+)\s*$")
_MAX_FRAMES = 30
# Python warnings from torch.distributed code (formatwarning: "file.py:12: UserWarning: message", the
# message possibly over several lines, then the indented source line)
_DIST_WARNING = re.compile(
    r"^(?P<file>\S*?(?:torch[/\\]distributed[/\\]|torch[/\\]nn[/\\]parallel[/\\]distributed)\S*?\.py):(?P<line>\d+): "
    r"(?P<cat>[A-Z]\w*Warning): (?P<msg>.*)$"
)
_WARN_SOURCE = re.compile(r"^\s+\S")
_ANY_WARNING = re.compile(r"\.py:\d+: [A-Z]\w*Warning: ")
# launchers: DeepSpeed's (its own logger lines from launcher/runner.py and launch.py), torchrun's
# elastic agent start, Lightning's banner
_DS_LAUNCHER = ("runner.py:", "launch.py:")
_DS_MAPPING = re.compile(r"global_rank_mapping=.*?\{(?P<body>.*)\}")
_DS_HOST_RANKS = re.compile(r"'(?P<host>[^']+)':\s*\[(?P<ranks>[\d,\s]*)\]")
#: DeepSpeed's "Process N exits with return code = C" / "[cmd] exits with ...": the literal tail is
#: found first and the part before it read backwards (a pattern that starts with ``\[.*`` is
#: quadratic on a line of brackets)
_DS_RETURN = re.compile(r" exits with return code = (?P<code>-?\d+)")
_DS_PROCESS = re.compile(r"Process (\d+)$")
_DS_KILL = re.compile(r"Killing subprocess (\d+)")
_DS_LOCAL = re.compile(r"--local_rank=(\d+)")
_ELASTIC = re.compile(
    r"Starting elastic_operator with launch configs|Rendezvous complete for workers"
    r"|Setting OMP_NUM_THREADS environment variable for each process|Starting worker group"
    r"|Rendezvous'ing worker group|Local worker group finished|Done waiting for other agents"
)
_ELASTIC_HINTS = ("elastic_operator", "Rendezvous", "OMP_NUM_THREADS", "worker group", "other agents")
_ELASTIC_KV = re.compile(r"^\s+(?P<k>[a-z_]+)\s*[=:] ?(?P<v>.*)$")
#: Ray Train's list of the worker group it started, one line per worker (v1's ``Started distributed worker
#: processes:``, v2's ``Started training worker group of size 4:``, then ``- (ip=10.0.0.1, pid=2788)
#: world_rank=0, local_rank=0, node_rank=0``, since Ray 2.7 with ``node_id=...`` first): the global rank,
#: local rank, node address and pid of every worker, as the launcher assigned them
_RAY_GROUP = re.compile(r"Started (?:distributed worker processes|training worker group of size (?P<n>\d{1,9})):?\s*$")
_RAY_WORKER_ROW = re.compile(
    r"^\s*- \((?:node_id=\w{1,200}, )?ip=(?P<ip>[0-9A-Za-z.:-]{1,200}), pid=(?P<pid>\d{1,10})\) "
    r"world_rank=(?P<r>\d{1,9}), local_rank=(?P<lr>\d{1,9}), node_rank=(?P<nr>\d{1,9})\s*$"
)
_LIGHTNING_BANNER = re.compile(
    r"^distributed_backend=\w+\s*$|^All distributed processes registered\. Starting with (\d+) processes"
)
#: Open MPI's reports of a failed process (help-mpirun.txt / help-errmgr-base.txt)
_MPI_NOTICED = re.compile(
    r"mpirun noticed that process rank (?P<rank>\d{1,9}) with PID (?P<pid>\S{1,20}) on node (?P<node>\S{1,200}) "
    r"exited (?:on signal (?P<sig>\d{1,3})|with status (?P<code>\d{1,9}))"
)
_MPI_NAME = re.compile(r"Process name:\s*\[\[\d{1,12},\d{1,12}\],(\d{1,9})\]")
_MPI_EXIT = re.compile(r"^\s*Exit code:\s*(-?\d{1,9})\s*$")
_MPI_PRIMARY = re.compile(r"Primary job\s+terminated normally, but \d{1,9} process(?:es)? returned")
_MPI_PEER_HOST = re.compile(r"^\s*Peer host:\s*(\S{1,200})\s*$")
#: Slurm's srun and slurmstepd, pdsh: "srun: error: node3: task 5: Exited with exit code 1" (a task is
#: a rank only when srun starts one process per rank), "srun: error: Node failure on node7",
#: "slurmstepd: error: *** STEP 1234.0 ON node3 CANCELLED AT ...", "pdsh@n1: node3: ssh exited with exit code 1"
_SRUN_TASK = re.compile(
    r"srun: error: (?P<host>[^\s:]{1,200}): tasks? (?P<task>[\d,\-\[\]]{1,100}): (?P<what>.{1,200})$"
)
_SIGNAL_RECEIVED = re.compile(r"[Ss]ignal (\d{1,3}) \((SIG[A-Z]{2,8})\) received by PID (\d{1,10})")
_SRUN_EXIT = re.compile(r"Exited with exit code (\d{1,9})")
_SHELL_SIGNALS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Terminated": "SIGTERM",
}
#: PaddlePaddle's launcher (paddle.distributed.launch) on the first failed container of its pod:
#: "Container rank 0 status failed cmd [...] code 1 log log/workerlog.0". The container's rank is its
#: index in the pod (pod.add_container), i.e. a local rank on that node, not the global rank
_PADDLE_FAILED = re.compile(
    r"Container rank (?P<local>\d{1,9}) status (?P<status>failed|FAILED)\b.{0,4000}? code (?P<code>-?\d{1,9})\b"
)
_SRUN_NODE = re.compile(r"srun: error: Node failure on (\S{1,200})")
_SLURM_CANCELLED = re.compile(r"\*\*\* (?:STEP|JOB) \S{1,60} ON \S{1,200} CANCELLED AT")
_PDSH_EXIT = re.compile(r"pdsh@([^\s:]{1,200}): ([^\s:]{1,200}): ssh exited with exit code (\d{1,9})")
#: a launcher's exception line without its traceback
_BARE_LAUNCHER_EXC = re.compile(
    r"^(?P<type>(?:[\w]{1,60}\.){0,8}(?:Rendezvous(?:Closed|Timeout)Error|RayActorError|ActorDiedError))\b"
    r"|^(?:RuntimeError: )?Horovod has been shut down\b"
)
#: Ray Train's trainer on a failed worker: "Worker 0 has failed."
_RAY_TRAIN_FAILED = re.compile(r"(?<!\w)Worker (\d{1,9}) has failed\b")
#: torchelastic's JSON events (``torchelastic.worker.status.FAILED``)
_ELASTIC_EVENT_RANK = re.compile(r'"global_rank":\s*(\d{1,9})')
_ELASTIC_EVENT_HOST = re.compile(r'"hostname":\s*"([^"]{1,200})"')
_DEATH_SIGNAL = re.compile(r"Received (?:Signals\.)?(SIG[A-Z]{2,8}|\d{1,3}) death signal")
_NEW_NODES = re.compile(r"Detected \d{1,9} new nodes")
#: torchelastic's error handler JSON: ``"message": "RendezvousClosedError: ..."``
_HANDLER_MESSAGE = re.compile(r'^\s*"message":\s*"(?P<msg>[A-Za-z_][\w.]{0,200}(?:Error|Exception)\b[^"]{0,2000})"')
#: Ray's raylet on a dead worker: "A worker died or was killed while executing a task ... Worker IP
#: address: X Worker port: N Worker PID: P Worker exit type: SYSTEM_ERROR"
_RAY_DIED = re.compile(r"\bworker died or was killed\b", re.I)
_RAY_WORKER_PID = re.compile(r"Worker PID: (\d{1,10})\b")
_RAY_WORKER_IP = re.compile(r"Worker IP address: ([0-9a-fA-F.:]{3,45})")
_FATAL = re.compile(r"^Fatal Python error: (?P<what>[A-Z][\w ]*?)\s*$")
_FATAL_SIGNALS = {
    "Aborted": "SIGABRT",
    "Segmentation fault": "SIGSEGV",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
_LIBRARY = re.compile(
    r"[/\\](?:site-packages|dist-packages|lib/python\d[\d.]*)[/\\]|^<frozen "
    r"|[/\\]torch[/\\](?:distributed|nn|multiprocessing|utils|autograd|_dynamo|_tensor\.py)"
    r"|[/\\]denpex_nb[/\\]trace\.py$"  # the opt-in tracer wraps every collective
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
        m = _frame_match(ln.text)
        if m:
            out.append((m.group(1), m.group(3), None))
        elif out and out[-1][2] is None and ln.text.strip() and not _MARKERS.match(ln.text) and ln.text[:1].isspace():
            path, func, _ = out[-1]
            out[-1] = (path, func, ln.text.strip())
    return out


def _frame_match(text: str) -> re.Match | None:
    """A frame line (``File "x.py", line 3, in f`` or a Rich box's ``x.py:3 in f``): groups path, line, func."""
    m = _FRAME_AT.match(text)
    if m is None and " in " in text and text[:1] == " ":
        m = _RICH_FRAME.match(text)
    return m


def frames_text(lines: list[Line]) -> str | None:
    """The traceback's frames as ``path:line in func``, one per line, innermost last (at most
    ``_MAX_FRAMES``, the innermost ones), or None without frames."""
    found = [f"{m.group(1)}:{m.group(2)} in {m.group(3)}" for ln in lines for m in [_frame_match(ln.text)] if m]
    return "\n".join(found[-_MAX_FRAMES:]) if found else None


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
        m = _frame_match(ln.text)
        if m and not _LIBRARY.search(m.group(1)):
            site = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
    return site


#: an exception line, bare (``AssertionError``) or with its message: never a frame's source line
_EXC_LINE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\w*(?:\([A-Za-z_][\w.]{0,100}\))?(?::.*)?\s*$"
)
#: Python 3.11's markers under a frame's source line (``~~~~^^^^``)
_CARETS = re.compile(r"^[\s~^]+$")


def _untagged(text: str) -> str:
    """``text`` without the one blank a launcher tag leaves before it (``[default0]: Traceback ...``,
    ``[1,0]<stderr>: File ...`` in a paste joined with spaces): Python's own indentation is never one
    blank, so that blank is the tag's."""
    return text[1:] if text[:1] == " " and text[1:2] not in (" ", "\t", "") else text


def _flat_traceback_exception(text: str) -> tuple[str, str] | None:
    """The exception a traceback flattened onto this one line raised (:data:`_FLAT_TB`): its type and
    its line, found after the traceback's last frame; None when the line holds no whole traceback."""
    t = _FLAT_TB.search(text)
    if t is None:
        return None
    frames = [f.end() for f in _FLAT_FRAME.finditer(text, t.end())]
    if not frames:
        return None
    m = _FLAT_EXC.search(text, frames[-1])
    if m is None:
        return None
    return m.group("type"), text[m.start() :].strip()


def _flat_layout(rec: _Record, text: str) -> bool:
    """Did this traceback lose its indentation: its first frame header (``File "...", line N, in f``)
    indented by at most one blank (a paste flattened onto one line and cut again at each launcher tag,
    ``[rank0]: File "x.py", line 3, in f [rank0]: g()``; a tag's blank is all the indentation left)?"""
    first = next((ln.text for ln in rec.lines[1:] if ln.text.strip()), text)
    return _FRAME_AT.match(first) is not None and len(first) - len(first.lstrip()) <= 1


def _flat_frame(rec: _Record, s: str) -> bool:
    """In a traceback of :func:`_flat_layout`, is the stripped line ``s`` part of a frame: a frame
    header, the source line right after one, or the carets under that? The exception line is then the
    first other line (a bare ``AssertionError`` too)."""
    if _FRAME_AT.match(s):
        return True
    before = [t for t in (ln.text.strip() for ln in rec.lines[1:]) if t]
    if not before or _EXC_LINE.match(s):
        return False
    if _FRAME_AT.match(before[-1]):
        return True  # the frame's source line
    return bool(_CARETS.match(s)) and len(before) >= 2 and _FRAME_AT.match(before[-2]) is not None


class _Record:
    """One traceback being read: its rank, its lines and (once seen) its exception line."""

    __slots__ = ("first", "lines", "exc", "msg_lines", "rank", "spawn", "announced", "ignored")

    def __init__(self, first: Line, rank: int | None, spawn: int | None, announced: str | None = None):
        self.first, self.lines, self.exc, self.msg_lines = first, [first], None, []
        self.rank, self.spawn = rank, spawn
        self.announced = announced  # the exception message printed before "Traceback" on its line
        self.ignored: Line | None = None  # Python's "Exception ignored in ..." line right before it

    def cut_in(self, line: Line) -> bool:
        """Is ``line`` another log record cutting into this traceback? A header like the
        traceback's own first line (vLLM and Ray print theirs on every line) is not one."""
        return line.severity is not None and (line.severity, line.origin) != (self.first.severity, self.first.origin)


def _key(line: Line):
    """Which open traceback a line may belong to: its rank, else (for worker prefixes that name
    only a process) its pid, else None."""
    if line.rank is not None:
        return line.rank
    if line.pid is not None and "ray" in line.prefixes:
        return ("pid", line.host, line.pid)
    return None


def _announced(msg: str) -> str:
    """The exception message of an announcing line: after the last ``: `` of its lead-in
    (``Exception in worker W while processing method M: <message>``), else all of it."""
    lead = re.match(r"^Exception in (?:worker|thread|process)\b[^:]*: ", msg)
    return msg[lead.end() :] if lead else msg


class PythonReader(TextReader):
    name = SOURCE
    # launcher lines keep a little per-file state (the agent's rank map, Open MPI's first-process
    # report); a line that reads it is consumed whatever the state, so a repeat is never unproductive
    blocks_alone = True
    needles = (
        b"Traceback",
        b"Error:",
        b"Error): ",
        b"Exception",
        b"out of memory",
        b"exitcode",
        b"closing signal",
        b"local_rank",
        b"Root Cause",
        b" FAILED",
        b"      : ",
        b"terminated with",
        b"via signal",
        b"FutureWarning",
        b"GLOBAL_RANK",
        b"Failures:",
        b"==========",
        b"Warning: ",
        b"[runner.py:",
        b"[launch.py:",
        b"elastic_operator",
        b"Rendezvous",
        b"OMP_NUM_THREADS",
        b"worker group",
        b"worker processes",
        b"world_rank=",
        b"distributed_backend=",
        b"distributed processes registered",
        b"Fatal Python error",
        b"died or was killed",
        b"mpirun noticed",
        b"mpirun detected",
        b"Process name:",
        b"Exit code:",
        b"Primary job",
        b"unexpectedly disconnected",
        b"Peer host:",
        b"has failed",
        b"worker.status.FAILED",
        b"Worker group",
        b"death signal",
        b"new nodes",
        b"error_handler",
        b"srun: error",
        b"Container rank",
        b"received by PID",
        b"slurmstepd",
        b"ssh exited",
        b"RayActorError",
        b"ActorDiedError",
        b"Horovod has been shut down",
        b'File "',
    )
    # 'File "' makes a traceback whose head was cut off (a paste from its middle) a block too
    # "==========" closes the Root Cause row of a ChildFailedError table (see _table); the "-" rules
    # are not needles: progress bars and separators would make too many ordinary lines candidates

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        st = {
            "open": {},
            "spawn": None,
            "root": False,
            "cfe": None,
            "last": None,
            "table": False,
            "elastic": None,
            "ignored": {},
        }
        i, n = 0, len(block)
        while i < n:
            line = block[i]
            if st["elastic"] is not None and not self._elastic_kv(line, st):
                self._finish_elastic(st, ctx, out)
            if st["elastic"] is None:
                m = _DIST_WARNING.match(line.text) if "Warning: " in line.text else None
                if m:
                    i = self._warning(block, i, m, ctx, out, st)
                    continue
                self._line(line, ctx, out, st)
            else:
                out.consume(line)
            i += 1
        self._finish_elastic(st, ctx, out)
        for rec in list(st["open"].values()):
            self._finish(rec, ctx, out, st)
        for head in st["ignored"].values():  # a report of an ignored exception that ends the block
            self._ignored(head, [], head.text.strip(), ctx, out)
        self._finish_cfe(st, ctx, out)
        head = st.get("cfe_header")
        if head is not None:  # the launcher said a child failed; which one was cut off
            add_error(
                out,
                error_row(
                    head,
                    ctx,
                    SOURCE,
                    ErrorKind.CHILD_FAILED,
                    "ChildFailedError: a worker failed (the table's failure rows are not in this excerpt)",
                ),
            )

    # --- warnings from torch.distributed code ------------------------------------------------

    def _warning(self, block: list[Line], i: int, m: re.Match, ctx, out, st) -> int:
        """A ``torch/distributed/...py:N: XWarning: message`` line, its message's further lines and
        its source line: one ``warning`` row. Returns the index of the next line to read."""
        head = block[i]
        body: list[Line] = []
        j = i + 1
        end = i + 1  # past the lines this warning takes
        while j < len(block) and j - i <= 20:
            ln = block[j]
            t = ln.text
            if (
                not t.strip()
                or ln.rank != head.rank
                or _ANY_WARNING.search(t)
                or _TB_START.match(t)
                or (ln.severity is not None and ln.severity != head.severity)
            ):
                break
            if _WARN_SOURCE.match(t):  # the indented source line closes the message
                body.append(ln)
                end = j + 1
                break
            body.append(ln)
            j += 1
        source = body[-1] if body and end > i + 1 else None
        msg_lines = body[:-1] if source is not None else []
        if source is None and body and m.group("msg")[-1:].isalpha() and body[0].text[:1].islower():
            msg_lines, end = body[:1], i + 2  # no source line (cut paste): only the wrapped tail is sure
        msg = m.group("msg").rstrip()
        for ln in msg_lines:
            t = ln.text.rstrip()
            # a paste hard-wrapped mid-word ("All-gathe" / "r order differs"): a lowercase start
            # after a letter joins without a break; anything else is a line of the message itself
            msg += t if msg[-1:].isalpha() and t[:1].islower() and "\n" not in msg else "\n" + t
        fut = _FUTURE.search(f"{m.group('cat')}: {msg}") if "deprecated" in msg else None
        add_error(
            out,
            error_row(
                head,
                ctx,
                SOURCE,
                ErrorKind.WARNING,
                f"{m.group('cat')}: {msg}",
                op=normalize_op(fut.group(1)) if fut else None,
                origin=f"{m.group('file')}:{m.group('line')}",
                warning_category=m.group("cat"),
            ),
        )
        out.consume(head)
        for ln in block[i + 1 : end]:
            out.consume(ln)
        st["last"] = None
        return end

    # --- launchers -----------------------------------------------------------------------------

    def _other_launcher(self, line: Line, text: str, ctx, out) -> bool:
        """What other launchers say when a worker ends badly: Open MPI (``mpirun noticed that process
        rank R ... exited on signal N``; ``mpirun detected that one or more processes exited with
        non-zero status ... The first process to do so was: Process name: [[J,S],R] Exit code: C``;
        ``Primary job terminated normally, but N process returned a non-zero exit code``; ``An MPI
        communication peer process has unexpectedly disconnected`` ... ``Peer host: H``), Ray Train
        (``Worker N has failed.``), torchelastic's JSON events (``torchelastic.worker.status.FAILED``
        with ``global_rank``), its agent (``Worker group FAILED``, ``Received N death signal``,
        ``Detected N new nodes``) and its error handler's JSON (``"message": "XError: ..."``).
        Each becomes an ``agent`` row with ``launcher`` naming who said it (an exception row for the
        error handler's message); ranks only where the launcher states them (an MPI rank is the
        job's rank when mpirun starts one process per rank, as Horovod and torch's MPI backend do)."""
        fs = out.__dict__.setdefault("_python_file_state", {})

        def agent(launcher: str, **kw) -> dict | None:
            kw.setdefault("rank", None)
            return add_error(out, error_row(line, ctx, SOURCE, ErrorKind.AGENT, text.strip(), launcher=launcher, **kw))

        m = _MPI_NOTICED.search(text) if "mpirun noticed" in text else None
        if m:
            code = -int(m.group("sig")) if m.group("sig") else None
            agent(
                "mpirun",
                rank=i32(m.group("rank")),
                pid=i64(m.group("pid")),
                host=m.group("node"),
                exit_code=None if m.group("sig") else i32(m.group("code")),
                signal=signal_name(code) if code is not None else None,
                rank_basis="Open MPI names the process by its MPI rank",
            )
            return True
        if "mpirun detected that one or more processes exited" in text:
            fs["mpi_first"] = True
            return True
        # (these two lines are consumed whatever the state, so that a block of them always yields
        # and the scanner's skip of unproductive repeats (blocks_alone) never hides a later one)
        m = _MPI_NAME.search(text) if "Process name:" in text else None
        if m:
            if fs.get("mpi_first"):
                fs["mpi_row"] = agent(
                    "mpirun", rank=i32(m.group(1)), first=True, rank_basis="Open MPI names the first process to exit"
                )
            return True
        m = _MPI_EXIT.match(text) if "Exit code:" in text else None
        if m:
            if fs.get("mpi_row") is not None:
                row, fs["mpi_row"], fs["mpi_first"] = fs["mpi_row"], None, False
                row["exit_code"] = i32(m.group(1))
                row["message"] += f"; exit code {m.group(1)}"
            return True
        if "Primary job" in text and _MPI_PRIMARY.search(text):
            agent("mpirun")
            return True
        if "peer process has unexpectedly disconnected" in text:
            fs["mpi_peer"] = agent("mpirun")
            return True
        m = _MPI_PEER_HOST.match(text) if "Peer host:" in text and fs.get("mpi_peer") is not None else None
        if m:
            fs["mpi_peer"]["peer_host"] = m.group(1)
            fs["mpi_peer"] = None
            return True
        m = _RAY_TRAIN_FAILED.search(text) if "has failed" in text else None
        if m:
            agent("ray train", rank=i32(m.group(1)), first=True, rank_basis="Ray Train's worker index is its rank")
            return True
        if "worker.status.FAILED" in text:
            m = _ELASTIC_EVENT_RANK.search(text)
            h = _ELASTIC_EVENT_HOST.search(text)
            agent("torchelastic event", rank=i32(m.group(1)) if m else None, host=h.group(1) if h else None)
            return True
        m = _SIGNAL_RECEIVED.search(text) if "received by PID" in text else None
        if m:
            # torchelastic's traceback field for a worker killed by a signal, here outside its table
            # (a table pasted with its layout flattened): that pid died of that signal
            agent("torchelastic", pid=i64(m.group(3)), signal=m.group(2), first=True)
            return True
        m = _SRUN_TASK.search(text) if "srun: error" in text else None
        if m:
            what = m.group("what")
            code = _SRUN_EXIT.search(what)
            sig = next((v for k, v in _SHELL_SIGNALS.items() if k in what), None)
            agent(
                "srun",
                host=m.group("host"),
                task=m.group("task"),
                exit_code=i32(code.group(1)) if code else None,
                signal=sig,
            )
            return True
        m = _PADDLE_FAILED.search(text) if "Container rank" in text else None
        if m:
            agent("paddle", local_rank=i32(m.group("local")), exit_code=i32(m.group("code")), first=True)
            return True
        m = _SRUN_NODE.search(text) if "Node failure" in text else None
        if m:
            agent("srun", peer_host=m.group(1))
            return True
        if "slurmstepd" in text and _SLURM_CANCELLED.search(text):
            agent("slurm", stopped=True)  # a cancellation (scancel, time limit): stopped from outside
            return True
        m = _PDSH_EXIT.search(text) if "ssh exited" in text else None
        if m:
            agent("pdsh", peer_host=m.group(2), exit_code=i32(m.group(3)))
            return True
        m = _BARE_LAUNCHER_EXC.match(text.strip()) if ("Error" in text or "shut down" in text) else None
        if m:
            # a launcher's exception line pasted without its traceback
            exc = m.group("type") or "HorovodShutdown"
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.EXCEPTION,
                    text.strip(),
                    rank=line.rank,
                    exc_type=exc.rsplit(".", 1)[-1],
                ),
            )
            return True
        if "Worker group FAILED" in text:
            agent("torchelastic")
            return True
        m = _DEATH_SIGNAL.search(text) if "death signal" in text else None
        if m:
            sig = m.group(1)
            agent("torchelastic", signal=sig if sig.startswith("SIG") else signal_name(-int(sig)), stopped=True)
            return True
        if "new nodes" in text and _NEW_NODES.search(text):
            agent("torchelastic", membership_change=True)
            return True
        if "error_handler" in text or "error_handler" in (line.origin or "") or "error_handler" in line.raw:
            return text.rstrip().endswith("{")  # its JSON follows (a logger header naming it is stripped)
        m = _HANDLER_MESSAGE.match(text) if '"message"' in text else None
        if m:
            msg = m.group("msg")
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.EXCEPTION,
                    msg.strip(),
                    rank=line.rank,
                    exc_type=msg.split(":", 1)[0],
                    launcher="torchelastic error handler",
                ),
            )
            return True
        return False

    def _launcher(self, line: Line, text: str, ctx, out, st) -> bool:
        """DeepSpeed's launcher lines, torchrun's elastic agent start, Ray Train's list of the workers it
        started, Lightning's banner: proof that the distributed machinery ran; rank maps and world sizes
        become ``ranks`` rows."""
        if "deepspeed" in line.prefixes and line.origin and line.origin.startswith(_DS_LAUNCHER):
            m = _DS_MAPPING.search(text) if "global_rank_mapping" in text else None
            if m:
                pairs = [
                    (h.group("host"), [i32(x) for x in re.findall(r"\d+", h.group("ranks"))])
                    for h in _DS_HOST_RANKS.finditer(m.group("body"))
                ]
                world = sum(len(r) for _, r in pairs)
                for host, ranks in pairs:
                    for local, r in enumerate(ranks):
                        out.ranks.append(
                            {
                                "rank": i32(r),
                                "host": host,
                                "local_rank": local,
                                "world_size": i32(world),
                                "source": SOURCE,
                                "file": ctx.file,
                                "line": line.lineno,
                            }
                        )
                return True
            m = _DS_RETURN.search(text) if "return code" in text else None
            head = text[: m.start()] if m else ""
            proc = _DS_PROCESS.search(head) if head.endswith(tuple("0123456789")) else None
            cmd = head[head.find("[") :] if head.endswith("]") and "[" in head else None
            if m and (proc or cmd):
                code = i32(m.group("code"))
                lr = _DS_LOCAL.search(cmd or "")
                # "[cmd] exits with return code": cmd is the command line of the LAST process the
                # launcher started (its loop variable), not of the one that died: its --local_rank
                # names no failed process, so it is kept apart from local_rank
                add_error(
                    out,
                    error_row(
                        line,
                        ctx,
                        SOURCE,
                        ErrorKind.AGENT,
                        text.strip(),
                        rank=None,
                        exit_code=code,
                        signal=signal_name(code),
                        pid=i64(proc.group(1)) if proc else None,
                        launched_last_local_rank=i32(lr.group(1)) if lr else None,
                    ),
                )
                return True
            m = _DS_KILL.search(text) if "Killing" in text else None
            if m:
                add_error(
                    out, error_row(line, ctx, SOURCE, ErrorKind.AGENT, text.strip(), rank=None, pid=i64(m.group(1)))
                )
            return True
        if "world_rank=" in text and (m := _RAY_WORKER_ROW.match(text)):
            n = out.__dict__.setdefault("_python_file_state", {}).get("ray_group_size")
            out.ranks.append(
                {
                    "rank": i32(m.group("r")),
                    "host": m.group("ip"),
                    "pid": i64(m.group("pid")),
                    "local_rank": i32(m.group("lr")),
                    "world_size": i32(n) if n else None,
                    "source": SOURCE,
                    "file": ctx.file,
                    "line": line.lineno,
                }
            )
            return True
        if "Started " in text and (m := _RAY_GROUP.search(text)):
            out.__dict__.setdefault("_python_file_state", {})["ray_group_size"] = m.group("n")
            return True
        if any(h in text for h in _ELASTIC_HINTS) and _ELASTIC.search(text):
            if text.rstrip().endswith(":"):  # a block of "  key=value" / "  key : value" lines follows
                st["elastic"] = {"_line": line}
            return True
        return "distributed" in text and bool(_LIGHTNING_BANNER.match(text.strip()))

    def _elastic_kv(self, line: Line, st: dict) -> bool:
        m = _ELASTIC_KV.match(line.text)
        if not m:
            return False
        st["elastic"][m.group("k")] = m.group("v").strip()
        return True

    def _finish_elastic(self, st: dict, ctx: FileContext, out: Output) -> None:
        """torchrun's ``Rendezvous complete for workers. Result:`` block: a ``ranks`` row per global
        rank with its local rank and the world size (``global_world_sizes``)."""
        cur, st["elastic"] = st["elastic"], None
        if not cur or "global_ranks" not in cur:
            return
        ranks = [i32(x) for x in re.findall(r"\d+", cur["global_ranks"])]
        local = [i32(x) for x in re.findall(r"\d+", cur.get("local_ranks", ""))]
        worlds = [i32(x) for x in re.findall(r"\d+", cur.get("global_world_sizes", ""))]
        line: Line = cur["_line"]
        # this agent's map, for its own "failed ... local_rank: L" line later in the same file
        fmap = out.__dict__.setdefault("_python_file_state", {}).setdefault("local_to_global", {})
        for k, r in enumerate(ranks):
            if k < len(local) and local[k] is not None and r is not None:
                fmap[local[k]] = (r, line.lineno)
        for k, r in enumerate(ranks):
            out.ranks.append(
                {
                    "rank": i32(r),
                    "local_rank": i32(local[k]) if k < len(local) else None,
                    "world_size": i32(worlds[k]) if k < len(worlds) else None,
                    "host": line.host,
                    "source": SOURCE,
                    "file": ctx.file,
                    "line": line.lineno,
                }
            )

    # --- dispatch -------------------------------------------------------------------------------

    def _line(self, line: Line, ctx: FileContext, out: Output, st: dict) -> None:
        text = line.text
        head = _untagged(text)  # a traceback's header or chain line behind a tag's blank
        key = _key(line)
        rec = st["open"].get(key)
        if rec is None and key is not None and None in st["open"] and "rank" not in line.prefixes:
            rec, key = st["open"][None], None
        if rec is not None:
            if self._in_traceback(rec, line, text, ctx, out, st):
                return
            rec = None  # it ended before this line
        ignored = st["ignored"].pop(key, None)
        if text.startswith("Exception ignored") and _IGNORED.match(text):
            st["ignored"][key] = line  # the traceback that follows is an exception Python ignored
            out.consume(line)
            return
        tail = _TB_TAIL.match(text) if text.endswith("(most recent call last):") and not _TB_START.match(head) else None
        if tail is not None and not _WORD.search(tail.group("msg")):
            tail = None
        if tail is not None or _TB_START.match(head):
            old = st["open"].get(key)
            if old is not None:
                self._finish(old, ctx, out, st)
            rank = line.rank if line.rank is not None else st["spawn"]
            of_rank = _TB_OF_RANK.match(text) if text.endswith(")") else None
            if of_rank is not None:  # the header says whose it is, whichever rank printed it
                rank = i32(of_rank.group(1))
            announced = _announced(tail.group("msg")) if tail is not None else None
            st["open"][key] = rec = _Record(line, rank, st["spawn"], announced)
            rec.ignored = ignored
            out.consume(line)
            return
        if ignored is not None:  # no traceback after it: the report alone (its exception on its line)
            self._ignored(ignored, [], ignored.text.strip(), ctx, out)
        if _CHAIN.match(head):
            out.consume(line)
            return
        if self._table(line, text, ctx, out, st):
            out.consume(line)
            return
        if self._agent(line, text, ctx, out, st):
            out.consume(line)
            return
        if self._other_launcher(line, text, ctx, out):
            out.consume(line)
            return
        if self._launcher(line, text, ctx, out, st):
            out.consume(line)
            return
        if text[:1] == " " and _FRAME_AT.match(text):
            # a frame with no "Traceback" line before it: the paste starts inside a traceback
            rank = line.rank if line.rank is not None else st["spawn"]
            st["open"][key] = _Record(line, rank, st["spawn"])
            out.consume(line)
            return
        m = _RAY_DIED.search(text) if "died or was killed" in text else None
        if m:
            # Ray's raylet: a worker process died (by pid and IP; the rank, if any, from other evidence)
            pid, ip = _RAY_WORKER_PID.search(text), _RAY_WORKER_IP.search(text)
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.AGENT,
                    text.strip(),
                    rank=line.rank,
                    pid=i64(pid.group(1)) if pid else None,
                    host=ip.group(1) if ip else None,
                    launcher="ray",
                ),
            )
            out.consume(line)
            return
        m = _FATAL.match(text.strip()) if "Fatal Python" in text else None
        if m:
            # faulthandler: the process got a fatal signal (its dump of the stack follows)
            sig = _FATAL_SIGNALS.get(m.group("what"))
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    "signal" if sig else ErrorKind.ABORT,
                    text.strip(),
                    signal=sig,
                    pid=line.pid,
                    host=line.host,
                ),
            )
            out.consume(line)
            return
        m = _SPAWN_PROC.match(text)
        if m:
            # mp.spawn's child caught an exception, sent its traceback to the parent and exited 1
            idx = st["spawn"] = i32(m.group(1))
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.EXIT,
                    f"ProcessRaisedException: {text.strip()}",
                    rank=idx,
                    exit_code=1,
                    spawn_index=idx,
                ),
            )
            out.consume(line)
            return
        m = _LIGHTNING.search(text) if "GLOBAL_RANK" in text else None
        if m:
            r = i32(m.group(1))
            out.ranks.append(
                {
                    "rank": r,
                    "host": line.host,
                    "pid": line.pid,
                    "world_size": i32(m.group(3)),
                    "source": SOURCE,
                    "file": ctx.file,
                    "line": line.lineno,
                }
            )
            out.consume(line)
            return
        m = _FUTURE.search(text) if "deprecated" in text else None
        if m:
            add_error(out, error_row(line, ctx, SOURCE, ErrorKind.WARNING, text.strip(), op=normalize_op(m.group(1))))
            out.consume(line)
            st["last"] = ErrorKind.WARNING
            return
        if st["last"] == ErrorKind.WARNING and _WARN_LOC.match(text):
            out.consume(line)
            return
        st["last"] = None
        m = _EXC_NAMED.match(text) if ":" in text else None
        flat = _flat_traceback_exception(text) if "Traceback (most" in text else None
        if flat is not None and "ChildFailedError" not in text:
            # a traceback flattened onto one line (after a wrapper's exception name or a log line): the
            # process's own exception is the one at its end
            self._exception(line, ctx, out, flat[0], flat[1], line.rank)
            out.consume(line)
        elif m and "ChildFailedError" not in text:  # an exception line without its traceback (e.g. cut off)
            self._exception(line, ctx, out, m.group("type"), text.strip(), line.rank)
            out.consume(line)

    # --- tracebacks -----------------------------------------------------------------------------

    def _in_traceback(self, rec: _Record, line: Line, text: str, ctx, out, st) -> bool:
        """Feed a line to an open traceback; False when the line is not part of it."""
        if rec.exc is None:
            if _flat_layout(rec, text):
                frame = not text.strip() or _flat_frame(rec, text.strip())
            else:
                frame = _FRAME.match(text) or not text
            if frame:
                rec.lines.append(line)
                out.consume(line)
                return True
            head = _untagged(text)
            if _TB_START.match(head) or _CHAIN.match(head) or _IGNORED.match(text):
                self._finish(rec, ctx, out, st)
                return False
            if rec.cut_in(line):
                return False  # a log line of the same process cut in: the traceback stays open
            m = _EXC.match(text.strip())
            rec.exc = text.strip() if m else text.strip()
            rec.lines.append(line)
            out.consume(line)
            if _CFE.search(text) or _SPAWN_RAISED.search(text) or _SPAWN_EXITED.search(text):
                st["table"] = st["table"] or bool(_CFE.search(text))
                self._finish(rec, ctx, out, st)
                self._agent(line, text, ctx, out, st)  # the spawn/agent exception has its own rows
            return True
        # message continuation lines: same rank, not a new record, not a table
        head = _untagged(text)
        if (
            _NEW_RECORD.match(head)
            or _FIELD.match(text)
            or _ROOT.match(text)
            or _SPAWN_PROC.match(text)
            or _EXC_NAMED.match(head)
            or len(rec.msg_lines) >= _MAX_MSG_LINES
            or rec.cut_in(line)
        ):
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
        if rec.ignored is not None:
            self._ignored(rec.ignored, rec.lines, rec.exc or TRUNCATED_TRACEBACK, ctx, out)
            return
        if rec.exc is None:
            op, call = collective_of(rec.lines)
            if rec.announced:  # the message came first: the exception is known, its type is not
                self._exception(
                    rec.first,
                    ctx,
                    out,
                    None,
                    rec.announced,
                    rec.rank,
                    n_traceback_lines=len(rec.lines),
                    t_wall=rec.first.t_wall,
                    call_site=call_site(rec.lines),
                    op=op,
                    collective_call=call,
                    frames=frames_text(rec.lines),
                    pid=rec.first.pid,
                )
                return
            last = next((ln.text.strip() for ln in reversed(rec.lines[1:]) if ln.text.strip()), "")
            msg = f"{TRUNCATED_TRACEBACK} (last: {last})" if last else TRUNCATED_TRACEBACK
            add_error(
                out,
                error_row(
                    rec.first,
                    ctx,
                    SOURCE,
                    ErrorKind.EXCEPTION,
                    msg,
                    rank=rec.rank,
                    n_traceback_lines=len(rec.lines),
                    op=op,
                    collective_call=call,
                    frames=frames_text(rec.lines),
                ),
            )
            return
        if _CFE.search(rec.exc) or _SPAWN_RAISED.search(rec.exc) or _SPAWN_EXITED.search(rec.exc):
            return  # the agent/spawn rows describe these; no generic exception row
        msg = rec.exc
        body = [m for m in rec.msg_lines if m]
        if body:
            msg += "\n" + "\n".join(body)
        m = _EXC.match(rec.exc)
        op, call = collective_of(rec.lines)
        self._exception(
            rec.first,
            ctx,
            out,
            m.group("type") if m else None,
            msg,
            rec.rank,
            n_traceback_lines=len(rec.lines),
            t_wall=rec.first.t_wall,
            call_site=call_site(rec.lines),
            op=op,
            collective_call=call,
            frames=frames_text(rec.lines),
        )

    def _ignored(self, head: Line, lines: list[Line], exc: str, ctx, out) -> None:
        """An exception Python ignored (``Exception ignored in: ...`` and its traceback): a ``warning`` row
        spanning the report and its traceback (its lines are no failure: the program went on)."""
        last = max((ln.lineno + ln.n_lines - 1 for ln in lines), default=head.lineno + head.n_lines - 1)
        msg = head.text.strip() if exc == head.text.strip() else f"{head.text.strip()}\n{exc}"
        add_error(
            out,
            error_row(
                head,
                ctx,
                SOURCE,
                ErrorKind.WARNING,
                msg,
                rank=head.rank,
                n_traceback_lines=last - head.lineno + 1,
                warning_category=IGNORED_EXCEPTION,
            ),
        )

    def _exception(self, line: Line, ctx, out, exc_type, msg, rank, **extra) -> None:
        # (a message saying the ranks fell out of sync may guess at an out-of-memory: not one itself)
        kind = ErrorKind.OOM if _OOM.search(msg) and not _OUT_OF_SYNC.search(msg) else ErrorKind.EXCEPTION
        row = error_row(line, ctx, SOURCE, kind, msg, rank=rank, exc_type=exc_type, **extra)
        if kind == ErrorKind.OOM:
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
            # the agent's own rendezvous result earlier in this file maps its local ranks to global ones
            fmap = out.__dict__.get("_python_file_state", {}).get("local_to_global", {})
            rank, at = fmap.get(lr, (None, None))
            add_error(
                out,
                error_row(
                    line,
                    ctx,
                    SOURCE,
                    ErrorKind.AGENT,
                    text.strip(),
                    rank=rank,
                    exit_code=code,
                    signal=signal_name(code),
                    local_rank=lr,
                    pid=pid,
                    rank_basis=None
                    if rank is None
                    else f"torchrun's rendezvous result in this log (line {at}) maps local rank {lr} to rank {rank}",
                ),
            )
            out.ranks.append(
                {
                    "rank": rank,
                    "local_rank": lr,
                    "pid": pid,
                    "exit_code": code,
                    "signal": signal_name(code),
                    "host": line.host,
                    "source": SOURCE,
                    "file": ctx.file,
                    "line": line.lineno,
                }
            )
            return True
        m = _CLOSING.search(text) or _SPAWN_TERM.search(text)
        if m:
            add_error(
                out,
                error_row(
                    line, ctx, SOURCE, ErrorKind.AGENT, text.strip(), rank=None, signal=m.group(2), pid=i64(m.group(1))
                ),
            )
            return True
        m = _SPAWN_EXITED.search(text)
        if m:
            idx = i32(m.group(1))
            if m.group(2):
                add_error(
                    out,
                    error_row(line, ctx, SOURCE, "signal", text.strip(), rank=idx, signal=m.group(2), spawn_index=idx),
                )
            else:
                code = i32(m.group(3))
                add_error(
                    out,
                    error_row(
                        line,
                        ctx,
                        SOURCE,
                        ErrorKind.EXIT,
                        text.strip(),
                        rank=idx,
                        exit_code=code,
                        signal=signal_name(code),
                        spawn_index=idx,
                    ),
                )
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
            st["cfe_header"] = line  # until a failure row follows: a table cut before its rows is still a failure
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
            st["cfe"]["_tb"].append(text.strip())  # @record: the traceback row runs on
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
        st["cfe_header"] = None
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
                from .prefixes import local_to_utc  # same tz rule as every header

                t = local_to_utc(datetime(*(int(x) for x in m.groups())), ctx)
            except ValueError:
                t = None
        host = cur.get("host") or None
        tb = cur.get("traceback", "")
        if cur["_tb"]:
            tb = (tb + "\n" + "\n".join(cur["_tb"])).strip()
        parts = [
            f"rank {rank} (local_rank {local})" if rank is not None else "rank ?",
            f"exitcode {code}" + (f" ({sig})" if sig else ""),
            f"pid {pid}",
            f"host {host}",
        ]
        if cur["_root"]:
            parts.insert(0, "Root Cause (first observed failure)")
        msg = "; ".join(parts) + (f"; traceback: {tb}" if tb else "")
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.CHILD_FAILED,
                msg,
                rank=rank,
                t_wall=t,
                exit_code=code,
                signal=sig,
                host=host,
                local_rank=local,
                pid=pid,
                root_cause=bool(cur["_root"]),
                error_file=cur.get("error_file"),
            ),
        )
        out.ranks.append(
            {
                "rank": rank,
                "host": host,
                "pid": pid,
                "local_rank": local,
                "exit_code": code,
                "signal": sig,
                "first_error_t": t,
                "source": SOURCE,
                "file": ctx.file,
                "line": line.lineno,
            }
        )


register_text_reader(PythonReader())

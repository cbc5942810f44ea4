"""An opt-in, crash-safe per-rank collective tracer.

Why: on gloo a shape mismatch aborts the process from a C++ thread (SIGABRT), so nothing in Python
runs afterwards and no Flight Recorder dump is written. The only evidence that survives an abort is
what was already handed to the kernel. This tracer therefore writes one JSON line per collective
with ``os.write`` on an ``O_APPEND`` file descriptor **before** the collective is issued; a rank
that dies inside the collective still leaves its ``issue`` line.

Switching it on in your own job (either is enough)::

    import denpex_nb.trace
    denpex_nb.trace.enable("/shared/logs/trace")     # one call, before or after init_process_group

    # or, without touching the training script's logic:
    #   export DENPEX_TRACE_DIR=/shared/logs/trace
    # and call denpex_nb.trace.enable() (no argument) once at start-up; it reads the variable
    # and does nothing when it is unset. The reproducer worker does exactly this.

Each rank appends to ``<dir>/denpex_trace_rank<R>.jsonl``: a ``meta`` line (written at ``enable()``
when ``RANK`` is set, so a watcher knows the rank's pid before its first collective), then per
collective an ``issue`` line, then ``done`` (or ``error`` with the exception text); a meta line written before ``init_process_group``
is repeated, with the backend, before the first collective. For a
collective called with ``async_op=True`` ``done`` carries ``"async":true`` (it was enqueued) and a
``complete`` line follows when its work finishes (or ``error`` if it fails), found by polling the
work (before the next collective, and every 50 ms from a daemon thread). On gloo a synchronous collective has finished when it returns, so ``done`` is its
completion; on NCCL it has been enqueued on the stream, and its completion is not recorded.
A file that reaches ``$DENPEX_TRACE_MAX_MB`` (default 256) is renamed to ``<name>.1`` (replacing
an older one) and a new file is started with a new ``meta`` line, between collectives: a rank's
trace never takes more than twice that on disk. ``seq`` counts the traced
collectives per process group from 1 (``seq_kind == "trace"``). Only the outermost call is traced:
a wrapped collective that torch issues from inside another wrapped one is not counted twice.
The object collectives (``all_gather_object``, ``broadcast_object_list`` ...) are not wrapped;
the tensor collectives they issue are traced, so they count as Flight Recorder counts them. Collectives that torch issues from C++ (DDP's bucket
all-reduces, its parameter broadcast) never pass through Python and are therefore not traced; the
Flight Recorder does see them. ``live`` readers (``denpex-nb watch``) follow the files while the job runs.

The format is the contract read by :mod:`denpex_nb.ingest.trace`.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

ENV_VAR = "DENPEX_TRACE_DIR"
FORMAT_VERSION = 1
#: the size (MiB) at which a rank's trace file is rotated; ``$DENPEX_TRACE_MAX_MB`` overrides it
MAX_MB_DEFAULT = 256

#: op name -> (input parameter names, output parameter names, peer parameter name)
_SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {
    "all_reduce": (("tensor",), ("tensor",), None),
    "all_reduce_coalesced": (("tensors",), ("tensors",), None),
    "all_gather": (("tensor",), ("tensor_list",), None),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",), None),
    "all_gather_coalesced": (("input_tensor_list",), ("output_tensor_lists",), None),
    "reduce_scatter": (("input_list",), ("output",), None),
    "reduce_scatter_tensor": (("input",), ("output",), None),
    "broadcast": (("tensor",), ("tensor",), None),
    "reduce": (("tensor",), ("tensor",), None),
    "gather": (("tensor",), ("gather_list",), None),
    "scatter": (("scatter_list",), ("tensor",), None),
    "barrier": ((), (), None),
    "monitored_barrier": ((), (), None),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",), None),
    "all_to_all_single": (("input",), ("output",), None),
    "send": (("tensor",), (), "dst"),
    "recv": ((), ("tensor",), "src"),
    "isend": (("tensor",), (), "dst"),
    "irecv": ((), ("tensor",), "src"),
}
#: wrapper name -> op name written to the trace (isend is a send as far as matching goes)
_OP_NAME = {"isend": "send", "irecv": "recv", "monitored_barrier": "barrier"}

_lock = threading.Lock()
_local = threading.local()
_state: dict[str, Any] = {
    "dir": None,
    "fd": None,
    "rank": None,
    "seq": {},
    "originals": {},
    "groups": {},
    "written": 0,
    "max_bytes": MAX_MB_DEFAULT << 20,
}


def enabled() -> bool:
    """True when collectives are being traced in this process."""
    return bool(_state["originals"])


def enable(directory: str | os.PathLike | None = None) -> str | None:
    """Trace every torch.distributed collective of this process into ``directory``.

    Without an argument the directory comes from ``$DENPEX_TRACE_DIR``; when that is unset too,
    nothing happens and ``None`` is returned (so calling ``enable()`` unconditionally is safe).
    Returns the directory. Calling it again is harmless. Imports torch.
    """
    directory = directory if directory is not None else os.environ.get(ENV_VAR) or None
    if directory is None:
        return None
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    try:
        _state["max_bytes"] = max(1, int(float(os.environ.get("DENPEX_TRACE_MAX_MB", MAX_MB_DEFAULT)) * (1 << 20)))
    except ValueError:
        _state["max_bytes"] = MAX_MB_DEFAULT << 20
    with _lock:
        _state["dir"] = directory
        if _state["originals"]:
            return directory
        for name in _SIGNATURES:
            original = getattr(c10d, name, None)
            if original is None:
                continue
            wrapped = _wrap(name, original)
            _state["originals"][name] = original
            setattr(c10d, name, wrapped)
            if getattr(dist, name, None) is original:
                setattr(dist, name, wrapped)
    rank = os.environ.get("RANK", "")
    if rank.isdigit() and _state["fd"] is None:  # under a launcher: say who we are before the first collective
        ws = os.environ.get("WORLD_SIZE", "")
        _open(int(rank), int(ws) if ws.isdigit() else None)
    return directory


def disable() -> None:
    """Restore the original torch.distributed functions and close the trace file."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    with _lock:
        for name, original in _state["originals"].items():
            if getattr(c10d, name, None) is not None:
                setattr(c10d, name, original)
            if getattr(dist, name, None) is not None:
                setattr(dist, name, original)
        _state["originals"] = {}
        for key in ("fd", "rotated_fd"):
            if _state.get(key) is not None:
                os.close(_state[key])
        _state.update(fd=None, rotated_fd=None, rank=None, seq={}, groups={}, written=0)


def trace_path(directory: str | os.PathLike, rank: int) -> str:
    """Where rank ``rank`` writes its trace inside ``directory``."""
    return os.path.join(os.fspath(directory), f"denpex_trace_rank{rank}.jsonl")


# --- internals -----------------------------------------------------------------------------


def _wrap(name: str, original: Callable) -> Callable:
    signature = inspect.signature(original)
    ins, outs, peer_param = _SIGNATURES[name]
    op = _OP_NAME.get(name, name)

    @functools.wraps(original)
    def traced(*args, **kwargs):
        if getattr(_local, "depth", 0):
            return original(*args, **kwargs)
        if _state.get("pending"):
            _drain_completed()
        try:
            params = signature.bind(*args, **kwargs).arguments  # defaults not needed: .get() -> None
        except TypeError:  # let torch raise its own error for bad arguments
            return original(*args, **kwargs)
        rank, world_size, base = _base_json(op, params, peer_param)
        if _state.get("meta_early"):  # the meta line of enable() came before init: now say the backend
            _state["meta_early"] = False
            _emit(rank, world_size, _meta_line(rank, world_size))
        _emit(
            rank,
            world_size,
            f'{{"v":{FORMAT_VERSION},"event":"issue",{base},"in_shapes":{_shapes(params, ins)},'
            f'"out_shapes":{_shapes(params, outs)},"dtypes":{_dtypes(params, ins or outs)},{_times()}}}\n',
        )
        _local.depth = 1
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            _emit(rank, world_size, _error_line(base, exc))
            raise
        finally:
            _local.depth = 0
        if params.get("async_op") and hasattr(result, "is_completed"):
            _emit(rank, world_size, f'{{"v":{FORMAT_VERSION},"event":"done","async":true,{base},{_times()}}}\n')
            _on_completion(result, rank, world_size, base)
        else:
            _emit(rank, world_size, f'{{"v":{FORMAT_VERSION},"event":"done",{base},{_times()}}}\n', between=True)
        return result

    traced.__denpex_traced__ = True
    return traced


def _error_line(base: str, exc: BaseException) -> str:
    error = json.dumps(f"{type(exc).__name__}: {exc}"[:2000])
    return f'{{"v":{FORMAT_VERSION},"event":"error",{base},"error":{error},{_times()}}}\n'


#: how often the completion poller looks at pending async works (seconds)
POLL_S = 0.05


def _on_completion(work, rank: int, world_size: int | None, base: str) -> None:
    """Remember an async collective's work; ``complete`` (or ``error``) is written once it finishes.

    Polled, not called back: a Python callback on the work's future costs about 200 us of CPU per
    collective (the backend's thread must take the GIL), a poll of ``is_completed()`` about 1 us.
    Pending works are looked at before every traced collective and by a daemon thread every
    :data:`POLL_S` seconds, so a completion is on disk within that time even when no other
    collective follows.
    """
    with _lock:
        _state.setdefault("pending", []).append((work, rank, world_size, base))
        if _state.get("poller") is None:
            t = threading.Thread(target=_poll_forever, name="denpex-trace-completion", daemon=True)
            _state["poller"] = t
            t.start()


def _drain_completed() -> None:
    pending = _state.get("pending")
    if not pending:
        return
    with _lock:
        still, done = [], []
        for item in _state.get("pending", ()):
            (done if item[0].is_completed() else still).append(item)
        _state["pending"] = still
    for work, rank, world_size, base in done:
        try:
            ok = work.is_success()
        except Exception:
            ok = True
        if ok:
            _emit(rank, world_size, f'{{"v":{FORMAT_VERSION},"event":"complete",{base},{_times()}}}\n')
        else:
            try:
                exc = work.exception()
            except Exception as e:  # the backend keeps no exception object: say so
                exc = e
            _emit(
                rank, world_size, _error_line(base, exc if isinstance(exc, BaseException) else RuntimeError(str(exc)))
            )


def _poll_forever() -> None:
    while _state["originals"]:
        time.sleep(POLL_S)
        try:
            _drain_completed()
        except Exception:  # never let the poller take the process down; the next poll retries
            pass
    _state["poller"] = None


def _base_json(op: str, params: dict, peer_param: str | None) -> tuple[int, int | None, str]:
    """(rank, world size, the shared fields of this collective's lines as JSON members)."""
    group = params.get("group")
    pg_name, pg_desc, world_size = _group_info(group)
    rank = _rank()
    with _lock:
        seq = _state["seq"].get(pg_name, 0) + 1
        _state["seq"][pg_name] = seq
    fields = {
        "rank": rank,
        "world_size": world_size,
        "pg": pg_name,
        "pg_desc": pg_desc,
        "seq": seq,
        "op": op,
        "pid": os.getpid(),
        "host": _host(),
    }
    if peer_param is not None:
        fields["peer"] = _peer(params, peer_param, group)
    return rank, world_size, json.dumps(fields, separators=(",", ":"))[1:-1]


def _peer(params: dict, peer_param: str, group):
    import torch.distributed as dist

    peer = params.get(peer_param)
    if peer is None and params.get("group_" + peer_param) is not None:
        try:
            peer = dist.get_global_rank(group, params["group_" + peer_param])
        except Exception:
            peer = params["group_" + peer_param]
    return peer


def _group_info(group) -> tuple[str, str, int | None]:
    """(pg name, pg description, world size) of ``group``, cached once the group exists."""
    cached = _state["groups"].get(id(group))
    if cached is not None and cached[0] is group:
        return cached[1]
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if not (dist.is_available() and dist.is_initialized()):
        return "0", "default_pg", int(os.environ.get("WORLD_SIZE", "1"))
    try:
        pg = group if group is not None else c10d._get_default_group()
        name = str(getattr(pg, "group_name", "") or c10d._get_process_group_name(pg) or "0")
        desc = str(getattr(pg, "group_desc", "") or ("default_pg" if group is None else "undefined"))
        info = (name, desc, dist.get_world_size(group))
    except Exception:
        return "0", "default_pg", None
    _state["groups"][id(group)] = (group, info)  # holds the group: its id cannot be reused
    return info


def _host() -> str:
    if "host" not in _state:
        _state["host"] = socket.gethostname()
    return _state["host"]


def _rank() -> int:
    if _state["rank"] is None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            _state["rank"] = dist.get_rank()
        else:
            return int(os.environ.get("RANK", "0"))
    return _state["rank"]


def _times() -> str:
    return f'"t_wall":{time.time():.6f},"t_mono":{time.monotonic():.6f}'


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            out.extend(_tensors(item))
        return out
    return []


def _shapes(params: dict, names: tuple[str, ...]) -> str:
    shapes = [",".join(map(str, t.shape)) for n in names for t in _tensors(params.get(n))]
    return "[" + ",".join(f"[{x}]" for x in shapes) + "]"


def _dtypes(params: dict, names: tuple[str, ...]) -> str:
    names_ = [str(t.dtype).replace("torch.", "") for n in names for t in _tensors(params.get(n))]
    return "[" + ",".join(f'"{x}"' for x in names_) + "]"


def _emit(rank: int, world_size: int | None, line: str, *, between: bool = False) -> None:
    fd = _state["fd"] if _state["fd"] is not None else _open(rank, world_size)
    if fd is not None:
        data = line.encode()
        os.write(fd, data)  # O_APPEND: one write per line, in the kernel before the collective starts
        _state["written"] += len(data)
        if between and _state["written"] >= _state["max_bytes"]:
            _rotate(rank, world_size)


def _rotate(rank: int, world_size: int | None) -> None:
    """Rename the full file to ``<name>.1`` and start a new one (between collectives, under the lock)."""
    with _lock:
        fd = _state["fd"]
        if fd is None or _state["written"] < _state["max_bytes"] or _state["dir"] is None:
            return
        path = trace_path(_state["dir"], rank)
        try:
            os.replace(path, path + ".1")
        except OSError:
            return  # cannot rotate (read-only folder?): keep appending rather than lose evidence
        _state["fd"] = None
        # another thread (an async collective's completion) may be writing to it right now: keep it
        # open until the next rotation, when nothing can still hold it; its lines land in <name>.1
        older, _state["rotated_fd"] = _state.get("rotated_fd"), fd
        if older is not None:
            os.close(older)
    _open(rank, world_size)


def _open(rank: int, world_size: int | None) -> int | None:
    with _lock:
        if _state["fd"] is not None:
            return _state["fd"]
        if _state["dir"] is None:
            return None
        fd = os.open(trace_path(_state["dir"], rank), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = _meta_line(rank, world_size).encode()
        _state["meta_early"] = _backend() is None
        os.write(fd, data)
        _state["fd"] = fd
        _state["written"] = os.fstat(fd).st_size
        return fd


def _meta_line(rank: int, world_size: int | None) -> str:
    meta = {
        "v": FORMAT_VERSION,
        "event": "meta",
        "rank": rank,
        "world_size": world_size,
        "pid": os.getpid(),
        "host": _host(),
        "backend": _backend(),
        "torch": _torch_version(),
    }
    return json.dumps(meta, separators=(",", ":")) + "\n"


def _backend() -> str | None:
    import torch.distributed as dist

    try:
        return str(dist.get_backend()) if dist.is_initialized() else None
    except Exception:
        return None


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]

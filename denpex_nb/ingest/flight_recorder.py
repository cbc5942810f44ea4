"""Flight Recorder dumps (pickle and JSON) -> events, progress; plus the gloo ``pg_config`` repair.

Safety: a dump is a pickle, and unpickling can run arbitrary code. :class:`RestrictedUnpickler`
refuses every global lookup (``GLOBAL``/``STACK_GLOBAL``/``INST``/``OBJ``, hence ``REDUCE`` has no
callable to call) and every persistent id, so only plain containers and scalars come out; anything
else raises :class:`~denpex_nb.errors.UnsafePickleError` before a single call is made.

Speed: the diagnose bar is 1024 dumps x 2000 entries, so events are built column-wise (one list per
column, shapes interned) and turned into one DataFrame per dump, never a dict per entry.

Mapping (see docs/log-formats.md §8): rank from the file name only; ``collective_seq_id`` -> seq
(``seq_kind="fr"``), p2p entries keep ``p2p_seq_id`` (op send/recv, peer in ``root``);
``profiling_name`` -> op; sizes -> shapes and numel; ``input_dtypes[0]`` -> dtype; ``state`` as
recorded plus a ``retired`` column (on gloo ``state`` is always "scheduled" and ``retired`` is the
only completion signal); ``time_created_ns`` -> t_wall; ``process_group`` -> pg / pg_desc;
``pg_status`` -> progress rows. ``line`` is the entry's 0-based index in ``entries``. Extra columns:
``retired``, ``is_p2p``, ``record_id``, ``collective_seq_id``, ``p2p_seq_id``, ``timeout_ms``.
"""
from __future__ import annotations

import functools
import gc
import io
import json
import operator
import os
import pickle
import re
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, UnsafePickleError
from ..ops import normalize_op
from .assemble import Const
from ._text import dtype_name
from .base import FileContext, FileReader, Output, register_file_reader


_PEER = re.compile(r"(\d+)\s*->\s*(\d+)")
_FR_NAME = re.compile(r"(?:nccl|comm_lib|fr)_trace_rank_?\d+|^trace_\d+$", re.I)


_KEYS = ("input_sizes", "output_sizes", "profiling_name", "is_p2p", "collective_seq_id", "p2p_seq_id",
         "process_group", "pg_id", "input_dtypes", "time_created_ns", "state", "retired", "record_id", "timeout_ms")
_GET_ALL = operator.itemgetter(*_KEYS)
_P2P_OPS = frozenset({"send", "recv", "recv_anysource"})
_STATE = {"scheduled": "scheduled", "started": "started", "completed": "completed"}


def _as_shape(sizes) -> tuple:
    return tuple(map(tuple, sizes))


def _as_shape_safe(sizes):
    try:
        t = tuple(tuple(int(d) for d in s) for s in sizes)
    except (TypeError, ValueError):
        return None
    return t


def _shapes_column(sizes_col: list) -> tuple[list, list]:
    """Sizes lists -> (tuple-of-tuples shapes, total numel). Work per entry is one C-level
    ``tuple(map(tuple, ...))``; numel is computed once per distinct shape, and equal shapes share
    one tuple object (a 2M-entry load holds a handful of shapes, not 2M tuples)."""
    try:
        shapes = list(map(_as_shape, sizes_col))
    except TypeError:            # None or odd values somewhere: the careful path
        shapes = list(map(_as_shape_safe, sizes_col))
    canon: dict = {}
    numel: dict = {}
    for t in set(shapes):
        canon[t] = t
        if t is None:
            numel[t] = None
            continue
        try:
            total = 0
            for sh in t:
                p = 1
                for d in sh:
                    p *= int(d)
                total += p
            numel[t] = total
        except (TypeError, ValueError):
            canon[t], numel[t] = None, None
    return list(map(canon.__getitem__, shapes)), list(map(numel.__getitem__, shapes))


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickle plain data only: every attempt to look up a global is refused, never executed."""

    def find_class(self, module: str, name: str):  # noqa: D401
        raise UnsafePickleError(f"the pickle asks for {module}.{name}; only plain data is allowed",
                                fix="do not load dumps from untrusted sources")

    def persistent_load(self, pid):
        raise UnsafePickleError("the pickle uses persistent ids; only plain data is allowed")


def safe_loads(data: bytes) -> Any:
    """``pickle.loads`` restricted to containers and scalars (raises UnsafePickleError)."""
    # A BufferedReader gives the C unpickler ``peek``: it then parses from its buffer instead of
    # calling ``read`` per opcode (3x faster on a 2000-entry dump).
    return RestrictedUnpickler(io.BufferedReader(io.BytesIO(data), buffer_size=len(data) + 1)).load()


def parse_dump_bytes(data: bytes) -> tuple[dict, str]:
    """Decode a dump's bytes: (dump dict, "fr_pickle" | "fr_json"). Raises on corrupt input."""
    stripped = data.lstrip()
    if stripped[:1] == b"{":
        dump = json.loads(data.decode("utf-8"))
        kind = "fr_json"
    else:
        dump = safe_loads(data)
        kind = "fr_pickle"
    if not isinstance(dump, dict) or not ({"entries", "pg_config", "pg_status", "version"} & set(dump)):
        raise ValueError("not a Flight Recorder dump (no entries / pg_config / version)")
    return dump, kind


def read_dump(path: str | os.PathLike) -> dict:
    """Load one dump file as a dict (restricted unpickler; JSON accepted)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse_dump_bytes(data)[0]
    except UnsafePickleError as e:
        raise UnsafePickleError(e.problem, fix=e.fix, where=str(path)) from None
    except Exception as e:
        raise InputError(f"corrupt or truncated Flight Recorder dump: {type(e).__name__}: {e}",
                         where=str(path)) from None


def _as_int(v) -> int | None:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def _ranks_in_text(raw: str) -> tuple[int, ...]:
    """``"[0, 1, ... 1023]"`` -> the ranks; cached, as every dump of a job repeats the same text."""
    return tuple(int(x) for x in re.findall(r"-?\d+", raw))


def _ranks_of(cfg: Any) -> list[int]:
    raw = cfg.get("ranks") if isinstance(cfg, dict) else None
    if isinstance(raw, str):
        return list(_ranks_in_text(raw))
    if isinstance(raw, (list, tuple)):
        return [int(x) for x in raw]
    return []


def dump_to_frames(dump: dict, *, rank: int | None, file: str, source: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(events, progress) frames of one dump."""
    from .assemble import build_frame

    events, progress = dump_to_columns(dump, rank=rank, file=file, source=source)
    return build_frame("events", [events]), build_frame("progress", [progress])


def dump_to_columns(dump: dict, *, rank: int | None, file: str, source: str) -> tuple[dict, list[dict]]:
    """(events column batch, progress rows) of one dump: lists per column, no per-entry dicts."""
    entries = dump.get("entries") or []
    n = len(entries)
    world_by_pg = _world_by_pg(dump.get("pg_config"))

    # one C-level pass over the entries (itemgetter + zip transpose); per-key .get when keys are missing
    try:
        table = dict(zip(_KEYS, map(list, zip(*map(_GET_ALL, entries))))) if entries else {k: [] for k in _KEYS}
    except (KeyError, TypeError, IndexError):
        table = {}
        entries = [e for e in entries if isinstance(e, dict)]
    n = len(entries)

    def col(key):
        got = table.get(key)
        return got if got is not None else [e.get(key) for e in entries]

    in_shapes, numel_in = _shapes_column(col("input_sizes"))
    out_shapes, numel_out = _shapes_column(col("output_sizes"))
    prof = col("profiling_name")
    op_of = {p: (normalize_op(p) if isinstance(p, str) else None) for p in set(prof)}
    ops = [op_of[p] for p in prof]
    is_p2p = [bool(x) for x in col("is_p2p")]
    coll_seq = col("collective_seq_id")
    p2p_seq = col("p2p_seq_id")
    peers: list[int | None] = [None] * n
    seq: list[Any] = coll_seq
    if any(is_p2p) or any(op_of[p] in _P2P_OPS for p in op_of):
        seq = list(coll_seq)
        for i in range(n):
            op = ops[i]
            if is_p2p[i] or op in _P2P_OPS:
                is_p2p[i] = True
                seq[i] = p2p_seq[i]
                peers[i] = peer_of(prof[i], op, rank)
    pg_keys = [tuple(g) if type(g) is list else g for g in col("process_group")]
    pg_ids = col("pg_id")
    pg_of: dict = {}
    for g, pid in set(zip(pg_keys, pg_ids)):
        pg_of[(g, pid)] = pg_name_desc(g, pid)
    pg_pairs = [pg_of[k] for k in zip(pg_keys, pg_ids)]
    pg_name = [p[0] for p in pg_pairs]
    pg_desc = [p[1] for p in pg_pairs]
    try:
        firsts = [d[0] if d else None for d in col("input_dtypes")]
        hash(tuple(firsts))
    except (TypeError, IndexError, KeyError):
        firsts = [d[0] if type(d) in (list, tuple) and d and isinstance(d[0], str) else None
                  for d in col("input_dtypes")]
    dt_of = {d: dtype_name(d) for d in set(firsts)}      # per distinct spelling, not per entry
    dt = [dt_of[d] for d in firsts]
    times = [t if t else None for t in col("time_created_ns")]          # 0 in JSON = missing
    world_of = {p: world_by_pg.get(p, world_by_pg.get("*")) for p in set(pg_name)}
    states = [_STATE.get(x) for x in col("state")]
    if len(set(pg_pairs)) == 1:          # one process group in the whole dump: constant columns
        pg_name, pg_desc = Const(pg_name[0], n), Const(pg_desc[0], n)
    events = {
        "rank": Const(rank, n), "pg": pg_name, "pg_desc": pg_desc, "seq": seq, "seq_kind": Const("fr", n), "op": ops,
        "in_shapes": in_shapes, "out_shapes": out_shapes, "numel_in": numel_in, "numel_out": numel_out,
        "dtype": dt, "state": states, "world_size": [world_of[p] for p in pg_name], "root": peers,
        "_t_wall_ns": times, "source": Const(source, n), "file": Const(file, n), "line": np.arange(n, dtype=np.int64),
        "retired": col("retired"), "is_p2p": is_p2p, "record_id": col("record_id"),
        "collective_seq_id": coll_seq, "p2p_seq_id": p2p_seq, "timeout_ms": col("timeout_ms"),
    }
    return events, _progress_rows(dump.get("pg_status"), rank=rank, file=file, source=source)


def pg_name_desc(group: Any, pg_id: Any) -> tuple[str | None, str | None]:
    """(pg, pg_desc) of an entry: from its ``process_group`` tuple ``(name, desc)``, else the
    ``pg_id`` alone (older dumps); an empty desc is no desc."""
    if isinstance(group, tuple) and len(group) >= 1:
        return str(group[0]), (str(group[1]) if len(group) > 1 and group[1] not in (None, "") else None)
    return (str(pg_id) if pg_id is not None else None), None


def peer_of(profiling_name: str | None, op: str | None, rank: int | None) -> int | None:
    """The other rank of a p2p entry, from ``'nccl:send 0->1'``: the side that is not ``rank``;
    with the rank unknown, the destination of a send and the source of a recv."""
    m = _PEER.search(profiling_name or "")
    if not m:
        return None
    a, b = int(m.group(1)), int(m.group(2))
    if rank is not None:
        return b if a == rank else a
    return b if op == "send" else a


def _world_by_pg(pg_config: Any) -> dict[str, int]:
    """Process group -> world size from ``pg_config`` (gloo's single ``''`` key also answers ``*``)."""
    world_by_pg: dict[str, int] = {}
    if isinstance(pg_config, dict):
        for key, cfg in pg_config.items():
            count = len(_ranks_of(cfg))
            if count:
                world_by_pg[str(key)] = count
        if len(world_by_pg) == 1 and "" in world_by_pg:   # gloo: one config keyed ''
            world_by_pg["*"] = world_by_pg[""]
    return world_by_pg


def _progress_rows(status: Any, *, rank: int | None, file: str, source: str) -> list[dict]:
    rows = []
    if isinstance(status, dict):
        for pg, st in status.items():
            if not isinstance(st, dict):
                continue
            rows.append({"rank": rank, "pg": str(pg), "seq_kind": "fr",
                         "last_enqueued": _as_int(st.get("last_enqueued_collective")),
                         "last_started": _as_int(st.get("last_started_collective")),
                         "last_completed": _as_int(st.get("last_completed_collective")),
                         "source": source, "file": file})
    return rows


#: ``DENPEX_FR_DECODER=unpickle`` turns the compiled decoder off (to compare, or to rule it out)
DECODER_ENV = "DENPEX_FR_DECODER"
_NUMBA_FOUND: bool | None = None
_COMPILED_BROKEN = False


def compiled_decoder_enabled() -> bool:
    """True when numba is installed and ``DENPEX_FR_DECODER`` is not ``unpickle``."""
    global _NUMBA_FOUND
    if _NUMBA_FOUND is None:      # find_spec, not import: numba takes ~0.5 s to import
        import importlib.util

        _NUMBA_FOUND = importlib.util.find_spec("numba") is not None
    return _NUMBA_FOUND and os.environ.get(DECODER_ENV, "").lower() != "unpickle"


def _compiled_columns(data: bytes, ctx: FileContext):
    """The compiled path (:mod:`.fr_columns`) when enabled and it accepts the dump, else None."""
    global _COMPILED_BROKEN
    if data[:1] != b"\x80" or _COMPILED_BROKEN or not compiled_decoder_enabled():
        return None
    try:
        from .fr_columns import fast_dump_columns

        return fast_dump_columns(data, rank=ctx.rank_hint, file=ctx.file, source="fr_pickle")
    except Exception as e:        # numba or the decoder itself failing must not cost a rank's dump
        _COMPILED_BROKEN = True
        warnings.warn(f"the compiled Flight Recorder decoder failed ({type(e).__name__}: {e}); reading dumps "
                      f"with the unpickler instead (set {DECODER_ENV}=unpickle to skip it)", RuntimeWarning,
                      stacklevel=2)
        return None


class FlightRecorderReader(FileReader):
    """Flight Recorder pickle dumps. The rank comes from the file name."""

    name = "fr_pickle"
    line_oriented = False

    def sniff(self, head: bytes, path: str) -> bool:
        return head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5

    def read(self, data: bytes, ctx: FileContext, out: Output) -> int:
        # A dump is tens of thousands of fresh containers and no reference cycles: the cyclic GC
        # would rescan everything alive (all earlier dumps' rows) many times over for nothing.
        got = _compiled_columns(data, ctx) if self.name == "fr_pickle" else None
        if got is not None:
            events, progress = got
        else:
            enabled = gc.isenabled()
            gc.disable()
            try:
                dump, kind = parse_dump_bytes(data)
                events, progress = dump_to_columns(dump, rank=ctx.rank_hint, file=ctx.file, source=kind)
                del dump
            finally:
                if enabled:
                    gc.enable()
        out.frames.setdefault("events", []).append(events)     # a column batch, see assemble.build_frame
        out.progress.extend(progress)
        if ctx.rank_hint is not None:
            out.ranks.append({"rank": ctx.rank_hint})
        return 0


class FlightRecorderJsonReader(FlightRecorderReader):
    """Flight Recorder JSON dumps (``_dump_fr_trace_json``): strings in pg_status, 0 for missing times."""

    name = "fr_json"

    def sniff(self, head: bytes, path: str) -> bool:
        s = head.lstrip()[:4096]
        if s[:1] != b"{" or b'"event"' in s[:200]:
            return False
        return any(k in s for k in (b'"pg_config"', b'"entries"', b'"comm_lib_version"', b'"nccl_version"',
                                    b'"pg_status"'))


register_file_reader(FlightRecorderReader())
register_file_reader(FlightRecorderJsonReader())


# --- gloo pg_config repair -------------------------------------------------------------------

def repair_pg_config(dump: dict, world_size: int | None = None) -> dict:
    """Rebuild a gloo dump's ``pg_config`` (keyed ``''``) from its entries' ``process_group``.

    The stock analyzer (``torchfrtrace``) looks groups up by name and crashes on the ``''`` key
    (``KeyError: ('0', 0)``). Each group seen in ``entries`` gets ``{name, desc, ranks}`` where
    ``ranks`` is the original list when it had one, else ``range(world_size)``. Returns a new dict;
    dumps with a proper ``pg_config`` come back unchanged (copied).
    """
    fixed = dict(dump)
    cfg = dump.get("pg_config") or {}
    if isinstance(cfg, dict) and cfg and "" not in cfg:
        return fixed
    orig_ranks = []
    if isinstance(cfg, dict):
        for c in cfg.values():
            orig_ranks = orig_ranks or _ranks_of(c)
    if not orig_ranks and world_size:
        orig_ranks = list(range(world_size))
    groups: dict[str, str] = {}
    for e in dump.get("entries") or []:
        g = e.get("process_group") if isinstance(e, dict) else None
        if isinstance(g, (list, tuple)) and g:
            groups.setdefault(str(g[0]), str(g[1]) if len(g) > 1 and g[1] is not None else "")
    if not groups:
        groups = {"0": "default_pg"}
    fixed["pg_config"] = {name: {"name": name, "desc": desc, "ranks": str(orig_ranks)} for name, desc in groups.items()}
    return fixed


def _rank_from_name(name: str) -> int | None:
    from .sources import rank_hints

    return rank_hints(name).get("rank_hint")


def write_repaired_dumps(src_dir: str | os.PathLike, dst_dir: str | os.PathLike) -> list[str]:
    """Copy every dump in ``src_dir`` to ``dst_dir`` as a pickle with ``pg_config`` repaired.

    JSON dumps are converted (``pg_status`` strings become ints), so ``torchfrtrace dst_dir``
    can read them. The world size is the number of ranks whose dumps are present (or the largest
    rank + 1). Files that are not dumps are skipped. Returns the written paths.
    """
    src_dir, dst_dir = os.fspath(src_dir), os.fspath(dst_dir)
    os.makedirs(dst_dir, exist_ok=True)
    dumps: dict[str, dict] = {}
    for name in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, name)
        if not os.path.isfile(path):
            continue
        try:
            dumps[name] = read_dump(path)
        except (InputError, UnsafePickleError):
            continue
    ranks = [r for r in (_rank_from_name(n) for n in dumps) if r is not None]
    world = max(len(dumps), (max(ranks) + 1) if ranks else 0) or None
    written = []
    for name, dump in dumps.items():
        fixed = repair_pg_config(dump, world)
        status = fixed.get("pg_status")
        if isinstance(status, dict):
            fixed["pg_status"] = {k: {kk: (_as_int(vv) if _as_int(vv) is not None else vv) for kk, vv in v.items()}
                                  if isinstance(v, dict) else v for k, v in status.items()}
        for e in fixed.get("entries") or []:
            if isinstance(e, dict) and isinstance(e.get("process_group"), list):
                e["process_group"] = tuple(e["process_group"])
        out = os.path.join(dst_dir, name)
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(fixed, f, protocol=2)
        os.replace(tmp, out)
        written.append(out)
    return written

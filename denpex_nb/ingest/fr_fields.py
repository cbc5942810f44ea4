"""Flight Recorder fields, declared once: which entry keys are read, how each is typed, and the
rules that turn them into event columns. Both decoders use this module and nothing else for the
mapping (see docs/formats.md §10.1, "Fields used", for the dump format):

* the compiled decoder (:mod:`.fr_columns`, numba) walks the pickle's node table;
* the restricted-unpickler path (:func:`.flight_recorder.dump_to_columns`) walks unpickled dicts
  (or parsed JSON) with :func:`python_entry_arrays`.

Each produces the same :class:`EntryArrays` (one row per entry, one typed row per declared key:
the *extraction* step, the only one that differs), and :func:`event_columns` applies the rules
(the *derivation* step, shared). Adding an entry field means one line in :data:`ENTRY_FIELDS`
(plus a rule in :func:`event_columns` when it is not a plain pass-through column); the compiled
walker's key table is generated from it and takes its row counts as arguments, so a change here
never meets a stale numba cache.

Typing of an entry value, by its declared kind (anything else is missing, in both paths; the
compiled one *declines* a dump holding a wrongly typed value, the unpickler path reads it as
missing):

============ ================================================================================
``INT``      a Python ``int`` (not ``bool``) within int64
``BOOL``     ``True`` / ``False``
``STR``      a ``str``
``GROUP``    ``process_group``: a list/tuple whose first item is a ``str`` (the name), second
             item a ``str`` (the description) or absent/None
``DTYPES``   ``input_dtypes``: a list/tuple; its first item when that is a ``str``
``SHAPES``   ``input_sizes`` / ``output_sizes``: a list/tuple of lists/tuples of ``int`` dims
============ ================================================================================

The rules (:func:`event_columns`), each written once:

* ``op``: :func:`op_of` the ``profiling_name`` (``nccl:all_reduce`` -> ``all_reduce``);
* p2p: an entry is p2p when its ``is_p2p`` flag is True *or* its op is in :data:`P2P_OPS`;
  ``seq`` is then ``p2p_seq_id``, else ``collective_seq_id``; ``seq_kind`` is always ``fr``;
* ``root`` of a p2p entry: :func:`peer_of` (the other rank of ``'send 0->1'``); None otherwise;
* ``t_wall``: ``time_created_ns``, where 0 means missing (JSON dumps write 0);
* ``dtype``: :func:`dtype_name` of the first input dtype;
* ``pg`` / ``pg_desc``: :func:`pg_name_desc` (the group tuple, else ``pg_id``; an empty desc is none);
* ``state``: as recorded when it is one of :data:`STATES`, else missing; ``retired`` kept as is
  (on gloo ``state`` is always ``scheduled`` and ``retired`` is the only completion signal);
* ``world_size``: the number of ranks of the entry's group in ``pg_config``
  (:func:`world_by_pg`; gloo's single ``''`` key answers every group);
* shapes as tuples of tuples, ``numel`` = Σ prod(dims) (unknown past 63 bits);
* rank from the file name only; ``line`` is the entry's 0-based index among the entries read;
* progress rows from ``pg_status`` (:func:`progress_rows`; JSON writes its numbers as strings).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops import normalize_op
from ..vocab import SeqKind, State
from ._text import dtype_name
from .assemble import Coded, Const, Nullable

INT, BOOL, STR, GROUP, DTYPES, SHAPES = "int", "bool", "str", "group", "dtypes", "shapes"
#: the order kinds take in :data:`ENTRY_FIELDS` (the compiled walker tells them apart by position)
KIND_ORDER = (INT, BOOL, STR, GROUP, DTYPES, SHAPES)


@dataclass(frozen=True)
class Field:
    """One entry key: its ``kind`` (how a value is typed, see the module docstring) and the
    extra event column it is copied to unchanged (``column``), if any."""

    key: str
    kind: str
    column: str | None = None


#: every entry key either decoder reads, grouped by kind in :data:`KIND_ORDER`
ENTRY_FIELDS = (
    Field("record_id", INT, "record_id"),
    Field("pg_id", INT),  # -> pg when there is no process_group
    Field("collective_seq_id", INT, "collective_seq_id"),
    Field("p2p_seq_id", INT, "p2p_seq_id"),
    Field("time_created_ns", INT),  # -> t_wall (0 = missing)
    Field("timeout_ms", INT, "timeout_ms"),
    Field("retired", BOOL, "retired"),
    Field("is_p2p", BOOL),  # -> is_p2p (with the op rule)
    Field("profiling_name", STR),  # -> op, root
    Field("state", STR),  # -> state
    Field("process_group", GROUP),  # -> pg, pg_desc
    Field("input_dtypes", DTYPES),  # -> dtype
    Field("input_sizes", SHAPES),  # -> in_shapes, numel_in
    Field("output_sizes", SHAPES),  # -> out_shapes, numel_out
)
assert [f.kind for f in ENTRY_FIELDS] == sorted((f.kind for f in ENTRY_FIELDS), key=KIND_ORDER.index)
assert [f.kind for f in ENTRY_FIELDS if f.kind in (GROUP, DTYPES, SHAPES)] == [GROUP, DTYPES, SHAPES, SHAPES]


def keys_of(kind: str) -> tuple[str, ...]:
    return tuple(f.key for f in ENTRY_FIELDS if f.kind == kind)


INT_KEYS, BOOL_KEYS, STR_KEYS = keys_of(INT), keys_of(BOOL), keys_of(STR)
#: all keys in walker order (the compiled walker's key table is built from this)
KEYS = tuple(f.key for f in ENTRY_FIELDS)
INT_ROW = {k: i for i, k in enumerate(INT_KEYS)}
BOOL_ROW = {k: i for i, k in enumerate(BOOL_KEYS)}
STR_ROW = {k: i for i, k in enumerate(STR_KEYS)}
#: rows of :attr:`EntryArrays.strs` after the ``STR`` keys: group name, group desc, first dtype
S_PG0, S_PG1, S_DTYPE = len(STR_KEYS), len(STR_KEYS) + 1, len(STR_KEYS) + 2
N_STR_ROWS = len(STR_KEYS) + 3

P2P_OPS = frozenset({"send", "recv", "recv_anysource"})
#: ``state`` values kept (anything else is missing)
STATES = (State.SCHEDULED, State.STARTED, State.COMPLETED)
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
#: a numel at or past this (in magnitude) is unknown: no tensor has that many elements
NUMEL_MAX = 1 << 63


@dataclass
class EntryArrays:
    """The extraction result both decoders produce: ``n`` entries, each declared key typed.

    ``ints`` (int64) / ``int_ok`` (bool): one row per :data:`INT_KEYS`; ``bools`` (int8, 1 / 0 /
    -1 missing): one row per :data:`BOOL_KEYS`; ``strs`` (int32 ids into ``texts``, -1 missing):
    one row per :data:`STR_KEYS`, then group name, group desc and first dtype (:data:`S_PG0` ...);
    ``shapes`` (int64 ids into ``shape_list``, -1 missing): input, output; ``numel`` /
    ``numel_ok``: per shape."""

    ints: np.ndarray
    int_ok: np.ndarray
    bools: np.ndarray
    strs: np.ndarray
    texts: list
    shapes: np.ndarray
    shape_list: list
    numel: np.ndarray
    numel_ok: np.ndarray

    @property
    def n(self) -> int:
        return self.shapes.shape[1]


# --- the rules on single values (called once per distinct value) ------------------------------


def op_of(profiling_name: Any) -> str | None:
    """``'nccl:all_reduce'`` -> ``'all_reduce'`` (see :func:`denpex_nb.ops.normalize_op`)."""
    return normalize_op(profiling_name) if isinstance(profiling_name, str) else None


def state_of(state: Any) -> str | None:
    return state if state in STATES else None


def dtype_of(first_dtype: str | None) -> str | None:
    """The first input dtype as a torch name (``'Float'`` -> ``'float32'``)."""
    return dtype_name(first_dtype)


#: ``0->1`` in a p2p profiling name. A match starts only where a run of digits starts and takes at
#: most 18 digits a side, so a hostile name (200 000 digits, no arrow) costs linear time, not
#: quadratic backtracking, and never an int too long to convert
_PEER = re.compile(r"(?<!\d)(\d{1,18})\s*->\s*(\d{1,18})(?!\d)")


def peer_of(profiling_name: str | None, op: str | None, rank: int | None) -> int | None:
    """The other rank of a p2p entry, from ``'nccl:send 0->1'`` (source -> destination): the side
    that is not ``rank``; with the rank unknown, the destination of a send and the source of
    anything else (a recv)."""
    m = _PEER.search(profiling_name or "")
    if not m:
        return None
    src, dst = int(m.group(1)), int(m.group(2))
    if rank is not None:
        return dst if src == rank else src
    return dst if op == "send" else src


def pg_name_desc(name: str | None, desc: str | None, pg_id: int | None) -> tuple[str | None, str | None]:
    """(pg, pg_desc) of an entry: its ``process_group`` ``(name, desc)`` when it has a name, else
    ``pg_id`` alone (older dumps) and no desc; an empty desc is no desc."""
    if name is not None:
        return name, (desc if desc else None)
    return (str(pg_id) if pg_id is not None else None), None


@functools.lru_cache(maxsize=256)
def _ranks_in_text(raw: str) -> tuple[int, ...]:
    """``"[0, 1, ... 1023]"`` -> the ranks; cached, as every dump of a job repeats the same text."""
    return tuple(int(x) for x in re.findall(r"-?\d+", raw))


def ranks_of(cfg: Any) -> list[int]:
    """The ranks of one ``pg_config`` value (``{"ranks": "[0, 1]"}``, or a list)."""
    raw = cfg.get("ranks") if isinstance(cfg, dict) else None
    if isinstance(raw, str):
        return list(_ranks_in_text(raw))
    if isinstance(raw, (list, tuple)):
        return [int(x) for x in raw if type(x) is int]
    return []


def world_by_pg(pg_config: Any) -> dict[str, int]:
    """Process group -> world size from ``pg_config``; gloo's single ``''`` key also answers
    ``'*'`` (any group, see :func:`world_of`)."""
    out: dict[str, int] = {}
    if isinstance(pg_config, dict):
        for key, cfg in pg_config.items():
            count = len(ranks_of(cfg))
            if count:
                out[str(key)] = count
        if len(out) == 1 and "" in out:  # gloo: one config keyed ''
            out["*"] = out[""]
    return out


def world_of(worlds: dict[str, int], pg: str | None) -> int | None:
    return worlds.get(pg, worlds.get("*")) if pg is not None else worlds.get("*")


def as_int(v: Any) -> int | None:
    """A ``pg_status`` number (an int, or a string in JSON dumps) or None."""
    if v is None or v == "" or isinstance(v, float):
        return None
    try:
        x = int(v)
    except (TypeError, ValueError):
        return None
    return x if I64_MIN <= x <= I64_MAX else None


def progress_rows(pg_status: Any, *, rank: int | None, file: str, source: str) -> list[dict]:
    """One progress row per process group of ``pg_status``."""
    rows = []
    if isinstance(pg_status, dict):
        for pg, st in pg_status.items():
            if not isinstance(st, dict):
                continue
            rows.append(
                {
                    "rank": rank,
                    "pg": str(pg),
                    "seq_kind": SeqKind.FR,
                    "last_enqueued": as_int(st.get("last_enqueued_collective")),
                    "last_started": as_int(st.get("last_started_collective")),
                    "last_completed": as_int(st.get("last_completed_collective")),
                    "source": source,
                    "file": file,
                }
            )
    return rows


def shape_numel(shape: tuple) -> int | None:
    """Σ prod(dims) of a shape (tuple of dim tuples); None past :data:`NUMEL_MAX` (stops before
    the products grow: hostile dims cost no big-integer arithmetic)."""
    total = 0
    for dims in shape:
        p = 1
        for d in dims:
            p *= d
            if not -NUMEL_MAX < p < NUMEL_MAX:
                return None
        total += p
    return total if -NUMEL_MAX < total < NUMEL_MAX else None


# --- extraction from Python objects (the unpickler / JSON path) --------------------------------


def _int_row(col: list) -> tuple[np.ndarray, np.ndarray]:
    if col and all(type(v) is int for v in col):
        try:
            return np.array(col, dtype=np.int64), np.ones(len(col), dtype=bool)
        except OverflowError:
            pass
    vals = [v if type(v) is int and I64_MIN <= v <= I64_MAX else None for v in col]
    return (
        np.array([0 if v is None else v for v in vals], dtype=np.int64),
        np.array([v is not None for v in vals], dtype=bool),
    )


def _shape_ids(col: list, index: dict, shape_list: list, numels: list) -> list[int]:
    """Intern ``col``'s shapes (lists of dim lists) into ``shape_list``: ids, -1 when missing or
    not a list of lists of ints. Work per entry is one C-level ``tuple(map(tuple, ...))``; the
    check and numel run once per distinct shape."""

    def new(key):
        if all(type(d) is int for dims in key for d in dims):
            index[key] = len(shape_list)
            shape_list.append(key)
            numels.append(shape_numel(key))
        else:
            index[key] = -1
        return index[key]

    out = []
    for s in col:
        if type(s) is not list and type(s) is not tuple:
            out.append(-1)
            continue
        try:
            key = tuple(map(tuple, s))  # TypeError: an item is no list
            sid = index.get(key)  # TypeError: unhashable dims
        except TypeError:
            out.append(-1)
            continue
        if sid is None:
            if not all(type(dims) is list or type(dims) is tuple for dims in s):
                index[key] = -1  # tuple("ab") made dims of a string: not a shape
                sid = -1
            else:
                sid = new(key)
        out.append(sid)
    return out


def python_entry_arrays(entries: Any) -> EntryArrays:
    """:class:`EntryArrays` of unpickled (or JSON) entries; entries that are not dicts are skipped
    (the compiled walker declines a dump holding one)."""
    if not isinstance(entries, (list, tuple)):
        entries = []
    entries = [e for e in entries if type(e) is dict]
    n = len(entries)
    cols = {k: [e.get(k) for e in entries] for k in KEYS}
    ints = np.zeros((len(INT_KEYS), n), dtype=np.int64)
    int_ok = np.zeros((len(INT_KEYS), n), dtype=bool)
    for i, k in enumerate(INT_KEYS):
        ints[i], int_ok[i] = _int_row(cols[k])
    bools = np.array(
        [[1 if v is True else 0 if v is False else -1 for v in cols[k]] for k in BOOL_KEYS], dtype=np.int8
    ).reshape(len(BOOL_KEYS), n)
    ids: dict = {}
    strs = np.full((N_STR_ROWS, n), -1, dtype=np.int32)

    def sid(v):
        return ids.setdefault(v, len(ids)) if type(v) is str else -1

    for i, k in enumerate(STR_KEYS):
        strs[i] = [sid(v) for v in cols[k]]
    groups = [
        g if (type(g) is list or type(g) is tuple) and g and type(g[0]) is str else None
        for g in cols[keys_of(GROUP)[0]]
    ]
    strs[S_PG0] = [-1 if g is None else sid(g[0]) for g in groups]
    strs[S_PG1] = [-1 if g is None or len(g) < 2 else sid(g[1]) for g in groups]
    strs[S_DTYPE] = [sid(d[0]) if (type(d) is list or type(d) is tuple) and d else -1 for d in cols[keys_of(DTYPES)[0]]]
    index: dict = {}
    shape_list: list = []
    numels: list = []
    shapes = np.array(
        [_shape_ids(cols[k], index, shape_list, numels) for k in keys_of(SHAPES)], dtype=np.int64
    ).reshape(2, n)
    return EntryArrays(
        ints,
        int_ok,
        bools,
        strs,
        list(ids),
        shapes,
        shape_list,
        np.array([0 if x is None else x for x in numels], dtype=np.int64),
        np.array([x is not None for x in numels], dtype=bool),
    )


# --- derivation: the event columns (both paths) -------------------------------------------------


#: the narrow integer types a column may travel as, with their bounds (made once: ``np.iinfo`` per
#: call cost ~4 us, 16 calls a dump)
_NARROW = tuple((kind, int(np.iinfo(kind).min), int(np.iinfo(kind).max)) for kind in (np.int8, np.int16, np.int32))


def _small_int(values: np.ndarray, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """The narrowest integer dtype that holds ``values`` (a result travels back from a worker
    process: 2 bytes a row instead of 8 when that is enough; build_frame widens it again).
    ``lo``/``hi``: the values' minimum and maximum when the caller has them already."""
    if values.size == 0:
        return values
    if lo is None or hi is None:
        lo, hi = int(values.min()), int(values.max())
    for kind, kmin, kmax in _NARROW:
        if kmin <= lo and hi <= kmax:
            return values.astype(kind)
    return values


def masked_int(values: np.ndarray, ok: np.ndarray):
    """A nullable integer column, as compact as it can travel: Const when one value (or none)
    fills it, else narrow values plus a missing mask (None when nothing is missing). One count
    and one min/max pass decide all three (this runs ten times per dump, 1024 dumps a load)."""
    n = len(values)
    if not n:
        return Nullable(values, None)
    known = int(np.count_nonzero(ok))
    if not known:
        return Const(None, n)
    v = values if known == n else np.where(ok, values, 0)
    lo, hi = int(v.min()), int(v.max())
    if known == n and lo == hi:
        return Const(lo, n)
    out = _small_int(v, lo, hi)
    if out is values:  # not narrowed: a copy, not a view that keeps the dump's whole int table alive
        out = values.copy()
    return Nullable(out, None if known == n else ~ok)


def _small_codes(coded: Coded) -> Coded:
    coded.codes = coded.codes.astype(
        np.int8 if len(coded.values) < 127 else np.int16 if len(coded.values) < 32767 else np.int32
    )
    return coded


def _group_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``keys`` (k x n ints) by distinct column: (first row of each group, row -> group)."""
    n = keys.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    if (keys == keys[:, :1]).all():  # one value in the whole dump (the usual case)
        return np.zeros(1, dtype=np.intp), np.zeros(n, dtype=np.intp)
    combined = np.zeros(n, dtype=np.int64)
    for row in keys:  # 1-D uniques only: far cheaper than np.unique(axis=1)
        u, inv = np.unique(row, return_inverse=True)
        combined = combined * len(u) + inv.ravel()
    _, first, inv = np.unique(combined, return_index=True, return_inverse=True)
    return first, inv.ravel()


def _codes_of(results: list, inv: np.ndarray) -> Coded:
    """A Coded column from one result per key and the row -> key index (None results: missing)."""
    index: dict = {}
    per_key = np.empty(len(results), dtype=np.int32)
    for i, r in enumerate(results):
        per_key[i] = -1 if r is None else index.setdefault(r, len(index))
    return _small_codes(Coded(per_key[inv], list(index)))


def _by_string(ids: np.ndarray, texts: list[str], fn) -> tuple[Coded, list, np.ndarray]:
    """A string row given as ids (-1 = missing): ``fn`` runs once per distinct string present
    (and once on None when some are missing). Returns the Coded column, the result per id (the
    last one for None) and the row -> id index used."""
    k = len(texts)
    idx = np.where(ids < 0, k, ids)
    present = np.bincount(idx, minlength=k + 1) > 0
    results: list = [None] * (k + 1)
    index: dict = {}
    per_id = np.full(k + 1, -1, dtype=np.int32)
    for i in np.flatnonzero(present).tolist():
        r = results[i] = fn(texts[i] if i < k else None)
        if r is not None:
            per_id[i] = index.setdefault(r, len(index))
    return _small_codes(Coded(per_id[idx], list(index))), results, idx


def event_columns(a: EntryArrays, *, rank: int | None, file: str, source: str, pg_config: Any = None) -> dict:
    """The events column batch (see :func:`.assemble.build_frame`) of one dump's entries."""
    n = a.n
    texts = a.texts

    def ints(key):
        return a.ints[INT_ROW[key]], a.int_ok[INT_ROW[key]]

    op_col, ops, op_idx = _by_string(a.strs[STR_ROW["profiling_name"]], texts, op_of)
    flag = a.bools[BOOL_ROW["is_p2p"]]
    is_p2p = (flag == 1) | np.array([o in P2P_OPS for o in ops], dtype=bool)[op_idx]
    coll, coll_ok = ints("collective_seq_id")
    p2p, p2p_ok = ints("p2p_seq_id")
    seq, seq_ok = np.where(is_p2p, p2p, coll), np.where(is_p2p, p2p_ok, coll_ok)

    peer_vals = np.zeros(n, dtype=np.int64)
    peer_ok = np.zeros(n, dtype=bool)
    if is_p2p.any():
        prof = a.strs[STR_ROW["profiling_name"]]
        sends = np.array([o == "send" for o in ops], dtype=np.int64)[op_idx]
        first, inv = _group_rows(np.vstack([prof, sends]))
        per_key = [
            peer_of(texts[p] if p >= 0 else None, "send" if s else None, rank)
            for p, s in zip(prof[first].tolist(), sends[first].tolist())
        ]
        got = np.array([-1 if x is None else x for x in per_key], dtype=np.int64)[inv]
        peer_ok = is_p2p & np.array([x is not None for x in per_key], dtype=bool)[inv]
        peer_vals = np.where(peer_ok, got, 0)

    pg_id, pg_id_ok = ints("pg_id")
    pg_keys = np.vstack([a.strs[S_PG0], a.strs[S_PG1], np.where(pg_id_ok, pg_id, 0), pg_id_ok.astype(np.int64)])
    first, inv = _group_rows(pg_keys)
    pairs = [
        pg_name_desc(texts[g0] if g0 >= 0 else None, texts[g1] if g1 >= 0 else None, pid if ok else None)
        for g0, g1, pid, ok in pg_keys[:, first].T.tolist()
    ]
    pg_col = _codes_of([p[0] for p in pairs], inv)
    desc_col = _codes_of([p[1] for p in pairs], inv)
    worlds = world_by_pg(pg_config)
    world_per = [world_of(worlds, p) for p in pg_col.values] + [world_of(worlds, None)]
    world = np.array([-1 if w is None else w for w in world_per], dtype=np.int64)[pg_col.codes]

    t, t_ok = ints("time_created_ns")
    in_ids, out_ids = a.shapes[0], a.shapes[1]
    numel = np.append(a.numel, 0)
    numel_ok = np.append(a.numel_ok, False)
    events = {
        "rank": Const(rank, n),
        "pg": pg_col,
        "pg_desc": desc_col,
        "seq": masked_int(seq, seq_ok),
        "seq_kind": Const(SeqKind.FR, n),
        "op": op_col,
        "in_shapes": _small_codes(Coded(in_ids, a.shape_list)),
        "out_shapes": _small_codes(Coded(out_ids, a.shape_list)),
        "numel_in": masked_int(numel[in_ids], numel_ok[in_ids]),
        "numel_out": masked_int(numel[out_ids], numel_ok[out_ids]),
        "dtype": _by_string(a.strs[S_DTYPE], texts, dtype_of)[0],
        "state": _by_string(a.strs[STR_ROW["state"]], texts, state_of)[0],
        "world_size": masked_int(world, world >= 0),
        "root": masked_int(peer_vals, peer_ok),
        "_t_wall_ns": masked_int(t, t_ok & (t != 0)),  # 0 = missing (JSON dumps)
        "source": Const(source, n),
        "file": Const(file, n),
        "line": _small_int(np.arange(n, dtype=np.int64), 0, n - 1),
        "is_p2p": is_p2p,
    }
    for f in ENTRY_FIELDS:  # pass-through columns
        if f.column is None:
            continue
        if f.kind == INT:
            events[f.column] = masked_int(*ints(f.key))
        elif f.kind == BOOL:
            b = a.bools[BOOL_ROW[f.key]]
            events[f.column] = Nullable(b == 1, b < 0) if (b < 0).any() else b == 1
        else:
            raise AssertionError(f"no pass-through for a {f.kind} field")
    return events

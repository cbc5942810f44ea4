"""The data model: an :class:`Incident` is a handful of tidy pandas frames.

Every reader produces rows for these frames; every diagnosis, plot and notebook reads them.
The schema lives here and only here (``SCHEMAS``), so tests can check it and readers can coerce
to it with :func:`coerce`.

Frames
------
``events``   one row per rank per collective observation (a FR entry, a trace line, a watchdog
             timeout, a DETAIL fingerprint, an NCCL COLL line ...).
``errors``   one row per error, timeout, crash, abort or warning that matters.
``ranks``    one row per rank: where it ran, how it ended, how far it got (default process group).
``progress`` one row per (rank, pg, seq_kind): last seq enqueued / completed, from status lines,
             FR ``pg_status`` and trace files. ``ranks.last_seq_*`` summarise its default-pg rows.
``unparsed`` every input line no reader recognised. Within the text budget one row per line;
             past it, runs of consecutive lines collapse into one row with ``n_lines > 1`` and
             no text, so memory grows with what is kept, not with file size.
``signals``  one row per line that signals a failure (or a warning with a family, or says the work
             finished), read by a reader or not: severity and family from generic vocabulary
             (``denpex_nb.signals``, docs/signals.md), gathered while reading.
``sources``  one row per input file: detected format, line accounting, load errors.

Sequence counters (``seq_kind``) are *different counters* and must never be compared with each
other: ``work`` (WorkNCCL SeqNum / status-line ids), ``fr`` (Flight Recorder collective_seq_id),
``detail`` (DETAIL fingerprint SequenceNumber, 0-based), ``desync`` (desync-report ``#N``, per rank),
``nccl_opcount`` (NCCL COLL opCount, per communicator), ``nccl_position`` (ordinal of a COLL line
per communicator), ``trace`` (denpex_nb.trace per-pg counter, 1-based like ``work``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .vocab import OPS, TRUNCATED_TRACEBACK, ErrorKind, SeqKind, State  # noqa: F401 - re-exported

# --- vocabularies (defined once in denpex_nb.vocab; plain tuples here for the schema) -----------

SEQ_KINDS = tuple(str(k) for k in SeqKind)
STATES = tuple(str(s) for s in State)
#: Error kinds; tests check every kind a reader emits is here.
ERROR_KINDS = tuple(str(k) for k in ErrorKind)

# --- schema ----------------------------------------------------------------------------------

#: dtype per column, per frame. "category" columns hold repeated strings; "object" columns hold
#: Python objects (tuples of shapes, tuples of ranks); nullable integer dtypes for optional ints.
SCHEMAS: dict[str, dict[str, str]] = {
    "events": {
        "rank": "Int32",  # global rank; <NA> when unknown
        "pg": "category",  # process-group id as the source names it ("0", "1", NCCL commId)
        "pg_desc": "category",  # "default_pg", "tp_group" ...
        "seq": "Int64",
        "seq_kind": "category",  # one of SEQ_KINDS
        "op": "category",  # one of OPS
        "in_shapes": "object",  # tuple[tuple[int, ...], ...] or None
        "out_shapes": "object",
        "numel_in": "Int64",
        "numel_out": "Int64",
        "dtype": "category",  # first input tensor's dtype, torch spelling: "float32"
        "state": "category",  # one of STATES
        "world_size": "Int32",  # size of the process group when the source says
        "root": "Int32",  # broadcast/reduce root, p2p peer
        "t_wall": "datetime64[ns, UTC]",
        "t_mono": "Float64",  # seconds on a per-process monotonic clock
        "source": "category",  # reader name: "c10d", "fr_pickle", "trace", "nccl" ...
        "file": "category",
        "line": "Int64",  # 1-based line in file; FR entry index for dumps
    },
    "errors": {
        "rank": "Int32",
        "t_wall": "datetime64[ns, UTC]",
        "kind": "category",  # one of ERROR_KINDS
        "message": "string",
        "op": "category",
        "seq": "Int64",
        "seq_kind": "category",
        "pg": "category",
        "related_ranks": "object",  # tuple[int, ...]: ranks the message names (missing, lagging, peer)
        "exit_code": "Int32",
        "signal": "category",  # "SIGABRT" ...
        "source": "category",
        "file": "category",
        "line": "Int64",
    },
    "ranks": {
        "rank": "Int32",
        "host": "category",
        "pid": "Int64",
        "local_rank": "Int32",
        "device": "category",
        "first_error_t": "datetime64[ns, UTC]",
        "exit_code": "Int32",
        "signal": "category",
        "last_seq_enqueued": "Int64",
        "last_seq_completed": "Int64",
    },
    "progress": {
        "rank": "Int32",
        "pg": "category",
        "seq_kind": "category",
        "last_enqueued": "Int64",
        "last_started": "Int64",
        "last_completed": "Int64",
        "source": "category",
        "file": "category",
        "line": "Int64",
    },
    "unparsed": {
        "file": "category",
        "line": "Int64",  # first line of the row
        "n_lines": "Int64",  # 1, or the length of a collapsed run
        "text": "string",  # <NA> for collapsed runs past the text budget
    },
    "signals": {
        "rank": "Int32",  # <NA> when no prefix, file name or header names it
        "t_wall": "datetime64[ns, UTC]",
        "file": "category",
        "line": "Int64",
        "severity": "category",  # vocab.SignalSeverity: fatal, error, warning, info
        "family": "category",  # vocab.SignalFamily: network, device, memory, size, timeout, exit ...
        "failure": "boolean",  # the line reports a failure (a warning or a finish line does not)
        "text": "string",  # the message, prefixes stripped, first 400 characters
        "host": "category",  # the host a prefix named (pdsh, NCCL), for peers named by address
    },
    "sources": {
        "file": "category",
        "format": "category",
        "rank_hint": "Int32",  # rank taken from the file name / directory, if any
        "bytes": "Int64",
        "lines_total": "Int64",
        "lines_parsed": "Int64",
        "lines_unparsed": "Int64",
        "error": "string",
    },
}

FRAMES = tuple(SCHEMAS)


def empty_frame(name: str) -> pd.DataFrame:
    """An empty frame with the right columns and dtypes: a copy of one built once per schema
    (building it coerces every column, ~8 ms, and every incident, file and test asks for several)."""
    return _empty_template(name).copy(deep=True)


@functools.cache
def _empty_template(name: str) -> pd.DataFrame:
    return coerce(name, pd.DataFrame({c: [] for c in SCHEMAS[name]}))


def coerce(name: str, data: pd.DataFrame | Iterable[Mapping[str, Any]] | Mapping[str, list]) -> pd.DataFrame:
    """Build or fix up a frame so it has exactly the schema's columns, in order, with its dtypes.

    Accepts a DataFrame, a list of row dicts or a dict of columns. Missing columns become
    all-missing; unknown columns are kept at the end (readers may add diagnostics columns).
    """
    schema = SCHEMAS[name]
    df = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    n = len(df)
    out = {}
    for col, dtype in schema.items():
        s = df[col] if col in df.columns else pd.Series([None] * n, index=df.index, dtype="object")
        out[col] = _as_dtype(s, dtype)
    extra = [c for c in df.columns if c not in schema]
    res = pd.DataFrame(out, index=df.index)
    for c in extra:
        res[c] = df[c]
    return res.reset_index(drop=True)


def _as_dtype(s: pd.Series, dtype: str) -> pd.Series:
    if dtype == "object":
        return s.astype("object")
    if dtype.startswith("datetime64"):
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            return s.dt.tz_convert("UTC").astype(dtype)
        return pd.to_datetime(s, utc=True, errors="coerce").astype(dtype)
    if dtype == "category":
        if isinstance(s.dtype, pd.CategoricalDtype):
            return s
        s = s.astype("object").where(s.notna(), None)
        return s.astype("category")
    if dtype == "string":
        return s.astype("string")
    if dtype in ("Int32", "Int64", "Float64"):
        return _bounded_numbers(s, dtype)
    return s.astype(dtype)


_INT_RANGE = {"Int32": (-(2**31), 2**31 - 1), "Int64": (-(2**63), 2**63 - 1)}


def _bounded_numbers(s: pd.Series, dtype: str) -> pd.Series:
    """Numbers as ``dtype``; a value that is not a number or does not fit becomes missing (a log
    line may carry ``[rank2147483648]`` or ``SeqNum=99999999999999999999``: that row's field is
    unknown, the load goes on)."""
    if s.dtype == dtype:
        return s
    if dtype == "Float64":
        num = pd.to_numeric(s, errors="coerce")
        num = num.astype("float64") if num.dtype == object else num
        num = num.where(pd.Series(np.isfinite(num.to_numpy(dtype="float64", na_value=np.nan)), index=s.index))
        return num.astype("Float64")
    lo, hi = _INT_RANGE[dtype]
    if pd.api.types.is_integer_dtype(s.dtype):  # numpy or nullable integers: vectorised
        ok = s.between(lo, hi).fillna(False).to_numpy(bool)
        if ok.all():
            return s.astype(dtype)
        raw = s.to_numpy(dtype="int64", na_value=0)
        return pd.Series(pd.arrays.IntegerArray(np.where(ok, raw, 0).astype(dtype.lower()), ~ok), index=s.index)
    if pd.api.types.is_float_dtype(s.dtype):
        f = s.to_numpy(dtype="float64", na_value=np.nan)
        ok = np.isfinite(f) & (f == np.floor(np.where(np.isfinite(f), f, 0))) & (f >= lo) & (f <= hi)
        return pd.Series(pd.arrays.IntegerArray(np.where(ok, f, 0).astype(dtype.lower()), ~ok), index=s.index)
    vals = [_int_or_none(v) for v in s]
    return pd.Series(
        pd.array([v if v is not None and lo <= v <= hi else None for v in vals], dtype=dtype), index=s.index
    )


def _int_or_none(v):
    """An integer from an int, an integral float or a numeric string; None otherwise."""
    if v is None or v is pd.NA:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if f != f or f in (float("inf"), float("-inf")) or f != int(f):
        return None
    try:
        return int(v) if isinstance(v, str) and v.strip().lstrip("+-").isdigit() else int(f)
    except (TypeError, ValueError, OverflowError):
        return None


def check_schema(name: str, df: pd.DataFrame) -> list[str]:
    """Return a list of problems (empty when ``df`` follows the schema). Used by tests."""
    problems = []
    for col, dtype in SCHEMAS[name].items():
        if col not in df.columns:
            problems.append(f"{name}: missing column {col!r}")
            continue
        got = str(df[col].dtype)
        if dtype == "category" and not isinstance(df[col].dtype, pd.CategoricalDtype):
            problems.append(f"{name}.{col}: {got}, want category")
        elif dtype != "category" and got != dtype:
            problems.append(f"{name}.{col}: {got}, want {dtype}")
    return problems


@dataclass
class LineCounts:
    """Line accounting over all text inputs: ``total == parsed + unparsed`` always holds."""

    total: int = 0
    parsed: int = 0
    unparsed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"total": self.total, "parsed": self.parsed, "unparsed": self.unparsed}


@dataclass
class Incident:
    """Everything the readers found, as frames. Build one with :func:`denpex_nb.load`."""

    events: pd.DataFrame = field(default_factory=lambda: empty_frame("events"))
    errors: pd.DataFrame = field(default_factory=lambda: empty_frame("errors"))
    ranks: pd.DataFrame = field(default_factory=lambda: empty_frame("ranks"))
    progress: pd.DataFrame = field(default_factory=lambda: empty_frame("progress"))
    unparsed: pd.DataFrame = field(default_factory=lambda: empty_frame("unparsed"))
    signals: pd.DataFrame = field(default_factory=lambda: empty_frame("signals"))
    sources: pd.DataFrame = field(default_factory=lambda: empty_frame("sources"))
    notes: list[str] = field(default_factory=list)
    #: watched word (:data:`denpex_nb.vocab.MENTIONS`, e.g. ``"syncbn"``) -> the files whose lines
    #: mention it, parsed or not, noticed while they were read; None for an Incident not made by
    #: :func:`denpex_nb.load` (then a rule looks in ``unparsed`` itself)
    mentions: dict[str, list[str]] | None = None

    @property
    def lines(self) -> LineCounts:
        s = self.sources
        total = int(s["lines_total"].fillna(0).sum()) if len(s) else 0
        parsed = int(s["lines_parsed"].fillna(0).sum()) if len(s) else 0
        unparsed = int(s["lines_unparsed"].fillna(0).sum()) if len(s) else 0
        return LineCounts(total, parsed, unparsed)

    @property
    def ranks_seen(self) -> list[int]:
        seen: set[int] = set()
        for name in ("events", "errors", "ranks", "progress"):
            frame = getattr(self, name)
            col = frame["rank"]
            if name == "errors" and len(frame):  # a file that could not be read shows no rank
                col = col[frame["kind"].astype(object) != ErrorKind.LOAD_ERROR]
            seen.update(int(r) for r in col.dropna().unique())
        return sorted(seen)

    @property
    def is_empty(self) -> bool:
        return self.events.empty and self.errors.empty

    def __repr__(self) -> str:
        lc = self.lines
        return (
            f"<Incident ranks={self.ranks_seen} events={len(self.events)} errors={len(self.errors)} "
            f"files={len(self.sources)} lines={lc.total} parsed={lc.parsed} unparsed={lc.unparsed}>"
        )

    def _repr_html_(self) -> str:
        from html import escape

        lc = self.lines
        kinds = self.errors["kind"].value_counts() if len(self.errors) else pd.Series(dtype=int)
        err = ", ".join(f"{escape(str(k))}: {v}" for k, v in kinds.items() if v) or "none"
        return (
            "<div class='denpex-incident'><b>Incident</b>"
            f"<ul><li>ranks seen: {escape(str(self.ranks_seen))}</li>"
            f"<li>collective events: {len(self.events)}</li><li>errors: {err}</li>"
            f"<li>files: {len(self.sources)}; lines {lc.total} = {lc.parsed} parsed + {lc.unparsed} unparsed</li>"
            "</ul></div>"
        )

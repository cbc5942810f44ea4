"""Small shared pieces of the text readers: dtype and shape spellings, balanced parentheses,
rank lists, and the row builders every reader uses so rows look alike.

Nothing here raises on odd input: helpers return ``None`` (or an empty tuple) instead.
"""

from __future__ import annotations

import re
from typing import Any

from ..ops import normalize_op
from .base import FileContext, Line

#: c10 ScalarType names (DETAIL fingerprints, FR ``input_dtypes``) -> torch spelling.
DTYPES = {
    "float": "float32",
    "float32": "float32",
    "double": "float64",
    "float64": "float64",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "long": "int64",
    "int64": "int64",
    "int": "int32",
    "int32": "int32",
    "short": "int16",
    "int16": "int16",
    "char": "int8",
    "int8": "int8",
    "byte": "uint8",
    "uint8": "uint8",
    "bool": "bool",
    "complexfloat": "complex64",
    "complex64": "complex64",
    "complexdouble": "complex128",
    "complex128": "complex128",
    "complexhalf": "complex32",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
}

#: NCCL ``datatype`` enum (COLL lines) -> torch spelling.
NCCL_DTYPES = {
    0: "int8",
    1: "uint8",
    2: "int32",
    3: "uint32",
    4: "int64",
    5: "uint64",
    6: "float16",
    7: "float32",
    8: "float64",
    9: "bfloat16",
    10: "float8_e4m3fn",
    11: "float8_e5m2",
}


#: negative exit codes of elastic / spawn -> signal names
def dtype_name(name: str | None) -> str | None:
    """``'Float'`` -> ``'float32'``; ``'torch.bfloat16'`` -> ``'bfloat16'``; unknown spellings pass through lowered."""
    if not name:
        return None
    key = str(name).strip().strip("[]'\" ").split(",")[0].strip()
    if key.startswith("torch."):
        key = key[6:]
    if not key:
        return None
    return DTYPES.get(key.lower(), key.lower())


_INT = re.compile(r"-?\d+")

_I32 = 2**31
_I64 = 2**63


def _digits(text) -> int | None:
    """``int(text)`` for at most 30 characters (more cannot fit Int64, and past 4300 digits ``int``
    raises), else None; None for text that is not an integer."""
    if isinstance(text, str) and len(text) > 30:
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def i32(text) -> int | None:
    """Digits as an int when they fit Int32 (ranks, world sizes), else None: ``[rank2147483648]:``
    names no rank, and a missing value is what the frame can hold."""
    if text is None:
        return None
    v = _digits(text)
    return v if v is not None and -_I32 <= v < _I32 else None


def i64(text) -> int | None:
    """Digits as an int when they fit Int64 (seqs, numels, pids), else None."""
    if text is None:
        return None
    v = _digits(text)
    return v if v is not None and -_I64 <= v < _I64 else None


def parse_dims(text: str | None) -> tuple[int, ...] | None:
    """``'[3, 4]'``, ``'(3, 4)'`` or ``'3 4'`` -> ``(3, 4)``; ``'[]'`` -> ``()``."""
    if text is None:
        return None
    try:
        return tuple(int(x) for x in _INT.findall(text))
    except ValueError:
        return None


def parse_sizes(text: str | None) -> tuple[tuple[int, ...], ...] | None:
    """``'[[16, 64], [3]]'`` -> ``((16, 64), (3,))`` (FR / torchfrtrace size lists)."""
    if text is None:
        return None
    text = text.strip().strip("'\"")
    if not text.startswith("["):
        return None
    inner = text[1:-1] if text.endswith("]") else text[1:]
    if "[" not in inner:
        dims = parse_dims(inner)
        return (dims,) if dims is not None else None
    return tuple(parse_dims(m) or () for m in re.findall(r"\[([^\[\]]*)\]", inner))


def numel(shape: tuple[int, ...] | None) -> int | None:
    if shape is None:
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def parse_ranks(text: str | None) -> tuple[int, ...]:
    """``'[0, 3]'``, ``'{1, 2}'``, ``'1, 2'`` or ``'1 2'`` -> ``(0, 3)`` ..., sorted and unique."""
    if not text:
        return ()
    return tuple(sorted({int(x) for x in re.findall(r"\d+", text) if len(x) <= 10 and int(x) < _I32}))


_PAREN = re.compile(r"[()]")


def balanced(text: str, open_at: int) -> int:
    """Index just past the ``)`` that closes the ``(`` at ``open_at``; ``len(text)`` if unclosed."""
    depth = 0
    for m in _PAREN.finditer(text, open_at):  # visit only the parentheses, not every character
        if m.group() == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
    return len(text)


# ProcessGroupWrapper.cpp operator<<: "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE,
# TensorShape=[20, 10], TensorDtypes=Float, TensorDeviceTypes=...)" and, without tensors,
# "CollectiveFingerPrint(SequenceNumber=12OpType=BARRIER)" (no comma); whitespace may be lost
# where a pasted message was re-wrapped, so every key tolerates it
_FP_SEQ = re.compile(r"SequenceNumber\s*=\s*(\d+)")
_FP_OP = re.compile(r"OpType\s*=\s*(\w+)")
_FP_SHAPE = re.compile(r"TensorShape\s*=\s*\[([^\]]*)\]")
_FP_DTYPE = re.compile(r"TensorDtypes\s*=\s*\[?\s*([A-Za-z0-9_]+)")


def parse_fingerprint(blob: str) -> dict[str, Any]:
    """Fields of a ``CollectiveFingerPrint(...)`` blob (parentheses already balanced).

    Only the first tensor's shape and dtype are in the fingerprint. Keys: seq, op, in_shapes,
    numel_in, dtype (missing when the blob lacks them, e.g. BARRIER).
    """
    out: dict[str, Any] = {}
    m = _FP_SEQ.search(blob)
    if m and i64(m.group(1)) is not None:
        out["seq"] = i64(m.group(1))
    m = _FP_OP.search(blob)
    if m:
        out["op"] = normalize_op(m.group(1))
        out["op_raw"] = m.group(1)
    m = _FP_SHAPE.search(blob)
    if m:
        dims = parse_dims(m.group(1))
        if dims is not None:
            out["in_shapes"] = (dims,)
            n = numel(dims)
            out["numel_in"] = n if n is not None and n < _I64 else None
    m = _FP_DTYPE.search(blob)
    if m:
        out["dtype"] = dtype_name(m.group(1))
    return out


def fingerprints(text: str, anchor: str = "CollectiveFingerPrint(") -> list[tuple[int, str]]:
    """Every ``CollectiveFingerPrint(...)`` in ``text`` as (start offset, balanced blob)."""
    out = []
    i = text.find(anchor)
    while i >= 0:
        end = balanced(text, i + len(anchor) - 1)
        out.append((i, text[i:end]))
        i = text.find(anchor, end)
    return out


# --- PG prefix (docs/formats.md#pg-prefix) ---------------------------------------------------------

PG_PREFIX = re.compile(
    r"\[(?:(?:PG ID (?P<pgid>\d+) )?PG GUID (?P<guid>[^\s(\]]+)|PG (?P<uid>[^\s(\]]+))?\s?"
    r"(?:\((?P<desc>[^)]*)\))?\s?Rank (?P<r>\d+)\]"
)


def pg_of(text: str) -> tuple[str | None, str | None, int | None]:
    """(pg, pg description, PG-local rank) from the first PG prefix in ``text``. The pg is the group's
    name, the same on every member: the ``PG GUID`` where the prefix prints one, not the ``PG ID`` beside
    it (a per-process count of the groups that process created: two groups can share it on two ranks)."""
    m = PG_PREFIX.search(text)
    if not m:
        return None, None, None
    pg = m.group("guid") or m.group("uid")
    desc = m.group("desc")
    if desc in ("", "undefined"):
        desc = None
    return pg, desc, i32(m.group("r"))


# --- rows ------------------------------------------------------------------------------------


def _base(line: Line, ctx: FileContext, source: str) -> dict[str, Any]:
    return {"rank": line.rank, "t_wall": line.t_wall, "source": source, "file": ctx.file, "line": line.lineno}


def event_row(line: Line, ctx: FileContext, source: str, **fields: Any) -> dict[str, Any]:
    row = _base(line, ctx, source)
    row.update(fields)
    return row


def error_row(line: Line, ctx: FileContext, source: str, kind: str, message: str, **fields: Any) -> dict[str, Any]:
    row = _base(line, ctx, source)
    row["kind"] = kind
    row["message"] = message
    row.update(fields)
    return row


def add_error(out, row: dict[str, Any]) -> dict[str, Any] | None:
    """Append an errors row unless this file already has one with the same (rank, kind, message).

    A rank often logs one failure twice (the C++ log line and the Python exception, the E line
    and the ``what():`` of the abort); the loader folds such repeats across files, this folds them
    within one. A row that names no rank is folded only with one of the same process (host and pid,
    as NCCL's ``host:pid:tid`` prefix gives them): two processes printing the same message are two
    observations, the second one evidence of a second process. The set of keys lives on the file's
    Output, so readers stay stateless.
    """
    seen = out.__dict__.setdefault("_error_keys", set())
    rank = row.get("rank")
    key = (rank, row.get("kind"), row.get("message"))
    if rank is None:
        key += (row.get("host"), row.get("pid"))
    if key in seen:
        return None
    seen.add(key)
    out.errors.append(row)
    return row


_EVENT_KEY = ("rank", "pg", "seq_kind", "seq", "op", "state")


def event_key(row: dict[str, Any]) -> tuple:
    return tuple(row.get(c) for c in _EVENT_KEY) + (row.get("source"),)


def add_event(out, row: dict[str, Any]) -> dict[str, Any] | None:
    """Append an events row unless this file already has the same observation (the loader's
    event key: rank, pg, seq kind, seq, op, state), e.g. a timeout repeated by the teardown."""
    seen = out.__dict__.setdefault("_event_keys", set())
    key = event_key(row)
    if key in seen:
        return None
    seen.add(key)
    out.events.append(row)
    return row


def update_event(out, row: dict[str, Any], **fields: Any) -> None:
    """Change fields of an events row already added by :func:`add_event`, keeping its record of what
    this file holds true (a later line that names the row's group)."""
    seen = out.__dict__.get("_event_keys")
    if seen is not None:
        seen.discard(event_key(row))
    row.update(fields)
    if seen is not None:
        seen.add(event_key(row))


def progress_row(line: Line, ctx: FileContext, source: str, **fields: Any) -> dict[str, Any]:
    row = {"rank": line.rank, "source": source, "file": ctx.file, "line": line.lineno}
    row.update(fields)
    return row

"""The denpex_nb.trace JSONL (``denpex_trace_rank<R>.jsonl``) -> events, errors, progress, ranks.

One JSON object per line (see the tracer, :mod:`denpex_nb.trace`): a ``meta`` line, then ``issue``
(written and flushed *before* the collective), ``done`` (after it returns) and ``error`` (when it
raises) per collective; for an ``async_op`` collective ``done`` carries ``"async": true`` (only
enqueued: the row stays ``scheduled``) and ``complete`` says its work finished.

Representation (our call): **one event row per collective** (rank, pg, seq), created by ``issue``
with state ``scheduled`` and the issue times; a later ``done`` turns it ``completed`` and an
``error`` turns it ``failed``. The extra columns ``t_done_wall`` / ``t_done_mono`` keep when it
finished. So a rank's last ``scheduled`` row is the collective it was stuck in, and rows align 1:1
across ranks on (pg, seq) with ``seq_kind="trace"``. Each ``error`` line is also an ``errors`` row
(kind ``exception``). Progress: per pg, the last issued and the last done seq. Corrupt lines (a
rank killed mid-write) are left unparsed; they never raise.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from ..ops import normalize_op
from ..vocab import ErrorKind, SeqKind, State
from .base import FileContext, FileReader, Output, register_file_reader

_NAME = re.compile(r"denpex_trace_rank_?\d+", re.I)


def _dtype(v) -> str | None:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    if v is None:
        return None
    s = str(v)
    return s[6:] if s.startswith("torch.") else s


def _shapes(v):
    if not isinstance(v, (list, tuple)):
        return None
    try:
        return tuple(tuple(int(d) for d in s) for s in v)
    except (TypeError, ValueError, OverflowError):
        return None


def _numel(shapes) -> int | None:
    if shapes is None:
        return None
    total = 0
    for s in shapes:
        p = 1
        for d in s:
            p *= d
        total += p
    return total


def _ts(v):
    return pd.Timestamp(float(v), unit="s", tz="UTC") if isinstance(v, (int, float)) and v > 0 else None


class TraceReader(FileReader):
    name = "trace"
    line_oriented = True

    def sniff(self, head: bytes, path: str) -> bool:
        first = head.lstrip()[:512]
        if first[:1] != b"{":
            return False
        return b'"event"' in first and (b'"v"' in first or bool(_NAME.search(path)))

    def read(self, data: bytes, ctx: FileContext, out: Output) -> int:
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        rows: dict[tuple, dict] = {}
        order: list[tuple] = []
        last_issued: dict[str, tuple[int, int]] = {}
        last_done: dict[str, tuple[int, int]] = {}
        meta: dict = {}
        for i, raw in enumerate(lines, start=1):
            try:
                obj = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                continue
            if not isinstance(obj, dict):
                continue
            kind = obj.get("event")
            rank = obj.get("rank", ctx.rank_hint)
            if kind == "meta":
                meta = obj
                out.ranks.append({"rank": rank, "host": obj.get("host"), "pid": obj.get("pid")})
                out.parsed.add(i)
                continue
            if kind not in ("issue", "done", "error", "complete"):
                continue
            pg = str(obj.get("pg", "0"))
            seq = obj.get("seq")
            key = (rank, pg, seq)
            row = rows.get(key)
            if row is None:
                in_s, out_s = _shapes(obj.get("in_shapes")), _shapes(obj.get("out_shapes"))
                row = {
                    "rank": rank,
                    "pg": pg,
                    "pg_desc": obj.get("pg_desc"),
                    "seq": seq,
                    "seq_kind": SeqKind.TRACE,
                    "op": normalize_op(obj.get("op")),
                    "in_shapes": in_s,
                    "out_shapes": out_s,
                    "numel_in": _numel(in_s),
                    "numel_out": _numel(out_s),
                    "dtype": _dtype(obj.get("dtypes")),
                    "state": State.SCHEDULED,
                    "world_size": obj.get("world_size", meta.get("world_size")),
                    "root": obj.get("peer", obj.get("root")),
                    "t_wall": _ts(obj.get("t_wall")),
                    "t_mono": obj.get("t_mono"),
                    "source": "trace",
                    "file": ctx.file,
                    "line": i,
                    "t_done_wall": None,
                    "t_done_mono": None,
                }
                rows[key] = row
                order.append(key)
            if kind == "issue":
                if isinstance(seq, int):
                    last_issued[pg] = (max(seq, last_issued.get(pg, (seq, 0))[0]), i)
            elif kind == "done" and obj.get("async") is True:
                pass  # enqueued, not finished: its ``complete`` (or ``error``) line says when it ends
            elif kind in ("done", "complete"):
                row["state"] = State.COMPLETED
                row["t_done_wall"] = _ts(obj.get("t_wall"))
                row["t_done_mono"] = obj.get("t_mono")
                if isinstance(seq, int):
                    last_done[pg] = (max(seq, last_done.get(pg, (seq, 0))[0]), i)
            else:
                row["state"] = State.FAILED
                row["t_done_wall"] = _ts(obj.get("t_wall"))
                row["t_done_mono"] = obj.get("t_mono")
                out.errors.append(
                    {
                        "rank": rank,
                        "t_wall": _ts(obj.get("t_wall")),
                        "kind": ErrorKind.EXCEPTION,
                        "message": str(obj.get("error", "")),
                        "op": normalize_op(obj.get("op")),
                        "seq": seq,
                        "seq_kind": SeqKind.TRACE,
                        "pg": pg,
                        "source": "trace",
                        "file": ctx.file,
                        "line": i,
                    }
                )
            out.parsed.add(i)
        out.events.extend(rows[k] for k in order)
        rank = meta.get("rank", ctx.rank_hint)
        for pg in sorted(set(last_issued) | set(last_done)):
            out.progress.append(
                {
                    "rank": rank,
                    "pg": pg,
                    "seq_kind": SeqKind.TRACE,
                    "last_enqueued": last_issued.get(pg, (None, None))[0],
                    "last_completed": last_done.get(pg, (None, None))[0],
                    "source": "trace",
                    "file": ctx.file,
                    "line": max(last_issued.get(pg, (0, 0))[1], last_done.get(pg, (0, 0))[1]) or None,
                }
            )
        return len(lines)


register_file_reader(TraceReader())

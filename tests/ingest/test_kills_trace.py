"""Pins every field the tracer reader (``ingest/trace.py``) writes for a collective and for a
group's progress, found unpinned by the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15): a dropped field is a fact the diagnosis no longer has."""

from __future__ import annotations

import json

import pandas as pd

from denpex_nb.ingest.base import FileContext, Output
from denpex_nb.ingest.trace import TraceReader

META = {"v": 1, "event": "meta", "rank": 1, "world_size": 2, "pid": 4242, "host": "node7"}


def _read(records):
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    out = Output()
    TraceReader().read(data, FileContext(file="rank1.jsonl", year=2026), out)
    return out


def test_a_completed_collective_row_carries_every_field():
    issue = {"v": 1, "event": "issue", "rank": 1, "pg": "3", "pg_desc": "tp", "seq": 7, "op": "all_gather",
             "in_shapes": [[5, 4]], "out_shapes": [[10, 4]], "dtypes": ["float32"], "t_wall": 1764454067.0,
             "t_mono": 19.0, "peer": 0}  # fmt: skip
    done = {"v": 1, "event": "done", "rank": 1, "pg": "3", "seq": 7, "op": "all_gather", "t_wall": 1764454067.5,
            "t_mono": 19.5}  # fmt: skip
    out = _read([META, issue, done])
    (row,) = out.events
    assert row == {
        "rank": 1,
        "pg": "3",
        "pg_desc": "tp",
        "seq": 7,
        "seq_kind": "trace",
        "op": "all_gather",
        "in_shapes": ((5, 4),),
        "out_shapes": ((10, 4),),
        "numel_in": 20,
        "numel_out": 40,
        "dtype": "float32",
        "state": "completed",
        "world_size": 2,
        "root": 0,
        "t_wall": pd.Timestamp(1764454067.0, unit="s", tz="UTC"),
        "t_mono": 19.0,
        "source": "trace",
        "file": "rank1.jsonl",
        "line": 2,
        "t_done_wall": pd.Timestamp(1764454067.5, unit="s", tz="UTC"),
        "t_done_mono": 19.5,
    }


def _rec(ev, seq, pg="0", **kw):
    return {"v": 1, "event": ev, "rank": 1, "pg": pg, "seq": seq, "op": "all_reduce", **kw}


def test_each_groups_progress_row_names_rank_counters_and_its_last_line():
    """pg 0: issued 1, completed 1, issued 2 (lines 2-4); pg 1: issued 1 and 2, completed 1 (lines 5-7).
    Each row: last enqueued 2, last completed 1, and the group's last line (4, then 7)."""
    recs = [META, _rec("issue", 1), _rec("done", 1), _rec("issue", 2)]
    recs += [_rec("issue", 1, pg="1"), _rec("issue", 2, pg="1"), _rec("done", 1, pg="1")]
    rows = _read(recs).progress
    base = {"rank": 1, "seq_kind": "trace", "last_enqueued": 2, "last_completed": 1, "source": "trace"}
    assert rows == [
        {**base, "pg": "0", "file": "rank1.jsonl", "line": 4},
        {**base, "pg": "1", "file": "rank1.jsonl", "line": 7},
    ]


def test_the_meta_line_names_the_rank_its_host_and_pid():
    assert _read([META]).ranks == [{"rank": 1, "host": "node7", "pid": 4242}]


def test_an_async_collective_completes_at_its_complete_line_not_its_done_line():
    """done with async: true means enqueued; the collective completed at its 'complete' line (line 4)."""
    recs = [META, _rec("issue", 1), _rec("done", 1, **{"async": True, "t_mono": 5.0}), _rec("complete", 1, t_mono=9.0)]
    out = _read(recs)
    (row,) = out.events
    assert row["state"] == "completed" and row["t_done_mono"] == 9.0
    assert out.progress[0]["last_completed"] == 1 and out.progress[0]["line"] == 4
    recs = [META, _rec("issue", 1), _rec("done", 1, **{"async": True})]
    assert _read(recs).events[0]["state"] == "scheduled"


def test_an_error_line_is_a_failed_collective_and_an_exception_row():
    recs = [META, _rec("issue", 3), _rec("error", 3, error="RuntimeError: boom", t_wall=1764454070.0)]
    out = _read(recs)
    assert out.events[0]["state"] == "failed"
    assert out.errors == [
        {
            "rank": 1,
            "t_wall": pd.Timestamp(1764454070.0, unit="s", tz="UTC"),
            "kind": "exception",
            "message": "RuntimeError: boom",
            "op": "all_reduce",
            "seq": 3,
            "seq_kind": "trace",
            "pg": "0",
            "source": "trace",
            "file": "rank1.jsonl",
            "line": 3,
        }
    ]


def test_the_last_completed_seq_is_the_highest_completed_not_the_latest_line():
    """pg 0 completes 2 (line 5) and then 1 (line 6, an async completion arriving late): the last
    completed is 2, the highest seq, never a line number nor the lowest."""
    recs = [META, _rec("issue", 1), _rec("issue", 2), _rec("done", 1, **{"async": True})]
    recs += [_rec("complete", 2), _rec("complete", 1)]
    (row,) = _read(recs).progress
    assert (row["last_enqueued"], row["last_completed"], row["line"]) == (2, 2, 6)
    recs = [META, _rec("issue", 1), _rec("done", 1), _rec("issue", 2), _rec("done", 2), _rec("issue", 3)]
    (row,) = _read(recs).progress
    assert (row["last_enqueued"], row["last_completed"], row["line"]) == (3, 2, 6)


def test_a_pending_collective_row_has_its_completion_fields_empty():
    """An issued collective that never completed (the hang) has no completion time: both fields are
    there and empty, so a frame of pending rows only still has the columns."""
    (row,) = _read([META, _rec("issue", 1, t_mono=3.0)]).events
    assert row["state"] == "scheduled"
    assert {k: row[k] for k in ("t_done_wall", "t_done_mono")} == {"t_done_wall": None, "t_done_mono": None}

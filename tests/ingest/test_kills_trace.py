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


def test_a_groups_progress_row_names_rank_counters_and_its_last_line():
    """Issued 1 and 2, completed 1: last enqueued 2 (line 4), last completed 1; the row points at line 4."""
    recs = [META]
    for seq, ev in ((1, "issue"), (1, "done"), (2, "issue")):
        recs.append({"v": 1, "event": ev, "rank": 1, "pg": "0", "seq": seq, "op": "all_reduce"})
    (p,) = _read(recs).progress
    assert p == {
        "rank": 1,
        "pg": "0",
        "seq_kind": "trace",
        "last_enqueued": 2,
        "last_completed": 1,
        "source": "trace",
        "file": "rank1.jsonl",
        "line": 4,
    }

"""The denpex_nb.trace JSONL reader: one row per collective, states, errors, progress, corrupt lines."""

from __future__ import annotations

import json

import pytest

import denpex_nb as dx


def write_trace(path, records, tail: str = ""):
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return str(path)


META = {
    "v": 1,
    "event": "meta",
    "rank": 1,
    "world_size": 2,
    "pid": 4242,
    "host": "node7",
    "backend": "gloo",
    "torch": "2.13.0",
}


def issue(seq, op="all_gather", pg="0", **kw):
    rec = {
        "v": 1,
        "event": "issue",
        "rank": 1,
        "world_size": 2,
        "pg": pg,
        "pg_desc": "default_pg",
        "seq": seq,
        "op": op,
        "in_shapes": [[5, 4]],
        "out_shapes": [[5, 4], [5, 4]],
        "dtypes": ["float32"],
        "t_wall": 1764454060.0 + seq,
        "t_mono": 12.0 + seq,
        "pid": 4242,
        "host": "node7",
    }
    rec.update(kw)
    return rec


def done(seq, op="all_gather", pg="0"):
    return {
        "v": 1,
        "event": "done",
        "rank": 1,
        "pg": pg,
        "seq": seq,
        "op": op,
        "t_wall": 1764454060.5 + seq,
        "t_mono": 12.5 + seq,
    }


def test_issue_done_error_become_one_row_per_collective(tmp_path):
    f = write_trace(
        tmp_path / "denpex_trace_rank1.jsonl",
        [
            META,
            issue(1),
            done(1),
            issue(2, op="all_reduce", in_shapes=[[8]], out_shapes=[[8]]),
            {
                "v": 1,
                "event": "error",
                "rank": 1,
                "pg": "0",
                "seq": 2,
                "op": "all_reduce",
                "t_wall": 1764454070.0,
                "t_mono": 22.0,
                "error": "RuntimeError: Connection closed by peer",
            },
            issue(3, op="broadcast", in_shapes=[[2]], out_shapes=[[2]], dtypes=["torch.float64"]),
        ],
    )
    inc = dx.load(f)
    ev = inc.events
    assert list(ev["seq"]) == [1, 2, 3] and set(ev["seq_kind"]) == {"trace"}
    assert list(ev["state"]) == ["completed", "failed", "scheduled"]  # seq 3: stuck in it
    assert list(ev["op"]) == ["all_gather", "all_reduce", "broadcast"]
    assert ev["in_shapes"][0] == ((5, 4),) and ev["out_shapes"][0] == ((5, 4), (5, 4))
    assert list(ev["numel_in"]) == [20, 8, 2] and ev["numel_out"][0] == 40
    assert list(ev["dtype"]) == ["float32", "float32", "float64"]
    assert (ev["world_size"] == 2).all() and (ev["pg_desc"] == "default_pg").all()
    assert ev["t_wall"][0].timestamp() == pytest.approx(1764454061.0)
    assert ev["t_done_wall"][0].timestamp() == pytest.approx(1764454061.5) and ev["t_mono"][0] == 13.0
    assert list(inc.errors["kind"]) == ["exception"] and inc.errors["seq"][0] == 2
    assert "Connection closed" in inc.errors["message"][0]
    prog = inc.progress.iloc[0]
    assert (prog["rank"], prog["pg"], prog["last_enqueued"], prog["last_completed"]) == (1, "0", 3, 1)
    r = inc.ranks.iloc[0]
    assert (r["rank"], r["host"], r["pid"], r["last_seq_enqueued"], r["last_seq_completed"]) == (1, "node7", 4242, 3, 1)
    assert inc.lines.as_dict() == {"total": 6, "parsed": 6, "unparsed": 0}


def test_corrupt_and_truncated_lines_stay_unparsed(tmp_path):
    f = write_trace(
        tmp_path / "denpex_trace_rank1.jsonl",
        [META, issue(1), "not json at all", [1, 2]],
        tail='{"v":1,"event":"issue","rank":1,"pg":"0","se',
    )
    inc = dx.load(f)
    assert len(inc.events) == 1
    assert inc.lines.as_dict() == {"total": 5, "parsed": 2, "unparsed": 3}
    assert list(inc.unparsed["line"]) == [3, 4, 5]


def test_p2p_peer_and_several_pgs(tmp_path):
    f = write_trace(
        tmp_path / "denpex_trace_rank1.jsonl",
        [
            META,
            issue(1, op="send", pg="1", peer=0, in_shapes=[[3]], out_shapes=[]),
            done(1, op="send", pg="1"),
            issue(1),
            issue(2),
        ],
    )
    inc = dx.load(f)
    ev = inc.events.set_index(["pg", "seq"])
    assert ev.loc[("1", 1), "op"] == "send" and ev.loc[("1", 1), "root"] == 0
    prog = inc.progress.set_index("pg")
    assert prog.loc["0", "last_enqueued"] == 2 and pd_isna(prog.loc["0", "last_completed"])
    assert prog.loc["1", "last_completed"] == 1


def pd_isna(v):
    import pandas as pd

    return pd.isna(v)


def test_rank_from_file_name_when_lines_lack_it(tmp_path):
    recs = [{k: v for k, v in issue(1).items() if k != "rank"}]
    inc = dx.load(write_trace(tmp_path / "denpex_trace_rank5.jsonl", recs))
    assert list(inc.events["rank"]) == [5]

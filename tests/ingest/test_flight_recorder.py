"""Flight Recorder dumps: real gloo pickles and JSON, malicious and truncated dumps, pg_config repair."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess

import pandas as pd
import pytest

import denpex_nb as dx
from denpex_nb.errors import InputError, UnsafePickleError
from denpex_nb.ingest.flight_recorder import (
    dump_to_frames,
    read_dump,
    repair_pg_config,
    safe_loads,
    write_repaired_dumps,
)

FR = os.path.join(os.path.dirname(__file__), "data", "fr")


def real_dump(rank=0) -> bytes:
    with open(os.path.join(FR, f"comm_lib_trace_rank_{rank}"), "rb") as f:
        return f.read()


def malicious_pickle(target: str) -> bytes:
    """A pickle that, if executed, would create ``target`` (builtins.open(target, 'w'))."""

    class Evil:
        def __reduce__(self):
            return (open, (target, "w"))

    return pickle.dumps({"version": "2.10", "entries": [Evil()]}, protocol=2)


def test_real_gloo_pickle_dumps_load_with_ranks_from_names():
    inc = dx.load(FR + "/comm_lib_trace_rank_0", FR + "/comm_lib_trace_rank_1")
    ev = inc.events
    assert set(ev["source"]) == {"fr_pickle"} and set(ev["seq_kind"]) == {"fr"}
    assert sorted(ev["rank"].unique()) == [0, 1]
    r0 = ev[ev["rank"] == 0]
    assert list(r0["seq"]) == [1, 2, 3, 4, 5]
    assert list(r0["op"]) == ["all_reduce"] * 3 + ["all_gather", "broadcast"]
    assert r0["in_shapes"].iloc[3] == ((5, 4),) and r0["out_shapes"].iloc[3] == ((2, 5, 4),)
    assert list(r0["numel_in"]) == [8, 8, 8, 20, 2] and r0["numel_out"].iloc[3] == 40
    assert list(r0["dtype"]) == ["float32"] * 4 + ["float64"]
    assert set(r0["state"]) == {"scheduled"} and r0["retired"].all()  # gloo: retired is the signal
    assert (r0["pg"] == "0").all() and (r0["pg_desc"] == "default_pg").all() and (r0["world_size"] == 2).all()
    assert r0["t_wall"].notna().all() and str(r0["t_wall"].dt.tz) == "UTC"
    assert list(r0["line"]) == [0, 1, 2, 3, 4]
    prog = inc.progress.set_index("rank")
    assert prog.loc[0, "last_enqueued"] == 5 and prog.loc[0, "last_completed"] == 5
    assert list(inc.ranks["last_seq_completed"]) == [5, 5]


def test_json_dump_reads_like_the_pickle():
    pk = dx.load(FR + "/comm_lib_trace_rank_1").events
    js = dx.load(FR + "/json/comm_lib_trace_rank_1.json")
    assert set(js.sources["format"]) == {"fr_json"}
    cols = ["rank", "pg", "seq", "op", "in_shapes", "out_shapes", "numel_in", "dtype", "state", "t_wall", "retired"]
    assert pk[cols].astype(str).equals(js.events[cols].astype(str))
    assert int(js.progress["last_completed"][0]) == 5  # pg_status strings became ints


def test_malicious_pickle_is_refused_and_never_executed(tmp_path):
    target = tmp_path / "pwned"
    bad = tmp_path / "comm_lib_trace_rank_3"
    bad.write_bytes(malicious_pickle(str(target)))
    with pytest.raises(UnsafePickleError, match=r"comm_lib_trace_rank_3: the pickle asks for io\.open"):
        read_dump(bad)
    with pytest.raises(UnsafePickleError):
        safe_loads(bad.read_bytes())
    with pytest.raises(UnsafePickleError) as e:  # alone: nothing loads -> the error itself
        dx.load(str(bad))
    assert "comm_lib_trace_rank_3" in str(e.value)
    shutil.copy(os.path.join(FR, "comm_lib_trace_rank_0"), tmp_path / "comm_lib_trace_rank_0")
    with pytest.warns(RuntimeWarning, match="refused"):
        inc = dx.load(str(tmp_path))
    err = inc.errors[inc.errors["kind"] == "load_error"]
    assert list(err["rank"]) == [3] and "refused" in err["message"].iloc[0]
    assert list(inc.events["rank"].unique()) == [0]
    assert not target.exists()


def test_truncated_dump_is_a_load_error_for_that_rank_only(tmp_path):
    shutil.copy(os.path.join(FR, "comm_lib_trace_rank_0"), tmp_path / "comm_lib_trace_rank_0")
    data = real_dump(1)
    (tmp_path / "comm_lib_trace_rank_1").write_bytes(data[: len(data) // 2])
    (tmp_path / "comm_lib_trace_rank_2").write_bytes(b"")  # killed before writing anything
    with pytest.warns(RuntimeWarning):
        inc = dx.load(str(tmp_path))
    assert list(inc.events["rank"].unique()) == [0]
    err = inc.errors[inc.errors["kind"] == "load_error"].sort_values("rank")
    assert list(err["rank"]) == [1]
    assert "corrupt fr_pickle" in err["message"].iloc[0]
    with pytest.raises(InputError, match="truncated"):
        read_dump(tmp_path / "comm_lib_trace_rank_1")


def test_a_pickle_that_is_no_dump_is_a_load_error(tmp_path):
    f = tmp_path / "rank0.pkl"
    f.write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    with pytest.raises(InputError, match="not a Flight Recorder dump"):
        dx.load(str(f))


def test_p2p_entries_keep_p2p_seq_and_peer():
    dump = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {
            "0": {"last_enqueued_collective": 1, "last_started_collective": -1, "last_completed_collective": 0}
        },
        "entries": [
            {
                "record_id": 0,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": 1,
                "p2p_seq_id": 0,
                "profiling_name": "nccl:all_reduce",
                "input_sizes": [[4]],
                "output_sizes": [[4]],
                "input_dtypes": ["BFloat16"],
                "state": "completed",
                "retired": True,
                "is_p2p": False,
                "time_created_ns": 0,
            },
            {
                "record_id": 1,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": 1,
                "p2p_seq_id": 7,
                "profiling_name": "nccl:send 0->1",
                "input_sizes": [[2, 3]],
                "output_sizes": [[2, 3]],
                "input_dtypes": ["Long"],
                "state": "started",
                "retired": False,
                "is_p2p": True,
                "time_created_ns": 1764454060123456789,
            },
        ],
    }
    ev, prog = dump_to_frames(dump, rank=0, file="x", source="fr_pickle")
    assert list(ev["op"]) == ["all_reduce", "send"]
    assert list(ev["seq"]) == [1, 7] and list(ev["is_p2p"]) == [False, True]
    assert ev["root"].iloc[1] == 1 and list(ev["dtype"]) == ["bfloat16", "int64"]
    assert ev["t_wall"].isna().iloc[0] and ev["t_wall"].iloc[1].year == 2025
    assert list(ev["state"]) == ["completed", "started"]
    assert prog["last_completed"].iloc[0] == 0 and prog["last_started"].iloc[0] == -1


def test_repair_pg_config_rebuilds_gloo_empty_key():
    dump = pickle.loads(real_dump(0))
    assert set(dump["pg_config"]) == {""}
    fixed = repair_pg_config(dump)
    assert fixed["pg_config"] == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}}
    assert dump["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[0, 1]"}}  # input untouched
    new_group = dict(dump, pg_config={"": {"name": "", "desc": "", "ranks": "[]"}})
    assert repair_pg_config(new_group, world_size=4)["pg_config"]["0"]["ranks"] == "[0, 1, 2, 3]"
    # a world size from a crafted file name is not listed rank by rank
    assert repair_pg_config(new_group, world_size=2**31 - 1)["pg_config"]["0"]["ranks"] == "[]"
    proper = {"pg_config": {"0": {"name": "0", "desc": "d", "ranks": "[0]"}}, "entries": []}
    assert repair_pg_config(proper) == proper


def test_write_repaired_dumps_converts_json_and_skips_non_dumps(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(os.path.join(FR, "json", "comm_lib_trace_rank_0.json"), src / "comm_lib_trace_rank_0")
    shutil.copy(os.path.join(FR, "comm_lib_trace_rank_1"), src / "comm_lib_trace_rank_1")
    (src / "notes.txt").write_text("not a dump")
    out = write_repaired_dumps(src, tmp_path / "dst")
    assert sorted(os.path.basename(p) for p in out) == ["comm_lib_trace_rank_0", "comm_lib_trace_rank_1"]
    for p in out:
        d = pickle.load(open(p, "rb"))  # plain pickle, as torchfrtrace reads it
        assert set(d["pg_config"]) == {"0"} and d["pg_config"]["0"]["ranks"] == "[0, 1]"
        assert isinstance(d["pg_status"]["0"]["last_completed_collective"], int)
        assert isinstance(d["entries"][0]["process_group"], tuple)


@pytest.mark.slow
def test_torchfrtrace_accepts_repaired_gloo_dumps(tmp_path):
    exe = shutil.which("torchfrtrace")
    if exe is None:
        pytest.skip("torchfrtrace not installed")
    write_repaired_dumps(FR, tmp_path / "fixed")
    run = subprocess.run(
        [exe, str(tmp_path / "fixed"), "-p", "comm_lib_trace_rank_"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]  # raw gloo dumps stop with KeyError: ('0', 0)


def test_many_dumps_load_column_wise(tmp_path, monkeypatch):
    """Many dumps load column-wise: each dump reaches the frame as one column batch (one array per
    column), never as a row per entry (a list of dicts or a DataFrame per dump), which is what keeps
    the 1024 x 2000 bar (measured in benchmarks/bench_diagnose_fr.py, not asserted here)."""
    from denpex_nb.ingest import assemble

    seen = []
    build = assemble.build_frame

    def spy(name, batches, *a, **k):
        if name == "events":
            seen.append(list(batches))
        return build(name, batches, *a, **k)

    monkeypatch.setattr(assemble, "build_frame", spy)
    dump = pickle.loads(real_dump(0))
    entry = dump["entries"][0]
    dump["entries"] = [dict(entry, collective_seq_id=i + 1, record_id=i) for i in range(2000)]
    data = pickle.dumps(dump, protocol=2)
    for r in range(16):
        (tmp_path / f"comm_lib_trace_rank_{r}").write_bytes(data)
    inc = dx.load(str(tmp_path), jobs=1)
    assert len(inc.events) == 32000 and inc.events["seq"].max() == 2000
    batches = [b for call in seen for b in call]
    assert len(batches) == 16, [type(b).__name__ for b in batches]
    for b in batches:
        assert not isinstance(b, (list, pd.DataFrame)), type(b).__name__
        assert assemble.batch_len(b) == 2000
        assert all(not isinstance(v, list) for v in b.values()), [k for k, v in b.items() if isinstance(v, list)]

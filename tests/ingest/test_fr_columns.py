"""The compiled Flight Recorder path gives exactly the frames of the unpickler path, or declines."""

from __future__ import annotations

import glob
import os
import pickle

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

import denpex_nb as dx  # noqa: E402
from denpex_nb.ingest import fr_columns  # noqa: E402
from denpex_nb.ingest.assemble import build_frame  # noqa: E402
from denpex_nb.ingest.flight_recorder import DECODER_ENV, dump_to_columns, parse_dump_bytes  # noqa: E402
from denpex_nb.testing.frcompare import PLANTS, write_synthetic_dumps  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = sorted(glob.glob(os.path.join(ROOT, "data", "recorded", "gloo", "*", "*", "fr", "comm_lib_trace_rank_*")))


def both_paths(data: bytes, rank=1):
    """(compiled batch or None, unpickler batch) of one dump, as typed frames."""
    fast = fr_columns.fast_dump_columns(data, rank=rank, file="f", source="fr_pickle")
    dump, _ = parse_dump_bytes(data)
    slow = dump_to_columns(dump, rank=rank, file="f", source="fr_pickle")
    return fast, slow


def assert_same(data: bytes, rank=1, must_accept=True):
    fast, slow = both_paths(data, rank)
    if fast is None:
        assert not must_accept, "the compiled path declined a well-formed dump"
        return False
    pd.testing.assert_frame_equal(build_frame("events", [fast[0]]), build_frame("events", [slow[0]]))
    assert fast[1] == slow[1]
    return True


def test_every_recorded_torch_dump_gives_the_same_frame():
    assert len(RECORDED) >= 100
    for path in RECORDED:
        with open(path, "rb") as f:
            assert_same(f.read(), rank=int(path.rsplit("_", 1)[1]))


@pytest.mark.parametrize("plant", PLANTS)
def test_synthetic_dumps_of_every_plant_give_the_same_frames(tmp_path, plant):
    planted = write_synthetic_dumps(tmp_path, 4, 40, plant, plant_rank=2, gloo_pg_config=plant == "op")
    for path in planted.files:
        assert_same(open(path, "rb").read(), rank=int(path.rsplit("_", 1)[1]))


def _entry(**over):
    e = {
        "record_id": 0,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": 1,
        "p2p_seq_id": 0,
        "profiling_name": "nccl:all_reduce",
        "input_sizes": [[4, 2]],
        "output_sizes": [[4, 2]],
        "input_dtypes": ["Float"],
        "output_dtypes": ["Float"],
        "state": "completed",
        "retired": True,
        "is_p2p": False,
        "time_created_ns": 1764454060123456789,
        "timeout_ms": 600000,
        "frames": [{"name": "f", "filename": "x.py", "line": 1}],
    }
    e.update(over)
    return {k: v for k, v in e.items() if v is not _DROP}


_DROP = object()


def _dump(entries, **over):
    d = {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
        "pg_status": {
            "0": {"last_enqueued_collective": 3, "last_started_collective": 3, "last_completed_collective": 2}
        },
        "entries": entries,
    }
    d.update(over)
    return pickle.dumps(d, protocol=2)


def test_p2p_missing_values_and_odd_groups_give_the_same_frame():
    entries = [
        _entry(),
        _entry(profiling_name="nccl:send 0->1", is_p2p=True, p2p_seq_id=4, collective_seq_id=1),
        _entry(profiling_name="nccl:recv 2->0", is_p2p=False, p2p_seq_id=5),  # p2p by name only
        _entry(input_sizes=None, output_sizes=[], input_dtypes=[], state="weird", retired=None),
        _entry(process_group=None, pg_id=3, time_created_ns=0, timeout_ms=None),
        _entry(process_group=("7", None), collective_seq_id=None, is_p2p=None),
        _entry(process_group=["8", ""], input_sizes=[[], [3, 0], [2**40, 2]]),
        _entry(profiling_name=None, state=None, input_dtypes=None, record_id=_DROP, frames=_DROP),
    ]
    for rank in (0, None):
        assert assert_same(_dump(entries), rank=rank)


def test_dumps_without_entries_and_odd_heads():
    assert_same(_dump([]))
    assert_same(pickle.dumps({"version": "2.10", "pg_config": {}}, protocol=2))
    assert_same(_dump(None, pg_status={"0": "not a dict"}))


def test_what_the_compiled_path_declines_still_loads_through_the_unpickler():
    declined = [
        _dump([_entry(), "not a dict"]),  # the unpickler path drops it, as before
        _dump([_entry(collective_seq_id=1.5)]),  # a float where an int belongs
        _dump([_entry(time_created_ns=2**70)]),  # a big int
        _dump([_entry(input_sizes=[[1, "x"]])]),
        _dump([_entry(process_group=(1, "x"))]),
    ]
    for data in declined:
        assert not assert_same(data, must_accept=False)


_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(max_size=6),
    st.lists(st.lists(st.integers(0, 9), max_size=3), max_size=3),
    st.tuples(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=3))),
)
_ENTRY = st.dictionaries(st.sampled_from(fr_columns.KEYS + ("frames", "output_dtypes")), _VALUE, max_size=12)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ENTRY, max_size=6), st.sampled_from([2, 4, 5]), st.one_of(st.none(), st.integers(0, 3)))
def test_random_entries_agree_or_decline(entries, protocol, rank):
    data = pickle.dumps({"version": "2.10", "entries": entries}, protocol=protocol)
    fast = fr_columns.fast_dump_columns(data, rank=rank, file="f", source="fr_pickle")
    if fast is None:
        return
    try:
        slow = dump_to_columns(parse_dump_bytes(data)[0], rank=rank, file="f", source="fr_pickle")
        expected = build_frame("events", [slow[0]])
    except Exception as e:  # the unpickler path cannot type it either: the compiled one must not guess
        pytest.fail(f"compiled path accepted what the unpickler path fails on: {e!r}")
    pd.testing.assert_frame_equal(build_frame("events", [fast[0]]), expected)


def test_load_is_the_same_whichever_decoder_reads(tmp_path, monkeypatch):
    planted = write_synthetic_dumps(tmp_path / "fr", 8, 60, "size", plant_rank=3)
    runs = {}
    for decoder in ("unpickle", "python", "compiled", "auto", ""):
        monkeypatch.setenv(DECODER_ENV, decoder)
        runs[decoder] = dx.load(str(tmp_path / "fr"), progress=False, jobs=2)
    for inc in runs.values():
        pd.testing.assert_frame_equal(inc.events, runs["compiled"].events)
        pd.testing.assert_frame_equal(inc.progress, runs["compiled"].progress)
    d = dx.diagnose(runs[""])
    assert d.verdict == "shape-mismatch" and d.culprit_ranks == [3] and d.first.seq == planted.seq


def test_numba_failing_switches_the_compiled_decoder_off_with_a_warning(tmp_path, monkeypatch):
    from denpex_nb.ingest import flight_recorder

    write_synthetic_dumps(tmp_path, 2, 10, "size", plant_rank=1)

    def broken():
        raise RuntimeError("LLVM said no")

    monkeypatch.setattr(fr_columns, "_warm_up", broken)  # numba itself fails on a known-good dump
    monkeypatch.setattr(flight_recorder, "_COMPILED_BROKEN", False)
    monkeypatch.setattr(flight_recorder, "_COMPILED_READY", False)
    monkeypatch.setenv(DECODER_ENV, "compiled")
    with pytest.warns(RuntimeWarning, match="compiled Flight Recorder decoder failed .*LLVM said no"):
        inc = dx.load(str(tmp_path), progress=False, jobs=1)
    assert flight_recorder._COMPILED_BROKEN
    assert sorted(inc.events["rank"].unique()) == [0, 1] and len(inc.events) == 20
    assert not (inc.errors["kind"] == "load_error").any()


def test_one_dump_failing_in_the_compiled_path_does_not_switch_it_off(tmp_path, monkeypatch):
    import warnings

    from denpex_nb.ingest import flight_recorder

    write_synthetic_dumps(tmp_path, 4, 10, "size", plant_rank=1)
    real = fr_columns.fast_dump_columns
    calls = []

    def flaky(data, **kw):
        calls.append(kw["file"])
        if len(calls) == 1:
            raise ValueError("something about this one dump")
        return real(data, **kw)

    monkeypatch.setattr(fr_columns, "fast_dump_columns", flaky)
    monkeypatch.setattr(flight_recorder, "_COMPILED_BROKEN", False)
    monkeypatch.setenv(DECODER_ENV, "compiled")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inc = dx.load(str(tmp_path), progress=False, jobs=1)
    assert len(calls) == 4 and not flight_recorder._COMPILED_BROKEN  # the others still went compiled
    assert sorted(inc.events["rank"].unique()) == [0, 1, 2, 3] and len(inc.events) == 40
    assert not (inc.errors["kind"] == "load_error").any()

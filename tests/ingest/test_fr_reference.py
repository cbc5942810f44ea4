"""Both Flight Recorder decoders against an independent reference.

The reference below reads a dump with ``pickle.loads`` and plain Python, from the documented
format (docs/formats.md, "Flight Recorder" §10.1 "Fields used") and nothing of denpex_nb's
mapping: not fr_fields, not normalize_op, not dtype_name (the op and dtype spellings are literal
tables here). The package's frame builder only types the columns; values are compared as Python
values, row by row. Both paths (the compiled decoder, when numba is installed, and the restricted
unpickler) must give the reference's rows on every recorded dump, synthetic dumps, and random
entries (p2p with peers, coalesced ops, missing and wrongly typed fields, None sizes). Where an
entry holds a value of the wrong type, the compiled path may decline (None), never differ.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import re

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from denpex_nb.ingest.assemble import build_frame
from denpex_nb.ingest.flight_recorder import dump_to_columns, parse_dump_bytes
from denpex_nb.testing.frcompare import PLANTS, write_synthetic_dumps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = sorted(glob.glob(os.path.join(ROOT, "data", "recorded", "gloo", "*", "*", "fr", "*")))

try:
    import numba  # noqa: F401

    from denpex_nb.ingest import fr_columns
except ImportError:  # pragma: no cover - the unpickler path is still checked
    fr_columns = None

# --- the reference -------------------------------------------------------------------------------

#: profiling name -> op: the names torch writes (nccl:/gloo: prefix, p2p names carry "a->b")
OPS = {
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "all_gather": "all_gather",
    "_allgather_base": "all_gather_into_tensor",
    "all_gather_into_tensor": "all_gather_into_tensor",
    "all_gather_into_tensor_coalesced": "all_gather_coalesced",
    "allreduce_coalesced": "all_reduce_coalesced",
    "coalesced": "coalesced",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter_tensor": "reduce_scatter_tensor",
    "broadcast": "broadcast",
    "barrier": "barrier",
    "all_to_all": "all_to_all",
    "alltoall_base": "all_to_all_single",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recvAnySource": "recv_anysource",
}
#: input_dtypes spellings (c10 ScalarType names) -> torch dtype
DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
}
P2P = {"send", "recv", "recv_anysource"}
STATES = {"scheduled", "started", "completed"}


def ref_int(v):
    return v if type(v) is int and -(2**63) <= v < 2**63 else None


def ref_op(name):
    if type(name) is not str or not name:
        return None
    word = name.split(":", 1)[-1].split(" ", 1)[0]
    return OPS.get(word, "unknown")  # an op name nobody knows is "unknown", never dropped


def ref_peer(name, op, rank):
    m = re.search(r"(\d+)\s*->\s*(\d+)", name or "")
    if not m:
        return None
    src, dst = int(m.group(1)), int(m.group(2))
    if rank is not None:
        return dst if src == rank else src
    return dst if op == "send" else src


def ref_shape(sizes):
    if type(sizes) not in (list, tuple) or any(type(t) not in (list, tuple) for t in sizes):
        return None, None
    if any(type(d) is not int for t in sizes for d in t):
        return None, None
    total = 0
    for t in sizes:
        p = 1
        for d in t:
            p *= d
        total += p
    shape = tuple(tuple(t) for t in sizes)
    return shape, (total if -(2**63) < total < 2**63 else None)


def ref_world(pg_config, pg):
    counts = {}
    for key, cfg in (pg_config or {}).items() if isinstance(pg_config, dict) else ():
        ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
        n = (
            len(re.findall(r"-?\d+", ranks))
            if isinstance(ranks, str)
            else (sum(type(r) is int for r in ranks) if isinstance(ranks, (list, tuple)) else 0)
        )
        if n:
            counts[str(key)] = n
    if pg in counts:
        return counts[pg]
    return counts[""] if set(counts) == {""} else None  # gloo: one config keyed '' for every group


def ref_status_int(v):
    if type(v) is int or (type(v) is str and re.fullmatch(r"-?\d+", v.strip())):
        return int(v)
    return None


def reference(dump: dict, rank):
    """(event rows, progress rows) of one dump, as plain dicts."""
    entries = dump.get("entries")
    entries = [e for e in entries if type(e) is dict] if type(entries) in (list, tuple) else []
    rows = []
    for i, e in enumerate(entries):
        name = e.get("profiling_name") if type(e.get("profiling_name")) is str else None
        op = ref_op(name)
        flag = e.get("is_p2p")
        p2p = flag is True or op in P2P
        group = e.get("process_group")
        if type(group) in (list, tuple) and group and type(group[0]) is str:
            pg = group[0]
            desc = group[1] if len(group) > 1 and type(group[1]) is str and group[1] else None
        else:
            pg_id = ref_int(e.get("pg_id"))
            pg, desc = (None if pg_id is None else str(pg_id)), None
        dts = e.get("input_dtypes")
        first = dts[0] if type(dts) in (list, tuple) and dts and type(dts[0]) is str else None
        in_shape, numel_in = ref_shape(e.get("input_sizes"))
        out_shape, numel_out = ref_shape(e.get("output_sizes"))
        t = ref_int(e.get("time_created_ns"))
        state = e.get("state")
        retired = e.get("retired")
        rows.append(
            {
                "rank": rank,
                "pg": pg,
                "pg_desc": desc,
                "seq_kind": "fr",
                "op": op,
                "seq": ref_int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id")),
                "in_shapes": in_shape,
                "out_shapes": out_shape,
                "numel_in": numel_in,
                "numel_out": numel_out,
                "dtype": DTYPES[first] if first else None,
                "state": state if type(state) is str and state in STATES else None,
                "world_size": ref_world(dump.get("pg_config"), pg),
                "root": ref_peer(name, op, rank) if p2p else None,
                # 0 means missing; -2**63 ns is NaT itself in datetime64, so it cannot be a time either
                "t_wall_ns": t if t and t != -(2**63) else None,
                "line": i,
                "retired": retired if type(retired) is bool else None,
                "is_p2p": p2p,
                "record_id": ref_int(e.get("record_id")),
                "collective_seq_id": ref_int(e.get("collective_seq_id")),
                "p2p_seq_id": ref_int(e.get("p2p_seq_id")),
                "timeout_ms": ref_int(e.get("timeout_ms")),
            }
        )
    progress = []
    status = dump.get("pg_status")
    for pg, pg_status in status.items() if isinstance(status, dict) else ():
        if isinstance(pg_status, dict):
            progress.append(
                {
                    "rank": rank,
                    "pg": str(pg),
                    "seq_kind": "fr",
                    "last_enqueued": ref_status_int(pg_status.get("last_enqueued_collective")),
                    "last_started": ref_status_int(pg_status.get("last_started_collective")),
                    "last_completed": ref_status_int(pg_status.get("last_completed_collective")),
                }
            )
    return rows, progress


# --- the package's output as plain rows ------------------------------------------------------------

COLUMNS = [
    "rank",
    "pg",
    "pg_desc",
    "seq_kind",
    "op",
    "seq",
    "in_shapes",
    "out_shapes",
    "numel_in",
    "numel_out",
    "dtype",
    "state",
    "world_size",
    "root",
    "line",
    "retired",
    "is_p2p",
    "record_id",
    "collective_seq_id",
    "p2p_seq_id",
    "timeout_ms",
]


def _plain(v):
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v):
        return None
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return v


def package_rows(batch) -> list[dict]:
    events, _ = batch
    df = build_frame("events", [events])
    if len(df) == 0:
        return []
    cols = {c: [_plain(v) for v in df[c].tolist()] for c in COLUMNS}
    t = [None if pd.isna(v) else v.value for v in df["t_wall"].tolist()]
    return [dict({c: cols[c][i] for c in COLUMNS}, t_wall_ns=t[i]) for i in range(len(df))]


def progress_of(batch) -> list[dict]:
    keep = ("rank", "pg", "seq_kind", "last_enqueued", "last_started", "last_completed")
    return [{k: r[k] for k in keep} for r in batch[1]]


def check(data: bytes, rank, *, must_accept: bool):
    """Both paths equal the reference on ``data``; returns whether the compiled path accepted it."""
    dump = pickle.loads(data) if data[:1] == b"\x80" else json.loads(data)
    want, want_progress = reference(dump, rank)
    slow = dump_to_columns(parse_dump_bytes(data)[0], rank=rank, file="f", source="fr_pickle")
    assert package_rows(slow) == want, "unpickler path differs from the reference"
    assert progress_of(slow) == want_progress
    if fr_columns is None or data[:1] != b"\x80":
        return False
    fast = fr_columns.fast_dump_columns(data, rank=rank, file="f", source="fr_pickle")
    if fast is None:
        assert not must_accept, "the compiled path declined a well-typed dump"
        return False
    assert package_rows(fast) == want, "compiled path differs from the reference"
    assert progress_of(fast) == want_progress
    return True


def _rank_of(path):
    return int(path.rsplit("_", 1)[1])


def test_every_recorded_dump_matches_the_reference():
    assert len(RECORDED) >= 100
    for path in RECORDED:
        with open(path, "rb") as f:
            data = f.read()
        names = {e.get("profiling_name") for e in pickle.loads(data).get("entries") or []}
        assert all(ref_op(n) != "unknown" for n in names), f"add {names} to OPS"
        for rank in (_rank_of(path), None):
            check(data, rank, must_accept=True)


@pytest.mark.parametrize("plant", PLANTS)
def test_synthetic_dumps_match_the_reference(tmp_path, plant):
    planted = write_synthetic_dumps(tmp_path, 3, 30, plant, plant_rank=1, gloo_pg_config=plant == "op")
    for path in planted.files:
        with open(path, "rb") as f:
            check(f.read(), _rank_of(path), must_accept=True)


def test_the_json_dump_matches_the_reference():
    path = os.path.join(os.path.dirname(__file__), "data", "fr", "json", "comm_lib_trace_rank_1.json")
    with open(path, "rb") as f:
        check(f.read(), 1, must_accept=False)


# --- random entries --------------------------------------------------------------------------------

_RANKS = st.integers(0, 3)
_P2P_NAME = st.builds(lambda kind, a, b: f"nccl:{kind} {a}->{b}", st.sampled_from(["send", "recv"]), _RANKS, _RANKS)
_NAME = st.one_of(_P2P_NAME, st.sampled_from(sorted(f"{b}:{k}" for k in OPS for b in ("nccl", "gloo"))))
_INT = st.one_of(st.integers(-5, 2**40), st.sampled_from([0, 2**63 - 1, -(2**63)]))
_SIZES = st.lists(st.lists(st.integers(-3, 2**20), max_size=3), max_size=3)
_GROUP = st.one_of(
    st.tuples(st.sampled_from(["0", "1", "7"]), st.sampled_from(["default_pg", "", "tp", None])),
    st.tuples(st.sampled_from(["0", "1"])),
    st.just(()),
    st.lists(st.sampled_from(["0", "1", "x"]), min_size=1, max_size=2),
)
#: well-typed values per key (None means missing, as an absent key does)
GOOD = {
    "record_id": _INT,
    "pg_id": _INT,
    "collective_seq_id": _INT,
    "p2p_seq_id": _INT,
    "time_created_ns": _INT,
    "timeout_ms": _INT,
    "retired": st.booleans(),
    "is_p2p": st.booleans(),
    "profiling_name": _NAME,
    "state": st.sampled_from(["scheduled", "started", "completed", "weird", ""]),
    "process_group": _GROUP,
    "input_dtypes": st.lists(st.sampled_from(sorted(DTYPES)), max_size=2),
    "input_sizes": _SIZES,
    "output_sizes": _SIZES,
}
#: wrongly typed values (the compiled path may decline; the unpickler path reads them as missing)
BAD = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(2**63, 2**70),
    st.booleans(),
    st.just([1, 2]),
    st.just("text"),
    st.just({"a": 1}),
    st.just([["x"]]),
    st.just((5, "d")),
    st.just([7]),
)
_UNREAD = {
    "frames": st.just([{"name": "f", "filename": "x.py", "line": 1}]),
    "output_dtypes": st.just(["Float"]),
    "op_id": _INT,
    "thread_name": st.just("t"),
}


def _entry(bad: bool):
    def value(key):
        s = GOOD[key] | st.none()
        return s | BAD if bad else s

    keys = sorted(GOOD)
    return st.fixed_dictionaries({}, optional={**{k: value(k) for k in keys}, **_UNREAD})


_CONFIG = st.one_of(
    st.just({"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}),
    st.just({"": {"name": "", "desc": "", "ranks": "[0, 1]"}}),
    st.just({"0": {"ranks": [0, 1, 2]}, "1": {"ranks": "[0, 2]"}, "7": {"ranks": "[]"}}),
    st.just({}),
)
_STATUS = st.one_of(
    st.just({"0": {"last_enqueued_collective": 3, "last_started_collective": -1, "last_completed_collective": 2}}),
    st.just({"0": {"last_enqueued_collective": "5", "last_completed_collective": None}, "1": "x"}),
    st.none(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_entry(bad=False), max_size=8), _CONFIG, _STATUS, st.one_of(st.none(), _RANKS), st.sampled_from([2, 4, 5])
)
def test_random_well_typed_entries_match_the_reference(entries, config, status, rank, protocol):
    data = pickle.dumps(
        {"version": "2.10", "pg_config": config, "pg_status": status, "entries": entries}, protocol=protocol
    )
    check(data, rank, must_accept=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_entry(bad=True), st.just("not a dict")), max_size=6), _CONFIG, st.one_of(st.none(), _RANKS))
def test_random_wrongly_typed_entries_match_the_reference_or_decline(entries, config, rank):
    data = pickle.dumps({"version": "2.10", "pg_config": config, "entries": entries}, protocol=2)
    check(data, rank, must_accept=False)


def test_p2p_peers_by_hand():
    """The p2p rules spelled out: a send's peer is its destination, a recv's its source."""
    entries = [
        {"profiling_name": "nccl:send 0->1", "is_p2p": True, "p2p_seq_id": 4, "collective_seq_id": 9},
        {"profiling_name": "nccl:recv 2->0", "is_p2p": False, "p2p_seq_id": 5, "collective_seq_id": 9},
        {"profiling_name": "nccl:all_reduce", "is_p2p": True, "p2p_seq_id": 6, "collective_seq_id": 9},
        {"profiling_name": "nccl:all_reduce", "is_p2p": False, "p2p_seq_id": 7, "collective_seq_id": 9},
    ]
    data = pickle.dumps({"version": "2.10", "entries": entries}, protocol=2)
    for rank, roots in ((0, [1, 2, None, None]), (None, [1, 2, None, None]), (5, [0, 2, None, None])):
        rows, _ = reference(pickle.loads(data), rank)
        assert [r["root"] for r in rows] == roots
        assert [r["seq"] for r in rows] == [4, 5, 6, 9]
        check(data, rank, must_accept=True)

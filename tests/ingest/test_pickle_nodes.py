"""The compiled pickle decoder: same values as pickle.loads, refuses code, never crashes on garbage."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from denpex_nb.ingest import pickle_nodes as pn  # noqa: E402
from denpex_nb.ingest.flight_recorder import REFUSALS  # noqa: E402

FR = os.path.join(os.path.dirname(__file__), "data", "fr")

_INTS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from(
        [0, 1, 255, 256, 65535, 65536, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 2**56, -(2**56)]
    ),
)
_LEAVES = st.one_of(st.none(), st.booleans(), _INTS, st.text(max_size=20))
_DATA = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.tuples(inner),
        st.tuples(inner, inner),
        st.tuples(inner, inner, inner),
        st.lists(inner, min_size=4, max_size=6).map(tuple),
        st.dictionaries(st.text(max_size=8), inner, max_size=5),
        st.dictionaries(st.integers(-5, 5), inner, max_size=3),
    ),
    max_leaves=40,
)


def _decoded(data: bytes):
    nodes = pn.decode(data)
    assert not isinstance(nodes, tuple), f"decoder stopped: {nodes}"
    return nodes.to_python(nodes.root)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DATA, st.sampled_from([2, 3, 4, 5]))
def test_decodes_to_what_pickle_loads_builds(value, protocol):
    data = pickle.dumps(value, protocol=protocol)
    assert _decoded(data) == pickle.loads(data)


def test_shared_values_are_one_node_with_several_parents():
    inner = [1, 2]
    data = pickle.dumps({"a": inner, "b": inner, "c": [inner, inner]}, protocol=2)
    nodes = pn.decode(data)
    (_, a), (_, b), (_, c) = nodes.items(nodes.root)
    assert a == b and nodes.children(c) == [a, a]
    assert nodes.to_python(nodes.root) == {"a": [1, 2], "b": [1, 2], "c": [[1, 2], [1, 2]]}


def test_real_torch_dumps_decode_exactly():
    for name in sorted(os.listdir(FR)):
        path = os.path.join(FR, name)
        if os.path.isfile(path) and name.startswith("comm_lib_trace_rank_"):
            data = open(path, "rb").read()
            assert _decoded(data) == pickle.loads(data)


def test_floats_and_big_ints_are_kinds_not_values():
    nodes = pn.decode(pickle.dumps([1.5, 2**70, -(2**64)], protocol=2))
    kinds = [int(nodes.kind[c]) for c in nodes.children(nodes.root)]
    assert kinds == [pn.K_FLOAT, pn.K_BIGINT, pn.K_BIGINT]
    with pytest.raises(ValueError):
        nodes.to_python(nodes.root)


class _Evil:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_globals_stop_the_decoder_before_anything_runs(tmp_path):
    target = tmp_path / "pwned"
    from collections import OrderedDict

    for obj in ({"entries": [_Evil(str(target))]}, OrderedDict(a=1), {"s": {1, 2}}, b"raw bytes"):
        for protocol in (2, 4, 5):
            got = pn.decode(pickle.dumps(obj, protocol=protocol))
            assert isinstance(got, tuple) and got[0] == pn.E_OPCODE, (obj, protocol, got)
    assert not target.exists()


def test_every_truncation_is_a_status_not_a_crash():
    data = pickle.dumps({"entries": [{"k": [[1, 2]], "s": "x" * 300, "n": 2**40}] * 3}, protocol=2)
    for cut in range(len(data)):
        got = pn.decode(data[:cut])
        assert isinstance(got, tuple) and got[0] in pn.ERRORS, cut


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(garbage):
    got = pn.decode(b"\x80\x02" + garbage)
    assert isinstance(got, (tuple, pn.Nodes))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_pickles_never_crash_and_agree_when_both_decode(data):
    blob = bytearray(pickle.dumps({"entries": [{"a": [[1, 2]], "b": ("x", None), "c": True}] * 2}, protocol=2))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    got = pn.decode(bytes(blob))
    if isinstance(got, tuple):
        return
    try:
        value = got.to_python(got.root)
    except (ValueError, TypeError):  # a float or an unhashable key: fine, not a crash
        return
    try:
        expected = pickle.loads(bytes(blob))
    except Exception:
        return  # the C unpickler is stricter about some stacks; never looser
    assert value == expected


def test_a_value_that_contains_itself_is_refused_not_recursed():
    loop: list = [1]
    loop.append(loop)
    got = pn.decode(pickle.dumps({"pg_config": loop}, protocol=2))
    assert isinstance(got, tuple) and got[0] == pn.E_CYCLE and got[0] in REFUSALS
    from denpex_nb.ingest.flight_recorder import DumpRefused, safe_loads
    from denpex_nb.ingest.fr_columns import fast_dump_columns

    data = pickle.dumps({"pg_config": loop, "entries": []}, protocol=2)
    with pytest.raises(DumpRefused, match="contains itself"):
        fast_dump_columns(data, rank=0, file="f", source="fr_pickle")
    with pytest.raises(DumpRefused, match="contains itself"):  # the unpickler path refuses it too
        safe_loads(data)


def test_denser_pickles_than_the_first_guess_are_decoded_again_with_room():
    value = [[]] * 50_000 + [None] * 1000  # ~1 value per 1-2 bytes, far above FR dumps' density
    assert _decoded(pickle.dumps(value, protocol=2)) == value


def test_a_workspace_is_reused_and_grows():
    ws = pn.Workspace()
    small = pickle.dumps({"a": [1, 2, 3]}, protocol=2)
    big = pickle.dumps({"a": list(range(20_000))}, protocol=2)
    nodes = pn.decode(small, ws)
    assert nodes.to_python(nodes.root) == {"a": [1, 2, 3]}
    first = ws.capacity
    nodes = pn.decode(big, ws)
    assert ws.capacity > first and nodes.to_python(nodes.root) == {"a": list(range(20_000))}
    again = pn.decode(small, ws)
    assert ws.capacity > first and again.to_python(again.root) == {"a": [1, 2, 3]}

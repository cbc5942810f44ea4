"""Hostile Flight Recorder pickles (issue #10): each one a clean load_error, in bounded time and memory.

Every reproducer is loaded next to a good dump in a fresh subprocess with its address space capped
at 1.5 GB and a timeout; the subprocess must exit 0 (a segfault is -11, a MemoryError or a hang
fails too), the bad dump must be one load_error row with a one-line reason, and the good dump must
still load. Both paths run: the compiled decoder, and the restricted unpickler (its bounds scanner
compiled, and in plain Python).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import textwrap

import pytest

from denpex_nb.ingest import flight_recorder as fr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FR = os.path.join(os.path.dirname(__file__), "data", "fr")
numba = pytest.importorskip("numba")


def _s(text: str) -> bytes:
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def deep_tuple(key: str, n: int = 10**6) -> bytes:
    """A dump whose first entry's ``key`` is a tuple nested ``n`` deep (~1 MB for 10^6)."""
    return b"\x80\x02}" + _s("entries") + b"]}" + _s(key) + b")" + b"\x85" * n + b"sas."


def billion_laughs(levels: int = 9, fan: int = 10) -> bytes:
    """``pg_config`` holding L8, where L(i) is a list of ``fan`` references to L(i-1): 10^9 values."""
    out = (
        b"\x80\x02}("
        + _s("version")
        + _s("2.10")
        + _s("pg_config")
        + b"]("
        + b"]("
        + b"N" * fan
        + b"er\x00\x00\x00\x00"
    )
    for i in range(1, levels):
        out += b"](" + (b"j" + struct.pack("<I", i - 1)) * fan + b"e" + b"r" + struct.pack("<I", i)
    return out + b"e" + _s("entries") + b"]u."


def shared_entries(n: int = 80_000) -> bytes:
    """``entries`` = [E] * n where E's ``input_sizes`` = [T] * n: n^2 tensors from ~4n bytes."""
    return (
        b"\x80\x02}("
        + _s("version")
        + _s("2.10")
        + _s("entries")
        + b"](}("
        + _s("profiling_name")
        + _s("nccl:all_reduce")
        + _s("input_sizes")
        + b"](](K\x01K\x02eq\x00"
        + b"h\x00" * (n - 1)
        + b"eu"
        + b"q\x01"
        + b"h\x01" * (n - 1)
        + b"eu."
    )


REPRODUCERS = {
    "binunicode8_length_overflow": b"\x80\x04\x8d\xf7\xff\xff\xff\xff\xff\xff\x7fabc.",
    "deep_profiling_name": deep_tuple("profiling_name"),
    "deep_process_group": deep_tuple("process_group"),
    "memo_index_2_28": b"\x80\x02]r\x00\x00\x00\x10.",
    "memo_index_text_put": b"\x80\x02(lp268435456\n.",
    "billion_laughs_pg_config": billion_laughs(),
    "shared_entry_shared_tensors": shared_entries(),
    "frame_length_past_the_end": b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x40}.",
    "binbytes8_length_overflow": b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7fab.",
}

_CHILD = textwrap.dedent("""
    import json, resource, sys, time, warnings
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
    import denpex_nb as dx
    from denpex_nb.ingest import flight_recorder
    folder, good = sys.argv[1], sys.argv[2]
    dx.load(good, progress=False, jobs=1)              # loads (or compiles) the decoder: not timed
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inc = dx.load(folder, progress=False, jobs=1)
    took = time.perf_counter() - t
    err = inc.errors[inc.errors["kind"] == "load_error"]
    print(json.dumps({"s": took, "errors": err[["rank", "message"]].astype(str).values.tolist(),
                      "ranks": sorted(int(r) for r in inc.events["rank"].unique()),
                      "broken": flight_recorder._COMPILED_BROKEN,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
""")


def _load_in_a_box(tmp_path, data: bytes, decoder: str) -> dict:
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(os.path.join(FR, "comm_lib_trace_rank_0"), folder / "comm_lib_trace_rank_0")
    (folder / "comm_lib_trace_rank_1").write_bytes(data)
    env = dict(
        os.environ,
        DENPEX_FR_DECODER=decoder,
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, str(folder), os.path.join(FR, "comm_lib_trace_rank_0")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("decoder", ["", "unpickle", "python"])
@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_reproducer_is_a_clean_load_error_in_bounded_time_and_memory(tmp_path, name, decoder):
    got = _load_in_a_box(tmp_path, REPRODUCERS[name], decoder)
    assert got["ranks"] == [0], got  # the good dump still loads
    assert len(got["errors"]) == 1 and got["errors"][0][0] == "1", got
    message = got["errors"][0][1]
    assert "\n" not in message and "comm_lib_trace_rank_1" in message
    assert "truncated" in message or "refused" in message, message
    assert got["s"] < 5, got
    assert got["rss_mb"] < 1536, got
    assert not got["broken"], "one bad dump switched the compiled decoder off"


def _paths(data: bytes) -> dict:
    """What each piece says about ``data``: compiled decoder status, scanner status (compiled, Python)."""
    from denpex_nb.ingest import pickle_nodes as pn

    got = pn.decode(data)
    return {
        "decode": got[0] if isinstance(got, tuple) else pn.OK,
        "scan_compiled": fr.scan_pickle(data, compiled=True)[0],
        "scan_python": fr.scan_pickle(data, compiled=False)[0],
    }


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_scanners_and_decoder_agree_on_each_reproducer(name):
    got = _paths(REPRODUCERS[name])
    assert got["scan_compiled"] == got["scan_python"] != fr.OK, got
    assert got["decode"] != fr.OK, got


def test_bounds_sit_just_where_documented():
    from denpex_nb.ingest import pickle_nodes as pn

    def nested(levels):  # a dump whose pg_config is a list nested `levels` deep in total
        inner = []
        for _ in range(levels - 2):
            inner = [inner]
        return pickle.dumps({"version": "2.10", "pg_config": inner, "entries": []}, protocol=2)

    assert _paths(nested(pn.MAX_DEPTH)) == {"decode": 0, "scan_compiled": 0, "scan_python": 0}
    over = _paths(nested(pn.MAX_DEPTH + 1))
    assert set(over.values()) == {pn.E_DEPTH}
    # memo: the next slot and overwrites are fine, one past the end is not
    assert _paths(b"\x80\x02]q\x00q\x00h\x00\x86.")["scan_python"] == pn.OK
    assert set(_paths(b"\x80\x02]q\x01.").values()) == {pn.E_MEMO_INDEX}

    # expansion: a list of k references to a list of k Nones expands to 1 + k * (k + 1) values
    def square(k):
        return b"\x80\x02](](" + b"N" * k + b"eq\x00" + b"h\x00" * (k - 1) + b"e."

    k = 2048  # 4.2M values: past MIN_EXPANSION for a 6 KB pickle
    assert 1 + k * (k + 1) > pn.expansion_cap(len(square(k))) > 1 + 2047 * 2048
    assert set(_paths(square(k)).values()) == {pn.E_EXPANSION}
    assert set(_paths(square(2047)).values()) == {pn.OK}
    assert pn.expansion_cap(10) == fr.MIN_EXPANSION and pn.expansion_cap(10**6) == 16 * 10**6


def test_a_container_changed_after_it_was_shared_is_refused():
    # L = []; T = (L,); then append to L: T's size would be stale, and no pickler writes this
    data = b"\x80\x02]q\x00h\x00\x85K\x01a."
    assert set(_paths(b"\x80\x02]q\x00h\x00\x85h\x00K\x01a\x86.").values()) == {fr.E_MUTATED}
    assert _paths(data)["scan_python"] == fr.E_STACK  # APPEND onto the tuple: malformed, as C says too
    with pytest.raises(AttributeError):  # the tuple has no append
        pickle.loads(data)


def test_shared_values_are_built_once_by_to_python():
    from denpex_nb.ingest import pickle_nodes as pn

    level = [None] * 8
    for _ in range(6):  # 8^6 = 262144 leaves behind 6 shared lists
        level = [level] * 8
    data = pickle.dumps({"pg_config": level}, protocol=2)
    nodes = pn.decode(data)
    value = nodes.to_python(nodes.root)
    assert value == pickle.loads(data)
    assert value["pg_config"][0] is value["pg_config"][1]  # one object, as pickle.loads builds it


def test_globals_are_still_refused_with_their_name_after_the_scan(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    data = pickle.dumps({"version": "2.10", "entries": [Evil()]}, protocol=4)
    assert fr.scan_pickle(data)[0] == fr.OK  # in bounds: the unpickler refuses the global itself
    with pytest.raises(fr.UnsafePickleError, match="asks for posix.system|asks for os.system"):
        fr.safe_loads(data)


def test_peer_of_is_linear_on_long_digit_runs():
    import time

    from denpex_nb.ingest.fr_fields import peer_of

    t = time.perf_counter()
    assert peer_of("1" * 200_000, "send", 0) is None
    assert peer_of("nccl:send 0->1", "send", None) == 1 and peer_of("nccl:recv 2 -> 0", "recv", 0) == 2
    assert time.perf_counter() - t < 1


def test_numel_of_huge_dims_stays_cheap():
    import time

    from denpex_nb.ingest.fr_fields import python_entry_arrays

    big = 1 << 4000
    t = time.perf_counter()
    got = python_entry_arrays([{"input_sizes": [[big] * 20_000]}])
    assert got.numel_ok.tolist() == [False] and time.perf_counter() - t < 1
    got = python_entry_arrays([{"input_sizes": [[2, 3], [4]]}])
    assert got.numel.tolist() == [10] and got.numel_ok.tolist() == [True]

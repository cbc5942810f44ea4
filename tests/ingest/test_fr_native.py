"""The decoder's C kernels (``frdecode``, built with the package) against its numba kernels.

The C file is a port of ``pickle_nodes._decode`` and ``fr_columns._entry_columns``; here both
builds decode the same pickles (every recorded torch dump, synthetic dumps of every plant, hostile
and random pickles of the fuzz campaign's kinds) and must give the same node table and entries
arrays, and a load through the C kernels the same frames as the unpickler path. Where the package
was installed without building the extension (a checkout on PYTHONPATH), the fixture builds it
from the C source with the compiler setuptools finds, into a temporary folder.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

import denpex_nb as dx
from denpex_nb.ingest import flight_recorder as fr
from denpex_nb.ingest import pickle_nodes as pn
from denpex_nb.testing import frkernels
from denpex_nb.testing.frcompare import PLANTS, write_synthetic_dumps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = sorted(glob.glob(os.path.join(ROOT, "data", "recorded", "gloo", "*", "*", "fr", "comm_lib_trace_rank_*")))

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The C kernels: the built extension, or one built here from the source."""
    if pn.native is not None:
        yield pn.native
        return
    out = tmp_path_factory.mktemp("frdecode")
    proc = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(out), "--build-temp", str(out / "tmp")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    built = glob.glob(str(out / "denpex_nb" / "ingest" / "frdecode*"))
    if not built:
        pytest.skip(f"no C compiler to build the extension here: {proc.stderr.strip()[-300:]}")
    spec = importlib.util.spec_from_file_location("denpex_nb.ingest.frdecode", built[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved = pn.native, pn.NATIVE_OK
    pn.native, pn.NATIVE_OK = module, True
    yield module
    pn.native, pn.NATIVE_OK = saved


def test_the_c_kernels_use_the_same_statuses_bounds_and_kinds(native):
    assert pn.NATIVE_OK and frkernels.both_available()
    statuses, depth, kinds, decline = native.CONSTANTS
    assert statuses == tuple(range(14)) and statuses[fr.E_UNHASHABLE] == fr.E_UNHASHABLE
    assert depth == fr.MAX_DEPTH and kinds == tuple(range(9)) and kinds[pn.K_DICT] == pn.K_DICT
    assert decline == 1


def test_every_recorded_torch_dump_decodes_the_same_in_c_and_numba(native):
    assert len(RECORDED) >= 100
    for path in RECORDED:
        with open(path, "rb") as f:
            assert frkernels.kernels_disagree(f.read()) is None, path


@pytest.mark.parametrize("plant", PLANTS)
def test_synthetic_dumps_decode_the_same_in_c_and_numba(native, tmp_path, plant):
    planted = write_synthetic_dumps(tmp_path, 3, 50, plant, plant_rank=1, gloo_pg_config=plant == "op")
    for path in planted.files:
        with open(path, "rb") as f:
            assert frkernels.kernels_disagree(f.read()) is None, path


def test_hostile_and_random_pickles_decode_the_same_in_c_and_numba(native, tmp_path):
    """Every kind of the fuzz campaign (flips, truncations, inflated lengths and memo indices, deep
    nesting, shared-reference bombs, opcode programs, random FR dumps), a seeded sample."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_fuzz_pickles as fuzz
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    fuzz.build_corpus(tmp_path / "corpus")
    corpus = fuzz.load_corpus(tmp_path / "corpus")
    kinds, statuses = set(), set()
    for i in range(600):
        kind, data = fuzz.make_case(20261202, i, corpus)
        if len(data) > 1 << 20:
            continue
        kinds.add(kind)
        problem = frkernels.kernels_disagree(data)
        assert problem is None, (kind, i, problem)
        got = pn.decode(data)
        statuses.add(got[0] if isinstance(got, tuple) else fr.OK)
    assert kinds == set(fuzz.KINDS)
    assert fr.OK in statuses and len(statuses & fr.REFUSALS) >= 2 and fr.E_OPCODE in statuses, statuses


def test_a_long_int_of_eight_bytes_at_the_int64_edge_is_read_alike(native):
    import pickle

    for v in (2**63 - 1, -(2**63), -(2**63) + 1, 2**62, -(2**62)):
        dump = {"version": "2.10", "entries": [{"record_id": v, "input_sizes": [[v, 2]], "output_sizes": [[-1]]}]}
        for protocol in (2, 4, 5):
            assert frkernels.kernels_disagree(pickle.dumps(dump, protocol=protocol)) is None, (v, protocol)


def test_a_load_through_the_c_kernels_gives_the_unpicklers_frames(native, tmp_path, monkeypatch):
    planted = write_synthetic_dumps(tmp_path / "fr", 6, 80, "size", plant_rank=4)
    runs = {}
    for decoder in ("compiled", "unpickle"):
        monkeypatch.setenv(fr.DECODER_ENV, decoder)
        runs[decoder] = dx.load(str(tmp_path / "fr"), progress=False, jobs=1)
    pd.testing.assert_frame_equal(runs["compiled"].events, runs["unpickle"].events)
    pd.testing.assert_frame_equal(runs["compiled"].progress, runs["unpickle"].progress)
    d = dx.diagnose(runs["compiled"])
    assert d.verdict == "shape-mismatch" and d.culprit_ranks == [4] and d.first.seq == planted.seq


@pytest.mark.skipif(pn.native is None, reason="the extension is not built in this checkout (pip install builds it)")
def test_with_the_c_kernels_a_fresh_process_never_imports_numba(tmp_path):
    """The point of building the kernels: no compilation on first use, no numba import at all."""
    write_synthetic_dumps(tmp_path / "fr", 2, 30, "size", plant_rank=1)
    code = (
        "import json, sys\n"
        "import denpex_nb as dx\n"
        "from denpex_nb.ingest import flight_recorder as fr\n"
        "inc = dx.load(sys.argv[1], progress=False, jobs=1)\n"
        "print(json.dumps({'numba': 'numba' in sys.modules, 'ready': fr._COMPILED_READY, 'events': len(inc.events)}))\n"
    )
    env = dict(os.environ)
    env.pop(pn.KERNELS_ENV, None)
    env.pop(fr.DECODER_ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "fr")], capture_output=True, text=True, env=env, timeout=120
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"numba": False, "ready": True, "events": 60}, (got, out.stderr[-500:])
    env[pn.KERNELS_ENV] = "numba"  # the numba build, forced (auto would skip it for 2 small dumps)
    env[fr.DECODER_ENV] = "compiled"
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "fr")], capture_output=True, text=True, env=env, timeout=300
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"numba": True, "ready": True, "events": 60}, (got, out.stderr[-500:])


def test_the_c_kernels_refuse_arrays_of_the_wrong_kind(native):
    import numpy as np

    ws = pn.Workspace(64)
    data = np.frombuffer(b"\x80\x02N.", dtype=np.uint8)
    args = list(ws.arrays)
    assert native.decode(data, 10, *args)[0] == fr.OK
    args[1] = np.zeros(64, np.int32)  # val must be int64
    with pytest.raises(ValueError):
        native.decode(data, 10, *args)
    args = list(ws.arrays)
    args[2] = args[2][:10]  # shorter than kind: would write past its end
    with pytest.raises(ValueError):
        native.decode(data, 10, *args)


def test_with_the_c_kernels_a_big_load_still_scans_declined_dumps_compiled(native, tmp_path, monkeypatch):
    """The C build has no bounds scanner: a dump it declines goes to the unpickler path, whose
    scanner runs compiled (numba) for a load big enough to pay for numba, or one big pickle; a
    small load never waits for numba (plain Python scans its few bytes)."""
    from denpex_nb.ingest.sources import expand

    write_synthetic_dumps(tmp_path, 3, 20, "size", plant_rank=1)
    specs, _ = expand([str(tmp_path)])
    total = sum(s.size for s in specs)
    reader = fr.FlightRecorderReader()
    monkeypatch.setenv(fr.DECODER_ENV, "auto")
    monkeypatch.setattr(fr, "_COMPILED_READY", False)
    monkeypatch.setattr(fr, "load_compiled", lambda: True)
    for threshold, compiled in ((total, True), (total + 1, False)):
        monkeypatch.setattr(fr, "COMPILED_MIN_BYTES", threshold)
        reader.prepare(specs)
        assert fr._PLAN == "compiled" and fr.use_compiled(1)  # the C kernels read every load
        assert fr.scanner_compiled() is compiled
    monkeypatch.setattr(fr, "_SCAN_PLAN", None)  # no load: one pickle, by its own size
    assert fr._scanner(fr.SCAN_COMPILED_MIN_BYTES - 1) is None
    assert fr._scanner(fr.SCAN_COMPILED_MIN_BYTES) is pn.scan_compiled

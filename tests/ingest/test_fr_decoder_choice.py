"""Which decoder reads Flight Recorder pickles: ``auto`` skips numba for a small incident, uses the
compiled decoder past ``COMPILED_MIN_BYTES``; the other modes force; the reader prepares itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import denpex_nb as dx
from denpex_nb.ingest import flight_recorder as fr
from denpex_nb.testing.frcompare import write_synthetic_dumps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = os.path.join(ROOT, "data", "recorded", "gloo", "allgather-shape-mismatch", "broken-detail-w2", "fr")

_PROBE = """
import json, sys
import denpex_nb as dx
from denpex_nb.ingest import flight_recorder as fr
inc = dx.load(sys.argv[1], progress=False)
print(json.dumps({"numba": "numba" in sys.modules, "events": len(inc.events), "plan": fr._PLAN,
                  "ready": fr._COMPILED_READY}))
"""


def probe(folder, mode: str, min_bytes: int | None = None) -> dict:
    env = dict(os.environ, DENPEX_FR_DECODER=mode)
    code = (
        _PROBE
        if min_bytes is None
        else _PROBE.replace("inc = dx.load", f"fr.COMPILED_MIN_BYTES = {min_bytes}\ninc = dx.load")
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=env, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_small_incident_never_imports_numba():
    got = probe(SMALL, "auto")
    # with the package's C kernels built, every incident goes through them (they cost no load)
    assert got["events"] > 0 and not got["numba"] and got["plan"] == ("compiled" if fr.native_kernels() else "python")
    assert not probe(SMALL, "python")["numba"]


@pytest.mark.skipif(not fr.numba_found(), reason="numba not installed")
def test_past_the_threshold_and_when_forced_the_compiled_decoder_reads():
    assert probe(SMALL, "auto", min_bytes=1)["ready"]  # the reader warmed it in prepare()
    assert probe(SMALL, "compiled")["ready"]
    got = probe(SMALL, "unpickle")
    assert not got["ready"] and got["events"] > 0


def test_the_choice_follows_the_total_pickle_bytes(tmp_path, monkeypatch):
    write_synthetic_dumps(tmp_path, 3, 20, "size", plant_rank=1)
    (tmp_path / "notes.txt").write_text("not a pickle\n" * 1000)
    from denpex_nb.ingest.sources import expand

    specs, _ = expand([str(tmp_path)])
    pickle_bytes = sum(s.size for s in specs if not s.display.endswith(".txt"))
    reader = fr.FlightRecorderReader()
    monkeypatch.setattr(fr, "_COMPILED_READY", False)
    monkeypatch.setattr(fr, "_PLAN", None)
    monkeypatch.setattr(fr, "load_compiled", lambda: True)  # the choice only, nothing loaded
    monkeypatch.setenv(fr.DECODER_ENV, "auto")
    monkeypatch.setattr(fr, "_NUMBA_FOUND", True)
    monkeypatch.setenv("DENPEX_FR_KERNELS", "numba")  # the threshold is numba's (C kernels: always)
    for threshold, plan in ((pickle_bytes, "compiled"), (pickle_bytes + 1, "python")):
        monkeypatch.setattr(fr, "COMPILED_MIN_BYTES", threshold)
        reader.prepare(specs)
        assert fr._PLAN == plan and fr.use_compiled(1) == (plan == "compiled")
        assert fr.scanner_compiled() == (plan == "compiled")
    for mode, compiled in (("compiled", True), ("unpickle", False), ("python", False)):
        monkeypatch.setenv(fr.DECODER_ENV, mode)
        assert fr.use_compiled(1) == compiled
    assert fr.scanner_compiled() is False  # python: no numba at all
    monkeypatch.setenv(fr.DECODER_ENV, "unpickle")
    assert fr.scanner_compiled() is True


def test_prepare_is_a_reader_hook_the_loader_calls(tmp_path, monkeypatch):
    write_synthetic_dumps(tmp_path, 2, 5, "size", plant_rank=1)
    seen = []
    monkeypatch.setattr(fr.FlightRecorderReader, "prepare", lambda self, specs: seen.append((self.name, len(specs))))
    dx.load(str(tmp_path), progress=False, jobs=1)
    assert ("fr_pickle", 2) in seen

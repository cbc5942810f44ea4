"""A reader bug surfaces: one note per file in normal loads, an exception in strict ones.

The readers no longer catch exceptions line by line, and ``prefixes.to_lines`` no longer falls
back to raw lines: a ``1/0`` anywhere in them would otherwise pass every test. The loader
(:mod:`denpex_nb.ingest.scan`) drops what a failing reader added for the block, keeps the block's
lines as unparsed (so ``lines_total == lines_parsed + lines_unparsed`` still holds) and puts ONE
note on the Incident naming the reader, file:line and the exception. ``load(strict=True)`` and
``DENPEX_STRICT=1`` (set for the whole suite in ``tests/conftest.py``) raise instead.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.ingest import c10d, frtrace_text, nccl, prefixes, python

LOG = (
    "\n".join(
        [
            "[rank0]:[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, Timeout(ms)=600000) "
            "ran for 600050 milliseconds before timing out.",
            "plain training output",
            "[rank1]:Traceback (most recent call last):",
            '[rank1]:  File "train.py", line 3, in <module>',
            "[rank1]:RuntimeError: boom",
        ]
    )
    + "\n"
)


def _boom(*a, **k):
    return 1 / 0


def _write(tmp_path, name="run.log", text=LOG):
    p = tmp_path / name
    p.write_text(text)
    return p


def _accounting_holds(inc):
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()


@pytest.mark.parametrize(
    "reader, handler",
    [
        (c10d.C10dReader, "_line"),
        (python.PythonReader, "_line"),
        (nccl.NcclReader, "_line"),
        (frtrace_text.FrTraceTextReader, "_emit"),
    ],
)
def test_a_raising_handler_is_a_note_not_silence(tmp_path, monkeypatch, reader, handler):
    text = LOG
    if reader is nccl.NcclReader:
        text += "h:1:2 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x9 [nranks=2] stream 0x3\n"
    if reader is frtrace_text.FrTraceTextReader:
        text += (
            "Not all ranks joining collective, sequence number: 4\ncollective: nccl:all_reduce\nmissing ranks: {1}\n"
        )
    path = _write(tmp_path, text=text)
    good = dx.load(str(path), strict=False, progress=False)
    monkeypatch.setattr(reader, handler, _boom)
    inc = dx.load(str(path), strict=False, progress=False)
    notes = [n for n in inc.notes if "ZeroDivisionError" in n]
    assert len(notes) == 1, inc.notes  # ONE note for the file, however many blocks failed
    assert f"reader '{reader.name}' failed at {path}:" in notes[0] and "division by zero" in notes[0]
    assert (good.errors["source"].astype(str) == reader.name).any() or (
        good.events["source"].astype(str) == reader.name
    ).any()
    assert not (inc.errors["source"].astype(str) == reader.name).any()
    assert not (inc.events["source"].astype(str) == reader.name).any()
    _accounting_holds(inc)
    assert inc.lines.unparsed > good.lines.unparsed


def test_the_note_names_the_line_the_reader_was_on(tmp_path, monkeypatch):
    path = _write(tmp_path)
    real = python.PythonReader._line

    def picky(self, line, ctx, out, st):
        if "RuntimeError" in line.text:
            raise KeyError("exc")
        return real(self, line, ctx, out, st)

    monkeypatch.setattr(python.PythonReader, "_line", picky)
    inc = dx.load(str(path), strict=False, progress=False)
    assert any(f"reader 'python' failed at {path}:5: KeyError: 'exc'" in n for n in inc.notes), inc.notes
    assert not (inc.errors["source"].astype(str) == "python").any()  # the block's rows were dropped
    assert (inc.errors["kind"].astype(str) == "watchdog_timeout").any()  # other readers' rows stay


def test_strict_raises(tmp_path, monkeypatch):
    path = _write(tmp_path)
    monkeypatch.setattr(c10d.C10dReader, "_line", _boom)
    with pytest.raises(ZeroDivisionError) as info:
        dx.load(str(path), strict=True, progress=False)
    assert any("reader 'c10d' failed at" in n for n in getattr(info.value, "__notes__", []))


def test_strict_from_the_environment(tmp_path, monkeypatch):
    path = _write(tmp_path)
    monkeypatch.setattr(c10d.C10dReader, "_line", _boom)
    monkeypatch.setenv("DENPEX_STRICT", "1")
    with pytest.raises(ZeroDivisionError):
        dx.load(str(path), progress=False)
    monkeypatch.setenv("DENPEX_STRICT", "0")
    assert any("ZeroDivisionError" in n for n in dx.load(str(path), progress=False).notes)


def test_strict_raises_a_reader_value_error_not_a_read_error(tmp_path, monkeypatch):
    path = _write(tmp_path)

    def bad(*a, **k):
        raise ValueError("reader bug")

    monkeypatch.setattr(python.PythonReader, "_line", bad)
    with pytest.raises(ValueError, match="reader bug"):
        dx.load(str(path), strict=True, progress=False)
    inc = dx.load(str(path), strict=False, progress=False)
    assert inc.sources["error"].isna().all()  # not mistaken for a truncated stream
    assert any("ValueError: reader bug" in n for n in inc.notes)


def test_strict_raises_through_the_process_pool(tmp_path, monkeypatch):
    a, b = _write(tmp_path, "rank0.log"), _write(tmp_path, "rank1.log")
    monkeypatch.setattr(c10d.C10dReader, "_line", _boom)
    with pytest.raises(ZeroDivisionError):
        dx.load(str(a), str(b), strict=True, jobs=2, progress=False)
    inc = dx.load(str(a), str(b), strict=False, jobs=2, progress=False)
    assert len([n for n in inc.notes if "ZeroDivisionError" in n]) == 2  # one per file
    _accounting_holds(inc)


def test_a_prefix_bug_is_reported_too(tmp_path, monkeypatch):
    path = _write(tmp_path)
    monkeypatch.setattr(prefixes, "_strip", _boom)
    inc = dx.load(str(path), strict=False, progress=False)
    assert any("reader 'prefixes' failed at" in n and "ZeroDivisionError" in n for n in inc.notes), inc.notes
    assert inc.events.empty and inc.errors.empty
    _accounting_holds(inc)
    assert inc.lines.parsed == 0
    with pytest.raises(ZeroDivisionError):
        dx.load(str(path), strict=True, progress=False)


def test_suite_runs_strict():
    import os

    assert os.environ.get("DENPEX_STRICT") == "1"

"""The failure-signal layer while reading (denpex_nb/signals.py, docs/signals.md).

Every line holding a signal needle gets a severity and a family, parsed by a reader or not, behind
any wrapper, cut mid-way or hard-wrapped; benign lines give no failure; the readers see exactly the
blocks they saw without the layer.
"""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import denpex_nb as dx
from denpex_nb import signals as sg
from denpex_nb.vocab import SignalFamily
from tests.signal_variants import BENIGN, PHRASES, RANKED, WRAPPERS, healthy_lines


def _load(tmp_path, lines: list[str], name: str = "job.log", **kw):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.load(str(p), **kw)


def _failures(inc) -> pd.DataFrame:
    s = inc.signals
    return s[s["failure"].fillna(False).astype(bool)]


def test_the_grammar_is_large_and_covers_every_family():
    assert len(PHRASES) >= 100
    assert {f for f, _, _ in PHRASES} >= {
        SignalFamily.NETWORK,
        SignalFamily.MEMORY,
        SignalFamily.DEVICE,
        SignalFamily.SIZE,
        SignalFamily.TIMEOUT,
        SignalFamily.EXIT,
        SignalFamily.LAUNCHER,
        SignalFamily.STALL,
    }


@pytest.mark.parametrize("family, text, key", PHRASES, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(PHRASES)])
def test_every_phrase_is_a_failure_of_its_family(family, text, key):
    sig = sg.classify(text)
    assert sig is not None and sig.failure, text
    assert sig.family == family, (text, sig)


@pytest.mark.parametrize("text", BENIGN)
def test_benign_lines_give_no_failure(text):
    sig = sg.classify(text)
    assert sig is None or not sig.failure, (text, sig)


def test_ordinary_output_gives_no_failure_rows(tmp_path):
    """Training output gives no failure row, only progress rows (the first and the last step line of each
    rank: signals.PROGRESS); NCCL's "Init COMPLETE" is kept as a connection made (recovered)."""
    inc = _load(tmp_path, healthy_lines())
    assert len(_failures(inc)) == 0
    fam = inc.signals["family"].astype(object)
    assert set(fam) <= {SignalFamily.RECOVERED, SignalFamily.PROGRESS}
    assert (fam == SignalFamily.PROGRESS).sum() <= 2 * 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    phrase=st.sampled_from(PHRASES),
    wrapper=st.sampled_from(sorted(WRAPPERS)),
    rank=st.integers(0, 3),
    where=st.integers(0, 120),
    cut=st.one_of(st.none(), st.integers(0, 30)),
)
def test_a_failure_line_signals_behind_any_wrapper_cut_or_not(tmp_path, phrase, wrapper, rank, where, cut):
    """One failure line inserted into a healthy log, wrapped as a launcher prints it, maybe cut
    mid-way after its key: one failure row of its family, on its rank when the wrapper names it."""
    family, text, key = phrase
    if cut is not None:  # a paste cut mid-line, somewhere after the words that say what failed
        text = text[: text.index(key) + len(key) + cut]
    lines = healthy_lines()
    lines.insert(min(where, len(lines)), WRAPPERS[wrapper](rank, text))
    inc = _load(tmp_path, lines, name=f"{wrapper}.log")
    fails = _failures(inc)
    assert len(fails) >= 1, (wrapper, text)
    assert family in set(fails["family"].astype(object)), (wrapper, text, fails[["family", "text"]])
    if wrapper in RANKED:
        row = fails[fails["family"].astype(object) == family].iloc[0]
        assert row["rank"] == rank, (wrapper, text, row.to_dict())


@pytest.mark.parametrize("width", [80, 100, 120])
def test_a_hard_wrapped_log_still_signals(tmp_path, width):
    """A log re-cut at a fixed width (a terminal copy): the failure's words may straddle two pieces."""
    for family, text, key in PHRASES[::9]:
        lines = healthy_lines(steps=6)
        lines.insert(10, f"[rank2]:{text} (while running the step; see the notes above for more detail)")
        wrapped = []
        for ln in lines:
            wrapped += textwrap.wrap(
                ln, width, break_long_words=True, break_on_hyphens=False, drop_whitespace=False
            ) or [""]
        inc = _load(tmp_path, wrapped, name=f"wrapped{width}.log")
        fails = _failures(inc)
        assert len(fails), (width, text)
        if len("[rank2]:") + text.index(key) + len(key) < width:
            # the words that say what failed are on the first piece (a family whose words are cut
            # onto the next piece reads as a failure of no family: a known limit)
            assert family in set(fails["family"].astype(object)), (width, text, fails[["family", "text"]])


def test_per_rank_files_give_their_rank(tmp_path):
    d = tmp_path / "attempt_0" / "3"
    d.mkdir(parents=True)
    (d / "stderr.log").write_text("step 1\nRuntimeError: NCCL error: unhandled system error, ncclSystemError\n")
    inc = dx.load(str(tmp_path))
    fails = _failures(inc)
    assert list(fails["family"].astype(object)) == [SignalFamily.NETWORK]
    assert fails["line"].tolist() == [2]
    assert fails["file"].astype(str).str.endswith("stderr.log").all()


def test_signals_do_not_change_what_the_readers_read(tmp_path):
    """Signal-only lines start no block: events, errors and unparsed lines are the same with and
    without the layer, on a log mixing reader lines, failure lines and noise."""
    lines = healthy_lines(steps=10)
    extra = [
        "[rank1]:[E1201 10:00:00.000 ProcessGroupNCCL.cpp:688] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) ran for "
        "600071 milliseconds before timing out.",
        "[rank2]:host-2:12:13 [2] NCCL WARN NET/IB : Got completion from peer 10.0.0.3<49024> with error 12",
        "[rank3]:Segmentation fault (core dumped)",
        "[rank0]:Traceback (most recent call last):",
        '[rank0]:  File "train.py", line 3, in <module>',
        "[rank0]:RuntimeError: NCCL error: remote process exited or there was a network error, ncclRemoteError",
    ]
    for k, e in enumerate(extra):
        lines.insert(7 * k + 3, e)
    with_ = _load(tmp_path, lines, name="a.log")
    without = _load(tmp_path, lines, name="a.log", signals=False)
    assert len(without.signals) == 0 and len(with_.signals) >= 4
    for name in ("events", "errors", "unparsed", "sources"):
        pd.testing.assert_frame_equal(getattr(with_, name), getattr(without, name))


def test_signal_rows_are_capped_per_file(tmp_path):
    lines = [f"[rank0]:RuntimeError: step {i} failed" for i in range(2100)]
    inc = _load(tmp_path, lines)
    assert len(inc.signals) == 2000
    assert any("2000" in n for n in inc.notes)


@pytest.mark.parametrize("run", [" ", "a", "0", ".", "[[x", "Error ", "failed ", "size "])
def test_classify_is_bounded_on_long_lines(run):
    """classify reads at most a few KB of a line: a 1 MB line costs the same as a short one."""
    import time

    text = run * (1_000_000 // len(run))
    t0 = time.perf_counter()
    sg.classify(text)
    assert time.perf_counter() - t0 < 1.0


def test_every_phrase_cut_right_after_its_key_keeps_its_family():
    """The grammar's keys are the words that say the family: each phrase cut right after its key
    still signals a failure of its family (the randomised test above samples these cuts; this one
    checks them all, so a key too short is found every time, not on a lucky draw)."""
    bad = []
    for family, text, key in PHRASES:
        cut = text[: text.index(key) + len(key)]
        sig = sg.classify(cut)
        if sig is None or sig.family != family or not sig.failure:
            bad.append((family, cut, sig))
    assert not bad, bad

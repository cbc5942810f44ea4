"""Pins decisions of the signal vocabulary (``denpex_nb.signals``) that the semantic mutation run over
its decision functions left unpinned (benchmarks/results/mutation_signals_*.md), each on a line a user's
log holds.

- A line whose own header says INFO (a glog ``I`` letter, a logger's ``INFO``) is chatter whatever error
  word it quotes: its severity stays INFO (an NCCL INFO line naming an error it retried past is no
  failure); only a fatal marker beats the header (``Segmentation fault`` logged at INFO is still fatal).
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import classify_text, severity_of
from denpex_nb.vocab import SignalSeverity


@pytest.mark.parametrize("level", ["I", "INFO", "D", "DEBUG"])
@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: retrying after a transient failure",
        "Traceback (most recent call last): (printed by the retry helper)",
        "NCCL error 2 on the first attempt; connected after 1 retry",
    ],
)
def test_an_info_header_caps_an_error_word(level, text):
    assert severity_of(text, level) == SignalSeverity.INFO


@pytest.mark.parametrize("level", ["I", "INFO"])
@pytest.mark.parametrize("text", ["Segmentation fault (core dumped)", "FATAL: the worker died", "SIGSEGV in worker"])
def test_a_fatal_marker_beats_an_info_header(level, text):
    assert severity_of(text, level) == SignalSeverity.FATAL
    sig = classify_text(text, level)
    assert sig is not None and sig.failure

"""Pins decisions of the signal vocabulary (``denpex_nb.signals``) that the semantic mutation run over
its decision functions left unpinned (benchmarks/results/mutation_signals_*.md), each on a line a user's
log holds.

- A line whose own header says INFO (a glog ``I`` letter, a logger's ``INFO``) is chatter whatever error
  word it quotes: its severity stays INFO (an NCCL INFO line naming an error it retried past is no
  failure); only a fatal marker beats the header (``Segmentation fault`` logged at INFO is still fatal).
- An INFO word in the text (no header level) counts only when no error marker is there: ``INFO:
  RuntimeError: ...`` is an error.
- C++'s abort on an exception whose class names no family (``c10::Error``) is the exit family (the
  process aborted), not a line of no family.
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import classify_text, family_of, severity_of
from denpex_nb.vocab import SignalFamily, SignalSeverity


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


@pytest.mark.parametrize(
    "text", ["INFO: RuntimeError: CUDA error: out of memory", "[INFO] Traceback (most recent call last):"]
)
def test_an_info_word_in_the_text_does_not_cap_an_error_marker(text):
    assert severity_of(text) == SignalSeverity.ERROR


@pytest.mark.parametrize("cls", ["c10::Error", "std::runtime_error"])
def test_an_abort_on_an_exception_of_no_family_is_the_exit_family(cls):
    assert family_of(f"terminate called after throwing an instance of '{cls}'") == SignalFamily.EXIT


# --- a failure line a paste cut in two (mutation_signals_151a56c9fc22.md: signals.py:767, _cut_head) -----------


@pytest.mark.parametrize(
    "head,tail",
    [
        (
            "host-1:2231:2290 [1] NCCL WARN NET/IB : Got completion from peer 10.0.0.3<49024> with",
            "error 12, opcode 32753, len 0, vendor err 129",
        ),
        ("WARNING: NCCL connection to peer node7 was", "closed by remote peer, exiting"),
    ],
)
def test_a_warning_line_cut_in_two_keeps_the_failure_its_tail_states(tmp_path, head, tail):
    """A paste that cut a failure line after its subsystem's words (a warning of the network family,
    no failure yet) and put the rest on the next line: the head's signal row is the failure, with
    both pieces' text, so the verdict quotes the whole line."""
    import denpex_nb as dx

    p = tmp_path / "log.txt"
    p.write_text(f"{head}\n{tail}\n")
    s = dx.load(str(p), progress=False).signals
    first = s.sort_values("line").iloc[0]
    assert (int(first["line"]), bool(first["failure"]), str(first["family"])) == (1, True, SignalFamily.NETWORK)
    assert str(first["text"]).startswith(head) and tail in str(first["text"])


def test_a_finished_line_is_never_the_head_of_the_failure_after_it(tmp_path):
    """A whole statement (the work finished) followed by a failure line stays what it said."""
    import denpex_nb as dx

    p = tmp_path / "log.txt"
    p.write_text(
        "Training completed. Do not forget to share your model\nRuntimeError: NCCL error: unhandled system error\n"
    )
    s = dx.load(str(p), progress=False).signals
    first = s[s["line"] == 1]
    assert len(first) == 1 and str(first.iloc[0]["family"]) == SignalFamily.FINISH
    assert not bool(first.iloc[0]["failure"]) and "RuntimeError" not in str(first.iloc[0]["text"])

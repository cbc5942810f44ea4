"""Pins the row the Python reader makes of an exception Python ignored (``Exception ignored in: ...``
and its traceback): a ``warning`` of category ``IGNORED_EXCEPTION`` whose span (``n_traceback_lines``)
is the report and its traceback, no more and no less, and whose message keeps the exception. The loader
excuses the lines of that span (``assemble.excuse_ignored``): a span one line short leaves the
exception's own line a failure, one line long excuses the next line, which may be a real failure.
Written for the semantic mutation campaign over ``PythonReader._ignored`` / ``_finish``
(benchmarks/results/mutation_signals_*.md).
"""

from __future__ import annotations

import pytest

from denpex_nb.incident import TRUNCATED_TRACEBACK
from denpex_nb.ingest.python import PythonReader
from denpex_nb.vocab import IGNORED_EXCEPTION, ErrorKind
from tests.signal_variants import WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

from ._text_helpers import run

R = PythonReader()

_REPORT = "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3a2c1d5e50>"
_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1479, in __del__',
    "    self._shutdown_workers()",
    "ConnectionResetError: [Errno 104] Connection reset by peer",
]


def _ignored_row(lines: list[str], first_lineno: int = 1) -> dict:
    out = run(R, lines, first_lineno=first_lineno)
    (row,) = [r for r in out.errors if r.get("warning_category") == IGNORED_EXCEPTION]
    assert row["kind"] == ErrorKind.WARNING
    return row


@pytest.mark.parametrize("first_lineno", [1, 40])
@pytest.mark.parametrize("after", ["nothing", "another-traceback"])
def test_the_span_of_an_ignored_exception_is_the_report_and_its_traceback(first_lineno, after):
    lines = [_REPORT, *_TRACEBACK] + (
        _TRACEBACK[:1] + ['  File "train.py", line 8, in <module>'] if after != "nothing" else []
    )
    row = _ignored_row(lines, first_lineno)
    assert row["line"] == first_lineno
    assert row["n_traceback_lines"] == 1 + len(_TRACEBACK)
    assert row["message"] == f"{_REPORT}\n{_TRACEBACK[-1]}"


@pytest.mark.parametrize("first_lineno", [1, 40])
def test_a_report_without_a_traceback_spans_its_own_line_and_says_it_once(first_lineno):
    row = _ignored_row([_REPORT, "epoch 3 loss 0.12"], first_lineno)
    assert row["line"] == first_lineno and row["n_traceback_lines"] == 1
    assert row["message"] == _REPORT


_RIGHT_AFTER = [
    "NCCL WARN NET/IB : Got completion from peer 10.0.0.3<49024> with error 12, opcode 32753, len 0, vendor err 129",
    "Segmentation fault (core dumped)",
]


@pytest.mark.parametrize("line", _RIGHT_AFTER)
@pytest.mark.parametrize("wrapper", ["plain", "torch"])
def test_a_failure_right_after_an_ignored_traceback_still_counts(tmp_path, line, wrapper):
    """Told "no failure", the user would miss a failure printed on the line after a traceback Python
    ignored: only the report and its traceback are excused."""
    w = WRAPPERS[wrapper]
    lines = [w(0, t) for t in ["NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", _REPORT, *_TRACEBACK, line]]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict not in ("no-failure", "no-evidence"), d.summary()


# --- the launcher's own exception and a traceback cut short (PythonReader._finish) -----------------------

_LAUNCHER_EXC = {
    "elastic": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "spawn-raised": "torch.multiprocessing.spawn.ProcessRaisedException: ",
}


@pytest.mark.parametrize("kind", sorted(_LAUNCHER_EXC))
def test_a_launchers_own_exception_is_no_exception_row_of_its_own(kind):
    """The launcher's ChildFailedError / mp.spawn's ProcessRaisedException report a worker's failure;
    its table or the worker's traceback says which: a generic exception row of the launcher's own
    would be a second crash, of the process that only reported it."""
    block = [
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        _LAUNCHER_EXC[kind],
    ]
    out = run(R, block)
    assert not [e for e in out.errors if e["kind"] == ErrorKind.EXCEPTION], out.errors


def test_a_traceback_cut_after_its_first_line_quotes_that_line():
    """A traceback the paste cut after its first frame still says where it was cut: its last line."""
    out = run(R, ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>'])
    (row,) = out.errors
    assert row["message"] == f'{TRUNCATED_TRACEBACK} (last: File "train.py", line 88, in <module>)'

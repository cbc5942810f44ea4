"""No pattern of the package takes super-linear time on a long line (a regular-expression DoS).

Untrusted lines reach the readers and the redactor whole up to the line cap (1 MiB). A pattern
that backtracks quadratically (``\\s*X$``, ``(\\d+) vs``, ``\\[.*\\]``, nested lazy groups) turns one
crafted line into minutes of CPU, so every compiled pattern at module level in the package is
searched over long runs of the characters log lines are made of. At 50,000 characters a linear
search takes milliseconds and a quadratic one seconds; the bound below is a hang guard, not a
speed bar. It is on the search's own CPU time (``time.thread_time``), not the wall clock: on a
machine shared with other jobs the wall clock of a 30 ms search stretched past the bound.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import time

import pytest

import denpex_nb

N = 50_000
RUNS = (
    " ",
    "\t",
    "0",
    "a",
    "-",
    ".",
    ":",
    "/",
    "'",
    "(",
    "[",
    "x ",
    "0 ",
    "a=",
    "a, ",
    "[0",
    "[[x",
    "[[0] ",
    "x]] ",
    "(pid=1) ",
)
#: modules that import torch at module level (the reproducers' worker side): not loaded here
SKIP = ("denpex_nb.repro.scenarios", "denpex_nb.repro._worker")


def _patterns():
    found = []
    for info in pkgutil.walk_packages(denpex_nb.__path__, "denpex_nb."):
        if info.name.startswith(SKIP) or info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and getattr(module, "__name__", "") == info.name:
                found.append((f"{info.name}.{name}", value))
    return found


PATTERNS = _patterns()


def test_the_package_has_patterns_to_check():
    assert len(PATTERNS) > 100


@pytest.mark.parametrize("name, pattern", PATTERNS, ids=[n for n, _ in PATTERNS])
def test_pattern_is_linear_on_long_runs(name, pattern):
    slow = []
    for run in RUNS:
        text = run * (N // len(run))
        subject = text.encode("latin-1") if isinstance(pattern.pattern, bytes) else text
        t0 = time.thread_time()
        pattern.search(subject)
        dt = time.thread_time() - t0
        if dt > 1.0:
            slow.append(f"{run!r}: {dt:.1f} s of CPU")
    assert not slow, f"{name} backtracks on long runs: {slow}"

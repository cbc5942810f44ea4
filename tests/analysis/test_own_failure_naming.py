"""A rank's own crash names it only when no other process failed in a way the evidence cannot read.

Pasted excerpts often hold one rank's complete exception and other ranks' tracebacks cut before
their exception line: those ranks failed too, maybe the same way, so naming the one complete rank
would invent a culprit. Generated variants: wrappers, how many other ranks, where the cut falls.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx

_WRAPS = ["[rank{r}]: ", "[rank{r}]:", "(VllmWorker rank={r} pid=10{r}) ERROR 09-09 02:24:28 [x.py:522] "]


def _tb(r: int, wrap: str, exc: str | None, depth: int) -> list[str]:
    w = wrap.format(r=r)
    lines = [w + "Traceback (most recent call last):"]
    for k in range(depth):
        lines += [w + f'  File "/srv/app/train_{k}.py", line {10 + k}, in step_{k}', w + f"    step_{k + 1}()"]
    return lines + ([w + exc] if exc else [])


@pytest.mark.parametrize("wrap", _WRAPS)
@pytest.mark.parametrize("others", [1, 3])
@pytest.mark.parametrize("depth", [1, 3])
def test_other_ranks_cut_tracebacks_name_no_culprit(tmp_path, wrap, others, depth):
    lines = _tb(2, wrap, "RuntimeError: The size of tensor a (7) must match the size of tensor b (5)", depth)
    for r in range(3, 3 + others):
        lines += _tb(r, wrap, None, depth)
    lines += [wrap.format(r=r) + "step 10 loss 0.5" for r in range(8)]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []
    assert "failed too" in d.first.summary


@pytest.mark.parametrize("wrap", _WRAPS[:2])
def test_a_lone_crash_among_quiet_ranks_is_named(tmp_path, wrap):
    lines = _tb(2, wrap, "RuntimeError: The size of tensor a (7) must match the size of tensor b (5)", 2)
    lines += [wrap.format(r=r) + "step 10 loss 0.5" for r in range(8)]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [2]


def test_a_crash_that_names_no_rank_beside_one_that_does_names_none(tmp_path):
    lines = _tb(2, "[rank{r}]: ", "RuntimeError: boom", 1) + _tb(0, "", "ValueError: bad value", 1)
    lines += [f"[rank{r}]: step 10 loss 0.5" for r in range(8)]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == []


@pytest.mark.parametrize("n_seen", [1, 2, 5, 8])
def test_high_only_when_a_quiet_majority_is_seen(tmp_path, n_seen):
    """Calibration: a named crash is high only when most of the group is seen without an own failure
    (an inferred group, ranks not in the evidence, earned 6 right in 11 on held-out cases)."""
    lines = _tb(7, "[rank{r}]: ", "RuntimeError: CUDA error: an illegal memory access was encountered", 1)
    lines += [
        f"[rank{r}]:[I socket.cpp] ProcessGroupNCCL initialization options: size: 8, global rank: {r}"
        for r in range(n_seen - 1)
    ]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [7]
    assert d.confidence == ("high" if (n_seen - 1) * 2 > 8 else "medium")

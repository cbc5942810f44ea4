"""NCCL RAS's MISMATCH lists outliers; when its counts put them ahead, they are no stragglers.

Generated variants: group sizes, how many ranks are listed, which side is ahead, one op or another.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx


def _ras(behind: int, ahead: int, listed: list[int], listed_ahead: bool, op: str = "AllGather") -> list[str]:
    lo, hi = 640, 641
    return [
        "#0-0 (fa93daea854b060b) MISMATCH",
        f"  Communicator ranks have different {op} operation counts",
        f"  {behind} ranks have launched up to operation {lo}",
        f"  {ahead} ranks have launched up to operation {hi}",
    ] + [f"  Rank {r} -- GPU {r % 8} managed by process {3000 + r} on node 10.0.0.{r // 8}" for r in listed]


@pytest.mark.parametrize(("behind", "listed"), [(30, [12, 13]), (7, [5]), (60, [1, 2, 3, 4])])
@pytest.mark.parametrize("op", ["AllGather", "AllReduce"])
def test_ranks_listed_ahead_are_no_culprits(tmp_path, behind, listed, op):
    p = tmp_path / "ras.txt"
    p.write_text("\n".join(_ras(behind, len(listed), listed, True, op)) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-desync" and d.culprit_ranks == []
    assert "ahead" in d.first.culprit_basis


def test_ranks_listed_behind_stay_named(tmp_path):
    lines = [
        "#0-0 (fa93daea854b060b) MISMATCH",
        "  Communicator ranks have different AllGather operation counts",
        "  2 ranks have launched up to operation 640",
        "  30 ranks have launched up to operation 641",
        "  Rank 12 -- GPU 4 managed by process 323032 on node 10.0.0.1",
        "  Rank 13 -- GPU 5 managed by process 323033 on node 10.0.0.1",
    ]
    p = tmp_path / "ras.txt"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-desync" and d.culprit_ranks == [12, 13]

"""nccl-tests / rccl-tests output (denpex_nb/ingest/nccl_tests.py): the rank map gives ``ranks`` rows,
the result table and its summary are consumed, a wrong result is an ``nccl_error``; a log of only a
benchmark's output is distributed evidence (``no-failure`` at low confidence when every checked
result was right), never ``no-evidence``; behind launcher and collector wrappers; a fixed-width
table is not taken for a hard wrap."""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.ingest import hardwrap
from tests.signal_variants import WRAPPERS


def _table(n_ranks: int, types=("float",), redop="sum", sizes=(8, 16, 32, 64, 128), wrong=None, group=True):
    """A generated ``all_reduce_perf`` output (the layout of nccl-tests' printf formats)."""
    out = [
        f"# nThread 1 nGpus {n_ranks} minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n_ranks):
        g = "Group  0 " if group else ""
        out.append(
            f"#  Rank {r:2d} {g}Pid  12414 on node-{r // 8:02d} device {r % 8:2d} [0x{r:02x}] NVIDIA H100 80GB HBM3"
        )
    out += [
        "#",
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    for t in types:
        for k, size in enumerate(sizes):
            w = str(wrong) if wrong is not None and k == len(sizes) - 1 else "0"
            out.append(
                f"{size:12d}  {size // 4:12d}  {t:>8s}  {redop:>6s}  {-1:6d}  {17.08:7.2f}  {0.0:6.2f}  {0.0:6.2f}  {w:>5s}"
                f"  {16.76:7.2f}  {0.0:6.2f}  {0.0:6.2f}  {w:>5s}"
            )
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0.0123 ", "#"]
    return out


def _load(tmp_path, lines, name="perf.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.load(str(p))


@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "kubectl", "docker", "pdsh"])
@pytest.mark.parametrize("redop, types", [("sum", ("float", "half")), ("none", ("bfloat16",)), ("max", ("int32",))])
@pytest.mark.parametrize("group", [True, False])
def test_a_healthy_benchmark_is_read_whole_and_is_no_failure(tmp_path, wrapper, redop, types, group):
    lines = [WRAPPERS[wrapper](0, t) for t in _table(4, types, redop, group=group)]
    inc = _load(tmp_path, lines)
    left = [str(t).split("#", 1)[-1].strip() for t in inc.unparsed["text"]]
    assert set(left) <= {""}, left  # a lone "#" says nothing
    assert sorted(inc.ranks["rank"].astype(int)) == [0, 1, 2, 3]
    assert set(inc.ranks["device"].astype(str)) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    assert inc.errors.empty
    d = dx.diagnose(inc)
    assert (d.verdict, d.all_clear_confidence) == ("no-failure", "low")


@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "kubectl"])
def test_a_wrong_result_is_an_nccl_error(tmp_path, wrapper):
    lines = [WRAPPERS[wrapper](0, t) for t in _table(2, wrong=3)]
    inc = _load(tmp_path, lines)
    (row,) = inc.errors.itertuples()
    assert row.kind == "nccl_error" and "6 wrong element(s) at size 128" in row.message
    assert dx.diagnose(inc).verdict == "nccl-error"


def test_out_of_bounds_values_that_failed_is_an_nccl_error(tmp_path):
    lines = [t.replace("0 OK", "17 FAILED") for t in _table(2)]
    inc = _load(tmp_path, lines)
    assert inc.errors["kind"].astype(str).tolist() == ["nccl_error"]
    assert dx.diagnose(inc).verdict not in ("no-failure", "no-evidence")


def test_a_failure_beside_a_benchmark_is_no_all_clear(tmp_path):
    lines = _table(4)[:12] + [
        "node-00:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion with error 12"
    ]
    assert dx.diagnose(_load(tmp_path, lines)).verdict not in ("no-failure", "no-evidence")


def test_measured_bandwidth_lines_are_evidence(tmp_path):
    lines = [
        "(head, rank=0, pid=36870) [ip-10-0-0-1:0]:The average bandwidth of all_reduce with a 4.0GB payload (5 trials, 16 ranks):",
        "(head, rank=0, pid=36870) [ip-10-0-0-1:0]: algbw: 11.135 GBps (89.1 Gbps)",
        "(head, rank=0, pid=36870) [ip-10-0-0-1:0]: busbw: 20.878 GB/s (167.0 Gbps)",
    ]
    d = dx.diagnose(_load(tmp_path, lines))
    assert d.verdict == "no-failure" and d.all_clear_confidence == "low"


def test_similar_lines_elsewhere_are_not_taken(tmp_path):
    lines = [
        "epoch 3     sum of losses 12.5",
        "Rank 3 is the best model so far",
        "bandwidth estimate algbw unknown",
        "   128    float    sum",
    ]
    inc = _load(tmp_path, lines)
    assert inc.lines.parsed == 0 and inc.ranks.empty


@pytest.mark.parametrize("n", [4, 12, 24])
def test_a_table_of_rows_of_one_width_is_no_hard_wrap(n):
    rows = [t for t in _table(2, sizes=tuple(8 << k for k in range(n))) if not t.startswith("#")]
    assert len({len(r) for r in rows}) == 1
    assert hardwrap.detect_width(("\n".join(rows) + "\n").encode()) is None

"""The scenario registry and the ``denpex-nb repro`` CLI's handling of bad input (no processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from denpex_nb import cli
from denpex_nb.errors import UsageError
from denpex_nb.repro import registry

CATALOG = {
    "shape-mismatch",
    "dtype-mismatch",
    "op-mismatch",
    "rank-desync",
    "unused-parameters",
    "syncbn-eval-hang",
    "rank-crash",
    "nccl-error",
    "timeout-undetermined",
    "no-failure",
}
REQUIRED = [
    "allgather-shape-mismatch",
    "allreduce-shape-mismatch",
    "dtype-mismatch",
    "op-mismatch",
    "skipped-collective",
    "ddp-unused-parameters",
    "rank-crash",
    "syncbn-eval-single-rank",
]


def test_every_required_scenario_is_registered_with_both_variants():
    known = registry.scenarios()
    assert list(known) == REQUIRED
    for sc in known.values():
        mod = sc.load()
        assert callable(mod.broken) and callable(mod.fixed)
        assert sc.title and sc.teaches
        assert sc.body("broken") is mod.broken and sc.body("fixed") is mod.fixed


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("debug", ["off", "info", "detail"])
def test_expected_uses_catalog_ids_and_valid_ranks(world_size, debug):
    for sc in registry.scenarios().values():
        fixed = sc.expected("fixed", world_size, debug)
        assert fixed == {"class": "no-failure", "op": None, "culprit_ranks": [], "seq": None}
        broken = sc.expected("broken", world_size, debug)
        assert broken["class"] in CATALOG - {"no-failure"}
        assert broken["op"] and broken["culprit_ranks"]
        assert all(0 <= r < world_size for r in broken["culprit_ranks"])
        assert set(broken["seq"]) == {"trace", "fr", "detail"}
        if debug != "detail":
            assert broken["seq"]["detail"] is None
        else:
            assert broken["seq"]["fr"] is None


def test_culprits_are_the_odd_ranks():
    exp = registry.get("allgather-shape-mismatch").expected("broken", 4)
    assert exp["culprit_ranks"] == [1, 3] and exp["shapes"]["0"] == [[5, 4]] and exp["shapes"]["1"] == [[3, 4]]
    assert registry.odd_ranks([5, 3]) == [1]
    assert registry.odd_ranks([8, 6, 8, 5]) == [1, 3]


def test_unknown_scenario_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError) as err:
        registry.get("allgather")
    assert "unknown scenario 'allgather'" in str(err.value) and "allgather-shape-mismatch" in str(err.value)
    assert registry.get("rank_crash").id == "rank-crash"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["repro", "run", "no-such-scenario"], "unknown scenario"),
        (["repro", "run", "rank-crash", "--world-size", "1"], "world size must be at least 2"),
        (["repro", "run", "rank-crash", "--timeout", "0"], "timeout must be positive"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "(fix:" in err


def test_nccl_without_gpus_is_one_line_exit_2(capsys):
    from denpex_nb.repro.launch import gpu_count

    if gpu_count() >= 2:
        pytest.skip("2+ CUDA GPUs visible: --backend nccl is valid here")
    assert cli.main(["repro", "run", "allgather-shape-mismatch", "--backend", "nccl"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs 2 visible CUDA GPUs" in err


def test_missing_torch_is_one_line_exit_2(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert cli.main(["repro", "run", "rank-crash"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch is not installed" in err and "pip install torch==2.13.0" in err


def test_cli_subprocess_prints_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "repro", "run", "nope", "--world-size", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_list_shows_every_scenario(capsys):
    assert cli.main(["repro", "list"]) == 0
    out = capsys.readouterr().out
    for sid in REQUIRED:
        assert sid in out

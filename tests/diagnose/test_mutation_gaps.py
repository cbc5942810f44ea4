"""Behaviour that mutation testing (benchmarks/results/mutation.md) showed no other test pins down:
which rank started a failure when several failed, a crash known only by its exit code, the NCCL
opCount comparison's later classes and culprits, and what a timeout-undetermined verdict still says."""
from __future__ import annotations

from denpex_nb import diagnose
import pandas as pd

from tests.diagnose._frames import T0, err, ev, incident


def _oom(rank, t=None):
    return err(rank, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", t=t)


def test_of_two_ranks_failing_on_their_own_the_earlier_one_initiated():
    errs = [_oom(3, t=50), _oom(1, t=20)]
    assert diagnose(incident(errors=errs)).initiating_rank == 1
    errs = [_oom(3, t=10), _oom(1, t=20)]
    assert diagnose(incident(errors=errs)).initiating_rank == 3


def test_of_two_ranks_failing_without_times_none_is_named_initiator():
    assert diagnose(incident(errors=[_oom(3), _oom(1)])).initiating_rank is None


def test_an_own_failure_outranks_earlier_timeouts_elsewhere():
    errs = [err(r, "watchdog_timeout", "Watchdog caught collective operation timeout", t=5, op="all_reduce",
                seq=9, seq_kind="work") for r in (0, 1, 3)] + [_oom(2, t=60)]
    assert diagnose(incident(errors=errs)).initiating_rank == 2


def test_a_rank_known_dead_only_by_its_exit_code_initiated():
    """torchrun's exitcode -11 (SIGSEGV) with no signal name: that rank's own failure."""
    errs = [err(r, "watchdog_timeout", "Watchdog caught collective operation timeout", t=5, op="all_reduce",
                seq=9, seq_kind="work") for r in (0, 1, 3)]
    dead = err(2, "exit", "local_rank: 2 (pid: 4242) exitcode: -11", t=60)
    dead["exit_code"] = -11
    assert diagnose(incident(errors=errs + [dead])).initiating_rank == 2


def _coll(rank, opcount, op="all_reduce", dtype="float32", numel=1024, nranks=4):
    row = ev(rank, opcount, op=op, kind="nccl_opcount", shape=None, numel_in=numel, numel_out=numel,
             dtype=dtype, world_size=nranks)
    row["state"] = None
    return row


def test_nccl_opcount_dtype_mismatch_after_agreeing_ops_names_the_minority():
    """Same op everywhere, one rank's dtype differs: the op check must not stop the dtype check."""
    rows = [_coll(r, 5, dtype="float16" if r == 2 else "float32") for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("dtype-mismatch", [2], "high")
    assert d.first.op == "all_reduce" and d.first.seq == 5 and d.first.seq_kind == "nccl_opcount"
    assert d.first.ranks[2].op == "all_reduce"


def test_nccl_opcount_count_mismatch_is_a_shape_mismatch_with_its_culprit():
    rows = [_coll(r, 7, numel=512 if r == 0 else 1024) for r in range(4)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [0])
    assert all(e.line == 7 for e in d.first.evidence)


def test_timeout_undetermined_still_names_the_collective_that_hung_and_when():
    rows = [ev(r, 9, kind="work", shape=None, numel_in=1024, state="timed_out") for r in range(4)]
    errs = [err(r, "watchdog_timeout", "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, ...)",
                t=600 + r, op="all_reduce", seq=9, seq_kind="work") for r in range(4)]
    d = diagnose(incident(rows, errs))
    f = d.first
    assert d.verdict == "timeout-undetermined" and d.culprit_ranks == []
    assert (f.op, f.seq, f.seq_kind) == ("all_reduce", 9, "work")
    assert f.t_wall == pd.Timestamp(T0 + 600, unit="s", tz="UTC") and len(f.evidence) == 4
    assert f.culprit_basis and f.culprit_basis.startswith("undetermined")


def test_json_form_keeps_its_keys_and_plain_values():
    """``denpex-nb diagnose --json`` / Diagnosis.to_dict(): the keys scripts read, and values json can write."""
    import json

    rows = [ev(r, s, shape=(4, 2) if (r, s) == (1, 3) else (8,)) for r in range(3) for s in range(1, 4)]
    d = diagnose(incident(rows))
    out = json.loads(json.dumps(d.to_dict()))
    assert out["verdict"] == "shape-mismatch" and out["culprit_ranks"] == [1]
    assert out["group_size"] == d.group_size
    assert out["findings"][0]["rule"] == d.first.rule and d.first.rule
    assert [r["rank"] for r in out["rank_state"]] == [0, 1, 2]

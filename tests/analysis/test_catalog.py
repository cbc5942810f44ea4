"""The catalog is data a user can rely on: stable ids, every field, fingerprints that match real lines."""

from __future__ import annotations

import re

import pytest

from denpex_nb.analysis import catalog
from denpex_nb.errors import UsageError

IDS = [
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
    "no-evidence",
]

# verbatim lines from the gloo ground truth and the log-format reference
LINES = {
    "shape-mismatch": [
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
        "op.preamble.length <= op.nbytes. 40 vs 24. Received data size doesn't match expected size.",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: ... "
        ".Collectives differ in the following aspects:   Tensor Tensor shapes: 3 4vs 5 4",
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2417, OpType=ALLGATHER, "
        "NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
        "RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (5, 4), got (3, 4))",
    ],
    "dtype-mismatch": ["Collectives differ in the following aspects:   Tensor Tensor dtypes: Doublevs Float"],
    "op-mismatch": ["Collectives differ in the following aspects:   Op type: ALLREDUCEvs BROADCAST"],
    "rank-desync": [
        "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 10000 ms",
        "Not all ranks joining collective, sequence number: 2",
    ],
    "unused-parameters": [
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."
    ],
    "timeout-undetermined": [
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete"
    ],
    "nccl-error": [
        "torch.distributed.DistBackendError: NCCL error in: /opt/src/ProcessGroupNCCL.cpp:2011, "
        "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5"
    ],
    "rank-crash": ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."],
}


def test_every_stable_id_is_there_in_order():
    assert [e.id for e in catalog.all()] == IDS


@pytest.mark.parametrize("entry_id", IDS)
def test_entry_has_every_field(entry_id):
    e = catalog.get(entry_id)
    assert e.title and e.category and e.summary and e.root_cause
    assert isinstance(e.tags, tuple) and e.tags
    assert {"nccl", "gloo"} <= set(e.mechanism)
    assert e.fix["text"] and "code" in e.fix
    assert e.confirm["checklist"] and e.confirm["command"]
    assert set(e.related) <= set(IDS) and entry_id not in e.related
    for fp in e.fingerprints:
        assert {"name", "pattern", "evidence", "means"} <= set(fp)
        re.compile(fp["pattern"])
    if entry_id not in ("no-failure", "no-evidence"):
        assert e.fingerprints and e.affects


@pytest.mark.parametrize("entry_id,line", [(k, v) for k, vs in LINES.items() for v in vs])
def test_fingerprints_match_real_lines(entry_id, line):
    assert any(eid == entry_id for eid, _ in catalog.match(line)), line


def test_the_classic_pair_lives_in_shape_mismatch_with_its_own_fingerprints():
    names = {fp["name"]: fp for fp in catalog.get("shape-mismatch").fingerprints}
    assert "dynamic-sequence-length-timeout" in names and "detected-boxes-all-gather-hang" in names
    assert "sequence length" in names["dynamic-sequence-length-timeout"]["means"]
    assert "boxes" in names["detected-boxes-all-gather-hang"]["means"]


def test_fixes_use_the_fixes_library_where_one_applies():
    assert "denpex_nb.fixes import all_gather_uneven" in catalog.get("shape-mismatch").fix["code"]
    assert "check_same_shapes" in catalog.get("dtype-mismatch").fix["code"]


def test_backends_are_described_as_they_behave():
    assert "watchdog" in catalog.get("shape-mismatch").mechanism["nccl"]
    assert "EnforceNotMet" in catalog.get("shape-mismatch").mechanism["gloo"]
    assert (
        "silently" in catalog.get("dtype-mismatch").mechanism["gloo"]
        or "garbage" in catalog.get("dtype-mismatch").mechanism["gloo"]
    )


def test_unknown_id_is_a_one_line_error_listing_valid_ids():
    with pytest.raises(UsageError) as exc:
        catalog.get("shape-mismatchh")
    msg = str(exc.value)
    assert "\n" not in msg and "shape-mismatch" in msg and "fix:" in msg


def test_entries_serialise_and_show_in_jupyter():
    d = catalog.get("rank-desync").to_dict()
    assert d["id"] == "rank-desync" and isinstance(d["tags"], list)
    assert "<b>rank-desync</b>" in catalog.get("rank-desync")._repr_html_()


def test_every_rule_declares_catalog_ids_only():
    import sys

    rules = sys.modules["denpex_nb.analysis.rules"]
    assert rules.RULES, "no rule registered"
    for r in rules.RULES:
        assert r.emits and set(r.emits) <= set(IDS), (r.name, r.emits)
        assert r.uses and r.stage in ("find", "explain"), r.name


def test_a_rule_emitting_an_undeclared_class_is_refused(monkeypatch):
    import dataclasses
    import sys

    from denpex_nb.analysis import Finding, diagnose
    from tests.analysis._frames import incident, steps

    rules = sys.modules["denpex_nb.analysis.rules"]
    rogue = rules.Rule(
        "rogue", "find", ("rank-desync",), ("nothing",), lambda ctx: [Finding("state-mismatch", "made up")]
    )
    monkeypatch.setattr(rules, "RULES", rules.RULES + [rogue])
    d = diagnose(incident(steps(2, 3)))
    assert d.verdict == "no-failure" and any("undeclared class 'state-mismatch'" in n for n in d.notes)
    with pytest.raises(ValueError, match="state-mismatch"):
        diagnose(incident(steps(2, 3)), strict=True)
    assert dataclasses.is_dataclass(rogue)


@pytest.mark.timeout(1800)  # the whole corpus and every recorded run, diagnosed: minutes on a loaded machine
def test_every_emitted_class_is_in_the_catalog_on_every_input_we_have():
    """Recorded runs (all sources) and the wild corpus: each finding's class is a catalog id."""
    import glob
    from pathlib import Path

    from tests import wild
    from tests.diagnosed import diagnosed  # made once per test process: test_wild, test_closed_loop read them too

    root = Path(__file__).resolve().parents[2]
    inputs = [
        [d]
        for d in sorted(
            {str(Path(p).parent) for p in glob.glob(str(root / "data/recorded/**/manifest.json"), recursive=True)}
        )
    ]
    inputs += [[str(Path(c["dir"]) / f) for f in c["files"]] for c in wild.cases()]
    assert len(inputs) > 100
    for paths in inputs:
        d = diagnosed(*paths)
        assert d.verdict in IDS, paths
        for f in d.findings:
            assert f.class_id in IDS, (paths, f.class_id)


def test_broader_classes_are_catalog_ids_and_never_the_class_itself():
    for e in catalog.all():
        assert set(e.broader) <= set(IDS) and e.id not in e.broader, e.id
        assert not {"no-failure", "no-evidence", "timeout-undetermined"} & set(e.broader), e.id


def test_the_vocabulary_names_the_catalog_and_the_incident_schema():
    from denpex_nb import incident, vocab

    assert [str(c) for c in vocab.ClassId] == list(IDS)
    assert set(incident.ERROR_KINDS) == {str(k) for k in vocab.ErrorKind}
    assert set(incident.SEQ_KINDS) == {str(k) for k in vocab.SeqKind}
    assert list(vocab.SEQ_KIND_PREFERENCE) == list(vocab.SeqKind)
    assert vocab.VICTIM_KINDS <= vocab.FAILURE_KINDS and vocab.TIMEOUT_KINDS <= vocab.VICTIM_KINDS
    assert str(vocab.SeqKind.TRACE) == "trace" and f"{vocab.ClassId.RANK_CRASH}" == "rank-crash"

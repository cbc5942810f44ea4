"""Pins how the torchfrtrace text reader decides a finding's mismatch kind and its culprit's sizes,
found unpinned by the semantic mutation campaign (benchmarks/bench_mutation.py, issue #15)."""

from __future__ import annotations

from denpex_nb.ingest.frtrace_text import FrTraceTextReader

from ._text_helpers import one, run

R = FrTraceTextReader()

HEAD = [
    "Collective sequence number: 3 has errors",
    "internal record id: 2",
    "group info: 0:default_pg",
    "collective: nccl:all_reduce",
    "input sizes: [[8]]",
    "output sizes: [[8]]",
    "world size: 4",
    "expected ranks: {0, 1, 2, 3}",
    "collective state: scheduled",
]


def test_an_undecided_match_state_is_an_undecided_finding():
    out = run(R, HEAD + ["error msg: Culprit rank 1; Error type: UNDECIDED, we cannot decide"])
    assert one(out.errors)["mismatch_kind"] == "undecided"


def test_without_an_error_type_the_first_culprits_detail_decides_the_kind():
    """No 'Error type': rank 1's detail (input sizes) decides 'size', not rank 3's (dtypes)."""
    msg = (
        "error msg: Culprit rank 1; Expected input sizes: '[[8]]' does not match found input sizes: '[[6]]', "
        "Culprit rank 3; Expected dtypes: '{'float32'}' does not match found dtype: "
        "'{'bfloat16'}/{'bfloat16'}/{'bfloat16'}'"
    )
    assert one(run(R, HEAD + [msg]).errors)["mismatch_kind"] == "size"


def test_without_an_error_type_the_first_culprits_dtypes_decide_the_kind():
    msg = (
        "error msg: Culprit rank 3; Expected dtypes: '{'float32'}' does not match found dtype: "
        "'{'bfloat16'}/{'bfloat16'}/{'bfloat16'}', "
        "Culprit rank 1; Expected input sizes: '[[8]]' does not match found input sizes: '[[6]]'"
    )
    assert one(run(R, HEAD + [msg]).errors)["mismatch_kind"] == "dtype"


def test_a_culprits_output_numel_counts_an_empty_tensor_as_zero():
    """Found output sizes [[0, 4], [2, 2]]: 0 + 4 elements."""
    msg = (
        "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected output sizes: '[[8]]' does not "
        "match found output sizes: '[[0, 4], [2, 2]]'"
    )
    ev = one(run(R, HEAD + [msg]).events)
    assert ev["out_shapes"] == ((0, 4), (2, 2)) and ev["numel_out"] == 4


def test_a_group_description_with_colons_is_kept_whole():
    """'group info: 3:tp:stage:1': process group 3, description 'tp:stage:1'."""
    block = [ln if not ln.startswith("group info") else "group info: 3:tp:stage:1" for ln in HEAD]
    msg = "error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' "
    msg += "does not match found collective type: 'broadcast'"
    err = one(run(R, block + [msg]).errors)
    assert (err["pg"], err["pg_desc"]) == ("3", "tp:stage:1")

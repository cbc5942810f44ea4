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


def _block(state="scheduled"):
    return [ln if not ln.startswith("collective state") else f"collective state: {state}" for ln in HEAD]


TYPE_1 = (
    "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' "
    "does not match found collective type: 'broadcast'"
)
SIZE_3 = (
    "Culprit rank 3; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[8]]' does not match "
    "found input sizes: '[[6]]'"
)


def test_a_dtype_match_state_is_a_dtype_finding_without_the_dtypes_detail():
    out = run(R, HEAD + ["error msg: Culprit rank 1; Error type: COLLECTIVE_DTYPE_MISMATCH, the dtypes differ"])
    assert one(out.errors)["mismatch_kind"] == "dtype"


def test_the_first_culprit_gives_the_error_type_and_the_rank():
    """Two culprits, rank 1 (type mismatch) then rank 3 (size): the finding is rank 1's."""
    err = one(run(R, HEAD + [f"error msg: {TYPE_1}, {SIZE_3}"]).errors)
    assert (err["error_type"], err["mismatch_kind"], err["rank"]) == ("COLLECTIVE_TYPE_MISMATCH", "type", 1)
    assert err["culprit_ranks"] == (1, 3)


def test_every_collective_state_word_is_kept():
    for state in ("scheduled", "started", "completed"):
        out = run(R, _block(state) + [f"error msg: {TYPE_1}"])
        assert one(out.errors)["collective_state"] == state
        assert one(out.events)["state"] == state
    assert one(run(R, _block("queued") + [f"error msg: {TYPE_1}"]).errors)["collective_state"] is None


def test_a_culprits_state_detail_keeps_every_state_word():
    for found in ("scheduled", "started", "completed"):
        msg = f"error msg: Culprit rank 1; Expected state: 'completed' does not match found state: '{found}'"
        assert one(run(R, HEAD + [msg]).events)["state"] == found


def test_the_kind_comes_from_what_was_compared_never_from_the_values():
    """'state' was compared; a value that happens to say 'sizes' does not make it a size finding."""
    msg = "error msg: Culprit rank 1; Expected state: 'completed' does not match found state: 'sizes unknown'"
    assert one(run(R, HEAD + [msg]).errors)["mismatch_kind"] == "state"


def test_a_culprit_event_carries_its_group_description():
    ev = one(run(R, HEAD + [f"error msg: {TYPE_1}"]).events)
    assert (ev["pg"], ev["pg_desc"], ev["rank"]) == ("0", "default_pg", 1)


def test_a_culprits_dtype_is_its_first_input_dtype():
    """found dtype: '{ours out}/{the culprit's in}/{the culprit's out}': the culprit's first input dtype."""
    msg = (
        "error msg: Culprit rank 1; Expected dtypes: '{'float32'}' does not match found dtype: "
        "'{'float32'}/{'bfloat16', 'float16'}/{'float64'}'"
    )
    assert one(run(R, HEAD + [msg]).events)["dtype"] == "bfloat16"


def test_a_culprits_input_numel_counts_an_empty_tensor_as_zero():
    msg = (
        "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[8]]' does not "
        "match found input sizes: '[[0, 4], [2, 2]]'"
    )
    ev = one(run(R, HEAD + [msg]).events)
    assert ev["in_shapes"] == ((0, 4), (2, 2)) and ev["numel_in"] == 4


def test_a_culprits_text_is_never_read_as_a_rank():
    """Only 'Culprit rank N' names a culprit: a culprit whose text is a bare number adds no rank."""
    err = one(run(R, HEAD + ["error msg: Culprit rank 1; 7 Culprit rank 3; Error type: UNDECIDED, x"]).errors)
    assert err["culprit_ranks"] == (1, 3)


def test_each_match_state_without_a_detail_gives_its_kind():
    for state, kind in (("SIZE_OR_SYNTAX_MISMATCH", "size"), ("COLLECTIVE_STATE_MISMATCH", "state")):
        out = run(R, HEAD + [f"error msg: Culprit rank 1; Error type: {state}, they differ"])
        assert one(out.errors)["mismatch_kind"] == kind, state

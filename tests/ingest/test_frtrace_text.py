"""torchfrtrace text output (docs/formats.md#frtrace-text): findings -> fr_finding errors and culprit events."""

from __future__ import annotations

from denpex_nb.ingest.frtrace_text import FrTraceTextReader

from ._text_helpers import one, run

R = FrTraceTextReader()


def test_not_joining_finding():
    block = [
        "tabulate is not installed. Proceeding without it.",
        "Not all ranks joining collective, sequence number: 2",
        "internal record id: 1",
        "group info: 0:default_pg",
        "collective: gloo:all_reduce",
        "missing ranks: {1}",
        "input sizes: [[8]]",
        "output sizes: [[8]]",
        "world size: 2",
        "expected ranks: {0, 1}",
        "collective state: scheduled",
        "collective stack trace:",
        " all_reduce at /x/distributed_c10d.py:2900",
        " main at /x/r.py:10",
    ]
    out = run(R, block)
    err = one(out.errors)
    assert (err["kind"], err["seq"], err["seq_kind"], err["op"], err["pg"]) == (
        "fr_finding",
        2,
        "fr",
        "all_reduce",
        "0",
    )
    assert err["related_ranks"] == (1,) and err["rank"] is None and err["world_size"] == 2
    assert out.parsed == set(range(1, len(block) + 1))
    assert out.events == []


def test_size_mismatch_gives_culprit_event():
    block = [
        "Collective sequence number: 3 has errors",
        "internal record id: 2",
        "group info: 0:default_pg",
        "collective: gloo:all_reduce",
        "input sizes: [[8]]",
        "output sizes: [[8]]",
        "world size: 2",
        "expected ranks: {0, 1}",
        "collective state: scheduled",
        "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[8]]' does not "
        "match found input sizes: '[[6]]'",
    ]
    out = run(R, block)
    err = one(out.errors)
    assert (err["rank"], err["related_ranks"], err["error_type"]) == (1, (1,), "SIZE_OR_SYNTAX_MISMATCH")
    ev = one(out.events)
    assert (ev["rank"], ev["seq"], ev["seq_kind"], ev["in_shapes"], ev["numel_in"], ev["op"], ev["state"]) == (
        1,
        3,
        "fr",
        ((6,),),
        6,
        "all_reduce",
        "scheduled",
    )


def test_type_mismatch_and_two_findings_in_one_block():
    block = [
        "Collective sequence number: 1 has errors",
        "collective: gloo:all_reduce",
        "error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' "
        "does not match found collective type: 'broadcast'",
        "Input/output mismatch in the collective sequence number: 4",
        "collective: nccl:all_gather",
        "error msg: Culprit rank 0; Error type: SIZE_OR_SYNTAX_MISMATCH, Found input numel '5 * pg size 2' does "
        "not match output numel '12'",
    ]
    out = run(R, block)
    assert [e["seq"] for e in out.errors] == [1, 4]
    assert one(out.events)["op"] == "broadcast"


def test_missing_dump_files():
    err = one(run(R, "ValueError: Missing dump files from ranks {2, 3}").errors)
    assert err["related_ranks"] == (2, 3)


def test_fields_without_header_are_left_alone():
    out = run(R, ["world size: 8", "collective: something"])
    assert out.parsed == set() and out.errors == []


def test_fuzzed_input_never_raises():
    from ._text_helpers import fuzz

    fuzz(R)

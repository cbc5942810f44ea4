"""torchfrtrace text of every generation (item: newer Flight Recorder analyzer output).

Where the text comes from:

* current: ``torch/distributed/flight_recorder/components/types.py`` (``EntryState.log``: one
  ``logger.info`` per field; ``MatchInfo.__str__`` = ``"Error type: {state.name}, {culprit}"``;
  ``Op.match`` messages such as ``Expected input sizes: '...' does not match found input sizes:
  '...'``, ``Expected dtypes: '{...}' does not match found dtype: '{..}/{..}/{..}'``) and
  ``components/utils.py`` (``error_analysis``: the three headers, ``Culprit rank N; <MatchInfo>``
  joined by ``, ``, ``We cannot decide ... missed FR dumps from ranks``; ``check_no_missing_dump_files``);
* 2.5-era ``tools/flight_recorder/components/builder.py``: ``Not all ranks joining collective %s
  at entry %s``, ``Collective %s at entry %s errors``, ``expected ranks: %d``, ``error message: %s``;
* first release (same file, ``print``): ``Not all ranks joining collective for group {pg}:{desc}
  collective {name}  Missing ranks are {set}  {in} {out} {n} {state}`` and ``Collective {record}
  errors for group ...`` with ``Found errors: Error rank 1, MatchState.SIZE_OR_SYNTAX_MISMATCH``.

The diagnosis reads the kind of mismatch from ``mismatch_kind`` (``missing_ranks``, ``type``,
``size``, ``dtype``, ``state``, ``undecided``, ``missing_dumps``).
"""

from __future__ import annotations

import pytest

from denpex_nb.ingest.frtrace_text import MISMATCH_KINDS, FrTraceTextReader

from ._text_helpers import one, run

R = FrTraceTextReader()

FRAMES = [
    "collective stack trace: ",
    " all_reduce at /usr/lib/python3/torch/distributed/distributed_c10d.py:2501",
    "wrapper at /usr/lib/python3/torch/distributed/c10d_logger.py:81",
    "<module> at /w/train.py:40",
]


def current(header, *fields, stack=True):
    return [
        header,
        "internal record id: 41",
        "group info: 0:default_pg",
        *fields,
        "world size: 4",
        "expected ranks: {0, 1, 2, 3}",
        "collective state: scheduled",
    ] + (FRAMES if stack else [])


CASES = {
    "missing_current": (
        current(
            "Not all ranks joining collective, sequence number: 42",
            "collective: nccl:all_reduce",
            "missing ranks: {1, 3}",
            "input sizes: [[1024]]",
            "output sizes: [[1024]]",
        ),
        dict(
            seq=42,
            op="all_reduce",
            related_ranks=(1, 3),
            mismatch_kind="missing_ranks",
            expected_ranks=(0, 1, 2, 3),
            world_size=4,
            rank=None,
            record_id=None,
        ),
    ),
    "size_current": (
        current(
            "Collective sequence number: 7 has errors",
            "collective: nccl:all_gather_into_tensor",
            "input sizes: [[8, 4]]",
            "output sizes: [[32, 4]]",
            "error msg: Culprit rank 2; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: "
            "'[[8, 4]]' does not match found input sizes: '[[6, 4]]'",
        ),
        dict(
            seq=7,
            op="all_gather_into_tensor",
            related_ranks=(2,),
            mismatch_kind="size",
            rank=2,
            error_type="SIZE_OR_SYNTAX_MISMATCH",
            culprit_ranks=(2,),
        ),
    ),
    "type_two_culprits": (
        current(
            "Collective sequence number: 3 has errors",
            "collective: nccl:all_reduce",
            "error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective "
            "type: 'all_reduce' does not match found collective type: 'broadcast', Culprit rank 3; "
            "Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' does not "
            "match found collective type: 'broadcast'",
            stack=False,
        ),
        dict(seq=3, op="all_reduce", related_ranks=(1, 3), mismatch_kind="type", culprit_ranks=(1, 3)),
    ),
    "dtype_current": (
        current(
            "Collective sequence number: 5 has errors",
            "collective: nccl:all_reduce",
            "error msg: Culprit rank 1; Error type: COLLECTIVE_DTYPE_MISMATCH, Expected dtypes: "
            "'{'Float'}' does not match found dtype: '{'Float'}/{'Double'}/{'Double'}'",
        ),
        dict(seq=5, related_ranks=(1,), mismatch_kind="dtype"),
    ),
    "state_current": (
        current(
            "Collective sequence number: 9 has errors",
            "collective: nccl:broadcast",
            "error msg: Culprit rank 0; Error type: COLLECTIVE_STATE_MISMATCH, Expected state: "
            "'scheduled' does not match found state: 'completed'",
        ),
        dict(seq=9, op="broadcast", related_ranks=(0,), mismatch_kind="state"),
    ),
    "alltoall_current": (
        current(
            "Input/output mismatch in the collective sequence number: 11",
            "collective: nccl:all_to_all",
            "total input numel: 96",
            "total output numel: 64",
            "input sizes: [[24]]",
            "output sizes: [[16]]",
        ),
        dict(seq=11, op="all_to_all", mismatch_kind="size", total_input_numel=96, total_output_numel=64),
    ),
    "missing_25": (
        [
            "Not all ranks joining collective 5 at entry 4",
            "group info: 0:default_pg",
            "collective: nccl:all_reduce",
            "missing ranks: {1}",
            "input sizes: [[3, 4]]",
            "output sizes: [[3, 4]]",
            "expected ranks: 2",
            "collective state: scheduled",
            "collective stack trace:",
            "  all_reduce at /home/u/torch/distributed/distributed_c10d.py:2696",
        ],
        dict(seq=5, record_id=4, related_ranks=(1,), mismatch_kind="missing_ranks", world_size=2, expected_ranks=None),
    ),
    "errors_25": (
        [
            "Collective 8 at entry 8 errors",
            "group info: 0:default_pg",
            "collective: nccl:all_reduce",
            "input sizes: [[4]]",
            "output sizes: [[4]]",
            "expected ranks: 2",
            "collective state: scheduled",
            "error message: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[4]]' "
            "does not match found input sizes: '[[5]]'",
            "collective stack trace:",
        ],
        dict(seq=8, record_id=8, related_ranks=(1,), mismatch_kind="size", rank=1),
    ),
    "missing_first": (
        [
            "Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing "
            "ranks are {1, 2}  [[3, 4]] [[3, 4]] 4 scheduled ",
            "Collective stack traces: ",
            "[]",
        ],
        dict(seq=None, op="all_reduce", related_ranks=(1, 2), mismatch_kind="missing_ranks", world_size=4),
    ),
    "errors_first": (
        [
            "Collective 12 errors for group 0:default_pg collective nccl:all_reduce  [[4]] [[4]] 2 scheduled ",
            "Found errors: Error rank 1, MatchState.COLLECTIVE_TYPE_MISMATCH",
            "",
            "Collective stack traces: ",
            "[]",
        ],
        dict(seq=None, record_id=12, related_ranks=(1,), mismatch_kind="type", rank=1),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(
    "prefix",
    ["", "[default0]:", "2024-05-01T12:00:00.000000001Z ", "2024-01-01 12:00:00,123 - Flight Recorder - INFO - "],
)
def test_finding(case, prefix):
    lines, want = CASES[case]
    out = run(R, [prefix + t if t else t for t in lines])
    err = one(out.errors)
    assert err["kind"] == "fr_finding"
    for k, v in want.items():
        assert err.get(k) == v, (k, err.get(k), v)
    if err.get("seq") is not None:
        assert err["seq_kind"] == "fr"
    assert err["mismatch_kind"] in MISMATCH_KINDS
    assert out.parsed == set(range(1, len(lines) + 1))


@pytest.mark.parametrize("sep", [",", ":", ""])
@pytest.mark.parametrize(
    "header, kind",
    [
        ("Not all ranks joining collective{sep} sequence number: 31117", "missing_ranks"),
        ("Input/output mismatch in the collective{sep} sequence number: 31117", "size"),
    ],
)
def test_header_with_a_colon_after_collective(sep, header, kind):
    # tests/data/wild/pytorch-pr140969-frtrace-not-all-ranks-joining (pytorch#140969): "collective: sequence number:"
    lines = [
        header.format(sep=sep),
        "internal record id: 31116",
        "group info: 0:default_pg",
        "collective: nccl:all_reduce",
        "missing ranks: {3, 4, 5, 6, 7}",
        "input sizes: [[1571911]]",
        "output sizes: [[1571911]]",
        "world size: 8",
        "expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}",
        "collective state: scheduled",
    ]
    err = one(run(R, lines).errors)
    assert (err["seq"], err["op"], err["missing_ranks"], err["world_size"]) == (31117, "all_reduce", (3, 4, 5, 6, 7), 8)
    if kind:
        assert err["mismatch_kind"] == kind


def test_corpus_frtrace_with_colon_is_read():
    import os

    import denpex_nb as dx

    path = os.path.join(
        os.path.dirname(__file__),
        "..",
        "data",
        "wild",
        "pytorch-pr140969-frtrace-not-all-ranks-joining",
        "fr_trace.txt",
    )
    inc = dx.load(path)
    (row,) = inc.errors.itertuples()
    assert (row.kind, row.seq, row.op, row.missing_ranks, row.mismatch_kind) == (
        "fr_finding",
        31117,
        "all_reduce",
        (3, 4, 5, 6, 7),
        "missing_ranks",
    )
    assert inc.sources.iloc[0]["lines_parsed"] >= 12


def test_culprit_events_carry_what_the_culprit_passed():
    out = run(R, CASES["size_current"][0] + CASES["dtype_current"][0] + CASES["type_two_culprits"][0])
    ev = {(e["rank"], e["seq"]): e for e in out.events}
    assert ev[(2, 7)]["in_shapes"] == ((6, 4),) and ev[(2, 7)]["numel_in"] == 24
    assert ev[(1, 5)]["dtype"] == "float64"
    assert ev[(1, 3)]["op"] == "broadcast" and ev[(3, 3)]["op"] == "broadcast"
    assert all(e["seq_kind"] == "fr" for e in out.events)


def test_missing_and_undecided_dumps():
    out = run(
        R,
        [
            "AssertionError: Missing dump files from ranks {1, 3}",
            "We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks "
            "({2}) so we don't have enough information. If you want to debug further use -j to dump all raw trace",
        ],
    )
    a, b = out.errors
    assert (a["related_ranks"], a["mismatch_kind"]) == ((1, 3), "missing_dumps")
    assert (b["related_ranks"], b["mismatch_kind"]) == ((2,), "missing_dumps")


def test_truncated_finding_keeps_what_it_has():
    lines, _ = CASES["size_current"]
    out = run(R, lines[:3])
    err = one(out.errors)
    assert err["seq"] == 7 and err["mismatch_kind"] is None and err["related_ranks"] == ()


def test_out_of_range_numbers():
    out = run(
        R,
        [
            "Collective sequence number: 99999999999999999999 has errors",
            "collective: nccl:all_reduce",
            "error msg: Culprit rank 99999999999; Error type: SIZE_OR_SYNTAX_MISMATCH",
        ],
    )
    err = one(out.errors)
    assert err["seq"] is None and err["rank"] is None

"""Kinds blind batch n missed on positions and on DDP's reducer (issue 16), each tested on its kind with
generated variants (launcher prefixes, torch's line shapes over its versions, hard wraps, cut tails, a
subset of the ranks).

- Watchdog timeouts at one work seq that disagree on the op are an op mismatch also when the line that
  names the group was kept for some ranks only. The timeout line names no group (torch up to 2.3 prints
  ``[Rank 3] Watchdog caught ... WorkNCCL(SeqNum=4084, OpType=BROADCAST, ...)``; 2.4+ too) and the
  status line after it does (``[PG 0 Rank 3] Timeout at NCCL work: 4084``, ``[PG ID 1 PG GUID 1 Rank 3]
  failure detected by watchdog at work sequence id: 4084``); a rank whose status line the paste or the
  run lost is read in the one group the evidence names, so its timeout and the others' are one
  collective compared (the alignment, ``align.with_sole_groups``, reads them as the stuck-points rule
  does; a status line with no launcher prefix names its group for the timeout of the rank its own
  prefix gives, the rank in the group as the timeout's ``[Rank k]``). A rank unseen below the highest rank seen exists: with ranks 1-3 seen the largest side (2) is
  not a majority of 4, so the culprit stays undetermined; with every rank seen the odd one is named.
  Evidence that names two groups puts an unnamed timeout in neither; a rank with unnamed timeouts at
  two seqs stays out too
  (test_timeouts_at_one_seq_on_different_ops_are_an_op_mismatch_when_some_status_lines_are_missing,
  test_an_op_mismatch_with_a_rank_below_the_highest_unseen_names_no_culprit,
  test_an_unnamed_timeout_joins_no_group_when_the_evidence_names_two,
  test_a_rank_with_unnamed_timeouts_at_two_seqs_is_not_put_in_the_named_group).
- DDP's "Expected to have finished reduction in the prior iteration" error (reducer.cpp's
  ``ensure_prior_reduction_finished``) prints its later sentences on lines of their own, each said by no
  other message ("You can enable unused parameter detection by passing ...", "making sure all `forward`
  function outputs participate in calculating loss", "... wasn't able to locate the output tensors in
  the return value of your module's `forward` function", "Since `find_unused_parameters=True` is
  enabled, this likely means that not all `forward` outputs participate in computing loss", " In
  addition, you can set ... which particular parameters did not receive gradient on this rank as part
  of this error"). A paste that cut the head keeps one of them: it is the unused-parameters error,
  whatever launcher prefix, and the whole message is still one error per rank, not one per sentence;
  DDP's warning that ``find_unused_parameters=True`` found none stays a warning
  (test_a_cut_unused_parameters_error_is_read_from_any_of_its_sentences,
  test_the_whole_unused_parameters_error_is_one_error_per_rank,
  test_the_find_unused_parameters_warning_is_still_no_failure).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

# --- watchdog timeouts at one seq on different ops ----------------------------------------------------------

#: the line after a timeout that names its group, by torch's era
_STATUS = {
    "2.2": "[E ProcessGroupNCCL.cpp:1537] [PG {pg} Rank {r}] Timeout at NCCL work: {seq}, last enqueued NCCL work: "
    "{seq}, last completed NCCL work: {done}.",
    "2.4": "[E1115 16:42:37.768084521 ProcessGroupNCCL.cpp:2168] [PG ID {pg} PG GUID {pg}(default_pg) Rank {r}]  "
    "failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed "
    "work: {done}",
    "2.5": "[E218 04:54:22.864535778 ProcessGroupNCCL.cpp:1795] [PG ID {pg} PG GUID {pg}(default_pg) Rank {r}] "
    "Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, "
    "last completed NCCL work: {done}.",
}
_HEAD = {
    "2.2": "[E ProcessGroupNCCL.cpp:563] ",
    "2.4": "[E1115 16:42:37.766242859 ProcessGroupNCCL.cpp:629] ",
    "2.5": "[E218 04:54:22.864467604 ProcessGroupNCCL.cpp:616] ",
}
_NUMEL = {"ALLREDUCE": 4821568, "BROADCAST": 56623104}


def _timeout(r: int, seq: int, op: str, era: str, status: bool, pg: str = "0") -> list[str]:
    n = _NUMEL.get(op, 1024)
    out = [
        f"{_HEAD[era]}[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, "
        f"NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 6000{r}7 milliseconds before timing out."
    ]
    if status:
        out.append(_STATUS[era].format(pg=pg, r=r, seq=seq, done=seq - 1))
    return out


def _wrap_at(line: str, width: int | None) -> list[str]:
    if width is None:
        return [line]
    return [line[i : i + width] for i in range(0, len(line), width)]


def _job(ranks, ops, kept, era, wrapper, width=None, seq=4084) -> list[str]:
    lines = []
    for r in ranks:
        for t in _timeout(r, seq, ops[r], era, r in kept):
            lines += [WRAPPERS[wrapper](r, piece) for piece in _wrap_at(t, width)]
    return lines


_OPS = {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "BROADCAST"}
#: which ranks' status lines the evidence kept: the odd rank's only, the others' only, one of the others'
_KEPT = {"odd-one": {3}, "the-others": {0, 1, 2}, "one-other": {1}}


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "slurm", "pdsh", "ray", "kubectl"])
@pytest.mark.parametrize("era", sorted(_STATUS))
@pytest.mark.parametrize("kept", sorted(_KEPT))
def test_timeouts_at_one_seq_on_different_ops_are_an_op_mismatch_when_some_status_lines_are_missing(
    tmp_path, wrapper, era, kept
):
    d = _diagnose(tmp_path, {"log.txt": _job(range(4), _OPS, _KEPT[kept], era, wrapper)})
    assert d.verdict == ClassId.OP_MISMATCH, d.summary()
    assert d.culprit_ranks == [3], d.summary()


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "pdsh", "kubectl"])
@pytest.mark.parametrize("era", sorted(_STATUS))
@pytest.mark.parametrize("width", [None, 120], ids=["whole", "w120"])
def test_an_op_mismatch_with_a_rank_below_the_highest_unseen_names_no_culprit(tmp_path, wrapper, era, width):
    # pytorch#20630's shape: ranks 1 and 2 in an all_reduce, rank 3 in a broadcast, rank 3's status line
    # only; rank 0 is not in the evidence, so 2 of at least 4 ranks is no majority
    d = _diagnose(tmp_path, {"log.txt": _job([2, 1, 3], _OPS, {3}, era, wrapper, width)})
    if width is not None and wrapper != "plain":
        # a line hard-wrapped under a launcher prefix is read by its first physical line (the loader joins
        # continuation lines only where no prefix starts them): its SeqNum and OpType come on later lines,
        # so the reading stays undetermined, and names nobody either way
        assert d.verdict in (ClassId.OP_MISMATCH, ClassId.TIMEOUT_UNDETERMINED), d.summary()
    else:
        assert d.verdict == ClassId.OP_MISMATCH, d.summary()
    assert d.culprit_ranks == [], d.summary()


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
def test_an_unnamed_timeout_joins_no_group_when_the_evidence_names_two(tmp_path, wrapper):
    # ranks 0 and 1 time out in group 5's all_reduce, rank 2 in group 6's broadcast, both at seq 40; rank 3's
    # broadcast names no group: it may be group 5's or 6's, so no op is compared across it
    lines = []
    for r, op, pg, status in [(0, "ALLREDUCE", "5", True), (1, "ALLREDUCE", "5", True), (2, "BROADCAST", "6", True)]:
        lines += [WRAPPERS[wrapper](r, t) for t in _timeout(r, 40, op, "2.2", status, pg)]
    lines += [WRAPPERS[wrapper](3, t) for t in _timeout(3, 40, "BROADCAST", "2.2", False)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict != ClassId.OP_MISMATCH, d.summary()
    assert not d.culprit_ranks, d.summary()


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
def test_a_rank_with_unnamed_timeouts_at_two_seqs_is_not_put_in_the_named_group(tmp_path, wrapper):
    # ranks 0-2 time out in group 0's all_reduce at seq 9 and say so; rank 3 timed out at seq 9 (a
    # broadcast) and seq 30 without a group: two groups of its own, perhaps, so it is compared in none
    lines = []
    for r in range(3):
        lines += [WRAPPERS[wrapper](r, t) for t in _timeout(r, 9, "ALLREDUCE", "2.2", True)]
    for seq in (9, 30):
        lines += [WRAPPERS[wrapper](3, t) for t in _timeout(3, seq, "BROADCAST", "2.2", False)]
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict != ClassId.OP_MISMATCH, d.summary()
    assert 3 not in d.culprit_ranks, d.summary()


# --- DDP's unfinished-reduction error, cut ------------------------------------------------------------------

_DDP_HEAD = (
    "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
    "indicates that your module has parameters that were not used in producing loss. "
)
#: the sentences reducer.cpp prints after the head, on lines of their own (find_unused_parameters off / on)
_DDP_TAILS = {
    "enable": "You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by ",
    "outputs": "making sure all `forward` function outputs participate in calculating loss. ",
    "locate": "If you already have done the above, then the distributed data parallel module wasn't able to locate "
    "the output tensors in the return value of your module's `forward` function. Please include the loss function "
    "and the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, "
    "iterable).",
    "since": "Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` outputs "
    "participate in computing loss. You can fix this by ",
    "addition": " In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL "
    "to print out information about which particular parameters did not receive gradient on this rank as part of "
    "this error",
}
_DDP_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "./train.py", line 253, in <module>',
    "    main()",
    '  File "/opt/conda/lib/python3.10/site-packages/mmcv/parallel/distributed.py", line 42, in train_step',
    "    and self.reducer._rebuild_buckets()):",
]


def _cut(text: str, cut: str) -> str:
    """The sentence as a paste keeps it: whole, its head cut off (mid-word), or its end cut off."""
    if cut == "head":
        return text[len(text) // 3 :]
    if cut == "tail":
        return text[: 2 * len(text) // 3]
    return text


#: the words of each sentence that say which error it is (a cut that takes them leaves nothing to read)
_DDP_KEYS = {
    "enable": "unused parameter detection by passing",
    "outputs": "outputs participate in calculating loss",
    "locate": "locate the output tensors in the return value",
    "since": "outputs participate in computing loss",
    "addition": "which particular parameters did not receive gradient",
}
_DDP_CUTS = [
    (t, c) for t in sorted(_DDP_TAILS) for c in ("whole", "head", "tail") if _DDP_KEYS[t] in _cut(_DDP_TAILS[t], c)
]


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "slurm", "ray", "kubectl"])
@pytest.mark.parametrize(("tail", "cut"), _DDP_CUTS, ids=[f"{t}-{c}" for t, c in _DDP_CUTS])
@pytest.mark.parametrize("traceback", [False, True], ids=["alone", "with-traceback"])
def test_a_cut_unused_parameters_error_is_read_from_any_of_its_sentences(tmp_path, wrapper, tail, cut, traceback):
    text = _cut(_DDP_TAILS[tail], cut)
    lines = [WRAPPERS[wrapper](2, text)] + ([WRAPPERS[wrapper](2, t) for t in _DDP_TRACEBACK] if traceback else [])
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict == ClassId.UNUSED_PARAMETERS, d.summary()
    assert not d.culprit_ranks or d.culprit_ranks == [2], d.summary()


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "kubectl"])
@pytest.mark.parametrize("ranks", [[0], [0, 1, 2, 3]], ids=["one", "all"])
def test_the_whole_unused_parameters_error_is_one_error_per_rank(tmp_path, wrapper, ranks):
    import denpex_nb as dx

    lines = []
    for r in ranks:
        body = [_DDP_HEAD + _DDP_TAILS["enable"], _DDP_TAILS["outputs"] + _DDP_TAILS["locate"]]
        body += [f"Parameter indices which did not receive grad for rank {r}: 21 22", _DDP_TAILS["addition"]]
        lines += [WRAPPERS[wrapper](r, t) for t in body]
    p = tmp_path / "log.txt"
    p.write_text("\n".join(lines) + "\n")
    inc = dx.load(str(p), progress=False)
    errs = inc.errors[inc.errors["kind"].astype(str) == "ddp_unused_parameters"]
    assert sorted(int(r) for r in errs["rank"]) == ranks, errs[["rank", "message"]]
    assert dx.diagnose(inc, strict=True).verdict == ClassId.UNUSED_PARAMETERS


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
def test_the_find_unused_parameters_warning_is_still_no_failure(tmp_path, wrapper):
    warn = (
        "[W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor, but did not "
        "find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd "
        "graph every iteration,  which can adversely affect performance. If your model indeed never has any unused "
        "parameters in the forward pass, consider turning this flag off. Note that this warning may be a false "
        "positive if your model has flow control causing later iterations to have unused parameters. (function "
        "operator())"
    )
    d = _diagnose(tmp_path, {"log.txt": [WRAPPERS[wrapper](r, warn) for r in range(4)]})
    assert d.verdict != ClassId.UNUSED_PARAMETERS, d.summary()
    assert not d.culprit_ranks, d.summary()

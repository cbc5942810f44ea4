"""Decisions about kinds of evidence read from lines no specific rule explains (issue #16, batch
blind-2026-12-e), each tested on generated variants: every real wording found, behind the wrappers
real logs put around lines (none, ``[rankN]:``, torchrun, mpirun, slurm, pdsh, Ray, kubectl, docker),
with logger headers, on one rank or several, cut.

Decisions of ``init-wait`` (a rank waiting for the others at process-group init, ``unjoined_waits``):

- a rank still waiting in c10d's store-based barrier when its file ends (``worker_count=``,
  ``num_workers_joined=``, ``processgroup`` without its space, the debug ``for S seconds`` form, any
  logger header and wrapper, one rank or several, the last line cut) hung at init: the ranks it
  waits for never joined. ``timeout-undetermined`` at low confidence (a copy cut while ranks were
  still coming up looks the same), no culprit (the store counts who joined, it names nobody), never
  ``no-failure`` and never ``no-evidence``
  (test_a_wait_for_ranks_left_open_at_init_is_a_hang_never_an_all_clear).
- a wait that something later in the same file ends (``Completed store-based barrier``, a
  communicator up, a collective read, the work finished) is no failure
  (test_a_wait_that_ended_is_no_failure).
- more ranks counted than the world size (a reused store key, a wrong world size) is said so, not
  read as "k of n joined" (test_more_ranks_counted_than_the_world_is_said_so).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS, healthy_lines

#: c10d's store-based barrier wait, in each wording torch has printed it (1.8-1.13, 1.10's warning
#: without the space, 2.x, 2.x's debug form)
_WAITS = [
    "Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, worker_count={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize processgroup for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, worker_count={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 "
    "(world_size={w}, num_workers_joined={j}, timeout=0:30:00)",
    "Waiting in store based barrier to initialize process group for 30.01 secondsrank: {r}, key: "
    "store_based_barrier_key:1 (world_size={w}, num_workers_joined={j}, timeout=0:30:00 error=Socket Timeout)",
]
#: the logger headers the line comes behind (plain logging, hydra, fairseq/metaseq, none)
_HEADERS = [
    "INFO:torch.distributed.distributed_c10d:",
    "WARNING:torch.distributed.distributed_c10d:",
    "[2025-03-11 05:21:04,421][torch.distributed.distributed_c10d][INFO] - ",
    "2022-05-10 05:38:33 | INFO | torch.distributed.distributed_c10d | ",
    "",
]


def _diagnose(tmp_path, lines, name="job.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.diagnose(dx.load(str(p)), strict=True)


def _waits(wording, header, wrapper, ranks, reports=3, world=8, joined=1):
    return [
        WRAPPERS[wrapper](r, header + _WAITS[wording].format(r=r, w=world, j=joined))
        for _ in range(reports)
        for r in ranks
    ]


#: (ranks that wait, is the last line cut)
_SUBSETS = [((0,), False), ((0, 2), False), ((3,), True), ((1, 5, 6), True)]
#: every wording behind every wrapper; the headers and the subsets taken in turn (a full product is
#: hundreds of diagnoses for the same decision)
_OPEN = [
    (wording, _HEADERS[k % len(_HEADERS)], wrapper, *_SUBSETS[k % len(_SUBSETS)])
    for k, (wording, wrapper) in enumerate((w, x) for w in range(len(_WAITS)) for x in sorted(WRAPPERS))
]


@pytest.mark.parametrize("wording, header, wrapper, ranks, cut", _OPEN)
def test_a_wait_for_ranks_left_open_at_init_is_a_hang_never_an_all_clear(
    tmp_path, wording, header, wrapper, ranks, cut
):
    lines = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in (1, 4, 6)]
    lines += _waits(wording, header, wrapper, ranks)
    if cut:  # the paste ends mid-line, after the words that say what it is
        lines[-1] = lines[-1][: lines[-1].index("barrier") + len("barrier") + 5]
    d = _diagnose(tmp_path, lines)
    assert (d.verdict, d.confidence, d.culprit_ranks) == (ClassId.TIMEOUT_UNDETERMINED, "low", []), d.summary()
    assert d.first.rule == "init-wait", d.summary()
    # the same waits with nothing else read: still a hang, not "nothing distributed could be read"
    d = _diagnose(tmp_path, lines[3:], "alone.log")
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "ray"])
@pytest.mark.parametrize(
    "end",
    [
        "Rank {r}: Completed store-based barrier for key:store_based_barrier_key:1 with 4 nodes.",
        "INFO:torch.distributed.distributed_c10d:Rank {r}: Completed store-based barrier for key:"
        "store_based_barrier_key:1 with 4 nodes.",
        None,  # the healthy run's NCCL communicators come up after it
        "Training finished, saving final model",
    ],
)
def test_a_wait_that_ended_is_no_failure(tmp_path, wrapper, end):
    waits = _waits(2, _HEADERS[0], wrapper, (0, 1), reports=2, world=4, joined=2)
    if end is None:
        lines = waits + healthy_lines(steps=3)
    else:
        lines = healthy_lines(steps=3) + waits + [WRAPPERS[wrapper](r, end.format(r=r)) for r in (0, 1)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.NO_FAILURE, d.summary()


@pytest.mark.parametrize("joined, said", [(3, "3 of 8 ranks had joined"), (9, "9 joined a group of 8")])
def test_more_ranks_counted_than_the_world_is_said_so(tmp_path, joined, said):
    d = _diagnose(tmp_path, _waits(0, _HEADERS[0], "plain", (0,), world=8, joined=joined))
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED and said in d.first.summary, d.summary()

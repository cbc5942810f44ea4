"""Four kinds blind batch l missed (issue #16), each tested on generated variants of real phrasings.

* **NCCL's own error in one process's output is the group's, not a lone process's device error.**
  ``ncclUnhandledCudaError: Call to CUDA function failed. / Last error: / Cuda failure 'invalid
  argument'`` (or ``DistBackendError: NCCL error in: ...ProcessGroupNCCL.cpp:N, unhandled cuda error``)
  with no rank prefix: the evidence showed one process, so the user was told ``rank-crash``, "One
  process failed on its own, a memory or device error of this process ... not a collective failure".
  An NCCL error means a communicator was in use: ``nccl-error`` (an allocation that failed inside
  NCCL may also read as the process's ``rank-crash``, never as a lone process's), no culprit
  (test_nccl_own_error_in_one_process_is_nccls). A CUDA error without NCCL stays the process's own
  (test_cuda_error_without_nccl_stays_the_process_own).
* **torchrun failing because its rendezvous store is out of reach is the network's, not a crash.**
  ``RuntimeError: connect() timed out. Original timeout was 60000 ms.`` in ``_create_tcp_store`` (or
  ``DistNetworkError: The client socket has timed out after 60s while trying to connect to (host,
  port)``, ``... failed to connect to any network address of ...``), chained into torchrun's own
  traceback (``RendezvousConnectionError: The connection to the C10d store has failed``, or the paste
  cut before it), on every node: the user was told ``rank-crash``, "the launcher failed itself". No
  worker started: ``nccl-error`` (the store's connection), no culprit
  (test_launcher_failing_on_an_unreachable_store_is_the_network). The launcher failing for another
  reason stays its own failure (test_launcher_failing_otherwise_stays_a_crash).
* **A traceback whose lines lost their indentation still has an exception line.** A paste flattened
  onto one line and re-cut at each ``[rank0]:``, or a wrapper that strips leading blanks: ``File
  "...", line N, in f`` and its source line unindented, then a bare ``AssertionError``. The reader took
  the first frame for the exception and the bare name for its message's tail; the user was told
  ``timeout-undetermined`` ("no divergence is visible"). It is the rank's own ``rank-crash``
  (test_unindented_traceback_ends_in_its_exception_line; the whole traceback on one line, joined with
  spaces, as pasted: test_flattened_paste_recut_at_rank_prefixes).
* **c10d's per-address connect warning is not a failure.** ``[W socket.cpp:601] [c10d] The client
  socket has failed to connect to [host]:port (errno: 22 - Invalid argument)`` (errno 97, Address
  family not supported by protocol; Windows 10022/10047): c10d records one address it could not use
  and tries the next; the user was told ``nccl-error``. Alone it is no failure (``no-evidence``: it
  shows no run going on either; beside training progress, ``no-failure``), and the summary that the
  connection failed (``... any network address of ...``, a timeout) still wins
  (test_per_address_connect_warning_is_no_failure, test_connect_summary_still_fails).
* **A launch command its parser rejected is the launching process's own failure.** ``tune run
  --nproc_per_node 8 ...`` answered by click's ``Usage: tune [OPTIONS] COMMAND [ARGS]... / Error: No
  such command 'run'.`` (or argparse's ``prog: error: unrecognized arguments: ...``, ``invalid
  choice``): the user was told ``no-evidence`` ("nothing distributed could be read"). Nothing started:
  ``rank-crash`` with no culprit, saying the command was rejected
  (test_rejected_command_line_is_the_process_own_failure); a usage error beside a healthy run is
  still no all-clear (test_usage_error_beside_a_run_is_no_all_clear).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose

# --- NCCL's own error in one process's output ------------------------------------------------------

_LAST = ("invalid argument", "out of memory", "peer access is not supported between these two devices")


def _nccl_own(form: str, last: str) -> list[str]:
    tb = [
        "Traceback (most recent call last):",
        '  File "/src/train_bash.py", line 14, in <module>',
        "    main()",
        '  File "/envs/lib/python3.10/contextlib.py", line 142, in __exit__',
        "    next(self.gen)",
    ]
    tail = ["ncclUnhandledCudaError: Call to CUDA function failed.", "Last error:", f"Cuda failure '{last}'"]
    if form == "bare":  # the tail of the exception's message, then the next traceback (as pasted)
        return tail + tb
    if form == "distbackend":
        return [
            *tb,
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:133, "
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            *tail,
        ]
    # NCCL 2.20's allocation failure as the last error
    return [
        *tb,
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
        "ncclUnhandledCudaError: Call to CUDA function failed.",
        "Last error:",
        "Failed to CUDA calloc async 4 bytes",
    ]


@pytest.mark.parametrize("wrapper", ["plain", "slurm", "docker", "pdsh"])
@pytest.mark.parametrize("form", ["bare", "distbackend", "calloc"])
@pytest.mark.parametrize("last", _LAST)
def test_nccl_own_error_in_one_process_is_nccls(tmp_path, wrapper, form, last):
    lines = [WRAPPERS[wrapper](0, t) for t in _nccl_own(form, last)]
    d = _diagnose(tmp_path, {"train.log": lines})
    # an allocation that failed inside NCCL is also this process's memory (the corpus accepts both)
    ok = {ClassId.NCCL_ERROR, ClassId.RANK_CRASH} if last == "out of memory" else {ClassId.NCCL_ERROR}
    assert d.verdict in ok, (d.verdict, d.first.summary, lines)
    assert d.first.rule != "own-process-error" and d.culprit_ranks == []


@pytest.mark.parametrize("wrapper", ["plain", "docker"])
def test_cuda_error_without_nccl_stays_the_process_own(tmp_path, wrapper):
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "    x = torch.empty(10**12, device='cuda')",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3725.29 GiB.",
    ]
    d = _diagnose(tmp_path, {"train.log": [WRAPPERS[wrapper](0, t) for t in lines]})
    assert d.verdict == ClassId.RANK_CRASH and d.culprit_ranks == []


# --- torchrun failing on an unreachable rendezvous store ---------------------------------------------

_SITE = "/home/u/env/lib/python3.10/site-packages/torch/distributed"
_CAUSES = {
    "connect-1.10": "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
    "socket-timeout-2.x": "torch.distributed.DistNetworkError: The client socket has timed out after 60s while trying "
    "to connect to (10.0.3.7, 29400).",
    "any-address": "RuntimeError: The client socket has failed to connect to any network address of (node0, 29400). "
    "The client socket has failed to connect to [node0]:29400 (errno: 110 - Connection timed out).",
}


def _store_unreachable(cause: str, end: str) -> list[str]:
    lines = [
        "Traceback (most recent call last):",
        f'  File "{_SITE}/elastic/rendezvous/c10d_rendezvous_backend.py", line 155, in _create_tcp_store',
        "    store = TCPStore(",
        _CAUSES[cause],
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/home/u/env/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        f'  File "{_SITE}/run.py", line 719, in main',
        "    run(args)",
        f'  File "{_SITE}/launcher/api.py", line 131, in __call__',
        "    return launch_agent(self._config, self._entrypoint, list(args))",
        f'  File "{_SITE}/elastic/rendezvous/c10d_rendezvous_backend.py", line 240, in create_backend',
        "    store = _create_tcp_store(params)",
    ]
    if end == "exception":
        lines.append(
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
            "has failed. See inner exception for details."
        )
    return lines


@pytest.mark.parametrize("wrapper", ["plain", "pdsh", "docker"])
@pytest.mark.parametrize("cause", sorted(_CAUSES))
@pytest.mark.parametrize("end", ["exception", "cut"])
@pytest.mark.parametrize("nodes", [1, 2])
def test_launcher_failing_on_an_unreachable_store_is_the_network(tmp_path, wrapper, cause, end, nodes):
    files = {f"node{n}.log": [WRAPPERS[wrapper](n, t) for t in _store_unreachable(cause, end)] for n in range(nodes)}
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.NCCL_ERROR, (d.verdict, d.first.summary)
    assert d.culprit_ranks == []


def test_launcher_failing_otherwise_stays_a_crash(tmp_path):
    lines = [
        "Traceback (most recent call last):",
        '  File "/home/u/env/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        f'  File "{_SITE}/run.py", line 719, in main',
        "    run(args)",
        f'  File "{_SITE}/launcher/api.py", line 131, in __call__',
        "    return launch_agent(self._config, self._entrypoint, list(args))",
        f'  File "{_SITE}/launcher/api.py", line 220, in launch_agent',
        "    spec = WorkerSpec(",
        "ValueError: The worker script must be a file: train.py",
    ]
    d = _diagnose(tmp_path, {"node0.log": lines})
    assert d.verdict == ClassId.RANK_CRASH and d.culprit_ranks == []


# --- a traceback whose lines lost their indentation ------------------------------------------------

_FRAMES = [
    'File "/env/lib/python3.10/site-packages/torch/distributed/pipelining/_backward.py", line 66, in stage_backward',
    "extract_tensors_with_grads(stage_output, output_grads)",
    'File "/env/lib/python3.10/site-packages/torch/distributed/pipelining/_backward.py", line 52, in extract',
    "assert len(output_val) == len(grad_val)",
]
_EXCS = {
    "bare": "AssertionError",
    "message": "AssertionError: 2 outputs, 1 gradient",
    "keyerror": "KeyError: 'labels'",
    "carets": None,  # Python 3.11's markers under the source line, then a ValueError
}


def _flat_tb(exc: str) -> list[str]:
    frames = list(_FRAMES)
    end = _EXCS[exc]
    if exc == "carets":
        frames = [*frames[:2], "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^", *frames[2:]]
        end = "ValueError: stage outputs and grads differ"
    return ["Traceback (most recent call last):", *frames, end]


@pytest.mark.parametrize("wrapper", ["torch", "torchrun", "mpirun", "kubectl"])
@pytest.mark.parametrize("exc", sorted(_EXCS))
@pytest.mark.parametrize("rank", [0, 3])
def test_unindented_traceback_ends_in_its_exception_line(tmp_path, wrapper, exc, rank):
    """Each line behind its launcher tag and one blank, as a paste joined with spaces and cut again at
    the tags leaves it (the tag's blank is all the indentation left)."""
    lines = [WRAPPERS[wrapper](rank, " " + t) for t in _flat_tb(exc)]
    d = _diagnose(tmp_path, {"train.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, (d.verdict, d.first.summary, lines)
    assert set(d.culprit_ranks) <= {rank}
    want = _flat_tb(exc)[-1].split(":")[0]
    assert any(want in e.text for e in d.first.evidence), d.first.evidence


@pytest.mark.parametrize("exc", ["bare", "message"])
def test_flattened_paste_recut_at_rank_prefixes(tmp_path, exc):
    """The real shape: the whole traceback on one line, joined with spaces, each piece with its prefix."""
    tb = _flat_tb(exc)
    lines = [
        " ".join(f"[rank0]: {t}" for t in tb[:-1]) + " ",
        f"[rank0]: {tb[-1]} [rank0]: The above exception was the direct cause of the following exception: ",
        '[rank0]: Traceback (most recent call last): [rank0]: File "/work/pipe/train.py", line 182, in <module> ',
        '[rank0]: run(args) [rank0]: File "/work/pipe/train.py", line 131, in run [rank0]: out = schedule.step(x) ',
    ]
    d = _diagnose(tmp_path, {"train.log": lines})
    assert d.verdict == ClassId.RANK_CRASH, (d.verdict, d.first.summary)
    assert set(d.culprit_ranks) <= {0}


# --- c10d's per-address connect warning ------------------------------------------------------------

_PER_ADDRESS = (
    "[W socket.cpp:601] [c10d] The client socket has failed to connect to [ip-26-0-146-37]:22456 "
    "(errno: 22 - Invalid argument).",
    "[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 "
    "(errno: 97 - Address family not supported by protocol).",
    "[W1201 10:00:01.123456 140 socket.cpp:697] [c10d] The client socket has failed to connect to "
    "[DESKTOP-1]:55472 (system error: 10047 - \u00bf\u00bf\u00bf\u00bf).",
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-1]:55472 "
    "(system error: 10022 - An invalid argument was supplied.).",
)


@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm", "docker", "kubectl"])
@pytest.mark.parametrize("line", range(len(_PER_ADDRESS)))
def test_per_address_connect_warning_is_no_failure(tmp_path, wrapper, line):
    alone = [WRAPPERS[wrapper](0, _PER_ADDRESS[line])]
    d = _diagnose(tmp_path, {"a.log": alone})
    assert d.verdict == ClassId.NO_EVIDENCE, (d.verdict, d.first.summary)
    run = [WRAPPERS[wrapper](r, _PER_ADDRESS[line]) for r in range(4)] + healthy_lines()
    d = _diagnose(tmp_path, {"b.log": run})
    assert d.verdict == ClassId.NO_FAILURE, (d.verdict, d.first.summary)


@pytest.mark.parametrize("wrapper", ["plain", "torch", "docker"])
@pytest.mark.parametrize(
    "summary",
    [
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(ip-26-0-146-37, 22456). The client socket has failed to connect to [ip-26-0-146-37]:22456 "
        "(errno: 22 - Invalid argument).",
        "[E socket.cpp:957] [c10d] The client socket has timed out after 1800s while trying to connect to "
        "(ip-26-0-146-37, 22456).",
    ],
)
def test_connect_summary_still_fails(tmp_path, wrapper, summary):
    lines = [WRAPPERS[wrapper](0, _PER_ADDRESS[0]), WRAPPERS[wrapper](0, summary)]
    d = _diagnose(tmp_path, {"a.log": lines})
    assert d.verdict == ClassId.NCCL_ERROR, (d.verdict, d.first.summary)
    run = healthy_lines() + lines
    d = _diagnose(tmp_path, {"b.log": run})
    assert d.verdict != ClassId.NO_FAILURE


# --- a launch command its parser rejected -------------------------------------------------------

_USAGES = {
    "click-command": [
        "Usage: tune [OPTIONS] COMMAND [ARGS]...",
        "Try 'tune --help' for help.",
        "",
        "Error: No such command 'run'.",
    ],
    "click-option": [
        "Usage: launch [OPTIONS] CONFIG",
        "Try 'launch --help' for help.",
        "",
        "Error: No such option: --nproc_per_node Did you mean --nproc-per-node?",
    ],
    "click-missing": [
        "Usage: train [OPTIONS] CONFIG",
        "Try 'train -h' for help.",
        "",
        "Error: Missing argument 'CONFIG'.",
    ],
    "argparse-choice": [
        "usage: tune [-h] {download,ls,cp,validate} ...",
        "tune: error: argument subcommand: invalid choice: 'run' (choose from 'download', 'ls', 'cp', 'validate')",
    ],
    "argparse-unrecognized": [
        "usage: finetune.py [-h] [--config CONFIG]",
        "finetune.py: error: unrecognized arguments: --nproc_per_node 8",
    ],
}


@pytest.mark.parametrize("wrapper", ["plain", "docker", "pdsh", "slurm"])
@pytest.mark.parametrize("form", sorted(_USAGES))
@pytest.mark.parametrize("shell", [True, False])
def test_rejected_command_line_is_the_process_own_failure(tmp_path, wrapper, form, shell):
    lines = list(_USAGES[form])
    if shell:  # the command as typed, prompt and trailing space kept (as pasted)
        lines.insert(
            0, "(env) user@host:~/work$ tune run --nproc_per_node 8 full_finetune_distributed --config x.yaml "
        )
    d = _diagnose(tmp_path, {"out.log": [WRAPPERS[wrapper](0, t) for t in lines]})
    assert d.verdict == ClassId.RANK_CRASH, (d.verdict, d.first.summary)
    assert d.culprit_ranks == []
    assert "rejected" in d.first.summary


@pytest.mark.parametrize("form", ["click-command", "argparse-unrecognized"])
def test_usage_error_beside_a_run_is_no_all_clear(tmp_path, form):
    d = _diagnose(tmp_path, {"a.log": healthy_lines() + _USAGES[form]})
    assert d.verdict != ClassId.NO_FAILURE

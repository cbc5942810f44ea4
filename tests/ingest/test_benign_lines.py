"""Lines that prove the distributed machinery ran without saying anything went wrong (item: benign
distributed lines count as parsed; the diagnosis reads "nothing parsed" as "no evidence").

* ProcessGroupNCCL's options: ``[Rank 3] ProcessGroupNCCL initialized with following options:`` then
  ``NCCL_ASYNC_ERROR_HANDLING: 0``-style lines (torch 2.0/2.1), or the one-line ``ProcessGroupNCCL
  initialization options: size: 8, global rank: 3, ...`` (newer; the default group's size is a
  ``world_size`` on a ``ranks`` row);
* teardown warnings ``process group has NOT been destroyed before it is being destructed`` (``... before we
  destruct ProcessGroupNCCL`` since torch 2.4) and ``destroy_process_group() was not called before
  program exit`` (``warning`` rows);
* c10d's other warnings that say the machinery ran (a renamed ``NCCL_*`` variable, a barrier's guessed
  device, DDP's "no unused parameters found", "grad strides do not match bucket view strides"):
  ``warning`` rows behind any wrapper; alone they give a low all-clear, never ``no-evidence``, and a
  failure line beside them still gives a failure (test_c10d_running_warnings_are_evidence_not_an_all_clear);
* Python warnings from ``torch/distributed/...`` (``file.py:N: UserWarning: message``, the message
  over several lines, then the indented source line; ``warning`` rows);
* DeepSpeed's launcher lines (``[runner.py:...]`` / ``[launch.py:...]``; ``global_rank_mapping``
  gives ``ranks`` rows with host, local rank and ``world_size``), torchrun's elastic start and
  rendezvous result (``global_ranks`` / ``global_world_sizes``), Lightning's banner.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

import denpex_nb as dx

from ..signal_variants import RANKED, WRAPPERS
from .test_pasted_wrappers import load_text, parsed

WILD = os.path.join(os.path.dirname(__file__), "..", "data", "wild")


def _wild(case: str, name: str = "log.txt"):
    return dx.load(os.path.join(WILD, case, name))


@pytest.mark.parametrize(
    "case",
    [
        "deepspeed-716-functional-launch-nccl-debug",
        "primerl-pr417-finished-run-destroy-pg-warning",
        "pytorch-126275-pg-not-destroyed-warning-wall",
        "pytorch-76949-fsdp-allgather-order-warning-eval",
        "pytorch-pr105695-pgnccl-options-info-chatter",
    ],
)
def test_corpus_benign_cases_parse_some_lines(case):
    inc = _wild(case)
    assert parsed(inc) > 0
    assert set(inc.errors["kind"].astype(str)) <= {"warning"}


def test_pg_nccl_options_block(tmp_path):
    # tests/data/wild/pytorch-pr105695-pgnccl-options-info-chatter (pytorch#105695), lines 1-2, plus the
    # other keys of that block (generated)
    lines = [
        "I0719 10:50:33.485718 219407 ProcessGroupNCCL.cpp:482] [Rank 3] ProcessGroupNCCL initialized with following options:",
        "NCCL_ASYNC_ERROR_HANDLING: 0",
        "NCCL_DESYNC_DEBUG: 0",
        "NCCL_ENABLE_TIMING: 0",
        "NCCL_BLOCKING_WAIT: 0",
        "TIMEOUT(ms): 1800000",
        "USE_HIGH_PRIORITY_STREAM: 0",
        "TORCH_DISTRIBUTED_DEBUG: OFF",
        "NCCL_DEBUG: INFO",
        "PG ID: 0",
        "PG GUID: 0",
    ]
    inc = load_text(tmp_path, lines)
    assert parsed(inc) == len(lines) and inc.errors.empty


def test_pg_nccl_one_line_options_give_the_world_size(tmp_path):
    lines = [
        "[rank3]:I0101 00:00:00.000000 1 ProcessGroupNCCL.cpp:913] [PG ID 0 PG GUID 0 Rank 3] ProcessGroupNCCL "
        "initialization options: size: 8, global rank: 3, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, "
        "SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: 0",
        "[rank3]:I0101 00:00:00.000000 1 ProcessGroupNCCL.cpp:913] [PG ID 1 PG GUID 1 Rank 1] ProcessGroupNCCL "
        "initialization options: size: 2, global rank: 3, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0, "
        "SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: 1",
        "[rank3]:I0101 00:00:00.000000 1 ProcessGroupNCCL.cpp:914] [PG ID 0 PG GUID 0 Rank 3] ProcessGroupNCCL "
        "environments: NCCL version: 2.21.5, TORCH_NCCL_ASYNC_ERROR_HANDLING: 3",
    ]
    inc = load_text(tmp_path, lines)
    assert parsed(inc) == 3
    assert inc.ranks[["rank", "world_size"]].values.tolist() == [[3, 8]]  # the sub-group's size is not the world's


def test_lone_option_words_elsewhere_are_not_taken():
    inc_lines = ["size: 8", "ID=3"]
    from denpex_nb.ingest.c10d import C10dReader

    from ._text_helpers import run

    assert run(C10dReader(), inc_lines).parsed == set()


@pytest.mark.parametrize(
    "text",
    [
        "[rank0]:[W515 07:06:42.829549331 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed before it "
        "is being destructed. On normal program exit, the application should call destroy_process_group to ensure that "
        "any pending NCCL data transfers have finished in this process.",
        "[rank0]:[W616 21:29:33.762196891 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not "
        "called before program exit, which can leak resources. For more info, please see "
        "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    ],
)
def test_teardown_warnings(tmp_path, text):
    inc = load_text(tmp_path, [text])
    (row,) = inc.errors.itertuples()
    assert (row.kind, row.rank, row.source) == ("warning", 0, "c10d")


FSDP = [
    "/dev/lib/python3.8/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:2770: UserWarning: All-gathe",
    "r order differs from that of the first iteration on rank 0 -- collectives are unchecked and may give incorrect results or hang",
    "Expected no more all-gathers but got an all-gather for the FSDP module wrapping ['fc1.weight', 'fc1.bias']",
    "First iteration's all-gather sequence: [0, 1]",
    "This iteration's all-gather sequence (so far): [0, 1, 1]",
    "where indices follow the root FSDP module's `.parameters()` order",
    "  warnings.warn(",
]  # tests/data/wild/pytorch-76949-fsdp-allgather-order-warning-eval (pytorch#76949), lines 1-7


def test_multi_line_torch_distributed_warning(tmp_path):
    inc = load_text(tmp_path, ["Train Epoch: 1 Loss: 0.21"] + FSDP + ["Train Epoch: 2 Loss: 0.20"])
    (row,) = inc.errors.itertuples()
    assert row.kind == "warning" and row.warning_category == "UserWarning" and row.line == 2
    assert row.origin.endswith("fsdp/fully_sharded_data_parallel.py:2770")
    assert row.message.startswith("UserWarning: All-gather order differs from that of the first iteration on rank 0")
    assert row.message.endswith("where indices follow the root FSDP module's `.parameters()` order")
    assert row.message.count("\n") == 4
    assert parsed(inc) == len(FSDP)


@pytest.mark.parametrize("prefix", ["", "[rank1]:", "[default1]:"])
def test_one_line_warnings_and_the_deprecated_collective(tmp_path, prefix):
    lines = [
        prefix + "/x/site-packages/torch/distributed/distributed_c10d.py:2582: FutureWarning: "
        "`torch.distributed._all_gather_base` is a private function and will be deprecated. Please use "
        "`torch.distributed.all_gather_into_tensor` instead.",
        prefix + "  warnings.warn(",
        prefix + "/x/site-packages/torch/nn/parallel/distributed.py:1200: UserWarning: find_unused_parameters=True "
        "was specified in DDP constructor, but did not find any unused parameters",
        prefix + "  return Variable._execution_engine.run_backward(",
    ]
    inc = load_text(tmp_path, lines)
    assert len(inc.errors) == 2 and set(inc.errors["kind"]) == {"warning"}
    assert parsed(inc) == 4


def test_warnings_of_other_libraries_stay_unparsed(tmp_path):
    inc = load_text(
        tmp_path, ["/x/site-packages/transformers/trainer.py:12: UserWarning: something", "  warnings.warn("]
    )
    assert parsed(inc) == 0


def test_warning_without_its_source_line_takes_only_its_wrapped_tail(tmp_path):
    inc = load_text(tmp_path, FSDP[:2] + ["Epoch 3 done"])
    assert len(inc.errors) == 1 and parsed(inc) == 2


def test_deepspeed_launcher(tmp_path):
    # tests/data/wild/deepspeed-716-functional-launch-nccl-debug (deepspeed#716), with 2 hosts x 2 ranks (generated)
    h = "[2021-01-31 23:07:46,791] [INFO] "
    lines = [
        "[2021-01-31 23:07:46,345] [WARNING] [runner.py:117:fetch_hostfile] Unable to find hostfile, will proceed "
        "with training with local resources only.",
        "[2021-01-31 23:07:46,368] [INFO] [runner.py:355:main] cmd = /usr/bin/python3 -u -m deepspeed.launcher.launch "
        "--world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 --master_port=29500 train.py",
        h + "[launch.py:71:main] 0 NCCL_DEBUG INFO",
        h + "[launch.py:78:main] WORLD INFO DICT: {'node-a': [0, 1], 'node-b': [0, 1]}",
        h + "[launch.py:87:main] nnodes=2, num_local_procs=2, node_rank=0",
        h + "[launch.py:99:main] global_rank_mapping=defaultdict(<class 'list'>, {'node-a': [0, 1], 'node-b': [2, 3]})",
        h + "[launch.py:100:main] dist_world_size=4",
        h + "[launch.py:103:main] Setting CUDA_VISIBLE_DEVICES=0,1",
        "[2021-01-31 23:09:00,000] [INFO] [launch.py:320:sigkill_handler] Killing subprocess 4242",
        "[2021-01-31 23:09:00,000] [ERROR] [launch.py:326:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py', "
        "'--local_rank=1'] exits with return code = -9",
    ]
    inc = load_text(tmp_path, lines)
    assert parsed(inc) == len(lines)
    r = inc.ranks[["rank", "host", "local_rank", "world_size"]].values.tolist()
    assert r == [[0, "node-a", 0, 4], [1, "node-a", 1, 4], [2, "node-b", 0, 4], [3, "node-b", 1, 4]]
    ag = inc.errors[inc.errors["exit_code"].notna()].iloc[0]
    # the command is the LAST process DeepSpeed started, not the one that died: no local_rank
    assert (ag["kind"], ag["exit_code"], ag["signal"], ag["launched_last_local_rank"]) == ("agent", -9, "SIGKILL", 1)
    assert pd.isna(ag.get("local_rank"))
    assert inc.errors[inc.errors["pid"] == 4242]["kind"].tolist() == ["agent"]


def test_torchrun_elastic_start(tmp_path):
    lines = [
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:",
        "  entrypoint       : train.py",
        "  min_nodes        : 1",
        "  nproc_per_node   : 2",
        "  rdzv_backend     : static",
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:",
        "  restart_count=0",
        "  master_addr=127.0.0.1",
        "  group_rank=1",
        "  group_world_size=2",
        "  local_ranks=[0, 1]",
        "  role_ranks=[2, 3]",
        "  global_ranks=[2, 3]",
        "  role_world_sizes=[4, 4]",
        "  global_world_sizes=[4, 4]",
        "",
    ]
    inc = load_text(tmp_path, lines[:-1])
    assert parsed(inc) == len(lines) - 1
    assert inc.ranks[["rank", "local_rank", "world_size"]].values.tolist() == [[2, 0, 4], [3, 1, 4]]


def test_lightning_banner_and_world_size_on_ranks(tmp_path):
    # tests/data/wild/party-7-lightning-quoted-first-broadcast-timeout (party#7), lines 10-15, quoted as there
    lines = [
        "> Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/4",
        "> Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4",
        "> distributed_backend=nccl",
        "> All distributed processes registered. Starting with 4 processes",
    ]
    inc = load_text(tmp_path, lines)
    assert parsed(inc) == 4
    assert inc.ranks[["rank", "world_size"]].values.tolist() == [[1, 4], [2, 4]]


def test_nccl_init_world_size_reaches_the_ranks_frame():
    inc = _wild("awsk8stester-pr454-mpirun-nccl-init-chatter")
    assert set(inc.ranks["world_size"].dropna()) == {32}


#: c10d's warnings that prove the machinery ran, in the phrasings torch prints (generated: glog
#: header variants; the messages as torch 2.0-2.6 print them)
C10D_RUNNING = [
    "[W227 10:54:51.986111855 ProcessGroupNCCL.cpp:1374] Warning: WARNING: process group has NOT been destroyed before "
    "we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure "
    "that any pending NCCL operations have finished in this process. (function operator())",
    "[W Utils.hpp:135] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is deprecated; use "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function getCvarInt)",
    "[W Utils.hpp:164] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated; use TORCH_NCCL_BLOCKING_WAIT "
    "instead (function getCvarBool)",
    "[W207 22:21:42.712978449 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 2]  using GPU 2 to perform barrier as "
    "devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping "
    "is incorrect.",
    "[W reducer.cpp:1303] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any "
    "unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every "
    "iteration,  which can adversely affect performance. (function operator())",
    "UserWarning: Grad strides do not match bucket view strides. This may indicate grad was not created according to "
    "the gradient layout contract, or that the param's strides changed since DDP was constructed.  This is not an "
    "error, but may impair performance.",
]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("i", range(len(C10D_RUNNING)))
def test_c10d_running_warnings_are_evidence_not_an_all_clear(tmp_path, wrapper, i):
    wrap = WRAPPERS[wrapper]
    lines = [wrap(r, C10D_RUNNING[i]) for r in (0, 1)]
    inc = load_text(tmp_path, lines)
    assert set(inc.errors["kind"].astype(str)) == {"warning"} and set(inc.errors["source"]) == {"c10d"}
    if wrapper in RANKED:
        assert sorted(inc.errors["rank"].dropna().astype(int)) == [0, 1]
    d = dx.diagnose(inc)
    assert (d.verdict, d.all_clear_confidence) == ("no-failure", "low")
    # the same warnings beside a failure: the failure speaks
    failing = lines + [wrap(1, "RuntimeError: NCCL error: unhandled system error, NCCL version 2.21.5")]
    d = dx.diagnose(load_text(tmp_path, failing, name="failing.txt"))
    assert d.verdict not in ("no-failure", "no-evidence")


def test_similar_words_elsewhere_are_not_c10d_evidence(tmp_path):
    lines = [
        "Environment variable MY_VAR is deprecated; use OTHER_VAR instead",
        "we perform barrier checks on the devices",
        "grad strides look fine",
    ]
    inc = load_text(tmp_path, lines)
    assert inc.errors.empty and parsed(inc) == 0

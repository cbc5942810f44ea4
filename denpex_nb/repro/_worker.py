"""One rank of a reproducer run: ``python -m denpex_nb.repro._worker --scenario ID --variant V ...``.

Started by :mod:`denpex_nb.repro.launch` with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and
LOCAL_RANK in the environment (the same variables torchrun sets). It initialises the process
group with the collective timeout, switches on the tracer (``--trace-dir`` or
``$DENPEX_TRACE_DIR``) and the Flight Recorder dumper (``--fr-dir``), runs the scenario's rank
body and exits: 0 on success; on an exception it prints the traceback through torch's
excepthook (so lines carry ``[rankN]:`` as in real jobs), dumps the Flight Recorder and exits 1 without
running interpreter teardown (a broken gloo group can block in its destructor).
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _parse(argv):
    p = argparse.ArgumentParser(prog="denpex_nb.repro._worker")
    p.add_argument("--scenario", required=True)
    p.add_argument("--variant", choices=("broken", "fixed"), required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    p.add_argument("--debug", choices=("off", "info", "detail"), default="off")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--fr-dir", default=None)
    p.add_argument("--fr-stacks", action="store_true", help="include stack traces in the FR dump (slow)")
    p.add_argument("--trace-dir", default=None)
    p.add_argument("--hang", action="store_true", help="a rank that finishes stays alive (sleeps) instead of exiting")
    return p.parse_args(argv)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


#: how long ranks wait for each other to start (independent of the collective timeout)
RENDEZVOUS_TIMEOUT_S = 120.0


def main(argv=None) -> int:
    args = _parse(argv)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))

    from . import registry

    body = registry.get(args.scenario).body(args.variant)

    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from .. import trace
    from .context import RankContext
    from .flight_recorder import FlightRecorderDumper

    torch.manual_seed(1234 + rank)
    trace.enable(args.trace_dir)  # None -> $DENPEX_TRACE_DIR -> off
    dumper = None
    if args.fr_dir:
        dumper = FlightRecorderDumper(args.fr_dir, rank, stack_traces=args.fr_stacks)
        dumper.install_sigterm()

    device = "cpu"
    init_kwargs = {}
    if args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
        init_kwargs["device_id"] = torch.device(device)
    # Rendezvous and collectives get separate timeouts: the collective timeout is short on purpose
    # (a planted hang must end quickly), but on a loaded machine one rank may start seconds after
    # the others, and that must not fail the run before the scenario even begins.
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        is_master=rank == 0,
        timeout=timedelta(seconds=max(RENDEZVOUS_TIMEOUT_S, args.timeout)),
    )
    dist.init_process_group(
        args.backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=args.timeout),
        **init_kwargs,
    )
    ctx = RankContext(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        backend=args.backend,
        device=device,
        debug=args.debug,
        variant=args.variant,
        scenario=args.scenario,
    )
    ctx.log(
        f"rank {rank}/{world_size} pid {os.getpid()} ready: {args.scenario} ({args.variant}) "
        f"on {args.backend}, device {device}"
    )
    try:
        body(rank, world_size, ctx)
    except BaseException:
        exc_type, exc, tb = sys.exc_info()
        sys.excepthook(exc_type, exc, tb)  # the evidence first: a dump can be slow or interrupted
        _flush()
        if dumper is not None:
            dumper.dump("failure")
        os._exit(1)
    ctx.log(f"rank {rank} finished")
    if args.hang:
        # Hang mode: a rank that would leave stays alive, as a rank of a real job that moved on to
        # other work would: its peers then wait inside the collective it skipped (a hang until the
        # collective timeout) instead of failing at once on a closed connection.
        _flush()
        while True:
            time.sleep(3600)
    if dumper is not None:
        dumper.dump("exit")
    try:
        dist.destroy_process_group()
    finally:
        _flush()
        os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

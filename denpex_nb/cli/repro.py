"""``denpex-nb repro list | run | record``: thin handlers over :mod:`denpex_nb.repro`.

Bad input (unknown scenario, world size < 2, no torch, ``--backend nccl`` without GPUs) raises a
:class:`~denpex_nb.errors.DenpexError`, which :func:`denpex_nb.cli.main` prints as one line with
exit code 2.
"""

from __future__ import annotations


def list_scenarios(args) -> int:
    """``repro list``: each scenario's id and title, and what it teaches."""
    from ..repro import registry

    rows = registry.scenarios()
    width = max(len(k) for k in rows)
    for sc in rows.values():
        print(f"{sc.id:<{width}}  {sc.title}")
        print(f"{'':<{width}}  teaches: {sc.teaches}")
    return 0


def run(args) -> int:
    """``repro run``: run one scenario; exit 0 when the run behaved as the variant intends.

    A broken variant is *meant* to fail, so its exit code is 0 when at least one rank failed and
    1 when every rank exited 0 (the bug did not reproduce); a fixed variant exits 0 only when
    every rank did. Either way the per-rank outcome is printed.
    """
    from ..repro.launch import run as launch

    result = launch(
        args.scenario,
        fixed=args.fixed,
        world_size=args.world_size,
        backend=args.backend,
        debug=args.debug,
        flight_recorder=args.flight_recorder,
        trace=args.trace,
        timeout=args.timeout,
        out=args.out,
        fr_stack_traces=getattr(args, "fr_stacks", False),
    )
    print(result.summary())
    expected = result.manifest["expected"]
    print(
        f"  expected: {expected['class']}"
        + (f", op {expected['op']}, culprit rank(s) {expected['culprit_ranks']}" if expected.get("op") else "")
    )
    if args.fixed:
        return 0 if result.ok else 1
    return 1 if result.ok else 0


def record(args) -> int:
    """``repro record``: regenerate the recorded runs (default: every scenario, variant and mode at world sizes 2, 4)."""
    from ..repro.record import record_all

    options = {}
    if getattr(args, "world_sizes", None):
        options["world_sizes"] = tuple(args.world_sizes)
    if getattr(args, "scenarios", None):
        options["scenarios"] = list(args.scenarios)
    written = record_all(args.out, backend=args.backend, progress=True, **options)
    print(f"recorded {len(written)} runs under {args.out}")
    return 0

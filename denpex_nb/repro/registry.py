"""The scenario registry: one importable module per scenario under :mod:`denpex_nb.repro.scenarios`.

Why modules and not functions in a notebook: every rank is a fresh ``python -m`` process, so the
rank body must be importable by name. Scenario modules import torch only inside their functions,
so listing scenarios costs nothing and works without torch.

A scenario module defines ``ID``, ``TITLE``, ``TEACHES``, ``broken(rank, world_size, ctx)``,
``fixed(rank, world_size, ctx)`` and ``expected(variant, world_size, debug) -> dict`` (the
manifest's ``expected``: ``{"class", "op", "culprit_ranks", "seq": {"trace", "fr", "detail"}}``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from ..errors import UsageError

#: module names, in the order ``denpex-nb repro list`` shows them
SCENARIO_MODULES = (
    "allgather_shape_mismatch",
    "allreduce_shape_mismatch",
    "dtype_mismatch",
    "op_mismatch",
    "skipped_collective",
    "ddp_unused_parameters",
    "rank_crash",
    "syncbn_eval_single_rank",
)

VARIANTS = ("broken", "fixed")


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    teaches: str
    module: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)

    def body(self, variant: str) -> Callable:
        if variant not in VARIANTS:
            raise UsageError(f"unknown variant {variant!r}", fix=f"use one of {', '.join(VARIANTS)}")
        return getattr(self.load(), variant)

    def expected(self, variant: str, world_size: int, debug: str = "off") -> dict:
        return self.load().expected(variant, world_size, debug)


def _load_all() -> dict[str, Scenario]:
    out = {}
    for name in SCENARIO_MODULES:
        mod = importlib.import_module(f"denpex_nb.repro.scenarios.{name}")
        out[mod.ID] = Scenario(mod.ID, mod.TITLE, mod.TEACHES, mod.__name__)
    return out


_CACHE: dict[str, Scenario] = {}


def scenarios() -> dict[str, Scenario]:
    """Every registered scenario by id, in listing order."""
    if not _CACHE:
        _CACHE.update(_load_all())
    return dict(_CACHE)


def get(scenario_id: str) -> Scenario:
    """The scenario called ``scenario_id`` (underscores accepted), or a one-line UsageError."""
    known = scenarios()
    key = str(scenario_id).strip().replace("_", "-")
    if key not in known:
        raise UsageError(
            f"unknown scenario {scenario_id!r}", fix=f"pick one of: {', '.join(known)} (see 'denpex-nb repro list')"
        )
    return known[key]


# --- helpers for the scenario modules' expected() ------------------------------------------


def no_failure() -> dict:
    """``expected`` of every fixed variant."""
    return {"class": "no-failure", "op": None, "culprit_ranks": [], "seq": None}


def planted(
    cls: str,
    op: str | None,
    culprit_ranks,
    *,
    debug: str = "off",
    trace: int | None,
    fr: int | None,
    detail: int | None,
    **extra,
) -> dict:
    """``expected`` of a broken variant: the class, the planted op, the culprit ranks, the seq per kind.

    ``op`` is the planted collective: the one the culprit issued wrongly, or the one it failed to
    issue. ``seq`` holds the number each evidence kind shows for that collective (``trace``: the
    denpex_nb.trace per-pg counter from 1; ``fr``: Flight Recorder ``collective_seq_id``;
    ``detail``: the DETAIL fingerprint ``SequenceNumber``, 0-based); ``None`` where that kind
    cannot show it. Which kinds can show it depends on ``debug``, measured on torch 2.13 gloo:
    DETAIL fingerprints exist only under ``detail``; under ``detail`` the wrapper's check fails
    *before* the planted collective reaches the process group, so the Flight Recorder of the
    default group never records it (``fr`` is None there).
    """
    if debug != "detail":
        detail = None
    else:
        fr = None
    out = {
        "class": cls,
        "op": op,
        "culprit_ranks": sorted(int(r) for r in culprit_ranks),
        "seq": {"trace": trace, "fr": fr, "detail": detail},
    }
    out.update(extra)
    return out


def odd_ranks(values) -> list[int]:
    """Ranks whose value differs from the most common one (ties: rank 0's value is the reference)."""
    values = list(values)
    counts = {v: values.count(v) for v in values}
    best = max(counts.values())
    reference = next(v for v in values if counts[v] == best)
    return [r for r, v in enumerate(values) if v != reference]

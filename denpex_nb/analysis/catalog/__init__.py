"""The failure catalog: what each class means, why it happens per backend, and how to fix and confirm it.

>>> from denpex_nb.analysis import catalog
>>> catalog.get("shape-mismatch").fix["code"]            # doctest: +SKIP
>>> [e.id for e in catalog.all()]                        # doctest: +SKIP

Entries are plain data (:mod:`.entries`); ids are stable and used by the CLI, the JSON output and tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ...errors import UsageError
from .entries import ENTRIES

IDS = tuple(e["id"] for e in ENTRIES)


@dataclass(frozen=True)
class CatalogEntry:
    """One failure class. ``fingerprints`` are dicts with name, pattern, evidence, means."""

    id: str
    title: str
    category: str
    tags: tuple[str, ...]
    summary: str
    fingerprints: tuple[dict, ...]
    mechanism: dict
    root_cause: str
    fix: dict
    confirm: dict
    related: tuple[str, ...]
    affects: tuple[str, ...]
    #: less specific classes that name the same failure seen through less evidence (a crash seen
    #: only as a rank that stopped issuing collectives is a rank-desync); never a different failure
    broader: tuple[str, ...] = ()
    _compiled: tuple = field(default=(), repr=False, compare=False)

    def matches(self, text: str) -> list[str]:
        """Names of the fingerprints whose pattern occurs in ``text``."""
        return [fp["name"] for fp, rx in zip(self.fingerprints, self._compiled) if rx.search(text)]

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if not k.startswith("_")}

    def _repr_html_(self) -> str:
        from html import escape

        fix = escape(self.fix.get("text", ""))
        code = escape(self.fix.get("code", ""))
        return (
            f"<div class='denpex-catalog'><b>{escape(self.id)}</b>: {escape(self.title)}"
            f"<p>{escape(self.root_cause)}</p><p><b>Fix:</b> {fix}</p><pre>{code}</pre></div>"
        )


@lru_cache(maxsize=1)
def _load() -> dict[str, CatalogEntry]:
    out = {}
    for e in ENTRIES:
        compiled = tuple(re.compile(fp["pattern"]) for fp in e["fingerprints"])
        out[e["id"]] = CatalogEntry(
            id=e["id"],
            title=e["title"],
            category=e["category"],
            tags=tuple(e["tags"]),
            summary=e["summary"],
            fingerprints=tuple(e["fingerprints"]),
            mechanism=dict(e["mechanism"]),
            root_cause=e["root_cause"],
            fix=dict(e["fix"]),
            confirm=dict(e["confirm"]),
            related=tuple(e["related"]),
            affects=tuple(e["affects"]),
            broader=tuple(e.get("broader", ())),
            _compiled=compiled,
        )
    return out


def get(entry_id: str) -> CatalogEntry:
    """The entry for a stable id; an unknown id is a one-line :class:`UsageError` listing the valid ones."""
    try:
        return _load()[entry_id]
    except KeyError:
        raise UsageError(f"unknown catalog id {entry_id!r}", fix="use one of: " + ", ".join(IDS)) from None


def find(entry_id: str) -> CatalogEntry | None:
    """The entry for an id, or None when the catalog has none (for display code that must not fail)."""
    return _load().get(entry_id)


def all() -> list[CatalogEntry]:  # noqa: A001 - the brief's name for "every entry"
    """Every entry, in catalog order."""
    return list(_load().values())


def match(text: str) -> list[tuple[str, str]]:
    """(entry id, fingerprint name) for every fingerprint found in one log line."""
    return [(e.id, name) for e in _load().values() for name in e.matches(text)]

"""Cross-rank analysis: align events per (pg, seq_kind, seq), apply rules, return a Diagnosis."""
from __future__ import annotations

from .model import Diagnosis, Evidence, Finding, RankView

__all__ = ["diagnose", "Diagnosis", "Finding", "Evidence", "RankView"]


def diagnose(incident, **options) -> Diagnosis:
    """Placeholder until the analysis lands (being written now)."""
    raise NotImplementedError("diagnose is being implemented")

"""``explain.merge`` looks twins up by class and by a key per finding (a thousand divergences were a
million pairwise comparisons); it must pick the same twin as the plain pairwise scan over every
finding, whose rule (:func:`_same`) lives here, as the oracle, since merge no longer calls it.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from denpex_nb.analysis import explain
from denpex_nb.analysis.explain import _CONF, KIND_PREFERENCE, _op_family
from denpex_nb.analysis.model import Evidence, Finding


def _same(a: Finding, b: Finding) -> bool:
    """Two findings are one divergence: same class, not two cells of one counter, no different op
    families, no different culprit sets."""
    if a.class_id != b.class_id:
        return False
    if a.seq_kind == b.seq_kind and a.seq is not None and b.seq is not None:
        return False  # two cells of one counter are two divergences
    if a.op and b.op and _op_family(a.op) != _op_family(b.op):
        return False
    if a.culprit_ranks and b.culprit_ranks and set(a.culprit_ranks) != set(b.culprit_ranks):
        return False
    return True


def _plain_merge(findings: list[Finding]) -> list[Finding]:
    """The merge as it was written before the index: the first finding of ``out`` _same accepts."""
    out: list[Finding] = []
    for f in sorted(findings, key=lambda f: (KIND_PREFERENCE.get(f.seq_kind, 9), f.seq is None)):
        i = next((i for i, o in enumerate(out) if _same(o, f)), None)
        if i is None:
            out.append(f)
            continue
        twin = out[i]
        changes = dict(
            evidence=(twin.evidence + tuple(e for e in f.evidence if e not in twin.evidence))[:16],
            ranks={**f.ranks, **twin.ranks},
        )
        if not twin.culprit_ranks and f.culprit_ranks:
            changes.update(culprit_ranks=f.culprit_ranks, culprit_basis=f.culprit_basis)
        if twin.seq is None and f.seq is not None:
            changes.update(seq=f.seq, seq_kind=f.seq_kind, pg=f.pg)
        if twin.op is None:
            changes["op"] = f.op
        if _CONF[f.confidence] < _CONF[twin.confidence]:
            changes["confidence"] = f.confidence
        if f.t_wall is not None and (twin.t_wall is None or f.t_wall < twin.t_wall):
            changes["t_wall"] = f.t_wall
        out[i] = replace(twin, **changes)
    return out


finding = st.builds(
    Finding,
    class_id=st.sampled_from(["shape-mismatch", "rank-desync", "op-mismatch"]),
    summary=st.just("s"),
    confidence=st.sampled_from(["high", "medium", "low"]),
    seq=st.one_of(st.none(), st.integers(0, 3)),
    seq_kind=st.one_of(st.none(), st.sampled_from(["work", "detail", "fr", "trace"])),
    op=st.one_of(
        st.none(),
        st.just(""),
        st.sampled_from(["all_gather", "all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor"]),
    ),
    culprit_ranks=st.one_of(st.just(()), st.sets(st.integers(0, 3), max_size=2).map(tuple)),
    evidence=st.lists(
        st.builds(Evidence, file=st.just("f"), line=st.integers(1, 4), text=st.just("t")), max_size=2
    ).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(finding, max_size=25))
def test_merge_picks_the_twins_the_plain_scan_picks(findings):
    assert explain.merge(findings) == _plain_merge(findings)

"""Cross-rank analysis: align, build the per-rank state, apply the rules, return a Diagnosis.

>>> d = denpex_nb.diagnose(incident)      # doctest: +SKIP
>>> d.verdict, d.culprit_ranks, d.initiating_rank, d.rank_state

Steps: :func:`.align.align` finds every divergence in the events frame (vectorised);
:func:`.state.group_size` reads the group size from explicit evidence only and
:func:`.state.rank_state` says where each rank stopped; every ``find`` rule of :mod:`.rules`
turns one kind of evidence into findings, the ``explain`` rules of :mod:`.explain` let a crash,
SyncBatchNorm or DDP account for the divergences they cause, one divergence seen through several
counters becomes one finding, and findings are ordered by time and seq: the first is the verdict.

The verdict never says "nothing failed" without evidence: when a rank failed and no rule can say
how, the verdict is ``timeout-undetermined``; when nothing distributed could be read at all it is
``no-evidence``; ``no-failure`` needs parsed distributed evidence and no failure in it.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..human import fmt_ranks
from ..signals import LAYOUT_SIZE, PYTORCH_OBJECT
from ..vocab import IGNORED_EXCEPTION, ClassId, SeqKind, SignalFamily
from . import catalog
from . import explain as _explain  # noqa: F401 - registers the explain rules
from . import launchers as _launchers  # noqa: F401 - registers the launcher rule
from . import peers as _peers  # registers the peer-gone rule
from . import positions as _positions  # noqa: F401 - registers the stall-report and end-positions rules (last)
from . import rules as _rules
from . import signals as _signals
from .align import Alignment, align
from .initiator import initiating_rank
from .model import Diagnosis, Evidence, Finding, RankView
from .rules import Context, completed_without_them, undetermined_failure
from .state import group_size, rank_state

__all__ = ["diagnose", "Diagnosis", "Finding", "Evidence", "RankView", "catalog"]


def diagnose(incident, *, strict: bool = False) -> Diagnosis:
    """Say what went wrong, where, on which rank it started, how sure we are: a :class:`Diagnosis`.

    ``incident`` is an :class:`~denpex_nb.incident.Incident` (from :func:`denpex_nb.load`).
    Never raises on odd or contradictory evidence: it lowers confidence instead. Should one rule
    fail on input nobody foresaw, the others still run and a note names the failed rule
    (``strict=True`` raises instead, for tests).
    """
    diag = Diagnosis(
        ranks_seen=list(incident.ranks_seen),
        lines=incident.lines.as_dict(),
        notes=list(incident.notes),
        not_read=_not_read(incident),
    )

    def safely(stage, fn, fallback):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one odd input must not cost the whole diagnosis
            if strict:
                raise
            diag.notes.append(f"rule {stage!r} failed on this input and was skipped: {type(exc).__name__}: {exc}")
            return fallback

    # NCCL's remote-allocator thread failing on a stray connection while the job goes on: not the job's
    aside = safely("allocator noise", lambda: _signals.allocator_noise(incident), None)
    if aside is not None:
        incident, note = aside
        diag.notes.append(note)
    size = safely("group size", lambda: group_size(incident), None)
    state = safely("rank state", lambda: rank_state(incident, size), None)
    if state is None:
        state = pd.DataFrame(
            {"rank": pd.Series(dtype="Int64"), "present": pd.Series(dtype=bool), "failed": pd.Series(dtype=bool)}
        )
    diag.rank_state = state
    if size is not None:
        diag.group_size, diag.group_size_basis = size.size, size.basis
    diag.absent_ranks = [int(r) for r in state.loc[~state["present"], "rank"]] if len(state) else []
    if (
        _nothing_read(incident)
        and not _signals_speak(incident)
        and not _signals.activity(incident)
        and not (len(_signals.progress_lines(incident)) and _signals.shows_a_job_of_processes(incident))
    ):  # progress alone is an all-clear only for a job that shows it has several processes
        diag.findings = [_no_evidence(incident)]
        diag.notes.append("nothing distributed could be read: this is not an all-clear")
        if len(_signals.progress_lines(incident)):
            diag.notes.append(
                "progress lines were printed, but nothing shows a job of several processes (no rank, no node "
                "label, no per-rank file, no word of a distributed job): they say nothing of its collectives"
            )
        return diag

    al = safely("align", lambda: align(incident.events), Alignment([], {}, 0, 0, {}))
    ctx = Context(
        incident=incident,
        alignment=al,
        state=state,
        group_size=diag.group_size,
        texts=safely("evidence texts", lambda: _error_texts(incident.errors), {}),
    )
    findings: list[Finding] = []
    for r in _rules.RULES:
        if r.stage == "find":
            findings += _checked(r, safely(r.name, lambda r=r: r.fn(ctx), []), strict, diag)
    # findings that may only ever be alternatives stay out of the explain rules and the verdict
    side = [f for f in findings if f.alternative_only]
    findings = [f for f in findings if not f.alternative_only]
    for r in _rules.RULES:
        if r.stage == "explain":
            findings = _checked(
                r,
                safely(r.name, lambda r=r, found=findings: r.fn(ctx, found), findings),
                strict,
                diag,
                passthrough=True,
            )
    from .explain import merge, order

    findings = safely("merge", lambda: merge(findings), findings)
    if len(findings) == 1 and findings[0].rule == "end-positions" and findings[0].confidence == "low":
        # positions alone, nothing failed printed: could not tell a hang from a cut log; the
        # rank-desync candidate is an alternative (analysis/positions.py)
        if not safely("printed failure", lambda: _positions.printed_failure(ctx), True):
            side.append(findings[0])
            findings = [_positions.cannot_tell(findings[0])]
    if not findings:
        # no rule explains it: a peer that closed the connection, else the first failure signal's
        # family, else "something failed, cause undetermined"; never an all-clear over a failure
        # signal. Tracebacks cut before their exception line with nothing else failing are a crash
        # only as an alternative (the cut may have taken a collective's error: keyhole views of
        # recorded collective failures cut mid-traceback read as rank-crash otherwise), unless the
        # evidence around them decides (signals.cut_traceback_decides: a lone process, or another
        # rank that lost its connection to the one that raised). Ranks that stopped at different
        # places say more than "cause undetermined"; with neither, a connection a peer closed, when it
        # is the only failure shown, says that peer went away first (peers.sole_peer_gone)
        fallback = safely("undetermined failure", lambda: undetermined_failure(ctx), None)
        peer = safely("peer gone", lambda: _signals.peer_gone(ctx), [])
        sig = safely("failure signals", lambda: _signals.signal_finding(ctx, after=fallback), None)
        cut = safely("cut tracebacks", lambda: _signals.cut_tracebacks(ctx), None) if sig is None else None
        why = safely("cut tracebacks decide", lambda: _signals.cut_traceback_decides(ctx, cut), "") if cut else ""
        if why:  # a lone process, or one whose going away the others saw: a crash, the verdict
            cut = replace(cut, summary=f"{cut.summary} ({why})")
        # cut right after its store client failed to connect: the connection ended it, the crash an alternative
        conn = safely("connection then cut", lambda: _signals.connection_then_cut(ctx, cut), None) if cut else None
        chosen = peer[0] if peer else (sig or conn or (cut if why else None) or fallback or cut)
        if cut is not None and chosen is not cut:
            side.append(cut)
        # ranks that stopped at different places: more than "cause undetermined", an alternative
        # beside a failure whose family says more (analysis/positions.py)
        pos = safely("end positions", lambda: _positions.from_positions(ctx), None) if chosen is not None else None
        if pos is not None and chosen.class_id == ClassId.TIMEOUT_UNDETERMINED:
            chosen = pos
        elif pos is not None:
            side.append(pos)
        if not peer and sig is None and (chosen is None or chosen.class_id == ClassId.TIMEOUT_UNDETERMINED):
            # a closed connection is all the evidence shows: the peer went away first (analysis/peers.py)
            sole = safely("sole peer gone", lambda: _peers.sole_peer_gone(ctx, side), [])
            if sole:
                chosen = sole[0]
                side.extend(sole[1:])
        if chosen is not None:
            findings = [chosen]
    findings = safely("order", lambda: order(findings), findings)
    findings = safely("own process error", lambda: _signals.own_process_error(ctx, findings), findings)

    diag.findings = findings
    diag.alternatives = safely("alternatives", lambda: alternatives(findings, side), [])
    diag.initiating_rank = safely("initiating rank", lambda: initiating_rank(incident.errors, incident.ranks), None)
    first = findings[0] if findings else None
    if diag.initiating_rank is None and first is not None and first.culprit_basis.startswith("statement: "):
        if first.rule == "launcher-first-failure" and len(first.culprit_ranks) == 1:
            diag.initiating_rank = first.culprit_ranks[0]  # the launcher saw it fail first
    diag.all_clear_confidence = _all_clear_confidence(incident, state)
    if not findings:
        went_on = safely("progress", lambda: _signals.progress_note(incident), "")
        if went_on:  # the run went on up to its last progress line: no further (signals.PROGRESS)
            diag.notes.insert(0, went_on)
            if not len(incident.events):
                diag.all_clear_confidence = "low"
        warned = safely("warning signals", lambda: _signals.warnings_of_note(incident), "")
        if warned:  # an all-clear beside warnings of a failure family is a weak one
            diag.all_clear_confidence = "low"
            diag.notes.append(f"no failure was printed, but {warned}")
    for d in al.divergences:
        ended_early = safely("records ended early", lambda d=d: completed_without_them(d), "")
        if ended_early:
            diag.notes.append(ended_early)
    for (pg, kind), absent in al.missing_dumps.items():
        diag.notes.append(f"no {kind} evidence from {fmt_ranks(absent)} of pg {pg} (world size says they exist)")
    if diag.absent_ranks:
        diag.notes.append(
            f"ranks {diag.absent_ranks} exist ({diag.group_size_basis}) but nothing in the evidence speaks of them"
        )
    if al.n_events:
        diag.notes.append(f"aligned {al.n_events} collective events in {al.n_cells} (pg, counter, seq) cells")
    first = findings[0] if findings else None
    if first is not None and not first.culprit_ranks:
        diag.notes.append(f"culprit undetermined ({first.culprit_basis or 'undetermined'})")
    return diag


#: how many alternatives a diagnosis lists
MAX_ALTERNATIVES = 4


def alternatives(findings: list[Finding], side: list[Finding]) -> list[Finding]:
    """The other classes the evidence is consistent with: the best finding of each class other than
    the verdict's (findings after the verdict, then those that may only be alternatives), a later
    divergence that is a consequence of an earlier one left out (it is not another explanation)."""
    verdict = findings[0].class_id if findings else ClassId.NO_FAILURE
    seen = {verdict}
    out = []
    for f in list(findings[1:]) + list(side):
        if f.class_id in seen or f.consequence_of:
            continue
        seen.add(f.class_id)
        out.append(f)
    return out[:MAX_ALTERNATIVES]


def _checked(r, produced: list[Finding], strict: bool, diag: Diagnosis, passthrough: bool = False) -> list[Finding]:
    """A rule may only emit the classes it declared (explain rules pass other findings through)."""
    ok = []
    for f in produced:
        if f.class_id in r.emits or (passthrough and f.rule != r.name):
            ok.append(f)
            continue
        if strict:
            raise ValueError(f"rule {r.name!r} emitted {f.class_id!r}, not one of its declared {r.emits}")
        diag.notes.append(f"rule {r.name!r} emitted an undeclared class {f.class_id!r}; dropped")
    return ok


def _nothing_read(incident) -> bool:
    """True when no reader recognised anything distributed: no line parsed, no collective, no error,
    no rank record (a parsed NCCL INFO line is evidence that the job ran, if nothing else). An
    exception Python ignored (``Exception ignored in: ...`` and its traceback) is read, but it is
    nothing distributed: its lines and its row do not count."""
    errors = incident.errors.query("kind != 'load_error'")
    ignored = (
        errors[errors["warning_category"].astype(object) == IGNORED_EXCEPTION]
        if len(errors) and "warning_category" in errors
        else errors.iloc[:0]
    )
    n = ignored.get("n_traceback_lines", pd.Series(1, index=ignored.index))
    span = int(pd.to_numeric(n, errors="coerce").fillna(1).sum()) if len(ignored) else 0
    return (
        incident.lines.parsed <= span
        and len(incident.events) == 0
        and len(errors) == len(ignored)
        and len(incident.progress) == 0
        and not _ranks_say_anything(incident.ranks)
    )


def _signals_speak(incident) -> bool:
    """A line no reader parsed signalled a failure of a distributed kind, or of a known rank, or of
    the process itself (memory, device, a crash: a signal, a kill, an abort): that is evidence of a
    failure, not "nothing read"."""
    if _signals.unrecovered_connections(incident) is not None:
        return True  # a connection retried to the end of the log: a failure to connect, not "nothing read"
    fs = _signals.failure_signals(incident)
    if not len(fs):
        # a rank left waiting for the others at init: a hang, not "nothing read"
        return _signals.unjoined_waits(incident) is not None
    fam = fs["family"].astype(object)
    known = _signals.DISTRIBUTED_FAMILIES | _signals.OWN_FAMILIES | {SignalFamily.EXIT}
    if fam.isin(list(known)).any() or fs["rank"].notna().any():
        return True
    # a failure on a line that shows a PyTorch process's own objects (``torch.Size([0])``): that
    # process failed (its own error, not a collective's), which is evidence, not alien input; so is a
    # parallel layout that does not fit the job (a world size, parallel degrees: a distributed job's)
    text = fs["text"].astype(str)
    return bool(text.str.contains(PYTORCH_OBJECT, regex=True).any() or text.str.contains(LAYOUT_SIZE).any())


def _ranks_say_anything(ranks) -> bool:
    """A ranks row that only names a rank (from a ``[rankN]:`` prefix on unread lines) is no evidence."""
    if ranks is None or not len(ranks):
        return False
    cols = [
        c
        for c in (
            "host",
            "pid",
            "exit_code",
            "signal",
            "first_error_t",
            "last_seq_enqueued",
            "last_seq_completed",
            "world_size",
        )
        if c in ranks.columns
    ]
    return bool(cols) and bool(ranks[cols].notna().to_numpy().any())


def _no_evidence(incident) -> Finding:
    from .catalog.entries import COLLECT_MORE

    src = incident.sources
    lines = incident.lines
    read = (
        ", ".join(f"{f} ({fmt})" for f, fmt in zip(src["file"].astype(str), src["format"].astype(object)))
        if len(src)
        else "no input"
    )
    loads = incident.errors.query("kind == 'load_error'") if len(incident.errors) else incident.errors
    not_read = f"{lines.unparsed} of {lines.total} lines matched no reader"
    if len(loads):
        # each message is "<path>: <reason>": a long path is cut from its front, never the reason
        not_read += "; could not read: " + "; ".join(
            m if len(m) <= 160 else "..." + m[-157:] for m in loads["message"].head(5).astype(str)
        )
    return Finding(
        class_id=ClassId.NO_EVIDENCE,
        confidence="medium",
        rule=ClassId.NO_EVIDENCE,
        culprit_basis="undetermined: nothing distributed was read",
        summary=(
            f"Nothing distributed could be read: no collective, no distributed error, no launcher "
            f"record. Read: {read[:400]}. Not read: {not_read}. Collect: every rank's stdout and "
            f"stderr, and {COLLECT_MORE[0].lower() + COLLECT_MORE[1:]}"
        ),
    )


def _all_clear_confidence(incident, state: pd.DataFrame) -> str:
    """A no-failure verdict is high only when every known rank left a complete record that ended well."""
    if not len(state) or not state["present"].all():
        return "low"
    complete = {"trace", "fr_pickle", "fr_json", SeqKind.FR}
    full = all(bool(set(s) & complete) for s in state["sources"])
    exited = state["exit_code"].notna().all() and (state["exit_code"] == 0).all()
    if full and exited:
        return "high"
    return "medium" if len(incident.events) else "low"


def _error_texts(errors: pd.DataFrame) -> dict:
    if errors is None or errors.empty:
        return {}
    f = errors["file"].astype(object)
    ln = errors["line"]
    return {
        (str(a), int(b)): str(m)[:500]
        for a, b, m in zip(f, ln, errors["message"])
        if pd.notna(a) and pd.notna(b) and pd.notna(m)
    }


def _not_read(incident) -> list[dict[str, str]]:
    """The inputs nothing could be read from (an error and no line, no row): each with its problem."""
    src = incident.sources
    if not len(src) or "error" not in src.columns:
        return []
    bad = src[src["error"].notna() & (src["lines_total"].fillna(0) == 0)]
    return [{"file": str(f), "problem": str(e)} for f, e in zip(bad["file"], bad["error"])]

"""Turn aligned divergences and error rows into :class:`Finding` objects tied to catalog ids.

Two sources of findings:

* :func:`from_divergences` — cross-rank comparison of collective events (trace, Flight Recorder,
  watchdog lines, DETAIL fingerprints). The culprit is the minority side by majority vote; a tie
  leaves it undetermined (``[]``), never invented.
* :func:`from_errors` — text-only evidence that names a class without aligned events:
  monitoredBarrier, desync reports, gloo ``X vs Y`` aborts, DDP reducer errors, crashes, NCCL
  errors, torchfrtrace output, and plain timeouts (``timeout-undetermined``).
"""
from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from .align import Divergence
from .model import Evidence, Finding, RankView

MAX_EVIDENCE = 8

#: exception texts that are collective failures (victims or detectors), not a rank's own crash
_DISTRIBUTED = re.compile(
    r"Detected mismatch between collectives|monitoredBarrier|gloo|NCCL|nccl|Connection (reset|closed)|"
    r"Timed out|timed out|ProcessGroup|DistBackendError|DistNetworkError|DistStoreError|TCPStore|Socket|"
    r"collective|[Ww]atchdog|Expected to have finished reduction|did not receive grad|marked as ready|"
    r"got signal|SignalException|ChildFailedError|ProcessRaisedException|ProcessExitedException|"
    r"Broken pipe|EnforceNotMet|invalid tensor size|distributed", re.S)
_CRASH_SIGNALS = {"SIGSEGV", "SIGKILL", "SIGBUS", "SIGILL", "SIGFPE"}
_VICTIM_KINDS = {"watchdog_timeout", "watchdog_status", "watchdog_abort", "heartbeat", "gloo_timeout",
                 "gloo_peer_gone"}


def is_crash_error(kind: str, message: str | None, signal: str | None = None) -> bool:
    """True for a rank's own failure that is not a collective error: an exception, OOM, a kill."""
    message = None if message is None or pd.isna(message) else str(message)
    signal = None if signal is None or pd.isna(signal) else str(signal)
    if kind == "oom":
        return True
    if kind == "exception":
        return bool(message) and not _DISTRIBUTED.search(str(message))
    if kind in ("signal", "child_failed", "agent"):
        return signal in _CRASH_SIGNALS
    return False


# --- cross-rank divergences -------------------------------------------------------------------

def minority(sig: dict[int, object]) -> list[int]:
    """Ranks outside the strict majority value; [] when there is no strict majority (a tie)."""
    sig = {r: v for r, v in sig.items() if v is not None and not (isinstance(v, float) and pd.isna(v))}
    counts = Counter(sig.values()).most_common()
    if len(counts) < 2 or counts[0][1] == counts[1][1]:
        return []
    majority = counts[0][0]
    return sorted(r for r, v in sig.items() if v != majority)


def _shapes(v) -> list[list[int]] | None:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return None
    try:
        return [list(map(int, s)) for s in v]
    except TypeError:
        return None


def _s(v) -> str | None:
    return None if v is None or (not isinstance(v, (list, tuple)) and pd.isna(v)) else str(v)


def _i(v) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _view(row) -> RankView:
    dt = _s(row.get("dtype"))
    state = _s(row.get("state"))
    if row.get("_done") and state != "completed":
        state = "completed"
    return RankView(op=_s(row.get("op")), seq=_i(row.get("seq")), shapes=_shapes(row.get("in_shapes")),
                    dtypes=[dt] if dt else None, state=state)


def _evidence_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Evidence lines: the odd ranks first (rows whose size/op/dtype differ from the most common)."""
    if len(rows) <= MAX_EVIDENCE:
        return rows
    rows = rows.copy()
    odd = pd.Series(False, index=rows.index)
    for col in ("op", "_size", "dtype"):
        if col in rows:
            v = rows[col].astype(object)
            mode = v.mode(dropna=True)
            if len(mode):
                odd |= v.notna() & (v != mode.iloc[0])
    return pd.concat([rows[odd], rows[~odd]]).head(MAX_EVIDENCE)


def _describe(row) -> str:
    sh = _shapes(row.get("in_shapes"))
    parts = [f"rank {_i(row.get('rank'))}", str(_s(row.get("op")) or "?"), f"{row.get('seq_kind')} seq {_i(row.get('seq'))}"]
    if sh is not None:
        parts.append(f"in={sh}")
    elif _i(row.get("numel_in")) is not None:
        parts.append(f"numel_in={_i(row.get('numel_in'))}")
    if _s(row.get("dtype")):
        parts.append(str(row.get("dtype")))
    return " ".join(parts)


def _evidence(rows: pd.DataFrame, texts: dict, culprits=()) -> list[Evidence]:
    if culprits:
        is_c = rows["rank"].isin(list(culprits)).to_numpy(bool, na_value=False)
        rows = pd.concat([rows[is_c], rows[~is_c]])
    out = []
    for row in _evidence_rows(rows).to_dict("records"):
        file, line = _s(row.get("file")), _i(row.get("line"))
        if file is None:
            continue
        text = texts.get((file, line)) or _describe(row)
        out.append(Evidence(file=file, line=line or 0, text=text, rank=_i(row.get("rank"))))
    return out


def _fmt_ranks(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def from_divergences(divs: list[Divergence], texts: dict) -> list[Finding]:
    """One finding per divergence (ranks present: their views; ranks missing: absent)."""
    findings = []
    for d in divs:
        rows = d.rows
        by_rank = {int(row["rank"]): row for row in rows.to_dict("records")}
        views = {r: _view(row) for r, row in by_rank.items()}
        ops = {r: views[r].op for r in views}
        majority_op = Counter(ops.values()).most_common(1)[0][0] if ops else None
        where = f"{d.seq_kind} seq {d.seq}" + (f" of pg {d.pg}" if d.pg not in (None, "") else "")
        n = len(by_rank)
        if d.kind == "op":
            culprits = minority(ops)
            cls = "op-mismatch"
            desc = ", ".join(f"{_fmt_ranks(rs)}: {op}" for op, rs in _group(ops).items())
            summary = f"Ranks called different collectives at {where}: {desc}."
        elif d.kind == "dtype":
            dts = {r: (v.dtypes or [None])[0] for r, v in views.items()}
            culprits = minority(dts)
            cls = "dtype-mismatch"
            desc = ", ".join(f"{_fmt_ranks(rs)}: {dt}" for dt, rs in _group(dts).items())
            summary = f"{majority_op} at {where} got different dtypes: {desc}."
        elif d.kind == "size":
            sizes = {r: row.get("_size") for r, row in by_rank.items()}
            culprits = minority(sizes)
            cls = "shape-mismatch"
            desc = ", ".join(f"{_fmt_ranks(rs)}: {_shape_text(views[rs[0]], by_rank[rs[0]])}"
                             for _, rs in _group(sizes).items())
            summary = f"{majority_op} at {where} got different sizes: {desc}."
        elif d.kind == "shape":
            shapes = {r: None if v.shapes is None else tuple(map(tuple, v.shapes)) for r, v in views.items()}
            culprits = minority(shapes)
            cls = "shape-mismatch"
            desc = ", ".join(f"{_fmt_ranks(rs)}: {[list(t) for t in sh] if sh else sh}"
                             for sh, rs in _group(shapes).items())
            summary = (f"{majority_op} at {where} got tensors of different shapes with the same number of "
                       f"elements: {desc}. It completes on every backend, but elements are combined by their "
                       f"flat position, so the result is silently wrong unless the reshape is intended.")
        elif d.kind == "local-size":
            bad = sorted(r for r, row in by_rank.items() if row.get("_local_bad"))
            culprits = bad if len(bad) < n else []
            cls = "shape-mismatch"
            summary = (f"{majority_op} at {where}: on {_fmt_ranks(bad)} the output size is not the input size "
                       f"times the group size.")
        else:  # missing
            extra = len(d.present) < len(d.missing)
            culprits = sorted(d.present) if extra else sorted(d.missing)
            cls = "rank-desync"
            for r in d.missing:
                views[r] = RankView(op=None, seq=d.lag.get(r), state="absent")
            lag_txt = ", ".join(f"rank {r} last at seq {d.lag.get(r)}" for r in sorted(d.missing))
            if extra:
                summary = (f"{_fmt_ranks(d.present)} issued {majority_op} at {where}, which the other "
                           f"{len(d.missing)} ranks never called ({lag_txt}): an extra collective.")
            else:
                summary = (f"{_fmt_ranks(d.missing)} never reached {where} ({majority_op}, issued by "
                           f"{_fmt_ranks(d.present)}); {lag_txt}.")
        op = majority_op
        if d.kind == "op":
            culprit_ops = {ops[r] for r in culprits}
            op = culprit_ops.pop() if len(culprit_ops) == 1 else None   # a tie names no op
        conf = "high" if (culprits or d.kind == "missing") else "medium"
        if d.kind == "shape":      # nothing failed, and a deliberate reshape is possible
            conf = "medium" if culprits else "low"
        findings.append(Finding(class_id=cls, summary=summary, confidence=conf, pg=d.pg, seq=d.seq,
                                seq_kind=d.seq_kind, op=op, culprit_ranks=culprits, ranks=views,
                                evidence=_evidence(rows, texts, culprits), t_wall=d.t_wall))
    return findings


def _group(sig: dict) -> dict:
    out: dict = {}
    for r, v in sorted(sig.items()):
        out.setdefault(v, []).append(r)
    return out


def _shape_text(view: RankView, row) -> str:
    if view.shapes is not None:
        return str(view.shapes) + (f" {view.dtypes[0]}" if view.dtypes else "")
    n = _i(row.get("numel_in"))
    return f"numel {n}" if n is not None else "size unknown"


# --- text-only evidence -----------------------------------------------------------------------

_ENFORCE = re.compile(r"(\d+) vs (\d+)")
_FR_CLASS = (("COLLECTIVE_TYPE_MISMATCH", "op-mismatch"), ("COLLECTIVE_DTYPE_MISMATCH", "dtype-mismatch"),
             ("SIZE_OR_SYNTAX_MISMATCH", "shape-mismatch"), ("Not all ranks joining", "rank-desync"))
_DETAIL_CLASS = (("Op type:", "op-mismatch"), ("dtypes:", "dtype-mismatch"), ("shapes:", "shape-mismatch"),
                 ("Sequence number:", "rank-desync"))


def _err_evidence(rows: pd.DataFrame) -> list[Evidence]:
    out = []
    for _, e in rows.head(MAX_EVIDENCE).iterrows():
        out.append(Evidence(file=_s(e.get("file")) or "?", line=_i(e.get("line")) or 0,
                            text=str(e.get("message") or "")[:500], rank=_i(e.get("rank"))))
    return out


def _tmin(rows: pd.DataFrame):
    t = rows["t_wall"].dropna()
    return t.min() if len(t) else None


def _related(rows: pd.DataFrame) -> list[int]:
    out: set[int] = set()
    for v in rows["related_ranks"].dropna():
        try:
            out.update(int(x) for x in v)
        except TypeError:
            continue
    return sorted(out)


def from_errors(errors: pd.DataFrame, ranks_seen: list[int], have_detail_events: bool) -> list[Finding]:
    """Findings that text evidence alone supports (see the module docstring)."""
    if errors is None or errors.empty:
        return []
    errs = errors
    kind = errs["kind"].astype(str)
    msg = errs["message"].astype(str)
    found: list[Finding] = []

    def add(cls, summary, rows, conf="medium", culprits=(), op=None, seq=None, seq_kind=None, pg=None):
        found.append(Finding(class_id=cls, summary=summary, confidence=conf, culprit_ranks=sorted(set(culprits)),
                             op=op, seq=seq, seq_kind=seq_kind, pg=pg, evidence=_err_evidence(rows),
                             t_wall=_tmin(rows)))

    mb = errs[kind == "monitored_barrier"]
    if len(mb):
        missing = _related(mb)
        add("rank-desync", f"{_fmt_ranks(missing) if missing else 'Some ranks'} failed to pass monitoredBarrier "
            "(DETAIL): they never reached the collective the others were in.", mb, "high", missing)

    ds = errs[kind == "desync_report"]
    if len(ds):
        lag = _related(ds)
        add("rank-desync", f"The desync report names {_fmt_ranks(lag) if lag else 'no rank'} as lagging.", ds,
            "high" if lag else "low", lag)

    ras = errs[kind == "nccl_ras"]
    if len(ras):
        add("rank-desync", "NCCL RAS: communicator ranks have different operation counts.", ras, "medium",
            _related(ras))

    if not have_detail_events:
        dm = errs[kind == "detail_mismatch"]
        for cls in {c for m in dm["message"].astype(str) for key, c in _DETAIL_CLASS if key in m}:
            rows = dm[dm["message"].astype(str).str.contains(
                next(k for k, c in _DETAIL_CLASS if c == cls), regex=False)]
            add(cls, "DETAIL fingerprint check: " + str(rows["message"].iloc[0]).split("aspects:")[-1].strip(),
                rows, "medium", op=_s(rows["op"].dropna().iloc[0]) if rows["op"].notna().any() else None)

    fr = errs[kind == "fr_finding"]
    for cls in {c for m in fr["message"].astype(str) for key, c in _FR_CLASS if key in m}:
        key = next(k for k, c in _FR_CLASS if c == cls)
        rows = fr[fr["message"].astype(str).str.contains(key, regex=False)]
        seq = rows["seq"].dropna()
        add(cls, "torchfrtrace reported: " + str(rows["message"].iloc[0])[:200], rows, "medium", _related(rows),
            op=_s(rows["op"].dropna().iloc[0]) if rows["op"].notna().any() else None,
            seq=int(seq.iloc[0]) if len(seq) else None, seq_kind="fr" if len(seq) else None)

    en = errs[kind == "gloo_enforce"]
    if len(en):
        m = _ENFORCE.search(str(en["message"].iloc[0]))
        sizes = f" ({m.group(1)} bytes sent, {m.group(2)} expected)" if m else ""
        aborted = sorted(int(r) for r in en["rank"].dropna().unique())
        add("shape-mismatch", f"gloo aborted {_fmt_ranks(aborted) if aborted else 'a rank'}: a peer sent more "
            f"bytes than its buffer holds{sizes}. The ranks' tensor sizes differ; whether by shape or by dtype "
            "is undetermined from this evidence, and the aborting rank is not necessarily the culprit.",
            en, "medium")

    inv = errs[kind == "gloo_invalid_size"]
    if len(inv):
        add("shape-mismatch", "gloo rejected an output list whose tensors differ in size from the input: "
            "the ranks' shapes differ (uneven all_gather). " + str(inv["message"].iloc[0])[:200], inv, "medium",
            op=_s(inv["op"].dropna().iloc[0]) if inv["op"].notna().any() else None)

    ddp = errs[(kind == "ddp_unused_parameters") | ((kind == "ddp_error") & msg.str.contains(
        "receive grad|finished reduction|marked as ready", regex=True))]
    if len(ddp):
        rep = sorted(int(r) for r in ddp["rank"].dropna().unique())
        culprits = rep if 0 < len(rep) < len(ranks_seen) else []
        add("unused-parameters", f"DDP reducer on {_fmt_ranks(rep) if rep else 'some rank'}: parameters did not "
            "receive gradients (unused parameters / data-dependent control flow).", ddp, "high", culprits)

    crash = errs[[is_crash_error(k, m, sg) for k, m, sg in
                  zip(kind, errs["message"], errs["signal"].astype(object))]]
    if len(crash):
        crashed = sorted(int(r) for r in crash["rank"].dropna().unique())
        minority_ = bool(crashed) and len(crashed) * 2 <= len(ranks_seen) and len(crashed) < len(ranks_seen)
        first = crash.sort_values("t_wall", na_position="last").iloc[0]
        who = _fmt_ranks(crashed) if crashed else "A rank"
        add("rank-crash", f"{who} failed on {'its' if len(crashed) == 1 else 'their'} own "
            f"(not in a collective): {str(first['message'])[:200]}"
            + ("" if minority_ else "; every rank crashed, so no single culprit"),
            crash, "high" if minority_ else "medium", crashed if minority_ else [])

    nc = errs[kind.isin(["nccl_error", "nccl_warn"]) & ~msg.str.contains("remote process exited", regex=False)]
    if len(nc):
        rep = sorted(int(r) for r in nc["rank"].dropna().unique())
        add("nccl-error", "NCCL reported an error of its own: " + str(nc["message"].iloc[0])[:200], nc, "medium",
            rep if 0 < len(rep) < len(ranks_seen) else [])
    return found


def timeout_finding(errors: pd.DataFrame) -> Finding | None:
    """``timeout-undetermined`` when collectives failed (timeouts, peers gone) and nothing else was found."""
    if errors is None or errors.empty:
        return None
    victims = errors[errors["kind"].astype(str).isin(_VICTIM_KINDS)]
    if victims.empty:
        return None
    ranks = sorted(int(r) for r in victims["rank"].dropna().unique())
    kinds = victims["kind"].astype(str).value_counts()
    what = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in kinds.items())
    ops = victims["op"].dropna()
    seqs = victims["seq"].dropna()
    from .catalog.entries import COLLECT_MORE
    return Finding(
        class_id="timeout-undetermined",
        summary=(f"Collectives failed on {_fmt_ranks(ranks) if ranks else 'the ranks'} ({what}), but no "
                 f"divergence is visible in this evidence. Collect next: {COLLECT_MORE}"),
        confidence="low", op=_s(ops.iloc[0]) if len(ops) else None,
        seq=int(seqs.iloc[0]) if len(seqs) and victims["seq"].nunique() == 1 else None,
        seq_kind=_s(victims["seq_kind"].dropna().iloc[0]) if len(seqs) and victims["seq"].nunique() == 1 else None,
        evidence=_err_evidence(victims), t_wall=_tmin(victims))


def from_progress(progress: pd.DataFrame, aligned: set) -> list[Finding]:
    """Laggards from progress counters (watchdog status lines) of a counter no event shows.

    Only counters without any aligned events are used: Flight Recorder ``pg_status`` and trace
    progress repeat what their events show (and DETAIL's helper group legitimately counts unevenly).

    Ranks whose last enqueued seq is lowest never issued what the others did: they are the
    culprits of a desync (by majority: if the laggards are the many, the few ahead made extra calls).
    """
    if progress is None or progress.empty:
        return []
    p = progress[progress["rank"].notna() & progress["last_enqueued"].notna()]
    out = []
    for (pg, kind), rows in p.groupby([p["pg"].astype(object), p["seq_kind"].astype(object)], dropna=False, sort=False):
        if str(kind) in {k for _, k in aligned}:
            continue
        last = rows.groupby(rows["rank"].astype(int))["last_enqueued"].max()
        if len(last) < 2 or last.nunique() < 2:
            continue
        lo = int(last.min())
        behind = sorted(int(r) for r in last[last == lo].index)
        ahead = sorted(int(r) for r in last[last > lo].index)
        culprits = ahead if len(ahead) < len(behind) else behind
        summary = (f"Progress counters disagree in pg {pg}: {_fmt_ranks(behind)} last enqueued seq {lo}, "
                   f"{_fmt_ranks(ahead)} went further (up to {int(last.max())}).")
        ev_rows = rows[rows["rank"].astype(int).isin(behind + ahead)].head(MAX_EVIDENCE)
        evidence = [Evidence(file=_s(r.get("file")) or "?", line=_i(r.get("line")) or 0,
                             text=f"rank {_i(r.get('rank'))}: last enqueued {_i(r.get('last_enqueued'))}, "
                                  f"last completed {_i(r.get('last_completed'))}", rank=_i(r.get("rank")))
                    for r in ev_rows.to_dict("records")]
        out.append(Finding(class_id="rank-desync", summary=summary, confidence="medium", pg=None if pd.isna(pg) else str(pg),
                           seq=lo + 1, seq_kind=str(kind), culprit_ranks=culprits, evidence=evidence))
    return out

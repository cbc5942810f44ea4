"""What each kind of evidence shows in a lesson: DETAIL's check, the Flight Recorder, NCCL.

Why a module of its own: each view explains what the learner sees *and what they do not*:
DETAIL's fingerprint all_gathers crowd the Flight Recorder of a DETAIL run and hide the planted
collective, which never reaches the process group there; NCCL evidence comes from a recorded GPU
run, else a real log of the same failure from the public-thread corpus (linked to its thread),
and only else from an illustrative log that says so in its first line.
"""

from __future__ import annotations

import dataclasses
import json
import re
from html import escape
from pathlib import Path

import pandas as pd

from ..human import fmt_ranks, rank_ranges
from ..report import HTML
from ..vocab import ErrorKind, SeqKind
from .lessons import DATA_DIR, Lesson, sequences_frame

#: the errors DETAIL mode raises itself
DETAIL_KINDS = (ErrorKind.DETAIL_MISMATCH, ErrorKind.MONITORED_BARRIER)

#: the public-thread corpus (a source checkout only; an installed package has none)
WILD_DIR = DATA_DIR.parent / "tests" / "data" / "wild"
BLIND_RESULTS = DATA_DIR.parent / "benchmarks" / "results" / "blind"

#: per scenario, the corpus case whose log shows the same failure on a GPU (NCCL) job, and why
#: it is the same failure. Only cases outside a blind batch, or of a batch already scored.
WILD_CASES = {
    "allgather-shape-mismatch": (
        "phi3vision-41-mixed-modality-zero3-allgather-shape",
        "ranks all-gather tensors of different sizes (256 vs 2048 elements) at the same sequence number",
    ),
    "allreduce-shape-mismatch": (
        "deepspeed-7044-zero2-allreduce-fingerprint-shape",
        "ranks all-reduce gradient buckets of different sizes at the same sequence number",
    ),
    "op-mismatch": (
        "speechbrain-2401-ckpt-broadcast-vs-backward-allreduce",
        "rank 0 alone enters a checkpoint path and broadcasts while rank 1 all-reduces",
    ),
    "skipped-collective": (
        "pytorch-152623-desync-report-rank7",
        "one rank never joins a collective the others went on to run",
    ),
    "ddp-unused-parameters": (
        "mmpose-3111-ddp-unused-parameters-rank2",
        "DDP on one rank waits for gradients of parameters that rank did not use",
    ),
    "rank-crash": (
        "msswift-6301-zero3-multinode-oom-rank11",
        "one rank raises (a CUDA out-of-memory error) and the launcher stops its peers",
    ),
    "dtype-mismatch": (
        "nccl-147-grep-prefixed-broadcast-count-differs-rank0",
        "ranks enter the same NCCL collective (opCount 0) with different datatypes: NCCL's datatype 6 "
        "(float16) on rank 0, 4 (int64) on the others. Their element counts differ as well, so this is a "
        "dtype-and-size mismatch rather than a pure dtype one; NCCL checks neither and the job hangs",
    ),
    "syncbn-eval-single-rank": (
        "horovod-2241-syncbn-allgather-stalled-ranks",
        "only some ranks run SyncBatchNorm's statistics all-gathers, so the others never join them. The "
        "job used Horovod on NCCL 2.7, not torch.distributed: the warning comes from Horovod's stall "
        "inspector, because NCCL itself prints nothing while it waits",
    ),
}

#: per scenario, what the NCCL side promises, as maintainers stated it in public threads: (text, url).
#: Shown under the corpus log, so a learner sees both a real log and the rule behind it.
NCCL_RULES = {
    "dtype-mismatch": (
        (
            "NCCL's user guide requires every rank to call a collective with the same count and the "
            "same datatype; anything else is undefined behaviour: a hang, a crash or silently "
            "corrupted data. NCCL does not compare dtypes across ranks (that would cost communication), "
            "which is why PyTorch's maintainers point to TORCH_DISTRIBUTED_DEBUG=DETAIL for the check.",
            "https://github.com/pytorch/pytorch/issues/150248",
        ),
    ),
    "syncbn-eval-single-rank": (
        (
            "SyncBatchNorm synchronises, and so waits, across every rank of its process group: every "
            "rank must call it the same number of times (a PyTorch maintainer's answer to a SyncBN hang).",
            "https://github.com/pytorch/pytorch/issues/44957",
        ),
        (
            "SyncBatchNorm kept synchronising in eval mode, which hung validation loops run on some "
            "ranks only; PyTorch's maintainers called that a bug.",
            "https://github.com/pytorch/pytorch/issues/48988",
        ),
    ),
}


# --- DETAIL ---------------------------------------------------------------------------------------


def detail_errors(lesson: Lesson) -> pd.DataFrame:
    """The errors DETAIL mode raised in a run (fingerprint mismatch, monitoredBarrier)."""
    err = lesson.incident.errors
    if err.empty:
        return err
    return err[err["kind"].astype("object").isin(DETAIL_KINDS)]


def detail_view(lesson: Lesson) -> HTML:
    """What ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` reported, one line per distinct message with its ranks."""
    hits = detail_errors(lesson)
    intro = f"<p><b>With <code>TORCH_DISTRIBUTED_DEBUG={escape(lesson.debug.upper())}</code></b>: " + (
        "before each collective every rank sends the collective's fingerprint (op, shapes, "
        "dtypes) to the others and compares; a difference fails at once, naming the ranks.</p>"
        if lesson.debug == "detail"
        else "DDP prints which parameters got no gradient on which rank.</p>"
    )
    if hits.empty:
        lines = _grep(
            lesson.out_dir,
            ("Detected mismatch between collectives", "failed to pass monitoredBarrier", "did not receive grad"),
        )
        if not lines:
            verdict = escape(lesson.diagnosis.verdict)
            return HTML(
                intro + "<p>It reported no mismatch in this run: the collectives the ranks did issue "
                f"agreed (verdict of this run: <b>{verdict}</b>).</p>"
            )
        body = "".join(f"{escape(t)}\n" for t in lines)
    else:
        groups: dict[str, list[int]] = {}
        for r, m in zip(hits["rank"], hits["message"].astype("object")):
            groups.setdefault(str(m), []).append(int(r))
        body = "".join(f"{fmt_ranks(rs)}: {escape(_clip(readable(m), 900))}\n\n" for m, rs in groups.items())
    return HTML(
        intro + f"<pre style='font-size:80%;white-space:pre-wrap'>{body}</pre>"
        f"<p>Verdict from this run: <b>{escape(lesson.diagnosis.verdict)}</b>.</p>"
    )


_DEVICE_OPTIONS = re.compile(r", TensorDeviceTypes=TensorOptions\(.*?memory_format=\([^)]*\)\)")


def readable(message: str) -> str:
    """A DETAIL message without the device-options boilerplate of each fingerprint (the rest verbatim)."""
    return _DEVICE_OPTIONS.sub("", str(message))


def _grep(folder: Path, needles, limit: int = 6) -> list[str]:
    p = folder / "combined.log"
    if not p.exists():
        return []
    out = [ln[:400] for ln in p.read_text(errors="replace").splitlines() if any(n in ln for n in needles)]
    return out[:limit]


# --- Flight Recorder ------------------------------------------------------------------------------


def fingerprint_mask(events: pd.DataFrame) -> pd.Series:
    """Flight Recorder rows that are DETAIL's own fingerprint exchanges, not the program's collectives.

    Under DETAIL the process group is wrapped; before each collective the wrapper all-gathers the
    collective's fingerprint as small 1-D ``int64`` tensors (first its length ``[1]``, then the
    fingerprint ``[n]``). Those land in the Flight Recorder beside the program's collectives. The
    mask is meant for runs made under DETAIL only: there, a 1-D int64 all_gather is that exchange.
    """
    if events.empty:
        return pd.Series(False, index=events.index)
    op = events["op"].astype("object")
    dt = events["dtype"].astype("object").astype(str)
    one_d = events["in_shapes"].map(lambda s: isinstance(s, tuple) and len(s) == 1 and len(s[0]) == 1)
    return (events["seq_kind"].astype("object") == SeqKind.FR) & (op == "all_gather") & (dt == "int64") & one_d


def flight_recorder_frame(lesson: Lesson) -> tuple[pd.DataFrame, int]:
    """Each rank's recorded collectives side by side, and how many DETAIL fingerprints were left out."""
    ev = lesson.incident.events
    if ev.empty or not (ev["seq_kind"].astype("object") == SeqKind.FR).any():
        return pd.DataFrame(), 0
    hidden = 0
    incident = lesson.incident
    if lesson.debug == "detail":
        mask = fingerprint_mask(ev)
        hidden = int(mask.sum())
        incident = dataclasses.replace(incident, events=ev[~mask])
    return sequences_frame(incident, SeqKind.FR), hidden


def flight_recorder_view(lesson: Lesson) -> HTML:
    """What the Flight Recorder dumps say: each rank's recorded collectives side by side.

    In a DETAIL run the fingerprint all_gathers are left out of the table, counted and explained.
    """
    fr_dir = lesson.out_dir / "fr"
    dumps = sorted(p.name for p in fr_dir.iterdir()) if fr_dir.is_dir() else []
    ranks = range(len(lesson.result.exit_codes))
    missing = [r for r in ranks if not any(d.endswith(f"_{r}") for d in dumps)]
    parts = [
        f"<p><b>Flight Recorder</b> ({'under DETAIL' if lesson.debug == 'detail' else 'without DETAIL'}): "
        f"{len(dumps)} dump(s) in <code>fr/</code>"
        + (
            f"; no dump from rank(s) {rank_ranges(missing)} (a rank aborted by gloo or killed never dumps)"
            if missing
            else ""
        )
        + ".</p>"
    ]
    table, hidden = flight_recorder_frame(lesson)
    if hidden:
        parts.append(
            f"<p>Left out below: <b>{hidden} fingerprint all_gathers</b> (<code>[1] int64</code>, then "
            "<code>[n] int64</code>, one pair per collective). They are DETAIL's own: it wraps the "
            "process group and, before each of your collectives, every rank all-gathers that "
            "collective's fingerprint to compare it with the others'. The collective that diverged "
            "is not in this recorder at all: DETAIL's check failed <i>before</i> it reached the "
            "process group. The run without DETAIL (above) is where the recorder shows it.</p>"
        )
    if table.empty:
        parts.append("<p>The dumps hold no collective entries.</p>")
    else:
        parts.append(
            "<p>Each rank's recorded collectives (<code>collective_seq_id</code>; a row in red is where "
            "the ranks differ):</p>" + _styled(table)
        )
    return HTML("".join(parts))


def _styled(table: pd.DataFrame) -> str:
    def _row(row):
        odd = row.nunique() > 1 or (row == "—").any()
        return ["background-color: #fdd; color: #900; font-weight: bold" if odd else ""] * len(row)

    return table.style.apply(_row, axis=1).to_html()


# --- NCCL -----------------------------------------------------------------------------------------


def _blind_scored() -> set[str]:
    return {p.stem for p in BLIND_RESULTS.glob("*.json")} if BLIND_RESULTS.is_dir() else set()


def wild_case(scenario: str) -> dict | None:
    """The corpus case showing ``scenario``'s failure on NCCL (its ``case.json`` plus ``dir``), or None.

    A case of a blind batch not yet scored is never used: its truth must stay unseen.
    """
    pick = WILD_CASES.get(scenario)
    if pick is None:
        return None
    folder = WILD_DIR / pick[0]
    meta = folder / "case.json"
    if not meta.is_file():
        return None
    case = json.loads(meta.read_text(encoding="utf-8"))
    if case.get("batch") and case["batch"] not in _blind_scored():
        return None
    case["dir"] = folder
    case["same_failure"] = pick[1]
    return case


def nccl_source(scenario: str) -> tuple[str, Path] | None:
    """("recorded" | "wild" | "illustrative", path) of the NCCL evidence for a scenario, or None."""
    rec = DATA_DIR / "recorded" / "nccl" / scenario
    if rec.is_dir():
        runs = sorted(p for p in rec.iterdir() if p.is_dir() and p.name.startswith("broken"))
        if runs:
            return "recorded", runs[0]
        if any(rec.iterdir()):
            return "recorded", rec
    case = wild_case(scenario)
    if case is not None:
        return "wild", case["dir"]
    ill = DATA_DIR / "illustrative" / "nccl" / scenario
    if ill.is_dir():
        return "illustrative", ill
    return None


def nccl_view(scenario: str, mechanism: str = "") -> HTML:
    """What NCCL does with the same bug: a recorded run, else a real log from a public thread, else the
    illustrative log (labelled as such); with none, the catalog's account for NCCL (``mechanism``)."""
    src = nccl_source(scenario)
    if src is None:
        text = (
            f"<p>What the catalog says NCCL does: {escape(mechanism)}</p>"
            if mechanism
            else "<p>The catalog has no NCCL account for this failure.</p>"
        )
        return HTML(
            "<p><b>No NCCL log of this failure is available here</b>: no recorded GPU run, no public "
            "thread in the project's corpus showing it, no illustrative log.</p>" + text
        )
    kind, path = src
    if kind == "wild":
        return _wild_view(wild_case(scenario), rules=NCCL_RULES.get(scenario, ()))
    from ..analysis import diagnose
    from ..ingest import load

    incident = load(str(path))
    diagnosis = diagnose(incident)
    if kind == "illustrative":
        banner = (
            "<div style='border:2px dashed #ff7f0e;padding:6px 10px;background:#fff8ef'><b>ILLUSTRATIVE, "
            "not a real NCCL run.</b> This log was written from NCCL's and PyTorch's documented message "
            "templates because no GPU run was recorded and no public thread in the corpus shows this "
            f"failure; it shows the shape of what NCCL prints, not measured behaviour. Source: "
            f"<code>{escape(_rel(path))}</code></div>"
        )
    else:
        banner = (
            f"<div style='border-left:4px solid #2ca02c;padding:6px 10px'><b>Recorded NCCL run</b>: "
            f"<code>{escape(_rel(path))}</code></div>"
        )
    key = _key_lines(path)
    lines = "".join(f"{escape(ln)}\n" for ln in key)
    seq = sequences_frame(incident)
    culprits = rank_ranges(diagnosis.culprit_ranks) or "undetermined"
    verdict = (
        f"<p>denpex_nb on this evidence: <b>{escape(diagnosis.verdict)}</b> ({escape(diagnosis.confidence)} "
        f"confidence), culprit ranks {escape(culprits)}.</p>"
    )
    return HTML(
        banner + "<p>The lines that matter:</p>"
        f"<pre style='font-size:80%;white-space:pre-wrap'>{lines}</pre>"
        + ("<p>Each rank's collectives as NCCL logged them:</p>" + seq.to_html() if not seq.empty else "")
        + verdict
    )


def _wild_view(case: dict, max_lines: int = 30, rules=()) -> HTML:
    src = case["source"]
    url = escape(src["url"])
    lines: list[str] = []
    for name in case.get("files", []):
        f = case["dir"] / name
        if f.is_file():
            lines += [ln for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
    shown = lines[:max_lines]
    body = "".join(f"{escape(_clip(ln, 400))}\n" for ln in shown)
    more = f"<p>({len(lines) - len(shown)} more lines in the corpus.)</p>" if len(lines) > len(shown) else ""
    return HTML(
        "<div style='border-left:4px solid #1f77b4;padding:6px 10px'><b>A real log from a GPU (NCCL) job</b> "
        f"that failed the same way ({escape(case['same_failure'])}), as posted in "
        f"<a href='{url}' target='_blank' rel='noopener'>{escape(src.get('repo', ''))} "
        f"#{escape(str(src.get('number', '')))}</a>. No NCCL run of this lesson was recorded; this is "
        f"the project's public-thread corpus (<code>{escape(_rel(case['dir']))}</code>).</div>"
        f"<pre style='font-size:80%;white-space:pre-wrap'>{body}</pre>{more}"
        f"<p><b>What the thread established</b>: {escape(case.get('cause', ''))}</p>" + _rules_html(rules)
    )


def _rules_html(rules) -> str:
    """The rule behind the log, each with the public thread that states it."""
    if not rules:
        return ""
    items = "".join(
        f"<li>{escape(text)} (<a href='{escape(url)}' target='_blank' rel='noopener'>{escape(_thread(url))}</a>)</li>"
        for text, url in rules
    )
    return f"<p><b>What NCCL promises here</b>:</p><ul>{items}</ul>"


def _thread(url: str) -> str:
    """``pytorch/pytorch #150248`` for a GitHub issue URL (the URL itself otherwise)."""
    parts = url.rstrip("/").split("/")
    if len(parts) >= 7 and parts[2] == "github.com":
        return f"{parts[3]}/{parts[4]} #{parts[6]}"
    return url


_KEY_WORDS = (
    "Watchdog caught",
    "failure detected by watchdog",
    "AllGather:",
    "AllReduce:",
    "Broadcast:",
    "Timeout at collective",
    "didn't join",
    "exitcode  :",
    "ILLUSTRATIVE",
    "NCCL WARN",
)


def _key_lines(path: Path, limit: int = 24) -> list[str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*.log"))
    if path.is_dir() and (path / "combined.log").exists():
        files = [path / "combined.log"]
    out = []
    for f in files:
        for ln in f.read_text(errors="replace").splitlines():
            if any(k in ln for k in _KEY_WORDS):
                out.append(_clip(ln, 260))
                if len(out) >= limit:
                    return out
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(DATA_DIR.parent))
    except ValueError:
        return str(path)


def _clip(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"

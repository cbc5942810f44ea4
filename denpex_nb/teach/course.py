"""The course: one lesson notebook per scenario of the zoo, an outline, and a mystery to solve.

What a lesson needs beyond the run itself is decided here once: which notebook teaches which
scenario, which debug level shows the most (DETAIL, except for DDP: DETAIL crashes DDP's
constructor on torch 2.13 CPU, and INFO makes DDP name the parameters without a gradient), what
the tests read back (:func:`record`, from a cell hidden in the rendered page), and how a lesson
says that torch is missing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..errors import MissingDependencyError
from ..human import rank_ranges
from ..report import HTML, display
from .evidence import DETAIL_KINDS, nccl_source
from .lessons import DATA_DIR, Lesson, agree, run_lesson


@dataclass(frozen=True)
class LessonInfo:
    notebook: str  # the notebook's name (notebooks/<name>.ipynb)
    scenario: str  # the zoo's scenario id
    class_id: str  # the catalog class the broken run shows
    debug: str  # the debug level of the "what debug mode shows" run


#: the lessons, in the course's order (each notebook runs its scenario's reproducer)
LESSONS = (
    LessonInfo("teach_allgather_shapes", "allgather-shape-mismatch", "shape-mismatch", "detail"),
    LessonInfo("teach_allreduce_shapes", "allreduce-shape-mismatch", "shape-mismatch", "detail"),
    LessonInfo("teach_dtype", "dtype-mismatch", "dtype-mismatch", "detail"),
    LessonInfo("teach_op_mismatch", "op-mismatch", "op-mismatch", "detail"),
    LessonInfo("teach_desync", "skipped-collective", "rank-desync", "detail"),
    LessonInfo("teach_ddp_unused", "ddp-unused-parameters", "unused-parameters", "info"),
    LessonInfo("teach_rank_crash", "rank-crash", "rank-crash", "detail"),
    LessonInfo("teach_syncbn_eval", "syncbn-eval-single-rank", "syncbn-eval-hang", "detail"),
)

#: the investigation exercise's notebook
MYSTERY_NOTEBOOK = "course_mystery"
#: the recorded run behind the mystery (a 4-rank run; the lessons run 2 ranks live)
MYSTERY_RUN = DATA_DIR / "recorded" / "gloo" / "syncbn-eval-single-rank" / "broken-plain-w4"


def lesson_info(scenario: str) -> LessonInfo:
    for info in LESSONS:
        if info.scenario == scenario:
            return info
    raise KeyError(f"no lesson for {scenario!r}")


# --- setup ----------------------------------------------------------------------------------------


def require_torch() -> HTML:
    """Check that the reproducers can run here; without torch, one line saying how to install it.

    Raises :class:`~denpex_nb.errors.MissingDependencyError`, which a notebook shows as that one
    line (no traceback), so "Run All" stops before the first run.
    """
    if importlib.util.find_spec("torch") is None:
        raise MissingDependencyError(
            "this lesson runs real multi-process jobs and needs torch, which is not installed",
            fix="pip install torch==2.13.0 && pip install 'denpex_nb[repro]' (the CPU build is enough), "
            "then restart the kernel",
        )
    from importlib.metadata import PackageNotFoundError, version

    try:  # the version without importing torch (seconds): the runs import it in their own processes
        found = version("torch")
    except PackageNotFoundError:
        found = "(version unknown)"
    return HTML(
        f"<p>torch {escape(found)} is installed: the runs below are real jobs on the gloo backend "
        "(one OS process per rank, a short collective timeout, a hard kill).</p>"
    )


def run_debugged(scenario: str, **kw) -> Lesson:
    """The broken run again under the lesson's debug level, with the Flight Recorder on."""
    return run_lesson(scenario, fixed=False, debug=lesson_info(scenario).debug, flight_recorder=True, **kw)


def nccl(scenario: str) -> HTML:
    """:func:`~.evidence.nccl_view` with the catalog's NCCL account as the last resort."""
    from ..analysis import catalog
    from .evidence import nccl_view

    entry = catalog.find(lesson_info(scenario).class_id)
    text = ""
    if entry is not None:
        text = next((str(v) for k, v in entry.mechanism.items() if "nccl" in str(k).lower()), "")
    return nccl_view(scenario, mechanism=text)


# --- the outline ----------------------------------------------------------------------------------


def outline() -> HTML:
    """The course's table: each lesson, what it shows and what it teaches, with a link to its notebook."""
    from ..repro import registry

    rows = []
    for i, info in enumerate(LESSONS, 1):
        sc = registry.get(info.scenario)
        rows.append(
            f"<tr><td>{i}</td><td><a href='{escape(info.notebook)}.ipynb'>{escape(info.notebook)}</a></td>"
            f"<td>{escape(sc.title)}</td><td><code>{escape(info.class_id)}</code></td><td>{escape(sc.teaches)}</td></tr>"
        )
    rows.append(
        f"<tr><td>{len(LESSONS) + 1}</td><td><a href='{MYSTERY_NOTEBOOK}.ipynb'>{MYSTERY_NOTEBOOK}</a></td>"
        "<td>an incident you have not seen: 4 ranks, a recorded run</td><td>?</td>"
        "<td>investigate with the explorer: name the failure, the culprit rank and the collective</td></tr>"
    )
    left = "<style>.denpex-outline td, .denpex-outline th {text-align: left; vertical-align: top}</style>"
    return HTML(
        left + "<table class='denpex-outline'><thead><tr><th>#</th><th>notebook</th><th>the bug</th>"
        f"<th>catalog class</th><th>what it teaches</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


# --- what the tests read back ---------------------------------------------------------------------


def record(**lessons: Lesson) -> None:
    """The lesson's key results for the tests, as JSON only (the cell is hidden from the rendered page)."""
    from ..report.contract import SUMMARY_MIME

    out = {}
    for name, lesson in lessons.items():
        ev = lesson.incident.events
        err = lesson.incident.errors
        out[name] = {
            "scenario": lesson.scenario,
            "variant": lesson.variant,
            "debug": lesson.debug,
            "verdict": lesson.diagnosis.verdict,
            "culprit_ranks": list(lesson.diagnosis.culprit_ranks),
            "exit_codes": list(lesson.result.exit_codes),
            "sequences_agree": agree(lesson.incident),
            "n_events": int(len(ev)),
            "seq_kinds": sorted(ev["seq_kind"].dropna().astype(str).unique().tolist()) if len(ev) else [],
            "detail_errors": int(err["kind"].astype("object").isin(DETAIL_KINDS).sum()) if len(err) else 0,
            "wall_s": float(lesson.result.wall_s),
        }
    first = next(iter(lessons.values()), None)
    if first is not None:
        src = nccl_source(first.scenario)
        out["nccl_source"] = src[0] if src else None
    display({SUMMARY_MIME: out}, raw=True)


# --- the mystery ----------------------------------------------------------------------------------

#: manifest keys that would give the answer away (or name the scenario)
_TELLING_KEYS = ("scenario", "title", "variant", "command", "expected", "outcome", "env")


def mystery(out=None) -> Path:
    """A copy of the mystery run in a neutral folder, with nothing that names the answer.

    The manifest keeps what a launcher would know (world size, exit codes, signals, timings) and
    loses the scenario, the variant, the command line and the expected answer; the scenario
    module's path in tracebacks and the launcher's "ready: <scenario> (broken)" banner read
    ``train.py``. The evidence is otherwise as recorded.
    """
    if not (MYSTERY_RUN / "manifest.json").is_file():
        from ..errors import InputError

        raise InputError(
            "the mystery incident is not here (it lives in the repository's data/ folder)",
            fix="open the course from a source checkout of denpex_nb",
        )
    base = Path(out) if out else Path(tempfile.mkdtemp(prefix="denpex-mystery-"))
    dest = base / "incident"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(MYSTERY_RUN, dest)
    manifest = json.loads((dest / "manifest.json").read_text(encoding="utf-8"))
    for key in _TELLING_KEYS:
        manifest.pop(key, None)
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    telling = (
        (re.compile(r"[^\s\"']*denpex_nb/repro/scenarios/[a-z_]+\.py"), "train.py"),
        (re.compile(r"(train\.py\", line \d+, in )(?:broken|fixed)\b"), r"\1main"),
        (re.compile(r"ready: [a-z0-9-]+ \((?:broken|fixed)\)"), "ready: train.py"),  # the launcher's banner
    )
    for f in dest.rglob("*.log"):
        text = f.read_text(encoding="utf-8", errors="replace")
        new = text
        for pattern, repl in telling:
            new = pattern.sub(repl, new)
        if new != text:
            f.write_text(new, encoding="utf-8")
    return dest


def mystery_answer() -> dict:
    """The answer (class, culprit ranks, seq per counter), from the original manifest; for the checker."""
    return json.loads((MYSTERY_RUN / "manifest.json").read_text(encoding="utf-8"))["expected"]


def check_mystery(class_id: str | None, culprits: str | list | None, seq) -> tuple[bool, list[str]]:
    """``(all right, one line per part)`` for a learner's answer: class, culprit ranks, seq."""
    exp = mystery_answer()
    lines, ok = [], True
    if class_id == exp["class"]:
        lines.append(f"Class: right, {exp['class']}.")
    else:
        ok = False
        lines.append(f"Class: not {class_id or '(none)'}. Look at the ops the ranks issued at the divergence.")
    want = sorted(exp["culprit_ranks"])
    got = _ranks(culprits)
    if got == want:
        lines.append(f"Culprit: right, rank {rank_ranges(want)}.")
    else:
        ok = False
        lines.append(f"Culprit: not {rank_ranges(got) or '(none)'}. Which rank issued a collective the others did not?")
    seqs = {int(v) for v in (exp.get("seq") or {}).values() if v is not None}
    try:
        seq_val = int(seq) if seq is not None and str(seq).strip() != "" else None
    except ValueError:
        seq_val = None
    if seq_val in seqs:
        lines.append(f"Seq: right, {seq_val}.")
    else:
        ok = False
        lines.append(f"Seq: not {seq if seq not in (None, '') else '(none)'}. At which seq do the ranks' ops differ?")
    return ok, lines


def _ranks(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return sorted({int(v) for v in value})
    return sorted({int(x) for x in re.findall(r"\d+", str(value))})


def checker(interactive: bool | None = None):
    """The mystery's answer form: class (Dropdown), culprit ranks (Text), seq (IntText), a Check button.

    CSS classes for tests: ``denpex-check`` (the box), ``denpex-check-class``, ``denpex-check-culprit``,
    ``denpex-check-seq``, ``denpex-check-button``, ``denpex-check-feedback`` (starts with "Solved." or
    "Not yet."). Headless: the questions as HTML, the answer folded in ``<details>``.
    """
    from ..widgets import is_headless

    if interactive is None:
        interactive = not is_headless()
    static = _checker_static()
    try:
        import ipywidgets as w
    except ImportError:
        if interactive:
            from .quiz import NO_WIDGETS_NOTE

            return HTML(NO_WIDGETS_NOTE + static)
        interactive = False
    if not interactive:
        return HTML(static)
    from ..analysis import catalog

    classes = sorted({e.id for e in catalog.all()})
    cls = w.Dropdown(options=[("(choose)", None), *[(c, c) for c in classes]], value=None, description="class")
    cul = w.Text(placeholder="e.g. 2 or 0, 3", description="culprit rank(s)")
    seq = w.Text(placeholder="e.g. 7", description="seq")
    button = w.Button(description="Check", button_style="primary")
    feedback = w.HTML("")
    for widget, name in (
        (cls, "class"),
        (cul, "culprit"),
        (seq, "seq"),
        (button, "button"),
        (feedback, "feedback"),
    ):
        widget.add_class(f"denpex-check-{name}")

    def _on_click(_):
        ok, lines = check_mystery(cls.value, cul.value, seq.value)
        head = "Solved." if ok else "Not yet."
        colour = "#1b5e20" if ok else "#b71c1c"
        feedback.value = f"<p style='color:{colour}'><b>{head}</b> " + " ".join(escape(x) for x in lines) + "</p>"

    button.on_click(_on_click)
    from .quiz import box_with_static

    box = box_with_static()([cls, cul, seq, button, feedback], static)
    box.add_class("denpex-check")
    return box


def _checker_static() -> str:
    exp = mystery_answer()
    seqs = ", ".join(f"{k} seq {v}" for k, v in (exp.get("seq") or {}).items() if v is not None)
    return (
        "<div class='denpex-check-static' style='border-left:4px solid #9467bd;padding:6px 10px'>"
        "<p><b>Your answer.</b> Which failure class is it? Which rank is the culprit? At which seq do the "
        "ranks diverge?</p><details><summary>Answer</summary>"
        f"<p>{escape(exp['class'])}, culprit rank {escape(rank_ranges(exp['culprit_ranks']))}, at {escape(seqs)}"
        f" ({escape(str(exp.get('op')))} on the culprit, {escape(str(exp.get('peer_op', '')))} on the others).</p>"
        "</details></div>"
    )

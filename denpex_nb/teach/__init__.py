"""The course: what the lesson notebooks call, one line per cell.

Each lesson notebook is a list of one-line calls into this package, so the lesson's logic is
tested like any other code and the notebooks stay thin. Modules, each with one job:
:mod:`.lessons` (run a reproducer and show each rank's sequence), :mod:`.code` (the broken and
fixed code side by side, from the scenario module), :mod:`.quiz` ("predict before you run"),
:mod:`.evidence` (what DETAIL, the Flight Recorder and NCCL show), :mod:`.course` (the lessons'
list, the outline, what the tests read back, the mystery incident and its checker).
"""

from __future__ import annotations

from .code import code_diff, diff_rows, function_source, helpers
from .course import (
    LESSONS,
    MYSTERY_NOTEBOOK,
    LessonInfo,
    check_mystery,
    checker,
    lesson_info,
    mystery,
    mystery_answer,
    nccl,
    outline,
    record,
    require_torch,
    run_debugged,
)
from .evidence import (
    detail_errors,
    detail_view,
    fingerprint_mask,
    flight_recorder_frame,
    flight_recorder_view,
    nccl_source,
    nccl_view,
    wild_case,
)
from .lessons import (
    DATA_DIR,
    Lesson,
    agree,
    compare,
    mechanism,
    outcome,
    run_lesson,
    sequences,
    sequences_frame,
    swimlane,
    synthetic_incident,
)
from .quiz import QUESTIONS, Question, grade, predict, question, static_html

__all__ = [
    "DATA_DIR",
    "LESSONS",
    "MYSTERY_NOTEBOOK",
    "QUESTIONS",
    "Lesson",
    "LessonInfo",
    "Question",
    "agree",
    "check_mystery",
    "checker",
    "code_diff",
    "compare",
    "detail_errors",
    "detail_view",
    "diff_rows",
    "fingerprint_mask",
    "flight_recorder_frame",
    "flight_recorder_view",
    "function_source",
    "grade",
    "helpers",
    "lesson_info",
    "mechanism",
    "mystery",
    "mystery_answer",
    "nccl",
    "nccl_source",
    "nccl_view",
    "outcome",
    "outline",
    "predict",
    "question",
    "record",
    "require_torch",
    "run_debugged",
    "run_lesson",
    "sequences",
    "sequences_frame",
    "static_html",
    "swimlane",
    "synthetic_incident",
    "wild_case",
]

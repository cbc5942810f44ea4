""" "Predict before you run": a question per lesson, answered in a widget, or shown with its answer.

Why a question before the run: a learner who commits to a guess about what the broken code does
on gloo (abort, hang, silent garbage, which rank speaks) reads the run that follows as an answer.

The widget's structure is stable, for people and for browser tests (documented in the README's
"Notebooks" section): a ``VBox`` with CSS class ``denpex-predict`` holding an ``HTML`` prompt
(``denpex-predict-prompt``), ``RadioButtons`` (``denpex-predict-options``, no choice made at
first), a ``Button`` described "Check my answer" (``denpex-predict-check``) and an ``HTML``
feedback (``denpex-predict-feedback``) whose text starts with "Right." or "Not quite." (or "Pick
an answer first."). Where nobody can interact (papermill, nbconvert, no ipywidgets) the question
is rendered as HTML with its answer folded in a ``<details>`` element; the live widget carries
the same HTML in its display bundle, for renderers without a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ..report import HTML

#: shown above the static question where a notebook frontend is there but ipywidgets is not
NO_WIDGETS_NOTE = (
    "<p style='font-size:85%;color:#8d6e00'>ipywidgets is not installed in this kernel, so the question is "
    "shown with its answer folded below (<code>pip install 'denpex_nb[notebook]'</code> and restart the "
    "kernel for the interactive version).</p>"
)


@dataclass(frozen=True)
class Question:
    prompt: str
    options: tuple[str, ...]
    answer: int  # index into options
    why: str


QUESTIONS: dict[str, Question] = {
    "allgather-shape-mismatch": Question(
        "Rank 0 all-gathers a <code>[5, 4]</code> tensor, rank 1 a <code>[3, 4]</code> tensor, each into a "
        "list of buffers shaped like its own tensor. On gloo, what happens?",
        (
            "It works: all_gather pads the smaller tensor.",
            "Both ranks raise a Python error naming the two shapes.",
            "Rank 1 is aborted from gloo's C++ code (a byte count, no Python traceback); rank 0 then "
            "fails on the closed connection.",
            "Both ranks hang forever.",
        ),
        2,
        "all_gather copies bytes into buffers sized in advance, and no rank asks the others what size they "
        "send. Rank 1's buffer for rank 0's rows is too small: gloo's receive check fails inside a C++ "
        "thread and aborts the process (SIGABRT). On NCCL there is no such check: a hang until the "
        "watchdog, or corrupt data.",
    ),
    "allreduce-shape-mismatch": Question(
        "Rank 0 all-reduces a <code>[8, 4]</code> tensor, rank 1 a <code>[6, 4]</code> tensor. On gloo, what happens?",
        (
            "The first 6 rows are reduced, the rest left alone: no error.",
            "Both ranks raise a Python error naming the two shapes.",
            "A rank is aborted from gloo's C++ code with a byte count and no Python traceback; the other "
            "fails on the closed connection.",
            "Both ranks time out after the collective timeout.",
        ),
        2,
        "all_reduce assumes the same number of elements everywhere and never checks it. Here the rank "
        "receiving more bytes than it expects aborts (SIGABRT); with other sizes gloo can even return "
        "wrong values without any error. On NCCL: a hang until the watchdog, or garbage.",
    ),
    "dtype-mismatch": Question(
        "Rank 1 all-reduces a <code>float64[8]</code> metric, rank 0 a <code>float32[8]</code> one. What "
        "error do you get?",
        (
            "A TypeError naming float64 and float32.",
            "gloo aborts a rank with a byte count: neither the dtype nor the other rank is named.",
            "None: the float64 tensor is cast to float32 first.",
            "Both ranks hang until the timeout, without a message.",
        ),
        1,
        "Collectives move bytes, not typed values: 8 float64 are 64 bytes, 8 float32 are 32. The float32 "
        "rank receives more bytes than its buffer holds and gloo aborts it with a bare byte count. Had the "
        "byte counts matched (float64[4] against float32[8]), the result would be garbage without any "
        "error.",
    ),
    "op-mismatch": Question(
        "Rank 0 calls <code>dist.broadcast(cfg, src=0)</code> in an <code>if rank == 0</code> branch; "
        "rank 1 goes straight to the next <code>all_reduce</code> of the same shape and dtype. What "
        "happens?",
        (
            "The broadcast completes on rank 0 alone and rank 1 goes on.",
            "Both wait until the collective timeout; the errors (a receive timeout, a closed connection) "
            "name neither the ops nor the rank.",
            "An error at once saying that broadcast does not match all_reduce.",
            "The all_reduce returns rank 0's broadcast data: silently wrong values.",
        ),
        1,
        "A collective is matched by its position in each rank's sequence, not by its name. Rank 0's "
        "broadcast and rank 1's all_reduce are the same position but different protocols: each waits for "
        "messages the other never sends, until the timeout. Only a comparison of the ranks' sequences "
        "(or DETAIL's fingerprint check) names the two ops.",
    ),
    "skipped-collective": Question(
        "Rank 1's data shard has one batch fewer, so it runs 3 training steps (3 all_reduces) and exits; "
        "rank 0 runs 4. Which rank reports an error?",
        (
            "Rank 1 raises 'missing collective' when it exits.",
            "Only rank 0: it times out in its 4th all_reduce; rank 1, the cause, exits 0 without a word.",
            "Both ranks fail at the same moment.",
            "Neither: the extra all_reduce is skipped.",
        ),
        1,
        "Nothing tells rank 0 that rank 1 has left: it waits in an all_reduce nobody joins, then fails "
        "(a timeout, or 'Connection closed by peer' once rank 1's process is gone). The rank that caused "
        "it reports nothing: the culprit is the rank that is behind, found by comparing how far each got.",
    ),
    "ddp-unused-parameters": Question(
        "Under DDP (<code>find_unused_parameters=False</code>), rank 1 skips the auxiliary head in step 2 "
        "only, so its parameters get no gradient there. When does a rank fail?",
        (
            "At step 2, in rank 1's backward: 'parameter got no gradient'.",
            "Never: DDP ignores parameters without a gradient.",
            "At step 3: rank 1's next forward raises 'Expected to have finished reduction in the prior "
            "iteration', and rank 0, left waiting in a step-2 gradient all_reduce, fails on the closed "
            "connection.",
            "At step 2 both ranks time out in backward.",
        ),
        2,
        "DDP all-reduces gradients in buckets once every parameter of a bucket has its gradient. On rank 1 "
        "the auxiliary head's gradients never come, so that bucket's all_reduce is never issued; rank 0 "
        "issues it and waits. Rank 1 notices only at its next forward. These all_reduces come from DDP's "
        "C++ reducer, so only the Flight Recorder sees them.",
    ),
    "rank-crash": Question(
        "Rank 1 raises a <code>ValueError</code> on a corrupt sample in step 3, before that step's "
        "all_reduce. What does rank 0 do?",
        (
            "It stops at once: torch.distributed forwards the exception to every rank.",
            "It waits in its step-3 all_reduce and then fails with a timeout or a closed connection: a "
            "symptom; the first error in time, rank 1's ValueError, is the cause.",
            "It finishes the epoch alone.",
            "It hangs forever, with no error.",
        ),
        1,
        "Ranks are separate processes: an exception on one is not sent to the others. The survivors find "
        "out only through the collective that never completes. The earliest error in time is the cause; "
        "the later 'Connection closed by peer' or timeouts are consequences.",
    ),
    "syncbn-eval-single-rank": Question(
        "Rank 0 validates alone with a SyncBatchNorm model still in training mode; rank 1 waits at "
        "<code>dist.barrier()</code>. What happens?",
        (
            "Validation runs fine: batch norm is local to each rank.",
            "Rank 0's SyncBatchNorm all-gathers batch statistics while rank 1 waits at the barrier: both "
            "sides time out.",
            "Rank 1 fails at once with 'barrier does not match all_gather'.",
            "Rank 0 uses its running statistics and no collective runs.",
        ),
        1,
        "In training mode SyncBatchNorm is a collective: each forward all-gathers the batch statistics of "
        "every rank. Rank 0's all_gather meets rank 1's barrier (the same position in the sequence, a "
        "different collective): both wait until the timeout. <code>model.eval()</code> uses the running "
        "statistics and issues no collective.",
    ),
}


def question(scenario: str) -> Question:
    """The lesson's question (a KeyError names the scenarios that have one)."""
    try:
        return QUESTIONS[scenario]
    except KeyError:
        raise KeyError(f"no question for {scenario!r}; lessons: {', '.join(QUESTIONS)}") from None


def grade(scenario: str, choice) -> tuple[bool | None, str]:
    """``(right, feedback)`` for a choice (an index or the option's text); ``(None, ...)`` for no choice."""
    q = question(scenario)
    if choice is None:
        return None, "Pick an answer first."
    idx = q.options.index(choice) if isinstance(choice, str) else int(choice)
    if idx == q.answer:
        return True, f"Right. {q.why}"
    return False, f"Not quite. The answer: {q.options[q.answer]} {q.why}"


def static_html(scenario: str) -> str:
    """The question as HTML, the answer folded in ``<details>`` (for headless runs and saved pages)."""
    q = question(scenario)
    opts = "".join(f"<li>{escape(o)}</li>" for o in q.options)
    return (
        "<div class='denpex-predict-static' style='border-left:4px solid #9467bd;padding:6px 10px'>"
        f"<p><b>Predict before you run.</b> {q.prompt}</p><ol type='A'>{opts}</ol>"
        f"<details><summary>Answer</summary><p><b>{'ABCD'[q.answer]}.</b> {escape(q.options[q.answer])}</p>"
        f"<p>{q.why}</p></details></div>"
    )


def predict(scenario: str, interactive: bool | None = None):
    """The question as a widget (RadioButtons + "Check my answer" + feedback), or as static HTML.

    ``interactive=None`` asks the kernel whether anyone can click (:func:`denpex_nb.widgets.is_headless`).
    """
    from ..widgets import is_headless

    if interactive is None:
        interactive = not is_headless()
    try:
        import ipywidgets as w
    except ImportError:
        if interactive:
            return HTML(NO_WIDGETS_NOTE + static_html(scenario))
        interactive = False
    if not interactive:
        return HTML(static_html(scenario))
    q = question(scenario)
    prompt = w.HTML(f"<p><b>Predict before you run.</b> {q.prompt}</p>")
    options = w.RadioButtons(options=list(q.options), value=None, layout=w.Layout(width="100%"))
    check = w.Button(description="Check my answer", button_style="primary")
    feedback = w.HTML("")
    for widget, cls in (
        (prompt, "denpex-predict-prompt"),
        (options, "denpex-predict-options"),
        (check, "denpex-predict-check"),
        (feedback, "denpex-predict-feedback"),
    ):
        widget.add_class(cls)

    def _on_click(_):
        right, text = grade(scenario, options.value)
        colour = "#1b5e20" if right else "#8d6e00" if right is None else "#b71c1c"
        feedback.value = f"<p style='color:{colour}'>{text}</p>"

    check.on_click(_on_click)
    box = box_with_static()([prompt, options, check, feedback], static_html(scenario))
    box.add_class("denpex-predict")
    return box


_BOX = None  # the class, made on first use


def box_with_static():
    """A VBox carrying a static twin as ``text/html`` in its display bundle (made on first use)."""
    global _BOX
    if _BOX is None:
        import ipywidgets as w

        class _Box(w.VBox):
            def __init__(self, children, static: str):
                super().__init__(children)
                self._static_html = static

            def _repr_mimebundle_(self, **kwargs):
                bundle = super()._repr_mimebundle_(**kwargs)
                if isinstance(bundle, tuple):
                    bundle = bundle[0]
                bundle = dict(bundle or {})
                bundle["text/html"] = self._static_html
                return bundle

            def _ipython_display_(self):
                """After its hidden static view, which JupyterLab shows in the question's place when
                the lesson is reopened without its kernel (:mod:`denpex_nb.widgets.fallback`)."""
                from IPython.display import display

                from ..widgets.fallback import display_fallback

                display_fallback(self._static_html)
                display(self._repr_mimebundle_(), raw=True)

        _BOX = _Box
    return _BOX

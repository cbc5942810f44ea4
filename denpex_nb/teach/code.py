"""The code that breaks and the code that fixes it, side by side, read from the scenario module itself.

Why from the module and not a copy in the notebook: the lesson runs exactly these functions (each
rank imports the scenario module), so what the learner reads is what ran. The diff is of the
``broken`` and ``fixed`` functions; the module's helpers they call are shown beneath, folded.
"""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ..report import HTML

_DEL = "background:#fdd"
_ADD = "background:#dfd"
_CELL = (
    "font-family:monospace;font-size:80%;white-space:pre-wrap;overflow-wrap:anywhere;width:48%;"
    "padding:0 6px;vertical-align:top;text-align:left"
)
_NUM = "font-family:monospace;font-size:75%;color:#888;padding:0 4px;text-align:right;vertical-align:top"


@dataclass(frozen=True)
class Source:
    """One function's source and where it lives."""

    name: str
    text: str
    file: str
    first_line: int


def function_source(scenario: str, name: str) -> Source:
    """The source of function ``name`` of the scenario module (``broken``, ``fixed`` or a helper)."""
    from ..repro import registry

    mod = registry.get(scenario).load()
    fn = getattr(mod, name)
    lines, first = inspect.getsourcelines(fn)
    return Source(name, "".join(lines), _module_file(mod), first)


def _module_file(mod) -> str:
    path = Path(inspect.getfile(mod)).resolve()
    parts = path.parts
    return "/".join(parts[parts.index("denpex_nb") :]) if "denpex_nb" in parts else path.name


def helpers(scenario: str) -> list[Source]:
    """The module's own functions that ``broken`` or ``fixed`` call (directly or through each other)."""
    from ..repro import registry

    mod = registry.get(scenario).load()
    own = {
        n: f
        for n, f in vars(mod).items()
        if inspect.isfunction(f) and f.__module__ == mod.__name__ and n not in ("broken", "fixed", "expected")
    }
    seen: list[str] = []
    todo = [inspect.getsource(mod.broken), inspect.getsource(mod.fixed)]
    while todo:
        text = todo.pop()
        for n in own:
            if n not in seen and re.search(rf"\b{re.escape(n)}\(", text):
                seen.append(n)
                todo.append(inspect.getsource(own[n]))
    order = {n: i for i, n in enumerate(own)}
    return [function_source(scenario, n) for n in sorted(seen, key=order.get)]


def diff_rows(broken: str, fixed: str) -> list[tuple[str, str, str]]:
    """``(tag, left, right)`` rows of a side-by-side diff; tag is equal, delete, insert or replace."""
    a, b = broken.splitlines(), fixed.splitlines()
    rows: list[tuple[str, str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            rows.append((tag, left[k] if k < len(left) else "", right[k] if k < len(right) else ""))
    return rows


def code_diff(scenario: str) -> HTML:
    """``broken`` beside ``fixed`` from the scenario module, changed lines coloured, helpers folded below."""
    b, f = function_source(scenario, "broken"), function_source(scenario, "fixed")
    rows = []
    ln_b, ln_f = b.first_line, f.first_line
    for tag, left, right in diff_rows(b.text, f.text):
        has_l = tag in ("equal", "delete", "replace") and (left or tag == "equal")
        has_r = tag in ("equal", "insert", "replace") and (right or tag == "equal")
        lstyle = _DEL if tag in ("delete", "replace") and left else ""
        rstyle = _ADD if tag in ("insert", "replace") and right else ""
        rows.append(
            f"<tr><td style='{_NUM}'>{ln_b if has_l else ''}</td>"
            f"<td style='{_CELL};{lstyle}'>{escape(left)}</td>"
            f"<td style='{_NUM}'>{ln_f if has_r else ''}</td>"
            f"<td style='{_CELL};{rstyle}'>{escape(right)}</td></tr>"
        )
        ln_b += 1 if has_l else 0
        ln_f += 1 if has_r else 0
    head = (
        f"<tr><th colspan=2 style='text-align:left'>broken <code>{escape(b.file)}:{b.first_line}</code></th>"
        f"<th colspan=2 style='text-align:left'>fixed <code>{escape(f.file)}:{f.first_line}</code></th></tr>"
    )
    parts = [
        "<div class='denpex-code-diff'><table style='border-collapse:collapse;width:100%;table-layout:fixed'>"
        "<colgroup><col style='width:3em'><col><col style='width:3em'><col></colgroup>"
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        "<p style='font-size:85%'>Red: only in the broken code; green: only in the fixed code. Each rank "
        "of the runs below executes exactly these functions.</p>"
    ]
    extra = helpers(scenario)
    if extra:
        names = ", ".join(f"<code>{escape(h.name)}</code>" for h in extra)
        body = "\n\n".join(f"# {h.file}:{h.first_line}\n{h.text.rstrip()}" for h in extra)
        parts.append(
            f"<details><summary>the code both variants call: {names}</summary>"
            f"<pre style='font-size:80%'>{escape(body)}</pre></details>"
        )
    parts.append("</div>")
    return HTML("".join(parts))

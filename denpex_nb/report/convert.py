"""An executed notebook to one HTML page (nbconvert), masked when the report is redacted.

With ``--redact`` the kernel masked what it computed (:func:`~.prepare.prepare`); what it did not
compute (papermill's parameters in the notebook metadata, a traceback, the title) is masked here,
with the kernel's own redactor so the masks are numbered alike.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import require
from .contract import REDACT_MIME


def take_redact_hosts(nb) -> set[str]:
    """Hosts named by hidden redaction outputs (older templates emitted them); those outputs are removed."""
    hosts: set[str] = set()
    for cell in nb.cells:
        keep = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if REDACT_MIME in data:
                val = data[REDACT_MIME]
                hosts |= set((json.loads(val) if isinstance(val, str) else val).get("hosts", []))
                continue
            keep.append(out)
        if "outputs" in cell:
            cell["outputs"] = keep
    return hosts


def renderer_redactor(state_path: Path, hosts: set[str], logs: list[str]):
    """The kernel's redactor (same masks, same numbers), else one learned from the inputs themselves.

    The inputs are learned from in any case (names and head/tail of each file): a cell that failed
    before ``prepare`` redacted anything still has its traceback masked.
    """
    from ..redact import Redactor, common_root

    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    r = Redactor.from_state(state) if state else Redactor()
    for h in sorted(hosts):
        r.add_host(h)
    if not state:
        root = common_root(logs)
        if root:
            r.add_root(root)
        r.learn_files(logs)
    for p in logs:
        r.learn(p)
    return r


def to_html(nb, title: str, redactor=None) -> str:
    """nbconvert HTML without input cells or prompts; ``remove_cell``-tagged cells dropped.

    With a ``redactor``, the title and the finished page get a last literal pass
    (:meth:`~denpex_nb.redact.Redactor.scrub`: only names it knows, outside embedded images).
    """
    require("nbconvert", "notebook")
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config

    c = Config()
    c.TagRemovePreprocessor.remove_cell_tags = {"remove_cell"}
    c.TagRemovePreprocessor.enabled = True
    exporter = HTMLExporter(config=c, template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    exporter.register_preprocessor(TagRemovePreprocessor(config=c), enabled=True)
    if redactor is not None:
        title = redactor.scrub(redactor(title))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body if redactor is None else redactor.scrub(body)

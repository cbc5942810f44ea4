"""A widget's static view, shown by JupyterLab in the widget's place once the widget cannot render.

Why this is needed: a notebook saved with a live widget keeps, as that output, a pointer to a model
that lived in the kernel (``application/vnd.jupyter.widget-view+json``). Reopened after the kernel
or the whole server is gone, JupyterLab's widget renderer (jupyterlab_widgets' ``WidgetRenderer``)
finds no model and writes "Error displaying widget: model not found" into that output. It never
falls back to the ``text/html`` carried beside the widget in the same bundle: JupyterLab renders
one MIME type per output, the most preferred, and the widget's type outranks HTML. ipywidgets' own
remedy, the widget state saved into the notebook, is a JupyterLab setting ("Save Widget State
Automatically") that is off by default, and a kernel cannot turn it on.

What works without any setting: the static view in an output of its own, beside the widget's
output, hidden by default (an inline ``display:none``), with a stylesheet that shows it, and hides
the widget's output, in the one output area where the widget renderer has given up. The renderer
marks exactly that state: the failed output node gets the class ``jupyter-widgets`` (which it
never has while a view is shown: the view's own node, inside it, carries that class then). So:

* live in JupyterLab: the widget shows, the static view stays hidden;
* reopened with no kernel (saved, server killed, a new server): the static view shows in its
  place, the error line is hidden;
* nbconvert, GitHub, VS Code: the hidden output stays hidden, and the widget's own ``text/html``
  twin (kept in its bundle) shows as before.

It needs CSS ``:has()`` (Chromium 105, Firefox 121, Safari 15.4). Trust does not matter: in a
trusted notebook (one saved by oneself: its signature matches the Jupyter data folder's secret)
the widget renderer runs, fails, and the stylesheet reveals the static view; in an untrusted one
JupyterLab never runs the widget renderer (it is not "safe") and shows the bundle's sanitized
``text/html`` twin instead, while the hidden view stays hidden. Both checked in JupyterLab 4.6
with jupyterlab_widgets 3.0 (``tests/test_jupyterlab.py`` drives the trusted case end to end).
"""

from __future__ import annotations

#: the class of the hidden static view (the stylesheet's handle; also the browser test's)
FALLBACK_CLASS = "dx-fallback"

#: an output whose widget renderer failed: only then does the output node itself carry
#: ``jupyter-widgets`` (a live view's node is a child of it; JupyterLab 4.6 sets no
#: ``data-mime-type`` on a widget output, so the class is the one handle)
_FAILED = ".jp-OutputArea-output.jupyter-widgets"

STYLE = (
    "<style>"
    f".jp-OutputArea:has({_FAILED}) .{FALLBACK_CLASS}{{display:block !important}}"
    f".jp-OutputArea:has(.{FALLBACK_CLASS}) .jp-OutputArea-child:has({_FAILED}){{display:none}}"
    "</style>"
)


def fallback_html(static_html: str) -> str:
    """``static_html`` wrapped as the hidden static view, with the stylesheet that reveals it.

    The ``<style>`` sits inside the hidden block: where a sanitizer turns it into text (an
    untrusted notebook), that text stays hidden too; where it is kept, it applies all the same."""
    return f"<div class='{FALLBACK_CLASS}' style='display:none'>{STYLE}{static_html}</div>"


def display_fallback(static_html: str) -> None:
    """Show the hidden static view as an output of its own (call it just before the widget's)."""
    from IPython.display import display

    display(
        {"text/html": fallback_html(static_html), "text/plain": ""},
        raw=True,
        metadata={"denpex": {"role": "widget-fallback"}},
    )

"""Can anybody interact with a widget in this kernel? Read from the kernel's own state.

Why not the parent process's command line: papermill, nbconvert, VS Code, a JupyterHub spawner
and a test runner all start kernels; which words appear above the kernel says little about
whether a browser with a widget manager is listening. What the kernel itself knows does:

* no IPython kernel at all (plain Python, terminal IPython): nobody renders widgets;
* ``DENPEX_NB_HEADLESS`` set (``denpex-nb report`` sets it for the kernels papermill starts);
* a widget manager opened ipywidgets' control comm (``jupyter.widget.control``): JupyterLab and
  Notebook 7 do this when they connect to a kernel that has ipywidgets loaded;
* the request being executed came from a notebook frontend: JupyterLab, Notebook 7 and VS Code
  send the cell's id in the ``execute_request`` metadata (``cellId``); nbclient (papermill,
  ``nbconvert --execute``) sends none.

Interactive means: a kernel, not forced headless, and one of the last two.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Frontend:
    """What the kernel knows about who is listening (``why`` says it in words)."""

    interactive: bool
    why: str


def frontend() -> Frontend:
    """Whether a frontend that renders widgets is driving this kernel, and why we think so."""
    if os.environ.get("DENPEX_NB_HEADLESS", "") not in ("", "0"):
        return Frontend(False, "DENPEX_NB_HEADLESS is set (a report is being rendered)")
    kernel = _kernel()
    if kernel is None:
        return Frontend(False, "not running in a Jupyter kernel")
    if _control_comm_open():
        return Frontend(True, "a widget manager opened the widget control channel")
    parent = _parent_request(kernel)
    meta = parent.get("metadata") or {}
    if meta.get("cellId"):
        return Frontend(True, "the cell was run from a notebook frontend")
    if not parent:
        return Frontend(False, "no request is being executed (no frontend in sight)")
    return Frontend(False, "the cell was run without a notebook frontend (papermill, nbconvert or a script)")


def is_headless() -> bool:
    """True when nobody can interact with widgets in this kernel (see :func:`frontend`)."""
    return not frontend().interactive


def on_shutdown(callback) -> bool:
    """Call ``callback()`` when this kernel is asked to shut down or restart, before it replies.

    Why: a widget's output saved in a notebook means nothing once its kernel is gone (JupyterLab
    then shows "Error displaying widget: model not found"); at shutdown the explorer replaces its
    live view by its static tables (``update_display_data``), so the notebook saved afterwards
    shows them. Returns False when there is no kernel to hook."""
    kernel = _kernel()
    if kernel is None:
        return False
    hooks = getattr(kernel, "_denpex_shutdown_hooks", None)
    if hooks is None:
        hooks = []
        original = kernel.do_shutdown

        def do_shutdown(restart, _original=original, _hooks=hooks):
            for hook in list(_hooks):
                try:
                    hook()
                except Exception:  # noqa: BLE001 - a hook must never stop the kernel from shutting down
                    pass
            return _original(restart)

        kernel.do_shutdown = do_shutdown
        kernel._denpex_shutdown_hooks = hooks
    if callback not in hooks:
        hooks.append(callback)
    return True


def _kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None) if shell is not None else None


def _parent_request(kernel) -> dict:
    try:
        parent = kernel.get_parent("shell")
    except TypeError:  # older ipykernel: get_parent() without a channel
        parent = kernel.get_parent()
    except AttributeError:
        parent = getattr(kernel, "_parent_header", None) or {}
    return parent if isinstance(parent, dict) else {}


def _control_comm_open() -> bool:
    try:
        from ipywidgets import Widget
    except ImportError:
        return False
    return getattr(Widget, "_control_comm", None) is not None

"""Errors that carry structured fields: what went wrong, where, and what to do about it.

The CLI turns any :class:`DenpexError` into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations


class DenpexError(Exception):
    """Base class. ``str(err)`` is the one-line message the CLI prints."""

    def __init__(self, problem: str, *, fix: str | None = None, where: str | None = None):
        self.problem = problem
        self.fix = fix
        self.where = where
        super().__init__(self.one_line())

    def one_line(self) -> str:
        msg = f"{self.where}: {self.problem}" if self.where else self.problem
        if self.fix:
            msg += f" (fix: {self.fix})"
        return msg

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error in a notebook: the one line, not a traceback wall.

        (IPython's hook for exceptions that render themselves; the cell still fails, so "Run
        All" stops there and papermill reports it.)"""
        return [f"\x1b[1;31m{type(self).__name__}\x1b[0m: {self.one_line()}"]


class InputError(DenpexError):
    """A path is missing, unreadable, empty of logs, or not a log at all."""


class UnsafePickleError(DenpexError):
    """A Flight Recorder dump tried to load something other than plain data."""


class UsageError(DenpexError):
    """Bad arguments: unknown scenario, world size < 2, backend not available ..."""


class MissingDependencyError(DenpexError):
    """An optional dependency (torch, papermill ...) is needed for this command."""


def require(module: str, extra: str):
    """Import an optional dependency or raise a one-line error saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        hint = "pip install torch==2.13.0" if module == "torch" else f"pip install 'denpex_nb[{extra}]'"
        raise MissingDependencyError(f"{module} is not installed", fix=hint) from None

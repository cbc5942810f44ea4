"""The notebooks shipped with the package: where they are, read one, copy them out.

Why: the notebooks are the source. Engineers open and edit ``notebooks/*.ipynb`` in JupyterLab;
those same files ship inside the package as ``denpex_nb.notebooks`` (package data, mapped from
the top-level ``notebooks/`` folder in ``pyproject.toml``), so ``denpex-nb report`` finds its
template after a plain ``pip install`` and ``denpex-nb notebooks DEST`` gives a user the
post-mortem and the lessons. There is no second definition to keep in step with them.

In a source checkout the folder beside the package is used (so a worktree or a checkout on
``PYTHONPATH`` reads its own notebooks, never an installed copy's); an installed package reads
its package data through :mod:`importlib.resources`.
"""

from __future__ import annotations

import shutil
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from .errors import InputError

_CHECKOUT = Path(__file__).resolve().parents[1]


def folder() -> Traversable:
    """The folder holding the ``.ipynb`` files (a path in a checkout, package data when installed)."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "notebooks").is_dir():
        return _CHECKOUT / "notebooks"
    return resources.files("denpex_nb.notebooks")


def names() -> list[str]:
    """Every shipped notebook's name (the file name without ``.ipynb``), sorted."""
    return sorted(p.name[: -len(".ipynb")] for p in folder().iterdir() if p.name.endswith(".ipynb"))


def path(name: str) -> Traversable:
    """The ``.ipynb`` file of notebook ``name``; an unknown name is an :class:`InputError`."""
    p = folder() / f"{name}.ipynb"
    if not p.is_file():
        raise InputError(f"no notebook named {name!r}", fix=f"use one of: {', '.join(names())}")
    return p


def read(name: str):
    """Notebook ``name`` as an ``nbformat`` NotebookNode (version 4)."""
    import nbformat

    return nbformat.reads(path(name).read_text(encoding="utf-8"), as_version=4)


def copy_to(dest: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Copy every shipped notebook into ``dest`` (created if missing); returns the files written.

    An existing notebook of the same name is kept unless ``overwrite``: copying never destroys a
    user's edits without being asked to.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is not a folder", fix="name a folder to copy the notebooks into")
    clashes = [n for n in names() if (dest / f"{n}.ipynb").exists()]
    if clashes and not overwrite:
        raise InputError(
            f"{dest} already holds {', '.join(f'{n}.ipynb' for n in clashes)}",
            fix="choose another folder, or pass --overwrite to replace them",
        )
    try:
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for n in names():
            with resources.as_file(path(n)) as src:
                target = dest / f"{n}.ipynb"
                shutil.copyfile(src, target)
                written.append(target)
    except OSError as e:
        raise InputError(f"cannot write notebooks into {dest}: {e.strerror or e}", fix="check the folder") from None
    return written

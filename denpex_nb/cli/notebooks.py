"""``denpex-nb notebooks DEST [--overwrite]``: the shipped notebooks, copied out to be opened.

After ``pip install denpex_nb`` the post-mortem and the lessons live inside the package
(:mod:`denpex_nb.nbfiles`); this puts editable copies where JupyterLab can open them. Existing
notebooks of the same name are never replaced unless ``--overwrite`` says so (exit 2 otherwise).
"""

from __future__ import annotations


def run(args) -> int:
    from ..nbfiles import copy_to

    for path in copy_to(args.dest, overwrite=args.overwrite):
        print(path)
    print("open them with: jupyter lab " + str(args.dest))
    return 0

"""The layers of the package, checked on its import graph (README, "Architecture").

Every ``import`` and ``from ... import`` statement of every module counts, those inside functions
too (a lazy import is still an arrow). The rules:

* each top-level unit (``denpex_nb.<unit>``) imports only the units :data:`MAY_IMPORT` lists;
* no module of the library imports the test tooling (``denpex_nb.testing``);
* no module imports a private name (``_x``) of another module, nor reaches one through a module
  it imported (``parse._failed``); a private *module* (``ingest/_text.py``) is for its package;
* module-level imports form no cycle.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import denpex_nb

PKG = Path(denpex_nb.__file__).parent

#: the foundation: names and small helpers every layer may use; they import nothing above them
FOUNDATION = {"errors", "vocab", "ops", "processes", "human", "signals"}

#: unit -> the units it may import (itself always). ingest and analysis are siblings above the
#: Incident: neither knows the other. repro (the reproducers) stands beside the pipeline.
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "vocab": set(),
    "ops": {"vocab"},
    "processes": set(),
    "human": set(),
    "signals": {"vocab"},  # the failure-signal vocabulary (data): read by ingest and analysis
    "redact": FOUNDATION,
    "trace": set(),  # the tracer every training rank imports: nothing of ours
    "fixes": {"errors"},  # the fixes, imported into training code
    "incident": FOUNDATION,
    "ingest": FOUNDATION | {"incident"},
    "analysis": FOUNDATION | {"incident"},
    "catalog": {"analysis"},  # the alias denpex_nb.catalog
    "plot": FOUNDATION | {"incident", "analysis"},
    "widgets": FOUNDATION | {"incident", "analysis", "plot"},
    "nbfiles": FOUNDATION,
    # the live watcher: follows files, reads them with the loader's readers, decides with the analysis
    "live": FOUNDATION | {"incident", "ingest", "analysis"},
    "report": FOUNDATION | {"incident", "ingest", "analysis", "catalog", "plot", "widgets", "nbfiles", "redact"},
    "teach": FOUNDATION | {"incident", "ingest", "analysis", "catalog", "plot", "widgets", "report", "repro", "fixes"},
    "repro": FOUNDATION | {"fixes", "trace"},
    "cli": FOUNDATION
    | {"incident", "ingest", "analysis", "catalog", "plot", "report", "redact", "repro", "nbfiles", "live"},
    "testing": FOUNDATION | {"incident", "ingest", "analysis"},
    "": FOUNDATION
    | {
        "incident",
        "ingest",
        "analysis",
        "catalog",
        "plot",
        "widgets",
        "report",
        "repro",
        "fixes",
        "live",
        "trace",
        "redact",
        "teach",
    },  # the lazy facade, denpex_nb/__init__.py
}


def _module_name(path: Path) -> str:
    parts = ["denpex_nb", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(PKG.rglob("*.py"))}


MODULES = _modules()


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path, tree: ast.Module, top_level_only: bool = False):
    """(imported module, imported name or None, line) for every import of ours in ``tree``."""
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "denpex_nb":
                    yield a.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            if target.split(".")[0] != "denpex_nb":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                yield (sub, None, node.lineno) if sub in MODULES else (target, a.name, node.lineno)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_unit_of_the_package_has_a_place_in_the_layers():
    units = {_unit(m) for m in MODULES}
    assert units <= set(MAY_IMPORT), f"add these to MAY_IMPORT and the README's layers: {units - set(MAY_IMPORT)}"


def test_every_arrow_between_units_points_the_way_the_layers_allow():
    wrong = []
    for module, (path, tree) in MODULES.items():
        src = _unit(module)
        for target, _, line in _imports(module, path, tree):
            dst = _unit(target)
            if dst != src and dst not in MAY_IMPORT[src]:
                wrong.append(f"{path.relative_to(PKG)}:{line}: {src or 'denpex_nb'} -> {dst or 'denpex_nb'}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_library_never_imports_the_test_tooling():
    wrong = [
        f"{path.relative_to(PKG)}:{line}"
        for module, (path, tree) in MODULES.items()
        if _unit(module) != "testing"
        for target, _, line in _imports(module, path, tree)
        if _unit(target) == "testing"
    ]
    assert not wrong, wrong


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_uses_a_private_name_of_another_module():
    wrong = []
    for module, (path, tree) in MODULES.items():
        bound: dict[str, str] = {}  # local name -> our module it stands for
        for target, name, line in _imports(module, path, tree):
            if name is not None and _private(name) and target != module:
                wrong.append(f"{path.relative_to(PKG)}:{line}: imports {target}.{name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(module, path, node)
                for a in node.names:
                    if f"{target}.{a.name}" in MODULES:
                        bound[a.asname or a.name] = f"{target}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES and a.asname:
                        bound[a.asname] = a.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and _private(node.attr)
                and node.value.id in bound
                and bound[node.value.id] != module
            ):
                wrong.append(f"{path.relative_to(PKG)}:{node.lineno}: uses {bound[node.value.id]}.{node.attr}")
    assert not wrong, "private names used across modules:\n" + "\n".join(sorted(set(wrong)))


def test_module_level_imports_form_no_cycle():
    graph = {}
    for module, (path, tree) in MODULES.items():
        deps = set()
        for target, _, _ in _imports(module, path, tree, top_level_only=True):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != module:
                deps.add(target)
        graph[module] = deps
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_the_checks_see_a_wrong_arrow(tmp_path):
    """The rule above can fail: an analysis module importing the loader is caught."""
    tree = ast.parse("from ..ingest import load\n")
    path = PKG / "analysis" / "x.py"
    found = [(_unit(t), line) for t, _, line in _imports("denpex_nb.analysis.x", path, tree)]
    assert found == [("ingest", 1)] and "ingest" not in MAY_IMPORT["analysis"]


def test_the_tracer_and_the_facade_import_neither_pandas_nor_the_analysis():
    """``import denpex_nb.trace`` is added to every training rank; ``import denpex_nb`` is lazy.
    (Their import time is measured in benchmarks/bench_import.py, not asserted here.)"""
    import subprocess
    import sys

    for module in ("denpex_nb.trace", "denpex_nb"):
        code = (
            f"import sys, {module}; heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'numpy', 'matplotlib', 'torch') or m.startswith('denpex_nb.analysis') "
            "or m.startswith('denpex_nb.ingest')]; print(heavy)"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "[]", (module, run.stdout)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import denpex_nb as dx; print(dx.diagnose.__module__, "
            "dx.Diagnosis.__module__, dx.Incident.__module__, callable(dx.load))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.split() == ["denpex_nb", "denpex_nb.analysis.model", "denpex_nb.incident", "True"], run

"""Every decision has a reason in its test (issue #15): each registered rule is named in the docstring
of a ``test_decisions_*`` module ("Decisions of rule ``name``"), and each module's docstring and its
tests agree: every test the docstring names exists, and every test of the module is named there (a
test nobody can trace to a decision, or a decision whose test is gone, fails here)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from denpex_nb.analysis import rules

HERE = Path(__file__).resolve().parent
MODULES = sorted(HERE.glob("test_decisions_*.py"))
MODULES = [p for p in MODULES if p.name != Path(__file__).name]


def _doc_and_tests(path: Path) -> tuple[str, set[str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    return ast.get_docstring(tree) or "", tests


def test_every_registered_rule_has_its_decisions_listed():
    named = set()
    for path in MODULES:
        doc, _ = _doc_and_tests(path)
        named |= set(re.findall(r"[Dd]ecisions of rule ``([\w-]+)``", doc))
    missing = sorted(str(r.name) for r in rules.RULES if str(r.name) not in named)
    assert not missing, (
        f"rules without a decisions list: {missing}; add 'Decisions of rule ``NAME``' with one test per "
        "decision to a tests/analysis/test_decisions_*.py docstring"
    )


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_the_docstring_and_the_tests_agree(path):
    doc, tests = _doc_and_tests(path)
    cited = set(re.findall(r"\b(test_\w+)", doc))
    assert cited, f"{path.name}: its docstring names no test"
    assert cited <= tests, f"{path.name}: the docstring names tests that do not exist: {sorted(cited - tests)}"
    assert tests <= cited, f"{path.name}: tests no decision in the docstring names: {sorted(tests - cited)}"

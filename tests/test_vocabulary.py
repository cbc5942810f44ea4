"""One vocabulary (``denpex_nb.vocab``): no layer spells a class id, error kind, counter or state itself.

A name is *used as vocabulary* where it is compared with (``kind == "gloo_timeout"``, ``in (...)``,
``.isin([...])``), stored in a vocabulary field (``kind=...``, ``{"state": ...}``,
``row["seq_kind"] = ...``) or returned as a verdict. The same word in another role (a column
called ``failed``, a folder called ``fr``, the debug level ``detail``) is not vocabulary and is
left alone. Every such use in the package must go through the enums of ``denpex_nb.vocab``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import denpex_nb
from denpex_nb import vocab

PKG = Path(denpex_nb.__file__).parent

NAMES = {
    str(m): f"{e.__name__}.{m.name}" for e in (vocab.ClassId, vocab.ErrorKind, vocab.SeqKind, vocab.State) for m in e
}
#: fields whose values are vocabulary
FIELDS = {
    "kind",
    "seq_kind",
    "state",
    "class_id",
    "verdict",
    "first_error_kind",
    "last_seq_kind",
    "last_state",
    "error_kind",
    "expected_class",
}


def _strings(node) -> list[ast.Constant]:
    """String constants in ``node`` itself or directly in a literal tuple/list/set it is."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"frozenset", "set", "tuple"}
        and node.args
    ):
        return _strings(node.args[0])
    return []


def _field(node) -> str | None:
    """The field ``node`` reads: ``x["kind"]``, ``x.kind``, ``kind``, ``x.get("kind")``, and the
    same through calls on it (``x["kind"].astype(object)``)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value if isinstance(node.args[0].value, str) else None
        return _field(node.func.value)
    return None


def vocabulary_uses(tree: ast.AST) -> list[ast.Constant]:
    """String constants of ``tree`` used as vocabulary (see the module docstring)."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_field(x) in FIELDS for x in sides):
                for op, right in zip(node.ops, node.comparators):
                    # a field compared with, or looked up in, literal names
                    found += _strings(right) + ([] if isinstance(op, (ast.In, ast.NotIn)) else _strings(node.left))
        elif isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "isin"
                and node.args
                and _field(node.func.value) in FIELDS
            ):
                found += _strings(node.args[0])
            for kw in node.keywords:
                if kw.arg in FIELDS:
                    found += _strings(kw.value)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value in FIELDS:
                    found += _strings(v)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_field(t) in FIELDS for t in targets) and node.value is not None:
                found += _strings(node.value)
        elif isinstance(node, ast.Return) and node.value is not None:
            found += [c for c in _strings(node.value) if c.value in vocab.ClassId._value2member_map_]
    return [c for c in found if c.value in NAMES]


def test_no_module_spells_vocabulary_itself():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path.name == "vocab.py":
            continue
        for c in vocabulary_uses(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(PKG)}:{c.lineno}: {c.value!r} -> use {NAMES[c.value]}")
    assert not offenders, "bare vocabulary strings:\n" + "\n".join(offenders)


def test_the_check_sees_each_kind_of_use():
    code = """
if kind == "gloo_timeout": pass
x = df["kind"].isin(["watchdog_timeout", "other"])
row = {"state": "completed", "file": "fr"}
row["seq_kind"] = "detail"
f(kind="exception", path="fr")
def g(): return "rank-crash"
if row.get("state") in ("failed",): pass
if e["seq_kind"].astype(object) != "fr": pass
y = frame["failed"]              # a column, not the state
if debug == "detail": pass       # the debug level, not the counter
if "signal" in text: pass        # a word searched in a message
if parts[-1] in ("fr", "trace"): pass   # folder names
z = frame["path"].isin(["fr"])
"""
    got = sorted(c.value for c in vocabulary_uses(ast.parse(code)))
    assert got == ["completed", "detail", "exception", "failed", "fr", "gloo_timeout", "rank-crash", "watchdog_timeout"]

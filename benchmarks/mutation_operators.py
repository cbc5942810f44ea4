"""The semantic mutation operators cosmic-ray lacks, written as a cosmic-ray operator provider.

cosmic-ray (8.7.0) brings the comparison flips, the and/or and &/| swaps and the constant +-1
(``core/...``); issue #15 also names min/max swaps and dropped set members and dict entries. They
are written here against cosmic-ray's ``Operator`` interface (``mutation_positions`` /
``mutate`` on parso nodes) and served by :class:`Provider`, an operator provider in the sense of
cosmic-ray's ``cosmic_ray.operator_providers`` entry point. ``bench_mutation.py`` registers the
provider as ``denpex`` in ``cosmic_ray.plugins.OPERATOR_PROVIDERS`` before the session is built:
these files are not an installed distribution, so the entry point itself cannot name them.

A mutant is one edit that changes a decision:

- ``denpex/SwapMinMax``: ``min`` <-> ``max`` where it is called or an attribute (``min(...)``,
  ``s.max()``, ``np.minimum.reduceat``), and the pairs argmin/argmax, idxmin/idxmax,
  nsmallest/nlargest, cummin/cummax, nanmin/nanmax; also the reduction named by a string passed
  alone to ``transform`` / ``agg`` / ``aggregate`` (``.transform("max")``).
- ``denpex/DropSetMember``: one element left out of a set literal (``{a, b}``, ``frozenset({a, b})``)
  or of a tuple or list that is a set of alternatives: the right side of ``in`` / ``not in``, the
  argument of ``.isin`` / ``.startswith`` / ``.endswith``.
- ``denpex/DropDictEntry``: one ``key: value`` entry left out of a dict literal.
"""

from __future__ import annotations

import parso
from cosmic_ray.operators.operator import Example, Operator

_SWAP = {}
for _a, _b in (
    ("min", "max"),
    ("minimum", "maximum"),
    ("argmin", "argmax"),
    ("idxmin", "idxmax"),
    ("nsmallest", "nlargest"),
    ("cummin", "cummax"),
    ("nanmin", "nanmax"),
    ("fmin", "fmax"),
):
    _SWAP[_a], _SWAP[_b] = _b, _a
_REDUCERS = {"transform", "agg", "aggregate"}
_ALTERNATIVES = {"isin", "startswith", "endswith"}


def _replacement(code: str):
    """A node whose code is ``code`` (cosmic-ray only asks a replaced node for its code)."""
    return parso.parse(code)


class SwapMinMax(Operator):
    """min <-> max (and the numpy / pandas pairs) where called or looked up as an attribute."""

    def mutation_positions(self, node):
        if self._target(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):
        assert index == 0 and self._target(node)
        if node.type == "name":
            node.value = _SWAP[node.value]
            return node
        quote = node.value.lstrip("rbuRBU")[0]
        return _replacement(node.prefix + quote + _SWAP[node.value.strip("'\"")] + quote)

    @staticmethod
    def _target(node) -> bool:
        if node.type == "name" and node.value in _SWAP:
            parent, nxt = node.parent, node.get_next_sibling()
            attribute = parent.type == "trailer" and parent.children[0] == "."
            called = parent.type in ("atom_expr", "power") and parent.children[0] is node
            called = called and nxt is not None and nxt.type == "trailer" and nxt.children[0] == "("
            return attribute or called
        if node.type == "string" and node.value.strip("'\"") in ("min", "max") and node.value[:1] in "'\"":
            trailer = node.parent  # ( "max" ) of .transform("max")
            if trailer.type != "trailer" or len(trailer.children) != 3:
                return False
            before = trailer.get_previous_sibling()
            return before is not None and before.type == "trailer" and before.children[-1].value in _REDUCERS
        return False

    @classmethod
    def examples(cls):
        return (
            Example("x = min(a, b)", "x = max(a, b)"),
            Example("x = s.max()", "x = s.min()"),
            Example("x = np.minimum.reduceat(a, b)", "x = np.maximum.reduceat(a, b)"),
            Example('x = g.transform("max")', 'x = g.transform("min")'),
            Example("x = s.idxmin()", "x = s.idxmax()"),
        )


def _items(seq) -> list[list]:
    """The comma-separated items of a dictorsetmaker / testlist_comp node, each a list of children."""
    items, cur = [], []
    for c in seq.children:
        if c.type == "operator" and c.value == ",":
            items.append(cur)
            cur = []
        else:
            cur.append(c)
    if cur:
        items.append(cur)
    return items


def _code(children) -> str:
    return "".join(c.get_code() for c in children)


class _DropItem(Operator):
    """Leave one item out of a literal collection (the literal is an ``atom``: bracket, items, bracket)."""

    def mutation_positions(self, node):
        if self._kind(node) is None:
            return
        items = self._all_items(node)
        for i in self._droppable(node, items):
            yield (items[i][0].start_pos, items[i][-1].end_pos)

    def mutate(self, node, index):
        items = self._all_items(node)
        drop = self._droppable(node, items)[index]
        kept = [it for i, it in enumerate(items) if i != drop]
        open_, close = node.children[0], node.children[-1]
        if not kept:
            empty = {"{": "set()" if self._kind(node) == "set" else "{}", "(": "()", "[": "[]"}[open_.value]
            return _replacement(open_.prefix + empty)
        body = ",".join(_code(it) for it in kept)
        if open_.value == "(" or self._kind(node) == "set" and len(kept) == 1:
            body += ","  # (a,) stays a tuple; {a,} stays a set
        return _replacement(open_.get_code() + body + close.get_code())

    # -- what a literal holds ----------------------------------------------------------------

    @staticmethod
    def _kind(node) -> str | None:
        """'set', 'dict', 'tuple' or 'list' for a literal ``atom`` (None: no literal, or a comprehension)."""
        if node.type != "atom" or len(node.children) != 3:
            return None
        open_, inner = node.children[0], node.children[1]
        if open_.type != "operator" or open_.value not in "{([":
            return None
        if any(c.type in ("comp_for", "sync_comp_for") for c in getattr(inner, "children", ())):
            return None
        if open_.value == "{":
            if inner.type == "dictorsetmaker":
                return "dict" if any(c.type == "operator" and c.value in (":", "**") for c in inner.children) else "set"
            return "set"  # {a}: one element
        if open_.value == "(" and inner.type != "testlist_comp":
            return None  # (a): a parenthesised expression, no tuple
        return "tuple" if open_.value == "(" else "list"

    def _all_items(self, node) -> list[list]:
        inner = node.children[1]
        if inner.type in ("dictorsetmaker", "testlist_comp"):
            return _items(inner)
        return [[inner]]

    def _droppable(self, node, items: list[list]) -> list[int]:
        """The indices in ``items`` (the literal's items) that may be left out."""
        raise NotImplementedError


class DropSetMember(_DropItem):
    """One member of a set literal, or of a tuple/list of alternatives (``in``, ``isin``, ``startswith``)."""

    def _droppable(self, node, items: list[list]) -> list[int]:
        kind = self._kind(node)
        if kind == "set" or (kind in ("tuple", "list") and self._alternatives(node)):
            return list(range(len(items)))
        return []

    @staticmethod
    def _alternatives(node) -> bool:
        parent = node.parent
        if parent.type == "comparison":
            op = parent.children[parent.children.index(node) - 1]
            return op.get_code().split() in (["in"], ["not", "in"])
        if parent.type == "trailer" and parent.children[0] == "(":
            before = parent.get_previous_sibling()
            return before is not None and before.type == "trailer" and before.children[-1].value in _ALTERNATIVES
        return False

    @classmethod
    def examples(cls):
        return (
            Example("x = {a, b, c}", "x = {a, c}", occurrence=1),
            Example("x = {a}", "x = set()"),
            Example("y = x in (a, b)", "y = x in ( b,)"),
            Example('y = s.startswith(("a", "b"))', 'y = s.startswith(("a",))', occurrence=1),
        )


class DropDictEntry(_DropItem):
    """One ``key: value`` entry of a dict literal."""

    def _droppable(self, node, items: list[list]) -> list[int]:
        if self._kind(node) != "dict":
            return []
        return [i for i, it in enumerate(items) if len(it) == 3 and it[1].type == "operator" and it[1].value == ":"]

    @classmethod
    def examples(cls):
        return (
            Example("d = {1: a, 2: b}", "d = {1: a}", occurrence=1),
            Example("d = {1: a}", "d = {}"),
        )


_OPERATORS = {op.__name__: op for op in (SwapMinMax, DropSetMember, DropDictEntry)}


class Provider:
    """cosmic-ray operator provider (the ``cosmic_ray.operator_providers`` interface): name -> class."""

    def __iter__(self):
        return iter(_OPERATORS)

    def __getitem__(self, name):
        return _OPERATORS[name]

"""Rewrites as ``(pattern, rule)`` pairs, and the one small matcher that runs them.

A pattern describes a value and its sources. It matches graph nodes (``graph.Node``) and the
kernel's values (``lowering.evaluate.Val``) alike: anything with an ``op``, ``srcs`` and
``arg``. ``P(ops, *srcs, name=, where=)`` matches a value whose op is one of ``ops`` (any op
where ``ops`` is None) and whose sources match ``srcs`` one for one (left unchecked where no
sources are given), binds it to ``name``, and holds where ``where(value, bound)`` does.
``Same(name)`` matches the very object bound to ``name`` (``d * d``:
``P(Op.MUL, P(..., name="d"), Same("d"))``); ``OneOf`` tries patterns in turn. A value is
matched before its sources, sources left to right, so ``where`` sees every name bound at or
above the value and to its left. A ``Rewrite`` pairs a pattern with a rule: given the
bindings (and the caller's context), the rule returns what replaces the match, or None.
``rewrite`` runs a list of them and returns the first result.
"""
from dataclasses import dataclass


class P:
    """A pattern: a value of one of ``ops`` whose sources match ``srcs``."""
    __slots__ = ("ops", "srcs", "name", "where")

    def __init__(self, ops=None, *srcs, name=None, where=None):
        if ops is not None:
            ops = frozenset(ops) if isinstance(ops, (set, frozenset, tuple)) else frozenset({ops})
        self.ops = ops
        self.srcs, self.name, self.where = srcs, name, where

    def match(self, value, bound):
        if self.ops is not None and value.op not in self.ops:
            return False
        if self.srcs and len(self.srcs) != len(value.srcs):
            return False
        if self.name is not None:
            if self.name in bound and bound[self.name] is not value:
                return False
            bound[self.name] = value
        if not all(p.match(s, bound) for p, s in zip(self.srcs, value.srcs)):
            return False
        return self.where is None or bool(self.where(value, bound))


class Same:
    """The object bound to ``name`` before (by identity)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def match(self, value, bound):
        return bound.get(self.name) is value


class OneOf:
    """The first of ``patterns`` that matches (its bindings only)."""
    __slots__ = ("patterns",)

    def __init__(self, *patterns):
        self.patterns = patterns

    def match(self, value, bound):
        for p in self.patterns:
            trial = dict(bound)
            if p.match(value, trial):
                bound.update(trial)
                return True
        return False


def match(pattern, value, **bound):
    """The bindings of ``pattern`` matched at ``value`` (with ``bound`` given), or None."""
    bound = dict(bound)
    return bound if pattern.match(value, bound) else None


@dataclass(frozen=True)
class Rewrite:
    name: str
    pattern: object
    rule: object            # rule(bindings, context) -> replacement, or None


def rewrite(rules, value, context=None):
    """The replacement of ``value`` by the first of ``rules`` that matches it and whose rule
    gives one, or None."""
    for r in rules:
        bound = match(r.pattern, value)
        if bound is not None:
            out = r.rule(bound, context)
            if out is not None:
                return out
    return None

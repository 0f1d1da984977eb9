"""The traced program: a DAG of hash-consed ``Node``s, one op enum, and a printer.

Equal subexpressions are one object: ``Graph.node`` returns the existing node when the same
(op, dtype, shape, sources, arg) was made before, so traversals can be memoized by identity.
"""
import numpy as np

from .ops import Op, ReduceKind, MOVEMENT


class Node:
    __slots__ = ("op", "dtype", "shape", "srcs", "arg", "loc", "id", "__weakref__")

    def __init__(self, op, dtype, shape, srcs, arg, loc, id_):
        self.op, self.dtype, self.shape, self.srcs, self.arg = op, dtype, shape, srcs, arg
        self.loc, self.id = loc, id_

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        return f"<Node %{self.id} {self.op.name} {_short(self.dtype)}{list(self.shape)}>"


def _short(dtype):
    d = np.dtype(dtype)
    return "bool" if d.kind == "b" else f"{d.kind}{d.itemsize * 8}"


class Graph:
    """Factory and owner of the nodes of one trace."""

    def __init__(self):
        self._cache = {}
        self.inputs = {}        # argument position -> INPUT node

    def node(self, op, dtype, shape, srcs=(), arg=None, loc=None):
        dtype, shape, srcs = np.dtype(dtype), tuple(int(s) for s in shape), tuple(srcs)
        key = (op, dtype, shape, tuple(id(s) for s in srcs), _hashable(arg))
        hit = self._cache.get(key)
        if hit is None:
            hit = Node(op, dtype, shape, srcs, arg, loc, len(self._cache))
            self._cache[key] = hit
        return hit

    def __len__(self):
        return len(self._cache)


def _hashable(arg):
    if isinstance(arg, float) and arg != arg:
        return ("nan",)          # NaN != NaN would defeat hash-consing of NaN constants
    if isinstance(arg, (list, np.ndarray)):
        return tuple(arg)
    return arg


def toposort(roots):
    """Every node reachable from ``roots``, sources before users; iterative (deep graphs)."""
    order, seen = [], set()
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        n, expanded = stack.pop()
        if expanded:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        stack.extend((s, False) for s in reversed(n.srcs) if id(s) not in seen)
    return order


def format_arg(node):
    a = node.arg
    if node.op is Op.REDUCE:
        kind, axes = a
        return f"{kind.value} axes={list(axes)}"
    if node.op is Op.CAST:
        return str(np.dtype(a))
    if node.op in MOVEMENT:
        return str(a)
    if node.op is Op.INPUT:
        return f"arg{a}"
    return "" if a is None else repr(a)


def format_graph(outputs):
    """A readable listing of the DAG that computes ``outputs`` (one node a line)."""
    lines = []
    for n in toposort(outputs):
        srcs = ", ".join(f"%{s.id}" for s in n.srcs)
        arg = format_arg(n)
        lines.append(f"%{n.id} = {n.op.name:<8} {_short(n.dtype)}{list(n.shape)}"
                     f"{' (' + srcs + ')' if srcs else ''}{'  ' + arg if arg else ''}")
    outs = ", ".join(f"%{o.id}" for o in outputs)
    lines.append(f"return {outs}")
    return "\n".join(lines)


__all__ = ["Node", "Graph", "toposort", "format_graph", "Op", "ReduceKind"]

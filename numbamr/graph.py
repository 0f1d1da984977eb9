"""The traced program: a DAG of hash-consed ``Node``s, one op enum, and a printer.

Equal subexpressions are one object: ``Graph.node`` returns the existing node when the same
(op, dtype, shape, sources, arg) was made before, so traversals can be memoized by identity.
"""
import math

import numpy as np

from . import dtypes
from .errors import VerifyError
from .ops import (Op, ReduceKind, UNARY, BINARY, TERNARY, ALU, COMPARE, MOVEMENT, LEAF,
                  FLOAT_ONLY)


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
        key = (op, dtype, shape, tuple(id(s) for s in srcs), hashable_arg(arg))
        hit = self._cache.get(key)
        if hit is None:
            hit = Node(op, dtype, shape, srcs, arg, loc, len(self._cache))
            self._cache[key] = hit
        return hit

    def __len__(self):
        return len(self._cache)


def hashable_arg(arg):
    """``arg`` as a key of hash-consing (here and for the lowering's values)."""
    if isinstance(arg, float) and arg != arg:
        return ("nan",)          # NaN != NaN would defeat hash-consing of NaN constants
    if isinstance(arg, float) and arg == 0:
        return ("zero", math.copysign(1.0, arg))    # 0.0 == -0.0, but they are two values
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


# ---- verifier: the invariants the scheduler and the lowering rely on -------------------
ARITY = {**{op: 0 for op in LEAF}, **{op: 1 for op in UNARY | MOVEMENT | {Op.REDUCE}},
         **{op: 2 for op in BINARY}, **{op: 3 for op in TERNARY}}
ARG_KINDS = (ReduceKind.ARGMAX, ReduceKind.ARGMIN)


def _reduce_problem(n):
    kind, axes = n.arg
    src = n.srcs[0]
    if not all(0 <= a < src.ndim for a in axes) or list(axes) != sorted(set(axes)):
        return f"axes {axes} are not sorted distinct axes of {list(src.shape)}"
    if n.shape != tuple(1 if i in axes else s for i, s in enumerate(src.shape)):
        return f"shape {list(n.shape)} is not {list(src.shape)} with axes {axes} kept as 1"
    want = np.dtype(np.int64) if kind in ARG_KINDS else src.dtype
    if n.dtype != want:
        return f"a {kind.value} reduction of dtype {n.dtype}, not {want}"
    return None


def _movement_problem(n):
    src = n.srcs[0]
    if n.op is Op.RESHAPE and n.size != src.size:
        return f"reshapes {src.size} elements into {n.size}"
    if n.op is Op.PERMUTE and (sorted(n.arg) != list(range(src.ndim)) or
                               n.shape != tuple(src.shape[p] for p in n.arg)):
        return f"permutation {n.arg} of {list(src.shape)} is not shape {list(n.shape)}"
    if n.op is Op.EXPAND and (src.ndim != n.ndim or
                              any(a not in (1, b) for a, b in zip(src.shape, n.shape))):
        return f"expands {list(src.shape)} to {list(n.shape)}"
    if n.op is Op.SHRINK and (src.ndim != n.ndim or
                              any(a > b for a, b in zip(n.shape, src.shape))):
        return f"shrinks {list(src.shape)} to {list(n.shape)}"
    return None


def _problem(n):
    """What is wrong with node ``n`` given its sources (None when nothing is)."""
    if n.op not in ARITY:
        return "the op of a lowered value, not of a graph"
    if len(n.srcs) != ARITY[n.op]:
        return f"{len(n.srcs)} sources, {n.op.name} takes {ARITY[n.op]}"
    if n.op in ALU and any(s.shape != n.shape for s in n.srcs):
        return f"sources of shapes {[list(s.shape) for s in n.srcs]}, not {list(n.shape)}"
    if n.op in COMPARE and n.dtype.kind != "b":
        return f"a comparison of dtype {n.dtype}"
    if n.op in FLOAT_ONLY and not dtypes.is_float(n.dtype):
        return f"computed in floating point, but of dtype {n.dtype}"
    if n.op is Op.WHERE and n.srcs[0].dtype.kind != "b":
        return f"a condition of dtype {n.srcs[0].dtype}"
    if n.op is Op.REDUCE:
        return _reduce_problem(n)
    if n.op is Op.ARANGE and (n.ndim != 1 or n.dtype != np.dtype(np.int64)):
        return f"an arange of shape {list(n.shape)} and dtype {n.dtype}, not int64 (n,)"
    if n.op in MOVEMENT:
        return _movement_problem(n)
    return None


def verify_graph(outputs):
    """Raise VerifyError at the first node of the DAG that breaks an invariant of its op
    family (sources, shapes, dtypes); return ``outputs``."""
    for n in toposort(outputs):
        why = _problem(n)
        if why is not None:
            raise VerifyError(f"graph node {n!r}: {why}", n.loc)
    return outputs


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


__all__ = ["Node", "Graph", "toposort", "verify_graph", "format_graph", "Op", "ReduceKind"]

"""Evaluation of graph nodes at symbolic indices: the values (``Val``) of one kernel.

A graph node is evaluated at an index tuple (``symbolic.Expr``s) to a ``Val``, hash-consed
by ``ValBuilder``. Every reduce met on the way becomes a ``ReduceInstance`` keyed by the
index it is read at (the row variables it depends on), with a loop group over its reduced
axes; loops over the same extent share one group, hence one loop variable. A reduce whose
key would depend on a loop variable is *nested* in that loop: one kernel cannot hold it. The
evaluator either raises ``FusionError(node=...)`` there (building a kernel) or, asked to
collect them, records it and reads its value as from memory, as the kernel will once an
earlier kernel has materialized it (the analysis the scheduler partitions by, ``fusion.py``).
"""
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..errors import FusionError
from ..graph import hashable_arg
from ..ops import Op, ReduceKind, ALU, MOVEMENT
from . import symbolic as sym
from .narrow import NARROWED, narrow_compare

# ops whose result is one of their operands' values, or an integer: already representable
# in a narrow float dtype when the operands are
SAME_VALUES = {Op.NEG, Op.ABS, Op.MAX, Op.MIN, Op.WHERE, Op.FLOOR, Op.CEIL}


class Val:
    """A per-element value of the kernel (hash-consed by ``ValBuilder``)."""
    __slots__ = ("op", "dtype", "srcs", "arg", "id")

    def __init__(self, op, dtype, srcs, arg, id_):
        self.op, self.dtype, self.srcs, self.arg, self.id = op, dtype, srcs, arg, id_

    def __repr__(self):
        return f"<Val {self.id} {self.op.name} {self.dtype}>"


@dataclass(eq=False)
class LoopGroup:
    """A loop domain: the dims it walks (row-major) and its one flat loop variable."""
    id: int
    dims: tuple
    var: sym.Var

    @property
    def extent(self):
        return int(np.prod(self.dims, dtype=np.int64))

    def index(self):
        return sym.unflatten(sym.lift(self.var), self.dims)


@dataclass(eq=False)
class ReduceInstance:
    id: int
    kind: ReduceKind
    dtype: np.dtype            # accumulator dtype (compute dtype; int64 for arg-reduces)
    value_dtype: np.dtype      # dtype of the reduced values (differs for arg-reduces)
    group: LoopGroup
    body: Val                  # the value reduced, in terms of the group's loop variable
    key: tuple                 # index Exprs (row variables only) it is computed for
    node: object               # the graph node (for error messages)
    deps: list = field(default_factory=list)
    depth: int = 0

    @property
    def name(self):
        return f"{self.kind.value}{self.id}"


class ValBuilder:
    def __init__(self):
        self._cache = {}

    def make(self, op, dtype, srcs=(), arg=None):
        dtype = np.dtype(dtype)
        key = (op, dtype, tuple(id(s) for s in srcs), _arg_key(arg))
        v = self._cache.get(key)
        if v is None:
            v = Val(op, dtype, tuple(srcs), arg, len(self._cache))
            self._cache[key] = v
        return v


def _arg_key(arg):
    if isinstance(arg, ReduceInstance):
        return ("red", arg.id)
    return hashable_arg(arg)


# the arg of a DIV Val whose divisor is broadcast across the quotient: lowered as a
# multiplication by the divisor's reciprocal (when the ``reciprocal`` option is on)
BY_RECIPROCAL = "by_reciprocal"


def divides_by_broadcast(node):
    """Is the divisor of DIV ``node`` a computed value broadcast along an axis of the quotient
    (a row's sum, ``sqrt(var + eps)``)? Decided from the program alone, never from the kernel
    the division lands in: a quotient recomputed in two kernels must round the same in both
    (``d - d.min()`` must not turn negative because the min's kernel divided and this one
    multiplied). Constant divisors are divided, as NumPy does: ``sum / n`` of a constant row
    is then exactly its value, so its deviations are exactly 0."""
    d, broadcast = node.srcs[1], False
    while d.op in MOVEMENT or d.op is Op.CAST:
        broadcast |= d.op is Op.EXPAND and d.srcs[0].size < d.size
        d = d.srcs[0]
    return broadcast and d.op is not Op.CONST


class Evaluator:
    """Evaluates graph nodes at index tuples, creating reduce instances on the way.

    ``collect``: a nested reduce is recorded in ``nested`` (each node once, in the order
    met) and read from then on as a value in memory, wherever it is met, as it will be once
    an earlier kernel has stored it; without it, a nested reduce raises ``FusionError``."""

    def __init__(self, layouts, collect=False):
        self.vb = ValBuilder()
        self.layouts = layouts            # input pos -> (strides, offset)
        self.memo = {}
        self.instances = {}               # (node id, key) -> ReduceInstance
        self.groups = {}                  # dims -> LoopGroup
        self.loop_vars = set()            # every loop's variable: none may key a reduce
        self.bounds = {}                  # Val id -> (lo, hi) of an integer value, or None
        self.nested = [] if collect else None
        self._in_memory = set()           # ids of the nested nodes (collect)

    def group(self, dims):
        g = self.groups.get(dims)
        if g is None:
            var = sym.Var(f"q{len(self.groups)}", int(np.prod(dims)))
            g = LoopGroup(len(self.groups), dims, var)
            self.groups[dims] = g
            self.loop_vars.add(var)
        return g

    def compute(self, v):
        """Values are held in their compute dtype: float16 is computed as float32."""
        cd = dtypes.compute_dtype(v.dtype)
        return v if cd == v.dtype else self.vb.make(Op.CAST, cd, (v,), cd)

    def row_level(self, val):
        """Is ``val`` the same at every position of every loop (a value of the row)?"""
        return not (val_vars(val) & self.loop_vars)

    def ev(self, node, idx):
        if node.id in self._in_memory:
            return self._from_memory(node, idx)
        key = (node.id, tuple(idx))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._ev(node, idx)
            self.memo[key] = hit
        return hit

    def _ev(self, node, idx):
        op, vb = node.op, self.vb
        if op in (Op.INPUT, Op.BUFFER):
            strides, offset = self.layouts[node.arg]
            addr = sym.lift(offset)
            for i, s in zip(idx, strides):
                addr = addr + i * s
            return self.compute(vb.make(Op.LOAD, node.dtype, (), (node.arg, addr)))
        if op is Op.ARANGE:     # the element's own index along the arange's axis
            return vb.make(Op.INDEX, dtypes.INT64, (), sym.lift(idx[0]))
        if op is Op.CONST:      # a float16 constant is its float16 value (NumPy's)
            cd = dtypes.compute_dtype(node.dtype)
            value = np.array(node.arg).astype(node.dtype).astype(cd).item()
            return vb.make(Op.CONST, cd, (), value)
        if op is Op.CAST:
            src = self.ev(node.srcs[0], idx)
            if src.dtype == node.dtype:
                return src
            v = vb.make(Op.CAST, node.dtype, (src,), node.dtype)
            return self.compute(v)
        if op in ALU:
            srcs = [self.compute(self.ev(s, idx)) for s in node.srcs]
            if op in NARROWED:
                srcs = narrow_compare(vb, srcs, self.row_level, self.bounds)
            arg = BY_RECIPROCAL if op is Op.DIV and divides_by_broadcast(node) else None
            v = vb.make(op, dtypes.compute_dtype(node.dtype), srcs, arg)
            if v.dtype == node.dtype or op in SAME_VALUES:
                return v
            # NumPy rounds every float16 (bfloat16) result to its dtype; so must a kernel,
            # or a value used twice stops matching itself (x - x.min() below 0)
            return self.compute(vb.make(Op.CAST, node.dtype, (v,), node.dtype))
        if op is Op.EXPAND:
            src = node.srcs[0]
            return self.ev(src, [sym.lift(0) if s == 1 and n != 1 else i
                                 for i, s, n in zip(idx, src.shape, node.shape)])
        if op is Op.PERMUTE:
            src_idx = [None] * len(idx)
            for k, p in enumerate(node.arg):
                src_idx[p] = idx[k]
            return self.ev(node.srcs[0], src_idx)
        if op is Op.RESHAPE:
            src = node.srcs[0]
            return self.ev(src, sym.unflatten(sym.flatten(idx, node.shape), src.shape))
        if op is Op.SHRINK:
            starts, steps = node.arg
            return self.ev(node.srcs[0], [sym.lift(st) + i * sp
                                          for i, st, sp in zip(idx, starts, steps)])
        if op is Op.REDUCE:
            return self._reduce(node, idx)
        raise AssertionError(f"cannot evaluate {op}")

    def _reduce(self, node, idx):
        kind, axes = node.arg
        key = tuple(i for k, i in enumerate(idx) if k not in axes)
        if key and set().union(*[k.vars() for k in key]) & self.loop_vars:
            if self.nested is None:
                raise nested_error(node)
            self.nested.append(node)
            self._in_memory.add(node.id)
            return self._from_memory(node, idx)
        inst = self.instances.get((node.id, key))
        if inst is None:
            src = node.srcs[0]
            dims = tuple(src.shape[a] for a in axes)
            g = self.group(dims)
            g_idx = iter(g.index())
            body_idx = [next(g_idx) if k in axes else i for k, i in enumerate(idx)]
            body = self.compute(self.ev(src, body_idx))
            if kind in (ReduceKind.ARGMAX, ReduceKind.ARGMIN):
                acc_dt = dtypes.INT64
            else:
                acc_dt = body.dtype
            inst = ReduceInstance(len(self.instances), kind, acc_dt, body.dtype, g, body, key,
                                  node)
            self.instances[(node.id, key)] = inst
        return self.vb.make(Op.REDUCED, inst.dtype, (), inst)

    def _from_memory(self, node, idx):
        """A nested reduce's value read back from a temporary of its shape (collect)."""
        addr = sym.flatten(idx, node.shape)
        return self.compute(self.vb.make(Op.LOAD, node.dtype, (), (("nested", node.id), addr)))


def nested_error(node):
    """The error of reduce ``node`` nested in another loop (the scheduler materializes it)."""
    return FusionError(
        f"this {node.arg[0].value} reduction is used inside another loop at a different "
        "index (a reduction over other axes, or a reduction result re-indexed by a loop): "
        "that needs more than one kernel", node.loc, node=node)


def walk(root):
    """Every Val reachable from ``root`` without entering reduce bodies, sources first."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        v, done = stack.pop()
        if done:
            order.append(v)
            continue
        if v.id in seen:
            continue
        seen.add(v.id)
        stack.append((v, True))
        stack.extend((s, False) for s in reversed(v.srcs))
    return order


def val_vars(v, _memo=None):
    """Index variables a Val depends on (reduce results count as row-level)."""
    memo = {} if _memo is None else _memo
    out = set()
    for w in walk(v):
        if w.op is Op.LOAD:
            memo[w.id] = w.arg[1].vars()
        elif w.op is Op.INDEX:
            memo[w.id] = w.arg.vars()
        else:
            s = set()
            for src in w.srcs:
                s |= memo[src.id]
            memo[w.id] = s
    out |= memo[v.id]
    return out

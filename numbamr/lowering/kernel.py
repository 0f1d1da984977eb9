"""Kernel analysis: a group of outputs becomes one iteration space and a list of reduces.

The outputs are evaluated symbolically at index variables. Every reduce met on the way
becomes a ``ReduceInstance`` keyed by the index it is read at; the variables those keys use
are the kernel's *row* (parallel) axes P, mapped to blocks. Every reduce loops over its own
reduced axes, and every output over its axes outside P; loops over the same extent share one
canonical loop variable, so a value read at the same address in two loops is the same ``Val``
(and stays in registers). A reduce whose key would depend on another loop's variable is a
nested reduction, which one kernel cannot hold: that raises ``FusionError``.
"""
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..errors import FusionError
from ..graph import hashable_arg, toposort
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


@dataclass(eq=False)
class Store:
    output: int                # output position
    value: Val
    addr: sym.Expr
    dtype: np.dtype            # the output buffer's dtype
    group: object              # LoopGroup, or None for one write per row


def _stored_value(value, dtype):
    """The value a store of ``dtype`` writes: a float16 result is held as float32 after its
    rounding (``CAST f32 (CAST f16 x)``); storing the rounded float16 itself skips a
    conversion back and forth per element (same bits)."""
    if value.op is Op.CAST and value.srcs[0].op is Op.CAST and \
            value.srcs[0].dtype == np.dtype(dtype):
        return value.srcs[0]
    return value


@dataclass(eq=False)
class Kernel:
    """What one fused kernel computes, before any choice of thread layout."""
    name: str
    row: sym.Var               # flat row index over pshape
    pshape: tuple
    groups: list
    reduces: list              # dependency order: deeper (earlier) reduces first
    stores: list
    inputs: dict               # buffer position -> (dtype, name)
    outputs: list              # (dtype, shape) per output position
    arg_names: dict = field(default_factory=dict)
    generic: bool = False       # its code is the same for every row count (a parameter)

    @property
    def nrows(self):
        """The rows of this kernel's launch."""
        return int(np.prod(self.pshape, dtype=np.int64))

    @property
    def layout_rows(self):
        """The row count the layout is chosen for: a generic kernel's code, hence its
        layout, cannot depend on the rows of one launch."""
        return GENERIC_ROWS if self.generic else self.nrows


# A kernel generic in its rows is laid out as for this many rows (enough to fill the GPU),
# and its row index may range up to ROW_BOUND: nothing in its code depends on the count.
GENERIC_ROWS = 1 << 16
ROW_BOUND = 1 << 31


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


# ======================================================================================
# evaluation of graph nodes at symbolic indices
# ======================================================================================

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


class _Evaluator:
    """Evaluates graph nodes at index tuples, creating reduce instances on the way."""

    def __init__(self, layouts, loop_vars_forbidden_in_keys):
        self.vb = ValBuilder()
        self.layouts = layouts            # input pos -> (strides, offset)
        self.memo = {}
        self.instances = {}               # (node id, key) -> ReduceInstance
        self.groups = {}                  # dims -> LoopGroup
        self.forbidden = loop_vars_forbidden_in_keys
        self.bounds = {}                  # Val id -> (lo, hi) of an integer value, or None

    def group(self, dims):
        g = self.groups.get(dims)
        if g is None:
            var = sym.Var(f"q{len(self.groups)}", int(np.prod(dims)))
            g = LoopGroup(len(self.groups), dims, var)
            self.groups[dims] = g
        return g

    def compute(self, v):
        """Values are held in their compute dtype: float16 is computed as float32."""
        cd = dtypes.compute_dtype(v.dtype)
        return v if cd == v.dtype else self.vb.make(Op.CAST, cd, (v,), cd)

    def row_level(self, val):
        """Is ``val`` the same at every position of every loop (a value of the row)?"""
        loops = {g.var for g in self.groups.values()}
        return not (val_vars(val) & loops)

    def ev(self, node, idx):
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
        bad = set().union(*[k.vars() for k in key]) & self.forbidden if key else set()
        if bad:
            raise FusionError(
                f"this {kind.value} reduction is used inside another loop at a different "
                "index (a reduction over other axes, or a reduction result re-indexed by a "
                "loop): that needs more than one kernel", node.loc, node=node)
        inst = self.instances.get((node.id, key))
        if inst is None:
            src = node.srcs[0]
            dims = tuple(src.shape[a] for a in axes)
            g = self.group(dims)
            self.forbidden.add(g.var)
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


# ======================================================================================
# building a kernel
# ======================================================================================

def _strip_output(node, generic=False):
    """Peel trailing RESHAPE/PERMUTE off an output; returns (inner node, index -> outer index).
    ``generic``: the index's outermost part is not reduced modulo its extent (it is in range;
    a generic kernel's code must not name its row count)."""
    chain = []
    while node.op in (Op.RESHAPE, Op.PERMUTE):
        chain.append(node)
        node = node.srcs[0]

    def outer_index(idx):
        for m in reversed(chain):
            src_shape = m.srcs[0].shape
            if m.op is Op.PERMUTE:
                idx = [idx[p] for p in m.arg]
            else:
                idx = sym.unflatten(sym.flatten(idx, src_shape), m.shape,
                                    outermost_whole=generic)
        return idx
    return node, outer_index


def _broadcast(shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _row_axes(inner, layouts):
    """Axes of ``inner`` the reduces it reads are keyed by (its row axes)."""
    ovars = [sym.var(f"o{i}", s) for i, s in enumerate(inner.shape)]
    probe = _Evaluator(layouts, set())
    probe.ev(inner, ovars)
    key_vars = set()
    for inst in probe.instances.values():
        for k in inst.key:
            key_vars |= k.vars()
    axes = [i for i, v in enumerate(ovars) if v.terms and v.terms[0][0] in key_vars]
    return axes, bool(probe.instances)


def _plan_rows(stripped, layouts):
    """The kernel's row shape and, per output, which of its axes are row axes.

    Outputs that read reduces must agree on the sizes of their row axes (in order): the i-th
    row axis of each is the kernel's i-th row axis. Outputs without reduces take the row
    shape as their leading axes.
    """
    plans = [_row_axes(inner, layouts) for inner, _ in stripped]
    row_shapes = {tuple(inner.shape[a] for a in axes)
                  for (inner, _), (axes, has) in zip(stripped, plans) if has}
    if len(row_shapes) > 1:
        raise FusionError("outputs reduce to different row shapes " +
                          ", ".join(str(r) for r in sorted(row_shapes)) +
                          ", so they need separate kernels", stripped[0][0].loc)
    if not row_shapes:           # elementwise only: rows are all axes but the last
        fshape = _broadcast([inner.shape for inner, _ in stripped])
        if fshape is None:
            raise FusionError("outputs of shapes " + ", ".join(
                str(inner.shape) for inner, _ in stripped) + " need separate kernels",
                stripped[0][0].loc)
        real = [i for i, n in enumerate(fshape) if n > 1]
        pshape = tuple(fshape[i] for i in real[:-1])
        out = []
        for inner, _ in stripped:
            off = len(fshape) - len(inner.shape)
            out.append([a - off for a in real[:-1] if a - off >= 0 and inner.shape[a - off] > 1])
        if any(len(axes) != len(pshape) for axes in out) and pshape:
            raise FusionError("elementwise outputs of shapes " + ", ".join(
                str(inner.shape) for inner, _ in stripped) + " need separate kernels",
                stripped[0][0].loc)
        return pshape, out
    pshape = row_shapes.pop()
    out = []
    for (inner, _), (axes, has) in zip(stripped, plans):
        if not has:
            real = [i for i, n in enumerate(inner.shape) if n > 1]
            axes = real[:len(pshape)]
            if tuple(inner.shape[a] for a in axes) != pshape:
                raise FusionError(f"an output of shape {inner.shape} reads no reduction and its "
                                  f"leading axes are not the row axes {pshape} of the others: "
                                  "it needs a separate kernel", inner.loc)
        out.append(axes)
    return pshape, out


def build_kernel(outputs, layouts, out_layouts, name="kernel", arg_names=None, generic=False):
    """Analyze ``outputs`` (graph nodes) as one kernel.

    ``layouts``: input position -> (strides, offset) in elements of its buffer;
    ``out_layouts``: per output, (strides, offset) of the output buffer; ``generic``: the
    kernel's code must not depend on its row count (the row index's range is ROW_BOUND).
    """
    stripped = [_strip_output(o, generic) for o in outputs]
    pshape, row_axes = _plan_rows(stripped, layouts)
    row = sym.Var("row", ROW_BOUND if generic else max(1, int(np.prod(pshape, dtype=np.int64))))
    row_index = sym.unflatten(sym.lift(row), pshape, outermost_whole=generic)
    ev = _Evaluator(layouts, set())
    stores = []
    for pos, ((inner, outer_index), out, axes) in enumerate(zip(stripped, outputs, row_axes)):
        idx = [sym.lift(0)] * len(inner.shape)
        for a, e in zip(axes, row_index):
            idx[a] = e
        loop_axes = [a for a, n in enumerate(inner.shape) if n > 1 and a not in axes]
        group = None
        if loop_axes:
            group = ev.group(tuple(inner.shape[a] for a in loop_axes))
            ev.forbidden.add(group.var)
            for a, e in zip(loop_axes, group.index()):
                idx[a] = e
        value = _stored_value(ev.ev(inner, idx), out.dtype)
        strides, offset = out_layouts[pos]
        addr = sym.lift(offset)
        for i, s in zip(outer_index(idx), strides):
            addr = addr + i * s
        stores.append(Store(pos, value, addr, out.dtype, group))
    reduces = _order_reduces(list(ev.instances.values()))
    names = arg_names or {}
    inputs = {key: (n.dtype, names.get(key, key if isinstance(key, str) else f"in{key}"))
              for key, n in _input_nodes(outputs).items()}
    return Kernel(name, row, pshape, list(ev.groups.values()), reduces, stores, inputs,
                  [(o.dtype, o.shape) for o in outputs], dict(arg_names or {}), generic)


def _input_nodes(outputs):
    return {n.arg: n for n in toposort(outputs) if n.op in (Op.INPUT, Op.BUFFER)}


def _order_reduces(instances):
    """Reduces in dependency order, deepest first: a reduce comes after all those it reads."""
    by_id = {i.id: i for i in instances}
    for inst in instances:
        inst.deps = sorted({v.arg.id for v in walk(inst.body) if v.op is Op.REDUCED})
    depth = {}

    def depth_of(i):
        if i not in depth:
            depth[i] = 1 + max((depth_of(d) for d in by_id[i].deps), default=-1)
        return depth[i]
    for inst in instances:
        inst.depth = depth_of(inst.id)
    return sorted(instances, key=lambda i: (i.depth, i.id))


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


def format_kernel(k):
    """A readable summary of the analysis (row axes, loops, reduces, stores)."""
    lines = [f"kernel {k.name}: rows {k.pshape} ({k.nrows})"]
    for g in k.groups:
        lines.append(f"  loop {g.var.name}: dims {g.dims} (extent {g.extent})")
    for r in k.reduces:
        deps = ", ".join(f"#{d}" for d in r.deps) or "-"
        lines.append(f"  reduce #{r.id} {r.kind.value} over {r.group.var.name} "
                     f"depth {r.depth} reads {deps} -> {r.dtype}")
    for s in k.stores:
        where = s.group.var.name if s.group else "row"
        lines.append(f"  store out{s.output}[{s.addr}] ({s.dtype}) per {where}")
    return "\n".join(lines)

"""What one kernel can hold: the facts the scheduler partitions outputs by, found without
building a kernel.

An output is first evaluated alone at free indices (``probe_output``). That finds the
reductions nested in another reduction's loop (read at an index of that loop: one kernel
cannot hold them, an earlier kernel must compute them) and the axes its reductions are keyed
by: its *row axes*, the kernel's rows. Outputs can share a kernel when their row axes agree
(``plan_rows``). Laid over its rows (the row index and its own loop's variable in place of
the free indices), a reduction may still turn out nested, where the index arithmetic of
those variables does not simplify as the free ones did (``nested_in_rows``). These facts
depend on the output alone, so the scheduler keeps them per output node, and every kernel
it decides on is built once (``kernel.build_kernel``, which raises ``FusionError`` where
the same facts say no).
"""
from dataclasses import dataclass

import numpy as np

from ..errors import FusionError
from ..ops import Op
from . import symbolic as sym
from .evaluate import Evaluator

# A kernel generic in its rows is laid out as for this many rows (enough to fill the GPU),
# and its row index may range up to ROW_BOUND: nothing in its code depends on the count.
GENERIC_ROWS = 1 << 16
ROW_BOUND = 1 << 31


@dataclass(eq=False)
class OutputFacts:
    """What the analysis finds for one output evaluated alone (``probe_output``)."""
    output: object          # the graph node
    inner: object           # ``output`` without its trailing RESHAPE/PERMUTE
    outer_index: object     # (index of ``inner``, generic) -> index of ``output``
    nested: list            # reductions nested in another reduction's loop, in the order met
    row_axes: list          # axes of ``inner`` its reductions are keyed by (none nested)
    reads_reduces: bool
    in_rows: list = None    # nested_in_rows(), once asked for

    @property
    def row_shape(self):
        return tuple(self.inner.shape[a] for a in self.row_axes)


@dataclass
class RowPlan:
    """The rows a set of outputs shares: the kernel's row shape and, per output, which axes
    of its inner node are the row axes; or ``problem``, why they need separate kernels."""
    pshape: tuple = None
    axes: list = None
    problem: str = None
    loc: object = None

    def error(self):
        return FusionError(self.problem, self.loc)


def strip_output(node):
    """Peel trailing RESHAPE/PERMUTE off an output; returns (inner node, outer_index), where
    ``outer_index(idx, generic)`` maps an index of the inner node to one of ``node``.
    ``generic``: the index's outermost part is not reduced modulo its extent (it is in range;
    a generic kernel's code must not name its row count)."""
    chain = []
    while node.op in (Op.RESHAPE, Op.PERMUTE):
        chain.append(node)
        node = node.srcs[0]

    def outer_index(idx, generic=False):
        for m in reversed(chain):
            src_shape = m.srcs[0].shape
            if m.op is Op.PERMUTE:
                idx = [idx[p] for p in m.arg]
            else:
                idx = sym.unflatten(sym.flatten(idx, src_shape), m.shape,
                                    outermost_whole=generic)
        return idx
    return node, outer_index


def probe_output(output, layouts):
    """``output`` evaluated alone at free indices: its nested reductions (each read as from
    memory after it is met, as it will be once materialized) and, when there are none, its
    row axes."""
    inner, outer_index = strip_output(output)
    ovars = [sym.var(f"o{i}", s) for i, s in enumerate(inner.shape)]
    probe = Evaluator(layouts, collect=True)
    probe.ev(inner, ovars)
    key_vars = set()
    for inst in probe.instances.values():
        for k in inst.key:
            key_vars |= k.vars()
    axes = [i for i, v in enumerate(ovars) if v.terms and v.terms[0][0] in key_vars]
    return OutputFacts(output, inner, outer_index, probe.nested, axes, bool(probe.instances))


def nested_in_rows(facts, layouts, generic=False):
    """The reductions of an output without nested ones (``facts``) that are nested once its
    indices are the row index of its own row shape and its loop's variable, in the order
    met. Any kernel it shares has that row shape (``plan_rows``), so this is the output's
    own fact too."""
    if facts.in_rows is None:
        facts.in_rows = []
        if facts.reads_reduces:
            ev = Evaluator(layouts, collect=True)
            evaluate_at_rows(ev, [facts], RowPlan(facts.row_shape, [facts.row_axes]), generic)
            facts.in_rows = ev.nested
    return facts.in_rows


def row_variable(pshape, generic):
    return sym.Var("row", ROW_BOUND if generic else
                   max(1, int(np.prod(pshape, dtype=np.int64))))


def evaluate_at_rows(ev, facts, plan, generic):
    """Each output's inner node evaluated by ``ev`` at the kernel's row index (``plan``)
    and its own loop's variable: the row variable and, per output, (value, index, loop
    group or None)."""
    row = row_variable(plan.pshape, generic)
    row_index = sym.unflatten(sym.lift(row), plan.pshape, outermost_whole=generic)
    out = []
    for f, axes in zip(facts, plan.axes):
        shape = f.inner.shape
        idx = [sym.lift(0)] * len(shape)
        for a, e in zip(axes, row_index):
            idx[a] = e
        loop_axes = [a for a, n in enumerate(shape) if n > 1 and a not in axes]
        group = None
        if loop_axes:
            group = ev.group(tuple(shape[a] for a in loop_axes))
            for a, e in zip(loop_axes, group.index()):
                idx[a] = e
        out.append((ev.ev(f.inner, idx), idx, group))
    return row, out


def plan_rows(facts):
    """The ``RowPlan`` of outputs without nested reductions (their ``OutputFacts``).

    Outputs that read reduces must agree on the sizes of their row axes (in order): the i-th
    row axis of each is the kernel's i-th row axis. Outputs without reduces take the row
    shape as their leading axes.
    """
    inners = [f.inner for f in facts]
    row_shapes = {f.row_shape for f in facts if f.reads_reduces}
    if len(row_shapes) > 1:
        return RowPlan(problem="outputs reduce to different row shapes " +
                       ", ".join(str(r) for r in sorted(row_shapes)) +
                       ", so they need separate kernels", loc=inners[0].loc)
    if not row_shapes:
        return _elementwise_rows(inners)
    pshape = row_shapes.pop()
    out = []
    for f in facts:
        axes = f.row_axes
        if not f.reads_reduces:
            real = [i for i, n in enumerate(f.inner.shape) if n > 1]
            axes = real[:len(pshape)]
            if tuple(f.inner.shape[a] for a in axes) != pshape:
                return RowPlan(problem=f"an output of shape {f.inner.shape} reads no reduction "
                               f"and its leading axes are not the row axes {pshape} of the "
                               "others: it needs a separate kernel", loc=f.inner.loc)
        out.append(axes)
    return RowPlan(pshape, out)


def _elementwise_rows(inners):
    """Outputs that read no reduce: rows are all axes but the last of their broadcast."""
    shapes = ", ".join(str(inner.shape) for inner in inners)
    fshape = _broadcast([inner.shape for inner in inners])
    if fshape is None:
        return RowPlan(problem=f"outputs of shapes {shapes} need separate kernels",
                       loc=inners[0].loc)
    real = [i for i, n in enumerate(fshape) if n > 1]
    pshape = tuple(fshape[i] for i in real[:-1])
    out = []
    for inner in inners:
        off = len(fshape) - len(inner.shape)
        out.append([a - off for a in real[:-1] if a - off >= 0 and inner.shape[a - off] > 1])
    if any(len(axes) != len(pshape) for axes in out) and pshape:
        return RowPlan(problem=f"elementwise outputs of shapes {shapes} need separate kernels",
                       loc=inners[0].loc)
    return RowPlan(pshape, out)


def _broadcast(shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


class FactsCache:
    """The facts of output nodes, each found once per node while one function is scheduled
    (a node's facts depend on it alone: hash-consed nodes are the same node wherever met;
    ``layouts`` must place every buffer it reads, the same way each time)."""

    def __init__(self, generic=False):
        self.generic = generic
        self._facts = {}            # id(node) -> (node, OutputFacts); the node keeps the id
        self.evaluations = 0        # outputs evaluated (probes and evaluations at rows)

    def of(self, node, layouts):
        hit = self._facts.get(id(node))
        if hit is None:
            self.evaluations += 1
            hit = self._facts[id(node)] = (node, probe_output(node, layouts))
        return hit[1]

    def in_rows(self, node, layouts):
        facts = self.of(node, layouts)
        if facts.in_rows is None and facts.reads_reduces and not facts.nested:
            self.evaluations += 1
        return nested_in_rows(facts, layouts, self.generic)

    def plan_rows(self, nodes, layouts):
        return plan_rows([self.of(n, layouts) for n in nodes])

    def fit_one_kernel(self, nodes, layouts):
        """Can one kernel compute ``nodes``: none has a nested reduction, their rows agree,
        and none has a reduction nested once laid over them?"""
        if any(self.of(n, layouts).nested for n in nodes):
            return False
        if self.plan_rows(nodes, layouts).problem:
            return False
        return not any(self.in_rows(n, layouts) for n in nodes)

"""Kernel analysis: a group of outputs becomes one iteration space and a list of reduces.

The outputs are evaluated symbolically at index variables (``evaluate.py``). Every reduce met
on the way becomes a ``ReduceInstance`` keyed by the index it is read at; the variables those
keys use are the kernel's *row* (parallel) axes P, mapped to blocks (``fusion.plan_rows``).
Every reduce loops over its own reduced axes, and every output over its axes outside P; loops
over the same extent share one canonical loop variable, so a value read at the same address
in two loops is the same ``Val`` (and stays in registers). A reduce whose key would depend on
another loop's variable is a nested reduction, which one kernel cannot hold: that raises
``FusionError`` (the scheduler asks ``fusion.py`` first, and builds only what fits).
"""
from dataclasses import dataclass, field

import numpy as np

from ..graph import toposort
from ..ops import Op
from . import symbolic as sym
from .evaluate import Evaluator, Val, nested_error, walk
from .fusion import GENERIC_ROWS, plan_rows, probe_output, evaluate_at_rows


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
    # adjacent rows (columns of a column layout) each row of this kernel holds, and the
    # loads that are an element of another's vector load: load Val id -> (Val, element)
    # (``pack.pack_columns``)
    columns: int = 1
    lanes: dict = field(default_factory=dict)

    @property
    def nrows(self):
        """The rows of this kernel's launch."""
        return int(np.prod(self.pshape, dtype=np.int64))

    @property
    def layout_rows(self):
        """The row count the layout is chosen for: a generic kernel's code, hence its
        layout, cannot depend on the rows of one launch."""
        return GENERIC_ROWS if self.generic else self.nrows


def build_kernel(outputs, layouts, out_layouts, name="kernel", arg_names=None, generic=False,
                 facts=None):
    """Analyze ``outputs`` (graph nodes) as one kernel.

    ``layouts``: input position -> (strides, offset) in elements of its buffer;
    ``out_layouts``: per output, (strides, offset) of the output buffer; ``generic``: the
    kernel's code must not depend on its row count (the row index's range is ROW_BOUND);
    ``facts``: the outputs' ``fusion.probe_output``, where the caller has them. Raises
    ``FusionError`` where the outputs need more than one kernel (``fusion`` says which).
    """
    facts = facts or [probe_output(o, layouts) for o in outputs]
    nested = next((f.nested[0] for f in facts if f.nested), None)
    if nested is not None:
        raise nested_error(nested)
    plan = plan_rows(facts)
    if plan.problem:
        raise plan.error()
    ev = Evaluator(layouts)
    row, values = evaluate_at_rows(ev, facts, plan, generic)
    stores = []
    for pos, (f, out, (value, idx, group)) in enumerate(zip(facts, outputs, values)):
        strides, offset = out_layouts[pos]
        addr = sym.lift(offset)
        for i, s in zip(f.outer_index(idx, generic), strides):
            addr = addr + i * s
        stores.append(Store(pos, _stored_value(value, out.dtype), addr, out.dtype, group))
    reduces = _order_reduces(list(ev.instances.values()))
    names = arg_names or {}
    inputs = {key: (n.dtype, names.get(key, key if isinstance(key, str) else f"in{key}"))
              for key, n in _input_nodes(outputs).items()}
    return Kernel(name, row, plan.pshape, list(ev.groups.values()), reduces, stores, inputs,
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

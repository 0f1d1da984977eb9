"""A generic kernel's fingerprint: everything its lowered code depends on, as text.

A kernel generic in its rows (``Kernel.generic``) has the same code for every row count, so
its layout, linear program and source need to be made only once: a later signature whose
kernel has the same fingerprint reuses them, and only the grid is sized for its rows. The
fingerprint names every value, loop, reduce and store with their index expressions (each
variable with its range, since simplification uses it), and leaves out what only the
launch depends on: the count of the outermost row axis and the outputs' extents. Anything
it cannot spell exactly gives None, and the kernel is lowered as usual.
"""
import enum
import numbers

import numpy as np

from . import symbolic as sym
from .evaluate import ReduceInstance, walk


class _Unspellable(Exception):
    """An argument the fingerprint has no exact text for."""


def generic_fingerprint(kernel):
    """The fingerprint of ``kernel`` (a generic one), or None."""
    if not kernel.generic:
        return None
    try:
        return "\n".join(_lines(kernel))
    except _Unspellable:
        return None


def _lines(k):
    yield f"kernel {k.name} row {_var(k.row)} inner rows {k.pshape[1:]} of {len(k.pshape)}"
    yield f"inputs {sorted(k.inputs.items(), key=lambda kv: str(kv[0]))!r}"
    yield f"outputs {[str(np.dtype(dt)) for dt, _ in k.outputs]} names {k.arg_names!r}"
    for g in k.groups:
        yield f"group {g.id} dims {g.dims} var {_var(g.var)}"
    vals = {}
    for r in k.reduces:
        _add_vals(r.body, vals)
    for s in k.stores:
        _add_vals(s.value, vals)
    yield from vals.values()
    for r in k.reduces:
        yield (f"reduce {r.id} {r.kind.value} {r.dtype} {r.value_dtype} group {r.group.id} "
               f"body {r.body.id} key {_text(r.key)} deps {r.deps} depth {r.depth}")
    for s in k.stores:
        group = s.group.id if s.group is not None else "row"
        yield (f"store {s.output} {s.value.id} at {_text(s.addr)} {np.dtype(s.dtype)} "
               f"group {group}")


def _add_vals(root, vals):
    for v in walk(root):
        if v.id not in vals:
            srcs = " ".join(str(s.id) for s in v.srcs)
            vals[v.id] = f"val {v.id} {v.op.name} {v.dtype} ({srcs}) {_text(v.arg)}"


def _var(v):
    return f"{v.name}<{v.size}"


def _text(arg):
    """Exact text of a Val's argument (types spelled out: 1, 1.0 and True differ)."""
    if arg is None or isinstance(arg, (bool, str)):
        return repr(arg)
    if isinstance(arg, sym.Expr):
        return "{" + arg.render(_var) + "}"
    if isinstance(arg, sym.Var):
        return _var(arg)
    if isinstance(arg, ReduceInstance):
        return f"reduce#{arg.id}"
    if isinstance(arg, enum.Enum):
        return f"{type(arg).__name__}.{arg.name}"
    if isinstance(arg, (tuple, list)):
        return "(" + ", ".join(_text(a) for a in arg) + ")"
    if isinstance(arg, np.dtype):
        return f"dtype {arg}"
    if isinstance(arg, (np.generic, numbers.Number)):
        return f"{type(arg).__name__} {arg!r}"
    raise _Unspellable(type(arg).__name__)

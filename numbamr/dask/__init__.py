"""numbamr functions on dask arrays: ``nm.jit(f)(dask_array)`` is a lazy dask array.

The function is traced once at the arrays' full shapes; the trace says how to cut it:

- where every reduction's axes lie whole inside each chunk, each block of the output is the
  jitted function itself on the blocks it reads (one fused kernel per chunk shape);
- a reduction over axes cut into several chunks becomes a pass of statistics: a numbamr
  kernel per block computes the partials of every such reduction of the pass at once
  (variance as count, mean and M2, merged with Chan's formula; a softmax's denominator as
  max and sum of exponentials; argmax as value and index), numbamr merges them in block
  order, and the blocks that use them (``x - x.mean()``) read them as broadcast inputs of
  a kernel per block; dependent statistics take a pass each.

Plain arrays among the arguments are cut to the blocks that read them. Anything that cannot
be computed chunk by chunk (a reshape or a slice across chunk boundaries) raises a
``ShapeError`` that names it. NumPy chunks give NumPy blocks, CuPy chunks CuPy blocks.
"""
import sys

import numpy as np

from ..errors import ArgumentError
from ..graph import format_graph, toposort, verify_graph
from ..runtime.launch import structured
from ..trace import trace
from .build import GraphBuilder
from .chunks import propagate
from .program import Mat


def is_dask_array(value):
    mod = sys.modules.get("dask.array")
    return mod is not None and isinstance(value, mod.Array)


def any_dask(args, kwargs):
    """Whether a call's arguments hold a dask array (dask imported already, else no)."""
    if "dask.array" not in sys.modules:
        return False
    return any(is_dask_array(a) for a in args) or any(is_dask_array(v) for v in
                                                      kwargs.values())


class _Arg:
    """One argument after binding: a dask array, a plain array or a static value."""

    def __init__(self, kind, value, dtype=None):
        self.kind, self.value, self.dtype = kind, value, dtype
        self.node_id = None


def call(jitfn, args, kwargs):
    """``jitfn(*args, **kwargs)`` with dask arrays among the arguments, as dask arrays."""
    import dask.array as da
    from dask.base import tokenize
    for name in ("out", "stream"):
        if name in kwargs and name not in jitfn._sig.parameters:
            raise ArgumentError(f"{jitfn.__name__}(): {name}= is not supported with dask "
                                "arrays (the result is a new lazy dask array)")
    bound, leaves = jitfn._bind(args, kwargs)
    dasks = _unify([leaf.value for leaf in leaves if isinstance(leaf.value, da.Array)], da)
    it = iter(dasks)
    arg_list = []
    for leaf in leaves:
        if isinstance(leaf.value, da.Array):
            a = next(it)
            if any(n != n for n in a.shape):
                raise ArgumentError(f"{jitfn.__name__}(): argument {leaf.name!r} has chunks "
                                    "of unknown size; call its compute_chunk_sizes() first")
            arg_list.append(_Arg("dask", a, np.dtype(a.dtype)))
        elif leaf.array is not None:
            arg_list.append(_Arg("plain", leaf.value, leaf.array.dtype))
        else:
            arg_list.append(_Arg("static", leaf.value))
    specs = [("static", a.value) if a.kind == "static" else
             ("array", (tuple(a.value.shape), a.dtype)) for a in arg_list]
    graph, outputs, structure = trace(lambda vals: jitfn._rebuild(bound, vals), specs)
    verify_graph(outputs)
    entries = {p: _entries(a.value.chunks) for p, a in enumerate(arg_list) if a.kind == "dask"}
    chunks, stats = propagate(outputs, entries)
    name = f"numbamr-{jitfn.__name__}-" + tokenize(
        format_graph(outputs), [a.value.name if a.kind == "dask" else a.value
                                for a in arg_list if a.kind != "static"],
        repr(jitfn.options), jitfn.autotune)
    mats, plain_layer = _leaf_mats(name, graph, arg_list)
    nodes = {id(n): n for n in toposort(outputs)}
    gb = GraphBuilder(name, jitfn, nodes, outputs, chunks, stats, mats)
    made = gb.try_user_blocks(bound, arg_list)
    if made is False:
        gb.build_stats()
        made = gb.build_outputs()
    gb.dsk.update(plain_layer)
    xp = _module([a.value for a in arg_list if a.kind == "dask"])
    arrays = _arrays(gb, name, [a.value for a in arg_list if a.kind == "dask"], outputs, xp,
                     da)
    return structured(structure, arrays)


def _unify(arrays, da):
    """The dask arguments rechunked alike along the axes they broadcast together (as a dask
    elementwise operation would)."""
    if len(arrays) < 2:
        return arrays
    nd = max(a.ndim for a in arrays)
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    pairs = []
    for a in arrays:
        pairs += [a, letters[nd - a.ndim:]]
    try:
        return list(da.core.unify_chunks(*pairs)[1])
    except ValueError:          # they do not broadcast: the trace says so in its words
        return arrays


def _entries(chunks):
    """An argument's chunks as propagate takes them (axes of size 1 free)."""
    return tuple(None if tuple(c) == (1,) else tuple(int(x) for x in c) for c in chunks)


def _leaf_mats(name, graph, arg_list):
    """Mats of the argument arrays by their INPUT node: a dask array's blocks, a plain
    array as one block of its own (a task of the graph)."""
    mats, layer = {}, {}
    for pos, a in enumerate(arg_list):
        node = graph.inputs.get(pos)
        if node is None:
            continue
        a.node_id = id(node)
        if a.kind == "dask":
            mats[id(node)] = Mat(a.value.name, a.value.chunks)
        else:
            shape = tuple(a.value.shape)
            m = Mat(f"{name}-arg{pos}", tuple((n,) for n in shape))
            layer[m.key((0,) * len(shape))] = a.value
            mats[id(node)] = m
    return mats, layer


def _module(dask_arrays):
    for a in dask_arrays:
        if type(a._meta).__module__.split(".")[0] == "cupy":
            import cupy
            return cupy
    return np


def _arrays(gb, name, dask_args, outputs, xp, da):
    from dask.highlevelgraph import HighLevelGraph
    layers, deps = {}, {}
    for a in dask_args:
        layers.update(a.dask.layers)
        deps.update(a.dask.dependencies)
    layers[name] = gb.dsk
    deps[name] = {n for a in dask_args for n in a.__dask_layers__()}
    for oname, layer, _ in gb.out_layers:
        layers[oname] = layer
        deps[oname] = {name}
    hlg = HighLevelGraph(layers, deps)
    out = []
    for (oname, _, grid), o in zip(gb.out_layers, outputs):
        meta = xp.empty((0,) * o.ndim, dtype=o.dtype)
        out.append(da.Array(hlg, oname, grid, meta=meta))
    return out


__all__ = ["call", "any_dask", "is_dask_array"]

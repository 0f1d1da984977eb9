"""Stage programs: the traced graph's nodes at the regions one block reads, as instructions a
generated numbamr function replays at the block's shapes.

An instruction is one of
    ("in", k)                          the stage function's k-th array argument
    ("ext", k)                         the k-th value given by the caller (combine stages)
    ("node", op, dtype, arg, srcs)     a node of the traced graph (shape from the plan)
    ("reduce", kind, axes, src)        a reduction inside the block (size-1 axes dropped)
A program holds no shapes: the shapes of its instructions are the static ``plan`` argument
of its function, so that one function (and numbamr's cache of it) serves every block of the
same structure, and numbamr compiles one kernel per distinct chunk shape.
"""
import bisect
import collections
import itertools
import sys
import threading

import numpy as np

from ..graph import toposort
from ..jit import JitFunction
from ..ops import Op, ReduceKind
from ..trace import Tracer
from .chunks import extent, source_regions

INT64 = np.dtype(np.int64)
ARG_KINDS = (ReduceKind.ARGMAX, ReduceKind.ARGMIN)


class Mat:
    """A materialized value: a dask array's blocks by name and chunks (an argument, a
    reduction's result, or a plain array held as one block)."""

    def __init__(self, name, chunks):
        self.name, self.chunks = name, tuple(tuple(c) for c in chunks)
        self.starts = [list(itertools.accumulate(c, initial=0)) for c in self.chunks]

    def key(self, block):
        return (self.name,) + tuple(block)

    def locate(self, region):
        """(block index, slices within the block or None) of a region inside one block."""
        block, slices, part = [], [], False
        for (s, e), starts in zip(region, self.starts):
            i = bisect.bisect_right(starts, s) - 1
            lo, hi = starts[i], starts[i + 1]
            assert e <= hi, f"region {region} spans blocks of {self.chunks}"
            block.append(i)
            slices.append(slice(s - lo, e - lo))
            part = part or (s, e) != (lo, hi)
        return tuple(block), (tuple(slices) if part else None)


def blocks(chunks):
    """Every (block index, region) of a grid of chunks, in row-major order."""
    starts = [list(itertools.accumulate(c, initial=0)) for c in chunks]
    for idx in itertools.product(*[range(len(c)) for c in chunks]):
        yield idx, tuple((st[i], st[i + 1]) for st, i in zip(starts, idx))


class Builder:
    """Builds one stage's instructions from (node, region) pairs.

    ``mats``: node id -> Mat for the nodes read from memory (arguments, earlier reductions).
    ``local``: reductions this stage computes over its own block (``block``: its region in
    their source); ``ext``: node id -> position of a value the caller passes in.
    """

    def __init__(self, mats, block=None, local=None, ext=None):
        self.mats, self.block = mats, block
        self.local, self.ext = local or {}, ext or {}
        self.instrs, self.shapes, self._memo = [], [], {}
        self.leaves = []                     # ("mat", key, slices) or ("offset", start)
        self.leaf_inputs = {}                # leaf position -> argument position (INPUTs)
        self.input_regions = collections.defaultdict(set)
        self.has_offsets = False

    def emit(self, instr, shape):
        self.instrs.append(instr)
        self.shapes.append(tuple(shape))
        return len(self.instrs) - 1

    def program(self):
        return tuple(self.instrs)

    def plan(self):
        return tuple(self.shapes)

    def value(self, node, region):
        key = (id(node), region)
        if key not in self._memo:
            self._memo[key] = self._value(node, region)
        return self._memo[key]

    def _value(self, node, region):
        shape = extent(region)
        if id(node) in self.ext:
            return self.emit(("ext", self.ext[id(node)]), shape)
        if id(node) in self.local:
            return self.local_reduce(node, self.local[id(node)], region)
        mat = self.mats.get(id(node))
        if mat is not None:
            if node.op is Op.INPUT:
                self.input_regions[node.arg].add(region)
                self.leaf_inputs[len(self.leaves)] = node.arg
            return self._leaf(mat, region)
        if node.op is Op.ARANGE:
            return self._arange(region)
        if node.op is Op.CONST:
            return self.emit(("node", Op.CONST, node.dtype, node.arg, ()), shape)
        regions = source_regions(node, region)
        srcs = tuple(self.value(s, r) for s, r in zip(node.srcs, regions))
        if node.op is Op.REDUCE:
            return self.emit(("reduce", node.arg[0], node.arg[1], srcs[0]), shape)
        arg = None if node.op in (Op.RESHAPE, Op.EXPAND) else node.arg
        return self.emit(("node", node.op, node.dtype, arg, srcs), shape)

    def local_reduce(self, node, fam, region):
        """A reduction of this stage over the part of its source in this stage's block."""
        kind, axes = node.arg
        if fam.flat:
            return self.emit(("reduce", kind, (0,), self.flat_values(fam)), (1,))
        src_region = tuple(self.block[i] if i in axes else r for i, r in enumerate(region))
        s = self.value(node.srcs[0], src_region)
        return self.emit(("reduce", kind, axes, s), extent(region))

    def flat_values(self, fam):
        """The block of a flat reduction's array, flattened, its unary ops applied."""
        key = ("flat", id(fam))
        if key not in self._memo:
            n = int(np.prod(extent(self.block), dtype=np.int64))
            v = self.value(fam.src, self.block)
            v = self.emit(("node", Op.RESHAPE, fam.src.dtype, None, (v,)), (n,))
            for u in fam.chain:
                v = self.emit(("node", u.op, u.dtype, u.arg, (v,)), (n,))
            self._memo[key] = v
        return self._memo[key]

    def reduce(self, kind, axes, src, shape):
        return self.emit(("reduce", kind, tuple(axes), src), shape)

    def _leaf(self, mat, region):
        block, slices = mat.locate(region)
        self.leaves.append(("mat", mat.key(block), slices))
        return self.emit(("in", len(self.leaves) - 1), extent(region))

    def _arange(self, region):
        """0..n-1 of the block, plus the block's start (an argument: no kernel per block)."""
        (s, e), = region
        a = self.emit(("node", Op.ARANGE, INT64, None, ()), (e - s,))
        if s == 0:
            return a
        self.has_offsets = True
        self.leaves.append(("offset", s))
        o = self.emit(("in", len(self.leaves) - 1), ())
        o = self.emit(("node", Op.RESHAPE, INT64, None, (o,)), (1,))
        o = self.emit(("node", Op.EXPAND, INT64, None, (o,)), (e - s,))
        return self.emit(("node", Op.ADD, INT64, None, (a, o)), (e - s,))


# ---- replay: instructions -> nodes of the trace numbamr runs on the stage function --------
def local_reduce(g, src, kind, axes):
    """A REDUCE as numbamr's trace makes it: axes of size 1 reduce nothing (a float sum
    adds +0 as NumPy's does; an argmax of one element is 0)."""
    shape = tuple(1 if i in axes else n for i, n in enumerate(src.shape))
    axes = tuple(a for a in axes if src.shape[a] != 1)
    if not axes:
        if kind in ARG_KINDS:
            return g.node(Op.CONST, INT64, shape, (), 0)
        if kind is ReduceKind.SUM and src.dtype.kind == "f":
            zero = g.node(Op.CONST, src.dtype, shape, (), 0.0)
            return g.node(Op.ADD, src.dtype, shape, (src, zero))
        return src
    dtype = INT64 if kind in ARG_KINDS else src.dtype
    return g.node(Op.REDUCE, dtype, shape, (src,), (kind, axes))


def _make(g, op, dtype, shape, srcs, arg):
    if op in (Op.RESHAPE, Op.EXPAND):
        if srcs[0].shape == shape:
            return srcs[0]
        arg = shape
    return g.node(op, dtype, shape, srcs, arg)


def replay(instrs, shapes, arrays, exts=()):
    """The nodes of ``instrs`` at ``shapes`` in the graph of the traced ``arrays``/``exts``."""
    g = next(v.graph for v in itertools.chain(arrays, exts))
    vals = []
    for instr, shape in zip(instrs, shapes):
        tag = instr[0]
        if tag == "in":
            v = arrays[instr[1]].node
        elif tag == "ext":
            v = exts[instr[1]].node
        elif tag == "reduce":
            v = local_reduce(g, vals[instr[3]], instr[1], instr[2])
        else:
            _, op, dtype, arg, srcs = instr
            v = _make(g, op, dtype, tuple(shape), tuple(vals[i] for i in srcs), arg)
        assert v.shape == tuple(shape), f"{instr}: shape {v.shape}, planned {shape}"
        vals.append(v)
    return vals


def wrap(g, node):
    return Tracer(g, node)


# ---- stages: generated numbamr functions, built once per process ------------------------
_REGISTRY = collections.OrderedDict()
_LOCK = threading.Lock()
_MAX_STAGES = 512


class Stage:
    """A generated numbamr function named by its program: pickles as its program, and is
    built (jitted) once per process on first use."""

    def __init__(self, kind, name, program, options, autotune=False):
        self.kind, self.name, self.program = kind, name, program
        self.options, self.autotune = options, autotune
        self.key = (kind, name, repr(program), options, autotune)

    def __call__(self, plan, *arrays):
        return self.jitted()(plan, *arrays)

    def jitted(self):
        with _LOCK:
            fn = _REGISTRY.get(self.key)
            if fn is None:
                from . import reductions
                make = make_block_fn if self.kind == "block" else reductions.make_combine_fn
                fn = JitFunction(make(self.program, f"{self.name}_{self.kind}"),
                                 self.options, self.autotune)
                _REGISTRY[self.key] = fn
                while len(_REGISTRY) > _MAX_STAGES:
                    _REGISTRY.popitem(last=False)
            else:
                _REGISTRY.move_to_end(self.key)
            return fn


def make_block_fn(program, name):
    """A block stage: replay the instructions, return its roots (see reductions.root)."""
    from .reductions import root_outputs
    instrs, roots = program

    def block(plan, *arrays):
        vals = replay(instrs, plan, arrays)
        g = arrays[0].graph
        out = []
        for r in roots:
            out.extend(root_outputs(g, r, vals, plan))
        return tuple(out)

    block.__name__ = block.__qualname__ = name
    return block


def array_module(a):
    if isinstance(a, np.ndarray):
        return np
    mod = sys.modules.get(type(a).__module__.split(".")[0])
    return mod if mod is not None and hasattr(mod, "asarray") else np


class BlockCall:
    """The task of one block: slice its plain leaves, run the stage, finish its outputs.

    ``post`` lists the task's results from the kernel's outputs: ("k", i) as it is;
    ("offset", i, n) plus n (an index along a chunked axis); ("flat", i, shape, starts,
    full) a flat index within a block of ``shape`` at ``starts`` as a flat index of the
    whole array of shape ``full``; ("count", n, i) n as a float64 array shaped like output i.
    """

    def __init__(self, stage, plan, leaves, post=None):
        self.stage, self.plan, self.leaves, self.post = stage, plan, leaves, post

    def __call__(self, *blocks):
        it = iter(blocks)
        xp = array_module(blocks[0]) if blocks else np
        arrays = []
        for leaf in self.leaves:
            if leaf[0] == "offset":
                arrays.append(xp.asarray(leaf[1], dtype=np.int64))
                continue
            a = next(it)
            arrays.append(a if leaf[2] is None else xp.ascontiguousarray(a[leaf[2]]))
        outs = self.stage(self.plan, *arrays)
        if self.post is None:
            return outs
        return tuple(_finish(xp, outs, p) for p in self.post)


def _finish(xp, outs, post):
    tag = post[0]
    if tag == "k":
        return outs[post[1]]
    if tag == "offset":
        return outs[post[1]] + post[2]
    if tag == "count":
        return xp.full(outs[post[2]].shape, float(post[1]), dtype=np.float64)
    _, i, shape, starts, full = post
    local, index = outs[i], 0
    for axis in reversed(range(len(shape))):    # the digits of the local flat index
        digit = local % shape[axis]
        local = local // shape[axis]
        index = index + (digit + starts[axis]) * int(np.prod(full[axis + 1:], dtype=np.int64))
    return index


class CombineCall:
    """The task that merges the partials of several blocks (``pick``: which fields of a
    partial stage's results are this merge's; None: all)."""

    def __init__(self, stage, plan, pick=None):
        self.stage, self.plan, self.pick = stage, plan, pick

    def __call__(self, *parts):
        if self.pick is not None:
            parts = [[p[i] for i in self.pick] for p in parts]
        xp = array_module(parts[0][0])
        stacked = [xp.stack([p[j] for p in parts]) for j in range(len(parts[0]))]
        return self.stage(self.plan, *stacked)


def getitem(values, i):
    return values[i]


def structure_key(outputs, input_map=None):
    """A canonical form of the graph of ``outputs`` (for comparing two traces)."""
    from ..graph import hashable_arg
    keys = {}
    for n in toposort(outputs):
        arg = n.arg
        if n.op is Op.INPUT and input_map is not None:
            arg = input_map[arg]
        keys[id(n)] = (n.op, n.dtype.str, n.shape, hashable_arg(arg),
                       tuple(keys[id(s)] for s in n.srcs))
    return tuple(keys[id(o)] for o in outputs)
